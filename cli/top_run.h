/*
 * top_run.h - `fsdpscope top [opts] -- CMD`: the job launched under the
 * agent, its session on a thread of its own publishing to the board the
 * dashboard reads (cli/top_run.c). Used by cli/cmd_top.c only.
 */
#ifndef FSS_CLI_TOP_RUN_H
#define FSS_CLI_TOP_RUN_H

#include "cli/session.h"
#include "cli/session_options.h"
#include "tui/top.h"

typedef struct top_run top_run_t;

/*
 * top_run_start - start the session (options o, borrowed) and the job argv
 * in it, the job's stdout and stderr to DIR/NAME.log (never replacing a
 * file: NAME-2.log, ...), its stdin closed; the session runs on its own
 * thread until the job and what it left running have ended, then ends as
 * `run` ends (the trace, the summary). Every failure is said on stderr.
 * 0 with *out, or a negative errno.
 */
int top_run_start(top_run_t **out, const struct session_run_options *o, char **argv);

/* top_run_bind - the feed of the run: the session's views, its info, quit. */
void top_run_bind(top_run_t *r, struct top_feed *feed);

/* top_run_log_path - the job's log file. */
const char *top_run_log_path(const top_run_t *r);

/*
 * top_run_screen_begin / top_run_screen_end - around the screen: what the
 * session says on stderr goes to the log meanwhile (the dashboard owns the
 * terminal); at the end, what it said of its end (the summary) is copied
 * to the real stderr.
 */
void top_run_screen_begin(top_run_t *r);
void top_run_screen_end(top_run_t *r);

/*
 * top_run_finish - wait for the session's end (the job ended, or was
 * stopped: quit TOP_QUIT_STOP); after TOP_QUIT_LEAVE says first that the
 * job goes on recorded and where its trace will be. Returns the exit code
 * `run` would (the job's), or EXIT_USAGE when no trace was written.
 */
int top_run_finish(top_run_t *r);

/* top_run_stop - as quit TOP_QUIT_STOP. */
void top_run_stop(top_run_t *r);

/*
 * top_run_catch_signals - from now on SIGINT, SIGTERM and SIGHUP to
 * fsdpscope stop the job (SIGTERM to its group, as quit TOP_QUIT_STOP):
 * while no screen handles them (--once, and after the screen, while a job
 * left running is recorded to its end).
 */
void top_run_catch_signals(void);

void top_run_free(top_run_t *r);

#endif
