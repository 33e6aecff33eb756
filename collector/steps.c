/*
 * steps.c - steps from the period of the collective sequence (see steps.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/median.h"
#include "collector/steps.h"
#include "collector/steps_split.h"
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
 * Does a step of ops[0..p) hold every kind of collective that occurs at
 * least once per two steps in the later half of the window (count[op] of
 * its `half` events)? A stretch of the forward's repeating blocks (all
 * AllGathers) is no step; what happens only at the start (init broadcasts)
 * is not required.
 */
static int holds_every_kind(const uint8_t *ops, size_t p, const size_t *count, size_t half)
{
	uint8_t in_step[256] = {0};
	for (size_t i = 0; i < p; i++)
		in_step[ops[i]] = 1;
	for (int op = 0; op < 256; op++)
		if (!in_step[op] && count[op] * 2 * p >= half)
			return 0;
	return 1;
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
 * A period of the sequence read where the sequence is steady: the start of
 * the last stretch of 2p events that repeats itself after p, so the p events
 * there are a rotation of the step. The last p events are not: an attach
 * that lets go removes its probes one at a time, and a trace cut there ends
 * in steps that miss a kind of collective (ReduceScatters without their
 * AllGathers). n - p when no stretch repeats whole (a short trace).
 */
static size_t steady_period_at(const uint64_t *sig, size_t n, size_t p)
{
	if (n < 2 * p)
		return n - p;
	size_t run = 0;
	for (size_t i = n - p; i-- > 0;) {
		run = sig[i] == sig[i + p] ? run + 1 : 0;
		if (run >= p)
			return i;
	}
	return n - p;
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
		for (size_t p = 1; p <= pmax && !period; p++)
			if (ratio[p - 1] >= best - STEPS_TIE_MATCH &&
			    holds_every_kind(ops + steady_period_at(sig, n, p), p, count, n - n / 2))
				period = p;
	}
	free(ratio);
	size_t p = period, rot = 0, t0 = 0, ap = 0, at0 = 0, arot = 0;
	double amatch = 0;
	int anchored = find_by_anchor(sig, ops, n, &ap, &at0, &arot, &amatch);
	if (p) {
		size_t at = steady_period_at(sig, n, p);
		rot = steps_rotation(ops + at, p);
		t0 = at + rot; /* a whole rotated period, inside the steady stretch */
	}
	/* An interruption that recurs exactly (an eval pass every third step)
	 * makes the whole sequence periodic over several steps: when the period
	 * holds the step found between anchors twice or more, and what else it
	 * holds reduces no gradient (an interruption is no training step), that
	 * is the step. */
	int several = 0, reduces_beside = 0;
	for (size_t j = 0; p && anchored && ap < p && j < p && t0 + j < n;) {
		if (j + ap <= p && t0 + j + ap <= n && memcmp(sig + t0 + j, sig + at0, ap * sizeof *sig) == 0) {
			several++;
			j += ap;
		} else {
			reduces_beside |= ops[t0 + j] == FSS_OP_REDUCESCATTER;
			j++;
		}
	}
	if (p && (several < 2 || reduces_beside)) {
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

uint64_t steps_class(uint32_t comm_slot, uint8_t op, uint32_t calls, uint8_t dtype)
{
	uint64_t h = steps_signature(op, ((uint64_t)comm_slot << 8) | dtype, calls, -1);
	return h ? h : 1;
}

enum cutter_state { CUTTER_DETECT, CUTTER_CUT, CUTTER_GIVEUP };

/* One step of the period: where it lies in the template, and its kind. */
struct cutter_sub {
	size_t off, len;
	uint32_t kind;
};

struct steps_cutter {
	enum cutter_state state;
	size_t max_window;
	size_t next_try;
	/* The window: the events not cut yet. Until the period is found every
	 * event; after, the events the period search reads (the others are
	 * only counted). Cuts are made in window numbers (sig[0] is `base`)
	 * and given out in event numbers (at[]). */
	uint64_t *sig;
	uint8_t *ops;
	uint64_t *at;  /* event number of each */
	uint64_t *cls; /* until the period is found: class, bytes of each */
	uint64_t *bytes;
	size_t n, cap;
	uint64_t base;
	uint64_t cur;	 /* next window event to place */
	uint64_t pushed; /* events pushed */
	uint64_t given;	 /* events covered by the cuts given out */
	uint64_t left_out;
	uint64_t varying[STEPS_VARYING_MAX]; /* classes left out of the search */
	size_t nvarying;
	struct steps_cut held; /* a cut (window numbers) waiting for the event after it */
	int have_held;
	uint64_t *tmpl; /* [period] the steady-state period */
	uint8_t *tmpl_ops;
	size_t period;
	struct cutter_sub sub[STEPS_VARIANTS_MAX]; /* the period's steps, in order */
	size_t nsub, next_sub, nkinds;
	size_t longest;	    /* events of the longest step */
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
	free(c->at);
	free(c->cls);
	free(c->bytes);
	free(c->tmpl);
	free(c->tmpl_ops);
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

uint64_t steps_cutter_left_out(const steps_cutter_t *c)
{
	return c->left_out;
}

size_t steps_cutter_variants(const steps_cutter_t *c, struct steps_variant *out, size_t max)
{
	if (c->state != CUTTER_CUT)
		return 0;
	for (size_t k = 0; k < c->nkinds && k < max; k++) {
		out[k] = (struct steps_variant){0};
		for (size_t s = 0; s < c->nsub; s++) {
			if (c->sub[s].kind != k)
				continue;
			if (out[k].per_period++ > 0)
				continue;
			out[k].events = (uint32_t)c->sub[s].len;
			for (size_t i = c->sub[s].off; i < c->sub[s].off + c->sub[s].len; i++) {
				out[k].allgathers += c->tmpl_ops[i] == FSS_OP_ALLGATHER;
				out[k].reduce_scatters += c->tmpl_ops[i] == FSS_OP_REDUCESCATTER;
			}
		}
	}
	return c->nkinds;
}

/* Room for one more window event (with its class and bytes until the
 * period is found). */
static int cutter_grow(steps_cutter_t *c)
{
	if (c->n < c->cap)
		return 0;
	size_t cap = c->cap ? 2 * c->cap : 256;
	uint64_t *s = realloc(c->sig, cap * sizeof *s);
	if (!s)
		return -ENOMEM;
	c->sig = s;
	uint8_t *o = realloc(c->ops, cap);
	if (!o)
		return -ENOMEM;
	c->ops = o;
	uint64_t *a = realloc(c->at, cap * sizeof *a);
	if (!a)
		return -ENOMEM;
	c->at = a;
	if (c->state == CUTTER_DETECT) {
		uint64_t *k = realloc(c->cls, cap * sizeof *k);
		if (!k)
			return -ENOMEM;
		c->cls = k;
		uint64_t *b = realloc(c->bytes, cap * sizeof *b);
		if (!b)
			return -ENOMEM;
		c->bytes = b;
	}
	c->cap = cap;
	return 0;
}

static int is_varying(const steps_cutter_t *c, uint64_t cls)
{
	for (size_t i = 0; cls && i < c->nvarying; i++)
		if (c->varying[i] == cls)
			return 1;
	return 0;
}

int steps_cutter_push_event(steps_cutter_t *c, const struct steps_event *e)
{
	uint64_t number = c->pushed++;
	if (c->state != CUTTER_DETECT && is_varying(c, e->cls)) {
		c->left_out++;
		return 0;
	}
	if (cutter_grow(c) < 0) {
		c->pushed--;
		return -ENOMEM;
	}
	c->sig[c->n] = e->sig;
	c->ops[c->n] = e->op;
	c->at[c->n] = number;
	if (c->state == CUTTER_DETECT) {
		c->cls[c->n] = e->cls;
		c->bytes[c->n] = e->bytes;
	}
	c->n++;
	return 0;
}

int steps_cutter_push(steps_cutter_t *c, uint64_t sig, uint8_t op)
{
	struct steps_event e = {.sig = sig, .op = op};
	return steps_cutter_push_event(c, &e);
}

/* Forget the events before c->cur. */
static void cutter_drop(steps_cutter_t *c)
{
	size_t drop = (size_t)(c->cur - c->base);
	if (drop == 0 || drop > c->n)
		return;
	memmove(c->sig, c->sig + drop, (c->n - drop) * sizeof *c->sig);
	memmove(c->ops, c->ops + drop, c->n - drop);
	memmove(c->at, c->at + drop, (c->n - drop) * sizeof *c->at);
	c->n -= drop;
	c->base = c->cur;
}

/* The signature that marks one step: the template's rarest ReduceScatter
 * (a gradient reduction happens in training steps only, not in an eval
 * pass, a checkpoint or set-up), else its rarest signature; counted per
 * step of the period. */
static void cutter_pick_rare(steps_cutter_t *c)
{
	size_t p = c->period;
	uint32_t best = UINT32_MAX;
	int best_rs = 0;
	for (size_t i = 0; i < p; i++) {
		uint32_t k = 0;
		for (size_t j = 0; j < p; j++)
			k += c->tmpl[j] == c->tmpl[i];
		int rs = c->tmpl_ops[i] == FSS_OP_REDUCESCATTER;
		if ((rs && !best_rs) || (rs == best_rs && k <= best)) {
			best = k;
			best_rs = rs;
			c->rare_sig = c->tmpl[i];
		}
	}
	c->rare_mult = best == UINT32_MAX ? 1 : best;
	if (c->nsub > 1 && c->rare_mult >= c->nsub)
		c->rare_mult /= (uint32_t)c->nsub;
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

/* The window's events of classes not left out, in place (the period was
 * found on them). */
static void cutter_keep(steps_cutter_t *c)
{
	size_t o = 0;
	for (size_t i = 0; i < c->n; i++) {
		if (is_varying(c, c->cls[i])) {
			c->left_out++;
			continue;
		}
		c->sig[o] = c->sig[i];
		c->ops[o] = c->ops[i];
		c->at[o] = c->at[i];
		c->bytes[o] = c->bytes[i];
		o++;
	}
	c->n = o;
}

/* The window without the left-out classes, for a search: the events kept
 * (sig, ops, bytes into fresh arrays the caller frees, *n their count). */
static int cutter_search_view(const steps_cutter_t *c, uint64_t **sig, uint8_t **ops, uint64_t **bytes, size_t *n)
{
	size_t m = c->n ? c->n : 1;
	*sig = malloc(m * sizeof **sig);
	*ops = malloc(m);
	*bytes = malloc(m * sizeof **bytes);
	if (!*sig || !*ops || !*bytes)
		return -ENOMEM;
	size_t o = 0;
	for (size_t i = 0; i < c->n; i++) {
		if (is_varying(c, c->cls[i]))
			continue;
		(*sig)[o] = c->sig[i];
		(*ops)[o] = c->ops[i];
		(*bytes)[o] = c->bytes[i];
		o++;
	}
	*n = o;
	return 0;
}

/* Take the period found: its template, its steps and their kinds; the
 * first whole step (of any kind) where the window has one. */
static int cutter_take_period(steps_cutter_t *c, const struct steps_split *sp)
{
	size_t p = sp->period;
	c->period = p;
	c->tmpl = malloc(p * sizeof *c->tmpl);
	c->tmpl_ops = malloc(p);
	if (!c->tmpl || !c->tmpl_ops)
		return -ENOMEM;
	memcpy(c->tmpl, c->sig + sp->first, p * sizeof *c->tmpl);
	memcpy(c->tmpl_ops, c->ops + sp->first, p);
	c->nsub = sp->nsub;
	c->nkinds = sp->nkinds;
	c->longest = 0;
	for (size_t s = 0; s < sp->nsub; s++) {
		c->sub[s] = (struct cutter_sub){sp->off[s], sp->off[s + 1] - sp->off[s], sp->kind[s]};
		if (c->sub[s].len > c->longest)
			c->longest = c->sub[s].len;
	}
	cutter_pick_rare(c);
	/* steps of the period's kinds right before it are steps too */
	size_t first = sp->first;
	for (int more = c->nsub > 1; more;) {
		more = 0;
		for (size_t s = 0; s < c->nsub && !more; s++) {
			size_t len = c->sub[s].len;
			if (len <= first &&
			    memcmp(c->sig + first - len, c->tmpl + c->sub[s].off, len * sizeof *c->sig) == 0) {
				first -= len;
				c->next_sub = s;
				more = 1;
			}
		}
	}
	c->state = CUTTER_CUT;
	c->warm_first = c->base;
	c->cur = c->base + first;
	c->warmup_due = first > 0;
	return 0;
}

static int cutter_detect(steps_cutter_t *c, int final)
{
	int window_full = c->n >= c->max_window;
	if (!final && !window_full && c->n < c->next_try)
		return 0;
	c->nvarying = steps_varying_classes(c->cls, c->sig, c->n, c->varying, STEPS_VARYING_MAX);
	uint64_t *sig, *bytes;
	uint8_t *ops;
	size_t n;
	if (cutter_search_view(c, &sig, &ops, &bytes, &n) < 0) {
		free(sig);
		free(ops);
		free(bytes);
		return -ENOMEM;
	}
	struct steps_period sp;
	int found = steps_find_period(sig, ops, n, (final && !c->open_end) || window_full, &sp);
	if (found && final && c->open_end && !period_reduces(ops + sp.first, sp.period))
		found = 0;
	struct steps_split split;
	if (found)
		steps_split_period(sig, ops, bytes, n, sp.period, sp.first, &split);
	free(sig);
	free(ops);
	free(bytes);
	if (found) {
		cutter_keep(c);
		free(c->cls);
		free(c->bytes);
		c->cls = c->bytes = NULL;
		return cutter_take_period(c, &split);
	}
	c->nvarying = 0;
	if (final || window_full)
		c->state = CUTTER_GIVEUP;
	else
		c->next_try *= 2;
	return 0;
}

/* The step of the period that matches at window position `at`: the one
 * due next, else the longest that does; -1 when none does. */
static int match_step(const steps_cutter_t *c, size_t at)
{
	size_t avail = c->n - at;
	const struct cutter_sub *due = &c->sub[c->next_sub];
	if (avail >= due->len && memcmp(c->sig + at, c->tmpl + due->off, due->len * sizeof *c->sig) == 0)
		return (int)c->next_sub;
	int best = -1;
	for (size_t s = 0; s < c->nsub; s++) {
		const struct cutter_sub *x = &c->sub[s];
		if (avail >= x->len && (best < 0 || x->len > c->sub[best].len) &&
		    memcmp(c->sig + at, c->tmpl + x->off, x->len * sizeof *c->sig) == 0)
			best = (int)s;
	}
	return best;
}

/* The next cut in window numbers (steps_cutter_next's contract). */
static int cutter_next_window(steps_cutter_t *c, int final, struct steps_cut *cut)
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
		*cut = (struct steps_cut){c->cur, end - c->cur, STEPS_IRREGULAR, 0, 0};
		c->cur = end;
		cutter_drop(c);
		return 1;
	}
	if (c->warmup_due) {
		uint64_t len = c->cur - c->warm_first;
		*cut = (struct steps_cut){c->warm_first, len, STEPS_WARMUP,
					  cutter_steps_in(c, (size_t)(c->warm_first - c->base), len), 0};
		c->warmup_due = 0;
		cutter_drop(c);
		return 1;
	}
	size_t p = c->longest;
	size_t at = (size_t)(c->cur - c->base);
	size_t avail = c->n - at;
	int s = match_step(c, at);
	/* the step due next, or the longest that matches once no longer one
	 * can come */
	if (s >= 0 && ((size_t)s == c->next_sub || final || avail >= p)) {
		*cut = (struct steps_cut){c->cur, c->sub[s].len, STEPS_REGULAR, 1, c->sub[s].kind};
		c->cur += c->sub[s].len;
		c->next_sub = ((size_t)s + 1) % c->nsub;
		cutter_drop(c);
		return 1;
	}
	if (avail < p) {
		if (!final || avail == 0)
			return 0;
		*cut = (struct steps_cut){c->cur, avail, STEPS_TRAILING, 0, 0};
		c->cur = end;
		cutter_drop(c);
		return 1;
	}
	/* A stretch that is not a regular step: find where the next one starts:
	 * the first place a whole step matches, else (near the end of what has
	 * come) where the template's first keys follow its last one. */
	size_t m = c->period < STEPS_RESYNC_KEYS ? c->period : STEPS_RESYNC_KEYS;
	if (!final && avail < 3 * p + m)
		return 0;
	size_t found = 0;
	for (size_t q = at + 1; q < c->n && !found; q++)
		if (match_step(c, q) >= 0)
			found = q;
	for (size_t q = c->n > p ? c->n - p + 1 : at + 1; !found && q + m <= c->n; q++) {
		if (q <= at || (c->period > 1 && c->sig[q - 1] != c->tmpl[c->period - 1]))
			continue;
		if (memcmp(c->sig + q, c->tmpl, m * sizeof *c->tmpl) == 0)
			found = q;
	}
	if (found) {
		size_t len = found - at;
		*cut = (struct steps_cut){c->cur, len, STEPS_IRREGULAR, cutter_steps_in(c, at, len), 0};
		c->cur = c->base + found;
		cutter_drop(c);
		return 1;
	}
	uint64_t upto = final ? end : end - 2 * p;
	if (upto <= c->cur)
		return 0;
	uint64_t len = upto - c->cur;
	*cut = (struct steps_cut){c->cur, len, STEPS_IRREGULAR, cutter_steps_in(c, at, len), 0};
	c->cur = upto;
	cutter_drop(c);
	return 1;
}

int steps_cutter_next(steps_cutter_t *c, int final, struct steps_cut *cut)
{
	memset(cut, 0, sizeof *cut);
	if (!c->have_held) {
		int got = cutter_next_window(c, final, &c->held);
		if (got < 0)
			return got;
		c->have_held = got;
	}
	if (!c->have_held) {
		/* events left out after the last cut, with nothing read after them */
		if (!final || c->given >= c->pushed || c->n > (size_t)(c->cur - c->base))
			return 0;
		*cut = (struct steps_cut){c->given, c->pushed - c->given, STEPS_IRREGULAR, 0, 0};
		c->given = c->pushed;
		return 1;
	}
	/* a cut ends where the next event read begins: the events left out in
	 * between fall in it */
	uint64_t end_w = c->held.first + c->held.count, end;
	if (end_w < c->base + c->n)
		end = c->at[end_w - c->base];
	else if (final)
		end = c->pushed;
	else
		return 0;
	*cut = c->held;
	cut->first = c->given;
	cut->count = end - c->given;
	c->given = end;
	c->have_held = 0;
	return 1;
}
