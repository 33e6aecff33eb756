/*
 * analyze_finish.h - the result of the analysis from what the rank states
 * hold: per-rank figures, spread, the verdict (or why there is none), and
 * the sections the stages fill, in the order their notes come.
 */
#ifndef FSS_COLLECTOR_ANALYZE_FINISH_H
#define FSS_COLLECTOR_ANALYZE_FINISH_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analysis.h"
#include "collector/flight.h"
#include "collector/rank_state.h"
#include "collector/ranks.h"
#include "collector/step_summaries.h"
#include "collector/timeline.h"

/* What a result is built from: the analyzer's state, only read. */
struct analyze_input {
	const struct analysis_options *opt;
	const timeline_t *tl;
	const ranks_t *ranks;
	const flight_t *flight;
	rank_state_t *const *rs; /* [nrs] every rank met, in the order met */
	size_t nrs;
	const struct step_summaries *kept; /* what a --keep trace left out */
	int truncated;			   /* the input stopped at a damaged or incomplete chunk */
	uint64_t now_realtime_ns;	   /* waits in flight are measured to it; 0: the trace's end */
};

/*
 * analyze_finish_build - the result of what the rank states hold now; reads
 * them, changes nothing the analysis goes on with. Its cost follows the
 * state (ranks, the steady-state step's events, communicators, sources),
 * not the trace. A trace of several worlds (a restart, collector/worlds.h)
 * gets one result per world, the headline world's as *out
 * (analyze_worlds.c). *out is the caller's (analysis_result_free). Returns
 * 0 or -ENOMEM.
 */
int analyze_finish_build(const struct analyze_input *in, struct analysis_result **out);

/*
 * analyze_finish_one - the result of the rank states of in as one world
 * (every one of them; in->ranks answers for them), the trace-wide sections
 * (sources, calls in flight) of the whole trace. As analyze_finish_build
 * otherwise.
 */
int analyze_finish_one(const struct analyze_input *in, struct analysis_result **out);

#endif
