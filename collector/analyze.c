/*
 * analyze.c - drives the analysis from records to a result (see analyze.h).
 *
 * Per rank (trace source) the analysis goes through three states:
 *   undecided: events accumulate (and feed the period search) until either
 *              an NVTX step range arrives (NVTX steps) or the period is
 *              found (period steps);
 *   stepping:  each complete step is summarised (counts, exposure per
 *              gather, step figures) and its events, ranges and GPU
 *              intervals are released;
 *   at finish: the steady-state step of the headline rank is analysed for
 *              units, reshard policy, ledger and breakdown.
 * A step is complete when its events are in and, for a rank with CUPTI,
 * the GPU intervals up to its end have arrived (CUPTI delivers in buffers).
 *
 * The analyzer's stages, one concept (and one header) each; a rank's state
 * (rank_state.h) holds one part per stage:
 *   analyze.c            life cycle, feeding records, finishing
 *   analyze_service.c    the per-rank streaming service: roles, NVTX / period steps
 *   analyze_comms.c      communicator roles of a rank; the result's communicators
 *   analyze_summary.c    one step's summary: phases, intervals, names, exposure
 *   analyze_steady.c     the steady state: its step, the sample, the medians
 *   analyze_trust.c      lost and cut steps, struct analysis_trust
 *   analyze_callback.c   the step callback's view of a step
 *   analyze_finish.c     the result as a whole: ranks, verdict, the sections in order
 *   analyze_structure.c  the result's counts, units, reshard, gathers, ledger, sizes
 *   analyze_exposure.c   the result's exposure section
 *   analyze_note.c       the result's notes
 *   analyze_traces.c     reading trace files (the session library, fss_session)
 *   analysis_names.c     option defaults and the report's names
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "collector/analyze.h"
#include "collector/analyze_finish.h"
#include "collector/analyze_service.h"
#include "collector/analyze_trust.h"
#include "collector/analyze_worlds.h"
#include "collector/flight.h"
#include "collector/rank_state.h"
#include "collector/ranks.h"
#include "collector/step_summaries.h"
#include "collector/timeline.h"
#include "common/trace_format.h"

struct analyzer {
	uint64_t now_realtime_ns; /* analyzer_set_now: the instant waits in flight are measured to, 0 the trace's end */
	struct analysis_options opt;
	timeline_t *tl;
	ranks_t *ranks;
	struct analyze_env env;	 /* what the per-rank service shares (opt, tl, ranks, the step callback) */
	rank_state_t **rs;	 /* every rank met, in the order met */
	struct tl_source **srcs; /* [nrs] the source of each (state_for's search) */
	size_t nrs;
	rank_state_t *last_rs;	    /* the latest state_for answer */
	struct tl_source *last_src; /* its source */
	int truncated;
	int finished;
	size_t pending_max;
	struct step_summaries kept; /* what a --keep trace left out (keep_records) */
	flight_t *flight;	    /* calls in flight: hangs and mismatches (collector/flight.c) */
};

/* ---- life cycle ---------------------------------------------------------- */

int analyzer_new(analyzer_t **out, const struct analysis_options *opts)
{
	return analyzer_new_on(out, opts, NULL);
}

int analyzer_new_on(analyzer_t **out, const struct analysis_options *opts, sources_t *view)
{
	*out = NULL;
	analyzer_t *a = calloc(1, sizeof *a);
	if (!a)
		return -ENOMEM;
	if (opts)
		a->opt = *opts;
	else
		analysis_options_init(&a->opt);
	if (!a->opt.step_ranges)
		a->opt.step_ranges = ANALYSIS_DEFAULT_STEP_RANGES;
	if (!a->opt.compute_ranges)
		a->opt.compute_ranges = ANALYSIS_DEFAULT_COMPUTE_RANGES;
	if (a->opt.prefetch < 0)
		a->opt.prefetch = 0;
	if (!a->opt.hang_timeout_ns)
		a->opt.hang_timeout_ns = ANALYSIS_DEFAULT_HANG_TIMEOUT_NS;
	a->tl = view ? timeline_new_on(view, a->opt.step_ranges, a->opt.compute_ranges)
		     : timeline_new(a->opt.step_ranges, a->opt.compute_ranges);
	a->ranks = ranks_new();
	a->flight = flight_new();
	if (!a->tl || !a->ranks || !a->flight) {
		analyzer_free(a);
		return -ENOMEM;
	}
	a->env = (struct analyze_env){.opt = &a->opt, .tl = a->tl, .ranks = a->ranks, .min_rank_seen = INT32_MAX};
	*out = a;
	return 0;
}

void analyzer_set_now(analyzer_t *a, uint64_t realtime_ns)
{
	a->now_realtime_ns = realtime_ns;
}

void analyzer_free(analyzer_t *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nrs; i++)
		rank_state_free(a->rs[i]);
	free(a->rs);
	free(a->srcs);
	ranks_free(a->ranks);
	flight_free(a->flight);
	timeline_free(a->tl);
	analyze_callback_release(&a->env.callback);
	free(a);
}

void analyzer_set_truncated(analyzer_t *a)
{
	a->truncated = 1;
}

void analyzer_on_step(analyzer_t *a, analysis_step_fn fn, void *ctx)
{
	a->env.callback.fn = fn;
	a->env.callback.ctx = ctx;
}

struct timeline *analyzer_timeline(analyzer_t *a)
{
	return a->tl;
}

void analyzer_set_keep(analyzer_t *a, uint32_t flags, uint32_t steps)
{
	a->kept.keep_flags = flags;
	a->kept.keep_steps = steps;
}

/* The state of the rank whose records come from src, made on its first
 * record; NULL on ENOMEM. */
static rank_state_t *state_for(analyzer_t *a, struct tl_source *src)
{
	/* Records come a chunk of one source at a time: the last hit is nearly
	 * always the one (a session with hundreds of ranks spent a sixth of its
	 * time in the search below). */
	if (a->last_rs && a->last_src == src)
		return a->last_rs;
	for (size_t i = 0; i < a->nrs; i++)
		if (a->srcs[i] == src) {
			a->last_src = src;
			return a->last_rs = a->rs[i];
		}
	rank_state_t **v = realloc(a->rs, (a->nrs + 1) * sizeof *v);
	if (!v)
		return NULL;
	a->rs = v;
	struct tl_source **w = realloc(a->srcs, (a->nrs + 1) * sizeof *w);
	if (!w)
		return NULL;
	a->srcs = w;
	rank_state_t *rs;
	if (rank_state_new(&rs, src, a->opt.warmup_steps > 0 ? (uint32_t)a->opt.warmup_steps : 0) < 0)
		return NULL;
	a->srcs[a->nrs] = src;
	a->rs[a->nrs++] = rs;
	a->last_src = src;
	return a->last_rs = rs;
}

/* ---- feeding records ------------------------------------------------------ */

/* --keep (docs/keep.md): the collectives of a summarised step, and those
 * before the first of a last:N trace, are left out on purpose: taken as seen,
 * not as lost. */
static int keep_records(analyzer_t *a, struct tl_source *src, const struct fss_record_head *rec)
{
	rank_state_t *rs = state_for(a, src);
	if (!rs)
		return -ENOMEM;
	if (rec->type == FSS_REC_STEP_SUMMARY) {
		const struct fss_rec_step_summary *r = (const void *)rec;
		step_summaries_add(&a->kept, r);
		analyze_trust_summarised(rank_state_trust(rs), r);
	} else {
		analyze_trust_keep_last(rank_state_trust(rs), ((const struct fss_rec_collective *)rec)->seq);
	}
	return 0;
}

int analyzer_feed(analyzer_t *a, const struct fss_record_head *rec)
{
	struct tl_source *src;
	int rc = timeline_feed(a->tl, rec, &src);
	if (rc < 0 || !src)
		return rc;
	/* every record of a source, after the layer took it in (its view knows
	 * the communicators the calls name) */
	if ((rc = flight_feed(a->flight, src->view, rec)) < 0)
		return rc;
	if (rec->type == FSS_REC_STEP_SUMMARY)
		return keep_records(a, src, rec);
	if (rec->type == FSS_REC_COLLECTIVE && (a->kept.keep_flags & FSS_FILE_KEEP_LAST) &&
	    (rc = keep_records(a, src, rec)) < 0)
		return rc;
	if (rec->type == FSS_REC_DROPS || rec->type == FSS_REC_PROCESS_END || rec->type == FSS_REC_PROCESS_EXIT) {
		rank_state_t *rs = state_for(a, src);
		if (!rs)
			return -ENOMEM;
		analyze_trust_record(rank_state_trust(rs), src, rec);
	}
	/* events complete at collective and group records; steps at ranges */
	if (rec->type != FSS_REC_COLLECTIVE && rec->type != FSS_REC_GROUP && rec->type != FSS_REC_NVTX_RANGE &&
	    rec->type != FSS_REC_GPU_INTERVAL && rec->type != FSS_REC_PROCESS_END)
		return 0;
	rank_state_t *rs = state_for(a, src);
	if (!rs)
		return -ENOMEM;
	rc = analyze_service(&a->env, rs, 0);
	size_t pending = analyze_service_pending(rs);
	if (pending > a->pending_max)
		a->pending_max = pending;
	return rc;
}

size_t analyzer_pending_max(const analyzer_t *a)
{
	return a->pending_max;
}

/* ---- the result ---------------------------------------------------------- */

static int result_build(analyzer_t *a, struct analysis_result **out)
{
	/* a restart's earlier worlds had stopped when the next one started */
	int rc = analyze_worlds_stopped(a->flight, timeline_layer(a->tl));
	if (rc < 0)
		return rc;
	struct analyze_input in = {
	    .opt = &a->opt,
	    .tl = a->tl,
	    .ranks = a->ranks,
	    .flight = a->flight,
	    .rs = a->rs,
	    .nrs = a->nrs,
	    .kept = &a->kept,
	    .truncated = a->truncated,
	    .now_realtime_ns = a->finished ? 0 : a->now_realtime_ns,
	};
	return analyze_finish_build(&in, out);
}

int analyzer_finish(analyzer_t *a, struct analysis_result **out)
{
	*out = NULL;
	if (a->finished)
		return -EINVAL;
	a->finished = 1;
	int rc = timeline_flush_groups(a->tl);
	/* sources that have records but no rank state yet */
	for (size_t i = 0; rc == 0 && i < timeline_sources(a->tl); i++)
		if (!state_for(a, timeline_source(a->tl, i)))
			rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < a->nrs; i++)
		rc = analyze_service_final(&a->env, a->rs[i]);
	if (rc < 0)
		return rc;
	return result_build(a, out);
}

int analyzer_snapshot(analyzer_t *a, struct analysis_result **out)
{
	*out = NULL;
	if (a->finished)
		return -EINVAL;
	/* Read-only: a source with no rank state yet (no collective, drops or
	 * process_end record so far) adds nothing to the figures; creating its
	 * state here could change the order the ranks are looked at in. */
	return result_build(a, out);
}
