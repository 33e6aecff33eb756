/* fsdp_ref/cuda/rmsnorm.cu: RMSNorm forward and backward.
 * One warp per row for the per-row reductions (lanes take strided columns,
 * then a fixed butterfly), and one thread per column for the weight
 * gradient, adding rows in increasing m as the CPU backend does. */
#include "fsdp_ref/cuda/cuda_common.cuh"
#include "fsdp_ref/cuda/ops.cuh"

#define ROWS_PER_BLOCK 8 /* warps per block for the per-row kernels */

static unsigned row_blocks(int M) { return (unsigned)((M + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK); }

static __global__ void rmsnorm_forward_kernel(float *out, float *rstd, const float *in,
                                              const void *w, enum fsdp_dtype wdt, int M, int C,
                                              float eps)
{
  int m = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (m >= M)
    return;
  const float *x = in + (size_t)m * C;
  float ss = 0.0f;
  for (int c = lane; c < C; c += 32)
    ss += x[c] * x[c];
  ss = fsdp_warp_sum(ss);
  float r = 1.0f / sqrtf(ss / (float)C + eps);
  if (lane == 0)
    rstd[m] = r;
  float *y = out + (size_t)m * C;
  for (int c = lane; c < C; c += 32)
    y[c] = x[c] * r * fsdp_load_param(w, wdt, (size_t)c);
}

/* dx_j += r w_j g_j - x_j r^3 / C * sum_c g_c w_c x_c */
static __global__ void rmsnorm_backward_input_kernel(float *din, const float *dout,
                                                     const float *in, const void *w,
                                                     enum fsdp_dtype wdt, const float *rstd,
                                                     int M, int C)
{
  int m = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (m >= M)
    return;
  const float *x = in + (size_t)m * C, *g = dout + (size_t)m * C;
  float *dx = din + (size_t)m * C;
  float gwx = 0.0f;
  for (int c = lane; c < C; c += 32)
    gwx += g[c] * fsdp_load_param(w, wdt, (size_t)c) * x[c];
  gwx = fsdp_warp_sum(gwx);
  float r = rstd[m];
  float k = r * r * r / (float)C * gwx;
  for (int c = lane; c < C; c += 32)
    dx[c] += r * fsdp_load_param(w, wdt, (size_t)c) * g[c] - x[c] * k;
}

/* dw_c = sum over m (increasing) of g[m, c] x[m, c] r[m] */
static __global__ void rmsnorm_backward_weight_kernel(float *dw, const float *dout,
                                                      const float *in, const float *rstd, int M,
                                                      int C)
{
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C)
    return;
  float acc = 0.0f;
  for (int m = 0; m < M; m++)
    acc += dout[(size_t)m * C + c] * in[(size_t)m * C + c] * rstd[m];
  dw[c] = acc;
}

void fsdp_cuda_rmsnorm_forward(float *out, float *rstd, const float *in, const void *w,
                               enum fsdp_dtype wdt, int M, int C, float eps)
{
  if (M <= 0 || C <= 0)
    return;
  rmsnorm_forward_kernel<<<row_blocks(M), 32 * ROWS_PER_BLOCK, 0, fsdp_cuda.compute>>>(
      out, rstd, in, w, wdt, M, C, eps);
  fsdp_cuda_check_launch("rmsnorm_forward");
}

void fsdp_cuda_rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                                const void *w, enum fsdp_dtype wdt, const float *rstd, int M,
                                int C)
{
  if (C <= 0)
    return;
  if (M > 0) {
    rmsnorm_backward_input_kernel<<<row_blocks(M), 32 * ROWS_PER_BLOCK, 0, fsdp_cuda.compute>>>(
        din, dout, in, w, wdt, rstd, M, C);
    fsdp_cuda_check_launch("rmsnorm_backward (input)");
  }
  unsigned blocks = (unsigned)((C + FSDP_CUDA_THREADS - 1) / FSDP_CUDA_THREADS);
  rmsnorm_backward_weight_kernel<<<blocks, FSDP_CUDA_THREADS, 0, fsdp_cuda.compute>>>(
      dw, dout, in, rstd, M, C);
  fsdp_cuda_check_launch("rmsnorm_backward (weight)");
}
