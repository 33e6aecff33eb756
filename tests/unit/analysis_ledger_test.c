/*
 * analysis_ledger_test.c - the memory ledger against the background
 * article's worked example (7B parameters, 8 GPUs of 80 GB, 32 blocks,
 * Adam, bf16 / fp32 master) and the breakdown / MFU arithmetic.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/breakdown.h"
#include "collector/ledger.h"

#define GB 1e9

static void test_worked_example(void **state)
{
	(void)state;
	struct ledger_input in;
	ledger_input_defaults(&in);
	in.params = 7e9;
	in.ranks = 8;
	in.units = 32;
	in.gpu_mem_bytes = 80000000000ull;
	struct analysis_ledger l;
	ledger_compute(&in, &l);
	/* persistent = 112 GB / 8 = 14 GB per GPU */
	assert_int_equal(l.persistent_bytes_per_rank, 14000000000ull);
	/* unit = 7B / 32 = 0.219B; transient = 2 bytes x U x 2 = 0.875 GB ("0.9 GB") */
	assert_int_equal(l.largest_unit_params, 218750000ull);
	assert_int_equal(l.transient_bytes_per_rank, 875000000ull);
	/* peak state ~ 15 GB, leaving ~ 65 GB */
	assert_int_equal(l.peak_state_bytes_per_rank, 14875000000ull);
	assert_true(fabs((double)l.headroom_bytes / GB - 65.125) < 1e-9);
	/* wire: 3 x 14 GB against DDP's 28 GB */
	assert_int_equal(l.model_wire_bytes_per_step, 42000000000ull);
	assert_int_equal(l.wire_bytes_per_step, 42000000000ull);
	assert_int_equal(l.ddp_wire_bytes_per_step, 28000000000ull);
	/* DDP would hold 112 GB per GPU; the whole model as one unit: 14 GB transient */
	assert_int_equal(l.ddp_persistent_bytes_per_rank, 112000000000ull);
	assert_int_equal(l.whole_model_transient_bytes, 14000000000ull);
}

static void test_variants(void **state)
{
	(void)state;
	struct ledger_input in;
	ledger_input_defaults(&in);
	in.params = 1e9;
	in.ranks = 4;
	in.largest_unit_params = 1e8;
	in.prefetch = 0;
	in.optimizer_bytes = 4; /* SGD with momentum */
	struct analysis_ledger l;
	ledger_compute(&in, &l);
	assert_int_equal(l.persistent_bytes_per_rank, 3000000000ull); /* 12 P / 4 */
	assert_int_equal(l.transient_bytes_per_rank, 200000000ull);
	assert_int_equal(l.headroom_bytes, 0); /* no GPU size given */
	/* no ranks: one */
	in.ranks = 0;
	ledger_compute(&in, &l);
	assert_int_equal(l.ranks, 1);
	assert_int_equal(l.persistent_bytes_per_rank, 12000000000ull);
}

static void test_breakdown(void **state)
{
	(void)state;
	struct analysis_options o;
	analysis_options_init(&o);
	struct analysis_breakdown b;
	breakdown_compute(1000000000ull, 600000000ull, 300000000ull, 0, 8, &o, &b);
	assert_int_equal(b.idle_ns, 100000000ull);
	assert_true(b.mfu < 0);
	/* 6 P tokens: 7e9 params, 1M tokens a step, 1 s, 8 GPUs at 1e15 */
	o.tokens_per_step = 1e6;
	o.peak_flops = 1e15;
	breakdown_compute(1000000000ull, 600000000ull, 300000000ull, 7000000000ull, 8, &o, &b);
	assert_true(fabs(b.flops_per_step - 4.2e16) < 1e6);
	assert_true(fabs(b.mfu - 4.2e16 / 8e15) < 1e-9);
	/* given FLOPs win over tokens */
	o.flops_per_step = 4e15;
	breakdown_compute(2000000000ull, 0, 0, 7000000000ull, 8, &o, &b);
	assert_true(fabs(b.mfu - 0.25) < 1e-9);
	assert_int_equal(b.idle_ns, 2000000000ull);
	/* compute and exposure beyond the step: idle 0 */
	breakdown_compute(100, 80, 40, 0, 1, &o, &b);
	assert_int_equal(b.idle_ns, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_worked_example),
		cmocka_unit_test(test_variants),
		cmocka_unit_test(test_breakdown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
