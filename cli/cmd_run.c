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
#include "cli/job.h"
#include "cli/options.h"
#include "cli/run_folder.h"
#include "cli/session.h"
#include "cli/session_options.h"

#include "common/error.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUN_AGENT_NAME "libfsdpscope-agent.so"
/* fsdpscope could not start the job (usage, no agent, DIR unusable). */
#define RUN_EXIT_SETUP EXIT_USAGE

static const char run_help_head[] =
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
    "OPTIONS\n";

static const char run_help_tail[] =
    "\n"
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
    "    A trace or --json-summary that could not be written whole (a full disk) is\n"
    "    reported on standard error, with where the records are; when CMD exited 0\n"
    "    the status is then 4, so that a lost record never looks like a clean run.\n\n"
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
static volatile sig_atomic_t run_stop_sent;	       /* a signal of the user's was forwarded to the job */

/*
 * Forward to the job's process group while any of it may live. Once CMD is
 * gone, the second signal stops the wait for its descendants; once the whole
 * job is gone, the first stops the wait for the final flushes.
 */
static void run_on_signal(int sig)
{
	int saved = errno;

	if (run_child_pgid > 0 && !run_job_done) {
		kill(-(pid_t)run_child_pgid, sig);
		run_stop_sent = 1;
	}
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

struct run_state {
	struct run_options opt;
	session_t *session;
	char *agent;   /* absolute path of the agent */
	char *metrics; /* --metrics as HOST:PORT */
	int tty;       /* terminal fd handed to the job, or -1 */
	job_t *job;
};

static const struct options_entry run_entries[] = {
    {NULL, 0, NULL, "    -h, --help           this text (only before CMD)\n", 0},
    {NULL, 0, NULL, NULL, 0},
};

static const struct options_set run_sets[] = {
    {.entries = session_run_entries, .apply = session_run_apply, .offset = offsetof(struct run_options, s)},
    {.entries = run_entries},
};

const struct options_help cmd_run_help = OPTIONS_HELP(run_help_head, run_sets, 25, run_help_tail);

static int parse_options(int argc, char **argv, struct run_options *o)
{
	int first;

	memset(o, 0, sizeof(*o));
	session_run_options_init(&o->s);
	/* The first word that is not an option is CMD: its options (--help too) stay its own. */
	first = options_parse(&cmd_run_help, "run", argc, argv, OPTIONS_UNTIL_OPERAND, o);
	o->help = first == OPTIONS_HELP_SHOWN; /* printed */
	if (first < 0)
		return o->help ? 0 : FSS_E_USAGE;
	if (first >= argc) {
		fprintf(stderr, "fsdpscope run: no command given: fsdpscope run [OPTIONS] -- CMD [ARGS...]\n");
		return FSS_E_USAGE;
	}
	if (session_run_options_check(&o->s, "fsdpscope run"))
		return FSS_E_USAGE;
	o->argv = &argv[first];
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
	if (st->opt.s.metrics) {
		err = session_metrics_option("fsdpscope run", st->opt.s.metrics, &st->metrics, &so.metrics_remote);
		if (err)
			return err;
		so.metrics = st->metrics;
	}
	err = session_new(&st->session, &so);
	if (err)
		return err;
	if (session_metrics_address(st->session))
		fprintf(stderr, "fsdpscope run: Prometheus metrics: http://%s/metrics\n",
			session_metrics_address(st->session));
	return 0;
}

static const int run_forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP};

/* job_wait's hooks: what the signal handlers need to know, what they ask. */
static void on_leader_ended(void *ctx, int status)
{
	(void)ctx;
	(void)status;
	run_leader_gone = 1;
}

static int stop_waiting(void *ctx)
{
	(void)ctx;
	return run_stop_wait;
}

static void run_state_free(struct run_state *st)
{
	job_free(st->job);
	session_free(st->session);
	free(st->agent);
	free(st->metrics);
}

/* The job has ended: the agents' final flushes, then the session ends, its
 * trace with it. Returns 0, or -errno when the trace or the summary could
 * not be written whole (said). */
static int finish(struct run_state *st)
{
	struct session_outcome outcome;
	size_t open = job_drain(st->session, st->opt.s.flush_timeout_s * 1000, &run_stop_wait);

	if (open)
		fprintf(stderr,
			"fsdpscope run: %zu process(es) still connected %d s after the job ended; closing the "
			"trace without them (see --flush-timeout)\n",
			open, st->opt.s.flush_timeout_s);
	if (run_stop_sent)
		session_stop_asked(st->session);
	/* Processes still running write on into the folder: it stays, for the
	 * next run to merge. */
	session_finish(st->session, job_left_running(st->job) != 0, job_say_notes, st->job, &outcome);
	run_state_free(st);
	return outcome.write_error;
}

/*
 * Start the job with the forwarded signals held until the handlers know
 * its process group, then install them. Returns 0 with *pid, else the exit
 * code: a shell's when exec failed (nothing ran), RUN_EXIT_SETUP otherwise.
 */
static int start_job(struct run_state *st, pid_t *pid)
{
	struct job_spec spec = {
	    .prog = "fsdpscope run",
	    .argv = st->opt.argv,
	    .agent = st->agent,
	    .dormant = st->opt.s.dormant,
	    .no_cupti = st->opt.s.no_cupti,
	    .output_fd = -1,
	    .tty = st->tty,
	};
	struct sigaction sa;
	sigset_t block, oldmask;
	int err, exec_code;

	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(run_forwarded_signals) / sizeof(run_forwarded_signals[0]); i++)
		sigaddset(&block, run_forwarded_signals[i]);
	sigaddset(&block, SIGCHLD);
	sigprocmask(SIG_BLOCK, &block, &oldmask);
	/* The job starts with the dispositions fsdpscope inherited (an ignored
	 * SIGINT stays ignored, as it would without fsdpscope): the handlers
	 * come after the fork. */
	spec.child_mask = &oldmask;
	err = job_spawn(st->session, &spec, pid, &exec_code);
	if (err) {
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		return exec_code ? exec_code : RUN_EXIT_SETUP;
	}
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = run_on_signal; /* no SA_RESTART: interrupt epoll_wait */
	for (size_t i = 0; i < sizeof(run_forwarded_signals) / sizeof(run_forwarded_signals[0]); i++)
		sigaction(run_forwarded_signals[i], &sa, NULL);
	sa.sa_handler = run_on_child;
	/* Stops matter only when following ^Z on a terminal. */
	sa.sa_flags = st->tty >= 0 ? 0 : SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	run_child_pgid = *pid;
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	return 0;
}

int cmd_run(int argc, char **argv)
{
	struct run_state st;
	struct job_options jo;
	struct job_hooks hooks = {.leader_ended = on_leader_ended, .stop_waiting = stop_waiting};
	int status, code;
	pid_t pid;

	memset(&st, 0, sizeof(st));
	st.tty = -1;
	if (parse_options(argc, argv, &st.opt))
		return EXIT_USAGE;
	if (st.opt.help)
		return EXIT_OK; /* options_parse printed the help */
	if (setup(&st)) {
		run_state_free(&st);
		return RUN_EXIT_SETUP;
	}
	job_become_subreaper("fsdpscope run", st.opt.argv[0]);
	/* A terminal we own goes to the job while it runs, as a shell does. */
	if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp())
		st.tty = STDIN_FILENO;
	jo = (struct job_options){
	    .prog = "fsdpscope run",
	    .command = st.opt.argv[0],
	    .dir = st.opt.s.dir,
	    .tty = st.tty,
	    .wait_descendants_s = st.opt.s.wait_descendants_s,
	    .announce = 1,
	};
	if (job_new(&st.job, st.session, &jo)) {
		fprintf(stderr, "fsdpscope run: out of memory\n");
		run_state_free(&st);
		return RUN_EXIT_SETUP;
	}
	code = start_job(&st, &pid);
	if (code) {
		/* Nothing ran, nothing to trace: no trace file either. */
		session_abandon(st.session);
		run_state_free(&st);
		return code;
	}
	status = job_wait(st.job, pid, &hooks);
	run_job_done = 1;
	run_stop_wait = 0;
	code = job_exit_code(status);
	/* The job's own failure is the one to report; a job that succeeded
	 * with its record lost must not look like a clean run. */
	if (finish(&st) && code == EXIT_OK)
		code = EXIT_INCOMPLETE;
	return code;
}
