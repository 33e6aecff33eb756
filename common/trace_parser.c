/*
 * trace_parser.c - incremental, validating trace decoder.
 */
#include "common/trace_parser.h"

#include "common/crc32c.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum parse_state {
	WANT_FILE_HEADER,
	WANT_CHUNK_HEADER,
	WANT_PAYLOAD,
	FAILED,
};

struct trace_parser {
	struct trace_parser_ops ops;
	void *ctx;
	enum parse_state state;
	int error;
	uint64_t offset;      /* bytes consumed so far */
	uint64_t good_offset; /* end of the last complete chunk */
	uint64_t chunks;
	uint64_t records;
	struct fss_file_header header;
	struct fss_chunk_header chunk;
	unsigned char *buf;   /* header or payload being assembled */
	size_t have;          /* bytes of it assembled */
	size_t want;          /* bytes it needs */
	size_t cap;
	char message[256];
};

trace_parser_t *trace_parser_new(const struct trace_parser_ops *ops, void *ctx)
{
	trace_parser_t *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->ops = *ops;
	p->ctx = ctx;
	p->cap = FSS_CHUNK_DEFAULT_PAYLOAD;
	p->buf = malloc(p->cap);
	if (!p->buf) {
		free(p);
		return NULL;
	}
	p->state = WANT_FILE_HEADER;
	/* First read up to and including header_size, then the whole header. */
	p->want = offsetof(struct fss_file_header, flags);
	return p;
}

void trace_parser_free(trace_parser_t *p)
{
	if (!p)
		return;
	free(p->buf);
	free(p);
}

__attribute__((format(printf, 3, 4))) static int fail(trace_parser_t *p, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->message, sizeof(p->message), fmt, ap);
	va_end(ap);
	p->state = FAILED;
	p->error = err;
	return err;
}

static int grow(trace_parser_t *p, size_t need)
{
	unsigned char *nb;

	if (need <= p->cap)
		return 0;
	nb = realloc(p->buf, need);
	if (!nb)
		return fail(p, -ENOMEM, "out of memory for a %zu-byte chunk", need);
	p->buf = nb;
	p->cap = need;
	return 0;
}

/* The first 24 bytes are in: check magic, byte order, version, size. */
static int check_header_prefix(trace_parser_t *p)
{
	struct fss_file_header h;
	size_t size;

	memset(&h, 0, sizeof(h));
	memcpy(&h, p->buf, p->have);
	if (memcmp(h.magic, FSS_FILE_MAGIC, sizeof(h.magic)) != 0)
		return fail(p, FSS_E_NOT_TRACE, "offset 0: no FSSTRACE magic: not an fsdpscope trace");
	if (h.byte_order != FSS_BYTE_ORDER_MARK)
		return fail(p, FSS_E_ENDIAN, "offset 8: byte-order mark 0x%08x: written on a host of the other byte order",
			    h.byte_order);
	if (h.version_major != FSS_FORMAT_MAJOR)
		return fail(p, FSS_E_VERSION, "offset 12: format version %u.%u, this reader knows %u.x: use a newer fsdpscope",
			    h.version_major, h.version_minor, FSS_FORMAT_MAJOR);
	size = h.header_size;
	if (size < sizeof(struct fss_file_header) || size > 4096 || size % 8)
		return fail(p, FSS_E_CORRUPT, "offset 16: header size %zu is not valid", size);
	p->want = size;
	return grow(p, size);
}

static int finish_header(trace_parser_t *p)
{
	struct fss_file_header h;
	uint32_t crc;

	memcpy(&h, p->buf, sizeof(h));
	crc = crc32c(0, p->buf, offsetof(struct fss_file_header, crc));
	if (crc != h.crc)
		return fail(p, FSS_E_CORRUPT, "offset 0: file header checksum 0x%08x, expected 0x%08x", h.crc, crc);
	p->header = h;
	p->good_offset = p->offset;
	p->state = WANT_CHUNK_HEADER;
	p->have = 0;
	p->want = sizeof(struct fss_chunk_header);
	if (p->ops.on_header) {
		int rc = p->ops.on_header(p->ctx, &p->header);

		if (rc)
			return fail(p, rc, "stopped by the reader after the header");
	}
	return 0;
}

static int check_chunk_header(trace_parser_t *p)
{
	uint64_t at = p->offset - sizeof(struct fss_chunk_header);

	memcpy(&p->chunk, p->buf, sizeof(p->chunk));
	if (p->chunk.magic != FSS_CHUNK_MAGIC)
		return fail(p, FSS_E_CORRUPT, "offset %llu: chunk %llu: bad chunk magic 0x%08x",
			    (unsigned long long)at, (unsigned long long)p->chunks, p->chunk.magic);
	if (p->chunk.payload_bytes > FSS_CHUNK_MAX_PAYLOAD || p->chunk.payload_bytes % 8)
		return fail(p, FSS_E_CORRUPT, "offset %llu: chunk %llu: payload size %u is not valid",
			    (unsigned long long)at, (unsigned long long)p->chunks, p->chunk.payload_bytes);
	if (p->chunk.seq != p->chunks)
		return fail(p, FSS_E_CORRUPT, "offset %llu: chunk %llu: sequence number %llu out of order",
			    (unsigned long long)at, (unsigned long long)p->chunks, (unsigned long long)p->chunk.seq);
	p->state = WANT_PAYLOAD;
	p->have = 0;
	p->want = p->chunk.payload_bytes;
	return grow(p, p->want);
}

/* Deliver the records of a verified chunk. */
static int deliver_chunk(trace_parser_t *p)
{
	struct fss_chunk_header ch = p->chunk;
	uint64_t at = p->offset - ch.payload_bytes - sizeof(ch);
	uint32_t crc, expect = ch.crc;
	size_t pos = 0;
	uint32_t n = 0;
	/* Scratch for zero-extending records shorter than this version's struct. */
	_Alignas(8) unsigned char scratch[FSS_RECORD_MAX_BYTES];

	ch.crc = 0;
	crc = crc32c(crc32c(0, &ch, sizeof(ch)), p->buf, ch.payload_bytes);
	if (crc != expect)
		return fail(p, FSS_E_CORRUPT, "offset %llu: chunk %llu: checksum 0x%08x, expected 0x%08x",
			    (unsigned long long)at, (unsigned long long)p->chunks, expect, crc);
	/* Walk the records once to validate before delivering any. */
	while (pos < ch.payload_bytes) {
		struct fss_record_head head;

		if (ch.payload_bytes - pos < sizeof(head))
			break;
		memcpy(&head, p->buf + pos, sizeof(head));
		if (head.size < sizeof(head) || head.size % 8 || head.size > ch.payload_bytes - pos)
			break;
		pos += head.size;
		n++;
	}
	if (pos != ch.payload_bytes || n != ch.records)
		return fail(p, FSS_E_CORRUPT, "offset %llu: chunk %llu: records do not tile the payload (%u of %u declared)",
			    (unsigned long long)at, (unsigned long long)p->chunks, n, ch.records);
	for (pos = 0; pos < ch.payload_bytes;) {
		const struct fss_record_head *rec = (const void *)(p->buf + pos);
		size_t known = record_known_size(rec->type);
		int rc;

		if (known > rec->size) {
			memset(scratch, 0, sizeof(scratch));
			memcpy(scratch, rec, rec->size);
			rec = (const void *)scratch;
		}
		pos += ((const struct fss_record_head *)(p->buf + pos))->size;
		p->records++;
		rc = p->ops.on_record ? p->ops.on_record(p->ctx, rec) : 0;
		if (rc)
			return fail(p, rc, "stopped by the reader in chunk %llu", (unsigned long long)p->chunks);
	}
	p->chunks++;
	p->good_offset = p->offset;
	if (p->ops.on_chunk) {
		int rc = p->ops.on_chunk(p->ctx, ch.seq, ch.records, p->offset);

		if (rc)
			return fail(p, rc, "stopped by the reader after chunk %llu", (unsigned long long)ch.seq);
	}
	p->state = WANT_CHUNK_HEADER;
	p->have = 0;
	p->want = sizeof(struct fss_chunk_header);
	return 0;
}

/* A complete unit (header prefix, header, chunk header or payload) is in. */
static int step(trace_parser_t *p)
{
	switch (p->state) {
	case WANT_FILE_HEADER:
		if (p->want < sizeof(struct fss_file_header) && p->have == p->want) {
			int err = check_header_prefix(p);

			if (err)
				return err;
			return 0; /* now wants the whole header */
		}
		return finish_header(p);
	case WANT_CHUNK_HEADER:
		return check_chunk_header(p);
	case WANT_PAYLOAD:
		return deliver_chunk(p);
	case FAILED:
		break;
	}
	return p->error;
}

int trace_parser_feed(trace_parser_t *p, const void *data, size_t len)
{
	const unsigned char *in = data;

	while (p->state != FAILED) {
		size_t take = p->want - p->have;

		if (take > len)
			take = len;
		memcpy(p->buf + p->have, in, take);
		p->have += take;
		p->offset += take;
		in += take;
		len -= take;
		if (p->have < p->want)
			return 0; /* needs more input; len is 0 here */
		int err = step(p);

		if (err)
			return err;
		/* A zero-payload chunk is complete at once. */
		if (len == 0 && !(p->state == WANT_PAYLOAD && p->want == 0))
			return 0;
	}
	return p->error;
}

int trace_parser_finish(trace_parser_t *p)
{
	if (p->state == FAILED)
		return p->error;
	if (p->state == WANT_FILE_HEADER) {
		size_t n = p->have < 8 ? p->have : 8;

		if (p->offset == 0)
			return fail(p, FSS_E_TRUNCATED, "offset 0: empty: the writer died before writing the file header");
		if (memcmp(p->buf, FSS_FILE_MAGIC, n) != 0)
			return fail(p, FSS_E_NOT_TRACE, "offset 0: no FSSTRACE magic: not an fsdpscope trace");
		return fail(p, FSS_E_TRUNCATED, "offset %llu: file header truncated", (unsigned long long)p->offset);
	}
	if (p->state == WANT_CHUNK_HEADER && p->have == 0)
		return 0;
	if (p->state == WANT_CHUNK_HEADER)
		return fail(p, FSS_E_TRUNCATED, "offset %llu: chunk %llu truncated: %zu of %zu header bytes",
			    (unsigned long long)p->good_offset, (unsigned long long)p->chunks, p->have,
			    sizeof(struct fss_chunk_header));
	return fail(p, FSS_E_TRUNCATED, "offset %llu: chunk %llu truncated: %zu of %zu payload bytes",
		    (unsigned long long)p->good_offset, (unsigned long long)p->chunks, p->have, p->want);
}

const char *trace_parser_error(const trace_parser_t *p)
{
	return p->message;
}

uint64_t trace_parser_good_offset(const trace_parser_t *p)
{
	return p->good_offset;
}

uint64_t trace_parser_chunks(const trace_parser_t *p)
{
	return p->chunks;
}

uint64_t trace_parser_records(const trace_parser_t *p)
{
	return p->records;
}

const struct fss_file_header *trace_parser_header(const trace_parser_t *p)
{
	return p->state == WANT_FILE_HEADER ? NULL : &p->header;
}

int trace_read_file(const char *path, const struct trace_parser_ops *ops, void *ctx, char *errbuf, size_t errlen)
{
	unsigned char block[64 << 10];
	trace_parser_t *p;
	int fd, err = 0;

	if (errbuf && errlen)
		errbuf[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		if (errbuf)
			snprintf(errbuf, errlen, "%s", strerror(-err));
		return err;
	}
	p = trace_parser_new(ops, ctx);
	if (!p) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, block, sizeof(block));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			if (errbuf)
				snprintf(errbuf, errlen, "read failed at offset %llu: %s",
					 (unsigned long long)trace_parser_good_offset(p), strerror(-err));
			break;
		}
		if (n == 0) {
			err = trace_parser_finish(p);
			break;
		}
		err = trace_parser_feed(p, block, (size_t)n);
		if (err)
			break;
	}
	if (err && errbuf && trace_parser_error(p)[0])
		snprintf(errbuf, errlen, "%s", trace_parser_error(p));
	trace_parser_free(p);
	close(fd);
	return err;
}
