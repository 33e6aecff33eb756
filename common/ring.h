/* ring: a bounded, lock-free queue of fixed-size records.
 *
 * Producers: any thread, any number, including signal handlers. A push never
 * waits for the consumer and never waits for another producer beyond a CAS
 * retry; when the ring is full the record is dropped and counted. The agent
 * is a guest in someone else's process, so losing an event is acceptable and
 * stalling an NCCL call is not.
 *
 * Consumer: exactly one thread at a time (the agent's sender thread). Handing
 * the consumer role to another thread needs a happens-before edge (a join, a
 * mutex) between the old consumer's last pop and the new one's first.
 *
 * Records are at most ring_slot_bytes() long and are copied in and out; every
 * byte of memory is allocated by ring_new. */
#ifndef FSS_COMMON_RING_H
#define FSS_COMMON_RING_H

#include <stddef.h>
#include <stdint.h>

typedef struct ring ring_t;

/* Largest slot_bytes ring_new accepts (a record's length is kept in 32 bits,
 * and an event record is tens of bytes, so this is a sanity bound). */
#define FSS_RING_MAX_SLOT_BYTES ((size_t)1 << 20)
/* Largest slots ring_new accepts (after rounding up to a power of two). */
#define FSS_RING_MAX_SLOTS ((size_t)1 << 28)

/* Creates a ring holding up to ring_capacity() records of up to slot_bytes
 * bytes each. slot_bytes is rounded up to a multiple of 8; slots is rounded
 * up to a power of two, and to at least 2. All memory is allocated here, once:
 * push and pop never allocate.
 * Returns NULL with errno = EINVAL when slot_bytes or slots is 0 or above the
 * FSS_RING_MAX_* bounds, or errno = ENOMEM. The caller frees with ring_free. */
ring_t *ring_new(size_t slot_bytes, size_t slots);

/* Frees the ring. No producer or consumer may be using it, or use it after.
 * NULL is a no-op. */
void ring_free(ring_t *ring);

/* Copies len bytes from record into the next free slot. Any thread, any number
 * of producers at once; lock-free, no allocation, no syscall, does not touch
 * errno: async-signal-safe.
 * Returns 0 when the record was accepted; -ENOSPC when the ring is full and
 * -EMSGSIZE when len > ring_slot_bytes() (the record is dropped and counted in
 * ring_drops in both cases); -EINVAL when ring is NULL (not counted). */
int ring_push(ring_t *ring, const void *record, size_t len);

/* Zero-copy push, in two steps: ring_reserve claims a slot for a record of len
 * bytes and sets *slot to its ring_slot_bytes() writable bytes (8-aligned);
 * the caller fills them and calls ring_commit(ring, *slot), which publishes
 * the record. Same guarantees and return values as ring_push (a failed
 * reservation is a counted drop and leaves *slot NULL).
 * Between the two calls the consumer stops at that slot (it never skips a
 * record), so commit at once, on every path: no blocking call in between. */
int ring_reserve(ring_t *ring, size_t len, void **slot);
void ring_commit(ring_t *ring, void *slot);

/* Single consumer: copies the oldest record into out (cap bytes) and sets
 * *len to its length. Never blocks.
 * Returns 1 when a record was copied out; 0 when the ring is empty, or when
 * the oldest slot is claimed by a producer that has not finished writing it
 * (it is not skipped: a later pop returns it); -EMSGSIZE when the oldest
 * record is longer than cap (*len is set to its length, it stays in the ring).
 * Lock-free, no allocation, no syscall. */
int ring_pop(ring_t *ring, void *out, size_t cap, size_t *len);

/* Records dropped since ring_new (full ring or oversize record). Any thread;
 * a relaxed read, exact once producers are quiet. */
uint64_t ring_drops(const ring_t *ring);

/* Records accepted since ring_new. Any thread; a relaxed read, exact once
 * producers are quiet. A record reserved but not yet committed counts. */
uint64_t ring_pushed(const ring_t *ring);

/* Records popped since ring_new. Any thread; a relaxed read, exact in the
 * consumer thread. */
uint64_t ring_popped(const ring_t *ring);

/* Largest record, in bytes (slot_bytes given to ring_new, rounded up to 8). */
size_t ring_slot_bytes(const ring_t *ring);

/* Number of slots: the most records the ring holds at once. */
size_t ring_capacity(const ring_t *ring);

#endif /* FSS_COMMON_RING_H */
