/*
 * cupti.h - GPU activity through CUPTI (cupti.c, dlopen'd; cupti_none.c when
 * the agent is built without the CUPTI headers). A producer: kernel and
 * memcpy intervals go into the ring as gpu_interval records. Every entry
 * point is a no-op when CUPTI is absent, refused or disabled.
 */
#ifndef FSS_AGENT_CUPTI_H
#define FSS_AGENT_CUPTI_H

#include <stddef.h>
#include <stdint.h>

enum agent_cupti_status {
	AGENT_CUPTI_IDLE = 0,	  /* not started yet, or libcuda not loaded yet */
	AGENT_CUPTI_ON = 1,	  /* activity enabled: GPU intervals flow */
	AGENT_CUPTI_DISABLED = 2, /* FSDPSCOPE_CUPTI=0 */
	AGENT_CUPTI_ABSENT = 3,	  /* no usable libcupti */
	AGENT_CUPTI_FAILED = 4,	  /* CUPTI refused (no device, old driver, error), or a forked child */
	AGENT_CUPTI_BUSY = 5,	  /* another CUPTI subscriber (nsys, PyTorch profiler) holds CUPTI */
};

/*
 * cupti_start - dlopen CUPTI, subscribe, enable activity. Idempotent and
 * cheap once decided. It loads CUPTI only when libcuda.so.1 is already in
 * the process and otherwise stays AGENT_CUPTI_IDLE, so the agent costs
 * nothing in a process without CUDA: it is called at activation AND at each
 * communicator init (CUDA is loaded by then; a late enable works
 * in-process).
 */
void cupti_start(void);

/*
 * cupti_flush - cuptiActivityFlushAll(FORCED), at exit or on demand:
 * intervals still waiting for their correlation are emitted. Periodic
 * delivery needs no caller: CUPTI's own thread flushes completed buffers
 * every second.
 */
void cupti_flush(void);

/*
 * cupti_push_correlation / cupti_pop_correlation - the NCCL wrappers push
 * the collective's seq right before calling the real function and pop right
 * after it returns, on the same thread, for every collective called outside
 * a group. Inside a group nothing is launched until the outermost
 * ncclGroupEnd: the seq of the group's FIRST collective is pushed around
 * that real ncclGroupEnd instead (the kernels of the group's other
 * collectives are then tied to that first seq; the collector spreads them
 * over the group via group_id). A pop without its push is ignored.
 */
void cupti_push_correlation(uint64_t seq);
void cupti_pop_correlation(void);

/* cupti_status - enum agent_cupti_status, for the hello's features. */
int cupti_status(void);

/* cupti_after_fork_child - the child records no GPU activity (CUDA does
 * not survive fork); locks held by vanished threads are re-initialised. */
void cupti_after_fork_child(void);

/* cupti_handle_buffer - the completed-buffer handler the agent registers
 * with CUPTI; tests feed it buffers of real CUpti_Activity* structs. */
void cupti_handle_buffer(uint8_t *buffer, size_t valid_size);

#endif
