/* fsdp_ref/cuda/attention.cu: causal attention with grouped kv heads, naive
 * and exact (no online softmax), for the small sequence lengths of the
 * reference trainer: the [B, H, T, T] probabilities are materialised, as the
 * backend contract asks.
 *
 * Forward and the per-row half of backward give one warp to each query row
 * (b, h, t): lanes take keys u = lane, lane + 32, ... for the scores and
 * output dimensions d = lane, lane + 32, ... for the weighted sums, which run
 * over u in increasing order. The dk / dv half gives one thread to each
 * (b, u, kh, d) and adds query heads, then query positions, in increasing
 * order (the CPU backend's order), so nothing needs atomics. */
#include <math.h>

#include "fsdp_ref/cuda/cuda_common.cuh"
#include "fsdp_ref/cuda/device_cache.cuh"
#include "fsdp_ref/cuda/ops.cuh"

#define WARPS_PER_BLOCK 4

/* dscores [B, H, T, T] for backward: the backend's private scratch, grown
 * on demand (like the CPU backend's scratch, outside the core's accounting). */
static float *dscores;
static size_t dscores_cap; /* floats */

static unsigned row_blocks(size_t rows)
{
  return (unsigned)((rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK);
}

static __global__ void attention_forward_kernel(float *out, float *probs, const float *q,
                                                const float *k, const float *v, int B, int T,
                                                int H, int KH, int hd, float scale)
{
  size_t row = blockIdx.x * (size_t)WARPS_PER_BLOCK + threadIdx.x / 32; /* (b * H + h) * T + t */
  int lane = threadIdx.x % 32;
  if (row >= (size_t)B * H * T)
    return; /* whole warps only: the shuffles below see all 32 lanes */
  int t = (int)(row % T), h = (int)((row / T) % H), b = (int)(row / ((size_t)T * H));
  int kh = h / (H / KH);
  const float *qt = q + (((size_t)b * T + t) * H + h) * hd;
  float *p = probs + row * T;

  float maxv = -INFINITY;
  for (int u = lane; u <= t; u += 32) {
    const float *ku = k + (((size_t)b * T + u) * KH + kh) * hd;
    float s = 0.0f;
    for (int d = 0; d < hd; d++)
      s += qt[d] * ku[d];
    s *= scale;
    p[u] = s;
    maxv = fmaxf(maxv, s);
  }
  maxv = fsdp_warp_max(maxv);
  float sum = 0.0f;
  for (int u = lane; u <= t; u += 32) {
    float e = expf(p[u] - maxv);
    p[u] = e;
    sum += e;
  }
  sum = fsdp_warp_sum(sum);
  float inv = 1.0f / sum;
  for (int u = lane; u < T; u += 32)
    p[u] = u <= t ? p[u] * inv : 0.0f;
  __syncwarp(); /* every lane's probabilities visible to every lane */

  float *o = out + (((size_t)b * T + t) * H + h) * hd;
  for (int d = lane; d < hd; d += 32) {
    float acc = 0.0f;
    for (int u = 0; u <= t; u++)
      acc += p[u] * v[(((size_t)b * T + u) * KH + kh) * hd + d];
    o[d] = acc;
  }
}

/* Per query row: ds[u] = p[u] (dp[u] - sum_u' p[u'] dp[u']) scale with
 * dp[u] = dout_t . v_u, stored to dscores; then dq_t = sum_u ds[u] k_u. */
static __global__ void attention_backward_query_kernel(float *dq, float *ds, const float *dout,
                                                       const float *k, const float *v,
                                                       const float *probs, int B, int T, int H,
                                                       int KH, int hd, float scale)
{
  size_t row = blockIdx.x * (size_t)WARPS_PER_BLOCK + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= (size_t)B * H * T)
    return;
  int t = (int)(row % T), h = (int)((row / T) % H), b = (int)(row / ((size_t)T * H));
  int kh = h / (H / KH);
  const float *p = probs + row * T;
  const float *go = dout + (((size_t)b * T + t) * H + h) * hd;
  float *dsr = ds + row * T;

  float pdp = 0.0f;
  for (int u = lane; u <= t; u += 32) {
    const float *vu = v + (((size_t)b * T + u) * KH + kh) * hd;
    float dp = 0.0f;
    for (int d = 0; d < hd; d++)
      dp += go[d] * vu[d];
    dsr[u] = dp;
    pdp += p[u] * dp;
  }
  pdp = fsdp_warp_sum(pdp);
  for (int u = lane; u <= t; u += 32)
    dsr[u] = p[u] * (dsr[u] - pdp) * scale;
  __syncwarp();

  float *dqt = dq + (((size_t)b * T + t) * H + h) * hd;
  for (int d = lane; d < hd; d += 32) {
    float acc = 0.0f;
    for (int u = 0; u <= t; u++)
      acc += dsr[u] * k[(((size_t)b * T + u) * KH + kh) * hd + d];
    dqt[d] = acc;
  }
}

/* Per (b, u, kh, d): dk = sum_h sum_{t >= u} ds[b,h,t,u] q[b,t,h,d],
 * dv = sum_h sum_{t >= u} p[b,h,t,u] dout[b,t,h,d], over the group's heads. */
static __global__ void attention_backward_kv_kernel(float *dk, float *dv, const float *ds,
                                                    const float *dout, const float *q,
                                                    const float *probs, int B, int T, int H,
                                                    int KH, int hd)
{
  size_t n = (size_t)B * T * KH * hd;
  int group = H / KH;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
       idx += (size_t)gridDim.x * blockDim.x) {
    int d = (int)(idx % hd);
    size_t rest = idx / hd;
    int kh = (int)(rest % KH);
    rest /= KH;
    int u = (int)(rest % T), b = (int)(rest / T);
    float dk_acc = 0.0f, dv_acc = 0.0f;
    for (int h = kh * group; h < (kh + 1) * group; h++)
      for (int t = u; t < T; t++) {
        size_t pr = (((size_t)b * H + h) * T + t) * T + u;
        size_t qi = (((size_t)b * T + t) * H + h) * hd + d;
        dk_acc += ds[pr] * q[qi];
        dv_acc += probs[pr] * dout[qi];
      }
    dk[idx] = dk_acc; /* idx is ((b * T + u) * KH + kh) * hd + d */
    dv[idx] = dv_acc;
  }
}

void fsdp_cuda_attention_forward(float *out, float *probs, const float *q, const float *k,
                                 const float *v, int B, int T, int H, int KH, int hd)
{
  size_t rows = (size_t)B * H * T;
  if (!rows || hd <= 0 || KH <= 0)
    return;
  attention_forward_kernel<<<row_blocks(rows), 32 * WARPS_PER_BLOCK, 0, fsdp_cuda.compute>>>(
      out, probs, q, k, v, B, T, H, KH, hd, 1.0f / sqrtf((float)hd));
  fsdp_cuda_check_launch("attention_forward");
}

void fsdp_cuda_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                  const float *q, const float *k, const float *v,
                                  const float *probs, int B, int T, int H, int KH, int hd)
{
  size_t rows = (size_t)B * H * T;
  if (!rows || hd <= 0 || KH <= 0)
    return;
  size_t need = rows * T;
  if (need > dscores_cap) {
    device_cache_free(dscores); /* reused only once the kernels reading it are done */
    dscores = (float *)device_cache_alloc(need * sizeof *dscores);
    dscores_cap = dscores ? need : 0;
    if (!dscores)
      return; /* the allocator noted the failure: synchronize() reports it */
  }
  attention_backward_query_kernel<<<row_blocks(rows), 32 * WARPS_PER_BLOCK, 0,
                                    fsdp_cuda.compute>>>(dq, dscores, dout, k, v, probs, B, T, H,
                                                         KH, hd, 1.0f / sqrtf((float)hd));
  fsdp_cuda_check_launch("attention_backward (query)");
  size_t n = (size_t)B * T * KH * hd;
  attention_backward_kv_kernel<<<fsdp_cuda_blocks(n), FSDP_CUDA_THREADS, 0, fsdp_cuda.compute>>>(
      dk, dv, dscores, dout, q, probs, B, T, H, KH, hd);
  fsdp_cuda_check_launch("attention_backward (kv)");
}

void fsdp_cuda_attention_release(void)
{
  device_cache_free(dscores);
  dscores = NULL;
  dscores_cap = 0;
}
