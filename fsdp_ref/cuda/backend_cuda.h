/* fsdp_ref/cuda/backend_cuda.h: the CUDA backend of the reference trainer.
 *
 * One GPU per rank (device = local_rank % device count); a compute stream
 * for every op, copy and memset, and a high-priority comm stream that the
 * core hands to NCCL. Matmuls go through cuBLASLt in fp32 (bf16 weights are
 * widened to an fp32 scratch first, so a bf16 run computes exactly what the
 * CPU backend computes: fp32 arithmetic on bf16-rounded weights); every other
 * op is a plain kernel whose reductions run in a fixed order, so results are
 * bit-reproducible from run to run and independent of where in a flat
 * parameter buffer a weight lives (see matmul.cu for how cuBLASLt is pinned
 * to one algorithm per shape).
 *
 * Environment:
 *   FSDP_REF_CUDA_GEMM=classic   use classic cuBLAS (cublasSgemm) instead of
 *                                cuBLASLt for every matmul.
 *
 * The table's functions follow fsdp_ref/backend.h; what the CUDA backend adds
 * to those contracts:
 *   - init returns -ENODEV when no CUDA device is usable (no driver, no GPU),
 *     after one line on stderr saying why;
 *   - free defers reuse of a block until the compute-stream work enqueued
 *     before the free has completed (an event per freed block), so freed
 *     memory can be handed to any stream, the comm stream included;
 *   - take_exposed_ns reports device time the compute stream spent blocked in
 *     compute_wait_event (event pairs around cudaStreamWaitEvent).
 */
#ifndef FSDP_REF_CUDA_BACKEND_CUDA_H
#define FSDP_REF_CUDA_BACKEND_CUDA_H

#include "fsdp_ref/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const struct fsdp_backend fsdp_backend_cuda;

/* Bytes of device memory the allocator holds for reuse (freed by the core,
 * not yet returned to CUDA), and the number of blocks it has handed out and
 * not had back. For the self-test and diagnostics; compute thread only. */
size_t fsdp_cuda_cached_bytes(void);
size_t fsdp_cuda_live_blocks(void);

/* 1 when the most recent matmul ran on cuBLASLt, 0 when on classic cuBLAS
 * (FSDP_REF_CUDA_GEMM=classic, or Lt had no algorithm for the shape). */
int fsdp_cuda_last_gemm_was_lt(void);

#ifdef __cplusplus
}
#endif

#endif /* FSDP_REF_CUDA_BACKEND_CUDA_H */
