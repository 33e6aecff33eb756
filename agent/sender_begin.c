/*
 * sender_begin.c - a new sink's first records (sender_begin.h, docs/format.md
 * "Sinks and resumption"): the replay is gathered first so that the sink
 * record can say how many records it is; the repeat comes from the
 * retained chunks and the dead writer's unsent bytes (socket -> file) or
 * from a closed file read back (file -> socket).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/comms.h"
#include "agent/sender_begin.h"
#include "agent/sender_state.h"
#include "agent/strings.h"
#include "common/clock.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"

/* The replay a new sink starts with, gathered first so that the sink record
 * can say how many records it is. */
struct sender_preamble {
	unsigned char *buf;
	size_t len, cap;
	uint32_t records;
	int failed;
};

static void sender_preamble_add(void *ctx, const void *record)
{
	struct sender_preamble *p = ctx;
	const struct fss_record_head *head = record;

	if (p->failed)
		return;
	if (p->len + head->size > p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16384;
		unsigned char *b = realloc(p->buf, cap);
		if (!b) {
			p->failed = 1;
			return;
		}
		p->buf = b;
		p->cap = cap;
	}
	memcpy(p->buf + p->len, record, head->size);
	p->len += head->size;
	p->records++;
}

/* Append the records of a chunk payload, those of index >= from only
 * (index counted from first). Stops when the sink is replaced. */
static void sender_append_payload(const unsigned char *p, size_t len, uint64_t index, uint64_t from,
				  struct sender_repeat *rep, uint32_t serial)
{
	size_t at = 0;

	while (at + sizeof(struct fss_record_head) <= len && sender.serial == serial) {
		const struct fss_record_head *head = (const void *)(p + at);
		if (head->size < sizeof(*head) || at + head->size > len)
			break;
		if (index >= from && sender_append(head) == 0)
			rep->written++;
		index++;
		at += head->size;
	}
}

static int sender_copy_record(void *ctx, const struct fss_record_head *rec)
{
	struct sender_repeat *rep = ctx;
	uint32_t serial = sender.serial;

	if (rec->type == FSS_REC_TRACE_END)
		return 0; /* the file's own end marker, not one of its records */
	if (rep->written == rep->count)
		return 1;
	if (sender_append(rec) != 0 || sender.serial != serial)
		return 1; /* the socket failed meanwhile: the file stays */
	rep->written++;
	return 0;
}

static void sender_write_repeat(struct sender_repeat *rep)
{
	uint32_t serial = sender.serial;

	if (rep->path) {
		struct trace_parser_ops ops = {.on_record = sender_copy_record};
		(void)trace_read(rep->path, &ops, rep, NULL);
		return;
	}
	for (struct retained *r = rep->chunks; r && sender.serial == serial; r = r->next)
		sender_append_payload(r->bytes + sizeof(struct fss_chunk_header),
				      r->len - sizeof(struct fss_chunk_header), r->first, rep->first, rep, serial);
	if (rep->unsent && sender.serial == serial)
		sender_append_payload(rep->unsent, rep->unsent_len, 0, 0, rep, serial);
	if (rep->record && sender.serial == serial && sender_append(rep->record) == 0)
		rep->written++;
}

/* A new sink: hello, the sink record, then every string and live
 * communicator and a clock anchor (so it stands alone whatever came
 * before), then what it repeats of the sink before. */
void sender_begin(const struct fss_rec_process_hello *hello, struct sender_repeat *rep)
{
	struct sender_preamble pre = {0};
	struct fss_rec_sink sink;
	struct fss_rec_clock_anchor a;

	sender.pending = 0;
	sender.last_flush_ns = sender.last_drops_ns = clock_mono_ns();
	agent_strings_replay(sender_preamble_add, &pre);
	agent_comms_replay(sender_preamble_add, &pre);
	memset(&a, 0, sizeof(a));
	a.head.type = FSS_REC_CLOCK_ANCHOR;
	a.head.size = sizeof(a);
	a.domain = FSS_CLOCK_REALTIME;
	clock_anchor(&a.mono_ns, &a.other_ns);
	sender_preamble_add(&pre, &a);
	if (pre.failed || pre.records > UINT16_MAX) {
		agent_debug("no memory for the replay of %u records: this sink starts without it", pre.records);
		pre.len = 0;
		pre.records = 0;
	}
	memset(&sink, 0, sizeof(sink));
	sink.head.type = FSS_REC_SINK;
	sink.head.size = sizeof(sink);
	sink.process_id = sender.process_id;
	sink.serial = ++sender.serial;
	sink.kind = sender.kind == SINK_SOCKET ? FSS_SINK_SOCKET : FSS_SINK_FILE;
	sink.preamble = (uint16_t)pre.records;
	if (rep) {
		sink.prev_serial = rep->prev_serial;
		sink.prev_kind = rep->prev_kind;
		sink.repeat_first = rep->first;
		sink.repeat_count = rep->count;
	}
	sender.serial_kind = sink.kind;
	uint32_t serial = sender.serial;
	if (sender_append(hello) == 0 && sender_append(&sink) == 0) {
		for (size_t at = 0; at < pre.len && sender.serial == serial;) {
			const struct fss_record_head *head = (const void *)(pre.buf + at);
			(void)sender_append(head);
			at += head->size;
		}
		if (rep && rep->count && sender.serial == serial)
			sender_write_repeat(rep);
		if (sender.serial == serial)
			sender_flush_writer();
	}
	free(pre.buf);
}
