/*
 * ingest_fuzz.c - libFuzzer target for the collector's ingest.
 *
 * The input is a control byte and up to four streams: each stream starts at
 * a "FSSTRACE" magic (the first one at byte 1), so a seed is streams laid
 * end to end (tests/fuzz/ingest_fuzz_seed.c writes agent sinks that continue
 * one another) and mutations keep that shape. Each stream is a connection
 * (a socketpair given to ingest_add_fd); their bytes go in interleaved, in
 * pieces whose size comes from the control byte, the ingest polled between
 * pieces, some of them followed by a flush, and the output rotated halfway
 * when the control byte says so. What the ingest promises is then checked:
 * it never fails on bad input, the acks it wrote back only move forward,
 * and every output file is a closed trace that trace_read reads back
 * cleanly, holding as many records as the ingest says it wrote.
 *
 * Control byte: bit 0 recompute the checksums of every stream (as
 * trace_fuzz does, so that mutations reach records), bit 1 rotate halfway,
 * bit 2 flush after every piece, bits 3-7 the piece size.
 */
#include "collector/ingest.h"
#include "common/crc32c.h"
#include "tests/fuzz/fuzz_checksums.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"
#include "common/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define STREAMS_MAX 4

#define CHUNK_ENDS_MAX 4096

struct stream {
	uint8_t *data;
	size_t len, off;
	int fd;              /* our end; -1 once closed */
	/* the chunk ends of the stream, as a parser of its own reads them: an
	 * ack must name one */
	uint64_t end_chunks[CHUNK_ENDS_MAX], end_records[CHUNK_ENDS_MAX];
	size_t nends;
	struct wire_ack ack; /* the latest ack read back */
	size_t ack_have;
	unsigned char ack_buf[sizeof(struct wire_ack)];
};

static char out_dir[64];


static int on_chunk_end(void *ctx, uint64_t seq, uint32_t records, uint64_t offset)
{
	struct stream *s = ctx;

	(void)records;
	(void)offset;
	if (s->nends < CHUNK_ENDS_MAX) {
		s->end_chunks[s->nends] = seq + 1;
		s->nends++;
	}
	return 0;
}

static int on_any_record(void *ctx, const struct fss_record_head *rec)
{
	struct stream *s = ctx;

	(void)rec;
	/* counted into the entry the chunk's end will fill */
	if (s->nends < CHUNK_ENDS_MAX)
		s->end_records[s->nends]++;
	return 0;
}

/* Where the stream's chunks end: (chunks, records) pairs, cumulative. */
static void chunk_ends(struct stream *s)
{
	struct trace_parser_ops ops = {.on_record = on_any_record, .on_chunk = on_chunk_end};
	trace_parser_t *p = trace_parser_new(&ops, s);
	uint64_t total = 0;

	s->nends = 0;
	memset(s->end_records, 0, sizeof(s->end_records));
	if (!p)
		return;
	trace_parser_feed(p, s->data, s->len);
	trace_parser_free(p);
	for (size_t i = 0; i < s->nends; i++) {
		total += s->end_records[i];
		s->end_records[i] = total;
	}
}

/* An ack names a whole chunk end of the stream, or nothing yet (the ack
 * a connection gets at once). */
static int ack_names_chunk_end(const struct stream *s, const struct wire_ack *a)
{
	if (a->chunks == 0 && a->records == 0)
		return 1;
	for (size_t i = 0; i < s->nends; i++)
		if (s->end_chunks[i] == a->chunks && s->end_records[i] == a->records)
			return 1;
	return s->nends == CHUNK_ENDS_MAX; /* past what was kept: not checked */
}

/* Read the acks the ingest sent back: whole wire_acks, moving forward. */
static void acks_read(struct stream *s)
{
	for (;;) {
		ssize_t n = recv(s->fd, s->ack_buf + s->ack_have, sizeof(s->ack_buf) - s->ack_have, MSG_DONTWAIT);
		struct wire_ack a;

		if (n <= 0)
			return;
		s->ack_have += (size_t)n;
		if (s->ack_have < sizeof(a))
			continue;
		memcpy(&a, s->ack_buf, sizeof(a));
		s->ack_have = 0;
		if (a.magic != WIRE_ACK_MAGIC || a.reserved != 0 || a.chunks < s->ack.chunks ||
		    a.records < s->ack.records || !ack_names_chunk_end(s, &a))
			__builtin_trap();
		s->ack = a;
	}
}

/* The ingest must never fail on its inputs. */
static void must(int rc)
{
	if (rc < 0 && rc != -ENOMEM)
		__builtin_trap();
}

/* A closed trace that reads back whole, with `records` records besides its
 * trace_end. */
static uint64_t check_file(const char *path)
{
	struct trace_parser_ops none = {0};
	struct trace_read_info info;
	int rc = trace_read(path, &none, NULL, &info);

	if (rc != 0 || info.end != TRACE_END_CLEAN || info.damage.gaps)
		__builtin_trap();
	return info.records - 1;
}

static size_t split(const uint8_t *d, size_t size, struct stream *st)
{
	size_t n = 0, start = 0;

	for (size_t i = 1; i + 8 <= size && n + 1 < STREAMS_MAX; i++) {
		if (memcmp(d + i, FSS_FILE_MAGIC, 8) == 0) {
			st[n].data = (uint8_t *)d + start;
			st[n++].len = i - start;
			start = i;
		}
	}
	st[n].data = (uint8_t *)d + start;
	st[n++].len = size - start;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t size)
{
	static struct stream st[STREAMS_MAX];
	const struct ingest_stats *stats;
	char out[128], out2[128];
	uint8_t *data;
	size_t n, piece, left, sent = 0, total;
	int rotate, flush_each, rotated = 0;
	ingest_t *ing;

	if (size < 1)
		return 0;
	if (!out_dir[0]) {
		snprintf(out_dir, sizeof(out_dir), "/tmp/fss_ingest_fuzz.XXXXXX");
		if (!mkdtemp(out_dir))
			abort();
	}
	data = malloc(size);
	if (!data)
		return 0;
	memcpy(data, input, size);
	rotate = data[0] & 2;
	flush_each = data[0] & 4;
	/* small pieces cut chunks everywhere; larger ones keep the run fast */
	piece = data[0] >> 3 ? (size_t)(data[0] >> 3) * 211 : 7;
	memset(st, 0, sizeof(st));
	n = split(data + 1, size - 1, st);
	snprintf(out, sizeof(out), "%s/out.fss", out_dir);
	snprintf(out2, sizeof(out2), "%s/out2.fss", out_dir);
	if (ingest_new(&ing, out, &(struct ingest_options){.chunk_payload = 4096, .flush_ms = 1}) != 0) {
		free(data);
		return 0;
	}
	total = 0;
	for (size_t i = 0; i < n; i++) {
		int sv[2];

		if (data[0] & 1)
			fix_checksums(st[i].data, st[i].len);
		chunk_ends(&st[i]);
		total += st[i].len;
		st[i].fd = -1;
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
			continue;
		fcntl(sv[0], F_SETFL, O_NONBLOCK);
		if (ingest_add_fd(ing, sv[1], NULL) != 0) {
			close(sv[0]);
			continue;
		}
		st[i].fd = sv[0];
	}
	/* interleave: a piece of each stream in turn */
	for (left = n; left > 0;) {
		left = 0;
		for (size_t i = 0; i < n; i++) {
			struct stream *s = &st[i];
			size_t k = s->len - s->off < piece ? s->len - s->off : piece;
			ssize_t w;

			if (s->fd < 0 || s->off == s->len)
				continue;
			w = send(s->fd, s->data + s->off, k, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w > 0) {
				s->off += (size_t)w;
				sent += (size_t)w;
			} else if (w < 0 && errno != EAGAIN) {
				s->off = s->len; /* the ingest cut it */
			}
			must(ingest_poll(ing, 0));
			if (flush_each)
				must(ingest_flush(ing));
			acks_read(s);
			if (rotate && !rotated && sent * 2 >= total) {
				must(ingest_rotate(ing, out2));
				rotated = 1;
			}
			left += s->off < s->len;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (st[i].fd >= 0)
			shutdown(st[i].fd, SHUT_WR);
	/* the ingest reads every stream to its end */
	for (int round = 0; round < 10000 && ingest_open_connections(ing) > 0; round++) {
		must(ingest_poll(ing, 1));
		for (size_t i = 0; i < n; i++)
			if (st[i].fd >= 0)
				acks_read(&st[i]);
	}
	if (ingest_open_connections(ing) > 0)
		__builtin_trap();
	must(ingest_finish(ing, &stats));
	{
		uint64_t records = check_file(rotated ? out2 : out);

		if (rotated)
			records += check_file(out);
		if (records != stats->records)
			__builtin_trap();
	}
	ingest_free(ing);
	for (size_t i = 0; i < n; i++)
		if (st[i].fd >= 0)
			close(st[i].fd);
	unlink(out);
	unlink(out2);
	free(data);
	return 0;
}
