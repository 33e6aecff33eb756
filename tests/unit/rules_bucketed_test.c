/* rules_bucketed_test: bucketed-fetch on hand-built analyses of a DeepSpeed
 * ZeRO-3 job (the bucket figures the analysis fills for a bucketed verdict). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rules/rules.h"
#include "tests/unit/rules_fixture.h"

/* A ZeRO-3 job of 303,936 parameters: 57 flat fetches per step of 64 ..
 * 12,288 elements (median 4096), one reduce bucket holding every gradient;
 * every figure distinct, so that each one can be found in the text. */
static struct analysis_result *zero3(uint64_t median)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m);
	struct analysis_buckets *b = &a->buckets;

	a->verdict = ANALYSIS_BUCKETED;
	b->fetches_per_step = 57;
	b->calls_per_step = 57;
	b->fetch_elements_min = 64;
	b->fetch_elements_median = median;
	b->fetch_elements_max = 12288;
	b->gathered_elements_per_step = 303936;
	b->reduce_buckets_per_step = 1;
	b->reduce_sizes_matching = 0;
	b->reduce_elements_per_step = 303936;
	b->reduce_elements_max = 303936;
	return a;
}

static void test_small_fetches_are_a_warning_with_the_numbers(void **state)
{
	struct analysis_result *a = zero3(4096);
	findings_t *list = fixture_run(&rule_bucketed_fetch, a, NULL);
	const struct finding *f;

	(void)state;
	assert_int_equal(findings_count(list), 1);
	f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_WARNING); /* 8 kB in bf16: latency-bound */
	assert_non_null(strstr(f->message, "57 gathers per step of median 4096 elements"));
	assert_non_null(strstr(f->evidence, "min 64, median 4096, max 12.3k"));
	/* the reduce bucket's largest is its own figure, not the smallest fetch's */
	assert_non_null(strstr(f->evidence, "1 ReduceScatters, 303.9k elements in all"));
	assert_non_null(strstr(f->evidence, "largest 303.9k; 0 of them of a size some gather has"));
	assert_non_null(strstr(f->evidence, "1.00 x the parameters: each fetched about once a step"));
	/* the advice is DeepSpeed's keys, sized from what was seen */
	assert_non_null(strstr(f->fix_deepspeed, "the fetches seen hold at most 1.23e+04 elements"));
	assert_non_null(strstr(f->fix_deepspeed, "\"stage3_prefetch_bucket_size\": 3e+04"));
	assert_non_null(strstr(f->fix_deepspeed, "\"stage3_param_persistence_threshold\""));
	assert_true(fixture_metric(f, "suggested_prefetch_bucket_size") == 30000);
	assert_true(fixture_metric(f, "params") == 303936);
	findings_free(list);
	fixture_free(a);
}

static void test_large_fetches_are_info(void **state)
{
	struct analysis_result *a = zero3(4096);
	findings_t *list;

	(void)state;
	a->buckets.fetch_elements_median = 2000000; /* 4 MB in bf16 */
	list = fixture_run(&rule_bucketed_fetch, a, NULL);
	assert_int_equal(findings_count(list), 1);
	assert_int_equal(findings_get(list, 0)->severity, RULE_INFO);
	findings_free(list);
	fixture_free(a);
}

static void test_refetch_in_backward_is_told(void **state)
{
	struct analysis_result *a = zero3(4096);
	findings_t *list;

	(void)state;
	a->buckets.gathered_elements_per_step = 2 * 303936 - 10000;
	list = fixture_run(&rule_bucketed_fetch, a, NULL);
	assert_int_equal(findings_count(list), 1);
	assert_non_null(strstr(findings_get(list, 0)->evidence, "1.97 x the parameters: backward fetches 97% of them"));
	findings_free(list);
	fixture_free(a);
}

/* ZeRO++ on (zero_quantized_weights, zero_hpz_partition_size 2): said with
 * its numbers; on small, latency-bound fetches qwZ's second gather is named
 * as the cost. */
static void test_zeropp_on_is_told(void **state)
{
	struct analysis_result *a = zero3(4096);
	findings_t *list;

	(void)state;
	a->buckets.quantized_fetches_per_step = 38;
	a->buckets.regather_fetches_per_step = 18;
	a->ncomms = 2;
	a->comms[0] = (struct analysis_comm){.nranks = 4, .role = ANALYSIS_ROLE_FSDP};
	a->comms[1] = (struct analysis_comm){.nranks = 2, .role = ANALYSIS_ROLE_FSDP_REGATHER};
	list = fixture_run(&rule_bucketed_fetch, a, NULL);
	assert_int_equal(findings_count(list), 1);
	const struct finding *f = findings_get(list, 0);
	assert_int_equal(f->severity, RULE_WARNING);
	assert_non_null(strstr(f->evidence, "ZeRO++: 38 fetches quantized (int8 values + fp32 scales: one fetch), 18 on "
					    "the 2-rank hpZ group"));
	assert_non_null(strstr(f->fix_deepspeed, "\"zero_quantized_weights\": false,  // on: 38 fetches"));
	assert_non_null(strstr(f->fix_deepspeed, "small fetches pay for the second"));
	assert_non_null(strstr(f->fix_deepspeed, "\"zero_hpz_partition_size\": 2  // on: 18 backward fetches"));
	findings_free(list);
	fixture_free(a);
}

/* ZeRO++ off: qwZ is advised where the fetches are bandwidth-bound, hpZ
 * where the ranks span nodes (a node's ranks: its size); neither on small
 * fetches of one host. */
static void test_zeropp_advised_where_it_applies(void **state)
{
	struct analysis_result *a = zero3(4096);
	struct source_summary src[8];
	findings_t *list;

	(void)state;
	list = fixture_run(&rule_bucketed_fetch, a, NULL);
	assert_null(strstr(findings_get(list, 0)->fix_deepspeed, "zero_quantized_weights"));
	assert_null(strstr(findings_get(list, 0)->fix_deepspeed, "zero_hpz_partition_size"));
	findings_free(list);
	memset(src, 0, sizeof src);
	for (int i = 0; i < 8; i++)
		strcpy(src[i].host, i < 4 ? "node-a" : "node-b");
	a->sources = src;
	a->nsources = 8;
	a->buckets.fetch_elements_median = 2000000;
	list = fixture_run(&rule_bucketed_fetch, a, NULL);
	const struct finding *f = findings_get(list, 0);
	assert_non_null(strstr(f->fix_deepspeed, "\"zero_quantized_weights\": true,  // qwZ: int8 fetches"));
	assert_non_null(strstr(f->fix_deepspeed, "\"zero_hpz_partition_size\": 4  // hpZ: the 4 ranks of a node"));
	findings_free(list);
	a->sources = NULL;
	a->nsources = 0;
	fixture_free(a);
}

static void test_absent_unless_bucketed(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a = fixture_new(&m); /* an FSDP verdict */
	findings_t *list = fixture_run(&rule_bucketed_fetch, a, NULL);

	(void)state;
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
	fixture_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_fetches_are_a_warning_with_the_numbers),
		cmocka_unit_test(test_large_fetches_are_info),
		cmocka_unit_test(test_refetch_in_backward_is_told),
		cmocka_unit_test(test_absent_unless_bucketed),
		cmocka_unit_test(test_zeropp_on_is_told),
		cmocka_unit_test(test_zeropp_advised_where_it_applies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
