/*
 * worlds_analysis_test.c - the analysis of a restarted job, fed record by
 * record: world 0 (4 ranks) stops while ranks 0, 1, 2 wait in an AllGather
 * rank 3 never entered, none of them with a process_end (killed); one
 * second later world 1 (2 new processes, ranks 0 and 1 again, a new
 * communicator) runs for 100 s and ends cleanly. The result holds both
 * worlds, each with its own processes (never merged by rank number), the
 * headline the last; world 0's wait is measured to world 1's start, so it
 * is no hang at the default timeout (it would be one of 101 s measured to
 * the trace's end), and at a timeout under a second it is a hang of about
 * one second that names rank 3 as missing. A live snapshot taken before
 * the end sees the two worlds as well.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collector/analyze.h"
#include "flight_records.h"

#define RT_OFFSET (1700000000ull * S)
#define WORLD0_ID 0xa0a0a0a0a0a0a0a0ull
#define WORLD1_ID 0xb1b1b1b1b1b1b1b1ull
#define T0 (10 * S)	      /* world 0 starts */
#define T_WAIT (T0 + 60 * MS) /* ranks 0..2 enter the AllGather rank 3 never enters */
#define T1 (T_WAIT + S)	      /* world 1 starts */
#define T1_END (T1 + 100 * S)

/* World 0: 4 ranks, 3 AllGathers each, then the hung one (ranks 0..2). */
static void world0(struct out *o, struct rank *r)
{
	for (uint32_t k = 0; k < 4; k++) {
		hello(o, &r[k], k, (int32_t)k, T0, (int64_t)RT_OFFSET, 0);
		comm(o, &r[k], HANDLE, WORLD0_ID, 4, (int32_t)k, T0 + MS);
	}
	for (int n = 0; n < 3; n++)
		for (uint32_t k = 0; k < 4; k++)
			collective(o, &r[k], &AG, T0 + (uint64_t)(n + 2) * 10 * MS,
				   T0 + (uint64_t)(n + 2) * 10 * MS + MS, 1);
	for (uint32_t k = 0; k < 3; k++)
		enter(o, &r[k], &AG, T_WAIT);
}

/* World 1: 2 new processes (sources 4, 5) reusing ranks 0 and 1. */
static void world1(struct out *o, struct rank *r)
{
	for (uint32_t k = 0; k < 2; k++) {
		hello(o, &r[k], 4 + k, (int32_t)k, T1, (int64_t)RT_OFFSET, 0);
		comm(o, &r[k], HANDLE, WORLD1_ID, 2, (int32_t)k, T1 + MS);
	}
	for (int n = 0; n < 20; n++)
		for (uint32_t k = 0; k < 2; k++)
			collective(o, &r[k], &AG, T1 + (uint64_t)(n + 1) * 5 * S, T1 + (uint64_t)(n + 1) * 5 * S + MS,
				   1);
	for (uint32_t k = 0; k < 2; k++)
		process_end(o, &r[k], T1_END);
}

/* The job's result at its end; a live snapshot before the end sees the
 * two worlds too. */
static struct analysis_result *restarted(uint64_t timeout_ns)
{
	struct analysis_options opt;
	struct job j;
	struct rank r0[4], r1[2];
	struct analysis_result *res;

	memset(&j, 0, sizeof(j));
	analysis_options_init(&opt);
	opt.hang_timeout_ns = timeout_ns;
	assert_int_equal(analyzer_new(&j.o.a, &opt), 0);
	world0(&j.o, r0);
	world1(&j.o, r1);
	res = snap(&j);
	assert_int_equal(res->nworlds, 2);
	assert_int_equal(res->headline_world, 1);
	analysis_result_free(res);
	assert_int_equal(analyzer_finish(j.o.a, &res), 0);
	job_end(&j);
	return res;
}

static void test_two_worlds_apart(void **state)
{
	(void)state;
	struct analysis_result *r = restarted(0);

	assert_int_equal(r->nworlds, 2);
	assert_int_equal(r->headline_world, 1);
	assert_int_equal(r->worlds[0].size, 4);
	assert_int_equal(r->worlds[1].size, 2);
	assert_true(r->worlds[0].id == WORLD0_ID);
	assert_true(r->worlds[1].id == WORLD1_ID);
	/* the headline figures are world 1's processes alone */
	assert_int_equal(r->world_size, 2);
	assert_int_equal(r->ranks, 2);
	assert_int_equal(r->nper_rank, 2);
	assert_int_equal(r->per_rank[0].source, 4);
	assert_int_equal(r->per_rank[1].source, 5);
	/* world 0's own result: its four processes, rank 0 and 1 not the new ones */
	const struct analysis_result *w0 = analysis_world_result(r, 0);
	assert_ptr_not_equal(w0, r);
	assert_int_equal(w0->nper_rank, 4);
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(w0->per_rank[i].rank, (int32_t)i);
		assert_int_equal(w0->per_rank[i].source, i);
	}
	assert_int_equal(r->worlds[0].nprocesses, 4);
	assert_int_equal(r->worlds[0].died, 4);
	/* rank 3 issued nothing after its third AllGather: it stopped first */
	assert_int_equal(r->worlds[0].first_stop, 3);
	assert_int_equal(r->worlds[0].processes[3].rank, 3);
	assert_int_equal(r->worlds[1].died, 0);
	assert_int_equal(r->worlds[1].first_stop, -1);
	assert_int_equal(r->duplicate_ranks, 0);
	assert_non_null(strstr(r->notes[0], "a restart: 2 worlds of 4, then 2 ranks"));
	/* the wait the restart ended lasted a second, not 101 s */
	assert_int_equal(r->flight.nhangs, 0);
	analysis_result_free(r);
}

static void test_wait_bounded_by_next_world(void **state)
{
	(void)state;
	struct analysis_result *r = restarted(S / 2);

	assert_int_equal(r->flight.nhangs, 1);
	const struct analysis_hang *h = &r->flight.hangs[0];
	assert_int_equal(h->comm_id, WORLD0_ID);
	assert_int_equal(h->waited_ns, T1 - T_WAIT);
	assert_int_equal(h->nwaiting, 3);
	assert_int_equal(h->nmissing, 1);
	assert_int_equal(h->missing[0].rank, 3);
	analysis_result_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_worlds_apart),
	    cmocka_unit_test(test_wait_bounded_by_next_world),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
