/*
 * session_ingest.c - a session's live input: an ingest (agent connections
 * and per-rank files, collector/ingest.h) that feeds its output's records
 * to the session's view and hands each one, with its source, to the
 * session's pipeline from its record callback; the keeper decides what of
 * them the file keeps. The trace is flushed at least once a second: what
 * a killed session loses of what it had received.
 */
#include "collector/session_internal.h"

#include "common/clock.h"

#include <errno.h>
#include <stdlib.h>

/* The session's own flush of the ingest, once a second whether records
 * arrived or not. The trace-write interval users read about is the ingest's:
 * a chunk at most INGEST_FLUSH_MS_DEFAULT (100 ms) after its records arrived
 * (docs/collect.md, `fsdpscope help collect`). */
#define SESSION_FLUSH_EVERY_MS 1000

struct ingest_input {
	ingest_t *ing;
	int64_t last_flush_ms;
};

/* The ingest's record callback: every record the trace gets, in its order,
 * after the session's view took it in. */
static int ingest_on_record_cb(void *ctx, const struct fss_record_head *rec, const struct source *src)
{
	fss_session_t *s = ctx;
	int leave_out, rc;

	if (!s->in_files)
		s->agent_records++;
	rc = fss_session_after_view(s, rec, src, &leave_out);
	if (rc < 0)
		return rc;
	return leave_out;
}

static int ingest_pump(void *impl, fss_session_t *s, int timeout_ms)
{
	struct ingest_input *in = impl;
	int rc = ingest_poll(in->ing, timeout_ms);

	(void)s;
	if (rc >= 0 && clock_mono_ms() - in->last_flush_ms >= SESSION_FLUSH_EVERY_MS) {
		rc = ingest_flush(in->ing);
		in->last_flush_ms = clock_mono_ms();
	}
	return rc;
}

static void ingest_input_free(void *impl)
{
	struct ingest_input *in = impl;

	if (!in)
		return;
	ingest_free(in->ing);
	free(in);
}

static const struct fss_session_input ingest_input_ops = {
    .kind = "ingest",
    .pump = ingest_pump,
    .free = ingest_input_free,
};

int fss_session_open_ingest(fss_session_t *s, const struct fss_session_ingest_options *o, ingest_t **ing,
			    const char **what)
{
	struct ingest_options io = o->ingest;
	struct keep_policy keep;
	struct ingest_input *in;
	int err;

	*ing = NULL;
	*what = "ingest";
	if (s->input_ops)
		return -EBUSY;
	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	io.view = s->view;
	err = ingest_new(&in->ing, o->output_path, &io);
	if (err) {
		free(in);
		return err;
	}
	if (o->keep)
		keep = *o->keep;
	else
		keep_policy_default(&keep);
	err = keeper_new(&s->keeper, &keep, in->ing, o->output_path, o->folder);
	if (err) {
		*what = "keeper";
		ingest_input_free(in);
		return err;
	}
	s->tolerant = 1;
	ingest_on_record(in->ing, ingest_on_record_cb, s);
	in->last_flush_ms = clock_mono_ms();
	*ing = in->ing;
	return fss_session_set_input(s, &ingest_input_ops, in);
}

void fss_session_in_files(fss_session_t *s, int in_files)
{
	s->in_files = in_files;
}

uint64_t fss_session_agent_records(const fss_session_t *s)
{
	return s->agent_records;
}

int fss_session_end_ingest(fss_session_t *s, const struct ingest_stats **stats, const char **note)
{
	const struct ingest_input *in = s->input_ops == &ingest_input_ops ? s->input : NULL;
	int err;

	*stats = NULL;
	*note = NULL;
	if (!in)
		return -EINVAL;
	err = keeper_drain(s->keeper);
	if (!err)
		err = ingest_finish(in->ing, stats);
	if (!err)
		err = keeper_finish(s->keeper, note);
	return err;
}
