/* ring_bench: what a push costs the host thread, and how fast chunks are
 * checksummed.
 *
 *   ring_bench [seconds-per-case]      (default 0.3)
 *
 * Ring: 64-byte records (the size of a collective event).
 *  - push+pop: one thread pushes then pops; the uncontended cost of the pair.
 *  - push (full): the drop path, when the sender has fallen behind.
 *  - never full: N threads push into a ring big enough for all their pushes
 *    (no consumer while timing): the cost of a contended, accepted push.
 *  - + consumer: N threads push as fast as they can while one consumer
 *    drains; ns/push is per producer thread (wall time / its pushes), and the
 *    drop share says how often the consumer could not keep up. With more
 *    threads than cores the threads also share CPUs: read those rows as
 *    contention under oversubscription, not as scaling.
 * CRC-32C: GB/s of the table (slicing-by-8) and SSE4.2 paths on buffers of
 * 64 B, 4 KiB (a small trace chunk) and 1 MiB. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* also set by the build; here for a standalone compile */
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/ring.h"

#define RECORD_BYTES 64
#define RING_SLOTS 4096

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile uint64_t sink; /* keeps results alive */

static void bench_push_pop(double seconds)
{
	ring_t *r = ring_new(RECORD_BYTES, RING_SLOTS);
	unsigned char rec[RECORD_BYTES] = {1}, out[RECORD_BYTES];
	uint64_t n = 0;
	double t0 = now_s(), t;
	do {
		for (int i = 0; i < 100000; i++) {
			size_t len;
			rec[0] = (unsigned char)i;
			ring_push(r, rec, sizeof(rec));
			ring_pop(r, out, sizeof(out), &len);
			sink += out[0];
		}
		n += 100000;
	} while ((t = now_s() - t0) < seconds);
	printf("%-34s %8.1f   (one push + one pop, %d slots)\n", "push+pop, 1 thread", t * 1e9 / (double)n, RING_SLOTS);

	/* Fill it, then time pushes that are dropped. */
	while (ring_push(r, rec, sizeof(rec)) == 0)
		;
	n = 0;
	t0 = now_s();
	do {
		for (int i = 0; i < 100000; i++)
			sink += (uint64_t)ring_push(r, rec, sizeof(rec));
		n += 100000;
	} while ((t = now_s() - t0) < seconds);
	printf("%-34s %8.1f %9.1f %9.1f %7.1f %%\n", "push, 1 thread, ring full", t * 1e9 / (double)n,
	       (double)n / t / 1e6, 0.0, 100.0);
	ring_free(r);
}

struct producer {
	ring_t *ring;
	atomic_bool *go, *stop;
	uint64_t quota; /* 0: push until *stop */
	uint64_t pushes, accepted;
	double seconds;
};

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	unsigned char rec[RECORD_BYTES];
	memset(rec, 0x5A, sizeof(rec));
	while (!atomic_load_explicit(p->go, memory_order_acquire))
		;
	double t0 = now_s();
	uint64_t n = 0, ok = 0;
	if (p->quota) {
		for (; n < p->quota; n++)
			ok += ring_push(p->ring, rec, sizeof(rec)) == 0;
	} else {
		while (!atomic_load_explicit(p->stop, memory_order_relaxed)) {
			for (int i = 0; i < 1000; i++)
				ok += ring_push(p->ring, rec, sizeof(rec)) == 0;
			n += 1000;
		}
	}
	p->seconds = now_s() - t0;
	p->pushes = n;
	p->accepted = ok;
	return NULL;
}

struct producer_result {
	double ns_per_push; /* mean over producer threads of thread time / pushes */
	double wall;	    /* seconds */
	uint64_t pushes, accepted;
};

/* Starts nproducers threads on r (each with the given quota, or until
 * `seconds` pass when quota is 0, with this thread draining as consumer). */
static struct producer_result run_producers(ring_t *r, unsigned nproducers, uint64_t quota, double seconds)
{
	atomic_bool go = false, stop = false;
	struct producer p[8];
	pthread_t tid[8];
	for (unsigned i = 0; i < nproducers; i++) {
		p[i] = (struct producer){.ring = r, .go = &go, .stop = &stop, .quota = quota};
		pthread_create(&tid[i], NULL, producer_main, &p[i]);
	}
	unsigned char out[RECORD_BYTES];
	size_t len;
	double t0 = now_s();
	atomic_store_explicit(&go, true, memory_order_release);
	if (!quota) {
		while (now_s() - t0 < seconds)
			for (int i = 0; i < 1000; i++)
				sink += (uint64_t)ring_pop(r, out, sizeof(out), &len);
		atomic_store(&stop, true);
	}
	struct producer_result res = {0};
	for (unsigned i = 0; i < nproducers; i++) {
		pthread_join(tid[i], NULL);
		res.pushes += p[i].pushes;
		res.accepted += p[i].accepted;
		res.ns_per_push += p[i].seconds * 1e9 / (double)p[i].pushes / nproducers;
	}
	res.wall = now_s() - t0;
	while (ring_pop(r, out, sizeof(out), &len) == 1) /* untimed drain */
		;
	return res;
}

/* Contended pushes that never find the ring full: a ring large enough for
 * every push of a run, no consumer while timing. Runs repeat for `seconds`;
 * the figures are totals over all runs (not the best one, which on a small
 * machine would pick runs where the threads happened not to overlap). */
static void bench_producers_no_drop(unsigned nproducers, double seconds)
{
	enum { SLOTS = 1 << 19 };
	ring_t *r = ring_new(RECORD_BYTES, SLOTS);
	struct producer_result sum = {0};
	int runs = 0;
	do {
		struct producer_result res = run_producers(r, nproducers, SLOTS / nproducers, seconds);
		if (res.accepted != res.pushes)
			printf("  (unexpected drops)\n");
		sum.pushes += res.pushes;
		sum.accepted += res.accepted;
		sum.wall += res.wall;
		sum.ns_per_push += res.ns_per_push;
		runs++;
	} while (sum.wall < seconds);
	char label[64];
	snprintf(label, sizeof(label), "push, %u thread%s, never full", nproducers, nproducers > 1 ? "s" : "");
	printf("%-34s %8.1f %9.1f %9.1f %7.1f %%\n", label, sum.ns_per_push / runs, (double)sum.pushes / sum.wall / 1e6,
	       (double)sum.accepted / sum.wall / 1e6, 0.0);
	ring_free(r);
}

/* Producers flat out against one draining consumer (this thread). */
static void bench_producers_consumer(unsigned nproducers, double seconds)
{
	ring_t *r = ring_new(RECORD_BYTES, RING_SLOTS);
	struct producer_result res = run_producers(r, nproducers, 0, seconds);
	char label[64];
	snprintf(label, sizeof(label), "push, %u thread%s + consumer", nproducers, nproducers > 1 ? "s" : "");
	printf("%-34s %8.1f %9.1f %9.1f %7.1f %%%s\n", label, res.ns_per_push, (double)res.pushes / res.wall / 1e6,
	       (double)res.accepted / res.wall / 1e6, 100.0 * (double)(res.pushes - res.accepted) / (double)res.pushes,
	       ring_drops(r) == res.pushes - res.accepted && ring_popped(r) == res.accepted ? ""
											    : "  (COUNT MISMATCH)");
	ring_free(r);
}

static double bench_crc(uint32_t (*fn)(uint32_t, const void *, size_t), const unsigned char *buf, size_t len,
			double seconds)
{
	uint64_t bytes = 0;
	uint32_t c = 0;
	size_t reps = len >= (1u << 20) ? 1 : (1u << 20) / len;
	double t0 = now_s(), t;
	do {
		for (size_t i = 0; i < reps; i++)
			c = fn(c, buf, len);
		bytes += (uint64_t)reps * len;
	} while ((t = now_s() - t0) < seconds);
	sink += c;
	return (double)bytes / t / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 0.3;
	if (seconds <= 0) {
		fprintf(stderr, "usage: ring_bench [seconds-per-case]\n");
		return 2;
	}
	struct utsname u;
	uname(&u);
	time_t tnow = time(NULL);
	char date[64];
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %Z", localtime(&tnow));
	/* The load average says how much the machine was shared while we ran. */
	char load[64] = "?";
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (!fgets(load, sizeof(load), f))
			strcpy(load, "?");
		load[strcspn(load, "\n")] = 0;
		fclose(f);
	}
	printf("ring_bench  %s  %s %s  nproc=%ld  loadavg %s  %.2f s/case\n", date, u.sysname, u.machine,
	       sysconf(_SC_NPROCESSORS_ONLN), load, seconds);
	printf("\nring: %d-byte records; ns/push is per producer thread\n", RECORD_BYTES);
	printf("%-34s %8s %9s %9s %9s\n", "case", "ns/push", "Mpush/s", "Macc/s", "dropped");
	bench_push_pop(seconds);
	for (unsigned n = 1; n <= 4; n *= 2)
		bench_producers_no_drop(n, seconds);
	for (unsigned n = 1; n <= 4; n *= 2)
		bench_producers_consumer(n, seconds);
	printf("\n");

	enum { BIG = 1 << 20 };
	unsigned char *buf = malloc(BIG);
	for (size_t i = 0; i < BIG; i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	int hw = crc32c_hw_available();
	printf("crc32c GB/s        %10s %10s\n", "table", hw ? "sse4.2" : "(no sse4.2)");
	size_t sizes[] = {64, 4096, BIG};
	const char *names[] = {"64 B", "4 KiB", "1 MiB"};
	for (int i = 0; i < 3; i++) {
		double sw = bench_crc(crc32c_sw, buf, sizes[i], seconds);
		if (hw)
			printf("  %-15s %10.2f %10.2f\n", names[i], sw, bench_crc(crc32c_hw, buf, sizes[i], seconds));
		else
			printf("  %-15s %10.2f %10s\n", names[i], sw, "-");
	}
	free(buf);
	return 0;
}
