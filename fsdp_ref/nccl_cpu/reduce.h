/* fsdp_ref/nccl_cpu/reduce.h: datatypes and the deterministic reduction.
 *
 * Every reduction in the stand-in goes through reduce_run, which folds its
 * sources strictly in the order given (the callers pass them in rank order
 * 0..n-1), so a result depends on nothing but the inputs: every rank that
 * computes an element gets the same bits, whatever the timing. */
#ifndef FSS_NCCL_CPU_REDUCE_H
#define FSS_NCCL_CPU_REDUCE_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes per element of a datatype, or 0 for a value outside ncclDataType_t. */
size_t reduce_dtype_size(int dtype);

/* Whether op is one of the built-in ncclSum/Prod/Max/Min/Avg. */
int reduce_op_valid(int op);

/* Reduce count elements: dst[i] = src[0][i] (op) src[1][i] (op) ... folded
 * left to right over nsrc sources. Integers wrap (two's complement); fp32
 * accumulates in fp32, fp64 in fp64, fp16/bf16 and the fp8 types in fp32
 * with one final round-to-nearest-even (fp8: saturating to the largest
 * finite value, as CUDA's __NV_SATFINITE conversions do). ncclAvg is the sum divided by divisor (integer
 * division truncates toward zero). src pointers must be aligned to the
 * element size; dst may have any alignment and may alias no source. */
void reduce_run(ncclDataType_t dtype, ncclRedOp_t op, int nsrc, const void *const *src, void *dst, size_t count,
		int divisor);

/* IEEE binary16 <-> binary32; the narrowing one rounds to nearest even. */
float reduce_half_to_float(uint16_t h);
uint16_t reduce_float_to_half(float f);
/* bfloat16 <-> binary32; the narrowing one rounds to nearest even. */
float reduce_bf16_to_float(uint16_t b);
uint16_t reduce_float_to_bf16(float f);
/* ncclFloat8e4m3 / ncclFloat8e5m2 <-> binary32; the narrowing one rounds to
 * nearest even and saturates to the largest finite value (NaN stays NaN). */
float reduce_fp8_to_float(ncclDataType_t dtype, uint8_t b);
uint8_t reduce_float_to_fp8(ncclDataType_t dtype, float f);

#endif
