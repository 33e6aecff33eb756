/*
 * steps_split.h - what the period search of steps.c reads, and what one
 * period holds (internal to steps.c; docs/patterns.md section 2).
 *
 * Two questions the cutter asks of its window once, with the period:
 *
 * - Which events does the period rest on? Every class of events (one
 *   communicator, op, call count and dtype) whose sizes repeat. A class
 *   whose sizes change from step to step (the routed rows of an MoE
 *   all-to-all, a collective that follows the sequence length) never makes
 *   two steps alike: it is left out of the search.
 * - How many optimizer steps does the period hold? A step reduces every
 *   unit's gradients once: the period's rarest ReduceScatter occurs once
 *   per step. When it occurs k > 1 times the period holds k steps, which
 *   are either one step and a burst of gathers with no reduction between
 *   some of them (a weight sync every k steps: outside the steps), or k
 *   steps that differ (a micro-batch count that changes from step to step).
 */
#ifndef FSS_COLLECTOR_STEPS_SPLIT_H
#define FSS_COLLECTOR_STEPS_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "collector/steps.h"

/* A class is judged on at least this many of its events in the later half
 * of the window: fewer (set-up, a one-off) stay in the search. */
#define STEPS_VARY_MIN_EVENTS 8u
/* The most classes left out. */
#define STEPS_VARYING_MAX 32u

/*
 * steps_varying_classes - the classes of cls[0..n) (0: never left out)
 * whose sizes (sig[i]) change from step to step: at least
 * STEPS_VARY_MIN_EVENTS events in the later half of the window, and no
 * shift of the class's own sequence of sizes that repeats 90% of its later
 * half. None when they would be half the events or more (a window without
 * the parameter traffic to rest on). Writes up to max classes to out and
 * returns how many.
 */
size_t steps_varying_classes(const uint64_t *cls, const uint64_t *sig, size_t n, uint64_t *out, size_t max);

/* How one period of the window splits into optimizer steps. */
struct steps_split {
	size_t period;			    /* events of the template (one step when nsub is 1) */
	size_t first;			    /* where the template starts in the window */
	size_t nsub;			    /* steps in the template, in order */
	size_t off[STEPS_VARIANTS_MAX + 1]; /* where each starts in the template; off[nsub] = period */
	uint32_t kind[STEPS_VARIANTS_MAX];  /* which kind each is: distinct steps, the most events first */
	size_t nkinds;
	int outside; /* the period was one step and a burst outside the steps */
};

/*
 * steps_split_period - split the period [first, first + period) of the
 * window sig/ops/bytes[0..n) (ops: enum fss_coll_op; bytes: per event) into
 * optimizer steps. The rarest ReduceScatter of the period, occurring k
 * times, marks k steps, each starting at the first AllGather after one of
 * its occurrences. When every one of them is the same step S, some with a
 * burst before it that reduces nothing (no ReduceScatter, no AllReduce) and
 * gathers at least a quarter of S's AllGather bytes (whole parameters), the
 * template becomes S (out->outside set, out->first an occurrence of S, the
 * earliest in the window); when k is the count of the period's rarest
 * signature too, the period holds k steps of their kinds; otherwise it is
 * one step. Always fills out.
 */
void steps_split_period(const uint64_t *sig, const uint8_t *ops, const uint64_t *bytes, size_t n, size_t period,
			size_t first, struct steps_split *out);

#endif
