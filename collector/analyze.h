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
#include "common/record.h"

typedef struct analyzer analyzer_t;

/*
 * analyzer_new - an analyzer with options opts (NULL: defaults). The
 * options' strings are borrowed and must outlive the analyzer. Returns 0 or
 * -ENOMEM.
 */
int analyzer_new(analyzer_t **out, const struct analysis_options *opts);

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
 * say what the trace holds. analyze_trace does this from the header.
 */
void analyzer_set_keep(analyzer_t *a, uint32_t flags, uint32_t steps);

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
	uint32_t source;         /* the rank's trace source id (fss_record_head.source) */
};

/* Called for every step the analysis summarises (before the steady state
 * is chosen: warm-up and irregular NVTX steps come too), and for every step
 * it leaves out (excluded != 0). */
typedef void (*analysis_step_fn)(void *ctx, const struct analysis_step_info *step);

/* analyzer_on_step - set (or clear, fn NULL) the step callback. */
void analyzer_on_step(analyzer_t *a, analysis_step_fn fn, void *ctx);

/*
 * analyze_trace_steps - analyze_trace with a step callback (the accuracy
 * tests compare each step with fsdp_ref's own log).
 */
int analyze_trace_steps(const char *path, const struct analysis_options *opts, analysis_step_fn fn, void *ctx,
			struct analysis_result **out, char *err, size_t errlen);

/*
 * analyze_trace - read the trace file at path and analyse it. A trace that
 * ends inside a chunk (a killed writer) or at a damaged chunk is analysed up
 * to there (result->trace.truncated = 1). Returns 0 with *out set, or a
 * negative errno / FSS_E_* (common/error.h) with a message in err when
 * errlen > 0: the file is not a trace, or cannot be read.
 */
int analyze_trace(const char *path, const struct analysis_options *opts, struct analysis_result **out, char *err,
		  size_t errlen);

#endif
