/*
 * perfetto.h - the job's timeline as one Chrome-trace JSON file, for
 * Perfetto's UI and chrome://tracing (fsdpscope export --perfetto).
 *
 * One process per rank ("rank R", host and pid in its args; pid is the
 * trace's source id + 1, so that processes of several hosts never share
 * one), a thread per host thread that made calls or NVTX ranges, a track
 * per GPU stream (and one "compute (NVTX leaves)" track on a trace without
 * GPU intervals). Per collective: its host call (cat "nccl_call") and its
 * one kernel (cat "kernel", named as NCCL names its kernels; the device
 * interval, else the host call's: job_events.h), joined by a flow (s, f
 * with bp "e"). NVTX ranges as slices (cat "nvtx"). Per step, counters
 * (ph "C") on the rank: step time, exposed AllGather time, AllGathers.
 * The findings as instant events (ph "i") at the start of the step their
 * figures are from (the headline rank's representative step), said in
 * their args.
 *
 * Streaming: events are written as the records come; what is kept is a
 * few words per source (its threads and streams) and one per step.
 */
#ifndef FSS_EXPORT_PERFETTO_H
#define FSS_EXPORT_PERFETTO_H

#include <stddef.h>

#include "collector/analysis.h"
#include "export/job_events.h"
#include "rules/findings.h"

typedef struct perfetto_export perfetto_export_t;

/*
 * perfetto_export_new - start the document for path, written as
 * common/out_file.h says (a temporary file renamed over path when whole; a
 * device or a pipe as it is). Returns 0 with *out (perfetto_export_free),
 * or a negative errno with the reason, naming path, in why.
 */
int perfetto_export_new(perfetto_export_t **out, const char *path, char *why, size_t whylen);

/* perfetto_export_sink - the callbacks that write into p (ctx: p). */
void perfetto_export_sink(perfetto_export_t *p, struct job_events_sink *out);

/*
 * perfetto_export_finish - the analysis is done: the processes' names,
 * the findings, the document closed and the file flushed and closed.
 * findings may be NULL. Returns 0 or a negative errno (a write failed),
 * the reason in why.
 */
int perfetto_export_finish(perfetto_export_t *p, const struct analysis_result *r, const findings_t *findings,
			   char *why, size_t whylen);

/* perfetto_export_events - events written (for the command's summary). */
uint64_t perfetto_export_events(const perfetto_export_t *p);

/* perfetto_export_free - release p; a file not finished leaves what was at path as it was. NULL allowed. */
void perfetto_export_free(perfetto_export_t *p);

#endif
