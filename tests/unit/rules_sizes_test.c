/* rules_sizes_test: small-collectives, fp32-gather and rank-skew on
 * hand-built analyses. */
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

/* --- small-collectives -------------------------------------------------- */

static void test_small_per_linear_is_a_warning(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;
	const struct finding *f;

	(void)state;
	m.k = 8;
	m.block_params = 400000; /* 50k params per Linear: 100 kB gathered in bf16 */
	a = fixture_new(&m);
	list = fixture_run(&rule_small_collectives, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_WARNING);
	assert_non_null(strstr(f->message, "median 100 kB gathered per call, 129 calls per step"));
	assert_non_null(strstr(f->evidence, "threshold 1.05 MB"));
	findings_free(list);
	/* the threshold moves the line */
	list = fixture_run(&rule_small_collectives, a, "small_gather_bytes=100k");
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

static void test_small_blocks_are_info(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;

	(void)state;
	m.block_params = 100000; /* per block already: the blocks are small */
	a = fixture_new(&m);
	list = fixture_run(&rule_small_collectives, a, NULL);
	assert_int_equal(findings_count(list), 1);
	assert_int_equal(findings_get(list, 0)->severity, RULE_INFO);
	assert_non_null(strstr(findings_get(list, 0)->fix_fsdp2, "blocks[i:i + 2]"));
	findings_free(list);
	fixture_free(a);
}

static void test_small_absent_when_large(void **state)
{
	struct fixture_model m = fixture_default(); /* 100 MB per gather */
	struct analysis_result *a = fixture_new(&m);
	findings_t *list = fixture_run(&rule_small_collectives, a, NULL);

	(void)state;
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

/* --- fp32-gather -------------------------------------------------------- */

static void test_fp32_absent_in_bf16(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list = fixture_run(&rule_fp32_gather, a, NULL);

	(void)state;
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

static void test_fp32_everything_with_bf16_declared(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	findings_t *list;
	const struct finding *f;

	(void)state;
	m.dtype = FSS_DTYPE_FLOAT32;
	a = fixture_new(&m);
	list = fixture_run(&rule_fp32_gather, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_WARNING);
	assert_non_null(strstr(f->message, "100% of gathered bytes are fp32"));
	assert_non_null(strstr(f->fix_fsdp2, "MixedPrecisionPolicy(param_dtype=torch.bfloat16"));
	assert_non_null(strstr(f->fix_fsdp1, "MixedPrecision(param_dtype=torch.bfloat16"));
	assert_non_null(strstr(f->fix_deepspeed, "\"bf16\": { \"enabled\": true }"));
	findings_free(list);
	/* the user says the job computes in fp32: nothing to say */
	a->options.param_bytes = 4;
	list = fixture_run(&rule_fp32_gather, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

static void test_fp32_one_unit_without_policy(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list;
	const struct finding *f;

	(void)state;
	/* The root gathers fp32 (twice the bytes), the blocks bf16; the user
	 * declared fp32 compute, yet other gathers are 16-bit. */
	a->options.param_bytes = 4;
	a->gathers[0].dtype = FSS_DTYPE_FLOAT32;
	a->gathers[0].bytes *= 2;
	a->sizes.allgather_dtypes |= 1u << FSS_DTYPE_FLOAT32;
	/* 40 MB of 40 + 16 x 100 MB: 2.4 %, under the default 5 % */
	list = fixture_run(&rule_fp32_gather, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	list = fixture_run(&rule_fp32_gather, a, "fp32_gather_fraction=0.02");
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_non_null(strstr(f->message, "2% of gathered bytes are fp32 while other gathers are 16-bit"));
	assert_non_null(strstr(f->evidence, "fp32 AllGathers per step: 1 of 17, 40.0 MB of 1.64 GB gathered; fp32 units: 'model'"));
	findings_free(list);
	fixture_free(a);
}

/* --- rank-skew ---------------------------------------------------------- */

static void test_skew_absent_when_small_or_one_rank(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m); /* 10 us of a 100 ms step */
	findings_t *list = fixture_run(&rule_rank_skew, a, NULL);

	(void)state;
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
	m.ranks = 1;
	a = fixture_new(&m);
	a->spread.skew_ns_per_step = 50000000;
	list = fixture_run(&rule_rank_skew, a, NULL);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

static void test_skew_straggler_is_named(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	findings_t *list;
	const struct finding *f;

	(void)state;
	a->spread.skew_ns_per_step = 12000000; /* 12 % of the step */
	a->spread.slowest_rank = 3;
	a->spread.slowest_rank_fraction = 0.9;
	a->per_rank[3].last_arrivals = 306;
	a->per_rank[3].matched_collectives = 340;
	a->per_rank[3].late_ns_per_step = 11000000;
	list = fixture_run(&rule_rank_skew, a, NULL);
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_WARNING);
	assert_non_null(strstr(f->message, "rank 3 is a straggler: it enters collectives last in 90% of them; the "
					  "ranks' arrival spread, summed over a step's collectives, is 12% of the step"));
	assert_non_null(strstr(f->evidence, "rank 3 entered last in 306 of 340 matched collectives (90%)"));
	assert_non_null(strstr(f->evidence, "waited 11.0 ms per step"));
	assert_null(f->fix_fsdp1);
	findings_free(list);
	/* the same spread with the last rank changing: jitter, information */
	a->spread.slowest_rank_fraction = 0.2;
	list = fixture_run(&rule_rank_skew, a, NULL);
	assert_int_equal(findings_count(list), 1);
	assert_int_equal(findings_get(list, 0)->severity, RULE_INFO);
	assert_non_null(strstr(findings_get(list, 0)->message, "no single slow rank"));
	findings_free(list);
	list = fixture_run(&rule_rank_skew, a, "skew_step_fraction=0.2");
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_per_linear_is_a_warning),
		cmocka_unit_test(test_small_blocks_are_info),
		cmocka_unit_test(test_small_absent_when_large),
		cmocka_unit_test(test_fp32_absent_in_bf16),
		cmocka_unit_test(test_fp32_everything_with_bf16_declared),
		cmocka_unit_test(test_fp32_one_unit_without_policy),
		cmocka_unit_test(test_skew_absent_when_small_or_one_rank),
		cmocka_unit_test(test_skew_straggler_is_named),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
