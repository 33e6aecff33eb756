/*
 * session.h - a live session (docs/collect.md, docs/architecture.md): what `fsdpscope
 * run` and `fsdpscope collect` share, so that both are one code path.
 *
 * A session is a private folder in DIR (cli/run_folder.h: lock, socket,
 * unfinished trace) and a collector session (collector/session.h: the
 * engine) whose input is an ingest listening on the private socket and on
 * any other address asked for: one per-source view the ingest feeds, a
 * streaming analyzer fed from the ingest's record callback (it sees
 * exactly the records the trace gets, in the trace's order), the live
 * state (collector/live.h) fed from the same records and the analyzer's
 * steps, published on a board that the viewer
 * endpoint (a second socket beside the agents', collector/viewer.h) and
 * /metrics (collector/metrics.h, when asked) read, the keeper that
 * decides what of a long job the trace keeps (collector/keep.h), and the
 * end: the trace moved into place, the streamed analysis finished, the
 * rules run on it, the lint summary printed. The findings printed at the
 * end are the streamed analyzer's, which saw every record: with --keep
 * full they equal `fsdpscope lint` on the trace written
 * (tests/e2e/collect_e2e.py); with last:N or summary the trace holds less
 * than the analysis saw, and lint on it sees only that.
 *
 * The caller owns the loop: it calls session_poll with a short timeout
 * (a signal interrupts the wait) until its own condition says stop (run:
 * the job ended; collect: a signal, or --until-idle), then session_finish.
 */
#ifndef FSS_CLI_SESSION_H
#define FSS_CLI_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cli/diagnosis.h"
#include "cli/run_folder.h"
#include "collector/ingest.h"
#include "collector/keep.h"

typedef struct session session_t;

/* What a session does with the leftovers of dead sessions in DIR. */
enum session_leftovers {
	/* merge each into a trace of its own, DIR/recovered-ID.fss (run: what
	 * another job left is not this job's) */
	SESSION_LEFTOVERS_RECOVER,
	/* merge each into this session's trace (collect restarted in the same
	 * DIR: the same job's ranks continue in it) */
	SESSION_LEFTOVERS_MERGE,
};

struct session_options {
	const char *prog;	   /* "fsdpscope run": the prefix of every line said */
	const char *dir;	   /* DIR, created */
	const char *name;	   /* the trace's name, DIR/NAME.fss */
	char *const *argv;	   /* the command line run.info records */
	const char *const *listen; /* more addresses to listen on (wire.h syntax), already checked */
	size_t nlisten;
	const char *spool; /* a folder of agents' files to merge at the start and at the end
			      (collect's FSDPSCOPE_OUT), or NULL */
	enum session_leftovers leftovers;
	const struct diagnosis_flags *flags; /* the analysis and the rules (NULL: lint's defaults);
						borrowed, must outlive the session */
	const char *json_summary;	     /* write the final diagnosis here as JSON (fsdpscope.report/2),
						or NULL */
	const unsigned char *key;	     /* WIRE_KEY_BYTES the tcp listeners require (common/wire.h), or
						NULL: no tcp listener */
	uint32_t key_timeout_ms;	     /* how long a tcp peer has for the key (ingest_options), 0: the
						ingest's default */
	const struct keep_policy *keep;	     /* what the trace keeps of a long job (collector/keep.h);
					      NULL: keep_policy_default */
	const char *metrics;		     /* serve Prometheus /metrics on HOST:PORT, or NULL */
	int metrics_remote;		     /* a non-loopback metrics address is allowed (the user was warned) */
	const char *no_source_words;	     /* why no process reported, when none did (after "no process
						reported: "); NULL: the agent's reasons (LD_PRELOAD) */
};

/*
 * session_new - make the private folder, deal with the leftovers of dead
 * sessions in DIR (as o->leftovers says), create the trace and the
 * streaming analyzer, listen on the private socket and on o->listen[],
 * and merge the spool's finished files. Every failure is said on stderr
 * (prefixed with o->prog) before it returns. Returns 0 with *out (free
 * with session_free), or a negative errno.
 */
int session_new(session_t **out, const struct session_options *o);

/* session_run_folder - the private folder's side (run.info, socket path). */
run_folder_t *session_run_folder(session_t *s);

/* session_ingest - the ingest (ingest_note_exit is the caller's: it reaps). */
ingest_t *session_ingest(session_t *s);

/* session_private_sink - "unix:<private socket>", FSDPSCOPE_SINK for a
 * job the session launches itself. */
const char *session_private_sink(const session_t *s);

/*
 * session_poll - wait up to timeout_ms for the agents, take in what they
 * sent, flush the trace at least once a second (what a killed session
 * loses). Returns 0; a failed ingest is said once on stderr, after which
 * the session only waits (the agents drop and count).
 */
int session_poll(session_t *s, int timeout_ms);

/* session_failed - the ingest failed (the trace is not being written). */
int session_failed(const session_t *s);

/* session_open_connections - connections open now (tcp ones still waiting for their key included). */
size_t session_open_connections(const session_t *s);

/* session_open_agents - of those, the agents' (ingest_open_agents). */
size_t session_open_agents(const session_t *s);

/* session_agents_seen - agent connections so far, closed ones included. */
uint32_t session_agents_seen(const session_t *s);

/* session_viewer_address - "unix:<viewer socket>", NULL when there is none. */
const char *session_viewer_address(const session_t *s);

/* session_metrics_address - the /metrics HOST:PORT served (port filled in), or NULL. */
const char *session_metrics_address(const session_t *s);

/* session_records_from_agents - records taken in from connections so far
 * (not from merged files): a connection was there once it is above 0. */
uint64_t session_records_from_agents(const session_t *s);

/* What the end of a session reports, valid until session_free. */
struct session_outcome {
	const char *trace_path;		      /* where the trace is, NULL when none was written */
	const struct ingest_stats *stats;     /* NULL when none was written */
	const struct analysis_result *result; /* the streamed analysis, NULL when it could not finish */
	int lint_max_severity;		      /* as lint_print_summary: -1 no finding, 0 info, ... */
	int kept;			      /* the private folder stays (something left in it) */
	int write_error;		      /* -errno: the trace or --json-summary was not written whole (said) */
};

/* Called by session_finish after the trace's warnings, before its
 * summary line: the caller's own notes (run: the processes that outlived
 * CMD). */
typedef void (*session_notes_fn)(void *ctx, const struct ingest_stats *stats);

/*
 * session_finish - merge the agents' files (private folder, spool), end
 * the ingest, move the trace to DIR/NAME.fss (never replacing a file),
 * finish the streamed analysis and run the rules on it, and print on
 * stderr what the trace holds (notes_fn's lines among them) and the lint
 * summary; with o->json_summary, the diagnosis as JSON there.
 * keep_folder: processes still write into the private folder, so it must
 * stay. Returns 0 when the trace was written, else a negative errno
 * (said; what was recorded is left in the private folder).
 */
int session_finish(session_t *s, int keep_folder, session_notes_fn notes_fn, void *ctx, struct session_outcome *out);

/* session_stop_asked - the user stopped the job (a signal run forwarded,
 * top's stop): its processes ending before they close their streams is
 * then said in one line, not as a warning each. */
void session_stop_asked(session_t *s);

/* session_abandon - end without a trace (nothing ran): the unfinished
 * trace is removed, the folder with it. */
void session_abandon(session_t *s);

/* session_free - release everything; the private folder goes unless
 * session_finish said to keep it. NULL is allowed. */
void session_free(session_t *s);

/* session_board - the board the session publishes its views on (the
 * dashboard of `top -- CMD` reads it on another thread). */
struct live_board;
struct live_board *session_board(session_t *s);

#endif
