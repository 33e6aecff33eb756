/* fsdp_ref/checkpoint.h: the collectives of a distributed checkpoint save.
 *
 * A save in PyTorch's distributed checkpoint (DCP) first agrees on a plan:
 * every rank's local plan goes to all ranks (all_gather_object: an
 * AllGather of each rank's pickled size, then an AllGather of the payloads
 * padded to the largest), rank 0's global plan comes back
 * (broadcast_object_list: a Broadcast of its size, then of the payload), and
 * the ranks meet at a barrier (an AllReduce of one element) once their
 * shards are written. fsdp_ref issues exactly that traffic on the world
 * communicator, with small text plans as the payloads, and writes no file:
 * what the profiler must learn to leave out of a step is the collectives. */
#ifndef FSDP_REF_CHECKPOINT_H
#define FSDP_REF_CHECKPOINT_H

#include <nccl.h>

#include "fsdp_ref/backend.h"
#include "fsdp_ref/comm.h"
#include "fsdp_ref/mem.h"

/* What one save issued. */
struct checkpoint_counts {
	int allgathers, broadcasts, allreduces;
};

/* The planning and barrier collectives of one save after step `step`, on
 * `world` (rank `rank` of `nranks`), through the communication thread.
 * 0 or -errno; *out receives what was issued. */
int checkpoint_save(const struct fsdp_backend *be, struct comm_thread *ct, struct mem_ledger *mem, ncclComm_t world,
		    int rank, int nranks, int step, struct checkpoint_counts *out);

#endif /* FSDP_REF_CHECKPOINT_H */
