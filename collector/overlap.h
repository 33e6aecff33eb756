/*
 * overlap.h - interval arithmetic and the exposure of collectives.
 *
 * Exposure follows the comm/compute overlap of PyTorch's trace analysis
 * tooling: merge the intervals of each class, then exposed communication =
 * communication time not covered by compute. Here it is measured per
 * AllGather: exposed ns = its interval minus the union of compute intervals
 * of the same device (rank) during it.
 *
 * With CUPTI the compute intervals are the rank's compute kernels. Without
 * it they come from host NVTX ranges (overlap_host_compute): the time the
 * compute thread spent inside leaf compute ranges (ranges with no child), as
 * with PyTorch's per-op NVTX ranges and fsdp_ref's op ranges; a module's
 * range that holds other ranges only contributes through them, so its own
 * time (the FSDP hooks waiting for a gather) is not compute.
 *
 * Pure functions over caller-owned arrays: no allocation unless stated.
 */
#ifndef FSS_COLLECTOR_OVERLAP_H
#define FSS_COLLECTOR_OVERLAP_H

#include <stddef.h>
#include <stdint.h>

/* A half-open interval [start, end) in nanoseconds. */
struct interval {
	uint64_t start;
	uint64_t end;
};

/*
 * interval_merge - sort v[0..n) by start and merge overlapping or touching
 * intervals in place; empty intervals (end <= start) are dropped. Returns
 * the number of merged intervals left at the front of v.
 */
size_t interval_merge(struct interval *v, size_t n);

/* interval_total - sum of lengths of a merged set. */
uint64_t interval_total(const struct interval *v, size_t n);

/*
 * interval_covered - how much of [start, end) the merged, sorted set v
 * covers. O(log n + overlapping intervals).
 */
uint64_t interval_covered(const struct interval *v, size_t n, uint64_t start, uint64_t end);

/* interval_intersect_total - length of the intersection of two merged sets. */
uint64_t interval_intersect_total(const struct interval *a, size_t na, const struct interval *b, size_t nb);

/*
 * interval_last_end_before - among the merged, sorted set v, the end of the
 * last interval that starts before t (the compute "before" an event at t);
 * 0 when none does.
 */
uint64_t interval_last_end_before(const struct interval *v, size_t n, uint64_t t);

/* One NVTX range of a rank that counts as compute (host timing). */
struct overlap_range {
	uint64_t start;
	uint64_t end;
	uint32_t thread; /* ranges nest per thread */
	uint32_t reserved;
};

/*
 * overlap_host_compute - compute intervals of one rank from host timing.
 *
 * ranges[0..nranges) are the rank's compute ranges (any order, any threads;
 * the array is sorted in place). Ranges nest per thread (fsdp_ref: "forward"
 * holds "root", which holds "layers.3", which holds "layers.3.attn.core").
 * Compute is the union of the leaves: the ranges inside which no other range
 * of the same thread starts. A parent's own time, outside its children, is
 * not compute: in fsdp_ref and in PyTorch with per-op ranges every op has a
 * range, so what is left there is hook overhead and waiting for gathers.
 * A trace that marks only modules (no per-op ranges) loses the parents' own
 * work from compute, and its exposure over-counts by the part of that work
 * that ran while a gather was in flight.
 *
 * Writes the merged compute intervals into *out (allocated with malloc; the
 * caller frees) and their count into *nout. Returns 0 or -ENOMEM.
 */
int overlap_host_compute(struct overlap_range *ranges, size_t nranges, struct interval **out, size_t *nout);

/* One gather, for its exposure and cause. */
struct overlap_gather {
	uint64_t issue_ns;   /* host enter of the call (same time base as start) */
	uint64_t start_ns;   /* interval start (kernel start with CUPTI, host enter otherwise; earlier
	                        when it queued behind other collectives) */
	uint64_t end_ns;     /* interval end */
	uint64_t from_ns;    /* count exposure from max(start_ns, from_ns): time before belongs to an
	                        earlier gather (0: from the start) */
	int first_of_phase;  /* first gather of the forward or of the backward */
	int device_timing;   /* 1: interval from CUPTI (host-late can be told apart) */
	int until_resume;    /* host timing: a gather that ends while no compute runs kept compute
	                        waiting until the thread resumed (it wakes up late on a busy host):
	                        count up to until_ns */
	uint64_t until_ns;   /* where the waiting thread resumed: the first compute range that
	                        opened after end_ns (the unit that needed the gather) */
};

/* The result for one gather. */
struct overlap_exposure {
	uint64_t duration_ns; /* end - start */
	uint64_t hidden_ns;   /* compute within [from, wait_end) */
	uint64_t exposed_ns;  /* no compute within [from, wait_end) */
	uint64_t wait_end_ns; /* end_ns, or where compute resumed (until_resume) */
	int cause;            /* enum analysis_cause */
};

/* A collective that starts within this long of the end of the one before it
 * on the same stream (or communication thread) was queued behind it. */
#define OVERLAP_QUEUE_SLACK_NS 20000ull

/* Kernels may start this long after their host call and still count as
 * "started right away" for the host-late cause. */
#define OVERLAP_LAUNCH_SLACK_NS 50000ull

/* An exposed gather with compute under at least 1/OVERLAP_PREFETCHED_DIVISOR
 * of its time was issued ahead of need (prefetched) and outlasted that
 * compute: bandwidth-bound. Less than that: issued when the compute needed
 * it, no prefetch. */
#define OVERLAP_PREFETCHED_DIVISOR 10u

/*
 * overlap_gather_exposure - exposure and cause of one gather against the
 * merged compute set: the time in [max(start, from), wait_end) with no
 * compute. Exposure under min_exposed_ns is "hidden". The cause is the
 * first that applies: first-of-phase; host-late (device timing only:
 * entered after the compute before it had ended, kernel started within
 * OVERLAP_LAUNCH_SLACK_NS); no-prefetch (started after the compute before
 * it had ended); bandwidth-bound (started while compute ran).
 */
struct overlap_exposure overlap_gather_exposure(const struct interval *compute, size_t ncompute,
						const struct overlap_gather *g, uint64_t min_exposed_ns);

/* interval_next_start - the first start at or after t in the merged set, or
 * `none` when no interval starts then. */
uint64_t interval_next_start(const struct interval *v, size_t n, uint64_t t, uint64_t none);

#endif
