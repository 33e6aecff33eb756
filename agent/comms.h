/*
 * comms.h - the table of live communicators: each ncclComm_t the wrappers
 * saw created, with its fss_rec_comm (id_hash, nranks, rank, ...), so that a
 * split can derive its child's id_hash from its parent's and a new sink can
 * be told about every live communicator. Part of the agent's core:
 * nccl_wrap.c fills it, the sender replays it. Lock-free.
 */
#ifndef FSS_AGENT_COMMS_H
#define FSS_AGENT_COMMS_H

#include <stdint.h>

#include "common/record.h"

/* ring_before of a record that never went into the ring (dormant, full ring,
 * or put back after a failed destroy). */
#define COMMS_NOT_IN_RING UINT64_MAX

/*
 * comms_put - remember a communicator (rec->comm is its handle; a handle
 * seen again replaces its old entry: a communicator freed without
 * ncclCommDestroy). ring_before: ring_pushed() just before rec went into the
 * ring, or COMMS_NOT_IN_RING. A full table does not remember it: its splits
 * get id_hash 0 and a new sink is not told about it.
 */
void comms_put(const struct fss_rec_comm *rec, uint64_t ring_before);

/* comms_take - take a communicator out; 0 with its record in *out, or
 * -ENOENT. */
int comms_take(uint64_t handle, struct fss_rec_comm *out);

/*
 * comms_next_split - the record of a live communicator and the number of
 * ncclCommSplit calls made on it before this one (counted from 0; every
 * call of this function counts one). 0, or -ENOENT when it is not known.
 */
int comms_next_split(uint64_t handle, struct fss_rec_comm *out, uint64_t *split_no);

/*
 * agent_comms_replay - emit the fss_rec_comm (init / split) of every live
 * communicator whose record is not still in the ring, so that a new sink
 * knows the handles later records name. Called by the sender, the ring's
 * one consumer.
 */
void agent_comms_replay(void (*emit)(void *ctx, const void *record), void *ctx);

/* agent_comms_reset - forget every communicator (a fork child: the
 * parent's communicators are not usable there; one thread only). */
void agent_comms_reset(void);

#endif
