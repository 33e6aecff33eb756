/* fsdp_ref/nccl_cpu/reduce.c: datatypes and the deterministic reduction. */
#include "fsdp_ref/nccl_cpu/reduce.h"

#include <math.h>
#include <string.h>

size_t reduce_dtype_size(int dtype)
{
	switch (dtype) {
	case ncclInt8:
	case ncclUint8:
	case ncclFloat8e4m3:
	case ncclFloat8e5m2:
		return 1;
	case ncclFloat16:
	case ncclBfloat16:
		return 2;
	case ncclInt32:
	case ncclUint32:
	case ncclFloat32:
		return 4;
	case ncclInt64:
	case ncclUint64:
	case ncclFloat64:
		return 8;
	default: /* anything outside ncclDataType_t */
		return 0;
	}
}

int reduce_op_valid(int op)
{
	return op >= ncclSum && op < ncclNumOps;
}

static inline uint32_t float_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float bits_float(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* After F. Giesen's half <-> float conversions (public domain): exact for
 * every half, including subnormals, infinities and NaNs. */
float reduce_half_to_float(uint16_t h)
{
	const uint32_t shifted_exp = 0x7c00u << 13;
	uint32_t o = (uint32_t)(h & 0x7fffu) << 13;
	uint32_t exp = shifted_exp & o;
	o += (uint32_t)(127 - 15) << 23;
	if (exp == shifted_exp) {
		o += (uint32_t)(128 - 16) << 23; /* Inf / NaN */
	} else if (exp == 0) {
		o += 1u << 23; /* zero / subnormal: renormalise with the FPU */
		o = float_bits(bits_float(o) - bits_float(113u << 23));
	}
	o |= (uint32_t)(h & 0x8000u) << 16;
	return bits_float(o);
}

uint16_t reduce_float_to_half(float f)
{
	const uint32_t f32_infinity = 255u << 23;
	const uint32_t f16_max = (127u + 16u) << 23;
	const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
	uint32_t x = float_bits(f);
	uint32_t sign = x & 0x80000000u;
	uint16_t o;
	x ^= sign;
	if (x >= f16_max) {
		o = x > f32_infinity ? 0x7e00 : 0x7c00; /* NaN stays NaN, rest is Inf */
	} else if (x < (113u << 23)) {
		/* Result is subnormal or zero: adding 0.5 makes the FPU round at
		 * the half's subnormal ulp (2^-24), to nearest even. */
		o = (uint16_t)(float_bits(bits_float(x) + bits_float(denorm_magic)) - denorm_magic);
	} else {
		uint32_t mant_odd = (x >> 13) & 1u;
		x -= 112u << 23;	/* rebias the exponent from 127 to 15 */
		x += 0xfffu + mant_odd; /* round to nearest, ties to even */
		o = (uint16_t)(x >> 13);
	}
	return (uint16_t)(o | (sign >> 16));
}

float reduce_bf16_to_float(uint16_t b)
{
	return bits_float((uint32_t)b << 16);
}

uint16_t reduce_float_to_bf16(float f)
{
	uint32_t x = float_bits(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN, sign kept */
	x += 0x7fffu + ((x >> 16) & 1u);	      /* round to nearest, ties to even */
	return (uint16_t)(x >> 16);
}

/* The two fp8 formats of NCCL 2.24+ (CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2):
 * e4m3 has bias 7, no infinities and one NaN per sign (S.1111.111), so its
 * largest finite value is 448; e5m2 has bias 15 and IEEE infinities and
 * NaNs (largest finite 57344). */
struct fp8_format {
	int mbits, bias;
	uint8_t max_code; /* largest finite magnitude */
};
static const struct fp8_format fp8_e4m3 = {3, 7, 0x7e};
static const struct fp8_format fp8_e5m2 = {2, 15, 0x7b};

static float fp8_to_float(const struct fp8_format *fmt, uint8_t b)
{
	int mbits = fmt->mbits, ebits = 7 - mbits;
	int e = (b >> mbits) & ((1 << ebits) - 1), m = b & ((1 << mbits) - 1);
	float v;
	if (fmt == &fp8_e4m3 && (b & 0x7f) == 0x7f)
		v = NAN;
	else if (fmt == &fp8_e5m2 && e == 31)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexpf((float)m, 1 - fmt->bias - mbits);
	else
		v = ldexpf((float)((1 << mbits) + m), e - fmt->bias - mbits);
	return (b & 0x80) ? -v : v;
}

/* Round to nearest even and saturate to the largest finite value (CUDA's
 * __NV_SATFINITE, which the __nv_fp8 constructors use); NaN stays NaN. */
static uint8_t float_to_fp8(const struct fp8_format *fmt, float f)
{
	uint8_t sign = signbit(f) ? 0x80 : 0;
	if (isnan(f))
		return (uint8_t)(sign | 0x7f);
	float a = fabsf(f), max = fp8_to_float(fmt, fmt->max_code);
	if (a == 0)
		return sign;
	if (a >= max)
		return (uint8_t)(sign | fmt->max_code);
	int mbits = fmt->mbits, e;
	frexpf(a, &e); /* a = m 2^e, m in [0.5, 1) */
	int exp = e - 1 < 1 - fmt->bias ? 1 - fmt->bias : e - 1;
	/* a / ulp is below 2^(mbits + 1): exact in a float, and nearbyintf
	 * rounds it to nearest even in the default rounding mode */
	unsigned q = (unsigned)nearbyintf(ldexpf(a, mbits - exp));
	unsigned code = (unsigned)(exp + fmt->bias - 1) * (1u << mbits) + q; /* q > 2^mbits - 1 carries into the exponent */
	if (code > fmt->max_code)
		code = fmt->max_code;
	return (uint8_t)(sign | code);
}

float reduce_fp8_to_float(ncclDataType_t dtype, uint8_t b)
{
	return fp8_to_float(dtype == ncclFloat8e5m2 ? &fp8_e5m2 : &fp8_e4m3, b);
}

uint8_t reduce_float_to_fp8(ncclDataType_t dtype, float f)
{
	return float_to_fp8(dtype == ncclFloat8e5m2 ? &fp8_e5m2 : &fp8_e4m3, f);
}

static inline float e4m3_load(uint8_t b)
{
	return fp8_to_float(&fp8_e4m3, b);
}

static inline uint8_t e4m3_store(float f)
{
	return float_to_fp8(&fp8_e4m3, f);
}

static inline float e5m2_load(uint8_t b)
{
	return fp8_to_float(&fp8_e5m2, b);
}

static inline uint8_t e5m2_store(float f)
{
	return float_to_fp8(&fp8_e5m2, f);
}

/* Elements per block: the accumulator stays in L1 while every source
 * streams through it once, and the inner loops vectorise. */
#define REDUCE_BLOCK 256

/* One reduction per (element type, accumulator type). LOAD widens an
 * element to the accumulator, STORE narrows it back; ADD/MUL define the
 * arithmetic (wrapping for integers), DIV the ncclAvg division. */
#define DEFINE_REDUCE(NAME, T, ACC, LOAD, STORE, ADD, MUL, DIV)                                                        \
	static void NAME(ncclRedOp_t op, int nsrc, const void *const *src, void *dst, size_t count, int divisor)       \
	{                                                                                                              \
		ACC acc[REDUCE_BLOCK];                                                                                 \
		T out[REDUCE_BLOCK];                                                                                   \
		for (size_t base = 0; base < count; base += REDUCE_BLOCK) {                                            \
			size_t m = count - base < REDUCE_BLOCK ? count - base : REDUCE_BLOCK;                          \
			const T *s0 = (const T *)src[0] + base;                                                        \
			for (size_t i = 0; i < m; i++)                                                                 \
				acc[i] = LOAD(s0[i]);                                                                  \
			for (int j = 1; j < nsrc; j++) {                                                               \
				const T *s = (const T *)src[j] + base;                                                 \
				switch (op) {                                                                          \
				case ncclProd:                                                                         \
					for (size_t i = 0; i < m; i++)                                                 \
						acc[i] = MUL(acc[i], LOAD(s[i]));                                      \
					break;                                                                         \
				case ncclMax:                                                                          \
					for (size_t i = 0; i < m; i++) {                                               \
						ACC v = LOAD(s[i]);                                                    \
						acc[i] = v > acc[i] ? v : acc[i];                                      \
					}                                                                              \
					break;                                                                         \
				case ncclMin:                                                                          \
					for (size_t i = 0; i < m; i++) {                                               \
						ACC v = LOAD(s[i]);                                                    \
						acc[i] = v < acc[i] ? v : acc[i];                                      \
					}                                                                              \
					break;                                                                         \
				default: /* ncclSum, ncclAvg */                                                        \
					for (size_t i = 0; i < m; i++)                                                 \
						acc[i] = ADD(acc[i], LOAD(s[i]));                                      \
					break;                                                                         \
				}                                                                                      \
			}                                                                                              \
			if (op == ncclAvg)                                                                             \
				for (size_t i = 0; i < m; i++)                                                         \
					acc[i] = DIV(acc[i], divisor);                                                 \
			for (size_t i = 0; i < m; i++)                                                                 \
				out[i] = STORE(acc[i]);                                                                \
			memcpy((char *)dst + base * sizeof(T), out, m * sizeof(T));                                    \
		}                                                                                                      \
	}

#define IDENTITY(x) (x)
/* Integer arithmetic goes through the unsigned type so that overflow
 * wraps instead of being undefined; "1u *" keeps 8-bit types from being
 * promoted to (signed) int before the multiply. Converting the result back
 * to a signed type is modulo 2^N with gcc and clang. */

#define I8_ADD(a, b) ((int8_t)((uint8_t)(a) + (uint8_t)(b)))
#define I8_MUL(a, b) ((int8_t)(1u * (uint8_t)(a) * (uint8_t)(b)))
#define I8_DIV(a, n) ((int8_t)((a) / (n)))
#define U8_ADD(a, b) ((uint8_t)((a) + (b)))
#define U8_MUL(a, b) ((uint8_t)(1u * (a) * (b)))
#define U8_DIV(a, n) ((uint8_t)((a) / (unsigned)(n)))
#define I32_ADD(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define I32_MUL(a, b) ((int32_t)((uint32_t)(a) * (uint32_t)(b)))
#define I32_DIV(a, n) ((int32_t)((a) / (int32_t)(n)))
#define U32_ADD(a, b) ((uint32_t)((a) + (b)))
#define U32_MUL(a, b) ((uint32_t)((a) * (b)))
#define U32_DIV(a, n) ((uint32_t)((a) / (uint32_t)(n)))
#define I64_ADD(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define I64_MUL(a, b) ((int64_t)((uint64_t)(a) * (uint64_t)(b)))
#define I64_DIV(a, n) ((int64_t)((a) / (int64_t)(n)))
#define U64_ADD(a, b) ((uint64_t)((a) + (b)))
#define U64_MUL(a, b) ((uint64_t)((a) * (b)))
#define U64_DIV(a, n) ((uint64_t)((a) / (uint64_t)(n)))
#define F_ADD(a, b) ((a) + (b))
#define F_MUL(a, b) ((a) * (b))
#define F32_DIV(a, n) ((a) / (float)(n))
#define F64_DIV(a, n) ((a) / (double)(n))

DEFINE_REDUCE(reduce_i8, int8_t, int8_t, IDENTITY, IDENTITY, I8_ADD, I8_MUL, I8_DIV)
DEFINE_REDUCE(reduce_u8, uint8_t, uint8_t, IDENTITY, IDENTITY, U8_ADD, U8_MUL, U8_DIV)
DEFINE_REDUCE(reduce_i32, int32_t, int32_t, IDENTITY, IDENTITY, I32_ADD, I32_MUL, I32_DIV)
DEFINE_REDUCE(reduce_u32, uint32_t, uint32_t, IDENTITY, IDENTITY, U32_ADD, U32_MUL, U32_DIV)
DEFINE_REDUCE(reduce_i64, int64_t, int64_t, IDENTITY, IDENTITY, I64_ADD, I64_MUL, I64_DIV)
DEFINE_REDUCE(reduce_u64, uint64_t, uint64_t, IDENTITY, IDENTITY, U64_ADD, U64_MUL, U64_DIV)
DEFINE_REDUCE(reduce_f32, float, float, IDENTITY, IDENTITY, F_ADD, F_MUL, F32_DIV)
DEFINE_REDUCE(reduce_f64, double, double, IDENTITY, IDENTITY, F_ADD, F_MUL, F64_DIV)
DEFINE_REDUCE(reduce_f16, uint16_t, float, reduce_half_to_float, reduce_float_to_half, F_ADD, F_MUL, F32_DIV)
DEFINE_REDUCE(reduce_bf16, uint16_t, float, reduce_bf16_to_float, reduce_float_to_bf16, F_ADD, F_MUL, F32_DIV)
DEFINE_REDUCE(reduce_e4m3, uint8_t, float, e4m3_load, e4m3_store, F_ADD, F_MUL, F32_DIV)
DEFINE_REDUCE(reduce_e5m2, uint8_t, float, e5m2_load, e5m2_store, F_ADD, F_MUL, F32_DIV)

void reduce_run(ncclDataType_t dtype, ncclRedOp_t op, int nsrc, const void *const *src, void *dst, size_t count,
		int divisor)
{
	switch (dtype) {
	case ncclInt8:
		reduce_i8(op, nsrc, src, dst, count, divisor);
		break;
	case ncclUint8:
		reduce_u8(op, nsrc, src, dst, count, divisor);
		break;
	case ncclInt32:
		reduce_i32(op, nsrc, src, dst, count, divisor);
		break;
	case ncclUint32:
		reduce_u32(op, nsrc, src, dst, count, divisor);
		break;
	case ncclInt64:
		reduce_i64(op, nsrc, src, dst, count, divisor);
		break;
	case ncclUint64:
		reduce_u64(op, nsrc, src, dst, count, divisor);
		break;
	case ncclFloat32:
		reduce_f32(op, nsrc, src, dst, count, divisor);
		break;
	case ncclFloat64:
		reduce_f64(op, nsrc, src, dst, count, divisor);
		break;
	case ncclFloat16:
		reduce_f16(op, nsrc, src, dst, count, divisor);
		break;
	case ncclBfloat16:
		reduce_bf16(op, nsrc, src, dst, count, divisor);
		break;
	case ncclFloat8e4m3:
		reduce_e4m3(op, nsrc, src, dst, count, divisor);
		break;
	case ncclFloat8e5m2:
		reduce_e5m2(op, nsrc, src, dst, count, divisor);
		break;
	default:
		break; /* rejected by the caller's argument check */
	}
}
