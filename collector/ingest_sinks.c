/*
 * ingest_sinks.c - one output source per process: sink records, repeats held, markers.
 *
 * The sink de-duplication of ingest.h: an input source that continues a
 * process the output holds joins its output source; what the output holds
 * already is skipped; resume markers keep a later reader's numbering right.
 */
#include "collector/ingest_sinks.h"

#include "collector/ingest_internal.h"
#include "collector/ingest_output.h"

#include "collector/source.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The map entry of input source `in_source`, added on first sight. */
static int map_get(struct input *in, uint32_t in_source, struct source_map **out)
{
	struct source_map *m;

	if (in->nmap && in->map[in->last_map].in == in_source) {
		*out = &in->map[in->last_map];
		return 0;
	}
	for (size_t i = 0; i < in->nmap; i++) {
		if (in->map[i].in == in_source) {
			in->last_map = i;
			*out = &in->map[i];
			return 0;
		}
	}
	if (in->nmap >=
	    (in->kind == INPUT_CONNECTION ? INGEST_MAX_SOURCES_PER_CONNECTION : INGEST_MAX_SOURCES_PER_INPUT))
		return INGEST_STOP_TOO_MANY_SOURCES;
	if (ingest_grow((void **)&in->map, &in->capmap, in->nmap + 1, sizeof(*in->map), 4))
		return -ENOMEM;
	m = &in->map[in->nmap];
	memset(m, 0, sizeof(*m));
	m->in = in_source;
	m->out = UINT32_MAX;
	in->last_map = in->nmap++;
	*out = m;
	return 0;
}

/* ---- processes and sinks ------------------------------------------------ */

static struct process *process_find(const ingest_t *ing, uint64_t id)
{
	for (size_t i = ing->nprocs; i-- > 0;)
		if (ing->procs[i]->id == id)
			return ing->procs[i];
	return NULL;
}

struct sink_info *ingest_sink_find(struct process *p, uint32_t serial)
{
	for (size_t i = 0; i < p->nsinks; i++)
		if (p->sinks[i].serial == serial)
			return &p->sinks[i];
	return NULL;
}

/* The sink `serial` of p, added when new: when the table is full, the
 * oldest serial other than the founding one gives way. */
static struct sink_info *sink_get(ingest_t *ing, struct process *p, uint32_t serial)
{
	struct sink_info *si = ingest_sink_find(p, serial);
	size_t victim = 0;

	if (si)
		return si;
	if (p->nsinks < PROCESS_SINKS_MAX) {
		si = &p->sinks[p->nsinks++];
	} else {
		for (size_t i = 1; i < p->nsinks; i++)
			if ((p->sinks[i].serial < p->sinks[victim].serial && p->sinks[i].serial != p->founding) ||
			    p->sinks[victim].serial == p->founding)
				victim = i;
		si = &p->sinks[victim];
	}
	memset(si, 0, sizeof(*si));
	si->serial = serial;
	ing->sources[p->out].sinks++;
	if (serial != p->founding)
		ing->stats.sinks_merged++;
	return si;
}

static int process_new(ingest_t *ing, uint64_t id, uint32_t out, uint32_t founding, struct process **pp)
{
	struct process *p;

	if (ingest_grow((void **)&ing->procs, &ing->capprocs, ing->nprocs + 1, sizeof(*ing->procs), 8))
		return -ENOMEM;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->id = id;
	p->out = out;
	p->founding = founding;
	p->out_serial = founding;
	ing->procs[ing->nprocs++] = p;
	ing->outs[out].proc = p;
	*pp = p;
	return 0;
}

static int is_sink_record(const struct fss_record_head *rec)
{
	return rec->type == FSS_REC_SINK;
}

/* A resume marker (see ingest.h): a sink record continuing itself. */
static int is_marker(const struct fss_rec_sink *k)
{
	return k->serial == k->prev_serial;
}

enum sink_part {
	PART_HELLO,
	PART_SINK,
	PART_PREAMBLE,
	PART_REPEAT,
	PART_OWN,
};

static enum sink_part sink_part_of(const struct sink_info *si, uint64_t index)
{
	if (index == 0)
		return PART_HELLO;
	if (index == 1)
		return PART_SINK;
	if (!si || !si->layout_known)
		return PART_OWN;
	if (index < 2 + (uint64_t)si->preamble)
		return PART_PREAMBLE;
	if (si->prev_serial && index - 2 - si->preamble < si->repeat_count)
		return PART_REPEAT;
	return PART_OWN;
}

int ingest_write_marker(ingest_t *ing, struct process *p, uint32_t serial, uint64_t index)
{
	const struct sink_info *si = ingest_sink_find(p, serial);
	struct fss_rec_sink k;
	int err;

	record_init(&k, FSS_REC_SINK, sizeof(k), p->out);
	k.process_id = p->id;
	k.serial = serial;
	k.kind = si ? si->kind : 0;
	k.prev_serial = serial;
	k.prev_kind = k.kind;
	k.repeat_first = index;
	err = ingest_append_raw(ing, &k);
	if (err == 0) {
		p->out_serial = serial;
		p->out_next = index;
		p->drifting = 0;
	}
	return err;
}

uint64_t ingest_resume_index(struct process *p)
{
	const struct sink_info *si = ingest_sink_find(p, p->out_serial);
	uint64_t next = p->real_next;

	if (p->out_next != RESUME_NONE && p->out_next > next)
		next = p->out_next;
	return si && si->held > next ? si->held : next;
}

int ingest_markers_due(ingest_t *ing)
{
	int err = 0;

	for (size_t i = 0; i < ing->ndirty && !err; i++) {
		struct process *p = ing->dirty[i];

		if (p->drifting)
			err = ingest_write_marker(ing, p, p->out_serial, ingest_resume_index(p));
	}
	if (!err)
		ing->ndirty = 0;
	return err;
}

int ingest_drifting_add(ingest_t *ing, struct process *p)
{
	if (p->drifting)
		return 0;
	if (ingest_grow((void **)&ing->dirty, &ing->capdirty, ing->ndirty + 1, sizeof(*ing->dirty), 8))
		return -ENOMEM;
	ing->dirty[ing->ndirty++] = p;
	p->drifting = 1;
	return 0;
}

/*
 * A record of an input source that follows a sink: its chain of names
 * (sink, index) from level 0 down through the repeat regions, held or not,
 * then written if the output lacks it. A hello, sink record or preamble is
 * written only for the sink that founded the output source.
 */
static int take_sink_record(ingest_t *ing, struct source_map *m, const struct fss_record_head *rec)
{
	struct process *p = m->proc;
	uint32_t serial[SINK_CHAIN_MAX];
	uint64_t index[SINK_CHAIN_MAX];
	enum sink_part part;
	size_t depth = 0, k;
	uint64_t held_from = 0;
	int held = 0, err;

	if (rec->type == FSS_REC_STEP_SUMMARY)
		return ingest_emit(ing, p->out, rec); /* a collector's own record: in no sink's numbering */
	if (m->index == RESUME_NONE) {
		/* a session's own record (a resume marker said so): outside the
		 * numbering, written as it is */
		if (p->out_serial != m->serial || p->out_next != RESUME_NONE) {
			err = ingest_write_marker(ing, p, m->serial, RESUME_NONE);
			if (err)
				return err;
		}
		err = ingest_emit_record(ing, p->out, rec, 0);
		return err < 0 ? err : 0;
	}
	serial[0] = m->serial;
	index[0] = m->index;
	if (m->jump_at && m->index + 1 == m->jump_at) {
		/* the last of a resume marker's preamble: after it, the records
		 * are from its index on, and what comes before that is held */
		m->index = m->jump_to;
		m->jump_at = 0; /* once: the index may land below the jump again */
		if (m->jump_to != RESUME_NONE)
			held_from = m->jump_to;
	} else {
		m->index++;
	}
	for (;;) {
		struct sink_info *si = ingest_sink_find(p, serial[depth]);

		part = sink_part_of(si, index[depth]);
		if (part != PART_REPEAT || depth + 1 == SINK_CHAIN_MAX || si->prev_serial == serial[depth])
			break;
		serial[depth + 1] = si->prev_serial;
		index[depth + 1] = si->repeat_first + (index[depth] - 2 - si->preamble);
		depth++;
	}
	if (part == PART_REPEAT)
		part = PART_OWN; /* deeper than followed: taken as its own */
	for (k = 0; k <= depth; k++) {
		struct sink_info *si = ingest_sink_find(p, serial[k]);

		if (si && index[k] < si->held)
			held = 1;
	}
	for (k = 0; k <= depth; k++) {
		struct sink_info *si = sink_get(ing, p, serial[k]);

		if (index[k] + 1 > si->held)
			si->held = index[k] + 1;
		if (k == 0 && held_from > si->held)
			si->held = held_from;
	}
	if (part == PART_SINK && is_sink_record(rec)) {
		const struct fss_rec_sink *ks = (const void *)rec;
		struct sink_info *si = ingest_sink_find(p, serial[depth]);

		if (ks->process_id == p->id && ks->serial == serial[depth] && !is_marker(ks) && !si->layout_known) {
			si->layout_known = 1;
			si->kind = ks->kind;
			si->preamble = ks->preamble;
			si->prev_serial = ks->prev_serial;
			si->repeat_first = ks->repeat_first;
			si->repeat_count = ks->repeat_count;
		}
	}
	if (held) {
		ing->sources[p->out].repeats_skipped++;
		ing->stats.repeats_skipped++;
		return 0;
	}
	if (part != PART_OWN && serial[depth] != p->founding)
		return 0; /* a later sink's re-statement of the process: the source has it */
	if (p->out_serial != serial[0] || p->out_next == RESUME_NONE || (p->out_next != index[0] && !p->drifting)) {
		err = ingest_write_marker(ing, p, serial[0], index[0]);
		if (err)
			return err;
	}
	err = ingest_emit_record(ing, p->out, rec, 0);
	if (err < 0)
		return err;
	p->real_next = index[0] + 1;
	if (err == 0)
		p->out_next++; /* as the reader counts it */
	else if (ingest_drifting_add(ing, p))
		return -ENOMEM; /* left out: the reader's count falls behind until the next marker */
	return 0;
}

/* Level 0 of map entry m follows sink record k from here (k is its record
 * at index 1; a marker makes the records after its preamble those from
 * repeat_first). */
static void map_follow(struct source_map *m, const struct fss_rec_sink *k)
{
	m->serial = k->serial;
	m->index = 1;
	m->jump_at = 0;
	if (is_marker(k)) {
		m->jump_at = 2 + (uint64_t)k->preamble;
		m->jump_to = k->repeat_first;
	}
}

/* An input source's hello and then its sink record: which process, which
 * output source. */
static int take_first_sink(ingest_t *ing, struct input *in, struct source_map *m, const struct fss_rec_sink *k)
{
	_Alignas(8) unsigned char hello[UINT16_MAX + 1];
	struct process *p = process_find(ing, k->process_id);
	size_t hello_size = ((const struct fss_record_head *)m->hello)->size;
	int err;

	memcpy(hello, m->hello, hello_size);
	free(m->hello);
	m->hello = NULL;
	in->hellos_waiting--;
	if (!p) {
		uint32_t out;

		err = ingest_source_new(ing, in, &out);
		if (!err)
			err = process_new(ing, k->process_id, out, k->serial, &p);
		if (err)
			return err;
	}
	m->out = p->out;
	m->proc = p;
	m->state = MAP_SINK;
	map_follow(m, k);
	m->index = 0;
	err = take_sink_record(ing, m, (const void *)hello);
	if (!err)
		err = take_sink_record(ing, m, &k->head);
	return err;
}

int ingest_hello_release(ingest_t *ing, struct input *in, struct source_map *m)
{
	int err = ingest_source_new(ing, in, &m->out);

	m->state = MAP_PLAIN;
	if (!err)
		err = ingest_emit(ing, m->out, (const void *)m->hello);
	free(m->hello);
	m->hello = NULL;
	in->hellos_waiting--;
	return err;
}

int ingest_take_record(ingest_t *ing, struct input *in, const struct fss_record_head *rec)
{
	struct source_map *m;
	int err = map_get(in, rec->source, &m);

	if (err)
		return err;
	switch (m->state) {
	case MAP_FRESH:
		if (rec->type == FSS_REC_PROCESS_HELLO && rec->size <= INGEST_HELLO_WAIT_MAX) {
			m->hello = malloc(rec->size);
			if (!m->hello)
				return -ENOMEM;
			memcpy(m->hello, rec, rec->size);
			m->state = MAP_HELLO;
			in->hellos_waiting++;
			return 0;
		}
		err = ingest_source_new(ing, in, &m->out);
		m->state = MAP_PLAIN;
		return err ? err : ingest_emit(ing, m->out, rec);
	case MAP_HELLO:
		if (is_sink_record(rec))
			return take_first_sink(ing, in, m, (const void *)rec);
		err = ingest_hello_release(ing, in, m);
		return err ? err : ingest_emit(ing, m->out, rec);
	case MAP_PLAIN:
		return ingest_emit(ing, m->out, rec);
	case MAP_SINK:
		/* A resume marker of a merged trace restarts the numbering; any
		 * other sink record here is a repeated one, read through the
		 * layouts like the rest of the repeats. */
		if (is_sink_record(rec) && ((const struct fss_rec_sink *)rec)->process_id == m->proc->id &&
		    is_marker((const void *)rec))
			map_follow(m, (const void *)rec);
		return take_sink_record(ing, m, rec);
	}
	return 0;
}
