/*
 * comms.c - the table of live communicators (comms.h).
 *
 * Open addressing over 1024 slots keyed by the ncclComm_t value, claimed
 * with a CAS; each slot's record is guarded by a seqlock (a reader that
 * keeps meeting a writer gives up rather than wait). A removed slot becomes
 * DEAD so that probes go on past it. No lock, no allocation: the table is
 * in .bss and untouched until the first communicator.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/comms.h"
#include "agent/emit.h"
#include "common/ring.h"

#define COMMS_SLOTS 1024u /* power of two */
#define COMMS_KEY_EMPTY 0u
#define COMMS_KEY_DEAD 1u /* removed; probes go on past it */
#define COMMS_READ_TRIES 1000

struct comms_slot {
	_Atomic uint64_t key;	  /* the ncclComm_t value, or EMPTY / DEAD */
	_Atomic uint32_t version; /* seqlock: odd while rec is being written */
	_Atomic uint32_t splits;  /* ncclCommSplit calls on this communicator so far */
	struct fss_rec_comm rec;  /* its init / split record */
	uint64_t ring_before;	  /* ring_pushed() before rec went into the ring, or COMMS_NOT_IN_RING */
};

static struct comms_slot comms_table[COMMS_SLOTS];
static _Atomic int comms_used; /* the table was written: a fork child must clear it */

static uint32_t comms_home(uint64_t handle)
{
	return (uint32_t)((handle * 0x9e3779b97f4a7c15ull) >> 40) & (COMMS_SLOTS - 1);
}

static struct comms_slot *comms_find(uint64_t handle)
{
	uint32_t home = comms_home(handle);

	for (uint32_t i = 0; i < COMMS_SLOTS; i++) {
		struct comms_slot *s = &comms_table[(home + i) & (COMMS_SLOTS - 1)];
		uint64_t key = atomic_load_explicit(&s->key, memory_order_acquire);

		if (key == handle)
			return s;
		if (key == COMMS_KEY_EMPTY)
			return NULL;
	}
	return NULL;
}

static void comms_write(struct comms_slot *s, const struct fss_rec_comm *rec, uint64_t ring_before)
{
	uint32_t v = atomic_load_explicit(&s->version, memory_order_relaxed);

	atomic_store_explicit(&s->version, v + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	memcpy(&s->rec, rec, sizeof(*rec));
	s->ring_before = ring_before;
	atomic_store_explicit(&s->version, v + 2, memory_order_release);
}

/* 0 with *out (and *ring_before) copied, or -EAGAIN when a writer kept it
 * busy. */
static int comms_read(struct comms_slot *s, struct fss_rec_comm *out, uint64_t *ring_before)
{
	for (int tries = 0; tries < COMMS_READ_TRIES; tries++) {
		uint32_t v1 = atomic_load_explicit(&s->version, memory_order_acquire);
		if (v1 & 1)
			continue;
		memcpy(out, &s->rec, sizeof(*out));
		uint64_t before = s->ring_before;
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&s->version, memory_order_relaxed) == v1) {
			if (ring_before)
				*ring_before = before;
			return 0;
		}
	}
	return -EAGAIN;
}

void comms_put(const struct fss_rec_comm *rec, uint64_t ring_before)
{
	uint64_t handle = rec->comm;
	struct comms_slot *s = comms_find(handle);
	uint32_t home = comms_home(handle);

	atomic_store_explicit(&comms_used, 1, memory_order_relaxed);
	for (uint32_t i = 0; !s && i < COMMS_SLOTS; i++) {
		struct comms_slot *t = &comms_table[(home + i) & (COMMS_SLOTS - 1)];
		uint64_t key = atomic_load_explicit(&t->key, memory_order_acquire);

		while ((key == COMMS_KEY_EMPTY || key == COMMS_KEY_DEAD) &&
		       !atomic_compare_exchange_weak_explicit(&t->key, &key, handle, memory_order_acq_rel,
							      memory_order_acquire)) {
		}
		if (key == COMMS_KEY_EMPTY || key == COMMS_KEY_DEAD)
			s = t;
	}
	if (!s) {
		agent_debug("communicator table full: comm %#llx not remembered", (unsigned long long)handle);
		return;
	}
	atomic_store_explicit(&s->splits, 0, memory_order_relaxed);
	comms_write(s, rec, ring_before);
}

int comms_take(uint64_t handle, struct fss_rec_comm *out)
{
	struct comms_slot *s = comms_find(handle);
	int err;

	if (!s)
		return -ENOENT;
	err = comms_read(s, out, NULL);
	uint64_t key = handle;
	atomic_compare_exchange_strong_explicit(&s->key, &key, COMMS_KEY_DEAD, memory_order_acq_rel,
						memory_order_relaxed);
	return err ? -ENOENT : 0;
}

int comms_next_split(uint64_t handle, struct fss_rec_comm *out, uint64_t *split_no)
{
	struct comms_slot *s = comms_find(handle);

	if (!s || comms_read(s, out, NULL) != 0)
		return -ENOENT;
	*split_no = atomic_fetch_add_explicit(&s->splits, 1, memory_order_relaxed);
	return 0;
}

/* A communicator whose record is still in the ring (not popped yet) reaches
 * the new sink that way: replaying it too would define it twice. Its ring
 * position is at least ring_before, so popped <= ring_before means it is
 * still there; otherwise (popped, or never pushed: dormant, full ring) it
 * is replayed. Called by the sender, the ring's one consumer: ring_popped
 * is exact there. */
void agent_comms_replay(void (*emit)(void *ctx, const void *record), void *ctx)
{
	ring_t *ring = agent_ring();
	uint64_t popped = ring ? ring_popped(ring) : 0;
	struct fss_rec_comm rec;
	uint64_t ring_before;

	if (!atomic_load_explicit(&comms_used, memory_order_relaxed))
		return;
	for (uint32_t i = 0; i < COMMS_SLOTS; i++) {
		struct comms_slot *s = &comms_table[i];
		uint64_t key = atomic_load_explicit(&s->key, memory_order_acquire);

		if (key < 2 || comms_read(s, &rec, &ring_before) != 0 || rec.comm != key)
			continue;
		if (ring_before != COMMS_NOT_IN_RING && popped <= ring_before)
			continue;
		emit(ctx, &rec);
	}
}

void agent_comms_reset(void)
{
	if (!atomic_load_explicit(&comms_used, memory_order_relaxed))
		return;
	memset(comms_table, 0, sizeof(comms_table)); /* one thread: the fork child or a test */
	atomic_store_explicit(&comms_used, 0, memory_order_relaxed);
}
