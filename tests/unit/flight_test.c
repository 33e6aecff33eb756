/*
 * flight_test.c - collectives in flight (collector/flight.c) through the
 * analyzer: hangs from host, GPU (CUPTI) and synchronize evidence, the
 * timeout, complete traces, mismatches from collective and from enter
 * records, ranks of two hosts whose clocks differ, bounded memory, and a
 * trace file read by analyze_trace. Every test is built from records with
 * chosen time stamps: nothing depends on the clock of the machine.
 *
 * The GPU case writes gpu_interval records exactly as agent/cupti.c does
 * (kind FSS_GPU_COMM for an NCCL kernel, CUPTI time base, collective_seq of
 * the launching call from its external correlation, the correlation id, a
 * FSS_CLOCK_CUPTI anchor for the time base): agent/cupti.c needs the agent
 * core's doubles and libcupti's record walker, which a collector test does
 * not link.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "collector/analyze.h"
#include "collector/analyze_traces.h"
#include "collector/flight.h"
#include "collector/source.h"
#include "common/record.h"
#include "common/trace_writer.h"

#include "tests/support/scratch_dir.h"

#include "flight_records.h"

/* ---- hangs: host evidence ------------------------------------------------- */

#define N_HUNG 5
#define T_HUNG (BASE + S + (uint64_t)N_HUNG * STEP) /* when the others entered #N */

/* 4 ranks; #1..#N-1 complete on all; ranks 0, 1, 3 enter #N and block;
 * rank 2 never enters it; every rank stays alive until T_HUNG + wait. */
static void hung_job_opts(struct job *j, uint64_t wait, const struct analysis_options *opt)
{
	job_start_opts(j, 4, FSS_FEATURE_NCCL | FSS_FEATURE_ENTER, opt);
	job_run(j, N_HUNG - 1, 1);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			enter(&j->o, &j->r[i], &AG, T_HUNG);
	for (int i = 0; i < 4; i++)
		alive(&j->o, &j->r[i], T_HUNG + wait);
}

static void hung_job(struct job *j, uint64_t wait)
{
	hung_job_opts(j, wait, NULL);
}

static void test_host_hang(void **state)
{
	(void)state;
	struct job j;
	hung_job(&j, 70 * S);
	struct analysis_result *r = snap(&j);
	const struct analysis_flight *fl = &r->flight;

	assert_int_equal(fl->timeout_ns, ANALYSIS_DEFAULT_HANG_TIMEOUT_NS);
	assert_int_equal(fl->sources_enter, 4);
	assert_int_equal(fl->sources_cupti, 0);
	assert_int_equal(fl->now_realtime_ns, RT0 + (T_HUNG + 70 * S - BASE));
	assert_int_equal(fl->in_flight, 1);
	assert_int_equal(fl->nhangs, 1);
	assert_int_equal(fl->hangs_total, 1);
	const struct analysis_hang *h = &fl->hangs[0];
	assert_int_equal(h->comm_id, COMM_ID);
	assert_int_equal(h->comm_seq, N_HUNG);
	assert_int_equal(h->nranks, 4);
	assert_int_equal(h->op, FSS_OP_ALLGATHER);
	assert_int_equal(h->dtype, FSS_DTYPE_BFLOAT16);
	assert_int_equal(h->count, 4096);
	assert_int_equal(h->waited_ns, 70 * S);
	assert_int_equal(h->nwaiting, 3);
	const int32_t want[] = {0, 1, 3};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(h->waiting[i].rank, want[i]);
		assert_int_equal(h->waiting[i].global_rank, want[i]);
		assert_int_equal(h->waiting[i].source, (uint32_t)want[i]);
		assert_int_equal(h->waiting[i].pid, 1000 + want[i]);
		assert_int_equal(h->waiting[i].evidence, ANALYSIS_WAIT_HOST);
		assert_int_equal(h->waiting[i].since_ns, 70 * S);
		assert_int_equal(h->waiting[i].last_seq, N_HUNG);
	}
	assert_int_equal(h->nmissing, 1);
	assert_int_equal(h->missing[0].rank, 2);
	assert_int_equal(h->missing[0].pid, 1002);
	assert_int_equal(h->missing[0].last_seq, N_HUNG - 1);
	assert_int_equal(h->missing[0].last_op, FSS_OP_ALLGATHER);
	assert_int_equal(h->missing[0].evidence, ANALYSIS_WAIT_NONE);
	/* its #N-1 returned STEP/2 after it was entered, STEP before T_HUNG */
	assert_int_equal(h->missing[0].since_ns, 70 * S + STEP / 2);
	assert_int_equal(fl->nmismatches, 0);
	/* enter records: no note that waits cannot be seen */
	for (uint32_t i = 0; i < r->nnotes; i++)
		assert_null(strstr(r->notes[i], "calls in flight"));
	analysis_result_free(r);

	/* a live session measures to its own clock: 10 s later, 80 s */
	analyzer_set_now(j.o.a, RT0 + (T_HUNG + 80 * S - BASE));
	assert_int_equal(analyzer_snapshot(j.o.a, &r), 0);
	assert_int_equal(r->flight.nhangs, 1);
	assert_int_equal(r->flight.hangs[0].waited_ns, 80 * S);
	analysis_result_free(r);

	/* the timeout is the option's */
	job_end(&j);
	struct analysis_options opt;
	analysis_options_init(&opt);
	opt.hang_timeout_ns = 100 * S;
	hung_job_opts(&j, 70 * S, &opt);
	r = snap(&j);
	assert_int_equal(r->flight.timeout_ns, 100 * S);
	assert_int_equal(r->flight.nhangs, 0);
	assert_int_equal(r->flight.in_flight, 1);
	analysis_result_free(r);
	job_end(&j);
}

static void test_wait_under_timeout(void **state)
{
	(void)state;
	struct job j;
	hung_job(&j, 30 * S);
	struct analysis_result *r = snap(&j);
	assert_int_equal(r->flight.nhangs, 0);
	assert_int_equal(r->flight.hangs_total, 0);
	assert_int_equal(r->flight.in_flight, 1); /* inside #N, not long enough */
	analysis_result_free(r);
	job_end(&j);
}

static void test_complete_trace(void **state)
{
	(void)state;
	struct job j;
	job_start(&j, 4, FSS_FEATURE_NCCL | FSS_FEATURE_ENTER);
	job_run(&j, 40, 1);
	for (int i = 0; i < 4; i++)
		process_end(&j.o, &j.r[i], BASE + 300 * S); /* long after: nothing in flight */
	struct analysis_result *r = NULL;
	assert_int_equal(analyzer_finish(j.o.a, &r), 0);
	assert_int_equal(r->flight.nhangs, 0);
	assert_int_equal(r->flight.in_flight, 0);
	assert_int_equal(r->flight.nmismatches, 0);
	assert_int_equal(r->flight.mismatched_collectives, 0);
	assert_int_equal(r->flight.now_realtime_ns, RT0 + 300 * S);
	analysis_result_free(r);
	job_end(&j);

	/* without enter records or CUPTI the trace cannot show a wait: noted */
	job_start(&j, 2, FSS_FEATURE_NCCL);
	job_run(&j, 10, 0);
	assert_int_equal(analyzer_finish(j.o.a, &r), 0);
	assert_int_equal(r->flight.sources_enter, 0);
	int noted = 0;
	for (uint32_t i = 0; i < r->nnotes; i++)
		noted |= strstr(r->notes[i], "hangs cannot be seen") != NULL;
	assert_true(noted);
	analysis_result_free(r);
	job_end(&j);
}

static void test_all_entered_none_left(void **state)
{
	(void)state;
	struct job j;
	job_start(&j, 4, FSS_FEATURE_ENTER);
	job_run(&j, N_HUNG - 1, 1);
	for (int i = 0; i < 4; i++)
		enter(&j.o, &j.r[i], &AG, T_HUNG + (uint64_t)i * MS);
	for (int i = 0; i < 4; i++)
		alive(&j.o, &j.r[i], T_HUNG + 65 * S);
	struct analysis_result *r = snap(&j);
	assert_int_equal(r->flight.nhangs, 1);
	const struct analysis_hang *h = &r->flight.hangs[0];
	assert_int_equal(h->comm_seq, N_HUNG);
	assert_int_equal(h->nwaiting, 4);
	assert_int_equal(h->nmissing, 0);
	assert_int_equal(h->waited_ns, 65 * S); /* rank 0's, the first in */
	assert_int_equal(h->waiting[3].since_ns, 65 * S - 3 * MS);
	analysis_result_free(r);

	/* killed as they waited (a session reaped them): the trace still
	 * shows the hang, each wait measured to its end */
	for (int i = 0; i < 4; i++)
		process_exit(&j.o, &j.r[i], T_HUNG + 66 * S, 9);
	assert_int_equal(analyzer_finish(j.o.a, &r), 0);
	assert_int_equal(r->flight.nhangs, 1);
	assert_int_equal(r->flight.hangs[0].waited_ns, 66 * S);
	assert_int_equal(r->flight.in_flight, 0); /* nobody is inside anything any more */
	analysis_result_free(r);
	job_end(&j);
}

/* A rank that crashed inside #N soon after entering it is not waiting;
 * the others, who wait for it, are a hang (nobody is missing: it entered). */
static void test_ended_rank(void **state)
{
	(void)state;
	struct job j;
	job_start(&j, 3, FSS_FEATURE_ENTER);
	job_run(&j, N_HUNG - 1, 1);
	for (int i = 0; i < 3; i++)
		enter(&j.o, &j.r[i], &AG, T_HUNG);
	process_exit(&j.o, &j.r[1], T_HUNG + S, 11);
	alive(&j.o, &j.r[0], T_HUNG + 90 * S);
	alive(&j.o, &j.r[2], T_HUNG + 90 * S);
	struct analysis_result *r = snap(&j);
	assert_int_equal(r->flight.nhangs, 1);
	const struct analysis_hang *h = &r->flight.hangs[0];
	assert_int_equal(h->nwaiting, 2);
	assert_int_equal(h->waiting[0].rank, 0);
	assert_int_equal(h->waiting[1].rank, 2);
	assert_int_equal(h->nmissing, 0);
	/* the rank that crashed in it is named: the others wait for it */
	assert_int_equal(h->ndied, 1);
	assert_int_equal(h->died[0].rank, 1);
	assert_int_equal(h->died[0].since_ns, S);
	assert_int_equal(h->died[0].end, ANALYSIS_WAIT_DIED);
	analysis_result_free(r);
	job_end(&j);

	/* a missing rank that ended is still listed */
	job_start(&j, 3, FSS_FEATURE_ENTER);
	job_run(&j, N_HUNG - 1, 1);
	enter(&j.o, &j.r[0], &AG, T_HUNG);
	enter(&j.o, &j.r[2], &AG, T_HUNG);
	process_exit(&j.o, &j.r[1], T_HUNG + S, 11);
	alive(&j.o, &j.r[0], T_HUNG + 90 * S);
	alive(&j.o, &j.r[2], T_HUNG + 90 * S);
	r = snap(&j);
	assert_int_equal(r->flight.nhangs, 1);
	assert_int_equal(r->flight.hangs[0].nmissing, 1);
	assert_int_equal(r->flight.hangs[0].missing[0].rank, 1);
	assert_int_equal(r->flight.hangs[0].missing[0].last_seq, N_HUNG - 1);
	analysis_result_free(r);
	job_end(&j);
}

/* ---- how a hang ends (issue 24) ---------------------------------------------- */

#define NCCL_REMOTE_ERROR 6 /* ncclRemoteError: what a timed-out call returns */
#define T_GAVE_UP (8 * S)   /* the job's own timeout, after the hang timeout (2 s) */

/* The hung job of hung_job under a 2 s hang timeout, whose waiting ranks
 * then leave #N: with ncclRemoteError at T_HUNG + T_GAVE_UP (the job's
 * timeout) or, with result 0, once rank 2 arrives then (the hang cleared);
 * they exit 100 ms later, rank 2 lives on to T_HUNG + 20 s. */
static void ended_job(struct job *j, int32_t result, int missing_arrives)
{
	struct analysis_options opt;

	analysis_options_init(&opt);
	opt.hang_timeout_ns = 2 * S;
	job_start_opts(j, 4, FSS_FEATURE_NCCL | FSS_FEATURE_ENTER, &opt);
	job_run(j, N_HUNG - 1, 1);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			enter(&j->o, &j->r[i], &AG, T_HUNG);
	if (missing_arrives)
		collective(&j->o, &j->r[2], &AG, T_HUNG + T_GAVE_UP - MS, T_HUNG + T_GAVE_UP, 1);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			returned(&j->o, &j->r[i], &AG, T_HUNG, T_HUNG + T_GAVE_UP, result);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			process_end(&j->o, &j->r[i], T_HUNG + T_GAVE_UP + 100 * MS);
	alive(&j->o, &j->r[2], T_HUNG + 20 * S);
}

static void assert_gave_up(const struct analysis_flight *fl)
{
	const int32_t want[] = {0, 1, 3};

	assert_int_equal(fl->nhangs, 1);
	assert_int_equal(fl->in_flight, 0); /* nobody is inside it any more */
	const struct analysis_hang *h = &fl->hangs[0];
	assert_int_equal(h->comm_seq, N_HUNG);
	assert_int_equal(h->ended, ANALYSIS_WAIT_GAVE_UP);
	assert_int_equal(h->waited_ns, T_GAVE_UP); /* to the error, not to now */
	assert_int_equal(h->nmissing, 1);
	assert_int_equal(h->missing[0].rank, 2);
	assert_int_equal(h->missing[0].last_seq, N_HUNG - 1);
	assert_int_equal(h->nwaiting, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(h->waiting[i].rank, want[i]);
		assert_int_equal(h->waiting[i].end, ANALYSIS_WAIT_GAVE_UP);
		assert_int_equal(h->waiting[i].result, NCCL_REMOTE_ERROR);
		assert_int_equal(h->waiting[i].evidence, ANALYSIS_WAIT_HOST);
		assert_int_equal(h->waiting[i].since_ns, T_GAVE_UP);
	}
}

/* The waiting ranks left #N with an NCCL error after waiting past the hang
 * timeout (the job's own timeout gave up on it) and exited: the hang stays,
 * live and post mortem, and says how it ended. */
static void test_waiting_ranks_gave_up(void **state)
{
	(void)state;
	struct job j;
	ended_job(&j, NCCL_REMOTE_ERROR, 0);
	struct analysis_result *r = snap(&j);
	assert_gave_up(&r->flight);
	analysis_result_free(r);

	/* a live session a minute later: still the hang, the wait still the error's */
	analyzer_set_now(j.o.a, RT0 + (T_HUNG + 80 * S - BASE));
	r = snap(&j);
	assert_gave_up(&r->flight);
	analysis_result_free(r);

	/* the failed communicator fails every later call at once: the hang stays #N */
	for (int i = 0; i < 4; i++)
		if (i != 2)
			collective_result(&j.o, &j.r[i], &AG, T_HUNG + T_GAVE_UP + MS, T_HUNG + T_GAVE_UP + 2 * MS, 1,
					  NCCL_REMOTE_ERROR);
	assert_int_equal(analyzer_finish(j.o.a, &r), 0);
	assert_gave_up(&r->flight);
	analysis_result_free(r);
	job_end(&j);
}

/* Rank 2 enters #N only after the others gave up on it: its call fails at
 * once on the failed communicator. It did not arrive in time: the hang
 * stays, with rank 2 missing (arrived late), not cleared. */
static void test_missing_arrives_after_gave_up(void **state)
{
	(void)state;
	struct job j;
	struct analysis_result *r = NULL;

	ended_job(&j, NCCL_REMOTE_ERROR, 0);
	collective_result(&j.o, &j.r[2], &AG, T_HUNG + T_GAVE_UP + S, T_HUNG + T_GAVE_UP + S + MS, 1,
			  NCCL_REMOTE_ERROR);
	process_end(&j.o, &j.r[2], T_HUNG + 20 * S);
	assert_int_equal(analyzer_finish(j.o.a, &r), 0);
	assert_gave_up(&r->flight);
	const struct analysis_hang *h = &r->flight.hangs[0];
	assert_int_equal(h->missing[0].late, 1);
	analysis_result_free(r);
	job_end(&j);
}

/* A call that fails sooner than the hang timeout (a bad argument, a peer that
 * died at once) is no wait of a hang. */
static void test_quick_failure_no_hang(void **state)
{
	(void)state;
	struct job j;
	struct analysis_options opt;
	struct analysis_result *r = NULL;

	analysis_options_init(&opt);
	opt.hang_timeout_ns = 2 * S;
	job_start_opts(&j, 4, FSS_FEATURE_NCCL | FSS_FEATURE_ENTER, &opt);
	job_run(&j, N_HUNG - 1, 1);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			collective_result(&j.o, &j.r[i], &AG, T_HUNG, T_HUNG + S, 1, NCCL_REMOTE_ERROR);
	for (int i = 0; i < 4; i++)
		alive(&j.o, &j.r[i], T_HUNG + 20 * S);
	assert_int_equal(analyzer_finish(j.o.a, &r), 0);
	assert_int_equal(r->flight.nhangs, 0);
	assert_int_equal(r->flight.in_flight, 0);
	analysis_result_free(r);
	job_end(&j);
}

/* The waiting ranks died inside #N after the hang timeout (the watchdog's
 * abort; a session reaped them): the hang stays and says they died. */
static void test_waiting_ranks_died(void **state)
{
	(void)state;
	struct job j;
	struct analysis_options opt;
	struct analysis_result *r = NULL;

	analysis_options_init(&opt);
	opt.hang_timeout_ns = 2 * S;
	job_start_opts(&j, 4, FSS_FEATURE_NCCL | FSS_FEATURE_ENTER, &opt);
	job_run(&j, N_HUNG - 1, 1);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			enter(&j.o, &j.r[i], &AG, T_HUNG);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			process_exit(&j.o, &j.r[i], T_HUNG + T_GAVE_UP, 6); /* SIGABRT */
	alive(&j.o, &j.r[2], T_HUNG + 20 * S);
	for (int live = 1; live >= 0; live--) {
		if (live)
			r = snap(&j);
		else
			assert_int_equal(analyzer_finish(j.o.a, &r), 0);
		assert_int_equal(r->flight.nhangs, 1);
		assert_int_equal(r->flight.in_flight, 0);
		const struct analysis_hang *h = &r->flight.hangs[0];
		assert_int_equal(h->comm_seq, N_HUNG);
		assert_int_equal(h->ended, ANALYSIS_WAIT_DIED);
		assert_int_equal(h->waited_ns, T_GAVE_UP);
		assert_int_equal(h->nmissing, 1);
		assert_int_equal(h->missing[0].rank, 2);
		assert_int_equal(h->nwaiting, 3);
		for (int i = 0; i < 3; i++) {
			assert_int_equal(h->waiting[i].end, ANALYSIS_WAIT_DIED);
			assert_int_equal(h->waiting[i].result, 0);
		}
		analysis_result_free(r);
	}
	job_end(&j);
}

/* The missing rank arrives after the hang timeout and #N completes: the
 * hang cleared, it is in no verdict. */
static void test_missing_arrives_late(void **state)
{
	(void)state;
	struct job j;
	struct analysis_result *r = NULL;

	ended_job(&j, 0, 1);
	r = snap(&j);
	assert_int_equal(r->flight.nhangs, 0);
	assert_int_equal(r->flight.in_flight, 0);
	analysis_result_free(r);
	assert_int_equal(analyzer_finish(j.o.a, &r), 0);
	assert_int_equal(r->flight.nhangs, 0);
	analysis_result_free(r);
	job_end(&j);
}

/* Every rank entered #N and rank 1 crashed in it; the others waited past
 * the hang timeout for it, then NCCL's timeout failed their call: the hang
 * stays, with nobody missing and rank 1 named as the one that died in it. */
static void test_rank_died_inside_others_gave_up(void **state)
{
	(void)state;
	struct job j;
	struct analysis_options opt;
	struct analysis_result *r = NULL;

	analysis_options_init(&opt);
	opt.hang_timeout_ns = 2 * S;
	job_start_opts(&j, 3, FSS_FEATURE_NCCL | FSS_FEATURE_ENTER, &opt);
	job_run(&j, N_HUNG - 1, 1);
	for (int i = 0; i < 3; i++)
		enter(&j.o, &j.r[i], &AG, T_HUNG);
	process_exit(&j.o, &j.r[1], T_HUNG + S, 11);
	for (int i = 0; i < 3; i += 2) {
		returned(&j.o, &j.r[i], &AG, T_HUNG, T_HUNG + T_GAVE_UP, NCCL_REMOTE_ERROR);
		process_end(&j.o, &j.r[i], T_HUNG + T_GAVE_UP + MS);
	}
	assert_int_equal(analyzer_finish(j.o.a, &r), 0);
	assert_int_equal(r->flight.nhangs, 1);
	const struct analysis_hang *h = &r->flight.hangs[0];
	assert_int_equal(h->comm_seq, N_HUNG);
	assert_int_equal(h->ended, ANALYSIS_WAIT_GAVE_UP);
	assert_int_equal(h->nmissing, 0);
	assert_int_equal(h->nwaiting, 2);
	assert_int_equal(h->waiting[0].rank, 0);
	assert_int_equal(h->waiting[1].rank, 2);
	assert_int_equal(h->ndied, 1);
	assert_int_equal(h->died[0].rank, 1);
	assert_int_equal(h->died[0].pid, 1001);
	assert_int_equal(h->died[0].last_seq, N_HUNG);
	analysis_result_free(r);
	job_end(&j);
}

/* A group's calls wait in ncclGroupEnd: its error ends their wait there. */
static void test_group_gave_up(void **state)
{
	(void)state;
	struct job j;
	struct analysis_options opt;
	struct analysis_result *r = NULL;
	struct call g = AG;

	analysis_options_init(&opt);
	opt.hang_timeout_ns = 2 * S;
	g.group_id = 1;
	job_start_opts(&j, 3, FSS_FEATURE_NCCL | FSS_FEATURE_ENTER, &opt);
	job_run(&j, N_HUNG - 1, 1);
	for (int i = 0; i < 2; i++) {
		collective(&j.o, &j.r[i], &g, T_HUNG, T_HUNG + 1000, 1);
		collective(&j.o, &j.r[i], &g, T_HUNG + 2000, T_HUNG + 3000, 1);
		struct fss_rec_group e;

		record_init(&e, FSS_REC_GROUP, sizeof(e), j.r[i].source);
		e.group_id = 1;
		e.calls = 2;
		e.start_ns = T_HUNG;
		e.end_enter_ns = T_HUNG + 4000;
		e.end_exit_ns = T_HUNG + T_GAVE_UP;
		e.result = NCCL_REMOTE_ERROR;
		put(&j.o, &e);
		process_end(&j.o, &j.r[i], T_HUNG + T_GAVE_UP + MS);
	}
	alive(&j.o, &j.r[2], T_HUNG + 20 * S);
	assert_int_equal(analyzer_finish(j.o.a, &r), 0);
	assert_int_equal(r->flight.nhangs, 1);
	const struct analysis_hang *h = &r->flight.hangs[0];
	assert_int_equal(h->comm_seq, N_HUNG);
	assert_int_equal(h->ended, ANALYSIS_WAIT_GAVE_UP);
	assert_int_equal(h->waited_ns, T_GAVE_UP);
	assert_int_equal(h->nwaiting, 2);
	assert_int_equal(h->nmissing, 1);
	assert_int_equal(h->missing[0].rank, 2);
	analysis_result_free(r);
	job_end(&j);
}

/* Calls inside ncclGroupStart/End return at enqueue; the group blocks in
 * ncclGroupEnd: its calls are left at the group record. */
static void test_group_hang(void **state)
{
	(void)state;
	struct job j;
	struct call g = AG;
	g.group_id = 1;
	job_start(&j, 3, FSS_FEATURE_ENTER);
	job_run(&j, N_HUNG - 1, 1);
	for (int i = 0; i < 2; i++) {
		collective(&j.o, &j.r[i], &g, T_HUNG, T_HUNG + 1000, 1);
		collective(&j.o, &j.r[i], &g, T_HUNG + 2000, T_HUNG + 3000, 1);
	}
	for (int i = 0; i < 3; i++)
		alive(&j.o, &j.r[i], T_HUNG + 61 * S);
	struct analysis_result *r = snap(&j);
	assert_int_equal(r->flight.nhangs, 1);
	const struct analysis_hang *h = &r->flight.hangs[0];
	assert_int_equal(h->comm_seq, N_HUNG); /* the group's first call */
	assert_int_equal(h->nwaiting, 2);
	assert_int_equal(h->waiting[0].evidence, ANALYSIS_WAIT_HOST);
	assert_int_equal(h->waiting[0].since_ns, 61 * S);
	assert_int_equal(h->nmissing, 1);
	assert_int_equal(h->missing[0].rank, 2);
	analysis_result_free(r);

	/* the groups return (rank 2 came after all): nothing waits */
	for (int i = 0; i < 2; i++)
		group_end(&j.o, &j.r[i], 1, 2, T_HUNG, T_HUNG + 62 * S);
	r = snap(&j);
	assert_int_equal(r->flight.nhangs, 0);
	assert_int_equal(r->flight.in_flight, 0);
	analysis_result_free(r);
	job_end(&j);
}

/* ---- hangs: GPU evidence ---------------------------------------------------- */

#define CUPTI_BASE (5 * S) /* CUPTI's clock reads this at CLOCK_MONOTONIC BASE */

static uint64_t to_cupti(uint64_t mono)
{
	return mono - BASE + CUPTI_BASE;
}

/* Real NCCL: every call returns at enqueue; the kernels run after. #1..#N-1
 * complete on the GPU on every rank; ranks 0, 1, 3 enqueue #N (their hosts
 * return) and its kernel never ends; rank 2 never issues #N. CUPTI goes on
 * delivering the compute kernels that end after #N's launch when
 * later_activity. */
static void gpu_job(struct job *j, int later_activity, int late_tie)
{
	job_start(j, 4, FSS_FEATURE_NCCL | FSS_FEATURE_ENTER | FSS_FEATURE_CUPTI);
	for (int i = 0; i < 4; i++)
		anchor(&j->o, &j->r[i], FSS_CLOCK_CUPTI, BASE, CUPTI_BASE);
	for (int c = 1; c <= N_HUNG; c++)
		for (int i = 0; i < 4; i++) {
			uint64_t t = BASE + S + (uint64_t)c * STEP;

			if (c == N_HUNG && i == 2)
				continue;
			collective(&j->o, &j->r[i], &AG, t, t + 20000, 1); /* returns at enqueue: 20 us */
			if (c == N_HUNG)
				continue;
			uint32_t corr = (uint32_t)(100 * c + i);
			if (late_tie && c == N_HUNG - 1) {
				/* held too long by the agent: out with no seq, its
				 * correlation record after it */
				gpu(&j->o, &j->r[i], FSS_GPU_COMM, to_cupti(t + MS), to_cupti(t + 3 * MS), 0, corr);
				correlation(&j->o, &j->r[i], j->r[i].seq, corr);
			} else {
				gpu(&j->o, &j->r[i], FSS_GPU_COMM, to_cupti(t + MS), to_cupti(t + 3 * MS), j->r[i].seq,
				    corr);
			}
		}
	if (later_activity)
		for (int i = 0; i < 4; i++)
			gpu(&j->o, &j->r[i], FSS_GPU_COMPUTE, to_cupti(T_HUNG + MS), to_cupti(T_HUNG + 2 * S), 0,
			    (uint32_t)(9000 + i));
	for (int i = 0; i < 4; i++)
		alive(&j->o, &j->r[i], T_HUNG + 70 * S);
}

static void test_gpu_hang(void **state)
{
	(void)state;
	for (int late_tie = 0; late_tie <= 1; late_tie++) {
		struct job j;
		gpu_job(&j, 1, late_tie);
		struct analysis_result *r = snap(&j);
		assert_int_equal(r->flight.sources_cupti, 4);
		assert_int_equal(r->flight.nhangs, 1);
		const struct analysis_hang *h = &r->flight.hangs[0];
		assert_int_equal(h->comm_seq, N_HUNG);
		assert_int_equal(h->nwaiting, 3);
		const int32_t want[] = {0, 1, 3};
		for (int i = 0; i < 3; i++) {
			assert_int_equal(h->waiting[i].rank, want[i]);
			assert_int_equal(h->waiting[i].evidence, ANALYSIS_WAIT_GPU);
			assert_int_equal(h->waiting[i].since_ns, 70 * S); /* from its launch */
		}
		assert_int_equal(h->nmissing, 1);
		assert_int_equal(h->missing[0].rank, 2);
		assert_int_equal(h->missing[0].last_seq, N_HUNG - 1);
		analysis_result_free(r);
		job_end(&j);
	}

	/* CUPTI silent since the launch: a kernel not reported is no evidence */
	struct job j;
	gpu_job(&j, 0, 0);
	struct analysis_result *r = snap(&j);
	assert_int_equal(r->flight.nhangs, 0);
	analysis_result_free(r);
	job_end(&j);
}

/* The same job on the host side with the kernels of #N-1 also missing on
 * one rank's CUPTI but an untied NCCL kernel reported after #N's launch:
 * the untied kernel may be #N's, so that rank is not taken as waiting. */
static void test_gpu_untied(void **state)
{
	(void)state;
	struct job j;
	gpu_job(&j, 1, 0);
	gpu(&j.o, &j.r[0], FSS_GPU_COMM, to_cupti(T_HUNG + MS), to_cupti(T_HUNG + 3 * MS), 0, 777);
	alive(&j.o, &j.r[0], T_HUNG + 71 * S);
	struct analysis_result *r = snap(&j);
	assert_int_equal(r->flight.nhangs, 1);
	assert_int_equal(r->flight.hangs[0].nwaiting, 2);
	assert_int_equal(r->flight.hangs[0].waiting[0].rank, 1);
	analysis_result_free(r);
	job_end(&j);
}

/* ---- hangs: a host in a synchronize -------------------------------------------- */

static void test_sync_hang(void **state)
{
	(void)state;
	struct job j;
	job_start(&j, 4, FSS_FEATURE_NCCL | FSS_FEATURE_ENTER);
	job_run(&j, N_HUNG - 1, 1);
	for (int i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		/* #N returns at enqueue; a stream synchronize after it blocks */
		collective(&j.o, &j.r[i], &AG, T_HUNG, T_HUNG + 20000, 1);
		sync_enter(&j.o, &j.r[i], FSS_ENTER_STREAM_SYNC, T_HUNG + MS);
	}
	/* rank 2 synchronizes too, before #N, and returns */
	sync_enter(&j.o, &j.r[2], FSS_ENTER_DEVICE_SYNC, T_HUNG);
	sync_exit(&j.o, &j.r[2], FSS_ENTER_DEVICE_SYNC, T_HUNG, T_HUNG + MS);
	for (int i = 0; i < 4; i++)
		alive(&j.o, &j.r[i], T_HUNG + MS + 61 * S);
	struct analysis_result *r = snap(&j);
	assert_int_equal(r->flight.nhangs, 1);
	const struct analysis_hang *h = &r->flight.hangs[0];
	assert_int_equal(h->comm_seq, N_HUNG);
	assert_int_equal(h->nwaiting, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(h->waiting[i].evidence, ANALYSIS_WAIT_SYNC);
		assert_int_equal(h->waiting[i].since_ns, 61 * S); /* from the synchronize */
	}
	assert_int_equal(h->nmissing, 1);
	assert_int_equal(h->missing[0].rank, 2);
	analysis_result_free(r);

	/* the synchronizes return: nothing waits any more */
	for (int i = 0; i < 4; i++)
		if (i != 2)
			sync_exit(&j.o, &j.r[i], FSS_ENTER_STREAM_SYNC, T_HUNG + MS, T_HUNG + 62 * S);
	r = snap(&j);
	assert_int_equal(r->flight.nhangs, 0);
	analysis_result_free(r);
	job_end(&j);
}

/* ---- mismatches ------------------------------------------------------------------- */

/* 3 ranks, k collectives; at #4 rank `odd` issues `other` instead of
 * `same`. */
static void mismatch_job(struct job *j, const struct call *same, const struct call *other, int odd, int k)
{
	job_start(j, 3, FSS_FEATURE_NCCL | FSS_FEATURE_ENTER);
	for (int c = 1; c <= k; c++)
		for (int i = 0; i < 3; i++) {
			uint64_t t = BASE + S + (uint64_t)c * STEP;
			const struct call *call = c == 4 && i == odd ? other : c == 4 ? same : &AG;

			collective(&j->o, &j->r[i], call, t, t + STEP / 2, 1);
		}
}

static void check_mismatch(const struct analysis_result *r, const struct call *a, const struct call *b, int odd)
{
	const struct analysis_flight *fl = &r->flight;
	assert_int_equal(fl->nmismatches, 1);
	assert_int_equal(fl->mismatches_total, 1);
	assert_int_equal(fl->mismatched_collectives, 1);
	const struct analysis_mismatch *m = &fl->mismatches[0];
	assert_int_equal(m->comm_id, COMM_ID);
	assert_int_equal(m->comm_seq, 4);
	assert_int_equal(m->nranks, 3);
	assert_int_equal(m->na, 2);
	assert_int_equal(m->nb, 1);
	assert_int_equal(m->others, 0);
	assert_int_equal(m->a.op, a->op);
	assert_int_equal(m->a.count, a->count);
	assert_int_equal(m->a.root, a->root);
	assert_int_equal(m->b.op, b->op);
	assert_int_equal(m->b.count, b->count);
	assert_int_equal(m->b.root, b->root);
	assert_int_equal(m->b.dtype, b->dtype);
	assert_int_equal(m->b_ranks[0], odd);
	assert_int_equal(m->b_ranks[1], -1);
	assert_int_equal(m->b_source, (uint32_t)odd);
	int k = 0;
	for (int i = 0; i < 3; i++)
		if (i != odd)
			assert_int_equal(m->a_ranks[k++], i);
}

static void test_mismatch_count_op_root(void **state)
{
	(void)state;
	struct call small = AG, ar = AG, b0 = AG, b1 = AG;
	small.count = AG.count - 1;
	ar.op = FSS_OP_ALLREDUCE;
	ar.redop = FSS_REDOP_SUM;
	b0.op = b1.op = FSS_OP_BROADCAST;
	b0.root = 0;
	b1.root = 1;
	const struct call *cases[][2] = {{&AG, &small}, {&AG, &ar}, {&b0, &b1}};
	for (int c = 0; c < 6; c++) {
		int odd = c % 3 == 0 ? 1 : c % 3 == 1 ? 2 : 0;
		struct job j;
		/* 8 calls: #4 is still in the window; 200: it left it */
		mismatch_job(&j, cases[c % 3][0], cases[c % 3][1], odd, c < 3 ? 8 : 200);
		struct analysis_result *r = snap(&j);
		check_mismatch(r, cases[c % 3][0], cases[c % 3][1], odd);
		analysis_result_free(r);
		/* and at the end, the same */
		assert_int_equal(analyzer_finish(j.o.a, &r), 0);
		check_mismatch(r, cases[c % 3][0], cases[c % 3][1], odd);
		analysis_result_free(r);
		job_end(&j);
	}

	/* a dtype unknown on a rank (NVTX path) is not compared; Send / Recv
	 * pairs are not compared */
	struct job j;
	struct call nvtx = AG, send = AG, recv = AG;
	nvtx.dtype = FSS_DTYPE_UNKNOWN;
	nvtx.count = 0;
	send.op = FSS_OP_SEND;
	recv.op = FSS_OP_RECV;
	mismatch_job(&j, &AG, &nvtx, 1, 8);
	struct analysis_result *r = snap(&j);
	assert_int_equal(r->flight.nmismatches, 0);
	analysis_result_free(r);
	job_end(&j);
	mismatch_job(&j, &send, &recv, 1, 8);
	r = snap(&j);
	assert_int_equal(r->flight.nmismatches, 0);
	assert_int_equal(r->flight.mismatched_collectives, 0);
	analysis_result_free(r);
	job_end(&j);
}

/* A rank whose records lost calls (a full ring: both the enter and the
 * collective record of #3) counts its comm_seq from what the trace holds:
 * its numbers are off by one from there, and its signatures (which
 * alternate) would all differ from the others': they are not compared. */
static void test_lost_calls_not_compared(void **state)
{
	(void)state;
	struct job j;
	struct call half = AG;
	half.count = AG.count / 2;
	job_start(&j, 3, FSS_FEATURE_ENTER);
	for (int c = 1; c <= 300; c++)
		for (int i = 0; i < 3; i++) {
			uint64_t t = BASE + S + (uint64_t)c * STEP;

			if (i == 1 && c == 3) {
				j.r[i].seq++; /* lost: never reached the trace */
				continue;
			}
			collective(&j.o, &j.r[i], c % 2 ? &AG : &half, t, t + STEP / 2, 1);
		}
	struct analysis_result *r = NULL;
	assert_int_equal(analyzer_finish(j.o.a, &r), 0);
	assert_int_equal(r->flight.nmismatches, 0);
	assert_int_equal(r->flight.mismatched_collectives, 0);
	analysis_result_free(r);
	job_end(&j);
}

/* The calls never return (the stand-in blocks on the wrong size forever):
 * the enter records alone show the mismatch. */
static void test_mismatch_from_enter(void **state)
{
	(void)state;
	struct job j;
	struct call small = AG;
	small.count = 100;
	job_start(&j, 3, FSS_FEATURE_ENTER);
	job_run(&j, 3, 1);
	for (int i = 0; i < 3; i++)
		enter(&j.o, &j.r[i], i == 2 ? &small : &AG, T_HUNG);
	struct analysis_result *r = snap(&j);
	assert_int_equal(r->flight.nmismatches, 1);
	assert_int_equal(r->flight.mismatches[0].comm_seq, 4);
	assert_int_equal(r->flight.mismatches[0].a.count, AG.count);
	assert_int_equal(r->flight.mismatches[0].b.count, 100);
	assert_int_equal(r->flight.mismatches[0].b_ranks[0], 2);
	analysis_result_free(r);
	job_end(&j);
}

/* ---- two hosts ------------------------------------------------------------------------ */

/* Ranks 0, 1 on host A (CLOCK_MONOTONIC BASE at its hello); ranks 2, 3 on
 * host B, whose CLOCK_MONOTONIC reads 4000 s more at the same instant, and
 * whose CLOCK_REALTIME is stepped by +2 s halfway (an NTP step: a later
 * FSS_CLOCK_REALTIME anchor says so). Rank 3 never enters #N; the others
 * enter it at the same instant. */
static void test_two_hosts(void **state)
{
	(void)state;
	struct job j;
	const uint64_t shift = 4000 * S;
	memset(&j, 0, sizeof(j));
	assert_int_equal(analyzer_new(&j.o.a, NULL), 0);
	j.n = 4;
	for (int i = 0; i < 4; i++) {
		uint64_t base = i < 2 ? BASE : BASE + shift;
		int64_t off = (int64_t)RT0 - (int64_t)base;

		hello(&j.o, &j.r[i], (uint32_t)i, i, base, off, FSS_FEATURE_ENTER);
		comm(&j.o, &j.r[i], HANDLE, COMM_ID, 4, i, base + MS);
	}
	for (int c = 1; c < N_HUNG; c++)
		for (int i = 0; i < 4; i++) {
			uint64_t t = BASE + S + (uint64_t)c * STEP + (i < 2 ? 0 : shift);

			collective(&j.o, &j.r[i], &AG, t, t + STEP / 2, 1);
		}
	/* host B's wall clock was 2 s slow and is stepped: its realtime anchor */
	for (int i = 2; i < 4; i++)
		anchor(&j.o, &j.r[i], FSS_CLOCK_REALTIME, T_HUNG - S + shift, RT0 + (T_HUNG - S - BASE) + 2 * S);
	for (int i = 0; i < 3; i++)
		enter(&j.o, &j.r[i], &AG, T_HUNG + (i < 2 ? 0 : shift));
	alive(&j.o, &j.r[0], T_HUNG + 70 * S);
	struct analysis_result *r = snap(&j);
	assert_int_equal(r->flight.now_realtime_ns, RT0 + (T_HUNG + 70 * S - BASE));
	assert_int_equal(r->flight.nhangs, 1);
	const struct analysis_hang *h = &r->flight.hangs[0];
	assert_int_equal(h->nwaiting, 3);
	assert_int_equal(h->waiting[0].since_ns, 70 * S);
	assert_int_equal(h->waiting[1].since_ns, 70 * S);
	/* rank 2's enter at the same instant reads 2 s later on host B's stepped wall clock */
	assert_int_equal(h->waiting[2].rank, 2);
	assert_int_equal(h->waiting[2].since_ns, 68 * S);
	assert_int_equal(h->nmissing, 1);
	assert_int_equal(h->missing[0].rank, 3);
	assert_int_equal(h->missing[0].last_seq, N_HUNG - 1);
	analysis_result_free(r);
	job_end(&j);
}

/* ---- bounded memory --------------------------------------------------------------------- */

static void test_bounded(void **state)
{
	(void)state;
	struct out o = {0};
	struct rank r[2];
	o.layer = sources_new(NULL, NULL);
	o.f = flight_new();
	assert_non_null(o.layer);
	assert_non_null(o.f);
	for (int i = 0; i < 2; i++) {
		hello(&o, &r[i], (uint32_t)i, i, BASE, (int64_t)(RT0 - BASE), FSS_FEATURE_ENTER | FSS_FEATURE_CUPTI);
		comm(&o, &r[i], HANDLE, COMM_ID, 2, i, BASE + MS);
		anchor(&o, &r[i], FSS_CLOCK_CUPTI, BASE, CUPTI_BASE);
	}
	size_t at_1k = 0;
	for (int c = 1; c <= 100000; c++) {
		for (int i = 0; i < 2; i++) {
			uint64_t t = BASE + S + (uint64_t)c * 100000;

			collective(&o, &r[i], &AG, t, t + 20000, 1);
			gpu(&o, &r[i], FSS_GPU_COMM, to_cupti(t + 30000), to_cupti(t + 60000), r[i].seq, (uint32_t)c);
			if (c % 100 == 0) {
				sync_enter(&o, &r[i], FSS_ENTER_STREAM_SYNC, t + 70000);
				sync_exit(&o, &r[i], FSS_ENTER_STREAM_SYNC, t + 70000, t + 80000);
			}
		}
		if (c == 1000)
			at_1k = flight_footprint(o.f);
	}
	size_t at_100k = flight_footprint(o.f);
	assert_true(at_1k > 0);
	assert_int_equal(at_100k, at_1k);
	struct analysis_flight fl;
	assert_int_equal(flight_fill(o.f, 0, 0, &fl), 0);
	assert_int_equal(fl.nhangs, 0);
	assert_int_equal(fl.in_flight, 0);
	assert_int_equal(fl.nmismatches, 0);
	flight_free(o.f);
	sources_free(o.layer);
}

/* ---- a trace file ----------------------------------------------------------------------- */

static char dir[] = "/tmp/fss-flight-XXXXXX";

static int setup(void **state)
{
	(void)state;
	return scratch_dir_make(dir);
}

static int teardown(void **state)
{
	(void)state;
	return scratch_dir_remove(dir);
}

/* The hung job in a trace file, read by analyze_trace (lint's path): the
 * trace's "now" is its latest record. */
static void test_trace_file(void **state)
{
	(void)state;
	char path[256];
	snprintf(path, sizeof path, "%s/hung.fss", dir);
	struct job j;
	memset(&j, 0, sizeof(j));
	assert_int_equal(trace_writer_open(&j.o.w, path, NULL), 0);
	j.n = 4;
	for (int i = 0; i < 4; i++) {
		hello(&j.o, &j.r[i], (uint32_t)i, i, BASE, (int64_t)(RT0 - BASE), FSS_FEATURE_NCCL | FSS_FEATURE_ENTER);
		comm(&j.o, &j.r[i], HANDLE, COMM_ID, 4, i, BASE + MS);
	}
	job_run(&j, N_HUNG - 1, 1);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			enter(&j.o, &j.r[i], &AG, T_HUNG);
	alive(&j.o, &j.r[1], T_HUNG + 75 * S);
	assert_int_equal(trace_writer_close(j.o.w), 0);

	struct analysis_result *r = NULL;
	char err[256] = "";
	assert_int_equal(analyze_trace(path, NULL, &r, err, sizeof err), 0);
	assert_int_equal(r->flight.now_realtime_ns, RT0 + (T_HUNG + 75 * S - BASE));
	assert_int_equal(r->flight.nhangs, 1);
	assert_int_equal(r->flight.hangs[0].comm_seq, N_HUNG);
	assert_int_equal(r->flight.hangs[0].waited_ns, 75 * S);
	assert_int_equal(r->flight.hangs[0].nmissing, 1);
	assert_int_equal(r->flight.hangs[0].missing[0].rank, 2);
	analysis_result_free(r);

	/* the same with a timeout above the wait: none */
	struct analysis_options opt;
	analysis_options_init(&opt);
	opt.hang_timeout_ns = 80 * S;
	assert_int_equal(analyze_trace(path, &opt, &r, err, sizeof err), 0);
	assert_int_equal(r->flight.nhangs, 0);
	analysis_result_free(r);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_host_hang),
	    cmocka_unit_test(test_wait_under_timeout),
	    cmocka_unit_test(test_complete_trace),
	    cmocka_unit_test(test_all_entered_none_left),
	    cmocka_unit_test(test_ended_rank),
	    cmocka_unit_test(test_waiting_ranks_gave_up),
	    cmocka_unit_test(test_quick_failure_no_hang),
	    cmocka_unit_test(test_waiting_ranks_died),
	    cmocka_unit_test(test_missing_arrives_late),
	    cmocka_unit_test(test_missing_arrives_after_gave_up),
	    cmocka_unit_test(test_rank_died_inside_others_gave_up),
	    cmocka_unit_test(test_group_gave_up),
	    cmocka_unit_test(test_group_hang),
	    cmocka_unit_test(test_gpu_hang),
	    cmocka_unit_test(test_gpu_untied),
	    cmocka_unit_test(test_sync_hang),
	    cmocka_unit_test(test_mismatch_count_op_root),
	    cmocka_unit_test(test_mismatch_from_enter),
	    cmocka_unit_test(test_lost_calls_not_compared),
	    cmocka_unit_test(test_two_hosts),
	    cmocka_unit_test(test_bounded),
	    cmocka_unit_test(test_trace_file),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
