/*
 * kineto_map.h - one PyTorch profiler (Kineto) trace file as the records
 * of one fsdpscope source (docs/kineto.md says what is read, inferred and
 * left unknown).
 *
 * kineto_map_new reads what the file's kept events say (kineto_file.h):
 * which CPU op issued each NCCL kernel (its correlation -> the launch ->
 * the communication op around that launch on the same thread, or with the
 * same External id), the communicators (process groups by name and ranks,
 * else one per NCCL stream, inferred), the collectives in issue order, the
 * ranges and their nesting, and the figures HTA would compute on the file
 * (kineto_figures.c). kineto_map_next then hands out the source's records
 * in host-time order: process_hello, the strings as they are first named,
 * a clock anchor, the communicators, then collectives (each followed by
 * its correlation), gpu intervals and NVTX ranges as they end, and last
 * the source_figures record.
 *
 * Times: the records' host and GPU times are the file's ts in ns (Kineto
 * writes host and GPU events on one time base); realtime is
 * baseTimeNanoseconds + ts, or ts itself for files written before that key
 * existed (ts was then µs since the epoch).
 */
#ifndef FSS_COLLECTOR_KINETO_MAP_H
#define FSS_COLLECTOR_KINETO_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "collector/kineto_file.h"
#include "common/record.h"

typedef struct kineto_map kineto_map_t;

/* What a file says of its job, and what it lacks, for the notes. */
struct kineto_map_info {
	int32_t rank;		   /* distributedInfo.rank, -1 */
	int32_t world_size;	   /* distributedInfo.world_size, -1 */
	int have_distributed;	   /* distributedInfo present */
	uint32_t collectives;	   /* NCCL kernels made collectives */
	uint32_t comms;		   /* communicators */
	uint32_t comms_inferred;   /* of them inferred from the NCCL streams (no process group names or ranks) */
	uint32_t host_from_launch; /* collectives whose host times are their launch's (no CPU op around it) */
	uint32_t host_from_kernel; /* collectives with no launch either: host times are the kernel's */
	uint32_t gpu_events;	   /* gpu_interval records */
	uint32_t ranges;	   /* NVTX ranges (user_annotation, gpu_user_annotation) */
	uint32_t pid;		   /* the host pid most host events carry, 0 none */
	uint32_t groups;	   /* groups of collectives made from kernels that share a launch */
};

/*
 * kineto_map_new - the records of file f (taken: freed with the map) read
 * from `path` (for the command when the file has no traceName), as source
 * `source`. Returns 0 with *out (kineto_map_free), or -ENOMEM.
 */
int kineto_map_new(kineto_file_t *f, const char *path, uint32_t source, kineto_map_t **out);
void kineto_map_free(kineto_map_t *m);

/*
 * kineto_map_next - the source's next record (valid until the next call),
 * in host-time order. Returns 1 with *rec, 0 when there are no more.
 */
int kineto_map_next(kineto_map_t *m, const struct fss_record_head **rec);

/* kineto_map_peek_realtime - CLOCK_REALTIME ns of the next record (the
 * order of a merge across files), INT64_MAX when there are no more. */
int64_t kineto_map_peek_realtime(const kineto_map_t *m);

/* kineto_map_rewind - hand the records out again from the first. */
void kineto_map_rewind(kineto_map_t *m);

const struct kineto_map_info *kineto_map_info(const kineto_map_t *m);
const struct fss_rec_source_figures *kineto_map_figures(const kineto_map_t *m);
const kineto_file_t *kineto_map_file(const kineto_map_t *m);

/* ---- the figures (kineto_figures.c) ---- */

/* HTA's kernel classes (hta/utils/utils.py get_kernel_type). */
enum kineto_kernel_class {
	KINETO_KERNEL_COMMUNICATION = 0,
	KINETO_KERNEL_MEMORY,
	KINETO_KERNEL_COMPUTATION,
	KINETO_KERNEL_OTHER,
};

/* kineto_kernel_class_of - HTA's class of a GPU event by its name. */
enum kineto_kernel_class kineto_kernel_class_of(const char *name);

/* kineto_is_profiler_step - 1 for a name HTA takes as a ProfilerStep
 * ("ProfilerStep#" then a digit). */
int kineto_is_profiler_step(const char *name);

/*
 * kineto_figures_overlap - HTA's get_comm_comp_overlap on file f, as
 * comm_ns (the union of the communication kernels, in HTA's window) and
 * overlap_ns (the part of it the union of the computation kernels covers).
 * Returns 0 or -ENOMEM.
 */
int kineto_figures_overlap(const kineto_file_t *f, uint64_t *comm_ns, uint64_t *overlap_ns);

/* ---- names (kineto_names.c) ---- */

/* kineto_is_nccl_kernel - 1 for an NCCL / RCCL kernel's name (ncclDevKernel_*, ncclKernel_*). */
int kineto_is_nccl_kernel(const char *name);
/* kineto_op_of_collective_name - the op of a "Collective name" arg or a
 * c10d:: / nccl: op's name; 0 when it names none. */
uint8_t kineto_op_of_name(const char *name);
/* kineto_op_of_kernel - the op a kernel's name says (ncclKernel_AllReduce_...); 0 none. */
uint8_t kineto_op_of_kernel(const char *name);
/* kineto_dtype_of_arg - the fss dtype of a "dtype" arg (Float, BFloat16, ...), FSS_DTYPE_UNKNOWN. */
uint8_t kineto_dtype_of_arg(const char *name);
/* kineto_dtype_of_kernel - the dtype a kernel's name says (..._Sum_float), FSS_DTYPE_UNKNOWN. */
uint8_t kineto_dtype_of_kernel(const char *name);

#endif
