/*
 * emit.h - the agent's hot path: the one ring producers push records into,
 * the per-process counters the sender reports, and the caller's thread id.
 * Part of the agent's core (docs/agent.md, "Layers"): it calls nothing
 * above it.
 */
#ifndef FSS_AGENT_EMIT_H
#define FSS_AGENT_EMIT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ring.h"

/*
 * agent_emit - push one record (head filled by the caller with
 * record_init(); source is always 0 inside the agent: the collector
 * renumbers) into the ring. No lock, no allocation, no syscall. A full ring
 * drops the record and counts it (ring_drops). Safe from any thread.
 */
void agent_emit(const void *record);

/*
 * agent_ring - the ring producers push into (created on first use, so a
 * process that records nothing never allocates it). NULL when it could not
 * be created (the agent is then off). The sender is its only consumer.
 */
ring_t *agent_ring(void);

/* agent_thread_id - the caller's kernel thread id, cached per thread. */
uint32_t agent_thread_id(void);

/*
 * Counters the sender reports in FSS_REC_DROPS records, written by the
 * producers with relaxed atomics. Records a full ring refused are counted
 * by the ring itself (ring_drops).
 */
struct agent_counters {
	_Atomic uint64_t collectives;	/* collective calls seen (all states but OFF) */
	_Atomic uint64_t sink_dropped;	/* records popped but not written (sink failed, or no sink) */
	_Atomic uint64_t cupti_dropped; /* CUPTI's own dropped-record count */
	_Atomic uint64_t nvtx_dropped;	/* NVTX ranges not recorded (stack deeper than 64, table full) */
	_Atomic uint64_t unconfirmed;	/* records sent on a socket and let go from a full retention before
					 * an ack covered them (sender_retention.c; not in the drops record) */
};
extern struct agent_counters agent_counters;

/* What agent.c needs to set up and reset the ring. */
extern size_t agent_ring_slots;	   /* capacity asked for (FSDPSCOPE_RING_SLOTS) */
int agent_ring_exists(void);	   /* the ring was created */
void agent_ring_replace(void);	   /* free the ring; the next record makes a new one */
void agent_thread_id_forget(void); /* the calling thread's cached id is stale (fork) */

#endif
