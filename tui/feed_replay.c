/*
 * feed_replay.c - `fsdpscope top TRACE...`: a recorded trace replayed into
 * the dashboard (tui/feeds.h).
 *
 * A thread of the feed reads the trace as `lint` does (one file through the
 * parser, several through the merge that aligns their clocks) and gives
 * every record to a source table, an analyzer and a live state exactly as
 * a session's ingest callback does (cli/session.c): so what the replay
 * shows at the end is what the session showed at the end, and what lint
 * says. A view is published when a step is complete - every rank that has
 * collectives has completed one more - diagnosed as a session diagnoses
 * (the analyzer's snapshot and the rules); then the thread waits: for the
 * step key (--step-keys: the dashboard's `n`, deterministic), for the time
 * the trace took between the two steps divided by --speed, or not at all
 * (--speed 0). The board between the thread and the dashboard is the same
 * board a session publishes on: a slow dashboard only misses views.
 */
#include "tui/feeds.h"

#include "collector/analyze.h"
#include "collector/merge.h"
#include "collector/source.h"
#include "common/error.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"
#include "rules/diagnosis.h"

#include <assert.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
	merge_t *merge; /* several traces */
	sources_t *sources;
	analyzer_t *an;
	live_t *live;
	uint32_t keep_flags, keep_steps;
	/* per trace source: steps the analyzer completed, and whether it has collectives */
	uint64_t *steps;
	uint8_t *has_coll;
	size_t nsrc;
	int step_seen;	   /* a step callback since the last check */
	uint64_t job_step; /* steps every rank with collectives has completed */
	uint64_t trace_ns; /* the latest host time read (pacing) */
	uint64_t paced_ns; /* trace_ns at the last view */
	int64_t view_ms;   /* CLOCK_MONOTONIC of the last view (--speed 0) */
	int error;	   /* the read failed (out of memory): said and stopped */

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

static void on_step(void *ctx, const struct analysis_step_info *step)
{
	top_replay_feed_t *f = ctx;

	live_on_step(f->live, step);
	if (step->source >= f->nsrc)
		return; /* a source we have no record of: not a rank to wait for */
	f->steps[step->source]++;
	f->step_seen = 1;
}

/* Steps every rank with collectives has completed. */
static uint64_t job_steps(const top_replay_feed_t *f)
{
	uint64_t min = UINT64_MAX;

	for (size_t i = 0; i < f->nsrc; i++)
		if (f->has_coll[i] && f->steps[i] < min)
			min = f->steps[i];
	return min == UINT64_MAX ? 0 : min;
}

static int grow(top_replay_feed_t *f, uint32_t source)
{
	size_t n = f->nsrc ? f->nsrc : 16;
	uint64_t *s;
	uint8_t *c;

	if (source < f->nsrc)
		return 0;
	if (source > (1u << 24))
		return 0; /* no trace has that many processes: not tracked, never waited for */
	while (n <= source)
		n *= 2;
	s = realloc(f->steps, n * sizeof(*s));
	if (!s)
		return -ENOMEM;
	f->steps = s;
	c = realloc(f->has_coll, n);
	if (!c)
		return -ENOMEM;
	f->has_coll = c;
	memset(f->steps + f->nsrc, 0, (n - f->nsrc) * sizeof(*s));
	memset(f->has_coll + f->nsrc, 0, n - f->nsrc);
	f->nsrc = n;
	return 0;
}

/* The diagnosis of result r into the live state, as a session's. */
static int diagnose_result(top_replay_feed_t *f, const struct analysis_result *r)
{
	struct live_finding found[LIVE_FINDINGS_MAX];
	size_t n;
	int rc = diagnosis_from_result(r, f->o.rules, NULL, found, LIVE_FINDINGS_MAX, &n);

	if (rc == 0)
		live_set_diagnosis(f->live, r, found, n);
	return rc;
}

static int diagnose_snapshot(top_replay_feed_t *f)
{
	struct analysis_result *r = NULL;
	int rc = analyzer_snapshot(f->an, &r);

	if (rc == 0)
		rc = diagnose_result(f, r);
	analysis_result_free(r);
	return rc;
}

/* The view of the live state and what the feed says of it, together: a
 * step() that sees the new view sees its info too. */
static int publish(top_replay_feed_t *f, int job_state, const char *how, uint64_t steps_total)
{
	int rc;

	/* The info first: whoever sees the view sees its info. */
	pthread_mutex_lock(&f->mu);
	f->info.replay_step = f->job_step;
	f->info.job_state = job_state;
	if (how)
		snprintf(f->info.how, sizeof(f->info.how), "%s", how);
	if (steps_total)
		f->info.replay_steps = steps_total;
	top_board_feed_set_info(f->bf, &f->info);
	pthread_mutex_unlock(&f->mu);
	rc = live_publish(f->live, f->board);
	pthread_mutex_lock(&f->mu);
	f->views++;
	f->unpaced = 1;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	return rc;
}

/* After a view: wait as the mode says. Returns REPLAY_STOP when the feed is being freed. */
static int pace(top_replay_feed_t *f)
{
	int stop;

	pthread_mutex_lock(&f->mu);
	if (f->o.step_keys) {
		while (!f->permits && !f->stopping)
			pthread_cond_wait(&f->cv, &f->mu);
		if (f->permits) {
			f->permits--;
			f->unpaced = 0;
		}
	} else if (f->o.speed > 0 && f->trace_ns > f->paced_ns) {
		double d = (double)(f->trace_ns - f->paced_ns) / f->o.speed;
		uint64_t ns = d > (double)REPLAY_PAUSE_MAX_NS ? REPLAY_PAUSE_MAX_NS : (uint64_t)d;
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ns += (uint64_t)ts.tv_nsec;
		ts.tv_sec += (time_t)(ns / 1000000000ull);
		ts.tv_nsec = (long)(ns % 1000000000ull);
		while (!f->stopping && pthread_cond_timedwait(&f->cv, &f->mu, &ts) != ETIMEDOUT)
			;
	}
	f->paced_ns = f->trace_ns;
	stop = f->stopping;
	pthread_mutex_unlock(&f->mu);
	return stop ? REPLAY_STOP : 0;
}

/* A step completed: a view, unless the options say not yet. */
static int on_job_step(top_replay_feed_t *f)
{
	int rc;

	if (f->job_step < f->o.first_step)
		return 0;
	if (f->o.only_end && !f->o.first_step)
		return 0;
	/* As fast as it reads: a diagnosis per step would cost more than the
	 * reading, for views no one could see; the step counter still shows each
	 * view's step. */
	if (!f->o.step_keys && f->o.speed == 0 && !f->o.only_end) {
		struct timespec ts;
		int64_t now;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
		if (f->views && now - f->view_ms < REPLAY_FAST_VIEW_MS)
			return 0;
		f->view_ms = now;
	}
	rc = diagnose_snapshot(f);
	if (rc == 0)
		rc = publish(f, TOP_JOB_RUNNING, NULL, 0);
	if (rc)
		return rc;
	/* --once --step N: the view at step N is the one. */
	return f->o.only_end ? REPLAY_STOP : pace(f);
}

static int replay_on_header(void *ctx, const struct fss_file_header *h)
{
	top_replay_feed_t *f = ctx;

	/* As analyze_traces: a trace that kept part of its steps makes the reading partial. */
	f->keep_flags |= h->flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY);
	if (h->keep_steps && (!f->keep_steps || h->keep_steps < f->keep_steps))
		f->keep_steps = h->keep_steps;
	analyzer_set_keep(f->an, f->keep_flags, f->keep_steps);
	return 0;
}

static int replay_on_record(void *ctx, const struct fss_record_head *rec)
{
	top_replay_feed_t *f = ctx;
	struct source *src;
	int rc;

	pthread_mutex_lock(&f->mu);
	rc = f->stopping;
	pthread_mutex_unlock(&f->mu);
	if (rc)
		return REPLAY_STOP;
	rc = sources_feed(f->sources, rec);
	if (rc)
		return rc;
	src = rec->source == FSS_SOURCE_NONE ? NULL : sources_find(f->sources, rec->source);
	if (src && grow(f, rec->source))
		return -ENOMEM;
	if (src && rec->type == FSS_REC_COLLECTIVE && rec->source < f->nsrc)
		f->has_coll[rec->source] = 1;
	if (src && src->last_ns > f->trace_ns)
		f->trace_ns = src->last_ns;
	rc = analyzer_feed(f->an, rec);
	if (rc)
		return rc;
	rc = live_on_record(f->live, rec, src);
	if (rc)
		return rc;
	if (f->step_seen) {
		uint64_t k = job_steps(f);

		f->step_seen = 0;
		/* One view per completed step, even when a burst completes several. */
		while (f->job_step < k) {
			f->job_step++;
			rc = on_job_step(f);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* The end of the trace: the finished analysis and the rules, as lint says them. */
static int replay_finish(top_replay_feed_t *f, int read_rc)
{
	struct analysis_result *r = NULL;
	int rc;

	if (read_rc == FSS_E_TRUNCATED || read_rc == FSS_E_CORRUPT)
		analyzer_set_truncated(f->an);
	else if (read_rc)
		return read_rc;
	/* The step key shows the end too (unless the key that read to here is owed a view). */
	if (f->o.step_keys && f->unpaced && pace(f))
		return REPLAY_STOP;
	rc = analyzer_finish(f->an, &r);
	if (rc == 0)
		rc = diagnose_result(f, r);
	analysis_result_free(r);
	if (rc)
		return rc;
	f->job_step = job_steps(f);
	return publish(f, TOP_JOB_ENDED, "the trace ends here", f->job_step ? f->job_step : 1);
}

static void *replay_thread(void *arg)
{
	top_replay_feed_t *f = arg;
	struct trace_parser_ops ops = {.on_header = replay_on_header, .on_record = replay_on_record};
	int rc;

	if (f->merge)
		rc = merge_read(f->merge, &ops, f);
	else
		rc = trace_read(f->paths[0], &ops, f, NULL);
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
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

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
	if (n > 1) {
		rc = merge_open(&f->merge, paths, n, err, errlen);
		if (rc)
			goto fail;
	}
	rc = -ENOMEM;
	f->sources = sources_new(NULL, NULL);
	if (!f->sources || analyzer_new(&f->an, f->o.analysis) || live_new(&f->live) || live_board_new(&f->board))
		goto fail;
	analyzer_on_step(f->an, on_step, f);
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
	if (f->board)
		live_board_close(f->board);
	live_board_free(f->board);
	live_free(f->live);
	analyzer_free(f->an);
	sources_free(f->sources);
	merge_free(f->merge);
	free(f->steps);
	free(f->has_coll);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
}
