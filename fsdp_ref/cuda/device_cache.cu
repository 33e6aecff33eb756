/* fsdp_ref/cuda/device_cache.cu: deferred-reuse device allocator; see
 * device_cache.cuh for why it exists. Live blocks sit in a hash table keyed
 * by pointer (free() is given only the pointer); freed blocks sit on one
 * FIFO list, oldest first, so the first size match is the likeliest to have
 * completed. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "fsdp_ref/cuda/cuda_common.cuh"
#include "fsdp_ref/cuda/device_cache.cuh"

/* Sizes are rounded up to this, so that buffers of nearly equal size share
 * blocks (a gathered unit and its neighbour differ by padding only). */
#define CACHE_GRANULE 512
#define CACHE_BUCKETS 4096

struct cache_block {
  void *ptr;                /* from cudaMalloc */
  size_t bytes;             /* rounded size */
  cudaEvent_t freed;        /* recorded on the compute stream at free; NULL until first free */
  struct cache_block *next; /* hash chain (live) or FIFO (free) */
};

static struct cache_block *live[CACHE_BUCKETS];
static size_t live_count;
static struct cache_block *free_head, *free_tail;
static size_t free_bytes;

static size_t bucket_of(const void *p)
{
  uintptr_t u = (uintptr_t)p >> 8; /* cudaMalloc aligns to at least 256 */
  return (size_t)((u ^ (u >> 12)) % CACHE_BUCKETS);
}

static void live_insert(struct cache_block *b)
{
  size_t h = bucket_of(b->ptr);
  b->next = live[h];
  live[h] = b;
  live_count++;
}

static struct cache_block *live_remove(const void *p)
{
  struct cache_block **pp = &live[bucket_of(p)];
  for (; *pp; pp = &(*pp)->next) {
    if ((*pp)->ptr == p) {
      struct cache_block *b = *pp;
      *pp = b->next;
      b->next = NULL;
      live_count--;
      return b;
    }
  }
  return NULL;
}

/* Take the oldest free block of `bytes` whose free event has completed. */
static struct cache_block *free_take(size_t bytes)
{
  struct cache_block *prev = NULL;
  for (struct cache_block *b = free_head; b; prev = b, b = b->next) {
    if (b->bytes != bytes)
      continue;
    cudaError_t q = cudaEventQuery(b->freed);
    if (q == cudaErrorNotReady)
      continue;
    if (q != cudaSuccess) {
      fsdp_cuda_note(q, "cudaEventQuery (allocator)");
      continue;
    }
    if (prev)
      prev->next = b->next;
    else
      free_head = b->next;
    if (free_tail == b)
      free_tail = prev;
    b->next = NULL;
    free_bytes -= b->bytes;
    return b;
  }
  return NULL;
}

static void block_destroy(struct cache_block *b)
{
  if (b->freed)
    cudaEventDestroy(b->freed);
  cudaFree(b->ptr);
  free(b);
}

/* Return every listed block to CUDA (after the compute stream is idle). */
static void free_list_drain(void)
{
  cudaStreamSynchronize(fsdp_cuda.compute);
  while (free_head) {
    struct cache_block *b = free_head;
    free_head = b->next;
    block_destroy(b);
  }
  free_tail = NULL;
  free_bytes = 0;
}

void *device_cache_alloc(size_t bytes)
{
  if (bytes == 0)
    return NULL;
  size_t rounded = (bytes + CACHE_GRANULE - 1) / CACHE_GRANULE * CACHE_GRANULE;
  struct cache_block *b = free_take(rounded);
  if (!b) {
    b = (struct cache_block *)calloc(1, sizeof *b);
    if (!b)
      return NULL;
    b->bytes = rounded;
    cudaError_t err = cudaMalloc(&b->ptr, rounded);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError(); /* out of memory is not sticky: clear it and retry */
      free_list_drain();
      err = cudaMalloc(&b->ptr, rounded);
    }
    if (err != cudaSuccess) {
      fsdp_cuda_note(err, "cudaMalloc");
      free(b);
      return NULL;
    }
  }
  live_insert(b);
  return b->ptr;
}

void device_cache_free(void *ptr)
{
  if (!ptr)
    return;
  struct cache_block *b = live_remove(ptr);
  if (!b) {
    fsdp_cuda_note(cudaErrorInvalidDevicePointer, "free of a pointer the allocator never gave");
    return;
  }
  if (!b->freed) {
    cudaError_t err = cudaEventCreateWithFlags(&b->freed, cudaEventDisableTiming);
    if (err != cudaSuccess) {
      /* No event, no safe reuse: give the block straight back to CUDA
       * (cudaFree waits for the device, which is slow but correct). */
      fsdp_cuda_note(err, "cudaEventCreate (allocator)");
      b->freed = NULL;
      block_destroy(b);
      return;
    }
  }
  fsdp_cuda_note(cudaEventRecord(b->freed, fsdp_cuda.compute), "cudaEventRecord (allocator)");
  if (free_tail)
    free_tail->next = b;
  else
    free_head = b;
  free_tail = b;
  free_bytes += b->bytes;
}

size_t device_cache_release(void)
{
  size_t leaked = 0;
  free_list_drain();
  for (size_t h = 0; h < CACHE_BUCKETS; h++) {
    while (live[h]) {
      struct cache_block *b = live[h];
      live[h] = b->next;
      block_destroy(b);
      leaked++;
    }
  }
  live_count = 0;
  return leaked;
}

size_t device_cache_cached_bytes(void) { return free_bytes; }
size_t device_cache_live_blocks(void) { return live_count; }
