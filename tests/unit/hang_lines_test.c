/* hang_lines_test: the stderr lines of a live session about calls in flight
 * (cli/hang_lines.c), over a sequence of hand-built diagnoses as a session
 * makes them: a hang said once while it lasts and once when it clears, each
 * mismatch once, nothing for a rule that did not report, nothing cleared
 * that the diagnosis could not list. Counts and texts, no clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/hang_lines.h"
#include "common/record.h"
#include "rules/rules.h"

#define S 1000000000ull

static struct analysis_result *result(void)
{
	struct analysis_result *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	analysis_options_init(&r->options);
	r->flight.timeout_ns = 1 * S;
	r->flight.sources_enter = 3;
	r->nsources = 3;
	r->sources = calloc(3, sizeof(*r->sources));
	assert_non_null(r->sources);
	for (uint32_t i = 0; i < 3; i++) {
		r->sources[i].source = i;
		r->sources[i].pid = 500 + i;
		snprintf(r->sources[i].host, sizeof(r->sources[i].host), "host%u", i);
	}
	return r;
}

static void release(struct analysis_result *r)
{
	free(r->sources);
	free(r);
}

/* Rank 1 missing from collective seq of communicator 0x5eed; ranks 0 and 2 wait. */
static void add_hang(struct analysis_result *r, uint64_t seq, uint64_t waited_ns)
{
	struct analysis_hang *h = &r->flight.hangs[r->flight.nhangs++];

	r->flight.hangs_total++;
	memset(h, 0, sizeof(*h));
	h->comm_id = 0x5eed;
	h->comm_seq = seq;
	h->nranks = 3;
	h->op = FSS_OP_ALLGATHER;
	h->dtype = FSS_DTYPE_BFLOAT16;
	h->waited_ns = waited_ns;
	h->waiting[h->nwaiting++] = (struct analysis_flight_rank){
	    .rank = 0, .source = 0, .pid = 500, .since_ns = waited_ns, .evidence = ANALYSIS_WAIT_HOST};
	h->waiting[h->nwaiting++] = (struct analysis_flight_rank){
	    .rank = 2, .source = 2, .pid = 502, .since_ns = waited_ns, .evidence = ANALYSIS_WAIT_HOST};
	h->missing[h->nmissing++] = (struct analysis_flight_rank){
	    .rank = 1, .source = 1, .pid = 501, .since_ns = waited_ns + S, .last_seq = seq - 1};
}

static void add_mismatch(struct analysis_result *r, uint64_t seq)
{
	struct analysis_mismatch *m = &r->flight.mismatches[r->flight.nmismatches++];

	r->flight.mismatches_total++;
	r->flight.mismatched_collectives++;
	memset(m, 0, sizeof(*m));
	m->comm_id = 0x5eed;
	m->comm_seq = seq;
	m->nranks = 3;
	m->a = (struct analysis_signature){
	    .count = 100, .root = -1, .op = FSS_OP_ALLGATHER, .dtype = FSS_DTYPE_BFLOAT16, .redop = FSS_REDOP_NONE};
	m->b = m->a;
	m->b.count = 99;
	m->a_ranks[m->na++] = 1;
	m->a_ranks[m->na++] = 2;
	m->b_ranks[m->nb++] = 0;
}

/* The lines for r, with the rules run on it as a session runs them. */
static unsigned update(hang_lines_t *h, const struct analysis_result *r, const char *disable, char **text)
{
	struct rule_config c;
	findings_t *list = findings_new();
	size_t len;
	FILE *out = open_memstream(text, &len);
	unsigned n;

	assert_non_null(list);
	assert_non_null(out);
	rule_config_init(&c);
	if (disable)
		assert_int_equal(rule_config_disable(&c, disable), 0);
	assert_int_equal(rules_run(r, &c, list), 0);
	n = hang_lines_update(h, r, list, out);
	assert_int_equal(fclose(out), 0);
	findings_free(list);
	return n;
}

static void contains(const char *text, const char *part)
{
	if (!strstr(text, part))
		fail_msg("\"%s\" not in:\n%s", part, text);
}

static void test_hang_once_then_cleared(void **state)
{
	hang_lines_t *h;
	struct analysis_result *r = result();
	char *text;

	(void)state;
	assert_int_equal(hang_lines_new(&h), 0);
	/* under the timeout: no hang yet */
	add_hang(r, 57, S / 2);
	assert_int_equal(update(h, r, NULL, &text), 0);
	free(text);
	/* past it: one line, naming the missing rank, the collective, the wait */
	r->flight.hangs[0].waited_ns = 2 * S;
	assert_int_equal(update(h, r, NULL, &text), 1);
	assert_memory_equal(text, "fsdpscope: collective-hang: ", 28);
	contains(text,
		 "missing rank 1 (host host1, pid 501); collective #57 (AllGather) of communicator 0000000000005eed "
		 "(3 ranks); ranks 0, 2 have waited 2.00 s (host)\n");
	free(text);
	/* the next diagnoses of the same hang say nothing */
	r->flight.hangs[0].waited_ns = 3 * S;
	assert_int_equal(update(h, r, NULL, &text), 0);
	free(text);
	assert_int_equal(update(h, r, NULL, &text), 0);
	free(text);
	/* it clears: one line, once */
	memset(&r->flight.hangs, 0, sizeof(r->flight.hangs));
	r->flight.nhangs = r->flight.hangs_total = 0;
	assert_int_equal(update(h, r, NULL, &text), 1);
	contains(text,
		 "fsdpscope: collective-hang cleared: collective #57 (AllGather) of communicator 0000000000005eed "
		 "(3 ranks): the missing rank arrived, no rank waits in it past --hang-timeout any more\n");
	free(text);
	assert_int_equal(update(h, r, NULL, &text), 0);
	free(text);
	/* a later hang on the same communicator is a new one */
	add_hang(r, 90, 2 * S);
	assert_int_equal(update(h, r, NULL, &text), 1);
	contains(text, "collective #90");
	free(text);
	hang_lines_free(h);
	release(r);
}

/* The waits of hang h ended past the timeout: every waiting rank gave up
 * with ncclRemoteError (6), or (died) their processes ended in it. */
static void end_hang(struct analysis_hang *h, int died)
{
	h->ended = died ? ANALYSIS_WAIT_DIED : ANALYSIS_WAIT_GAVE_UP;
	for (uint32_t i = 0; i < h->nwaiting; i++) {
		h->waiting[i].end = h->ended;
		h->waiting[i].result = died ? 0 : 6;
	}
}

/* The job's own timeout ends a hang said live: its end is said once, as an
 * end and not a clearing, and it is never said to clear while the
 * diagnosis keeps it. */
static void test_hang_ended_not_cleared(void **state)
{
	hang_lines_t *h;
	struct analysis_result *r = result();
	char *text;

	(void)state;
	assert_int_equal(hang_lines_new(&h), 0);
	add_hang(r, 57, 2 * S);
	assert_int_equal(update(h, r, NULL, &text), 1);
	free(text);
	end_hang(&r->flight.hangs[0], 0);
	assert_int_equal(update(h, r, NULL, &text), 1);
	contains(text, "fsdpscope: collective-hang ended: collective #57 (AllGather) of communicator 0000000000005eed "
		       "(3 ranks): the waiting ranks gave up (NCCL error ncclRemoteError on ranks 0, 2): the job's own "
		       "timeout ended the hang, no rank arrived; the hang stays in the verdict\n");
	assert_null(strstr(text, "cleared"));
	free(text);
	assert_int_equal(update(h, r, NULL, &text), 0);
	free(text);

	/* first seen once its waiting ranks had died in it: one line that says so */
	add_hang(r, 80, 5 * S);
	end_hang(&r->flight.hangs[1], 1);
	assert_int_equal(update(h, r, NULL, &text), 1);
	contains(text, "fsdpscope: collective-hang: missing rank 1 (host host1, pid 501); collective #80 (AllGather)");
	contains(text, "ranks 0, 2 have waited 5.00 s (host); the waiting ranks died inside it (their processes "
		       "ended): the hang ended with them, no rank arrived\n");
	free(text);
	assert_int_equal(update(h, r, NULL, &text), 0);
	free(text);
	hang_lines_free(h);
	release(r);
}

static void test_unlisted_hang_not_cleared(void **state)
{
	hang_lines_t *h;
	struct analysis_result *r = result();
	char *text;

	(void)state;
	assert_int_equal(hang_lines_new(&h), 0);
	add_hang(r, 57, 2 * S);
	assert_int_equal(update(h, r, NULL, &text), 1);
	free(text);
	/* the list now holds other hangs, and more were found than it holds:
	 * #57 may still be among those not listed */
	r->flight.nhangs = 0;
	r->flight.hangs_total = 0;
	for (uint64_t k = 0; k < ANALYSIS_HANGS_MAX; k++)
		add_hang(r, 100 + k, 10 * S);
	r->flight.hangs_total = ANALYSIS_HANGS_MAX + 1;
	assert_int_equal(update(h, r, NULL, &text), ANALYSIS_HANGS_MAX);
	assert_null(strstr(text, "cleared"));
	free(text);
	hang_lines_free(h);
	release(r);
}

static void test_mismatch_once_and_disabled_rules(void **state)
{
	hang_lines_t *h;
	struct analysis_result *r = result();
	char *text;

	(void)state;
	assert_int_equal(hang_lines_new(&h), 0);
	add_mismatch(r, 30);
	add_hang(r, 31, 2 * S);
	/* the rules turned off say nothing live */
	assert_int_equal(update(h, r, "collective-mismatch", &text), 1);
	assert_null(strstr(text, "collective-mismatch"));
	free(text);
	assert_int_equal(update(h, r, "collective-hang", &text), 2); /* the hang "clears", the mismatch is said */
	contains(text, "fsdpscope: collective-mismatch: communicator 0000000000005eed (3 ranks), collective #30: "
		       "ranks 1, 2 issued AllGather count 100 bfloat16; rank 0 issued AllGather count 99 bfloat16\n");
	free(text);
	assert_int_equal(update(h, r, "collective-hang", &text), 0);
	free(text);
	hang_lines_free(h);
	release(r);
}

static void test_mismatches_bounded(void **state)
{
	hang_lines_t *h;
	struct analysis_result *r = result();
	char *text;
	unsigned total = 0;

	(void)state;
	assert_int_equal(hang_lines_new(&h), 0);
	for (uint64_t seq = 1; seq <= HANG_LINES_MISMATCHES_MAX + 8; seq++) {
		r->flight.nmismatches = r->flight.mismatches_total = 0;
		add_mismatch(r, seq);
		total += update(h, r, NULL, &text);
		free(text);
	}
	/* one line each up to the bound, then one saying the rest go unsaid */
	assert_int_equal(total, HANG_LINES_MISMATCHES_MAX + 1);
	hang_lines_free(h);
	release(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hang_once_then_cleared),    cmocka_unit_test(test_hang_ended_not_cleared),
	    cmocka_unit_test(test_unlisted_hang_not_cleared), cmocka_unit_test(test_mismatch_once_and_disabled_rules),
	    cmocka_unit_test(test_mismatches_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
