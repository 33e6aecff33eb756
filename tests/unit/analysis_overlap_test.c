/*
 * analysis_overlap_test.c - interval arithmetic, the per-gather figures
 * (exposed, compute wait) and causes on hand-computed intervals, and their
 * invariants on random ones (collector/overlap.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "collector/analysis.h"
/* interval_covered and interval_last_end_before are overlap.c's own
 * (static): the test builds that file in to reach them; the library's copy
 * is not linked. */
#include "collector/overlap.c"

static void test_merge(void **state)
{
	(void)state;
	struct interval v[] = {{50, 60}, {0, 10}, {5, 20}, {20, 30}, {70, 70}, {40, 45}, {41, 44}};
	size_t n = interval_merge(v, sizeof v / sizeof v[0]);
	assert_int_equal(n, 3);
	assert_int_equal(v[0].start, 0);
	assert_int_equal(v[0].end, 30); /* touching intervals merge */
	assert_int_equal(v[1].start, 40);
	assert_int_equal(v[1].end, 45);
	assert_int_equal(v[2].start, 50);
	assert_int_equal(interval_total(v, n), 30 + 5 + 10);
	assert_int_equal(interval_covered(v, n, 25, 55), 5 + 5 + 5);
	assert_int_equal(interval_covered(v, n, 60, 100), 0);
	assert_int_equal(interval_covered(v, n, 10, 10), 0);
	struct interval w[] = {{0, 100}};
	assert_int_equal(interval_intersect_total(v, n, w, 1), 45);
	struct interval x[] = {{28, 42}, {44, 52}};
	/* [28,30) 2 + [40,42) 2 + [44,45) 1 + [50,52) 2 */
	assert_int_equal(interval_intersect_total(v, n, x, 2), 7);
	assert_int_equal(interval_last_end_before(v, n, 41), 45);
	assert_int_equal(interval_last_end_before(v, n, 0), 0);
	assert_int_equal(interval_merge(v, 0), 0);
}

static const struct interval compute[] = {{0, 100}, {150, 300}};

/* One gather alone in the step [0, 400) against `compute`. */
static struct overlap_figures one(uint64_t issue, uint64_t s, uint64_t e, int first, int device)
{
	struct overlap_collective c = {.issue_ns = issue, .start_ns = s, .end_ns = e, .queue_start_ns = s,
				       .kind = OVERLAP_GATHER, .first_of_phase = (uint8_t)first};
	struct overlap_figures f;
	uint64_t other;
	assert_int_equal(overlap_step(compute, 2, NULL, 0, &c, 1, 0, 400, device, 1, &f, &other), 0);
	assert_int_equal(other, 0);
	assert_int_equal(f.hidden_ns + f.exposed_ns, f.duration_ns);
	return f;
}

static void test_exposure(void **state)
{
	(void)state;
	/* partly under compute on both sides: 20 + 50 hidden of 120; it ended
	 * under compute, so compute never waited for it */
	struct overlap_figures x = one(80, 80, 200, 0, 0);
	assert_int_equal(x.duration_ns, 120);
	assert_int_equal(x.hidden_ns, 70);
	assert_int_equal(x.exposed_ns, 50);
	assert_int_equal(x.compute_wait_ns, 0);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	/* issued when the compute before it had ended: nothing prefetched;
	 * compute stood still from 100 to 150 waiting for it, 10 ns longer
	 * than it lasted (it resumed at the next compute) */
	x = one(100, 100, 140, 0, 0);
	assert_int_equal(x.exposed_ns, 40);
	assert_int_equal(x.compute_wait_ns, 50);
	assert_int_equal(x.wait_start_ns, 100);
	assert_int_equal(x.wait_end_ns, 150);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_NO_PREFETCH);
	/* a sliver of compute under it (the hook that issued it): still issued
	 * only when needed; 2 of 42 ns hidden */
	x = one(98, 98, 140, 0, 0);
	assert_int_equal(x.hidden_ns, 2);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_NO_PREFETCH);
	/* issued during the compute before it (prefetched), outlasted it:
	 * 5 + 50 of 105 ns hidden */
	x = one(95, 95, 200, 0, 0);
	assert_int_equal(x.hidden_ns, 55);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	/* first of its phase wins over the others */
	x = one(100, 100, 140, 1, 0);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_FIRST_OF_PHASE);
	/* fully hidden */
	x = one(160, 160, 290, 0, 0);
	assert_int_equal(x.exposed_ns, 0);
	assert_int_equal(x.hidden_ns, 130);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_HIDDEN);
	/* device timing: the host entered late, the kernel ran at once */
	x = one(110, 112, 140, 0, 1);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_HOST_LATE);
	/* device timing: entered while compute ran, kernel waited for it */
	x = one(90, 100, 140, 0, 1);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_NO_PREFETCH);
	/* exposure under the threshold is hidden, and counted as hidden */
	struct overlap_collective c = {.issue_ns = 95, .start_ns = 95, .end_ns = 101, .queue_start_ns = 95,
				       .kind = OVERLAP_GATHER};
	struct overlap_figures f;
	uint64_t other;
	assert_int_equal(overlap_step(compute, 2, NULL, 0, &c, 1, 0, 400, 0, 10, &f, &other), 0);
	assert_int_equal(f.exposed_ns, 0);
	assert_int_equal(f.hidden_ns, 6);
	assert_int_equal(f.cause, ANALYSIS_CAUSE_HIDDEN);
	/* no compute at all: the whole step is one stretch of waiting */
	assert_int_equal(overlap_step(NULL, 0, NULL, 0, &c, 1, 0, 400, 0, 1, &f, &other), 0);
	assert_int_equal(f.exposed_ns, 6);
	assert_int_equal(f.compute_wait_ns, 400);
	assert_int_equal(f.cause, ANALYSIS_CAUSE_NO_PREFETCH);
	/* the step clips both figures: [350, 450) in a step ending at 400 */
	c = (struct overlap_collective){.issue_ns = 350, .start_ns = 350, .end_ns = 450, .queue_start_ns = 350,
					.kind = OVERLAP_GATHER};
	assert_int_equal(overlap_step(compute, 2, NULL, 0, &c, 1, 0, 400, 0, 1, &f, &other), 0);
	assert_int_equal(f.duration_ns, 100);
	assert_int_equal(f.exposed_ns, 50);
	assert_int_equal(f.compute_wait_ns, 0); /* it ended after the step */
}

/* Gathers that overlap each other: each instant counts for the earlier. */
static void test_exposed_once(void **state)
{
	(void)state;
	struct overlap_collective c[] = {
		{.issue_ns = 100, .start_ns = 100, .end_ns = 140, .queue_start_ns = 100, .kind = OVERLAP_GATHER},
		{.issue_ns = 101, .start_ns = 120, .end_ns = 145, .queue_start_ns = 120, .kind = OVERLAP_GATHER},
	};
	struct overlap_figures f[2];
	uint64_t other;
	assert_int_equal(overlap_step(compute, 2, NULL, 0, c, 2, 0, 400, 0, 1, f, &other), 0);
	assert_int_equal(f[0].exposed_ns, 40);
	assert_int_equal(f[1].exposed_ns, 5); /* [140, 145): [120, 140) was the first's */
	assert_int_equal(f[1].hidden_ns, 20);
	/* both ended while compute waited from 100 to 150: the first issued is
	 * the one compute needed, the second was prefetched */
	assert_int_equal(f[0].compute_wait_ns, 50);
	assert_int_equal(f[1].compute_wait_ns, 0);
}

/* Who compute waited for, when several collectives end while it waits. */
static void test_compute_wait_owner(void **state)
{
	(void)state;
	struct overlap_figures f[3];
	uint64_t other;
	/* a tensor-parallel activation gather queued behind an FSDP gather:
	 * compute waited for the activation, not the prefetched gather */
	struct overlap_collective tp[] = {
		{.issue_ns = 90, .start_ns = 90, .end_ns = 120, .queue_start_ns = 90, .kind = OVERLAP_GATHER},
		{.issue_ns = 120, .start_ns = 120, .end_ns = 148, .queue_start_ns = 120, .kind = OVERLAP_AWAITED},
	};
	assert_int_equal(overlap_step(compute, 2, NULL, 0, tp, 2, 0, 400, 0, 1, f, &other), 0);
	assert_int_equal(f[0].compute_wait_ns, 0);
	assert_int_equal(other, 50);
	assert_int_equal(f[0].exposed_ns, 20); /* HTA's figure still counts [100, 120) */
	/* a gradient reduction that ends before compute wakes up does not take
	 * the wait from the gather compute waited for */
	struct overlap_collective rs[] = {
		{.issue_ns = 90, .start_ns = 90, .end_ns = 120, .queue_start_ns = 90, .kind = OVERLAP_GATHER},
		{.issue_ns = 120, .start_ns = 120, .end_ns = 148, .queue_start_ns = 120, .kind = OVERLAP_BACKGROUND},
	};
	assert_int_equal(overlap_step(compute, 2, NULL, 0, rs, 2, 0, 400, 0, 1, f, &other), 0);
	assert_int_equal(f[0].compute_wait_ns, 50);
	assert_int_equal(other, 0);
	/* queued behind a reduction: compute's wait on it holds the queueing
	 * (50 ns waited for a 15 ns gather); prefetched, so bandwidth-bound */
	struct overlap_collective q[] = {
		{.issue_ns = 90, .start_ns = 90, .end_ns = 130, .queue_start_ns = 90, .kind = OVERLAP_BACKGROUND},
		{.issue_ns = 92, .start_ns = 130, .end_ns = 145, .queue_start_ns = 90, .kind = OVERLAP_GATHER},
	};
	assert_int_equal(overlap_step(compute, 2, NULL, 0, q, 2, 0, 400, 0, 1, f, &other), 0);
	assert_int_equal(f[1].duration_ns, 15);
	assert_int_equal(f[1].exposed_ns, 15);
	assert_int_equal(f[1].compute_wait_ns, 50);
	assert_int_equal(f[1].cause, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	/* an activation collective, then a gather, end while compute waits:
	 * the gather ended last, compute waited for it */
	struct overlap_collective last[] = {
		{.issue_ns = 90, .start_ns = 90, .end_ns = 110, .queue_start_ns = 90, .kind = OVERLAP_AWAITED},
		{.issue_ns = 110, .start_ns = 110, .end_ns = 140, .queue_start_ns = 110, .kind = OVERLAP_GATHER},
		{.issue_ns = 160, .start_ns = 160, .end_ns = 170, .queue_start_ns = 160, .kind = OVERLAP_GATHER},
	};
	assert_int_equal(overlap_step(compute, 2, NULL, 0, last, 3, 0, 400, 0, 1, f, &other), 0);
	assert_int_equal(f[1].compute_wait_ns, 50);
	assert_int_equal(other, 0);
	assert_int_equal(f[2].compute_wait_ns, 0); /* ended under compute */
}

/* Host timing: compute waits for a gather right before the unit it gathers
 * runs. compute: the ops of unit A [0, 100) and [150, 300) inside A's range
 * [0, 305), then unit B's op [400, 500) inside B's range [390, 510). */
static void test_wait_between_units(void **state)
{
	(void)state;
	static const struct interval ops[] = {{0, 100}, {150, 300}, {400, 500}};
	static const struct interval units[] = {{0, 305}, {390, 510}};
	struct overlap_figures f;
	uint64_t other;
	/* B's gather lands at 140 while A's thread is descheduled between two
	 * of A's ops: A's own compute stalled, nobody waited for the gather */
	struct overlap_collective landed = {.issue_ns = 50, .start_ns = 50, .end_ns = 140, .queue_start_ns = 50,
					    .unit_opens_ns = 390, .kind = OVERLAP_GATHER};
	assert_int_equal(overlap_step(ops, 3, units, 2, &landed, 1, 0, 600, 0, 1, &f, &other), 0);
	assert_int_equal(f.compute_wait_ns, 0);
	assert_int_equal(f.exposed_ns, 40); /* HTA's figure does not ask why */
	/* without the units' ranges, or not knowing where B runs, the
	 * stretch is the gather's */
	assert_int_equal(overlap_step(ops, 3, NULL, 0, &landed, 1, 0, 600, 0, 1, &f, &other), 0);
	assert_int_equal(f.compute_wait_ns, 50);
	landed.unit_opens_ns = 0;
	assert_int_equal(overlap_step(ops, 3, units, 2, &landed, 1, 0, 600, 0, 1, &f, &other), 0);
	assert_int_equal(f.compute_wait_ns, 50);
	/* the gathered unit's next range of that name opens only after other
	 * compute has run (B's op at 400; activation-checkpoint backward runs
	 * other units before the one gathered): the thread was not
	 * descheduled between A and the gathered unit, compute waited */
	landed.unit_opens_ns = 900;
	assert_int_equal(overlap_step(ops, 3, units, 2, &landed, 1, 0, 600, 0, 1, &f, &other), 0);
	assert_int_equal(f.compute_wait_ns, 50);
	/* A's own gather (a unit with no op ranges of its own inside A, as a
	 * Linear unit marked without its ops): A's range holds the stretch,
	 * and the gathered unit opens inside it: a wait */
	landed.unit_opens_ns = 150;
	assert_int_equal(overlap_step(ops, 3, units, 2, &landed, 1, 0, 600, 0, 1, &f, &other), 0);
	assert_int_equal(f.compute_wait_ns, 50);
	/* B's gather lands at 350, between A and B, before B opens: compute
	 * waited for it from the end of A's last op to B's first */
	struct overlap_collective between = {.issue_ns = 250, .start_ns = 250, .end_ns = 350, .queue_start_ns = 250,
					     .unit_opens_ns = 390, .kind = OVERLAP_GATHER};
	assert_int_equal(overlap_step(ops, 3, units, 2, &between, 1, 0, 600, 0, 1, &f, &other), 0);
	assert_int_equal(f.compute_wait_ns, 100);
	assert_int_equal(f.wait_start_ns, 300);
	assert_int_equal(f.wait_end_ns, 400);
	/* nested units (a Linear inside its block): a wait inside the block's
	 * range before the Linear's opens is a wait */
	static const struct interval nested[] = {{0, 510}, {390, 505}};
	assert_int_equal(overlap_step(ops, 3, nested, 2, &between, 1, 0, 600, 0, 1, &f, &other), 0);
	assert_int_equal(f.compute_wait_ns, 100);
	/* the units' ranges of host timing: the parents, outer first */
	struct overlap_range r[] = {
		{0, 1000, 1, 0}, {100, 400, 1, 0}, {110, 200, 1, 0}, {500, 800, 1, 0}, {520, 800, 1, 0}, {50, 60, 2, 0},
	};
	struct interval *c, *u;
	size_t nc, nu;
	assert_int_equal(overlap_host_compute(r, sizeof r / sizeof r[0], &c, &nc), 0);
	assert_int_equal(overlap_host_units(r, sizeof r / sizeof r[0], &u, &nu), 0);
	assert_int_equal(nu, 3);
	assert_int_equal(u[0].start, 0);
	assert_int_equal(u[0].end, 1000);
	assert_int_equal(u[1].start, 100);
	assert_int_equal(u[2].start, 500);
	assert_int_equal(u[2].end, 800);
	free(c);
	free(u);
}

/* A small deterministic generator for the invariants test. */
static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* The invariants on random steps: exposed <= time, hidden + exposed = time,
 * the exposed sum is the gathers' union minus compute, each stretch of
 * waiting goes to one collective, hidden exactly when nothing is exposed. */
static void test_invariants(void **state)
{
	(void)state;
	uint64_t seed = 7;
	for (int round = 0; round < 200; round++) {
		struct interval comp[16], un[24], both[40];
		struct overlap_collective c[24];
		struct overlap_figures f[24];
		size_t nc = 1 + lcg(&seed) % 16, n = 1 + lcg(&seed) % 24, nu = 0;
		const uint64_t t0 = 1000, t1 = 11000;
		for (size_t i = 0; i < nc; i++) {
			uint64_t s = lcg(&seed) % 12000;
			comp[i] = (struct interval){s, s + 1 + lcg(&seed) % 1500};
		}
		nc = interval_merge(comp, nc);
		uint64_t at = lcg(&seed) % 2000;
		for (size_t i = 0; i < n; i++) {
			uint64_t s = at + lcg(&seed) % 800; /* in issue order, some overlapping */
			uint64_t e = s + 1 + lcg(&seed) % 900;
			c[i] = (struct overlap_collective){.issue_ns = s, .start_ns = s, .end_ns = e,
							   .queue_start_ns = s - lcg(&seed) % 300,
							   .kind = (uint8_t)(lcg(&seed) % 3)};
			at = s;
			if (c[i].kind == OVERLAP_GATHER) {
				uint64_t cs = s > t0 ? s : t0, ce = e < t1 ? e : t1;
				if (ce > cs)
					un[nu++] = (struct interval){cs, ce};
			}
		}
		uint64_t other;
		assert_int_equal(overlap_step(comp, nc, NULL, 0, c, n, t0, t1, 0, 0, f, &other), 0);
		uint64_t exposed = 0, waits = other;
		for (size_t i = 0; i < n; i++) {
			if (c[i].kind != OVERLAP_GATHER) {
				assert_int_equal(f[i].duration_ns, 0);
				assert_int_equal(f[i].compute_wait_ns, 0);
				continue;
			}
			assert_true(f[i].exposed_ns <= f[i].duration_ns);
			assert_int_equal(f[i].hidden_ns + f[i].exposed_ns, f[i].duration_ns);
			assert_int_equal(f[i].cause == ANALYSIS_CAUSE_HIDDEN, f[i].exposed_ns == 0);
			if (f[i].compute_wait_ns) {
				assert_true(f[i].wait_start_ns >= t0 && f[i].wait_end_ns <= t1);
				assert_int_equal(interval_covered(comp, nc, f[i].wait_start_ns, f[i].wait_end_ns), 0);
				assert_true(f[i].wait_start_ns < c[i].end_ns && c[i].end_ns <= f[i].wait_end_ns);
			}
			exposed += f[i].exposed_ns;
			waits += f[i].compute_wait_ns;
		}
		nu = interval_merge(un, nu);
		assert_int_equal(exposed, interval_total(un, nu) - interval_intersect_total(un, nu, comp, nc));
		/* the waits are disjoint stretches with no compute inside the step */
		size_t nb = 0;
		both[nb++] = (struct interval){0, t0};
		for (size_t i = 0; i < nc; i++)
			both[nb++] = comp[i];
		both[nb++] = (struct interval){t1, UINT64_MAX};
		nb = interval_merge(both, nb);
		uint64_t idle = (t1 - t0) - (interval_total(both, nb) - t0 - (UINT64_MAX - t1));
		assert_true(waits <= idle);
	}
}

static void test_host_compute(void **state)
{
	(void)state;
	/* fsdp_ref nesting: forward > root > layers.N > ops; the compute
	 * thread waits for a gather in the parent's own time, right before the
	 * unit that needs it opens */
	struct overlap_range r[] = {
		{50, 990, 1, 0},    /* root */
		{0, 1000, 1, 0},    /* forward */
		{500, 800, 1, 0},   /* layers.1 */
		{100, 400, 1, 0},   /* layers.0 */
		{110, 200, 1, 0},   /* layers.0's ops */
		{200, 390, 1, 0},   /*   (touching: one interval) */
		{520, 800, 1, 0},   /* layers.1's op, ending with it */
		{1200, 1300, 2, 0}, /* another thread: a leaf */
		{850, 900, 1, 0},   /* a leaf inside root after the blocks (the head) */
		{60, 90, 1, 0},     /* a leaf inside root before the blocks (the embedding) */
	};
	struct interval *c;
	size_t n;
	assert_int_equal(overlap_host_compute(r, sizeof r / sizeof r[0], &c, &n), 0);
	/* only the leaves: the parents' own time ([0,60), [90,110), [390,520),
	 * [800,850), ...) is hooks and waiting */
	assert_int_equal(n, 5);
	assert_int_equal(c[0].start, 60);
	assert_int_equal(c[0].end, 90);
	assert_int_equal(c[1].start, 110);
	assert_int_equal(c[1].end, 390);
	assert_int_equal(c[2].start, 520);
	assert_int_equal(c[2].end, 800);
	assert_int_equal(c[3].start, 850);
	assert_int_equal(c[3].end, 900);
	assert_int_equal(c[4].start, 1200);
	assert_int_equal(c[4].end, 1300);
	free(c);

	/* a range with no child is compute whole (a unit with no op ranges);
	 * a range of another thread is no child: it overlaps, both count */
	struct overlap_range r2[] = {{0, 10, 1, 0}, {20, 30, 1, 0}, {5, 25, 3, 0}};
	assert_int_equal(overlap_host_compute(r2, 3, &c, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(c[0].start, 0);
	assert_int_equal(c[0].end, 30);
	free(c);

	/* a child that starts with its parent (same start, the parent sorts
	 * first by its later end) still makes it a parent */
	struct overlap_range r3[] = {{100, 150, 1, 0}, {100, 300, 1, 0}, {200, 250, 1, 0}};
	assert_int_equal(overlap_host_compute(r3, 3, &c, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(c[0].start, 100);
	assert_int_equal(c[0].end, 150);
	assert_int_equal(c[1].start, 200);
	assert_int_equal(c[1].end, 250);
	free(c);
	assert_int_equal(overlap_host_compute(NULL, 0, &c, &n), 0);
	assert_int_equal(n, 0);
	assert_null(c);
}

/* Prefetch is judged on the step: five units computing at [100, 200) us,
 * [300, 400) us, ... and their five gathers, the first of the phase first. */
static const struct interval units5[] = {
	{100000, 200000}, {300000, 400000}, {500000, 600000}, {700000, 800000}, {900000, 1000000},
};

static void step5(const uint64_t se[5][2], struct overlap_figures f[5])
{
	struct overlap_collective c[5];
	uint64_t other;
	for (int i = 0; i < 5; i++)
		c[i] = (struct overlap_collective){.issue_ns = se[i][0], .start_ns = se[i][0], .end_ns = se[i][1],
						   .queue_start_ns = se[i][0], .kind = OVERLAP_GATHER,
						   .first_of_phase = (uint8_t)(i == 0)};
	assert_int_equal(overlap_step(units5, 5, NULL, 0, c, 5, 0, 1000000, 0, 1, f, &other), 0);
}

static void test_prefetch_seen(void **state)
{
	(void)state;
	struct overlap_figures f[5];
	/* prefetch 0: each gather issued when its unit needs it, nothing under it */
	const uint64_t on_demand[5][2] = {
		{0, 100000}, {200000, 300000}, {400000, 500000}, {600000, 700000}, {800000, 900000},
	};
	step5(on_demand, f);
	assert_int_equal(f[0].cause, ANALYSIS_CAUSE_FIRST_OF_PHASE);
	for (int i = 1; i < 5; i++)
		assert_int_equal(f[i].cause, ANALYSIS_CAUSE_NO_PREFETCH);
	/* prefetch 1: gathers 1-3 issued under the unit before theirs; gather 4
	 * started on an idle stream after unit 3 had ended: issued late, in a
	 * job that prefetches, not a job without prefetch */
	const uint64_t late[5][2] = {
		{0, 100000}, {100000, 300000}, {300000, 390000}, {500000, 590000}, {800000, 900000},
	};
	step5(late, f);
	assert_int_equal(f[1].cause, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	assert_int_equal(f[2].cause, ANALYSIS_CAUSE_HIDDEN);
	assert_int_equal(f[3].cause, ANALYSIS_CAUSE_HIDDEN);
	assert_int_equal(f[4].cause, ANALYSIS_CAUSE_HOST_LATE);
	/* gather 4 queued right behind gather 3, which outlasted unit 2: the
	 * link, not the issue, kept it off compute */
	const uint64_t queued[5][2] = {
		{0, 100000}, {100000, 300000}, {300000, 390000}, {500000, 800000}, {800000, 900000},
	};
	step5(queued, f);
	assert_int_equal(f[3].cause, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	assert_int_equal(f[4].cause, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	for (int i = 1; i < 5; i++)
		assert_int_not_equal(f[i].cause, ANALYSIS_CAUSE_NO_PREFETCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_exposure),
		cmocka_unit_test(test_exposed_once),
		cmocka_unit_test(test_compute_wait_owner),
		cmocka_unit_test(test_wait_between_units),
		cmocka_unit_test(test_invariants),
		cmocka_unit_test(test_host_compute),
		cmocka_unit_test(test_prefetch_seen),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
