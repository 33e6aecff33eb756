/*
 * session.h - the one place a trace is processed: an input, one per-source
 * view, the analyzer, the live state, the keep policy and the diagnosis
 * schedule, with the consumers plugged in (perf's perf_session and
 * struct perf_tool are the model).
 *
 * How a session works
 *
 *   input --records--> view (sources_t: one decode of every record's
 *                      per-source state: hello, strings, clocks, ranks,
 *                      communicators, drops, ends)
 *                  --> timeline (borrows the view: analyzer_new_on)
 *                  --> analyzer (steps -> on_step: live, keeper, tool)
 *                  --> live state (a live session, a replay)
 *                  --> keeper (a live session: what the trace file keeps)
 *                  --> the tool's callbacks (struct fss_session_tool)
 *                  --> job steps (every rank with collectives completed
 *                      one more: the tool's on_job_step)
 *
 * A record is decoded once, by the view; everything after it reads the
 * view's struct source. The input is a small vtable (struct
 * fss_session_input): a trace file or several read from disk
 * (fss_session_open_files: trace_read, or merge_read for a job's nodes;
 * the input keeps each read's info, which analyze_traces turns into the
 * result's trace end and gaps for lint, report and ledger; dump reads the
 * files twice, view-only, the second time to its tool alone),
 * or a live ingest (fss_session_open_ingest: agent connections and
 * per-rank files, collector/ingest.h, whose output is fed to the session's
 * view by the ingest itself). The diagnosis (the rules on an analysis
 * result, above the collector) is the caller's callback
 * (fss_session_options.diagnose); when it runs is the session's:
 * fss_session_tick for a live session (once a second while steps complete
 * or a call is in flight), fss_session_diagnose for a replay at each job
 * step it shows, and the end (fss_session_finish_analysis).
 *
 * How to add a reader: write a struct fss_session_input whose pump hands
 * every record to fss_session_take (records that need no per-source view
 * of their own, such as a foreign format translated into fss records, go
 * the same way) and attach it with fss_session_set_input.
 *
 * How to add a consumer: fill a struct fss_session_tool with the
 * callbacks for the record types it reads (the rest reach on_record) and
 * pass it in the options; it sees every record after the session's own
 * consumers, with the view's source.
 *
 * Threading: a session is used by one thread at a time; the live board it
 * publishes on is read from others (collector/live.h).
 */
#ifndef FSS_COLLECTOR_SESSION_H
#define FSS_COLLECTOR_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analyze.h"
#include "collector/ingest.h"
#include "collector/keep.h"
#include "collector/live.h"
#include "collector/merge.h"
#include "collector/source.h"
#include "common/record.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"

typedef struct fss_session fss_session_t;

/*
 * A consumer of a session's records. Every callback may be NULL. The
 * typed callbacks get their records; a record whose type has no callback
 * set reaches on_record. `src` is the view's source of the record (NULL
 * for a record of no source). A non-zero return stops the input: a file
 * read returns it from fss_session_read; a live ingest fails on a negative
 * one (positive ones are ignored there).
 */
struct fss_session_tool {
	void *ctx;
	/* a trace file's header (file inputs, before its records) */
	int (*on_header)(void *ctx, const struct fss_file_header *h);
	int (*on_hello)(void *ctx, const struct source *src, const struct fss_rec_process_hello *rec);
	int (*on_collective)(void *ctx, const struct source *src, const struct fss_rec_collective *rec);
	int (*on_kernel)(void *ctx, const struct source *src, const struct fss_rec_gpu_interval *rec);
	/* process_end or process_exit: nothing more comes of the source */
	int (*on_source_end)(void *ctx, const struct source *src, const struct fss_record_head *rec);
	int (*on_record)(void *ctx, const struct source *src, const struct fss_record_head *rec);
	/* an NVTX range once its strings are known (the view's on_nvtx_range) */
	int (*on_nvtx_range)(void *ctx, const struct source *src, const struct fss_rec_nvtx_range *range,
			     const char *domain, const char *name);
	/* every step the analyzer completes (after the live state and the keeper saw it) */
	void (*on_step)(void *ctx, const struct analysis_step_info *step);
	/* every rank with collectives has completed step `job_step` (1, 2, ...): once per step, in order */
	int (*on_job_step)(void *ctx, uint64_t job_step);
	/* the session's view, once, before any record: for a tool that resolves
	 * the string ids of records (sources_string); borrowed for the session's life */
	void (*on_view)(void *ctx, const sources_t *view);
};

/*
 * The caller's diagnosis of result r: the rules on it, the live findings
 * handed to `live` (live_set_diagnosis), whatever else it says (a live
 * session's lines about calls in flight). `final`: the finished analysis.
 * Returns 0 when it diagnosed, non-zero when it could not (the session
 * returns that value).
 */
typedef int (*fss_session_diagnose_fn)(void *ctx, const struct analysis_result *r, live_t *live, int final);

struct fss_session_options {
	const struct analysis_options *analysis; /* borrowed; NULL: the defaults */
	int live;				 /* keep a live state and a board to publish it on */
	fss_session_diagnose_fn diagnose;	 /* NULL: no diagnosis (snapshots are not taken) */
	void *diagnose_ctx;
	const struct fss_session_tool *tool; /* copied; NULL: none */
	int view_only;			     /* the view alone, no analyzer: a reader that prints records (dump) */
	unsigned read_flags;		     /* TRACE_READ_* for trace files (TRACE_READ_SALVAGE: --salvage) */
};

/* A session's input: a reader of records. */
struct fss_session_input {
	const char *kind; /* "files", "ingest": for messages */
	/* take records: a file input reads to its end (timeout_ms unused), a
	 * live one waits up to timeout_ms and takes what came. Returns >= 0
	 * (the read's own result for a file: 0, FSS_E_TRUNCATED, ...), or a
	 * negative errno or a tool's value. */
	int (*pump)(void *impl, fss_session_t *s, int timeout_ms);
	void (*free)(void *impl);
};

/*
 * fss_session_new - a session without an input yet: its view, its
 * analyzer on that view, with o->live its live state and board. Returns 0
 * with *out (fss_session_free), or -ENOMEM.
 */
int fss_session_new(fss_session_t **out, const struct fss_session_options *o);

/* fss_session_free - release the session, its input, analyzer, live state
 * and board (readers of the board must be gone). NULL is allowed. */
void fss_session_free(fss_session_t *s);

/* fss_session_set_input - take `impl` with its ops as the input (the
 * session frees it). One input per session: -EBUSY for a second. */
int fss_session_set_input(fss_session_t *s, const struct fss_session_input *ops, void *impl);

/*
 * fss_session_open_files - the input: trace files read from disk, one
 * through the parser, several as one job through the merge (merge.h:
 * clocks aligned), or PyTorch profiler traces (kineto_input.h). Every
 * reader of several traces or of a folder comes through here, so here
 * (through merge_open and kineto_input_open) they are checked to be one
 * job's (trace_jobs.h): traces of two runs are FSS_E_USAGE, err listing
 * each job's files. err gets a message for a merge that cannot open.
 * Returns 0, or a negative errno / FSS_E_* (nothing attached).
 */
int fss_session_open_files(fss_session_t *s, const char *const *paths, size_t n, char *err, size_t errlen);

/*
 * fss_session_read_info - how the latest read of a one-file input ended
 * (trace_read's info: what the file is, its end, the stretches skipped);
 * NULL for another input or before a read.
 */
const struct trace_read_info *fss_session_read_info(const fss_session_t *s);

/*
 * fss_session_merge - the merge of a several-file input (merge_nodes: each
 * trace's path, read result and info; merge_current during a read), NULL
 * for another input. Borrowed: the session's until fss_session_free.
 */
merge_t *fss_session_merge(fss_session_t *s);

/* fss_session_release_merge - as fss_session_merge, but now the caller's
 * (merge_free): the input has no merge afterwards and reads nothing more. */
merge_t *fss_session_release_merge(fss_session_t *s);

/*
 * fss_session_reread - read a file input again, to the tool alone: the
 * view is not fed (it holds the whole trace from the first read), each
 * record reaches the tool with the view's source of it, each header its
 * on_header. For a reader that prints every record with what the whole
 * trace says of its source (dump). Returns as fss_session_read; -EINVAL
 * without a file input.
 */
int fss_session_reread(fss_session_t *s);

/* fss_session_end_view - no more records: NVTX ranges still waiting for
 * their strings count as dropped in the view (sources_finish). */
void fss_session_end_view(fss_session_t *s);

/*
 * fss_session_read - pump the input once: for files, read them to their
 * end through the pipeline. Returns what the input returns (see struct
 * fss_session_input); -EINVAL without an input.
 */
int fss_session_read(fss_session_t *s, int timeout_ms);

/*
 * fss_session_take - one record from the input, through the pipeline: the
 * view, the analyzer, the live state, the tool, the job steps. For
 * readers (an ingest-fed session takes its records from the ingest's
 * callback instead). Returns 0, a negative errno, or a tool's value.
 */
int fss_session_take(fss_session_t *s, const struct fss_record_head *rec);

/* fss_session_take_header - a trace file's header (the keep policy it was
 * written with reaches the analyzer; the tool's on_header). 0 or the tool's value. */
int fss_session_take_header(fss_session_t *s, const struct fss_file_header *h);

/* What a live ingest input is made of. */
struct fss_session_ingest_options {
	const char *output_path;	/* the trace the ingest writes (ingest_new) */
	const char *folder;		/* where the keeper keeps its segments */
	struct ingest_options ingest;	/* the ingest's options (its view is the session's) */
	const struct keep_policy *keep; /* NULL: keep_policy_default */
};

/*
 * fss_session_open_ingest - the input: a live ingest writing o->output_path,
 * fed to the session's view, with a keeper of o->keep. *ing is the ingest
 * (the session's: listen on it, add files, note exits; do not free it).
 * *what says which part failed ("ingest", "keeper"). Returns 0 or -errno.
 */
int fss_session_open_ingest(fss_session_t *s, const struct fss_session_ingest_options *o, ingest_t **ing,
			    const char **what);

/* fss_session_in_files - records taken from now on come from a merged file
 * (1) or from connections (0): session_records_from_agents counts the latter. */
void fss_session_in_files(fss_session_t *s, int in_files);

/* fss_session_agent_records - records taken in from connections so far. */
uint64_t fss_session_agent_records(const fss_session_t *s);

/* fss_session_keeper - the keeper of an ingest input, NULL without. */
keeper_t *fss_session_keeper(fss_session_t *s);

/*
 * fss_session_end_ingest - end an ingest input: the keeper drains, the
 * ingest finishes (ingest_finish: *stats valid until fss_session_free),
 * the keeper finishes (*note: what the trace holds when it is not
 * everything, else NULL). Returns 0 or the first error.
 */
int fss_session_end_ingest(fss_session_t *s, const struct ingest_stats **stats, const char **note);

/*
 * fss_session_tick - a live session's schedule, after each poll: a
 * diagnosis of what the analyzer holds once a second while steps complete
 * or a rank is inside a collective (waits measured to the session's clock),
 * and a new view for the readers at most every 100 ms when there is one.
 */
void fss_session_tick(fss_session_t *s);

/*
 * fss_session_diagnose - a diagnosis now, of a snapshot of the analyzer
 * (as the trace has it: the replay's clock). Returns 0, the snapshot's
 * error, or the callback's value.
 */
int fss_session_diagnose(fss_session_t *s);

/*
 * fss_session_finish_analysis - no more records: the finished analysis in
 * *out, the caller's (analysis_result_free); the analyzer is not fed
 * afterwards. read_rc is
 * how the input ended: FSS_E_TRUNCATED or FSS_E_CORRUPT mark the result
 * truncated, another error is returned as it is. Returns 0, that error, or
 * the analysis' (an earlier failure of the streamed analysis included);
 * -EINVAL for a view-only session.
 */
int fss_session_finish_analysis(fss_session_t *s, int read_rc, struct analysis_result **out);

/* fss_session_diagnose_result - the callback on result r (final). 0 or its value. */
int fss_session_diagnose_result(fss_session_t *s, const struct analysis_result *r);

/* fss_session_publish - a new view of the live state on the board. 0 or -ENOMEM. */
int fss_session_publish(fss_session_t *s);

/* fss_session_live / fss_session_board - the live state and its board (NULL without o->live). */
live_t *fss_session_live(fss_session_t *s);
live_board_t *fss_session_board(fss_session_t *s);

/* fss_session_analyzer - the analyzer (its options; analyzer_set_now). */
analyzer_t *fss_session_analyzer(fss_session_t *s);

/* fss_session_view - the per-source view every consumer reads. */
const sources_t *fss_session_view(const fss_session_t *s);

/* fss_session_job_step - steps every rank with collectives has completed. */
uint64_t fss_session_job_step(const fss_session_t *s);

/* fss_session_trace_ns - the latest host time of any source's records (pacing a replay). */
uint64_t fss_session_trace_ns(const fss_session_t *s);

/* fss_session_live_failed - the live state ran out of memory: views stopped. */
int fss_session_live_failed(const fss_session_t *s);

#endif
