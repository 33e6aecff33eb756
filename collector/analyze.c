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
 *   analyze.c           life cycle, feeding records, reading a trace file
 *   analyze_service.c   the per-rank streaming service: roles, NVTX / period steps
 *   analyze_summary.c   one step's summary, the step sample, the steady state
 *   analyze_trust.c     lost and cut steps, the step callback's view, struct analysis_trust
 *   analyze_structure.c the result's counts, units, phases, reshard, ledger, gathers
 *   analyze_exposure.c  the result's exposure section
 *   analyze_comms.c     the result's communicators
 *   analyze_finish.c    analyzer_finish and analyzer_snapshot: the result as a whole, and its
 *                       calls in flight (collector/flight.c keeps them from every record)
 *   analysis_names.c    option defaults and the report's names
 */
#include "collector/analyze_internal.h"

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
	a->min_rank_seen = INT32_MAX;
	a->tl = view ? timeline_new_on(view, a->opt.step_ranges, a->opt.compute_ranges)
		     : timeline_new(a->opt.step_ranges, a->opt.compute_ranges);
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

struct timeline *analyzer_timeline(analyzer_t *a)
{
	return a->tl;
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

/* ---- from a file ------------------------------------------------------- */

static int on_record(void *ctx, const struct fss_record_head *rec)
{
	return analyzer_feed(ctx, rec);
}

static int on_header(void *ctx, const struct fss_file_header *h)
{
	analyzer_set_keep(ctx, h->flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY), h->keep_steps);
	return 0;
}

/* How the file ended and what the reader skipped, for the report. */
static void result_set_read(struct analysis_result *r, const struct trace_read_info *info)
{
	static const char *const ends[] = {
		[TRACE_END_CLEAN] = "clean",
		[TRACE_END_NOT_MARKED] = "not-marked",
		[TRACE_END_MISSING] = "not-closed",
		[TRACE_END_CUT] = "cut",
	};

	r->trace.end = info->end < sizeof(ends) / sizeof(ends[0]) ? ends[info->end] : NULL;
	r->trace.gaps_total = info->damage.gaps;
	r->trace.ngaps = 0;
	for (size_t i = 0; i < info->ngaps && i < ANALYSIS_GAPS_MAX; i++) {
		struct analysis_gap *g = &r->trace.gaps[r->trace.ngaps++];

		g->offset = info->gaps[i].offset;
		g->bytes = info->gaps[i].bytes;
		g->first_missing = info->gaps[i].first_missing;
		g->chunks_missing = info->gaps[i].chunks_missing;
		g->to_end = info->gaps[i].to_end;
		snprintf(g->why, sizeof(g->why), "%s", info->gaps[i].why);
	}
}

int analyze_trace(const char *path, const struct analysis_options *opts, struct analysis_result **out, char *err,
		  size_t errlen)
{
	return analyze_trace_steps(path, opts, NULL, NULL, out, err, errlen);
}

int analyze_trace_steps(const char *path, const struct analysis_options *opts, analysis_step_fn fn, void *ctx,
			struct analysis_result **out, char *err, size_t errlen)
{
	*out = NULL;
	analyzer_t *a;
	int rc = analyzer_new(&a, opts);
	if (rc < 0) {
		if (errlen)
			snprintf(err, errlen, "out of memory");
		return rc;
	}
	analyzer_on_step(a, fn, ctx);
	struct trace_parser_ops ops = {.on_header = on_header, .on_record = on_record};
	struct trace_read_info info;
	rc = trace_read(path, &ops, a, &info);
	if (info.input != TRACE_INPUT_TRACE) {
		/* Empty, not a trace, an unreadable header, no records: nothing to
		 * analyse, and the reader's words say what the file is. */
		if (rc >= 0)
			rc = FSS_E_NOT_TRACE;
	} else if (rc == FSS_E_TRUNCATED || rc == FSS_E_CORRUPT) {
		/* Cut short, not closed by its writer, or damaged stretches
		 * skipped: analysed, and said to be incomplete. */
		analyzer_set_truncated(a);
		rc = 0;
	}
	if (rc == 0)
		rc = analyzer_finish(a, out);
	if (rc == 0)
		result_set_read(*out, &info);
	if (rc < 0 && errlen)
		snprintf(err, errlen, "%s", info.message[0] ? info.message : fss_strerror(rc));
	analyzer_free(a);
	return rc;
}
