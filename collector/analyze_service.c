/*
 * analyze_service.c - the per-rank streaming service (see
 * analyze_service.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "collector/analyze_comms.h"
#include "collector/analyze_figures.h"
#include "collector/analyze_note.h"
#include "collector/analyze_service.h"
#include "collector/analyze_steady.h"
#include "collector/analyze_summary.h"
#include "collector/analyze_trust.h"
#include "collector/comm_roles.h"
#include "collector/worlds.h"
#include "common/record.h"

int analyze_service_init(struct rank_walk *w, uint32_t warmup_steps)
{
	w->cutter = steps_cutter_new(0);
	if (!w->cutter)
		return -ENOMEM;
	w->skip_left = warmup_steps;
	return 0;
}

void analyze_service_release(struct rank_walk *w)
{
	steps_cutter_free(w->cutter);
	w->cutter = NULL;
}

/* Is this rank one whose per-gather figures may be reported? */
static int wants_detail(const struct analyze_env *env, const struct tl_source *src)
{
	if (env->opt->rank >= 0)
		return src->rank == env->opt->rank || src->rank < 0;
	return src->rank <= env->min_rank_seen;
}

/* Register a step's events with the cross-rank matcher. */
static int register_events(struct analyze_env *env, rank_state_t *rs, const struct tl_event *ev, size_t n,
			   int with_index)
{
	const struct tl_source *src = rank_state_source(rs);
	int32_t gi = 0;
	if (rank_state_trust(rs)->unmatched_from_loss)
		return 0;
	/* its world's key: two worlds' rank 0s never share a total */
	uint64_t key = src->view ? worlds_source_key(src->view) : 0;
	for (size_t i = 0; i < n; i++) {
		int32_t idx = -1;
		if (ev[i].op == FSS_OP_ALLGATHER && comm_roles_event_primary(&ev[i])) {
			if (with_index)
				idx = gi;
			gi++;
		}
		struct ranks_call call = {
		    .key = key,
		    .comm_hash = ev[i].comm_hash,
		    .comm_index = ev[i].comm_index,
		    .nranks = ev[i].nranks,
		    .rank = src->rank,
		    .source = src->id,
		    .enter_ns = ev[i].enter_ns + (uint64_t)src->realtime_offset,
		    .gather_index = idx,
		};
		int rc = ranks_add(env->ranks, &call);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Drop the first k events of the source (they have been used), after the
 * rank's figures took them. Returns 0 or -ENOMEM. */
static int take_events(rank_state_t *rs, size_t k)
{
	struct tl_source *src = rank_state_source(rs);
	struct rank_trust *t = rank_state_trust(rs);
	int rc = analyze_figures_events(rank_state_figures(rs), src, k ? tl_array_at(&src->events, 0) : NULL, k);
	for (size_t i = 0; i < k; i++)
		analyze_trust_take(t, tl_array_at(&src->events, i));
	tl_array_take(&src->events, k);
	src->events_base += k;
	return rc;
}

/* Release ranges and GPU intervals that ended by t (keep step ranges not
 * yet analysed when keep_steps), handing each to the rank's figures.
 * Returns 0 or -ENOMEM. */
static int release_before(rank_state_t *rs, uint64_t t, int keep_steps)
{
	struct tl_source *src = rank_state_source(rs);
	struct rank_figures *fig = rank_state_figures(rs);
	struct tl_array *a = &src->ranges;
	size_t o = 0, n = tl_array_len(a);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		struct tl_range *r = tl_array_at(a, i);
		if (r->end <= t && !(keep_steps && r->is_step && r->start >= t)) {
			if (rc == 0)
				rc = analyze_figures_range(fig, r);
			continue;
		}
		*(struct tl_range *)tl_array_at(a, o++) = *r;
	}
	a->n = a->head + o;
	struct tl_array *g = &src->gpu;
	n = tl_array_len(g);
	o = 0;
	for (size_t i = 0; i < n; i++) {
		struct tl_gpu *x = tl_array_at(g, i);
		if (x->end <= t) {
			if (rc == 0)
				rc = analyze_figures_gpu(fig, x);
			continue;
		}
		*(struct tl_gpu *)tl_array_at(g, o++) = *x;
	}
	g->n = g->head + o;
	return rc;
}

/* Count a step left out (after the warm-up it would have been skipped as)
 * and tell the callback and the rank's figures. Returns 0 or -ENOMEM. */
static int exclude_step(struct analyze_env *env, rank_state_t *rs, uint32_t ordinal, const struct step_trust *t,
			 const struct tl_event *ev, size_t n, uint64_t t0, uint64_t t1)
{
	analyze_trust_exclude(rank_state_trust(rs), ordinal, t);
	analyze_callback_excluded(&env->callback, rank_state_source(rs), ordinal, (int)t->why, ev, n, t0, t1);
	return analyze_figures_step(rank_state_figures(rs), t0);
}

/* A candidate steady-state step of a rank: summarise, then aggregate or
 * buffer it (NVTX) or count it. */
static int candidate_step(struct analyze_env *env, rank_state_t *rs, const struct tl_event *ev, size_t n, uint64_t t0,
			  uint64_t t1, const struct step_trust *trust)
{
	struct rank_walk *w = rank_state_walk(rs);
	struct rank_steady *st = rank_state_steady(rs);
	const struct tl_source *src = rank_state_source(rs);
	uint32_t ordinal = w->ordinal++;
	if (w->skip_left > 0) {
		w->skip_left--;
		st->warmup++;
		return 0;
	}
	if (trust->why != STEP_CLEAN)
		return exclude_step(env, rs, ordinal, trust, ev, n, t0, t1);
	struct step_summary *s;
	int rc = analyze_summary_new(env->opt, src, analyze_steady_names_known(st), ev, n, t0, t1, &s);
	if (rc < 0)
		return rc;
	s->ordinal = ordinal;
	analyze_callback_step(&env->callback, src, ordinal, s, ev, n, t0);
	if ((rc = analyze_figures_step(rank_state_figures(rs), t0)) < 0) {
		analyze_summary_free(s);
		return rc;
	}
	return analyze_steady_add(st, s, w->mode != MODE_PERIOD, wants_detail(env, src));
}

/* Does this rank have GPU data up to t (or no GPU data to wait for)? */
static int gpu_ready(const struct analyze_env *env, const struct tl_source *src, uint64_t t)
{
	if (env->opt->force_host_timing)
		return 1;
	int has_gpu = (src->features & FSS_FEATURE_CUPTI) || tl_array_len(&src->gpu) > 0;
	return !has_gpu || src->gpu_seen_end >= t || src->ended;
}

/* ---- NVTX steps ---------------------------------------------------------- */

/* The oldest step range of src not analysed, and how many wait. */
static size_t oldest_step(const struct rank_walk *w, const struct tl_source *src, struct tl_range *step)
{
	size_t waiting = 0, nr = tl_array_len(&src->ranges);
	*step = (struct tl_range){0};
	for (size_t i = 0; i < nr; i++) {
		const struct tl_range *r = tl_array_at(&src->ranges, i);
		if (!r->is_step)
			continue;
		if (r->start < w->last_t1 && w->last_t1)
			continue; /* nested in or overlapping one analysed: a second marker */
		if (waiting++ == 0)
			*step = *r;
	}
	return waiting;
}

static int nvtx_steps(struct analyze_env *env, rank_state_t *rs, int final)
{
	struct rank_walk *w = rank_state_walk(rs);
	struct tl_source *src = rank_state_source(rs);
	/* Nothing new to look at (the scan below reads every pending range):
	 * no step range since the last look, and the GPU intervals the oldest
	 * step waited for have not come. */
	uint64_t have = src->events_base + tl_array_len(&src->events);
	int new_event = w->nvtx_event_wait && have > w->nvtx_events_seen;
	if (!final && src->step_ranges == w->nvtx_seen && !new_event &&
	    (w->nvtx_gpu_wait == 0 || !gpu_ready(env, src, w->nvtx_gpu_wait)))
		return 0;
	w->nvtx_seen = src->step_ranges;
	w->nvtx_gpu_wait = 0;
	w->nvtx_event_wait = 0;
	for (;;) {
		struct tl_range step;
		size_t waiting = oldest_step(w, src, &step);
		if (waiting == 0)
			return 0;
		if (!final && !gpu_ready(env, src, step.end) && waiting < ANALYZE_MAX_WAITING_STEPS) {
			w->nvtx_gpu_wait = step.end;
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
			w->nvtx_event_wait = 1;
			w->nvtx_events_seen = have;
			return 0;
		}
		int rc = analyze_trust_check(rank_state_trust(rs), src, before, w->ordinal, NULL);
		if (before && rc == 0) {
			rc = register_events(env, rs, tl_array_at(&src->events, 0), before, 0);
			int taken = take_events(rs, before);
			if (rc == 0)
				rc = taken;
		}
		const struct tl_event *ev = in ? tl_array_at(&src->events, 0) : NULL;
		int is_headline = wants_detail(env, src);
		struct step_trust trust;
		if (rc == 0)
			rc = analyze_trust_check(rank_state_trust(rs), src, in, w->ordinal, &trust);
		if (rc == 0)
			rc = register_events(env, rs, ev, in, is_headline);
		if (rc == 0)
			rc = candidate_step(env, rs, ev, in, step.start, step.end, &trust);
		if (rc < 0 || (rc = take_events(rs, in)) < 0)
			return rc;
		w->last_t1 = step.end;
		if ((rc = release_before(rs, step.end, 1)) < 0)
			return rc;
	}
}

/* At the end, with NVTX steps: events after the last step range are not a
 * step; without a process_end, the step its records stop in. */
static int nvtx_final(struct analyze_env *env, rank_state_t *rs)
{
	struct rank_walk *w = rank_state_walk(rs);
	struct tl_source *src = rank_state_source(rs);
	size_t left = tl_array_len(&src->events);
	const struct tl_event *ev = left ? tl_array_at(&src->events, 0) : NULL;
	int rc = 0;
	if (left && !rank_state_trust(rs)->has_end) {
		struct step_trust cut = {.why = STEP_CUT};
		rc = exclude_step(env, rs, w->ordinal++, &cut, ev, left, ev[0].enter_ns, ev[left - 1].exit_ns);
	}
	if (rc == 0)
		rc = analyze_trust_check(rank_state_trust(rs), src, left, w->ordinal, NULL);
	if (rc == 0)
		rc = register_events(env, rs, left ? tl_array_at(&src->events, 0) : NULL, left, 0);
	int taken = take_events(rs, left);
	if (rc == 0)
		rc = taken;
	if (rc == 0 && !rank_state_steady(rs)->decided)
		rc = analyze_steady_decide(rank_state_steady(rs), wants_detail(env, src));
	return rc;
}

/* ---- period steps ------------------------------------------------------- */

/* What the cut c stands for, its source events ev[0..span) over [t0, t1):
 * a candidate step, warm-up, irregular steps, or the trailing stretch. */
static int period_cut(struct analyze_env *env, rank_state_t *rs, const struct steps_cut *c, const struct tl_event *ev,
		      size_t span, uint64_t t0, uint64_t t1, int next_known, struct step_trust *trust)
{
	struct rank_walk *w = rank_state_walk(rs);
	struct rank_steady *st = rank_state_steady(rs);
	int has_end = rank_state_trust(rs)->has_end;
	int rc;
	switch (c->kind) {
	case STEPS_REGULAR:
		if (c->variant < STEPS_VARIANTS_MAX)
			w->variant_steps[c->variant]++;
		if (c->variant != 0) { /* a step of another variant: seen, not mixed in */
			st->irregular++;
			w->ordinal++;
			return register_events(env, rs, ev, span, 0);
		}
		/* no event after it, no process_end: the trace stops in or right after it */
		if (trust->why == STEP_CLEAN && !next_known && !has_end)
			trust->why = STEP_CUT;
		rc = register_events(env, rs, ev, span, wants_detail(env, rank_state_source(rs)));
		if (rc == 0)
			rc = candidate_step(env, rs, ev, span, t0, t1, trust);
		return rc;
	case STEPS_WARMUP:
		st->warmup += c->steps;
		w->ordinal += c->steps;
		w->skip_left = w->skip_left > c->steps ? w->skip_left - c->steps : 0;
		return register_events(env, rs, ev, span, 0);
	case STEPS_IRREGULAR:
		/* a stretch that lost calls no longer matches the step: it is
		 * the steps it stands for that lost them */
		if (trust->why == STEP_LOST) {
			for (uint32_t k = 0; k < (c->steps ? c->steps : 1); k++)
				if ((rc = exclude_step(env, rs, w->ordinal++, trust, ev, span, t0, t1)) < 0)
					return rc;
		} else {
			st->irregular += c->steps;
			w->ordinal += c->steps;
		}
		return register_events(env, rs, ev, span, 0);
	default:
		if (span && !has_end) { /* the step its records stop in */
			trust->why = STEP_CUT;
			if ((rc = exclude_step(env, rs, w->ordinal++, trust, ev, span, t0, t1)) < 0)
				return rc;
		}
		return register_events(env, rs, ev, span, 0);
	}
}

static int period_steps(struct analyze_env *env, rank_state_t *rs, int final)
{
	struct rank_walk *w = rank_state_walk(rs);
	struct tl_source *src = rank_state_source(rs);
	for (;;) {
		if (!w->have_held) {
			int got = steps_cutter_next(w->cutter, final, &w->held);
			if (got < 0)
				return got;
			if (!got)
				return 0;
			w->have_held = 1;
		}
		struct steps_cut *c = &w->held;
		if (c->first != w->filtered_taken)
			return -EINVAL; /* cuts follow the events: a bug */
		/* The cutter sees the data-parallel side only: the cut's source
		 * events run up to the next data-parallel event after its own (the
		 * tensor-parallel traffic in between belongs to the step). */
		size_t ne = tl_array_len(&src->events), span;
		uint64_t seen = 0;
		int next_known = 0;
		for (span = 0; span < ne; span++) {
			const struct tl_event *e = tl_array_at(&src->events, span);
			if (!comm_roles_event_in_steps(e))
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
		if (!final && !gpu_ready(env, src, t1))
			return 0;
		struct step_trust trust;
		int rc = analyze_trust_check(rank_state_trust(rs), src, span, w->ordinal, &trust);
		if (rc == 0)
			rc = period_cut(env, rs, c, ev, span, t0, t1, next_known, &trust);
		if (rc < 0)
			return rc;
		w->filtered_taken += c->count;
		if ((rc = take_events(rs, span)) < 0 || (rc = release_before(rs, t1, 0)) < 0)
			return rc;
		w->have_held = 0;
	}
}

/* ---- the service --------------------------------------------------------- */

/* Feed the cutter the data-parallel events it has not seen. The FSDP
 * group's gathers and reductions are always read (the parameter traffic the
 * step rests on); any other class is compared by its sizes, which may
 * change from step to step (an all-to-all of routed tokens on the FSDP
 * communicator itself, say): the op and the sizes decide, not the role. */
static int feed_cutter(struct rank_walk *w, const struct tl_source *src)
{
	uint64_t have = src->events_base + tl_array_len(&src->events);
	for (uint64_t i = w->fed; i < have; i++) {
		const struct tl_event *e = tl_array_at(&src->events, (size_t)(i - src->events_base));
		if (!comm_roles_event_in_steps(e))
			continue;
		int param = comm_roles_is_fsdp(e->role) && (e->op == FSS_OP_ALLGATHER || e->op == FSS_OP_REDUCESCATTER);
		struct steps_event se = {
		    .sig = e->sig,
		    .bytes = e->bytes,
		    .cls = param ? 0 : steps_class(e->comm_slot, e->op, e->calls, e->dtype),
		    .op = e->op,
		};
		int rc = steps_cutter_push_event(w->cutter, &se);
		if (rc < 0)
			return rc;
	}
	w->fed = have;
	return 0;
}

/* NVTX steps once a step range came; else period steps once the period
 * search found a first cut, or gave up. Returns 1 while undecided. */
static int decide_mode(struct rank_walk *w, const struct tl_source *src, int final)
{
	if (src->step_ranges > 0) {
		w->mode = MODE_NVTX;
		steps_cutter_free(w->cutter); /* not needed: release its window */
		w->cutter = NULL;
		return 0;
	}
	int got = steps_cutter_next(w->cutter, final, &w->held);
	if (got < 0)
		return got;
	w->have_held = got;
	if (!got && !final && steps_cutter_period(w->cutter) == 0)
		return 1;
	w->mode = MODE_PERIOD;
	return 0;
}

int analyze_service(struct analyze_env *env, rank_state_t *rs, int final)
{
	struct rank_walk *w = rank_state_walk(rs);
	struct rank_comms *cm = rank_state_comms(rs);
	struct tl_source *src = rank_state_source(rs);
	int rc;
	if (src->rank >= 0 && src->rank < env->min_rank_seen)
		env->min_rank_seen = src->rank;
	if (!cm->decided) {
		/* roles first, from a window of events (nothing is cut before): the
		 * window, or three NVTX steps' events (steps wait, with their ranges,
		 * until then) */
		if (!final && tl_array_len(&src->events) < ANALYZE_ROLE_WINDOW && src->step_ranges < ANALYZE_ROLE_STEPS)
			return 0;
		if ((rc = analyze_comms_decide(cm, env->tl, src, env->opt->fsdp_comm)) < 0)
			return rc;
	}
	if ((rc = analyze_comms_assign(cm, src)) < 0)
		return rc;
	if (w->mode != MODE_NVTX && (rc = feed_cutter(w, src)) < 0)
		return rc;
	if (w->mode == MODE_UNDECIDED && (rc = decide_mode(w, src, final)) != 0)
		return rc < 0 ? rc : 0;
	if (w->mode == MODE_NVTX) {
		rc = nvtx_steps(env, rs, final);
		if (rc < 0 || !final)
			return rc;
		return nvtx_final(env, rs);
	}
	/* period mode: step ranges are not used, release them as we go */
	return period_steps(env, rs, final);
}

int analyze_service_final(struct analyze_env *env, rank_state_t *rs)
{
	struct rank_walk *w = rank_state_walk(rs);
	if (!rank_state_trust(rs)->has_end && w->cutter)
		steps_cutter_set_open_end(w->cutter);
	return analyze_service(env, rs, 1);
}

size_t analyze_service_pending(rank_state_t *rs)
{
	const struct tl_source *src = rank_state_source(rs);
	const struct rank_walk *w = rank_state_walk(rs);
	return tl_array_len(&src->events) + tl_array_len(&src->ranges) + tl_array_len(&src->gpu) +
	       (w->cutter ? steps_cutter_pending(w->cutter) : 0) + analyze_steady_pending(rank_state_steady(rs)) +
	       analyze_figures_pending(rank_state_figures(rs));
}

_Static_assert(ANALYSIS_STEP_VARIANTS_MAX == STEPS_VARIANTS_MAX, "one variant table");

void analyze_service_fill(rank_state_t *rs, struct analysis_result *r)
{
	const struct rank_walk *w = rank_state_walk(rs);
	if (w->mode != MODE_PERIOD || !w->cutter)
		return;
	struct steps_variant v[STEPS_VARIANTS_MAX];
	size_t nv = steps_cutter_variants(w->cutter, v, STEPS_VARIANTS_MAX);
	r->nstep_variants = (uint32_t)nv;
	for (size_t k = 0; k < nv; k++)
		r->step_variants[k] = (struct analysis_step_variant){
		    .steps = w->variant_steps[k],
		    .collectives = v[k].events,
		    .allgathers = v[k].allgathers,
		    .reduce_scatters = v[k].reduce_scatters,
		};
	if (nv > 1) {
		char list[96] = "";
		size_t at = 0;
		for (size_t k = 0; k < nv && at < sizeof list; k++)
			at += (size_t)snprintf(list + at, sizeof list - at, "%s%u of %u AG + %u RS", k ? ", " : "",
					       w->variant_steps[k], v[k].allgathers, v[k].reduce_scatters);
		analyze_note(r,
			     "the steps differ (a micro-batch count that changes?): %s; the first are analysed, the "
			     "others counted as irregular",
			     list);
	}
	r->step_search_left_out = steps_cutter_left_out(w->cutter);
	if (r->step_search_left_out)
		analyze_note(r,
			     "%llu collectives whose sizes change from step to step (routed all-to-alls, say) are left "
			     "out of the step search; each is in its step",
			     (unsigned long long)r->step_search_left_out);
}
