/*
 * merge_state.h - what a merge_t holds, shared by its parts: the first pass
 * over each trace (merge_scan.c), the clock alignment (merge_align.c), the
 * merged read (merge_read.c) and the life cycle (merge.c). Nothing outside
 * collector/merge* includes it.
 */
#ifndef FSS_COLLECTOR_MERGE_STATE_H
#define FSS_COLLECTOR_MERGE_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "collector/merge.h"
#include "collector/merge_align.h"
#include "collector/trace_jobs.h"

/* merge_sample.gpu during the scan: a host exit on a communicator with a
 * GPU returns at enqueue and says nothing of when the collective ended
 * (SAMPLE_HOST_NONBLOCKING samples are dropped once the scan is done). */
#define SAMPLE_HOST 0
#define SAMPLE_GPU 1
#define SAMPLE_HOST_NONBLOCKING 2

/* A process of one node, for the check that no process is in two. */
struct merge_process {
	uint64_t process_id; /* the sink record's, 0 without one */
	uint32_t pid;
	uint32_t node;
	int32_t rank;
	char host[MERGE_HOST_MAX];
};

/* What the first pass learnt of a node for trace_jobs_check: the ranks its
 * processes hold (trace_jobs.h) and its CLOCK_REALTIME span. */
struct merge_job_node {
	struct trace_jobs_rank *ranks;
	size_t nranks, cap;
	int64_t first_ns, last_ns; /* both 0: not known (no clock anchor) */
};

struct stream;

struct merge {
	struct merge_node *nodes;
	size_t nnodes;
	struct merge_sample *samples;
	size_t nsamples, samples_cap;
	struct merge_process *procs;
	size_t nprocs, procs_cap;
	struct merge_job_node *jobs; /* [nnodes] */
	size_t current;
	unsigned read_flags; /* TRACE_READ_* for every read of the traces */
	/* merge_read's state */
	struct stream *streams;
	const struct trace_parser_ops *ops;
	void *ctx;
};

#endif
