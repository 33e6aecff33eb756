/*
 * phases.c - units, cycles and phases from the FSDP group's forward gather
 * sequence; reductions as evidence (see phases.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analysis.h"
#include "collector/phases.h"
#include "common/record.h"

/* What one step's parse works on; every array is allocated once. */
struct work {
	const struct phases_event *ev;
	size_t nag, nrs;
	size_t *ag;          /* [nag] event index of each AllGather */
	size_t *rs;          /* [nrs] event index of each ReduceScatter */
	uint32_t *id;        /* [nag] its key (gathered bytes, dtype) as a small number */
	uint32_t nid;
	uint32_t *rs_before; /* [nag] ReduceScatters before each AllGather */
	uint32_t *z;         /* [nag] longest run from each gather equal to the step's first gathers */
	uint32_t *first;     /* [nid + 1] where each key's gathers start in plist */
	uint32_t *plist;     /* [nag] gathers by key, in order */
	uint32_t *cnt;       /* [nid] units of each key in S */
	uint32_t *stamp;     /* [nid] cycle (gen) of used[] */
	uint32_t *used;      /* [nid] re-gathers of each key in the cycle */
	uint32_t gen;
	uint32_t *cstart;    /* [nag] first gather of each cycle */
	uint32_t *fstart;    /* [nag] first gather of the forward each cycle's units are (its own; for a cycle
	                        that gathers nothing in forward, the cycle's before it) */
	uint32_t *bpos;      /* [nag] scratch: a cycle's backward gathers */
	uint32_t *rs_in;     /* [nag] ReduceScatters of each cycle */
	uint32_t *bwd_in;    /* [nag] backward gathers of each cycle */
	uint32_t *rec_in;    /* [nag] recomputation gathers of each cycle */
	uint32_t *again;     /* [nag] a re-gather's number among its key's re-gathers in its cycle */
	uint32_t *total;     /* [nag] and how many its key has in the cycle */
	uint32_t *kstamp;    /* [nid] the reverse scan's cycle (+ 1) of kval[] */
	uint32_t *kval;      /* [nid] */
	uint32_t *rs_cycle;  /* [nrs] the cycle of each ReduceScatter */
	int32_t *rs_unit;    /* [nrs] the unit it was matched to, -1 */
	uint32_t *ustamp;    /* [nag] per unit: taken (matching) / gathered later (violations) */
	uint32_t ugen;
	uint32_t lead;       /* gathers before S (a weight sync that opens the step): not units */
	uint32_t *skip;      /* [nid] gathers of each key before lead */
	uint32_t s_dtypes;   /* dtypes S's units travel in (bit d: enum fss_dtype d) */
	uint64_t s_min;      /* elements of S's smallest unit */
	uint64_t s_max;      /* and of its largest */
	int has_other;       /* the parse has gathers of another model's units */
	uint32_t ncycles_scratch; /* the cycles split_backward_rounds is looking at */
	struct phases_gather *g; /* [nag] the candidate parse */
};

/* What the reductions say of a parse (evidence()). */
struct evidence {
	uint32_t matched;     /* reductions matched to a unit */
	uint32_t violations;  /* matched reductions their unit is gathered after, in its cycle */
	uint32_t unreduced;   /* units without a matched reduction in the first cycle that reduces */
	uint32_t unmatched;   /* units without a matched reduction, over the cycles where some matched */
	uint32_t misplaced;   /* reductions no unit of S fits that a gather the parse calls no unit fits */
	int mirrored;         /* every reducing cycle's matches in the mirrored order */
};

/* How good a parse is: lower is better, field by field (phases.h). A unit
 * is gathered before it is reduced: a matched reduction whose unit is
 * gathered again later in its cycle says the reading took a backward
 * gather for a unit (S too long) or the rest of the forward for
 * recomputations (S too short). Where reductions match units, a unit none
 * matches in such a cycle is a backward gather read as a unit (unmatched);
 * where none match (adapters, frozen units), only the gathers tell: the
 * reading with fewer recomputations. */
struct score {
	uint32_t violations, misplaced, irregular, unexplained, unmatched, implicit, recompute, unreduced, cycles,
	    units;
};

static int score_better(const struct score *a, const struct score *b)
{
	const uint32_t x[8] = {a->violations, a->misplaced, a->irregular, a->unexplained + a->unmatched + a->implicit,
			       a->recompute,  a->unreduced, a->cycles,    a->units};
	const uint32_t y[8] = {b->violations, b->misplaced, b->irregular, b->unexplained + b->unmatched + b->implicit,
			       b->recompute,  b->unreduced, b->cycles,    b->units};
	for (int i = 0; i < 8; i++)
		if (x[i] != y[i])
			return x[i] < y[i];
	return 0;
}

/* The gathered bytes of an AllGather event (what every rank receives). */
static uint64_t gathered_bytes(const struct phases_event *e)
{
	return e->bytes * (uint64_t)(e->nranks > 0 ? e->nranks : 1);
}

/* ---- the keys ------------------------------------------------------------- */

struct keyed {
	uint64_t bytes; /* gathered bytes */
	uint32_t gather;
	uint8_t dtype;
};

static int keyed_cmp(const void *x, const void *y)
{
	const struct keyed *a = x, *b = y;
	if (a->bytes != b->bytes)
		return a->bytes < b->bytes ? -1 : 1;
	if (a->dtype != b->dtype)
		return a->dtype < b->dtype ? -1 : 1;
	return a->gather < b->gather ? -1 : a->gather > b->gather;
}

/* Keys as small numbers, how many gathers each key has (first[k + 1]), and
 * the runs equal to the step's beginning (z, the Z-function of the key
 * string). Returns 0 or -ENOMEM. */
static int make_keys(struct work *w)
{
	struct keyed *order = malloc((w->nag ? w->nag : 1) * sizeof *order);
	if (!order)
		return -ENOMEM;
	for (uint32_t i = 0; i < w->nag; i++) {
		const struct phases_event *e = &w->ev[w->ag[i]];
		order[i] = (struct keyed){gathered_bytes(e), i, e->dtype};
	}
	qsort(order, w->nag, sizeof *order, keyed_cmp);
	w->nid = 0;
	for (size_t k = 0; k < w->nag; k++) {
		if (k > 0 && (order[k].bytes != order[k - 1].bytes || order[k].dtype != order[k - 1].dtype))
			w->nid++;
		w->id[order[k].gather] = w->nid;
	}
	w->nid = w->nag ? w->nid + 1 : 0;
	free(order);
	memset(w->first, 0, (w->nid + 1) * sizeof *w->first);
	for (size_t i = 0; i < w->nag; i++)
		w->first[w->id[i] + 1]++;
	for (uint32_t k = 0; k < w->nid; k++)
		w->first[k + 1] += w->first[k];
	return 0;
}

/* S begins at gather `lead`: the runs from each gather on equal to the
 * gathers from lead on (z, the Z-function of the key string from there),
 * and how many gathers of each key come before it. */
static void start_at(struct work *w, uint32_t lead)
{
	const uint32_t *id = w->id + lead;
	size_t n = w->nag - lead;
	uint32_t *z = w->z + lead;
	w->lead = lead;
	memset(w->z, 0, lead * sizeof *w->z);
	memset(w->skip, 0, w->nid * sizeof *w->skip);
	for (uint32_t i = 0; i < lead; i++)
		w->skip[w->id[i]]++;
	if (n)
		z[0] = (uint32_t)n;
	for (size_t i = 1, l = 0, r = 0; i < n; i++) {
		size_t k = i < r ? (r - i < z[i - l] ? r - i : z[i - l]) : 0;
		while (i + k < n && id[k] == id[i + k])
			k++;
		z[i] = (uint32_t)k;
		if (i + k > r) {
			l = i;
			r = i + k;
		}
	}
}

/* ---- one parse ------------------------------------------------------------ */

/* Which unit a re-gather takes: the again-th of `total` re-gathers of a
 * key with `have` units in S, in a cycle. Backward walks the units of a key
 * from the last; when there are more re-gathers than units, the first
 * units in that order are gathered twice, back to back (a checkpoint
 * wrapper's recomputation, then the backward). Sets *recompute on the
 * extra gather of a pair. */
static uint32_t regather_unit(uint32_t again, uint32_t total, uint32_t have, uint8_t *recompute)
{
	uint32_t pairs = total > have ? total - have : 0;
	if (again < 2 * pairs) {
		*recompute = again % 2;
		return have - 1 - again / 2;
	}
	*recompute = 0;
	return have - 1 - (pairs + (again - 2 * pairs));
}

/* Is gather pos, of a key S does not hold, a parameter gather of another
 * model (a frozen reference or teacher model's unit)? In a dtype S's units
 * travel in and no smaller than S's smallest unit: a trainer's metric
 * gathers are a few fp32 elements, a weight sync's fp32 per-parameter
 * gathers are in another dtype than a bf16 model's units. */
static int other_model_gather(const struct work *w, size_t pos)
{
	const struct phases_event *e = &w->ev[w->ag[pos]];
	return e->dtype < 32 && (w->s_dtypes >> e->dtype & 1u) && e->elements >= w->s_min;
}

/* Pass 1: cycles (a copy of S with no reduction inside it begins one), and
 * each gather forward, backward (a key of S) or not a unit. */
static uint32_t classify(struct work *w, uint32_t u, uint32_t *unexplained)
{
	struct phases_gather *g = w->g;
	uint32_t nc = 0;
	int32_t other_cycle = -1; /* the cycle that had another model's pass */
	*unexplained = w->lead;
	for (uint32_t pos = 0; pos < w->lead; pos++)
		g[pos] = (struct phases_gather){0, -1, 0, 0, 1, 0};
	for (size_t pos = w->lead; pos < w->nag;) {
		if (w->z[pos] >= u && w->rs_before[pos + u - 1] == w->rs_before[pos]) {
			w->cstart[nc] = w->fstart[nc] = (uint32_t)pos;
			w->rs_in[nc] = w->bwd_in[nc] = w->rec_in[nc] = 0;
			nc++;
			for (uint32_t j = 0; j < u; j++)
				g[pos + j] = (struct phases_gather){(int32_t)nc - 1, (int32_t)j, ANALYSIS_PHASE_FORWARD, 0, 0, 0};
			pos += u;
			continue;
		}
		int32_t c = (int32_t)nc - 1;
		if (w->cnt[w->id[pos]] != 0) {
			g[pos] = (struct phases_gather){c, -1, ANALYSIS_PHASE_BACKWARD, 0, 0, 0};
			pos++;
			continue;
		}
		/* not a unit of S: a run of another model's unit gathers is its pass
		 * when it holds two or more, or one larger than every unit of S (a
		 * model wrapped whole); anything else a per-step collective */
		size_t end = pos;
		while (end < w->nag && w->cnt[w->id[end]] == 0 && other_model_gather(w, end) &&
		       !(w->z[end] >= u && w->rs_before[end + u - 1] == w->rs_before[end]))
			end++;
		/* one such pass a cycle (a reference or teacher model runs once per
		 * micro-batch); it costs one unexplained gather, its gathers none */
		int other = (end > pos + 1 || (end == pos + 1 && w->ev[w->ag[pos]].elements > w->s_max)) &&
			    other_cycle != c;
		if (!other)
			end = pos + 1;
		else
			other_cycle = c;
		for (size_t q = pos; q < end; q++)
			g[q] = (struct phases_gather){c, -1, (uint8_t)(other ? ANALYSIS_PHASE_FORWARD : 0), 0,
						      (uint8_t)!other, (uint8_t)other};
		w->has_other |= other;
		*unexplained += other ? 1 : (uint32_t)(end - pos);
		pos = end;
	}
	return nc;
}

/* Number each cycle's re-gathers of every key (again) and count them
 * (total). Returns 0 when a key is gathered a third time for every unit. */
static int number_regathers(struct work *w)
{
	struct phases_gather *g = w->g;
	int32_t cur = -1;
	int ok = 1;
	for (size_t pos = 0; pos < w->nag; pos++) {
		if (g[pos].cycle != cur) {
			cur = g[pos].cycle;
			w->gen++;
		}
		if (g[pos].phase != ANALYSIS_PHASE_BACKWARD)
			continue;
		uint32_t k = w->id[pos];
		uint32_t again = w->stamp[k] == w->gen ? w->used[k] : 0;
		w->stamp[k] = w->gen;
		w->used[k] = again + 1;
		ok &= again < 2 * w->cnt[k];
		w->again[pos] = again;
	}
	w->gen++;
	for (size_t pos = w->nag; pos-- > 0;) {
		if (g[pos].phase != ANALYSIS_PHASE_BACKWARD)
			continue;
		uint32_t k = w->id[pos], c = (uint32_t)g[pos].cycle + w->gen;
		if (w->kstamp[k] != c) {
			w->kstamp[k] = c;
			w->kval[k] = w->again[pos] + 1;
		}
		w->total[pos] = w->kval[k];
	}
	w->gen += w->nag + 1; /* past every stamp the reverse scan left */
	return ok;
}

/* Another model's forward pass that shares units with S (a reference model
 * wrapped alike, its own root first): the gathers of S's keys right after
 * its own are its forward, as many as the cycle has re-gathers beyond one
 * per unit (read otherwise as recomputations). */
static void absorb_other_model(struct work *w)
{
	struct phases_gather *g = w->g;
	for (size_t pos = 0; pos + 1 < w->nag; pos++) {
		if (!g[pos].other_model || g[pos + 1].other_model)
			continue;
		w->gen++;
		for (size_t q = pos + 1; q < w->nag; q++) {
			uint32_t k = w->id[q];
			if (g[q].phase != ANALYSIS_PHASE_BACKWARD || g[q].cycle != g[pos].cycle ||
			    w->rs_before[q] != w->rs_before[pos])
				break;
			uint32_t taken = w->stamp[k] == w->gen ? w->used[k] : 0;
			if (w->total[q] <= w->cnt[k] + taken)
				break;
			w->stamp[k] = w->gen;
			w->used[k] = taken + 1;
			g[q] = (struct phases_gather){g[q].cycle, -1, ANALYSIS_PHASE_FORWARD, 0, 0, 1};
		}
	}
}

/* Does cycle c's backward (the keys of its n re-gathers at w->bpos) repeat
 * a round m times, each key at most once per unit in a round, with no
 * reduction before the last round's second gather and one of a unit it
 * re-gathers after its first? Then it is m micro-batches whose units
 * stayed unsharded between them (reductions deferred, resharded only after
 * forward): the later ones gather nothing in forward, only their backward.
 * Returns the rounds (1: none); *partial the units of the round's keys a
 * round leaves out (0 when each round re-gathers every unit of its keys). */
static size_t backward_rounds(struct work *w, uint32_t c, size_t n, uint32_t *partial)
{
	*partial = 0;
	for (size_t m = 2; m <= n; m++) {
		if (n % m)
			continue;
		size_t q = n / m, k = q;
		while (k < n && w->id[w->bpos[k]] == w->id[w->bpos[k - q]])
			k++;
		/* no reduction before the last round's second gather (the first
		 * micro-batch's prefetch order: a checkpoint wrapper's pairs straddle
		 * a reduction sooner), and one after its first: the last micro-batch
		 * syncs as it goes */
		uint32_t second = w->bpos[n - q + (q > 1)];
		uint32_t end = c + 1 < w->ncycles_scratch ? w->cstart[c + 1] : (uint32_t)w->nag;
		uint32_t after = end < w->nag ? w->rs_before[end] : (uint32_t)w->nrs;
		if (k < n || w->rs_before[second] != w->rs_before[w->cstart[c]])
			continue;
		int syncs = 0; /* a reduction of a unit the round re-gathers */
		for (uint32_t r = w->rs_before[w->bpos[n - q]]; r < after && !syncs; r++)
			for (size_t j = n - q; j < n && !syncs; j++)
				syncs = phases_reduces(&w->ev[w->ag[w->bpos[j]]], &w->ev[w->rs[r]]);
		if (!syncs)
			continue;
		w->gen++;
		int fits = 1;
		uint32_t units = 0;
		for (size_t j = 0; j < q && fits; j++) {
			uint32_t key = w->id[w->bpos[j]];
			uint32_t seen = w->stamp[key] == w->gen ? w->used[key] : 0;
			if (!seen)
				units += w->cnt[key];
			w->stamp[key] = w->gen;
			w->used[key] = seen + 1;
			fits = seen + 1 <= w->cnt[key];
		}
		if (fits) {
			*partial = units - (uint32_t)q;
			return m;
		}
	}
	return 1;
}

/* Cycles whose re-gathers are more than one per unit and repeat in
 * rounds (backward_rounds) become that many cycles, the later ones without
 * a forward. Returns the cycles. */
static uint32_t split_backward_rounds(struct work *w, uint32_t nc, uint32_t *irregular)
{
	struct phases_gather *g = w->g;
	uint32_t *start = w->rs_in, *fwd = w->bwd_in; /* scratch: the new cycles, rebuilt below */
	uint32_t out = 0;
	w->ncycles_scratch = nc;
	for (uint32_t c = 0; c < nc; c++) {
		uint32_t end = c + 1 < nc ? w->cstart[c + 1] : (uint32_t)w->nag;
		size_t n = 0, over = 0;
		for (uint32_t pos = w->cstart[c]; pos < end; pos++)
			if (g[pos].phase == ANALYSIS_PHASE_BACKWARD) {
				w->bpos[n++] = pos;
				over |= w->again[pos] >= w->cnt[w->id[pos]];
			}
		uint32_t partial = 0;
		size_t m = over ? backward_rounds(w, c, n, &partial) : 1;
		*irregular += (uint32_t)(m - 1) * partial; /* rounds that leave units out: a forward misread */
		for (size_t r = 0; r < m && out < w->nag; r++) {
			start[out] = r ? w->bpos[r * (n / m)] : w->cstart[c];
			fwd[out++] = w->fstart[c];
		}
	}
	if (out != nc) {
		for (uint32_t c = 0; c < out; c++) {
			w->cstart[c] = start[c];
			w->fstart[c] = fwd[c];
		}
		for (uint32_t c = 0, pos = 0; pos < w->nag; pos++) {
			while (c + 1 < out && w->cstart[c + 1] <= pos)
				c++;
			g[pos].cycle = (int32_t)c;
		}
	}
	for (uint32_t c = 0; c < out; c++)
		w->rs_in[c] = w->bwd_in[c] = w->rec_in[c] = 0;
	return out;
}

/* Parse the gathers with S = the first u gathers (cnt[] holds S's keys):
 * the cycles, each gather's place, the reductions per cycle. Returns 1 when
 * it holds (w->g, w->cstart.. filled, *sc scored but for the reductions'
 * evidence), 0 when not. */
static int parse_with(struct work *w, uint32_t u, uint32_t *ncycles, struct score *sc)
{
	struct phases_gather *g = w->g;
	uint32_t unexplained = 0, recompute = 0, irregular = 0;
	w->has_other = 0;
	uint32_t nc = classify(w, u, &unexplained);
	if (w->has_other) {
		number_regathers(w);
		absorb_other_model(w);
	}
	number_regathers(w);
	uint32_t explicit_cycles = nc;
	nc = split_backward_rounds(w, nc, &irregular);
	if (!number_regathers(w))
		return 0; /* a third backward gather of every unit of its key */
	for (size_t pos = 0; pos < w->nag; pos++) {
		if (g[pos].phase != ANALYSIS_PHASE_BACKWARD)
			continue;
		uint32_t k = w->id[pos];
		uint32_t j = regather_unit(w->again[pos], w->total[pos], w->cnt[k], &g[pos].recompute);
		g[pos].unit = (int32_t)(w->plist[w->first[k] + w->skip[k] + j] - w->lead);
		recompute += g[pos].recompute;
		/* some units of the key recomputed, not all: the rest of a forward
		 * read as recomputations, or a backward gather read as a unit */
		irregular += g[pos].recompute && w->total[pos] - w->cnt[k] < w->cnt[k];
		w->bwd_in[g[pos].cycle]++;
		w->rec_in[g[pos].cycle] += g[pos].recompute;
	}
	/* each reduction belongs to the cycle whose forward began before it
	 * (and ended before it: no copy of S holds one); at most U a cycle */
	uint32_t c = 0, unreduced = 0;
	for (size_t r = 0; r < w->nrs; r++) {
		while (c + 1 < nc && w->ag[w->cstart[c + 1]] < w->rs[r])
			c++;
		w->rs_cycle[r] = c;
		if (++w->rs_in[c] > u)
			return 0;
	}
	for (uint32_t k = 0; k < nc; k++)
		if (w->rs_in[k])
			unreduced += u - w->rs_in[k];
	*ncycles = nc;
	*sc = (struct score){0, 0, irregular, unexplained, 0, nc - explicit_cycles, recompute, unreduced, nc, u};
	return 1;
}

/* The reductions of the parse in w->g matched to units (the rule of
 * phases_match_reductions), and the matches a later gather of their unit
 * contradicts. */
static void evidence(struct work *w, uint32_t u, struct evidence *e)
{
	memset(e, 0, sizeof *e);
	e->mirrored = 1;
	int first = 1;
	int64_t next = 0, last = 0;
	uint32_t cur = UINT32_MAX, in_cycle = 0;
	for (size_t r = 0; r < w->nrs; r++) {
		uint32_t c = w->rs_cycle[r];
		if (c != cur) {
			if (cur != UINT32_MAX && first) {
				e->unreduced = u - in_cycle;
				first = 0;
			}
			if (in_cycle)
				e->unmatched += u - in_cycle;
			cur = c;
			in_cycle = 0;
			w->ugen++;
			next = (int64_t)u - 1;
			last = (int64_t)u;
		}
		const struct phases_event *red = &w->ev[w->rs[r]];
		const size_t *unit_ag = w->ag + w->fstart[c];
		int64_t hit = -1;
		for (int64_t j = next; j >= 0 && hit < 0; j--)
			if (w->ustamp[j] != w->ugen && phases_reduces(&w->ev[unit_ag[j]], red))
				hit = j;
		for (int64_t j = (int64_t)u - 1; j > next && hit < 0; j--)
			if (w->ustamp[j] != w->ugen && phases_reduces(&w->ev[unit_ag[j]], red))
				hit = j;
		w->rs_unit[r] = (int32_t)hit;
		if (hit < 0)
			continue;
		w->ustamp[hit] = w->ugen;
		e->matched++;
		in_cycle++;
		e->mirrored &= hit < last;
		last = hit;
		next = hit - 1;
	}
	if (cur != UINT32_MAX && first)
		e->unreduced = u - in_cycle;
	if (in_cycle)
		e->unmatched += u - in_cycle;
	e->mirrored &= e->matched > 0;
	/* the reductions say which gathers are units: one that fits a gather
	 * read as no unit, and no unit, says S is not the forward */
	size_t nstep = 0;
	for (size_t pos = 0; pos < w->nag; pos++)
		if (w->g[pos].step_gather)
			w->bpos[nstep++] = (uint32_t)pos;
	for (size_t r = 0; r < w->nrs && nstep; r++) {
		if (w->rs_unit[r] >= 0)
			continue;
		for (size_t k = 0; k < nstep; k++)
			if (phases_reduces(&w->ev[w->ag[w->bpos[k]]], &w->ev[w->rs[r]])) {
				e->misplaced++;
				break;
			}
	}
	/* from the end: a unit gathered after its matched reduction */
	size_t a = w->nag;
	cur = UINT32_MAX;
	for (size_t r = w->nrs; r-- > 0;) {
		while (a > 0 && w->ag[a - 1] > w->rs[r]) {
			a--;
			const struct phases_gather *p = &w->g[a];
			if (p->unit < 0)
				continue;
			if ((uint32_t)p->cycle != cur) {
				cur = (uint32_t)p->cycle;
				w->ugen++;
			}
			w->ustamp[p->unit] = w->ugen;
		}
		if (w->rs_cycle[r] != cur) {
			cur = w->rs_cycle[r];
			w->ugen++;
		}
		if (w->rs_unit[r] >= 0 && w->ustamp[w->rs_unit[r]] == w->ugen)
			e->violations++;
	}
}

/* What the chosen parse says, into *out (units, cycles, phases). */
static void describe(const struct work *w, uint32_t u, uint32_t nc, const struct score *sc, struct phases_result *out)
{
	int any_bwd = 0;
	for (uint32_t k = 0; k < nc; k++)
		any_bwd |= w->bwd_in[k] > 0;
	(void)sc;
	out->units = u;
	out->cycles = nc;
	out->forward_allgathers = u;
	out->reductions = (uint32_t)w->nrs;
	/* gathers of no unit, and passes of another model's units inside a
	 * cycle (each run of them one pass) */
	for (size_t pos = 0; pos < w->nag; pos++) {
		const struct phases_gather *p = &w->g[pos];
		out->step_gathers += p->step_gather;
		out->other_model_gathers += p->other_model;
		if (p->other_model && (pos == 0 || !w->g[pos - 1].other_model || w->g[pos - 1].cycle != p->cycle))
			out->forward_only++;
	}
	out->first_training = -1;
	int first_sync = -1;
	for (uint32_t k = 0; k < nc; k++) {
		int training = w->bwd_in[k] > 0 || w->rs_in[k] > 0;
		if (w->rs_in[k]) {
			out->sync_cycles++;
			if (first_sync < 0) {
				first_sync = (int)k;
				out->reductions_per_sync = w->rs_in[k];
			}
		}
		if (!training && any_bwd) {
			out->forward_only++;
			continue;
		}
		out->training_cycles++;
		if (out->first_training < 0) {
			out->first_training = (int32_t)k;
			out->backward_allgathers = w->bwd_in[k];
			out->recompute_allgathers = w->rec_in[k];
		}
	}
}

/* Do the parse's gathers of no unit move more than twice the bytes its
 * units' gathers do? A trainer's metrics are a few elements, a weight sync
 * once the parameters in fp32; when most of what the group gathers is no
 * unit, S is not the forward (DeepSpeed ZeRO++'s quantized fetches read
 * beside its persistent parameters). */
static int step_gathers_dominate(const struct work *w)
{
	uint64_t units = 0, other = 0;
	for (size_t pos = 0; pos < w->nag; pos++) {
		uint64_t b = gathered_bytes(&w->ev[w->ag[pos]]);
		if (w->g[pos].step_gather)
			other += b;
		else
			units += b;
	}
	return other / 2 > units;
}

/* ---- the whole ------------------------------------------------------------ */

static void work_free(struct work *w)
{
	free(w->ag);
	free(w->rs);
	free(w->id);
	free(w->rs_before);
	free(w->z);
	free(w->first);
	free(w->plist);
	free(w->cnt);
	free(w->stamp);
	free(w->used);
	free(w->cstart);
	free(w->fstart);
	free(w->bpos);
	free(w->rs_in);
	free(w->bwd_in);
	free(w->rec_in);
	free(w->again);
	free(w->total);
	free(w->kstamp);
	free(w->kval);
	free(w->rs_cycle);
	free(w->rs_unit);
	free(w->ustamp);
	free(w->skip);
	free(w->g);
}

static int work_new(struct work *w, const struct phases_event *ev, size_t n, size_t nag, size_t nrs)
{
	memset(w, 0, sizeof *w);
	w->ev = ev;
	w->nag = nag;
	w->nrs = nrs;
	size_t m = nag ? nag : 1;
	w->ag = malloc(m * sizeof *w->ag);
	w->rs = malloc((nrs ? nrs : 1) * sizeof *w->rs);
	w->id = malloc(m * sizeof *w->id);
	w->rs_before = malloc(m * sizeof *w->rs_before);
	w->z = malloc(m * sizeof *w->z);
	w->first = malloc((m + 1) * sizeof *w->first);
	w->plist = malloc(m * sizeof *w->plist);
	w->cnt = calloc(m, sizeof *w->cnt);
	w->stamp = calloc(m, sizeof *w->stamp);
	w->used = calloc(m, sizeof *w->used);
	w->cstart = malloc(m * sizeof *w->cstart);
	w->fstart = malloc(m * sizeof *w->fstart);
	w->bpos = malloc(m * sizeof *w->bpos);
	w->rs_in = malloc(m * sizeof *w->rs_in);
	w->bwd_in = malloc(m * sizeof *w->bwd_in);
	w->rec_in = malloc(m * sizeof *w->rec_in);
	w->again = malloc(m * sizeof *w->again);
	w->total = malloc(m * sizeof *w->total);
	w->kstamp = calloc(m, sizeof *w->kstamp);
	w->kval = malloc(m * sizeof *w->kval);
	w->rs_cycle = malloc((nrs ? nrs : 1) * sizeof *w->rs_cycle);
	w->rs_unit = malloc((nrs ? nrs : 1) * sizeof *w->rs_unit);
	w->ustamp = calloc(m, sizeof *w->ustamp);
	w->skip = calloc(m, sizeof *w->skip);
	w->g = malloc(m * sizeof *w->g);
	if (!w->ag || !w->rs || !w->id || !w->rs_before || !w->z || !w->first || !w->plist || !w->cnt || !w->stamp ||
	    !w->used || !w->cstart || !w->fstart || !w->bpos || !w->rs_in || !w->bwd_in || !w->rec_in || !w->again || !w->total || !w->kstamp ||
	    !w->kval || !w->rs_cycle || !w->rs_unit || !w->ustamp || !w->skip || !w->g)
		return -ENOMEM;
	size_t a = 0, r = 0;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].op == FSS_OP_ALLGATHER) {
			w->rs_before[a] = (uint32_t)r;
			w->ag[a++] = i;
		} else if (ev[i].op == FSS_OP_REDUCESCATTER) {
			w->rs[r++] = i;
		}
	}
	if (make_keys(w) < 0)
		return -ENOMEM;
	/* plist: every key's gathers in order (first[] counted them) */
	uint32_t *fill = w->cstart; /* scratch until the parses */
	memcpy(fill, w->first, w->nid * sizeof *fill);
	for (uint32_t i = 0; i < nag; i++)
		w->plist[fill[w->id[i]]++] = i;
	return 0;
}

/* A floating dtype a mixed-precision policy gathers parameters in (not a
 * byte-packed buffer: uint8 / int8 / float8 travel beside any). */
static int float_dtype(uint8_t d)
{
	return d == FSS_DTYPE_FLOAT16 || d == FSS_DTYPE_BFLOAT16 || d == FSS_DTYPE_FLOAT32 || d == FSS_DTYPE_FLOAT64;
}

/* S = the gathers [lead, lead + u): its keys and sizes, one gather at a
 * time (s_add) from none (s_reset). */
static void s_reset(struct work *w)
{
	memset(w->cnt, 0, w->nag * sizeof *w->cnt);
	w->s_dtypes = 0;
	w->s_min = UINT64_MAX;
	w->s_max = 0;
}

static void s_add(struct work *w, uint32_t i)
{
	const struct phases_event *e = &w->ev[w->ag[i]];
	w->cnt[w->id[i]]++;
	w->s_dtypes |= e->dtype < 32 ? 1u << e->dtype : 0;
	if (e->elements < w->s_min)
		w->s_min = e->elements;
	if (e->elements > w->s_max)
		w->s_max = e->elements;
}

/* Where S may begin: at the step's first gather, or where the gathers that
 * open the step change floating dtype (a weight sync of fp32 parameters
 * before a bf16 forward: the step is cut after the last reduction). */
static uint32_t leads(const struct work *w, uint32_t *out)
{
	uint32_t n = 0;
	out[n++] = 0;
	uint8_t first = FSS_DTYPE_UNKNOWN;
	for (uint32_t i = 0; i < w->nag && w->rs_before[i] == 0; i++) {
		uint8_t d = w->ev[w->ag[i]].dtype;
		if (!float_dtype(d))
			continue;
		if (first == FSS_DTYPE_UNKNOWN) {
			first = d;
		} else if (d != first) {
			out[n++] = i;
			break;
		}
	}
	return n;
}

/* Every prefix S that may be a forward, from every lead, parsed; the best
 * into g. Returns 1 when one holds. */
static int choose(struct work *w, struct phases_gather *g, uint32_t *best_lead, uint32_t *best_u, struct score *best)
{
	int found = 0;
	uint32_t lead[2], nlead = leads(w, lead);
	for (uint32_t l = 0; l < nlead; l++) {
		int all_equal = 1;
		uint8_t s_float = FSS_DTYPE_UNKNOWN;
		start_at(w, lead[l]);
		s_reset(w);
		for (uint32_t u = 1; lead[l] + u <= w->nag; u++) {
			uint32_t i = lead[l] + u - 1, first = w->id[lead[l]];
			if (w->rs_before[i] != 0)
				break; /* S ends before the first reduction */
			all_equal &= w->id[i] == first;
			uint8_t d = w->ev[w->ag[i]].dtype;
			if (float_dtype(d)) {
				if (s_float != FSS_DTYPE_UNKNOWN && d != s_float)
					break; /* one model's units travel in one floating dtype */
				s_float = d;
			}
			s_add(w, i);
			if (w->cnt[first] > 1 && !all_equal)
				break; /* S would begin with a key it holds again: that is two passes */
			uint32_t nc = 0;
			struct score sc;
			if (!parse_with(w, u, &nc, &sc))
				continue;
			/* the costlier evidence only where it can decide */
			if (found && best->violations == 0 && best->misplaced == 0 &&
			    (sc.irregular > best->irregular ||
			     (sc.irregular == best->irregular &&
			      sc.unexplained + sc.implicit > best->unexplained + best->unmatched + best->implicit)))
				continue;
			struct evidence ev;
			evidence(w, u, &ev);
			sc.violations = ev.violations;
			sc.misplaced = ev.misplaced;
			sc.unmatched = ev.unmatched;
			if (found && !score_better(&sc, best))
				continue;
			found = 1;
			*best = sc;
			*best_lead = lead[l];
			*best_u = u;
			memcpy(g, w->g, w->nag * sizeof *g);
		}
	}
	return found;
}

static int parse_events(const struct phases_event *ev, size_t n, struct phases_gather *g, struct phases_result *out)
{
	memset(out, 0, sizeof *out);
	out->first_training = -1;
	size_t nag = 0, nrs = 0;
	for (size_t i = 0; i < n; i++) {
		nag += ev[i].op == FSS_OP_ALLGATHER;
		nrs += ev[i].op == FSS_OP_REDUCESCATTER;
	}
	for (size_t i = 0; i < nag; i++)
		g[i] = (struct phases_gather){-1, -1, 0, 0, 0, 0};
	if (nag == 0) {
		out->status = PHASES_NO_GATHERS;
		return 0;
	}
	struct work w;
	int rc = work_new(&w, ev, n, nag, nrs);
	if (rc < 0)
		goto done;
	uint32_t lead = 0, u = 0, nc = 0;
	struct score best = {0};
	if (!choose(&w, g, &lead, &u, &best)) {
		out->status = PHASES_NO_PARSE;
		out->reductions = (uint32_t)nrs;
		out->reductions_fit = 1;
		goto done;
	}
	/* the chosen parse again, for its figures */
	start_at(&w, lead);
	s_reset(&w);
	for (uint32_t i = lead; i < lead + u; i++)
		s_add(&w, i);
	struct score sc;
	struct evidence e;
	parse_with(&w, u, &nc, &sc);
	evidence(&w, u, &e);
	describe(&w, u, nc, &sc, out);
	out->status = nrs ? PHASES_OK : PHASES_NO_REDUCTION;
	out->matched_reductions = e.matched;
	out->unreduced_units = nrs ? e.unreduced : 0;
	out->mirrored = (uint32_t)e.mirrored;
	rc = phases_reductions_fit(ev, n, g, out);
	int dominated = step_gathers_dominate(&w);
	if (rc == 0 || (rc > 0 && dominated)) {
		/* a reduce bucket across units, or gathers of no unit that move more
		 * than the units do: no FSDP structure */
		memset(out, 0, sizeof *out);
		out->status = PHASES_NO_PARSE;
		out->reductions = (uint32_t)nrs;
		out->first_training = -1;
		out->reductions_fit = rc > 0;
		out->step_gathers_dominate = (uint32_t)dominated;
		for (size_t i = 0; i < nag; i++)
			g[i] = (struct phases_gather){-1, -1, 0, 0, 0, 0};
		rc = 0;
	} else if (rc > 0) {
		out->reductions_fit = 1;
		rc = 0;
	}
done:
	work_free(&w);
	if (rc < 0)
		memset(out, 0, sizeof *out);
	return rc;
}

/* A dtype no parameter is gathered in: a wide integer (position ids, token
 * counts, routing indexes). Parameters travel as floats or byte-packed
 * (uint8 / int8 / float8). */
static int integer_dtype(uint8_t d)
{
	return d == FSS_DTYPE_INT32 || d == FSS_DTYPE_UINT32 || d == FSS_DTYPE_INT64 || d == FSS_DTYPE_UINT64;
}

int phases_parse(const struct phases_event *ev, size_t n, struct phases_gather *g, struct phases_result *out)
{
	size_t nint = 0, nag = 0;
	for (size_t i = 0; i < n; i++)
		if (ev[i].op == FSS_OP_ALLGATHER) {
			nag++;
			nint += integer_dtype(ev[i].dtype);
		}
	if (nint == 0 || nint == nag)
		return parse_events(ev, n, g, out);
	/* gathers no unit can be: parsed without, then per-step collectives
	 * in the cycle they fall in */
	struct phases_event *kept = malloc(n * sizeof *kept);
	struct phases_gather *kg = malloc((nag - nint) * sizeof *kg);
	if (!kept || !kg) {
		free(kept);
		free(kg);
		memset(out, 0, sizeof *out);
		return -ENOMEM;
	}
	size_t nk = 0;
	for (size_t i = 0; i < n; i++)
		if (!(ev[i].op == FSS_OP_ALLGATHER && integer_dtype(ev[i].dtype)))
			kept[nk++] = ev[i];
	int rc = parse_events(kept, nk, kg, out);
	int parsed = out->status == PHASES_OK || out->status == PHASES_NO_REDUCTION;
	int32_t cycle = 0;
	for (size_t i = 0, a = 0, k = 0; rc == 0 && i < n; i++) {
		if (ev[i].op != FSS_OP_ALLGATHER)
			continue;
		if (!integer_dtype(ev[i].dtype)) {
			g[a++] = kg[k];
			cycle = kg[k++].cycle;
		} else {
			g[a++] = (struct phases_gather){parsed ? (cycle >= 0 ? cycle : 0) : -1, -1, 0, 0, (uint8_t)parsed, 0};
		}
	}
	if (rc == 0 && parsed)
		out->step_gathers += (uint32_t)nint;
	free(kept);
	free(kg);
	return rc;
}
