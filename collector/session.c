/*
 * session.c - the one place a trace is processed (collector/session.h).
 *
 * The view's callbacks and the pipeline after it are the session's; the
 * inputs (session_files.c, session_ingest.c) only bring records. An ingest
 * input is tolerant: a failure of the analysis or of the live state stops
 * that consumer and the trace goes on (what a session is for); a file input
 * stops at the first error, which its read returns.
 */
#include "collector/session.h"

#include "collector/session_internal.h"
#include "collector/timeline.h"
#include "common/clock.h"
#include "common/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Readers get a new view at most this often (after steps only). */
#define SESSION_PUBLISH_EVERY_MS 100
/* A diagnosis of what the analyzer holds (a snapshot and the rules): its
 * cost follows the analyzer's state, not the trace's length. */
#define SESSION_DIAGNOSE_EVERY_MS 1000
/* No trace has that many processes: a source past it is not a rank to wait for. */
#define SESSION_JOB_SOURCES_MAX (1u << 24)

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A consumer failed: stop it (an ingest input) or stop the input (files). */
static int consumer_failed(fss_session_t *s, int *flag, int err)
{
	if (!s->tolerant)
		return err;
	if (!*flag)
		*flag = err;
	return 0;
}

/* ---- the view's callbacks --------------------------------------------------- */

static int timeline_wanted(const fss_session_t *s)
{
	return s->tl && !s->analysis_error;
}

static int view_on_record(void *ctx, struct source *src, const struct fss_record_head *rec)
{
	fss_session_t *s = ctx;
	int rc = timeline_wanted(s) ? timeline_view_ops()->on_record(s->tl, src, rec) : 0;

	return rc < 0 ? consumer_failed(s, &s->analysis_error, rc) : rc;
}

static int view_on_nvtx_range(void *ctx, struct source *src, const struct fss_rec_nvtx_range *range, const char *domain,
			      const char *name)
{
	fss_session_t *s = ctx;
	int rc = timeline_wanted(s) ? timeline_view_ops()->on_nvtx_range(s->tl, src, range, domain, name) : 0;

	if (rc < 0)
		rc = consumer_failed(s, &s->analysis_error, rc);
	if (!rc && s->tool.on_nvtx_range)
		rc = s->tool.on_nvtx_range(s->tool.ctx, src, range, domain, name);
	return rc;
}

static int view_on_comm(void *ctx, struct source *src, size_t index)
{
	fss_session_t *s = ctx;
	int rc = timeline_wanted(s) ? timeline_view_ops()->on_comm(s->tl, src, index) : 0;

	return rc < 0 ? consumer_failed(s, &s->analysis_error, rc) : rc;
}

static const struct source_ops session_view_ops = {
    .on_record = view_on_record,
    .on_nvtx_range = view_on_nvtx_range,
    .on_comm = view_on_comm,
};

/* ---- job steps ---------------------------------------------------------------- */

/* Room for source `source` in the per-source step counts. */
static int job_grow(fss_session_t *s, uint32_t source)
{
	size_t n = s->nsrc ? s->nsrc : 16;
	uint64_t *steps;
	uint8_t *coll;

	if (source < s->nsrc || source > SESSION_JOB_SOURCES_MAX)
		return 0;
	while (n <= source)
		n *= 2;
	steps = realloc(s->src_steps, n * sizeof(*steps));
	if (!steps)
		return -ENOMEM;
	s->src_steps = steps;
	coll = realloc(s->has_coll, n);
	if (!coll)
		return -ENOMEM;
	s->has_coll = coll;
	memset(s->src_steps + s->nsrc, 0, (n - s->nsrc) * sizeof(*steps));
	memset(s->has_coll + s->nsrc, 0, n - s->nsrc);
	s->nsrc = n;
	return 0;
}

/* Steps every rank with collectives has completed. */
static uint64_t job_steps(const fss_session_t *s)
{
	uint64_t min = UINT64_MAX;

	for (size_t i = 0; i < s->nsrc; i++)
		if (s->has_coll[i] && s->src_steps[i] < min)
			min = s->src_steps[i];
	return min == UINT64_MAX ? 0 : min;
}

/* Before the analyzer: the record's source is tracked for the job steps. */
static int job_note_record(fss_session_t *s, const struct fss_record_head *rec, const struct source *src)
{
	if (!src)
		return 0;
	if (job_grow(s, rec->source))
		return -ENOMEM;
	if (rec->type == FSS_REC_COLLECTIVE && rec->source < s->nsrc)
		s->has_coll[rec->source] = 1;
	if (src->last_ns > s->trace_ns)
		s->trace_ns = src->last_ns;
	return 0;
}

/* After a record: one on_job_step per step the job completed, even when a
 * burst completes several. */
static int job_check(fss_session_t *s)
{
	uint64_t k;
	int rc = 0;

	if (!s->step_seen)
		return 0;
	s->step_seen = 0;
	k = job_steps(s);
	while (!rc && s->job_step < k) {
		s->job_step++;
		if (s->tool.on_job_step)
			rc = s->tool.on_job_step(s->tool.ctx, s->job_step);
	}
	return rc;
}

/* The analyzer's step callback: every completed step of every rank. */
static void on_step(void *ctx, const struct analysis_step_info *step)
{
	fss_session_t *s = ctx;

	s->steps++;
	if (s->live)
		live_on_step(s->live, step);
	if (s->keeper)
		keeper_on_step(s->keeper, step);
	if (s->tool.on_step)
		s->tool.on_step(s->tool.ctx, step);
	if (step->source >= s->nsrc)
		return; /* a source with no record tracked: not a rank to wait for */
	s->src_steps[step->source]++;
	s->step_seen = 1;
}

/* ---- the pipeline ----------------------------------------------------------------- */

static int tool_record(fss_session_t *s, const struct fss_record_head *rec, const struct source *src)
{
	const struct fss_session_tool *t = &s->tool;

	switch (rec->type) {
	case FSS_REC_PROCESS_HELLO:
		if (t->on_hello)
			return t->on_hello(t->ctx, src, (const void *)rec);
		break;
	case FSS_REC_COLLECTIVE:
		if (t->on_collective)
			return t->on_collective(t->ctx, src, (const void *)rec);
		break;
	case FSS_REC_GPU_INTERVAL:
		if (t->on_kernel)
			return t->on_kernel(t->ctx, src, (const void *)rec);
		break;
	case FSS_REC_PROCESS_END:
	case FSS_REC_PROCESS_EXIT:
		if (t->on_source_end)
			return t->on_source_end(t->ctx, src, rec);
		break;
	default:
		break;
	}
	return t->on_record ? t->on_record(t->ctx, src, rec) : 0;
}

/* Before the keeper: the analyzer and the live state. */
static int analyse_record(fss_session_t *s, const struct fss_record_head *rec, const struct source *src)
{
	int rc = job_note_record(s, rec, src);

	if (rc && (rc = consumer_failed(s, &s->job_error, rc)))
		return rc;
	if (s->an && !s->analysis_error) {
		rc = analyzer_feed(s->an, rec);
		if (rc && (rc = consumer_failed(s, &s->analysis_error, rc)))
			return rc;
	}
	if (s->live && !s->live_error) {
		rc = live_on_record(s->live, rec, src);
		if (rc < 0 && (rc = consumer_failed(s, &s->live_error, rc)))
			return rc;
	}
	return 0;
}

/* After the keeper: the tool and the job steps. */
static int tool_and_steps(fss_session_t *s, const struct fss_record_head *rec, const struct source *src)
{
	int rc = tool_record(s, rec, src);

	if (rc)
		return rc;
	return s->job_error ? 0 : job_check(s);
}

int fss_session_take(fss_session_t *s, const struct fss_record_head *rec)
{
	const struct source *src;
	int rc = sources_feed(s->view, rec);

	if (rc)
		return rc;
	src = rec->source == FSS_SOURCE_NONE ? NULL : sources_find(s->view, rec->source);
	rc = analyse_record(s, rec, src);
	return rc ? rc : tool_and_steps(s, rec, src);
}

int fss_session_tool_take(fss_session_t *s, const struct fss_record_head *rec)
{
	return tool_record(s, rec, rec->source == FSS_SOURCE_NONE ? NULL : sources_find(s->view, rec->source));
}

int fss_session_tool_header(fss_session_t *s, const struct fss_file_header *h)
{
	return s->tool.on_header ? s->tool.on_header(s->tool.ctx, h) : 0;
}

int fss_session_after_view(fss_session_t *s, const struct fss_record_head *rec, const struct source *src,
			   int *leave_out)
{
	int rc = analyse_record(s, rec, src);

	*leave_out = 0;
	if (rc)
		return rc;
	/* After the analyzer: the step the record completes is known to the
	 * keeper when it places the record (collector/keep.h). */
	if (s->keeper) {
		rc = keeper_on_record(s->keeper, rec, src);
		if (rc < 0)
			return rc;
		*leave_out = rc == 1;
	}
	return tool_and_steps(s, rec, src);
}

int fss_session_take_header(fss_session_t *s, const struct fss_file_header *h)
{
	/* As analyze_traces: a trace that kept part of its steps makes the reading partial. */
	s->keep_flags |= h->flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY);
	if (h->keep_steps && (!s->keep_steps || h->keep_steps < s->keep_steps))
		s->keep_steps = h->keep_steps;
	if (s->an)
		analyzer_set_keep(s->an, s->keep_flags, s->keep_steps);
	return s->tool.on_header ? s->tool.on_header(s->tool.ctx, h) : 0;
}

/* ---- life cycle ------------------------------------------------------------------ */

int fss_session_new(fss_session_t **out, const struct fss_session_options *o)
{
	fss_session_t *s = calloc(1, sizeof(*s));
	int err = -ENOMEM;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->diagnose = o->diagnose;
	s->diagnose_ctx = o->diagnose_ctx;
	s->read_flags = o->read_flags;
	if (o->tool)
		s->tool = *o->tool;
	s->view = sources_new(&session_view_ops, s);
	if (!s->view)
		goto fail;
	if (s->tool.on_view)
		s->tool.on_view(s->tool.ctx, s->view);
	if (!o->view_only) {
		err = analyzer_new_on(&s->an, o->analysis, s->view);
		if (err)
			goto fail;
		s->tl = analyzer_timeline(s->an);
		analyzer_on_step(s->an, on_step, s);
	}
	if (o->live) {
		err = live_new(&s->live);
		if (!err)
			err = live_board_new(&s->board);
		if (err)
			goto fail;
	}
	s->last_diagnosis_ms = clock_mono_ms();
	*out = s;
	return 0;
fail:
	fss_session_free(s);
	return err;
}

void fss_session_free(fss_session_t *s)
{
	if (!s)
		return;
	/* The input first: an ingest that was not finished ends now, through
	 * the pipeline, which is all still there. */
	if (s->input_ops && s->input_ops->free)
		s->input_ops->free(s->input);
	keeper_free(s->keeper);
	if (s->board)
		live_board_close(s->board);
	live_board_free(s->board);
	live_free(s->live);
	analyzer_free(s->an);
	sources_free(s->view);
	free(s->src_steps);
	free(s->has_coll);
	free(s);
}

int fss_session_set_input(fss_session_t *s, const struct fss_session_input *ops, void *impl)
{
	if (s->input_ops)
		return -EBUSY;
	s->input_ops = ops;
	s->input = impl;
	return 0;
}

int fss_session_read(fss_session_t *s, int timeout_ms)
{
	if (!s->input_ops)
		return -EINVAL;
	return s->input_ops->pump(s->input, s, timeout_ms);
}

/* ---- the diagnosis schedule ------------------------------------------------------ */

/* A diagnosis of snapshot r: the caller's callback, then what the schedule
 * needs to know of it. */
static int diagnose_snapshot(fss_session_t *s, struct analysis_result *r)
{
	int rc = s->diagnose(s->diagnose_ctx, r, s->live, 0);

	if (rc == 0) {
		s->flight_pending = r->flight.in_flight > 0 || r->flight.nhangs > 0;
		s->diagnosis_unpublished = 1;
	}
	return rc;
}

int fss_session_diagnose(fss_session_t *s)
{
	struct analysis_result *r = NULL;
	int rc;

	if (!s->diagnose || !s->an)
		return 0;
	rc = analyzer_snapshot(s->an, &r);
	if (rc == 0)
		rc = diagnose_snapshot(s, r);
	analysis_result_free(r);
	return rc;
}

/* A live diagnosis: waits are measured to the session's clock (the job is
 * running: the trace has no end yet). */
static void diagnose_live(fss_session_t *s)
{
	struct analysis_result *r = NULL;

	analyzer_set_now(s->an, realtime_ns());
	if (analyzer_snapshot(s->an, &r))
		return;
	diagnose_snapshot(s, r);
	analysis_result_free(r);
}

void fss_session_tick(fss_session_t *s)
{
	int64_t now;

	if (!s->live || s->live_error)
		return;
	now = clock_mono_ms();
	if (s->diagnose && s->an && !s->analysis_error && now - s->last_diagnosis_ms >= SESSION_DIAGNOSE_EVERY_MS &&
	    (s->steps != s->steps_diagnosed || s->flight_pending || live_in_flight(s->live))) {
		diagnose_live(s);
		s->steps_diagnosed = s->steps;
		s->last_diagnosis_ms = now;
	}
	if ((s->steps != s->steps_published || s->diagnosis_unpublished) &&
	    now - s->last_publish_ms >= SESSION_PUBLISH_EVERY_MS) {
		if (live_publish(s->live, s->board) == 0) {
			s->steps_published = s->steps;
			s->diagnosis_unpublished = 0;
		}
		s->last_publish_ms = now;
	}
}

int fss_session_finish_analysis(fss_session_t *s, int read_rc, struct analysis_result **out)
{
	*out = NULL;
	if (!s->an)
		return -EINVAL;
	if (read_rc == FSS_E_TRUNCATED || read_rc == FSS_E_CORRUPT)
		analyzer_set_truncated(s->an);
	else if (read_rc)
		return read_rc;
	if (s->analysis_error)
		return s->analysis_error;
	return analyzer_finish(s->an, out);
}

int fss_session_diagnose_result(fss_session_t *s, const struct analysis_result *r)
{
	return s->diagnose ? s->diagnose(s->diagnose_ctx, r, s->live, 1) : 0;
}

int fss_session_publish(fss_session_t *s)
{
	return s->live ? live_publish(s->live, s->board) : 0;
}

/* ---- what the session holds ------------------------------------------------------- */

live_t *fss_session_live(fss_session_t *s)
{
	return s->live;
}

live_board_t *fss_session_board(fss_session_t *s)
{
	return s->board;
}

analyzer_t *fss_session_analyzer(fss_session_t *s)
{
	return s->an;
}

void fss_session_end_view(fss_session_t *s)
{
	sources_finish(s->view);
}

const sources_t *fss_session_view(const fss_session_t *s)
{
	return s->view;
}

uint64_t fss_session_job_step(const fss_session_t *s)
{
	return job_steps(s);
}

uint64_t fss_session_trace_ns(const fss_session_t *s)
{
	return s->trace_ns;
}

int fss_session_live_failed(const fss_session_t *s)
{
	return s->live_error != 0;
}

keeper_t *fss_session_keeper(fss_session_t *s)
{
	return s->keeper;
}
