/*
 * steps.c - steps from the period of the collective sequence (see steps.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/median.h"
#include "collector/steps.h"
#include "common/record.h"

#define STEPS_DEFAULT_WINDOW 65536u
/* The first search waits for this many events: a window shorter than one
 * step can look periodic (the forward's repeating blocks). */
#define STEPS_FIRST_TRY 4096u
#define STEPS_MIN_MATCH 0.90
#define STEPS_TIE_MATCH 0.01
#define STEPS_RESYNC_KEYS 8u

uint64_t steps_signature(uint8_t op, uint64_t bytes, uint32_t calls, int32_t nranks)
{
	uint64_t h = 0xcbf29ce484222325ull;
	uint64_t parts[4] = {op, bytes, calls, (uint64_t)(uint32_t)nranks};
	for (int i = 0; i < 4; i++) {
		h ^= parts[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

/* Period search result. */
struct steps_period {
	size_t period;	 /* events per step */
	size_t first;	 /* index of the first step that matches the steady state */
	size_t rotation; /* offset of the step start within the tail period found */
	double match;	 /* fraction of events equal to the one a period later, in the tail */
};

/*
 * steps_rotation - where a step starts within one period ops[0..p) read
 * cyclically: the first AllGather after the longest stretch without a
 * ReduceScatter begins (i.e. after the step's last ReduceScatter); without
 * ReduceScatters, the first AllGather after the longest stretch without
 * one; else 0.
 */
static size_t steps_rotation(const uint8_t *ops, size_t p)
{
	if (p == 0)
		return 0;
	int have_rs = 0, have_ag = 0;
	for (size_t i = 0; i < p; i++) {
		have_rs |= ops[i] == FSS_OP_REDUCESCATTER;
		have_ag |= ops[i] == FSS_OP_ALLGATHER;
	}
	if (!have_ag)
		return 0;
	uint8_t sep = have_rs ? FSS_OP_REDUCESCATTER : FSS_OP_ALLGATHER;
	/* longest cyclic stretch without `sep`, starting right after one */
	size_t best_start = 0, best_len = 0;
	for (size_t i = 0; i < p; i++) {
		if (ops[i] != sep)
			continue;
		size_t len = 0;
		while (len < p - 1 && ops[(i + 1 + len) % p] != sep)
			len++;
		if (len > best_len) {
			best_len = len;
			best_start = (i + 1) % p;
		}
	}
	if (!have_rs) /* the first AllGather after the stretch without one */
		return (best_start + best_len) % p;
	for (size_t k = 0; k < best_len; k++)
		if (ops[(best_start + k) % p] == FSS_OP_ALLGATHER)
			return (best_start + k) % p;
	return best_start;
}

static uint64_t window_hash(const uint64_t *sig, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;
	for (size_t i = 0; i < n; i++) {
		h ^= sig[i];
		h *= 0x100000001b3ull;
		h ^= h >> 31;
	}
	return h;
}

struct window {
	uint64_t hash;
	size_t len, at;
};

static int window_cmp(const void *a, const void *b)
{
	const struct window *x = a, *y = b;
	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/*
 * When steps are interrupted now and then (an eval pass every few steps, a
 * checkpoint save), no shift of the whole sequence matches itself: find the
 * step instead between consecutive occurrences of one signature (an
 * anchor): the stretch between two anchors that recurs most, explaining the
 * most events, is the step; the stretches that differ hold the
 * interruptions. A step reduces gradients: with ReduceScatters in the
 * sequence, only stretches that hold one count. Returns 1 with the period,
 * the start of a rotated template that lies inside two adjacent matching
 * stretches, and the rotation.
 */
static int find_by_anchor(const uint64_t *sig, const uint8_t *ops, size_t n, size_t *period, size_t *t0,
			  size_t *rotation, double *match)
{
	uint64_t *uniq = malloc((n ? n : 1) * sizeof *uniq);
	size_t *pos = malloc((n ? n : 1) * sizeof *pos);
	struct window *w = malloc((n ? n : 1) * sizeof *w);
	if (!uniq || !pos || !w) {
		free(uniq);
		free(pos);
		free(w);
		return 0;
	}
	int have_rs = 0;
	for (size_t i = n / 2; i < n; i++)
		have_rs |= ops[i] == FSS_OP_REDUCESCATTER;
	memcpy(uniq, sig, n * sizeof *uniq);
	qsort(uniq, n, sizeof *uniq, median_u64_cmp);
	size_t nu = 0;
	for (size_t i = 0; i < n; i++)
		if (nu == 0 || uniq[i] != uniq[nu - 1])
			uniq[nu++] = uniq[i];
	size_t best_cover = 0, best_len = 0, best_at = 0, best_count = 0, best_windows = 0;
	for (size_t u = 0; u < nu; u++) {
		size_t np = 0;
		for (size_t i = 0; i < n; i++)
			if (sig[i] == uniq[u])
				pos[np++] = i;
		if (np < 4)
			continue;
		size_t nw = 0;
		for (size_t k = 0; k + 1 < np; k++)
			w[nw++] = (struct window){window_hash(sig + pos[k], pos[k + 1] - pos[k]), pos[k + 1] - pos[k],
						  pos[k]};
		qsort(w, nw, sizeof *w, window_cmp);
		for (size_t a = 0; a < nw;) {
			size_t b = a;
			while (b < nw && w[b].hash == w[a].hash && w[b].len == w[a].len)
				b++;
			size_t count = b - a, len = w[a].len;
			int rs = !have_rs;
			for (size_t i = 0; i < len && !rs; i++)
				rs = ops[w[a].at + i] == FSS_OP_REDUCESCATTER;
			/* two adjacent stretches alike: a rotated template fits in them */
			size_t adjacent = nw;
			for (size_t i = a; i + 1 < b && adjacent == nw; i++)
				if (w[i + 1].at == w[i].at + len)
					adjacent = i;
			if (rs && count >= 3 && 2 * count >= nw && adjacent < nw && count * len > best_cover) {
				best_cover = count * len;
				best_len = len;
				best_at = w[adjacent].at;
				best_count = count;
				best_windows = nw;
			}
			a = b;
		}
	}
	free(uniq);
	free(pos);
	free(w);
	if (!best_cover)
		return 0;
	*period = best_len;
	*rotation = steps_rotation(ops + best_at, best_len);
	*t0 = best_at + *rotation;
	*match = (double)best_count / (double)best_windows;
	return 1;
}

/*
 * steps_find_period - the period of sig[0..n) (ops[i] the fss_coll_op of
 * event i). Looks at periods up to n / 6 (n / 2 when `final`: the whole
 * trace is in the window) that make at least 90% of the later half of the
 * sequence repeat, choosing the smallest within 1% of the best that holds
 * every kind of collective seen at least once per two periods of the later
 * half (the forward's repeating blocks alone are no step). When none does,
 * or when the period holds the step found between anchors twice or more
 * (an interruption that recurs exactly), the anchors' step: the stretch
 * between consecutive occurrences of one signature that recurs at least 3
 * times and in at least half of the stretches, holds a ReduceScatter when
 * the sequence has any, and covers the most events. Returns 1 with *out
 * filled, 0 when no period is found (yet).
 */
static int steps_find_period(const uint64_t *sig, const uint8_t *ops, size_t n, int final, struct steps_period *out)
{
	memset(out, 0, sizeof *out);
	if (n < 2)
		return 0;
	size_t pmax = final ? n / 2 : n / 6;
	if (pmax == 0)
		return 0;
	double *ratio = malloc(pmax * sizeof *ratio);
	if (!ratio)
		return 0;
	double best = 0.0;
	for (size_t p = 1; p <= pmax; p++) {
		/* the later half, but at least one whole period of comparisons */
		size_t lo = n / 2;
		if (n - p <= lo + p / 2)
			lo = n >= 2 * p ? n - 2 * p : 0;
		size_t cnt = n - p - lo, eq = 0;
		for (size_t i = lo; i < n - p; i++)
			eq += sig[i] == sig[i + p];
		ratio[p - 1] = cnt ? (double)eq / (double)cnt : 0.0;
		if (ratio[p - 1] > best)
			best = ratio[p - 1];
	}
	/* A step issues every kind of collective the job issues regularly: a
	 * stretch of the forward's repeating blocks (all AllGathers) is not a
	 * step. Kinds seen at least once per two periods of the later half must
	 * be in the step; what happens only at the start (init broadcasts) is
	 * not required. */
	size_t count[256] = {0};
	for (size_t i = n / 2; i < n; i++)
		count[ops[i]]++;
	size_t period = 0;
	if (best >= STEPS_MIN_MATCH) {
		for (size_t p = 1; p <= pmax && !period; p++) {
			if (ratio[p - 1] < best - STEPS_TIE_MATCH)
				continue;
			uint8_t in_step[256] = {0};
			for (size_t i = n - p; i < n; i++)
				in_step[ops[i]] = 1;
			int complete = 1;
			for (int op = 0; op < 256; op++)
				if (!in_step[op] && count[op] * 2 * p >= n - n / 2)
					complete = 0;
			if (complete)
				period = p;
		}
	}
	free(ratio);
	size_t p = period, rot = 0, t0 = 0, ap = 0, at0 = 0, arot = 0;
	double amatch = 0;
	int anchored = find_by_anchor(sig, ops, n, &ap, &at0, &arot, &amatch);
	if (p) {
		rot = steps_rotation(ops + (n - p), p);
		size_t phase = (n - p + rot) % p;
		t0 = phase + p * ((n - p - phase) / p); /* last whole rotated period */
	}
	/* An interruption that recurs exactly (an eval pass every third step)
	 * makes the whole sequence periodic over several steps: when the period
	 * holds the step found between anchors twice or more, that is the step. */
	int several = 0;
	for (size_t j = 0; p && anchored && ap < p && j + ap <= p && t0 + j + ap <= n;) {
		if (memcmp(sig + t0 + j, sig + at0, ap * sizeof *sig) == 0) {
			several++;
			j += ap;
		} else {
			j++;
		}
	}
	if (p && several < 2) {
		/* the period stands */
	} else if (anchored) {
		p = ap;
		t0 = at0;
		rot = arot;
		best = amatch;
	} else {
		return 0;
	}
	/* the first place a whole steady-state step starts (an insertion
	 * earlier may have shifted the phase: look at every position) */
	size_t first = t0;
	for (size_t s = 0; s + p <= n && s < t0; s++) {
		if (memcmp(sig + s, sig + t0, p * sizeof *sig) == 0) {
			first = s;
			break;
		}
	}
	out->period = p;
	out->first = first;
	out->rotation = rot;
	out->match = best;
	return 1;
}

enum cutter_state { CUTTER_DETECT, CUTTER_CUT, CUTTER_GIVEUP };

struct steps_cutter {
	enum cutter_state state;
	size_t max_window;
	size_t next_try;
	uint64_t *sig; /* pending events; sig[0] is event number `base` */
	uint8_t *ops;
	size_t n, cap;
	uint64_t base;
	uint64_t cur;	/* next event to place */
	uint64_t *tmpl; /* [period] the steady-state step */
	size_t period;
	uint64_t rare_sig;  /* the template's rarest ReduceScatter (else rarest) signature: counting it */
	uint32_t rare_mult; /* in a stretch counts the training steps the stretch holds */
	int warmup_due;	    /* a warm-up cut [warm_first, cur) is due */
	uint64_t warm_first;
	int open_end; /* the events stop where the trace was cut: `final` is no whole run */
};

steps_cutter_t *steps_cutter_new(size_t max_window)
{
	steps_cutter_t *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->max_window = max_window ? max_window : STEPS_DEFAULT_WINDOW;
	c->next_try = STEPS_FIRST_TRY;
	return c;
}

void steps_cutter_free(steps_cutter_t *c)
{
	if (!c)
		return;
	free(c->sig);
	free(c->ops);
	free(c->tmpl);
	free(c);
}

size_t steps_cutter_pending(const steps_cutter_t *c)
{
	return c->n;
}

void steps_cutter_set_open_end(steps_cutter_t *c)
{
	c->open_end = 1;
}

size_t steps_cutter_period(const steps_cutter_t *c)
{
	return c->period;
}

int steps_cutter_push(steps_cutter_t *c, uint64_t sig, uint8_t op)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 256;
		uint64_t *s = realloc(c->sig, cap * sizeof *s);
		if (!s)
			return -ENOMEM;
		c->sig = s;
		uint8_t *o = realloc(c->ops, cap);
		if (!o)
			return -ENOMEM;
		c->ops = o;
		c->cap = cap;
	}
	c->sig[c->n] = sig;
	c->ops[c->n] = op;
	c->n++;
	return 0;
}

/* Forget the events before c->cur. */
static void cutter_drop(steps_cutter_t *c)
{
	size_t drop = (size_t)(c->cur - c->base);
	if (drop == 0 || drop > c->n)
		return;
	memmove(c->sig, c->sig + drop, (c->n - drop) * sizeof *c->sig);
	memmove(c->ops, c->ops + drop, c->n - drop);
	c->n -= drop;
	c->base = c->cur;
}

/* The signature that marks one step: the template's rarest ReduceScatter
 * (a gradient reduction happens in training steps only, not in an eval
 * pass, a checkpoint or set-up), else its rarest signature. */
static void cutter_pick_rare(steps_cutter_t *c, const uint8_t *ops)
{
	size_t p = c->period;
	uint32_t best = UINT32_MAX;
	int best_rs = 0;
	for (size_t i = 0; i < p; i++) {
		uint32_t k = 0;
		for (size_t j = 0; j < p; j++)
			k += c->tmpl[j] == c->tmpl[i];
		int rs = ops[i] == FSS_OP_REDUCESCATTER;
		if ((rs && !best_rs) || (rs == best_rs && k <= best)) {
			best = k;
			best_rs = rs;
			c->rare_sig = c->tmpl[i];
		}
	}
	c->rare_mult = best == UINT32_MAX ? 1 : best;
}

/* Training steps in events [at, at + len) of the window: occurrences of the
 * rare signature, per step. */
static uint32_t cutter_steps_in(const steps_cutter_t *c, size_t at, uint64_t len)
{
	uint64_t k = 0;
	for (uint64_t i = 0; i < len && at + i < c->n; i++)
		k += c->sig[at + i] == c->rare_sig;
	return (uint32_t)((k + c->rare_mult / 2) / c->rare_mult);
}

/* Does a step of ops[0..p) reduce gradients (a ReduceScatter or an
 * AllReduce)? Every training step does; the first forward's gathers, all
 * that a trace cut early may hold, repeat without one. */
static int period_reduces(const uint8_t *ops, size_t p)
{
	for (size_t i = 0; i < p; i++)
		if (ops[i] == FSS_OP_REDUCESCATTER || ops[i] == FSS_OP_ALLREDUCE)
			return 1;
	return 0;
}

static int cutter_detect(steps_cutter_t *c, int final)
{
	int window_full = c->n >= c->max_window;
	if (!final && !window_full && c->n < c->next_try)
		return 0;
	struct steps_period sp;
	int found = steps_find_period(c->sig, c->ops, c->n, (final && !c->open_end) || window_full, &sp);
	if (found && final && c->open_end && !period_reduces(c->ops + sp.first, sp.period))
		found = 0;
	if (found) {
		c->period = sp.period;
		c->tmpl = malloc(sp.period * sizeof *c->tmpl);
		if (!c->tmpl)
			return -ENOMEM;
		memcpy(c->tmpl, c->sig + sp.first, sp.period * sizeof *c->tmpl);
		cutter_pick_rare(c, c->ops + sp.first);
		c->state = CUTTER_CUT;
		c->warm_first = c->base;
		c->cur = c->base + sp.first;
		c->warmup_due = sp.first > 0;
		return 0;
	}
	if (final || window_full)
		c->state = CUTTER_GIVEUP;
	else
		c->next_try *= 2;
	return 0;
}

static int matches_template(const steps_cutter_t *c, size_t at)
{
	return memcmp(c->sig + at, c->tmpl, c->period * sizeof *c->tmpl) == 0;
}

int steps_cutter_next(steps_cutter_t *c, int final, struct steps_cut *cut)
{
	memset(cut, 0, sizeof *cut);
	if (c->state == CUTTER_DETECT) {
		int rc = cutter_detect(c, final);
		if (rc < 0)
			return rc;
	}
	uint64_t end = c->base + c->n;
	if (c->state == CUTTER_DETECT)
		return 0;
	if (c->state == CUTTER_GIVEUP) {
		if (c->cur >= end)
			return 0;
		*cut = (struct steps_cut){c->cur, end - c->cur, STEPS_IRREGULAR, 0};
		c->cur = end;
		cutter_drop(c);
		return 1;
	}
	if (c->warmup_due) {
		uint64_t len = c->cur - c->warm_first;
		*cut = (struct steps_cut){c->warm_first, len, STEPS_WARMUP,
					  cutter_steps_in(c, (size_t)(c->warm_first - c->base), len)};
		c->warmup_due = 0;
		cutter_drop(c);
		return 1;
	}
	size_t p = c->period;
	size_t at = (size_t)(c->cur - c->base);
	size_t avail = c->n - at;
	if (avail >= p && matches_template(c, at)) {
		*cut = (struct steps_cut){c->cur, p, STEPS_REGULAR, 1};
		c->cur += p;
		cutter_drop(c);
		return 1;
	}
	if (avail < p) {
		if (!final || avail == 0)
			return 0;
		*cut = (struct steps_cut){c->cur, avail, STEPS_TRAILING, 0};
		c->cur = end;
		cutter_drop(c);
		return 1;
	}
	/* A stretch that is not a regular step: find where the next one starts:
	 * the first place a whole step matches, else (near the end of what has
	 * come) where the template's first keys follow its last one. */
	size_t m = p < STEPS_RESYNC_KEYS ? p : STEPS_RESYNC_KEYS;
	if (!final && avail < 3 * p + m)
		return 0;
	size_t found = 0;
	for (size_t q = at + 1; q + p <= c->n && !found; q++)
		if (matches_template(c, q))
			found = q;
	for (size_t q = c->n > p ? c->n - p + 1 : at + 1; !found && q + m <= c->n; q++) {
		if (q <= at || (p > 1 && c->sig[q - 1] != c->tmpl[p - 1]))
			continue;
		if (memcmp(c->sig + q, c->tmpl, m * sizeof *c->tmpl) == 0)
			found = q;
	}
	if (found) {
		size_t len = found - at;
		*cut = (struct steps_cut){c->cur, len, STEPS_IRREGULAR, cutter_steps_in(c, at, len)};
		c->cur = c->base + found;
		cutter_drop(c);
		return 1;
	}
	uint64_t upto = final ? end : end - 2 * p;
	if (upto <= c->cur)
		return 0;
	uint64_t len = upto - c->cur;
	*cut = (struct steps_cut){c->cur, len, STEPS_IRREGULAR, cutter_steps_in(c, at, len)};
	c->cur = upto;
	cutter_drop(c);
	return 1;
}
