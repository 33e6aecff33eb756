/*
 * analysis_overlap_test.c - interval arithmetic, exposure and its causes on
 * hand-computed intervals (collector/overlap.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "collector/analysis.h"
#include "collector/overlap.h"

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

static struct overlap_exposure expo(uint64_t issue, uint64_t s, uint64_t e, int first, int device)
{
	struct overlap_gather g = {.issue_ns = issue, .start_ns = s, .end_ns = e, .first_of_phase = first,
				   .device_timing = device};
	return overlap_gather_exposure(compute, 2, &g, 1);
}

static void test_exposure(void **state)
{
	(void)state;
	/* partly under compute on both sides: 20 + 50 hidden of 120 */
	struct overlap_exposure x = expo(80, 80, 200, 0, 0);
	assert_int_equal(x.duration_ns, 120);
	assert_int_equal(x.hidden_ns, 70);
	assert_int_equal(x.exposed_ns, 50);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	/* issued when the compute before it had ended: nothing prefetched */
	x = expo(100, 100, 140, 0, 0);
	assert_int_equal(x.exposed_ns, 40);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_NO_PREFETCH);
	/* a sliver of compute under it (the hook that issued it): still issued
	 * only when needed; 2 of 42 ns hidden */
	x = expo(98, 98, 140, 0, 0);
	assert_int_equal(x.hidden_ns, 2);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_NO_PREFETCH);
	/* issued during the compute before it (prefetched), outlasted it:
	 * 5 + 50 of 105 ns hidden */
	x = expo(95, 95, 200, 0, 0);
	assert_int_equal(x.hidden_ns, 55);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	/* first of its phase wins over the others */
	x = expo(100, 100, 140, 1, 0);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_FIRST_OF_PHASE);
	/* fully hidden */
	x = expo(160, 160, 290, 0, 0);
	assert_int_equal(x.exposed_ns, 0);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_HIDDEN);
	/* device timing: the host entered late, the kernel ran at once */
	x = expo(110, 112, 140, 0, 1);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_HOST_LATE);
	/* device timing: entered while compute ran, kernel waited for it */
	x = expo(90, 100, 140, 0, 1);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_NO_PREFETCH);
	/* exposure under the threshold is hidden */
	struct overlap_gather g = {.issue_ns = 95, .start_ns = 95, .end_ns = 101};
	x = overlap_gather_exposure(compute, 2, &g, 10);
	assert_int_equal(x.exposed_ns, 1);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_HIDDEN);
	/* no compute at all */
	x = overlap_gather_exposure(NULL, 0, &g, 1);
	assert_int_equal(x.exposed_ns, 6);
	assert_int_equal(x.cause, ANALYSIS_CAUSE_NO_PREFETCH);
	/* time before from_ns belongs to an earlier gather */
	struct overlap_gather q = {.issue_ns = 100, .start_ns = 100, .end_ns = 140, .from_ns = 120};
	x = overlap_gather_exposure(compute, 2, &q, 1);
	assert_int_equal(x.exposed_ns, 20);
	assert_int_equal(x.duration_ns, 40);
	/* host timing: ended with no compute running, the thread resumed at 150 */
	q = (struct overlap_gather){.issue_ns = 100, .start_ns = 100, .end_ns = 140, .until_resume = 1,
				    .until_ns = 150};
	x = overlap_gather_exposure(compute, 2, &q, 1);
	assert_int_equal(x.exposed_ns, 50);
	assert_int_equal(x.wait_end_ns, 150);
	/* ... but not when it ended under compute */
	q = (struct overlap_gather){.issue_ns = 80, .start_ns = 80, .end_ns = 99, .until_resume = 1, .until_ns = 150};
	x = overlap_gather_exposure(compute, 2, &q, 1);
	assert_int_equal(x.exposed_ns, 0);
	assert_int_equal(x.wait_end_ns, 99);
	assert_int_equal(interval_next_start(compute, 2, 101, 7), 150);
	assert_int_equal(interval_next_start(compute, 2, 151, 7), 7);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_exposure),
		cmocka_unit_test(test_host_compute),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
