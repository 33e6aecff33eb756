/*
 * analysis_ledger_test.c - the memory ledger against the background
 * article's worked example (7B parameters, 8 GPUs of 80 GB, 32 blocks,
 * Adam, bf16 / fp32 master), its input ranges and its extremes (defined,
 * saturated figures for any input: run under UBSan, a cast out of range
 * aborts), and the breakdown / MFU arithmetic.
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

/* ledger_check: each input at the edges of its range, and NaN / infinities. */
static void test_check_ranges(void **state)
{
	(void)state;
	struct ledger_input ok, in;
	ledger_input_defaults(&ok);
	ok.params = 7e9;
	ok.ranks = 8;
	ok.units = 32;
	assert_int_equal(ledger_check(&ok), LEDGER_OK);
	const double bad_params[] = {1e30, INFINITY, -INFINITY, NAN, -1, 0, 0.5, 1.0001e15};
	for (size_t i = 0; i < sizeof bad_params / sizeof bad_params[0]; i++) {
		in = ok;
		in.params = bad_params[i];
		in.units = 0;
		assert_int_equal(ledger_check(&in), LEDGER_PARAMS);
	}
	in = ok;
	in.params = LEDGER_PARAMS_MAX;
	assert_int_equal(ledger_check(&in), LEDGER_OK);
	in.params = 1;
	in.units = 0;
	assert_int_equal(ledger_check(&in), LEDGER_OK);
	const double bad_optimizer[] = {1e30, INFINITY, NAN, -1, 64.5};
	for (size_t i = 0; i < sizeof bad_optimizer / sizeof bad_optimizer[0]; i++) {
		in = ok;
		in.optimizer_bytes = bad_optimizer[i];
		assert_int_equal(ledger_check(&in), LEDGER_OPTIMIZER_BYTES);
	}
	in = ok;
	in.optimizer_bytes = LEDGER_OPTIMIZER_BYTES_MAX;
	assert_int_equal(ledger_check(&in), LEDGER_OK);
	in.optimizer_bytes = 0;
	assert_int_equal(ledger_check(&in), LEDGER_OK);
	const double bad_element[] = {0, 16, NAN, INFINITY, -2};
	for (size_t i = 0; i < sizeof bad_element / sizeof bad_element[0]; i++) {
		in = ok;
		in.param_bytes = bad_element[i];
		assert_int_equal(ledger_check(&in), LEDGER_PARAM_BYTES);
		in = ok;
		in.grad_bytes = bad_element[i];
		assert_int_equal(ledger_check(&in), LEDGER_GRAD_BYTES);
		in = ok;
		in.master_bytes = bad_element[i];
		assert_int_equal(ledger_check(&in), bad_element[i] == 0 ? LEDGER_OK : LEDGER_MASTER_BYTES);
	}
	in = ok;
	in.ranks = LEDGER_RANKS_MAX + 1;
	assert_int_equal(ledger_check(&in), LEDGER_RANKS);
	in = ok;
	in.params = 100;
	in.units = 101;
	assert_int_equal(ledger_check(&in), LEDGER_UNITS);
	in.units = 100;
	assert_int_equal(ledger_check(&in), LEDGER_OK);
	in.largest_unit_params = 101;
	assert_int_equal(ledger_check(&in), LEDGER_LARGEST_UNIT);
	in.largest_unit_params = NAN;
	assert_int_equal(ledger_check(&in), LEDGER_LARGEST_UNIT);
	in = ok;
	in.prefetch = -1;
	assert_int_equal(ledger_check(&in), LEDGER_PREFETCH);
	in.prefetch = LEDGER_PREFETCH_MAX + 1;
	assert_int_equal(ledger_check(&in), LEDGER_PREFETCH);
	in = ok;
	in.gpu_mem_bytes = 2000000000000000000ull;
	assert_int_equal(ledger_check(&in), LEDGER_GPU_MEM);
}

/* The largest inputs ledger_check accepts: exact figures, none saturated. */
static void test_largest_valid(void **state)
{
	(void)state;
	struct ledger_input in;
	struct analysis_ledger l;
	ledger_input_defaults(&in);
	in.params = LEDGER_PARAMS_MAX;
	in.ranks = 1;
	in.units = 1;
	in.prefetch = LEDGER_PREFETCH_MAX;
	in.param_bytes = in.grad_bytes = in.master_bytes = LEDGER_ELEMENT_BYTES_MAX;
	in.optimizer_bytes = LEDGER_OPTIMIZER_BYTES_MAX;
	in.gpu_mem_bytes = (uint64_t)LEDGER_GPU_MEM_MAX;
	assert_int_equal(ledger_check(&in), LEDGER_OK);
	ledger_compute(&in, &l);
	assert_int_equal(l.params, 1000000000000000ull);
	assert_int_equal(l.persistent_bytes_per_rank, 88000000000000000ull);   /* 88 B x P */
	assert_int_equal(l.transient_bytes_per_rank, 520000000000000000ull);   /* 8 B x P x 65 */
	assert_int_equal(l.peak_state_bytes_per_rank, 608000000000000000ull);
	assert_int_equal(l.headroom_bytes, 392000000000000000ll);
	assert_int_equal(l.model_wire_bytes_per_step, 24000000000000000ull);
	assert_int_equal(l.ddp_persistent_bytes_per_rank, 88000000000000000ull);
}

/* Out of range, the figures saturate (a cast would be undefined). */
static void test_extremes_saturate(void **state)
{
	(void)state;
	struct ledger_input in;
	struct analysis_ledger l;
	ledger_input_defaults(&in);
	in.params = 1e30;
	in.ranks = 8;
	in.units = 32;
	in.gpu_mem_bytes = 80000000000ull;
	ledger_compute(&in, &l);
	assert_int_equal(l.params, UINT64_MAX);
	assert_int_equal(l.persistent_bytes_per_rank, UINT64_MAX);
	assert_int_equal(l.transient_bytes_per_rank, UINT64_MAX);
	assert_int_equal(l.peak_state_bytes_per_rank, UINT64_MAX);
	assert_true(l.headroom_bytes == INT64_MIN);
	assert_int_equal(l.ddp_persistent_bytes_per_rank, UINT64_MAX);
	in.params = INFINITY;
	ledger_compute(&in, &l);
	assert_int_equal(l.persistent_bytes_per_rank, UINT64_MAX);
	in.params = NAN;
	ledger_compute(&in, &l);
	assert_int_equal(l.params, 0);
	assert_int_equal(l.persistent_bytes_per_rank, 0);
	assert_int_equal(l.largest_unit_params, 0);
	in.params = 7e9;
	in.optimizer_bytes = 1e30;
	ledger_compute(&in, &l);
	assert_int_equal(l.persistent_bytes_per_rank, UINT64_MAX);
	assert_int_equal(l.transient_bytes_per_rank, 875000000ull);
	in.optimizer_bytes = -1e30;
	ledger_compute(&in, &l);
	assert_int_equal(l.persistent_bytes_per_rank, 0);
	/* a GPU larger than INT64_MAX bytes: the headroom saturates high */
	in.optimizer_bytes = 8;
	in.gpu_mem_bytes = UINT64_MAX;
	ledger_compute(&in, &l);
	assert_true(l.headroom_bytes == INT64_MAX);
	in.gpu_mem_bytes = 1;
	in.params = 1e19; /* peak state far beyond the GPU, within uint64_t for none of it */
	ledger_compute(&in, &l);
	assert_true(l.headroom_bytes == INT64_MIN);
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
		cmocka_unit_test(test_check_ranges),
		cmocka_unit_test(test_largest_valid),
		cmocka_unit_test(test_extremes_saturate),
		cmocka_unit_test(test_breakdown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
