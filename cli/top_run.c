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
#include "collector/ingest.h"
#include "common/clock.h"
#include "tui/feeds.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOP_PROG "fsdpscope top"
/* The session thread's wait: how late a quit or a reaped process is noticed. */
#define TOP_RUN_POLL_MS 100

struct top_run {
	struct session_run_options o;
	char **argv;
	session_t *session;
	char *agent, *metrics;
	top_board_feed_t *bf;
	struct top_feed inner;
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
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_signal;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

static void describe(int status, char *buf, size_t len)
{
	const char *sig = WIFSIGNALED(status) ? sigabbrev_np(WTERMSIG(status)) : NULL;

	if (WIFEXITED(status))
		snprintf(buf, len, "exited %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status) && sig)
		snprintf(buf, len, "killed by SIG%s", sig);
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "status 0x%x", (unsigned)status);
}

/* Reap what has ended, noting each in the trace. Returns whether children remain. */
static int reap(top_run_t *r, int *leader_done)
{
	for (;;) {
		int status;
		pid_t w = waitpid(-1, &status, WNOHANG);

		if (w == 0)
			return 1;
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return 0;
		}
		if (!session_failed(r->session))
			ingest_note_exit(session_ingest(r->session), w, status);
		if (w == r->pid) {
			r->status = status;
			*leader_done = 1;
		}
	}
}

/* Called with r->mu held: r->info is whole. */
static void publish_info(top_run_t *r)
{
	top_board_feed_set_info(r->bf, &r->info);
}

static void *session_thread(void *arg)
{
	top_run_t *r = arg;
	int leader_done = 0, children = 1;
	int64_t deadline = 0;
	struct session_outcome outcome;

	while (!leader_done || children) {
		int stop;

		session_poll(r->session, TOP_RUN_POLL_MS);
		children = reap(r, &leader_done);
		pthread_mutex_lock(&r->mu);
		stop = (r->stop || top_run_signalled) && !r->stopped;
		if (stop)
			r->stopped = 1;
		pthread_mutex_unlock(&r->mu);
		if (stop)
			kill(-r->pid, SIGTERM);
		if (leader_done && !deadline)
			deadline = clock_mono_ms() + (int64_t)r->o.wait_descendants_s * 1000;
		if (leader_done && children && clock_mono_ms() >= deadline)
			break; /* what CMD left goes on in per-process files, as with run */
		if (leader_done && !r->ended) {
			pthread_mutex_lock(&r->mu);
			r->ended = 1;
			r->info.job_state = r->left ? TOP_JOB_DETACHED : TOP_JOB_ENDED;
			r->info.exit_status = r->status;
			describe(r->status, r->info.how, sizeof(r->info.how));
			publish_info(r);
			pthread_mutex_unlock(&r->mu);
		}
	}
	/* The final flushes of the agents, bounded as run's. */
	{
		int64_t end = clock_mono_ms() + (int64_t)r->o.flush_timeout_s * 1000;

		session_poll(r->session, 0);
		while (session_open_connections(r->session) > 0 && clock_mono_ms() < end)
			session_poll(r->session, TOP_RUN_POLL_MS);
	}
	pthread_mutex_lock(&r->mu);
	r->finish_off = r->saved_err >= 0 ? lseek(r->log_fd, 0, SEEK_END) : -1;
	r->finish_rc = session_finish(r->session, children, NULL, NULL, &outcome);
	if (r->finish_rc == 0 && outcome.trace_path)
		snprintf(r->info.trace, sizeof(r->info.trace), "%s", outcome.trace_path);
	r->ended = 1;
	if (r->info.job_state == TOP_JOB_RUNNING) {
		r->info.job_state = TOP_JOB_ENDED;
		r->info.exit_status = r->status;
		describe(r->status, r->info.how, sizeof(r->info.how));
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
	struct session_job job = {0};
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
	if (err)
		goto fail;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		fprintf(stderr,
			TOP_PROG ": warning: cannot become the job's subreaper (%s): processes that outlive %s "
				 "will not be waited for\n",
			strerror(errno), argv[0]);
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
	job.prog = TOP_PROG;
	job.argv = argv;
	job.agent = r->agent;
	job.dormant = o->dormant;
	job.no_cupti = o->no_cupti;
	job.output_fd = r->log_fd;
	job.stdin_null = 1;
	err = session_spawn(r->session, &job, &r->pid);
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

static const struct live_view *rcb_acquire(void *ctx)
{
	top_run_t *r = ctx;

	return r->inner.acquire(r->inner.ctx);
}

static void rcb_release(void *ctx, const struct live_view *v)
{
	top_run_t *r = ctx;

	r->inner.release(r->inner.ctx, v);
}

static int rcb_wait(void *ctx, int timeout_ms)
{
	top_run_t *r = ctx;

	return r->inner.wait(r->inner.ctx, timeout_ms);
}

static int rcb_fd(void *ctx)
{
	top_run_t *r = ctx;

	return r->inner.fd(r->inner.ctx);
}

static void rcb_info(void *ctx, struct top_info *out)
{
	top_run_t *r = ctx;

	r->inner.info(r->inner.ctx, out);
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
	memset(feed, 0, sizeof(*feed));
	feed->ctx = r;
	feed->acquire = rcb_acquire;
	feed->release = rcb_release;
	feed->wait = rcb_wait;
	feed->fd = rcb_fd;
	feed->info = rcb_info;
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
	if (r->finish_rc)
		return EXIT_USAGE;
	if (WIFEXITED(r->status))
		return WEXITSTATUS(r->status);
	if (WIFSIGNALED(r->status))
		return 128 + WTERMSIG(r->status);
	return 1;
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
	session_free(r->session);
	if (r->log_fd >= 0)
		close(r->log_fd);
	free(r->log_path);
	free(r->agent);
	free(r->metrics);
	pthread_mutex_destroy(&r->mu);
	free(r);
}
