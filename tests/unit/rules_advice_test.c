/* rules_advice_test: each fix offered only where the job's own figures say
 * it applies (docs/patterns.md "Advice that fits the job"): node-level
 * fixes on one node and on two, latency- against bandwidth-bound gathers
 * told once for exposed-gather and small-collectives alike. Hand-built
 * analyses (rules_fixture.c); the prefetch decision itself is the
 * analysis' (analysis_overlap_test's test_prefetch_seen). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rules/rules.h"
#include "tests/unit/rules_fixture.h"

/* exposed - every gather half exposed with `cause`
 * (their times as fixture_link left them), on a step ten times the exposure. */
static void exposed(struct analysis_result *a, int cause)
{
	struct analysis_exposure *e = &a->exposure;
	uint32_t n = 0;
	uint64_t ns = 0;

	memset(e->cause_gathers, 0, sizeof(e->cause_gathers));
	memset(e->cause_ns, 0, sizeof(e->cause_ns));
	memset(e->cause_compute_wait_ns, 0, sizeof(e->cause_compute_wait_ns));
	for (uint32_t i = 0; i < a->ngathers; i++) {
		struct analysis_gather *g = &a->gathers[i];

		g->exposed_ns = g->duration_ns / 2;
		g->hide_ns = g->duration_ns - g->exposed_ns;
		g->compute_wait_ns = g->exposed_ns;
		g->cause = g->exposed_ns ? (uint8_t)cause : ANALYSIS_CAUSE_HIDDEN;
		n += g->exposed_ns > 0;
		ns += g->exposed_ns;
	}
	e->cause_gathers[cause] = n;
	e->cause_ns[cause] = e->cause_compute_wait_ns[cause] = ns;
	e->cause_gathers[ANALYSIS_CAUSE_HIDDEN] = a->ngathers - n;
	e->exposed_allgather_ns_per_step = ns;
	e->backward_exposed_ns_per_step = ns;
	e->exposed_gathers = n;
	e->exposed_fraction = e->allgather_ns_per_step ? (double)ns / (double)e->allgather_ns_per_step : 0;
	a->step_ns = 10 * ns;
	a->breakdown.step_ns = 0;
}

/* run - rule r over a; its one finding (NULL when none) in *f, the list
 * returned for findings_free. */
static findings_t *run(const struct rule *r, struct analysis_result *a, const struct finding **f)
{
	findings_t *list = fixture_run(r, a, NULL);

	*f = findings_count(list) ? findings_get(list, 0) : NULL;
	return list;
}

/* The large gathers of the default job (100 MB gathered per block) on a
 * 50 GB/s link: bandwidth-bound; one node, then two. */
static void test_bandwidth_fix_by_nodes(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	const struct finding *f;
	findings_t *list;

	(void)state;
	fixture_link(a, 20000, 50);
	exposed(a, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	for (uint32_t nodes = 0; nodes <= 2; nodes++) {
		fixture_nodes(a, nodes);
		list = run(&rule_exposed_gather, a, &f);
		assert_non_null(f);
		assert_non_null(strstr(f->message, "mostly bandwidth-bound"));
		assert_null(strstr(f->evidence, "latency-bound"));
		assert_non_null(strstr(f->fix_fsdp2, "MixedPrecisionPolicy(param_dtype=torch.bfloat16"));
		assert_null(strstr(f->fix_fsdp2, "set_modules_to_forward_prefetch"));
		assert_null(strstr(f->fix_fsdp2, "blocks[i:i + 2]"));
		if (nodes < 2) {
			/* one node (or hosts unknown): nothing to keep inside it */
			assert_null(strstr(f->fix_fsdp2, "reshard_after_forward="));
			assert_null(strstr(f->fix_fsdp2, "init_device_mesh"));
			assert_null(strstr(f->fix_fsdp2, "HSDP"));
			assert_null(strstr(f->fix_fsdp1, "HYBRID_SHARD"));
			assert_null(strstr(f->fix_deepspeed, "zero_hpz_partition_size"));
		} else {
			/* 8 ranks on 2 nodes: 4 per node */
			assert_non_null(strstr(f->fix_fsdp2, "reshard_after_forward=4)"));
			assert_non_null(strstr(f->fix_fsdp2, "init_device_mesh(\"cuda\", (2, 4)"));
			assert_non_null(strstr(f->fix_fsdp1, "HYBRID_SHARD"));
			assert_non_null(strstr(f->fix_deepspeed, "\"zero_hpz_partition_size\": 4"));
		}
		findings_free(list);
	}
	fixture_free(a);
}

/* reshard-policy states the trade on every job; the integer and
 * HYBRID_SHARD only where there is a node to keep the gather in. */
static void test_reshard_integer_by_nodes(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	const struct finding *f;
	findings_t *list;

	(void)state;
	fixture_nodes(a, 1);
	list = run(&rule_reshard_policy, a, &f);
	assert_non_null(f);
	assert_non_null(strstr(f->fix_fsdp2, "reshard_after_forward=False"));
	assert_null(strstr(f->fix_fsdp2, "reshard_after_forward=8"));
	assert_null(strstr(f->fix_fsdp2, "reshard_after_forward=4"));
	assert_null(strstr(f->fix_fsdp1, "HYBRID_SHARD"));
	assert_non_null(strstr(f->fix_fsdp1, "SHARD_GRAD_OP"));
	findings_free(list);
	fixture_nodes(a, 2);
	list = run(&rule_reshard_policy, a, &f);
	assert_non_null(strstr(f->fix_fsdp2, "reshard_after_forward=4)"));
	assert_non_null(strstr(f->fix_fsdp1, "HYBRID_SHARD"));
	findings_free(list);
	fixture_free(a);
}

/* A per-Linear job (100 kB gathered per call). On a link whose latency
 * dominates, both rules call its gathers latency-bound and offer fewer,
 * larger gathers; on a link where its bytes dominate, exposed-gather calls
 * them bandwidth-bound and small-collectives is silent: never both. */
static void test_bound_told_once(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	const struct finding *f, *s;
	findings_t *list, *small;

	(void)state;
	m.k = 8;
	m.block_params = 400000;
	a = fixture_new(&m);
	fixture_nodes(a, 1);
	/* two sizes, each gathered many times, for the fit: the backward's
	 * pieces four times the forward's */
	for (uint32_t i = 0; i < a->ngathers; i++)
		if (a->gathers[i].phase == ANALYSIS_PHASE_BACKWARD) {
			a->gathers[i].bytes *= 4;
			a->gathers[i].elements *= 4;
		}
	fixture_link(a, 200000, 50); /* 200 us latency, 2 (8) us of bytes per gather */
	exposed(a, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	list = run(&rule_exposed_gather, a, &f);
	small = run(&rule_small_collectives, a, &s);
	assert_non_null(f);
	assert_non_null(s);
	assert_non_null(strstr(f->message, "mostly latency-bound"));
	assert_non_null(strstr(f->evidence, "causes (exposed, compute wait): latency-bound"));
	assert_non_null(strstr(f->fix_fsdp2, "fewer, larger gathers"));
	assert_true(strstr(f->fix_fsdp2, "fewer, larger gathers") == f->fix_fsdp2 + strlen("# latency-bound: the gather's time is its fixed cost, not its bytes: "));
	assert_non_null(strstr(s->message, "latency-bound"));
	/* the root's 20 MB gather is the one whose bytes outweigh the latency */
	assert_non_null(strstr(f->evidence, "bandwidth-bound 1 gather(s)"));
	assert_true(fixture_metric(f, "latency_bound_ns") > 10 * fixture_metric(f, "bandwidth_bound_ns"));
	findings_free(list);
	findings_free(small);

	fixture_link(a, 1000, 0.5); /* 1 us latency, 200 (800) us of bytes per gather */
	exposed(a, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	list = run(&rule_exposed_gather, a, &f);
	small = run(&rule_small_collectives, a, &s);
	assert_non_null(f);
	assert_null(s);
	assert_non_null(strstr(f->message, "mostly bandwidth-bound"));
	assert_null(strstr(f->evidence, "latency-bound"));
	assert_int_equal((int)fixture_metric(f, "latency_bound_ns"), 0);
	findings_free(list);
	findings_free(small);
	fixture_free(a);
}

/* Small gathers of one size: no fit; the gathered size decides, as
 * small-collectives' threshold, for both rules. HSDP in small-collectives'
 * advice only on more than one node. */
static void test_one_size_and_hsdp_hint(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	const struct finding *f, *s;
	findings_t *list, *small;

	(void)state;
	m.block_params = 400000; /* per block: 800 kB gathered, under 1 MiB */
	m.root_params = 400000;  /* the root's the same size: one size only */
	a = fixture_new(&m);
	fixture_nodes(a, 1);
	exposed(a, ANALYSIS_CAUSE_BANDWIDTH_BOUND);
	list = run(&rule_exposed_gather, a, &f);
	small = run(&rule_small_collectives, a, &s);
	assert_non_null(f);
	assert_non_null(s);
	assert_non_null(strstr(f->message, "mostly latency-bound"));
	assert_int_equal(s->severity, RULE_INFO); /* each block is one gather */
	assert_null(strstr(s->fix_fsdp2, "HSDP"));
	findings_free(small);
	findings_free(list);
	fixture_nodes(a, 2);
	small = run(&rule_small_collectives, a, &s);
	assert_non_null(strstr(s->fix_fsdp2, "HSDP"));
	findings_free(small);
	fixture_free(a);
}

/* No-prefetch advice only with the no-prefetch cause: a job whose exposed
 * gathers are first-of-phase and host-late gets none. */
static void test_prefetch_advice_only_on_demand(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	const struct finding *f;
	findings_t *list;

	(void)state;
	fixture_nodes(a, 1);
	exposed(a, ANALYSIS_CAUSE_HOST_LATE);
	list = run(&rule_exposed_gather, a, &f);
	assert_non_null(f);
	assert_non_null(strstr(f->fix_fsdp2, "torch.compile"));
	assert_null(strstr(f->fix_fsdp2, "set_modules_to_forward_prefetch"));
	assert_null(f->fix_fsdp1 ? strstr(f->fix_fsdp1, "forward_prefetch=True") : NULL);
	assert_null(f->fix_deepspeed ? strstr(f->fix_deepspeed, "overlap_comm") : NULL);
	findings_free(list);
	exposed(a, ANALYSIS_CAUSE_NO_PREFETCH);
	list = run(&rule_exposed_gather, a, &f);
	assert_non_null(strstr(f->fix_fsdp2, "set_modules_to_forward_prefetch"));
	assert_non_null(strstr(f->fix_fsdp1, "forward_prefetch=True"));
	findings_free(list);
	fixture_free(a);
}

/* run_with_gains - as run, with rules_run's gains pass and a setting. */
static findings_t *run_with_gains(const struct rule *r, struct analysis_result *a, const char *setting,
				  const struct finding **f)
{
	findings_t *list = fixture_run_gains(r, a, setting);

	*f = findings_count(list) ? findings_get(list, 0) : NULL;
	return list;
}

/* The gain of a fix the model cannot replay is bounded by the exposed time
 * of its cause; the severity follows from it: a warning while the bound is
 * 2% of the step or more, info once every fix is under it, and a warning
 * again with the threshold below the bound. */
static void test_severity_follows_gain(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	const struct finding *f;
	findings_t *list;
	uint64_t exposed_ns;

	(void)state;
	fixture_nodes(a, 1);
	exposed(a, ANALYSIS_CAUSE_HOST_LATE); /* the step is 10x the exposure */
	exposed_ns = a->exposure.exposed_allgather_ns_per_step;
	list = run_with_gains(&rule_exposed_gather, a, NULL, &f);
	assert_non_null(f);
	assert_int_equal(f->severity, RULE_WARNING);
	assert_int_equal((int)f->ngains, 1);
	assert_string_equal(f->gains[0].fix, "host-late");
	assert_int_equal(f->gains[0].kind, FINDING_GAIN_AT_MOST);
	assert_int_equal(f->gains[0].gain_ns, (int64_t)exposed_ns);
	assert_non_null(strstr(f->evidence, "predicted gain of each fix"));
	assert_non_null(strstr(f->evidence, "host-late at most"));
	assert_null(strstr(f->evidence, "info, not a warning"));
	findings_free(list);

	/* the same exposure in a step 100x as long: 1% at most. exposed-gather
	 * itself still fires (its own thresholds are 2% of the step) */
	a->step_ns = 40 * exposed_ns;
	list = run_with_gains(&rule_exposed_gather, a, "fix_gain_fraction=3%", &f);
	assert_non_null(f);
	assert_int_equal(f->severity, RULE_INFO);
	assert_non_null(strstr(f->evidence, "info, not a warning"));
	assert_int_equal(findings_count_at_least(list, RULE_WARNING), 0); /* what lint --fail-on warning counts */
	findings_free(list);
	list = run_with_gains(&rule_exposed_gather, a, "fix_gain_fraction=2%", &f);
	assert_int_equal(f->severity, RULE_WARNING); /* 2.5% >= 2% */
	findings_free(list);
	fixture_free(a);
}

/* Prefetch fixes of a job whose exposed gathers wait on demand: the
 * fixture's job is recorded with prefetch 1, so only prefetch=2 is offered,
 * and the replay finds nothing for it to hide (the gathers already start
 * one unit ahead): under 2%, info. With one gather's interval gone the
 * model replays nothing, the fixes are not predicted, and the warning stays
 * whatever the threshold. */
static void test_whatif_gain_and_unpredicted(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	const struct finding *f;
	findings_t *list;

	(void)state;
	fixture_nodes(a, 1);
	exposed(a, ANALYSIS_CAUSE_NO_PREFETCH);
	list = run_with_gains(&rule_exposed_gather, a, NULL, &f);
	assert_non_null(f);
	assert_int_equal((int)f->ngains, 1);
	assert_string_equal(f->gains[0].fix, "prefetch=2"); /* the job has prefetch=1 */
	assert_int_equal(f->gains[0].kind, FINDING_GAIN_WHATIF);
	assert_true(f->gains[0].gain_ns < (int64_t)(a->step_ns / 50));
	assert_int_equal(f->severity, RULE_INFO);
	findings_free(list);

	a->gathers[3].duration_ns = 0;
	list = run_with_gains(&rule_exposed_gather, a, "fix_gain_fraction=99%", &f);
	assert_non_null(f);
	assert_int_equal((int)f->ngains, 2); /* without a model the recorded depth is not known either */
	for (size_t i = 0; i < f->ngains; i++) {
		assert_int_equal(f->gains[i].kind, FINDING_GAIN_NOT_PREDICTED);
		assert_non_null(strstr(f->gains[i].why, "without an interval"));
	}
	assert_int_equal(f->severity, RULE_WARNING);
	assert_non_null(strstr(f->evidence, "prefetch=2 not predicted"));
	findings_free(list);
	fixture_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bandwidth_fix_by_nodes),
		cmocka_unit_test(test_reshard_integer_by_nodes),
		cmocka_unit_test(test_bound_told_once),
		cmocka_unit_test(test_one_size_and_hsdp_hint),
		cmocka_unit_test(test_prefetch_advice_only_on_demand),
		cmocka_unit_test(test_severity_follows_gain),
		cmocka_unit_test(test_whatif_gain_and_unpredicted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
