/*
 * analysis_reshard_test.c - reshard_after_forward from mirrored backward
 * gathers (collector/reshard.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/reshard.h"

#define R(e, n) {(e), (e) * 2, (n), 0}

static void test_policies(void **state)
{
	(void)state;
	struct reshard_gather fwd[] = {R(5000, 4), R(700, 4), R(700, 4), R(700, 4)};
	int32_t unit[8];
	struct analysis_reshard_info r;

	/* true: every block gathered again, in reverse order */
	struct reshard_gather bwd_true[] = {R(700, 4), R(700, 4), R(700, 4)};
	reshard_detect(fwd, 4, bwd_true, 3, 2.0, unit, &r);
	assert_int_equal(r.policy, ANALYSIS_RESHARD_TRUE);
	assert_int_equal(r.units, 3);
	assert_int_equal(r.resharded_units, 3);
	assert_int_equal(unit[0], 3);
	assert_int_equal(unit[1], 2);
	assert_int_equal(unit[2], 1);
	assert_int_equal(r.root_resharded, 0);
	assert_int_equal(r.retain_extra_bytes, 3 * 700 * 2);
	assert_int_equal(r.regather_bytes_per_step, 3 * 1400);
	assert_int_equal(r.reshard_extra_gathers, 0);

	/* false: none */
	reshard_detect(fwd, 4, NULL, 0, 2.0, unit, &r);
	assert_int_equal(r.policy, ANALYSIS_RESHARD_FALSE);
	assert_int_equal(r.retained_units, 3);
	assert_int_equal(r.reshard_extra_gathers, 3);
	assert_int_equal(r.reshard_extra_wire_bytes, 3 * 1400);

	/* group:2 — the backward gathers run on a 2-rank communicator */
	struct reshard_gather bwd_group[] = {R(700, 2), R(700, 2), R(700, 2)};
	reshard_detect(fwd, 4, bwd_group, 3, 2.0, unit, &r);
	assert_int_equal(r.policy, ANALYSIS_RESHARD_GROUP);
	assert_int_equal(r.group_size, 2);

	/* mixed: torchtitan keeps the last block */
	struct reshard_gather bwd_mixed[] = {R(700, 4), R(700, 4)};
	reshard_detect(fwd, 4, bwd_mixed, 2, 2.0, unit, &r);
	assert_int_equal(r.policy, ANALYSIS_RESHARD_MIXED);
	assert_int_equal(r.resharded_units, 2);
	assert_int_equal(r.retained_units, 1);
}

static void test_per_linear_mirror(void **state)
{
	(void)state;
	/* root + 2 blocks of [n q k v o g u d]; backward walks them reversed */
	uint64_t blk[8] = {128, 4096, 1024, 1024, 4096, 11008, 11008, 11008};
	struct reshard_gather fwd[17], bwd[16];
	fwd[0] = (struct reshard_gather)R(99999, 8);
	for (int l = 0; l < 2; l++)
		for (int k = 0; k < 8; k++)
			fwd[1 + 8 * l + k] = (struct reshard_gather)R(blk[k], 8);
	for (int i = 0; i < 16; i++)
		bwd[i] = fwd[16 - i];
	int32_t unit[16];
	struct analysis_reshard_info r;
	reshard_detect(fwd, 17, bwd, 16, 2.0, unit, &r);
	assert_int_equal(r.policy, ANALYSIS_RESHARD_TRUE);
	for (int i = 0; i < 16; i++)
		assert_int_equal(unit[i], 16 - i);
	/* backward in a different order (prefetch reordering): still matched */
	struct reshard_gather swapped[16];
	for (int i = 0; i < 16; i++)
		swapped[i] = bwd[i ^ 1];
	reshard_detect(fwd, 17, swapped, 16, 2.0, unit, &r);
	assert_int_equal(r.policy, ANALYSIS_RESHARD_TRUE);
	assert_int_equal(r.unmatched_backward, 0);
}

static void test_edge_cases(void **state)
{
	(void)state;
	int32_t unit[2];
	struct analysis_reshard_info r;
	/* one unit (wrap the whole model): the root alone, never resharded */
	struct reshard_gather one[] = {R(1000000, 4)};
	reshard_detect(one, 1, NULL, 0, 2.0, unit, &r);
	assert_int_equal(r.policy, ANALYSIS_RESHARD_UNKNOWN);
	/* a root that is resharded too (FSDP1 style) is counted */
	struct reshard_gather fwd[] = {R(5000, 4), R(700, 4)};
	struct reshard_gather bwd[] = {R(700, 4), R(5000, 4)};
	reshard_detect(fwd, 2, bwd, 2, 2.0, unit, &r);
	assert_int_equal(r.root_resharded, 1);
	assert_int_equal(r.units, 2);
	assert_int_equal(r.policy, ANALYSIS_RESHARD_TRUE);
	/* a backward gather that mirrors nothing */
	struct reshard_gather odd[] = {R(33, 4)};
	reshard_detect(fwd, 2, odd, 1, 2.0, unit, &r);
	assert_int_equal(r.unmatched_backward, 1);
	assert_int_equal(unit[0], -1);
	assert_int_equal(r.policy, ANALYSIS_RESHARD_FALSE);
	/* nothing at all */
	reshard_detect(NULL, 0, NULL, 0, 2.0, unit, &r);
	assert_int_equal(r.policy, ANALYSIS_RESHARD_UNKNOWN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_policies),
		cmocka_unit_test(test_per_linear_mirror),
		cmocka_unit_test(test_edge_cases),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
