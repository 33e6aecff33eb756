/*
 * top_run.c - `fsdpscope top [opts] -- CMD` (cli/top_run.h): `run` with a
 * dashboard in front.
 *
 * The dashboard owns the main thread and the terminal, so the session gets
 * a thread of its own: it polls the ingest, reaps the job (fsdpscope is the
 * job's subreaper, as in run) and publishes on its board, which the
 * dashboard reads through a board feed. The job cannot share the terminal
 * with the dashboard: its stdout and stderr go to a log file, its stdin is
 * /dev/null, and it runs in its own process group that the terminal does
 * not give signals to (^C is the dashboard's `q`). What the session says
 * on stderr while the screen is up goes to the log too; what it says of
 * its end is copied to the terminal once the screen is gone.
 *
 * Quitting while the job runs: STOP sends SIGTERM to the job's group and
 * the session ends as run's does once it is reaped; LEAVE ends only the
 * screen, and the session goes on to the job's end as collect's would.
 */
#include "cli/top_run.h"

#include "cli/commands.h"
#include "cli/job.h"
#include "tui/feeds.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOP_PROG "fsdpscope top"

struct top_run {
	struct top_feed inner; /* first: top_feed_forward */
	struct session_run_options o;
	char **argv;
	session_t *session;
	job_t *job;
	char *agent, *metrics;
	top_board_feed_t *bf;
	struct top_info info;
	char *log_path;
	int log_fd;
	pid_t pid;
	pthread_t thread;
	int thread_started;
	pthread_mutex_t mu; /* guards what follows */
	int stop;	    /* quit STOP asked: SIGTERM the job */
	int stopped;	    /* the SIGTERM was sent */
	int left;	    /* quit LEAVE */
	int ended;	    /* the job ended (info says how) */
	int finished;	    /* the session has ended */
	int finish_rc;	    /* session_finish's */
	int status;	    /* CMD's wait status */
	int saved_err;	    /* the real stderr while the screen is up, else -1 */
	off_t finish_off;   /* where in the log the session's end began, -1 not there */
};

/* A signal to fsdpscope while no screen handles them: stop the job, as run forwards it. */
static volatile sig_atomic_t top_run_signalled;

static void on_signal(int sig)
{
	(void)sig;
	top_run_signalled = 1;
}

void top_run_catch_signals(void)
{
	job_catch_signals(on_signal, 0);
}

/* Called with r->mu held: r->info is whole. */
static void publish_info(top_run_t *r)
{
	top_board_feed_set_info(r->bf, &r->info);
}

/* job_wait's round: a stop asked (quit STOP, a signal) sends the job's group SIGTERM, once. */
static void on_round(void *ctx)
{
	top_run_t *r = ctx;
	int stop;

	pthread_mutex_lock(&r->mu);
	stop = (r->stop || top_run_signalled) && !r->stopped;
	if (stop)
		r->stopped = 1;
	pthread_mutex_unlock(&r->mu);
	if (stop)
		kill(-r->pid, SIGTERM);
}

/* job_wait's leader_ended: the dashboard says how CMD ended. */
static void on_leader_ended(void *ctx, int status)
{
	top_run_t *r = ctx;

	pthread_mutex_lock(&r->mu);
	r->status = status;
	r->ended = 1;
	r->info.job_state = r->left ? TOP_JOB_DETACHED : TOP_JOB_ENDED;
	r->info.exit_status = status;
	job_status_words(status, r->info.how, sizeof(r->info.how));
	publish_info(r);
	pthread_mutex_unlock(&r->mu);
}

static void *session_thread(void *arg)
{
	top_run_t *r = arg;
	struct job_hooks hooks = {.round = on_round, .leader_ended = on_leader_ended, .ctx = r};
	struct session_outcome outcome;

	r->status = job_wait(r->job, r->pid, &hooks);
	/* The final flushes of the agents, bounded as run's. */
	job_drain(r->session, r->o.flush_timeout_s * 1000, NULL);
	pthread_mutex_lock(&r->mu);
	r->finish_off = r->saved_err >= 0 ? lseek(r->log_fd, 0, SEEK_END) : -1;
	if (r->stop)
		session_stop_asked(r->session);
	/* What CMD left running goes on in per-process files, as with run: the folder stays. */
	r->finish_rc = session_finish(r->session, job_left_running(r->job) != 0, NULL, NULL, &outcome);
	if (r->finish_rc == 0 && outcome.trace_path)
		snprintf(r->info.trace, sizeof(r->info.trace), "%s", outcome.trace_path);
	if (!r->finish_rc)
		r->finish_rc = outcome.write_error;
	r->ended = 1;
	if (r->info.job_state == TOP_JOB_RUNNING) {
		r->info.job_state = TOP_JOB_ENDED;
		r->info.exit_status = r->status;
		job_status_words(r->status, r->info.how, sizeof(r->info.how));
	}
	r->finished = 1;
	publish_info(r);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* DIR/NAME.log, or NAME-2.log, ... when taken. */
static int open_log(top_run_t *r)
{
	for (int i = 1; i < 1000; i++) {
		char *path = NULL;
		int fd;

		if ((i == 1 ? asprintf(&path, "%s/%s.log", r->o.dir, r->o.name)
			    : asprintf(&path, "%s/%s-%d.log", r->o.dir, r->o.name, i)) < 0)
			return -ENOMEM;
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			r->log_fd = fd;
			r->log_path = path;
			return 0;
		}
		free(path);
		if (errno != EEXIST) {
			int e = -errno;

			fprintf(stderr, TOP_PROG ": cannot create the job's log in %s: %s\n", r->o.dir,
				strerror(errno));
			return e;
		}
	}
	fprintf(stderr, TOP_PROG ": cannot create the job's log in %s: %s.log to -999.log all exist\n", r->o.dir,
		r->o.name);
	return -EEXIST;
}

int top_run_start(top_run_t **out, const struct session_run_options *o, char **argv)
{
	top_run_t *r = calloc(1, sizeof(*r));
	struct session_options so = {0};
	struct job_spec spec = {.prog = TOP_PROG, .argv = argv, .output_fd = -1, .stdin_null = 1, .tty = -1};
	struct job_options jo = {.prog = TOP_PROG, .command = argv[0], .dir = o->dir, .tty = -1};
	size_t off = 0;
	int err;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->o = *o;
	r->argv = argv;
	r->log_fd = -1;
	r->saved_err = -1;
	r->finish_off = -1;
	r->pid = -1;
	pthread_mutex_init(&r->mu, NULL);
	so.prog = TOP_PROG;
	so.dir = o->dir;
	so.name = o->name;
	so.argv = argv;
	so.leftovers = SESSION_LEFTOVERS_RECOVER;
	so.json_summary = o->json_summary;
	so.keep = &r->o.keep;
	so.flags = &r->o.flags;
	err = session_find_agent(TOP_PROG, &r->agent);
	if (!err && o->metrics) {
		err = session_metrics_option(TOP_PROG, o->metrics, &r->metrics, &so.metrics_remote);
		so.metrics = r->metrics;
	}
	if (!err)
		err = session_new(&r->session, &so);
	if (!err)
		err = open_log(r);
	if (!err) {
		jo.wait_descendants_s = o->wait_descendants_s;
		err = job_new(&r->job, r->session, &jo);
	}
	if (err)
		goto fail;
	job_become_subreaper(TOP_PROG, argv[0]);
	r->info.mode = TOP_MODE_RUN;
	r->info.job_state = TOP_JOB_RUNNING;
	r->info.exit_status = -1;
	for (int i = 0; argv[i] && off < sizeof(r->info.command); i++)
		off += (size_t)snprintf(r->info.command + off, sizeof(r->info.command) - off, "%s%s", i ? " " : "",
					argv[i]);
	snprintf(r->info.source, sizeof(r->info.source), "%s", r->log_path);
	snprintf(r->info.trace, sizeof(r->info.trace), "%s/%s.fss", o->dir, o->name);
	r->info.peak_flops = o->flags.analysis.peak_flops;
	r->info.tokens_per_step = o->flags.analysis.tokens_per_step;
	err = top_board_feed_new(&r->bf, session_board(r->session), &r->info);
	if (err) {
		fprintf(stderr, TOP_PROG ": cannot start the dashboard's feed: %s\n", strerror(-err));
		goto fail;
	}
	top_board_feed_bind(r->bf, &r->inner);
	spec.agent = r->agent;
	spec.dormant = o->dormant;
	spec.no_cupti = o->no_cupti;
	spec.output_fd = r->log_fd;
	err = job_spawn(r->session, &spec, &r->pid, NULL);
	if (err) {
		session_abandon(r->session);
		goto fail;
	}
	err = pthread_create(&r->thread, NULL, session_thread, r);
	if (err) {
		fprintf(stderr, TOP_PROG ": cannot start the session's thread: %s\n", strerror(err));
		kill(-r->pid, SIGTERM);
		err = -err;
		goto fail;
	}
	r->thread_started = 1;
	*out = r;
	return 0;
fail:
	top_run_free(r);
	return err;
}

const char *top_run_log_path(const top_run_t *r)
{
	return r->log_path;
}

static int rcb_quit(void *ctx, int how)
{
	top_run_t *r = ctx;

	if (how != TOP_QUIT_STOP && how != TOP_QUIT_LEAVE)
		return -EINVAL;
	pthread_mutex_lock(&r->mu);
	if (how == TOP_QUIT_STOP) {
		r->stop = 1;
	} else {
		r->left = 1;
		if (!r->ended)
			r->info.job_state = TOP_JOB_DETACHED;
		snprintf(r->info.how, sizeof(r->info.how), "left running, recorded");
		publish_info(r);
	}
	pthread_mutex_unlock(&r->mu);
	return 0;
}

void top_run_bind(top_run_t *r, struct top_feed *feed)
{
	top_feed_forward(feed, r);
	feed->quit = rcb_quit;
}

void top_run_stop(top_run_t *r)
{
	rcb_quit(r, TOP_QUIT_STOP);
}

void top_run_screen_begin(top_run_t *r)
{
	pthread_mutex_lock(&r->mu);
	fflush(stderr);
	r->saved_err = dup(STDERR_FILENO);
	if (r->saved_err >= 0)
		dup2(r->log_fd, STDERR_FILENO);
	pthread_mutex_unlock(&r->mu);
}

void top_run_screen_end(top_run_t *r)
{
	char buf[4096];
	ssize_t n;
	int fd;

	pthread_mutex_lock(&r->mu);
	if (r->saved_err < 0) {
		pthread_mutex_unlock(&r->mu);
		return;
	}
	fflush(stderr);
	dup2(r->saved_err, STDERR_FILENO);
	close(r->saved_err);
	r->saved_err = -1;
	/* What the session said of its end went to the log: say it here too. */
	if (r->finish_off >= 0 && (fd = open(r->log_path, O_RDONLY | O_CLOEXEC)) >= 0) {
		if (lseek(fd, r->finish_off, SEEK_SET) == r->finish_off)
			while ((n = read(fd, buf, sizeof(buf))) > 0)
				if (write(STDERR_FILENO, buf, (size_t)n) < 0)
					break;
		close(fd);
	}
	pthread_mutex_unlock(&r->mu);
}

int top_run_finish(top_run_t *r)
{
	int left, finished;

	pthread_mutex_lock(&r->mu);
	left = r->left;
	finished = r->finished;
	pthread_mutex_unlock(&r->mu);
	if (left && !finished)
		fprintf(stderr,
			TOP_PROG ": the job goes on, recorded (pid %d, its output in %s); the trace will be %s when it "
				 "ends\n",
			(int)r->pid, r->log_path, r->info.trace);
	if (r->thread_started) {
		pthread_join(r->thread, NULL);
		r->thread_started = 0;
	}
	return r->finish_rc ? EXIT_USAGE : job_exit_code(r->status);
}

void top_run_free(top_run_t *r)
{
	if (!r)
		return;
	if (r->thread_started) {
		top_run_stop(r);
		pthread_join(r->thread, NULL);
	}
	top_board_feed_free(r->bf);
	job_free(r->job);
	session_free(r->session);
	if (r->log_fd >= 0)
		close(r->log_fd);
	free(r->log_path);
	free(r->agent);
	free(r->metrics);
	pthread_mutex_destroy(&r->mu);
	free(r);
}
