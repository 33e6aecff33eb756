/* ring_test: the lock-free ring (common/ring.h).
 *
 * Single-threaded tests pin down the contract (FIFO, wraparound, exact drop
 * counts, oversize, empty, claimed-but-unwritten). The stress tests run many
 * producers (and a signal handler) against one consumer and check, whatever
 * the interleaving, that no record is corrupted or reordered within its
 * producer and that every push is accounted for exactly. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "common/ring.h"

/* --- single-threaded contract ------------------------------------------- */

static void test_new_rejects_bad_args(void **state)
{
	(void)state;
	errno = 0;
	assert_null(ring_new(0, 8));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(ring_new(8, 0));
	assert_int_equal(errno, EINVAL);
	assert_null(ring_new(FSS_RING_MAX_SLOT_BYTES + 1, 8));
	assert_null(ring_new(8, FSS_RING_MAX_SLOTS + 1));
	ring_free(NULL); /* no-op */
}

static void test_new_rounds_up(void **state)
{
	(void)state;
	ring_t *r = ring_new(13, 5);
	assert_non_null(r);
	assert_int_equal(ring_slot_bytes(r), 16);
	assert_int_equal(ring_capacity(r), 8);
	ring_free(r);
	r = ring_new(8, 1); /* capacity 1 cannot work with per-slot sequences */
	assert_non_null(r);
	assert_int_equal(ring_capacity(r), 2);
	ring_free(r);
	r = ring_new(64, 1024);
	assert_non_null(r);
	assert_int_equal(ring_slot_bytes(r), 64);
	assert_int_equal(ring_capacity(r), 1024);
	ring_free(r);
}

static void test_empty_pop(void **state)
{
	(void)state;
	ring_t *r = ring_new(16, 4);
	unsigned char buf[16];
	size_t len = 12345;
	assert_int_equal(ring_pop(r, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, 12345); /* untouched when empty */
	assert_int_equal(ring_push(r, "abc", 3), 0);
	assert_int_equal(ring_pop(r, buf, sizeof(buf), &len), 1);
	assert_int_equal(ring_pop(r, buf, sizeof(buf), &len), 0);
	assert_int_equal(ring_pushed(r), 1);
	assert_int_equal(ring_popped(r), 1);
	assert_int_equal(ring_drops(r), 0);
	ring_free(r);
}

static void test_fifo_order(void **state)
{
	(void)state;
	ring_t *r = ring_new(32, 8);
	const char *words[] = {"one", "", "three", "a much longer record, 31 bytes", "5"};
	size_t n = sizeof(words) / sizeof(words[0]);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(ring_push(r, words[i], strlen(words[i])), 0);
	for (size_t i = 0; i < n; i++) {
		char buf[32];
		size_t len = 999;
		assert_int_equal(ring_pop(r, buf, sizeof(buf), &len), 1);
		assert_int_equal(len, strlen(words[i]));
		assert_memory_equal(buf, words[i], len);
	}
	assert_int_equal(ring_pop(r, (char[32]){0}, 32, &(size_t){0}), 0);
	ring_free(r);
}

static void test_wraparound(void **state)
{
	(void)state;
	ring_t *r = ring_new(sizeof(uint64_t), 8);
	uint64_t next_push = 0, next_pop = 0;
	/* Varying fill levels, 10000 rounds: positions wrap the 8 slots thousands
	 * of times. The backlog stays <= 3 between rounds and a round pushes <= 5,
	 * so nothing is ever dropped here. */
	for (int round = 0; round < 10000; round++) {
		int k = 1 + round % 5;
		for (int i = 0; i < k; i++) {
			assert_int_equal(ring_push(r, &next_push, sizeof(next_push)), 0);
			next_push++;
		}
		uint64_t keep = (uint64_t)(round % 4); /* leave 0..3 behind */
		while (next_push - next_pop > keep) {
			uint64_t v;
			size_t len;
			assert_int_equal(ring_pop(r, &v, sizeof(v), &len), 1);
			assert_int_equal(len, sizeof(v));
			assert_int_equal(v, next_pop);
			next_pop++;
		}
	}
	assert_int_equal(ring_drops(r), 0);
	assert_int_equal(ring_pushed(r), next_push);
	assert_int_equal(ring_popped(r), next_pop);
	assert_true(next_push > 8 * 3000);
	ring_free(r);
}

static void test_full_drops_exactly(void **state)
{
	(void)state;
	ring_t *r = ring_new(sizeof(uint32_t), 16);
	for (uint32_t i = 0; i < 16; i++)
		assert_int_equal(ring_push(r, &i, sizeof(i)), 0);
	for (uint32_t i = 100; i < 105; i++)
		assert_int_equal(ring_push(r, &i, sizeof(i)), -ENOSPC);
	assert_int_equal(ring_drops(r), 5);
	assert_int_equal(ring_pushed(r), 16);

	uint32_t v;
	size_t len;
	assert_int_equal(ring_pop(r, &v, sizeof(v), &len), 1);
	assert_int_equal(v, 0);
	uint32_t x = 16;
	assert_int_equal(ring_push(r, &x, sizeof(x)), 0); /* one slot came free */
	x = 17;
	assert_int_equal(ring_push(r, &x, sizeof(x)), -ENOSPC);
	assert_int_equal(ring_drops(r), 6);
	assert_int_equal(ring_pushed(r), 17);

	/* Dropped records never come out: 1..16 in order, then empty. */
	for (uint32_t i = 1; i <= 16; i++) {
		assert_int_equal(ring_pop(r, &v, sizeof(v), &len), 1);
		assert_int_equal(v, i);
	}
	assert_int_equal(ring_pop(r, &v, sizeof(v), &len), 0);
	ring_free(r);
}

static void test_oversize(void **state)
{
	(void)state;
	ring_t *r = ring_new(32, 4);
	unsigned char big[33];
	memset(big, 0xAB, sizeof(big));
	assert_int_equal(ring_push(r, big, 33), -EMSGSIZE);
	assert_int_equal(ring_drops(r), 1);
	assert_int_equal(ring_pushed(r), 0);
	void *slot = (void *)1;
	assert_int_equal(ring_reserve(r, 1000, &slot), -EMSGSIZE);
	assert_null(slot);
	assert_int_equal(ring_drops(r), 2);

	assert_int_equal(ring_push(r, big, 32), 0); /* exactly slot_bytes fits */
	unsigned char out[32];
	size_t len = 0;
	/* Too small a buffer: told the size, record stays for a retry. */
	assert_int_equal(ring_pop(r, out, 16, &len), -EMSGSIZE);
	assert_int_equal(len, 32);
	assert_int_equal(ring_pop(r, out, sizeof(out), &len), 1);
	assert_int_equal(len, 32);
	assert_memory_equal(out, big, 32);
	assert_int_equal(ring_push(NULL, big, 1), -EINVAL);
	ring_free(r);
}

/* A claimed slot that is not yet written stops the consumer; it is not
 * skipped, and order is by claim. */
static void test_claimed_slot_not_skipped(void **state)
{
	(void)state;
	ring_t *r = ring_new(16, 8);
	void *a;
	assert_int_equal(ring_reserve(r, 2, &a), 0);
	assert_non_null(a);
	assert_int_equal((uintptr_t)a % 8, 0);
	assert_int_equal(ring_push(r, "B", 1), 0);
	char out[16];
	size_t len;
	assert_int_equal(ring_pop(r, out, sizeof(out), &len), 0);
	assert_int_equal(ring_pop(r, out, sizeof(out), &len), 0);
	memcpy(a, "A!", 2);
	ring_commit(r, a);
	assert_int_equal(ring_pop(r, out, sizeof(out), &len), 1);
	assert_int_equal(len, 2);
	assert_memory_equal(out, "A!", 2);
	assert_int_equal(ring_pop(r, out, sizeof(out), &len), 1);
	assert_int_equal(len, 1);
	assert_memory_equal(out, "B", 1);
	assert_int_equal(ring_pop(r, out, sizeof(out), &len), 0);
	ring_free(r);
}

/* --- multi-threaded stress ------------------------------------------------ */

/* A stress record: a header, then a payload whose length and every byte are
 * functions of (producer, seq), so the consumer can check each record
 * completely, and a checksum that ties header and payload together. */
struct stress_record {
	uint16_t producer;
	uint16_t len; /* whole record */
	uint32_t sum; /* FNV-1a of producer, seq and payload */
	uint64_t seq;
	unsigned char payload[48];
};
#define STRESS_HEADER offsetof(struct stress_record, payload)
#define STRESS_SLOT_BYTES sizeof(struct stress_record)

static size_t stress_payload_len(unsigned producer, uint64_t seq)
{
	return (size_t)((seq * 7 + producer) % 49); /* 0..48 */
}

static unsigned char stress_byte(unsigned producer, uint64_t seq, size_t i)
{
	return (unsigned char)(seq * 31 + i * 7 + producer * 101);
}

static uint32_t stress_sum(const struct stress_record *rec, size_t payload_len)
{
	uint32_t h = 2166136261u;
	const unsigned char *p = (const unsigned char *)rec;
	/* producer (2 bytes) and seq (8 bytes), then the payload */
	for (size_t i = 0; i < 2; i++)
		h = (h ^ p[i]) * 16777619u;
	for (size_t i = offsetof(struct stress_record, seq); i < STRESS_HEADER + payload_len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static void stress_fill(struct stress_record *rec, unsigned producer, uint64_t seq)
{
	size_t plen = stress_payload_len(producer, seq);
	rec->producer = (uint16_t)producer;
	rec->len = (uint16_t)(STRESS_HEADER + plen);
	rec->seq = seq;
	for (size_t i = 0; i < plen; i++)
		rec->payload[i] = stress_byte(producer, seq, i);
	rec->sum = stress_sum(rec, plen);
}

#define STRESS_MAX_PRODUCERS 9 /* 8 threads + the signal handler */

/* What the consumer saw; it never asserts while producers run (a cmocka
 * failure would longjmp away from live threads), it records instead. */
struct stress_check {
	uint64_t popped[STRESS_MAX_PRODUCERS];
	uint64_t last_seq_plus1[STRESS_MAX_PRODUCERS]; /* 0: none seen yet */
	uint64_t errors;
	char first_error[160];
};

static void stress_error(struct stress_check *c, const char *fmt, ...)
{
	if (c->errors++ == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->first_error, sizeof(c->first_error), fmt, ap);
		va_end(ap);
	}
}

/* Checks one popped record completely. */
static void stress_check_record(struct stress_check *c, const struct stress_record *rec, size_t len,
				unsigned nproducers)
{
	if (len < STRESS_HEADER || len > STRESS_SLOT_BYTES) {
		stress_error(c, "record length %zu out of range", len);
		return;
	}
	unsigned p = rec->producer;
	if (p >= nproducers) {
		stress_error(c, "bad producer id %u", p);
		return;
	}
	size_t plen = stress_payload_len(p, rec->seq);
	if (len != STRESS_HEADER + plen || rec->len != len) {
		stress_error(c, "producer %u seq %llu: length %zu, expected %zu", p, (unsigned long long)rec->seq, len,
			     STRESS_HEADER + plen);
		return;
	}
	if (rec->sum != stress_sum(rec, plen)) {
		stress_error(c, "producer %u seq %llu: checksum mismatch", p, (unsigned long long)rec->seq);
		return;
	}
	for (size_t i = 0; i < plen; i++) {
		if (rec->payload[i] != stress_byte(p, rec->seq, i)) {
			stress_error(c, "producer %u seq %llu: payload byte %zu corrupted", p,
				     (unsigned long long)rec->seq, i);
			return;
		}
	}
	/* Per-producer order: strictly increasing (drops leave gaps). */
	if (rec->seq + 1 <= c->last_seq_plus1[p])
		stress_error(c, "producer %u: seq %llu after %llu", p, (unsigned long long)rec->seq,
			     (unsigned long long)(c->last_seq_plus1[p] - 1));
	c->last_seq_plus1[p] = rec->seq + 1;
	c->popped[p]++;
}

struct stress_producer {
	ring_t *ring;
	unsigned id;
	uint64_t attempts;
	pthread_barrier_t *start;
	atomic_uint *finished;
	/* results, read by the test after join */
	uint64_t accepted;
	uint64_t dropped;
	uint64_t unexpected_rc;
};

static void *stress_producer_main(void *arg)
{
	struct stress_producer *sp = arg;
	struct stress_record rec;
	pthread_barrier_wait(sp->start);
	for (uint64_t seq = 0; seq < sp->attempts; seq++) {
		stress_fill(&rec, sp->id, seq);
		int rc;
		if (seq % 2) { /* exercise both push paths */
			rc = ring_push(sp->ring, &rec, rec.len);
		} else {
			void *slot;
			rc = ring_reserve(sp->ring, rec.len, &slot);
			if (rc == 0) {
				memcpy(slot, &rec, rec.len);
				ring_commit(sp->ring, slot);
			}
		}
		if (rc == 0)
			sp->accepted++;
		else if (rc == -ENOSPC) {
			sp->dropped++;
			/* Give the consumer a turn (on 2 cores it competes with 4-8 of us),
			 * so that plenty of records flow through and get checked. */
			sched_yield();
		} else
			sp->unexpected_rc++;
	}
	atomic_fetch_add_explicit(sp->finished, 1, memory_order_release);
	return NULL;
}

/* nproducers threads push `attempts` records each into a ring of `slots`
 * while this thread drains it. */
static void run_stress(unsigned nproducers, uint64_t attempts, size_t slots)
{
	ring_t *r = ring_new(STRESS_SLOT_BYTES, slots);
	assert_non_null(r);
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, nproducers + 1);
	atomic_uint finished = 0;
	struct stress_producer sp[STRESS_MAX_PRODUCERS];
	pthread_t tid[STRESS_MAX_PRODUCERS];
	for (unsigned i = 0; i < nproducers; i++) {
		sp[i] = (struct stress_producer){
		    .ring = r, .id = i, .attempts = attempts, .start = &start, .finished = &finished};
		assert_int_equal(pthread_create(&tid[i], NULL, stress_producer_main, &sp[i]), 0);
	}

	static struct stress_check check; /* static: keeps the stack small */
	memset(&check, 0, sizeof(check));
	pthread_barrier_wait(&start);
	for (;;) {
		/* Read "finished" before popping: if every producer had finished, a pop
		 * that then finds nothing means the ring is truly drained. */
		unsigned done = atomic_load_explicit(&finished, memory_order_acquire);
		struct stress_record rec;
		size_t len;
		int rc = ring_pop(r, &rec, sizeof(rec), &len);
		if (rc == 1) {
			stress_check_record(&check, &rec, len, nproducers);
		} else if (rc < 0) {
			stress_error(&check, "ring_pop returned %d", rc);
			break;
		} else if (done == nproducers) {
			break;
		}
	}
	for (unsigned i = 0; i < nproducers; i++)
		pthread_join(tid[i], NULL);
	pthread_barrier_destroy(&start);

	if (check.errors)
		fail_msg("%llu bad records, first: %s", (unsigned long long)check.errors, check.first_error);
	uint64_t accepted = 0, dropped = 0, popped = 0;
	for (unsigned i = 0; i < nproducers; i++) {
		assert_int_equal(sp[i].unexpected_rc, 0);
		assert_int_equal(sp[i].accepted + sp[i].dropped, attempts);
		/* Every record a producer got accepted came out, none twice. */
		assert_int_equal(check.popped[i], sp[i].accepted);
		accepted += sp[i].accepted;
		dropped += sp[i].dropped;
		popped += check.popped[i];
	}
	assert_int_equal(accepted + dropped, (uint64_t)nproducers * attempts);
	assert_int_equal(ring_pushed(r), accepted);
	assert_int_equal(ring_drops(r), dropped);
	assert_int_equal(ring_popped(r), popped);
	assert_int_equal(popped, accepted);
	size_t len;
	assert_int_equal(ring_pop(r, &(struct stress_record){0}, STRESS_SLOT_BYTES, &len), 0);
	print_message("  %u producers, %zu slots: %llu accepted, %llu dropped\n", nproducers, ring_capacity(r),
		      (unsigned long long)accepted, (unsigned long long)dropped);
	ring_free(r);
}

static void test_stress_4_producers(void **state)
{
	(void)state;
	run_stress(4, 100000, 256);
}

static void test_stress_8_producers_tiny_ring(void **state)
{
	(void)state;
	/* 2 slots: producers fight over the same two cells all the time. */
	run_stress(8, 20000, 2);
}

/* --- push from a signal handler ----------------------------------------- */

/* A handler interrupts a thread that is itself pushing (possibly between its
 * claim and its commit) and pushes too. Nothing may deadlock, and the
 * accounting and per-producer order must still hold. */
static ring_t *signal_ring;
static atomic_bool signal_armed;
static _Atomic uint64_t signal_seq, signal_accepted, signal_dropped;
#define SIGNAL_PRODUCER 1 /* producer id of the handler's records; the thread is 0 */

static void signal_push(int sig)
{
	(void)sig;
	if (!atomic_load_explicit(&signal_armed, memory_order_relaxed))
		return; /* a late signal, after the test counted: ignore it */
	int saved_errno = errno;
	/* Only the one interrupted thread runs this, so seq is ours alone. */
	uint64_t seq = atomic_load_explicit(&signal_seq, memory_order_relaxed);
	struct stress_record rec;
	stress_fill(&rec, SIGNAL_PRODUCER, seq);
	if (ring_push(signal_ring, &rec, rec.len) == 0)
		atomic_fetch_add_explicit(&signal_accepted, 1, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&signal_dropped, 1, memory_order_relaxed);
	atomic_store_explicit(&signal_seq, seq + 1, memory_order_relaxed);
	errno = saved_errno;
}

struct signal_consumer {
	ring_t *ring;
	atomic_bool *stop;
	struct stress_check *check;
};

static void *signal_consumer_main(void *arg)
{
	struct signal_consumer *sc = arg;
	for (;;) {
		bool stop = atomic_load_explicit(sc->stop, memory_order_acquire);
		struct stress_record rec;
		size_t len;
		int rc = ring_pop(sc->ring, &rec, sizeof(rec), &len);
		if (rc == 1)
			stress_check_record(sc->check, &rec, len, 2);
		else if (rc < 0 || stop)
			break;
	}
	return NULL;
}

static atomic_bool stop_sender;

struct signal_sender {
	pthread_t target;
	atomic_bool *stop;
};

static void *signal_sender_main(void *arg)
{
	struct signal_sender *ss = arg;
	while (!atomic_load_explicit(ss->stop, memory_order_relaxed)) {
		pthread_kill(ss->target, SIGUSR1);
		struct timespec pause = {0, 20000}; /* 20 us */
		nanosleep(&pause, NULL);
	}
	return NULL;
}

static void test_push_from_signal_handler(void **state)
{
	(void)state;
	signal_ring = ring_new(STRESS_SLOT_BYTES, 64);
	assert_non_null(signal_ring);
	atomic_store(&signal_seq, 0);
	atomic_store(&signal_accepted, 0);
	atomic_store(&signal_dropped, 0);
	atomic_store(&signal_armed, true);
	struct sigaction sa = {0}, old;
	sa.sa_handler = signal_push;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);

	static struct stress_check check;
	memset(&check, 0, sizeof(check));
	atomic_bool stop = false;
	struct signal_consumer sc = {.ring = signal_ring, .stop = &stop, .check = &check};
	pthread_t consumer;
	assert_int_equal(pthread_create(&consumer, NULL, signal_consumer_main, &sc), 0);

	/* This thread pushes; every 16 pushes it raises SIGUSR1 at itself (the
	 * handler runs before raise returns, between two of our pushes), and a
	 * second thread sends SIGUSR1 at random moments, which lands some handler
	 * pushes in the middle of ours, between claim and commit included. */
	struct signal_sender ss = {.target = pthread_self(), .stop = &stop_sender};
	atomic_store(&stop_sender, false);
	pthread_t sender;
	assert_int_equal(pthread_create(&sender, NULL, signal_sender_main, &ss), 0);
	const uint64_t attempts = 100000;
	uint64_t accepted = 0, dropped = 0;
	struct stress_record rec;
	for (uint64_t seq = 0; seq < attempts; seq++) {
		stress_fill(&rec, 0, seq);
		int rc;
		void *slot;
		rc = ring_reserve(signal_ring, rec.len, &slot);
		if (rc == 0) {
			memcpy(slot, &rec, rec.len);
			ring_commit(signal_ring, slot);
			accepted++;
		} else {
			dropped++;
		}
		if (seq % 16 == 0)
			raise(SIGUSR1);
	}
	atomic_store_explicit(&stop_sender, true, memory_order_relaxed);
	pthread_join(sender, NULL);
	/* The handler only runs on this thread, interrupting it, so once the store
	 * below is done no handler is mid-push, and later deliveries (a signal still
	 * pending, or one a sanitizer deferred) do nothing: its counters are final. */
	atomic_store_explicit(&signal_armed, false, memory_order_relaxed);
	atomic_store_explicit(&stop, true, memory_order_release);
	pthread_join(consumer, NULL);
	sigaction(SIGUSR1, &old, NULL);

	if (check.errors)
		fail_msg("%llu bad records, first: %s", (unsigned long long)check.errors, check.first_error);
	uint64_t sig_acc = atomic_load(&signal_accepted), sig_drop = atomic_load(&signal_dropped);
	assert_true(atomic_load(&signal_seq) >= attempts / 16);
	assert_int_equal(sig_acc + sig_drop, atomic_load(&signal_seq));
	assert_int_equal(accepted + dropped, attempts);
	assert_int_equal(check.popped[0], accepted);
	assert_int_equal(check.popped[SIGNAL_PRODUCER], sig_acc);
	assert_int_equal(ring_pushed(signal_ring), accepted + sig_acc);
	assert_int_equal(ring_drops(signal_ring), dropped + sig_drop);
	print_message("  thread %llu accepted, handler %llu of %llu accepted\n", (unsigned long long)accepted,
		      (unsigned long long)sig_acc, (unsigned long long)atomic_load(&signal_seq));
	ring_free(signal_ring);
	signal_ring = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_new_rejects_bad_args),
	    cmocka_unit_test(test_new_rounds_up),
	    cmocka_unit_test(test_empty_pop),
	    cmocka_unit_test(test_fifo_order),
	    cmocka_unit_test(test_wraparound),
	    cmocka_unit_test(test_full_drops_exactly),
	    cmocka_unit_test(test_oversize),
	    cmocka_unit_test(test_claimed_slot_not_skipped),
	    cmocka_unit_test(test_stress_4_producers),
	    cmocka_unit_test(test_stress_8_producers_tiny_ring),
	    cmocka_unit_test(test_push_from_signal_handler),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
