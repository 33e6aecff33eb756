/*
 * trace_jobs_test.c - whether several traces are one job's
 * (collector/trace_jobs.h), on synthetic files: what each holds is said
 * directly (communicator ids and ranks, worlds, times).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "collector/trace_jobs.h"
#include "common/error.h"

#include <string.h>

#define SEC 1000000000ll
#define T0 (1764590000ll * SEC) /* CLOCK_REALTIME of the first run's start */
#define WORLD_AB 0x1111111111111111ull
#define WORLD_CD 0x2222222222222222ull

#define FILE_OF(p, r, first, last) \
	((struct trace_jobs_file){.path = (p), .ranks = (r), .nranks = sizeof(r) / sizeof((r)[0]), .first_ns = (first), \
				  .last_ns = (last)})

/* Node A of a 4-rank job: ranks 0-1 of its world communicator. */
static const struct trace_jobs_rank node_a[] = {
	{.comm = WORLD_AB, .size = 4, .rank = 0}, {.comm = 0, .size = 4, .rank = 0},
	{.comm = WORLD_AB, .size = 4, .rank = 1}, {.comm = 0, .size = 4, .rank = 1},
};
/* Node B: ranks 2-3 of the same. */
static const struct trace_jobs_rank node_b[] = {
	{.comm = WORLD_AB, .size = 4, .rank = 2}, {.comm = 0, .size = 4, .rank = 2},
	{.comm = WORLD_AB, .size = 4, .rank = 3}, {.comm = 0, .size = 4, .rank = 3},
};
/* A second run's node A: the same ranks, another unique id. */
static const struct trace_jobs_rank node_c[] = {
	{.comm = WORLD_CD, .size = 4, .rank = 0}, {.comm = 0, .size = 4, .rank = 0},
	{.comm = WORLD_CD, .size = 4, .rank = 1}, {.comm = 0, .size = 4, .rank = 1},
};

static uint32_t jobs_of(const struct trace_jobs_file *f, size_t n, uint32_t *job)
{
	uint32_t njobs = 0;

	assert_int_equal(trace_jobs_group(f, n, job, &njobs), 0);
	return njobs;
}

/* Two nodes of one job: a shared communicator, distinct ranks, one time. */
static void test_two_nodes_are_one_job(void **state)
{
	struct trace_jobs_file f[] = {FILE_OF("a.fss", node_a, T0, T0 + 60 * SEC),
				      FILE_OF("b.fss", node_b, T0 + SEC, T0 + 61 * SEC)};
	uint32_t job[2];
	char err[512];

	(void)state;
	assert_int_equal(jobs_of(f, 2, job), 1);
	assert_int_equal(trace_jobs_check(f, 2, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	/* one file is always one job */
	assert_int_equal(trace_jobs_check(f, 1, err, sizeof(err)), 0);
}

/* Two runs into one folder: no communicator in common, one after the other. */
static void test_two_runs_are_refused(void **state)
{
	struct trace_jobs_file f[] = {FILE_OF("J/trace.fss", node_a, T0, T0 + 60 * SEC),
				      FILE_OF("J/trace-2.fss", node_c, T0 + 70 * SEC, T0 + 130 * SEC)};
	uint32_t job[2];
	char err[1024];

	(void)state;
	assert_int_equal(jobs_of(f, 2, job), 2);
	assert_int_equal(job[0], 0);
	assert_int_equal(job[1], 1);
	assert_int_equal(trace_jobs_check(f, 2, err, sizeof(err)), FSS_E_USAGE);
	assert_non_null(strstr(err, "the traces are of 2 jobs, not one (J/trace.fss and J/trace-2.fss: "
				    "no communicator in common, their times do not overlap)"));
	assert_non_null(strstr(err, "job 1 (ranks 0-1, 2025-12-01 11:53:20 to 11:54:20 UTC): J/trace.fss; "
				    "job 2 (ranks 0-1, 2025-12-01 11:54:30 to 11:55:30 UTC): J/trace-2.fss; "
				    "read one job at a time, giving only its traces, e.g. J/trace.fss"));
}

/* Each condition alone keeps two files apart. */
static void test_each_condition_alone(void **state)
{
	static const struct trace_jobs_rank b_again[] = {{.comm = WORLD_AB, .size = 4, .rank = 0}};
	uint32_t job[2];
	char err[1024];

	(void)state;
	/* the same communicator id (a stand-in whose ids repeat), but one run after the other */
	struct trace_jobs_file later[] = {FILE_OF("a.fss", node_a, T0, T0 + 60 * SEC),
					  FILE_OF("b.fss", node_b, T0 + 70 * SEC, T0 + 80 * SEC)};
	assert_int_equal(jobs_of(later, 2, job), 2);
	assert_int_equal(trace_jobs_check(later, 2, err, sizeof(err)), FSS_E_USAGE);
	assert_non_null(strstr(err, "(a.fss and b.fss: their times do not overlap)"));
	/* at one time, no communicator in common */
	struct trace_jobs_file apart[] = {FILE_OF("a.fss", node_a, T0, T0 + 60 * SEC),
					  FILE_OF("c.fss", node_c, T0, T0 + 60 * SEC)};
	assert_int_equal(jobs_of(apart, 2, job), 2);
	assert_int_equal(trace_jobs_check(apart, 2, err, sizeof(err)), FSS_E_USAGE);
	assert_non_null(strstr(err, "(a.fss and c.fss: no communicator in common)"));
	/* the same communicator, at one time, but rank 0 of it twice: not one process of one job */
	struct trace_jobs_file twice[] = {FILE_OF("a.fss", node_a, T0, T0 + 60 * SEC),
					  FILE_OF("b.fss", b_again, T0, T0 + 60 * SEC)};
	assert_int_equal(jobs_of(twice, 2, job), 2);
	assert_int_equal(trace_jobs_check(twice, 2, err, sizeof(err)), FSS_E_USAGE);
	assert_non_null(strstr(err, "(a.fss and b.fss: both hold rank 0 of communicator 1111111111111111)"));
	/* times not known (no clock anchor): they do not keep files apart */
	struct trace_jobs_file untimed[] = {FILE_OF("a.fss", node_a, 0, 0), FILE_OF("b.fss", node_b, T0, T0 + SEC)};
	assert_int_equal(jobs_of(untimed, 2, job), 1);
}

/*
 * HSDP on 3 nodes of 2 ranks: shard groups inside a node (an id per node),
 * replicate groups across nodes. Node A shares a replicate communicator
 * with B only, B one with C only: A and C share none, and are one job
 * through B. The files come in another order than their nodes.
 */
static void test_hsdp_joins_through_a_node(void **state)
{
	static const struct trace_jobs_rank a[] = {
		{.comm = 0xa5, .size = 2, .rank = 0}, {.comm = 0xab, .size = 2, .rank = 0}, {.comm = 0, .size = 6, .rank = 0},
		{.comm = 0xa5, .size = 2, .rank = 1}, {.comm = 0, .size = 6, .rank = 1},
	};
	static const struct trace_jobs_rank b[] = {
		{.comm = 0xb5, .size = 2, .rank = 0}, {.comm = 0xab, .size = 2, .rank = 1}, {.comm = 0, .size = 6, .rank = 2},
		{.comm = 0xb5, .size = 2, .rank = 1}, {.comm = 0xbc, .size = 2, .rank = 0}, {.comm = 0, .size = 6, .rank = 3},
	};
	static const struct trace_jobs_rank c[] = {
		{.comm = 0xc5, .size = 2, .rank = 0}, {.comm = 0, .size = 6, .rank = 4},
		{.comm = 0xc5, .size = 2, .rank = 1}, {.comm = 0xbc, .size = 2, .rank = 1}, {.comm = 0, .size = 6, .rank = 5},
	};
	struct trace_jobs_file f[] = {FILE_OF("a.fss", a, T0, T0 + 60 * SEC), FILE_OF("c.fss", c, T0, T0 + 60 * SEC),
				      FILE_OF("b.fss", b, T0, T0 + 60 * SEC)};
	uint32_t job[3];
	char err[1024];

	(void)state;
	assert_int_equal(jobs_of(f, 3, job), 1);
	assert_int_equal(trace_jobs_check(f, 3, err, sizeof(err)), 0);
	/* without B, A and C are two jobs */
	struct trace_jobs_file ac[] = {f[0], f[1]};
	assert_int_equal(jobs_of(ac, 2, job), 2);
}

/* A job joined through a third file in which two files still hold one rank
 * of one communicator cannot be told apart: refused, naming them. */
static void test_rank_collision_in_a_joined_job(void **state)
{
	static const struct trace_jobs_rank a[] = {{.comm = 0x1, .size = 2, .rank = 0}, {.comm = 0x3, .size = 2, .rank = 0}};
	static const struct trace_jobs_rank b[] = {{.comm = 0x1, .size = 2, .rank = 1}, {.comm = 0x2, .size = 2, .rank = 0}};
	static const struct trace_jobs_rank c[] = {{.comm = 0x2, .size = 2, .rank = 1}, {.comm = 0x3, .size = 2, .rank = 0}};
	struct trace_jobs_file f[] = {FILE_OF("a.fss", a, T0, T0 + SEC), FILE_OF("b.fss", b, T0, T0 + SEC),
				      FILE_OF("c.fss", c, T0, T0 + SEC)};
	uint32_t job[3];
	char err[1024];

	(void)state;
	assert_int_equal(jobs_of(f, 3, job), 1);
	assert_int_equal(trace_jobs_check(f, 3, err, sizeof(err)), FSS_E_USAGE);
	assert_non_null(strstr(err, "a.fss and c.fss both hold rank 0 of communicator 0000000000000003, yet the other "
				    "traces join them into one job"));
}

/* Files without a communicator id (PyTorch profiler traces): one world,
 * distinct ranks, one time. */
static void test_worlds_without_communicators(void **state)
{
	static const struct trace_jobs_rank r[6] = {
		{.size = 4, .rank = 0}, {.size = 4, .rank = 1}, {.size = 4, .rank = 2},
		{.size = 4, .rank = 3}, {.size = 8, .rank = 5}, {.size = 4, .rank = 0},
	};
	struct trace_jobs_file f[4];
	uint32_t job[4];
	char err[1024];

	(void)state;
	for (int i = 0; i < 4; i++)
		f[i] = (struct trace_jobs_file){.path = "rank.json", .ranks = &r[i], .nranks = 1, .first_ns = T0,
						.last_ns = T0 + SEC};
	assert_int_equal(jobs_of(f, 4, job), 1);
	assert_int_equal(trace_jobs_check(f, 4, err, sizeof(err)), 0);
	/* another world's size */
	f[1].ranks = &r[4];
	f[1].path = "w8.json";
	assert_int_equal(trace_jobs_check(f, 2, err, sizeof(err)), FSS_E_USAGE);
	assert_non_null(strstr(err, "worlds of 4 and 8 ranks"));
	/* rank 0 twice */
	f[1].ranks = &r[5];
	f[1].path = "again.json";
	assert_int_equal(trace_jobs_check(f, 2, err, sizeof(err)), FSS_E_USAGE);
	assert_non_null(strstr(err, "both are rank 0 of a world of 4"));
	/* two runs of ranks 0-1, the second listed first: job 1 is the one that ran first */
	f[0] = (struct trace_jobs_file){.path = "late0.json", .ranks = &r[0], .nranks = 1, .first_ns = T0 + 9 * SEC,
					.last_ns = T0 + 10 * SEC};
	f[1] = (struct trace_jobs_file){.path = "late1.json", .ranks = &r[1], .nranks = 1, .first_ns = T0 + 9 * SEC,
					.last_ns = T0 + 10 * SEC};
	f[2] = (struct trace_jobs_file){.path = "early0.json", .ranks = &r[0], .nranks = 1, .first_ns = T0,
					.last_ns = T0 + SEC};
	f[3] = (struct trace_jobs_file){.path = "early1.json", .ranks = &r[1], .nranks = 1, .first_ns = T0,
					.last_ns = T0 + SEC};
	assert_int_equal(jobs_of(f, 4, job), 2);
	assert_int_equal(job[0], 1);
	assert_int_equal(job[1], 1);
	assert_int_equal(job[2], 0);
	assert_int_equal(job[3], 0);
	assert_int_equal(trace_jobs_check(f, 4, err, sizeof(err)), FSS_E_USAGE);
	assert_non_null(strstr(err, "(early0.json and late0.json: both are rank 0 of a world of 4, their times do not "
				    "overlap)"));
	assert_non_null(strstr(err, "): early0.json, early1.json; job 2 (ranks 0-1, "));
	assert_non_null(strstr(err, "e.g. early0.json early1.json"));
}

/* A message longer than the buffer is cut, never overrun. */
static void test_message_cut_to_the_buffer(void **state)
{
	struct trace_jobs_file f[] = {FILE_OF("J/trace.fss", node_a, T0, T0 + 60 * SEC),
				      FILE_OF("J/trace-2.fss", node_c, T0 + 70 * SEC, T0 + 130 * SEC)};
	char err[40];

	(void)state;
	memset(err, 'x', sizeof(err));
	assert_int_equal(trace_jobs_check(f, 2, err, 32), FSS_E_USAGE);
	assert_int_equal(strlen(err), 31);
	assert_int_equal(err[39], 'x');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_nodes_are_one_job),
		cmocka_unit_test(test_two_runs_are_refused),
		cmocka_unit_test(test_each_condition_alone),
		cmocka_unit_test(test_hsdp_joins_through_a_node),
		cmocka_unit_test(test_rank_collision_in_a_joined_job),
		cmocka_unit_test(test_worlds_without_communicators),
		cmocka_unit_test(test_message_cut_to_the_buffer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
