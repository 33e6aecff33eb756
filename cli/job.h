/*
 * job.h - the job a session launches (`fsdpscope run`, `fsdpscope top --
 * CMD`) and the loop that sees it to its end, once for both: started under
 * the agent in its own process group, reaped with every process it leaves
 * behind (fsdpscope is its subreaper), each end noted in the trace, the
 * descendants waited for at most --wait-descendants, and after the job the
 * agents' final flushes waited for (job_drain, which `attach` shares).
 *
 * The signals are the caller's: run forwards them to the job's group, top
 * turns them into a stop; both tell the loop through its hooks.
 */
#ifndef FSS_CLI_JOB_H
#define FSS_CLI_JOB_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include "cli/session.h"

/* Processes named in a message; more are counted. */
#define JOB_NAMED_PIDS 8

/* How job_spawn starts the job. */
struct job_spec {
	const char *prog;	    /* "fsdpscope run": the prefix of every line said */
	char *const *argv;	    /* CMD ARGS..., NULL-terminated */
	const char *agent;	    /* the agent's path (session_find_agent) */
	int dormant, no_cupti;	    /* FSDPSCOPE_DORMANT=1, FSDPSCOPE_CUPTI=0 */
	int output_fd;		    /* the job's stdout and stderr, -1: left as they are */
	int stdin_null;		    /* the job's stdin is /dev/null (closed to it) */
	int tty;		    /* a terminal the job's group is given (as a shell does), -1: none */
	const sigset_t *child_mask; /* the signal mask the job starts with, NULL: the caller's */
};

/*
 * job_spawn - fork and exec the job in its own process group, with the
 * agent and the session's sink in its environment (as `fsdpscope run`
 * documents: LD_PRELOAD, NVTX_INJECTION64_PATH, FSDPSCOPE_SINK,
 * FSDPSCOPE_OUT, FSDPSCOPE_DORMANT, FSDPSCOPE_CUPTI), noted in run.info.
 * With j->tty, the group gets the terminal, and SIGTTOU stays ignored in
 * fsdpscope from here on (it takes the terminal back later). Returns 0
 * with *pid once exec succeeded; -errno of exec (nothing ran: the child
 * is reaped, and *exec_code, when given, is a shell's exit code for it,
 * 127 not found or 126 not executable) or of pipe or fork (*exec_code 0);
 * every failure said on stderr, prefixed with j->prog.
 */
int job_spawn(session_t *s, const struct job_spec *j, pid_t *pid, int *exec_code);

/* job_become_subreaper - the processes the job leaves behind become
 * fsdpscope's children, not init's, so that they can be waited for; when
 * that cannot be, a warning (prefixed with prog, naming command) says so. */
void job_become_subreaper(const char *prog, const char *command);

/* job_catch_signals - SIGINT, SIGTERM and SIGHUP call handler, without
 * SA_RESTART (a signal interrupts the session's wait); with ignore_pipe,
 * SIGPIPE is ignored (a peer that goes away is not fsdpscope's end). */
void job_catch_signals(void (*handler)(int), int ignore_pipe);

/* job_status_words - a wait status in words, as the report words a
 * process's end: "exited 1", "killed by signal 9 (SIGKILL)" (the number
 * alone when the signal has no name), "status 0x...". */
void job_status_words(int status, char *buf, size_t len);

/* job_exit_code - the exit code a shell gives for a wait status: the
 * exit status, or 128 + N for a process killed by signal N. */
int job_exit_code(int status);

typedef struct job job_t;

struct job_options {
	const char *prog;	/* "fsdpscope run": the prefix of every line said */
	const char *command;	/* CMD's name (argv[0]), in what is said */
	const char *dir;	/* --out DIR, in what is said of processes left running */
	int tty;		/* the terminal the job's group has (job_spawn's), -1: none */
	int wait_descendants_s; /* --wait-descendants */
	int announce;		/* say, when CMD exits, which processes it left that are waited for */
};

/*
 * job_new - a job of session s (borrowed: it outlives the job), with
 * options o (copied; the strings borrowed), made before the job starts so
 * that nothing can fail once it runs. Returns 0 with *out (job_free), or
 * -ENOMEM.
 */
int job_new(job_t **out, session_t *s, const struct job_options *o);

/* What the caller of job_wait adds to each round of its loop. Any may be NULL. */
struct job_hooks {
	void (*round)(void *ctx);		     /* each round, after the reaping (top: a stop asked) */
	void (*leader_ended)(void *ctx, int status); /* once, when CMD has been reaped */
	int (*stop_waiting)(void *ctx);		     /* nonzero: give up on the descendants now */
	void *ctx;
};

/*
 * job_wait - poll the session and reap until CMD (leader, job_spawn's
 * pid) and every process it
 * left have ended, or, CMD gone, --wait-descendants has passed or
 * h->stop_waiting says to stop: those still running are then listed
 * (job_left_running). On a terminal, the job's stops (^Z) are followed as
 * a shell follows them, and the terminal is fsdpscope's again at the end.
 * Returns CMD's wait status.
 */
int job_wait(job_t *j, pid_t leader, const struct job_hooks *h);

/* job_left_running - how many processes were still running when job_wait
 * gave up on them (0: it saw every one end). */
size_t job_left_running(const job_t *j);

/*
 * job_say_notes - a session_notes_fn (ctx: the job): the processes that
 * outlived CMD and were waited for (each with how it ended), and those
 * still running when the wait gave up, where their records go.
 */
void job_say_notes(void *ctx, const struct ingest_stats *stats);

void job_free(job_t *j);

/*
 * job_drain - after the job: poll the session until no agent is connected,
 * timeout_ms passed, or *stop is set (stop may be NULL). Returns how many
 * were still connected when the time ran out, else 0.
 */
size_t job_drain(session_t *s, int timeout_ms, const volatile sig_atomic_t *stop);

#endif
