/* ring: bounded multi-producer queue with a per-slot sequence number
 * (Dmitry Vyukov's bounded MPMC queue, used here with a single consumer).
 *
 * How it works. Positions are 64-bit counters that only grow (2^64 pushes
 * never wrap in practice); position p lives in slot p & mask. Each slot has a
 * sequence number `seq` that says whose turn it is:
 *
 *   seq == p             free for the producer of position p
 *   seq == p + 1         holds the record of position p, ready for the consumer
 *   seq == p + capacity  consumed; free for the producer of p + capacity
 *
 * A producer reads enqueue_pos = p and looks at slot p. If seq == p it tries
 * to claim position p with one CAS on enqueue_pos; the winner owns the slot
 * alone until it publishes (seq = p + 1). If seq < p, the slot still holds
 * the record of p - capacity: the ring is full and the record is dropped. If
 * seq > p, another producer claimed p first: reload and retry.
 *
 * The consumer reads slot dequeue_pos = p. If seq == p + 1 it copies the
 * record out and hands the slot back (seq = p + capacity). Anything else means
 * empty, or claimed but not yet published: it returns 0 and tries the same
 * slot next time, so records leave in the order positions were claimed.
 *
 * Memory ordering. The record bytes are plain memory; all hand-offs go through
 * `seq`:
 *  - producer publish: store(seq = p + 1, release) after writing the bytes;
 *    consumer: load(seq, acquire) before reading them. So the consumer sees
 *    the whole record.
 *  - consumer hand-back: store(seq = p + capacity, release) after reading;
 *    producer: load(seq, acquire) before its CAS and its writes. So a producer
 *    never overwrites bytes the consumer is still reading.
 *  - the CAS on enqueue_pos only decides which producer owns position p; it
 *    carries no data, so it is relaxed. enqueue_pos, dequeue_pos and drops are
 *    counters read relaxed.
 *
 * Why the push is safe in the hot path and in a signal handler: it is a few
 * loads, one CAS and one store on lock-free 64-bit atomics (checked below at
 * compile time), plus a memcpy. No lock: a thread interrupted anywhere in a
 * push (even by a signal handler that pushes too) never makes another push
 * wait; the worst case is that the consumer waits for that one slot. No
 * allocation and no syscall: the memory was allocated by ring_new, and nothing
 * here touches errno.
 *
 * Layout. The read-only fields, enqueue_pos (written by every producer),
 * dequeue_pos (written by the consumer) and drops each sit on their own cache
 * line, so producers and the consumer do not invalidate each other's lines
 * except through the slots they actually share. */
#include "common/ring.h"

#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "ring needs always-lock-free 64-bit atomics to be async-signal-safe");

#define RING_CACHE_LINE 64

/* One slot: header, then slot_bytes of record (the stride is a multiple of 8,
 * so every header and record is 8-aligned). */
struct ring_cell {
	_Atomic uint64_t seq; /* whose turn it is; see the table at the top */
	uint32_t len;	      /* record length, written by the owning producer */
	uint32_t pad;	      /* keeps data 8-aligned */
	unsigned char data[]; /* at offset 16: 8-aligned */
};

struct ring {
	/* Read-only after ring_new: read by every push and pop. */
	alignas(RING_CACHE_LINE) unsigned char *cells;
	uint64_t mask;	   /* capacity - 1 */
	size_t stride;	   /* bytes from one cell to the next */
	size_t slot_bytes; /* largest record */

	/* Next position to claim. Written by every producer (CAS). */
	alignas(RING_CACHE_LINE) _Atomic uint64_t enqueue_pos;

	/* Next position to pop. Written by the consumer only; atomic so that any
	 * thread may read ring_popped. */
	alignas(RING_CACHE_LINE) _Atomic uint64_t dequeue_pos;

	/* Records dropped (full or oversize). Written on the drop path only. */
	alignas(RING_CACHE_LINE) _Atomic uint64_t drops;
};

static inline struct ring_cell *ring_cell_at(const ring_t *ring, uint64_t pos)
{
	return (struct ring_cell *)(ring->cells + (size_t)(pos & ring->mask) * ring->stride);
}

static size_t ring_round_pow2(size_t n)
{
	size_t p = 2; /* capacity 1 cannot tell "full" from "free" (seq p+1 == next p) */
	while (p < n)
		p <<= 1;
	return p;
}

ring_t *ring_new(size_t slot_bytes, size_t slots)
{
	if (slot_bytes == 0 || slot_bytes > FSS_RING_MAX_SLOT_BYTES || slots == 0 || slots > FSS_RING_MAX_SLOTS) {
		errno = EINVAL;
		return NULL;
	}
	slot_bytes = (slot_bytes + 7) & ~(size_t)7;
	size_t capacity = ring_round_pow2(slots);
	size_t stride = sizeof(struct ring_cell) + slot_bytes;
	size_t header = (sizeof(struct ring) + RING_CACHE_LINE - 1) & ~(size_t)(RING_CACHE_LINE - 1);
	/* The bounds above keep this far from overflow on 64-bit; check anyway for
	 * 32-bit builds. */
	if (capacity > (SIZE_MAX - header - RING_CACHE_LINE) / stride) {
		errno = ENOMEM;
		return NULL;
	}
	size_t total = header + capacity * stride;
	total = (total + RING_CACHE_LINE - 1) & ~(size_t)(RING_CACHE_LINE - 1);

	/* One allocation for the ring and its cells; aligned_alloc wants a size
	 * that is a multiple of the alignment, which total is. */
	unsigned char *mem = aligned_alloc(RING_CACHE_LINE, total);
	if (!mem) {
		errno = ENOMEM;
		return NULL;
	}
	ring_t *ring = (ring_t *)mem;
	memset(ring, 0, sizeof(*ring));
	ring->cells = mem + header;
	ring->mask = capacity - 1;
	ring->stride = stride;
	ring->slot_bytes = slot_bytes;
	atomic_init(&ring->enqueue_pos, 0);
	atomic_init(&ring->dequeue_pos, 0);
	atomic_init(&ring->drops, 0);
	for (size_t i = 0; i < capacity; i++) {
		struct ring_cell *cell = ring_cell_at(ring, i);
		atomic_init(&cell->seq, i); /* slot i is free for position i */
		cell->len = 0;
		cell->pad = 0;
	}
	/* The ring is handed to other threads by the caller (pthread_create, or a
	 * release store of the pointer), which orders these plain writes. */
	return ring;
}

void ring_free(ring_t *ring)
{
	free(ring); /* the cells live in the same allocation */
}

/* Counts one dropped record. Relaxed: the counter carries no data. */
static inline void ring_count_drop(ring_t *ring)
{
	atomic_fetch_add_explicit(&ring->drops, 1, memory_order_relaxed);
}

int ring_reserve(ring_t *ring, size_t len, void **slot)
{
	*slot = NULL;
	if (!ring)
		return -EINVAL;
	if (len > ring->slot_bytes) {
		ring_count_drop(ring);
		return -EMSGSIZE;
	}
	/* Relaxed: pos is only a guess; the acquire load of seq below and the CAS
	 * decide. */
	uint64_t pos = atomic_load_explicit(&ring->enqueue_pos, memory_order_relaxed);
	for (;;) {
		struct ring_cell *cell = ring_cell_at(ring, pos);
		/* Acquire: pairs with the consumer's release hand-back, so its reads of
		 * this slot's previous record happen before our writes. */
		uint64_t seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
		int64_t diff = (int64_t)(seq - pos);
		if (diff == 0) {
			/* Free for position pos: claim it. Weak CAS: a spurious failure just
			 * retries; on failure pos is reloaded with the current enqueue_pos. */
			if (atomic_compare_exchange_weak_explicit(&ring->enqueue_pos, &pos, pos + 1,
								  memory_order_relaxed, memory_order_relaxed)) {
				/* This thread alone owns the cell until ring_commit. */
				cell->len = (uint32_t)len;
				*slot = cell->data;
				return 0;
			}
		} else if (diff < 0) {
			/* The slot still holds the record of pos - capacity: full. Dropping
			 * instead of waiting is the point: the host must never stall on us. */
			ring_count_drop(ring);
			return -ENOSPC;
		} else {
			/* Another producer claimed pos after we read enqueue_pos: catch up. */
			pos = atomic_load_explicit(&ring->enqueue_pos, memory_order_relaxed);
		}
	}
}

void ring_commit(ring_t *ring, void *slot)
{
	(void)ring;
	struct ring_cell *cell = (struct ring_cell *)((unsigned char *)slot - offsetof(struct ring_cell, data));
	/* While reserved, seq == pos and only we may change it: a relaxed read of
	 * our own value. Release: the record bytes and len become visible to the
	 * consumer's acquire load before seq == pos + 1 does. */
	uint64_t pos = atomic_load_explicit(&cell->seq, memory_order_relaxed);
	atomic_store_explicit(&cell->seq, pos + 1, memory_order_release);
}

int ring_push(ring_t *ring, const void *record, size_t len)
{
	void *slot;
	int rc = ring_reserve(ring, len, &slot);
	if (rc != 0)
		return rc;
	if (len)
		memcpy(slot, record, len);
	ring_commit(ring, slot);
	return 0;
}

int ring_pop(ring_t *ring, void *out, size_t cap, size_t *len)
{
	/* Only this (single) consumer writes dequeue_pos: relaxed is exact here. */
	uint64_t pos = atomic_load_explicit(&ring->dequeue_pos, memory_order_relaxed);
	struct ring_cell *cell = ring_cell_at(ring, pos);
	/* Acquire: pairs with the producer's release in ring_commit, so the record
	 * bytes and len are complete once seq says so. */
	uint64_t seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
	if (seq != pos + 1)
		return 0; /* empty, or claimed and still being written: never skip it */
	size_t n = cell->len;
	*len = n;
	if (n > cap)
		return -EMSGSIZE; /* left in place: the caller can retry with more room */
	if (n)
		memcpy(out, cell->data, n);
	/* Release: our reads of the record happen before a producer of
	 * pos + capacity (acquire on seq) overwrites it. */
	atomic_store_explicit(&cell->seq, pos + ring->mask + 1, memory_order_release);
	atomic_store_explicit(&ring->dequeue_pos, pos + 1, memory_order_relaxed);
	return 1;
}

uint64_t ring_drops(const ring_t *ring)
{
	return atomic_load_explicit(&ring->drops, memory_order_relaxed);
}

uint64_t ring_pushed(const ring_t *ring)
{
	/* Every successful CAS claims exactly one position, so enqueue_pos is the
	 * number of records accepted: no second counter on the hot path. */
	return atomic_load_explicit(&ring->enqueue_pos, memory_order_relaxed);
}

uint64_t ring_popped(const ring_t *ring)
{
	return atomic_load_explicit(&ring->dequeue_pos, memory_order_relaxed);
}

size_t ring_slot_bytes(const ring_t *ring)
{
	return ring->slot_bytes;
}

size_t ring_capacity(const ring_t *ring)
{
	return (size_t)ring->mask + 1;
}
