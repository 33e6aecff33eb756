/* fsdp_ref/nccl_cpu/coll.h: the collectives, staged through shared memory.
 *
 * Every collective moves its data in chunks through the staging slots:
 * each rank writes its part into its own slot, all ranks meet at a barrier,
 * each rank reads what it needs (reducing in rank order 0..n-1). Two
 * staging sets alternate, so one barrier per chunk suffices (coll.c says
 * why). A collective therefore needs at most 2 (n + 1) x chunk bytes of
 * shared memory whatever its size, and returns when it is complete on this
 * rank. */
#ifndef FSS_NCCL_CPU_COLL_H
#define FSS_NCCL_CPU_COLL_H

#include <nccl.h>
#include <stdint.h>

struct op;

/* Run one collective (op->kind not Send/Recv) on op->comm; arguments were
 * checked by the caller. If t_last_ns is not NULL it receives the time the
 * last rank arrived. Returns ncclSuccess, ncclInvalidUsage when the ranks
 * called different collectives, or the error of a failed wait; failures
 * mark the communicator failed. No link-model sleep happens here. */
ncclResult_t coll_run(struct op *op, uint64_t *t_last_ns);

#endif
