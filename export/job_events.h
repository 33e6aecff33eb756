/*
 * job_events.h - what an exporter draws from a session's records: each
 * collective's host call and its one kernel, the compute kernels, NVTX
 * ranges, the analysis' steps, the communicators. Shared by the Perfetto
 * timeline (perfetto.h) and the Kineto files (kineto_out.h), so that both
 * show the same kernels.
 *
 * The kernel of a collective: the device interval CUPTI gave for it (a
 * gpu_interval record tied to the call by its collective_seq, or by a
 * correlation record), else, for a source without GPU intervals (the CPU
 * stand-in, attach) or a call whose interval never came, the host call's
 * interval; a call inside a group (ncclGroupStart / End) runs when the
 * group's ncclGroupEnd runs, so without GPU intervals its kernel is the
 * group's interval (as the analysis times it). Exactly one per collective
 * record.
 *
 * Compute kernels: CUPTI's compute intervals, or, on a source without GPU
 * intervals, the leaves of its compute NVTX ranges (the analysis'
 * --compute-ranges patterns; a leaf is a range inside which no other
 * compute range of its thread starts: collector/overlap.h's
 * overlap_host_compute rule), so that a tool that measures overlap on the
 * export has both sides.
 *
 * Streaming: a source without GPU intervals holds only the calls of a group
 * until its group record; one with them holds its calls until their interval arrives (CUPTI delivers
 * in batches), at most JOB_EVENTS_PENDING_MAX, the oldest then drawn at
 * its host interval.
 *
 * Times handed out are host CLOCK_MONOTONIC ns of the source (GPU times
 * moved by the source's CUPTI clock anchor).
 */
#ifndef FSS_EXPORT_JOB_EVENTS_H
#define FSS_EXPORT_JOB_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analyze.h"
#include "collector/session.h"
#include "collector/source.h"
#include "common/record.h"

#define JOB_EVENTS_PENDING_MAX 65536u

/* One collective, with what its communicator says. */
struct export_call {
	struct fss_rec_collective rec;
	uint64_t comm_id;      /* the communicator's id_hash (the same on every rank), 0 unknown */
	int32_t comm_nranks;   /* 0 unknown */
	int32_t comm_rank;     /* -1 unknown */
	const char *comm_name; /* the job's name for it (commName), "" */
	uint64_t number;       /* calls of the source before it + 1 (a per-source id for flows) */
	uint64_t group_first;  /* in a group: the number of the group's first call (the group's one
				  launch, as ncclGroupEnd launches once); else its own number */
};

enum export_kernel_kind {
	EXPORT_KERNEL_NCCL = 1,
	EXPORT_KERNEL_COMPUTE,
	EXPORT_KERNEL_MEMCPY,
	EXPORT_KERNEL_MEMSET,
};

/* Where a kernel's interval came from. */
enum export_kernel_from {
	EXPORT_FROM_DEVICE = 1, /* CUPTI's interval */
	EXPORT_FROM_HOST_CALL,	/* a collective without a device interval: its host call */
	EXPORT_FROM_NVTX_LEAF,	/* a compute range's leaf (no GPU data) */
};

/* A stream of export_kernel.stream for the NVTX leaves (no GPU data). */
#define EXPORT_STREAM_COMPUTE UINT64_MAX

struct export_kernel {
	int kind;			/* enum export_kernel_kind */
	int from;			/* enum export_kernel_from */
	uint64_t start_ns, end_ns;	/* host CLOCK_MONOTONIC */
	uint64_t launch_ns;		/* when it was launched, by collector/overlap.h's rule
					   (overlap_hta_launch): a collective's, its event's first call's
					   enter (a group's first call); a compute kernel's, its start */
	uint64_t stream;		/* CUPTI's stream id; a call without one: its cudaStream_t; leaves:
					   EXPORT_STREAM_COMPUTE */
	uint32_t device;		/* CUDA device, 0 unknown */
	uint32_t correlation;		/* CUPTI's correlation id, 0 */
	uint32_t thread;		/* leaves: the range's thread; NCCL: the call's; 0 */
	const char *name;		/* compute: the kernel's (CUPTI) or the range's name; NULL otherwise */
	const struct export_call *call; /* NCCL: its collective; NULL otherwise */
};

/* The exporter's callbacks; each may be NULL. A non-zero return stops the read. */
struct job_events_sink {
	void *ctx;
	/* a source's hello: its pid and clocks are known */
	int (*on_source)(void *ctx, const struct source *src);
	int (*on_call)(void *ctx, const struct source *src, const struct export_call *c);
	int (*on_kernel)(void *ctx, uint32_t source, const struct export_kernel *k);
	int (*on_range)(void *ctx, const struct source *src, const struct fss_rec_nvtx_range *r, const char *domain,
			const char *name);
	void (*on_step)(void *ctx, const struct analysis_step_info *step);
	/* a communicator was made: c is src's, name the job's ("") */
	int (*on_comm)(void *ctx, const struct source *src, const struct source_comm *c, const char *name);
};

typedef struct job_events job_events_t;

/* job_events_new - over sink (copied), with the analysis' compute range
 * patterns (NULL: the default; borrowed). NULL on ENOMEM. */
job_events_t *job_events_new(const struct job_events_sink *sink, const char *compute_ranges);
void job_events_free(job_events_t *j);

/* job_events_tool - the session tool that feeds j (ctx: j). */
void job_events_tool(job_events_t *j, struct fss_session_tool *out);

/*
 * job_events_finish - the input has ended: every call still waiting for
 * its device interval gets its host interval. Returns 0 or a sink's value
 * (or the first error the read stopped on).
 */
int job_events_finish(job_events_t *j);

/* job_events_error - the first error a callback returned during the read, 0. */
int job_events_error(const job_events_t *j);

/* export_nccl_kernel_name - NCCL's name for the kernel of op (dtype, redop
 * as NCCL 2.28 spells them: ncclDevKernel_AllGather_RING_LL(...),
 * ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...), ncclDevKernel_SendRecv(...)),
 * into buf. Returns buf. */
const char *export_nccl_kernel_name(int op, int dtype, int redop, char *buf, size_t len);

/* export_pytorch_dtype - the dtype as PyTorch names it (c10::ScalarType):
 * "Float", "BFloat16", "Half", ...; "Byte" for unknown. */
const char *export_pytorch_dtype(int dtype);

/* export_pytorch_collective - c10d's "Collective name" for op: "_allgather_base",
 * "_reduce_scatter_base", "allreduce", "broadcast", "send", ... */
const char *export_pytorch_collective(int op);

/* export_pytorch_coalesced - c10d's "Collective name" for op called in a
 * group, as ProcessGroupNCCL's coalesced ops record it:
 * "allgather_into_tensor_coalesced", "reduce_scatter_tensor_coalesced",
 * "allreduce_coalesced"; other ops as export_pytorch_collective. */
const char *export_pytorch_coalesced(int op);

/* export_in_out_nelems - PyTorch's "In msg nelems" / "Out msg nelems" of a call
 * of `count` on a communicator of nranks (AllGather: in = count, out = count x
 * nranks; ReduceScatter the other way round; others: both count). */
void export_in_out_nelems(int op, uint64_t count, int32_t nranks, uint64_t *in, uint64_t *out);

#endif
