/* fsdp_ref/cuda/rope.cu: rotary position embedding, in place. The angle and
 * its cosine and sine are computed in double, as the CPU backend does, then
 * rounded to float, so both backends rotate by the same float pair. */
#include "fsdp_ref/cuda/cuda_common.cuh"
#include "fsdp_ref/cuda/ops.cuh"

/* One thread per (b, t, h, i) pair of x [B, T, nh, hd]. */
static __global__ void rope_kernel(float *x, int B, int T, int nh, int hd, float theta,
                                   float sign)
{
  int half = hd / 2;
  size_t n = (size_t)B * T * nh * half;
  for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n;
       idx += (size_t)gridDim.x * blockDim.x) {
    int i = (int)(idx % half);
    size_t row = idx / half; /* (b * T + t) * nh + h */
    int t = (int)((row / nh) % T);
    double angle = (double)t * pow((double)theta, -2.0 * i / hd);
    float c = (float)cos(angle), s = sign * (float)sin(angle);
    float *v = x + row * hd;
    float x0 = v[2 * i], x1 = v[2 * i + 1];
    v[2 * i] = x0 * c - x1 * s;
    v[2 * i + 1] = x0 * s + x1 * c;
  }
}

static void rope_launch(float *x, int B, int T, int nh, int hd, float theta, float sign,
                        const char *what)
{
  size_t n = (size_t)B * T * nh * (hd / 2);
  if (!n || B <= 0 || T <= 0 || nh <= 0)
    return;
  rope_kernel<<<fsdp_cuda_blocks(n), FSDP_CUDA_THREADS, 0, fsdp_cuda.compute>>>(x, B, T, nh, hd,
                                                                              theta, sign);
  fsdp_cuda_check_launch(what);
}

void fsdp_cuda_rope_forward(float *x, int B, int T, int nh, int hd, float theta)
{
  rope_launch(x, B, T, nh, hd, theta, 1.0f, "rope_forward");
}

void fsdp_cuda_rope_backward(float *dx, int B, int T, int nh, int hd, float theta)
{
  rope_launch(dx, B, T, nh, hd, theta, -1.0f, "rope_backward");
}
