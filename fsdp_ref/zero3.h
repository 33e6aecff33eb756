/* fsdp_ref/zero3.h: DeepSpeed ZeRO-3's parameter lifecycle (--style zero3).
 *
 * A second parameter provider (model.h) beside the FSDP runtime (fsdp.h),
 * training the same model with the same arithmetic, so that the losses match
 * --style fsdp2, but issuing DeepSpeed ZeRO-3's collective stream:
 *
 *   every tensor split into N padded partitions (this rank: partition r, its
 *   fp32 master, Adam m and v, its fp32 gradient partition)
 *   -> step 0 records the order of uses (the trace), one fetch per use
 *   -> later: a fetch = the needed tensor + the next absent tensors of the
 *      trace within --bucket (and --max-live); one flat AllGather, or one
 *      AllGather per tensor in one NCCL group
 *   -> released after use unless persistent or reused within
 *      --max-reuse-distance
 *   -> each tensor's gradient, once complete, copied into a reduce bucket;
 *      one ReduceScatter per --reduce-bucket elements and at the end of
 *      backward; the partitions summed into the gradient partition
 *   -> Adam on the partitions; the persistent tensors gathered again
 *
 * The rules, exactly, are in docs/fsdp_ref.md ("--style zero3"). Every
 * collective goes through the communication thread, on the world
 * communicator. Only backend ops touch memory, so it runs on every backend. */
#ifndef FSDP_REF_ZERO3_H
#define FSDP_REF_ZERO3_H

#include <stdint.h>

#include <nccl.h>

#include "fsdp_ref/backend.h"
#include "fsdp_ref/comm.h"
#include "fsdp_ref/fsdp.h"
#include "fsdp_ref/log.h"
#include "fsdp_ref/mem.h"
#include "fsdp_ref/model.h"

struct zero3_config {
	enum fsdp_dtype param_dtype;	/* partitions and gathered tensors */
	enum fsdp_dtype reduce_dtype;	/* the ReduceScatter's dtype (the gradient partition is fp32) */
	int coalesced;			/* 1: one AllGather per tensor in a group; 0: one flat AllGather */
	uint64_t bucket;		/* --bucket: a fetch's elements (stage3_prefetch_bucket_size) */
	uint64_t persistence_threshold; /* --persistence-threshold (stage3_param_persistence_threshold) */
	uint64_t max_reuse_distance;	/* --max-reuse-distance (stage3_max_reuse_distance) */
	uint64_t max_live;		/* --max-live (stage3_max_live_parameters) */
	uint64_t reduce_bucket;		/* --reduce-bucket (reduce_bucket_size) */
	int rank, world_size;		/* on `world` */
	uint64_t seed;			/* initial weights */
};

struct zero3_runtime;

/* A runtime for model `mcfg` on communicator `world`: allocates this rank's
 * partitions (through `mem`, MEM_PERSISTENT) and sets their initial values,
 * the same per element as FSDP's. Keeps pointers to be, mem, ct; they must
 * outlive it. NULL on failure. */
struct zero3_runtime *zero3_new(const struct fsdp_backend *be, struct mem_ledger *mem, struct comm_thread *ct,
				const struct model_config *mcfg, const struct zero3_config *cfg, ncclComm_t world);

/* Wait for every collective in flight, free everything (NULL is ignored). */
void zero3_free(struct zero3_runtime *z);

/* The parameter provider to pass to model_forward / model_backward. */
const struct model_params *zero3_model_params(struct zero3_runtime *z);

/* Start a step: zero the counters and the gradient partitions. What follows
 * until zero3_microbatch_begin is a forward-only pass (an eval), which uses
 * the forward part of the trace. */
void zero3_step_begin(struct zero3_runtime *z);

/* Start a micro-batch's forward and backward. The first one of the run
 * records the trace. */
void zero3_microbatch_begin(struct zero3_runtime *z);

/* After model_backward: wait for every reduce bucket's ReduceScatter, add
 * the reduced partitions into the gradient partitions, free the buckets.
 * 0 or -errno. */
int zero3_finish_backward(struct zero3_runtime *z);

/* The squared L2 norm of this rank's gradient partitions (after
 * zero3_finish_backward): the local term of the gradient norm. 0 or -errno. */
int zero3_grad_norm_sq(struct zero3_runtime *z, double *out);

/* Release every gathered tensor but the persistent ones, then Adam on the
 * partitions with `hp` (optim.h). 0 or -errno. */
int zero3_optimizer_step(struct zero3_runtime *z, const struct fsdp_adam_params *hp);

/* After the optimizer step, outside its NVTX range (DeepSpeed's _post_step):
 * gather every persistent tensor from its updated partitions, one AllGather
 * each, and freeze the step's counters for zero3_log_fill. 0 or -errno. */
int zero3_post_step(struct zero3_runtime *z);

/* Free every gathered tensor but the persistent ones (after a forward-only
 * pass). */
void zero3_release_all(struct zero3_runtime *z);

/* The counters since zero3_step_begin, in FSDP's terms: fetch events of the
 * forward and of the backward, reduce buckets, bytes, waits. */
void zero3_step_stats(const struct zero3_runtime *z, struct fsdp_step_stats *out);

/* Set r's zero3 keys from the last training step (frozen by zero3_post_step,
 * so that an eval pass after it changes nothing), add that step's optimizer
 * gathers to r->allgathers, and report the tensors as r's units. r keeps a
 * pointer into the runtime (fetch_elements), valid until the next step. */
void zero3_log_fill(const struct zero3_runtime *z, struct log_record *r);

#endif /* FSDP_REF_ZERO3_H */
