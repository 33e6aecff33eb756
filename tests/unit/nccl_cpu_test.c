/* nccl_cpu_test: the CPU stand-in for the NCCL API (fsdp_ref/nccl_cpu/).
 *
 * Ranks are real processes: each case forks N children that join one
 * communicator and run a whole batch of operations, checking every result
 * against a naive computation done independently here (reductions folded
 * in rank order, fp16/bf16 rounded by a different algorithm than the
 * library's). A child exits 0 when every check held; the parent checks each
 * child's status and never waits on a child forever.
 *
 * The link model is only checked as a lower bound: elapsed time from the
 * last rank's arrival is at least latency + bytes / bandwidth. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <nccl.h>

/* ---- checks inside a child --------------------------------------------- */

static int g_rank = -1;
static int g_failures;

/* Report one failed check as a single write, so that the messages of
 * ranks failing at the same moment do not interleave. */
static void check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
{
	if (g_failures++ >= 20)
		return;
	char msg[1024];
	int n = snprintf(msg, sizeof(msg), "rank %d: %s:%d: %s: ", g_rank, file, line, cond);
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof(msg) - 1)
		n += vsnprintf(msg + n, sizeof(msg) - 1 - (size_t)n, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n > sizeof(msg) - 2)
		n = (int)sizeof(msg) - 2;
	msg[n++] = '\n';
	ssize_t w = write(2, msg, (size_t)n);
	(void)w;
}

#define CHECK(cond, ...)                                                                                               \
	do {                                                                                                           \
		if (!(cond))                                                                                           \
			check_failed(__FILE__, __LINE__, #cond, __VA_ARGS__);                                          \
	} while (0)

/* cmocka's assertions must not run in a child (they would unwind into the
 * child's copy of the test runner): a child gives up with exit status 3. */
#define CHILD_REQUIRE(cond)                                                                                            \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			check_failed(__FILE__, __LINE__, #cond, "giving up");                                          \
			_exit(3);                                                                                      \
		}                                                                                                      \
	} while (0)

#define NCCL_OK(call)                                                                                                  \
	do {                                                                                                           \
		ncclResult_t r_ = (call);                                                                              \
		CHECK(r_ == ncclSuccess, "%s = %d (%s)", #call, (int)r_, ncclGetLastError(NULL));                      \
	} while (0)

#define NCCL_IS(expected, call)                                                                                        \
	do {                                                                                                           \
		ncclResult_t r_ = (call);                                                                              \
		CHECK(r_ == (expected), "%s = %d, expected %d (%s)", #call, (int)r_, (int)(expected),                  \
		      ncclGetLastError(NULL));                                                                         \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

/* ---- forking ranks ------------------------------------------------------ */

struct rank_ctx {
	int rank;
	int nranks;
	ncclUniqueId id;
	void *arg;
};

typedef void (*rank_main_fn)(struct rank_ctx *ctx);

/* Expected end of a child: an exit status, or killed by a signal. */
#define EXPECT_EXIT(code) (code)
#define EXPECT_SIGNAL(sig) (1000 + (sig))

/* Fork nranks children running fn (all sharing one fresh unique id, made
 * after the caller set the environment), wait for them for at most limit_s
 * seconds (then kill them and fail), and check every child ended as
 * expect[rank] says (NULL: all exit 0). The id is returned in *id_out. */
static void run_ranks_expect(int nranks, rank_main_fn fn, void *arg, int limit_s, const int *expect,
			     ncclUniqueId *id_out)
{
	ncclUniqueId id;
	assert_int_equal(ncclGetUniqueId(&id), ncclSuccess);
	if (id_out)
		*id_out = id;
	pid_t pids[64];
	fflush(stdout);
	fflush(stderr);
	for (int r = 0; r < nranks; r++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct rank_ctx ctx = {.rank = r, .nranks = nranks, .id = id, .arg = arg};
			g_rank = r;
			g_failures = 0;
			fn(&ctx);
			fflush(stderr);
			exit(g_failures ? 1 : 0);
		}
		pids[r] = pid;
	}
	int status[64], done[64] = {0}, left = nranks;
	uint64_t deadline = now_ns() + (uint64_t)limit_s * 1000000000ull;
	while (left > 0 && now_ns() < deadline) {
		for (int r = 0; r < nranks; r++) {
			if (done[r])
				continue;
			pid_t w = waitpid(pids[r], &status[r], WNOHANG);
			if (w == pids[r]) {
				done[r] = 1;
				left--;
			}
		}
		if (left)
			sleep_ms(2);
	}
	for (int r = 0; r < nranks; r++) {
		if (!done[r]) {
			kill(pids[r], SIGKILL);
			waitpid(pids[r], &status[r], 0);
			fail_msg("rank %d of %d still running after %d s: killed", r, nranks, limit_s);
		}
	}
	for (int r = 0; r < nranks; r++) {
		int want = expect ? expect[r] : 0;
		if (want >= 1000) {
			if (!WIFSIGNALED(status[r]) || WTERMSIG(status[r]) != want - 1000)
				fail_msg("rank %d of %d: expected death by signal %d, status 0x%x", r, nranks,
					 want - 1000, status[r]);
		} else if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]) != want) {
			fail_msg("rank %d of %d: expected exit %d, status 0x%x (see stderr)", r, nranks, want,
				 status[r]);
		}
	}
}

static void run_ranks(int nranks, rank_main_fn fn, void *arg, int limit_s)
{
	run_ranks_expect(nranks, fn, arg, limit_s, NULL, NULL);
}

/* Shared between the forked ranks of one case. */
static void *shared_alloc(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 0, bytes);
	return p;
}

/* Environment of the correctness tests: no link-model delay, tiny staging
 * chunks (every count above a few hundred crosses chunk boundaries). */
static void env_fast(const char *chunk_bytes)
{
	setenv("FSDP_REF_LINK_LATENCY_US", "0", 1);
	setenv("FSDP_REF_LINK_GBPS", "inf", 1);
	setenv("FSDP_REF_NCCL_TIMEOUT_S", "30", 1);
	if (chunk_bytes)
		setenv("FSDP_REF_NCCL_CHUNK_BYTES", chunk_bytes, 1);
	else
		unsetenv("FSDP_REF_NCCL_CHUNK_BYTES");
}

static ncclComm_t init_comm(struct rank_ctx *ctx)
{
	ncclComm_t comm = NULL;
	NCCL_OK(ncclCommInitRank(&comm, ctx->nranks, ctx->id, ctx->rank));
	if (!comm) {
		fflush(stderr);
		exit(2);
	}
	return comm;
}

/* ---- reference arithmetic ---------------------------------------------- */

static const ncclDataType_t all_dtypes[] = {ncclInt8,	 ncclUint8,    ncclInt32,     ncclUint32,
					    ncclInt64,	 ncclUint64,   ncclFloat16,   ncclFloat32,
					    ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
#define N_DTYPES (sizeof(all_dtypes) / sizeof(all_dtypes[0]))
static const ncclRedOp_t all_ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
#define N_OPS (sizeof(all_ops) / sizeof(all_ops[0]))

static size_t dtype_size(ncclDataType_t t)
{
	switch (t) {
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
	default:
		return 8;
	}
}

static int dtype_is_signed_int(ncclDataType_t t)
{
	return t == ncclInt8 || t == ncclInt32 || t == ncclInt64;
}

static int dtype_is_int(ncclDataType_t t)
{
	return t <= ncclUint64;
}

static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t elem_hash(uint64_t seed, int rank, size_t index)
{
	return mix64(seed ^ mix64(((uint64_t)rank << 48) ^ (uint64_t)index));
}

/* Decode binary16 / bfloat16 with ldexp: independent of the library. */
static double half_value(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
	return (h & 0x8000) ? -v : v;
}

static double bf16_value(uint16_t b)
{
	int e = (b >> 7) & 255, m = b & 127;
	double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
	return (b & 0x8000) ? -v : v;
}

/* Round a float to a format with mbits mantissa bits and minimum normal
 * exponent emin, to nearest even, by scaling into an integer and using
 * nearbyint (the default rounding mode is to nearest even); returns the
 * bits. Independent of the library's bit tricks. */
static uint16_t round_to_small_float(float f, int mbits, int emin, int ebias, int emax_field)
{
	uint16_t sign = signbit(f) ? 0x8000 : 0;
	uint16_t inf = (uint16_t)(emax_field << mbits);
	if (isnan(f))
		return (uint16_t)(sign | inf | (1u << (mbits - 1)));
	double a = fabs((double)f);
	if (a == 0)
		return sign;
	int e;
	frexp(a, &e);
	int exp = e - 1 < emin ? emin : e - 1;
	double ulp = ldexp(1.0, exp - mbits);
	double v = nearbyint(a / ulp) * ulp;
	if (isinf(a) || v >= ldexp(1.0, emax_field - ebias))
		return (uint16_t)(sign | inf);
	if (v < ldexp(1.0, emin))
		return (uint16_t)(sign | (uint16_t)(v / ldexp(1.0, emin - mbits)));
	frexp(v, &e);
	exp = e - 1;
	uint16_t mant = (uint16_t)(v / ldexp(1.0, exp - mbits) - ldexp(1.0, mbits));
	return (uint16_t)(sign | (uint16_t)((exp + ebias) << mbits) | mant);
}

/* fp8: e4m3 (bias 7, no infinities, S.1111.111 is NaN) and e5m2 (bias 15,
 * IEEE-like), decoded with ldexp. */
static double fp8_value(ncclDataType_t t, uint8_t b)
{
	int e4 = t == ncclFloat8e4m3, mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
	int e = (b & 0x7f) >> mbits, m = b & ((1 << mbits) - 1);
	double v;
	if (e4 && (b & 0x7f) == 0x7f)
		v = NAN;
	else if (!e4 && e == 31)
		v = m ? NAN : INFINITY;
	else
		v = e == 0 ? ldexp(m, 1 - bias - mbits) : ldexp((1 << mbits) + m, e - bias - mbits);
	return (b & 0x80) ? -v : v;
}

/* The nearest finite fp8 value by search over every code, ties to the even
 * code; beyond the largest finite value it saturates (__NV_SATFINITE). */
static uint8_t to_fp8(ncclDataType_t t, float f)
{
	uint8_t sign = signbit(f) ? 0x80 : 0;
	if (isnan(f))
		return (uint8_t)(sign | 0x7f);
	double a = fabs((double)f), best_d = INFINITY;
	uint8_t best = 0;
	for (unsigned c = 0; c < 0x80; c++) {
		double v = fp8_value(t, (uint8_t)c);
		if (isnan(v) || isinf(v))
			continue;
		double d = fabs(v - a);
		if (d < best_d || (d == best_d && !(c & 1))) {
			best_d = d;
			best = (uint8_t)c;
		}
	}
	return (uint8_t)(sign | best);
}

static uint16_t to_half(float f)
{
	return round_to_small_float(f, 10, -14, 15, 31);
}

static uint16_t to_bf16(float f)
{
	return round_to_small_float(f, 7, -126, 127, 255);
}

/* The input element `index` of rank `rank` for a case (seed). Prod inputs
 * stay near 1 so products of 8 stay finite in every float format. */
static void gen_elem(ncclDataType_t t, ncclRedOp_t op, uint64_t seed, int rank, size_t index, void *out)
{
	uint64_t h = elem_hash(seed, rank, index);
	int prod = op == ncclProd;
	switch (t) {
	case ncclFloat16: {
		uint16_t sign = (uint16_t)((h & 1) << 15);
		uint16_t exp = (uint16_t)(prod ? 14 + (h >> 1) % 2 : 12 + (h >> 1) % 6);
		uint16_t v = (uint16_t)(sign | (exp << 10) | ((h >> 8) & 0x3ff));
		memcpy(out, &v, 2);
		break;
	}
	case ncclBfloat16: {
		uint16_t sign = (uint16_t)((h & 1) << 15);
		uint16_t exp = (uint16_t)(prod ? 126 + (h >> 1) % 2 : 124 + (h >> 1) % 6);
		uint16_t v = (uint16_t)(sign | (exp << 7) | ((h >> 8) & 0x7f));
		memcpy(out, &v, 2);
		break;
	}
	case ncclFloat8e4m3:
	case ncclFloat8e5m2: {
		/* exponents near the bias (|x| in [1/8, 4), products near 1),
		 * every mantissa; the sums of 8 stay below the saturation */
		int bias = t == ncclFloat8e4m3 ? 7 : 15, mbits = t == ncclFloat8e4m3 ? 3 : 2;
		unsigned exp = (unsigned)(prod ? bias - 1 + (int)((h >> 1) % 2) : bias - 3 + (int)((h >> 1) % 5));
		uint8_t v = (uint8_t)(((h & 1) << 7) | (exp << mbits) | ((h >> 8) & ((1u << mbits) - 1)));
		memcpy(out, &v, 1);
		break;
	}
	case ncclFloat32: {
		float v = prod ? 0.5f + (float)(h >> 41) * 0x1p-23f * 1.5f
			       : (float)((int64_t)(h >> 40) - (1 << 23)) * 0x1p-20f;
		memcpy(out, &v, 4);
		break;
	}
	case ncclFloat64: {
		double v = prod ? 0.5 + (double)(h >> 11) * 0x1p-53 * 1.5
				: (double)((int64_t)(h >> 11) - (1ll << 52)) * 0x1p-49;
		memcpy(out, &v, 8);
		break;
	}
	default: /* integers: every bit pattern, so sums and products wrap */
		memcpy(out, &h, dtype_size(t));
		break;
	}
}

static void gen_buffer(ncclDataType_t t, ncclRedOp_t op, uint64_t seed, int rank, size_t first, size_t count, void *out)
{
	size_t es = dtype_size(t);
	for (size_t i = 0; i < count; i++)
		gen_elem(t, op, seed, rank, first + i, (char *)out + i * es);
}

/* An integer element as a 64-bit value, sign-extended when signed. */
static uint64_t int_load(ncclDataType_t t, const void *p)
{
	switch (t) {
	case ncclInt8:
		return (uint64_t)(int64_t) * (const int8_t *)p;
	case ncclUint8:
		return *(const uint8_t *)p;
	case ncclInt32:
		return (uint64_t)(int64_t) * (const int32_t *)p;
	case ncclUint32:
		return *(const uint32_t *)p;
	default:
		return *(const uint64_t *)p;
	}
}

static float small_float_load(ncclDataType_t t, const void *p)
{
	if (t == ncclFloat8e4m3 || t == ncclFloat8e5m2)
		return (float)fp8_value(t, *(const uint8_t *)p);
	uint16_t b;
	memcpy(&b, p, 2);
	return (float)(t == ncclFloat16 ? half_value(b) : bf16_value(b));
}

/* The expected result element: inputs `index` of ranks 0..n-1 folded in
 * rank order, written to out. */
static void naive_reduce_elem(ncclDataType_t t, ncclRedOp_t op, uint64_t seed, int n, size_t index, void *out)
{
	unsigned char x[8];
	size_t es = dtype_size(t);
	if (dtype_is_int(t)) {
		int bits = (int)es * 8;
		uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
		int is_signed = dtype_is_signed_int(t);
		uint64_t acc = 0;
		for (int j = 0; j < n; j++) {
			gen_elem(t, op, seed, j, index, x);
			uint64_t v = int_load(t, x);
			if (j == 0) {
				acc = v;
				continue;
			}
			switch (op) {
			case ncclProd:
				acc *= v;
				break;
			case ncclMax:
				acc = is_signed ? ((int64_t)v > (int64_t)acc ? v : acc) : (v > acc ? v : acc);
				break;
			case ncclMin:
				acc = is_signed ? ((int64_t)v < (int64_t)acc ? v : acc) : (v < acc ? v : acc);
				break;
			default:
				acc += v;
				break;
			}
			/* wrap to the element width, keep the sign extension */
			acc &= mask;
			if (is_signed && bits < 64 && (acc >> (bits - 1)) & 1)
				acc |= ~mask;
		}
		if (op == ncclAvg)
			acc = is_signed ? (uint64_t)((int64_t)acc / n) : acc / (uint64_t)n;
		memcpy(out, &acc, es); /* little-endian: the low bytes */
		return;
	}
	if (t == ncclFloat64) {
		double acc = 0, v;
		for (int j = 0; j < n; j++) {
			gen_elem(t, op, seed, j, index, &v);
			if (j == 0)
				acc = v;
			else if (op == ncclProd)
				acc = acc * v;
			else if (op == ncclMax)
				acc = v > acc ? v : acc;
			else if (op == ncclMin)
				acc = v < acc ? v : acc;
			else
				acc = acc + v;
		}
		if (op == ncclAvg)
			acc = acc / (double)n;
		memcpy(out, &acc, 8);
		return;
	}
	float acc = 0, v;
	for (int j = 0; j < n; j++) {
		gen_elem(t, op, seed, j, index, x);
		if (t == ncclFloat32)
			memcpy(&v, x, 4);
		else
			v = small_float_load(t, x);
		if (j == 0)
			acc = v;
		else if (op == ncclProd)
			acc = acc * v;
		else if (op == ncclMax)
			acc = v > acc ? v : acc;
		else if (op == ncclMin)
			acc = v < acc ? v : acc;
		else
			acc = acc + v;
	}
	if (op == ncclAvg)
		acc = acc / (float)n;
	if (t == ncclFloat32) {
		memcpy(out, &acc, 4);
	} else if (t == ncclFloat8e4m3 || t == ncclFloat8e5m2) {
		uint8_t b = to_fp8(t, acc);
		memcpy(out, &b, 1);
	} else {
		uint16_t b = t == ncclFloat16 ? to_half(acc) : to_bf16(acc);
		memcpy(out, &b, 2);
	}
}

/* ---- the collective matrix -------------------------------------------- */

enum coll { C_ALLREDUCE, C_REDUCE_SCATTER, C_REDUCE, C_ALLGATHER, C_BROADCAST, C_COUNT };
static const char *coll_names[] = {"AllReduce", "ReduceScatter", "Reduce", "AllGather", "Broadcast"};

static uint64_t case_seed(int coll, int dtype, int op, size_t count, int inplace)
{
	return mix64(((uint64_t)coll << 56) ^ ((uint64_t)dtype << 48) ^ ((uint64_t)op << 40) ^
		     ((uint64_t)inplace << 32) ^ count);
}

/* Run one collective and check this rank's result. */
static void check_collective(ncclComm_t comm, int rank, int n, int coll, ncclDataType_t t, ncclRedOp_t op, size_t count,
			     int inplace)
{
	size_t es = dtype_size(t);
	uint64_t seed = case_seed(coll, (int)t, (int)op, count, inplace);
	int root = (int)(count % (size_t)n);
	size_t send_elems = coll == C_REDUCE_SCATTER ? count * (size_t)n : count;
	size_t recv_elems = coll == C_ALLGATHER ? count * (size_t)n : count;
	size_t big = (send_elems > recv_elems ? send_elems : recv_elems) + 1;
	unsigned char *buf_a = malloc(big * es), *buf_b = malloc(big * es), *want = malloc(big * es);
	CHILD_REQUIRE(buf_a);
	CHILD_REQUIRE(buf_b);
	CHILD_REQUIRE(want);
	memset(buf_b, 0xa5, big * es);
	unsigned char *send = buf_a, *recv = buf_b;
	if (inplace) {
		/* The NCCL-documented in-place layouts. */
		recv = buf_a;
		if (coll == C_ALLGATHER)
			send = buf_a + (size_t)rank * count * es;
		if (coll == C_REDUCE_SCATTER)
			recv = buf_a + (size_t)rank * count * es;
	}
	gen_buffer(t, op, seed, rank, 0, send_elems, send);
	ncclResult_t res = ncclInternalError;
	switch (coll) {
	case C_ALLREDUCE:
		res = ncclAllReduce(send, recv, count, t, op, comm, NULL);
		for (size_t i = 0; i < count; i++)
			naive_reduce_elem(t, op, seed, n, i, want + i * es);
		break;
	case C_REDUCE_SCATTER:
		res = ncclReduceScatter(send, recv, count, t, op, comm, NULL);
		for (size_t i = 0; i < count; i++)
			naive_reduce_elem(t, op, seed, n, (size_t)rank * count + i, want + i * es);
		break;
	case C_REDUCE:
		/* Non-root ranks may pass recvbuff NULL (not in place). */
		res = ncclReduce(send, rank == root || inplace ? recv : NULL, count, t, op, root, comm, NULL);
		for (size_t i = 0; i < count; i++)
			naive_reduce_elem(t, op, seed, n, i, want + i * es);
		break;
	case C_ALLGATHER:
		res = ncclAllGather(send, recv, count, t, comm, NULL);
		for (int j = 0; j < n; j++)
			gen_buffer(t, op, seed, j, 0, count, want + (size_t)j * count * es);
		break;
	case C_BROADCAST:
		res = ncclBroadcast(send, recv, count, t, root, comm, NULL);
		gen_buffer(t, op, seed, root, 0, count, want);
		break;
	}
	CHECK(res == ncclSuccess, "%s n=%d dtype=%d op=%d count=%zu inplace=%d: %d (%s)", coll_names[coll], n, (int)t,
	      (int)op, count, inplace, (int)res, ncclGetLastError(NULL));
	int check = coll != C_REDUCE || rank == root;
	if (res == ncclSuccess && check) {
		for (size_t i = 0; i < recv_elems; i++) {
			if (memcmp(recv + i * es, want + i * es, es) != 0) {
				uint64_t got = 0, exp = 0;
				memcpy(&got, recv + i * es, es);
				memcpy(&exp, want + i * es, es);
				CHECK(0,
				      "%s n=%d dtype=%d op=%d count=%zu inplace=%d: element %zu is 0x%llx, expected "
				      "0x%llx",
				      coll_names[coll], n, (int)t, (int)op, count, inplace, i, (unsigned long long)got,
				      (unsigned long long)exp);
				break;
			}
		}
		/* Out of place, nothing past the result may be touched. */
		if (!inplace)
			CHECK(recv[recv_elems * es] == 0xa5, "%s wrote past recvbuff", coll_names[coll]);
	}
	free(buf_a);
	free(buf_b);
	free(want);
}

static const size_t matrix_counts[] = {1, 7, 1023, 2500};

static void matrix_rank(struct rank_ctx *ctx)
{
	ncclComm_t comm = init_comm(ctx);
	int n = ctx->nranks, rank = ctx->rank, count_n;
	NCCL_OK(ncclCommCount(comm, &count_n));
	CHECK(count_n == n, "count %d", count_n);
	for (int coll = 0; coll < C_COUNT; coll++) {
		int reduces = coll <= C_REDUCE;
		for (size_t d = 0; d < N_DTYPES; d++) {
			for (size_t o = 0; o < (reduces ? N_OPS : 1); o++) {
				for (size_t c = 0; c < sizeof(matrix_counts) / sizeof(matrix_counts[0]); c++) {
					for (int inplace = 0; inplace < 2; inplace++)
						check_collective(comm, rank, n, coll, all_dtypes[d], all_ops[o],
								 matrix_counts[c], inplace);
				}
			}
		}
	}
	/* count 0 is legal and must not touch the buffers */
	NCCL_OK(ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, comm, NULL));
	NCCL_OK(ncclAllGather(NULL, NULL, 0, ncclInt8, comm, NULL));
	NCCL_OK(ncclReduceScatter(NULL, NULL, 0, ncclFloat64, ncclMax, comm, NULL));
	NCCL_OK(ncclBroadcast(NULL, NULL, 0, ncclUint8, 0, comm, NULL));
	NCCL_OK(ncclReduce(NULL, NULL, 0, ncclBfloat16, ncclAvg, 0, comm, NULL));
	NCCL_OK(ncclCommFinalize(comm));
	NCCL_OK(ncclCommDestroy(comm));
}

/* One cmocka test per rank count, so a failure names N. */
static void test_collectives_matrix(void **state)
{
	int n = (int)(intptr_t)*state;
	env_fast("2048");
	run_ranks(n, matrix_rank, NULL, 60);
}

/* ---- large buffers with the default staging chunk ---------------------- */

static void large_rank(struct rank_ctx *ctx)
{
	ncclComm_t comm = init_comm(ctx);
	int n = ctx->nranks, rank = ctx->rank;
	/* 20 MB AllReduce, 8 MB per rank AllGather / ReduceScatter inputs:
	 * tens of chunks of the default 512 KiB. Checked by sampling every
	 * 97th element plus the first and last (the naive fold is slow). */
	struct {
		int coll;
		ncclDataType_t t;
		ncclRedOp_t op;
		size_t count;
	} cases[] = {
	    {C_ALLREDUCE, ncclFloat32, ncclSum, 5000001},      {C_ALLGATHER, ncclBfloat16, ncclSum, 1000003},
	    {C_REDUCE_SCATTER, ncclFloat64, ncclMax, 1000003}, {C_BROADCAST, ncclUint8, ncclSum, 9000001},
	    {C_REDUCE, ncclFloat16, ncclAvg, 3000001},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		int coll = cases[k].coll;
		ncclDataType_t t = cases[k].t;
		ncclRedOp_t op = cases[k].op;
		size_t count = cases[k].count, es = dtype_size(t);
		uint64_t seed = case_seed(coll, (int)t, (int)op, count, 0) ^ 0x1234;
		int root = n - 1;
		size_t send_elems = coll == C_REDUCE_SCATTER ? count * (size_t)n : count;
		size_t recv_elems = coll == C_ALLGATHER ? count * (size_t)n : count;
		unsigned char *send = malloc(send_elems * es), *recv = malloc(recv_elems * es);
		CHILD_REQUIRE(send);
		CHILD_REQUIRE(recv);
		gen_buffer(t, op, seed, rank, 0, send_elems, send);
		switch (coll) {
		case C_ALLREDUCE:
			NCCL_OK(ncclAllReduce(send, recv, count, t, op, comm, NULL));
			break;
		case C_ALLGATHER:
			NCCL_OK(ncclAllGather(send, recv, count, t, comm, NULL));
			break;
		case C_REDUCE_SCATTER:
			NCCL_OK(ncclReduceScatter(send, recv, count, t, op, comm, NULL));
			break;
		case C_BROADCAST:
			NCCL_OK(ncclBroadcast(send, recv, count, t, root, comm, NULL));
			break;
		case C_REDUCE:
			NCCL_OK(ncclReduce(send, recv, count, t, op, root, comm, NULL));
			break;
		}
		int check = coll != C_REDUCE || rank == root;
		for (size_t i = 0; check; i += 97) {
			if (i >= recv_elems)
				i = recv_elems - 1; /* always check the last element */
			unsigned char want[8];
			if (coll == C_ALLGATHER)
				gen_elem(t, op, seed, (int)(i / count), i % count, want);
			else if (coll == C_BROADCAST)
				gen_elem(t, op, seed, root, i, want);
			else
				naive_reduce_elem(t, op, seed, n,
						  coll == C_REDUCE_SCATTER ? (size_t)rank * count + i : i, want);
			if (memcmp(want, recv + i * es, es) != 0) {
				CHECK(0, "large %s: element %zu differs", coll_names[coll], i);
				break;
			}
			if (i == recv_elems - 1)
				break;
		}
		free(send);
		free(recv);
	}
	NCCL_OK(ncclCommDestroy(comm));
}

static void test_large_buffers(void **state)
{
	(void)state;
	env_fast(NULL);
	run_ranks(3, large_rank, NULL, 60);
}

/* ---- groups and Send/Recv ------------------------------------------------ */

static void group_rank(struct rank_ctx *ctx)
{
	ncclComm_t comm = init_comm(ctx);
	int n = ctx->nranks, rank = ctx->rank;
	enum { COUNT = 3001, P2P = 20011 };
	/* a: AllReduce input; b: its output, then the AllGather's input (so the
	 * AllGather sees the AllReduce's result only if they run in order);
	 * c: AllGather output, then the ReduceScatter input. */
	int32_t *a = malloc(COUNT * sizeof(int32_t)), *b = malloc(COUNT * sizeof(int32_t));
	int32_t *c = malloc((size_t)n * COUNT * sizeof(int32_t)), *d = malloc(COUNT * sizeof(int32_t));
	float *p2p_out = malloc(P2P * sizeof(float)), *p2p_in = malloc(P2P * sizeof(float));
	float *self_out = malloc(100 * sizeof(float)), *self_in = malloc(100 * sizeof(float));
	double bcast[5] = {0};
	for (int i = 0; i < COUNT; i++)
		a[i] = rank * 1000 + i;
	memset(b, 0xff, COUNT * sizeof(int32_t));
	for (int i = 0; i < P2P; i++)
		p2p_out[i] = (float)(rank * 100000 + i);
	for (int i = 0; i < 100; i++)
		self_out[i] = (float)(-rank - i);
	if (rank == n - 1)
		for (int i = 0; i < 5; i++)
			bcast[i] = 0.5 * i + rank;
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;

	NCCL_OK(ncclGroupStart());
	NCCL_OK(ncclAllReduce(a, b, COUNT, ncclInt32, ncclSum, comm, NULL));
	NCCL_OK(ncclGroupStart()); /* nested: only the outermost end runs */
	/* Sends before the matching receives on every rank, larger than the
	 * per-pair ring: only concurrent progress completes them. */
	NCCL_OK(ncclSend(p2p_out, P2P, ncclFloat32, next, comm, NULL));
	if (n > 1) /* with one rank, `next` already is this rank */
		NCCL_OK(ncclSend(self_out, 100, ncclFloat32, rank, comm, NULL));
	NCCL_OK(ncclAllGather(b, c, COUNT, ncclInt32, comm, NULL));
	NCCL_OK(ncclGroupEnd());
	if (n > 1)
		NCCL_OK(ncclRecv(self_in, 100, ncclFloat32, rank, comm, NULL));
	NCCL_OK(ncclRecv(p2p_in, P2P, ncclFloat32, prev, comm, NULL));
	NCCL_OK(ncclReduceScatter(c, d, COUNT, ncclInt32, ncclMax, comm, NULL));
	NCCL_OK(ncclBcast(bcast, 5, ncclFloat64, n - 1, comm, NULL));
	CHECK(b[0] == -1, "a grouped call ran before ncclGroupEnd");
	NCCL_OK(ncclGroupEnd());

	int64_t sum_ranks = (int64_t)n * (n - 1) / 2;
	for (int i = 0; i < COUNT; i++) {
		int32_t want_b = (int32_t)(sum_ranks * 1000 + (int64_t)n * i);
		if (b[i] != want_b) {
			CHECK(0, "AllReduce in group: b[%d]=%d want %d", i, b[i], want_b);
			break;
		}
		if (d[i] != want_b) { /* max over identical gathered copies */
			CHECK(0, "ReduceScatter after AllGather in group: d[%d]=%d want %d", i, d[i], want_b);
			break;
		}
	}
	for (int j = 0; j < n; j++)
		CHECK(c[(size_t)j * COUNT + 5] == b[5], "AllGather in group saw the AllReduce result");
	for (int i = 0; i < P2P; i++) {
		if (p2p_in[i] != (float)(prev * 100000 + i)) {
			CHECK(0, "Recv from %d: [%d]=%g", prev, i, (double)p2p_in[i]);
			break;
		}
	}
	for (int i = 0; i < 100 && n > 1; i++)
		CHECK(self_in[i] == (float)(-rank - i), "self Recv [%d]", i);
	for (int i = 0; i < 5; i++)
		CHECK(bcast[i] == 0.5 * i + (n - 1), "Bcast [%d]=%g", i, bcast[i]);

	/* Send/Recv outside a group, message within the ring: a chain
	 * 0 -> 1 -> ... -> n-1 (each rank receives then forwards). */
	int64_t token = -1;
	if (rank > 0)
		NCCL_OK(ncclRecv(&token, 1, ncclInt64, rank - 1, comm, NULL));
	else
		token = 42;
	if (rank < n - 1) {
		token += 1;
		NCCL_OK(ncclSend(&token, 1, ncclInt64, rank + 1, comm, NULL));
	}
	CHECK(token == 42 + (rank < n - 1 ? rank + 1 : rank), "chain token %lld", (long long)token);

	/* A group in which a call fails its argument check is dropped whole
	 * (as in NCCL): GroupEnd reports the error and nothing ran. */
	int32_t untouched[4] = {7, 7, 7, 7}, one[4] = {1, 1, 1, 1};
	NCCL_OK(ncclGroupStart());
	NCCL_OK(ncclAllReduce(one, untouched, 4, ncclInt32, ncclSum, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclAllReduce(one, untouched, 4, (ncclDataType_t)ncclNumTypes, ncclSum, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclGroupEnd());
	CHECK(untouched[0] == 7, "a dropped group ran");
	/* the communicator is still fine */
	NCCL_OK(ncclAllReduce(one, untouched, 4, ncclInt32, ncclSum, comm, NULL));
	CHECK(untouched[3] == n, "AllReduce after a dropped group: %d", untouched[3]);
	/* mismatched Send/Recv sizes are reported, not silently truncated */
	if (n >= 2 && rank < 2) {
		float tmp[8] = {0};
		if (rank == 0)
			NCCL_OK(ncclSend(tmp, 8, ncclFloat32, 1, comm, NULL));
		else
			NCCL_IS(ncclInvalidUsage, ncclRecv(tmp, 4, ncclFloat32, 0, comm, NULL));
	}
	free(a);
	free(b);
	free(c);
	free(d);
	free(p2p_out);
	free(p2p_in);
	free(self_out);
	free(self_in);
	NCCL_OK(ncclCommDestroy(comm));
}

static void test_groups_and_p2p(void **state)
{
	(void)state;
	env_fast("2048");
	run_ranks(1, group_rank, NULL, 30);
	run_ranks(3, group_rank, NULL, 30);
	run_ranks(4, group_rank, NULL, 30);
}

/* ---- ncclCommSplit ------------------------------------------------------- */

static void split_rank(struct rank_ctx *ctx)
{
	ncclComm_t comm = init_comm(ctx);
	int n = ctx->nranks, rank = ctx->rank; /* n == 6 */
	/* colors by parity, rank n-1 opts out; keys reverse the order */
	int color = rank == n - 1 ? NCCL_SPLIT_NOCOLOR : rank % 2;
	ncclComm_t sub = (ncclComm_t)(uintptr_t)1;
	NCCL_OK(ncclCommSplit(comm, color, n - rank, &sub, NULL));
	if (color == NCCL_SPLIT_NOCOLOR) {
		CHECK(sub == NULL, "NOCOLOR gives a NULL comm");
	} else {
		/* color 0: parent ranks 4, 2, 0 (keys 2, 4, 6); color 1: 3, 1 */
		int members = color == 0 ? 3 : 2, want_rank = color == 0 ? (4 - rank) / 2 : (3 - rank) / 2;
		int got_n = -1, got_rank = -1;
		NCCL_OK(ncclCommCount(sub, &got_n));
		NCCL_OK(ncclCommUserRank(sub, &got_rank));
		CHECK(got_n == members && got_rank == want_rank, "split: n=%d rank=%d, want %d %d", got_n, got_rank,
		      members, want_rank);
		int32_t mine = rank, all[3] = {-1, -1, -1};
		NCCL_OK(ncclAllGather(&mine, all, 1, ncclInt32, sub, NULL));
		for (int j = 0; j < members; j++) {
			int32_t want = color == 0 ? 4 - 2 * j : 3 - 2 * j;
			CHECK(all[j] == want, "split member %d is parent rank %d, want %d", j, all[j], want);
		}
	}
	/* Equal keys: ties broken by parent rank. Two splits with the same
	 * color are two distinct communicators that can be used interleaved. */
	ncclComm_t s1 = NULL, s2 = NULL;
	NCCL_OK(ncclCommSplit(comm, 0, 0, &s1, NULL));
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	NCCL_OK(ncclCommSplit(comm, 0, 0, &s2, &config));
	if (s1 && s2) {
		int r1 = -1, r2 = -1;
		NCCL_OK(ncclCommUserRank(s1, &r1));
		NCCL_OK(ncclCommUserRank(s2, &r2));
		CHECK(r1 == rank && r2 == rank, "tie order: %d %d", r1, r2);
		int64_t x1 = rank, x2 = 10 * rank;
		NCCL_OK(ncclGroupStart());
		NCCL_OK(ncclAllReduce(&x1, &x1, 1, ncclInt64, ncclSum, s1, NULL));
		NCCL_OK(ncclAllReduce(&x2, &x2, 1, ncclInt64, ncclSum, s2, NULL));
		NCCL_OK(ncclGroupEnd());
		CHECK(x1 == n * (n - 1) / 2 && x2 == 10 * n * (n - 1) / 2, "two split comms: %lld %lld", (long long)x1,
		      (long long)x2);
		/* split of a split */
		ncclComm_t s3 = NULL;
		NCCL_OK(ncclCommSplit(s1, rank < 2 ? 7 : 8, rank, &s3, NULL));
		int c3 = 0;
		if (s3)
			NCCL_OK(ncclCommCount(s3, &c3));
		CHECK(c3 == (rank < 2 ? 2 : n - 2), "split of a split: %d", c3);
		ncclCommDestroy(s3);
	}
	/* An invalid color is reported on every rank (no rank is left waiting). */
	ncclComm_t bad = NULL;
	NCCL_IS(ncclInvalidArgument, ncclCommSplit(comm, rank == 1 ? -5 : 0, 0, &bad, NULL));
	CHECK(bad == NULL, "failed split yields NULL");
	ncclCommDestroy(s1);
	ncclCommDestroy(s2);
	ncclCommDestroy(sub);
	NCCL_OK(ncclCommDestroy(comm));
}

static void test_split(void **state)
{
	(void)state;
	env_fast(NULL);
	run_ranks(6, split_rank, NULL, 30);
}

/* ---- link model (lower bounds only) --------------------------------------- */

struct link_shared {
	uint64_t t_arrive[8]; /* when each rank was about to call */
};

#define LINK_LAT_US 3000.0
#define LINK_GBPS 0.5

static uint64_t model_ns(uint64_t wire_bytes)
{
	return (uint64_t)(LINK_LAT_US * 1000.0) + (uint64_t)((double)wire_bytes / LINK_GBPS);
}

/* Elapsed from the last arrival (written by each rank before its call) to
 * this rank's return must be at least the model. */
static void check_model(struct link_shared *sh, int n, int slot, uint64_t end, uint64_t want, const char *what)
{
	uint64_t last = 0;
	for (int r = 0; r < n; r++) {
		uint64_t t = __atomic_load_n(&sh[slot].t_arrive[r], __ATOMIC_SEQ_CST);
		last = t > last ? t : last;
	}
	CHECK(end >= last + want, "%s: done %.3f ms after the last arrival, model says >= %.3f ms", what,
	      (double)(end - last) / 1e6, (double)want / 1e6);
}

static void link_rank(struct rank_ctx *ctx)
{
	struct link_shared *sh = ctx->arg;
	ncclComm_t comm = init_comm(ctx);
	int n = ctx->nranks, rank = ctx->rank; /* n == 2 */
	enum { B = 250000 };
	unsigned char *send = calloc(B, 1), *recv = calloc((size_t)n * B, 1);
	CHILD_REQUIRE(send);
	CHILD_REQUIRE(recv);
	int slot = 0;
#define TIMED(what, want, ...)                                                                                         \
	do {                                                                                                           \
		if (rank == 1)                                                                                         \
			sleep_ms(20); /* rank 1 arrives last */                                                        \
		__atomic_store_n(&sh[slot].t_arrive[rank], now_ns(), __ATOMIC_SEQ_CST);                                \
		__VA_ARGS__;                                                                                           \
		check_model(sh, n, slot, now_ns(), (want), what);                                                      \
		slot++;                                                                                                \
	} while (0)
	TIMED("AllGather", model_ns((uint64_t)(n - 1) * B),
	      NCCL_OK(ncclAllGather(send, recv, B, ncclUint8, comm, NULL)));
	TIMED("ReduceScatter", model_ns((uint64_t)(n - 1) * B),
	      NCCL_OK(ncclReduceScatter(recv, send, B, ncclUint8, ncclSum, comm, NULL)));
	TIMED("AllReduce", model_ns(2ull * (n - 1) * B / n),
	      NCCL_OK(ncclAllReduce(send, send, B, ncclUint8, ncclSum, comm, NULL)));
	TIMED("Broadcast", model_ns(B), NCCL_OK(ncclBroadcast(send, send, B, ncclUint8, 0, comm, NULL)));
	TIMED("Reduce", model_ns(B), NCCL_OK(ncclReduce(send, recv, B, ncclUint8, ncclMax, 1, comm, NULL)));
	TIMED("small AllReduce", model_ns(2ull * (n - 1) * 4 / n),
	      NCCL_OK(ncclAllReduce(send, send, 1, ncclFloat32, ncclSum, comm, NULL)));
	/* a group pays one latency for the sum of its bytes */
	TIMED("group of 3 AllGathers", model_ns(3ull * (n - 1) * B), {
		NCCL_OK(ncclGroupStart());
		for (int k = 0; k < 3; k++)
			NCCL_OK(ncclAllGather(send, recv, B, ncclUint8, comm, NULL));
		NCCL_OK(ncclGroupEnd());
	});
	TIMED("Send/Recv", model_ns(B), {
		NCCL_OK(ncclGroupStart());
		NCCL_OK(ncclSend(send, B, ncclUint8, 1 - rank, comm, NULL));
		NCCL_OK(ncclRecv(recv, B, ncclUint8, 1 - rank, comm, NULL));
		NCCL_OK(ncclGroupEnd());
	});
#undef TIMED
	/* one rank: latency only */
	ncclComm_t solo = NULL;
	NCCL_OK(ncclCommSplit(comm, rank, 0, &solo, NULL));
	if (solo) {
		uint64_t t0 = now_ns();
		NCCL_OK(ncclAllReduce(send, send, B, ncclUint8, ncclSum, solo, NULL));
		CHECK(now_ns() - t0 >= model_ns(0), "one rank still pays the latency");
		ncclCommDestroy(solo);
	}
	free(send);
	free(recv);
	NCCL_OK(ncclCommDestroy(comm));
}

static void test_link_model(void **state)
{
	(void)state;
	env_fast(NULL);
	setenv("FSDP_REF_LINK_LATENCY_US", "3000", 1);
	setenv("FSDP_REF_LINK_GBPS", "0.5", 1);
	struct link_shared *sh = shared_alloc(sizeof(struct link_shared) * 16);
	run_ranks(2, link_rank, sh, 30);
	munmap(sh, sizeof(struct link_shared) * 16);
}

/* ---- failures: dead and silent peers, leaks in /dev/shm -------------------- */

static int shm_entry_exists(const ncclUniqueId *id)
{
	char path[96];
	int n = snprintf(path, sizeof(path), "/dev/shm/fss-nccl-");
	for (int i = 8; i < 24; i++)
		n += snprintf(path + n, sizeof(path) - (size_t)n, "%02x", (unsigned char)id->internal[i]);
	struct stat st;
	return stat(path, &st) == 0;
}

/* Rank n-1 dies (exit, or SIGKILL when arg says so) right after init;
 * the others must get ncclRemoteError naming the dead peer, soon. */
static void dead_peer_rank(struct rank_ctx *ctx)
{
	int by_signal = ctx->arg != NULL;
	ncclComm_t comm = init_comm(ctx);
	if (ctx->rank == ctx->nranks - 1) {
		if (by_signal)
			raise(SIGKILL);
		_exit(0); /* vanish without a word */
	}
	float x[64] = {0};
	NCCL_IS(ncclRemoteError, ncclAllReduce(x, x, 64, ncclFloat32, ncclSum, comm, NULL));
	const char *msg = ncclGetLastError(comm);
	CHECK(strstr(msg, "exited") || strstr(msg, "failed or aborted"), "message: %s", msg);
	ncclResult_t async = ncclSuccess;
	NCCL_OK(ncclCommGetAsyncError(comm, &async));
	CHECK(async == ncclRemoteError, "async error %d", (int)async);
	/* the communicator stays failed */
	NCCL_IS(ncclRemoteError, ncclAllGather(x, x, 1, ncclFloat32, comm, NULL));
	NCCL_OK(ncclCommAbort(comm));
}

/* Rank n-1 stays alive but arrives only after the others timed out (it
 * waits until they say so through shared memory, ctx->arg). */
static void silent_peer_rank(struct rank_ctx *ctx)
{
	int *gave_up = ctx->arg;
	ncclComm_t comm = init_comm(ctx);
	float x[4] = {0};
	if (ctx->rank == ctx->nranks - 1) {
		for (int waited = 0; __atomic_load_n(gave_up, __ATOMIC_SEQ_CST) < ctx->nranks - 1 && waited < 20000;
		     waited += 5)
			sleep_ms(5);
		/* The others timed out and flagged the communicator: the
		 * late rank fails at once instead of waiting for its own
		 * timeout. */
		NCCL_IS(ncclRemoteError, ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, NULL));
		CHECK(strstr(ncclGetLastError(NULL), "failed or aborted") != NULL, "message: %s",
		      ncclGetLastError(NULL));
	} else {
		NCCL_IS(ncclRemoteError, ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, NULL));
		CHECK(ncclGetLastError(NULL)[0] != '\0', "a message is left");
		__atomic_fetch_add(gave_up, 1, __ATOMIC_SEQ_CST);
	}
	NCCL_OK(ncclCommDestroy(comm));
}

/* Rank n-1 never joins: init times out on the others. */
static void missing_peer_rank(struct rank_ctx *ctx)
{
	if (ctx->rank == ctx->nranks - 1)
		return;
	ncclComm_t comm = (ncclComm_t)(uintptr_t)1;
	NCCL_IS(ncclRemoteError, ncclCommInitRank(&comm, ctx->nranks, ctx->id, ctx->rank));
	CHECK(comm == NULL, "failed init leaves *comm NULL");
	/* one rank times out; the other may see its abort flag first */
	const char *msg = ncclGetLastError(NULL);
	CHECK(strstr(msg, "timed out") || strstr(msg, "failed or aborted"), "message: %s", msg);
}

static void normal_rank(struct rank_ctx *ctx)
{
	ncclComm_t comm = init_comm(ctx);
	int x = 1;
	NCCL_OK(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL));
	CHECK(x == ctx->nranks, "x=%d", x);
	NCCL_OK(ncclCommDestroy(comm));
}

static void test_failures(void **state)
{
	(void)state;
	ncclUniqueId id;
	env_fast(NULL);
	run_ranks_expect(3, normal_rank, NULL, 30, NULL, &id);
	assert_false(shm_entry_exists(&id));

	setenv("FSDP_REF_NCCL_TIMEOUT_S", "20", 1); /* death is seen well before this */
	run_ranks_expect(3, dead_peer_rank, NULL, 30, NULL, &id);
	assert_false(shm_entry_exists(&id));
	int killed[3] = {0, 0, EXPECT_SIGNAL(SIGKILL)};
	run_ranks_expect(3, dead_peer_rank, (void *)1, 30, killed, &id);
	assert_false(shm_entry_exists(&id));

	setenv("FSDP_REF_NCCL_TIMEOUT_S", "1", 1);
	int *gave_up = shared_alloc(sizeof(int));
	run_ranks_expect(3, silent_peer_rank, gave_up, 30, NULL, &id);
	munmap(gave_up, sizeof(int));
	run_ranks_expect(3, missing_peer_rank, NULL, 30, NULL, &id);
	assert_false(shm_entry_exists(&id));
}

/* Ranks that call different collectives all fail with ncclInvalidUsage. */
static void mismatch_rank(struct rank_ctx *ctx)
{
	ncclComm_t comm = init_comm(ctx);
	float x[8] = {0};
	NCCL_IS(ncclInvalidUsage, ncclAllReduce(x, x, ctx->rank == 0 ? 5 : 6, ncclFloat32, ncclSum, comm, NULL));
	NCCL_OK(ncclCommDestroy(comm));
}

static void test_mismatched_calls(void **state)
{
	(void)state;
	env_fast(NULL);
	run_ranks(3, mismatch_rank, NULL, 30);
}

/* ---- invalid arguments (one process) ------------------------------------- */

static void invalid_rank(struct rank_ctx *ctx)
{
	(void)ctx;
	float x[4] = {0}, y[4] = {0};
	int v = 0;
	NCCL_OK(ncclGetVersion(&v));
	CHECK(v == NCCL_VERSION_CODE, "version %d", v);
	NCCL_IS(ncclInvalidArgument, ncclGetVersion(NULL));
	NCCL_IS(ncclInvalidArgument, ncclGetUniqueId(NULL));

	ncclUniqueId id, zero;
	memset(&zero, 0, sizeof(zero));
	NCCL_OK(ncclGetUniqueId(&id));
	ncclComm_t comm = NULL;
	NCCL_IS(ncclInvalidArgument, ncclCommInitRank(NULL, 1, id, 0));
	NCCL_IS(ncclInvalidArgument, ncclCommInitRank(&comm, 0, id, 0));
	NCCL_IS(ncclInvalidArgument, ncclCommInitRank(&comm, 1, id, 1));
	NCCL_IS(ncclInvalidArgument, ncclCommInitRank(&comm, 1, id, -1));
	NCCL_IS(ncclInvalidArgument, ncclCommInitRank(&comm, 100000, id, 0));
	NCCL_IS(ncclInvalidArgument, ncclCommInitRank(&comm, 1, zero, 0));
	ncclConfig_t bad_config;
	memset(&bad_config, 0, sizeof(bad_config));
	NCCL_IS(ncclInvalidArgument, ncclCommInitRankConfig(&comm, 1, id, 0, &bad_config));
	CHECK(strlen(ncclGetLastError(NULL)) > 0, "message after a failure");
	setenv("FSDP_REF_LINK_GBPS", "fast", 1);
	NCCL_IS(ncclInvalidArgument, ncclCommInitRank(&comm, 1, id, 0));
	CHECK(strstr(ncclGetLastError(NULL), "FSDP_REF_LINK_GBPS") != NULL, "%s", ncclGetLastError(NULL));
	setenv("FSDP_REF_LINK_GBPS", "inf", 1);
	setenv("FSDP_REF_NCCL_CHUNK_BYTES", "5", 1);
	NCCL_IS(ncclInvalidArgument, ncclGetUniqueId(&zero));
	unsetenv("FSDP_REF_NCCL_CHUNK_BYTES");

	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	config.blocking = 0;
	NCCL_OK(ncclCommInitRankConfig(&comm, 1, id, 0, &config));
	if (!comm)
		return;
	int dev = 7;
	NCCL_OK(ncclCommCuDevice(comm, &dev));
	CHECK(dev == -1, "device %d", dev);
	NCCL_IS(ncclInvalidArgument, ncclCommCount(NULL, &v));
	NCCL_IS(ncclInvalidArgument, ncclCommCount(comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclCommUserRank(NULL, &v));
	NCCL_IS(ncclInvalidArgument, ncclCommCuDevice(comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclCommGetAsyncError(NULL, NULL));

	NCCL_IS(ncclInvalidArgument, ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, NULL, NULL));
	NCCL_IS(ncclInvalidArgument, ncclAllReduce(x, y, 4, (ncclDataType_t)12, ncclSum, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclAllReduce(x, y, 4, (ncclDataType_t)-1, ncclSum, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclAllReduce(x, y, 4, ncclFloat32, ncclNumOps, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclAllReduce(x, y, 4, ncclFloat32, (ncclRedOp_t)-1, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclReduceScatter(x, y, 4, ncclFloat32, ncclMaxRedOp, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclAllReduce(x, y, SIZE_MAX, ncclFloat32, ncclSum, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclAllGather(x, y, SIZE_MAX / 2, ncclInt32, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclBroadcast(x, y, SIZE_MAX, ncclInt8, 0, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclAllReduce(NULL, y, 4, ncclFloat32, ncclSum, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclAllReduce(x, NULL, 4, ncclFloat32, ncclSum, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclBroadcast(x, y, 4, ncclFloat32, 1, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclBcast(x, 4, ncclFloat32, -1, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclReduce(x, y, 4, ncclFloat32, ncclSum, 1, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclSend(x, 4, ncclFloat32, 1, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclRecv(x, 4, ncclFloat32, -1, comm, NULL));
	NCCL_IS(ncclInvalidArgument, ncclCommSplit(comm, 0, 0, NULL, NULL));
	ncclComm_t none = (ncclComm_t)(uintptr_t)1;
	NCCL_IS(ncclInvalidArgument, ncclCommSplit(NULL, 0, 0, &none, NULL));
	CHECK(none == NULL, "failed split sets *newcomm = NULL");
	NCCL_IS(ncclInvalidUsage, ncclGroupEnd());
	/* none of that broke the communicator */
	x[0] = 3;
	NCCL_OK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm, NULL));
	CHECK(y[0] == 3, "y=%g", (double)y[0]);
	ncclResult_t async = ncclInternalError;
	NCCL_OK(ncclCommGetAsyncError(comm, &async));
	CHECK(async == ncclSuccess, "async %d", (int)async);
	NCCL_OK(ncclCommFinalize(comm));
	NCCL_IS(ncclInvalidUsage, ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm, NULL));
	NCCL_OK(ncclCommDestroy(comm));
	NCCL_OK(ncclCommDestroy(NULL));
	NCCL_OK(ncclCommAbort(NULL));

	ncclComm_t all[2] = {NULL, NULL};
	NCCL_IS(ncclInvalidUsage, ncclCommInitAll(all, 2, NULL));
	NCCL_IS(ncclInvalidArgument, ncclCommInitAll(all, 0, NULL));
	NCCL_OK(ncclCommInitAll(all, 1, NULL));
	if (all[0]) {
		int64_t z = 5;
		NCCL_OK(ncclAllReduce(&z, &z, 1, ncclInt64, ncclProd, all[0], NULL));
		CHECK(z == 5, "InitAll comm works");
		NCCL_OK(ncclCommDestroy(all[0]));
	}
}

static void test_invalid_arguments(void **state)
{
	(void)state;
	env_fast(NULL);
	run_ranks(1, invalid_rank, NULL, 30);
}

/* ---- threads: one communicator per thread ---------------------------------- */

struct thread_arg {
	ncclComm_t comm;
	int rank, nranks, scale, failures;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	for (int iter = 0; iter < 200; iter++) {
		int64_t x[3] = {a->rank * a->scale, iter, 1};
		ncclResult_t res = ncclAllReduce(x, x, 3, ncclInt64, ncclSum, a->comm, NULL);
		int64_t want0 = (int64_t)a->scale * a->nranks * (a->nranks - 1) / 2;
		if (res != ncclSuccess || x[0] != want0 || x[1] != (int64_t)iter * a->nranks || x[2] != a->nranks)
			a->failures++;
	}
	return NULL;
}

static void threads_rank(struct rank_ctx *ctx)
{
	ncclUniqueId *second_id = ctx->arg;
	ncclComm_t c1 = init_comm(ctx), c2 = NULL;
	NCCL_OK(ncclCommInitRank(&c2, ctx->nranks, *second_id, ctx->rank));
	if (!c2)
		return;
	struct thread_arg a1 = {c1, ctx->rank, ctx->nranks, 1, 0}, a2 = {c2, ctx->rank, ctx->nranks, 1000, 0};
	pthread_t t1, t2;
	CHECK(pthread_create(&t1, NULL, thread_main, &a1) == 0, "thread");
	CHECK(pthread_create(&t2, NULL, thread_main, &a2) == 0, "thread");
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	CHECK(a1.failures == 0 && a2.failures == 0, "thread failures %d %d", a1.failures, a2.failures);
	NCCL_OK(ncclCommDestroy(c1));
	NCCL_OK(ncclCommDestroy(c2));
}

static void test_threads(void **state)
{
	(void)state;
	env_fast(NULL);
	ncclUniqueId *second = shared_alloc(sizeof(*second));
	assert_int_equal(ncclGetUniqueId(second), ncclSuccess);
	run_ranks(3, threads_rank, second, 30);
	munmap(second, sizeof(*second));
}

/* ---- exports, error strings ----------------------------------------------- */

static void test_exports_and_strings(void **state)
{
	(void)state;
	static const char *names[] = {"GetVersion",
				      "GetUniqueId",
				      "CommInitRank",
				      "CommInitRankConfig",
				      "CommInitAll",
				      "CommSplit",
				      "CommFinalize",
				      "CommDestroy",
				      "CommAbort",
				      "CommCount",
				      "CommUserRank",
				      "CommCuDevice",
				      "CommGetAsyncError",
				      "AllGather",
				      "ReduceScatter",
				      "AllReduce",
				      "Broadcast",
				      "Bcast",
				      "Reduce",
				      "Send",
				      "Recv",
				      "GroupStart",
				      "GroupEnd",
				      "GetErrorString",
				      "GetLastError"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char plain[64], profiling[64];
		snprintf(plain, sizeof(plain), "nccl%s", names[i]);
		snprintf(profiling, sizeof(profiling), "pnccl%s", names[i]);
		void *a = dlsym(RTLD_DEFAULT, plain), *b = dlsym(RTLD_DEFAULT, profiling);
		if (!a || a != b)
			fail_msg("%s and %s must both exist and be the same function", plain, profiling);
	}
	for (int r = ncclSuccess; r <= ncclNumResults; r++)
		assert_true(strlen(ncclGetErrorString((ncclResult_t)r)) > 0);
	assert_string_equal(ncclGetErrorString(ncclSuccess), "no error");
	assert_string_equal(ncclGetErrorString(ncclRemoteError), "remote process exited or there was a network error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exports_and_strings),
	    cmocka_unit_test(test_invalid_arguments),
	    cmocka_unit_test_prestate(test_collectives_matrix, (void *)1),
	    cmocka_unit_test_prestate(test_collectives_matrix, (void *)2),
	    cmocka_unit_test_prestate(test_collectives_matrix, (void *)3),
	    cmocka_unit_test_prestate(test_collectives_matrix, (void *)4),
	    cmocka_unit_test_prestate(test_collectives_matrix, (void *)5),
	    cmocka_unit_test_prestate(test_collectives_matrix, (void *)6),
	    cmocka_unit_test_prestate(test_collectives_matrix, (void *)7),
	    cmocka_unit_test_prestate(test_collectives_matrix, (void *)8),
	    cmocka_unit_test(test_large_buffers),
	    cmocka_unit_test(test_groups_and_p2p),
	    cmocka_unit_test(test_split),
	    cmocka_unit_test(test_link_model),
	    cmocka_unit_test(test_mismatched_calls),
	    cmocka_unit_test(test_threads),
	    cmocka_unit_test(test_failures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
