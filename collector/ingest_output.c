/*
 * ingest_output.c - the output trace: records appended, flushed, counted.
 *
 * Every record the output gets passes ingest_emit_record: renumbered, noted
 * for re-statement, taken in by the per-source layer, shown to the record
 * callback, then appended.
 */
#include "collector/ingest_output.h"

#include "collector/ingest_ack.h"
#include "collector/ingest_internal.h"
#include "collector/ingest_rotate.h"
#include "collector/ingest_sinks.h"

#include "collector/source.h"
#include "common/arith.h"
#include "common/clock.h"
#include "common/trace_writer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* After an append: did the writer write a full chunk out? Then every
 * record before this one is on disk. */
static void note_append(ingest_t *ing, uint16_t size)
{
	uint64_t bytes = trace_writer_bytes(ing->out);

	ing->appended++;
	ing->chunk_used += size;
	if (bytes != ing->writer_bytes) {
		ing->chunk_used = size; /* the record opened the next chunk */
		ing->writer_bytes = bytes;
		ing->on_disk = ing->appended - 1;
		ingest_acks_after_write(ing);
		ing->arrived = 1; /* this record waits in the next chunk: the timer writes it */
	}
}

int ingest_flush_and_ack(ingest_t *ing)
{
	int err = ingest_markers_due(ing);

	if (!err)
		err = trace_writer_flush(ing->out);

	if (err) {
		if (!ing->write_error)
			ing->write_error = err;
		return err;
	}
	ing->writer_bytes = trace_writer_bytes(ing->out);
	ing->chunk_used = 0;
	ing->on_disk = ing->appended;
	ingest_acks_after_write(ing);
	return 0;
}

int ingest_append_raw(ingest_t *ing, const void *rec)
{
	int err;

	if (ing->write_error)
		return ing->write_error;
	err = trace_writer_append(ing->out, rec);
	if (err == -EINVAL)
		return err; /* a record too large for the output's chunks: refused, the output goes on */
	if (err) {
		ing->write_error = err;
		return err;
	}
	note_append(ing, ((const struct fss_record_head *)rec)->size);
	return 0;
}

int ingest_append_out(ingest_t *ing, const void *rec)
{
	uint16_t size = ((const struct fss_record_head *)rec)->size;

	if (ing->ndirty &&
	    (uint64_t)ing->chunk_used + size + ing->ndirty * sizeof(struct fss_rec_sink) > ing->chunk_cap) {
		int err = ingest_markers_due(ing);

		if (err)
			return err;
	}
	return ingest_append_raw(ing, rec);
}

/* ---- sources ------------------------------------------------------------ */

int ingest_source_new(ingest_t *ing, struct input *in, uint32_t *out)
{
	struct ingest_source_stats *s;

	if (ing->stats.sources == UINT32_MAX - 1)
		return INGEST_STOP_TOO_MANY_SOURCES;
	if (ing->stats.sources == ing->capsources) {
		size_t cap = ing->capsources ? ing->capsources * 2 : 16;
		struct ingest_source_stats *ns = realloc(ing->sources, cap * sizeof(*ns));
		struct out_source *no;

		if (!ns)
			return -ENOMEM;
		ing->sources = ns;
		no = realloc(ing->outs, cap * sizeof(*no));
		if (!no)
			return -ENOMEM;
		ing->outs = no;
		ing->capsources = cap;
	}
	s = &ing->sources[ing->stats.sources];
	memset(s, 0, sizeof(*s));
	memset(&ing->outs[ing->stats.sources], 0, sizeof(ing->outs[0]));
	s->source = ing->stats.sources++;
	s->rank = FSS_RANK_UNKNOWN;
	s->origin = in->origin;
	*out = s->source;
	return 0;
}

void ingest_stats_sync(ingest_t *ing, struct ingest_source_stats *s)
{
	const struct source *v = sources_find(ing->layer, s->source);

	if (!v)
		return;
	s->view = v;
	s->has_hello = v->has_hello;
	s->pid = v->pid;
	s->rank = v->rank;
	s->ended = v->has_process_end;
	if (s->dropped != v->dropped) {
		s->dropped = v->dropped;
		ing->stats.dropped = 0;
		for (uint32_t i = 0; i < ing->stats.sources; i++)
			ing->stats.dropped = u64_add_sat(ing->stats.dropped, ing->sources[i].dropped);
	}
}

/* ---- emitting ----------------------------------------------------------- */

int ingest_emit_record(ingest_t *ing, uint32_t out, const struct fss_record_head *rec, int must_write)
{
	struct fss_record_head *copy = (struct fss_record_head *)ing->record;
	struct ingest_source_stats *s = &ing->sources[out];
	int err, rc = 0;

	if (ing->write_error)
		return ing->write_error;
	if (copy != rec)
		memcpy(copy, rec, rec->size);
	copy->source = out;
	err = ingest_restate_note(&ing->outs[out].restate, copy);
	if (!err)
		err = sources_feed(ing->layer, copy);
	if (err)
		return err;
	if (copy->type < FSS_REC_TYPE_MAX)
		ing->stats.by_type[copy->type]++;
	s->records++;
	ingest_stats_sync(ing, s);
	if (ing->on_record)
		rc = ing->on_record(ing->on_record_ctx, copy, s->view);
	if (rc < 0) {
		ing->write_error = rc;
		return rc;
	}
	if (rc == 1 && !must_write) {
		ing->stats.records_left_out++;
		return 1;
	}
	err = ingest_append_out(ing, copy);
	if (err == -EINVAL) {
		ing->stats.records_left_out++; /* too large for the output's chunks */
		return 1;
	}
	return err;
}

int ingest_emit(ingest_t *ing, uint32_t out, const struct fss_record_head *rec)
{
	int rc = ingest_emit_record(ing, out, rec, 0);

	return rc > 0 ? 0 : rc;
}

int ingest_flush_if_due(ingest_t *ing)
{
	if (!ing->arrived || clock_mono_ns() - ing->last_flush_ns < ing->flush_ns)
		return 0;
	return ingest_flush_and_ack(ing);
}

int ingest_flush(ingest_t *ing)
{
	if (ing->finished)
		return -EALREADY;
	if (ing->write_error)
		return ing->write_error;
	return ingest_flush_and_ack(ing);
}

int ingest_write_record(ingest_t *ing, const struct fss_record_head *rec)
{
	struct process *p;
	int err;

	if (ing->finished)
		return -EALREADY;
	if (rec->size < sizeof(*rec) || rec->size % 8)
		return -EINVAL;
	p = rec->source < ing->stats.sources ? ing->outs[rec->source].proc : NULL;
	if (p && p->out_next != RESUME_NONE && rec->type != FSS_REC_STEP_SUMMARY) {
		/* a reader must not count it as the sink's next record: a marker
		 * says so, another after it resumes the numbering (at the latest
		 * when the chunk is written) */
		err = ingest_write_marker(ing, p, p->out_serial, RESUME_NONE);
		if (!err)
			err = ingest_drifting_add(ing, p);
		if (err)
			return err;
	}
	return ingest_append_out(ing, rec);
}

int ingest_note_exit(ingest_t *ing, pid_t pid, int wait_status)
{
	if (ing->finished)
		return -EALREADY;
	if (ing->nexits == ing->capexits) {
		size_t cap = ing->capexits ? ing->capexits * 2 : 16;
		struct pending_exit *e = realloc(ing->exits, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		ing->exits = e;
		ing->capexits = cap;
	}
	ing->exits[ing->nexits].at_ns = clock_mono_ns();
	ing->exits[ing->nexits].pid = pid;
	ing->exits[ing->nexits].wait_status = wait_status;
	ing->nexits++;
	return 0;
}

int ingest_write_exits(ingest_t *ing)
{
	for (size_t i = 0; i < ing->nexits; i++) {
		const struct pending_exit *e = &ing->exits[i];
		struct fss_rec_process_exit rec;
		struct ingest_source_stats *s = NULL;
		int err;

		/* The latest source of that pid: a process that reconnected. */
		for (size_t j = ing->stats.sources; j-- > 0;) {
			if (ing->sources[j].has_hello && ing->sources[j].pid == (uint32_t)e->pid) {
				s = &ing->sources[j];
				break;
			}
		}
		if (!s) {
			ing->stats.exits_unmatched++;
			continue;
		}
		memset(&rec, 0, sizeof(rec));
		rec.head.type = FSS_REC_PROCESS_EXIT;
		rec.head.size = sizeof(rec);
		rec.head.source = s->source;
		rec.at_ns = e->at_ns;
		rec.pid = (uint32_t)e->pid;
		rec.wait_status = e->wait_status;
		err = ingest_emit(ing, s->source, &rec.head);
		if (err)
			return err;
		ing->stats.exits_written++;
	}
	return 0;
}
