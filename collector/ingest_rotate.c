/*
 * ingest_rotate.c - a new output file that stands alone: what it re-states, the switch.
 *
 * ingest_rotate closes the current file and opens a new one that re-states
 * every source first (hello, resume marker, strings, live communicators,
 * clock anchors, drops).
 */
#include "collector/ingest_rotate.h"

#include "collector/ingest_ack.h"
#include "collector/ingest_internal.h"
#include "collector/ingest_output.h"
#include "collector/ingest_sinks.h"

#include "common/trace_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- what a new file re-states ---------------------------------------- */

static size_t rec_keep_size(const struct fss_record_head *rec, size_t known)
{
	return rec->size < known ? rec->size : known;
}

static size_t string_slot_of(const struct restate *r, uint32_t id, uint16_t offset)
{
	uint64_t h = ((uint64_t)id << 16 | offset) * 0x9e3779b97f4a7c15ull;
	size_t i = (size_t)(h >> 20) & (r->nslots - 1);

	for (;; i = (i + 1) & (r->nslots - 1)) {
		const struct fss_rec_string *p;

		if (!r->string_slots[i])
			return i;
		p = (const void *)(r->strings + (r->string_slots[i] - 1) * sizeof(struct fss_rec_string));
		if (p->id == id && p->offset == offset)
			return i;
	}
}

static int strings_rehash(struct restate *r)
{
	size_t n = r->nslots ? r->nslots * 2 : 64;
	uint32_t *v = calloc(n, sizeof(*v));

	if (!v)
		return -ENOMEM;
	free(r->string_slots);
	r->string_slots = v;
	r->nslots = n;
	for (size_t j = 0; j < r->nstrings; j++) {
		const struct fss_rec_string *p = (const void *)(r->strings + j * sizeof(struct fss_rec_string));

		r->string_slots[string_slot_of(r, p->id, p->offset)] = (uint32_t)j + 1;
	}
	return 0;
}

static int restate_string(struct restate *r, const struct fss_rec_string *part)
{
	size_t slot;
	unsigned char *at;

	if ((r->nstrings + 1) * 2 > r->nslots && strings_rehash(r))
		return -ENOMEM;
	if (r->nstrings >= UINT32_MAX - 1)
		return 0;
	slot = string_slot_of(r, part->id, part->offset);
	if (r->string_slots[slot]) {
		at = r->strings + (r->string_slots[slot] - 1) * sizeof(struct fss_rec_string);
	} else {
		if (ingest_grow((void **)&r->strings, &r->capstrings, r->nstrings + 1, sizeof(struct fss_rec_string),
				16))
			return -ENOMEM;
		at = r->strings + r->nstrings * sizeof(struct fss_rec_string);
		r->string_slots[slot] = (uint32_t)++r->nstrings;
	}
	memcpy(at, part, sizeof(*part));
	((struct fss_record_head *)at)->size = sizeof(*part);
	return 0;
}

int ingest_restate_note(struct restate *r, const struct fss_record_head *rec)
{
	switch (rec->type) {
	case FSS_REC_PROCESS_HELLO:
		memset(r->hello, 0, sizeof(r->hello));
		memcpy(r->hello, rec, rec_keep_size(rec, sizeof(r->hello)));
		((struct fss_record_head *)r->hello)->size = sizeof(r->hello);
		r->has_hello = 1;
		break;
	case FSS_REC_STRING:
		return restate_string(r, (const void *)rec);
	case FSS_REC_COMM: {
		const struct fss_rec_comm *c = (const void *)rec;
		size_t i;

		for (i = 0; i < r->ncomms && r->comms[i].comm != c->comm; i++)
			;
		if (c->event == FSS_COMM_DESTROY || c->event == FSS_COMM_ABORT) {
			if (i < r->ncomms)
				r->comms[i] = r->comms[--r->ncomms];
			break;
		}
		/* an observed communicator (attach saw it first in use) is as live
		 * as one seen made: restated with what was inferred of it */
		if (c->result != 0 ||
		    (c->event != FSS_COMM_INIT && c->event != FSS_COMM_SPLIT && c->event != FSS_COMM_OBSERVED))
			break;
		if (i == r->ncomms) {
			if (ingest_grow((void **)&r->comms, &r->capcomms, r->ncomms + 1, sizeof(*r->comms), 4))
				return -ENOMEM;
			r->ncomms++;
		}
		r->comms[i] = *c;
		r->comms[i].head.size = sizeof(*c);
		break;
	}
	case FSS_REC_CLOCK_ANCHOR: {
		const struct fss_rec_clock_anchor *a = (const void *)rec;
		int d = a->domain == FSS_CLOCK_CUPTI;

		r->anchors[d] = *a;
		r->anchors[d].head.size = sizeof(*a);
		r->has_anchor[d] = 1;
		break;
	}
	case FSS_REC_DROPS:
		r->drops = *(const struct fss_rec_drops *)rec;
		r->drops.head.size = sizeof(r->drops);
		r->has_drops = 1;
		break;
	default:
		break;
	}
	return 0;
}

void ingest_restate_free(struct restate *r)
{
	free(r->strings);
	free(r->string_slots);
	free(r->comms);
}

/* Records re-stated after the hello (and marker). */
static size_t restate_count(const struct restate *r)
{
	return r->nstrings + r->ncomms + (size_t)r->has_anchor[0] + (size_t)r->has_anchor[1] + (size_t)r->has_drops;
}

/* The i-th of those. */
static const void *restate_at(const struct restate *r, size_t i)
{
	if (i < r->nstrings)
		return r->strings + i * sizeof(struct fss_rec_string);
	i -= r->nstrings;
	if (i < r->ncomms)
		return &r->comms[i];
	i -= r->ncomms;
	for (int d = 0; d < 2; d++) {
		if (!r->has_anchor[d])
			continue;
		if (i == 0)
			return &r->anchors[d];
		i--;
	}
	return &r->drops;
}

/* Re-state output source `i` at the start of a new file: hello, a resume
 * marker (sources of a process), then its strings, live communicators,
 * latest clock anchors and drops. A marker's preamble holds at most
 * UINT16_MAX records: more come after further markers. */
static int restate_source(ingest_t *ing, uint32_t i)
{
	const struct out_source *o = &ing->outs[i];
	const struct restate *r = &o->restate;
	size_t n = restate_count(r), done = 0;
	int err = 0;

	if (r->has_hello)
		err = ingest_append_out(ing, r->hello);
	do {
		size_t part = n - done > UINT16_MAX ? UINT16_MAX : n - done;

		if (!err && o->proc && r->has_hello) {
			const struct sink_info *si = ingest_sink_find(o->proc, o->proc->out_serial);
			struct fss_rec_sink k;

			record_init(&k, FSS_REC_SINK, sizeof(k), i);
			k.process_id = o->proc->id;
			k.serial = o->proc->out_serial;
			k.kind = si ? si->kind : 0;
			k.preamble = (uint16_t)part;
			k.prev_serial = k.serial;
			k.prev_kind = k.kind;
			k.repeat_first = ingest_resume_index(o->proc);
			o->proc->out_next = k.repeat_first;
			err = ingest_append_out(ing, &k);
		}
		for (size_t j = 0; j < part && !err; j++)
			err = ingest_append_out(ing, restate_at(r, done + j));
		done += part;
	} while (!err && done < n);
	return err;
}

/* Switch to the new file w at path: the current one ends with its markers
 * and is closed, the new one re-states every source. */
static int rotate_now(ingest_t *ing, trace_writer_t *w, char *path)
{
	int err = ingest_markers_due(ing);

	if (err) {
		trace_writer_close(w);
		unlink(path);
		free(path);
		return err;
	}
	ing->file_records_before += trace_writer_records(ing->out);
	err = trace_writer_close(ing->out);
	if (!err) {
		struct stat st;

		if (stat(ing->path, &st) == 0)
			ing->file_bytes_before += (uint64_t)st.st_size;
	}
	ing->out = w;
	ing->stats.files_written++;
	free(ing->path);
	ing->path = path;
	if (err) {
		ing->write_error = err;
		return err;
	}
	/* the closed file holds everything appended: ack it */
	ing->on_disk = ing->appended;
	ingest_acks_after_write(ing);
	ing->writer_bytes = trace_writer_bytes(w);
	ing->chunk_used = 0;
	for (uint32_t i = 0; i < ing->stats.sources && !err; i++)
		err = restate_source(ing, i);
	return err;
}

int ingest_rotate_pending(ingest_t *ing)
{
	trace_writer_t *w = ing->next_out;

	if (!w)
		return 0;
	ing->next_out = NULL;
	return rotate_now(ing, w, ing->next_path);
}

int ingest_rotate(ingest_t *ing, const char *path)
{
	trace_writer_t *w;
	char *copy;
	int err;

	if (ing->finished)
		return -EALREADY;
	if (ing->write_error)
		return ing->write_error;
	if (ing->next_out)
		return -EBUSY; /* one rotation per record */
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	/* open the next file first: a failure leaves the current one going */
	err = trace_writer_open(&w, path, &ing->wopts);
	if (err) {
		free(copy);
		return err;
	}
	if (ing->taking) {
		ing->next_out = w;
		ing->next_path = copy;
		return 0;
	}
	return rotate_now(ing, w, copy);
}
