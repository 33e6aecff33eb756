/*
 * top.h - `fsdpscope top`, the dashboard (docs/top.md): the contract
 * between the screen (tui/: drawing, keys, the terminal) and the feeds
 * that give it views of a job (cli/cmd_top.c and tui/feed_*.c: a job the
 * dashboard launched, a session it connects to, a trace it replays).
 *
 * The dashboard draws only from a struct live_view (collector/live.h), a
 * snapshot of a session's live state, plus the struct top_info a feed
 * fills: never from collector internals. A slow terminal never holds up
 * the session: the feed hands the screen the latest view it has, and a
 * view the screen did not draw in time is simply replaced.
 *
 * Layers: tui/ draws into a struct top_canvas (cells of text and
 * attributes, tui/canvas.h) from the view; tui/term.c puts a canvas on the
 * terminal with ncurses, and `--once` prints the same canvas as plain text.
 * So everything the screen shows is testable without a terminal, and the
 * one ncurses file is the only one that touches it.
 */
#ifndef FSS_TUI_TOP_H
#define FSS_TUI_TOP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collector/live.h"

/* How the dashboard got its job. */
enum top_mode {
	TOP_MODE_RUN = 1,     /* top [opts] -- CMD: it launched the job under the agent */
	TOP_MODE_CONNECT = 2, /* top --connect ADDR: a running collect / run session's viewer endpoint */
	TOP_MODE_REPLAY = 3,  /* top TRACE...: a recorded trace, replayed */
	TOP_MODE_ATTACH = 4,  /* attach --top (issue 13): figures attach cannot measure show as n/a */
};

/* Where the job is. */
enum top_job_state {
	TOP_JOB_RUNNING = 0,
	TOP_JOB_ENDED = 1,    /* ended: exit_status / how say how */
	TOP_JOB_DETACHED = 2, /* the user left it running and recorded (run mode, `q` then "leave") */
	TOP_JOB_UNKNOWN = 3,  /* connect mode: the session is gone, or does not say */
};

/* What a feed says of the job beside the views. */
struct top_info {
	int mode;                  /* enum top_mode */
	int job_state;             /* enum top_job_state */
	int exit_status;           /* ended: a waitpid() status, -1 unknown */
	char command[256];         /* the job's command line, "" unknown */
	char source[512];          /* run: the log file the job's stdout / stderr go to; connect: the
	                              address; replay: the trace path(s) */
	char trace[512];           /* where the trace is (or will be) written, "" none (replay) */
	char how[160];             /* ended / detached: in words ("exited 0", "killed by SIGTERM"), "" */
	uint32_t nodes;            /* hosts among the ranks, 0 unknown */
	int replay_stepping;       /* replay: 1 when the view advances only on the step key (tests) */
	uint64_t replay_step;      /* replay: steps shown so far */
	uint64_t replay_steps;     /* replay: steps in the trace, 0 until known */
	double peak_flops;         /* for MFU (from --peak-flops), 0 unknown */
	double tokens_per_step;    /* for tokens/s (from --tokens-per-step), 0 unknown */
	double flops_per_step;     /* for MFU with peak_flops: the job's FLOPs per step (6 x P x tokens when
	                              P is known), 0 unknown (no MFU shown) */
};

/* A source of views. Every callback is called on the dashboard's thread. */
struct top_feed {
	void *ctx;
	/* the newest view, NULL before the first; held until release */
	const struct live_view *(*acquire)(void *ctx);
	void (*release)(void *ctx, const struct live_view *v);
	/* wait up to timeout_ms for a newer view or a change of info: 1 something new,
	 * 0 timeout, a negative errno when the feed failed (the screen says so and
	 * stays until q) */
	int (*wait)(void *ctx, int timeout_ms);
	/* a descriptor the screen polls beside the keyboard (readable: call wait(0)), -1 none */
	int (*fd)(void *ctx);
	void (*info)(void *ctx, struct top_info *out);
	/* replay: show one more step (the step key, `n`), NULL for live feeds; 0, or
	 * -ENODATA at the trace's end */
	int (*step)(void *ctx);
	/* run mode: `q` while the job runs asks; TOP_QUIT_STOP stops the job (SIGTERM to
	 * its process group, then reaps it), TOP_QUIT_LEAVE leaves it running and recorded
	 * (the session goes on as `collect` would once the screen is gone). NULL for other
	 * modes. 0 or a negative errno. */
	int (*quit)(void *ctx, int how);
};

#define TOP_QUIT_STOP 1
#define TOP_QUIT_LEAVE 2

struct top_options {
	int delay_ms;        /* -d SEC: redraw at most this often (default 1000) */
	int color;           /* 1 colour allowed: the terminal has it, NO_COLOR unset, no --no-color */
	int exit_with_job;   /* --exit-with-job: leave once the job has ended */
	int once;            /* --once / -b: one plain-text snapshot, then exit */
	int cols, rows;      /* --once: the page size (default 80 x 24; 0 0: COLUMNS / LINES) */
	int first_rank;      /* -r RANK: the rank of the time strip at start, -1 the slowest */
};

/*
 * top_run_screen - the dashboard on the terminal until the user quits, the
 * feed fails and the user quits, or (exit_with_job) the job ends. Restores
 * the terminal on every way out: q, ^C, SIGTERM, a crash of the dashboard
 * (SIGSEGV / SIGABRT / SIGBUS / SIGFPE: the terminal is restored, then the
 * signal is raised again). Returns 0, or a negative errno with a message in
 * err: -ENOTTY (no terminal), -EIO (ncurses could not start), -EINTR
 * (SIGTERM or SIGHUP ended the screen: the terminal is restored and the
 * signals' handlers are the caller's again; the caller stops the job).
 * Test hook: with FSDPSCOPE_TOP_CRASH_KEY=1 in the environment, key `C`
 * calls abort() (the crash path, for tests).
 */
int top_run_screen(struct top_feed *feed, const struct top_options *opt, char *err, size_t errlen);

/*
 * top_print_once - one plain-text snapshot of the feed's newest view (its
 * first one: waits up to 10 s for it) on f, opt->cols x opt->rows, no
 * escape sequences. 0, -ETIMEDOUT (no view came), -ERANGE (opt->first_rank
 * is no rank of the view), or a negative errno; the reason in why when
 * the feed or the options gave one.
 */
int top_print_once(struct top_feed *feed, const struct top_options *opt, FILE *f, char *why, size_t whylen);

#endif
