/* fsdp_ref/fsdp.h: the FSDP runtime, the parameter lifecycle per unit.
 *
 *   shards at rest -> AllGather (pre-forward, prefetched P units ahead)
 *   -> forward -> reshard: free, keep, or keep 1/G (post-forward; never the root)
 *   -> AllGather again if resharded (pre-backward, prefetched P ahead)
 *   -> backward -> [AllReduce of the replicated tensors' span over the TP
 *      group, with --tp] -> ReduceScatter of the gradient into the local
 *      shard (+ AllReduce across replicas with HSDP) (post-backward) -> free
 *   -> Adam on the shard (optim.c)
 *
 * The runtime is the model's parameter provider (model.h): the model calls
 * its hooks around every module, and the runtime acts on the units those
 * modules open or close (units.h). Collectives go through the communication
 * thread (comm.h); the compute thread blocks only in wait-for-gather (timed:
 * the exposed gather time) and at the end of backward for the last
 * reduce-scatters. */
#ifndef FSDP_REF_FSDP_H
#define FSDP_REF_FSDP_H

#include <stdint.h>

#include <nccl.h>

#include "fsdp_ref/backend.h"
#include "fsdp_ref/comm.h"
#include "fsdp_ref/mem.h"
#include "fsdp_ref/model.h"
#include "fsdp_ref/tp.h"
#include "fsdp_ref/units.h"

struct fsdp_config {
	enum fsdp_dtype param_dtype;  /* gathered parameters and the parameter shard */
	enum fsdp_dtype reduce_dtype; /* reduce-scatter (and HSDP all-reduce) dtype */
	int prefetch;		      /* units gathered ahead of the one computing in backward */
	int forward_prefetch;	      /* units gathered ahead in forward (FSDP1 without forward_prefetch: 0) */
	int accumulate;		      /* 1: gradients accumulate over micro-batches into an fp32 shard */
	int recompute_regather;	      /* 1: activation checkpointing around FSDP1 units: a resharded unit is
					 gathered again for its forward's recomputation in backward */
	int reshard_size;	      /* G: ranks a unit stays sharded over after forward (0 = keep, S = free) */
	int shard_size;		      /* S: ranks of a shard group */
	int shard_rank;		      /* this rank's index in its shard group */
	int replicas;		      /* R = (N / T) / S */
	int tp_size;		      /* T: ranks of a tensor-parallel group (1: none) */
	int tp_rank;		      /* this rank's index in it: which part of each split tensor it holds */
	uint64_t seed;		      /* initial weights */
	int gather_in_place;	      /* 1 (FSDP2's foreach_all_gather): the shard is copied into the gathered
					 buffer at rank x shard bytes and the AllGather sends from there
					 (sendbuff = recvbuff + rank x bytes); 0 (FSDP1's FlatParameter): from
					 the shard's own buffer */
};

/* Communicators, created by the caller (ncclCommSplit of the world). With
 * tensor parallelism they all lie inside one tp rank's data-parallel
 * dimension: their members hold the same part of every split tensor. */
struct fsdp_comms {
	ncclComm_t shard;    /* the S ranks sharing a unit's shards: AllGather, ReduceScatter */
	ncclComm_t replica;  /* the R ranks holding the same shard (HSDP AllReduce); NULL if R == 1 */
	ncclComm_t regather; /* the G ranks of a backward re-gather; NULL unless 1 < G < S */
	int regather_rank;   /* this rank's index in the regather group */
	struct tp_group *tp; /* the TP group: it sums the replicated tensors' gradients (tp.h);
				NULL without tensor parallelism */
};

/* Per-step counters (since fsdp_step_begin). */
struct fsdp_step_stats {
	int forward_allgathers, backward_allgathers;
	int reduce_scatters, allreduces; /* allreduces: HSDP only (the loss is the trainer's) */
	uint64_t gathered_bytes;	 /* bytes received by AllGathers (output buffer sizes) */
	uint64_t reduce_scattered_bytes; /* bytes sent into ReduceScatters (input buffer sizes) */
	int64_t gather_wait_ns;		 /* compute blocked waiting for gathers: exposed gather time */
	int64_t reduce_wait_ns;		 /* compute blocked at the end of backward for reductions */
	int prefetched_allgathers;	 /* gathers issued ahead of the hook that needed them */
	int recompute_allgathers;	 /* backward gathers an activation-checkpoint recomputation used */
	int broadcasts;			 /* init Broadcasts (fsdp_sync_module_states) */
	int gather_waits;		 /* entries of gather_wait_each */
	const int64_t *gather_wait_each; /* [gather_waits] each gather wait (ns), in the order waited for;
					    owned by the runtime, valid until the next step begins */
};

struct fsdp_runtime;

/* A runtime for `units` of model `mcfg`: allocates and initialises every
 * unit's persistent shards through `mem`. The runtime keeps pointers to all
 * arguments, which must outlive it. NULL on failure. */
struct fsdp_runtime *fsdp_new(const struct fsdp_backend *be, struct mem_ledger *mem, struct comm_thread *ct,
			      const struct model_config *mcfg, const struct unit_table *units,
			      const struct fsdp_config *cfg, const struct fsdp_comms *comms);

/* Wait for anything in flight, free everything. */
void fsdp_free(struct fsdp_runtime *rt);

/* The parameter provider to pass to model_forward / model_backward. */
const struct model_params *fsdp_model_params(struct fsdp_runtime *rt);

/* Start a step: zero the counters (and, when accumulating, the gradient
 * accumulators). */
void fsdp_step_begin(struct fsdp_runtime *rt);

/* Start a micro-batch's forward and backward. sync: its post-backward hooks
 * reduce-scatter (the last micro-batch, or every one with --grad-sync every);
 * otherwise the unsharded gradients are kept and summed for the next sync. */
void fsdp_microbatch_begin(struct fsdp_runtime *rt, int sync);

/* Free every unit's gathered parameters, the root's included (after a
 * forward-only pass, which has no post-backward to reshard them). */
void fsdp_reshard_all(struct fsdp_runtime *rt);

/* Before the first step: broadcast every unit's full parameters from rank 0
 * on the shard group, then on the replica group with HSDP (FSDP1's
 * sync_module_states), and take this rank's shard from the result. 0 or
 * -errno. */
int fsdp_sync_module_states(struct fsdp_runtime *rt, const struct model_config *mcfg);

/* The squared L2 norm of this rank's reduced gradient shards (after
 * fsdp_finish_backward): the local term of clip_grad_norm_. Elements of
 * tensors every tp rank holds whole count 1/T each, so that the sum over the
 * TP group counts them once. 0 or -errno. */
int fsdp_grad_norm_sq(struct fsdp_runtime *rt, double *out);

/* After model_backward: wait for every reduce-scatter (and all-reduce), make
 * compute wait for them, free their buffers. 0 or -errno. */
int fsdp_finish_backward(struct fsdp_runtime *rt);

/* Adam on every unit's shard with hyperparameters `hp` (optim.h). 0 or -errno. */
int fsdp_optimizer_step(struct fsdp_runtime *rt, const struct fsdp_adam_params *hp);

/* The counters of the current step. */
void fsdp_step_stats(const struct fsdp_runtime *rt, struct fsdp_step_stats *out);

#endif /* FSDP_REF_FSDP_H */
