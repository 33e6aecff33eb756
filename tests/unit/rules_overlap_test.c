/* rules_overlap_test: exposed-gather and reshard-policy on hand-built
 * analyses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rules/rules.h"
#include "tests/unit/rules_fixture.h"

/* expose - make the fixture's backward gathers exposed: `ns` per step with
 * `cause`, plus the first forward gather exposed for 0.5 ms; compute waits
 * on each as long as it is exposed, and 0.2 ms more on the first (it queued
 * behind the step's last collective). */
static void expose(struct analysis_result *a, uint64_t ns, int cause)
{
	struct analysis_exposure *e = &a->exposure;

	memset(e->cause_gathers, 0, sizeof(e->cause_gathers));
	memset(e->cause_ns, 0, sizeof(e->cause_ns));
	memset(e->cause_compute_wait_ns, 0, sizeof(e->cause_compute_wait_ns));
	e->cause_gathers[ANALYSIS_CAUSE_FIRST_OF_PHASE] = 1;
	e->cause_ns[ANALYSIS_CAUSE_FIRST_OF_PHASE] = 500000;
	e->cause_compute_wait_ns[ANALYSIS_CAUSE_FIRST_OF_PHASE] = 700000;
	e->cause_gathers[cause] = a->per_step.backward_allgathers;
	e->cause_ns[cause] = ns;
	e->cause_compute_wait_ns[cause] = ns;
	e->cause_gathers[ANALYSIS_CAUSE_HIDDEN] = a->ngathers - 1 - a->per_step.backward_allgathers;
	e->compute_wait_ns_per_step = ns + 700000;
	e->step = 3;
	e->exposed_allgather_ns_per_step = ns + 500000;
	e->forward_exposed_ns_per_step = 500000;
	e->backward_exposed_ns_per_step = ns;
	e->exposed_gathers = 1 + a->per_step.backward_allgathers;
	a->step_ns = 30000000; /* 1.5 ms exposed of 30 ms: 5 % of the step */
	a->breakdown.step_ns = a->step_ns;
	a->gathers[0].exposed_ns = 500000;
	a->gathers[0].compute_wait_ns = 700000;
	a->gathers[0].queued_ns = 200000;
	a->gathers[0].cause = ANALYSIS_CAUSE_FIRST_OF_PHASE;
	for (uint32_t i = 0; i < a->ngathers; i++)
		if (a->gathers[i].phase == ANALYSIS_PHASE_BACKWARD) {
			a->gathers[i].exposed_ns = ns / a->per_step.backward_allgathers;
			a->gathers[i].compute_wait_ns = a->gathers[i].exposed_ns;
			a->gathers[i].cause = (uint8_t)cause;
		}
	/* as the analysis makes them: exposed within each gather's time, the
	 * total the sum of the rows */
	e->allgather_ns_per_step = 0;
	for (uint32_t i = 0; i < a->ngathers; i++) {
		struct analysis_gather *g = &a->gathers[i];

		if (g->duration_ns < g->exposed_ns)
			g->duration_ns = g->exposed_ns;
		g->hide_ns = g->duration_ns - g->exposed_ns;
		e->allgather_ns_per_step += g->duration_ns;
	}
	e->exposed_fraction = (double)e->exposed_allgather_ns_per_step / (double)e->allgather_ns_per_step;
}

static void test_exposed_absent_when_hidden(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m); /* 1% exposed */
	findings_t *list = fixture_run(&rule_exposed_gather, a, NULL);

	(void)state;
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

static void test_exposed_no_prefetch_is_a_warning_with_causes(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list;
	const struct finding *f;

	(void)state;
	/* 17 gathers: the first 500 us, 8 of 125 us, 8 of 100 us = 2.3 ms per
	 * step; 1.5 ms exposed */
	expose(a, 1000000, ANALYSIS_CAUSE_NO_PREFETCH);
	list = fixture_run(&rule_exposed_gather, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_WARNING);
	assert_non_null(strstr(f->message, "65% of AllGather time is exposed (1.50 ms in a typical step, 5% of the step)"));
	assert_non_null(strstr(f->message, "mostly no-prefetch"));
	/* both figures, named apart, of the same step; the causes add up */
	assert_non_null(strstr(f->evidence, "step 3 (the representative step), from host timing: 30.0 ms"));
	assert_non_null(strstr(f->evidence, "exposed AllGather (its own time minus compute, as HTA): 1.50 ms of 2.30 ms (65%)"));
	assert_non_null(strstr(f->evidence, "compute wait on the gathers (queueing behind other collectives included): 1.70 ms"));
	assert_non_null(strstr(f->evidence, "causes (exposed, compute wait): no-prefetch 8 gather(s) 1.00 ms, 1.00 ms; "
					    "first-of-phase 1 gather(s) 500 us, 700 us"));
	assert_non_null(strstr(f->evidence, "gather #0 (forward, model): 500 us, exposed 500 us, hidden 0 ns"));
	assert_non_null(strstr(f->evidence, "compute waited 700 us on it (queued 200 us); cause first-of-phase"));
	/* the costliest cause's remedy first */
	assert_non_null(strstr(f->fix_fsdp2, "set_modules_to_forward_prefetch"));
	assert_true(strstr(f->fix_fsdp2, "set_modules_to_forward_prefetch") < strstr(f->fix_fsdp2, "unshard"));
	assert_non_null(strstr(f->fix_fsdp1, "BackwardPrefetch.BACKWARD_PRE"));
	assert_non_null(strstr(f->fix_fsdp1, "forward_prefetch=True"));
	assert_non_null(strstr(f->fix_deepspeed, "overlap_comm"));
	findings_free(list);
	fixture_free(a);
}

static void test_exposed_bandwidth_bound_fix(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list;
	const struct finding *f;

	(void)state;
	/* two nodes of 8 ranks, gathers whose time is mostly their bytes (25 GB/s) */
	m.ranks = 16;
	fixture_free(a);
	a = fixture_new(&m);
	fixture_nodes(a, 2);
	expose(a, 1000000, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	fixture_link(a, 20000, 25); /* each gather longer than its exposure */
	list = fixture_run(&rule_exposed_gather, a, "exposed_fraction=0.01");
	f = findings_get(list, 0);
	assert_non_null(f);
	assert_non_null(strstr(f->evidence, "bandwidth-bound"));
	assert_non_null(strstr(f->fix_fsdp2, "reshard_after_forward=8"));
	assert_non_null(strstr(f->fix_fsdp2, "init_device_mesh"));
	assert_null(strstr(f->fix_fsdp2, "set_modules_to_forward_prefetch"));
	assert_non_null(strstr(f->fix_fsdp1, "HYBRID_SHARD"));
	findings_free(list);
	fixture_free(a);
}

static void test_exposed_thresholds(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list;

	(void)state;
	expose(a, 1000000, ANALYSIS_CAUSE_NO_PREFETCH);
	/* 1.5 ms of a 30 ms step: under the step share asked for */
	list = fixture_run(&rule_exposed_gather, a, "exposed_step_fraction=0.06");
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	list = fixture_run(&rule_exposed_gather, a, "exposed_fraction=0.95");
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	a->exposure.source = ANALYSIS_EXPOSURE_NONE; /* nothing measured: nothing said */
	list = fixture_run(&rule_exposed_gather, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	a->exposure.source = ANALYSIS_EXPOSURE_CUPTI;
	a->exposure.exposed_fraction = ANALYSIS_UNKNOWN;
	list = fixture_run(&rule_exposed_gather, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

static void test_reshard_true_is_info_with_the_trade(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list = fixture_run(&rule_reshard_policy, a, NULL);
	const struct finding *f = findings_get(list, 0);

	(void)state;
	assert_int_equal(findings_count(list), 1);
	assert_int_equal(f->severity, RULE_INFO);
	/* 8 blocks of 50M bf16 params: 800 MB held if retained */
	assert_non_null(strstr(f->message, "reshard_after_forward=True: 8 non-root units"));
	assert_non_null(strstr(f->message, "800 MB more memory"));
	assert_non_null(strstr(f->evidence, "detected: true"));
	assert_non_null(strstr(f->fix_fsdp2, "reshard_after_forward=False"));
	assert_non_null(strstr(f->fix_fsdp1, "SHARD_GRAD_OP"));
	findings_free(list);
	fixture_free(a);
}

static void test_reshard_false_and_unknown(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;
	const struct finding *f;

	(void)state;
	m.reshard = 0;
	a = fixture_new(&m);
	list = fixture_run(&rule_reshard_policy, a, NULL);
	f = findings_get(list, 0);
	assert_non_null(f);
	assert_non_null(strstr(f->message, "reshard_after_forward=False: 8 non-root units stay gathered"));
	assert_non_null(strstr(f->message, "free up to 800 MB at the cost of 8 more AllGathers"));
	findings_free(list);
	a->reshard.policy = ANALYSIS_RESHARD_GROUP;
	a->reshard.group_size = 4;
	a->reshard.group_units = 8;
	list = fixture_run(&rule_reshard_policy, a, NULL);
	assert_non_null(strstr(findings_get(list, 0)->message, "reshard_after_forward=4"));
	findings_free(list);
	a->reshard.policy = ANALYSIS_RESHARD_UNKNOWN;
	list = fixture_run(&rule_reshard_policy, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exposed_absent_when_hidden),
		cmocka_unit_test(test_exposed_no_prefetch_is_a_warning_with_causes),
		cmocka_unit_test(test_exposed_bandwidth_bound_fix),
		cmocka_unit_test(test_exposed_thresholds),
		cmocka_unit_test(test_reshard_true_is_info_with_the_trade),
		cmocka_unit_test(test_reshard_false_and_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
