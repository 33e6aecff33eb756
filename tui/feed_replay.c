/*
 * feed_replay.c - `fsdpscope top TRACE...`: a recorded trace replayed into
 * the dashboard (tui/feeds.h).
 *
 * A thread of the feed runs a session (collector/session.h) whose input is
 * the trace read as `lint` reads it (one file through the parser, several
 * through the merge that aligns their clocks): its view, analyzer and live
 * state are fed exactly as a live session's (the same pipeline), so what
 * the replay shows at the end is what the session showed at the end, and
 * what lint says. A view is published when the session says a job step is
 * complete - every rank that has collectives has completed one more -
 * diagnosed as a session diagnoses (the analyzer's snapshot and the rules,
 * the session's diagnosis callback); then the thread waits: for the
 * step key (--step-keys: the dashboard's `n`, deterministic), for the time
 * the trace took between the two steps divided by --speed, or not at all
 * (--speed 0). The board between the thread and the dashboard is the same
 * board a session publishes on: a slow dashboard only misses views.
 */
#include "tui/feeds.h"

#include "collector/session.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/trace_format.h"
#include "collector/kineto_input.h"
#include "common/trace_parser.h"
#include "rules/diagnosis.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The longest pause between two steps, whatever --speed says: a trace with
 * a long idle stretch still moves. */
#define REPLAY_PAUSE_MAX_NS (10ull * 1000000000ull)
/* --speed 0: a view at most this often (no screen shows more), each one diagnosed. */
#define REPLAY_FAST_VIEW_MS 50
/* Stops the read from a callback (never a value trace_read returns itself). */
#define REPLAY_STOP 1000001

struct top_replay_feed {
	struct top_feed inner; /* bf's callbacks, first: top_feed_forward delegates to them */
	top_board_feed_t *bf;
	live_board_t *board;
	struct top_replay_options o;
	struct analysis_options adef;
	struct rule_config rdef;
	const char *const *paths;
	size_t npaths;
	fss_session_t *session; /* the traces as its input, a live state, the diagnosis below */
	uint64_t job_step;	/* steps every rank with collectives has completed */
	uint64_t paced_ns;	/* the session's trace time at the last view */
	int64_t view_ms;	/* CLOCK_MONOTONIC of the last view (--speed 0) */
	int error;		/* the read failed (out of memory): said and stopped */

	pthread_t thread;
	int thread_started;
	pthread_mutex_t mu; /* guards what follows */
	pthread_cond_t cv;
	uint64_t permits; /* step keys not yet used */
	uint64_t views;	  /* views published */
	int unpaced;	  /* a view was published and no step key has moved past it yet */
	int done;	  /* the thread has published its last view (or failed) */
	int stopping;
	struct top_info info;
};
static_assert(offsetof(struct top_replay_feed, inner) == 0, "top_feed_forward needs the inner feed first");

/* The session's diagnosis callback: result r into the live state, as a
 * live session's. */
static int diagnose_result(void *ctx, const struct analysis_result *r, live_t *live, int final)
{
	top_replay_feed_t *f = ctx;
	struct live_finding found[LIVE_FINDINGS_MAX];
	size_t n;
	int rc = diagnosis_from_result(r, f->o.rules, NULL, found, LIVE_FINDINGS_MAX, &n);

	if (rc == 0)
		live_set_diagnosis(live, r, found, n);
	return rc;
}

/* The view of the live state and what the feed says of it, together: a
 * step() that sees the new view sees its info too. */
static int publish(top_replay_feed_t *f, int job_state, const char *how, uint64_t steps_total)
{
	int rc;

	/* The info first: whoever sees the view sees its info. The view is put
	 * on the board and counted under one hold of the lock, so that a step()
	 * that sees the count change finds this view on the board, never the
	 * one before it counted late. */
	pthread_mutex_lock(&f->mu);
	f->info.replay_step = f->job_step;
	f->info.job_state = job_state;
	if (how)
		snprintf(f->info.how, sizeof(f->info.how), "%s", how);
	if (steps_total)
		f->info.replay_steps = steps_total;
	top_board_feed_set_info(f->bf, &f->info);
	rc = fss_session_publish(f->session);
	f->views++;
	f->unpaced = 1;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	return rc;
}

/* After a view: wait as the mode says. Returns REPLAY_STOP when the feed is being freed. */
static int pace(top_replay_feed_t *f)
{
	uint64_t trace_ns = fss_session_trace_ns(f->session);
	int stop;

	pthread_mutex_lock(&f->mu);
	if (f->o.step_keys) {
		while (!f->permits && !f->stopping)
			pthread_cond_wait(&f->cv, &f->mu);
		if (f->permits) {
			f->permits--;
			f->unpaced = 0;
		}
	} else if (f->o.speed > 0 && trace_ns > f->paced_ns) {
		double d = (double)(trace_ns - f->paced_ns) / f->o.speed;
		uint64_t ns = d > (double)REPLAY_PAUSE_MAX_NS ? REPLAY_PAUSE_MAX_NS : (uint64_t)d;
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ns += (uint64_t)ts.tv_nsec;
		ts.tv_sec += (time_t)(ns / 1000000000ull);
		ts.tv_nsec = (long)(ns % 1000000000ull);
		while (!f->stopping && pthread_cond_timedwait(&f->cv, &f->mu, &ts) != ETIMEDOUT)
			;
	}
	f->paced_ns = trace_ns;
	stop = f->stopping;
	pthread_mutex_unlock(&f->mu);
	return stop ? REPLAY_STOP : 0;
}

/* The session's job step: a view, unless the options say not yet. */
static int on_job_step(void *ctx, uint64_t job_step)
{
	top_replay_feed_t *f = ctx;
	int rc;

	f->job_step = job_step;
	if (f->job_step < f->o.first_step)
		return 0;
	if (f->o.only_end && !f->o.first_step)
		return 0;
	/* As fast as it reads: a diagnosis per step would cost more than the
	 * reading, for views no one could see; the step counter still shows each
	 * view's step. */
	if (!f->o.step_keys && f->o.speed == 0 && !f->o.only_end) {
		int64_t now = clock_mono_ms();

		if (f->views && now - f->view_ms < REPLAY_FAST_VIEW_MS)
			return 0;
		f->view_ms = now;
	}
	rc = fss_session_diagnose(f->session);
	if (rc == 0)
		rc = publish(f, TOP_JOB_RUNNING, NULL, 0);
	if (rc)
		return rc;
	/* --once --step N: the view at step N is the one. */
	return f->o.only_end ? REPLAY_STOP : pace(f);
}

/* Every record, after the session's pipeline took it: the feed being
 * freed stops the read. */
static int replay_on_record(void *ctx, const struct source *src, const struct fss_record_head *rec)
{
	top_replay_feed_t *f = ctx;
	int stop;

	(void)src;
	(void)rec;
	pthread_mutex_lock(&f->mu);
	stop = f->stopping;
	pthread_mutex_unlock(&f->mu);
	return stop ? REPLAY_STOP : 0;
}

/* The end of the trace: the finished analysis and the rules, as lint says them. */
static int replay_finish(top_replay_feed_t *f, int read_rc)
{
	struct analysis_result *r = NULL;
	int rc;

	if (read_rc && read_rc != FSS_E_TRUNCATED && read_rc != FSS_E_CORRUPT)
		return read_rc;
	/* The step key shows the end too (unless the key that read to here is owed a view). */
	if (f->o.step_keys && f->unpaced && pace(f))
		return REPLAY_STOP;
	rc = fss_session_finish_analysis(f->session, read_rc, &r);
	if (rc == 0)
		rc = fss_session_diagnose_result(f->session, r);
	analysis_result_free(r);
	if (rc)
		return rc;
	f->job_step = fss_session_job_step(f->session);
	if (f->o.first_step > (f->job_step ? f->job_step : 1)) {
		char how[160];

		/* --step past the end: said, not a view of another step */
		snprintf(how, sizeof how, "--step %llu: the trace has steps 1 to %llu",
			 (unsigned long long)f->o.first_step, (unsigned long long)(f->job_step ? f->job_step : 1));
		top_board_feed_fail(f->bf, -ERANGE, how);
		return REPLAY_STOP;
	}
	return publish(f, TOP_JOB_ENDED, "the trace ends here", f->job_step ? f->job_step : 1);
}

static void *replay_thread(void *arg)
{
	top_replay_feed_t *f = arg;
	int rc = fss_session_read(f->session, 0);

	if (rc != REPLAY_STOP)
		rc = replay_finish(f, rc);
	if (rc && rc != REPLAY_STOP) {
		char how[160];

		snprintf(how, sizeof(how), "the replay stopped: %s", fss_strerror(rc));
		top_board_feed_fail(f->bf, rc, how);
	}
	pthread_mutex_lock(&f->mu);
	f->done = 1;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

/* A file that is not a trace is said before the dashboard starts. */
static int check_trace(const char *path, char *err, size_t errlen)
{
	struct fss_file_header h;
	trace_parser_t *p;
	struct trace_parser_ops ops = {0};
	ssize_t n;
	int fd, rc;

	if (kineto_input_sniff(path))
		return 0; /* a PyTorch profiler trace: its own input reads it (and says what is wrong with it) */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	n = read(fd, &h, sizeof(h));
	close(fd);
	if (n < (ssize_t)sizeof(h)) {
		snprintf(err, errlen, "%s: not a trace (%s)", path,
			 n < 0 ? strerror(errno) : "shorter than a trace's header");
		return FSS_E_NOT_TRACE;
	}
	p = trace_parser_new(&ops, NULL);
	if (!p)
		return -ENOMEM;
	rc = trace_parser_feed(p, &h, sizeof(h));
	if (rc)
		snprintf(err, errlen, "%s: %s", path,
			 trace_parser_error(p)[0] ? trace_parser_error(p) : fss_strerror(rc));
	trace_parser_free(p);
	return rc;
}

static int cb_step(void *ctx)
{
	top_replay_feed_t *f = ctx;
	uint64_t views;

	pthread_mutex_lock(&f->mu);
	if (f->done) {
		pthread_mutex_unlock(&f->mu);
		return -ENODATA;
	}
	views = f->views;
	f->permits++;
	pthread_cond_broadcast(&f->cv);
	/* The next view is on the board when this returns: a test reads it at once. */
	while (f->views == views && !f->done)
		pthread_cond_wait(&f->cv, &f->mu);
	views = f->views - views;
	pthread_mutex_unlock(&f->mu);
	return views ? 0 : -ENODATA;
}

/* The session the thread runs: the traces as its input, a live state on
 * the feed's board, the feed's diagnosis and step callbacks. */
static int session_open(top_replay_feed_t *f, char *err, size_t errlen)
{
	struct fss_session_tool tool = {.ctx = f, .on_record = replay_on_record, .on_job_step = on_job_step};
	struct fss_session_options so = {
	    .analysis = f->o.analysis, .live = 1, .diagnose = diagnose_result, .diagnose_ctx = f, .tool = &tool};
	int rc = fss_session_new(&f->session, &so);

	if (rc)
		return rc;
	f->board = fss_session_board(f->session);
	return fss_session_open_files(f->session, f->paths, f->npaths, err, errlen);
}

int top_replay_feed_new(top_replay_feed_t **out, const char *const *paths, size_t n, const struct top_replay_options *o,
			char *err, size_t errlen)
{
	top_replay_feed_t *f;
	size_t off = 0;
	int rc;

	*out = NULL;
	if (errlen)
		err[0] = '\0';
	if (!n) {
		snprintf(err, errlen, "no trace to replay");
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		rc = check_trace(paths[i], err, errlen);
		if (rc)
			return rc;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->o = *o;
	f->paths = paths;
	f->npaths = n;
	analysis_options_init(&f->adef);
	rule_config_init(&f->rdef);
	if (!f->o.analysis)
		f->o.analysis = &f->adef;
	if (!f->o.rules)
		f->o.rules = &f->rdef;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	f->info.mode = TOP_MODE_REPLAY;
	f->info.job_state = TOP_JOB_RUNNING;
	f->info.exit_status = -1;
	f->info.replay_stepping = o->step_keys;
	for (size_t i = 0; i < n && off < sizeof(f->info.source); i++)
		off += (size_t)snprintf(f->info.source + off, sizeof(f->info.source) - off, "%s%s", i ? " " : "",
					paths[i]);
	rc = session_open(f, err, errlen);
	if (rc)
		goto fail;
	rc = top_board_feed_new(&f->bf, f->board, &f->info);
	if (rc)
		goto fail;
	top_board_feed_bind(f->bf, &f->inner);
	rc = pthread_create(&f->thread, NULL, replay_thread, f);
	if (rc) {
		rc = -rc;
		goto fail;
	}
	f->thread_started = 1;
	*out = f;
	return 0;
fail:
	if (errlen && !err[0])
		snprintf(err, errlen, "%s", fss_strerror(rc));
	top_replay_feed_free(f);
	return rc;
}

void top_replay_feed_bind(top_replay_feed_t *f, struct top_feed *feed)
{
	top_feed_forward(feed, f);
	feed->step = f->o.step_keys ? cb_step : NULL;
}

void top_replay_feed_free(top_replay_feed_t *f)
{
	if (!f)
		return;
	if (f->thread_started) {
		pthread_mutex_lock(&f->mu);
		f->stopping = 1;
		pthread_cond_broadcast(&f->cv);
		pthread_mutex_unlock(&f->mu);
		pthread_join(f->thread, NULL);
	}
	top_board_feed_free(f->bf);
	fss_session_free(f->session); /* its board with it */
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
}
