/* fsdp_ref/cuda/embedding.cu: token embedding lookup and its gradient.
 * The gradient gives each column to one thread, which adds rows in
 * increasing m: the CPU backend's order, so the result is bit-identical to
 * it, with no atomics. */
#include "fsdp_ref/cuda/cuda_common.cuh"
#include "fsdp_ref/cuda/ops.cuh"

static __global__ void embedding_forward_kernel(float *out, const int32_t *tokens, const void *wte,
                                         enum fsdp_dtype wdt, int M, int C)
{
  size_t n = (size_t)M * C;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    size_t m = i / C, c = i % C;
    out[i] = fsdp_load_param(wte, wdt, (size_t)tokens[m] * C + c);
  }
}

static __global__ void embedding_backward_kernel(float *dwte, const float *dout, const int32_t *tokens,
                                          int M, int C)
{
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C)
    return;
  for (int m = 0; m < M; m++)
    dwte[(size_t)tokens[m] * C + c] += dout[(size_t)m * C + c];
}

void fsdp_cuda_embedding_forward(float *out, const int32_t *tokens, const void *wte,
                                 enum fsdp_dtype wdt, int M, int C)
{
  size_t n = (size_t)M * C;
  if (!n)
    return;
  embedding_forward_kernel<<<fsdp_cuda_blocks(n), FSDP_CUDA_THREADS, 0, fsdp_cuda.compute>>>(
      out, tokens, wte, wdt, M, C);
  fsdp_cuda_check_launch("embedding_forward");
}

void fsdp_cuda_embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int M,
                                  int C, int V)
{
  if ((size_t)V * C == 0)
    return;
  fsdp_cuda_note(cudaMemsetAsync(dwte, 0, (size_t)V * C * sizeof *dwte, fsdp_cuda.compute),
                 "embedding_backward (zero)");
  if (M <= 0)
    return;
  unsigned blocks = (unsigned)((C + FSDP_CUDA_THREADS - 1) / FSDP_CUDA_THREADS);
  embedding_backward_kernel<<<blocks, FSDP_CUDA_THREADS, 0, fsdp_cuda.compute>>>(dwte, dout,
                                                                               tokens, M, C);
  fsdp_cuda_check_launch("embedding_backward");
}
