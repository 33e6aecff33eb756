/*
 * analysis_trust_test.c - no verdict from steps the trace cannot vouch for:
 * synthetic fsdp_ref-like traces (tests/unit/analysis_synth.c) fed to the
 * analyzer with collectives taken out (what a full ring drops: gaps in a
 * source's seq numbers), with a source's records stopping early and without
 * its process_end (a cut trace, a killed process), and cut after every
 * record count. The steps left out are counted per rank and noted; what is
 * left gives the whole trace's verdict, or none.
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

#include "analysis_synth.h"
#include "collector/analyze.h"
#include "common/record.h"
#include "common/trace_parser.h"

#include "tests/support/scratch_dir.h"

static char dir[] = "/tmp/fss-trust-XXXXXX";

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

/* What reaches the analyzer: every record, but those a test takes out. */
struct feed {
	analyzer_t *a;
	uint64_t limit;          /* records let through in all (a cut file); UINT64_MAX: all */
	uint32_t drop_source;    /* collectives of this source with seq in [drop_lo, drop_hi] are lost */
	uint64_t drop_lo, drop_hi;
	uint64_t drop_every;     /* and those with seq a multiple of it (0: none) */
	uint32_t stop_source;    /* this source's records stop after its stop_after-th collective */
	uint64_t stop_after;     /* UINT64_MAX: they do not */
	uint64_t passed, stop_seen;
	int stopped;
	uint64_t collectives[8]; /* per source, counted while reading (all of them) */
	uint64_t first_reduction; /* records let through before the first ReduceScatter, +1 */
	uint32_t steps_excluded[3]; /* step callback: steps by analysis_step_info.excluded */
	uint32_t lost_ordinal_seen; /* the ordinal of the first step called back as lost, +1 */
};

static int on_record(void *ctx, const struct fss_record_head *rec)
{
	struct feed *f = ctx;
	if (rec->type == FSS_REC_COLLECTIVE && rec->source < 8)
		f->collectives[rec->source]++;
	if (f->passed >= f->limit)
		return 0;
	if (rec->source == f->stop_source && f->stop_after != UINT64_MAX) {
		if (f->stopped)
			return 0;
		if (rec->type == FSS_REC_COLLECTIVE && ++f->stop_seen == f->stop_after)
			f->stopped = 1;
	}
	if (rec->type == FSS_REC_COLLECTIVE && rec->source == f->drop_source) {
		const struct fss_rec_collective *c = (const void *)rec;
		if (c->seq >= f->drop_lo && c->seq <= f->drop_hi)
			return 0;
		if (f->drop_every && c->seq % f->drop_every == 0)
			return 0;
	}
	if (rec->type == FSS_REC_COLLECTIVE && !f->first_reduction &&
	    ((const struct fss_rec_collective *)rec)->op == FSS_OP_REDUCESCATTER)
		f->first_reduction = f->passed + 1;
	f->passed++;
	return analyzer_feed(f->a, rec);
}

static void on_step(void *ctx, const struct analysis_step_info *s)
{
	struct feed *f = ctx;
	if (s->excluded >= 0 && s->excluded < 3)
		f->steps_excluded[s->excluded]++;
	if (s->excluded == 1 && !f->lost_ordinal_seen)
		f->lost_ordinal_seen = s->ordinal + 1;
}

static void feed_init(struct feed *f)
{
	memset(f, 0, sizeof *f);
	f->limit = UINT64_MAX;
	f->drop_source = UINT32_MAX;
	f->stop_source = UINT32_MAX;
	f->stop_after = UINT64_MAX;
}

/* Analyse the trace at path through f; the result is the caller's. A
 * record `extra` (NULL: none) is fed after the trace's. */
static struct analysis_result *analyse(const char *path, struct feed *f, const struct fss_record_head *extra)
{
	assert_int_equal(analyzer_new(&f->a, NULL), 0);
	analyzer_on_step(f->a, on_step, f);
	struct trace_parser_ops ops = {.on_record = on_record};
	char err[256];
	assert_int_equal(trace_read_file(path, &ops, f, err, sizeof err), 0);
	if (extra)
		assert_int_equal(analyzer_feed(f->a, extra), 0);
	struct analysis_result *r = NULL;
	assert_int_equal(analyzer_finish(f->a, &r), 0);
	analyzer_free(f->a);
	f->a = NULL;
	assert_non_null(r);
	return r;
}

static const char *write_trace(const struct synth_config *c, const char *name)
{
	static char path[128];
	struct synth_truth t;
	snprintf(path, sizeof path, "%s/%s.fss", dir, name);
	assert_int_equal(synth_write(path, c, &t), 0);
	return path;
}

static const struct analysis_rank *rank_of_source(const struct analysis_result *r, uint32_t source)
{
	for (uint32_t i = 0; i < r->nper_rank; i++)
		if (r->per_rank[i].source == source)
			return &r->per_rank[i];
	fail_msg("no per-rank entry for source %u", source);
	return NULL;
}

static int has_note(const struct analysis_result *r, const char *text)
{
	for (uint32_t i = 0; i < r->nnotes; i++)
		if (strstr(r->notes[i], text))
			return 1;
	return 0;
}

/* The verdict's structural figures: what a false diagnosis would change. */
static void assert_same_verdict(const struct analysis_result *full, const struct analysis_result *r)
{
	assert_int_equal(r->verdict, full->verdict);
	assert_int_equal(r->per_step.allgathers, full->per_step.allgathers);
	assert_int_equal(r->per_step.reduce_scatters, full->per_step.reduce_scatters);
	assert_int_equal(r->units.gathers_per_unit, full->units.gathers_per_unit);
	assert_int_equal(r->units.repeating_units, full->units.repeating_units);
	assert_int_equal(r->reshard.policy, full->reshard.policy);
}

static void linear_config(struct synth_config *c, int nvtx_steps)
{
	synth_defaults(c);
	c->ranks = 2;
	c->wrap = "linear";
	c->steps = 8;
	c->nvtx_steps = nvtx_steps;
	c->chunk_payload = 4096;
}

/* A clean trace: nothing lost, nothing cut, nothing left out. */
static void test_clean_trace_vouches_for_every_step(void **state)
{
	(void)state;
	struct synth_config c;
	linear_config(&c, 1);
	const char *path = write_trace(&c, "clean");
	struct feed f;
	feed_init(&f);
	struct analysis_result *r = analyse(path, &f, NULL);
	assert_int_equal(r->verdict, ANALYSIS_DIAGNOSED);
	assert_int_equal(r->units.gathers_per_unit, 8);
	assert_int_equal(r->trust.collectives_lost, 0);
	assert_int_equal(r->trust.steps_lost_all + r->trust.steps_cut_all, 0);
	assert_int_equal(r->trace.sources_cut, 0);
	assert_int_equal(f.steps_excluded[1] + f.steps_excluded[2], 0);
	for (uint32_t i = 0; i < r->nper_rank; i++) {
		assert_int_equal(r->per_rank[i].cut, 0);
		assert_int_equal(r->per_rank[i].collectives_lost, 0);
	}
	analysis_result_free(r);
}

/* Collectives lost in the middle of rank 1's trace: the steps they were
 * lost in (one, or two when the gap is at a boundary) are left out of rank
 * 1's figures and counted, with a note; the verdict is the whole trace's. */
static void lost_collectives(int nvtx_steps)
{
	struct synth_config c;
	linear_config(&c, nvtx_steps);
	const char *path = write_trace(&c, nvtx_steps ? "lost-nvtx" : "lost-period");
	struct feed f;
	feed_init(&f);
	struct analysis_result *full = analyse(path, &f, NULL);
	uint64_t n1 = f.collectives[1];
	assert_true(n1 > 100);
	const struct analysis_rank *full1 = rank_of_source(full, 1);

	feed_init(&f);
	f.drop_source = 1;
	f.drop_lo = n1 / 2;
	f.drop_hi = n1 / 2 + 2;
	/* the agent counts what it lost: the three collectives and 7 NVTX ranges */
	struct fss_rec_drops d;
	memset(&d, 0, sizeof d);
	record_init(&d, FSS_REC_DROPS, sizeof d, 1);
	d.ring_dropped = 10;
	struct analysis_result *r = analyse(path, &f, &d.head);
	const struct analysis_rank *r1 = rank_of_source(r, 1);
	assert_int_equal(r1->collectives_lost, 3);
	assert_true(r1->steps_lost >= 1 && r1->steps_lost <= 2);
	assert_int_equal(r1->steps_analyzed + r1->steps_lost, full1->steps_analyzed);
	assert_int_equal(r1->per_step.allgathers, full1->per_step.allgathers); /* not a step with fewer */
	assert_int_equal(r->trust.collectives_lost, 3);
	assert_int_equal(r->trust.ranks_lost, 1);
	assert_int_equal(r->trust.steps_lost_all, r1->steps_lost);
	assert_int_equal(r->trust.ring_dropped, 10);
	assert_int_equal(r->trust.records_unplaced, 7);
	assert_int_equal(f.steps_excluded[1], r1->steps_lost);
	assert_true(f.lost_ordinal_seen > 0);
	char want[64];
	snprintf(want, sizeof want, "step %u on rank %d lost ", f.lost_ordinal_seen - 1, r1->rank);
	assert_true(has_note(r, want));
	assert_true(has_note(r, "7 not collectives"));
	assert_same_verdict(full, r);
	analysis_result_free(full);
	analysis_result_free(r);
}

static void test_lost_collectives_nvtx_steps(void **state)
{
	(void)state;
	lost_collectives(1);
}

static void test_lost_collectives_period_steps(void **state)
{
	(void)state;
	lost_collectives(0);
}

/* Collectives lost in every step of every rank: no step to draw a verdict
 * from, and the analysis says so (not "no repeating step", not clean). */
static void test_lost_everywhere_is_undecided(void **state)
{
	(void)state;
	struct synth_config c;
	linear_config(&c, 1);
	c.ranks = 1;
	const char *path = write_trace(&c, "lost-all");
	struct feed f;
	feed_init(&f);
	struct analysis_result *full = analyse(path, &f, NULL);
	assert_int_equal(full->verdict, ANALYSIS_DIAGNOSED);
	uint64_t per_step = f.collectives[0] / (uint64_t)c.steps;
	analysis_result_free(full);

	feed_init(&f);
	f.drop_source = 0;
	f.drop_every = per_step / 2; /* a call lost twice a step */
	struct analysis_result *r = analyse(path, &f, NULL);
	assert_int_equal(r->verdict, ANALYSIS_UNDECIDED);
	assert_int_equal(r->undecided_reason, ANALYSIS_UNDECIDED_INCOMPLETE);
	assert_string_equal(analysis_undecided_name(r->undecided_reason), "incomplete");
	assert_int_equal(r->steps_analyzed, 0);
	assert_true(r->trust.steps_lost_all > 0);
	assert_true(r->trust.collectives_lost >= (uint64_t)c.steps);
	assert_true(has_note(r, "no step the trace vouches for"));
	analysis_result_free(r);
}

/* Rank 1's records stop in the middle of a step, without its process_end
 * (a cut trace, a killed process): that step is left out on rank 1 (not a
 * step with fewer gathers, not a straggler), rank 1 is marked cut, and the
 * verdict is the whole trace's. */
static void source_cut(int nvtx_steps)
{
	struct synth_config c;
	linear_config(&c, nvtx_steps);
	const char *path = write_trace(&c, nvtx_steps ? "cut-nvtx" : "cut-period");
	struct feed f;
	feed_init(&f);
	struct analysis_result *full = analyse(path, &f, NULL);
	uint64_t n1 = f.collectives[1], per_step = n1 / (uint64_t)c.steps;
	const struct analysis_rank *full1 = rank_of_source(full, 1);

	feed_init(&f);
	f.stop_source = 1;
	f.stop_after = n1 - per_step - per_step / 2; /* inside the step before the last */
	/* with NVTX steps, the session that reaped it says it was killed */
	struct fss_rec_process_exit x;
	record_init(&x, FSS_REC_PROCESS_EXIT, sizeof x, 1);
	x.wait_status = 9; /* waitpid(): killed by SIGKILL */
	struct analysis_result *r = analyse(path, &f, nvtx_steps ? &x.head : NULL);
	const struct analysis_rank *r1 = rank_of_source(r, 1), *r0 = rank_of_source(r, 0);
	assert_int_equal(r->trace.sources_cut, 1);
	assert_int_equal(r->trust.ranks_cut, 1);
	assert_int_equal(r1->cut, 1);
	assert_int_equal(r0->cut, 0);
	assert_int_equal(r1->steps_cut, 1);
	assert_int_equal(r1->collectives_lost, 0);
	assert_true(r1->steps_analyzed < full1->steps_analyzed);
	assert_int_equal(r1->per_step.allgathers, full1->per_step.allgathers);
	assert_int_equal(f.steps_excluded[2], 1);
	char want[64];
	snprintf(want, sizeof want, "rank %d's records stop without its process_end", r1->rank);
	assert_true(has_note(r, want));
	assert_int_equal(has_note(r, "(killed by signal 9)"), nvtx_steps);
	assert_same_verdict(full, r);
	analysis_result_free(full);
	analysis_result_free(r);
}

static void test_source_cut_nvtx_steps(void **state)
{
	(void)state;
	source_cut(1);
}

static void test_source_cut_period_steps(void **state)
{
	(void)state;
	source_cut(0);
}

/* The trace cut after every k records (as a file cut at any chunk
 * boundary: every source's records stop there, process_end included): the
 * verdict is the whole trace's, or none; never another one. Steps from
 * NVTX and from the period alike. */
static void cut_everywhere(int nvtx_steps)
{
	struct synth_config c;
	linear_config(&c, nvtx_steps);
	c.steps = 6;
	const char *path = write_trace(&c, nvtx_steps ? "every-nvtx" : "every-period");
	struct feed f;
	feed_init(&f);
	struct analysis_result *full = analyse(path, &f, NULL);
	uint64_t total = f.passed;
	assert_int_equal(full->verdict, ANALYSIS_DIAGNOSED);
	unsigned diagnosed = 0, undecided = 0;
	for (uint64_t k = 0; k < total; k += 97) {
		feed_init(&f);
		f.limit = k;
		struct analysis_result *r = analyse(path, &f, NULL);
		if (r->verdict == ANALYSIS_UNDECIDED) {
			undecided++;
		} else {
			diagnosed++;
			assert_same_verdict(full, r);
			assert_true(r->trace.sources_cut > 0);
		}
		if (r->steps_analyzed == 0)
			assert_int_equal(r->verdict, ANALYSIS_UNDECIDED);
		analysis_result_free(r);
	}
	/* both outcomes occur: early cuts leave too little, late ones enough */
	assert_true(diagnosed > 0);
	assert_true(undecided > 0);
	analysis_result_free(full);
}

static void test_cut_everywhere_nvtx_steps(void **state)
{
	(void)state;
	cut_everywhere(1);
}

static void test_cut_everywhere_period_steps(void **state)
{
	(void)state;
	cut_everywhere(0);
}

/* A trace cut in the first forward (gathers only, steps from the period):
 * the gathers' own repeats (the blocks) are no step, and no figure comes
 * from them: no steps, no spread across ranks (no "straggler"). */
static void test_cut_in_first_forward_has_no_step(void **state)
{
	(void)state;
	struct synth_config c;
	linear_config(&c, 0);
	c.ranks = 4;
	c.layers = 8;
	const char *path = write_trace(&c, "first-forward");
	struct feed f;
	feed_init(&f);
	struct analysis_result *full = analyse(path, &f, NULL);
	assert_int_equal(full->verdict, ANALYSIS_DIAGNOSED);
	uint64_t upto = f.first_reduction - 1;
	analysis_result_free(full);
	assert_true(upto > 0);

	feed_init(&f);
	f.limit = upto;
	struct analysis_result *r = analyse(path, &f, NULL);
	assert_int_equal(r->verdict, ANALYSIS_UNDECIDED);
	assert_int_equal(r->steps_analyzed, 0);
	assert_int_equal(r->spread.ranks, 0);
	for (uint32_t i = 0; i < r->nper_rank; i++)
		assert_int_equal(r->per_rank[i].steps_analyzed, 0);
	assert_int_equal(r->trace.sources_cut, 4);
	analysis_result_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_trace_vouches_for_every_step),
		cmocka_unit_test(test_lost_collectives_nvtx_steps),
		cmocka_unit_test(test_lost_collectives_period_steps),
		cmocka_unit_test(test_lost_everywhere_is_undecided),
		cmocka_unit_test(test_source_cut_nvtx_steps),
		cmocka_unit_test(test_source_cut_period_steps),
		cmocka_unit_test(test_cut_everywhere_nvtx_steps),
		cmocka_unit_test(test_cut_everywhere_period_steps),
		cmocka_unit_test(test_cut_in_first_forward_has_no_step),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
