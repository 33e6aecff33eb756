/* rules_wrap_test: wrap-too-fine, wrap-too-coarse, gather-count-mismatch
 * on hand-built analyses: present with the right severity and evidence when
 * the wrap is wrong, absent when it is right. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/record.h"
#include "rules/rules.h"
#include "tests/unit/rules_fixture.h"

/* --- wrap-too-fine ------------------------------------------------------ */

static void test_fine_per_linear_is_an_error(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;
	const struct finding *f;

	(void)state;
	m.k = 8; /* fsdp_ref's per-Linear wrap: 7 Linears + the norms */
	a = fixture_new(&m);
	list = fixture_run(&rule_wrap_too_fine, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_ERROR);
	assert_string_equal(f->rule->id, "wrap-too-fine");
	assert_non_null(strstr(f->evidence, "8 gathers per repeating unit x 8 units = 64 + 1 root per step; "
					    "per-block wrap would issue 9"));
	assert_non_null(strstr(f->evidence, "AllGathers per step: 129 (65 forward + 64 backward); per-block wrap: 17"));
	assert_non_null(strstr(f->fix_fsdp2, "fully_shard(block"));
	assert_non_null(strstr(f->fix_fsdp2, "for block in model.layers"));
	assert_non_null(strstr(f->fix_fsdp1, "ModuleWrapPolicy"));
	assert_non_null(strstr(f->fix_deepspeed, "stage3_prefetch_bucket_size\": 50000000"));
	assert_true(fixture_metric(f, "gathers_per_unit") == 8);
	assert_true(fixture_metric(f, "per_block_forward_allgathers") == 9);
	findings_free(list);
	fixture_free(a);
}

static void test_fine_absent_when_per_block(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list = fixture_run(&rule_wrap_too_fine, a, NULL);

	(void)state;
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

/* An MoE block gathered once on the dense group and once on the experts'
 * group: two gathers per block, one per group, is per-block wrapping. */
static void add_expert_group(struct analysis_result *a, uint32_t k)
{
	a->nfsdp_groups = 2;
	a->fsdp_groups[0] = (struct analysis_fsdp_group){.comm = 0, .regather_comm = -1, .nranks = 8,
							  .gathers_per_unit = a->units.gathers_per_unit,
							  .repeating_units = a->units.repeating_units};
	a->fsdp_groups[1] = (struct analysis_fsdp_group){.comm = 1, .regather_comm = -1, .nranks = 4,
							  .allgathers = 2 * 8 * k, .reduce_scatters = 8 * k,
							  .forward_units = 8 * k, .repeating_units = 8, .gathers_per_unit = k};
}

static void test_fine_absent_when_per_block_on_every_group(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	add_expert_group(a, 1);
	findings_t *list = fixture_run(&rule_wrap_too_fine, a, NULL);

	(void)state;
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

static void test_fine_on_another_group(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	add_expert_group(a, 3);
	findings_t *list = fixture_run(&rule_wrap_too_fine, a, NULL);

	(void)state;
	assert_int_equal(findings_count(list), 1);
	const struct finding *f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_ERROR);
	assert_non_null(strstr(f->message, "FSDP group 2 (4 ranks): 3 AllGathers per unit"));
	assert_true(fixture_metric(f, "fsdp_group") == 2);
	findings_free(list);
	/* the primary per Linear: its finding, the other group named beside it */
	m.k = 8;
	fixture_free(a);
	a = fixture_new(&m);
	add_expert_group(a, 1);
	list = fixture_run(&rule_wrap_too_fine, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_true(fixture_metric(f, "gathers_per_unit") == 8);
	assert_non_null(strstr(f->evidence, "not counted: FSDP group 2's 16 AllGathers per step"));
	findings_free(list);
	fixture_free(a);
}

static void test_fine_needs_a_repeat_or_layers(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;

	(void)state;
	m.k = 8;
	m.layers = 1; /* one copy of a motif is no repeat ... */
	a = fixture_new(&m);
	list = fixture_run(&rule_wrap_too_fine, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	a->units.layers_given = 1; /* ... unless the user says the model has one layer */
	list = fixture_run(&rule_wrap_too_fine, a, NULL);
	assert_int_equal(findings_count(list), 1);
	findings_free(list);
	/* the threshold moves the line */
	list = fixture_run(&rule_wrap_too_fine, a, "fine_gathers_per_unit=9");
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

/* A --layers count the gathers hold no repeat of: the evidence is what the
 * trace shows (8 x 8 + 1), never k times the user's count (8 x 1000000). */
static void test_fine_evidence_from_the_trace_when_layers_do_not_match(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;
	const struct finding *f;

	(void)state;
	m.k = 8;
	a = fixture_new(&m);
	a->units.layers_given = 1;
	a->units.layers_match = 0;
	a->units.inferred_repeating_units = a->units.repeating_units;
	a->units.inferred_gathers_per_unit = a->units.gathers_per_unit;
	a->units.repeating_units = 1000000;
	a->options.layers = 1000000;
	list = fixture_run(&rule_wrap_too_fine, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_non_null(strstr(f->evidence, "8 gathers per repeating unit x 8 units = 64 + 1 root per step; "
					    "per-block wrap would issue 9"));
	assert_null(strstr(f->evidence, "1000000"));
	assert_true(fixture_metric(f, "repeating_units") == 8);
	findings_free(list);
	fixture_free(a);
}

/* --- wrap-too-coarse ---------------------------------------------------- */

/* The whole model as one unit: one forward gather with every parameter. */
static void make_model_wrap(struct analysis_result *a)
{
	uint64_t total = a->units.total_params;

	a->ngathers = 1;
	a->gathers[0].elements = total;
	a->gathers[0].bytes = total * 2 / a->units.shard_ranks;
	a->per_step.forward_allgathers = 1;
	a->per_step.backward_allgathers = 0;
	a->per_step.allgathers = 1;
	a->units.repeating_units = 1;
	a->units.gathers_per_unit = 1;
	a->units.root_gathers = 0;
	a->units.largest_unit_params = total;
	a->units.repeating_unit_params = total;
}

static void test_coarse_whole_model_is_an_error(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list;
	const struct finding *f;

	(void)state;
	make_model_wrap(a);
	list = fixture_run(&rule_wrap_too_coarse, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_ERROR);
	assert_non_null(strstr(f->message, "100%"));
	assert_true(fixture_metric(f, "largest_unit_fraction") == 1.0);
	/* 410M params x 2 bytes x (1 + 1 prefetch) */
	assert_true(fixture_metric(f, "transient_bytes_per_rank") == 410e6 * 2 * 2);
	assert_non_null(strstr(f->evidence, "410.0M of 410.0M parameters (100%)"));
	assert_non_null(strstr(f->fix_fsdp2, "for block in model.layers"));
	assert_non_null(strstr(f->fix_deepspeed, "stage3_max_live_parameters"));
	findings_free(list);
	fixture_free(a);
}

static void test_coarse_absent_when_per_block(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;

	(void)state;
	m.layers = 2; /* a block is 45% of the model: large, but the block */
	a = fixture_new(&m);
	list = fixture_run(&rule_wrap_too_coarse, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
	m.layers = 8;
	m.k = 8;
	a = fixture_new(&m);
	list = fixture_run(&rule_wrap_too_coarse, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

static void test_coarse_big_root_is_a_warning_about_the_root(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;
	const struct finding *f;

	(void)state;
	m.layers = 2;
	m.block_params = 10000000;
	m.root_params = 60000000; /* a big vocabulary: 75% of the model */
	a = fixture_new(&m);
	list = fixture_run(&rule_wrap_too_coarse, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_WARNING);
	assert_non_null(strstr(f->message, "'model' holds 75%"));
	assert_non_null(strstr(f->fix_fsdp2, "tok_embeddings"));
	findings_free(list);
	fixture_free(a);
}

static void test_coarse_group_of_blocks_is_a_warning(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;
	const struct finding *f;

	(void)state;
	/* Blocks 0-1 in one unit, the other 6 per block (a mixed spec). */
	m.layers = 7;
	a = fixture_new(&m);
	a->gathers[1].elements *= 2;
	a->units.largest_unit_params = a->gathers[1].elements;
	a->units.total_params += m.block_params;
	list = fixture_run(&rule_wrap_too_coarse, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_WARNING);
	assert_true(fixture_metric(f, "layers_per_largest_unit") == 2.0);
	assert_non_null(strstr(f->message, "2.0 repeating units"));
	findings_free(list);
	/* a higher ratio threshold lets it pass */
	list = fixture_run(&rule_wrap_too_coarse, a, "coarse_unit_ratio=2.5");
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

/* --- gather-count-mismatch --------------------------------------------- */

static void test_mismatch_needs_layers(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;

	(void)state;
	m.k = 8;
	a = fixture_new(&m);
	list = fixture_run(&rule_gather_count_mismatch, a, NULL); /* no --layers: silent */
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

static void test_mismatch_per_linear_with_layers(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;
	const struct finding *f;

	(void)state;
	m.k = 8;
	a = fixture_new(&m);
	a->options.layers = 8;
	a->units.layers_given = 1;
	list = fixture_run(&rule_gather_count_mismatch, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_ERROR);
	assert_non_null(strstr(f->message, "65 forward AllGathers per step for 8 layers: 8.0 per layer"));
	assert_non_null(strstr(f->evidence, "--layers 8: a per-block wrap issues 9 forward AllGathers per step (8 + 1 root)"));
	assert_true(fixture_metric(f, "gathers_per_layer") == 8.0);
	findings_free(list);
	fixture_free(a);
}

static void test_mismatch_absent_when_layers_match(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list;

	(void)state;
	a->options.layers = 8;
	a->units.layers_given = 1;
	list = fixture_run(&rule_gather_count_mismatch, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

/* A repeat of exactly L copies that leaves most gathers outside is a
 * coincidence of sizes (k and v of a per-Linear block), not the layers:
 * linear:0-0,block:1-1 on 2 layers issues 1 + 8 + 1 forward gathers. */
static void test_mismatch_ignores_a_coincidental_repeat(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;
	const struct finding *f;

	(void)state;
	m.layers = 2;
	a = fixture_new(&m);
	a->per_step.forward_allgathers = 10;
	a->units.forward_units = 10;
	a->options.layers = 2;
	a->units.layers_given = 1;
	a->units.repeating_units = 2;
	a->units.gathers_per_unit = 1;
	a->units.root_gathers = 8;
	list = fixture_run(&rule_gather_count_mismatch, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_ERROR);
	assert_true(fixture_metric(f, "root_gathers") == 1);
	assert_true(fixture_metric(f, "expected_forward_allgathers") == 3);
	findings_free(list);
	fixture_free(a);
}

static void test_mismatch_groups_are_a_warning(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;
	const struct finding *f;

	(void)state;
	/* group:2 on 12 layers: 6 units + root; the user says 12 layers and
	 * no repeat of 12 copies exists. */
	m.layers = 6;
	m.block_params *= 2;
	a = fixture_new(&m);
	a->options.layers = 12;
	list = fixture_run(&rule_gather_count_mismatch, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_WARNING);
	assert_non_null(strstr(f->message, "7 forward AllGathers per step for 12 layers: 6 unit(s) hold 2.0 layers"));
	assert_true(fixture_metric(f, "expected_forward_allgathers") == 13);
	findings_free(list);
	fixture_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fine_per_linear_is_an_error),
		cmocka_unit_test(test_fine_absent_when_per_block),
		cmocka_unit_test(test_fine_absent_when_per_block_on_every_group),
		cmocka_unit_test(test_fine_on_another_group),
		cmocka_unit_test(test_fine_needs_a_repeat_or_layers),
		cmocka_unit_test(test_fine_evidence_from_the_trace_when_layers_do_not_match),
		cmocka_unit_test(test_coarse_whole_model_is_an_error),
		cmocka_unit_test(test_coarse_absent_when_per_block),
		cmocka_unit_test(test_coarse_big_root_is_a_warning_about_the_root),
		cmocka_unit_test(test_coarse_group_of_blocks_is_a_warning),
		cmocka_unit_test(test_mismatch_needs_layers),
		cmocka_unit_test(test_mismatch_per_linear_with_layers),
		cmocka_unit_test(test_mismatch_absent_when_layers_match),
		cmocka_unit_test(test_mismatch_groups_are_a_warning),
		cmocka_unit_test(test_mismatch_ignores_a_coincidental_repeat),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
