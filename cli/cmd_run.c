/*
 * cmd_run.c - fsdpscope run [opts] -- CMD ARGS...: launch a job with the
 * agent in its environment, ingest what its processes send, write one trace.
 *
 * One thread: the embedded ingest's epoll loop doubles as the wait for the
 * child (SIGCHLD interrupts it). The child runs in its own process group so
 * that a forwarded SIGINT / SIGTERM reaches every process of the job
 * (launchers, forked ranks); on a terminal the group also gets the terminal,
 * as a shell would do, so ^C and ^Z go to the job and not to fsdpscope.
 */
#include "cli/commands.h"
#include "cli/lint.h"

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
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define RUN_AGENT_NAME "libfsdpscope-agent.so"
#define RUN_DEFAULT_DIR "fsdpscope-out"
#define RUN_DEFAULT_NAME "trace"
#define RUN_DEFAULT_FLUSH_S 5
/* fsdpscope could not start the job (usage, no agent, DIR unusable). */
#define RUN_EXIT_SETUP EXIT_USAGE

const char cmd_run_help[] =
	"NAME\n"
	"    fsdpscope run - run a training job with the agent and record one trace\n\n"
	"SYNOPSIS\n"
	"    fsdpscope run [--out DIR] [--name NAME] [--dormant] [--no-cupti]\n"
	"                  [--flush-timeout SEC] -- CMD [ARGS...]\n\n"
	"DESCRIPTION\n"
	"    Starts a collector inside fsdpscope on a private unix socket, then runs CMD\n"
	"    with the agent (libfsdpscope-agent.so) in its environment, so that CMD and\n"
	"    every process it starts - launchers such as torchrun, srun or mpirun, and\n"
	"    the ranks they fork - record their NCCL collectives, NVTX ranges and, on a\n"
	"    GPU, CUPTI kernel intervals. Each process connects to the socket on its own;\n"
	"    a process that cannot reach it writes a per-process trace file into DIR\n"
	"    instead. When CMD exits, fsdpscope waits for the processes' final flushes\n"
	"    (at most --flush-timeout), merges any per-process files, and writes one\n"
	"    trace, DIR/NAME.fss, with one source per process.\n\n"
	"    CMD's standard input, output and error are left alone; fsdpscope writes\n"
	"    its own lines to standard error only: where the trace is, a one-line\n"
	"    summary (processes, collectives, NVTX ranges, GPU intervals, records the\n"
	"    agents dropped) and, when an input was cut short or damaged, which process,\n"
	"    at what offset and why (its complete chunks are kept).\n\n"
	"    SIGINT, SIGTERM and SIGHUP sent to fsdpscope are forwarded to CMD's process\n"
	"    group; a second one while fsdpscope waits for the final flushes stops the\n"
	"    wait. On a terminal, CMD's group is given the terminal, so ^C and ^Z act on\n"
	"    the job as they would without fsdpscope.\n\n"
	"    The environment CMD gets (children and launchers inherit it):\n"
	"      LD_PRELOAD             the agent, before any existing entries (after an\n"
	"                             ASan runtime already listed there, which must be first)\n"
	"      NVTX_INJECTION64_PATH  the agent, unless already set (then kept, with a\n"
	"                             warning: NVTX ranges are then not recorded)\n"
	"      FSDPSCOPE_SINK         the socket address (unix:DIR/.fsdpscope-run.PID.sock,\n"
	"                             or an abstract unix:@... name when that path is too long)\n"
	"      FSDPSCOPE_OUT          DIR, for per-process trace files\n"
	"      FSDPSCOPE_DORMANT=1    with --dormant;  FSDPSCOPE_CUPTI=0 with --no-cupti\n\n"
	"OPTIONS\n"
	"    --out DIR            directory for the trace (created; default ./" RUN_DEFAULT_DIR ")\n"
	"    --name NAME          trace file name, DIR/NAME.fss (default " RUN_DEFAULT_NAME "); an\n"
	"                         existing file of that name is replaced\n"
	"    --dormant            start the agents dormant: they count calls but record\n"
	"                         nothing until a collector asks for data\n"
	"    --no-cupti           do not load CUPTI in the job (no GPU intervals)\n"
	"    --flush-timeout SEC  after CMD exits, wait at most SEC seconds for processes\n"
	"                         still connected, e.g. ones CMD left running (default 5)\n"
	"    Put '--' before CMD, so that CMD's own options are not read as fsdpscope's.\n\n"
	"FILES\n"
	"    DIR/NAME.fss          the trace ('fsdpscope dump', 'fsdpscope report')\n"
	"    DIR/NAME.fss.runPID.partial  the trace while it is being written (PID is\n"
	"                          fsdpscope's); renamed to NAME.fss when complete\n"
	"    DIR/*.fss, *.partial  per-process files of agents that found no collector;\n"
	"                          merged into NAME.fss and removed (files that were in\n"
	"                          DIR before the run are left alone)\n\n"
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
	"    fsdpscope run --no-cupti -- python train.py --config small.yaml\n"
	"    fsdpscope dump --type collective fsdpscope-out/trace.fss | head\n";

/* Signal state shared with the handlers. */
static volatile sig_atomic_t run_child_pgid;  /* > 0 once the job's group exists */
static volatile sig_atomic_t run_child_gone;  /* the job's leader has exited */
static volatile sig_atomic_t run_stop_drain;  /* a signal after the job ended: stop waiting */

/* Forward to the job's process group; after the job ended, stop waiting. */
static void run_on_signal(int sig)
{
	int saved = errno;

	if (run_child_pgid > 0 && !run_child_gone)
		kill(-(pid_t)run_child_pgid, sig);
	else
		run_stop_drain = 1;
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
	int flush_timeout_s;
	char **argv; /* CMD ARGS..., NULL-terminated */
};

/* A file that was in DIR before the run: not one of this run's processes. */
struct run_old_file {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

struct run_state {
	struct run_options opt;
	char *dir;          /* absolute */
	char *trace_path;   /* DIR/NAME.fss */
	char *work_path;    /* DIR/NAME.fss.runPID: written there, renamed to trace_path when complete */
	char *sink;         /* FSDPSCOPE_SINK value */
	char *agent;        /* absolute path of the agent */
	char *ld_preload;   /* LD_PRELOAD value for the job */
	int keep_nvtx_injection; /* NVTX_INJECTION64_PATH was set by the user */
	struct run_old_file *old;
	size_t nold;
	char **merged;      /* per-process files merged */
	size_t nmerged;
	ingest_t *ing;
	int ingest_failed;
	int tty;            /* terminal fd handed to the job, or -1 */
};

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* mkdir -p. Returns 0 or -errno. */
static int mkdir_p(const char *path)
{
	char *copy = strdup(path);
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (char *p = copy + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;

			*p = '\0';
			if (mkdir(copy, 0777) < 0 && errno != EEXIST) {
				err = -errno;
				break;
			}
			*p = c;
			if (!c)
				break;
		}
	}
	if (!err) {
		struct stat st;

		if (stat(path, &st) < 0)
			err = -errno;
		else if (!S_ISDIR(st.st_mode))
			err = -ENOTDIR;
	}
	free(copy);
	return err;
}

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

static int is_trace_file_name(const char *name)
{
	return name[0] != '.' && (ends_with(name, ".fss") || ends_with(name, ".partial"));
}

/* Remember the trace files DIR holds before the run. */
static int snapshot_old_files(struct run_state *st)
{
	DIR *d = opendir(st->dir);
	struct dirent *e;
	int err = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		struct stat sb;
		struct run_old_file *o;

		if (!is_trace_file_name(e->d_name) || fstatat(dirfd(d), e->d_name, &sb, 0) < 0 || !S_ISREG(sb.st_mode))
			continue;
		o = realloc(st->old, (st->nold + 1) * sizeof(*o));
		if (!o) {
			err = -ENOMEM;
			break;
		}
		st->old = o;
		o[st->nold].dev = sb.st_dev;
		o[st->nold].ino = sb.st_ino;
		o[st->nold].size = sb.st_size;
		o[st->nold].mtime = sb.st_mtim;
		st->nold++;
	}
	closedir(d);
	return err;
}

static int is_old_file(const struct run_state *st, const struct stat *sb)
{
	for (size_t i = 0; i < st->nold; i++) {
		const struct run_old_file *o = &st->old[i];

		if (o->dev == sb->st_dev && o->ino == sb->st_ino && o->size == sb->st_size &&
		    o->mtime.tv_sec == sb->st_mtim.tv_sec && o->mtime.tv_nsec == sb->st_mtim.tv_nsec)
			return 1;
	}
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Merge the per-process files this run's agents left in DIR. */
static void merge_fallback_files(struct run_state *st)
{
	const char *work = strrchr(st->work_path, '/') + 1;
	size_t worklen = strlen(work);
	DIR *d = opendir(st->dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0;

	if (!d) {
		fprintf(stderr, "fsdpscope run: cannot read %s for per-process files: %s\n", st->dir, strerror(errno));
		return;
	}
	while ((e = readdir(d))) {
		struct stat sb;
		char **nn;

		if (!is_trace_file_name(e->d_name))
			continue;
		/* Our own output while we write it. */
		if (strncmp(e->d_name, work, worklen) == 0 && strcmp(e->d_name + worklen, ".partial") == 0)
			continue;
		if (fstatat(dirfd(d), e->d_name, &sb, 0) < 0 || !S_ISREG(sb.st_mode) || is_old_file(st, &sb))
			continue;
		nn = realloc(names, (n + 1) * sizeof(*nn));
		if (!nn || asprintf(&nn[n], "%s/%s", st->dir, e->d_name) < 0) {
			names = nn ? nn : names;
			fprintf(stderr, "fsdpscope run: out of memory listing %s\n", st->dir);
			break;
		}
		names = nn;
		n++;
	}
	closedir(d);
	/* Sorted, so the sources of a run number the same way every time. */
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		int err = st->ingest_failed ? -EIO : ingest_add_file(st->ing, names[i]);

		if (err) {
			if (!st->ingest_failed)
				fprintf(stderr, "fsdpscope run: %s: not merged: %s\n", names[i], fss_strerror(err));
			free(names[i]);
			continue;
		}
		st->merged = realloc(st->merged, (st->nmerged + 1) * sizeof(*st->merged));
		if (!st->merged) {
			st->nmerged = 0;
			free(names[i]);
			continue;
		}
		st->merged[st->nmerged++] = names[i];
	}
	free(names);
}

/* The socket: a file in DIR when the path fits sockaddr_un, else an
 * abstract name (which needs no file but is bound to the network namespace). */
static int choose_sink(struct run_state *st)
{
	struct sockaddr_un sun;
	struct timespec ts;
	int n;

	n = asprintf(&st->sink, "unix:%s/.fsdpscope-run.%d.sock", st->dir, (int)getpid());
	if (n < 0) {
		st->sink = NULL;
		return -ENOMEM;
	}
	if ((size_t)n - 5 < sizeof(sun.sun_path))
		return 0;
	free(st->sink);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	n = asprintf(&st->sink, "unix:@fsdpscope-run.%d.%lx", (int)getpid(), (unsigned long)ts.tv_nsec);
	if (n < 0) {
		st->sink = NULL;
		return -ENOMEM;
	}
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
		{NULL, 0, NULL, 0},
	};
	int opt;

	memset(o, 0, sizeof(*o));
	o->dir = RUN_DEFAULT_DIR;
	o->name = RUN_DEFAULT_NAME;
	o->flush_timeout_s = RUN_DEFAULT_FLUSH_S;
	optind = 1;
	opterr = 0;
	/* "+": stop at CMD, so that its options stay its own. */
	while ((opt = getopt_long(argc, argv, "+", options, NULL)) != -1) {
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
		case 'F': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || end == optarg || v < 0 || v > 86400) {
				fprintf(stderr, "fsdpscope run: --flush-timeout: '%s' is not a number of seconds (0..86400)\n",
					optarg);
				return FSS_E_USAGE;
			}
			o->flush_timeout_s = (int)v;
			break;
		}
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

static int setup(struct run_state *st)
{
	const char *suffix;
	int err;

	err = find_agent(st);
	if (err)
		return err;
	err = mkdir_p(st->opt.dir);
	if (err) {
		fprintf(stderr, "fsdpscope run: cannot create %s: %s\n", st->opt.dir, strerror(-err));
		return err;
	}
	st->dir = realpath(st->opt.dir, NULL);
	if (!st->dir) {
		err = -errno;
		fprintf(stderr, "fsdpscope run: %s: %s\n", st->opt.dir, strerror(errno));
		return err;
	}
	suffix = ends_with(st->opt.name, ".fss") ? "" : ".fss";
	if (asprintf(&st->trace_path, "%s/%s%s", st->dir, st->opt.name, suffix) < 0) {
		st->trace_path = NULL;
		return -ENOMEM;
	}
	if (asprintf(&st->work_path, "%s.run%d", st->trace_path, (int)getpid()) < 0) {
		st->work_path = NULL;
		return -ENOMEM;
	}
	err = snapshot_old_files(st);
	if (!err)
		err = build_ld_preload(st);
	if (!err)
		err = choose_sink(st);
	if (err) {
		fprintf(stderr, "fsdpscope run: %s: %s\n", st->dir, strerror(-err));
		return err;
	}
	err = ingest_new(&st->ing, st->work_path, NULL);
	if (err) {
		fprintf(stderr, "fsdpscope run: cannot create %s.partial: %s\n", st->work_path, fss_strerror(err));
		return err;
	}
	err = ingest_listen(st->ing, st->sink);
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
	setenv("FSDPSCOPE_OUT", st->dir, 1);
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
	if (rc < 0) {
		st->ingest_failed = 1;
		fprintf(stderr, "fsdpscope run: writing %s.partial failed: %s; the job goes on unrecorded\n",
			st->work_path, fss_strerror(rc));
	}
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

/* Run the job to its end while ingesting; returns its wait status. */
static int supervise(struct run_state *st, pid_t pid)
{
	int status = 0;

	for (;;) {
		pid_t w;

		pump(st, 100);
		w = waitpid(pid, &status, WNOHANG | (st->tty >= 0 ? WUNTRACED : 0));
		if (w == pid) {
			if (WIFSTOPPED(status)) {
				follow_stop(st, pid);
				continue;
			}
			break;
		}
		if (w < 0 && errno != EINTR) {
			status = 0;
			break;
		}
	}
	run_child_gone = 1;
	if (st->tty >= 0)
		tcsetpgrp(st->tty, getpgrp());
	return status;
}

/* After the job: wait (bounded) for the agents' final flushes. */
static void drain(struct run_state *st)
{
	int64_t deadline = now_ms() + (int64_t)st->opt.flush_timeout_s * 1000;

	pump(st, 0); /* accept what is waiting in the backlog */
	while (!st->ingest_failed && !run_stop_drain && ingest_open_connections(st->ing) > 0) {
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

static void print_summary(const struct run_state *st, const struct ingest_stats *s)
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
	if (st->nmerged)
		fprintf(stderr, "fsdpscope run: merged %zu per-process file(s) from %s (removed)\n", st->nmerged,
			st->dir);
	fprintf(stderr, "fsdpscope run: trace written to %s\n", st->trace_path);
	fprintf(stderr,
		"fsdpscope run: %" PRIu32 " process%s, %" PRIu64 " collectives, %" PRIu64 " NVTX ranges, %" PRIu64
		" GPU intervals, %" PRIu64 " records dropped",
		processes, processes == 1 ? "" : "es", s->by_type[FSS_REC_COLLECTIVE], s->by_type[FSS_REC_NVTX_RANGE],
		s->by_type[FSS_REC_GPU_INTERVAL], s->dropped);
	if (unclean)
		fprintf(stderr, " (%" PRIu32 " process%s without a clean exit)", unclean, unclean == 1 ? "" : "es");
	fputc('\n', stderr);
	/* The agent reports a process from its first NCCL call on. */
	if (processes == 0)
		fprintf(stderr,
			"fsdpscope run: no process reported: the job made no NCCL call, or the agent could not load in it "
			"(a static or setuid program, or one that clears LD_PRELOAD)\n");
}

static void run_state_free(struct run_state *st)
{
	ingest_free(st->ing);
	free(st->dir);
	free(st->trace_path);
	free(st->work_path);
	free(st->sink);
	free(st->agent);
	free(st->ld_preload);
	free(st->old);
	for (size_t i = 0; i < st->nmerged; i++)
		free(st->merged[i]);
	free(st->merged);
}

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

int cmd_run(int argc, char **argv)
{
	struct run_state st;
	struct sigaction sa, old_ttou;
	sigset_t block, oldmask;
	const struct ingest_stats *stats = NULL;
	int errpipe[2], exec_errno = 0, status, code, err;
	pid_t pid;
	ssize_t n;

	memset(&st, 0, sizeof(st));
	st.tty = -1;
	if (parse_options(argc, argv, &st.opt))
		return EXIT_USAGE;
	if (setup(&st)) {
		run_state_free(&st);
		return RUN_EXIT_SETUP;
	}
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

	/* exec closes the pipe (O_CLOEXEC): EOF means the job is running. */
	close(errpipe[1]);
	do
		n = read(errpipe[0], &exec_errno, sizeof(exec_errno));
	while (n < 0 && errno == EINTR);
	close(errpipe[0]);

	status = supervise(&st, pid);
	code = exit_code_of(status);
	if (n == (ssize_t)sizeof(exec_errno)) {
		/* Nothing ran, nothing to trace: no trace file either (and a
		 * previous one of the same name stays). */
		exec_error_message(st.opt.argv[0], exec_errno);
		ingest_finish(st.ing, NULL);
		unlink(st.work_path);
		run_state_free(&st);
		return code;
	}
	drain(&st);
	merge_fallback_files(&st);
	err = st.ingest_failed ? -EIO : ingest_finish(st.ing, &stats);
	if (!err && rename(st.work_path, st.trace_path) < 0)
		err = -errno;
	if (err || !stats) {
		if (!st.ingest_failed)
			fprintf(stderr, "fsdpscope run: writing %s failed: %s (what was written is in %s or %s.partial)\n",
				st.trace_path, fss_strerror(err), st.work_path, st.work_path);
	} else {
		/* The files' records are in the trace now: remove them, so that
		 * nothing reads them twice. */
		for (size_t i = 0; i < st.nmerged; i++)
			unlink(st.merged[i]);
		print_summary(&st, stats);
		run_trace_ready(st.trace_path, stats);
	}
	run_state_free(&st);
	return code;
}
