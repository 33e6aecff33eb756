/* fsdp_ref/cuda/backend_cuda.cu: the CUDA backend's table, lifecycle,
 * streams, copies, events and exposed-wait timing. The model ops live one
 * family per file (ops.cuh); the allocator in device_cache.cu. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_ref/cuda/backend_cuda.h"
#include "fsdp_ref/cuda/cuda_common.cuh"
#include "fsdp_ref/cuda/device_cache.cuh"
#include "fsdp_ref/cuda/ops.cuh"

struct fsdp_cuda_state fsdp_cuda;

/* cuBLASLt workspace: 32 MiB, NVIDIA's recommendation for Hopper. Fixed, so
 * the algorithm heuristic sees the same limit on every call. */
#define LT_WORKSPACE_BYTES ((size_t)32 << 20)

static int initialized;
static int sticky_error; /* first -errno since the last synchronize; atomic */

/* ---- errors -------------------------------------------------------------- */

static int errno_of(cudaError_t err)
{
  switch (err) {
  case cudaErrorMemoryAllocation:
    return -ENOMEM;
  case cudaErrorNoDevice:
  case cudaErrorInsufficientDriver:
    return -ENODEV;
  case cudaErrorInvalidValue:
  case cudaErrorInvalidDevicePointer:
    return -EINVAL;
  default:
    return -EIO;
  }
}

static int note_errno(int e, const char *what, const char *detail)
{
  int expected = 0;
  /* Only the first error is printed: later ones are usually its echoes
   * (a kernel fault makes every following CUDA call fail). */
  if (__atomic_compare_exchange_n(&sticky_error, &expected, e, 0, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE))
    fprintf(stderr, "fsdp_ref cuda: %s failed: %s\n", what, detail);
  return e;
}

int fsdp_cuda_note(cudaError_t err, const char *what)
{
  if (err == cudaSuccess)
    return 0;
  return note_errno(errno_of(err), what, cudaGetErrorString(err));
}

int fsdp_cuda_note_blas(cublasStatus_t st, const char *what)
{
  if (st == CUBLAS_STATUS_SUCCESS)
    return 0;
  return note_errno(st == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO, what,
                    cublasGetStatusString(st));
}

void fsdp_cuda_check_launch(const char *what)
{
  cudaError_t err = cudaGetLastError();
  /* "not ready" from an event or stream query is a status, not a failure. */
  if (err != cudaSuccess && err != cudaErrorNotReady)
    fsdp_cuda_note(err, what);
}

int fsdp_cuda_take_error(void) { return __atomic_exchange_n(&sticky_error, 0, __ATOMIC_ACQ_REL); }

/* ---- exposed-wait timing --------------------------------------------------
 * A pair of timing events brackets each cudaStreamWaitEvent on the compute
 * stream: `before` completes when the compute work ahead of the wait is done,
 * `after` when the awaited collective is done too, so after - before is the
 * time the compute stream sat idle for it. Pairs are recorded by the compute
 * thread and read back after synchronize(), then reused. */
struct wait_pair {
  cudaEvent_t before, after;
};

static struct wait_pair *wait_pairs;
static size_t wait_pairs_used, wait_pairs_cap;

static struct wait_pair *wait_pair_next(void)
{
  if (wait_pairs_used == wait_pairs_cap) {
    size_t cap = wait_pairs_cap ? 2 * wait_pairs_cap : 64;
    struct wait_pair *p = (struct wait_pair *)realloc(wait_pairs, cap * sizeof *p);
    if (!p)
      return NULL;
    wait_pairs = p;
    for (size_t i = wait_pairs_cap; i < cap; i++) {
      if (cudaEventCreate(&p[i].before) != cudaSuccess) {
        cudaGetLastError();
        wait_pairs_cap = i; /* keep the pairs made so far; this wait goes untimed */
        return NULL;
      }
      if (cudaEventCreate(&p[i].after) != cudaSuccess) {
        cudaGetLastError();
        cudaEventDestroy(p[i].before);
        wait_pairs_cap = i;
        return NULL;
      }
    }
    wait_pairs_cap = cap;
  }
  return &wait_pairs[wait_pairs_used++];
}

static void wait_pairs_release(void)
{
  for (size_t i = 0; i < wait_pairs_cap; i++) {
    cudaEventDestroy(wait_pairs[i].before);
    cudaEventDestroy(wait_pairs[i].after);
  }
  free(wait_pairs);
  wait_pairs = NULL;
  wait_pairs_used = wait_pairs_cap = 0;
}

static int64_t cuda_take_exposed_ns(void)
{
  double ns = 0.0;
  for (size_t i = 0; i < wait_pairs_used; i++) {
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, wait_pairs[i].before, wait_pairs[i].after) == cudaSuccess)
      ns += (double)ms * 1e6;
    else
      cudaGetLastError(); /* not yet complete: the caller broke the contract; skip it */
  }
  wait_pairs_used = 0;
  return (int64_t)ns;
}

/* ---- lifecycle ------------------------------------------------------------ */

static void cuda_shutdown(void);

static int cuda_init(int rank, int local_rank, int world_size)
{
  int count = 0;
  cudaError_t err;

  if (initialized)
    return -EALREADY;
  err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    fprintf(stderr, "fsdp_ref cuda: no CUDA device (%s)\n",
            err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
    cudaGetLastError();
    return -ENODEV;
  }
  memset(&fsdp_cuda, 0, sizeof fsdp_cuda);
  fsdp_cuda.device = (local_rank < 0 ? 0 : local_rank) % count;
  const char *gemm = getenv("FSDP_REF_CUDA_GEMM");
  fsdp_cuda.force_classic_gemm = gemm && strcmp(gemm, "classic") == 0;
  initialized = 1; /* from here on, failures unwind through cuda_shutdown */

  int least = 0, greatest = 0;
  if ((err = cudaSetDevice(fsdp_cuda.device)) != cudaSuccess ||
      (err = cudaDeviceGetStreamPriorityRange(&least, &greatest)) != cudaSuccess ||
      (err = cudaStreamCreateWithPriority(&fsdp_cuda.compute, cudaStreamNonBlocking, least)) !=
          cudaSuccess ||
      /* NCCL kernels at the highest priority, so that a prefetch gather is
       * scheduled as soon as it is issued rather than behind queued compute. */
      (err = cudaStreamCreateWithPriority(&fsdp_cuda.comm, cudaStreamNonBlocking, greatest)) !=
          cudaSuccess ||
      (err = cudaMalloc(&fsdp_cuda.lt_workspace, LT_WORKSPACE_BYTES)) != cudaSuccess) {
    fprintf(stderr, "fsdp_ref cuda: rank %d: device %d setup failed: %s\n", rank,
            fsdp_cuda.device, cudaGetErrorString(err));
    cuda_shutdown();
    return errno_of(err);
  }
  fsdp_cuda.lt_workspace_bytes = LT_WORKSPACE_BYTES;

  cublasStatus_t st;
  if ((st = cublasLtCreate(&fsdp_cuda.lt)) != CUBLAS_STATUS_SUCCESS ||
      (st = cublasCreate(&fsdp_cuda.blas)) != CUBLAS_STATUS_SUCCESS ||
      (st = cublasSetStream(fsdp_cuda.blas, fsdp_cuda.compute)) != CUBLAS_STATUS_SUCCESS ||
      /* fp32 stays fp32: no TF32 (the default, said out loud). */
      (st = cublasSetMathMode(fsdp_cuda.blas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "fsdp_ref cuda: rank %d: cuBLAS setup failed: %s\n", rank,
            cublasGetStatusString(st));
    cuda_shutdown();
    return st == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO;
  }
  (void)world_size;
  sticky_error = 0;
  return 0;
}

static void cuda_shutdown(void)
{
  if (!initialized)
    return;
  if (fsdp_cuda.compute)
    cudaStreamSynchronize(fsdp_cuda.compute);
  if (fsdp_cuda.comm)
    cudaStreamSynchronize(fsdp_cuda.comm);
  fsdp_cuda_matmul_release();
  fsdp_cuda_attention_release();
  size_t leaked = device_cache_release();
  if (leaked)
    fprintf(stderr, "fsdp_ref cuda: shutdown: %zu device blocks were never freed\n", leaked);
  wait_pairs_release();
  if (fsdp_cuda.blas)
    cublasDestroy(fsdp_cuda.blas);
  if (fsdp_cuda.lt)
    cublasLtDestroy(fsdp_cuda.lt);
  if (fsdp_cuda.lt_workspace)
    cudaFree(fsdp_cuda.lt_workspace);
  if (fsdp_cuda.comm)
    cudaStreamDestroy(fsdp_cuda.comm);
  if (fsdp_cuda.compute)
    cudaStreamDestroy(fsdp_cuda.compute);
  memset(&fsdp_cuda, 0, sizeof fsdp_cuda);
  cudaGetLastError();
  sticky_error = 0;
  initialized = 0;
}

static int cuda_thread_init(void)
{
  cudaError_t err = cudaSetDevice(fsdp_cuda.device);
  if (err != cudaSuccess)
    fprintf(stderr, "fsdp_ref cuda: comm thread: cudaSetDevice(%d): %s\n", fsdp_cuda.device,
            cudaGetErrorString(err));
  return err == cudaSuccess ? 0 : errno_of(err);
}

static void *cuda_comm_stream(void) { return (void *)fsdp_cuda.comm; }

/* ---- memory ---------------------------------------------------------------- */

static void *cuda_alloc(size_t bytes) { return device_cache_alloc(bytes); }
static void cuda_free(void *ptr) { device_cache_free(ptr); }

/* Host -> device. Waits for the copy: the host buffer may be reused as soon
 * as this returns, whatever kind of memory it is. The core uploads rarely
 * (initial weights, a step's tokens), so the wait costs nothing measurable. */
static int cuda_memcpy_h2d(void *dst, const void *src, size_t bytes)
{
  if (!bytes)
    return 0;
  int e = fsdp_cuda_note(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, fsdp_cuda.compute), "memcpy_h2d");
  if (!e)
    e = fsdp_cuda_note(cudaStreamSynchronize(fsdp_cuda.compute), "memcpy_h2d (synchronize)");
  return e;
}

static int cuda_memcpy_d2h(void *dst, const void *src, size_t bytes)
{
  if (!bytes)
    return 0;
  int e = fsdp_cuda_note(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, fsdp_cuda.compute), "memcpy_d2h");
  if (!e)
    e = fsdp_cuda_note(cudaStreamSynchronize(fsdp_cuda.compute), "memcpy_d2h (synchronize)");
  return e;
}

static int cuda_memcpy_d2d(void *dst, const void *src, size_t bytes)
{
  if (!bytes)
    return 0;
  return fsdp_cuda_note(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, fsdp_cuda.compute), "memcpy_d2d");
}

static int cuda_memset_zero(void *dst, size_t bytes)
{
  if (!bytes)
    return 0;
  return fsdp_cuda_note(cudaMemsetAsync(dst, 0, bytes, fsdp_cuda.compute), "memset_zero");
}

/* ---- events ---------------------------------------------------------------- */

struct fsdp_event {
  cudaEvent_t ev;
};

static struct fsdp_event *cuda_event_new(void)
{
  struct fsdp_event *e = (struct fsdp_event *)calloc(1, sizeof *e);
  if (!e)
    return NULL;
  if (fsdp_cuda_note(cudaEventCreateWithFlags(&e->ev, cudaEventDisableTiming), "event_new")) {
    free(e);
    return NULL;
  }
  return e;
}

static void cuda_event_free(struct fsdp_event *e)
{
  if (!e)
    return;
  cudaEventDestroy(e->ev);
  free(e);
}

static int cuda_event_record_compute(struct fsdp_event *e)
{
  return fsdp_cuda_note(cudaEventRecord(e->ev, fsdp_cuda.compute), "event_record_compute");
}

static int cuda_event_record_comm(struct fsdp_event *e)
{
  return fsdp_cuda_note(cudaEventRecord(e->ev, fsdp_cuda.comm), "event_record_comm");
}

static int cuda_comm_wait_event(struct fsdp_event *e)
{
  return fsdp_cuda_note(cudaStreamWaitEvent(fsdp_cuda.comm, e->ev, 0), "comm_wait_event");
}

static int cuda_compute_wait_event(struct fsdp_event *e)
{
  cudaError_t q = cudaEventQuery(e->ev);
  if (q == cudaSuccess) /* already done: the stream will not wait, nothing to time */
    return 0;
  if (q != cudaErrorNotReady)
    return fsdp_cuda_note(q, "compute_wait_event (query)");
  struct wait_pair *p = wait_pair_next();
  if (p)
    fsdp_cuda_note(cudaEventRecord(p->before, fsdp_cuda.compute), "compute_wait_event (timing)");
  int e2 = fsdp_cuda_note(cudaStreamWaitEvent(fsdp_cuda.compute, e->ev, 0), "compute_wait_event");
  if (p)
    fsdp_cuda_note(cudaEventRecord(p->after, fsdp_cuda.compute), "compute_wait_event (timing)");
  return e2;
}

static int cuda_event_query(struct fsdp_event *e)
{
  cudaError_t q = cudaEventQuery(e->ev);
  if (q == cudaSuccess)
    return 1;
  if (q == cudaErrorNotReady)
    return 0;
  return fsdp_cuda_note(q, "event_query");
}

static int cuda_event_synchronize(struct fsdp_event *e)
{
  return fsdp_cuda_note(cudaEventSynchronize(e->ev), "event_synchronize");
}

static int cuda_synchronize(void)
{
  fsdp_cuda_note(cudaStreamSynchronize(fsdp_cuda.compute), "synchronize (compute stream)");
  fsdp_cuda_note(cudaStreamSynchronize(fsdp_cuda.comm), "synchronize (comm stream)");
  fsdp_cuda_check_launch("synchronize");
  return fsdp_cuda_take_error();
}

/* ---- diagnostics (backend_cuda.h) ------------------------------------------ */

extern "C" size_t fsdp_cuda_cached_bytes(void) { return device_cache_cached_bytes(); }
extern "C" size_t fsdp_cuda_live_blocks(void) { return device_cache_live_blocks(); }

/* ---- the table ------------------------------------------------------------- */

extern "C" const struct fsdp_backend fsdp_backend_cuda = {
    .version = FSDP_BACKEND_VERSION,
    .name = "cuda",
    .init = cuda_init,
    .shutdown = cuda_shutdown,
    .thread_init = cuda_thread_init,
    .comm_stream = cuda_comm_stream,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .memcpy_h2d = cuda_memcpy_h2d,
    .memcpy_d2h = cuda_memcpy_d2h,
    .memcpy_d2d = cuda_memcpy_d2d,
    .memset_zero = cuda_memset_zero,
    .event_new = cuda_event_new,
    .event_free = cuda_event_free,
    .event_record_compute = cuda_event_record_compute,
    .event_record_comm = cuda_event_record_comm,
    .comm_wait_event = cuda_comm_wait_event,
    .compute_wait_event = cuda_compute_wait_event,
    .event_query = cuda_event_query,
    .event_synchronize = cuda_event_synchronize,
    .synchronize = cuda_synchronize,
    .take_exposed_ns = cuda_take_exposed_ns,
    .embedding_forward = fsdp_cuda_embedding_forward,
    .embedding_backward = fsdp_cuda_embedding_backward,
    .rmsnorm_forward = fsdp_cuda_rmsnorm_forward,
    .rmsnorm_backward = fsdp_cuda_rmsnorm_backward,
    .matmul_forward = fsdp_cuda_matmul_forward,
    .matmul_backward = fsdp_cuda_matmul_backward,
    .rope_forward = fsdp_cuda_rope_forward,
    .rope_backward = fsdp_cuda_rope_backward,
    .attention_forward = fsdp_cuda_attention_forward,
    .attention_backward = fsdp_cuda_attention_backward,
    .swiglu_forward = fsdp_cuda_swiglu_forward,
    .swiglu_backward = fsdp_cuda_swiglu_backward,
    .residual_add = fsdp_cuda_residual_add,
    .crossentropy = fsdp_cuda_crossentropy,
    .cast = fsdp_cuda_cast,
    .adam_update = fsdp_cuda_adam_update,
};
