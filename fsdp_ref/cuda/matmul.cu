/* fsdp_ref/cuda/matmul.cu: the linear layers' matmuls on cuBLASLt, in fp32.
 *
 * Precision. Activations and gradients are fp32; a bf16 weight is first
 * widened to an fp32 scratch (exact), then everything is an fp32 GEMM with
 * fp32 accumulation (CUBLAS_COMPUTE_32F: no TF32, no bf16 rounding of the
 * activations). That is what the CPU backend computes, so a bf16 run differs
 * from it only in summation order. The alternative, a bf16 x bf16 GEMM,
 * would need the activations rounded to bf16 too and would no longer be the
 * same model; at the reference trainer's sizes the widening costs little.
 *
 * Determinism. cuBLAS gives the same bits for the same algorithm, shape and
 * stream, but its heuristic picks the algorithm partly from the pointers'
 * alignment, and a weight's offset inside a flat parameter buffer changes
 * with the wrap policy. So the heuristic is told that every matrix is only
 * 4-byte aligned (the weakest alignment an fp32 pointer can have) and that
 * no split-K reduction scheme is allowed: it then picks one algorithm per
 * shape whatever the pointers are, and the loss trajectory does not depend
 * on how the parameters were split into units. The plan (descriptors and
 * algorithm) is built once per shape and cached.
 *
 * Fallback. If Lt has no algorithm for a shape, or FSDP_REF_CUDA_GEMM=classic
 * is set, classic cublasSgemm runs instead (also fp32, no TF32).
 *
 * Row-major to cuBLAS. A row-major [R, C] matrix is a column-major [C, R]
 * one with leading dimension C, so with W [N, K], x [M, K], y [M, N]:
 *   y  = x W^T    is  y^T  = op_T(W) x^T     : gemm(T, N, m=N, n=M, k=K)
 *   dx = dy W     is  dx^T = W^T dy^T        : gemm(N, N, m=K, n=M, k=N)
 *   dW = dy^T x   is  dW^T = x^T dy          : gemm(N, T, m=K, n=N, k=M)
 */
#include <stdio.h>

#include "fsdp_ref/cuda/backend_cuda.h"
#include "fsdp_ref/cuda/cuda_common.cuh"
#include "fsdp_ref/cuda/device_cache.cuh"
#include "fsdp_ref/cuda/ops.cuh"

#define PLAN_CAPACITY 128 /* distinct GEMM shapes: ~3 per linear layer kind */

struct gemm_shape {
  int trans_a, trans_b; /* 1 = transposed */
  int m, n, k, lda, ldb, ldc;
};

struct gemm_plan {
  struct gemm_shape shape;
  int have_lt;                       /* 0: Lt found no algorithm, use classic */
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
  size_t workspace;                  /* bytes the algorithm needs */
};

static struct gemm_plan plans[PLAN_CAPACITY];
static int plan_count;
static int last_was_lt;

/* bf16 weights widened to fp32 (private scratch, grown on demand). */
static float *wide;
static size_t wide_cap; /* floats */

static int shape_equal(const struct gemm_shape *x, const struct gemm_shape *y)
{
  return x->trans_a == y->trans_a && x->trans_b == y->trans_b && x->m == y->m && x->n == y->n &&
         x->k == y->k && x->lda == y->lda && x->ldb == y->ldb && x->ldc == y->ldc;
}

static void plan_destroy(struct gemm_plan *p)
{
  if (p->c)
    cublasLtMatrixLayoutDestroy(p->c);
  if (p->b)
    cublasLtMatrixLayoutDestroy(p->b);
  if (p->a)
    cublasLtMatrixLayoutDestroy(p->a);
  if (p->desc)
    cublasLtMatmulDescDestroy(p->desc);
  *p = (struct gemm_plan){};
}

/* Build p's Lt descriptors and pick its algorithm; p->have_lt says whether
 * that worked. Failures here are not errors: the classic path takes over. */
static void plan_build(struct gemm_plan *p, const struct gemm_shape *s)
{
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  cublasOperation_t op_a = s->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = s->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  uint32_t align = 4, schemes = CUBLASLT_REDUCTION_SCHEME_NONE;
  uint64_t ws = fsdp_cuda.lt_workspace_bytes;

  p->shape = *s;
  p->have_lt = 0;
  /* Stored (pre-op) shapes: A is m x k, or k x m when transposed; B likewise. */
  if (cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) ||
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a) ||
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b) ||
      cublasLtMatrixLayoutCreate(&p->a, CUDA_R_32F, s->trans_a ? s->k : s->m,
                                 s->trans_a ? s->m : s->k, s->lda) ||
      cublasLtMatrixLayoutCreate(&p->b, CUDA_R_32F, s->trans_b ? s->n : s->k,
                                 s->trans_b ? s->k : s->n, s->ldb) ||
      cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, s->m, s->n, s->ldc) ||
      cublasLtMatmulPreferenceCreate(&pref) ||
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                           sizeof ws) ||
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                           &schemes, sizeof schemes) ||
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                           &align, sizeof align) ||
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                           &align, sizeof align) ||
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                           &align, sizeof align) ||
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                           &align, sizeof align) ||
      cublasLtMatmulAlgoGetHeuristic(fsdp_cuda.lt, p->desc, p->a, p->b, p->c, p->c, pref, 1,
                                     &result, &found) ||
      found < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr,
            "fsdp_ref cuda: cuBLASLt has no fp32 algorithm for gemm(%c%c, m=%d n=%d k=%d): "
            "using classic cuBLAS for it\n",
            s->trans_a ? 'T' : 'N', s->trans_b ? 'T' : 'N', s->m, s->n, s->k);
  } else {
    p->algo = result.algo;
    p->workspace = result.workspaceSize;
    p->have_lt = 1;
  }
  if (pref)
    cublasLtMatmulPreferenceDestroy(pref);
}

static struct gemm_plan *plan_get(const struct gemm_shape *s)
{
  for (int i = 0; i < plan_count; i++)
    if (shape_equal(&plans[i].shape, s))
      return &plans[i];
  if (plan_count == PLAN_CAPACITY) { /* more shapes than a model has: start over */
    for (int i = 0; i < plan_count; i++)
      plan_destroy(&plans[i]);
    plan_count = 0;
  }
  struct gemm_plan *p = &plans[plan_count++];
  plan_build(p, s);
  return p;
}

/* C = op(A) op(B) + beta C, column-major, fp32, on the compute stream. */
static void gemm(int trans_a, int trans_b, int m, int n, int k, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc, const char *what)
{
  const float alpha = 1.0f;
  struct gemm_shape s = {trans_a, trans_b, m, n, k, lda, ldb, ldc};
  if (!fsdp_cuda.force_classic_gemm) {
    struct gemm_plan *p = plan_get(&s);
    if (p->have_lt) {
      last_was_lt = 1;
      fsdp_cuda_note_blas(cublasLtMatmul(fsdp_cuda.lt, p->desc, &alpha, A, p->a, B, p->b, &beta,
                                         C, p->c, C, p->c, &p->algo, fsdp_cuda.lt_workspace,
                                         p->workspace, fsdp_cuda.compute),
                          what);
      return;
    }
  }
  last_was_lt = 0;
  fsdp_cuda_note_blas(cublasSgemm(fsdp_cuda.blas, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A, lda, B,
                                  ldb, &beta, C, ldc),
                      what);
}

/* The weight as fp32: itself, or widened into the scratch. */
static const float *weight_fp32(const void *w, enum fsdp_dtype wdt, size_t count)
{
  if (wdt == FSDP_DTYPE_FP32)
    return (const float *)w;
  if (count > wide_cap) {
    device_cache_free(wide); /* reused only after the GEMMs reading it are done */
    wide = (float *)device_cache_alloc(count * sizeof *wide);
    wide_cap = wide ? count : 0;
    if (!wide)
      return NULL;
  }
  fsdp_cuda_cast(wide, FSDP_DTYPE_FP32, w, FSDP_DTYPE_BF16, count);
  return wide;
}

void fsdp_cuda_matmul_forward(float *out, const float *in, const void *w, enum fsdp_dtype wdt,
                              int M, int K, int N)
{
  if (M <= 0 || N <= 0)
    return;
  if (K <= 0) { /* an empty sum */
    fsdp_cuda_note(cudaMemsetAsync(out, 0, (size_t)M * N * sizeof *out, fsdp_cuda.compute),
                   "matmul_forward (zero)");
    return;
  }
  const float *w32 = weight_fp32(w, wdt, (size_t)N * K);
  if (!w32)
    return;
  gemm(1, 0, N, M, K, w32, K, in, K, 0.0f, out, N, "matmul_forward");
}

void fsdp_cuda_matmul_backward(float *din, float *dw, const float *dout, const float *in,
                               const void *w, enum fsdp_dtype wdt, int M, int K, int N,
                               int accumulate_din)
{
  if (K <= 0 || N <= 0)
    return; /* din [M, 0] and dw [N, 0] or [0, K]: nothing to write */
  if (M <= 0) {
    fsdp_cuda_note(cudaMemsetAsync(dw, 0, (size_t)N * K * sizeof *dw, fsdp_cuda.compute),
                   "matmul_backward (zero)");
    return;
  }
  const float *w32 = weight_fp32(w, wdt, (size_t)N * K);
  if (!w32)
    return;
  gemm(0, 0, K, M, N, w32, K, dout, N, accumulate_din ? 1.0f : 0.0f, din, K,
       "matmul_backward (din)");
  gemm(0, 1, K, N, M, in, K, dout, N, 0.0f, dw, K, "matmul_backward (dw)");
}

void fsdp_cuda_matmul_release(void)
{
  for (int i = 0; i < plan_count; i++)
    plan_destroy(&plans[i]);
  plan_count = 0;
  device_cache_free(wide);
  wide = NULL;
  wide_cap = 0;
}

extern "C" int fsdp_cuda_last_gemm_was_lt(void) { return last_was_lt; }
