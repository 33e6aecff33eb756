/*
 * merge_align.h - the clock alignment of a merge (merge.h, "merge_open"
 * says how it works): merge_open calls it on the samples of its first pass;
 * the unit tests call it alone. Nothing else includes it.
 */
#ifndef FSS_COLLECTOR_MERGE_ALIGN_H
#define FSS_COLLECTOR_MERGE_ALIGN_H

#include <stddef.h>
#include <stdint.h>

#include "collector/merge.h"

/* merge_median_i64 - the median of v[0..n) (sorts v); the lower middle for
 * even n, 0 for none. */
int64_t merge_median_i64(int64_t *v, size_t n);

/* One rank's end of one sampled collective, as merge_align takes it. */
struct merge_sample {
	uint64_t comm;	   /* communicator id hash */
	uint64_t comm_seq; /* its collective number on that communicator, from 1 (Send/Recv not counted) */
	uint64_t end_ns;   /* when it ended on the rank, on the node's own CLOCK_MONOTONIC */
	uint32_t node;
	uint8_t gpu; /* 1: end_ns is its NCCL kernel's end (CUPTI), 0: its host exit */
	uint8_t reserved[3];
};

/*
 * merge_align - the offsets of nnodes nodes from the samples of their
 * collectives. Each nodes[k].anchor_offset_ns is given (node 0's is taken
 * as 0); fills every node's offset_ns, collective_offset_ns, residuals,
 * collectives, basis and aligned_to. Sorts samples. Returns 0 or -ENOMEM.
 */
int merge_align(struct merge_node *nodes, size_t nnodes, struct merge_sample *samples, size_t nsamples);

#endif
