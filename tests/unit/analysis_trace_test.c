/*
 * analysis_trace_test.c - the whole analysis on synthetic fsdp_ref-like
 * traces (tests/unit/analysis_synth.c): counts, units, reshard policy,
 * steps from NVTX and from the period, exposure against the simulated
 * gather waits, warm-up, grouped calls, CUPTI intervals, rank skew.
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
#include "collector/analyze_traces.h"
#include "collector/timeline.h"
#include "common/error.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"

#include "tests/support/scratch_dir.h"

static char dir[] = "/tmp/fss-analysis-XXXXXX";

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

/* Write a trace for c and analyse it; the result is the caller's. */
static struct analysis_result *run(const struct synth_config *c, const struct analysis_options *o,
				   struct synth_truth *t)
{
	char path[128];
	static int k;
	snprintf(path, sizeof path, "%s/t%d.fss", dir, k++);
	assert_int_equal(synth_write(path, c, t), 0);
	struct analysis_result *r = NULL;
	char err[256];
	int rc = analyze_trace(path, o, &r, err, sizeof err);
	if (rc != 0)
		fprintf(stderr, "analyze_trace: %s\n", err);
	assert_int_equal(rc, 0);
	assert_non_null(r);
	unlink(path);
	return r;
}

static const char *policy(const struct analysis_result *r)
{
	static char buf[32];
	return analysis_reshard_format(&r->reshard, buf, sizeof buf);
}

/* Every figure a labelled run must get right. */
static void check(const struct synth_config *c, const struct analysis_result *r, const struct synth_truth *t,
		  int warmup)
{
	char want[32];
	if (c->reshard == 0)
		snprintf(want, sizeof want, "false");
	else if (c->reshard > 1 && c->reshard < c->ranks)
		snprintf(want, sizeof want, "group:%d", c->reshard);
	else
		snprintf(want, sizeof want, "true");
	if (t->units == 1)
		snprintf(want, sizeof want, "unknown");
	assert_string_equal(r->schema, "fsdpscope.report/2");
	assert_int_equal(r->ranks, c->ranks);
	assert_int_equal(r->step_detection, c->nvtx_steps ? ANALYSIS_STEPS_NVTX : ANALYSIS_STEPS_PERIOD);
	assert_int_equal(r->warmup_steps, warmup);
	assert_int_equal(r->steps_analyzed, c->steps - warmup);
	assert_int_equal(r->irregular_steps, 0);
	assert_int_equal(r->per_step.allgathers, t->allgathers);
	assert_int_equal(r->per_step.forward_allgathers, t->forward_allgathers);
	assert_int_equal(r->per_step.backward_allgathers, t->backward_allgathers);
	assert_int_equal(r->per_step.reduce_scatters, t->reduce_scatters);
	assert_int_equal(r->per_step.allreduces, t->allreduces);
	assert_int_equal(r->per_step.allgather_calls, t->allgathers * (c->grouped ? 2 : 1));
	assert_int_equal(r->units.repeating_units, t->repeating_units);
	assert_int_equal(r->units.gathers_per_unit, t->gathers_per_block);
	assert_int_equal(r->units.forward_units, t->units);
	assert_int_equal(r->units.total_params, t->total_params);
	assert_int_equal(r->units.largest_unit_params, t->largest_unit);
	assert_int_equal(r->units.shard_ranks, c->ranks);
	assert_string_equal(policy(r), want);
	assert_int_equal(r->ngathers, t->allgathers);
	assert_int_equal(r->ledger.params, t->total_params);
	/* compute wait, the figure the simulated gather waits are, of the
	 * representative step: within 5% of the step time of that step's waits.
	 * Host timing counts only leaf ranges as compute (see
	 * overlap_host_compute): when every op has its range (op_ranges, as
	 * fsdp_ref marks them) what is left outside them is the waiting and the
	 * ranges' own push/pop, so it must be within 1%; when only units are
	 * marked, a parent's own compute counts as waiting while a gather is in
	 * flight: it may over-count by at most that unmarked compute. */
	if (c->nvtx_compute || c->cupti) {
		const struct analysis_exposure *e = &r->exposure;
		assert_true(e->step >= (uint32_t)warmup && e->step < (uint32_t)c->steps);
		uint64_t truth = t->gather_wait_ns[e->step];
		uint64_t step = t->step_ns[e->step];
		uint64_t bias = c->cupti ? 0 : t->unmarked_ns[e->step];
		uint64_t got = e->compute_wait_ns_per_step;
		int ok = got * 20 + step >= truth * 20 && got * 20 <= (truth + bias) * 20 + step;
		if (!c->cupti && c->op_ranges) {
			assert_int_equal(bias, 0);
			ok = got * 100 + step >= truth * 100 && got * 100 <= truth * 100 + step;
		}
		if (!ok)
			fprintf(stderr,
				"%s L%d reshard %d prefetch %d ranks %d: compute wait %llu, waited %llu (+%llu unmarked), "
				"step %llu\n",
				c->wrap, c->layers, c->reshard, c->prefetch, c->ranks, (unsigned long long)got,
				(unsigned long long)truth, (unsigned long long)bias, (unsigned long long)step);
		assert_true(ok);
		assert_int_equal(e->source, c->cupti ? ANALYSIS_EXPOSURE_CUPTI : ANALYSIS_EXPOSURE_HOST);
		/* the figures add up exactly: phases, causes and the gathers table
		 * sum to the step's totals, each gather's parts to its time */
		assert_int_equal(e->forward_exposed_ns_per_step + e->backward_exposed_ns_per_step,
				 e->exposed_allgather_ns_per_step);
		assert_int_equal(e->forward_compute_wait_ns_per_step + e->backward_compute_wait_ns_per_step, got);
		uint64_t cause_ns = 0, cause_wait = 0, cause_n = 0;
		for (int k = 0; k < ANALYSIS_CAUSE_MAX; k++) {
			cause_ns += e->cause_ns[k];
			cause_wait += e->cause_compute_wait_ns[k];
			cause_n += e->cause_gathers[k];
		}
		assert_int_equal(cause_ns, e->exposed_allgather_ns_per_step);
		assert_int_equal(cause_wait, got);
		assert_int_equal(cause_n, r->ngathers);
		assert_int_equal(r->ngathers - e->cause_gathers[ANALYSIS_CAUSE_HIDDEN], e->exposed_gathers);
		uint64_t dur = 0, exp = 0, wait = 0;
		for (uint32_t i = 0; i < r->ngathers; i++) {
			const struct analysis_gather *g = &r->gathers[i];
			assert_true(g->exposed_ns <= g->duration_ns);
			assert_int_equal(g->hide_ns + g->exposed_ns, g->duration_ns);
			assert_int_equal(g->cause == ANALYSIS_CAUSE_HIDDEN, g->exposed_ns == 0);
			dur += g->duration_ns;
			exp += g->exposed_ns;
			wait += g->compute_wait_ns;
		}
		assert_int_equal(dur, e->allgather_ns_per_step);
		assert_int_equal(exp, e->exposed_allgather_ns_per_step);
		assert_int_equal(wait, got);
		assert_true(e->exposed_allgather_ns_per_step <= e->allgather_ns_per_step);
		assert_true(e->exposed_allgather_ns_per_step <= r->breakdown.exposed_comm_ns);
		assert_int_equal(r->breakdown.compute_ns + r->breakdown.exposed_comm_ns + r->breakdown.idle_ns,
				 r->breakdown.step_ns);
	}
}

static void test_block_nvtx(void **state)
{
	(void)state;
	struct synth_config c;
	synth_defaults(&c);
	c.skew_ns = 3000;
	struct synth_truth t;
	struct analysis_result *r = run(&c, NULL, &t);
	check(&c, r, &t, 0);
	assert_int_equal(r->units.root_gathers, 1);
	assert_string_equal(r->units.repeating_unit_name, "layers.*");
	assert_string_equal(r->gathers[0].name, "root");
	assert_string_equal(r->gathers[1].name, "layers.0");
	/* backward gathers mirror: the first re-gathers the last block */
	assert_int_equal(r->gathers[5].phase, ANALYSIS_PHASE_BACKWARD);
	assert_string_equal(r->gathers[5].name, "layers.3");
	assert_int_equal(r->gathers[5].unit, 4);
	assert_int_equal(r->gathers[1].repeat, 0);
	assert_int_equal(r->gathers[4].repeat, 3);
	assert_int_equal(r->gathers[0].repeat, -1);
	assert_string_equal(r->step_range_name, "step 7");
	/* rank 3 runs 9 us behind rank 0: it is the one the others wait for */
	assert_int_equal(r->spread.slowest_rank, 3);
	assert_int_equal(r->gathers[2].slowest_rank, 3);
	assert_int_equal(r->gathers[2].skew_ns, 9000);
	assert_int_equal(r->nper_rank, 4);
	assert_int_equal(r->per_rank[3].rank, 3);
	assert_true(r->per_rank[3].last_arrivals > 0);
	assert_int_equal(r->per_rank[0].last_arrivals, 0);
	/* the first forward gather waits (nothing before it) */
	assert_int_equal(r->gathers[0].cause, ANALYSIS_CAUSE_FIRST_OF_PHASE);
	/* ledger and breakdown are filled */
	assert_true(r->ledger.persistent_bytes_per_rank > 0);
	assert_int_equal(r->ledger.persistent_bytes_per_rank, t.total_params * 16 / 4);
	assert_true(r->breakdown.compute_ns > 0 && r->breakdown.step_ns >= r->breakdown.compute_ns);
	assert_true(r->sizes.allgather_dtypes == 1u << 9); /* bf16 */
	assert_true(r->sizes.reduce_scatter_dtypes == 1u << 7);
	analysis_result_free(r);
}

static void test_nvtx_and_period_agree(void **state)
{
	(void)state;
	const char *wraps[] = {"block", "linear"};
	for (int w = 0; w < 2; w++) {
		struct synth_config c;
		synth_defaults(&c);
		c.wrap = wraps[w];
		c.layers = 3;
		struct synth_truth t1, t2;
		struct analysis_result *a = run(&c, NULL, &t1);
		c.nvtx_steps = 0;
		struct analysis_result *b = run(&c, NULL, &t2);
		check(&c, b, &t2, 0);
		assert_int_equal(a->step_detection, ANALYSIS_STEPS_NVTX);
		assert_int_equal(b->step_detection, ANALYSIS_STEPS_PERIOD);
		assert_memory_equal(&a->per_step, &b->per_step, sizeof a->per_step);
		assert_int_equal(a->units.repeating_units, b->units.repeating_units);
		assert_int_equal(a->units.gathers_per_unit, b->units.gathers_per_unit);
		assert_int_equal(a->reshard.policy, b->reshard.policy);
		assert_int_equal(a->step_period, b->step_period);
		/* the period steps start at the first gather: the same length */
		uint64_t d = a->step_ns > b->step_ns ? a->step_ns - b->step_ns : b->step_ns - a->step_ns;
		assert_true(d * 100 < a->step_ns);
		analysis_result_free(a);
		analysis_result_free(b);
	}
}

static void test_per_linear(void **state)
{
	(void)state;
	int layers[] = {2, 5};
	for (int i = 0; i < 2; i++) {
		struct synth_config c;
		synth_defaults(&c);
		c.wrap = "linear";
		c.layers = layers[i];
		c.reshard = 0;
		c.prefetch = 0;
		struct synth_truth t;
		struct analysis_result *r = run(&c, NULL, &t);
		check(&c, r, &t, 0);
		assert_int_equal(r->units.gathers_per_unit, 8);
		assert_string_equal(r->units.repeating_unit_name, "layers.*");
		assert_string_equal(r->gathers[2].name, "layers.0.attn.q");
		/* without prefetch every gather after the first waits for no reason */
		assert_int_equal(r->gathers[2].cause, ANALYSIS_CAUSE_NO_PREFETCH);
		assert_int_equal(r->exposure.exposed_gathers, t.forward_allgathers);
		analysis_result_free(r);
	}
}

/* A trace that marks units but not their ops (op_ranges 0): the ops
 * between per-Linear units and the root's own compute run in a parent's own
 * time, which host timing cannot tell from waiting; the exposure stays
 * within the unmarked compute of the truth (check), and marking the ops
 * brings it within 1%. */
static void test_unit_ranges_only(void **state)
{
	(void)state;
	const char *wraps[] = {"block", "linear"};
	for (int w = 0; w < 2; w++)
		for (int prefetch = 0; prefetch <= 1; prefetch++) {
			struct synth_config c;
			synth_defaults(&c);
			c.wrap = wraps[w];
			c.layers = 3;
			c.prefetch = prefetch;
			c.op_ranges = 0;
			struct synth_truth t;
			struct analysis_result *r = run(&c, NULL, &t);
			check(&c, r, &t, 0);
			assert_true(t.unmarked_ns[c.steps - 1] > 0);
			int64_t coarse = (int64_t)r->exposure.compute_wait_ns_per_step -
					 (int64_t)t.gather_wait_ns[r->exposure.step];
			analysis_result_free(r);
			c.op_ranges = 1;
			r = run(&c, NULL, &t);
			check(&c, r, &t, 0);
			int64_t fine = (int64_t)r->exposure.compute_wait_ns_per_step -
				       (int64_t)t.gather_wait_ns[r->exposure.step];
			fprintf(stderr, "# %s prefetch %d: over-count %lld ns with unit ranges only, %lld with op ranges\n",
				c.wrap, prefetch, (long long)coarse, (long long)fine);
			assert_true(coarse >= 0 && fine >= 0 && fine <= coarse);
			analysis_result_free(r);
		}
}

static void test_layers_flag(void **state)
{
	(void)state;
	struct synth_config c;
	synth_defaults(&c);
	c.wrap = "group:2";
	c.layers = 6;
	struct analysis_options o;
	analysis_options_init(&o);
	o.layers = 6;
	struct synth_truth t;
	struct analysis_result *r = run(&c, &o, &t);
	/* three gathers for six layers: the user's count stands, the
	 * inference says 3 x 1 and the mismatch is noted */
	assert_int_equal(r->units.repeating_units, 6);
	assert_int_equal(r->units.layers_given, 1);
	assert_int_equal(r->units.layers_match, 0);
	assert_int_equal(r->units.inferred_repeating_units, 3);
	assert_int_equal(r->units.inferred_gathers_per_unit, 1);
	assert_true(r->nnotes >= 1);
	analysis_result_free(r);
	o.layers = 3;
	r = run(&c, &o, &t);
	assert_int_equal(r->units.repeating_units, 3);
	assert_int_equal(r->units.layers_match, 1);
	analysis_result_free(r);
}

static void test_group_reshard_and_model(void **state)
{
	(void)state;
	struct synth_config c;
	synth_defaults(&c);
	c.reshard = 2;
	struct synth_truth t;
	struct analysis_result *r = run(&c, NULL, &t);
	check(&c, r, &t, 0);
	assert_int_equal(r->reshard.group_size, 2);
	assert_int_equal(r->gathers[5].nranks, 2);
	analysis_result_free(r);

	synth_defaults(&c);
	c.wrap = "model";
	r = run(&c, NULL, &t);
	check(&c, r, &t, 0);
	assert_int_equal(r->units.repeating_units, 1);
	assert_int_equal(r->units.largest_unit_params, r->units.total_params);
	analysis_result_free(r);
}

static void test_warmup(void **state)
{
	(void)state;
	for (int nvtx = 0; nvtx <= 1; nvtx++) {
		struct synth_config c;
		synth_defaults(&c);
		c.warmup_extra = 1;
		c.nvtx_steps = nvtx;
		c.steps = 10;
		struct synth_truth t;
		struct analysis_result *r = run(&c, NULL, &t);
		check(&c, r, &t, 1);
		analysis_result_free(r);
	}
}

static void test_grouped_calls(void **state)
{
	(void)state;
	struct synth_config c;
	synth_defaults(&c);
	c.grouped = 1;
	c.wrap = "linear";
	c.layers = 2;
	struct synth_truth t;
	struct analysis_result *r = run(&c, NULL, &t);
	check(&c, r, &t, 0);
	assert_int_equal(r->gathers[1].calls, 2);
	analysis_result_free(r);
}

static void test_cupti(void **state)
{
	(void)state;
	for (int prefetch = 0; prefetch <= 1; prefetch++) {
		struct synth_config c;
		synth_defaults(&c);
		c.cupti = 1;
		c.prefetch = prefetch;
		c.nvtx_compute = 0;
		struct synth_truth t;
		struct analysis_result *r = run(&c, NULL, &t);
		check(&c, r, &t, 0);
		assert_true(r->trace.has_cupti);
		analysis_result_free(r);
	}
}

/* The labelled matrix, sampled: every value of every axis appears. */
static void test_matrix(void **state)
{
	(void)state;
	const char *wraps[] = {"block", "linear", "model", "group:2"};
	int reshards[] = {1, 0, 2};
	int layers[] = {2, 5, 12};
	int ranks[] = {1, 2, 4};
	int n = 0;
	for (int w = 0; w < 4; w++)
		for (int rs = 0; rs < 3; rs++)
			for (int p = 0; p <= 1; p++) {
				struct synth_config c;
				synth_defaults(&c);
				c.wrap = wraps[w];
				c.reshard = reshards[rs];
				c.prefetch = p;
				c.layers = layers[(w + rs + p) % 3];
				c.ranks = ranks[(w + 2 * rs + p) % 3];
				c.steps = 6;
				c.nvtx_steps = (w + rs + p) % 2;
				if (c.reshard > 1 && c.reshard >= c.ranks)
					c.reshard = 1;
				struct synth_truth t;
				struct analysis_result *r = run(&c, NULL, &t);
				fprintf(stderr, "# %s L%d reshard %d prefetch %d ranks %d nvtx %d: units %u x %u + %u\n",
					c.wrap, c.layers, c.reshard, c.prefetch, c.ranks, c.nvtx_steps,
					r->units.repeating_units, r->units.gathers_per_unit, r->units.root_gathers);
				check(&c, r, &t, 0);
				analysis_result_free(r);
				n++;
			}
	assert_int_equal(n, 24);
}

static void test_truncated_and_bad_input(void **state)
{
	(void)state;
	struct synth_config c;
	synth_defaults(&c);
	char path[128];
	snprintf(path, sizeof path, "%s/cut.fss", dir);
	struct synth_truth t;
	c.steps = 12;
	c.ranks = 1;
	c.chunk_payload = 4096;
	assert_int_equal(synth_write(path, &c, &t), 0);
	FILE *f = fopen(path, "r+");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fclose(f);
	assert_int_equal(truncate(path, size * 2 / 3), 0);
	struct analysis_result *r;
	char err[256];
	assert_int_equal(analyze_trace(path, NULL, &r, err, sizeof err), 0);
	assert_int_equal(r->trace.truncated, 1);
	assert_true(r->steps_analyzed >= 2);
	assert_int_equal(r->per_step.allgathers, t.allgathers);
	analysis_result_free(r);

	snprintf(path, sizeof path, "%s/not-a-trace", dir);
	f = fopen(path, "w");
	fputs("hello\n", f);
	fclose(f);
	assert_int_equal(analyze_trace(path, NULL, &r, err, sizeof err), FSS_E_NOT_TRACE);
	assert_null(r);
	assert_true(analyze_trace("/nonexistent/x.fss", NULL, &r, err, sizeof err) < 0);
}

static int feed(void *ctx, const struct fss_record_head *rec)
{
	return analyzer_feed(ctx, rec);
}

/* Memory follows the steps in flight, not the length of the run: the
 * items the analysis holds stay the same for 600 and for 2000 steps (both
 * longer than the window the period search looks at first). */
static void test_bounded_memory(void **state)
{
	(void)state;
	size_t pending[2];
	int steps[2] = {600, 2000};
	for (int nvtx = 0; nvtx <= 1; nvtx++) {
		for (int k = 0; k < 2; k++) {
			struct synth_config c;
			synth_defaults(&c);
			c.ranks = 2;
			c.layers = 2;
			c.steps = steps[k];
			c.nvtx_steps = nvtx;
			c.cupti = nvtx; /* GPU intervals arrive late: they must not pile up */
			char path[128];
			snprintf(path, sizeof path, "%s/long%d.fss", dir, k);
			struct synth_truth *t = malloc(sizeof *t);
			assert_int_equal(synth_write(path, &c, t), 0);
			analyzer_t *a;
			assert_int_equal(analyzer_new(&a, NULL), 0);
			struct trace_parser_ops ops = {.on_record = feed};
			assert_int_equal(trace_read_file(path, &ops, a, NULL, 0), 0);
			pending[k] = analyzer_pending_max(a);
			struct analysis_result *r;
			assert_int_equal(analyzer_finish(a, &r), 0);
			assert_int_equal(r->steps_analyzed, c.steps);
			assert_int_equal(r->per_step.allgathers, t->allgathers);
			analysis_result_free(r);
			analyzer_free(a);
			free(t);
			unlink(path);
		}
		fprintf(stderr, "# nvtx %d: pending %zu for %d steps, %zu for %d\n", nvtx, pending[0], steps[0], pending[1], steps[1]);
		/* the period search holds a window of events at the start; after
		 * that, a few steps */
		assert_true(pending[1] <= pending[0] + pending[0] / 4);
	}
}

/* Records with arbitrary field values (unknown ranks, backwards times,
 * unknown communicators, strings that never come) are analysed without
 * failing. */
static void test_random_records(void **state)
{
	(void)state;
	char path[128];
	snprintf(path, sizeof path, "%s/random.fss", dir);
	trace_writer_t *w;
	assert_int_equal(trace_writer_open(&w, path, NULL), 0);
	uint64_t x = 0x2545f4914f6cdd1dull;
	for (int i = 0; i < 20000; i++) {
		uint8_t rec[FSS_RECORD_MAX_BYTES];
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		uint16_t type = (uint16_t)(1 + x % (FSS_REC_TYPE_MAX - 1));
		size_t size = record_known_size(type);
		record_init(rec, type, (uint16_t)size, (uint32_t)(x >> 40) % 3);
		for (size_t b = sizeof(struct fss_record_head); b < size; b++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* small values most of the time, so that records relate */
			rec[b] = (uint8_t)(x % 4 == 0 ? x >> 32 : x % 5);
		}
		if (type == FSS_REC_STRING) {
			struct fss_rec_string *st = (void *)rec;
			st->id = 1 + (uint32_t)(x % 8);
			st->total_len = (uint16_t)(x % 20);
			st->offset = 0;
		}
		assert_int_equal(trace_writer_append(w, rec), 0);
	}
	assert_int_equal(trace_writer_close(w), 0);
	struct analysis_result *r;
	char err[256];
	assert_int_equal(analyze_trace(path, NULL, &r, err, sizeof err), 0);
	assert_true(r->trace.records >= 20000);
	analysis_result_free(r);
	unlink(path);
}

static void test_patterns(void **state)
{
	(void)state;
	const char *d = ANALYSIS_DEFAULT_COMPUTE_RANGES;
	assert_true(timeline_pattern_match(d, "fsdp_ref", "layers.3"));
	assert_true(timeline_pattern_match(d, "fsdp_ref", "forward"));
	assert_false(timeline_pattern_match(d, "fsdp_ref", "step 3"));
	assert_false(timeline_pattern_match(d, "", "aten::mm"));
	assert_true(timeline_pattern_match(d, "", "nn.Module: Linear"));
	const char *s = ANALYSIS_DEFAULT_STEP_RANGES;
	assert_true(timeline_pattern_match(s, "fsdp_ref", "step 12"));
	assert_true(timeline_pattern_match(s, "", "ProfilerStep#4"));
	/* a Kineto trace's GPU copy of the same annotation: not a second step */
	assert_false(timeline_pattern_match(s, "gpu_user_annotation", "ProfilerStep#4"));
	assert_false(timeline_pattern_match(s, "other", "step 1"));
	assert_true(timeline_pattern_match("train_step*", "any", "train_step_7"));
	assert_false(timeline_pattern_match(NULL, "a", "b"));
	assert_false(timeline_pattern_match("", "a", "b"));
}

/* Every parameter frozen: no ReduceScatter in the steps. The units are
 * still read from the forward gathers and given; the verdict is undecided
 * for the phases alone, and says so with what was seen. */
static void test_no_reduction_units(void **state)
{
	(void)state;
	struct synth_config c;
	synth_defaults(&c);
	c.no_reduce = 1;
	c.wrap = "linear";
	struct synth_truth t;
	struct analysis_options o;
	analysis_options_init(&o);
	o.fsdp_comm = "0000000000abcdef"; /* the world: a group that reduces nothing is no FSDP group by its traffic */
	struct analysis_result *r = run(&c, &o, &t);
	assert_int_equal(r->verdict, ANALYSIS_UNDECIDED);
	assert_int_equal(r->undecided_reason, ANALYSIS_UNDECIDED_NO_REDUCTION);
	assert_int_equal(r->units_decided, 1);
	assert_int_equal(r->units.repeating_units, 4);
	assert_int_equal(r->units.gathers_per_unit, t.gathers_per_block);
	assert_int_equal(r->units.forward_units, t.units);
	assert_int_equal(r->reshard.policy, ANALYSIS_RESHARD_UNKNOWN);
	assert_non_null(strstr(r->undecided_why, "no ReduceScatter"));
	analysis_result_free(r);
}

static void test_names(void **state)
{
	(void)state;
	char buf[32];
	struct analysis_reshard_info ri = {.policy = ANALYSIS_RESHARD_GROUP, .group_size = 8};
	assert_string_equal(analysis_reshard_format(&ri, buf, sizeof buf), "group:8");
	assert_string_equal(analysis_cause_name(ANALYSIS_CAUSE_BANDWIDTH_BOUND), "bandwidth-bound");
	assert_string_equal(analysis_cause_name(99), "unknown");
	assert_string_equal(analysis_step_detection_name(ANALYSIS_STEPS_PERIOD), "period");
	assert_string_equal(analysis_exposure_source_name(ANALYSIS_EXPOSURE_CUPTI), "cupti");
	assert_string_equal(analysis_phase_name(ANALYSIS_PHASE_BACKWARD), "backward");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_block_nvtx),
		cmocka_unit_test(test_nvtx_and_period_agree),
		cmocka_unit_test(test_per_linear),
		cmocka_unit_test(test_unit_ranges_only),
		cmocka_unit_test(test_layers_flag),
		cmocka_unit_test(test_group_reshard_and_model),
		cmocka_unit_test(test_warmup),
		cmocka_unit_test(test_grouped_calls),
		cmocka_unit_test(test_cupti),
		cmocka_unit_test(test_matrix),
		cmocka_unit_test(test_truncated_and_bad_input),
		cmocka_unit_test(test_bounded_memory),
		cmocka_unit_test(test_random_records),
		cmocka_unit_test(test_patterns),
		cmocka_unit_test(test_no_reduction_units),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
