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
 * The analyzer's files, one concept each (analyze_internal.h declares what
 * they share):
 *   analyze.c           life cycle, feeding records
 *   analyze_service.c   the per-rank streaming service: roles, NVTX / period steps
 *   analyze_summary.c   one step's summary, the step sample, the steady state
 *   analyze_trust.c     lost and cut steps, the step callback's view, struct analysis_trust
 *   analyze_structure.c the result's counts, units, phases, reshard, ledger, gathers
 *   analyze_exposure.c  the result's exposure section
 *   analyze_comms.c     the result's communicators
 *   analyze_finish.c    analyzer_finish and analyzer_snapshot: the result as a whole, and its
 *                       calls in flight (collector/flight.c keeps them from every record)
 *   analyze_traces.c    reading trace files: one, or several as one job
 *   analysis_names.c    option defaults and the report's names
 */
#include "collector/analyze_internal.h"

/* ---- life cycle ---------------------------------------------------------- */

int analyzer_new(analyzer_t **out, const struct analysis_options *opts)
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
	a->min_rank_seen = INT32_MAX;
	a->tl = timeline_new(a->opt.step_ranges, a->opt.compute_ranges);
	a->ranks = ranks_new();
	a->flight = flight_new();
	if (!a->tl || !a->ranks || !a->flight) {
		analyzer_free(a);
		return -ENOMEM;
	}
	*out = a;
	return 0;
}

void analyze_summary_free(struct step_summary *s)
{
	if (!s)
		return;
	free(s->ev);
	free(s->info);
	free(s);
}

static void rank_state_free(struct rank_state *rs)
{
	if (!rs)
		return;
	comm_roles_release(&rs->roles);
	free(rs->comm_events);
	steps_cutter_free(rs->cutter);
	for (unsigned i = 0; i < rs->nearly; i++)
		analyze_summary_free(rs->early[i]);
	free(rs->tev);
	free(rs->tinfo);
	free(rs->sample.gathers);
	free(rs);
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
	ranks_free(a->ranks);
	flight_free(a->flight);
	timeline_free(a->tl);
	free(a->step_events);
	free(a);
}

void analyzer_set_truncated(analyzer_t *a)
{
	a->truncated = 1;
}

void analyzer_on_step(analyzer_t *a, analysis_step_fn fn, void *ctx)
{
	a->on_step = fn;
	a->on_step_ctx = ctx;
}

struct rank_state *analyze_state_for(analyzer_t *a, struct tl_source *src)
{
	/* Records come a chunk of one source at a time: the last hit is nearly
	 * always the one (a session with hundreds of ranks spent a sixth of its
	 * time in the search below). */
	if (a->last_rs && a->last_rs->src == src)
		return a->last_rs;
	for (size_t i = 0; i < a->nrs; i++)
		if (a->rs[i]->src == src)
			return a->last_rs = a->rs[i];
	struct rank_state **v = realloc(a->rs, (a->nrs + 1) * sizeof *v);
	if (!v)
		return NULL;
	a->rs = v;
	struct rank_state *rs = calloc(1, sizeof *rs);
	if (!rs)
		return NULL;
	rs->src = src;
	rs->cutter = steps_cutter_new(0);
	if (!rs->cutter) {
		free(rs);
		return NULL;
	}
	rs->skip_left = a->opt.warmup_steps > 0 ? (uint32_t)a->opt.warmup_steps : 0;
	a->rs[a->nrs++] = rs;
	return a->last_rs = rs;
}

/* --keep (docs/keep.md): the collectives of a summarised step, and those
 * before the first of a last:N trace, are left out on purpose: taken as seen,
 * not as lost. */
static int keep_records(analyzer_t *a, struct tl_source *src, const struct fss_record_head *rec)
{
	struct rank_state *rs = analyze_state_for(a, src);
	if (!rs)
		return -ENOMEM;
	if (rec->type == FSS_REC_STEP_SUMMARY) {
		const struct fss_rec_step_summary *r = (const void *)rec;
		step_summaries_add(&a->kept, r);
		if (!r->collectives)
			return 0;
		/* forget ranges the taken events have passed; full: the last one grows */
		unsigned k = 0;
		for (unsigned i = 0; i < rs->nsummarised; i++)
			if (rs->summarised[i].hi > rs->seq_max)
				rs->summarised[k++] = rs->summarised[i];
		rs->nsummarised = k;
		struct seq_range *last = k ? &rs->summarised[k - 1] : NULL;
		if (last && (last->hi + 1 >= r->seq_first || k == ANALYZE_SEQ_LOOK)) {
			if (r->seq_last > last->hi)
				last->hi = r->seq_last;
			if (r->seq_first < last->lo)
				last->lo = r->seq_first;
		} else {
			rs->summarised[rs->nsummarised++] = (struct seq_range){r->seq_first, r->seq_last};
		}
		rs->calls_taken += r->collectives;
	} else if (rs->seq_max == 0 && rs->calls_taken == 0) {
		uint64_t seq = ((const struct fss_rec_collective *)rec)->seq;
		if (seq > 1)
			rs->seq_max = rs->calls_taken = seq - 1;
		/* its calls on each communicator are counted from where the trace
		 * starts, which differs from rank to rank: not matched across */
		rs->unmatched_from_loss = 1;
	}
	return 0;
}

void analyze_keep_finish(const analyzer_t *a, struct analysis_result *r)
{
	char kept[ANALYSIS_NOTE_BYTES];
	if (step_summaries_note(&a->kept, kept, sizeof kept))
		analyze_note(r, "%s", kept);
	if (!a->kept.steps && !a->kept.keep_flags)
		return;
	/* what a source's seq numbers miss on purpose is not missing */
	for (uint32_t i = 0; i < r->nsources; i++)
		for (size_t j = 0; j < a->nrs; j++)
			if (a->rs[j]->src->id == r->sources[i].source)
				r->sources[i].collectives_missing = analyze_source_lost(a->rs[j]);
}

void analyzer_set_keep(analyzer_t *a, uint32_t flags, uint32_t steps)
{
	a->kept.keep_flags = flags;
	a->kept.keep_steps = steps;
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
		struct rank_state *rs = analyze_state_for(a, src);
		if (!rs)
			return -ENOMEM;
		analyze_trust_record(rs, rec);
	}
	/* events complete at collective and group records; steps at ranges */
	if (rec->type != FSS_REC_COLLECTIVE && rec->type != FSS_REC_GROUP && rec->type != FSS_REC_NVTX_RANGE &&
	    rec->type != FSS_REC_GPU_INTERVAL && rec->type != FSS_REC_PROCESS_END)
		return 0;
	struct rank_state *rs = analyze_state_for(a, src);
	if (!rs)
		return -ENOMEM;
	rc = analyze_service(a, rs, 0);
	size_t pending = tl_array_len(&src->events) + tl_array_len(&src->ranges) + tl_array_len(&src->gpu) +
			 (rs->cutter ? steps_cutter_pending(rs->cutter) : 0);
	for (unsigned i = 0; i < rs->nearly; i++)
		pending += rs->early[i]->nev;
	if (pending > a->pending_max)
		a->pending_max = pending;
	return rc;
}

size_t analyzer_pending_max(const analyzer_t *a)
{
	return a->pending_max;
}
