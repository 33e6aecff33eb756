/*
 * analyze.h - the diagnosis of a trace: from records to struct
 * analysis_result (collector/analysis.h).
 *
 * An analyzer takes records one at a time, as trace_parser delivers them
 * from a file or as the live collector receives them, and keeps per rank
 * only the steps in flight plus bounded summaries: memory grows with the
 * number of ranks and units, not with the number of steps.
 *
 *   records -> timeline (events, ranges, GPU intervals per rank)
 *           -> steps (NVTX step ranges, or the period of the collectives)
 *           -> per step: counts, exposure per gather (overlap), cross-rank skew (ranks)
 *           -> at the end: repeating units (units), reshard policy (reshard),
 *              memory ledger (ledger), breakdown and MFU (breakdown)
 */
#ifndef FSS_COLLECTOR_ANALYZE_H
#define FSS_COLLECTOR_ANALYZE_H

#include <stddef.h>

#include "collector/analysis.h"
#include "collector/source.h"
#include "common/record.h"

typedef struct analyzer analyzer_t;

/*
 * analyzer_new - an analyzer with options opts (NULL: defaults). The
 * options' strings are borrowed and must outlive the analyzer. Returns 0 or
 * -ENOMEM.
 */
int analyzer_new(analyzer_t **out, const struct analysis_options *opts);

/*
 * analyzer_new_on - as analyzer_new, on a per-source view the caller owns
 * and feeds (a session's, collector/session.h): its timeline borrows the
 * view (timeline_new_on), so the caller passes the view's callbacks on to
 * analyzer_timeline()'s timeline and feeds the analyzer each record right
 * after the view took it. view NULL: analyzer_new.
 */
int analyzer_new_on(analyzer_t **out, const struct analysis_options *opts, sources_t *view);

/* analyzer_timeline - the analyzer's timeline (for a borrowed view's callbacks). */
struct timeline;
struct timeline *analyzer_timeline(analyzer_t *a);

/*
 * analyzer_feed - one record, as trace_parser's on_record delivers it (at
 * least record_known_size() bytes for known types). Returns 0 or -ENOMEM.
 */
int analyzer_feed(analyzer_t *a, const struct fss_record_head *rec);

/*
 * analyzer_finish - no more records: analyse what is pending and build the
 * result. *out is the caller's, released with analysis_result_free(). The
 * analyzer must not be fed afterwards (free it). Returns 0 or -ENOMEM.
 */
int analyzer_finish(analyzer_t *a, struct analysis_result **out);

/*
 * analyzer_snapshot - a result built from what the analyzer holds now,
 * without finishing it: it goes on being fed afterwards, and the snapshot
 * changes nothing it will say. *out is the caller's (analysis_result_free).
 * Its cost follows the analyzer's state (ranks, the steady-state step's
 * events, communicators, sources), not the trace's length: a session takes
 * one every second or so.
 *
 * On a trace fed completely it equals analyzer_finish's result except for
 * what only the end knows: the steps still pending (each rank's last step,
 * which waits for the event after it or for its process_end; steps waiting
 * for their GPU intervals; a group not yet closed by its ncclGroupEnd; with
 * NVTX steps, the first ANALYZE_EARLY_STEPS (8) steps until the steady state
 * is chosen among them, so a rank with fewer has no analysed step yet), the
 * step a source's records stop in (counted as cut only at the end), a rank
 * whose communicator roles wait for a window of events (decided at the end
 * with fewer), and sources with no collective, drops or process_end record
 * yet. Not after analyzer_finish (-EINVAL). Returns 0, -EINVAL or -ENOMEM.
 */
int analyzer_snapshot(analyzer_t *a, struct analysis_result **out);

/*
 * analyzer_set_now - the instant (CLOCK_REALTIME ns) the next snapshot
 * measures waits in flight to: a live session sets its clock before each
 * analyzer_snapshot. Unset (0), and always at analyzer_finish, the instant
 * is the trace's own end: the latest record of any source, on
 * CLOCK_REALTIME through its clock anchors (docs/hangs.md).
 */
void analyzer_set_now(analyzer_t *a, uint64_t realtime_ns);

/* analyzer_free - release an analyzer (NULL ok). */
void analyzer_free(analyzer_t *a);

/*
 * analyzer_pending_max - the most records' worth of items (events, ranges,
 * GPU intervals, events in the period window, buffered steps) one rank had
 * waiting at any time: what the analysis holds in memory. It follows the
 * steps in flight, not the length of the trace.
 */
size_t analyzer_pending_max(const analyzer_t *a);

/*
 * analyzer_set_truncated - tell the analyzer that its input stopped at a
 * damaged or incomplete chunk (the result says so).
 */
void analyzer_set_truncated(analyzer_t *a);

/*
 * analyzer_set_keep - the trace's header says which --keep policy wrote it
 * (FSS_FILE_KEEP_* and keep_steps, common/trace_format.h): a last:N trace
 * starts in the middle of the run, its first calls are not lost; the notes
 * say what the trace holds. analyze_trace (collector/analyze_traces.h)
 * does this from the header.
 */
void analyzer_set_keep(analyzer_t *a, uint32_t flags, uint32_t steps);

/* One collective event of a step, as the step callback sees it (a time
 * strip draws them). */
struct analysis_step_event {
	uint64_t start_ns, end_ns; /* host: its first call entered, its last returned (ncclGroupEnd's) */
	uint64_t bytes;            /* send bytes per rank (count x dtype size), summed over calls */
	uint64_t exposed_ns;       /* FSDP gathers of an analysed step: as analysis_gather.exposed_ns; else 0 */
	uint32_t calls;            /* calls in the event (> 1: a group) */
	int32_t unit;              /* FSDP gathers of an analysed step: the forward unit gathered (0 = first
	                              forward gather), -1 */
	uint8_t op;                /* enum fss_coll_op */
	uint8_t phase;             /* FSDP gathers of an analysed step: enum analysis_phase, else 0 */
	uint8_t role;              /* enum analysis_comm_role of its communicator */
	uint8_t reserved[5];
};

/* One analysed step of one rank, as the step callback sees it. */
struct analysis_step_info {
	int32_t rank;
	uint32_t ordinal;        /* steps of this rank before it (warm-up included): fsdp_ref's step number
	                            when the trace holds the whole run */
	uint64_t start_ns;       /* host CLOCK_MONOTONIC of the rank */
	uint64_t step_ns;
	uint64_t allgather_ns;   /* as analysis_exposure, for this step */
	uint64_t exposed_allgather_ns;
	uint64_t compute_ns;
	uint64_t exposed_comm_ns;
	uint32_t events;         /* collective events in the step */
	uint32_t allgathers;
	int exposure_source;     /* enum analysis_exposure_source */
	int excluded;            /* 0: analysed; 1: left out, its rank lost collectives in it or at its
	                            edges; 2: left out, in progress where its rank's records stop. A step
	                            left out has its counts and span, no timing figures */
	uint64_t compute_wait_ns;       /* as analysis_exposure, for this step */
	uint64_t other_compute_wait_ns;
	size_t nstep_events;     /* step_events[]: the step's collective events, issue order */
	const struct analysis_step_event *step_events; /* valid during the callback only */
	uint32_t source;         /* trace source id of the rank (ranks may be -1 while unknown) */
	uint32_t microbatches;   /* analysed steps: training cycles on the FSDP group (forward-only ones
	                            not counted) when its structure was read; 0 not known */
};

/* Called for every step the analysis summarises (before the steady state
 * is chosen: warm-up and irregular NVTX steps come too), and for every step
 * it leaves out (excluded != 0). */
typedef void (*analysis_step_fn)(void *ctx, const struct analysis_step_info *step);

/* analyzer_on_step - set (or clear, fn NULL) the step callback. */
void analyzer_on_step(analyzer_t *a, analysis_step_fn fn, void *ctx);

#endif
