/* rules_flight_test: the rules collective-hang and collective-mismatch on
 * hand-built results (result->flight as the analysis of calls in flight
 * fills it): each fires with the evidence a user needs, neither fires
 * without its cause or below the timeout, and the one-line texts the live
 * session prints name the same ranks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/record.h"
#include "rules/flight_text.h"
#include "rules/rules.h"
#include "tests/unit/rules_fixture.h"

#define S 1000000000ull
#define COMM 0x00c0ffee12345678ull

/* A 4-rank job whose rank 2 (host node-b) never entered AllGather #17 of
 * the FSDP group; the others have waited in it 75 s (host evidence). */
static struct analysis_result *hung(uint64_t waited_ns)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	struct analysis_hang *h;

	m.ranks = 4;
	a = fixture_new(&m);
	a->nsources = 4;
	a->sources = calloc(4, sizeof(*a->sources));
	for (uint32_t i = 0; i < 4; i++) {
		a->sources[i].source = i;
		a->sources[i].pid = 1000 + i;
		a->sources[i].rank = (int32_t)i;
		a->sources[i].end = SOURCE_END_CUT_OFF;
		snprintf(a->sources[i].host, sizeof(a->sources[i].host), "%s", i < 2 ? "node-a" : "node-b");
	}
	a->ncomms = 1;
	a->comms[0].id = COMM;
	a->comms[0].nranks = 4;
	a->comms[0].role = ANALYSIS_ROLE_FSDP;
	snprintf(a->comms[0].name, sizeof(a->comms[0].name), "dp_shard");
	a->fsdp_comm = 0;

	a->flight.timeout_ns = 60 * S;
	a->flight.now_realtime_ns = 1700000000 * S;
	a->flight.sources_enter = 4;
	a->flight.in_flight = 1;
	a->flight.nhangs = 1;
	a->flight.hangs_total = 1;
	h = &a->flight.hangs[0];
	h->comm_id = COMM;
	h->comm_seq = 17;
	h->count = 1048576;
	h->waited_ns = waited_ns;
	h->nranks = 4;
	h->op = FSS_OP_ALLGATHER;
	h->dtype = FSS_DTYPE_BFLOAT16;
	h->nwaiting = 3;
	h->nmissing = 1;
	for (uint32_t i = 0, r = 0; r < 4; r++) {
		if (r == 2)
			continue;
		h->waiting[i] = (struct analysis_flight_rank){.rank = (int32_t)r,
							      .global_rank = (int32_t)r,
							      .source = r,
							      .pid = 1000 + r,
							      .since_ns = waited_ns - i * S,
							      .last_seq = 17,
							      .last_op = FSS_OP_ALLGATHER,
							      .evidence = ANALYSIS_WAIT_HOST};
		i++;
	}
	h->missing[0] = (struct analysis_flight_rank){.rank = 2,
						      .global_rank = 2,
						      .source = 2,
						      .pid = 1002,
						      .since_ns = waited_ns + 2 * S,
						      .last_seq = 16,
						      .last_op = FSS_OP_REDUCESCATTER};
	return a;
}

static void release(struct analysis_result *a)
{
	free(a->sources);
	a->sources = NULL;
	fixture_free(a);
}

static void contains(const char *text, const char *part)
{
	if (!strstr(text, part))
		fail_msg("\"%s\" not in:\n%s", part, text);
}

static void test_hang_names_missing_and_waiting(void **state)
{
	struct analysis_result *a = hung(75 * S);
	findings_t *list = fixture_run(&rule_collective_hang, a, NULL);
	const struct finding *f;

	(void)state;
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_ERROR);
	assert_string_equal(f->rule->id, "collective-hang");
	/* the message: the collective, the missing rank with its host and pid */
	contains(f->message, "#17 (AllGather, count 1048576, bfloat16)");
	contains(f->message, "rank 2 (host node-b, pid 1002) never entered it");
	contains(f->message, "3 ranks have waited 75.0 s");
	/* the evidence: the communicator with role and name, the last
	 * collective of the missing rank and how long ago, the waiting ranks
	 * and how their wait is known */
	contains(f->evidence, "00c0ffee12345678 (fsdp, \"dp_shard\", 4 ranks)");
	contains(f->evidence, "over --hang-timeout 60.0 s");
	contains(f->evidence, "its last completed collective here is #16 (ReduceScatter), 77.0 s ago");
	contains(f->evidence, "waiting (3):");
	contains(f->evidence, "rank 0 (host node-a, pid 1000): waiting for 75.0 s (host: entered, not returned)");
	contains(f->evidence, "rank 3 (host node-b, pid 1003)");
	/* the fix: where to look and the PyTorch knobs */
	contains(f->fix_fsdp2, "py-spy dump --pid");
	contains(f->fix_fsdp2, "gdb -p");
	contains(f->fix_fsdp2, "TORCH_NCCL_ASYNC_ERROR_HANDLING");
	contains(f->fix_fsdp2, "timeout=datetime.timedelta");
	contains(f->fix_fsdp2, "TORCH_NCCL_TRACE_BUFFER_SIZE");
	assert_true(fixture_metric(f, "comm_seq") == 17);
	assert_true(fixture_metric(f, "first_missing_rank") == 2);
	assert_true(fixture_metric(f, "first_missing_last_seq") == 16);
	assert_true(fixture_metric(f, "waiting_ranks") == 3);
	assert_true(fixture_metric(f, "waited_ns") == 75.0 * S);
	findings_free(list);
	release(a);
}

/* The job's own timeout ended the waits (issue 24): the finding is the
 * hang's still, in the past tense, saying how each wait ended. */
static void test_hang_the_job_gave_up_on(void **state)
{
	struct analysis_result *a = hung(75 * S);
	struct analysis_hang *h = &a->flight.hangs[0];
	findings_t *list;
	const struct finding *f;

	(void)state;
	h->ended = ANALYSIS_WAIT_GAVE_UP;
	for (uint32_t i = 0; i < h->nwaiting; i++) {
		h->waiting[i].end = i == 2 ? ANALYSIS_WAIT_DIED : ANALYSIS_WAIT_GAVE_UP;
		h->waiting[i].result = i == 2 ? 0 : 6; /* ncclRemoteError */
	}
	list = fixture_run(&rule_collective_hang, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_ERROR);
	contains(f->message, "hung: rank 2 (host node-b, pid 1002) never entered it, and 3 ranks waited 75.0 s in it; "
			     "then the waiting ranks gave up (NCCL error ncclRemoteError on ranks 0, 1; the others "
			     "died): the job's own timeout ended the hang, no rank arrived");
	contains(f->evidence, "rank 0 (host node-a, pid 1000): waited 75.0 s (host: blocked in the call until it "
			      "failed), then gave up: the call returned ncclRemoteError");
	contains(f->evidence, "rank 3 (host node-b, pid 1003): waited 73.0 s (host: entered, not returned), then died "
			      "inside it (its process ended)");
	assert_true(fixture_metric(f, "ended") == ANALYSIS_WAIT_GAVE_UP);
	assert_true(fixture_metric(f, "first_missing_rank") == 2);
	findings_free(list);

	/* rank 2 came once they had given up: missing still, and said to be late */
	h->missing[0].late = 1;
	h->missing[0].last_seq = 16;
	list = fixture_run(&rule_collective_hang, a, NULL);
	f = findings_get(list, 0);
	contains(f->evidence,
		 "rank 2 (host node-b, pid 1002): entered #17 only after the waiting ranks had given up on "
		 "it (too late: it could not run any more)");
	findings_free(list);
	release(a);
}

/* Every rank entered it and rank 2 crashed in it: nobody is missing, and the
 * finding names the rank that died rather than calling the others ranks of
 * another node's trace. */
static void test_hang_of_a_rank_that_died_inside(void **state)
{
	struct analysis_result *a = hung(75 * S);
	struct analysis_hang *h = &a->flight.hangs[0];
	findings_t *list;
	const struct finding *f;

	(void)state;
	h->died[0] = h->missing[0];
	h->died[0].since_ns = 1 * S;
	h->died[0].last_seq = 17;
	h->died[0].end = ANALYSIS_WAIT_DIED;
	memset(&h->missing[0], 0, sizeof(h->missing[0]));
	h->nmissing = 0;
	h->ndied = 1;
	h->ended = ANALYSIS_WAIT_GAVE_UP;
	for (uint32_t i = 0; i < h->nwaiting; i++) {
		h->waiting[i].end = ANALYSIS_WAIT_GAVE_UP;
		h->waiting[i].result = 6;
	}
	list = fixture_run(&rule_collective_hang, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	contains(f->message,
		 "hung: rank 2 (host node-b, pid 1002) died inside it (its process ended), and 3 ranks "
		 "waited 75.0 s in it for it; then the waiting ranks gave up (NCCL error ncclRemoteError on "
		 "ranks 0, 1, 3)");
	assert_null(strstr(f->message, "not in this trace"));
	contains(f->evidence, "missing (0): none: every rank entered it\ndied inside it:\n  rank 2 (host node-b, pid "
			      "1002): entered #17; its process ended 1.00 s later");
	contains(f->fix_fsdp2, "A rank died inside it");
	assert_true(fixture_metric(f, "died_ranks") == 1);
	assert_true(fixture_metric(f, "missing_ranks") == 0);
	findings_free(list);
	release(a);
}

static void test_hang_below_timeout_is_silent(void **state)
{
	/* the analysis reports only waits past the timeout; a result that
	 * holds a shorter one (a live snapshot racing a changed timeout) is
	 * not called a hang either */
	struct analysis_result *a = hung(30 * S);
	findings_t *list = fixture_run(&rule_collective_hang, a, NULL);

	(void)state;
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	a->flight.hangs[0].waited_ns = 60 * S; /* at the timeout: not past it */
	list = fixture_run(&rule_collective_hang, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	release(a);
}

static void test_no_flight_no_finding(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list;

	(void)state;
	list = fixture_run(&rule_collective_hang, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	list = fixture_run(&rule_collective_mismatch, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

static void test_hang_with_every_rank_inside(void **state)
{
	struct analysis_result *a = hung(90 * S);
	struct analysis_hang *h = &a->flight.hangs[0];
	findings_t *list;
	const struct finding *f;

	(void)state;
	h->nmissing = 0;
	h->waiting[2] = (struct analysis_flight_rank){
	    .rank = 2, .source = 2, .pid = 1002, .since_ns = 80 * S, .last_seq = 17, .evidence = ANALYSIS_WAIT_GPU};
	h->nwaiting = 4;
	list = fixture_run(&rule_collective_hang, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	contains(f->message, "all 4 ranks entered it and none has come out for 90.0 s");
	findings_free(list);
	release(a);
}

/* One node's trace of a hang across nodes: every rank it holds is inside,
 * the communicator's others are another collector's; never "all ranks". */
static void test_hang_of_a_partial_trace(void **state)
{
	struct analysis_result *a = hung(90 * S);
	struct analysis_hang *h = &a->flight.hangs[0];
	findings_t *list;
	const struct finding *f;

	(void)state;
	h->nmissing = 0;
	h->nwaiting = 2;
	h->nranks = 4;
	list = fixture_run(&rule_collective_hang, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	contains(f->message, "the 2 of its 4 ranks in this trace entered it");
	contains(f->message, "the other 2 are not in this trace");
	assert_null(strstr(f->message, "all 2 ranks"));
	findings_free(list);
	release(a);
}

static void test_hangs_beyond_the_list_are_counted(void **state)
{
	struct analysis_result *a = hung(75 * S);
	findings_t *list;

	(void)state;
	a->flight.hangs_total = 6;
	list = fixture_run(&rule_collective_hang, a, NULL);
	assert_int_equal(findings_count(list), 1);
	contains(findings_get(list, 0)->evidence, "5 more hangs beyond the 4 listed");
	findings_free(list);
	release(a);
}

static struct analysis_result *desynced(void)
{
	struct analysis_result *a = hung(75 * S);
	struct analysis_mismatch *m = &a->flight.mismatches[0];

	a->flight.nhangs = 0;
	a->flight.hangs_total = 0;
	a->flight.nmismatches = 1;
	a->flight.mismatches_total = 1;
	a->flight.mismatched_collectives = 1;
	m->comm_id = COMM;
	m->comm_seq = 5;
	m->nranks = 4;
	m->na = 3;
	m->nb = 1;
	m->a = (struct analysis_signature){
	    .count = 1000, .root = -1, .op = FSS_OP_ALLGATHER, .dtype = FSS_DTYPE_BFLOAT16, .redop = FSS_REDOP_NONE};
	m->b = m->a;
	m->b.count = 999;
	m->a_ranks[0] = 0;
	m->a_ranks[1] = 1;
	m->a_ranks[2] = 3;
	m->b_ranks[0] = 2;
	m->b_source = 2;
	return a;
}

static void test_mismatch_names_both_signatures(void **state)
{
	struct analysis_result *a = desynced();
	findings_t *list = fixture_run(&rule_collective_mismatch, a, NULL);
	const struct finding *f;

	(void)state;
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_ERROR);
	assert_string_equal(f->rule->id, "collective-mismatch");
	contains(f->message,
		 "as #5: AllGather count 1000 bfloat16 on ranks 0, 1, 3, AllGather count 999 bfloat16 on rank 2");
	contains(f->message, "(count 1000 vs 999)");
	contains(f->evidence, "signature a: AllGather count 1000 bfloat16, issued by 3 ranks: 0, 1, 3");
	contains(f->evidence,
		 "signature b: AllGather count 999 bfloat16, issued by 1 rank: 2 (its first rank: host node-b, "
		 "pid 1002)");
	contains(f->fix_fsdp2, "wrap policy that differs per rank");
	contains(f->fix_fsdp2, "different model configs");
	assert_true(fixture_metric(f, "a_count") == 1000);
	assert_true(fixture_metric(f, "b_count") == 999);
	assert_true(fixture_metric(f, "first_b_rank") == 2);
	findings_free(list);
	/* no hang in this result: the hang rule is silent */
	list = fixture_run(&rule_collective_hang, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	release(a);
}

static void test_mismatch_of_root_and_op(void **state)
{
	struct analysis_result *a = desynced();
	struct analysis_mismatch *m = &a->flight.mismatches[0];
	findings_t *list;

	(void)state;
	m->a = (struct analysis_signature){
	    .count = 64, .root = 0, .op = FSS_OP_BROADCAST, .dtype = FSS_DTYPE_FLOAT32, .redop = FSS_REDOP_NONE};
	m->b = m->a;
	m->b.root = 1;
	list = fixture_run(&rule_collective_mismatch, a, NULL);
	contains(findings_get(list, 0)->message, "Broadcast count 64 float32 root 0 on ranks 0, 1, 3");
	contains(findings_get(list, 0)->message, "(root 0 vs 1)");
	findings_free(list);
	m->b = (struct analysis_signature){
	    .count = 64, .root = -1, .op = FSS_OP_ALLREDUCE, .dtype = FSS_DTYPE_FLOAT32, .redop = FSS_REDOP_SUM};
	list = fixture_run(&rule_collective_mismatch, a, NULL);
	contains(findings_get(list, 0)->message, "AllReduce count 64 float32 redop sum on rank 2");
	contains(findings_get(list, 0)->message, "op Broadcast vs AllReduce");
	findings_free(list);
	release(a);
}

static void test_registry_reports_flight_first(void **state)
{
	struct analysis_result *a = hung(75 * S), *d = desynced();
	struct rule_config c;
	findings_t *list = findings_new();

	(void)state;
	a->flight.nmismatches = 1;
	a->flight.mismatches_total = 1;
	a->flight.mismatches[0] = d->flight.mismatches[0];
	release(d);
	rule_config_init(&c);
	assert_int_equal(rules_run(a, &c, list), 0);
	assert_true(findings_count(list) >= 2);
	assert_string_equal(findings_get(list, 0)->rule->id, "collective-hang");
	assert_string_equal(findings_get(list, 1)->rule->id, "collective-mismatch");
	findings_free(list);
	release(a);
}

static void test_live_lines(void **state)
{
	struct analysis_result *a = hung(75 * S);
	char line[1024];

	(void)state;
	flight_hang_line(a, &a->flight.hangs[0], line, sizeof(line));
	contains(line, "missing rank 2 (host node-b, pid 1002); collective #17 (AllGather) of communicator "
		       "00c0ffee12345678 (fsdp, \"dp_shard\", 4 ranks); ranks 0, 1, 3 have waited 75.0 s (host)");
	release(a);
	a = desynced();
	flight_mismatch_line(a, &a->flight.mismatches[0], line, sizeof(line));
	contains(line,
		 "collective #5: ranks 0, 1, 3 issued AllGather count 1000 bfloat16; rank 2 issued AllGather count 999 "
		 "bfloat16");
	release(a);
	/* what "no hang" rests on */
	a = hung(75 * S);
	assert_true(flight_shows_waits(a));
	a->flight.sources_enter = 0;
	assert_false(flight_shows_waits(a));
	a->flight.sources_cupti = 1;
	assert_true(flight_shows_waits(a));
	release(a);
}

/* A hung job's trace often has too few steps for a verdict: the hang is
 * its error, and the wrap not judged is information beside it (one error
 * in the live view, not two); without the hang it is the error. */
static void test_undecided_beside_a_hang_is_info(void **state)
{
	struct analysis_result *a = hung(75 * S);
	findings_t *list;
	const struct finding *f;

	(void)state;
	a->verdict = ANALYSIS_UNDECIDED;
	a->undecided_reason = ANALYSIS_UNDECIDED_NO_STEP;
	snprintf(a->undecided_why, sizeof(a->undecided_why), "no repeating training step");
	list = fixture_run(&rule_not_diagnosed, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_INFO);
	contains(f->message, "the wrap was not judged: no repeating training step; the job's error is its "
			     "collective-hang");
	findings_free(list);
	a->flight.hangs_total = 0;
	a->flight.nhangs = 0;
	list = fixture_run(&rule_not_diagnosed, a, NULL);
	assert_int_equal(findings_get(list, 0)->severity, RULE_ERROR);
	findings_free(list);
	release(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hang_names_missing_and_waiting),
	    cmocka_unit_test(test_hang_the_job_gave_up_on),
	    cmocka_unit_test(test_hang_of_a_rank_that_died_inside),
	    cmocka_unit_test(test_hang_below_timeout_is_silent),
	    cmocka_unit_test(test_no_flight_no_finding),
	    cmocka_unit_test(test_hang_with_every_rank_inside),
	    cmocka_unit_test(test_hang_of_a_partial_trace),
	    cmocka_unit_test(test_hangs_beyond_the_list_are_counted),
	    cmocka_unit_test(test_mismatch_names_both_signatures),
	    cmocka_unit_test(test_mismatch_of_root_and_op),
	    cmocka_unit_test(test_registry_reports_flight_first),
	    cmocka_unit_test(test_live_lines),
	    cmocka_unit_test(test_undecided_beside_a_hang_is_info),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
