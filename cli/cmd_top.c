/*
 * cmd_top.c - fsdpscope top: the dashboard (docs/top.md), in its three ways
 * in - a job it launches (run mode, cli/top_run.c), a running session it
 * connects to (tui/feed_viewer.c), a trace it replays
 * (tui/feed_replay.c). This file only parses, picks the feed and hands it
 * to the screen (tui/top.h): the screen never knows which feed it has.
 */
#include "cli/commands.h"
#include "cli/diagnosis.h"
#include "cli/options.h"
#include "cli/run_folder.h"
#include "cli/session.h"
#include "cli/session_options.h"
#include "cli/top_run.h"

#include "common/error.h"
#include "tui/feeds.h"
#include "tui/top.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define TOP_PROG "fsdpscope top"
#define TOP_DEFAULT_DIR "fsdpscope-out"
/* The longest -d: a dashboard that redraws once an hour is no dashboard. */
#define TOP_DELAY_MAX_S 3600.0
#define TOP_PAGE_MAX 10000

static const char top_help_head[] =
    "NAME\n"
    "    fsdpscope top - the dashboard: a job's ranks, steps, gathers and findings live\n\n"
    "SYNOPSIS\n"
    "    fsdpscope top [OPTIONS] [RUN OPTIONS] -- CMD [ARGS...]   launch CMD and watch it\n"
    "    fsdpscope top [OPTIONS] --connect [ADDR]                  watch a running session\n"
    "    fsdpscope top [OPTIONS] TRACE...                          replay a recorded trace\n\n"
    "DESCRIPTION\n"
    "    A terminal dashboard in the manner of htop and nvtop: a header (the job, steps\n"
    "    seen, step time and its sparkline, records dropped, a banner when a collective\n"
    "    hangs), one row per rank (host, pid, step time, AllGathers per step, exposed\n"
    "    gather time, compute, slowest collective, lateness, drops), the findings with\n"
    "    their fixes, the last step of one rank as a time strip, and the forward gathers\n"
    "    grouped by repeating unit. Keys: ? or h lists them; q quits.\n\n"
    "    It draws from snapshots of a session's live state (docs/live.md), never from\n"
    "    the collector itself, so watching never holds the job up: a slow terminal only\n"
    "    misses snapshots.\n\n"
    "    -- CMD: runs CMD as 'fsdpscope run' does (the agent in its environment, one\n"
    "    trace DIR/NAME.fss), and watches it. The dashboard owns the terminal: CMD's\n"
    "    standard output and error go to DIR/NAME.log (never replacing a file: NAME-2.log,\n"
    "    ...), which the header names, and its standard input is closed. q while the\n"
    "    job runs asks: stop it (SIGTERM to its process group; the session then ends as\n"
    "    run's, with the trace and the lint summary) or leave it running and recorded\n"
    "    (the screen ends, and fsdpscope stays until the job ends, as 'collect' would,\n"
    "    saying where the trace will be). ^C in the dashboard is q. When the job ends\n"
    "    the dashboard says how and stays until q (--exit-with-job: it leaves then);\n"
    "    the session's summary is printed once the terminal is back.\n\n"
    "    Signals: SIGTERM or SIGHUP sent to fsdpscope top end the dashboard: the\n"
    "    terminal is restored, top says 'terminated by a signal' and exits 2; with\n"
    "    -- CMD the job is then stopped (SIGTERM to its process group) and the session\n"
    "    ends as run's (the trace, the lint summary). SIGINT is ^C: q. While no screen\n"
    "    is up (after q's leave, or with --once -- CMD), SIGINT, SIGTERM or SIGHUP stop\n"
    "    the job (SIGTERM to its process group, as run forwards them), and the exit\n"
    "    status is CMD's.\n\n"
    "    --connect ADDR: the viewer socket of a running 'fsdpscope collect' or\n"
    "    'fsdpscope run' (unix:PATH or PATH; both print it at start). Without ADDR,\n"
    "    the session in ./" TOP_DEFAULT_DIR " (or --out DIR): its private folder's\n"
    "    viewer.sock, as docs/collect.md names it; with several there, they are\n"
    "    listed. Only the user who runs the session may connect.\n\n"
    "    TRACE...: the trace read as 'lint' reads it (several, or a folder of them: one job;\n"
    "    PyTorch profiler traces too),\n"
    "    fed to the analysis and the live state as a session feeds them; a view at each\n"
    "    completed step, paced by the trace's own time (--speed), and at the end the\n"
    "    finished diagnosis, which is what 'fsdpscope lint' says of the trace.\n\n"
    "    Without a terminal (a pipe, a script), top needs --once.\n\n"
    "OPTIONS\n";

/* The session's options, as run's: listed, not described again. */
static const char top_run_options_help[] = "  Run (-- CMD): the options of 'fsdpscope run', the same way\n"
					   "    --out DIR  --name NAME  --dormant  --no-cupti  --flush-timeout SEC\n"
					   "    --wait-descendants SEC  --json-summary FILE  --metrics [HOST:]PORT\n"
					   "    --keep full|summary|last:N  --hang-timeout SEC\n";

static const char top_help_tail[] =
    "\n"
    "EXIT STATUS\n"
    "    0 after q (connect, replay); -- CMD: CMD's exit status, as run's (128+N when a\n"
    "    signal ended it); 2 for a usage error, no terminal without --once, no session\n"
    "    to connect to, a file that is not a trace, or SIGTERM / SIGHUP ending the\n"
    "    dashboard (with -- CMD, after the job was stopped).\n\n"
    "OVERHEAD\n"
    "    The dashboard reads copies of the live state that the session publishes anyway\n"
    "    (at most 10 a second, after steps); a viewer that reads slowly misses copies and\n"
    "    never makes the session wait. fsdp_ref step time (2 ranks, per-Linear, 60 steps),\n"
    "    watched over unwatched, median of 7 rounds on a 2-core VM (bench/top_bench.sh,\n"
    "    bench/results/top.txt): a viewer on the socket reading every snapshot 1.018\n"
    "    (0.933 to 1.062 over rounds); top --once -- CMD against run 0.981 (0.686 to\n"
    "    1.050): within the machine's noise.\n\n"
    "EXAMPLES\n"
    "    fsdpscope top -- fsdp_ref --backend cpu --nranks 4 --layers 8 --wrap linear --steps 200\n"
    "    fsdpscope top --out runs/exp1 --exit-with-job -- torchrun --nproc-per-node 8 train.py\n"
    "    fsdpscope collect &  fsdpscope top --connect\n"
    "    fsdpscope top --connect unix:fsdpscope-out/.fsdpscope-run.Ab12Cd/viewer.sock\n"
    "    fsdpscope top --speed 0 fsdpscope-out/trace.fss\n"
    "    fsdpscope top --once --step 5 --cols 120 --rows 40 fsdpscope-out/trace.fss\n"
    "    NO_COLOR=1 fsdpscope top node0.fss node1.fss\n"
    "    fsdpscope top --once profiler/          # a folder of PyTorch profiler traces, one per rank\n";

enum {
	TOP_OPT_NO_COLOR = 0x200,
	TOP_OPT_EXIT_WITH_JOB,
	TOP_OPT_COLS,
	TOP_OPT_ROWS,
	TOP_OPT_STEP_KEYS,
	TOP_OPT_SPEED,
	TOP_OPT_STEP,
	TOP_OPT_CONNECT,
	TOP_OPT_DELAY,
	TOP_OPT_ONCE,
	TOP_OPT_RANK,
};

struct top_args {
	struct top_options opt;
	struct session_run_options run;
	int run_options_given; /* a run option other than --out */
	const char *run_option_name;
	int out_given;
	int connect;
	int step_keys;
	double speed;
	long long step;
	char **rest; /* after the options */
	int nrest;
	int dashdash; /* CMD came after "--" */
};

static int parse_number(const char *opt, const char *arg, double min, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (!*arg || *end || errno || !isfinite(v) || v < min || v > max) {
		fprintf(stderr, TOP_PROG ": %s %s: expected a number from %g to %g\n", opt, arg, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

static int top_apply(void *ctx, int id, const char *arg, const char *prog)
{
	struct top_args *a = ctx;
	double v;

	(void)prog;
	switch (id) {
	case TOP_OPT_DELAY:
		if (parse_number("-d", arg, 0.01, TOP_DELAY_MAX_S, &v))
			return -1;
		a->opt.delay_ms = (int)lround(v * 1000);
		return 0;
	case TOP_OPT_NO_COLOR:
		a->opt.color = -1; /* decided below */
		return 0;
	case TOP_OPT_ONCE:
		a->opt.once = 1;
		return 0;
	case TOP_OPT_EXIT_WITH_JOB:
		a->opt.exit_with_job = 1;
		return 0;
	case TOP_OPT_COLS:
	case TOP_OPT_ROWS:
		if (parse_number(id == TOP_OPT_COLS ? "--cols" : "--rows", arg, 0, TOP_PAGE_MAX, &v))
			return -1;
		/* 0: the terminal's COLUMNS / LINES; else a page that holds a row */
		if (v != floor(v) || (v > 0 && v < (id == TOP_OPT_COLS ? 20 : 5))) {
			fprintf(stderr, TOP_PROG ": %s %s: expected 0 (COLUMNS / LINES) or a whole number from %d\n",
				id == TOP_OPT_COLS ? "--cols" : "--rows", arg, id == TOP_OPT_COLS ? 20 : 5);
			return -1;
		}
		*(id == TOP_OPT_COLS ? &a->opt.cols : &a->opt.rows) = (int)v;
		return 0;
	case TOP_OPT_RANK:
		if (parse_number("-r", arg, 0, INT_MAX, &v))
			return -1;
		if (v != floor(v)) {
			fprintf(stderr, TOP_PROG ": -r %s: expected a rank (0, 1, ...)\n", arg);
			return -1;
		}
		a->opt.first_rank = (int)v;
		return 0;
	case TOP_OPT_STEP_KEYS:
		a->step_keys = 1;
		return 0;
	case TOP_OPT_SPEED:
		if (parse_number("--speed", arg, 0, 1e6, &a->speed))
			return -1;
		return 0;
	case TOP_OPT_STEP:
		if (parse_number("--step", arg, 1, 1e12, &v))
			return -1;
		if (v != floor(v)) {
			fprintf(stderr, TOP_PROG ": --step %s: expected a step number (1, 2, ...)\n", arg);
			return -1;
		}
		a->step = (long long)v;
		return 0;
	case TOP_OPT_CONNECT:
		a->connect = 1;
		return 0;
	default:
		return 0;
	}
}

/* A session option: applied as run applies it; top remembers which, since
 * only -- CMD takes them (--out also --connect). */
static int top_session_apply(void *ctx, int id, const char *arg, const char *prog)
{
	struct top_args *a = ctx;

	if (session_run_apply(&a->run, id, arg, prog))
		return -1;
	if (id == SESSION_OPT_OUT) {
		a->out_given = 1;
		return 0;
	}
	a->run_options_given = 1;
	for (const struct options_entry *e = session_run_entries; e->name; e++)
		if (e->id == id)
			a->run_option_name = e->name;
	return 0;
}

static const struct options_entry top_entries[] = {
    {NULL, 'd', "SEC", "redraw at most every SEC seconds (default 1; fractions allowed)", TOP_OPT_DELAY},
    {"no-color", 0, NULL,
     "no colour (bold and reverse video stay); colour is also off\n"
     "when NO_COLOR is set or the terminal has none",
     TOP_OPT_NO_COLOR},
    {"once", 'b', NULL,
     "print one plain-text snapshot and exit: for a replay the state at\n"
     "its end (or at --step N), for --connect the newest view, for\n"
     "-- CMD the view when the job has ended",
     TOP_OPT_ONCE},
    {NULL, 0, NULL, "    --cols C, --rows R  the page of --once (default 80 x 24; 0: $COLUMNS / $LINES)\n", 0},
    {"cols", 0, "C", NULL, TOP_OPT_COLS},
    {"rows", 0, "R", NULL, TOP_OPT_ROWS},
    {"exit-with-job", 0, NULL, "leave the dashboard when the job ends", TOP_OPT_EXIT_WITH_JOB},
    {NULL, 'r', "RANK", "the rank of the time strip at start (default: the slowest)", TOP_OPT_RANK},
    /* ADDR is an operand: --connect itself takes no value */
    {NULL, 0, NULL, "    --connect [ADDR]    watch a running session (see above)\n", 0},
    {"connect", 0, NULL, NULL, TOP_OPT_CONNECT},
    {NULL, 0, NULL, "    --out DIR           -- CMD: as run's; --connect without ADDR: where to look\n", 0},
    {NULL, 0, NULL, "  Replay\n", 0},
    {"speed", 0, "X", "X times the trace's own pace (default 1); 0 as fast as it reads", TOP_OPT_SPEED},
    {"step", 0, "N", "start at step N (with --once: the state at step N)", TOP_OPT_STEP},
    {"step-keys", 0, NULL, "advance one step per n key only (deterministic: tests, demos)", TOP_OPT_STEP_KEYS},
    {NULL, 0, NULL, NULL, 0},
};

static const struct options_set top_sets[] = {
    {.entries = top_entries, .apply = top_apply},
    {.entries = session_run_entries, .help = top_run_options_help, .apply = top_session_apply},
};

const struct options_help cmd_top_help = OPTIONS_HELP(top_help_head, top_sets, 24, top_help_tail);

static int parse_args(int argc, char **argv, struct top_args *a, int *help)
{
	int first, end = argc;

	memset(a, 0, sizeof(*a));
	a->opt.delay_ms = 1000;
	a->opt.cols = 80;
	a->opt.rows = 24;
	a->opt.first_rank = -1;
	a->speed = 1;
	a->step = -1;
	session_run_options_init(&a->run);
	/* Everything after the first "--" is CMD's, its options (--help too) included:
	 * only what comes before it is parsed, in any order (traces and options mixed). */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			end = i;
			a->dashdash = 1;
			break;
		}
	first = options_parse(&cmd_top_help, "top", end, argv, OPTIONS_ANYWHERE, a);
	*help = first == OPTIONS_HELP_SHOWN; /* printed */
	if (first < 0)
		return *help ? 0 : -1;
	if (a->dashdash) {
		if (first < end) {
			fprintf(stderr, TOP_PROG ": '%s' before '--': -- CMD takes no trace or address\n", argv[first]);
			return -1;
		}
		a->rest = &argv[end + 1];
		a->nrest = argc - end - 1;
	} else {
		a->rest = &argv[first];
		a->nrest = argc - first;
	}
	return 0;
}

/* Something listens on the unix socket at path (a dead session's socket stays behind). */
static int listening(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd, ok;

	if (strlen(path) >= sizeof(sun.sun_path))
		return 1; /* let the connect say what is wrong with it */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 1;
	memcpy(sun.sun_path, path, strlen(path) + 1);
	ok = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0 || errno == EACCES || errno == EPERM;
	close(fd);
	return ok;
}

/* --connect without ADDR: the one live session in DIR (its private folder's viewer socket). */
static int find_session(const char *dir, char *addr, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char found[8][PATH_MAX];
	int n = 0;

	if (!d) {
		fprintf(stderr,
			TOP_PROG
			": --connect: no session in %s (%s): start 'fsdpscope collect' or 'fsdpscope run' there, "
			"or give the viewer socket it printed (--connect unix:PATH)\n",
			dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;

		if (strncmp(e->d_name, RUN_FOLDER_PREFIX, strlen(RUN_FOLDER_PREFIX)))
			continue;
		snprintf(path, sizeof(path), "%s/%s/" RUN_VIEWER_SOCKET, dir, e->d_name);
		if ((stat(path, &st) < 0 && errno != EACCES) || !listening(path))
			continue;
		if (n < 8)
			snprintf(found[n], sizeof(found[n]), "%s", path);
		n++;
	}
	closedir(d);
	if (n == 0) {
		fprintf(stderr,
			TOP_PROG ": --connect: no session in %s (no %s*/" RUN_VIEWER_SOCKET
				 " that a session listens on): start 'fsdpscope collect' "
				 "there, or give the viewer socket a session printed (--connect unix:PATH)\n",
			dir, RUN_FOLDER_PREFIX);
		return -1;
	}
	if (n > 1) {
		fprintf(stderr, TOP_PROG ": --connect: %d sessions in %s; name one:\n", n, dir);
		for (int i = 0; i < n && i < 8; i++)
			fprintf(stderr, "    fsdpscope top --connect unix:%s\n", found[i]);
		return -1;
	}
	snprintf(addr, len, "unix:%s", found[0]);
	return 0;
}

/* The screen, or the one snapshot. 0 or EXIT_USAGE (said). */
static int show(struct top_feed *feed, const struct top_options *opt)
{
	char err[256] = "", why[256] = "";
	int rc;

	if (opt->once) {
		rc = top_print_once(feed, opt, stdout, why, sizeof why);
		if (rc == -ETIMEDOUT)
			fprintf(stderr, TOP_PROG ": --once: no view came in 10 s\n");
		else if (rc && ferror(stdout))
			; /* a failed standard output is said once, by main */
		else if (rc && why[0])
			fprintf(stderr, TOP_PROG ": %s\n", why);
		else if (rc)
			fprintf(stderr, TOP_PROG ": --once: %s\n", fss_strerror(rc));
		return rc ? EXIT_USAGE : EXIT_OK;
	}
	rc = top_run_screen(feed, opt, err, sizeof(err));
	if (rc) {
		fprintf(stderr, TOP_PROG ": %s\n", err[0] ? err : fss_strerror(rc));
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static int run_connect(struct top_args *a)
{
	char addr[PATH_MAX + 8], err[PATH_MAX + 300];
	top_viewer_feed_t *f;
	struct top_feed feed;
	int rc;

	if (a->nrest > 1) {
		fprintf(stderr, TOP_PROG ": --connect takes one address, got %d words\n", a->nrest);
		return EXIT_USAGE;
	}
	if (a->nrest == 1)
		snprintf(addr, sizeof(addr), "%s", a->rest[0]);
	else if (find_session(a->run.dir, addr, sizeof(addr)))
		return EXIT_USAGE;
	rc = top_viewer_feed_new(&f, addr, err, sizeof(err));
	if (rc) {
		fprintf(stderr, TOP_PROG ": --connect %s\n", err);
		return EXIT_USAGE;
	}
	top_viewer_feed_bind(f, &feed);
	rc = show(&feed, &a->opt);
	top_viewer_feed_free(f);
	return rc;
}

static int run_replay(struct top_args *a)
{
	struct top_replay_options ro = {0};
	struct diagnosis_flags flags;
	top_replay_feed_t *f;
	struct top_feed feed;
	char err[PATH_MAX + 300];
	char **paths;
	size_t npaths;
	int rc;

	diagnosis_flags_init(&flags);
	ro.speed = a->speed;
	ro.step_keys = a->step_keys && !a->opt.once;
	ro.first_step = a->step > 0 ? (uint64_t)a->step : 0;
	ro.only_end = a->opt.once;
	if (a->opt.once)
		ro.speed = 0;
	ro.analysis = &flags.analysis;
	ro.rules = &flags.rules;
	/* folders as lint reads them: their *.fss files, or their PyTorch profiler traces */
	if (diagnosis_trace_args(a->nrest, a->rest, 0, "top", &paths, &npaths))
		return EXIT_USAGE;
	rc = top_replay_feed_new(&f, (const char *const *)paths, npaths, &ro, err, sizeof(err));
	if (rc) {
		fprintf(stderr, TOP_PROG ": %s\n", err);
		diagnosis_trace_args_free(paths, npaths);
		return EXIT_USAGE;
	}
	top_replay_feed_bind(f, &feed);
	rc = show(&feed, &a->opt);
	top_replay_feed_free(f);
	diagnosis_trace_args_free(paths, npaths);
	return rc;
}

static int run_job(struct top_args *a)
{
	top_run_t *r;
	struct top_feed feed;
	int rc, code;

	if (session_run_options_check(&a->run, TOP_PROG))
		return EXIT_USAGE;
	if (top_run_start(&r, &a->run, a->rest))
		return EXIT_USAGE;
	top_run_bind(r, &feed);
	if (a->opt.once) {
		top_run_catch_signals();
		/* The view when the job has ended: the session's last, the final diagnosis. */
		code = top_run_finish(r);
		rc = show(&feed, &a->opt);
	} else {
		top_run_screen_begin(r);
		rc = show(&feed, &a->opt);
		top_run_screen_end(r);
		top_run_catch_signals();
		/* No screen (it failed, or a signal ended it): the job must not run on unwatched and unasked. */
		if (rc)
			top_run_stop(r);
		code = top_run_finish(r);
	}
	top_run_free(r);
	return rc ? rc : code;
}

int cmd_top(int argc, char **argv)
{
	struct top_args a;
	int help, mode;

	if (parse_args(argc, argv, &a, &help))
		return EXIT_USAGE;
	if (help)
		return EXIT_OK; /* options_parse printed the help */
	/* NO_COLOR set at all turns colour off (the screen also asks the terminal) */
	a.opt.color = a.opt.color != -1 && !getenv("NO_COLOR");
	if (a.connect)
		mode = TOP_MODE_CONNECT;
	else if (a.dashdash)
		mode = TOP_MODE_RUN;
	else
		mode = TOP_MODE_REPLAY;
	if (mode == TOP_MODE_RUN && a.nrest == 0) {
		fprintf(stderr, TOP_PROG ": no command after '--': fsdpscope top [OPTIONS] -- CMD [ARGS...]\n");
		return EXIT_USAGE;
	}
	if (mode == TOP_MODE_REPLAY && a.nrest == 0) {
		fprintf(stderr, TOP_PROG ": nothing to watch: give -- CMD, --connect [ADDR] or a TRACE (see 'fsdpscope "
					 "help top')\n");
		return EXIT_USAGE;
	}
	if (mode != TOP_MODE_RUN && a.run_options_given) {
		fprintf(stderr, TOP_PROG ": --%s is an option of -- CMD (the job top launches), not of %s\n",
			a.run_option_name, mode == TOP_MODE_CONNECT ? "--connect" : "a replay");
		return EXIT_USAGE;
	}
	if (mode == TOP_MODE_REPLAY && a.out_given) {
		fprintf(stderr, TOP_PROG ": --out is for -- CMD and --connect, not a replay\n");
		return EXIT_USAGE;
	}
	if (mode != TOP_MODE_REPLAY && (a.step_keys || a.step > 0)) {
		fprintf(stderr, TOP_PROG ": --step and --step-keys are for a replay (top TRACE...)\n");
		return EXIT_USAGE;
	}
	if (!a.opt.once && !(isatty(STDIN_FILENO) && isatty(STDOUT_FILENO))) {
		fprintf(stderr,
			TOP_PROG ": not a terminal: the dashboard needs one; use --once (or -b) for a plain-text "
				 "snapshot\n");
		return EXIT_USAGE;
	}
	if (mode == TOP_MODE_CONNECT)
		return run_connect(&a);
	if (mode == TOP_MODE_REPLAY)
		return run_replay(&a);
	return run_job(&a);
}
