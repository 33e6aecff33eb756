/*
 * analyze_callback.c - the step callback's view of a step (see
 * analyze_callback.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "collector/analyze_callback.h"

/* What the step callback is told of every step, analysed or left out. */
static struct analysis_step_info step_info(const struct tl_source *src, uint32_t ordinal, const struct tl_event *ev,
					   size_t n, uint64_t t0)
{
	uint32_t nag = 0;
	for (size_t i = 0; i < n; i++)
		nag += ev[i].op == FSS_OP_ALLGATHER;
	return (struct analysis_step_info){
	    .rank = src->rank,
	    .source = src->id,
	    .ordinal = ordinal,
	    .start_ns = t0,
	    .events = (uint32_t)n,
	    .allgathers = nag,
	};
}

/* The step's events for the callback, in cb's buffer (grown as needed):
 * exposure, phase and unit from info when given (an analysed step's
 * summary), else unknown. -ENOMEM leaves si without events. */
static int step_events(struct analyze_callback *cb, const struct tl_event *ev, const struct ev_info *info, size_t n,
		       struct analysis_step_info *si)
{
	si->nstep_events = 0;
	si->step_events = NULL;
	if (n > cb->cap) {
		struct analysis_step_event *v = realloc(cb->events, n * sizeof *v);
		if (!v)
			return -ENOMEM;
		cb->events = v;
		cb->cap = n;
	}
	for (size_t i = 0; i < n; i++) {
		const struct ev_info *in = info ? &info[i] : NULL;
		int gather = in && in->fsdp && ev[i].op == FSS_OP_ALLGATHER;
		cb->events[i] = (struct analysis_step_event){
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
	si->step_events = n ? cb->events : NULL;
	return 0;
}

void analyze_callback_step(struct analyze_callback *cb, const struct tl_source *src, uint32_t ordinal,
			   const struct step_summary *s, const struct tl_event *ev, size_t n, uint64_t t0)
{
	if (!cb->fn)
		return;
	struct analysis_step_info si = step_info(src, ordinal, ev, n, t0);
	si.step_ns = s->fig[FIG_STEP];
	si.allgather_ns = s->fig[FIG_AG];
	si.exposed_allgather_ns = s->fig[FIG_AG_EXPOSED];
	si.compute_ns = s->fig[FIG_COMPUTE];
	si.exposed_comm_ns = s->fig[FIG_COMM_EXPOSED];
	si.exposure_source = s->exposure_source;
	si.compute_wait_ns = s->fig[FIG_AG_WAIT];
	si.other_compute_wait_ns = s->fig[FIG_OTHER_WAIT];
	if (s->phases.status == PHASES_OK && s->phases.training_cycles)
		si.microbatches = s->phases.training_cycles;
	(void)step_events(cb, ev, s->info, n, &si); /* out of memory: the step without its events */
	cb->fn(cb->ctx, &si);
}

void analyze_callback_excluded(struct analyze_callback *cb, const struct tl_source *src, uint32_t ordinal, int why,
			       const struct tl_event *ev, size_t n, uint64_t t0, uint64_t t1)
{
	if (!cb->fn)
		return;
	struct analysis_step_info si = step_info(src, ordinal, ev, n, t0);
	si.step_ns = t1 > t0 ? t1 - t0 : 0;
	si.excluded = why;
	(void)step_events(cb, ev, NULL, n, &si); /* out of memory: the step without its events */
	cb->fn(cb->ctx, &si);
}

void analyze_callback_release(struct analyze_callback *cb)
{
	free(cb->events);
	cb->events = NULL;
	cb->cap = 0;
}
