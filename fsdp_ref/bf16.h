/* fsdp_ref/bf16.h: fp32 <-> bfloat16 on the host (bf16 = the top 16 bits of
 * an IEEE fp32). Shared by the CPU backend and host-side code; the CUDA
 * backend uses the toolkit's __float2bfloat16_rn, which rounds the same way. */
#ifndef FSDP_REF_BF16_H
#define FSDP_REF_BF16_H

#include <stdint.h>
#include <string.h>

/* fp32 -> bf16, round to nearest, ties to even; NaN stays a (quiet) NaN. */
static inline uint16_t bf16_from_float(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x0040u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/* bf16 -> fp32, exact. */
static inline float bf16_to_float(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

#endif /* FSDP_REF_BF16_H */
