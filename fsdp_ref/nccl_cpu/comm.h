/* fsdp_ref/nccl_cpu/comm.h: the communicator (struct ncclComm).
 *
 * A communicator is a process-local handle onto the shared segment of its
 * unique id. NCCL's rule applies: one thread uses a communicator at a time;
 * different communicators may be used from different threads at once. */
#ifndef FSS_NCCL_CPU_COMM_H
#define FSS_NCCL_CPU_COMM_H

#include <nccl.h>
#include <stdint.h>

#include "fsdp_ref/nccl_cpu/link_model.h"
#include "fsdp_ref/nccl_cpu/segment.h"
#include "fsdp_ref/nccl_cpu/unique_id.h"

struct ncclComm {
	int rank;
	int nranks;
	struct unique_id id;
	char name[UNIQUE_ID_NAME_MAX]; /* segment name, for unlink on failed init */
	uint64_t split_count;	       /* ncclCommSplit calls so far (same on all ranks) */
	unsigned char *base;	       /* the mapped segment */
	struct segment_layout layout;
	struct segment_header *header;
	struct segment_rank *ranks;
	struct link_model link;
	uint64_t timeout_ns;	  /* FSDP_REF_NCCL_TIMEOUT_S */
	ncclResult_t async_error; /* sticky: once set, every call returns it */
	int finalized;
	int dead_rank;	   /* set by sync_wait when it returns -EPIPE */
	uint64_t barriers; /* barriers passed: the same count on every rank */
	/* Link-model accounting of the group being executed (group.c). */
	int group_active;
	int group_has_collective;
	uint64_t group_t0_ns;	   /* max(own arrival, last rank's arrival), CLOCK_REALTIME */
	uint64_t group_wire_bytes; /* collectives' wire bytes */
	uint64_t group_sent_bytes; /* Send payload bytes */
	uint64_t group_recv_bytes; /* Recv payload bytes */
};

/* Staging slot of rank in staging set (0 or 1). */
static inline unsigned char *comm_slot(struct ncclComm *c, unsigned set, int rank)
{
	return c->base + c->layout.sets_off + set * c->layout.set_stride + (size_t)rank * c->layout.chunk;
}

/* Reduced-chunk area of staging set (0 or 1). */
static inline unsigned char *comm_out(struct ncclComm *c, unsigned set)
{
	return comm_slot(c, set, c->nranks);
}

/* The Send/Recv ring carrying bytes from rank src to rank dst. */
static inline struct segment_ring *comm_ring(struct ncclComm *c, int src, int dst)
{
	size_t index = (size_t)src * (size_t)c->nranks + (size_t)dst;
	return (struct segment_ring *)(c->base + c->layout.rings_off + index * c->layout.ring_stride);
}

/* Join the rendezvous of id as rank of nranks; blocks until every rank has
 * joined or the timeout. On success *out is a new communicator the caller
 * ends with comm_free. Returns an NCCL result; failures set the message. */
ncclResult_t comm_init(struct ncclComm **out, int nranks, const struct unique_id *id, int rank);

/* Split parent (a collective over it, then comm_init of the new comm).
 * color NCCL_SPLIT_NOCOLOR yields *out = NULL. */
ncclResult_t comm_split(struct ncclComm *parent, int color, int key, struct ncclComm **out);

/* Unmap and free. */
void comm_free(struct ncclComm *c);

/* Mark c failed with result res and a message (prefixed with the rank);
 * remote failures also raise the shared abort flag so that peers stop
 * waiting now instead of at their own timeout. Returns res. */
ncclResult_t comm_fail(struct ncclComm *c, ncclResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Turn a negative errno from sync_wait/sync_barrier into comm_fail with a
 * message saying what was waited for. */
ncclResult_t comm_fail_wait(struct ncclComm *c, int rc, const char *what);

#endif
