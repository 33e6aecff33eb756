/*
 * analyze_service.c - the per-rank streaming service: moves a rank forward
 * as far as its records allow (communicator roles, then NVTX steps or
 * period steps), hands each complete step to the summary and releases what
 * it no longer needs.
 */
#include "collector/analyze_internal.h"

/* Register a step's events with the cross-rank matcher. */
static int register_events(analyzer_t *a, struct rank_state *rs, const struct tl_event *ev, size_t n,
			   int with_index)
{
	int32_t gi = 0;
	if (rs->unmatched_from_loss)
		return 0;
	for (size_t i = 0; i < n; i++) {
		int32_t idx = -1;
		if (ev[i].op == FSS_OP_ALLGATHER && comm_role_is_fsdp(ev[i].role)) {
			if (with_index)
				idx = gi;
			gi++;
		}
		int rc = ranks_add(a->ranks, ev[i].comm_hash, ev[i].comm_index, ev[i].nranks, rs->src->rank,
				   ev[i].enter_ns + (uint64_t)rs->src->realtime_offset, idx);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Drop the first k events of the source (they have been used). */
static void take_events(struct rank_state *rs, size_t k)
{
	for (size_t i = 0; i < k; i++) {
		const struct tl_event *e = tl_array_at(&rs->src->events, i);
		rs->calls_taken += e->calls;
		if (e->seq_last > rs->seq_max)
			rs->seq_max = e->seq_last;
		rs->recent[rs->recent_at] = (struct seq_range){e->seq_first, e->seq_last};
		rs->recent_at = (rs->recent_at + 1) % ANALYZE_SEQ_LOOK;
		if (rs->nrecent < ANALYZE_SEQ_LOOK)
			rs->nrecent++;
	}
	tl_array_take(&rs->src->events, k);
	rs->src->events_base += k;
}

/* Release ranges and GPU intervals that ended by t (keep step ranges not
 * yet analysed when keep_steps). */
static void release_before(struct tl_source *src, uint64_t t, int keep_steps)
{
	struct tl_array *a = &src->ranges;
	size_t o = 0, n = tl_array_len(a);
	for (size_t i = 0; i < n; i++) {
		struct tl_range *r = tl_array_at(a, i);
		if (r->end <= t && !(keep_steps && r->is_step && r->start >= t))
			continue;
		*(struct tl_range *)tl_array_at(a, o++) = *r;
	}
	a->n = a->head + o;
	struct tl_array *g = &src->gpu;
	n = tl_array_len(g);
	o = 0;
	for (size_t i = 0; i < n; i++) {
		struct tl_gpu *x = tl_array_at(g, i);
		if (x->end <= t)
			continue;
		*(struct tl_gpu *)tl_array_at(g, o++) = *x;
	}
	g->n = g->head + o;
}

/* A candidate steady-state step of a rank: summarise, then aggregate or
 * buffer it (NVTX) or count it. */
static int candidate_step(analyzer_t *a, struct rank_state *rs, const struct tl_event *ev, size_t n, uint64_t t0,
			  uint64_t t1, const struct step_trust *trust)
{
	uint32_t ordinal = rs->ordinal++;
	if (rs->skip_left > 0) {
		rs->skip_left--;
		rs->warmup++;
		return 0;
	}
	if (trust->why != STEP_CLEAN) {
		analyze_step_exclude(a, rs, ordinal, trust, ev, n, t0, t1);
		return 0;
	}
	struct step_summary *s;
	int rc = analyze_summarise(a, rs, ev, n, t0, t1, &s);
	if (rc < 0)
		return rc;
	s->ordinal = ordinal;
	if (a->on_step) {
		struct analysis_step_info si = analyze_step_info(rs, ordinal, ev, n, t0);
		si.step_ns = s->fig[FIG_STEP];
		si.allgather_ns = s->fig[FIG_AG];
		si.exposed_allgather_ns = s->fig[FIG_AG_EXPOSED];
		si.compute_ns = s->fig[FIG_COMPUTE];
		si.exposed_comm_ns = s->fig[FIG_COMM_EXPOSED];
		si.exposure_source = s->exposure_source;
		si.compute_wait_ns = s->fig[FIG_AG_WAIT];
		si.other_compute_wait_ns = s->fig[FIG_OTHER_WAIT];
		if (s->phases.status == PHASES_OK && s->phases.cycles > s->phases.forward_only)
			si.microbatches = s->phases.cycles - s->phases.forward_only;
		(void)analyze_step_events(a, ev, s->info, n, &si); /* out of memory: the step without its events */
		a->on_step(a->on_step_ctx, &si);
	}
	if (rs->mode == MODE_PERIOD) {
		rc = analyze_aggregate(a, rs, s);
		analyze_summary_free(s);
		return rc;
	}
	if (!rs->decided) {
		rs->early[rs->nearly++] = s;
		if (rs->nearly == ANALYZE_EARLY_STEPS)
			return analyze_decide_template(a, rs);
		return 0;
	}
	if (s->hash == rs->tmpl_hash)
		rc = analyze_aggregate(a, rs, s);
	else
		rs->irregular++;
	analyze_summary_free(s);
	return rc;
}

/* Does this rank have GPU data up to t (or no GPU data to wait for)? */
static int gpu_ready(const analyzer_t *a, const struct tl_source *src, uint64_t t)
{
	if (a->opt.force_host_timing)
		return 1;
	int has_gpu = (src->features & FSS_FEATURE_CUPTI) || tl_array_len(&src->gpu) > 0;
	return !has_gpu || src->gpu_seen_end >= t || src->ended;
}

/* ---- NVTX steps ---------------------------------------------------------- */

static int nvtx_steps(analyzer_t *a, struct rank_state *rs, int final)
{
	struct tl_source *src = rs->src;
	/* Nothing new to look at (the scan below reads every pending range):
	 * no step range since the last look, and the GPU intervals the oldest
	 * step waited for have not come. */
	uint64_t have = src->events_base + tl_array_len(&src->events);
	int new_event = rs->nvtx_event_wait && have > rs->nvtx_events_seen;
	if (!final && src->step_ranges == rs->nvtx_seen && !new_event &&
	    (rs->nvtx_gpu_wait == 0 || !gpu_ready(a, src, rs->nvtx_gpu_wait)))
		return 0;
	rs->nvtx_seen = src->step_ranges;
	rs->nvtx_gpu_wait = 0;
	rs->nvtx_event_wait = 0;
	for (;;) {
		/* the oldest step range not analysed, and how many wait */
		struct tl_range step = {0};
		size_t waiting = 0, nr = tl_array_len(&src->ranges);
		for (size_t i = 0; i < nr; i++) {
			const struct tl_range *r = tl_array_at(&src->ranges, i);
			if (!r->is_step)
				continue;
			if (r->start < rs->last_t1 && rs->last_t1) {
				continue; /* nested in or overlapping one analysed: a second marker */
			}
			if (waiting++ == 0)
				step = *r;
		}
		if (waiting == 0)
			return 0;
		if (!final && !gpu_ready(a, src, step.end) && waiting < ANALYZE_MAX_WAITING_STEPS) {
			rs->nvtx_gpu_wait = step.end;
			return 0;
		}
		/* events before the step: outside any step */
		size_t ne = tl_array_len(&src->events), before = 0, in = 0;
		while (before < ne && ((struct tl_event *)tl_array_at(&src->events, before))->enter_ns < step.start)
			before++;
		while (before + in < ne &&
		       ((struct tl_event *)tl_array_at(&src->events, before + in))->enter_ns < step.end)
			in++;
		/* the event after the step shows whether calls were lost at its end */
		if (!final && before + in == ne && !src->ended && waiting == 1) {
			rs->nvtx_event_wait = 1;
			rs->nvtx_events_seen = have;
			return 0;
		}
		int rc = analyze_check_lost(rs, before, NULL);
		if (before && rc == 0) {
			rc = register_events(a, rs, tl_array_at(&src->events, 0), before, 0);
			rs->outside_events += before;
			take_events(rs, before);
		}
		const struct tl_event *ev = in ? tl_array_at(&src->events, 0) : NULL;
		int is_headline = analyze_wants_detail(a, rs);
		struct step_trust trust;
		if (rc == 0)
			rc = analyze_check_lost(rs, in, &trust);
		if (rc == 0)
			rc = register_events(a, rs, ev, in, is_headline);
		if (rc == 0)
			rc = candidate_step(a, rs, ev, in, step.start, step.end, &trust);
		if (rc < 0)
			return rc;
		take_events(rs, in);
		rs->last_t1 = step.end;
		release_before(src, step.end, 1);
	}
}

/* ---- period steps ------------------------------------------------------- */

static int period_steps(analyzer_t *a, struct rank_state *rs, int final)
{
	struct tl_source *src = rs->src;
	for (;;) {
		if (!rs->have_held) {
			int got = steps_cutter_next(rs->cutter, final, &rs->held);
			if (got < 0)
				return got;
			if (!got)
				return 0;
			rs->have_held = 1;
		}
		struct steps_cut *c = &rs->held;
		if (c->first != rs->filtered_taken)
			return -EINVAL; /* cuts follow the events: a bug */
		/* The cutter sees the data-parallel side only: the cut's source
		 * events run up to the next data-parallel event after its own (the
		 * tensor-parallel traffic in between belongs to the step). */
		size_t ne = tl_array_len(&src->events), span;
		uint64_t seen = 0;
		int next_known = 0;
		for (span = 0; span < ne; span++) {
			const struct tl_event *e = tl_array_at(&src->events, span);
			if (!comm_role_in_steps(e->role))
				continue;
			if (seen == c->count) {
				next_known = 1;
				break;
			}
			seen++;
		}
		if (!next_known && !final)
			return 0;
		const struct tl_event *ev = span ? tl_array_at(&src->events, 0) : NULL;
		uint64_t t0 = span ? ev[0].enter_ns : 0, t1 = t0;
		if (next_known) {
			t1 = ((const struct tl_event *)tl_array_at(&src->events, span))->enter_ns;
		} else {
			for (size_t i = 0; i < span; i++)
				if (ev[i].exit_ns > t1)
					t1 = ev[i].exit_ns;
		}
		if (!final && !gpu_ready(a, src, t1))
			return 0;
		struct step_trust trust;
		int rc = analyze_check_lost(rs, span, &trust);
		if (rc < 0)
			return rc;
		switch (c->kind) {
		case STEPS_REGULAR:
			/* no event after it, no process_end: the trace stops in or right after it */
			if (trust.why == STEP_CLEAN && !next_known && !rs->has_end)
				trust.why = STEP_CUT;
			rc = register_events(a, rs, ev, span, analyze_wants_detail(a, rs));
			if (rc == 0)
				rc = candidate_step(a, rs, ev, span, t0, t1, &trust);
			break;
		case STEPS_WARMUP:
			rs->warmup += c->steps;
			rs->ordinal += c->steps;
			rs->skip_left = rs->skip_left > c->steps ? rs->skip_left - c->steps : 0;
			rs->outside_events += span;
			rc = register_events(a, rs, ev, span, 0);
			break;
		case STEPS_IRREGULAR:
			/* a stretch that lost calls no longer matches the step: it is
			 * the steps it stands for that lost them */
			if (trust.why == STEP_LOST) {
				for (uint32_t k = 0; k < (c->steps ? c->steps : 1); k++)
					analyze_step_exclude(a, rs, rs->ordinal++, &trust, ev, span, t0, t1);
			} else {
				rs->irregular += c->steps;
				rs->ordinal += c->steps;
			}
			rs->outside_events += span;
			rc = register_events(a, rs, ev, span, 0);
			break;
		default:
			rs->trailing++;
			if (span && !rs->has_end) { /* the step its records stop in */
				trust.why = STEP_CUT;
				analyze_step_exclude(a, rs, rs->ordinal++, &trust, ev, span, t0, t1);
			}
			rs->outside_events += span;
			rc = register_events(a, rs, ev, span, 0);
			break;
		}
		if (rc < 0)
			return rc;
		rs->filtered_taken += c->count;
		take_events(rs, span);
		release_before(src, t1, 0);
		rs->have_held = 0;
	}
}

/* Move a rank forward as far as its records allow. */
int analyze_service(analyzer_t *a, struct rank_state *rs, int final)
{
	struct tl_source *src = rs->src;
	if (src->rank >= 0 && src->rank < a->min_rank_seen)
		a->min_rank_seen = src->rank;
	uint64_t have = src->events_base + tl_array_len(&src->events);
	if (!rs->roles_decided) {
		/* roles first, from a window of events (nothing is cut before): the
		 * window, or three NVTX steps' events (steps wait, with their ranges,
		 * until then) */
		size_t len = tl_array_len(&src->events);
		if (!final && len < ANALYZE_ROLE_WINDOW && src->step_ranges < ANALYZE_ROLE_STEPS)
			return 0;
		int rc = comm_roles_decide(a->tl, src, len ? tl_array_at(&src->events, 0) : NULL, len, a->opt.fsdp_comm,
					   &rs->roles);
		if (rc < 0)
			return rc;
		rs->roles_decided = 1;
	}
	if (rs->ncomm_events < src->ncomms) {
		uint64_t *v = realloc(rs->comm_events, src->ncomms * sizeof *v);
		if (!v)
			return -ENOMEM;
		memset(v + rs->ncomm_events, 0, (src->ncomms - rs->ncomm_events) * sizeof *v);
		rs->comm_events = v;
		rs->ncomm_events = src->ncomms;
	}
	for (uint64_t i = rs->roled; i < have; i++) {
		struct tl_event *e = tl_array_at(&src->events, (size_t)(i - src->events_base));
		e->role = comm_roles_of(&rs->roles, e->comm_slot);
		if (e->comm_slot < rs->ncomm_events)
			rs->comm_events[e->comm_slot]++;
	}
	rs->roled = have;
	if (rs->mode != MODE_NVTX) {
		for (uint64_t i = rs->fed; i < have; i++) {
			const struct tl_event *e = tl_array_at(&src->events, (size_t)(i - src->events_base));
			if (!comm_role_in_steps(e->role))
				continue;
			int rc = steps_cutter_push(rs->cutter, e->sig, e->op);
			if (rc < 0)
				return rc;
		}
		rs->fed = have;
	}
	if (rs->mode == MODE_UNDECIDED) {
		if (src->step_ranges > 0) {
			rs->mode = MODE_NVTX;
			steps_cutter_free(rs->cutter); /* not needed: release its window */
			rs->cutter = NULL;
		} else {
			/* run the period search; a first cut (or giving up) decides */
			int got = steps_cutter_next(rs->cutter, final, &rs->held);
			if (got < 0)
				return got;
			rs->have_held = got;
			if (!got && !final && steps_cutter_period(rs->cutter) == 0)
				return 0;
			rs->mode = MODE_PERIOD;
		}
	}
	if (rs->mode == MODE_NVTX) {
		int rc = nvtx_steps(a, rs, final);
		if (rc < 0)
			return rc;
		if (final) {
			/* events after the last step range: not a step; without a
			 * process_end, the step its records stop in */
			size_t left = tl_array_len(&src->events);
			const struct tl_event *ev = left ? tl_array_at(&src->events, 0) : NULL;
			if (left && !rs->has_end) {
				struct step_trust cut = {.why = STEP_CUT};
				analyze_step_exclude(a, rs, rs->ordinal++, &cut, ev, left, ev[0].enter_ns, ev[left - 1].exit_ns);
			}
			rc = analyze_check_lost(rs, left, NULL);
			if (rc == 0)
				rc = register_events(a, rs, left ? tl_array_at(&src->events, 0) : NULL, left, 0);
			rs->outside_events += left;
			take_events(rs, left);
			if (rc == 0 && !rs->decided)
				rc = analyze_decide_template(a, rs);
		}
		return rc;
	}
	/* period mode: step ranges are not used, release them as we go */
	return period_steps(a, rs, final);
}
