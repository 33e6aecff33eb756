/*
 * kineto_out.h - the job as PyTorch profiler (Kineto) traces, one file per
 * rank in a new folder (fsdpscope export --kineto DIR), that Holistic
 * Trace Analysis loads as a trace set and fsdpscope reads back.
 *
 * Each rank-R.json: {"schemaVersion": 1, "traceEvents": [...], then the
 * keys known at the end: "distributedInfo" {backend "nccl", rank,
 * world_size, pg_count, pg_config}, "baseTimeNanoseconds" (ts 0 on
 * CLOCK_REALTIME: ts are the rank's host CLOCK_MONOTONIC), "traceName"}.
 * Events, all with the process's pid: per collective a cpu_op
 * record_param_comms (c10d's args: Collective name, In / Out msg nelems,
 * dtype, Group size, Process Group Name / Description / Ranks), its
 * cuda_runtime cudaLaunchKernel (at its launch time: job_events.h), and its kernel (cat "kernel", NCCL's
 * name, args stream, device, correlation and the same c10d args); each
 * compute kernel (job_events.h) with its launch; ProfilerStep#N
 * user_annotation spans, one per step of the analysis.
 *
 * The folder: created (an existing one must be empty; never followed
 * through a symbolic link); each file written under a hidden temporary
 * name with an exclusive create and, once whole, renamed to rank-R.json
 * without replacing anything: the folder holds only whole rank files.
 * Streaming: one open file per rank, a few words per communicator.
 */
#ifndef FSS_EXPORT_KINETO_OUT_H
#define FSS_EXPORT_KINETO_OUT_H

#include <stddef.h>

#include "collector/analysis.h"
#include "export/job_events.h"

typedef struct kineto_export kineto_export_t;

/*
 * kineto_export_new - create folder dir (or take an empty one). Returns
 * 0 with *out (kineto_export_free), -ENOTEMPTY for a folder that holds
 * something, -ENOTDIR / -ELOOP for a path that is not a folder or is a
 * symbolic link, another negative errno when it cannot be made.
 */
int kineto_export_new(kineto_export_t **out, const char *dir);

/* kineto_export_sink - the callbacks that write the rank files (ctx: k). */
void kineto_export_sink(kineto_export_t *k, struct job_events_sink *out);

/*
 * kineto_export_finish - the analysis is done (r: each source's rank):
 * every file gets its closing keys and its name. A source with nothing to
 * say (no call, kernel or step) gets no file. Returns 0, -EEXIST when two
 * sources claim one rank (the second is named rank-R-pidP.json), or a
 * negative errno (a write failed).
 */
int kineto_export_finish(kineto_export_t *k, const struct analysis_result *r);

/* kineto_export_files - files written by finish. */
size_t kineto_export_files(const kineto_export_t *k);

/* kineto_export_free - release k; unfinished, its files are removed, and
 * the folder when it made it. NULL allowed. */
void kineto_export_free(kineto_export_t *k);

#endif
