/*
 * cmd_attach.c - fsdpscope attach: diagnose a job that was started without
 * fsdpscope, in place (docs/attach.md).
 *
 * Three threads: the capture's (cli/attach_capture.c: the probes, their
 * records, one connection per process into the session's private socket),
 * the session's (cli/session.c, as `collect` runs it: the ingest, the
 * streamed analysis, the viewer endpoint, /metrics, the trace), and, with
 * --top, the dashboard on the main thread. The capture writes into the
 * connections with blocking writes; the session reads them on its own
 * thread, so neither can wait on the other.
 */
#include "cli/commands.h"
#include "cli/diagnosis.h"
#include "cli/job.h"
#include "cli/options.h"
#include "cli/session.h"
#include "cli/session_options.h"

#include "cli/attach_capture.h"
#include "collector/viewer.h"
#include "common/clock.h"
#include "common/error.h"
#include "tui/feeds.h"
#include "tui/top.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ATTACH_PROG "fsdpscope attach"
#define ATTACH_DEFAULT_DIR "fsdpscope-out"
#define ATTACH_DEFAULT_NAME "attach"
#define ATTACH_MAX_PIDS 4096
#define ATTACH_MAX_DURATION_S (30 * 86400)
/* The capture's wait: how late a signal or --duration is noticed at worst. */
#define ATTACH_POLL_MS 100
/* After the capture closed its connections: the session's wait for them to end. */
#define ATTACH_FLUSH_MS 5000

/* bench/results/attach.txt (bench/attach_bench.sh) */
#define ATTACH_OVERHEAD_HELP                                                                                           \
	"    In the job: an entry and a return probe per NCCL call, about 2.8 us added to\n"                           \
	"    each (an empty ncclGroupStart/End pair: 11 ns bare, 2.7 us attached; an\n"                                \
	"    ncclAllReduce enqueue: 47 ns bare, 3.0 us attached), so attach stays under 1%\n"                          \
	"    of a rank's time below about 3,400 probed calls per second per rank. fsdp_ref\n"                          \
	"    (2 ranks, per-Linear, ~98 calls a 73 ms step): attached / bare step time 1.07\n"                          \
	"    (median of 7 rounds on 2 shared cores, where the ranks and attach's consumer\n"                           \
	"    share the CPU; the per-call cost alone predicts 0.4%). Placing probes takes\n"                            \
	"    milliseconds per process, removing them 0.07 s (uprobe_multi links; older\n"                              \
	"    kernels or FSDPSCOPE_UPROBE_MULTI=0: one perf event per probe, about 4 s to\n"                            \
	"    remove 34). bench/results/attach.txt (bench/attach_bench.sh).\n"

static const char attach_help_head[] =
    "NAME\n"
    "    fsdpscope attach - diagnose a running job that was started without fsdpscope\n\n"
    "SYNOPSIS\n"
    "    fsdpscope attach [--out DIR] [--name NAME] [--duration SEC] [--top]\n"
    "                     [--metrics [HOST:]PORT] [--keep POLICY] [--json-summary FILE]\n"
    "                     [ANALYSIS OPTIONS] PID... | --all\n\n"
    "DESCRIPTION\n"
    "    For a job that will not be restarted under the agent: attach places eBPF\n"
    "    uprobes and uretprobes on the NCCL entry points of the libnccl each process\n"
    "    maps (the collectives, point-to-point calls, groups, communicator init,\n"
    "    split, shrink, destroy, abort, finalize), for those processes only, and turns\n"
    "    what they see into the agent's records (path uprobe) in one live session:\n"
    "    the same trace DIR/NAME.fss, analysis, rules, dashboard (--top) and /metrics\n"
    "    (--metrics) as 'fsdpscope run'. When it detaches it prints the lint summary.\n\n"
    "    Each PID is the root of a tree: the process itself when it maps libnccl, and\n"
    "    every descendant that does, now and later (a launcher's ranks: give\n"
    "    torchrun's pid; an elastic restart's new ranks are picked up). --all: every\n"
    "    process of the machine that maps libnccl, now and later. The library is\n"
    "    opened through /proc/PID/root, so a containerised job's own libnccl is the\n"
    "    one probed.\n\n"
    "    What attach cannot see, and says: communicators made before the attach are\n"
    "    known only by their handle, so their identity across ranks (matched by the\n"
    "    order, kinds and sizes of their calls), their size (the attached processes\n"
    "    that share them) and the rank in them (from in-place AllGathers, else RANK\n"
    "    in the process's environment, else a guess from pid order) are inferred,\n"
    "    and the report says which and how. Steps come from the period of the\n"
    "    collective sequence (NVTX is not visible to uprobes). Exposure needs GPU\n"
    "    timing, which uprobes cannot give: it is not measured in attach mode (run\n"
    "    the job under 'fsdpscope run' for it). docs/attach.md has the whole list.\n\n"
    "    It detaches on SIGINT, SIGTERM or SIGHUP, after --duration, or when every\n"
    "    process it watches has ended: every probe is removed, and the job goes on\n"
    "    exactly as before (same outputs, same exit code). The probes go one process\n"
    "    after another, so every rank's records are cut at the last call all of them\n"
    "    completed before the probes began to go (said, with what was left out).\n"
    "    A PID that maps no libnccl, nor any descendant of it while attach watched,\n"
    "    is an error: no trace is written. Two attaches on one process work: each\n"
    "    places its own probes and writes its own trace.\n\n"
    "    Needs root, or CAP_BPF and CAP_PERFMON, and a kernel with uprobes and BTF.\n\n"
    "OPTIONS\n";

static const char attach_help_tail[] =
    "\n"
    "EXIT STATUS\n"
    "    0 the trace was written (gate on its findings with 'fsdpscope lint TRACE');\n"
    "    1 it could not be written; 2 attach could not start: bad usage, no privilege,\n"
    "    a kernel without uprobes or BTF, no such process, no libnccl mapped, or a\n"
    "    build without libbpf.\n\n"
    "OVERHEAD\n" ATTACH_OVERHEAD_HELP "\n"
    "EXAMPLES\n"
    "    sudo fsdpscope attach --duration 120 $(pgrep -f torchrun)\n"
    "    sudo fsdpscope attach --top 4242 4243 4244 4245\n"
    "    sudo fsdpscope attach --all --metrics 9400 --out /var/tmp/fsdpscope\n"
    "    fsdpscope lint fsdpscope-out/attach.fss\n";

static volatile sig_atomic_t attach_signalled;

static void on_signal(int sig)
{
	(void)sig;
	attach_signalled = 1;
}

struct attach_args {
	int duration_s; /* 0: none */
	int all, top;
	struct session_run_options s; /* --out, --name, --json-summary, --metrics, --keep, the analysis */
	pid_t *pids;
	size_t npids;
};

enum { OPT_DURATION = DIAG_OPT_END, OPT_ALL, OPT_TOP };

static int attach_apply(void *ctx, int id, const char *arg, const char *prog)
{
	struct attach_args *a = ctx;
	char *end;
	long v;

	switch (id) {
	case OPT_DURATION:
		errno = 0;
		v = strtol(arg, &end, 10);
		if (*end || end == arg || errno || v < 1 || v > ATTACH_MAX_DURATION_S) {
			fprintf(stderr, "%s: --duration: '%s' is not a number of seconds (1..%d)\n", prog, arg,
				ATTACH_MAX_DURATION_S);
			return -1;
		}
		a->duration_s = (int)v;
		return 0;
	case OPT_ALL:
		a->all = 1;
		return 0;
	case OPT_TOP:
		a->top = 1;
		return 0;
	default: /* --out, --name, --json-summary, --metrics, --keep: as run's */
		return session_run_apply(&a->s, id, arg, prog);
	}
}

static const struct options_entry attach_entries[] = {
    {"out", 0, "DIR", "directory for the trace (created; default ./" ATTACH_DEFAULT_DIR ")", SESSION_OPT_OUT},
    {"name", 0, "NAME",
     "trace file name, DIR/NAME.fss (default " ATTACH_DEFAULT_NAME "); never replaces\n"
     "a file (NAME-2.fss, ... instead, said)",
     SESSION_OPT_NAME},
    {"duration", 0, "SEC", "detach after SEC seconds", OPT_DURATION},
    {"all", 0, NULL, "every process on the machine that maps libnccl", OPT_ALL},
    {"top", 0, NULL, "the dashboard ('fsdpscope help top') while attached; q detaches", OPT_TOP},
    {"metrics", 0, "[HOST:]PORT", "serve Prometheus /metrics there (docs/metrics.md)", SESSION_OPT_METRICS},
    {"keep", 0, "POLICY",
     "what the trace keeps of a long job: full, last:N, summary[:N]\n"
     "(docs/keep.md)",
     SESSION_OPT_KEEP},
    {"json-summary", 0, "FILE", "write the final diagnosis to FILE as 'fsdpscope lint --json'",
     SESSION_OPT_JSON_SUMMARY},
    {NULL, 0, NULL, "    -h, --help           this text\n", 0},
    {NULL, 0, NULL, NULL, 0},
};

static const struct options_set attach_sets[] = {
    {.entries = attach_entries, .apply = attach_apply},
    OPTIONS_DIAGNOSIS_SET(offsetof(struct attach_args, s.flags)),
};

const struct options_help cmd_attach_help = OPTIONS_HELP(attach_help_head, attach_sets, 25, attach_help_tail);

static int parse_args(int argc, char **argv, struct attach_args *a, int *help)
{
	int first;
	char *end;
	long v;

	memset(a, 0, sizeof(*a));
	session_run_options_init(&a->s);
	a->s.dir = ATTACH_DEFAULT_DIR;
	a->s.name = ATTACH_DEFAULT_NAME;
	first = options_parse(&cmd_attach_help, "attach", argc, argv, OPTIONS_ANYWHERE, a);
	*help = first == OPTIONS_HELP_SHOWN; /* printed */
	if (first < 0)
		return *help ? 0 : -EINVAL;
	if (session_output_check(ATTACH_PROG, a->s.dir, a->s.name))
		return -EINVAL;
	if (a->all && first < argc) {
		fprintf(stderr, ATTACH_PROG ": --all attaches every process with libnccl: give no PID with it\n");
		return -EINVAL;
	}
	if (!a->all && first == argc) {
		fprintf(stderr,
			ATTACH_PROG ": no PID: fsdpscope attach [OPTIONS] PID... (or --all; see 'fsdpscope help "
				    "attach')\n");
		return -EINVAL;
	}
	if (argc - first > ATTACH_MAX_PIDS) {
		fprintf(stderr, ATTACH_PROG ": at most %d PIDs\n", ATTACH_MAX_PIDS);
		return -EINVAL;
	}
	a->pids = calloc((size_t)(argc - first) + 1, sizeof(pid_t));
	if (!a->pids)
		return -ENOMEM;
	for (int i = first; i < argc; i++) {
		errno = 0;
		v = strtol(argv[i], &end, 10);
		if (*end || end == argv[i] || errno || v < 1 || v > INT32_MAX) {
			fprintf(stderr, ATTACH_PROG ": '%s' is not a process id\n", argv[i]);
			return -EINVAL;
		}
		for (size_t k = 0; k < a->npids; k++)
			if (a->pids[k] == (pid_t)v) {
				fprintf(stderr, ATTACH_PROG ": pid %ld is given twice\n", v);
				return -EINVAL;
			}
		a->pids[a->npids++] = (pid_t)v;
	}
	return 0;
}

/* What the threads share. */
struct attach_state {
	struct attach_args *a;
	session_t *session;
	attach_capture_t *capture;
	char *metrics;
	atomic_int stop;	 /* detach now: a signal, --duration, the dashboard's q */
	atomic_int capture_done; /* the capture detached and closed its connections */
	int capture_rc;		 /* < 0: the probes failed */
	int unattached;		 /* no process was ever attached: no trace, exit 2 */
	int finish_rc;
	char trace[4096];
	/* --top */
	top_board_feed_t *bf;
	struct top_info info;
	pthread_mutex_t mu;
};

static void publish_status(struct attach_state *st, int ended, const char *how)
{
	struct attach_capture_status cs;

	if (!st->bf)
		return;
	attach_capture_status(st->capture, &cs);
	pthread_mutex_lock(&st->mu);
	if (cs.first_command[0])
		snprintf(st->info.command, sizeof(st->info.command), "%s", cs.first_command);
	snprintf(st->info.source, sizeof(st->info.source), "attached: %u processes, %u running, %" PRIu64 " events%s",
		 cs.attached, cs.running, cs.events, cs.lost ? " (some lost)" : "");
	if (ended) {
		st->info.job_state = TOP_JOB_ENDED;
		snprintf(st->info.how, sizeof(st->info.how), "%s", how);
	}
	top_board_feed_set_info(st->bf, &st->info);
	pthread_mutex_unlock(&st->mu);
}

/* The capture until a stop, --duration, or nothing left to watch; then detach. */
static void *capture_main(void *arg)
{
	struct attach_state *st = arg;
	int64_t end = st->a->duration_s ? clock_mono_ms() + (int64_t)st->a->duration_s * 1000 : 0, last_pub = 0;
	const char *why = "detached";
	int rc = 1;

	while (!atomic_load(&st->stop) && !attach_signalled) {
		if (end && clock_mono_ms() >= end) {
			fprintf(stderr, ATTACH_PROG ": --duration %d s reached: detaching\n", st->a->duration_s);
			why = "detached (--duration)";
			break;
		}
		rc = attach_capture_round(st->capture, ATTACH_POLL_MS);
		if (rc <= 0)
			break;
		if (st->bf && clock_mono_ms() - last_pub >= 500) {
			publish_status(st, 0, NULL);
			last_pub = clock_mono_ms();
		}
	}
	if (rc < 0) {
		fprintf(stderr, ATTACH_PROG ": the probes failed: %s: detaching\n", fss_strerror(rc));
		why = "the probes failed";
	} else if (rc == 0) {
		fprintf(stderr, ATTACH_PROG ": every process watched has ended\n");
		why = "the processes ended";
	} else if (atomic_load(&st->stop) || attach_signalled) {
		fprintf(stderr, ATTACH_PROG ": detaching\n");
	}
	st->capture_rc = rc < 0 ? rc : 0;
	publish_status(st, 0, NULL);
	attach_capture_detach(st->capture);
	publish_status(st, 1, why);
	atomic_store(&st->capture_done, 1);
	return NULL;
}

/* The session until the capture is done and its connections have ended. */
static void *session_main(void *arg)
{
	struct attach_state *st = arg;
	struct session_outcome outcome;

	struct attach_capture_status cs;

	while (!atomic_load(&st->capture_done))
		session_poll(st->session, ATTACH_POLL_MS);
	attach_capture_status(st->capture, &cs);
	if (cs.attached == 0) {
		/* nothing mapped libnccl while attach watched: a trace would be empty */
		attach_capture_say_unattached(st->capture);
		session_abandon(st->session);
		st->unattached = 1;
		return NULL;
	}
	job_drain(st->session, ATTACH_FLUSH_MS, NULL);
	st->finish_rc = session_finish(st->session, 0, NULL, NULL, &outcome);
	if (st->finish_rc == 0 && outcome.trace_path)
		snprintf(st->trace, sizeof(st->trace), "%s", outcome.trace_path);
	if (!st->finish_rc)
		st->finish_rc = outcome.write_error;
	if (st->bf) {
		pthread_mutex_lock(&st->mu);
		if (st->trace[0])
			snprintf(st->info.trace, sizeof(st->info.trace), "%.*s", (int)sizeof(st->info.trace) - 1,
				 st->trace);
		top_board_feed_set_info(st->bf, &st->info);
		pthread_mutex_unlock(&st->mu);
	}
	return NULL;
}

/* The dashboard's q ends the screen, and with it the attach: the job is not
 * attach's to stop, so there is nothing to ask. A feed asked to leave
 * (TOP_QUIT_LEAVE) keeps the attach going without the screen. */
struct attach_feed {
	struct top_feed inner; /* first: top_feed_forward */
	struct attach_state *st;
	int left;
};

static int feed_quit(void *ctx, int how)
{
	struct attach_feed *f = ctx;

	if (how == TOP_QUIT_STOP)
		atomic_store(&f->st->stop, 1);
	else if (how == TOP_QUIT_LEAVE)
		f->left = 1;
	else
		return -EINVAL;
	return 0;
}

static int show_top(struct attach_state *st)
{
	struct top_options opt = {.delay_ms = 1000, .color = !getenv("NO_COLOR"), .first_rank = -1};
	struct attach_feed af = {.st = st};
	struct top_feed feed;
	char err[256] = "";
	int rc;

	top_board_feed_bind(st->bf, &af.inner);
	top_feed_forward(&feed, &af);
	feed.quit = feed_quit;
	rc = top_run_screen(&feed, &opt, err, sizeof(err));
	if (rc)
		fprintf(stderr, ATTACH_PROG ": --top: %s\n", err[0] ? err : fss_strerror(rc));
	/* q (or a failed screen): detach */
	if (!af.left)
		atomic_store(&st->stop, 1);
	return rc;
}

static int attach_main(struct attach_args *a, char **argv)
{
	struct attach_capture_options co = {.prog = ATTACH_PROG, .pids = a->pids, .npids = a->npids, .all = a->all};
	struct session_options so = {
	    .prog = ATTACH_PROG,
	    .dir = a->s.dir,
	    .name = a->s.name,
	    .argv = argv,
	    .leftovers = SESSION_LEFTOVERS_RECOVER,
	    .flags = &a->s.flags,
	    .json_summary = a->s.json_summary,
	    .keep = &a->s.keep,
	    .no_source_words = "no attached process made an NCCL call while attach watched",
	};
	struct attach_state st;
	pthread_t capture_thread, session_thread;
	int err, code;

	memset(&st, 0, sizeof(st));
	st.a = a;
	pthread_mutex_init(&st.mu, NULL);
	if (a->top && !(isatty(STDIN_FILENO) && isatty(STDOUT_FILENO))) {
		fprintf(stderr, ATTACH_PROG ": --top: not a terminal: the dashboard needs one (leave --top out, and "
					    "watch with 'fsdpscope top --connect')\n");
		return EXIT_USAGE;
	}
	if (attach_capture_check(&co))
		return EXIT_USAGE;
	if (a->s.metrics) {
		if (session_metrics_option(ATTACH_PROG, a->s.metrics, &st.metrics, &so.metrics_remote))
			return EXIT_USAGE;
		so.metrics = st.metrics;
	}
	job_catch_signals(on_signal, 1);
	err = session_new(&st.session, &so);
	if (err) {
		free(st.metrics);
		return EXIT_USAGE;
	}
	err = attach_capture_new(&st.capture, &co, session_private_sink(st.session));
	if (err) {
		session_abandon(st.session);
		session_free(st.session);
		free(st.metrics);
		return EXIT_USAGE;
	}
	fprintf(stderr,
		ATTACH_PROG ": recording into %s/%s.fss; exposure is not measured in attach mode; detach with "
			    "SIGINT, SIGTERM or SIGHUP%s\n",
		a->s.dir, a->s.name, a->duration_s ? " (or at --duration)" : "");
	if (session_viewer_address(st.session))
		fprintf(stderr, ATTACH_PROG ": live view (" VIEWER_PROTOCOL "): %s\n",
			session_viewer_address(st.session));
	if (session_metrics_address(st.session))
		fprintf(stderr, ATTACH_PROG ": Prometheus metrics: http://%s/metrics\n",
			session_metrics_address(st.session));
	if (a->top) {
		st.info.mode = TOP_MODE_ATTACH;
		st.info.job_state = TOP_JOB_RUNNING;
		st.info.exit_status = -1;
		snprintf(st.info.trace, sizeof(st.info.trace), "%s/%s.fss", a->s.dir, a->s.name);
		st.info.peak_flops = a->s.flags.analysis.peak_flops;
		st.info.tokens_per_step = a->s.flags.analysis.tokens_per_step;
		if (top_board_feed_new(&st.bf, session_board(st.session), &st.info)) {
			fprintf(stderr, ATTACH_PROG ": --top: cannot start the dashboard's feed\n");
			st.bf = NULL;
		}
	}
	err = pthread_create(&session_thread, NULL, session_main, &st);
	if (err) {
		fprintf(stderr, ATTACH_PROG ": cannot start the session's thread: %s\n", strerror(err));
		attach_capture_free(st.capture);
		top_board_feed_free(st.bf); /* before the session: its watcher waits on the session's board */
		session_abandon(st.session);
		session_free(st.session);
		free(st.metrics);
		return EXIT_USAGE;
	}
	if (st.bf && pthread_create(&capture_thread, NULL, capture_main, &st) == 0) {
		/* The screen owns the terminal: what is said meanwhile waits in a file. */
		FILE *held = tmpfile();
		int saved = -1, rc;

		fflush(stderr);
		if (held && (saved = dup(STDERR_FILENO)) >= 0)
			dup2(fileno(held), STDERR_FILENO);
		rc = show_top(&st);
		(void)rc; /* said; the attach ends as show_top decided */
		if (saved >= 0) {
			char buf[4096];
			size_t n;

			fflush(stderr);
			dup2(saved, STDERR_FILENO);
			close(saved);
			rewind(held);
			while ((n = fread(buf, 1, sizeof(buf), held)) > 0)
				if (fwrite(buf, 1, n, stderr) != n)
					break;
		}
		if (held)
			fclose(held);
		pthread_join(capture_thread, NULL);
	} else {
		capture_main(&st);
	}
	pthread_join(session_thread, NULL);
	attach_capture_free(st.capture);
	top_board_feed_free(st.bf); /* before the session: its watcher waits on the session's board */
	session_free(st.session);
	free(st.metrics);
	pthread_mutex_destroy(&st.mu);
	code = st.unattached ? EXIT_USAGE : st.finish_rc ? 1 : EXIT_OK;
	return code;
}

int cmd_attach(int argc, char **argv)
{
	struct attach_args a;
	int help, code;

	if (parse_args(argc, argv, &a, &help)) {
		free(a.pids);
		return EXIT_USAGE;
	}
	if (help) {
		free(a.pids);
		return EXIT_OK; /* options_parse printed the help */
	}
	code = attach_main(&a, argv);
	free(a.pids);
	return code;
}
