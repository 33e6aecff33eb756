/*
 * strings.c - string interning for the agent: host and command names, NVTX
 * messages and domains, kernel names.
 *
 * Lock-free, allocation-free: an open-addressing table of 64-bit hashes in
 * static memory, claimed with one CAS, and a bounded text arena handed out
 * with one fetch_add. The thread that claims a slot copies the text, takes an
 * id from a counter and publishes the id (release); a thread looking up the
 * same string meanwhile waits a bounded number of spins for it, then gives up
 * with FSS_STRING_NONE (never blocks). A string is defined once per process:
 * its FSS_REC_STRING parts go into the ring when it is first interned (if the
 * agent is recording), and agent_strings_replay() hands them all again to a
 * new sink. The table lives in .bss: untouched pages cost nothing in a
 * process that never interns anything.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/emit.h"
#include "agent/strings.h"
#include "common/record.h"

#define STRINGS_SLOTS 16384u	       /* power of two */
#define STRINGS_ARENA_BYTES (4u << 20) /* total text of all strings */
#define STRINGS_MAX_PROBES 512u	       /* a fuller table answers FSS_STRING_NONE */
#define STRINGS_WAIT_SPINS 100000u     /* for a slot another thread is defining */

/* One spin of a wait loop: tells the core (and a hyperthread sibling) that
 * this thread is only waiting. */
#if defined(__x86_64__) || defined(__i386__)
#define STRINGS_CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define STRINGS_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define STRINGS_CPU_RELAX() ((void)0)
#endif

#define KEY_EMPTY 0u
#define KEY_DEAD 1u /* claimed by a thread that vanished (fork) or could not finish */

struct strings_slot {
	_Atomic uint64_t key; /* hash of the text (>= 2), or KEY_EMPTY / KEY_DEAD */
	_Atomic uint32_t id;  /* 0 until the text below is complete */
	uint32_t len;	      /* text length */
	uint32_t offset;      /* text position in strings_arena */
	uint32_t reserved;
};

static struct strings_slot strings_table[STRINGS_SLOTS];
static char strings_arena[STRINGS_ARENA_BYTES];
static _Atomic uint32_t strings_arena_used;
static _Atomic uint32_t strings_next_id = 1;
static _Atomic int strings_used; /* set before the first claim: the table's pages were touched */

static uint64_t strings_key(const char *s, size_t len)
{
	uint64_t h = record_hash_bytes(s, len);

	return h < 2 ? h + 2 : h; /* 0 and 1 are slot states */
}

/* Emit the string records of one string through emit (the ring or a
 * replay callback). */
static void strings_emit_parts(uint32_t id, const char *s, size_t len, void (*emit)(void *ctx, const void *record),
			       void *ctx)
{
	struct fss_rec_string rec;
	size_t offset = 0;

	do {
		size_t part = len - offset < FSS_STRING_PART_BYTES ? len - offset : FSS_STRING_PART_BYTES;

		memset(&rec, 0, sizeof(rec));
		rec.head.type = FSS_REC_STRING;
		rec.head.size = sizeof(rec);
		rec.id = id;
		rec.total_len = (uint16_t)len;
		rec.offset = (uint16_t)offset;
		memcpy(rec.text, s + offset, part);
		emit(ctx, &rec);
		offset += part;
	} while (offset < len);
}

static void strings_emit_ring(void *ctx, const void *record)
{
	(void)ctx;
	agent_emit(record);
}

/* Define the string in a slot this thread has just claimed. */
static uint32_t strings_define(struct strings_slot *slot, const char *s, size_t len)
{
	uint32_t offset = atomic_fetch_add_explicit(&strings_arena_used, (uint32_t)len, memory_order_relaxed);

	if ((uint64_t)offset + len > STRINGS_ARENA_BYTES) {
		/* Arena full: give the slot up so lookups pass it by. */
		atomic_store_explicit(&slot->key, KEY_DEAD, memory_order_release);
		return FSS_STRING_NONE;
	}
	memcpy(strings_arena + offset, s, len);
	slot->len = (uint32_t)len;
	slot->offset = offset;
	uint32_t id = atomic_fetch_add_explicit(&strings_next_id, 1, memory_order_relaxed);
	atomic_store_explicit(&slot->id, id, memory_order_release);
	if (agent_recording())
		strings_emit_parts(id, s, len, strings_emit_ring, NULL);
	return id;
}

uint32_t agent_intern(const char *s, long len)
{
	if (!s)
		return FSS_STRING_NONE;
	size_t n = len < 0 ? strlen(s) : (size_t)len;
	if (n > FSS_STRING_MAX_BYTES)
		n = FSS_STRING_MAX_BYTES; /* the format's limit: cut, as trace_writer_string does */
	uint64_t key = strings_key(s, n);

	for (uint32_t probe = 0; probe < STRINGS_MAX_PROBES; probe++) {
		struct strings_slot *slot = &strings_table[(key + probe) & (STRINGS_SLOTS - 1)];
		uint64_t seen = atomic_load_explicit(&slot->key, memory_order_acquire);

		if (seen == KEY_EMPTY) {
			atomic_store_explicit(&strings_used, 1, memory_order_relaxed);
			if (atomic_compare_exchange_strong_explicit(&slot->key, &seen, key, memory_order_acq_rel,
								    memory_order_acquire))
				return strings_define(slot, s, n);
			/* another thread took the slot: look at what it put there */
		}
		if (seen != key)
			continue;
		uint32_t id = atomic_load_explicit(&slot->id, memory_order_acquire);
		for (uint32_t spin = 0; id == 0 && spin < STRINGS_WAIT_SPINS; spin++) {
			if (atomic_load_explicit(&slot->key, memory_order_acquire) != key)
				break; /* the definer gave up */
			STRINGS_CPU_RELAX();
			id = atomic_load_explicit(&slot->id, memory_order_acquire);
		}
		if (id == 0)
			return FSS_STRING_NONE;
		if (slot->len == n && memcmp(strings_arena + slot->offset, s, n) == 0)
			return id;
		/* a different string with the same hash: keep probing */
	}
	return FSS_STRING_NONE;
}

void agent_strings_replay(void (*emit)(void *ctx, const void *record), void *ctx)
{
	for (uint32_t i = 0; i < STRINGS_SLOTS; i++) {
		struct strings_slot *slot = &strings_table[i];
		uint64_t key = atomic_load_explicit(&slot->key, memory_order_acquire);

		if (key < 2)
			continue;
		uint32_t id = atomic_load_explicit(&slot->id, memory_order_acquire);
		if (id == 0)
			continue; /* being defined: its parts go into the ring when it is done */
		strings_emit_parts(id, strings_arena + slot->offset, slot->len, emit, ctx);
	}
}

void agent_strings_after_fork(void)
{
	if (!atomic_load_explicit(&strings_used, memory_order_relaxed))
		return; /* nothing was ever interned: leave the table's pages untouched */
	for (uint32_t i = 0; i < STRINGS_SLOTS; i++) {
		struct strings_slot *slot = &strings_table[i];

		if (atomic_load_explicit(&slot->key, memory_order_relaxed) >= 2 &&
		    atomic_load_explicit(&slot->id, memory_order_relaxed) == 0)
			atomic_store_explicit(&slot->key, KEY_DEAD, memory_order_relaxed);
	}
}
