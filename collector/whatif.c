/*
 * whatif.c - the what-if model: fit, replay, predictions (see whatif.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/ledger.h"
#include "collector/whatif.h"

/* Depths the replay tries when matching the recorded step. */
#define WHATIF_DEPTH_MAX 2

struct whatif_model {
	struct whatif_fit fits[WHATIF_FITS_MAX];
	uint32_t nfits;
	int prefetch_seen;
	uint32_t npreds, nleft;
	struct whatif_prediction preds[WHATIF_CHANGES];
	struct whatif_left_out left[WHATIF_CHANGES];
	char note[ANALYSIS_NOTE_BYTES];
};

/* One gather of the replay and the compute its arrival lets run. */
struct item {
	uint64_t dur, compute, bytes;
	uint64_t queue; /* background collectives (the gradient reduce-scatter of the unit computed just
			   before) issued on the gathers' stream at the end of the compute before it */
	int32_t nranks, unit, repeat, microbatch;
	uint8_t phase, recompute;
};

/* What a replay gives: the step's length, compute's wait on gathers (their
 * queue included) and the gathers' own time with compute idle (HTA's exposed). */
struct replay {
	uint64_t len, wait, exposed;
};

/* The items of a change, owned by the caller. */
struct items {
	struct item *v;
	size_t n;
	uint64_t pre; /* compute before the first gather's end */
	uint64_t first_start;
};

static const char *const change_names[WHATIF_CHANGES] = {
    "wrap=block", "reshard_after_forward=false", "reshard_after_forward=true", "prefetch=1", "prefetch=2",
};

const char *whatif_change_name(int change)
{
	return change >= 0 && change < WHATIF_CHANGES ? change_names[change] : "unknown";
}

/* ---- the fit ---- */

static struct whatif_fit *fit_slot(struct whatif_model *m, int32_t nranks)
{
	for (uint32_t i = 0; i < m->nfits; i++)
		if (m->fits[i].nranks == nranks)
			return &m->fits[i];
	if (m->nfits == WHATIF_FITS_MAX)
		return NULL;
	struct whatif_fit *f = &m->fits[m->nfits++];
	memset(f, 0, sizeof *f);
	f->nranks = nranks;
	return f;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Distinct send sizes of the communicator's timed gathers; scratch holds
 * r->ngathers entries. */
static uint32_t distinct_sizes(const struct analysis_result *r, int32_t nranks, uint64_t *scratch)
{
	size_t n = 0;
	for (uint32_t i = 0; i < r->ngathers; i++)
		if (r->gathers[i].nranks == nranks && r->gathers[i].duration_ns)
			scratch[n++] = r->gathers[i].bytes;
	qsort(scratch, n, sizeof *scratch, cmp_u64);
	uint32_t sizes = 0;
	for (size_t i = 0; i < n; i++)
		sizes += i == 0 || scratch[i] != scratch[i - 1];
	return sizes;
}

/* Whether the slope b of the line a + b x stands out of its own noise:
 * more than two standard errors. Late ranks stretch single gathers by more
 * than a small size step adds, and a slope drawn from them alone would
 * call latency-bound gathers bandwidth-bound. den is n Sxx - Sx^2. */
static int slope_beyond_noise(const struct analysis_result *r, int32_t nranks, double n, double den, double a,
			      double b)
{
	if (n < 3 || !(den > 0))
		return 1;
	double ss = 0;
	for (uint32_t i = 0; i < r->ngathers; i++) {
		const struct analysis_gather *g = &r->gathers[i];
		if (g->nranks != nranks || !g->duration_ns)
			continue;
		double e = (double)g->duration_ns - (a + b * (double)g->bytes);
		ss += e * e;
	}
	double se = sqrt(ss / (n - 2) / (den / n));
	return b > 2 * se;
}

/* Least squares of duration against bytes over the timed gathers of one
 * communicator; an intercept below zero is taken as zero (a line through
 * the origin) rather than a negative latency. */
static void fit_one(const struct analysis_result *r, struct whatif_fit *f, uint64_t *scratch)
{
	double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
	for (uint32_t i = 0; i < r->ngathers; i++) {
		const struct analysis_gather *g = &r->gathers[i];
		if (g->nranks != f->nranks || !g->duration_ns)
			continue;
		double x = (double)g->bytes, y = (double)g->duration_ns;
		n++, sx += x, sy += y, sxx += x * x, sxy += x * y;
	}
	f->points = (uint32_t)n;
	f->sizes = distinct_sizes(r, f->nranks, scratch);
	if (f->sizes < 2) {
		snprintf(f->why, sizeof f->why, "%u gathers of one size: latency and bandwidth cannot be told apart",
			 f->points);
		return;
	}
	double den = n * sxx - sx * sx;
	double b = den > 0 ? (n * sxy - sx * sy) / den : 0;
	double a = (sy - b * sx) / n;
	if (b > 0 && !slope_beyond_noise(r, f->nranks, n, den, a, b))
		b = 0;
	else if (a < 0) {
		a = 0;
		b = sxx > 0 ? sxy / sxx : 0;
	}
	if (!(b > 0)) {
		/* latency-bound: the sizes' transfer time is below the noise, so the
		 * line is flat at the mean and the bandwidth is not measured */
		a = sy / n;
		b = 0;
		snprintf(f->why, sizeof f->why, "durations do not grow with size beyond their noise over %u sizes: latency only",
			 f->sizes);
	}
	double ss = 0;
	for (uint32_t i = 0; i < r->ngathers; i++) {
		const struct analysis_gather *g = &r->gathers[i];
		if (g->nranks != f->nranks || !g->duration_ns)
			continue;
		double e = (double)g->duration_ns - (a + b * (double)g->bytes);
		ss += e * e;
	}
	f->fitted = 1;
	f->latency_ns = a;
	f->bytes_per_ns = b > 0 ? 1.0 / b : 0;
	f->residual_ns = sqrt(ss / n);
}

static int fit_all(const struct analysis_result *r, struct whatif_model *m)
{
	uint64_t *scratch = malloc((r->ngathers ? r->ngathers : 1) * sizeof *scratch);
	if (!scratch)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->ngathers; i++)
		if (r->gathers[i].duration_ns)
			fit_slot(m, r->gathers[i].nranks);
	for (uint32_t i = 0; i < m->nfits; i++)
		fit_one(r, &m->fits[i], scratch);
	free(scratch);
	return 0;
}

static const struct whatif_fit *fit_of(const struct whatif_model *m, int32_t nranks)
{
	for (uint32_t i = 0; i < m->nfits; i++)
		if (m->fits[i].nranks == nranks && m->fits[i].fitted)
			return &m->fits[i];
	return NULL;
}

static uint64_t fit_duration(const struct whatif_fit *f, uint64_t bytes)
{
	double d = f->latency_ns + (f->bytes_per_ns > 0 ? (double)bytes / f->bytes_per_ns : 0);
	return d > 0 ? (uint64_t)(d + 0.5) : 0;
}

/* ---- the replay ---- */

static int run_starts(const struct item *v, size_t k)
{
	return k == 0 || v[k].phase != v[k - 1].phase || v[k].microbatch != v[k - 1].microbatch;
}

/* Replay the items with prefetch depth `depth` (see whatif.h): one stream,
 * gathers in order; ready[] is scratch of n entries. */
static struct replay replay(const struct items *it, int depth, uint64_t *ready)
{
	struct replay out = {0, 0, 0};
	uint64_t comm_free = 0, compute_end = it->pre;
	size_t run = 0;
	for (size_t k = 0; k < it->n; k++) {
		const struct item *g = &it->v[k];
		if (run_starts(it->v, k))
			run = k;
		uint64_t issue;
		if (k == 0)
			issue = it->first_start < it->pre ? it->first_start : it->pre;
		else if (k == run || depth == 0)
			issue = compute_end;
		else
			issue = ready[k >= run + (size_t)depth ? k - (size_t)depth : run];
		uint64_t start, end;
		if (g->queue && issue < compute_end) { /* issued ahead: the reduction queues behind it */
			start = issue > comm_free ? issue : comm_free;
			end = start + g->dur;
			comm_free = (end > compute_end ? end : compute_end) + g->queue;
		} else {
			if (g->queue)
				comm_free = (comm_free > compute_end ? comm_free : compute_end) + g->queue;
			start = issue > comm_free ? issue : comm_free;
			end = start + g->dur;
			comm_free = end;
		}
		ready[k] = end > compute_end ? end : compute_end;
		out.wait += ready[k] - compute_end;
		uint64_t from = start > compute_end ? start : compute_end;
		out.exposed += end > from ? end - from : 0;
		compute_end = ready[k] + g->compute;
	}
	/* the step ends when compute and the stream have drained (the last
	 * reductions finish before the optimizer can use them) */
	out.len = compute_end > comm_free ? compute_end : comm_free;
	return out;
}

/* ---- the items of each change ---- */

/* One gradient reduce-scatter's time: each backward gather follows the
 * reduction of the unit computed before it on the stream (FSDP issues it
 * first, unless the gather was prefetched ahead of it). */
static uint64_t reduce_scatter_each(const struct analysis_result *r)
{
	uint32_t n = r->per_step.reduce_scatters;
	return n ? r->exposure.reduce_scatter_ns_per_step / n : 0;
}

static int items_recorded(const struct analysis_result *r, struct items *it)
{
	it->v = calloc(r->ngathers ? 2 * (size_t)r->ngathers : 1, sizeof *it->v);
	if (!it->v)
		return -ENOMEM;
	uint64_t after = 0, rs = reduce_scatter_each(r);
	for (uint32_t i = 0; i < r->ngathers; i++) {
		const struct analysis_gather *g = &r->gathers[i];
		it->v[i] = (struct item){g->duration_ns, g->compute_after_ns, g->bytes,
					 g->phase == ANALYSIS_PHASE_BACKWARD ? rs : 0, g->nranks, g->unit,
					 g->repeat, g->microbatch, g->phase, g->recompute};
		after += g->compute_after_ns;
	}
	it->n = r->ngathers;
	it->pre = r->breakdown.compute_ns > after ? r->breakdown.compute_ns - after : 0;
	it->first_start = r->ngathers ? r->gathers[0].start_offset_ns : 0;
	return 0;
}

static int items_copy(const struct items *from, struct items *to)
{
	*to = *from;
	to->v = calloc(from->n ? 2 * from->n : 1, sizeof *to->v);
	if (!to->v)
		return -ENOMEM;
	memcpy(to->v, from->v, from->n * sizeof *to->v);
	return 0;
}

/* reshard_after_forward=false: the non-root units' backward gathers go; the
 * compute each made ready stays, after the gather before it. */
static uint32_t items_drop_regathers(struct items *it)
{
	size_t out = 0;
	uint32_t dropped = 0;
	for (size_t k = 0; k < it->n; k++) {
		struct item *g = &it->v[k];
		if (g->phase == ANALYSIS_PHASE_BACKWARD && g->unit != 0 && !g->recompute) {
			if (out > 0)
				it->v[out - 1].compute += g->compute;
			else
				it->pre += g->compute;
			dropped++;
			continue;
		}
		it->v[out++] = *g;
	}
	it->n = out;
	return dropped;
}

/* reshard_after_forward=true on a job that keeps its units: each non-root
 * unit re-gathered in mirrored order after the forward, at its forward
 * gather's duration; the backward compute of a unit taken as twice its
 * forward (less where the recorded tail is shorter), the rest after the
 * last. Returns the gathers added. */
static uint32_t items_add_regathers(struct items *it, struct item *add, uint64_t rs)
{
	size_t last = 0, nf = 0;
	uint64_t fwd = 0;
	for (size_t k = 0; k < it->n; k++)
		if (it->v[k].phase != ANALYSIS_PHASE_BACKWARD)
			last = k, nf++;
	if (nf < 2)
		return 0;
	for (size_t k = 0; k < last; k++)
		if (it->v[k].unit != 0)
			fwd += it->v[k].compute;
	size_t others = 0;
	for (size_t k = 0; k < last; k++)
		others += it->v[k].unit != 0;
	uint64_t own = others ? fwd / others : 0; /* the last unit's forward, as the others' mean */
	uint64_t tail = it->v[last].compute > own ? it->v[last].compute - own : 0;
	double mult = fwd + own > 0 ? (double)tail / (double)(fwd + own) : 0;
	if (mult > 2)
		mult = 2;
	size_t na = 0;
	uint64_t used = 0;
	for (size_t k = last + 1; k-- > 0;) {
		const struct item *f = &it->v[k];
		if (f->phase == ANALYSIS_PHASE_BACKWARD || f->unit == 0)
			continue;
		add[na] = *f;
		add[na].phase = ANALYSIS_PHASE_BACKWARD;
		add[na].queue = rs;
		add[na].compute = (uint64_t)(mult * (double)(k == last ? own : f->compute));
		used += add[na].compute;
		na++;
	}
	if (na == 0)
		return 0;
	uint64_t rest = tail > used ? tail - used : 0;
	add[na - 1].compute += rest;
	it->v[last].compute = own < it->v[last].compute ? own : it->v[last].compute;
	memmove(&it->v[last + 1 + na], &it->v[last + 1], (it->n - last - 1) * sizeof *it->v);
	memcpy(&it->v[last + 1], add, na * sizeof *add);
	it->n += na;
	return (uint32_t)na;
}

/* wrap=block: the gathers of one copy of the repeat in one run merged into
 * one of their bytes, its duration from the fit. Returns the merged gathers'
 * count, or -1 when a communicator has no fit. */
static int items_merge_blocks(const struct whatif_model *m, struct items *it, uint64_t *block_bytes)
{
	size_t out = 0;
	int merged = 0;
	for (size_t k = 0; k < it->n;) {
		struct item g = it->v[k];
		size_t j = k + 1;
		while (g.repeat >= 0 && j < it->n && it->v[j].repeat == g.repeat && !run_starts(it->v, j) &&
		       it->v[j].nranks == g.nranks)
			g.bytes += it->v[j].bytes, g.compute += it->v[j].compute, g.queue += it->v[j].queue, j++;
		if (j - k > 1) {
			const struct whatif_fit *f = fit_of(m, g.nranks);
			if (!f)
				return -1;
			g.dur = fit_duration(f, g.bytes);
			/* the merged unit's reductions are one: one latency instead of j - k */
			uint64_t saved = (uint64_t)(f->latency_ns * (double)(j - k - 1));
			g.queue = g.queue > saved ? g.queue - saved : 0;
			*block_bytes = g.bytes;
			merged++;
		}
		it->v[out++] = g;
		k = j;
	}
	it->n = out;
	return merged;
}

/* ---- predictions ---- */

static void leave_out(struct whatif_model *m, enum whatif_change c, const char *why)
{
	struct whatif_left_out *l = &m->left[m->nleft++];
	l->change = c;
	snprintf(l->why, sizeof l->why, "%s", why);
}

/* The ledger's peak for the job with U, units and prefetch changed; 0 when
 * the ledger has no parameters. */
static uint64_t ledger_peak(const struct analysis_result *r, double unit_params, uint32_t units, int prefetch)
{
	const struct analysis_ledger *l = &r->ledger;
	if (!l->params)
		return 0;
	struct ledger_input in;
	ledger_input_defaults(&in);
	in.params = (double)l->params;
	in.ranks = l->ranks;
	in.units = units;
	in.largest_unit_params = unit_params;
	in.prefetch = prefetch;
	in.param_bytes = l->param_bytes;
	in.grad_bytes = l->grad_bytes;
	in.master_bytes = l->master_bytes;
	in.optimizer_bytes = l->optimizer_bytes;
	in.trainable_params = (double)l->trainable_params;
	in.params_with_padding = l->params_with_padding;
	struct analysis_ledger out;
	ledger_compute(&in, &out);
	return out.peak_state_bytes_per_rank;
}

/* Bytes a job that keeps its units (reshard_after_forward=false) holds from
 * forward to backward beyond the ledger's transient row: every non-root
 * unit gathered, as its forward gathers of the first cycle move them. */
static uint64_t kept_bytes(const struct analysis_result *r)
{
	if (r->reshard.policy != ANALYSIS_RESHARD_FALSE)
		return 0;
	uint64_t held = 0;
	for (uint32_t i = 0; i < r->ngathers; i++) {
		const struct analysis_gather *g = &r->gathers[i];
		if (g->phase != ANALYSIS_PHASE_BACKWARD && g->unit > 0 && g->microbatch <= 0)
			held += g->bytes * (uint64_t)(g->nranks > 0 ? g->nranks : 1);
	}
	return held;
}

/* The fits in words, for a basis. */
static int fits_words(const struct whatif_model *m, char *buf, size_t len)
{
	int at = 0;
	for (uint32_t i = 0; i < m->nfits && (size_t)at < len; i++) {
		const struct whatif_fit *f = &m->fits[i];
		if (f->fitted && f->bytes_per_ns <= 0)
			at += snprintf(buf + at, len - (size_t)at, "%s%d-rank gathers latency-bound at %.1f us (residual %.1f us, %u points, %u sizes)",
				       at ? "; " : "", f->nranks, f->latency_ns / 1e3, f->residual_ns / 1e3, f->points, f->sizes);
		else if (f->fitted)
			at += snprintf(buf + at, len - (size_t)at, "%s%d-rank gathers fitted at %.1f us + bytes / %.2f GB/s (residual %.1f us, %u points, %u sizes)",
				       at ? "; " : "", f->nranks, f->latency_ns / 1e3, f->bytes_per_ns, f->residual_ns / 1e3,
				       f->points, f->sizes);
		else
			at += snprintf(buf + at, len - (size_t)at, "%s%d-rank gathers not fitted (%s)", at ? "; " : "",
				       f->nranks, f->why);
	}
	return at;
}

static void predict(struct whatif_model *m, const struct analysis_result *r, enum whatif_change c,
		    struct replay base, struct replay alt, uint64_t peak, const char *what)
{
	struct whatif_prediction *p = &m->preds[m->npreds++];
	p->change = c;
	int64_t step = (int64_t)r->step_ns + (int64_t)alt.len - (int64_t)base.len;
	int64_t exposed =
	    (int64_t)r->exposure.exposed_allgather_ns_per_step + (int64_t)alt.exposed - (int64_t)base.exposed;
	p->step_ns = step > 0 ? (uint64_t)step : 0;
	p->exposed_allgather_ns = exposed > 0 ? (uint64_t)exposed : 0;
	if (p->exposed_allgather_ns > p->step_ns)
		p->exposed_allgather_ns = p->step_ns;
	if (peak && c != WHATIF_RESHARD_TRUE)
		peak += kept_bytes(r); /* the change keeps them kept */
	p->peak_known = peak != 0;
	p->peak_bytes = peak;
	char fits[200];
	fits_words(m, fits, sizeof fits);
	snprintf(p->basis, sizeof p->basis,
		 "replay of step %u's %u gathers on one stream, prefetch depth seen %d (its replay %.1f ms against %.1f ms measured), %s; %s",
		 r->exposure.step, r->ngathers, m->prefetch_seen, (double)base.len / 1e6, (double)r->step_ns / 1e6,
		 what, fits);
}

/* Share of the non-first gathers of their runs with compute under a tenth of
 * them or more: issued ahead of need. */
static int mostly_prefetched(const struct items *it, const struct analysis_result *r)
{
	uint32_t ahead = 0, total = 0;
	for (size_t k = 0; k < it->n; k++) {
		if (run_starts(it->v, k))
			continue;
		const struct analysis_gather *g = &r->gathers[k];
		total++;
		ahead += g->hide_ns * 10 >= g->duration_ns;
	}
	return total && 2 * ahead > total;
}

/* The depth whose replay of the recorded gathers waits closest to the
 * measured compute wait; ties (within 1% of the step) go to the smallest
 * depth, or the smallest above 0 when the gathers ran under compute. */
static int depth_seen(const struct analysis_result *r, const struct items *it, uint64_t *ready, struct replay *base)
{
	struct replay rp[WHATIF_DEPTH_MAX + 1];
	uint64_t err[WHATIF_DEPTH_MAX + 1], best = UINT64_MAX;
	uint64_t measured = r->exposure.compute_wait_ns_per_step;
	for (int d = 0; d <= WHATIF_DEPTH_MAX; d++) {
		rp[d] = replay(it, d, ready);
		err[d] = rp[d].wait > measured ? rp[d].wait - measured : measured - rp[d].wait;
		if (err[d] < best)
			best = err[d];
	}
	uint64_t slack = r->step_ns / 100;
	int from = mostly_prefetched(it, r) ? 1 : 0, seen = -1;
	for (int d = from; d <= WHATIF_DEPTH_MAX && seen < 0; d++)
		if (err[d] <= best + slack)
			seen = d;
	if (seen < 0)
		for (int d = 0; d <= WHATIF_DEPTH_MAX && seen < 0; d++)
			if (err[d] <= best + slack)
				seen = d;
	*base = rp[seen];
	return seen;
}

/* Why the model cannot be built on r at all, NULL when it can. */
static const char *model_refused(const struct analysis_result *r)
{
	if (r->verdict == ANALYSIS_BUCKETED)
		return "bucketed fetching (ZeRO-3): the gathers follow fetch buckets, not units, and the model replays units";
	if (r->verdict != ANALYSIS_DIAGNOSED)
		return "the trace was not diagnosed: no FSDP units to replay";
	if (r->ngathers == 0)
		return "no FSDP AllGather in the representative step: nothing to replay";
	if (r->exposure.source == ANALYSIS_EXPOSURE_NONE || !r->step_ns)
		return "no compute timing: the gathers cannot be placed against compute";
	for (uint32_t i = 0; i < r->ngathers; i++)
		if (!r->gathers[i].duration_ns)
			return "gathers of the representative step without an interval: nothing to fit";
	return NULL;
}

static int change_prefetch(struct whatif_model *m, const struct analysis_result *r, const struct items *rec,
			   uint64_t *ready, struct replay base, int depth)
{
	enum whatif_change c = depth == 1 ? WHATIF_PREFETCH_1 : WHATIF_PREFETCH_2;
	if (depth == m->prefetch_seen)
		return 0;
	char what[64];
	snprintf(what, sizeof what, "the same gathers replayed %d ahead", depth);
	predict(m, r, c, base, replay(rec, depth, ready),
		ledger_peak(r, (double)r->ledger.largest_unit_params, r->ledger.units, depth), what);
	return 0;
}

static int change_reshard(struct whatif_model *m, const struct analysis_result *r, const struct items *rec,
			  uint64_t *ready, struct replay base)
{
	enum analysis_reshard p = r->reshard.policy;
	uint64_t peak = ledger_peak(r, (double)r->ledger.largest_unit_params, r->ledger.units, m->prefetch_seen);
	struct items it;
	if (p == ANALYSIS_RESHARD_UNKNOWN) {
		leave_out(m, WHATIF_RESHARD_FALSE, "reshard_after_forward could not be told from the gathers");
		leave_out(m, WHATIF_RESHARD_TRUE, "reshard_after_forward could not be told from the gathers");
		return 0;
	}
	if (p != ANALYSIS_RESHARD_FALSE) {
		if (items_copy(rec, &it) < 0)
			return -ENOMEM;
		uint32_t dropped = items_drop_regathers(&it);
		char what[96];
		snprintf(what, sizeof what, "%u backward re-gathers removed, %" PRIu64 " bytes held from forward to backward",
			 dropped, r->reshard.retain_extra_bytes);
		uint64_t held = r->reshard.retain_extra_bytes;
		predict(m, r, WHATIF_RESHARD_FALSE, base, replay(&it, m->prefetch_seen, ready),
			peak && (held || !dropped) ? peak + held : 0, what);
		free(it.v);
	}
	if (p == ANALYSIS_RESHARD_FALSE || p == ANALYSIS_RESHARD_MIXED) {
		if (r->microbatches.per_step > 1) {
			leave_out(m, WHATIF_RESHARD_TRUE, "gradient accumulation: re-gathers per micro-batch are not modelled");
			return 0;
		}
		if (items_copy(rec, &it) < 0)
			return -ENOMEM;
		struct item *add = malloc((it.n + 1) * sizeof *add);
		if (!add) {
			free(it.v);
			return -ENOMEM;
		}
		uint32_t added = p == ANALYSIS_RESHARD_FALSE ? items_add_regathers(&it, add, reduce_scatter_each(r)) : 0;
		free(add);
		if (added == 0) {
			leave_out(m, WHATIF_RESHARD_TRUE, p == ANALYSIS_RESHARD_MIXED
							      ? "some units are kept already: which to reshard is not modelled"
							      : "no non-root unit to re-gather");
		} else {
			char what[128];
			snprintf(what, sizeof what, "%u re-gathers added at their forward durations, backward compute twice the forward's",
				 added);
			predict(m, r, WHATIF_RESHARD_TRUE, base, replay(&it, m->prefetch_seen, ready), peak, what);
		}
		free(it.v);
	}
	return 0;
}

static int change_wrap(struct whatif_model *m, const struct analysis_result *r, const struct items *rec,
		       uint64_t *ready, struct replay base)
{
	const struct analysis_units *u = &r->units;
	if (u->gathers_per_unit <= 1)
		return 0; /* wrapped per block (or coarser) already */
	if (u->repeating_units == 0) {
		leave_out(m, WHATIF_WRAP_BLOCK, "no repeating unit found: nothing to merge");
		return 0;
	}
	struct items it;
	if (items_copy(rec, &it) < 0)
		return -ENOMEM;
	uint64_t block_bytes = 0;
	int merged = items_merge_blocks(m, &it, &block_bytes);
	if (merged <= 0) {
		leave_out(m, WHATIF_WRAP_BLOCK, merged < 0 ? "the communicator of the merged gathers has no fit"
							    : "no gathers of one repeating unit to merge");
		free(it.v);
		return 0;
	}
	char what[128];
	snprintf(what, sizeof what, "%d gathers of %" PRIu64 " bytes, one per block, timed by the fit", merged,
		 block_bytes);
	uint64_t unit = u->repeating_unit_params > r->ledger.largest_unit_params ? u->repeating_unit_params
										 : r->ledger.largest_unit_params;
	uint32_t units = u->forward_units - (u->gathers_per_unit - 1) * u->repeating_units;
	predict(m, r, WHATIF_WRAP_BLOCK, base, replay(&it, m->prefetch_seen, ready),
		ledger_peak(r, (double)unit, units, m->prefetch_seen), what);
	free(it.v);
	return 0;
}

static int cmp_pred(const void *a, const void *b)
{
	const struct whatif_prediction *x = a, *y = b;

	return (x->change > y->change) - (x->change < y->change);
}

static int build(whatif_model_t *m, const struct analysis_result *r)
{
	const char *no = model_refused(r);
	if (no) {
		snprintf(m->note, sizeof m->note, "%s", no);
		return 0;
	}
	if (fit_all(r, m) < 0)
		return -ENOMEM;
	struct items rec = {0};
	uint64_t *ready = calloc(2 * (size_t)r->ngathers + 1, sizeof *ready);
	int rc = ready ? items_recorded(r, &rec) : -ENOMEM;
	if (rc == 0) {
		struct replay base;
		m->prefetch_seen = depth_seen(r, &rec, ready, &base);
		rc = change_wrap(m, r, &rec, ready, base);
		if (rc == 0)
			rc = change_reshard(m, r, &rec, ready, base);
		for (int d = 1; rc == 0 && d <= WHATIF_DEPTH_MAX; d++)
			rc = change_prefetch(m, r, &rec, ready, base, d);
		qsort(m->preds, m->npreds, sizeof *m->preds, cmp_pred);
	}
	free(rec.v);
	free(ready);
	return rc;
}

int whatif_new(const struct analysis_result *r, whatif_model_t **out)
{
	*out = NULL;
	whatif_model_t *m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;
	m->prefetch_seen = -1;
	int rc = build(m, r);
	if (rc < 0) {
		free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void whatif_free(whatif_model_t *m)
{
	free(m);
}

uint32_t whatif_count(const whatif_model_t *m)
{
	return m->npreds;
}

const struct whatif_prediction *whatif_get(const whatif_model_t *m, uint32_t i)
{
	return i < m->npreds ? &m->preds[i] : NULL;
}

uint32_t whatif_left_out_count(const whatif_model_t *m)
{
	return m->nleft;
}

const struct whatif_left_out *whatif_left_out_get(const whatif_model_t *m, uint32_t i)
{
	return i < m->nleft ? &m->left[i] : NULL;
}

const char *whatif_note(const whatif_model_t *m)
{
	return m->note;
}

uint32_t whatif_fit_count(const whatif_model_t *m)
{
	return m->nfits;
}

const struct whatif_fit *whatif_fit_get(const whatif_model_t *m, uint32_t i)
{
	return i < m->nfits ? &m->fits[i] : NULL;
}

int whatif_prefetch_seen(const whatif_model_t *m)
{
	return m->prefetch_seen;
}

/* What bounds a gather of g's size on g's communicator, by m's fits. */
static enum whatif_bound bound_with(const whatif_model_t *m, const struct analysis_gather *g)
{
	const struct whatif_fit *f = fit_of(m, g->nranks);
	if (!f)
		return WHATIF_BOUND_UNKNOWN;
	if (f->bytes_per_ns <= 0)
		return WHATIF_BOUND_LATENCY; /* the transfer time is below the fit's noise */
	return (double)g->bytes / f->bytes_per_ns < f->latency_ns ? WHATIF_BOUND_LATENCY : WHATIF_BOUND_BANDWIDTH;
}

enum whatif_bound whatif_model_bound(const whatif_model_t *m, const struct analysis_result *r, uint32_t gather)
{
	return gather < r->ngathers ? bound_with(m, &r->gathers[gather]) : WHATIF_BOUND_UNKNOWN;
}

enum whatif_bound whatif_bound_of(const struct analysis_result *r, const struct analysis_gather *g)
{
	whatif_model_t m;
	memset(&m, 0, sizeof m);
	if (!g || fit_all(r, &m) < 0)
		return WHATIF_BOUND_UNKNOWN;
	return bound_with(&m, g);
}

enum whatif_bound whatif_gather_bound(const struct analysis_result *r, uint32_t gather)
{
	return gather < r->ngathers ? whatif_bound_of(r, &r->gathers[gather]) : WHATIF_BOUND_UNKNOWN;
}
