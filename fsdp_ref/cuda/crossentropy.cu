/* fsdp_ref/cuda/crossentropy.cu: softmax cross-entropy and its gradient,
 * one block per row. Block reductions combine per-warp partials in a fixed
 * order, so the result does not depend on scheduling. In place (dlogits ==
 * logits) is safe: every logit a thread reads after the last barrier is one
 * it writes itself, and the target's logit is read before that barrier. */
#include <math.h>

#include "fsdp_ref/cuda/cuda_common.cuh"
#include "fsdp_ref/cuda/ops.cuh"

#define CE_THREADS 256
#define CE_WARPS (CE_THREADS / 32)

/* Combine one value per thread with op (0 = sum, 1 = max); every thread gets
 * the result. Contains barriers: call from all threads of the block. */
static __device__ float block_reduce(float v, int is_max)
{
  __shared__ float part[CE_WARPS];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  v = is_max ? fsdp_warp_max(v) : fsdp_warp_sum(v);
  if (lane == 0)
    part[warp] = v;
  __syncthreads();
  float r = part[0];
  for (int i = 1; i < CE_WARPS; i++)
    r = is_max ? fmaxf(r, part[i]) : r + part[i];
  __syncthreads(); /* part is reused by the next call */
  return r;
}

static __global__ void crossentropy_kernel(float *losses, float *dlogits, const float *logits,
                                           const int32_t *targets, int V, float dscale)
{
  size_t m = blockIdx.x;
  const float *z = logits + m * V;
  float *dz = dlogits + m * V;

  float lmax = -INFINITY;
  for (int i = threadIdx.x; i < V; i += CE_THREADS)
    lmax = fmaxf(lmax, z[i]);
  float maxv = block_reduce(lmax, 1);
  float lsum = 0.0f;
  for (int i = threadIdx.x; i < V; i += CE_THREADS)
    lsum += expf(z[i] - maxv);
  float sum = block_reduce(lsum, 0);

  int t = targets[m];
  if (threadIdx.x == 0)
    losses[m] = logf(sum) - (z[t] - maxv);
  __syncthreads(); /* z[t] is read before its owner overwrites it (in place) */
  float inv = 1.0f / sum;
  for (int i = threadIdx.x; i < V; i += CE_THREADS)
    dz[i] = (expf(z[i] - maxv) * inv - (i == t ? 1.0f : 0.0f)) * dscale;
}

void fsdp_cuda_crossentropy(float *losses, float *dlogits, const float *logits,
                            const int32_t *targets, int M, int V, float dscale)
{
  if (M <= 0 || V <= 0)
    return;
  crossentropy_kernel<<<(unsigned)M, CE_THREADS, 0, fsdp_cuda.compute>>>(losses, dlogits, logits,
                                                                        targets, V, dscale);
  fsdp_cuda_check_launch("crossentropy");
}
