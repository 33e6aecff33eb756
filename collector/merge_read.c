/*
 * merge_read.c - the merged read of several traces (merge.h, merge_read):
 * one parser per node queues its records, the earliest shifted time goes
 * first.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/merge_state.h"
#include "common/error.h"
#include "common/record.h"
#include "common/record_fields.h"

/* Records waiting in one node's stream, each as [u32 len, u32 0, bytes]. */
struct queue {
	unsigned char *buf;
	size_t len, pos, cap;
};

struct stream {
	int fd;
	trace_parser_t *parser;
	struct queue q;
	int eof;
	uint64_t last_key; /* shifted time of the last record delivered */
};

struct feed_ctx {
	merge_t *m;
	size_t node;
};

static int stream_on_header(void *ctx, const struct fss_file_header *h);
static int stream_on_record(void *ctx, const struct fss_record_head *rec);
static int stream_on_gap(void *ctx, const struct trace_gap *gap);
/* The parsers' callbacks: they queue records, merge_read hands them on. */
static const struct trace_parser_ops stream_ops = {
    .on_header = stream_on_header, .on_record = stream_on_record, .on_gap = stream_on_gap};

static int stream_on_header(void *ctx, const struct fss_file_header *h)
{
	struct feed_ctx *f = ctx;

	f->m->current = f->node;
	return f->m->ops->on_header ? f->m->ops->on_header(f->m->ctx, h) : 0;
}

static int stream_on_gap(void *ctx, const struct trace_gap *gap)
{
	struct feed_ctx *f = ctx;

	f->m->current = f->node;
	return f->m->ops->on_gap ? f->m->ops->on_gap(f->m->ctx, gap) : 0;
}

static int stream_on_record(void *ctx, const struct fss_record_head *rec)
{
	struct feed_ctx *f = ctx;
	struct queue *q = &f->m->streams[f->node].q;
	size_t known = record_known_size(rec->type);
	size_t len = rec->size > known ? rec->size : known;
	size_t need = 8 + ((len + 7) & ~(size_t)7);

	if (q->len + need > q->cap) {
		size_t cap = q->cap ? q->cap : 1 << 16;
		while (q->len + need > cap)
			cap *= 2;
		unsigned char *grown = realloc(q->buf, cap);
		if (!grown)
			return -ENOMEM;
		q->buf = grown;
		q->cap = cap;
	}
	uint32_t hdr[2] = {(uint32_t)len, 0};
	memcpy(q->buf + q->len, hdr, 8);
	memcpy(q->buf + q->len + 8, rec, len);
	q->len += need;
	return 0;
}

/* Read on in node k's file until a record waits or the file ends. How the
 * file ended goes to the node's read_rc; a non-zero return (a callback's
 * value, -ENOMEM) stops the merged read. */
static int stream_refill(merge_t *m, size_t k)
{
	struct stream *st = &m->streams[k];
	unsigned char block[64 << 10];

	while (st->q.pos == st->q.len && !st->eof) {
		ssize_t n;
		int rc;

		st->q.pos = st->q.len = 0;
		n = read(st->fd, block, sizeof(block));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			st->eof = 1;
			m->nodes[k].read_rc = -errno;
			return 0;
		}
		if (n == 0) {
			st->eof = 1;
			m->nodes[k].read_rc = trace_parser_finish(st->parser);
			return 0;
		}
		rc = trace_parser_feed(st->parser, block, (size_t)n);
		if (rc) {
			st->eof = 1;
			m->nodes[k].read_rc = rc;
			return rc;
		}
	}
	return 0;
}

static void stream_info(merge_t *m, size_t k)
{
	struct stream *st = &m->streams[k];
	struct trace_read_info *info = &m->nodes[k].info;
	const struct trace_gap *gaps;
	trace_parser_t *p = st->parser;

	memset(info, 0, sizeof(*info));
	info->input = trace_parser_input(p);
	info->end = trace_parser_end(p);
	info->chunks = trace_parser_chunks(p);
	info->records = trace_parser_records(p);
	trace_parser_damage(p, &info->damage);
	info->ngaps = trace_parser_gaps(p, &gaps);
	memcpy(info->gaps, gaps, info->ngaps * sizeof(gaps[0]));
	trace_parser_salvaged(p, &info->salvage);
	if (trace_parser_header(p)) {
		info->version_major = trace_parser_header(p)->version_major;
		info->version_minor = trace_parser_header(p)->version_minor;
	}
	if (trace_parser_error(p)[0])
		snprintf(info->message, sizeof(info->message), "%s", trace_parser_error(p));
	else if (m->nodes[k].read_rc)
		snprintf(info->message, sizeof(info->message), "%s", fss_strerror(m->nodes[k].read_rc));
}

/* The order of merge_read's outcomes, worst last. */
static int rc_rank(int rc)
{
	if (rc == 0)
		return 0;
	if (rc == FSS_E_CORRUPT)
		return 1;
	if (rc == FSS_E_TRUNCATED)
		return 2;
	return 3;
}

int merge_read(merge_t *m, const struct trace_parser_ops *ops, void *ctx)
{
	struct feed_ctx *feeds = NULL;
	_Alignas(8) unsigned char rec[1 << 16];
	int rc = 0, worst = 0;

	m->ops = ops;
	m->ctx = ctx;
	m->streams = calloc(m->nnodes, sizeof(*m->streams));
	feeds = calloc(m->nnodes, sizeof(*feeds));
	if (!m->streams || !feeds) {
		free(feeds);
		return -ENOMEM;
	}
	for (size_t k = 0; k < m->nnodes; k++) {
		feeds[k] = (struct feed_ctx){.m = m, .node = k};
		m->streams[k].fd = -1;
	}
	for (size_t k = 0; k < m->nnodes; k++) {
		m->streams[k].fd = open(m->nodes[k].path, O_RDONLY | O_CLOEXEC);
		if (m->streams[k].fd < 0) {
			rc = -errno;
			m->streams[k].eof = 1;
			m->nodes[k].read_rc = rc;
			continue;
		}
		m->streams[k].parser = trace_parser_new(&stream_ops, &feeds[k]);
		if (!m->streams[k].parser) {
			rc = -ENOMEM;
			goto out;
		}
		if (m->read_flags & TRACE_READ_SALVAGE)
			trace_parser_salvage(m->streams[k].parser);
	}
	if (rc)
		goto out;
	for (;;) {
		size_t pick = m->nnodes;
		uint64_t pick_key = 0;

		for (size_t k = 0; k < m->nnodes; k++) {
			struct stream *st = &m->streams[k];
			uint64_t t, key;

			if ((rc = stream_refill(m, k)))
				goto out;
			if (st->q.pos == st->q.len)
				continue;
			t = record_latest_time(st->q.buf + st->q.pos + 8, FIELD_CLOCK_MONO);
			/* Untimed records (strings, sink records) go with what
			 * comes before them in their own trace. */
			key = t ? (uint64_t)((int64_t)t + m->nodes[k].offset_ns) : st->last_key;
			if (pick == m->nnodes || key < pick_key) {
				pick = k;
				pick_key = key;
			}
		}
		if (pick == m->nnodes)
			break;
		struct stream *st = &m->streams[pick];
		uint32_t len;
		memcpy(&len, st->q.buf + st->q.pos, 4);
		if (len > sizeof(rec)) {
			rc = -EOVERFLOW;
			goto out;
		}
		memcpy(rec, st->q.buf + st->q.pos + 8, len);
		st->q.pos += 8 + ((len + 7) & ~(size_t)7);
		st->last_key = pick_key;
		struct fss_record_head *head = (void *)rec;
		if (head->source != FSS_SOURCE_NONE)
			head->source += m->nodes[pick].source_base;
		if (m->nodes[pick].offset_ns)
			record_shift_clock(rec, FIELD_CLOCK_MONO, m->nodes[pick].offset_ns);
		m->current = pick;
		if (ops->on_record && (rc = ops->on_record(ctx, head)))
			goto out;
	}
out:
	for (size_t k = 0; k < m->nnodes; k++) {
		struct stream *st = &m->streams[k];

		if (st->parser) {
			if (!st->eof)
				m->nodes[k].read_rc = trace_parser_finish(st->parser);
			stream_info(m, k);
			trace_parser_free(st->parser);
		} else if (m->nodes[k].read_rc) {
			snprintf(m->nodes[k].info.message, sizeof(m->nodes[k].info.message), "%s",
				 fss_strerror(m->nodes[k].read_rc));
			m->nodes[k].info.end = TRACE_END_NONE;
		}
		if (rc_rank(m->nodes[k].read_rc) > rc_rank(worst))
			worst = m->nodes[k].read_rc;
		if (st->fd >= 0)
			close(st->fd);
		free(st->q.buf);
	}
	free(m->streams);
	m->streams = NULL;
	free(feeds);
	return rc ? rc : worst;
}
