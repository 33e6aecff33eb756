/* fsdp_ref/cuda/elementwise.cu: SwiGLU (silu(gate) * up) forward and
 * backward, and the residual add: one thread per element, grid-stride, the
 * CPU backend's expressions term for term (expf, not __expf). */
#include "fsdp_ref/cuda/cuda_common.cuh"
#include "fsdp_ref/cuda/ops.cuh"

#define GRID_STRIDE(i, n)                                                                        \
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                      \
       i += (size_t)gridDim.x * blockDim.x)

static __global__ void swiglu_forward_kernel(float *out, const float *gate, const float *up, size_t n)
{
  GRID_STRIDE(i, n)
  {
    float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

static __global__ void swiglu_backward_kernel(float *dgate, float *dup, const float *dout,
                                       const float *gate, const float *up, size_t n)
{
  GRID_STRIDE(i, n)
  {
    float g = gate[i], s = 1.0f / (1.0f + expf(-g));
    dup[i] = dout[i] * g * s;
    dgate[i] = dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
  }
}

static __global__ void residual_add_kernel(float *x, const float *y, size_t n)
{
  GRID_STRIDE(i, n) { x[i] += y[i]; }
}

void fsdp_cuda_swiglu_forward(float *out, const float *gate, const float *up, size_t n)
{
  if (!n)
    return;
  swiglu_forward_kernel<<<fsdp_cuda_blocks(n), FSDP_CUDA_THREADS, 0, fsdp_cuda.compute>>>(
      out, gate, up, n);
  fsdp_cuda_check_launch("swiglu_forward");
}

void fsdp_cuda_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                               const float *up, size_t n)
{
  if (!n)
    return;
  swiglu_backward_kernel<<<fsdp_cuda_blocks(n), FSDP_CUDA_THREADS, 0, fsdp_cuda.compute>>>(
      dgate, dup, dout, gate, up, n);
  fsdp_cuda_check_launch("swiglu_backward");
}

void fsdp_cuda_residual_add(float *x, const float *y, size_t n)
{
  if (!n)
    return;
  residual_add_kernel<<<fsdp_cuda_blocks(n), FSDP_CUDA_THREADS, 0, fsdp_cuda.compute>>>(x, y, n);
  fsdp_cuda_check_launch("residual_add");
}
