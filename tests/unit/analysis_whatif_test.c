/*
 * analysis_whatif_test.c - the what-if model (collector/whatif.h): fits of
 * exact points, replays worked out by hand on hand-built results, the
 * changes offered and left out, and a generated trace end to end.
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
#include "collector/analyze_traces.h"
#include "collector/ledger.h"
#include "collector/whatif.h"
#include "tests/support/scratch_dir.h"

static char dir[] = "/tmp/fss_whatif_test.XXXXXX";

/* A result of n gathers (phase, unit, repeat, bytes, duration, compute
 * after) on one 2-rank communicator; the caller fills the step figures. */
struct g {
	uint8_t phase;
	int32_t unit, repeat;
	uint64_t bytes, dur, compute;
	uint64_t hide;
};

static struct analysis_result *result(const struct g *v, uint32_t n)
{
	struct analysis_result *r = calloc(1, sizeof *r);
	assert_non_null(r);
	r->gathers = calloc(n ? n : 1, sizeof *r->gathers);
	assert_non_null(r->gathers);
	r->ngathers = n;
	r->verdict = ANALYSIS_DIAGNOSED;
	r->exposure.source = ANALYSIS_EXPOSURE_HOST;
	r->exposure.step = 3;
	uint64_t compute = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct analysis_gather *x = &r->gathers[i];
		x->index = i;
		x->phase = v[i].phase;
		x->unit = v[i].unit;
		x->repeat = v[i].repeat;
		x->nranks = 2;
		x->bytes = v[i].bytes;
		x->duration_ns = v[i].dur;
		x->hide_ns = v[i].hide;
		x->compute_after_ns = v[i].compute;
		compute += v[i].compute;
	}
	r->breakdown.compute_ns = compute;
	r->units.gathers_per_unit = 1;
	return r;
}

static void result_free(struct analysis_result *r)
{
	free(r->gathers);
	free(r);
}

static const struct whatif_prediction *find(const whatif_model_t *m, enum whatif_change c)
{
	for (uint32_t i = 0; i < whatif_count(m); i++)
		if (whatif_get(m, i)->change == c)
			return whatif_get(m, i);
	return NULL;
}

static int left_out(const whatif_model_t *m, enum whatif_change c)
{
	for (uint32_t i = 0; i < whatif_left_out_count(m); i++)
		if (whatif_left_out_get(m, i)->change == c)
			return 1;
	return 0;
}

#define F ANALYSIS_PHASE_FORWARD
#define B ANALYSIS_PHASE_BACKWARD

/* Durations 100 + bytes / 2 exactly: latency 100 ns, 2 bytes per ns, no
 * residual; 100 bytes take 50 ns (< latency), 1000 take 500. */
static void test_fit_exact(void **state)
{
	(void)state;
	struct g v[] = {{F, 0, -1, 1000, 600, 10, 0}, {F, 1, -1, 2000, 1100, 10, 0}, {F, 2, -1, 4000, 2100, 10, 0},
			{F, 3, -1, 100, 150, 10, 0}};
	struct analysis_result *r = result(v, 4);
	r->step_ns = 10000;
	whatif_model_t *m;
	assert_int_equal(whatif_new(r, &m), 0);
	assert_int_equal(whatif_fit_count(m), 1);
	const struct whatif_fit *f = whatif_fit_get(m, 0);
	assert_int_equal(f->nranks, 2);
	assert_int_equal(f->points, 4);
	assert_int_equal(f->sizes, 4);
	assert_true(f->fitted);
	assert_true(f->latency_ns > 99.999 && f->latency_ns < 100.001);
	assert_true(f->bytes_per_ns > 1.99999 && f->bytes_per_ns < 2.00001);
	assert_true(f->residual_ns < 0.001);
	assert_int_equal(whatif_gather_bound(r, 0), WHATIF_BOUND_BANDWIDTH);
	assert_int_equal(whatif_gather_bound(r, 3), WHATIF_BOUND_LATENCY);
	assert_int_equal(whatif_model_bound(m, r, 3), WHATIF_BOUND_LATENCY);
	assert_int_equal(whatif_gather_bound(r, 4), WHATIF_BOUND_UNKNOWN);
	whatif_free(m);

	/* one size: no fit, and it says why */
	for (uint32_t i = 0; i < 4; i++)
		r->gathers[i].bytes = 1000;
	assert_int_equal(whatif_new(r, &m), 0);
	assert_false(whatif_fit_get(m, 0)->fitted);
	assert_non_null(strstr(whatif_fit_get(m, 0)->why, "one size"));
	assert_int_equal(whatif_gather_bound(r, 0), WHATIF_BOUND_UNKNOWN);
	whatif_free(m);
	result_free(r);
}

/* Two sizes whose mean durations differ by less than the gathers' own
 * spread (late ranks): the slope is within its noise, so the fit is the
 * latency alone, at the mean, and every gather is latency-bound. */
static void test_fit_slope_in_noise(void **state)
{
	(void)state;
	struct g v[] = {{F, 0, -1, 1000, 100, 10, 0}, {F, 1, -1, 1000, 300, 10, 0}, {F, 2, -1, 1000, 100, 10, 0},
			{F, 3, -1, 1000, 300, 10, 0}, {F, 4, -1, 2000, 150, 10, 0}, {F, 5, -1, 2000, 350, 10, 0},
			{F, 6, -1, 2000, 150, 10, 0}, {F, 7, -1, 2000, 350, 10, 0}};
	struct analysis_result *r = result(v, 8);
	r->step_ns = 10000;
	whatif_model_t *m;
	assert_int_equal(whatif_new(r, &m), 0);
	const struct whatif_fit *f = whatif_fit_get(m, 0);
	assert_true(f->fitted);
	assert_true(f->bytes_per_ns == 0);
	assert_true(f->latency_ns > 224.999 && f->latency_ns < 225.001);
	assert_non_null(strstr(f->why, "beyond their noise"));
	assert_int_equal(whatif_model_bound(m, r, 4), WHATIF_BOUND_LATENCY);
	whatif_free(m);

	/* the same spread, the larger size 10x slower: a slope well out of the noise */
	for (uint32_t i = 4; i < 8; i++)
		r->gathers[i].duration_ns += 2000;
	assert_int_equal(whatif_new(r, &m), 0);
	assert_true(whatif_fit_get(m, 0)->bytes_per_ns > 0);
	assert_int_equal(whatif_model_bound(m, r, 4), WHATIF_BOUND_BANDWIDTH);
	whatif_free(m);
	result_free(r);
}

/* Prefetch 0, three forward gathers of 100 ns each followed by 200 ns of
 * compute, issued on demand: step 900 = 3 x (100 + 200), wait 300. At
 * depth 1, gather k runs under unit k-1: one wait of 100, step 700. */
static void test_prefetch_from_zero(void **state)
{
	(void)state;
	struct g v[] = {{F, 0, -1, 100, 100, 200, 0}, {F, 1, -1, 200, 100, 200, 0}, {F, 2, -1, 300, 100, 200, 0}};
	struct analysis_result *r = result(v, 3);
	r->step_ns = 900;
	r->exposure.exposed_allgather_ns_per_step = 300;
	r->exposure.compute_wait_ns_per_step = 300;
	whatif_model_t *m;
	assert_int_equal(whatif_new(r, &m), 0);
	assert_string_equal(whatif_note(m), "");
	assert_int_equal(whatif_prefetch_seen(m), 0);
	const struct whatif_prediction *p1 = find(m, WHATIF_PREFETCH_1), *p2 = find(m, WHATIF_PREFETCH_2);
	assert_non_null(p1);
	assert_non_null(p2);
	assert_int_equal(p1->step_ns, 700);
	assert_int_equal(p1->exposed_allgather_ns, 100);
	assert_true(p1->exposed_allgather_ns < r->exposure.exposed_allgather_ns_per_step);
	assert_int_equal(p2->step_ns, 700);
	assert_false(p1->peak_known); /* no ledger */
	assert_non_null(strstr(p1->basis, "prefetch depth seen 0"));
	/* reshard not told: both left out, with a reason; no wrap change for a block wrap */
	assert_true(left_out(m, WHATIF_RESHARD_FALSE));
	assert_true(left_out(m, WHATIF_RESHARD_TRUE));
	assert_null(find(m, WHATIF_WRAP_BLOCK));
	assert_int_equal(whatif_count(m), 2);
	whatif_free(m);
	result_free(r);
}

/* The same job recorded with prefetch 1 (step 700, wait 100, the later
 * gathers under compute): prefetch=2 is offered, prefetch=1 is not. */
static void test_setting_of_job_not_offered(void **state)
{
	(void)state;
	struct g v[] = {{F, 0, -1, 100, 100, 200, 0}, {F, 1, -1, 200, 100, 200, 100}, {F, 2, -1, 300, 100, 200, 100}};
	struct analysis_result *r = result(v, 3);
	r->step_ns = 700;
	r->exposure.exposed_allgather_ns_per_step = 100;
	r->exposure.compute_wait_ns_per_step = 100;
	whatif_model_t *m;
	assert_int_equal(whatif_new(r, &m), 0);
	assert_int_equal(whatif_prefetch_seen(m), 1);
	assert_null(find(m, WHATIF_PREFETCH_1));
	assert_non_null(find(m, WHATIF_PREFETCH_2));
	whatif_free(m);
	result_free(r);
}

/* Forward root, units 1 and 2, then backward re-gathers of 2 and 1, each
 * 100 ns, 200 ns of compute after each forward one and 400 after each
 * backward one: step 1900, wait 500. reshard_after_forward=false drops the
 * two re-gathers (their compute stays): step 1700, wait 300, and the peak
 * rises by what the ledger holds from forward to backward. */
static void reshard_false(int with_reductions)
{
	struct g v[] = {{F, 0, -1, 100, 100, 200, 0}, {F, 1, -1, 200, 100, 200, 0}, {F, 2, -1, 300, 100, 200, 0},
			{B, 2, -1, 300, 100, 400, 0}, {B, 1, -1, 200, 100, 400, 0}};
	struct analysis_result *r = result(v, 5);
	r->step_ns = 1900;
	r->exposure.exposed_allgather_ns_per_step = 500;
	r->exposure.compute_wait_ns_per_step = 500;
	r->reshard.policy = ANALYSIS_RESHARD_TRUE;
	if (with_reductions) {
		/* two reduce-scatters of 50 ns, each issued before the next backward gather on its
		 * stream: each re-gather starts 50 ns later, step 2000, compute wait 600; the gathers'
		 * own exposed time stays 500 (the queue is not theirs) */
		r->per_step.reduce_scatters = 2;
		r->exposure.reduce_scatter_ns_per_step = 100;
		r->step_ns = 2000;
		r->exposure.compute_wait_ns_per_step = 600;
	}
	r->reshard.retain_extra_bytes = 1000;
	struct ledger_input in;
	ledger_input_defaults(&in);
	in.params = 3000;
	in.ranks = 2;
	in.units = 3;
	in.largest_unit_params = 1500;
	ledger_compute(&in, &r->ledger);
	in.prefetch = 0; /* the depth seen */
	struct analysis_ledger base;
	ledger_compute(&in, &base);

	whatif_model_t *m;
	assert_int_equal(whatif_new(r, &m), 0);
	assert_int_equal(whatif_prefetch_seen(m), 0);
	const struct whatif_prediction *p = find(m, WHATIF_RESHARD_FALSE);
	assert_non_null(p);
	assert_int_equal(p->step_ns, 1700); /* the reductions delay no gather any more */
	assert_int_equal(p->exposed_allgather_ns, 300);
	assert_true(p->peak_known);
	assert_int_equal(p->peak_bytes, base.peak_state_bytes_per_rank + 1000);
	assert_non_null(strstr(p->basis, "2 backward re-gathers removed"));
	/* the job reshards: reshard_after_forward=true is neither offered nor left out */
	assert_null(find(m, WHATIF_RESHARD_TRUE));
	assert_false(left_out(m, WHATIF_RESHARD_TRUE));
	/* each change at most once, in enum order */
	for (uint32_t i = 1; i < whatif_count(m); i++)
		assert_true(whatif_get(m, i - 1)->change < whatif_get(m, i)->change);
	whatif_free(m);
	result_free(r);
}

static void test_reshard_false(void **state)
{
	(void)state;
	reshard_false(0);
}

static void test_reshard_false_reductions(void **state)
{
	(void)state;
	reshard_false(1);
}

/* Per-Linear-like wrap: a root of 3000 bytes and two blocks of two gathers
 * of 1000 bytes; durations 100 + bytes / 10 (root 400, others 200),
 * 300 ns of compute after each. Recorded: step 2700, wait 1200. Merged per
 * block: 2000 bytes in 300 ns, 600 ns of compute each: step 2500, wait 1000. */
static void test_wrap_block(void **state)
{
	(void)state;
	struct g v[] = {{F, 0, -1, 3000, 400, 300, 0}, {F, 1, 0, 1000, 200, 300, 0}, {F, 2, 0, 1000, 200, 300, 0},
			{F, 3, 1, 1000, 200, 300, 0}, {F, 4, 1, 1000, 200, 300, 0}};
	struct analysis_result *r = result(v, 5);
	r->step_ns = 2700;
	r->exposure.exposed_allgather_ns_per_step = 1200;
	r->exposure.compute_wait_ns_per_step = 1200;
	r->units.gathers_per_unit = 2;
	r->units.repeating_units = 2;
	r->units.forward_units = 5;
	whatif_model_t *m;
	assert_int_equal(whatif_new(r, &m), 0);
	const struct whatif_prediction *p = find(m, WHATIF_WRAP_BLOCK);
	assert_non_null(p);
	assert_int_equal(p->step_ns, 2500);
	assert_int_equal(p->exposed_allgather_ns, 1000);
	assert_non_null(strstr(p->basis, "2 gathers of 2000 bytes"));
	whatif_free(m);

	/* without a repeat found: left out, with the reason */
	r->units.repeating_units = 0;
	assert_int_equal(whatif_new(r, &m), 0);
	assert_null(find(m, WHATIF_WRAP_BLOCK));
	assert_true(left_out(m, WHATIF_WRAP_BLOCK));
	whatif_free(m);
	result_free(r);
}

/* No gathers, or bucketed fetching: nothing offered, and the note says why. */
static void test_nothing_to_replay(void **state)
{
	(void)state;
	struct analysis_result *r = result(NULL, 0);
	r->step_ns = 1000;
	whatif_model_t *m;
	assert_int_equal(whatif_new(r, &m), 0);
	assert_int_equal(whatif_count(m), 0);
	assert_non_null(strstr(whatif_note(m), "no FSDP AllGather"));
	assert_int_equal(whatif_prefetch_seen(m), -1);
	whatif_free(m);
	r->verdict = ANALYSIS_BUCKETED;
	assert_int_equal(whatif_new(r, &m), 0);
	assert_int_equal(whatif_count(m), 0);
	assert_non_null(strstr(whatif_note(m), "bucketed"));
	whatif_free(m);
	result_free(r);
}

/* A generated fsdp_ref-like trace with prefetch 0 and a slow link: the fit
 * recovers the link (the synthetic calls last latency + wire bytes /
 * bandwidth, wire = send bytes x ranks), the depth seen is 0, and
 * prefetch=1 predicts less exposure. */
static void test_generated_trace(void **state)
{
	(void)state;
	struct synth_config c;
	struct synth_truth t;
	synth_defaults(&c);
	c.ranks = 2;
	c.prefetch = 0;
	c.latency_ns = 50000;
	c.bytes_per_ns = 4.0;
	char path[160];
	snprintf(path, sizeof path, "%s/p0.fss", dir);
	assert_int_equal(synth_write(path, &c, &t), 0);
	struct analysis_result *r = NULL;
	char err[256];
	assert_int_equal(analyze_trace(path, NULL, &r, err, sizeof err), 0);
	unlink(path);
	whatif_model_t *m;
	assert_int_equal(whatif_new(r, &m), 0);
	assert_string_equal(whatif_note(m), "");
	assert_int_equal(whatif_fit_count(m), 1);
	const struct whatif_fit *f = whatif_fit_get(m, 0);
	assert_true(f->fitted);
	/* the call's interval starts after the comm thread's wake-up: latency 50 us exactly */
	assert_true(f->latency_ns > 49999 && f->latency_ns < 50001);
	assert_true(f->bytes_per_ns > 1.9999 && f->bytes_per_ns < 2.0001);
	assert_true(f->residual_ns < 1.0);
	assert_int_equal(whatif_prefetch_seen(m), 0);
	const struct whatif_prediction *p = find(m, WHATIF_PREFETCH_1);
	assert_non_null(p);
	assert_true(p->exposed_allgather_ns < r->exposure.exposed_allgather_ns_per_step);
	assert_true(p->step_ns < r->step_ns);
	assert_true(p->peak_known);
	assert_non_null(find(m, WHATIF_RESHARD_FALSE));
	whatif_free(m);
	analysis_result_free(r);
}

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fit_exact),
	    cmocka_unit_test(test_fit_slope_in_noise),
	    cmocka_unit_test(test_prefetch_from_zero),
	    cmocka_unit_test(test_setting_of_job_not_offered),
	    cmocka_unit_test(test_reshard_false),
	    cmocka_unit_test(test_reshard_false_reductions),
	    cmocka_unit_test(test_wrap_block),
	    cmocka_unit_test(test_nothing_to_replay),
	    cmocka_unit_test(test_generated_trace),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
