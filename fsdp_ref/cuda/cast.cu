/* fsdp_ref/cuda/cast.cu: fp32 <-> bf16 conversion with the host's rounding
 * (fsdp_ref/bf16.h), so that CPU and GPU casts give the same bits. */
#include "fsdp_ref/cuda/cuda_common.cuh"
#include "fsdp_ref/cuda/ops.cuh"

static __global__ void cast_to_bf16_kernel(uint16_t *dst, const float *src, size_t n)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = fsdp_bf16_from_float(src[i]);
}

static __global__ void cast_to_fp32_kernel(float *dst, const uint16_t *src, size_t n)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = fsdp_bf16_to_float(src[i]);
}

void fsdp_cuda_cast(void *dst, enum fsdp_dtype dst_dtype, const void *src,
                    enum fsdp_dtype src_dtype, size_t n)
{
  if (!n)
    return;
  if (dst_dtype == src_dtype) {
    fsdp_cuda_note(cudaMemcpyAsync(dst, src, n * fsdp_dtype_size(dst_dtype),
                                   cudaMemcpyDeviceToDevice, fsdp_cuda.compute),
                   "cast (copy)");
    return;
  }
  if (dst_dtype == FSDP_DTYPE_BF16)
    cast_to_bf16_kernel<<<fsdp_cuda_blocks(n), FSDP_CUDA_THREADS, 0, fsdp_cuda.compute>>>(
        (uint16_t *)dst, (const float *)src, n);
  else
    cast_to_fp32_kernel<<<fsdp_cuda_blocks(n), FSDP_CUDA_THREADS, 0, fsdp_cuda.compute>>>(
        (float *)dst, (const uint16_t *)src, n);
  fsdp_cuda_check_launch("cast");
}
