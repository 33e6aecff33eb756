/*
 * analysis_synth.h - synthetic fsdp_ref-like traces for the analysis tests.
 *
 * A small simulation of fsdp_ref's schedule (fsdp_ref/fsdp.c, model.c,
 * train.c) on one compute thread and one FIFO communication thread whose
 * calls block until done, as with the CPU stand-in NCCL: per step, the
 * forward gathers units in order with `prefetch` units ahead, reshards after
 * forward (or not, or to a group), the backward re-gathers in fsdp_ref's
 * backward order and reduce-scatters each unit, then the optimizer and the
 * loss all-reduce. It writes what the agent would record: hello, comm,
 * collective (and group) records, NVTX step / phase / unit ranges with the
 * ops' leaf ranges inside them and the hooks' "fsdp.*" leaf ranges beside
 * them (as fsdp_ref marks them), and optionally CUPTI-like GPU intervals; and
 * it returns the truth: counts per step and the time compute waited on
 * gathers (fsdp_ref's gather_wait_ns).
 */
#ifndef FSS_TESTS_ANALYSIS_SYNTH_H
#define FSS_TESTS_ANALYSIS_SYNTH_H

#include <stdint.h>

#define SYNTH_MAX_STEPS 2048

struct synth_config {
	int ranks;          /* 1..8 */
	int layers;         /* blocks */
	const char *wrap;   /* "block", "linear", "model", "group:K" */
	int reshard;        /* 1 true, 0 false, G > 1: re-gather on G-rank groups */
	int prefetch;       /* units gathered ahead */
	int steps;          /* <= SYNTH_MAX_STEPS */
	int nvtx_steps;     /* "step N" ranges */
	int nvtx_compute;   /* "forward", "backward", "optimizer" and unit ranges */
	int op_ranges;      /* with nvtx_compute: a leaf range around every op and around the
	                       hooks' own work (fsdp_ref); 0: unit ranges only, the ops between
	                       units run in a parent's own time (unmarked_ns) */
	int cupti;          /* GPU intervals (compute kernels, NCCL kernels tied by seq) */
	int grouped;        /* each AllGather issued as a group of two calls */
	int warmup_extra;   /* set-up collectives before step 0, and step 0 gathers the root in fp32 */
	double ns_per_element; /* compute cost (forward; backward is twice) */
	uint64_t latency_ns;   /* per collective */
	double bytes_per_ns;   /* link bandwidth */
	uint64_t skew_ns;      /* rank r runs r x skew_ns behind rank 0 */
	uint32_t chunk_payload; /* trace chunk size, 0: the writer's default */
	int no_reduce;          /* 1: no ReduceScatter (every parameter frozen) */
};

struct synth_truth {
	int units;
	int allgathers, forward_allgathers, backward_allgathers, reduce_scatters, allreduces; /* per step */
	int gathers_per_block;   /* forward gathers per block (8 per Linear, 1 per block) */
	int repeating_units;     /* copies of the motif (group:K with a shorter last group: that
	                            group trails, it is no copy) */
	uint64_t total_params;   /* gathered elements, padded */
	uint64_t largest_unit;   /* padded elements */
	uint64_t gather_wait_ns[SYNTH_MAX_STEPS]; /* rank 0 */
	uint64_t step_ns[SYNTH_MAX_STEPS];
	uint64_t unmarked_ns[SYNTH_MAX_STEPS]; /* compute outside any leaf range (op_ranges 0): in
	                                          a parent's own time (attention between
	                                          per-Linear units, embeddings, head, zeroing
	                                          gradients) */
	uint64_t records;
};

/* synth_defaults - 4 ranks, 4 layers, block, reshard true, prefetch 1, 8
 * steps, NVTX on with op ranges, no CUPTI, link 20 us + 10 bytes/ns, 3 ns
 * per element. */
void synth_defaults(struct synth_config *c);

/* synth_write - simulate and write the trace to path. 0 or negative errno. */
int synth_write(const char *path, const struct synth_config *c, struct synth_truth *truth);

#endif
