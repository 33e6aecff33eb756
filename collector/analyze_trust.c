/*
 * analyze_trust.c - what the trace can vouch for: collectives lost in or at
 * the edges of a step (seq gaps), steps cut off where a source's records
 * stop, the drops and process_end records that tell of them, and the
 * result's struct analysis_trust (see analyze_trust.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "collector/analyze_note.h"
#include "collector/analyze_trust.h"

static int seq_range_cmp(const void *x, const void *y)
{
	const struct seq_range *p = x, *q = y;
	return p->lo < q->lo ? -1 : p->lo > q->lo;
}

/*
 * Collectives missing among the source's first n pending events or at their
 * edges. A source numbers its calls from 1 without a gap (docs/format.md):
 * a number missing is a call its agent could not record. Missing: seq numbers from just after the events taken before
 * them (seq_max) to just before the events after them (or, at the end, the calls process_end counted), held by none of
 * these events nor by the ANALYZE_SEQ_LOOK taken before and pending after; a group whose calls span more numbers than
 * it holds lost the difference. Seq numbers do not say on which side of a boundary a call was lost: a gap at an edge
 * counts for the stretches on both sides. The first and last missing numbers in *lo, *hi. Returns -ENOMEM, else the
 * count.
 */
static int64_t stretch_lost(const struct rank_trust *rs, const struct tl_source *src, size_t n, uint64_t *lo,
			    uint64_t *hi)
{
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

int analyze_trust_check(struct rank_trust *t, const struct tl_source *src, size_t n, uint32_t ordinal,
			struct step_trust *out)
{
	uint64_t lo, hi;
	int64_t lost = stretch_lost(t, src, n, &lo, &hi);
	if (lost < 0)
		return (int)lost;
	if (lost)
		t->unmatched_from_loss = 1;
	if (out) {
		out->why = lost ? STEP_LOST : STEP_CLEAN;
		out->lost = (struct lost_example){ordinal, (uint64_t)lost, lo, hi};
	}
	return 0;
}

void analyze_trust_take(struct rank_trust *t, const struct tl_event *e)
{
	t->calls_taken += e->calls;
	if (e->seq_last > t->seq_max)
		t->seq_max = e->seq_last;
	t->recent[t->recent_at] = (struct seq_range){e->seq_first, e->seq_last};
	t->recent_at = (t->recent_at + 1) % ANALYZE_SEQ_LOOK;
	if (t->nrecent < ANALYZE_SEQ_LOOK)
		t->nrecent++;
}

void analyze_trust_exclude(struct rank_trust *t, uint32_t ordinal, const struct step_trust *why)
{
	if (why->why == STEP_LOST) {
		if (t->steps_lost++ == 0) {
			t->lost_first = why->lost;
			t->lost_first.ordinal = ordinal;
		}
	} else {
		if (t->steps_cut++ == 0)
			t->cut_ordinal = ordinal;
	}
}

void analyze_trust_summarised(struct rank_trust *t, const struct fss_rec_step_summary *r)
{
	if (!r->collectives)
		return;
	/* forget ranges the taken events have passed; full: the last one grows */
	unsigned k = 0;
	for (unsigned i = 0; i < t->nsummarised; i++)
		if (t->summarised[i].hi > t->seq_max)
			t->summarised[k++] = t->summarised[i];
	t->nsummarised = k;
	struct seq_range *last = k ? &t->summarised[k - 1] : NULL;
	if (last && (last->hi + 1 >= r->seq_first || k == ANALYZE_SEQ_LOOK)) {
		if (r->seq_last > last->hi)
			last->hi = r->seq_last;
		if (r->seq_first < last->lo)
			last->lo = r->seq_first;
	} else {
		t->summarised[t->nsummarised++] = (struct seq_range){r->seq_first, r->seq_last};
	}
	t->calls_taken += r->collectives;
}

void analyze_trust_keep_last(struct rank_trust *t, uint64_t seq)
{
	if (t->seq_max != 0 || t->calls_taken != 0)
		return;
	if (seq > 1)
		t->seq_max = t->calls_taken = seq - 1;
	/* its calls on each communicator are counted from where the trace
	 * starts, which differs from rank to rank: not matched across */
	t->unmatched_from_loss = 1;
}

static int rank_attached(const struct tl_source *src)
{
	return src->view && source_is_attached(src->view);
}

void analyze_trust_record(struct rank_trust *t, const struct tl_source *src, const struct fss_record_head *rec)
{
	if (rec->type == FSS_REC_DROPS) {
		const struct fss_rec_drops *d = (const void *)rec;
		t->ring_dropped = d->ring_dropped;
		t->sink_dropped = d->sink_dropped;
		t->cupti_dropped = d->cupti_dropped;
		t->nvtx_dropped = d->nvtx_dropped;
	} else if (rec->type == FSS_REC_PROCESS_END) {
		t->has_end = 1;
		t->seq_end = ((const struct fss_rec_process_end *)rec)->collectives;
	} else if (rec->type == FSS_REC_PROCESS_EXIT) {
		t->reaped = 1;
		t->wait_status = ((const struct fss_rec_process_exit *)rec)->wait_status;
		/* attach writes no process_end: an attached process the kernel saw
		 * exit 0 ended as one that wrote it (its count of calls unknown) */
		if (rank_attached(src) && WIFEXITED(t->wait_status) && WEXITSTATUS(t->wait_status) == 0)
			t->has_end = 1;
	}
}

uint64_t analyze_trust_lost(const struct rank_trust *t, const struct tl_source *src)
{
	uint64_t top = t->seq_max, calls = t->calls_taken;
	for (size_t i = 0; i < tl_array_len(&src->events); i++) {
		const struct tl_event *e = tl_array_at(&src->events, i);
		calls += e->calls;
		if (e->seq_last > top)
			top = e->seq_last;
	}
	if (t->has_end && t->seq_end > top)
		top = t->seq_end;
	return top > calls ? top - calls : 0;
}

int analyze_trust_stopped(const struct rank_trust *t, const struct tl_source *src)
{
	/* attach writes no process_end: an attached source stopped short only
	 * when the kernel saw its process die; without a process_exit it was
	 * still running when attach let it go (its records are whole) */
	if (rank_attached(src))
		return t->reaped && !t->has_end;
	/* a PyTorch profiler trace says nothing of how its process ended: its
	 * records are whole up to the end of the profiler's window */
	if (src->view && src->view->has_hello && src->view->path == FSS_PATH_KINETO)
		return 0;
	return !t->has_end;
}

int analyze_trust_detached(const struct rank_trust *t, const struct tl_source *src)
{
	/* a profiler trace's last step may be in progress where its window ends: as a detached source's */
	if (src->view && src->view->has_hello && src->view->path == FSS_PATH_KINETO)
		return 1;
	return rank_attached(src) && !t->reaped && !t->has_end;
}

/* ---- the result's trust section ----------------------------------------- */

static int has_lost_step(const struct rank_trust *t, const struct tl_source *src)
{
	(void)src;
	return t->steps_lost > 0;
}

/* The rank a trust note names: the lowest with what `has` looks for. */
static rank_state_t *lowest_rank(rank_state_t *const *rs, size_t nrs,
				 int (*has)(const struct rank_trust *, const struct tl_source *))
{
	rank_state_t *best = NULL;
	for (size_t i = 0; i < nrs; i++) {
		const struct tl_source *src = rank_state_source(rs[i]);
		if (src->collectives && has(rank_state_trust(rs[i]), src) &&
		    (!best || src->rank < rank_state_source(best)->rank))
			best = rs[i];
	}
	return best;
}

/* The trust section's sums over the ranks. */
static void trust_sums(rank_state_t *const *rs, size_t nrs, rank_state_t *h, struct analysis_result *r)
{
	struct analysis_trust *t = &r->trust;
	for (size_t i = 0; i < nrs; i++) {
		const struct rank_trust *x = rank_state_trust(rs[i]);
		const struct tl_source *src = rank_state_source(rs[i]);
		t->ring_dropped += x->ring_dropped;
		t->sink_dropped += x->sink_dropped;
		t->cupti_dropped += x->cupti_dropped;
		t->nvtx_dropped += x->nvtx_dropped;
		if (analyze_trust_stopped(x, src))
			r->trace.sources_cut++;
		if (!src->collectives)
			continue;
		uint64_t lost = analyze_trust_lost(x, src);
		t->collectives_lost += lost;
		t->ranks_lost += lost > 0;
		t->ranks_cut += analyze_trust_stopped(x, src) != 0;
		t->steps_lost_all += x->steps_lost;
		/* a detached source's last step was in progress when attach let
		 * go: left out, but not a step of a rank that stopped */
		if (!analyze_trust_detached(x, src))
			t->steps_cut_all += x->steps_cut;
	}
	if (h) {
		const struct rank_trust *x = rank_state_trust(h);
		t->steps_lost = x->steps_lost;
		t->steps_cut = analyze_trust_detached(x, rank_state_source(h)) ? 0 : x->steps_cut;
	}
	uint64_t dropped = t->ring_dropped + t->sink_dropped + t->cupti_dropped + t->nvtx_dropped;
	t->records_unplaced = dropped > t->collectives_lost ? dropped - t->collectives_lost : 0;
}

/* The note on lost collectives: the first step left out for them. */
static void note_lost(rank_state_t *const *rs, size_t nrs, struct analysis_result *r)
{
	const struct analysis_trust *t = &r->trust;
	rank_state_t *x = lowest_rank(rs, nrs, has_lost_step);
	if (x) {
		const struct lost_example *e = &rank_state_trust(x)->lost_first;
		char seqs[64];
		if (e->seq_hi - e->seq_lo + 1 == e->count)
			snprintf(seqs, sizeof seqs, "seq %llu-%llu", (unsigned long long)e->seq_lo,
				 (unsigned long long)e->seq_hi);
		else
			snprintf(seqs, sizeof seqs, "between seq %llu and %llu", (unsigned long long)e->seq_lo,
				 (unsigned long long)e->seq_hi);
		analyze_note(
		    r, "step %u on rank %d lost %llu collective%s (%s): left out; %u step%s on %u rank%s left out so",
		    e->ordinal, rank_state_source(x)->rank, (unsigned long long)e->count, e->count == 1 ? "" : "s",
		    seqs, t->steps_lost_all, t->steps_lost_all == 1 ? "" : "s", t->ranks_lost,
		    t->ranks_lost == 1 ? "" : "s");
	} else if (t->collectives_lost) {
		analyze_note(r, "%llu collective%s lost outside the steps (gaps in the seq numbers): no step left out",
			     (unsigned long long)t->collectives_lost, t->collectives_lost == 1 ? "" : "s");
	}
}

/* The note on ranks whose records stop short, and those attach let go. */
static void note_cut(rank_state_t *const *rs, size_t nrs, struct analysis_result *r)
{
	const struct analysis_trust *t = &r->trust;
	rank_state_t *x = lowest_rank(rs, nrs, analyze_trust_stopped);
	if (x && t->ranks_cut == 1) {
		const struct rank_trust *xt = rank_state_trust(x);
		const struct tl_source *src = rank_state_source(x);
		char step[64] = "no step was in progress there",
		     how[48] = "the trace was cut short, or the process died";
		if (xt->steps_cut)
			snprintf(step, sizeof step, "step %u, in progress there, left out", xt->cut_ordinal);
		if (xt->reaped && WIFSIGNALED(xt->wait_status))
			snprintf(how, sizeof how, "killed by signal %d", WTERMSIG(xt->wait_status));
		else if (xt->reaped && WIFEXITED(xt->wait_status))
			snprintf(how, sizeof how, "it exited with status %d", WEXITSTATUS(xt->wait_status));
		if (rank_attached(src))
			analyze_note(r, "rank %d's process ended while attached (%s): %s", src->rank, how, step);
		else
			analyze_note(r, "rank %d's records stop without its process_end (%s): %s", src->rank, how,
				     step);
	} else if (x) {
		analyze_note(r,
			     "the records of %u ranks stop without their process_end (the trace was cut short, or they "
			     "died): %u step%s in progress there left out",
			     t->ranks_cut, t->steps_cut_all, t->steps_cut_all == 1 ? "" : "s");
	}
	uint32_t detached = 0, detached_steps = 0;
	for (size_t i = 0; i < nrs; i++) {
		const struct tl_source *src = rank_state_source(rs[i]);
		if (src->collectives && rank_attached(src) && analyze_trust_detached(rank_state_trust(rs[i]), src)) {
			detached++;
			detached_steps += rank_state_trust(rs[i])->steps_cut;
		}
	}
	if (detached)
		analyze_note(r,
			     "%u attached process%s " SOURCE_END_DETACHED_WORDS " when attach let go: %u step%s in "
			     "progress there left out (not a fault)",
			     detached, detached == 1 ? "" : "es", detached_steps, detached_steps == 1 ? "" : "s");
}

void analyze_trust_fill(rank_state_t *const *rs, size_t nrs, rank_state_t *h, struct analysis_result *r)
{
	const struct analysis_trust *t = &r->trust;
	trust_sums(rs, nrs, h, r);
	note_lost(rs, nrs, r);
	note_cut(rs, nrs, r);
	if (t->records_unplaced) {
		uint64_t dropped = t->ring_dropped + t->sink_dropped + t->cupti_dropped + t->nvtx_dropped;
		analyze_note(
		    r,
		    "%llu records dropped (ring %llu, sink %llu, CUPTI %llu, NVTX %llu), %llu not collectives: "
		    "exposure, NVTX steps and unit names may be off",
		    (unsigned long long)dropped, (unsigned long long)t->ring_dropped,
		    (unsigned long long)t->sink_dropped, (unsigned long long)t->cupti_dropped,
		    (unsigned long long)t->nvtx_dropped, (unsigned long long)t->records_unplaced);
	}
}
