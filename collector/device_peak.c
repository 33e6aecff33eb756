/*
 * device_peak.c - the table of device_peak.h.
 *
 * Figures: dense BF16 Tensor Core peaks, half the with-sparsity figure
 * each NVIDIA datasheet prints (the datasheets mark that one with "*
 * with sparsity"):
 *   - NVIDIA H100 Tensor Core GPU datasheet: SXM 1,979 TFLOPS*, PCIe
 *     1,513 TFLOPS*;
 *   - NVIDIA H200 Tensor Core GPU datasheet: H200 SXM 1,979 TFLOPS*,
 *     H200 NVL 1,671 TFLOPS*;
 *   - NVIDIA A100 Tensor Core GPU datasheet: 312 TFLOPS dense (624*), the
 *     same for SXM4 and PCIe, 40 and 80 GB;
 *   - NVIDIA HGX B200 datasheet: 36 PFLOPS* for 8 B200 GPUs, 2.25 PFLOPS
 *     dense per GPU;
 *   - AMD Instinct MI300X datasheet: 1,307.4 TFLOPS dense BF16 (2,614.9
 *     with sparsity).
 * docs/report-schema.md ("mfu") lists the same table.
 *
 * Matching: the name, upper-cased, must hold every `must` word and none of
 * the `must_not` ones; the first rule that matches decides. CUDA names the
 * SXM H100 "NVIDIA H100 80GB HBM3" and the PCIe one "NVIDIA H100 PCIe";
 * "GH200" holds "H200" and "GB200" holds "B200": they are other products.
 */
#include "collector/device_peak.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>

#define NVIDIA_H100 "NVIDIA H100 Tensor Core GPU datasheet"
#define NVIDIA_H200 "NVIDIA H200 Tensor Core GPU datasheet"
#define NVIDIA_A100 "NVIDIA A100 Tensor Core GPU datasheet"
#define NVIDIA_B200 "NVIDIA HGX B200 datasheet"
#define AMD_MI300X "AMD Instinct MI300X datasheet"

static const struct device_peak peaks[] = {
    {"H100 SXM", 989.5e12, NVIDIA_H100, 0},
    {"H100 PCIe", 756.5e12, NVIDIA_H100, 0},
    {"H200 SXM", 989.5e12, NVIDIA_H200, 0},
    {"H200 NVL", 835.5e12, NVIDIA_H200, 0},
    {"A100 SXM", 312e12, NVIDIA_A100, 0},
    {"A100 PCIe", 312e12, NVIDIA_A100, 0},
    {"B200", 2.25e15, NVIDIA_B200, 0},
    {"MI300X", 1307.4e12, AMD_MI300X, 1},
};

enum { H100_SXM, H100_PCIE, H200, H200_NVL, A100_SXM, A100_PCIE, B200, MI300X };

static const struct {
	const char *must[2];
	const char *must_not[3];
	int entry;
} rules[] = {
    {{"H100", "PCIE"}, {"NVL"}, H100_PCIE},
    {{"H100", "HBM3"}, {"PCIE", "NVL", "GH100"}, H100_SXM},
    {{"H100", "SXM"}, {"PCIE", "NVL", "GH100"}, H100_SXM},
    {{"H200", "NVL"}, {"GH200"}, H200_NVL},
    {{"H200"}, {"NVL", "GH200"}, H200},
    {{"A100", "SXM"}, {0}, A100_SXM},
    {{"A100", "PCIE"}, {0}, A100_PCIE},
    {{"B200"}, {"GB200"}, B200},
    {{"MI300X"}, {0}, MI300X},
};

const struct device_peak *device_peak_find(const char *name, int from_kineto)
{
	char up[128];
	size_t n = 0;

	if (!name || !name[0])
		return NULL;
	for (; name[n] && n < sizeof(up) - 1; n++)
		up[n] = (char)toupper((unsigned char)name[n]);
	up[n] = 0;
	for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]); r++) {
		int ok = 1;

		for (size_t i = 0; ok && i < 2; i++)
			ok = !rules[r].must[i] || strstr(up, rules[r].must[i]);
		for (size_t i = 0; ok && i < 3; i++)
			ok = !rules[r].must_not[i] || !strstr(up, rules[r].must_not[i]);
		if (!ok)
			continue;
		if (peaks[rules[r].entry].kineto_only && !from_kineto)
			return NULL;
		return &peaks[rules[r].entry];
	}
	return NULL;
}
