/*
 * overlap.h - interval arithmetic and the exposure of collectives.
 *
 * Exposure follows the comm/compute overlap of PyTorch's trace analysis
 * tooling: merge the intervals of each class, then exposed communication =
 * communication time not covered by compute. Here it is measured per
 * AllGather: exposed ns = its interval minus the union of compute intervals
 * of the same device (rank) during it. Beside it, per AllGather, the compute
 * wait: how long compute stood still waiting for that gather, the time the
 * gather spent queued behind other collectives included (overlap_step).
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

/* interval_intersect_total - length of the intersection of two merged sets. */
uint64_t interval_intersect_total(const struct interval *a, size_t na, const struct interval *b, size_t nb);

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

/*
 * overlap_host_units - the ranges of ranges[0..nranges) that hold another
 * range of their thread (units' and phases' ranges: the parents that
 * overlap_host_compute leaves out), sorted by start, the outer first on
 * equal starts, not merged. ranges must be as overlap_host_compute left
 * them (sorted by thread, start). Writes a malloc'ed array (the caller
 * frees) into *out and its length into *nout. Returns 0 or -ENOMEM.
 */
int overlap_host_units(const struct overlap_range *ranges, size_t nranges, struct interval **out, size_t *nout);

/*
 * HTA's window and launch times: one rule for the analysis' per-rank
 * comm_comp_overlap (collector/analyze_figures.h) and for the Kineto
 * exporter, which writes the same steps as ProfilerStep#N spans and the
 * same launches as the events HTA windows by, so that HTA's figure on the
 * export and fsdpscope's on the trace agree.
 *
 * overlap_hta_launch - when an interval was launched: a collective's host
 * enter (its event's first call, a group's too: pass it as launch_ns),
 * a kernel's
 * correlated launch where the trace has one (launch_ns; 0 when it has
 * none, as fsdpscope's traces have none for compute kernels) else its own
 * start on the host clock (start_ns), a compute NVTX range's start.
 */
static inline uint64_t overlap_hta_launch(uint64_t launch_ns, uint64_t start_ns)
{
	return launch_ns ? launch_ns : start_ns;
}

/*
 * overlap_hta_window - does an interval launched at launch_ns count? HTA
 * (hta/common/trace.py, _filter_irrelevant_gpu_kernels): with two or more
 * ProfilerStep# spans, only the GPU events whose CPU-side launch starts
 * before the start of the last one; with fewer, every one. The steps are
 * those the analysis tells its step callback (struct analysis_step_info,
 * analysed or left out; not the warm-up or irregular steps it only
 * counts), last_step_start_ns the start_ns of the last of them.
 */
static inline int overlap_hta_window(uint64_t launch_ns, uint32_t steps, uint64_t last_step_start_ns)
{
	return steps < 2 || launch_ns < last_step_start_ns;
}

/* A collective that starts within this long of the end of the one before it
 * on the same stream (or communication thread) was queued behind it. */
#define OVERLAP_QUEUE_SLACK_NS 20000ull

/* Kernels may start this long after their host call and still count as
 * "started right away" for the host-late cause. */
#define OVERLAP_LAUNCH_SLACK_NS 50000ull

/* An exposed gather with compute under at least 1/OVERLAP_PREFETCHED_DIVISOR
 * of its time (counted from the start of the queue ahead of it) was issued
 * ahead of need (prefetched) and outlasted that compute: bandwidth-bound.
 * Less than that: issued when the compute needed it, no prefetch. */
#define OVERLAP_PREFETCHED_DIVISOR 10u

/* What a collective of a step is to compute. */
enum overlap_kind {
	OVERLAP_BACKGROUND = 0, /* compute does not wait for it mid-step (gradient reductions), or no timing */
	OVERLAP_GATHER = 1,     /* an FSDP parameter gather: the one kind with figures */
	OVERLAP_AWAITED = 2,    /* compute waits for it as soon as it is issued (activation collectives,
	                           the loss and norm all-reduces, point-to-point) */
};

/* One collective of a step, in issue order. */
struct overlap_collective {
	uint64_t issue_ns;       /* host enter of the call (same time base as start) */
	uint64_t start_ns;       /* its own interval: kernel with CUPTI, host call otherwise */
	uint64_t end_ns;
	uint64_t queue_start_ns; /* where the collectives it queued behind on its stream began running
	                            (start_ns when it started on an idle stream) */
	uint64_t unit_opens_ns;  /* gathers, host timing: where the range of the unit it gathers opens next
	                            after its end (0: not known) */
	uint8_t kind;            /* enum overlap_kind */
	uint8_t first_of_phase;  /* gathers: first of the forward or of the backward of its cycle */
	uint8_t reserved[6];
};

/* The figures of one gather (zero for the other kinds). */
struct overlap_figures {
	uint64_t duration_ns;     /* end - start */
	uint64_t exposed_ns;      /* the part of [start, end) inside the step with no compute under it and
	                             not already counted for an earlier gather; 0 under min_exposed_ns */
	uint64_t hidden_ns;       /* duration - exposed */
	uint64_t compute_wait_ns; /* the stretch with no compute in which it ended, when compute waited
	                             for it there (see overlap_step) */
	uint64_t wait_start_ns;   /* that stretch, [wait_start, wait_end); both 0 without a wait */
	uint64_t wait_end_ns;
	int cause;                /* enum analysis_cause: hidden exactly when exposed_ns is 0 */
	int reserved;
};

/*
 * overlap_step - the figures of every gather of one step [t0, t1) against
 * the merged compute set of the rank.
 *
 * exposed (the comm/compute overlap of PyTorch's trace analysis, HTA): each
 * instant of the step covered by some gather and by no compute counts once,
 * for the earliest-issued gather covering it; gathers on one stream never
 * overlap, so it is simply each gather's interval minus compute. The sum
 * over the gathers is the AllGather time with no compute under it.
 *
 * compute wait (what the compute thread or stream lost to the gather,
 * queueing behind earlier collectives included; fsdp_ref's gather_wait): a
 * stretch with no compute in which collectives ended belongs to the one
 * compute waited for: the last awaited collective to end in it, where a run
 * of gathers ending last gives it to the first of the run (compute needs
 * gathers in issue order; the ones after it were prefetched). A stretch
 * given to an awaited collective that is not a gather (a tensor-parallel
 * activation gather queued behind an FSDP gather, say) is no gather's
 * wait: it adds to *other_wait_ns. Gradient reductions (background) own no
 * stretch. Stretches are clipped to [t0, t1).
 *
 * units[0..nunits) (host timing; NULL, 0 when not known) are the ranges of
 * the units' compute (NVTX ranges that hold others: modules), sorted by
 * start. Compute waits for a gather right before the unit it gathers runs:
 * a stretch inside a unit's range that closes before the gathered unit's
 * range opens (unit_opens_ns), with no compute between the two, is that
 * other unit's own compute stalled (its thread descheduled between two of
 * its ops while the gather landed), and no gather's wait.
 *
 * The cause of an exposed gather is the first that applies, judged over
 * [queue_start, end): first-of-phase; host-late (device_timing only: entered
 * after the compute before it had ended, its kernel started within
 * OVERLAP_LAUNCH_SLACK_NS); no-prefetch (compute under less than
 * 1/OVERLAP_PREFETCHED_DIVISOR of it); bandwidth-bound. No-prefetch is for
 * a step that issues gathers on demand: a gather that started within
 * OVERLAP_QUEUE_SLACK_NS of the previous gather's end (compute under at
 * most half of the gap) was queued behind it, issued ahead; where most of
 * the step's gathers (past the first of each phase) were issued ahead
 * (compute under them, or queued), the step
 * prefetches, and a gather without compute under it is bandwidth-bound when
 * queued and host-late otherwise (issued late by a host that was behind).
 *
 * c[0..n) in issue order; out[0..n) receives the figures. Returns 0 or
 * -ENOMEM.
 */
int overlap_step(const struct interval *compute, size_t ncompute, const struct interval *units, size_t nunits,
		 const struct overlap_collective *c, size_t n, uint64_t t0, uint64_t t1, int device_timing,
		 uint64_t min_exposed_ns, struct overlap_figures *out, uint64_t *other_wait_ns);

#endif
