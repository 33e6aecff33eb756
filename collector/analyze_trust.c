/*
 * analyze_trust.c - what the trace can vouch for: collectives lost in or at
 * the edges of a step (seq gaps), steps cut off where a source's records
 * stop, the drops and process_end records that tell of them, and the
 * result's struct analysis_trust.
 */
#include "collector/analyze_internal.h"

/* ---- what the trace can vouch for --------------------------------------- */

static int seq_range_cmp(const void *x, const void *y)
{
	const struct seq_range *p = x, *q = y;
	return p->lo < q->lo ? -1 : p->lo > q->lo;
}

/*
 * Collectives missing among the source's first n pending events or at their
 * edges. A source numbers its calls from 1 without a gap (docs/format.md):
 * a number missing is a call its agent could not record. Missing: seq numbers from just after the events taken before them
 * (seq_max) to just before the events after them (or, at the end, the calls
 * process_end counted), held by none of these events nor by the
 * ANALYZE_SEQ_LOOK taken before and pending after; a group whose calls span
 * more numbers than it holds lost the difference. Seq numbers do not say on
 * which side of a boundary a call was lost: a gap at an edge counts for the
 * stretches on both sides. The first and last missing numbers in *lo, *hi.
 * Returns -ENOMEM, else the count.
 */
static int64_t stretch_lost(const struct rank_state *rs, size_t n, uint64_t *lo, uint64_t *hi)
{
	const struct tl_source *src = rs->src;
	*lo = *hi = 0;
	if (n == 0)
		return 0;
	size_t ne = tl_array_len(&src->events), nl = ne - n < ANALYZE_SEQ_LOOK ? ne - n : ANALYZE_SEQ_LOOK;
	struct seq_range *v = malloc((rs->nrecent + rs->nsummarised + n + nl) * sizeof *v);
	if (!v)
		return -ENOMEM;
	size_t k = 0;
	uint64_t first = UINT64_MAX, last = 0, next = 0, lost = 0;
	for (unsigned i = 0; i < rs->nrecent; i++)
		v[k++] = rs->recent[i];
	for (unsigned i = 0; i < rs->nsummarised; i++)
		v[k++] = rs->summarised[i];
	for (size_t i = 0; i < n + nl; i++) {
		const struct tl_event *e = tl_array_at(&src->events, i);
		uint64_t top = e->seq_last >= e->seq_first ? e->seq_last : e->seq_first;
		v[k++] = (struct seq_range){e->seq_first, top};
		if (i >= n) {
			if (next == 0 || e->seq_first < next)
				next = e->seq_first;
			continue;
		}
		if (e->seq_first < first)
			first = e->seq_first;
		if (top > last)
			last = top;
		if (top - e->seq_first + 1 > e->calls) {
			if (!lost)
				*lo = e->seq_first;
			*hi = top;
			lost += top - e->seq_first + 1 - e->calls;
		}
	}
	if (nl == 0 && rs->has_end && rs->seq_end)
		next = rs->seq_end + 1;
	uint64_t from = rs->seq_max + 1 < first ? rs->seq_max + 1 : first;
	uint64_t to = next > last + 1 ? next - 1 : last;
	qsort(v, k, sizeof *v, seq_range_cmp);
	uint64_t at = from;
	for (size_t i = 0; i < k && at <= to; i++) {
		if (v[i].hi < at)
			continue;
		if (v[i].lo > at) {
			uint64_t end = v[i].lo <= to ? v[i].lo - 1 : to;
			if (!lost || at < *lo)
				*lo = at;
			if (end > *hi)
				*hi = end;
			lost += end - at + 1;
		}
		at = v[i].hi + 1;
	}
	if (at <= to) {
		if (!lost || at < *lo)
			*lo = at;
		if (to > *hi)
			*hi = to;
		lost += to - at + 1;
	}
	free(v);
	return (int64_t)lost;
}

/* Check the source's first n pending events (a step, or a stretch outside
 * the steps when t is NULL) for lost collectives. A rank that lost some is
 * matched across ranks no further: its later calls' numbers on their
 * communicator are shifted by the calls lost. Returns 0 or -ENOMEM. */
int analyze_check_lost(struct rank_state *rs, size_t n, struct step_trust *t)
{
	uint64_t lo, hi;
	int64_t lost = stretch_lost(rs, n, &lo, &hi);
	if (lost < 0)
		return (int)lost;
	if (lost)
		rs->unmatched_from_loss = 1;
	if (t) {
		t->why = lost ? STEP_LOST : STEP_CLEAN;
		t->lost = (struct lost_example){rs->ordinal, (uint64_t)lost, lo, hi};
	}
	return 0;
}

/* What the step callback is told of every step, analysed or left out. */
struct analysis_step_info analyze_step_info(const struct rank_state *rs, uint32_t ordinal, const struct tl_event *ev,
					   size_t n, uint64_t t0)
{
	uint32_t nag = 0;
	for (size_t i = 0; i < n; i++)
		nag += ev[i].op == FSS_OP_ALLGATHER;
	return (struct analysis_step_info){
		.rank = rs->src->rank,
		.source = rs->src->id,
		.ordinal = ordinal,
		.start_ns = t0,
		.events = (uint32_t)n,
		.allgathers = nag,
	};
}

/* The step's events for the callback, in a's buffer (grown as needed):
 * exposure, phase and unit from info when given (an analysed step's
 * summary), else unknown. -ENOMEM leaves si without events. */
int analyze_step_events(analyzer_t *a, const struct tl_event *ev, const struct ev_info *info, size_t n,
			struct analysis_step_info *si)
{
	si->nstep_events = 0;
	si->step_events = NULL;
	if (n > a->step_events_cap) {
		struct analysis_step_event *v = realloc(a->step_events, n * sizeof *v);
		if (!v)
			return -ENOMEM;
		a->step_events = v;
		a->step_events_cap = n;
	}
	for (size_t i = 0; i < n; i++) {
		const struct ev_info *in = info ? &info[i] : NULL;
		int gather = in && in->fsdp && ev[i].op == FSS_OP_ALLGATHER;
		a->step_events[i] = (struct analysis_step_event){
			.start_ns = ev[i].enter_ns,
			.end_ns = ev[i].exit_ns,
			.bytes = ev[i].bytes,
			.exposed_ns = gather ? in->exposed : 0,
			.calls = ev[i].calls,
			.unit = gather ? in->unit : -1,
			.op = ev[i].op,
			.phase = gather ? in->phase : 0,
			.role = ev[i].role,
		};
	}
	si->nstep_events = n;
	si->step_events = n ? a->step_events : NULL;
	return 0;
}

/* Count a step left out (after the warm-up it would have been skipped as). */
void analyze_step_exclude(analyzer_t *a, struct rank_state *rs, uint32_t ordinal, const struct step_trust *t,
			 const struct tl_event *ev, size_t n, uint64_t t0, uint64_t t1)
{
	if (t->why == STEP_LOST) {
		if (rs->steps_lost++ == 0) {
			rs->lost_first = t->lost;
			rs->lost_first.ordinal = ordinal;
		}
	} else {
		if (rs->steps_cut++ == 0)
			rs->cut_ordinal = ordinal;
	}
	if (!a->on_step)
		return;
	struct analysis_step_info si = analyze_step_info(rs, ordinal, ev, n, t0);
	si.step_ns = t1 > t0 ? t1 - t0 : 0;
	si.excluded = (int)t->why;
	(void)analyze_step_events(a, ev, NULL, n, &si); /* out of memory: the step without its events */
	a->on_step(a->on_step_ctx, &si);
}

static int rank_attached(const struct rank_state *rs)
{
	return rs->src->view && source_is_attached(rs->src->view);
}

/* A source's drops and process_end records: what it says it lost, and how
 * many calls it made. */
void analyze_trust_record(struct rank_state *rs, const struct fss_record_head *rec)
{
	if (rec->type == FSS_REC_DROPS) {
		const struct fss_rec_drops *d = (const void *)rec;
		rs->ring_dropped = d->ring_dropped;
		rs->sink_dropped = d->sink_dropped;
		rs->cupti_dropped = d->cupti_dropped;
		rs->nvtx_dropped = d->nvtx_dropped;
	} else if (rec->type == FSS_REC_PROCESS_END) {
		rs->has_end = 1;
		rs->seq_end = ((const struct fss_rec_process_end *)rec)->collectives;
	} else if (rec->type == FSS_REC_PROCESS_EXIT) {
		rs->reaped = 1;
		rs->wait_status = ((const struct fss_rec_process_exit *)rec)->wait_status;
		/* attach writes no process_end: an attached process the kernel saw
		 * exit 0 ended as one that wrote it (its count of calls unknown) */
		if (rank_attached(rs) && WIFEXITED(rs->wait_status) && WEXITSTATUS(rs->wait_status) == 0)
			rs->has_end = 1;
	}
}

/* Collectives a source lost: the seq numbers its events (taken, and any
 * still pending) and its process_end account for, less the calls it has. */
uint64_t analyze_source_lost(const struct rank_state *rs)
{
	uint64_t top = rs->seq_max, calls = rs->calls_taken;
	const struct tl_source *src = rs->src;
	for (size_t i = 0; i < tl_array_len(&src->events); i++) {
		const struct tl_event *e = tl_array_at(&src->events, i);
		calls += e->calls;
		if (e->seq_last > top)
			top = e->seq_last;
	}
	if (rs->has_end && rs->seq_end > top)
		top = rs->seq_end;
	return top > calls ? top - calls : 0;
}

/* The rank a trust note names: the lowest with what `has` looks for. */
static const struct rank_state *lowest_rank(const analyzer_t *a, int (*has)(const struct rank_state *))
{
	const struct rank_state *best = NULL;
	for (size_t i = 0; i < a->nrs; i++)
		if (a->rs[i]->src->collectives && has(a->rs[i]) && (!best || a->rs[i]->src->rank < best->src->rank))
			best = a->rs[i];
	return best;
}

static int has_lost_step(const struct rank_state *rs)
{
	return rs->steps_lost > 0;
}

int analyze_rank_stopped(const struct rank_state *rs)
{
	/* attach writes no process_end: an attached source stopped short only
	 * when the kernel saw its process die; without a process_exit it was
	 * still running when attach let it go (its records are whole) */
	if (rank_attached(rs))
		return rs->reaped && !rs->has_end;
	return !rs->has_end;
}

int analyze_rank_detached(const struct rank_state *rs)
{
	return rank_attached(rs) && !rs->reaped && !rs->has_end;
}

/* What the trace cannot vouch for, and the notes that say so. They come
 * before the other notes: a verdict is read with them. */
void analyze_fill_trust(const analyzer_t *a, const struct rank_state *h, struct analysis_result *r)
{
	struct analysis_trust *t = &r->trust;
	for (size_t i = 0; i < a->nrs; i++) {
		const struct rank_state *rs = a->rs[i];
		t->ring_dropped += rs->ring_dropped;
		t->sink_dropped += rs->sink_dropped;
		t->cupti_dropped += rs->cupti_dropped;
		t->nvtx_dropped += rs->nvtx_dropped;
		if (analyze_rank_stopped(rs))
			r->trace.sources_cut++;
		if (!rs->src->collectives)
			continue;
		uint64_t lost = analyze_source_lost(rs);
		t->collectives_lost += lost;
		t->ranks_lost += lost > 0;
		t->ranks_cut += analyze_rank_stopped(rs) != 0;
		t->steps_lost_all += rs->steps_lost;
		/* a detached source's last step was in progress when attach let
		 * go: left out, but not a step of a rank that stopped */
		if (!analyze_rank_detached(rs))
			t->steps_cut_all += rs->steps_cut;
	}
	if (h) {
		t->steps_lost = h->steps_lost;
		t->steps_cut = analyze_rank_detached(h) ? 0 : h->steps_cut;
	}
	uint64_t dropped = t->ring_dropped + t->sink_dropped + t->cupti_dropped + t->nvtx_dropped;
	t->records_unplaced = dropped > t->collectives_lost ? dropped - t->collectives_lost : 0;

	const struct rank_state *x = lowest_rank(a, has_lost_step);
	if (x) {
		const struct lost_example *e = &x->lost_first;
		char seqs[64];
		if (e->seq_hi - e->seq_lo + 1 == e->count)
			snprintf(seqs, sizeof seqs, "seq %llu-%llu", (unsigned long long)e->seq_lo,
				 (unsigned long long)e->seq_hi);
		else
			snprintf(seqs, sizeof seqs, "between seq %llu and %llu", (unsigned long long)e->seq_lo,
				 (unsigned long long)e->seq_hi);
		analyze_note(r, "step %u on rank %d lost %llu collective%s (%s): left out; %u step%s on %u rank%s left out so",
		     e->ordinal, x->src->rank, (unsigned long long)e->count, e->count == 1 ? "" : "s", seqs,
		     t->steps_lost_all, t->steps_lost_all == 1 ? "" : "s", t->ranks_lost, t->ranks_lost == 1 ? "" : "s");
	} else if (t->collectives_lost) {
		analyze_note(r, "%llu collectives lost outside the steps (gaps in the seq numbers): no step left out",
		     (unsigned long long)t->collectives_lost);
	}
	x = lowest_rank(a, analyze_rank_stopped);
	if (x && t->ranks_cut == 1) {
		char step[64] = "no step was in progress there", how[48] = "the trace was cut short, or the process died";
		if (x->steps_cut)
			snprintf(step, sizeof step, "step %u, in progress there, left out", x->cut_ordinal);
		if (x->reaped && WIFSIGNALED(x->wait_status))
			snprintf(how, sizeof how, "killed by signal %d", WTERMSIG(x->wait_status));
		else if (x->reaped && WIFEXITED(x->wait_status))
			snprintf(how, sizeof how, "it exited with status %d", WEXITSTATUS(x->wait_status));
		if (rank_attached(x))
			analyze_note(r, "rank %d's process ended while attached (%s): %s", x->src->rank, how, step);
		else
			analyze_note(r, "rank %d's records stop without its process_end (%s): %s", x->src->rank, how, step);
	} else if (x) {
		analyze_note(r, "the records of %u ranks stop without their process_end (the trace was cut short, or they died): "
			"%u step%s in progress there left out",
		     t->ranks_cut, t->steps_cut_all, t->steps_cut_all == 1 ? "" : "s");
	}
	uint32_t detached = 0, detached_steps = 0;
	for (size_t i = 0; i < a->nrs; i++)
		if (a->rs[i]->src->collectives && analyze_rank_detached(a->rs[i])) {
			detached++;
			detached_steps += a->rs[i]->steps_cut;
		}
	if (detached)
		analyze_note(r, "%u attached process%s " SOURCE_END_DETACHED_WORDS " when attach let go: %u step%s in "
				"progress there left out (not a fault)",
			     detached, detached == 1 ? "" : "es", detached_steps, detached_steps == 1 ? "" : "s");
	if (t->records_unplaced)
		analyze_note(r, "%llu records dropped (ring %llu, sink %llu, CUPTI %llu, NVTX %llu), %llu not collectives: "
			"exposure, NVTX steps and unit names may be off",
		     (unsigned long long)dropped, (unsigned long long)t->ring_dropped, (unsigned long long)t->sink_dropped,
		     (unsigned long long)t->cupti_dropped, (unsigned long long)t->nvtx_dropped,
		     (unsigned long long)t->records_unplaced);
}

