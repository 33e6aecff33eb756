/* fsdp_ref/tp.h: the collectives of a tensor-parallel group.
 *
 * With --tp T the ranks of one data-parallel rank's TP group (T consecutive
 * ranks) compute each block together, Megatron-style with sequence
 * parallelism (docs/fsdp_ref.md, "Tensor parallelism"). Every collective on
 * their communicator goes through here: the activation AllGathers and
 * ReduceScatters around the column- and row-parallel linears (the model
 * issues them through tp_model_ops), and the AllReduce of the replicated
 * tensors' gradients (the FSDP runtime issues it at a unit's post-backward).
 *
 * They are on the critical path, as in a real job: each is submitted to the
 * communication thread (behind whatever FSDP traffic is queued: one FIFO,
 * one order on every rank) and waited for before compute goes on. Issuing
 * runs inside an NVTX leaf range named by the caller; the wait is outside
 * every leaf range, like a gather wait, and timed (tp_stats.wait_ns).
 * Buffers are fp32 device memory. Compute thread only. */
#ifndef FSDP_REF_TP_H
#define FSDP_REF_TP_H

#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

#include "fsdp_ref/backend.h"
#include "fsdp_ref/comm.h"
#include "fsdp_ref/model.h"

/* What the group issued since tp_step_begin. */
struct tp_stats {
	int allgathers, reduce_scatters, allreduces;
	int64_t wait_ns; /* compute blocked waiting for them */
};

struct tp_group;

/* A group on communicator `comm` (the TP group's ranks, in tp-rank order),
 * issuing through `ct` on backend `be`; it keeps the pointers, which must
 * outlive it. NULL on failure. */
struct tp_group *tp_new(const struct fsdp_backend *be, struct comm_thread *ct, ncclComm_t comm);
/* Free it, before `ct`. NULL is ignored. */
void tp_free(struct tp_group *tp);

/* The model's TP collectives (model.h), valid as long as the group. */
const struct model_tp_ops *tp_model_ops(struct tp_group *tp);

/* Sum x[n] over the group, in place; the issue runs in the NVTX leaf `op`.
 * Blocking. 0 or -errno. */
int tp_allreduce(struct tp_group *tp, const char *op, float *x, size_t n);

/* Zero the counters. */
void tp_step_begin(struct tp_group *tp);
/* The counters since tp_step_begin. */
void tp_step_stats(const struct tp_group *tp, struct tp_stats *out);

#endif /* FSDP_REF_TP_H */
