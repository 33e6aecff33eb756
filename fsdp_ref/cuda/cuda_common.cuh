/* fsdp_ref/cuda/cuda_common.cuh: state and helpers shared by the CUDA
 * backend's files (internal; not part of the backend interface).
 *
 * One process drives one GPU. The compute thread owns the compute stream,
 * the cuBLASLt handle, the allocator and every scratch buffer; the
 * communication thread only touches the comm stream and events. So the state
 * below needs no lock: fields are written by init (before the communication
 * thread starts) and by the compute thread; the sticky error is atomic. */
#ifndef FSDP_REF_CUDA_COMMON_CUH
#define FSDP_REF_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "fsdp_ref/backend.h"

/* Threads per block for the element-wise and per-column kernels. */
#define FSDP_CUDA_THREADS 256
/* Cap on blocks for grid-stride kernels (enough to fill any current GPU). */
#define FSDP_CUDA_MAX_BLOCKS 8192

/* Process-wide backend state; see backend_cuda.cu for its lifecycle. */
struct fsdp_cuda_state {
  int device;                 /* CUDA ordinal this process uses */
  cudaStream_t compute;       /* every op, copy and memset */
  cudaStream_t comm;          /* NCCL collectives (issued by the core) */
  cublasLtHandle_t lt;        /* cuBLASLt: the matmuls' main path */
  cublasHandle_t blas;        /* classic cuBLAS: fallback when Lt finds no algorithm */
  void *lt_workspace;         /* cuBLASLt workspace (fixed size: see matmul.cu) */
  size_t lt_workspace_bytes;
  int force_classic_gemm;     /* FSDP_REF_CUDA_GEMM=classic: skip cuBLASLt */
};

extern struct fsdp_cuda_state fsdp_cuda;

/* Record the first asynchronous error (what = the call that failed); it is
 * reported, and cleared, by the next synchronize(). Ops have no return value
 * (backend.h), so this is how their failures travel up. Prints one line to
 * stderr naming the call, since the CUDA error string is lost once mapped to
 * an errno. Returns 0 when `err` is cudaSuccess, else the mapped -errno. */
int fsdp_cuda_note(cudaError_t err, const char *what);
/* The same for a cuBLAS status. */
int fsdp_cuda_note_blas(cublasStatus_t st, const char *what);
/* Check the last kernel launch (cudaGetLastError) and note a failure. */
void fsdp_cuda_check_launch(const char *what);
/* Take and clear the sticky error: 0 or -errno. */
int fsdp_cuda_take_error(void);

/* Blocks for a grid-stride loop over n items, at least 1. */
static inline unsigned fsdp_cuda_blocks(size_t n)
{
  size_t b = (n + FSDP_CUDA_THREADS - 1) / FSDP_CUDA_THREADS;
  if (b < 1)
    b = 1;
  if (b > FSDP_CUDA_MAX_BLOCKS)
    b = FSDP_CUDA_MAX_BLOCKS;
  return (unsigned)b;
}

/* ---- device-side helpers ------------------------------------------------ */

/* bf16 bits -> fp32, exact (bf16 is the top half of an fp32). */
__device__ __forceinline__ float fsdp_bf16_to_float(uint16_t h)
{
  return __uint_as_float((uint32_t)h << 16);
}

/* fp32 -> bf16 bits, round to nearest even, NaN kept quiet: the same bits as
 * the host's bf16_from_float (fsdp_ref/bf16.h), NaNs included, so CPU and
 * GPU casts agree exactly. */
__device__ __forceinline__ uint16_t fsdp_bf16_from_float(float f)
{
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* Element i of a parameter buffer in dtype dt, as fp32. */
__device__ __forceinline__ float fsdp_load_param(const void *p, enum fsdp_dtype dt, size_t i)
{
  return dt == FSDP_DTYPE_FP32 ? ((const float *)p)[i]
                               : fsdp_bf16_to_float(((const uint16_t *)p)[i]);
}

/* Sum over a warp, combined in a fixed butterfly order: deterministic. */
__device__ __forceinline__ float fsdp_warp_sum(float v)
{
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* Max over a warp. */
__device__ __forceinline__ float fsdp_warp_max(float v)
{
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

#endif /* FSDP_REF_CUDA_COMMON_CUH */
