/*
 * worlds_test.c - collector/worlds: processes grouped into worlds by the
 * communicators they share and by time. A restart (a second set of
 * processes on new communicators, started after the first stopped, reusing
 * rank numbers) is two worlds; processes that ran at the same time are one
 * world, and a rank two of them claim is counted as such; a launcher
 * without a communicator joins the world it ran in; a trace without a
 * collective has none; one job of several communicators (a 2-D mesh, split
 * groups only) is one world.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/source.h"
#include "collector/worlds.h"
#include "common/record.h"

#include <string.h>

/* Host times are CLOCK_MONOTONIC; the hello says realtime = mono + 1e9. */
#define REALTIME_OFFSET 1000000000ull

static void feed(sources_t *t, const void *rec)
{
	assert_int_equal(sources_feed(t, rec), 0);
}

static void hello(sources_t *t, uint32_t source, uint32_t pid, uint64_t at)
{
	struct fss_rec_process_hello h;

	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), source);
	h.pid = pid;
	h.rank = h.local_rank = h.world_size = -1;
	h.slurm_procid = h.ompi_rank = -1;
	h.mono_ns = at;
	h.realtime_ns = at + REALTIME_OFFSET;
	feed(t, &h);
}

static void comm(sources_t *t, uint32_t source, uint64_t handle, uint64_t id_hash, int32_t nranks, int32_t rank,
		 uint64_t at)
{
	struct fss_rec_comm c;

	record_init(&c, FSS_REC_COMM, sizeof(c), source);
	c.comm = handle;
	c.id_hash = id_hash;
	c.nranks = nranks;
	c.rank = rank;
	c.device = -1;
	c.color = c.key = -1;
	c.event = FSS_COMM_INIT;
	c.enter_ns = at;
	c.exit_ns = at + 10;
	feed(t, &c);
}

/* n AllGathers on communicator `handle`, one every 10 ns from `from`. */
static void gathers(sources_t *t, uint32_t source, uint64_t handle, int n, uint64_t from)
{
	for (int i = 0; i < n; i++) {
		struct fss_rec_collective c;

		record_init(&c, FSS_REC_COLLECTIVE, sizeof(c), source);
		c.seq = (uint64_t)i + 1;
		c.comm = handle;
		c.op = FSS_OP_ALLGATHER;
		c.dtype = FSS_DTYPE_BFLOAT16;
		c.count = 1024;
		c.bytes = 2048;
		c.enter_ns = from + (uint64_t)i * 10;
		c.exit_ns = c.enter_ns + 5;
		feed(t, &c);
	}
}

/* A rank of a world: hello, its world communicator, collectives. */
static void rank_of(sources_t *t, uint32_t source, uint32_t pid, uint64_t id_hash, int32_t nranks, int32_t rank,
		    uint64_t from, uint64_t to)
{
	hello(t, source, pid, from);
	comm(t, source, 0x100, id_hash, nranks, rank, from + 100);
	gathers(t, source, 0x100, (int)((to - from - 200) / 10), from + 200);
}

/* The members of world k as source ids, for comparing with a list. */
static void assert_members(const struct world *w, const uint32_t *want, size_t n)
{
	assert_int_equal(w->nsources, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(w->sources[i], want[i]);
}

static void test_one_world(void **state)
{
	(void)state;
	sources_t *t = sources_new(NULL, NULL);
	struct worlds w;

	for (uint32_t r = 0; r < 4; r++)
		rank_of(t, r, 100 + r, 0xaaaa, 4, (int32_t)r, 1000, 5000);
	assert_int_equal(worlds_find(t, &w), 0);
	assert_int_equal(w.n, 1);
	assert_int_equal(w.w[0].size, 4);
	assert_true(w.w[0].id == 0xaaaa);
	assert_int_equal(w.w[0].components, 1);
	assert_int_equal(w.w[0].duplicate_ranks, 0);
	assert_int_equal(w.w[0].duplicate_rank, -1);
	assert_int_equal(w.w[0].nkeys, 1);
	assert_true(w.w[0].keys[0] == 0xaaaa);
	static const uint32_t all[] = {0, 1, 2, 3};
	assert_members(&w.w[0], all, 4);
	for (uint32_t r = 0; r < 4; r++)
		assert_int_equal(worlds_of(&w, r), 0);
	assert_int_equal(worlds_of(&w, 99), -1);
	worlds_release(&w);
	sources_free(t);
}

/* A restart: 4 ranks, then (after every one of them stopped) 2 new
 * processes on a new communicator that reuse ranks 0 and 1. */
static void test_restart_is_two_worlds(void **state)
{
	(void)state;
	sources_t *t = sources_new(NULL, NULL);
	struct worlds w;

	/* the second world's processes arrive first in the trace: order of
	 * worlds is by time, not by source */
	rank_of(t, 10, 210, 0xbbbb, 2, 0, 9000, 12000);
	rank_of(t, 11, 211, 0xbbbb, 2, 1, 9000, 12000);
	for (uint32_t r = 0; r < 4; r++)
		rank_of(t, r, 100 + r, 0xaaaa, 4, (int32_t)r, 1000, r == 3 ? 3000 : 5000 + r);
	assert_int_equal(worlds_find(t, &w), 0);
	assert_int_equal(w.n, 2);
	assert_int_equal(w.w[0].size, 4);
	assert_true(w.w[0].id == 0xaaaa);
	assert_int_equal(w.w[1].size, 2);
	assert_true(w.w[1].id == 0xbbbb);
	static const uint32_t first[] = {0, 1, 2, 3}, second[] = {10, 11};
	assert_members(&w.w[0], first, 4);
	assert_members(&w.w[1], second, 2);
	/* never one world: each rank number once in each */
	assert_int_equal(w.w[0].duplicate_ranks, 0);
	assert_int_equal(w.w[1].duplicate_ranks, 0);
	assert_true(w.w[0].last_realtime_ns < w.w[1].first_realtime_ns);
	assert_true(w.w[0].first_realtime_ns == 1000 + REALTIME_OFFSET);
	assert_int_equal(worlds_of(&w, 3), 0);
	assert_int_equal(worlds_of(&w, 11), 1);
	assert_true(w.w[0].keys[0] != w.w[1].keys[0]);
	worlds_release(&w);
	sources_free(t);
}

/* Two jobs at the same time on communicators of their own (two launchers
 * sending to one collector): not a restart, one world; its ranks 0 and 1
 * are claimed twice. */
static void test_overlap_is_one_world_with_duplicates(void **state)
{
	(void)state;
	sources_t *t = sources_new(NULL, NULL);
	struct worlds w;

	rank_of(t, 0, 100, 0xaaaa, 2, 0, 1000, 6000);
	rank_of(t, 1, 101, 0xaaaa, 2, 1, 1000, 6000);
	rank_of(t, 2, 200, 0xcccc, 2, 0, 4000, 9000);
	rank_of(t, 3, 201, 0xcccc, 2, 1, 4000, 9000);
	assert_int_equal(worlds_find(t, &w), 0);
	assert_int_equal(w.n, 1);
	assert_int_equal(w.w[0].components, 2);
	assert_int_equal(w.w[0].duplicate_ranks, 2);
	assert_int_equal(w.w[0].duplicate_rank, 0);
	assert_int_equal(w.w[0].duplicate_sources[0], 0);
	assert_int_equal(w.w[0].duplicate_sources[1], 2);
	assert_int_equal(w.w[0].nkeys, 2);
	worlds_release(&w);
	sources_free(t);
}

/* Bad input: two processes claim rank 1 of one communicator. */
static void test_same_communicator_same_rank(void **state)
{
	(void)state;
	sources_t *t = sources_new(NULL, NULL);
	struct worlds w;

	rank_of(t, 0, 100, 0xaaaa, 3, 0, 1000, 6000);
	rank_of(t, 1, 101, 0xaaaa, 3, 1, 1000, 6000);
	rank_of(t, 2, 102, 0xaaaa, 3, 1, 1000, 6000);
	assert_int_equal(worlds_find(t, &w), 0);
	assert_int_equal(w.n, 1);
	assert_int_equal(w.w[0].components, 1);
	assert_int_equal(w.w[0].duplicate_ranks, 1);
	assert_int_equal(w.w[0].duplicate_rank, 1);
	assert_int_equal(w.w[0].duplicate_sources[0], 1);
	assert_int_equal(w.w[0].duplicate_sources[1], 2);
	worlds_release(&w);
	sources_free(t);
}

/* A launcher without a communicator, and a process that only made one,
 * join the world they ran in; a process with no timed record, none. */
static void test_launcher_and_idle_processes(void **state)
{
	(void)state;
	sources_t *t = sources_new(NULL, NULL);
	struct worlds w;

	rank_of(t, 0, 100, 0xaaaa, 1, 0, 1000, 3000);
	rank_of(t, 1, 200, 0xbbbb, 1, 0, 5000, 7000);
	hello(t, 2, 50, 500);	/* the launcher: before both, so the first's */
	hello(t, 3, 199, 5500); /* a supervisor of the second */
	hello(t, 4, 198, 6000);
	comm(t, 4, 0x200, 0xdddd, 1, 0, 6100); /* made a communicator, issued nothing */
	struct fss_rec_drops d;
	record_init(&d, FSS_REC_DROPS, sizeof(d), 5); /* a source with no hello and no time */
	feed(t, &d);
	assert_int_equal(worlds_find(t, &w), 0);
	assert_int_equal(w.n, 2);
	assert_int_equal(worlds_of(&w, 0), 0);
	assert_int_equal(worlds_of(&w, 1), 1);
	assert_int_equal(worlds_of(&w, 2), 0);
	assert_int_equal(worlds_of(&w, 3), 1);
	assert_int_equal(worlds_of(&w, 4), 1);
	assert_int_equal(worlds_of(&w, 5), -1);
	/* a 1-rank world each, its world communicator the one with collectives */
	assert_true(w.w[1].id == 0xbbbb);
	assert_int_equal(w.w[1].nkeys, 1);
	worlds_release(&w);
	sources_free(t);
}

/* One job whose processes share no single communicator: tp {0,1} {2,3}
 * and dp {0,2} {1,3} (a world communicator never made) are one world. */
static void test_split_groups_one_world(void **state)
{
	(void)state;
	sources_t *t = sources_new(NULL, NULL);
	struct worlds w;
	static const uint64_t tp[] = {0x7001, 0x7001, 0x7002, 0x7002}, dp[] = {0xd001, 0xd002, 0xd001, 0xd002};

	for (uint32_t r = 0; r < 4; r++) {
		hello(t, r, 100 + r, 1000);
		comm(t, r, 0x100, tp[r], 2, (int32_t)(r % 2), 1100);
		comm(t, r, 0x200, dp[r], 2, (int32_t)(r / 2), 1200);
		gathers(t, r, 0x200, 20, 1300);
	}
	assert_int_equal(worlds_find(t, &w), 0);
	assert_int_equal(w.n, 1);
	assert_int_equal(w.w[0].nsources, 4);
	assert_int_equal(w.w[0].components, 1);
	worlds_release(&w);
	sources_free(t);
}

static void test_no_collective_no_world(void **state)
{
	(void)state;
	sources_t *t = sources_new(NULL, NULL);
	struct worlds w;

	hello(t, 0, 100, 1000);
	comm(t, 0, 0x100, 0xaaaa, 2, 0, 1100);
	assert_int_equal(worlds_find(t, &w), 0);
	assert_int_equal(w.n, 0);
	assert_int_equal(worlds_of(&w, 0), -1);
	worlds_release(&w);
	sources_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_one_world),
	    cmocka_unit_test(test_restart_is_two_worlds),
	    cmocka_unit_test(test_overlap_is_one_world_with_duplicates),
	    cmocka_unit_test(test_same_communicator_same_rank),
	    cmocka_unit_test(test_launcher_and_idle_processes),
	    cmocka_unit_test(test_split_groups_one_world),
	    cmocka_unit_test(test_no_collective_no_world),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
