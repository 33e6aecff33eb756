/*
 * mfu_test.c - the device table (collector/device_peak.c) and MFU's inputs
 * (collector/mfu.c) on hand-built results: which name gets which peak,
 * which input wins, what is said missing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "collector/analysis.h"
#include "collector/device_peak.h"
#include "collector/mfu.h"
#include "collector/source.h"
#include "common/record.h"

static const char *model_of(const char *name, int from_kineto)
{
	const struct device_peak *p = device_peak_find(name, from_kineto);

	return p ? p->model : NULL;
}

/* The names as CUDA reports them for each model of the table. */
static void test_table_matches_cuda_names(void **state)
{
	(void)state;
	assert_string_equal(model_of("NVIDIA H100 80GB HBM3", 0), "H100 SXM");
	assert_string_equal(model_of("NVIDIA H100 SXM5 80GB", 0), "H100 SXM");
	assert_string_equal(model_of("NVIDIA H100 PCIe", 0), "H100 PCIe");
	assert_string_equal(model_of("NVIDIA H200", 0), "H200 SXM");
	assert_string_equal(model_of("NVIDIA H200 NVL", 0), "H200 NVL");
	assert_string_equal(model_of("NVIDIA A100-SXM4-80GB", 0), "A100 SXM");
	assert_string_equal(model_of("NVIDIA A100-SXM4-40GB", 0), "A100 SXM");
	assert_string_equal(model_of("NVIDIA A100-PCIE-40GB", 0), "A100 PCIe");
	assert_string_equal(model_of("NVIDIA A100 80GB PCIe", 0), "A100 PCIe");
	assert_string_equal(model_of("NVIDIA B200", 0), "B200");
	assert_string_equal(model_of("nvidia h100 pcie", 0), "H100 PCIe"); /* case does not matter */
}

/* Dense, not with-sparsity, figures; SXM and PCIe apart. */
static void test_table_figures(void **state)
{
	(void)state;
	assert_true(device_peak_find("NVIDIA H100 80GB HBM3", 0)->bf16_flops == 989.5e12);
	assert_true(device_peak_find("NVIDIA H100 PCIe", 0)->bf16_flops == 756.5e12);
	assert_true(device_peak_find("NVIDIA H200", 0)->bf16_flops == 989.5e12);
	assert_true(device_peak_find("NVIDIA A100-SXM4-80GB", 0)->bf16_flops == 312e12);
	assert_true(device_peak_find("NVIDIA B200", 0)->bf16_flops == 2.25e15);
	assert_true(device_peak_find("AMD Instinct MI300X", 1)->bf16_flops == 1307.4e12);
	assert_non_null(strstr(device_peak_find("NVIDIA H100 PCIe", 0)->source, "NVIDIA H100"));
}

/* Unknown, ambiguous, look-alike names and the MI300X from CUDA: no peak. */
static void test_table_refuses(void **state)
{
	(void)state;
	assert_null(device_peak_find("NVIDIA H100", 0));      /* SXM or PCIe? */
	assert_null(device_peak_find("NVIDIA H100 NVL", 0));  /* not in the table */
	assert_null(device_peak_find("NVIDIA GH200 480GB", 0));
	assert_null(device_peak_find("NVIDIA GB200", 0));
	assert_null(device_peak_find("NVIDIA L40S", 0));
	assert_null(device_peak_find("NVIDIA A100", 0));
	assert_null(device_peak_find("AMD Instinct MI300X", 0)); /* only from a Kineto trace */
	assert_null(device_peak_find("", 1));
	assert_null(device_peak_find(NULL, 1));
}

/* A result with a step of 1 s on 8 ranks, P = 1e9, and sources whose
 * devices the test sets. */
static struct source_summary srcs[3];

static void result_init(struct analysis_result *r)
{
	memset(r, 0, sizeof *r);
	memset(srcs, 0, sizeof srcs);
	r->breakdown.step_ns = 1000000000ull;
	r->ledger.params = 1000000000ull;
	r->world_size = 8;
	r->ranks = 8;
	r->headline_rank = 1;
	r->sources = srcs;
	r->nsources = 3;
	for (int i = 0; i < 3; i++) {
		srcs[i].rank = i;
		srcs[i].device = -1;
	}
}

static void set_device(int i, const char *name, uint16_t origin)
{
	snprintf(srcs[i].device_name, sizeof srcs[i].device_name, "%s", name);
	srcs[i].device_origin = origin;
	srcs[i].device = i;
}

static void test_mfu_from_model_flops_and_table(void **state)
{
	struct analysis_result r;
	struct analysis_options o = {0};

	(void)state;
	result_init(&r);
	set_device(0, "NVIDIA H100 PCIe", FSS_DEVICE_CUPTI);
	set_device(1, "NVIDIA H100 80GB HBM3", FSS_DEVICE_CUPTI); /* the headline rank's */
	o.flops_per_step = 8 * 989.5e12 / 2;                       /* half the peak of 8 GPUs over 1 s */
	mfu_fill(&o, &r);
	assert_int_equal(r.mfu.missing, 0);
	assert_true(r.mfu.mfu > 0.4999999 && r.mfu.mfu < 0.5000001);
	assert_true(r.breakdown.mfu == r.mfu.mfu);
	assert_int_equal(r.mfu.peak_from, ANALYSIS_PEAK_TABLE);
	assert_int_equal(r.mfu.flops_from, ANALYSIS_FLOPS_OPTION);
	assert_string_equal(r.mfu.device_name, "NVIDIA H100 80GB HBM3");
	assert_int_equal(r.mfu.devices_differ, 1);
	assert_int_equal(r.mfu.ranks, 8);
	assert_string_equal(r.mfu.peak_source, "device table: H100 SXM dense BF16, NVIDIA H100 Tensor Core GPU datasheet");
}

static void test_mfu_from_tokens_and_option(void **state)
{
	struct analysis_result r;
	struct analysis_options o = {0};

	(void)state;
	result_init(&r);
	o.tokens_per_step = 1000;
	o.peak_flops = 6e12 / 8; /* 6 P T = 6 x 1e9 x 1000 over 1 s: MFU 1 on 8 GPUs */
	mfu_fill(&o, &r);
	assert_int_equal(r.mfu.missing, 0);
	assert_int_equal(r.mfu.flops_from, ANALYSIS_FLOPS_TOKENS);
	assert_true(r.mfu.model_flops == 6e12);
	assert_true(r.mfu.mfu > 0.9999999 && r.mfu.mfu < 1.0000001);
	assert_int_equal(r.mfu.peak_from, ANALYSIS_PEAK_OPTION);
	assert_string_equal(r.mfu.peak_source, "--peak-flops");
	assert_string_equal(r.mfu.device_name, ""); /* none recorded: --peak-flops needs none */
}

/* Each missing input is named, never guessed around. */
static void test_mfu_missing(void **state)
{
	struct analysis_result r;
	struct analysis_options o = {0};
	char text[512];

	(void)state;
	result_init(&r);
	mfu_fill(&o, &r);
	assert_true(r.mfu.mfu < 0 && r.breakdown.mfu < 0);
	assert_int_equal(r.mfu.missing, ANALYSIS_MFU_NO_FLOPS | ANALYSIS_MFU_NO_DEVICE);
	analysis_mfu_missing_text(&r.mfu, text, sizeof text);
	assert_non_null(strstr(text, "--model-flops or --tokens-per-step"));
	assert_non_null(strstr(text, "no device record names the GPU; give --peak-flops"));

	result_init(&r);
	r.ledger.params = 0;
	o.tokens_per_step = 1000;
	set_device(2, "NVIDIA L40S", FSS_DEVICE_CUPTI);
	mfu_fill(&o, &r);
	assert_int_equal(r.mfu.missing, ANALYSIS_MFU_NO_PARAMS | ANALYSIS_MFU_DEVICE_UNKNOWN);
	assert_string_equal(r.mfu.device_name, "NVIDIA L40S"); /* no headline device: the first one */
	analysis_mfu_missing_text(&r.mfu, text, sizeof text);
	assert_non_null(strstr(text, "\"NVIDIA L40S\" is not in the device table"));
	assert_string_equal(analysis_mfu_missing_name(1), "params");

	result_init(&r);
	r.breakdown.step_ns = 0;
	o = (struct analysis_options){.flops_per_step = 1e15, .peak_flops = 1e15};
	mfu_fill(&o, &r);
	assert_int_equal(r.mfu.missing, ANALYSIS_MFU_NO_STEP);
	assert_true(r.mfu.mfu < 0);
}

/* The MI300X: from a Kineto trace's deviceProperties, not from CUDA. */
static void test_mfu_kineto_device(void **state)
{
	struct analysis_result r;
	struct analysis_options o = {.flops_per_step = 1e15};

	(void)state;
	result_init(&r);
	set_device(1, "AMD Instinct MI300X", FSS_DEVICE_KINETO);
	mfu_fill(&o, &r);
	assert_int_equal(r.mfu.missing, 0);
	assert_int_equal(r.mfu.peak_from, ANALYSIS_PEAK_KINETO);
	assert_string_equal(r.mfu.peak_source, "Kineto deviceProperties: MI300X dense BF16, AMD Instinct MI300X datasheet");
	result_init(&r);
	set_device(1, "AMD Instinct MI300X", FSS_DEVICE_CUPTI);
	mfu_fill(&o, &r);
	assert_int_equal(r.mfu.missing, ANALYSIS_MFU_DEVICE_UNKNOWN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_matches_cuda_names),
		cmocka_unit_test(test_table_figures),
		cmocka_unit_test(test_table_refuses),
		cmocka_unit_test(test_mfu_from_model_flops_and_table),
		cmocka_unit_test(test_mfu_from_tokens_and_option),
		cmocka_unit_test(test_mfu_missing),
		cmocka_unit_test(test_mfu_kineto_device),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
