/* fsdp_ref/cuda/device_cache.cuh: the CUDA backend's device allocator
 * (internal).
 *
 * Why not cudaMalloc / cudaFree directly: cudaFree waits for the whole
 * device, the comm stream's NCCL kernels included, which would serialise
 * compute with communication on every reshard. Why not cudaMallocAsync on
 * the compute stream: a block freed there may be handed out again while
 * compute kernels enqueued earlier still read it, and the new owner may be
 * an NCCL AllGather on the comm stream, which is not ordered after them.
 *
 * So: a freed block gets an event recorded on the compute stream and goes on
 * a list; a request of the same (rounded) size takes the oldest listed block
 * whose event has completed, else cudaMalloc. Freed memory is therefore
 * idle on every stream before anyone sees it again. (Comm-stream readers of
 * a block are the core's business: backend.h has it wait on the collective's
 * event before it frees the buffer.) When cudaMalloc runs out, the cache
 * waits for the compute stream, returns every listed block to CUDA and
 * tries once more. Compute thread only. */
#ifndef FSDP_REF_CUDA_DEVICE_CACHE_CUH
#define FSDP_REF_CUDA_DEVICE_CACHE_CUH

#include <stddef.h>

/* `bytes` of device memory (aligned to 256 bytes), or NULL when bytes is 0
 * or the device is out of memory (the failure is noted). */
void *device_cache_alloc(size_t bytes);

/* Give back a block from device_cache_alloc (NULL ignored). Reuse waits for
 * the compute-stream work enqueued before this call. */
void device_cache_free(void *ptr);

/* Wait for the device and return every cached block to CUDA. Blocks still
 * handed out are freed too, and counted in the return value (0 when the
 * caller freed everything, as backend.h requires before shutdown). */
size_t device_cache_release(void);

/* Bytes held for reuse; blocks handed out and not given back. */
size_t device_cache_cached_bytes(void);
size_t device_cache_live_blocks(void);

#endif /* FSDP_REF_CUDA_DEVICE_CACHE_CUH */
