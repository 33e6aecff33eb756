/*
 * emit.c - the hot path: push a record into the one ring, and the counters
 * the sender reports.
 *
 * Why agent_emit is safe inside someone else's NCCL call: after the first
 * record of the process it is one acquire load of the ring pointer and one
 * ring_push (a few atomics and a memcpy of at most FSS_RECORD_MAX_BYTES): no
 * lock, no allocation, no syscall, errno untouched. A full ring drops the
 * record and counts it (ring_drops), it never waits for the sender.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/emit.h"
#include "common/ring.h"

struct agent_counters agent_counters;

/* The ring, created on first use: allocating (and touching) megabytes of
 * slots in every process the agent is preloaded into, `true` included,
 * would be a cost paid for nothing. */
static ring_t *_Atomic emit_ring;

/* Ring capacity in records (FSDPSCOPE_RING_SLOTS), set by agent_init. */
size_t agent_ring_slots = 65536;

/* The slow path of agent_ring(): the first record of the process (or of a
 * fork child). Two threads may race here: one ring wins, the other is freed
 * before anyone saw it. */
static ring_t *emit_ring_create(void)
{
	int saved = errno; /* producers promise not to touch errno */
	ring_t *fresh = ring_new(FSS_RECORD_MAX_BYTES, agent_ring_slots);
	ring_t *expected = NULL;

	if (!fresh) {
		errno = saved;
		agent_disable("cannot allocate the ring (FSDPSCOPE_RING_SLOTS too large?)");
		return NULL;
	}
	if (!atomic_compare_exchange_strong_explicit(&emit_ring, &expected, fresh, memory_order_acq_rel,
						     memory_order_acquire)) {
		ring_free(fresh);
		fresh = expected;
	}
	errno = saved;
	return fresh;
}

ring_t *agent_ring(void)
{
	ring_t *r = atomic_load_explicit(&emit_ring, memory_order_acquire);

	if (__builtin_expect(r != NULL, 1))
		return r;
	if (atomic_load_explicit(&agent_state_now, memory_order_relaxed) == AGENT_OFF)
		return NULL;
	return emit_ring_create();
}

void agent_emit(const void *record)
{
	const struct fss_record_head *head = record;
	ring_t *r = agent_ring();

	if (r)
		(void)ring_push(r, record, head->size); /* full: dropped and counted by the ring */
}

/* agent_ring_replace - forget the current ring and start with an empty one
 * (agent_reset_source; no other thread may be using the agent). The old
 * ring is freed: in a fork child it may hold a slot that a parent thread
 * claimed and never published, which would stop the consumer for good. */
void agent_ring_replace(void)
{
	ring_t *old = atomic_exchange_explicit(&emit_ring, NULL, memory_order_acq_rel);

	ring_free(old);
}

/* Kernel thread id, cached: gettid is a syscall, paid once per thread. */
static __thread uint32_t emit_thread_id __attribute__((tls_model("initial-exec")));

uint32_t agent_thread_id(void)
{
	uint32_t tid = emit_thread_id;

	if (__builtin_expect(tid == 0, 0)) {
		int saved = errno;
		tid = (uint32_t)syscall(SYS_gettid);
		errno = saved;
		emit_thread_id = tid;
	}
	return tid;
}

/* agent_thread_id_forget - the fork child's one thread has a new id. */
void agent_thread_id_forget(void)
{
	emit_thread_id = 0;
}

int agent_ring_exists(void)
{
	return atomic_load_explicit(&emit_ring, memory_order_acquire) != NULL;
}
