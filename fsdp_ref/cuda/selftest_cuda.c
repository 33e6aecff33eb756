/* fsdp_ref_cuda_selftest: every op of the CUDA backend against the CPU
 * backend (the reference: fsdp_ref/backend_cpu.c), on random inputs.
 *
 * For each op: the same inputs go to both backends; the GPU op runs twice
 * and must give the same bits both times (backend.h: every reduction is
 * deterministic); then its output must match the CPU's within a tolerance,
 * measured as max |gpu - cpu| / max |cpu| over the output:
 *   0       ops that do the same float operations in the same order:
 *           embedding forward and backward, residual add, casts;
 *   1e-6    element-wise ops with expf / cos / fused multiply-adds (a few
 *           ulp apart): SwiGLU, rotary, Adam's fp32 state;
 *   2e-5    reductions over up to a few hundred terms in another order
 *           (matmuls, attention, RMSNorm, cross-entropy);
 *   8e-3    bf16 outputs (one bf16 ulp is 2^-8 relative: a master weight a
 *           few fp32 ulp away can round to the neighbouring bf16).
 * The matmuls run twice, on cuBLASLt and on classic cuBLAS
 * (FSDP_REF_CUDA_GEMM=classic); on Lt the result must also not depend on
 * the weight's alignment (backend_cuda.h: loss trajectories independent of
 * the wrap policy).
 *
 * Exit status: 0 all passed, 1 a failure, 77 no usable CUDA device (ctest
 * reports it as skipped). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "fsdp_ref/backend.h"
#include "fsdp_ref/bf16.h"
#include "fsdp_ref/cuda/backend_cuda.h"

#define TOL_EXACT 0.0
#define TOL_ULPS 1e-6
#define TOL_SUM 2e-5
#define TOL_BF16 8e-3

static const struct fsdp_backend *gpu = &fsdp_backend_cuda;
static const struct fsdp_backend *cpu = &fsdp_backend_cpu;
static int failures, checks;

/* ---- helpers -------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* Uniform in [-1, 1): xorshift64*, fixed seed, so every run sees the same inputs. */
static float rnd(void)
{
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  uint64_t r = rng_state * 0x2545f4914f6cdd1dull;
  return (float)((double)(r >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

static void *xmalloc(size_t bytes)
{
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "selftest: out of host memory\n");
    exit(1);
  }
  return p;
}

static float *random_floats(size_t n, float scale)
{
  float *x = xmalloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++)
    x[i] = scale * rnd();
  return x;
}

/* A parameter tensor in dtype dt (host bytes), from random floats. */
static void *random_param(size_t n, enum fsdp_dtype dt, float scale)
{
  float *f = random_floats(n, scale);
  if (dt == FSDP_DTYPE_FP32)
    return f;
  uint16_t *h = xmalloc(n * sizeof *h);
  for (size_t i = 0; i < n; i++)
    h[i] = bf16_from_float(f[i]);
  free(f);
  return h;
}

static void check_rc(int rc, const char *what)
{
  if (rc) {
    fprintf(stderr, "selftest: %s: %s\n", what, strerror(-rc));
    exit(1); /* the device is in an unknown state: nothing after this would mean anything */
  }
}

/* Device copy of `bytes` host bytes. */
static void *up(const void *host, size_t bytes)
{
  void *d = gpu->alloc(bytes);
  if (!d) {
    fprintf(stderr, "selftest: device alloc of %zu bytes failed\n", bytes);
    exit(1);
  }
  check_rc(gpu->memcpy_h2d(d, host, bytes), "memcpy_h2d");
  return d;
}

static void reupload(void *dev, const void *host, size_t bytes)
{
  check_rc(gpu->memcpy_h2d(dev, host, bytes), "memcpy_h2d");
}

/* Host copy of a device buffer, after synchronize() reported no error. */
static void *down(const void *dev, size_t bytes)
{
  void *h = xmalloc(bytes);
  check_rc(gpu->synchronize(), "synchronize (an op failed)");
  check_rc(gpu->memcpy_d2h(h, dev, bytes), "memcpy_d2h");
  return h;
}

static float *dup_floats(const float *x, size_t n)
{
  float *y = xmalloc(n * sizeof *y);
  memcpy(y, x, n * sizeof *y);
  return y;
}

static float *bf16_to_floats(const uint16_t *h, size_t n)
{
  float *f = xmalloc(n * sizeof *f);
  for (size_t i = 0; i < n; i++)
    f[i] = bf16_to_float(h[i]);
  return f;
}

static void report(int ok, const char *fmt_what, const char *detail)
{
  checks++;
  if (!ok)
    failures++;
  printf("  %-4s %-44s %s\n", ok ? "ok" : "FAIL", fmt_what, detail);
}

/* GPU result against the CPU reference; see the header for the metric. */
static void compare(const char *what, const float *got, const float *ref, size_t n, double tol)
{
  double max_diff = 0.0, max_ref = 0.0;
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    if (isfinite(ref[i]) != isfinite(got[i]) || isnan(ref[i]) != isnan(got[i])) {
      bad = 1;
      continue;
    }
    if (!isfinite(ref[i]))
      continue;
    double d = fabs((double)got[i] - (double)ref[i]);
    if (d > max_diff)
      max_diff = d;
    if (fabs((double)ref[i]) > max_ref)
      max_ref = fabs((double)ref[i]);
  }
  double rel = max_ref > 0.0 ? max_diff / max_ref : max_diff;
  char detail[160];
  snprintf(detail, sizeof detail, "max|diff| %.3g = %.3g x max|ref| %.3g (tol %.0e)%s", max_diff,
           rel, max_ref, tol, bad ? "; non-finite mismatch" : "");
  report(!bad && rel <= tol, what, detail);
}

/* Two GPU runs of the same op must agree bit for bit. */
static void same_bits(const char *what, const void *a, const void *b, size_t bytes)
{
  char name[96];
  snprintf(name, sizeof name, "%s: run-to-run bits", what);
  report(memcmp(a, b, bytes) == 0, name, memcmp(a, b, bytes) == 0 ? "identical" : "DIFFER");
}

static const char *dt_name(enum fsdp_dtype dt) { return dt == FSDP_DTYPE_BF16 ? "bf16" : "fp32"; }

/* ---- embedding -------------------------------------------------------------- */

static void test_embedding(enum fsdp_dtype wdt)
{
  const int V = 50, C = 70, M = 37;
  char name[80];
  void *wte = random_param((size_t)V * C, wdt, 1.0f);
  int32_t *tok = xmalloc((size_t)M * sizeof *tok);
  for (int m = 0; m < M; m++)
    tok[m] = (int32_t)((m * 7 + 3) % (V / 2)); /* repeats: rows receive several adds */
  float *dout = random_floats((size_t)M * C, 1.0f);
  size_t wbytes = (size_t)V * C * fsdp_dtype_size(wdt);

  float *ref = xmalloc((size_t)M * C * sizeof *ref), *dref = xmalloc((size_t)V * C * sizeof *dref);
  cpu->embedding_forward(ref, tok, wte, wdt, M, C);
  cpu->embedding_backward(dref, dout, tok, M, C, V);

  void *d_wte = up(wte, wbytes), *d_tok = up(tok, (size_t)M * sizeof *tok);
  float *d_dout = up(dout, (size_t)M * C * sizeof *dout);
  float *d_out = gpu->alloc((size_t)M * C * sizeof(float));
  float *d_dw = gpu->alloc((size_t)V * C * sizeof(float));
  float *got[2], *dgot[2];
  for (int rep = 0; rep < 2; rep++) {
    gpu->embedding_forward(d_out, d_tok, d_wte, wdt, M, C);
    gpu->embedding_backward(d_dw, d_dout, d_tok, M, C, V);
    got[rep] = down(d_out, (size_t)M * C * sizeof(float));
    dgot[rep] = down(d_dw, (size_t)V * C * sizeof(float));
  }
  snprintf(name, sizeof name, "embedding_forward %s", dt_name(wdt));
  same_bits(name, got[0], got[1], (size_t)M * C * sizeof(float));
  compare(name, got[0], ref, (size_t)M * C, TOL_EXACT);
  snprintf(name, sizeof name, "embedding_backward (wte %s)", dt_name(wdt));
  same_bits(name, dgot[0], dgot[1], (size_t)V * C * sizeof(float));
  compare(name, dgot[0], dref, (size_t)V * C, TOL_EXACT);

  gpu->free(d_wte), gpu->free(d_tok), gpu->free(d_dout), gpu->free(d_out), gpu->free(d_dw);
  for (int rep = 0; rep < 2; rep++)
    free(got[rep]), free(dgot[rep]);
  free(wte), free(tok), free(dout), free(ref), free(dref);
}

/* ---- RMSNorm ------------------------------------------------------------------ */

static void test_rmsnorm(enum fsdp_dtype wdt)
{
  const int M = 37, C = 300;
  const float eps = 1e-5f;
  size_t n = (size_t)M * C;
  char name[80];
  float *in = random_floats(n, 2.0f), *dout = random_floats(n, 1.0f);
  float *din0 = random_floats(n, 0.5f); /* backward accumulates into din */
  void *w = random_param((size_t)C, wdt, 1.0f);
  size_t wbytes = (size_t)C * fsdp_dtype_size(wdt);

  float *out = xmalloc(n * sizeof *out), *rstd = xmalloc((size_t)M * sizeof *rstd);
  float *din = dup_floats(din0, n), *dw = xmalloc((size_t)C * sizeof *dw);
  cpu->rmsnorm_forward(out, rstd, in, w, wdt, M, C, eps);
  cpu->rmsnorm_backward(din, dw, dout, in, w, wdt, rstd, M, C);

  float *d_in = up(in, n * 4), *d_dout = up(dout, n * 4), *d_din = up(din0, n * 4);
  void *d_w = up(w, wbytes);
  float *d_out = gpu->alloc(n * 4), *d_rstd = gpu->alloc((size_t)M * 4), *d_dw = gpu->alloc((size_t)C * 4);
  float *g_out[2], *g_rstd[2], *g_din[2], *g_dw[2];
  for (int rep = 0; rep < 2; rep++) {
    reupload(d_din, din0, n * 4);
    gpu->rmsnorm_forward(d_out, d_rstd, d_in, d_w, wdt, M, C, eps);
    gpu->rmsnorm_backward(d_din, d_dw, d_dout, d_in, d_w, wdt, d_rstd, M, C);
    g_out[rep] = down(d_out, n * 4);
    g_rstd[rep] = down(d_rstd, (size_t)M * 4);
    g_din[rep] = down(d_din, n * 4);
    g_dw[rep] = down(d_dw, (size_t)C * 4);
  }
  snprintf(name, sizeof name, "rmsnorm_forward out (w %s)", dt_name(wdt));
  same_bits(name, g_out[0], g_out[1], n * 4);
  compare(name, g_out[0], out, n, TOL_SUM);
  snprintf(name, sizeof name, "rmsnorm_forward rstd (w %s)", dt_name(wdt));
  compare(name, g_rstd[0], rstd, (size_t)M, TOL_SUM);
  snprintf(name, sizeof name, "rmsnorm_backward din += (w %s)", dt_name(wdt));
  same_bits(name, g_din[0], g_din[1], n * 4);
  compare(name, g_din[0], din, n, TOL_SUM);
  snprintf(name, sizeof name, "rmsnorm_backward dw (w %s)", dt_name(wdt));
  same_bits(name, g_dw[0], g_dw[1], (size_t)C * 4);
  compare(name, g_dw[0], dw, (size_t)C, TOL_SUM);

  gpu->free(d_in), gpu->free(d_dout), gpu->free(d_din), gpu->free(d_w);
  gpu->free(d_out), gpu->free(d_rstd), gpu->free(d_dw);
  for (int rep = 0; rep < 2; rep++)
    free(g_out[rep]), free(g_rstd[rep]), free(g_din[rep]), free(g_dw[rep]);
  free(in), free(dout), free(din0), free(w), free(out), free(rstd), free(din), free(dw);
}

/* ---- matmul ------------------------------------------------------------------- */

static void test_matmul(enum fsdp_dtype wdt, int M, int K, int N, int accumulate,
                        const char *path)
{
  char name[96];
  size_t wn = (size_t)N * K;
  float *in = random_floats((size_t)M * K, 1.0f), *dout = random_floats((size_t)M * N, 1.0f);
  float *din0 = random_floats((size_t)M * K, 1.0f);
  void *w = random_param(wn, wdt, 0.5f);
  size_t wbytes = wn * fsdp_dtype_size(wdt);

  float *out = xmalloc((size_t)M * N * 4), *din = dup_floats(din0, (size_t)M * K);
  float *dw = xmalloc(wn * 4);
  cpu->matmul_forward(out, in, w, wdt, M, K, N);
  cpu->matmul_backward(din, dw, dout, in, w, wdt, M, K, N, accumulate);

  float *d_in = up(in, (size_t)M * K * 4), *d_dout = up(dout, (size_t)M * N * 4);
  float *d_din = up(din0, (size_t)M * K * 4);
  void *d_w = up(w, wbytes);
  float *d_out = gpu->alloc((size_t)M * N * 4), *d_dw = gpu->alloc(wn * 4);
  float *g_out[2], *g_din[2], *g_dw[2];
  int lt = 0;
  for (int rep = 0; rep < 2; rep++) {
    reupload(d_din, din0, (size_t)M * K * 4);
    gpu->matmul_forward(d_out, d_in, d_w, wdt, M, K, N);
    lt = fsdp_cuda_last_gemm_was_lt();
    gpu->matmul_backward(d_din, d_dw, d_dout, d_in, d_w, wdt, M, K, N, accumulate);
    g_out[rep] = down(d_out, (size_t)M * N * 4);
    g_din[rep] = down(d_din, (size_t)M * K * 4);
    g_dw[rep] = down(d_dw, wn * 4);
  }
  const char *ran = lt ? "lt" : "classic";
  snprintf(name, sizeof name, "matmul %dx%dx%d %s fwd [%s ran %s]", M, K, N, dt_name(wdt), path, ran);
  same_bits(name, g_out[0], g_out[1], (size_t)M * N * 4);
  compare(name, g_out[0], out, (size_t)M * N, TOL_SUM);
  snprintf(name, sizeof name, "matmul %dx%dx%d %s din%s [%s]", M, K, N, dt_name(wdt),
           accumulate ? "+=" : "=", path);
  same_bits(name, g_din[0], g_din[1], (size_t)M * K * 4);
  compare(name, g_din[0], din, (size_t)M * K, TOL_SUM);
  snprintf(name, sizeof name, "matmul %dx%dx%d %s dw [%s]", M, K, N, dt_name(wdt), path);
  same_bits(name, g_dw[0], g_dw[1], wn * 4);
  compare(name, g_dw[0], dw, wn, TOL_SUM);

  /* The same fp32 weight and input 4 bytes past a 256-byte boundary, as a
   * tensor deep inside a flat parameter buffer can be: same bits on Lt. */
  if (wdt == FSDP_DTYPE_FP32) {
    float *d_wbig = gpu->alloc(wbytes + 4), *d_inbig = gpu->alloc((size_t)M * K * 4 + 4);
    check_rc(gpu->memcpy_h2d(d_wbig + 1, w, wbytes), "memcpy_h2d");
    check_rc(gpu->memcpy_h2d(d_inbig + 1, in, (size_t)M * K * 4), "memcpy_h2d");
    gpu->matmul_forward(d_out, d_inbig + 1, d_wbig + 1, wdt, M, K, N);
    float *g_mis = down(d_out, (size_t)M * N * 4);
    int same = memcmp(g_mis, g_out[0], (size_t)M * N * 4) == 0;
    snprintf(name, sizeof name, "matmul %dx%dx%d misaligned == aligned [%s]", M, K, N, path);
    if (lt) {
      report(same, name, same ? "identical bits" : "DIFFER: wrap policy would change the loss");
    } else {
      /* Classic cuBLAS makes no such promise: report, do not fail. */
      printf("  note %-44s %s\n", name, same ? "identical bits" : "differ (classic cuBLAS)");
      compare(name, g_mis, out, (size_t)M * N, TOL_SUM);
    }
    free(g_mis);
    gpu->free(d_wbig), gpu->free(d_inbig);
  }

  gpu->free(d_in), gpu->free(d_dout), gpu->free(d_din), gpu->free(d_w), gpu->free(d_out),
      gpu->free(d_dw);
  for (int rep = 0; rep < 2; rep++)
    free(g_out[rep]), free(g_din[rep]), free(g_dw[rep]);
  free(in), free(dout), free(din0), free(w), free(out), free(din), free(dw);
}

static void test_matmuls(const char *path)
{
  test_matmul(FSDP_DTYPE_FP32, 37, 65, 45, 0, path);
  test_matmul(FSDP_DTYPE_BF16, 37, 65, 45, 1, path);
  test_matmul(FSDP_DTYPE_FP32, 256, 384, 320, 1, path);
  test_matmul(FSDP_DTYPE_BF16, 256, 384, 320, 0, path);
}

/* ---- rotary ------------------------------------------------------------------- */

static void test_rope(void)
{
  const int B = 2, T = 17, nh = 3, hd = 16;
  const float theta = 10000.0f;
  size_t n = (size_t)B * T * nh * hd;
  float *x = random_floats(n, 1.0f);
  float *fwd = dup_floats(x, n), *bwd = dup_floats(x, n);
  cpu->rope_forward(fwd, B, T, nh, hd, theta);
  cpu->rope_backward(bwd, B, T, nh, hd, theta);

  float *d_x = up(x, n * 4);
  float *g_fwd[2], *g_bwd;
  for (int rep = 0; rep < 2; rep++) {
    reupload(d_x, x, n * 4);
    gpu->rope_forward(d_x, B, T, nh, hd, theta);
    g_fwd[rep] = down(d_x, n * 4);
  }
  reupload(d_x, x, n * 4);
  gpu->rope_backward(d_x, B, T, nh, hd, theta);
  g_bwd = down(d_x, n * 4);
  same_bits("rope_forward", g_fwd[0], g_fwd[1], n * 4);
  compare("rope_forward", g_fwd[0], fwd, n, TOL_ULPS);
  compare("rope_backward", g_bwd, bwd, n, TOL_ULPS);
  /* backward is the inverse rotation: undoing forward gives x back */
  gpu->rope_forward(d_x, B, T, nh, hd, theta);
  float *round = down(d_x, n * 4);
  compare("rope_forward(rope_backward(x)) == x", round, x, n, TOL_ULPS);

  gpu->free(d_x);
  free(x), free(fwd), free(bwd), free(g_fwd[0]), free(g_fwd[1]), free(g_bwd), free(round);
}

/* ---- attention ------------------------------------------------------------------ */

static void test_attention(int B, int T, int H, int KH, int hd)
{
  char name[96];
  size_t nq = (size_t)B * T * H * hd, nkv = (size_t)B * T * KH * hd, np = (size_t)B * H * T * T;
  float *q = random_floats(nq, 1.0f), *k = random_floats(nkv, 1.0f), *v = random_floats(nkv, 1.0f);
  float *dout = random_floats(nq, 1.0f);
  float *out = xmalloc(nq * 4), *probs = xmalloc(np * 4);
  float *dq = xmalloc(nq * 4), *dk = xmalloc(nkv * 4), *dv = xmalloc(nkv * 4);
  cpu->attention_forward(out, probs, q, k, v, B, T, H, KH, hd);
  cpu->attention_backward(dq, dk, dv, dout, q, k, v, probs, B, T, H, KH, hd);

  float *d_q = up(q, nq * 4), *d_k = up(k, nkv * 4), *d_v = up(v, nkv * 4), *d_dout = up(dout, nq * 4);
  float *d_out = gpu->alloc(nq * 4), *d_probs = gpu->alloc(np * 4);
  float *d_dq = gpu->alloc(nq * 4), *d_dk = gpu->alloc(nkv * 4), *d_dv = gpu->alloc(nkv * 4);
  float *g_out[2], *g_probs[2], *g_dq[2], *g_dk[2], *g_dv[2];
  for (int rep = 0; rep < 2; rep++) {
    gpu->attention_forward(d_out, d_probs, d_q, d_k, d_v, B, T, H, KH, hd);
    gpu->attention_backward(d_dq, d_dk, d_dv, d_dout, d_q, d_k, d_v, d_probs, B, T, H, KH, hd);
    g_out[rep] = down(d_out, nq * 4);
    g_probs[rep] = down(d_probs, np * 4);
    g_dq[rep] = down(d_dq, nq * 4);
    g_dk[rep] = down(d_dk, nkv * 4);
    g_dv[rep] = down(d_dv, nkv * 4);
  }
  struct {
    const char *what;
    float **got;
    float *ref;
    size_t n;
  } outs[] = {
    {"out", g_out, out, nq}, {"probs", g_probs, probs, np}, {"dq", g_dq, dq, nq},
    {"dk", g_dk, dk, nkv},   {"dv", g_dv, dv, nkv},
  };
  for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
    snprintf(name, sizeof name, "attention B%d T%d H%d KH%d hd%d %s", B, T, H, KH, hd, outs[i].what);
    same_bits(name, outs[i].got[0], outs[i].got[1], outs[i].n * 4);
    compare(name, outs[i].got[0], outs[i].ref, outs[i].n, TOL_SUM);
  }

  gpu->free(d_q), gpu->free(d_k), gpu->free(d_v), gpu->free(d_dout), gpu->free(d_out);
  gpu->free(d_probs), gpu->free(d_dq), gpu->free(d_dk), gpu->free(d_dv);
  for (int rep = 0; rep < 2; rep++)
    free(g_out[rep]), free(g_probs[rep]), free(g_dq[rep]), free(g_dk[rep]), free(g_dv[rep]);
  free(q), free(k), free(v), free(dout), free(out), free(probs), free(dq), free(dk), free(dv);
}

/* ---- SwiGLU, residual ------------------------------------------------------------ */

static void test_elementwise(void)
{
  const size_t n = 1003;
  float *gate = random_floats(n, 6.0f), *upv = random_floats(n, 2.0f), *dout = random_floats(n, 1.0f);
  float *x = random_floats(n, 1.0f);
  float *out = xmalloc(n * 4), *dgate = xmalloc(n * 4), *dup = xmalloc(n * 4), *xs = dup_floats(x, n);
  cpu->swiglu_forward(out, gate, upv, n);
  cpu->swiglu_backward(dgate, dup, dout, gate, upv, n);
  cpu->residual_add(xs, upv, n);

  float *d_gate = up(gate, n * 4), *d_up = up(upv, n * 4), *d_dout = up(dout, n * 4);
  float *d_x = up(x, n * 4);
  float *d_out = gpu->alloc(n * 4), *d_dgate = gpu->alloc(n * 4), *d_dup = gpu->alloc(n * 4);
  gpu->swiglu_forward(d_out, d_gate, d_up, n);
  gpu->swiglu_backward(d_dgate, d_dup, d_dout, d_gate, d_up, n);
  gpu->residual_add(d_x, d_up, n);
  float *g_out = down(d_out, n * 4), *g_dgate = down(d_dgate, n * 4), *g_dup = down(d_dup, n * 4);
  float *g_x = down(d_x, n * 4);
  compare("swiglu_forward", g_out, out, n, TOL_ULPS);
  compare("swiglu_backward dgate", g_dgate, dgate, n, TOL_ULPS);
  compare("swiglu_backward dup", g_dup, dup, n, TOL_ULPS);
  compare("residual_add", g_x, xs, n, TOL_EXACT);

  gpu->free(d_gate), gpu->free(d_up), gpu->free(d_dout), gpu->free(d_x);
  gpu->free(d_out), gpu->free(d_dgate), gpu->free(d_dup);
  free(gate), free(upv), free(dout), free(x), free(out), free(dgate), free(dup), free(xs);
  free(g_out), free(g_dgate), free(g_dup), free(g_x);
}

/* ---- cross-entropy --------------------------------------------------------------- */

static void test_crossentropy(int in_place)
{
  const int M = 9, V = 1000;
  const float dscale = 1.0f / (float)M;
  size_t n = (size_t)M * V;
  char name[80];
  float *logits = random_floats(n, 4.0f);
  int32_t *tgt = xmalloc((size_t)M * sizeof *tgt);
  for (int m = 0; m < M; m++)
    tgt[m] = (int32_t)((m * 331 + 17) % V);
  float *losses = xmalloc((size_t)M * 4), *dl = xmalloc(n * 4);
  cpu->crossentropy(losses, dl, logits, tgt, M, V, dscale);

  float *d_logits = up(logits, n * 4), *d_losses = gpu->alloc((size_t)M * 4);
  int32_t *d_tgt = up(tgt, (size_t)M * sizeof *tgt);
  float *d_dl = in_place ? d_logits : gpu->alloc(n * 4);
  float *g_loss[2], *g_dl[2];
  for (int rep = 0; rep < 2; rep++) {
    reupload(d_logits, logits, n * 4);
    gpu->crossentropy(d_losses, d_dl, d_logits, d_tgt, M, V, dscale);
    g_loss[rep] = down(d_losses, (size_t)M * 4);
    g_dl[rep] = down(d_dl, n * 4);
  }
  snprintf(name, sizeof name, "crossentropy losses%s", in_place ? " (in place)" : "");
  same_bits(name, g_loss[0], g_loss[1], (size_t)M * 4);
  compare(name, g_loss[0], losses, (size_t)M, TOL_SUM);
  snprintf(name, sizeof name, "crossentropy dlogits%s", in_place ? " (in place)" : "");
  same_bits(name, g_dl[0], g_dl[1], n * 4);
  compare(name, g_dl[0], dl, n, TOL_SUM);

  gpu->free(d_logits), gpu->free(d_losses), gpu->free(d_tgt);
  if (!in_place)
    gpu->free(d_dl);
  for (int rep = 0; rep < 2; rep++)
    free(g_loss[rep]), free(g_dl[rep]);
  free(logits), free(tgt), free(losses), free(dl);
}

/* ---- casts ------------------------------------------------------------------------ */

static void test_cast(void)
{
  const size_t n = 1030;
  float *f = random_floats(n, 100.0f);
  /* edge cases: ties to even both ways, infinities, NaN, zeros, denormal */
  uint32_t specials[] = {0x3f808000u, 0x3f818000u, 0x7f800000u, 0xff800000u, 0x7fc00001u,
                         0xffa00000u, 0x00000000u, 0x80000000u, 0x00000001u, 0x7f7fffffu};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
    memcpy(&f[i], &specials[i], 4);
  uint16_t *ref16 = xmalloc(n * 2);
  cpu->cast(ref16, FSDP_DTYPE_BF16, f, FSDP_DTYPE_FP32, n);
  float *ref32 = xmalloc(n * 4);
  cpu->cast(ref32, FSDP_DTYPE_FP32, ref16, FSDP_DTYPE_BF16, n);

  float *d_f = up(f, n * 4);
  uint16_t *d_h = gpu->alloc(n * 2);
  float *d_back = gpu->alloc(n * 4), *d_copy = gpu->alloc(n * 4);
  gpu->cast(d_h, FSDP_DTYPE_BF16, d_f, FSDP_DTYPE_FP32, n);
  gpu->cast(d_back, FSDP_DTYPE_FP32, d_h, FSDP_DTYPE_BF16, n);
  gpu->cast(d_copy, FSDP_DTYPE_FP32, d_f, FSDP_DTYPE_FP32, n);
  uint16_t *g16 = down(d_h, n * 2);
  float *g32 = down(d_back, n * 4), *gcopy = down(d_copy, n * 4);
  report(memcmp(g16, ref16, n * 2) == 0, "cast fp32 -> bf16 (bits, NaN and ties too)",
         memcmp(g16, ref16, n * 2) == 0 ? "identical" : "DIFFER");
  report(memcmp(g32, ref32, n * 4) == 0, "cast bf16 -> fp32 (bits)",
         memcmp(g32, ref32, n * 4) == 0 ? "identical" : "DIFFER");
  report(memcmp(gcopy, f, n * 4) == 0, "cast fp32 -> fp32 (copy)",
         memcmp(gcopy, f, n * 4) == 0 ? "identical" : "DIFFER");

  gpu->free(d_f), gpu->free(d_h), gpu->free(d_back), gpu->free(d_copy);
  free(f), free(ref16), free(ref32), free(g16), free(g32), free(gcopy);
}

/* ---- Adam ------------------------------------------------------------------------- */

static void test_adam(enum fsdp_dtype pdt, enum fsdp_dtype gdt)
{
  const size_t n = 1003;
  char name[96];
  const struct fsdp_adam_params hp = {
    .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
    .bias_correction1 = 1.0f - 0.9f * 0.9f * 0.9f, .bias_correction2 = 1.0f - 0.95f * 0.95f * 0.95f, .grad_scale = 0.5f,
  };
  float *master0 = random_floats(n, 1.0f), *m0 = random_floats(n, 0.1f);
  float *v0 = random_floats(n, 0.01f);
  for (size_t i = 0; i < n; i++)
    v0[i] = fabsf(v0[i]);
  void *grad = random_param(n, gdt, 1.0f);
  size_t pbytes = n * fsdp_dtype_size(pdt), gbytes = n * fsdp_dtype_size(gdt);
  int alias = pdt == FSDP_DTYPE_FP32; /* fp32 params live in the master buffer */

  float *master = dup_floats(master0, n), *m = dup_floats(m0, n), *v = dup_floats(v0, n);
  void *param = alias ? (void *)master : xmalloc(pbytes);
  cpu->adam_update(param, pdt, master, grad, gdt, m, v, n, &hp);

  float *d_master = up(master0, n * 4), *d_m = up(m0, n * 4), *d_v = up(v0, n * 4);
  void *d_grad = up(grad, gbytes);
  void *d_param = alias ? (void *)d_master : gpu->alloc(pbytes);
  gpu->adam_update(d_param, pdt, d_master, d_grad, gdt, d_m, d_v, n, &hp);
  float *g_master = down(d_master, n * 4), *g_m = down(d_m, n * 4), *g_v = down(d_v, n * 4);
  snprintf(name, sizeof name, "adam (param %s, grad %s) master", dt_name(pdt), dt_name(gdt));
  compare(name, g_master, master, n, TOL_ULPS);
  snprintf(name, sizeof name, "adam (param %s, grad %s) m", dt_name(pdt), dt_name(gdt));
  compare(name, g_m, m, n, TOL_ULPS);
  snprintf(name, sizeof name, "adam (param %s, grad %s) v", dt_name(pdt), dt_name(gdt));
  compare(name, g_v, v, n, TOL_ULPS);
  if (!alias) {
    uint16_t *g_p = down(d_param, pbytes);
    float *gp = bf16_to_floats(g_p, n), *rp = bf16_to_floats(param, n);
    snprintf(name, sizeof name, "adam (param %s, grad %s) param", dt_name(pdt), dt_name(gdt));
    compare(name, gp, rp, n, TOL_BF16);
    free(g_p), free(gp), free(rp);
    gpu->free(d_param);
    free(param);
  }
  gpu->free(d_master), gpu->free(d_m), gpu->free(d_v), gpu->free(d_grad);
  free(master0), free(m0), free(v0), free(grad), free(master), free(m), free(v);
  free(g_master), free(g_m), free(g_v);
}

/* ---- memory, streams, events ------------------------------------------------------ */

static void test_runtime(void)
{
  char detail[96];
  /* A freed block comes back for the same size once the stream has passed it. */
  void *a = gpu->alloc(1000);
  check_rc(gpu->memset_zero(a, 1000), "memset_zero");
  gpu->free(a);
  check_rc(gpu->synchronize(), "synchronize");
  size_t cached = fsdp_cuda_cached_bytes();
  void *b = gpu->alloc(1000);
  snprintf(detail, sizeof detail, "cached %zu bytes before, %zu after", cached,
           fsdp_cuda_cached_bytes());
  report(b == a && fsdp_cuda_cached_bytes() < cached, "allocator reuses a completed block", detail);
  report(((uintptr_t)b & 255) == 0, "allocations are 256-byte aligned", "");

  /* d2d copy and memset are ordered with compute on the compute stream. */
  float src[300];
  for (int i = 0; i < 300; i++)
    src[i] = (float)i;
  float *d_src = up(src, sizeof src), *d_dst = gpu->alloc(sizeof src);
  check_rc(gpu->memcpy_d2d(d_dst, d_src, sizeof src), "memcpy_d2d");
  check_rc(gpu->memset_zero(d_dst, 100 * sizeof(float)), "memset_zero");
  float *back = down(d_dst, sizeof src);
  int ok = 1;
  for (int i = 0; i < 300; i++)
    ok &= back[i] == (i < 100 ? 0.0f : (float)i);
  report(ok, "memcpy_d2d then memset_zero, in order", "");
  free(back);

  /* Events across the two streams: compute -> comm -> compute. */
  struct fsdp_event *e1 = gpu->event_new(), *e2 = gpu->event_new();
  report(e1 && e2, "event_new", "");
  if (e1 && e2) {
    check_rc(gpu->thread_init(), "thread_init");
    report(gpu->comm_stream() != NULL, "comm_stream is a stream", "");
    gpu->residual_add(d_dst, d_src, 300);
    check_rc(gpu->event_record_compute(e1), "event_record_compute");
    check_rc(gpu->comm_wait_event(e1), "comm_wait_event");
    check_rc(gpu->event_record_comm(e2), "event_record_comm");
    check_rc(gpu->compute_wait_event(e2), "compute_wait_event");
    check_rc(gpu->event_synchronize(e2), "event_synchronize");
    report(gpu->event_query(e2) == 1, "event_query after event_synchronize", "");
    check_rc(gpu->synchronize(), "synchronize");
    int64_t exposed = gpu->take_exposed_ns();
    snprintf(detail, sizeof detail, "%lld ns", (long long)exposed);
    report(exposed >= 0 && gpu->take_exposed_ns() == 0, "take_exposed_ns >= 0, then reset",
           detail);
  }
  gpu->event_free(e1), gpu->event_free(e2);
  gpu->free(b), gpu->free(d_src), gpu->free(d_dst);
  check_rc(gpu->synchronize(), "synchronize");
  snprintf(detail, sizeof detail, "%zu live", fsdp_cuda_live_blocks());
  report(fsdp_cuda_live_blocks() == 0, "every block freed", detail);
}

/* ---- main --------------------------------------------------------------------------- */

static void run_ops(void)
{
  printf("memory, streams, events:\n");
  test_runtime();
  printf("ops (cuBLASLt matmuls):\n");
  for (int dt = 0; dt < 2; dt++) {
    test_embedding((enum fsdp_dtype)dt);
    test_rmsnorm((enum fsdp_dtype)dt);
  }
  test_matmuls("lt");
  test_rope();
  test_attention(2, 40, 4, 2, 16);  /* grouped kv, T > 32 keys per warp */
  test_attention(1, 9, 3, 3, 40);   /* plain multi-head, hd > 32 */
  test_attention(2, 5, 8, 1, 8);    /* multi-query */
  test_elementwise();
  test_crossentropy(0);
  test_crossentropy(1);
  test_cast();
  for (int p = 0; p < 2; p++)
    for (int g = 0; g < 2; g++)
      test_adam((enum fsdp_dtype)p, (enum fsdp_dtype)g);
}

int main(void)
{
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    printf("no CUDA device: skipped (%s)\n",
           err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
    return 77;
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    printf("device 0: %s, compute capability %d.%d, %d SMs\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount);

  check_rc(cpu->init(0, 0, 1), "cpu init");
  check_rc(gpu->init(0, 0, 1), "cuda init");
  run_ops();
  gpu->shutdown();

  /* The matmuls again on classic cuBLAS (the fallback path). */
  setenv("FSDP_REF_CUDA_GEMM", "classic", 1);
  check_rc(gpu->init(0, 0, 1), "cuda init (classic cuBLAS)");
  printf("ops (classic cuBLAS matmuls):\n");
  test_matmuls("classic");
  gpu->shutdown();
  cpu->shutdown();

  printf("%d of %d checks passed\n", checks - failures, checks);
  return failures ? 1 : 0;
}
