/*
 * analyze_service.h - the per-rank streaming service: moves a rank forward
 * as far as its records allow (communicator roles, then NVTX steps or
 * period steps), hands each complete step to the summary and the steady
 * state, and releases what it no longer needs.
 */
#ifndef FSS_COLLECTOR_ANALYZE_SERVICE_H
#define FSS_COLLECTOR_ANALYZE_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analysis.h"
#include "collector/analyze_callback.h"
#include "collector/rank_state.h"
#include "collector/ranks.h"
#include "collector/steps.h"
#include "collector/timeline.h"

/* Steps that may wait for late GPU intervals before they are analysed anyway. */
#define ANALYZE_MAX_WAITING_STEPS 16

/* What the service needs of the analyzer: shared by every rank. */
struct analyze_env {
	const struct analysis_options *opt;
	const timeline_t *tl;
	ranks_t *ranks;			  /* the cross-rank matcher the steps' events go to */
	struct analyze_callback callback; /* told of every step */
	int32_t min_rank_seen;		  /* the lowest rank serviced so far (INT32_MAX: none) */
};

/* How a rank's steps are found. */
enum rank_mode { MODE_UNDECIDED = 0, MODE_NVTX = 1, MODE_PERIOD = 2 };

/* Where a rank's step detection stands. */
struct rank_walk {
	enum rank_mode mode;
	steps_cutter_t *cutter;	 /* period steps: the cutter (NULL with NVTX steps) */
	uint64_t fed;		 /* source events (absolute) looked at for the cutter */
	uint64_t filtered_taken; /* events of the data-parallel side consumed by cuts */
	uint64_t nvtx_seen;	 /* the source's step ranges when they were last looked at */
	uint64_t nvtx_gpu_wait;	 /* the oldest step's end the GPU intervals must reach, 0 */
	struct steps_cut held;	 /* a cut waiting to be analysed */
	int have_held;
	uint64_t last_t1;	   /* end of the last NVTX step analysed */
	uint32_t skip_left;	   /* options.warmup_steps still to skip */
	uint32_t ordinal;	   /* steps seen so far */
	int nvtx_event_wait;	   /* the oldest NVTX step waits for the event after it (its edge) */
	uint64_t nvtx_events_seen; /* source events when it began to wait */
	uint32_t variant_steps[STEPS_VARIANTS_MAX]; /* period steps: regular steps of each variant
						       (steps_cutter_variants) */
};

/* analyze_service_init - a rank's walk before its first record, its first
 * warmup_steps steps to be skipped. Returns 0 or -ENOMEM. */
int analyze_service_init(struct rank_walk *w, uint32_t warmup_steps);

/* analyze_service_release - free what w holds (w is the caller's). */
void analyze_service_release(struct rank_walk *w);

/*
 * analyze_service - move rs forward as far as its records allow; final: no
 * more records come (every pending step is decided with what there is).
 * Returns 0 or a negative errno.
 */
int analyze_service(struct analyze_env *env, rank_state_t *rs, int final);

/*
 * analyze_service_final - the end of rs's records: a rank without its
 * process_end may stop in the middle of a period, then analyze_service
 * with final set. Returns 0 or a negative errno.
 */
int analyze_service_final(struct analyze_env *env, rank_state_t *rs);

/* analyze_service_pending - the items (events, ranges, GPU intervals,
 * events in the period window, buffered steps) rs has waiting now. */
size_t analyze_service_pending(rank_state_t *rs);

/*
 * analyze_service_fill - what the period steps of rs say beside the steady
 * step, into r: the variants of the step one period holds, the events left
 * out of the step search, and a note for each. Nothing with NVTX steps.
 */
void analyze_service_fill(rank_state_t *rs, struct analysis_result *r);

#endif
