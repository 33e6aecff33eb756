/*
 * session_options.h - the options a live session is started with, shared by
 * the commands that start one (run, top -- CMD, collect, attach): their
 * defaults, their parsing and checks, --metrics, and where the agent is.
 */
#ifndef FSS_CLI_SESSION_OPTIONS_H
#define FSS_CLI_SESSION_OPTIONS_H

#include "cli/diagnosis.h"
#include "cli/options.h"
#include "collector/keep.h"

/*
 * session_metrics_option - --metrics ARG: "PORT" (loopback), or HOST:PORT.
 * A host that is not loopback is served only because it was named: a
 * warning says so (prefixed with prog) and *remote is set. *hostport is
 * malloc'd. Returns 0, or -EINVAL (said) for an argument that is neither.
 */
int session_metrics_option(const char *prog, const char *arg, char **hostport, int *remote);

/*
 * session_find_agent - the agent's absolute path in *path (malloc'd):
 * $FSDPSCOPE_AGENT, else next to the executable's build tree
 * (EXE_DIR/../agent/), else the install tree (EXE_DIR/../lib/fsdpscope/).
 * When none is usable, says where it looked on stderr (prefixed with
 * prog) and returns -ENOENT; -EINVAL for a path LD_PRELOAD cannot carry.
 */
int session_find_agent(const char *prog, char **path);

/* ---- what `run` and `top -- CMD` share: the session's options, the job ---- */

/* Where a session that launches its job writes by default (run's help names them). */
#define SESSION_DEFAULT_DIR "fsdpscope-out"
#define SESSION_DEFAULT_NAME "trace"

/* The options of a session that launches its job (`fsdpscope run`, `fsdpscope top -- CMD`). */
struct session_run_options {
	const char *dir;	      /* --out DIR */
	const char *name;	      /* --name NAME */
	int dormant;		      /* --dormant */
	int no_cupti;		      /* --no-cupti */
	int flush_timeout_s;	      /* --flush-timeout SEC */
	int wait_descendants_s;	      /* --wait-descendants SEC */
	const char *json_summary;     /* --json-summary FILE */
	const char *metrics;	      /* --metrics [HOST:]PORT */
	struct keep_policy keep;      /* --keep */
	struct diagnosis_flags flags; /* --hang-timeout; the rest lint's defaults */
};

/* The ids of those options in session_run_entries (cmd_run.c's letters once; a caller's own
 * options that share a table with them use others). */
enum {
	SESSION_OPT_OUT = 'o',
	SESSION_OPT_NAME = 'n',
	SESSION_OPT_DORMANT = 'D',
	SESSION_OPT_NO_CUPTI = 'C',
	SESSION_OPT_FLUSH_TIMEOUT = 'F',
	SESSION_OPT_WAIT_DESCENDANTS = 'W',
	SESSION_OPT_JSON_SUMMARY = 'J',
	SESSION_OPT_METRICS = 'M',
	SESSION_OPT_KEEP = 'K',
};

/* session_run_options_init - run's defaults: ./fsdpscope-out, trace, 5 s flush, 3600 s descendants, keep full. */
void session_run_options_init(struct session_run_options *o);

/* session_output_check - --out DIR and --name NAME usable (a folder given, NAME a plain
 * file name). 0, or -1 (said, prefixed with prog). */
int session_output_check(const char *prog, const char *dir, const char *name);

/* session_run_options_check - after parsing: --out and --name usable. 0, or -1 (said). */
int session_run_options_check(const struct session_run_options *o, const char *prog);

/*
 * session_run_entries - the session's options as a table (cli/options.h),
 * with their help as `fsdpscope run` gives it (--hang-timeout's id is
 * DIAG_OPT_HANG_TIMEOUT). session_run_apply applies one of them, or of
 * the SESSION_OPT_ ids a command's own table names (collect, attach), to
 * the struct session_run_options ctx; a bad value is said, prefixed with
 * prog, and is -1.
 */
extern const struct options_entry session_run_entries[];
int session_run_apply(void *ctx, int id, const char *arg, const char *prog);

#endif
