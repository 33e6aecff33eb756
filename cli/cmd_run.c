/*
 * cmd_run.c - fsdpscope run [opts] -- CMD ARGS...: launch a job with the
 * agent in its environment, ingest what its processes send, write one trace.
 *
 * One thread: the embedded ingest's epoll loop doubles as the wait for the
 * job (SIGCHLD interrupts it). fsdpscope is the job's subreaper, so every
 * process the job starts stays its descendant, however early its parent
 * exits: the run ends when the last of them is reaped (or the wait's bound
 * runs out), not when CMD does. The child runs in its own process group so
 * that a forwarded SIGINT / SIGTERM reaches every process of the job
 * (launchers, forked ranks), and so that the job outlives an fsdpscope that
 * is killed; on a terminal the group also gets the terminal, as a shell
 * would do, so ^C and ^Z go to the job and not to fsdpscope. The folder
 * side (private folder, lock, final name, leftovers) is cli/run_session.c.
 */
#include "cli/commands.h"
#include "cli/lint.h"
#include "cli/run_session.h"

#include "collector/ingest.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/record.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define RUN_AGENT_NAME "libfsdpscope-agent.so"
#define RUN_DEFAULT_DIR "fsdpscope-out"
#define RUN_DEFAULT_NAME "trace"
#define RUN_DEFAULT_FLUSH_S 5
#define RUN_DEFAULT_WAIT_DESCENDANTS_S 3600
#define RUN_MAX_WAIT_S (30 * 86400)
/* How often the unfinished trace is flushed to disk: what a killed run
 * loses of what it had received. */
#define RUN_FLUSH_EVERY_MS 1000
/* Processes named in a message; more are counted. */
#define RUN_NAMED_PIDS 8
/* fsdpscope could not start the job (usage, no agent, DIR unusable). */
#define RUN_EXIT_SETUP EXIT_USAGE

const char cmd_run_help[] =
	"NAME\n"
	"    fsdpscope run - run a training job with the agent and record one trace\n\n"
	"SYNOPSIS\n"
	"    fsdpscope run [--out DIR] [--name NAME] [--dormant] [--no-cupti]\n"
	"                  [--flush-timeout SEC] [--wait-descendants SEC] [--] CMD [ARGS...]\n\n"
	"DESCRIPTION\n"
	"    Starts a collector inside fsdpscope on a private unix socket, then runs CMD\n"
	"    with the agent (libfsdpscope-agent.so) in its environment, so that CMD and\n"
	"    every process it starts - launchers such as torchrun, srun or mpirun, and\n"
	"    the ranks they fork - record their NCCL collectives, NVTX ranges and, on a\n"
	"    GPU, CUPTI kernel intervals. Each process connects to the socket on its own;\n"
	"    a process that cannot reach it writes a per-process trace file into the\n"
	"    run's private folder instead. fsdpscope is the job's subreaper: processes\n"
	"    that outlive CMD stay in the run, and when CMD exits fsdpscope waits for\n"
	"    them (at most --wait-descendants), then for the processes' final flushes\n"
	"    (at most --flush-timeout), merges the per-process files, and writes one\n"
	"    trace, DIR/NAME.fss, with one source per process and a process_exit record\n"
	"    (how it ended) for every process it reaped.\n\n"
	"    CMD begins at '--' or at the first word that is not an option: from there\n"
	"    on every argument is CMD's, '--help' included.\n\n"
	"    A trace is never replaced: when DIR/NAME.fss exists (an earlier run, or\n"
	"    another run into the same DIR), the trace is written to NAME-2.fss (-3,\n"
	"    ...) and fsdpscope says so. Each run has its own folder in DIR,\n"
	"    DIR/" RUN_FOLDER_PREFIX "ID (mode 0700), so that runs sharing DIR merge only\n"
	"    their own processes' files. What a run that was killed left there (its\n"
	"    socket, unfinished trace, per-process files) is named by the next run in\n"
	"    DIR and merged into DIR/recovered-ID.fss (left in place, and said, while\n"
	"    that run's job is still running).\n\n"
	"    Only processes of the user running fsdpscope may send records: the socket\n"
	"    and its folder are the user's alone (0600 / 0700 whatever the umask), and\n"
	"    every connection's peer user is checked; others are refused and reported.\n\n"
	"    CMD's standard input, output and error are left alone; fsdpscope writes\n"
	"    its own lines to standard error only: where the trace is, a one-line\n"
	"    summary (processes, collectives, NVTX ranges, GPU intervals, records the\n"
	"    agents dropped), the processes that outlived CMD and, when an input was\n"
	"    cut short or damaged, which process, at what offset and why (its complete\n"
	"    chunks are kept).\n\n"
	"    SIGINT, SIGTERM and SIGHUP sent to fsdpscope are forwarded to CMD's process\n"
	"    group, also while fsdpscope waits for the processes CMD left; a second one\n"
	"    then stops that wait, and one after the job ended stops the wait for the\n"
	"    final flushes. On a terminal, CMD's group is given the terminal, so ^C and\n"
	"    ^Z act on the job as they would without fsdpscope. The job does not die\n"
	"    with fsdpscope: killed (SIGKILL, out of memory), fsdpscope leaves the job\n"
	"    running, and its agents go on in per-process files.\n\n"
	"    The environment CMD gets (children and launchers inherit it):\n"
	"      LD_PRELOAD             the agent, before any existing entries (after an\n"
	"                             ASan runtime already listed there, which must be first)\n"
	"      NVTX_INJECTION64_PATH  the agent, unless already set (then kept, with a\n"
	"                             warning: NVTX ranges are then not recorded)\n"
	"      FSDPSCOPE_SINK         the socket, unix:DIR/" RUN_FOLDER_PREFIX "ID/sock (or\n"
	"                             unix:/tmp/fsdpscope-XXXXXX/sock, in $XDG_RUNTIME_DIR\n"
	"                             when set, when that path is too long for a socket)\n"
	"      FSDPSCOPE_OUT          DIR/" RUN_FOLDER_PREFIX "ID, for per-process trace files\n"
	"      FSDPSCOPE_DORMANT=1    with --dormant;  FSDPSCOPE_CUPTI=0 with --no-cupti\n\n"
	"OPTIONS\n"
	"    --out DIR            directory for the trace (created; default ./" RUN_DEFAULT_DIR ")\n"
	"    --name NAME          trace file name, DIR/NAME.fss (default " RUN_DEFAULT_NAME "); a\n"
	"                         file of that name is never replaced (see above)\n"
	"    --dormant            start the agents dormant: they count calls but record\n"
	"                         nothing until a collector asks for data\n"
	"    --no-cupti           do not load CUPTI in the job (no GPU intervals)\n"
	"    --wait-descendants SEC\n"
	"                         after CMD exits, wait at most SEC seconds for the\n"
	"                         processes it left running (forked ranks, daemons);\n"
	"                         0: do not wait (default 3600). Those still running\n"
	"                         then are named, and go on in per-process files that\n"
	"                         the next run in DIR merges\n"
	"    --flush-timeout SEC  then wait at most SEC seconds for processes still\n"
	"                         connected to send their last records (default 5)\n"
	"    -h, --help           this text (only before CMD)\n\n"
	"FILES\n"
	"    DIR/NAME.fss          the trace ('fsdpscope dump', 'fsdpscope report')\n"
	"    DIR/" RUN_FOLDER_PREFIX "ID/  the run's private folder (ID: fsdpscope's pid and a\n"
	"                          random suffix), removed at the end: run.info (who, when,\n"
	"                          what; locked while the run lives), sock, run-output.fss.partial\n"
	"                          (the trace being written), the agents' per-process files\n"
	"    DIR/recovered-ID.fss  what a killed run ID left, merged by the next run\n\n"
	"    The agent is looked up in this order: $FSDPSCOPE_AGENT; next to the\n"
	"    executable's build tree, EXE_DIR/../agent/" RUN_AGENT_NAME "; the install\n"
	"    location, EXE_DIR/../lib/fsdpscope/" RUN_AGENT_NAME ".\n\n"
	"EXIT STATUS\n"
	"    CMD's exit status, or 128 + N when CMD was killed by signal N. 127 when CMD\n"
	"    was not found and 126 when it could not be executed (as a shell does);\n"
	"    2 when fsdpscope could not start it (bad usage, no agent, DIR not usable).\n"
	"    A trace that could not be written is reported on standard error and does\n"
	"    not change the exit status: the job's result is what counts.\n\n"
	"OVERHEAD\n"
	"    Measured on a 2-core VM (bench/results/agent.txt, bench/agent_bench.c):\n"
	"    57 ns added per wrapped NCCL call while recording (51 ns of it are the two\n"
	"    CLOCK_MONOTONIC reads, 25.6 ns each there), 5.5 ns dormant, 3.5 ns with\n"
	"    FSDPSCOPE_DISABLE=1. fsdp_ref step time with/without the agent: within the\n"
	"    machine's noise (median ratio 0.96 over 7 rounds; ~0.02 % expected from\n"
	"    the per-call figure). A process that never calls NCCL starts no thread.\n\n"
	"EXAMPLES\n"
	"    fsdpscope run -- fsdp_ref --backend cpu --nranks 4 --layers 8 --wrap linear --steps 5\n"
	"    fsdpscope run --out runs/exp1 --name step-time -- torchrun --nproc-per-node 8 train.py\n"
	"    fsdpscope run --no-cupti python train.py --config small.yaml --help\n"
	"    fsdpscope dump --type collective fsdpscope-out/trace.fss | head\n";

/* Signal state shared with the handlers. */
static volatile sig_atomic_t run_child_pgid;  /* > 0 once the job's group exists */
static volatile sig_atomic_t run_leader_gone; /* CMD has exited (its descendants may not have) */
static volatile sig_atomic_t run_job_done;    /* CMD and every descendant reaped, or given up on */
static volatile sig_atomic_t run_signals_after_leader; /* signals received once CMD was gone */
static volatile sig_atomic_t run_stop_wait;   /* stop waiting for descendants / final flushes */

/*
 * Forward to the job's process group while any of it may live. Once CMD is
 * gone, the second signal stops the wait for its descendants; once the whole
 * job is gone, the first stops the wait for the final flushes.
 */
static void run_on_signal(int sig)
{
	int saved = errno;

	if (run_child_pgid > 0 && !run_job_done)
		kill(-(pid_t)run_child_pgid, sig);
	if (run_job_done)
		run_stop_wait = 1;
	else if (run_leader_gone && ++run_signals_after_leader >= 2)
		run_stop_wait = 1;
	errno = saved;
}

/* SIGCHLD only needs to interrupt epoll_wait. */
static void run_on_child(int sig)
{
	(void)sig;
}

struct run_options {
	const char *dir;
	const char *name;
	int dormant;
	int no_cupti;
	int help;
	int flush_timeout_s;
	int wait_descendants_s;
	char **argv; /* CMD ARGS..., NULL-terminated */
};

/* A process reaped after CMD had exited. */
struct run_late {
	pid_t pid;
	int status;
};

struct run_state {
	struct run_options opt;
	run_session_t *session;
	char *sink;         /* FSDPSCOPE_SINK value */
	char *agent;        /* absolute path of the agent */
	char *ld_preload;   /* LD_PRELOAD value for the job */
	int keep_nvtx_injection; /* NVTX_INJECTION64_PATH was set by the user */
	char **merged;      /* per-process files merged */
	size_t nmerged;
	ingest_t *ing;
	int ingest_failed;
	int tty;            /* terminal fd handed to the job, or -1 */
	int64_t last_flush_ms;
	struct run_late *late; /* reaped after CMD exited, in order */
	size_t nlate;
	size_t left_running; /* descendants still alive when the wait gave up */
	pid_t left_pids[RUN_NAMED_PIDS];
};

/* The agent: $FSDPSCOPE_AGENT, the build tree, the install tree. */
static int find_agent(struct run_state *st)
{
	const char *env = getenv("FSDPSCOPE_AGENT");
	char exe[PATH_MAX], cand[2][PATH_MAX + 64];
	ssize_t n;
	int ncand = 0;

	if (env && *env) {
		st->agent = realpath(env, NULL);
		if (!st->agent || access(st->agent, R_OK) < 0) {
			fprintf(stderr, "fsdpscope run: FSDPSCOPE_AGENT=%s: %s\n", env, strerror(errno));
			return -ENOENT;
		}
	} else {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n > 0) {
			char *slash;

			exe[n] = '\0';
			slash = strrchr(exe, '/');
			if (slash)
				*slash = '\0';
			snprintf(cand[ncand++], sizeof(cand[0]), "%s/../agent/%s", exe, RUN_AGENT_NAME);
			snprintf(cand[ncand++], sizeof(cand[0]), "%s/../lib/fsdpscope/%s", exe, RUN_AGENT_NAME);
		}
		for (int i = 0; i < ncand && !st->agent; i++) {
			if (access(cand[i], R_OK) == 0)
				st->agent = realpath(cand[i], NULL);
		}
		if (!st->agent) {
			fprintf(stderr, "fsdpscope run: cannot find the agent, %s; looked for:\n", RUN_AGENT_NAME);
			fprintf(stderr, "    $FSDPSCOPE_AGENT (not set)\n");
			for (int i = 0; i < ncand; i++)
				fprintf(stderr, "    %s\n", cand[i]);
			fprintf(stderr, "  build it (target fsdpscope_agent) or set FSDPSCOPE_AGENT to its path\n");
			return -ENOENT;
		}
	}
	/* ld.so splits LD_PRELOAD at spaces and colons. */
	if (strpbrk(st->agent, " :")) {
		fprintf(stderr,
			"fsdpscope run: the agent's path has a space or a colon, which LD_PRELOAD cannot carry: %s\n"
			"  copy it elsewhere and set FSDPSCOPE_AGENT\n",
			st->agent);
		return -EINVAL;
	}
	return 0;
}

/* LD_PRELOAD for the job: the agent first, unless an ASan runtime is
 * listed, which insists on being first. */
static int build_ld_preload(struct run_state *st)
{
	const char *old = getenv("LD_PRELOAD");
	int n;

	if (!old || !*old)
		n = asprintf(&st->ld_preload, "%s", st->agent);
	else if (strstr(old, "libasan") || strstr(old, "clang_rt.asan"))
		n = asprintf(&st->ld_preload, "%s:%s", old, st->agent);
	else
		n = asprintf(&st->ld_preload, "%s:%s", st->agent, old);
	if (n < 0) {
		st->ld_preload = NULL;
		return -ENOMEM;
	}
	return 0;
}


/* "exit 0" / "killed by signal 9" for a wait status. */
static void describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "status 0x%x", (unsigned)status);
}

static int parse_seconds(const char *opt, const char *arg, int *out)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (*end || end == arg || v < 0 || v > RUN_MAX_WAIT_S) {
		fprintf(stderr, "fsdpscope run: %s: '%s' is not a number of seconds (0..%d)\n", opt, arg,
			RUN_MAX_WAIT_S);
		return FSS_E_USAGE;
	}
	*out = (int)v;
	return 0;
}

static int parse_options(int argc, char **argv, struct run_options *o)
{
	static const struct option options[] = {
		{"out", required_argument, NULL, 'o'},
		{"name", required_argument, NULL, 'n'},
		{"dormant", no_argument, NULL, 'D'},
		{"no-cupti", no_argument, NULL, 'C'},
		{"flush-timeout", required_argument, NULL, 'F'},
		{"wait-descendants", required_argument, NULL, 'W'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int opt;

	memset(o, 0, sizeof(*o));
	o->dir = RUN_DEFAULT_DIR;
	o->name = RUN_DEFAULT_NAME;
	o->flush_timeout_s = RUN_DEFAULT_FLUSH_S;
	o->wait_descendants_s = RUN_DEFAULT_WAIT_DESCENDANTS_S;
	optind = 1;
	opterr = 0;
	/* "+": stop at CMD, so that its options (--help too) stay its own. */
	while ((opt = getopt_long(argc, argv, "+h", options, NULL)) != -1) {
		switch (opt) {
		case 'o':
			o->dir = optarg;
			break;
		case 'n':
			o->name = optarg;
			break;
		case 'D':
			o->dormant = 1;
			break;
		case 'C':
			o->no_cupti = 1;
			break;
		case 'h':
			o->help = 1;
			return 0;
		case 'F':
			if (parse_seconds("--flush-timeout", optarg, &o->flush_timeout_s))
				return FSS_E_USAGE;
			break;
		case 'W':
			if (parse_seconds("--wait-descendants", optarg, &o->wait_descendants_s))
				return FSS_E_USAGE;
			break;
		default:
			fprintf(stderr, "fsdpscope run: unknown option or missing value: '%s' (see 'fsdpscope help run')\n",
				argv[optind - 1]);
			return FSS_E_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "fsdpscope run: no command given: fsdpscope run [OPTIONS] -- CMD [ARGS...]\n");
		return FSS_E_USAGE;
	}
	if (!*o->dir) {
		fprintf(stderr, "fsdpscope run: --out: empty directory name\n");
		return FSS_E_USAGE;
	}
	if (!*o->name || strchr(o->name, '/') || o->name[0] == '.') {
		fprintf(stderr, "fsdpscope run: --name: '%s' must be a plain file name (no '/', not starting with '.')\n",
			o->name);
		return FSS_E_USAGE;
	}
	o->argv = &argv[optind];
	return 0;
}

/*
 * What runs that died left in DIR: name it, and merge it into a trace of
 * its own, unless its job still runs and writes there.
 */
static void handle_leftovers(const struct run_state *st)
{
	const char *dir = run_session_dir(st->session);
	struct run_leftover *l;
	size_t n;
	int err = run_leftovers_find(dir, &l, &n);

	if (err) {
		fprintf(stderr, "fsdpscope run: warning: cannot look for what earlier runs left in %s: %s\n", dir,
			fss_strerror(err));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct ingest_stats rs;
		char *path = NULL;

		fputs("fsdpscope run: found ", stderr);
		run_leftover_describe(&l[i], stderr);
		fputc('\n', stderr);
		if (l[i].job_running) {
			fprintf(stderr,
				"fsdpscope run: left it in place: its job still writes there; run again in %s once that job "
				"has ended to merge it\n",
				dir);
			continue;
		}
		err = run_leftover_recover(&l[i], dir, &path, &rs);
		if (err) {
			fprintf(stderr, "fsdpscope run: could not merge what run %s left (%s); left it in place\n", l[i].id,
				fss_strerror(err));
			continue;
		}
		fprintf(stderr,
			"fsdpscope run: merged what run %s left into %s: %" PRIu32 " source%s, %" PRIu64
			" collectives, %" PRIu64 " records%s\n",
			l[i].id, path, rs.sources, rs.sources == 1 ? "" : "s", rs.by_type[FSS_REC_COLLECTIVE], rs.records,
			rs.ndamaged ? " (its unfinished parts were cut where they ended)" : "");
		free(path);
	}
	run_leftovers_free(l, n);
}

static int setup(struct run_state *st)
{
	char what[PATH_MAX + 64];
	int err;

	err = find_agent(st);
	if (err)
		return err;
	err = build_ld_preload(st);
	if (err) {
		fprintf(stderr, "fsdpscope run: out of memory\n");
		return err;
	}
	err = run_session_new(&st->session, st->opt.dir, st->opt.argv, what, sizeof(what));
	if (err) {
		fprintf(stderr, "fsdpscope run: cannot create %s: %s\n", what, fss_strerror(err));
		return err;
	}
	handle_leftovers(st);
	if (asprintf(&st->sink, "unix:%s", run_session_socket(st->session)) < 0) {
		st->sink = NULL;
		return -ENOMEM;
	}
	err = ingest_new(&st->ing, run_session_output(st->session), NULL);
	if (err) {
		fprintf(stderr, "fsdpscope run: cannot create %s.partial: %s\n", run_session_output(st->session),
			fss_strerror(err));
		return err;
	}
	err = run_session_listen(st->session, st->ing);
	if (err) {
		fprintf(stderr, "fsdpscope run: cannot listen on %s: %s\n", st->sink, fss_strerror(err));
		return err;
	}
	{
		const char *nvtx = getenv("NVTX_INJECTION64_PATH");

		if (nvtx && *nvtx && strcmp(nvtx, st->agent) != 0) {
			st->keep_nvtx_injection = 1;
			fprintf(stderr,
				"fsdpscope run: warning: NVTX_INJECTION64_PATH is already set (%s): keeping it, so NVTX "
				"ranges will not be recorded\n",
				nvtx);
		}
	}
	return 0;
}

/* In the child, before exec: the job's environment. */
static void child_environment(const struct run_state *st)
{
	setenv("LD_PRELOAD", st->ld_preload, 1);
	if (!st->keep_nvtx_injection)
		setenv("NVTX_INJECTION64_PATH", st->agent, 1);
	setenv("FSDPSCOPE_SINK", st->sink, 1);
	setenv("FSDPSCOPE_OUT", run_session_folder(st->session), 1);
	if (st->opt.dormant)
		setenv("FSDPSCOPE_DORMANT", "1", 1);
	if (st->opt.no_cupti)
		setenv("FSDPSCOPE_CUPTI", "0", 1);
}

static const int run_forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP};

/*
 * The child side of the fork; never returns. The parent installs its
 * handlers only after the fork, so the child still has the dispositions
 * fsdpscope inherited (an ignored SIGINT stays ignored, as it would without
 * fsdpscope); only SIGTTOU, ignored around the fork, is put back.
 */
static void child_exec(const struct run_state *st, int errpipe, const sigset_t *oldmask,
		       const struct sigaction *old_ttou)
{
	int e;

	setpgid(0, 0);
	if (st->tty >= 0)
		tcsetpgrp(st->tty, getpid()); /* SIGTTOU is ignored until exec */
	sigaction(SIGTTOU, old_ttou, NULL);
	sigprocmask(SIG_SETMASK, oldmask, NULL);
	child_environment(st);
	execvp(st->opt.argv[0], st->opt.argv);
	e = errno;
	if (write(errpipe, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
}

static void exec_error_message(const char *cmd, int e)
{
	if (e == ENOENT && !strchr(cmd, '/'))
		fprintf(stderr, "fsdpscope run: %s: command not found\n", cmd);
	else
		fprintf(stderr, "fsdpscope run: cannot run %s: %s\n", cmd, strerror(e));
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The job was stopped (^Z): stop with it, as a shell job, then resume it. */
static void follow_stop(struct run_state *st, pid_t pid)
{
	tcsetpgrp(st->tty, getpgrp());
	raise(SIGTSTP);
	/* Continued (fg): give the terminal back and continue the job. */
	tcsetpgrp(st->tty, pid);
	kill(-pid, SIGCONT);
}

/*
 * run_trace_ready - called once with the finished trace, after the summary:
 * print the lint summary (to stderr, like every line of fsdpscope's own: the
 * job's stdout stays the job's). A trace without collectives has nothing to
 * lint. The job's exit code is what `run` returns, whatever lint finds.
 */
static void run_trace_ready(const char *trace_path, const struct ingest_stats *stats)
{
	if (stats->by_type[FSS_REC_COLLECTIVE] == 0)
		return;
	fputc('\n', stderr);
	lint_print_summary(trace_path, stderr);
}

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

/* Keep the ingest going for a while; on a write error, say so once. */
static void pump(struct run_state *st, int timeout_ms)
{
	int rc;

	if (st->ingest_failed) {
		/* Nothing to read into: just wait (the agents drop and count). */
		if (timeout_ms > 0)
			poll(NULL, 0, timeout_ms);
		return;
	}
	rc = ingest_poll(st->ing, timeout_ms);
	/* On disk at least once a second: what a killed run loses. */
	if (rc >= 0 && now_ms() - st->last_flush_ms >= RUN_FLUSH_EVERY_MS) {
		rc = ingest_flush(st->ing);
		st->last_flush_ms = now_ms();
	}
	if (rc < 0) {
		st->ingest_failed = 1;
		fprintf(stderr, "fsdpscope run: writing %s.partial failed: %s; the job goes on unrecorded\n",
			run_session_output(st->session), fss_strerror(rc));
	}
}

/*
 * Reap every child that has ended (fsdpscope is the job's subreaper: the
 * orphans of the job are its children too), noting each one's status in
 * the trace. Returns whether children remain.
 */
static int reap(struct run_state *st, pid_t leader, int *leader_status, int *leader_done)
{
	for (;;) {
		int status;
		pid_t w = waitpid(-1, &status, WNOHANG | (st->tty >= 0 ? WUNTRACED : 0));

		if (w == 0)
			return 1;
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return 0; /* ECHILD: none left */
		}
		if (WIFSTOPPED(status)) {
			if (w == leader && !*leader_done)
				follow_stop(st, leader);
			continue;
		}
		if (!st->ingest_failed && ingest_note_exit(st->ing, w, status) < 0)
			fprintf(stderr, "fsdpscope run: out of memory noting how pid %d ended\n", (int)w);
		if (w == leader) {
			*leader_status = status;
			*leader_done = 1;
		} else if (*leader_done) {
			struct run_late *l = realloc(st->late, (st->nlate + 1) * sizeof(*l));

			if (l) {
				st->late = l;
				l[st->nlate].pid = w;
				l[st->nlate].status = status;
				st->nlate++;
			}
		}
	}
}

/* fsdpscope's children now: the processes of the job still alive. */
static size_t list_children(pid_t *pids, size_t max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = 0;
	pid_t self = getpid();

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[300], buf[512], *paren;
		long ppid;
		int fd;
		ssize_t len;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		/* "pid (comm) state ppid ...": comm may hold anything, even ")". */
		paren = strrchr(buf, ')');
		if (!paren || sscanf(paren + 1, " %*c %ld", &ppid) != 1 || ppid != self)
			continue;
		if (n < max)
			pids[n] = (pid_t)strtol(e->d_name, NULL, 10);
		n++;
	}
	closedir(d);
	return n;
}

static void print_pids(const pid_t *pids, size_t n, size_t named)
{
	for (size_t i = 0; i < n && i < named; i++)
		fprintf(stderr, "%s%d", i ? ", " : "", (int)pids[i]);
	if (n > named)
		fprintf(stderr, " and %zu more", n - named);
}

/*
 * Run the job to its end while ingesting: CMD, then every process it left
 * running, for at most --wait-descendants once CMD has gone. Returns CMD's
 * wait status.
 */
static int supervise(struct run_state *st, pid_t pid)
{
	int status = 0, leader_done = 0;
	int64_t deadline = 0;

	for (;;) {
		int children;

		pump(st, 100);
		children = reap(st, pid, &status, &leader_done);
		if (leader_done && !run_leader_gone) {
			pid_t pids[RUN_NAMED_PIDS];
			size_t n = children ? list_children(pids, RUN_NAMED_PIDS) : 0;

			run_leader_gone = 1;
			/* The terminal stays with the job's group while some of it
			 * lives (^C still reaches what CMD left), else comes back. */
			if (st->tty >= 0 && kill(-pid, 0) < 0)
				tcsetpgrp(st->tty, getpgrp());
			deadline = now_ms() + (int64_t)st->opt.wait_descendants_s * 1000;
			if (n && st->opt.wait_descendants_s) {
				fprintf(stderr, "fsdpscope run: %s exited; waiting for the %zu process%s it left running (",
					st->opt.argv[0], n, n == 1 ? "" : "es");
				print_pids(pids, n, RUN_NAMED_PIDS);
				fprintf(stderr, "), at most %d s (--wait-descendants)\n", st->opt.wait_descendants_s);
			}
		}
		if (!leader_done)
			continue;
		if (!children)
			break;
		if (now_ms() >= deadline || run_stop_wait) {
			st->left_running = list_children(st->left_pids, RUN_NAMED_PIDS);
			break;
		}
	}
	run_job_done = 1;
	run_stop_wait = 0;
	if (st->tty >= 0)
		tcsetpgrp(st->tty, getpgrp());
	return status;
}

/* After the job: wait (bounded) for the agents' final flushes. */
static void drain(struct run_state *st)
{
	int64_t deadline = now_ms() + (int64_t)st->opt.flush_timeout_s * 1000;

	pump(st, 0); /* accept what is waiting in the backlog */
	while (!st->ingest_failed && !run_stop_wait && ingest_open_connections(st->ing) > 0) {
		int64_t left = deadline - now_ms();

		if (left <= 0) {
			fprintf(stderr,
				"fsdpscope run: %zu process(es) still connected %d s after the job ended; closing the "
				"trace without them (see --flush-timeout)\n",
				ingest_open_connections(st->ing), st->opt.flush_timeout_s);
			break;
		}
		pump(st, left < 100 ? (int)left : 100);
	}
}

/* Merge the per-process files this run's agents left in its folder. */
static void merge_fallback_files(struct run_state *st)
{
	char **names;
	size_t n;
	int err = run_session_files(st->session, &names, &n);

	if (err) {
		fprintf(stderr, "fsdpscope run: cannot read %s for per-process files: %s\n",
			run_session_folder(st->session), fss_strerror(err));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		char **merged;

		err = st->ingest_failed ? -EIO : ingest_add_file(st->ing, names[i]);
		if (err) {
			if (!st->ingest_failed)
				fprintf(stderr, "fsdpscope run: %s: not merged: %s\n", names[i], fss_strerror(err));
			free(names[i]);
			continue;
		}
		merged = realloc(st->merged, (st->nmerged + 1) * sizeof(*merged));
		if (!merged) {
			free(names[i]);
			continue;
		}
		st->merged = merged;
		st->merged[st->nmerged++] = names[i];
	}
	free(names);
}

static int pid_is_late(const struct run_state *st, uint32_t pid)
{
	for (size_t i = 0; i < st->nlate; i++)
		if ((uint32_t)st->late[i].pid == pid)
			return 1;
	return 0;
}

/* The processes that outlived CMD, those still running, refused peers. */
static void print_job_notes(const struct run_state *st, const struct ingest_stats *s)
{
	if (st->nlate) {
		uint32_t reported = 0;

		for (uint32_t i = 0; i < s->sources; i++)
			reported += s->per_source[i].has_hello && pid_is_late(st, s->per_source[i].pid);
		fprintf(stderr, "fsdpscope run: %zu process%s outlived %s and %s waited for: ", st->nlate,
			st->nlate == 1 ? "" : "es", st->opt.argv[0], st->nlate == 1 ? "was" : "were");
		for (size_t i = 0; i < st->nlate && i < RUN_NAMED_PIDS; i++) {
			char how[48];

			describe_status(st->late[i].status, how, sizeof(how));
			fprintf(stderr, "%spid %d (%s)", i ? ", " : "", (int)st->late[i].pid, how);
		}
		if (st->nlate > RUN_NAMED_PIDS)
			fprintf(stderr, " and %zu more", st->nlate - RUN_NAMED_PIDS);
		fprintf(stderr, "; %" PRIu32 " of them reported to the trace\n", reported);
	}
	if (st->left_running) {
		fprintf(stderr, "fsdpscope run: warning: %zu process%s still running %d s after %s exited (", st->left_running,
			st->left_running == 1 ? "" : "es", st->opt.wait_descendants_s, st->opt.argv[0]);
		print_pids(st->left_pids, st->left_running, RUN_NAMED_PIDS);
		fprintf(stderr,
			"): not waited for (see --wait-descendants); what they record from now on goes to %s, which the "
			"next 'fsdpscope run --out %s' merges\n",
			run_session_folder(st->session), st->opt.dir);
	}
	if (s->refused) {
		fprintf(stderr, "fsdpscope run: warning: refused %" PRIu32 " connection%s from other users (", s->refused,
			s->refused == 1 ? "" : "s");
		for (size_t i = 0; i < s->nrefused_named; i++) {
			if (s->refused_peers[i].uid == UINT32_MAX)
				fprintf(stderr, "%suser unknown, pid %" PRId32, i ? "; " : "", s->refused_peers[i].pid);
			else
				fprintf(stderr, "%suid %" PRIu32 ", pid %" PRId32, i ? "; " : "", s->refused_peers[i].uid,
					s->refused_peers[i].pid);
		}
		if (s->refused > s->nrefused_named)
			fprintf(stderr, "; and %zu more", (size_t)s->refused - s->nrefused_named);
		fprintf(stderr, "): only this user's processes may send records; none of theirs is in the trace\n");
	}
}

static void print_summary(const struct run_state *st, const char *trace_path, const struct ingest_stats *s)
{
	uint32_t processes = 0, unclean = 0;

	for (size_t i = 0; i < s->ndamaged; i++)
		fprintf(stderr, "fsdpscope run: warning: %s\n", s->damage[i]);
	for (uint32_t i = 0; i < s->sources; i++) {
		if (!s->per_source[i].has_hello)
			continue;
		processes++;
		unclean += !s->per_source[i].ended;
	}
	print_job_notes(st, s);
	if (st->nmerged)
		fprintf(stderr, "fsdpscope run: merged %zu per-process file(s) from %s (removed)\n", st->nmerged,
			run_session_folder(st->session));
	fprintf(stderr, "fsdpscope run: trace written to %s\n", trace_path);
	fprintf(stderr,
		"fsdpscope run: %" PRIu32 " process%s, %" PRIu64 " collectives, %" PRIu64 " NVTX ranges, %" PRIu64
		" GPU intervals, %" PRIu64 " records dropped",
		processes, processes == 1 ? "" : "es", s->by_type[FSS_REC_COLLECTIVE], s->by_type[FSS_REC_NVTX_RANGE],
		s->by_type[FSS_REC_GPU_INTERVAL], s->dropped);
	/* Calls a process made but that never reached the trace (a crash or a kill lost its ring) show only as
	 * gaps in its sequence numbers; the drop counters cannot count them. */
	if (s->collectives_missing)
		fprintf(stderr, ", %" PRIu64 " collective%s missing (gaps in the processes' call numbers)",
			s->collectives_missing, s->collectives_missing == 1 ? "" : "s");
	if (unclean)
		fprintf(stderr, " (%" PRIu32 " process%s without a clean exit)", unclean, unclean == 1 ? "" : "es");
	fputc('\n', stderr);
	/* The agent reports a process from its first NCCL call on. */
	if (processes == 0)
		fprintf(stderr,
			"fsdpscope run: no process reported: the job made no NCCL call, or the agent could not load in it "
			"(a static or setuid program, or one that clears LD_PRELOAD)\n");
}

static void run_state_free(struct run_state *st, int remove_folder)
{
	ingest_free(st->ing);
	run_session_close(st->session, remove_folder);
	free(st->sink);
	free(st->agent);
	free(st->ld_preload);
	for (size_t i = 0; i < st->nmerged; i++)
		free(st->merged[i]);
	free(st->merged);
	free(st->late);
}

/* The job has ended: merge, write, move the trace into place, report. */
static void finish(struct run_state *st)
{
	const struct ingest_stats *stats = NULL;
	char *trace_path = NULL;
	int err, taken = 0, keep = 0, written;

	drain(st);
	merge_fallback_files(st);
	err = st->ingest_failed ? -EIO : ingest_finish(st->ing, &stats);
	written = !err;
	if (!err)
		err = run_session_publish(st->session, st->opt.name, &trace_path, &taken);
	if (err || !stats) {
		/* A finished trace that could not be moved holds the files'
		 * records: they go, so that the next run reads them once. */
		for (size_t i = 0; written && i < st->nmerged; i++)
			unlink(st->merged[i]);
		if (!st->ingest_failed)
			fprintf(stderr, "fsdpscope run: writing the trace failed: %s\n", fss_strerror(err));
		fprintf(stderr,
			"fsdpscope run: what was recorded is left in %s; the next 'fsdpscope run --out %s' merges it\n",
			run_session_folder(st->session), st->opt.dir);
		keep = 1;
	} else {
		/* The files' records are in the trace now: remove them, so that
		 * nothing reads them twice. */
		for (size_t i = 0; i < st->nmerged; i++)
			unlink(st->merged[i]);
		if (taken)
			fprintf(stderr,
				"fsdpscope run: %s/%s%s already exists (not this run's): left it as it is, and wrote this "
				"run's trace under a new name\n",
				run_session_dir(st->session), st->opt.name,
				strlen(st->opt.name) > 4 && !strcmp(st->opt.name + strlen(st->opt.name) - 4, ".fss") ? ""
															 : ".fss");
		print_summary(st, trace_path, stats);
		run_trace_ready(trace_path, stats);
	}
	/* Processes still running write on into the folder: it stays, for the
	 * next run to merge. */
	if (st->left_running)
		keep = 1;
	free(trace_path);
	run_state_free(st, !keep);
}

int cmd_run(int argc, char **argv)
{
	struct run_state st;
	struct sigaction sa, old_ttou;
	sigset_t block, oldmask;
	int errpipe[2], exec_errno = 0, status, code;
	pid_t pid;
	ssize_t n;

	memset(&st, 0, sizeof(st));
	st.tty = -1;
	if (parse_options(argc, argv, &st.opt))
		return EXIT_USAGE;
	if (st.opt.help) {
		fputs(cmd_run_help, stdout);
		return EXIT_OK;
	}
	if (setup(&st)) {
		run_state_free(&st, 1);
		return RUN_EXIT_SETUP;
	}
	/* Processes the job leaves behind become fsdpscope's children, not
	 * init's: they can be waited for and their ends recorded. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		fprintf(stderr, "fsdpscope run: warning: cannot become the job's subreaper (%s): processes that outlive "
				"%s will not be waited for\n",
			strerror(errno), st.opt.argv[0]);
	if (pipe2(errpipe, O_CLOEXEC) < 0) {
		fprintf(stderr, "fsdpscope run: pipe: %s\n", strerror(errno));
		run_state_free(&st, 1);
		return RUN_EXIT_SETUP;
	}
	/* A terminal we own goes to the job while it runs, as a shell does. */
	if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp())
		st.tty = STDIN_FILENO;
	/* tcsetpgrp from a background group would stop us: ignore SIGTTOU. */
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGTTOU, &sa, &old_ttou);

	/* Signals wait until the handlers know the job's process group. */
	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(run_forwarded_signals) / sizeof(run_forwarded_signals[0]); i++)
		sigaddset(&block, run_forwarded_signals[i]);
	sigaddset(&block, SIGCHLD);
	sigprocmask(SIG_BLOCK, &block, &oldmask);
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		child_exec(&st, errpipe[1], &oldmask, &old_ttou);
	if (pid < 0) {
		fprintf(stderr, "fsdpscope run: fork: %s\n", strerror(errno));
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		close(errpipe[0]);
		close(errpipe[1]);
		run_state_free(&st, 1);
		return RUN_EXIT_SETUP;
	}
	setpgid(pid, pid); /* also in the child: whichever runs first */
	if (st.tty >= 0)
		tcsetpgrp(st.tty, pid);
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = run_on_signal; /* no SA_RESTART: interrupt epoll_wait */
	for (size_t i = 0; i < sizeof(run_forwarded_signals) / sizeof(run_forwarded_signals[0]); i++)
		sigaction(run_forwarded_signals[i], &sa, NULL);
	sa.sa_handler = run_on_child;
	/* Stops matter only when following ^Z on a terminal. */
	sa.sa_flags = st.tty >= 0 ? 0 : SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	run_child_pgid = pid;
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	if (run_session_set_job(st.session, pid) < 0)
		fprintf(stderr, "fsdpscope run: warning: cannot note the job in %s/run.info: a run that finds this one's "
				"folder later cannot tell whether its job still runs\n",
			run_session_folder(st.session));

	/* exec closes the pipe (O_CLOEXEC): EOF means the job is running. */
	close(errpipe[1]);
	do
		n = read(errpipe[0], &exec_errno, sizeof(exec_errno));
	while (n < 0 && errno == EINTR);
	close(errpipe[0]);

	status = supervise(&st, pid);
	code = exit_code_of(status);
	if (n == (ssize_t)sizeof(exec_errno)) {
		/* Nothing ran, nothing to trace: no trace file either. */
		exec_error_message(st.opt.argv[0], exec_errno);
		ingest_finish(st.ing, NULL);
		unlink(run_session_output(st.session));
		run_state_free(&st, 1);
		return code;
	}
	finish(&st);
	return code;
}
