/*
 * analyze_figures.h - HTA's comm/compute overlap of one rank over its whole
 * trace (the report's per_rank comm_comp_overlap), measured on fsdpscope's
 * own records by the definition PyTorch's Holistic Trace Analysis uses on
 * a profiler trace (hta/analyzers/communication_analysis.py), so that the
 * figure of a .fss and HTA's on its Kineto export agree:
 *
 *   overlap = |union(comm) n union(compute)| / |union(comm)|
 *
 * over the intervals launched in HTA's window (overlap_hta_window in
 * collector/overlap.h: with two or more steps, those launched before the
 * last step's start). The intervals:
 *
 *   device timing (the rank has NCCL kernel intervals): communication is
 *     each collective event's device span (its calls' NCCL kernels, tied by
 *     collective seq), or its host interval where no kernel was tied to it
 *     (a call's [enter, exit], a group's ncclGroupEnd [enter, exit], where
 *     it runs: the interval the exposure's host timing uses); computation is every compute kernel of the rank (any
 *     device: HTA counts every kernel of the file; copies and memsets are
 *     not compute);
 *   host timing: communication is each event's host interval; computation
 *     the leaves of its compute NVTX ranges (overlap_host_compute's rule).
 *
 * Both tallies are kept as the records go by and the one the rank's data
 * calls for is chosen when the figure is read. Memory follows the steps in
 * flight: the analysis (analyze_service.c) hands items over as it releases
 * them from the timeline, and at every step it tells (analysed or left out)
 * the totals before the previous step's start are settled and the
 * intervals there dropped. Exact as long as no item that starts before a
 * step arrives after the next step was analysed (records that arrive as an
 * agent writes them); the part of a later one before that point is not
 * counted.
 */
#ifndef FSS_COLLECTOR_ANALYZE_FIGURES_H
#define FSS_COLLECTOR_ANALYZE_FIGURES_H

#include <stddef.h>
#include <stdint.h>

#include "collector/timeline.h"

/* An interval and the time it was launched (overlap_hta_launch). */
struct figures_interval {
	uint64_t start, end;
	uint64_t launch_ns;
};

/* A growable list of intervals. */
struct figures_list {
	struct figures_interval *v;
	size_t n, cap;
};

/* One way of timing: its communication and computation intervals not yet
 * settled, and the totals settled before the frontier. */
struct figures_tally {
	struct figures_list comm, compute;
	uint64_t comm_ns;    /* |union(comm)| before the frontier */
	uint64_t overlap_ns; /* |union(comm) n union(compute)| before the frontier */
};

enum figures_timing { FIGURES_DEVICE = 0, FIGURES_HOST = 1, FIGURES_TIMINGS };

/* Per thread, the start of its compute range released last (ranges of a
 * thread are released in the order they end: post-order). */
struct figures_thread {
	uint32_t thread;
	uint32_t has_last; /* 1: last_start is set */
	uint64_t last_start;
};

/* What the analysis keeps of one rank for its figures (zeroed: empty). */
struct rank_figures {
	struct figures_tally tally[FIGURES_TIMINGS];
	uint64_t frontier;	   /* totals are settled before it; the lists hold what lies after */
	uint32_t steps;		   /* steps told (analysis_step_info: analysed or left out) */
	uint32_t reserved;
	uint64_t last_step_start;  /* start of the last of them */
	struct figures_thread *threads;
	size_t nthreads, threads_cap;
};

/* The figures of one rank, as read now. */
struct figures_result {
	uint64_t comm_ns;    /* |union(comm)| in the window; 0: no communication time */
	uint64_t overlap_ns; /* of which computation covered */
	int device_timing;   /* 1: from kernel intervals, 0: from host calls and NVTX ranges */
};

/* analyze_figures_release - free what f holds (f is the caller's). */
void analyze_figures_release(struct rank_figures *f);

/*
 * analyze_figures_events - the events ev[0..n) of src, taken from its
 * timeline now (in issue order): each one's communication interval, its
 * NCCL kernels found among src's GPU intervals still held. Returns 0 or
 * -ENOMEM.
 */
int analyze_figures_events(struct rank_figures *f, const struct tl_source *src, const struct tl_event *ev, size_t n);

/* analyze_figures_range - a range released from the timeline (ranges in
 * the order the timeline releases them). Returns 0 or -ENOMEM. */
int analyze_figures_range(struct rank_figures *f, const struct tl_range *r);

/* analyze_figures_gpu - a GPU interval released from the timeline.
 * Returns 0 or -ENOMEM. */
int analyze_figures_gpu(struct rank_figures *f, const struct tl_gpu *g);

/*
 * analyze_figures_step - the analysis told a step of the rank starting at
 * start_ns (the steps' starts rise). Settles what lies before the previous
 * step's start. Returns 0 or -ENOMEM.
 */
int analyze_figures_step(struct rank_figures *f, uint64_t start_ns);

/* analyze_figures_pending - intervals f holds now. */
size_t analyze_figures_pending(const struct rank_figures *f);

/*
 * analyze_figures_read - the figures of the rank as they stand, with what
 * src's timeline still holds (events, ranges, GPU intervals not released
 * yet) counted as well; f is not changed, so a live snapshot may read it
 * mid-run. Returns 0 or -ENOMEM.
 */
int analyze_figures_read(const struct rank_figures *f, const struct tl_source *src, struct figures_result *out);

#endif
