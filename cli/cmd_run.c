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
 * would do, so ^C and ^Z go to the job and not to fsdpscope. Everything
 * that is not the job - the private folder, the ingest, the streamed
 * analysis, the trace and the lint summary - is the session's
 * (cli/session.c), which `fsdpscope collect` shares.
 */
#include "cli/commands.h"
#include "cli/run_folder.h"
#include "cli/session.h"
#include "cli/session_options.h"

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
/* Processes named in a message; more are counted. */
#define RUN_NAMED_PIDS 8
/* fsdpscope could not start the job (usage, no agent, DIR unusable). */
#define RUN_EXIT_SETUP EXIT_USAGE

const char cmd_run_help[] =
    "NAME\n"
    "    fsdpscope run - run a training job with the agent and record one trace\n\n"
    "SYNOPSIS\n"
    "    fsdpscope run [--out DIR] [--name NAME] [--dormant] [--no-cupti]\n"
    "                  [--flush-timeout SEC] [--wait-descendants SEC] [--json-summary FILE]\n"
    "                  [--metrics [HOST:]PORT] [--keep full|summary|last:N] [--hang-timeout SEC]\n"
    "                  [--] CMD [ARGS...]\n\n"
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
    "    --out DIR            directory for the trace (created; default ./" SESSION_DEFAULT_DIR ")\n"
    "    --name NAME          trace file name, DIR/NAME.fss (default " SESSION_DEFAULT_NAME "); a\n"
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
    "    --json-summary FILE  write the final diagnosis to FILE as 'fsdpscope lint --json'\n"
    "                         prints it (schema fsdpscope.report/2)\n"
    "    --metrics [HOST:]PORT  serve Prometheus /metrics there while the job runs\n"
    "                         (docs/metrics.md); a bare PORT is 127.0.0.1:PORT; a host\n"
    "                         that is not loopback is served with a warning\n"
    "    --keep POLICY        what the trace keeps of a long job: full (default; it\n"
    "                         switches to last:1000 before the disk runs short, and says\n"
    "                         so), last:N, summary[:N] ('fsdpscope help collect',\n"
    "                         docs/keep.md)\n"
    "    --hang-timeout SEC   ranks waiting in a collective longer than SEC seconds while\n"
    "                         others have not entered it are a hang (collective-hang;\n"
    "                         default 60; > 0, fractions allowed): said on standard error\n"
    "                         while the job runs ('fsdpscope: collective-hang: ...'), once\n"
    "                         more when it clears, and on /metrics (fsdpscope_collective_hang);\n"
    "                         keep it below the job's own NCCL / PyTorch timeout\n"
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
    "    CLOCK_MONOTONIC reads, 25.6 ns each there), and about 24 ns more for the\n"
    "    call's enter record (a second ring push; bench/results/enter.txt: x1.16-1.27\n"
    "    of the recording cost, same run), 5.5 ns dormant, 3.5 ns with\n"
    "    FSDPSCOPE_DISABLE=1. fsdp_ref step time with/without the agent: within the\n"
    "    machine's noise (median ratio 0.96 over 7 rounds; ~0.02 % expected from\n"
    "    the per-call figure). A process that never calls NCCL starts no thread.\n\n"
    "EXAMPLES\n"
    "    fsdpscope run -- fsdp_ref --backend cpu --nranks 4 --layers 8 --wrap linear --steps 5\n"
    "    fsdpscope run --out runs/exp1 --name step-time -- torchrun --nproc-per-node 8 train.py\n"
    "    fsdpscope run --no-cupti python train.py --config small.yaml --help\n"
    "    fsdpscope dump --type collective fsdpscope-out/trace.fss | head\n";

/* Signal state shared with the handlers. */
static volatile sig_atomic_t run_child_pgid;	       /* > 0 once the job's group exists */
static volatile sig_atomic_t run_leader_gone;	       /* CMD has exited (its descendants may not have) */
static volatile sig_atomic_t run_job_done;	       /* CMD and every descendant reaped, or given up on */
static volatile sig_atomic_t run_signals_after_leader; /* signals received once CMD was gone */
static volatile sig_atomic_t run_stop_wait;	       /* stop waiting for descendants / final flushes */

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
	struct session_run_options s; /* --out, --name, ... : parsed as `top -- CMD` parses them */
	int help;
	char **argv; /* CMD ARGS..., NULL-terminated */
};

/* A process reaped after CMD had exited. */
struct run_late {
	pid_t pid;
	int status;
};

struct run_state {
	struct run_options opt;
	session_t *session;
	const char *sink;	 /* FSDPSCOPE_SINK value: the session's private socket */
	char *agent;		 /* absolute path of the agent */
	char *ld_preload;	 /* LD_PRELOAD value for the job */
	char *metrics;		 /* --metrics as HOST:PORT */
	int keep_nvtx_injection; /* NVTX_INJECTION64_PATH was set by the user */
	int tty;		 /* terminal fd handed to the job, or -1 */
	struct run_late *late;	 /* reaped after CMD exited, in order */
	size_t nlate;
	size_t left_running; /* descendants still alive when the wait gave up */
	pid_t left_pids[RUN_NAMED_PIDS];
};

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

static int parse_options(int argc, char **argv, struct run_options *o)
{
	static const struct option options[] = {
	    SESSION_RUN_LONG_OPTIONS,
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt;

	memset(o, 0, sizeof(*o));
	session_run_options_init(&o->s);
	optind = 1;
	opterr = 0;
	/* "+": stop at CMD, so that its options (--help too) stay its own. */
	while ((opt = getopt_long(argc, argv, "+h", options, NULL)) != -1) {
		int rc;

		if (opt == 'h') {
			o->help = 1;
			return 0;
		}
		rc = session_run_option(&o->s, opt, optarg, "fsdpscope run");
		if (rc < 0)
			return FSS_E_USAGE;
		if (rc > 0) {
			fprintf(stderr,
				"fsdpscope run: unknown option or missing value: '%s' (see 'fsdpscope help run')\n",
				argv[optind - 1]);
			return FSS_E_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "fsdpscope run: no command given: fsdpscope run [OPTIONS] -- CMD [ARGS...]\n");
		return FSS_E_USAGE;
	}
	if (session_run_options_check(&o->s, "fsdpscope run"))
		return FSS_E_USAGE;
	o->argv = &argv[optind];
	return 0;
}

static int setup(struct run_state *st)
{
	struct session_options so = {
	    .prog = "fsdpscope run",
	    .dir = st->opt.s.dir,
	    .name = st->opt.s.name,
	    .argv = st->opt.argv,
	    .leftovers = SESSION_LEFTOVERS_RECOVER,
	    .json_summary = st->opt.s.json_summary,
	    .keep = &st->opt.s.keep,
	    .flags = &st->opt.s.flags,
	};
	int err;

	err = session_find_agent("fsdpscope run", &st->agent);
	if (err)
		return err;
	err = build_ld_preload(st);
	if (err) {
		fprintf(stderr, "fsdpscope run: out of memory\n");
		return err;
	}
	if (st->opt.s.metrics) {
		err = session_metrics_option("fsdpscope run", st->opt.s.metrics, &st->metrics, &so.metrics_remote);
		if (err)
			return err;
		so.metrics = st->metrics;
	}
	err = session_new(&st->session, &so);
	if (err)
		return err;
	st->sink = session_private_sink(st->session);
	if (session_metrics_address(st->session))
		fprintf(stderr, "fsdpscope run: Prometheus metrics: http://%s/metrics\n",
			session_metrics_address(st->session));
	{
		const char *nvtx = getenv("NVTX_INJECTION64_PATH");

		if (nvtx && *nvtx && strcmp(nvtx, st->agent) != 0) {
			st->keep_nvtx_injection = 1;
			fprintf(
			    stderr,
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
	setenv("FSDPSCOPE_OUT", run_folder_path(session_run_folder(st->session)), 1);
	if (st->opt.s.dormant)
		setenv("FSDPSCOPE_DORMANT", "1", 1);
	if (st->opt.s.no_cupti)
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

/* The job was stopped (^Z): stop with it, as a shell job, then resume it. */
static void follow_stop(struct run_state *st, pid_t pid)
{
	tcsetpgrp(st->tty, getpgrp());
	raise(SIGTSTP);
	/* Continued (fg): give the terminal back and continue the job. */
	tcsetpgrp(st->tty, pid);
	kill(-pid, SIGCONT);
}

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
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
		if (!session_failed(st->session) && ingest_note_exit(session_ingest(st->session), w, status) < 0)
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

		session_poll(st->session, 100);
		children = reap(st, pid, &status, &leader_done);
		if (leader_done && !run_leader_gone) {
			pid_t pids[RUN_NAMED_PIDS];
			size_t n = children ? list_children(pids, RUN_NAMED_PIDS) : 0;

			run_leader_gone = 1;
			/* The terminal stays with the job's group while some of it
			 * lives (^C still reaches what CMD left), else comes back. */
			if (st->tty >= 0 && kill(-pid, 0) < 0)
				tcsetpgrp(st->tty, getpgrp());
			deadline = clock_mono_ms() + (int64_t)st->opt.s.wait_descendants_s * 1000;
			if (n && st->opt.s.wait_descendants_s) {
				fprintf(stderr,
					"fsdpscope run: %s exited; waiting for the %zu process%s it left running (",
					st->opt.argv[0], n, n == 1 ? "" : "es");
				print_pids(pids, n, RUN_NAMED_PIDS);
				fprintf(stderr, "), at most %d s (--wait-descendants)\n", st->opt.s.wait_descendants_s);
			}
		}
		if (!leader_done)
			continue;
		if (!children)
			break;
		if (clock_mono_ms() >= deadline || run_stop_wait) {
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
	int64_t deadline = clock_mono_ms() + (int64_t)st->opt.s.flush_timeout_s * 1000;

	session_poll(st->session, 0); /* accept what is waiting in the backlog */
	while (!run_stop_wait && session_open_connections(st->session) > 0) {
		int64_t left = deadline - clock_mono_ms();

		if (left <= 0) {
			fprintf(stderr,
				"fsdpscope run: %zu process(es) still connected %d s after the job ended; closing the "
				"trace without them (see --flush-timeout)\n",
				session_open_connections(st->session), st->opt.s.flush_timeout_s);
			break;
		}
		session_poll(st->session, left < 100 ? (int)left : 100);
	}
}

static int pid_is_late(const struct run_state *st, uint32_t pid)
{
	for (size_t i = 0; i < st->nlate; i++)
		if ((uint32_t)st->late[i].pid == pid)
			return 1;
	return 0;
}

/* The session's notes_fn: the processes that outlived CMD, those still running. */
static void print_job_notes(void *ctx, const struct ingest_stats *s)
{
	const struct run_state *st = ctx;

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
		fprintf(stderr, "fsdpscope run: warning: %zu process%s still running %d s after %s exited (",
			st->left_running, st->left_running == 1 ? "" : "es", st->opt.s.wait_descendants_s,
			st->opt.argv[0]);
		print_pids(st->left_pids, st->left_running, RUN_NAMED_PIDS);
		fprintf(
		    stderr,
		    "): not waited for (see --wait-descendants); what they record from now on goes to %s, which the "
		    "next 'fsdpscope run --out %s' merges\n",
		    run_folder_path(session_run_folder(st->session)), st->opt.s.dir);
	}
}

static void run_state_free(struct run_state *st)
{
	session_free(st->session);
	free(st->agent);
	free(st->ld_preload);
	free(st->metrics);
	free(st->late);
}

/* The job has ended: the session ends, its trace with it. */
static void finish(struct run_state *st)
{
	struct session_outcome outcome;

	drain(st);
	/* Processes still running write on into the folder: it stays, for the
	 * next run to merge. */
	session_finish(st->session, st->left_running != 0, print_job_notes, st, &outcome);
	run_state_free(st);
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
		run_state_free(&st);
		return RUN_EXIT_SETUP;
	}
	/* Processes the job leaves behind become fsdpscope's children, not
	 * init's: they can be waited for and their ends recorded. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		fprintf(stderr,
			"fsdpscope run: warning: cannot become the job's subreaper (%s): processes that outlive "
			"%s will not be waited for\n",
			strerror(errno), st.opt.argv[0]);
	if (pipe2(errpipe, O_CLOEXEC) < 0) {
		fprintf(stderr, "fsdpscope run: pipe: %s\n", strerror(errno));
		run_state_free(&st);
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
		run_state_free(&st);
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
	if (run_folder_set_job(session_run_folder(st.session), pid) < 0)
		fprintf(stderr,
			"fsdpscope run: warning: cannot note the job in %s/run.info: a run that finds this one's "
			"folder later cannot tell whether its job still runs\n",
			run_folder_path(session_run_folder(st.session)));

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
		session_abandon(st.session);
		run_state_free(&st);
		return code;
	}
	finish(&st);
	return code;
}
