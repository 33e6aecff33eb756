/*
 * ingest_live_test.c - collector/ingest as a live session uses it: the
 * record callback and the session's own records, acks on the return
 * channel, one source per process across sinks (a connection continued by
 * another, a dead collector's partial trace continued by a connection, a
 * failover file resent inside a connection), rotation, and TCP keys.
 *
 * Every stream is made here (hello, sink record, preamble, repeats,
 * collectives with seq 1..N) and fed through a socketpair with
 * ingest_add_fd(), so the test decides exactly what the ingest has seen
 * when. Waits are for conditions (an ack, a count), never for time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/analysis.h"
#include "collector/analyze.h"
#include "collector/analyze_traces.h"
#include "collector/ingest.h"
#include "common/record.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "common/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SLOT 128
#define MAX_RECS 40000
#define MAX_CHUNKS 4096
#define PROCESS_A 0x1111222233334444ull
#define PROCESS_B 0x5555666677778888ull
#define COMM_HANDLE 0xc0ffeeull
#define CHUNK 1024u

static char tmpdir[64];

/* ---- making sinks ----------------------------------------------------- */

/* One sink of a process: its records, index = position (hello is 0). */
struct sinkb {
	unsigned char (*r)[SLOT];
	size_t n;
};

/* A sink's records as a stream, with where its chunks end. */
struct stream {
	unsigned char *bytes;
	size_t len;
	size_t chunk_end[MAX_CHUNKS];     /* byte offset past chunk i */
	size_t chunk_records[MAX_CHUNKS]; /* records in chunks 0..i (trace_end included) */
	size_t nchunks;
};

static void sink_add(struct sinkb *b, const void *rec)
{
	const struct fss_record_head *h = rec;

	assert_true(b->n < MAX_RECS);
	assert_true(h->size <= SLOT);
	if (!b->r) {
		b->r = calloc(MAX_RECS, SLOT);
		assert_non_null(b->r);
	}
	memset(b->r[b->n], 0, SLOT);
	memcpy(b->r[b->n++], rec, h->size);
}

static void sink_string(struct sinkb *b, uint32_t id, const char *text)
{
	struct fss_rec_string s;

	record_init(&s, FSS_REC_STRING, sizeof(s), 0);
	s.id = id;
	s.total_len = (uint16_t)strlen(text);
	memcpy(s.text, text, strlen(text));
	sink_add(b, &s);
}

/*
 * Start sink `serial` of process `pid`: hello, sink record, a preamble of
 * three records (two strings, the communicator), then records
 * [rf, rf + rc) of `prev` (NULL: none).
 */
static void sink_start(struct sinkb *b, uint64_t pid, uint32_t serial, uint16_t kind, const struct sinkb *prev,
		       uint32_t prev_serial, uint16_t prev_kind, uint64_t rf, uint64_t rc)
{
	struct fss_rec_process_hello h;
	struct fss_rec_sink k;
	struct fss_rec_comm c;

	memset(b, 0, sizeof(*b));
	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), 0);
	h.pid = pid == PROCESS_A ? 4001 : 4002;
	h.rank = pid == PROCESS_A ? 0 : 1;
	h.local_rank = h.world_size = h.slurm_procid = h.ompi_rank = -1;
	h.host = 1;
	h.command = 2;
	h.path = FSS_PATH_SYNTHETIC;
	h.mono_ns = 1000 + serial;
	h.realtime_ns = 2000 + serial;
	sink_add(b, &h);
	record_init(&k, FSS_REC_SINK, sizeof(k), 0);
	k.process_id = pid;
	k.serial = serial;
	k.kind = kind;
	k.preamble = 3;
	k.prev_serial = prev_serial;
	k.prev_kind = prev_kind;
	k.repeat_first = rf;
	k.repeat_count = rc;
	sink_add(b, &k);
	sink_string(b, 1, "node-1");
	sink_string(b, 2, "train.py");
	record_init(&c, FSS_REC_COMM, sizeof(c), 0);
	c.comm = COMM_HANDLE;
	c.id_hash = 0xabcdef;
	c.nranks = 2;
	c.rank = h.rank;
	c.device = -1;
	c.color = c.key = -1;
	c.event = FSS_COMM_INIT;
	c.enter_ns = 10;
	c.exit_ns = 11;
	sink_add(b, &c);
	for (uint64_t i = 0; i < rc; i++) {
		assert_non_null(prev);
		assert_true(rf + i < prev->n);
		sink_add(b, prev->r[rf + i]);
	}
}

static void sink_colls(struct sinkb *b, uint64_t first_seq, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		struct fss_rec_collective c;

		record_init(&c, FSS_REC_COLLECTIVE, sizeof(c), 0);
		c.seq = first_seq + i;
		c.comm = COMM_HANDLE;
		c.count = 1024;
		c.bytes = 2048;
		c.enter_ns = 100 + 10 * c.seq;
		c.exit_ns = c.enter_ns + 5;
		c.peer = -1;
		c.op = FSS_OP_ALLGATHER;
		c.dtype = FSS_DTYPE_BFLOAT16;
		c.redop = FSS_REDOP_NONE;
		c.path = FSS_PATH_SYNTHETIC;
		sink_add(b, &c);
	}
}

static void sink_free(struct sinkb *b)
{
	free(b->r);
}

static int stream_on_chunk(void *ctx, uint64_t seq, uint32_t records, uint64_t offset)
{
	struct stream *s = ctx;

	(void)records;
	assert_true(seq < MAX_CHUNKS);
	s->chunk_end[seq] = (size_t)offset;
	s->chunk_records[seq] = (seq ? s->chunk_records[seq - 1] : 0) + records;
	s->nchunks = (size_t)seq + 1;
	return 0;
}

/* The sink's records as the agent sends them, chunks of CHUNK bytes. */
static void stream_make(struct stream *s, const struct sinkb *b)
{
	struct trace_writer_options opts = {.chunk_payload = CHUNK};
	struct trace_parser_ops ops = {.on_chunk = stream_on_chunk};
	trace_parser_t *p;
	trace_writer_t *w;
	FILE *f = tmpfile();
	struct stat st;

	memset(s, 0, sizeof(*s));
	assert_non_null(f);
	assert_int_equal(trace_writer_open_fd(&w, fileno(f), &opts), 0);
	for (size_t i = 0; i < b->n; i++)
		assert_int_equal(trace_writer_append(w, b->r[i]), 0);
	assert_int_equal(trace_writer_close(w), 0);
	assert_int_equal(fstat(fileno(f), &st), 0);
	s->len = (size_t)st.st_size;
	s->bytes = malloc(s->len);
	assert_non_null(s->bytes);
	assert_int_equal(pread(fileno(f), s->bytes, s->len, 0), (ssize_t)s->len);
	fclose(f);
	p = trace_parser_new(&ops, s);
	assert_non_null(p);
	assert_int_equal(trace_parser_feed(p, s->bytes, s->len), 0);
	assert_int_equal(trace_parser_finish(p), 0);
	trace_parser_free(p);
}

/* The sink written as a trace file at path (a failover file). */
static void sink_file(const struct sinkb *b, const char *path)
{
	struct trace_writer_options opts = {.chunk_payload = CHUNK};
	trace_writer_t *w;

	assert_int_equal(trace_writer_open(&w, path, &opts), 0);
	for (size_t i = 0; i < b->n; i++)
		assert_int_equal(trace_writer_append(w, b->r[i]), 0);
	assert_int_equal(trace_writer_close(w), 0);
}

/* ---- driving the ingest -------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A connection: our end `fd` plays the agent. */
static int connect_pair(ingest_t *ing, const char *origin)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(ingest_add_fd(ing, sv[1], origin), 0);
	assert_int_equal(fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK), 0);
	return sv[0];
}

/* Send bytes to the ingest, polling it while the socket is full. */
static void push(ingest_t *ing, int fd, const void *data, size_t len)
{
	const unsigned char *p = data;
	int64_t deadline = now_ms() + 20000;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			assert_true(now_ms() < deadline);
			assert_true(ingest_poll(ing, 10) >= 0);
			continue;
		}
		if (n <= 0)
			fprintf(stderr, "push: %s\n", strerror(errno));
		assert_true(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

/* The latest ack on fd, if any arrived; returns 1 when one did. */
static int ack_read(int fd, struct wire_ack *last)
{
	struct wire_ack a;
	int got = 0;

	for (;;) {
		ssize_t n = recv(fd, &a, sizeof(a), MSG_DONTWAIT | MSG_PEEK);

		if (n < (ssize_t)sizeof(a))
			return got;
		assert_int_equal(recv(fd, &a, sizeof(a), MSG_DONTWAIT), sizeof(a));
		assert_int_equal(a.magic, WIRE_ACK_MAGIC);
		assert_int_equal(a.reserved, 0);
		if (got)
			assert_true(a.chunks >= last->chunks); /* acks only move forward */
		*last = a;
		got = 1;
	}
}

/* Poll and flush until the ingest acks `chunks` chunks on fd. */
static void wait_ack(ingest_t *ing, int fd, uint64_t chunks, struct wire_ack *last)
{
	int64_t deadline = now_ms() + 20000;

	for (;;) {
		assert_true(ingest_poll(ing, 10) >= 0);
		assert_int_equal(ingest_flush(ing), 0);
		if (ack_read(fd, last) && last->chunks >= chunks)
			break;
		assert_true(now_ms() < deadline);
	}
	assert_int_equal(last->chunks, chunks);
}

/* Close our end and poll until the ingest has closed its end. */
static void hang_up(ingest_t *ing, int fd)
{
	int64_t deadline = now_ms() + 20000;
	size_t open = ingest_open_connections(ing);

	assert_true(open > 0);
	close(fd);
	while (ingest_open_connections(ing) >= open) {
		assert_true(now_ms() < deadline);
		assert_true(ingest_poll(ing, 10) >= 0);
	}
}

/* ---- reading the output ------------------------------------------------ */

#define MAX_OUT_SOURCES 8

struct outrecs {
	uint32_t nsources;
	uint64_t hellos[MAX_OUT_SOURCES];
	uint64_t sinks[MAX_OUT_SOURCES];
	uint64_t strings[MAX_OUT_SOURCES];
	uint64_t comms[MAX_OUT_SOURCES];
	uint64_t *seqs[MAX_OUT_SOURCES];  /* collective seqs in file order */
	size_t nseqs[MAX_OUT_SOURCES];
	uint64_t records;
	uint64_t type15;                  /* the session's own records */
};

static int out_on_record(void *ctx, const struct fss_record_head *rec)
{
	struct outrecs *o = ctx;

	if (rec->source == FSS_SOURCE_NONE) {
		if (rec->type == 15)
			o->type15++;
		return 0;
	}
	o->records++;
	assert_true(rec->source < MAX_OUT_SOURCES);
	if (rec->source >= o->nsources)
		o->nsources = rec->source + 1;
	if (rec->type == FSS_REC_PROCESS_HELLO)
		o->hellos[rec->source]++;
	if (rec->type == FSS_REC_SINK)
		o->sinks[rec->source]++;
	if (rec->type == FSS_REC_STRING)
		o->strings[rec->source]++;
	if (rec->type == FSS_REC_COMM)
		o->comms[rec->source]++;
	if (rec->type == FSS_REC_COLLECTIVE) {
		uint64_t **v = &o->seqs[rec->source];

		*v = realloc(*v, (o->nseqs[rec->source] + 1) * sizeof(**v));
		assert_non_null(*v);
		(*v)[o->nseqs[rec->source]++] = ((const struct fss_rec_collective *)rec)->seq;
	}
	return 0;
}

/* Read a trace that must have been closed cleanly. */
static void out_read(struct outrecs *o, const char *path)
{
	struct trace_parser_ops ops = {.on_record = out_on_record};
	struct trace_read_info info;

	memset(o, 0, sizeof(*o));
	assert_int_equal(trace_read(path, &ops, o, &info), 0);
	assert_int_equal(info.end, TRACE_END_CLEAN);
}

static void out_free(struct outrecs *o)
{
	for (int i = 0; i < MAX_OUT_SOURCES; i++)
		free(o->seqs[i]);
}

/* Source src holds the collectives first..last, each once, in order. */
static void assert_seqs(const struct outrecs *o, uint32_t src, uint64_t first, uint64_t last)
{
	assert_true(src < o->nsources);
	assert_int_equal(o->nseqs[src], last - first + 1);
	for (size_t i = 0; i < o->nseqs[src]; i++)
		assert_int_equal(o->seqs[src][i], first + i);
}

static void path_in(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* ---- tests --------------------------------------------------------------- */

/* What the record callback saw, for comparison with the file. */
struct seen {
	unsigned char *bytes;
	size_t len;
	uint64_t n, left_out, markers;
	int views_ok;
};

static int seen_on_record(void *ctx, const struct fss_record_head *rec, const struct source *src)
{
	struct seen *s = ctx;

	if (!src || src->id != rec->source)
		s->views_ok = 0;
	if (rec->type == FSS_REC_SINK && ((const struct fss_rec_sink *)rec)->serial ==
					     ((const struct fss_rec_sink *)rec)->prev_serial)
		s->markers++; /* the ingest's own: where the file skips records */
	else
		s->n++;
	if (rec->type == FSS_REC_COLLECTIVE && ((const struct fss_rec_collective *)rec)->seq % 5 == 0) {
		s->left_out++;
		return 1; /* a keep policy: every fifth collective stays out of the file */
	}
	s->bytes = realloc(s->bytes, s->len + rec->size);
	assert_non_null(s->bytes);
	memcpy(s->bytes + s->len, rec, rec->size);
	s->len += rec->size;
	return 0;
}

struct filerecs {
	unsigned char *bytes;
	size_t len;
	uint32_t flags, keep_steps; /* the header's */
	uint64_t markers;
};

static int file_on_header(void *ctx, const struct fss_file_header *h)
{
	struct filerecs *f = ctx;

	f->flags = h->flags;
	f->keep_steps = h->keep_steps;
	return 0;
}

static int file_on_record(void *ctx, const struct fss_record_head *rec)
{
	struct filerecs *f = ctx;

	if (rec->type == FSS_REC_TRACE_END || rec->type == 15)
		return 0;
	if (rec->type == FSS_REC_SINK && ((const struct fss_rec_sink *)rec)->serial ==
					     ((const struct fss_rec_sink *)rec)->prev_serial) {
		f->markers++; /* the ingest's own, to the file only */
		return 0;
	}
	f->bytes = realloc(f->bytes, f->len + rec->size);
	assert_non_null(f->bytes);
	memcpy(f->bytes + f->len, rec, rec->size);
	f->len += rec->size;
	return 0;
}

/*
 * Two processes on two connections: the callback sees every record in
 * output order with the output's source numbers and a view of that source;
 * what it keeps is exactly the file's records, in the same order; what it
 * leaves out is counted; the session's own record lands in the file.
 */
static void test_on_record_and_write_record(void **state)
{
	struct sinkb a, b;
	struct stream sa, sb;
	struct seen seen = {.views_ok = 1};
	struct filerecs file = {0};
	struct outrecs o;
	const struct ingest_stats *st;
	struct trace_parser_ops ops = {.on_header = file_on_header, .on_record = file_on_record};
	struct ingest_options opts = {.keep_flags = FSS_FILE_KEEP_LAST, .keep_steps = 7};
	struct fss_record_head own[3];
	char out[128];
	ingest_t *ing;
	int fa, fb;

	(void)state;
	sink_start(&a, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&a, 1, 40);
	sink_start(&b, PROCESS_B, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&b, 1, 30);
	stream_make(&sa, &a);
	stream_make(&sb, &b);
	path_in(out, sizeof(out), "callback.fss");
	assert_int_equal(ingest_new(&ing, out, &opts), 0);
	ingest_on_record(ing, seen_on_record, &seen);
	fa = connect_pair(ing, "agent a");
	fb = connect_pair(ing, "agent b");
	push(ing, fa, sa.bytes, sa.len / 2);
	push(ing, fb, sb.bytes, sb.len);
	push(ing, fa, sa.bytes + sa.len / 2, sa.len - sa.len / 2);
	hang_up(ing, fa);
	hang_up(ing, fb);
	memset(own, 0, sizeof(own));
	own[0].type = 15;
	own[0].size = sizeof(own);
	own[0].source = FSS_SOURCE_NONE;
	assert_int_equal(ingest_write_record(ing, own), 0);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->sources, 2);
	assert_int_equal(st->ndamaged, 0);
	assert_true(seen.views_ok);
	assert_int_equal(seen.n, a.n + b.n);
	assert_int_equal(seen.markers, 0);
	assert_int_equal(seen.left_out, 8 + 6);
	assert_int_equal(st->records_left_out, 8 + 6);
	assert_int_equal(st->by_type[FSS_REC_COLLECTIVE], 70); /* counted as received */
	assert_int_equal(st->per_source[0].records + st->per_source[1].records, a.n + b.n);
	/* the file: exactly what the callback kept, in its order */
	assert_int_equal(trace_read_file(out, &ops, &file, NULL, 0), 0);
	assert_int_equal(file.flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY), FSS_FILE_KEEP_LAST);
	assert_int_equal(file.keep_steps, 7);
	/* records left out cost a resume marker per source and output chunk at
	 * most, not one per hole (14 holes here, one chunk) */
	assert_true(file.markers >= 1 && file.markers <= 2);
	assert_int_equal(file.len, seen.len);
	assert_memory_equal(file.bytes, seen.bytes, seen.len);
	out_read(&o, out);
	assert_int_equal(o.type15, 1);
	assert_int_equal(o.nsources, 2);
	assert_int_equal(o.nseqs[0] + o.nseqs[1], 70 - 14);
	out_free(&o);
	ingest_free(ing);
	free(seen.bytes);
	free(file.bytes);
	free(sa.bytes);
	free(sb.bytes);
	sink_free(&a);
	sink_free(&b);
}

static int count_on_record(void *ctx, const struct fss_record_head *rec, const struct source *src)
{
	(void)rec;
	(void)src;
	++*(uint64_t *)ctx;
	return 0;
}

/*
 * Acks come only after a write, and cover exactly the whole chunks of the
 * stream that are in the file: none while the output's chunk is pending
 * (flush_ms far away), then the complete chunks sent, never a chunk the
 * ingest has only part of.
 */
static void test_acks_after_flush(void **state)
{
	struct ingest_options opts = {.flush_ms = 3600u * 1000u};
	struct sinkb a;
	struct stream s;
	struct wire_ack ack = {0};
	uint64_t seen = 0;
	int64_t deadline;
	const struct ingest_stats *st;
	char out[128];
	size_t cut;
	ingest_t *ing;
	int fd;

	(void)state;
	sink_start(&a, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&a, 1, 200);
	stream_make(&s, &a);
	assert_true(s.nchunks > 10);
	path_in(out, sizeof(out), "acks.fss");
	assert_int_equal(ingest_new(&ing, out, &opts), 0);
	ingest_on_record(ing, count_on_record, &seen);
	fd = connect_pair(ing, "agent");
	/* the ack of nothing comes at once: this collector acks */
	assert_int_equal(ack_read(fd, &ack), 1);
	assert_int_equal(ack.chunks, 0);
	assert_int_equal(ack.records, 0);
	/* five chunks and half of the sixth */
	cut = s.chunk_end[4] + (s.chunk_end[5] - s.chunk_end[4]) / 2;
	push(ing, fd, s.bytes, cut);
	deadline = now_ms() + 20000;
	while (seen < s.chunk_records[4]) {
		assert_true(now_ms() < deadline);
		assert_true(ingest_poll(ing, 10) >= 0);
	}
	assert_int_equal(seen, s.chunk_records[4]);
	assert_int_equal(ack_read(fd, &ack), 0); /* nothing is on disk yet: no ack */
	assert_int_equal(ingest_flush(ing), 0);
	assert_int_equal(ack_read(fd, &ack), 1);
	assert_int_equal(ack.chunks, 5);
	assert_int_equal(ack.records, s.chunk_records[4]);
	/* the rest, but for the trace_end's chunk */
	push(ing, fd, s.bytes + cut, s.chunk_end[s.nchunks - 2] - cut);
	wait_ack(ing, fd, s.nchunks - 1, &ack);
	assert_int_equal(ack.records, s.chunk_records[s.nchunks - 2]);
	hang_up(ing, fd);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_true(st->acks_sent >= 2);
	ingest_free(ing);
	free(s.bytes);
	sink_free(&a);
}

/*
 * The flush interval alone (no ingest_flush call) writes and acks every
 * chunk sent, the records left in the output's pending chunk after the
 * writer wrote a full one included.
 */
static void test_acks_by_interval(void **state)
{
	struct ingest_options opts = {.flush_ms = 1};
	struct sinkb a;
	struct stream s;
	struct wire_ack ack = {0};
	int64_t deadline;
	char out[128];
	ingest_t *ing;
	int fd;

	(void)state;
	sink_start(&a, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&a, 1, 100);
	stream_make(&s, &a);
	/* output chunks of many sizes, so that in some the stream's last record
	 * sent fills one (and waits alone in the next) */
	for (uint32_t size = 512; size < 1600; size += 8) {
		opts.chunk_payload = size;
		path_in(out, sizeof(out), "interval.fss");
		assert_int_equal(ingest_new(&ing, out, &opts), 0);
		fd = connect_pair(ing, "agent");
		push(ing, fd, s.bytes, s.chunk_end[s.nchunks - 2]);
		memset(&ack, 0, sizeof(ack));
		deadline = now_ms() + 20000;
		while (!ack_read(fd, &ack) || ack.chunks < s.nchunks - 1) {
			assert_true(now_ms() < deadline);
			assert_true(ingest_poll(ing, 10) >= 0);
		}
		assert_int_equal(ack.chunks, s.nchunks - 1);
		assert_int_equal(ack.records, s.chunk_records[s.nchunks - 2]);
		close(fd);
		ingest_free(ing);
	}
	free(s.bytes);
	sink_free(&a);
}

/*
 * More than 1 MiB unacknowledged makes the ingest write and ack at once,
 * without a flush call and with the flush interval far away.
 */
static void test_ack_at_one_mib(void **state)
{
	struct ingest_options opts = {.flush_ms = 3600u * 1000u};
	struct sinkb a;
	struct stream s;
	struct wire_ack ack = {0};
	int64_t deadline;
	char out[128];
	size_t chunk;
	ingest_t *ing;
	int fd, found = 0;

	(void)state;
	sink_start(&a, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&a, 1, 14000); /* 1.4 MiB */
	stream_make(&s, &a);
	path_in(out, sizeof(out), "mib.fss");
	assert_int_equal(ingest_new(&ing, out, &opts), 0);
	fd = connect_pair(ing, "agent");
	push(ing, fd, s.bytes, s.chunk_end[s.nchunks - 2]);
	deadline = now_ms() + 20000;
	while (!ack_read(fd, &ack)) {
		assert_true(now_ms() < deadline);
		assert_true(ingest_poll(ing, 10) >= 0);
	}
	/* a whole chunk of the stream, past the first MiB */
	for (chunk = 0; chunk < s.nchunks; chunk++)
		if (ack.chunks == chunk + 1 && ack.records == s.chunk_records[chunk])
			found = 1;
	assert_true(found);
	assert_true(s.chunk_end[ack.chunks - 1] > (1u << 20));
	close(fd);
	ingest_free(ing);
	free(s.bytes);
	sink_free(&a);
}

/*
 * A connection's stream continued by a second connection: the first sent
 * 40 collectives, the ingest acked some, the connection broke after more
 * (sent, not acked); the second repeats everything from the ack and goes
 * on. One output source, collectives 1..N once each, one hello.
 */
static void test_continue_connection(void **state)
{
	struct sinkb s1, s2;
	struct stream t1, t2;
	struct wire_ack ack = {0};
	const struct ingest_stats *st;
	struct outrecs o;
	char out[128];
	ingest_t *ing;
	int fd;

	(void)state;
	sink_start(&s1, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&s1, 1, 60);
	stream_make(&t1, &s1);
	path_in(out, sizeof(out), "continue.fss");
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	fd = connect_pair(ing, "socket 1");
	push(ing, fd, t1.bytes, t1.chunk_end[3]);
	wait_ack(ing, fd, 4, &ack);
	/* two more chunks and a piece of the next, never acked */
	push(ing, fd, t1.bytes + t1.chunk_end[3], t1.chunk_end[5] + 30 - t1.chunk_end[3]);
	/* the agent's next sink repeats what was not acked (all of s1 after the ack) */
	sink_start(&s2, PROCESS_A, 2, FSS_SINK_SOCKET, &s1, 1, FSS_SINK_SOCKET, ack.records, s1.n - ack.records);
	sink_colls(&s2, 61, 25);
	stream_make(&t2, &s2);
	{
		int fd2 = connect_pair(ing, "socket 2");

		push(ing, fd2, t2.bytes, t2.len);
		hang_up(ing, fd2);
	}
	hang_up(ing, fd);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->sources, 1);
	assert_int_equal(st->sinks_merged, 1);
	assert_int_equal(st->per_source[0].sinks, 2);
	/* what the first connection had sent after the ack came again */
	assert_true(st->repeats_skipped >= t1.chunk_records[5] - ack.records);
	out_read(&o, out);
	assert_int_equal(o.nsources, 1);
	assert_int_equal(o.hellos[0], 1);
	assert_seqs(&o, 0, 1, 85);
	out_free(&o);
	ingest_free(ing);
	free(t1.bytes);
	free(t2.bytes);
	sink_free(&s1);
	sink_free(&s2);
}

/*
 * A dead collector's partial trace (it flushed, acked, and died) read by a
 * new collector, then the process's next sink on a connection repeating
 * from the dead collector's ack: one source, every collective once. The
 * same partial trace read a second time changes nothing.
 */
static void test_continue_partial_trace(void **state)
{
	struct sinkb s1, s2, other;
	struct stream t1, t2, to;
	struct wire_ack ack = {0}, lost = {0};
	const struct ingest_stats *st;
	struct outrecs o;
	char out[128], dead[128], partial[160], cmd[400];
	ingest_t *ing;
	int fd, fo;

	(void)state;
	sink_start(&s1, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&s1, 1, 100);
	stream_make(&t1, &s1);
	assert_true(t1.nchunks > 8);
	sink_start(&other, PROCESS_B, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&other, 1, 20);
	stream_make(&to, &other);
	/* the collector that dies: it has a second process too */
	path_in(out, sizeof(out), "dying.fss");
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	fo = connect_pair(ing, "other");
	push(ing, fo, to.bytes, to.len);
	hang_up(ing, fo);
	fd = connect_pair(ing, "socket 1");
	push(ing, fd, t1.bytes, t1.chunk_end[4]);
	wait_ack(ing, fd, 5, &ack);
	/* two chunks more, written to the file, their acks lost on the way */
	push(ing, fd, t1.bytes + t1.chunk_end[4], t1.chunk_end[6] - t1.chunk_end[4]);
	wait_ack(ing, fd, 7, &lost);
	/* what a SIGKILL leaves: the .partial as it is on disk now */
	snprintf(partial, sizeof(partial), "%s.partial", out);
	path_in(dead, sizeof(dead), "dead.fss");
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", partial, dead);
	assert_int_equal(system(cmd), 0);
	close(fd);
	ingest_free(ing);

	sink_start(&s2, PROCESS_A, 2, FSS_SINK_SOCKET, &s1, 1, FSS_SINK_SOCKET, ack.records, s1.n - ack.records);
	sink_colls(&s2, 101, 30);
	stream_make(&t2, &s2);
	path_in(out, sizeof(out), "restarted.fss");
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	assert_int_equal(ingest_add_file(ing, dead), 0);
	fd = connect_pair(ing, "socket 2");
	push(ing, fd, t2.bytes, t2.len);
	hang_up(ing, fd);
	assert_int_equal(ingest_add_file(ing, dead), 0);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->sources, 2);
	out_read(&o, out);
	assert_int_equal(o.nsources, 2);
	assert_int_equal(o.hellos[0] + o.hellos[1], 2);
	/* the dead collector wrote process B first */
	assert_seqs(&o, 0, 1, 20);
	assert_seqs(&o, 1, 1, 130);
	out_free(&o);
	ingest_free(ing);
	free(t1.bytes);
	free(t2.bytes);
	free(to.bytes);
	sink_free(&s1);
	sink_free(&s2);
	sink_free(&other);
}

/*
 * A dead collector had merged two sinks of a process (the second repeating
 * the first) and acked part of the second; a new collector reads its
 * partial trace, and the third sink repeats the second from that ack: the
 * partial trace's resume marker tells the new collector where the second
 * sink's records stand, so every collective is there once.
 */
static void test_continue_merged_partial(void **state)
{
	struct sinkb s1, s2, s3;
	struct stream t1, t2, t3;
	struct wire_ack ack1 = {0}, ack2 = {0}, lost = {0};
	const struct ingest_stats *st;
	struct outrecs o;
	char out[128], dead[128], cmd[400];
	ingest_t *ing;
	int fd;

	(void)state;
	sink_start(&s1, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&s1, 1, 40);
	stream_make(&t1, &s1);
	path_in(out, sizeof(out), "dying2.fss");
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	fd = connect_pair(ing, "socket 1");
	push(ing, fd, t1.bytes, t1.chunk_end[2]);
	wait_ack(ing, fd, 3, &ack1);
	hang_up(ing, fd);
	sink_start(&s2, PROCESS_A, 2, FSS_SINK_SOCKET, &s1, 1, FSS_SINK_SOCKET, ack1.records, s1.n - ack1.records);
	sink_colls(&s2, 41, 60);
	stream_make(&t2, &s2);
	fd = connect_pair(ing, "socket 2");
	push(ing, fd, t2.bytes, t2.chunk_end[t2.nchunks / 2]);
	wait_ack(ing, fd, t2.nchunks / 2 + 1, &ack2);
	/* a chunk more, written to the file, its ack lost on the way */
	push(ing, fd, t2.bytes + t2.chunk_end[t2.nchunks / 2],
	     t2.chunk_end[t2.nchunks / 2 + 1] - t2.chunk_end[t2.nchunks / 2]);
	wait_ack(ing, fd, t2.nchunks / 2 + 2, &lost);
	path_in(dead, sizeof(dead), "dead2.fss");
	snprintf(cmd, sizeof(cmd), "cp '%s.partial' '%s'", out, dead);
	assert_int_equal(system(cmd), 0);
	close(fd);
	ingest_free(ing);

	sink_start(&s3, PROCESS_A, 3, FSS_SINK_SOCKET, &s2, 2, FSS_SINK_SOCKET, ack2.records, s2.n - ack2.records);
	sink_colls(&s3, 101, 10);
	stream_make(&t3, &s3);
	path_in(out, sizeof(out), "restarted2.fss");
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	assert_int_equal(ingest_add_file(ing, dead), 0);
	fd = connect_pair(ing, "socket 3");
	push(ing, fd, t3.bytes, t3.len);
	hang_up(ing, fd);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->sources, 1);
	out_read(&o, out);
	assert_int_equal(o.nsources, 1);
	assert_int_equal(o.hellos[0], 1);
	assert_seqs(&o, 0, 1, 110);
	out_free(&o);
	ingest_free(ing);
	free(t1.bytes);
	free(t2.bytes);
	free(t3.bytes);
	sink_free(&s1);
	sink_free(&s2);
	sink_free(&s3);
}

/* A keep policy's way: every third collective is left out of the file and
 * written back by the session later, once 6 more are held (across chunks). */
#define HOLD_MAX 6
struct holding {
	ingest_t *ing;
	_Alignas(8) unsigned char held[HOLD_MAX][SLOT];
	size_t n;
};

static int hold_on_record(void *ctx, const struct fss_record_head *rec, const struct source *src)
{
	struct holding *h = ctx;

	(void)src;
	if (rec->type != FSS_REC_COLLECTIVE || ((const struct fss_rec_collective *)rec)->seq % 3 != 0)
		return 0;
	if (h->n == HOLD_MAX) {
		assert_int_equal(ingest_write_record(h->ing, (const void *)h->held[0]), 0);
		memmove(h->held[0], h->held[1], (HOLD_MAX - 1) * SLOT);
		h->n--;
	}
	memcpy(h->held[h->n++], rec, rec->size);
	return 1;
}

/*
 * Records the session left out and wrote back itself (out of their order)
 * are no sink's records to a later reader: a dead collector's partial trace
 * full of them, continued from its ack, still gives every collective once.
 */
static void test_continue_session_records(void **state)
{
	struct sinkb s1, s2;
	struct stream t1, t2;
	struct wire_ack ack = {0}, lost = {0};
	struct holding h = {0};
	uint64_t lost_set[HOLD_MAX];
	size_t nlost = 0;
	const struct ingest_stats *st;
	struct outrecs o;
	char out[128], dead[128], cmd[400];
	ingest_t *ing;
	int fd;

	(void)state;
	sink_start(&s1, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&s1, 1, 100);
	stream_make(&t1, &s1);
	path_in(out, sizeof(out), "holding.fss");
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	h.ing = ing;
	ingest_on_record(ing, hold_on_record, &h);
	fd = connect_pair(ing, "socket 1");
	push(ing, fd, t1.bytes, t1.chunk_end[4]);
	wait_ack(ing, fd, 5, &ack);
	push(ing, fd, t1.bytes + t1.chunk_end[4], t1.chunk_end[7] - t1.chunk_end[4]);
	wait_ack(ing, fd, 8, &lost); /* written; the agent never got this ack */
	/* and records of the session's own for the source, none left out for them */
	for (int i = 0; i < 5; i++) {
		struct fss_rec_drops d;

		record_init(&d, FSS_REC_DROPS, sizeof(d), 0);
		d.at_ns = 1000000 + (uint64_t)i;
		assert_int_equal(ingest_write_record(ing, &d.head), 0);
	}
	assert_int_equal(ingest_flush(ing), 0);
	/* what the session still holds dies with it (it was acked as left out) */
	{
		uint64_t lost_seqs[HOLD_MAX];

		for (size_t i = 0; i < h.n; i++)
			lost_seqs[i] = ((const struct fss_rec_collective *)(const void *)h.held[i])->seq;
		nlost = h.n;
		memcpy(lost_set, lost_seqs, sizeof(lost_seqs));
	}
	path_in(dead, sizeof(dead), "holding-dead.fss");
	snprintf(cmd, sizeof(cmd), "cp '%s.partial' '%s'", out, dead);
	assert_int_equal(system(cmd), 0);
	close(fd);
	ingest_free(ing);

	sink_start(&s2, PROCESS_A, 2, FSS_SINK_SOCKET, &s1, 1, FSS_SINK_SOCKET, ack.records, s1.n - ack.records);
	sink_colls(&s2, 101, 20);
	stream_make(&t2, &s2);
	path_in(out, sizeof(out), "holding-restarted.fss");
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	assert_int_equal(ingest_add_file(ing, dead), 0);
	fd = connect_pair(ing, "socket 2");
	push(ing, fd, t2.bytes, t2.len);
	hang_up(ing, fd);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->sources, 1);
	out_read(&o, out);
	assert_int_equal(o.nsources, 1);
	/* the dead collector's last held-back record never came back: the one
	 * before its end, if it was held then (it is in no file) */
	{
		unsigned char seen[121] = {0};

		assert_int_equal(o.nseqs[0], 120 - nlost);
		for (size_t i = 0; i < o.nseqs[0]; i++) {
			assert_true(o.seqs[0][i] >= 1 && o.seqs[0][i] <= 120);
			assert_false(seen[o.seqs[0][i]]);
			seen[o.seqs[0][i]] = 1;
		}
		for (size_t i = 0; i < nlost; i++)
			assert_false(seen[lost_set[i]]);
	}
	out_free(&o);
	ingest_free(ing);
	free(t1.bytes);
	free(t2.bytes);
	sink_free(&s1);
	sink_free(&s2);
}

/*
 * socket -> file -> socket: the first connection broke; the agent wrote a
 * failover file repeating what was not acked, then a collector answered
 * again and the agent resent the whole file inside its new connection
 * (whose sink continues the file, whose sink record continues the first
 * socket). One source, every collective once; with the file also read by
 * the collector before the connection, still once.
 */
static void nested(int read_file_first)
{
	struct sinkb s1, f2, s3, s4;
	struct stream t1, t3, t4;
	struct wire_ack ack = {0};
	const struct ingest_stats *st;
	struct outrecs o;
	char out[128], failover[128];
	ingest_t *ing;
	int fd;

	sink_start(&s1, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&s1, 1, 40);
	stream_make(&t1, &s1);
	path_in(out, sizeof(out), read_file_first ? "nested2.fss" : "nested.fss");
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	fd = connect_pair(ing, "socket 1");
	push(ing, fd, t1.bytes, t1.chunk_end[2]);
	wait_ack(ing, fd, 3, &ack);
	push(ing, fd, t1.bytes + t1.chunk_end[2], t1.chunk_end[3] - t1.chunk_end[2]);
	hang_up(ing, fd);
	/* the failover file: repeats s1 from the ack, then 20 more */
	sink_start(&f2, PROCESS_A, 2, FSS_SINK_FILE, &s1, 1, FSS_SINK_SOCKET, ack.records, s1.n - ack.records);
	sink_colls(&f2, 41, 20);
	path_in(failover, sizeof(failover), read_file_first ? "failover2.fss" : "failover.fss");
	sink_file(&f2, failover);
	if (read_file_first)
		assert_int_equal(ingest_add_file(ing, failover), 0);
	/* the new connection: all of the file, then 40 more; it breaks after
	 * an ack that lies past the file's records */
	sink_start(&s3, PROCESS_A, 3, FSS_SINK_SOCKET, &f2, 2, FSS_SINK_FILE, 0, f2.n);
	sink_colls(&s3, 61, 40);
	stream_make(&t3, &s3);
	fd = connect_pair(ing, "socket 3");
	{
		size_t c = 0;

		while (c + 2 < t3.nchunks && t3.chunk_records[c] < 3 + f2.n + 10)
			c++;
		push(ing, fd, t3.bytes, t3.chunk_end[c]);
		wait_ack(ing, fd, c + 1, &ack);
		push(ing, fd, t3.bytes + t3.chunk_end[c], t3.chunk_end[c + 1] + 8 - t3.chunk_end[c]);
	}
	hang_up(ing, fd);
	/* ... and a fourth sink repeats the third from its ack */
	sink_start(&s4, PROCESS_A, 4, FSS_SINK_SOCKET, &s3, 3, FSS_SINK_SOCKET, ack.records, s3.n - ack.records);
	sink_colls(&s4, 101, 5);
	stream_make(&t4, &s4);
	fd = connect_pair(ing, "socket 4");
	push(ing, fd, t4.bytes, t4.len);
	hang_up(ing, fd);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->sources, 1);
	assert_int_equal(st->ndamaged, 2); /* the first and third connections, cut mid-chunk */
	assert_int_equal(st->per_source[0].sinks, 4);
	out_read(&o, out);
	assert_int_equal(o.nsources, 1);
	assert_int_equal(o.hellos[0], 1);
	assert_seqs(&o, 0, 1, 105);
	out_free(&o);
	ingest_free(ing);
	free(t1.bytes);
	free(t3.bytes);
	free(t4.bytes);
	sink_free(&s1);
	sink_free(&f2);
	sink_free(&s3);
	sink_free(&s4);
}

static void test_nested_repeat(void **state)
{
	(void)state;
	nested(0);
	nested(1);
}

/* A trace file analyse can read, and the collectives it holds per source. */
static void assert_lintable(const char *path)
{
	struct analysis_result *r = NULL;
	char err[256];

	assert_int_equal(analyze_trace(path, NULL, &r, err, sizeof(err)), 0);
	assert_non_null(r);
	assert_false(r->trace.truncated);
	analysis_result_free(r);
}

/*
 * Rotation: two files, each a closed trace that stands alone (its hello,
 * strings and communicator re-stated, analyse reads it), whose collectives
 * together are the input's, each once; the two read back in order by a new
 * ingest give one source per process with every collective once.
 */
static void test_rotate(void **state)
{
	struct sinkb a, b;
	struct stream ta, tb;
	struct wire_ack ack = {0};
	const struct ingest_stats *st;
	struct outrecs o1, o2, o3;
	char seg1[128], seg2[128], joined[128];
	ingest_t *ing;
	int fa, fb;

	(void)state;
	sink_start(&a, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&a, 1, 60);
	stream_make(&ta, &a);
	sink_start(&b, PROCESS_B, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&b, 1, 60);
	stream_make(&tb, &b);
	path_in(seg1, sizeof(seg1), "seg1.fss");
	path_in(seg2, sizeof(seg2), "seg2.fss");
	assert_int_equal(ingest_new(&ing, seg1, NULL), 0);
	fa = connect_pair(ing, "a");
	fb = connect_pair(ing, "b");
	push(ing, fa, ta.bytes, ta.chunk_end[3]);
	wait_ack(ing, fa, 4, &ack);
	push(ing, fb, tb.bytes, tb.chunk_end[2]);
	wait_ack(ing, fb, 3, &ack);
	assert_int_equal(ingest_rotate(ing, seg2), 0);
	push(ing, fa, ta.bytes + ta.chunk_end[3], ta.len - ta.chunk_end[3]);
	push(ing, fb, tb.bytes + tb.chunk_end[2], tb.len - tb.chunk_end[2]);
	hang_up(ing, fa);
	hang_up(ing, fb);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->files_written, 2);
	out_read(&o1, seg1);
	out_read(&o2, seg2);
	assert_int_equal(o1.nsources, 2);
	assert_int_equal(o2.nsources, 2);
	for (uint32_t s = 0; s < 2; s++) {
		size_t n1 = o1.nseqs[s];

		assert_int_equal(o2.hellos[s], 1); /* re-stated */
		assert_int_equal(o2.strings[s], 2); /* once each */
		assert_int_equal(o2.comms[s], 1);
		assert_int_equal(o2.sinks[s], 1);   /* the resume marker */
		assert_true(n1 > 0 && n1 < 60);
		assert_seqs(&o1, s, 1, n1);
		assert_seqs(&o2, s, n1 + 1, 60);
	}
	assert_lintable(seg1);
	assert_lintable(seg2);
	ingest_free(ing);

	path_in(joined, sizeof(joined), "joined.fss");
	assert_int_equal(ingest_new(&ing, joined, NULL), 0);
	assert_int_equal(ingest_add_file(ing, seg1), 0);
	assert_int_equal(ingest_add_file(ing, seg2), 0);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->sources, 2);
	out_read(&o3, joined);
	assert_int_equal(o3.nsources, 2);
	assert_int_equal(o3.hellos[0], 1);
	assert_int_equal(o3.hellos[1], 1);
	assert_seqs(&o3, 0, 1, 60);
	assert_seqs(&o3, 1, 1, 60);
	ingest_free(ing);

	/* the second file alone, through a new ingest: it stands alone there
	 * too (its re-stated preamble kept whole, the last record included) */
	path_in(joined, sizeof(joined), "alone.fss");
	assert_int_equal(ingest_new(&ing, joined, NULL), 0);
	assert_int_equal(ingest_add_file(ing, seg2), 0);
	assert_int_equal(ingest_finish(ing, &st), 0);
	out_free(&o3);
	out_read(&o3, joined);
	assert_int_equal(o3.nsources, 2);
	for (uint32_t s = 0; s < 2; s++) {
		assert_int_equal(o3.strings[s], 2);
		assert_int_equal(o3.comms[s], 1);
		assert_int_equal(o3.nseqs[s], o2.nseqs[s]);
	}
	assert_lintable(joined);
	ingest_free(ing);
	out_free(&o1);
	out_free(&o2);
	out_free(&o3);
	free(ta.bytes);
	free(tb.bytes);
	sink_free(&a);
	sink_free(&b);
}

struct rotating {
	ingest_t *ing;
	uint64_t n, at;
	const char *path;
	int rc;
};

static int rotate_on_record(void *ctx, const struct fss_record_head *rec, const struct source *src)
{
	struct rotating *r = ctx;

	(void)rec;
	(void)src;
	if (++r->n == r->at)
		r->rc = ingest_rotate(r->ing, r->path);
	return 0;
}

/*
 * Rotation from inside the record callback, as a session's keep policy does
 * it, at every early record (between a hello and its sink record, inside a
 * preamble): the two files read back in order give one source per process
 * with every collective once, and the second alone keeps its whole
 * re-statement.
 */
static void test_rotate_in_callback(void **state)
{
	struct sinkb a, b;
	char fa[128], fb[128], seg1[128], seg2[128], joined[128];
	const struct ingest_stats *st;
	struct outrecs o;

	(void)state;
	sink_start(&a, PROCESS_A, 1, FSS_SINK_FILE, NULL, 0, 0, 0, 0);
	sink_colls(&a, 1, 30);
	sink_start(&b, PROCESS_B, 1, FSS_SINK_FILE, NULL, 0, 0, 0, 0);
	sink_colls(&b, 1, 30);
	path_in(fa, sizeof(fa), "rank-a.fss");
	path_in(fb, sizeof(fb), "rank-b.fss");
	sink_file(&a, fa);
	sink_file(&b, fb);
	for (uint64_t at = 1; at <= 12; at++) {
		struct rotating r = {.at = at};
		ingest_t *ing;

		path_in(seg1, sizeof(seg1), "cb-seg1.fss");
		path_in(seg2, sizeof(seg2), "cb-seg2.fss");
		path_in(joined, sizeof(joined), "cb-joined.fss");
		assert_int_equal(ingest_new(&ing, seg1, NULL), 0);
		r.ing = ing;
		r.path = seg2;
		ingest_on_record(ing, rotate_on_record, &r);
		assert_int_equal(ingest_add_file(ing, fa), 0);
		assert_int_equal(ingest_add_file(ing, fb), 0);
		assert_int_equal(ingest_finish(ing, &st), 0);
		assert_int_equal(r.rc, 0);
		assert_int_equal(st->files_written, 2);
		ingest_free(ing);

		assert_int_equal(ingest_new(&ing, joined, NULL), 0);
		assert_int_equal(ingest_add_file(ing, seg1), 0);
		assert_int_equal(ingest_add_file(ing, seg2), 0);
		assert_int_equal(ingest_finish(ing, &st), 0);
		ingest_free(ing);
		out_read(&o, joined);
		assert_int_equal(o.nsources, 2);
		for (uint32_t s = 0; s < 2; s++) {
			assert_int_equal(o.hellos[s], 1);
			assert_int_equal(o.comms[s], 1);
			assert_seqs(&o, s, 1, 30);
		}
		out_free(&o);

		assert_int_equal(ingest_new(&ing, joined, NULL), 0);
		assert_int_equal(ingest_add_file(ing, seg2), 0);
		assert_int_equal(ingest_finish(ing, &st), 0);
		ingest_free(ing);
		out_read(&o, joined);
		assert_int_equal(o.nsources, 2);
		for (uint32_t s = 0; s < 2; s++) {
			assert_int_equal(o.strings[s], 2);
			assert_int_equal(o.comms[s], 1);
		}
		out_free(&o);
	}
	sink_free(&a);
	sink_free(&b);
}

/* Inputs without sink records behave as before: a reconnecting process is
 * a new source, each hello is written. */
static void test_no_sink_records(void **state)
{
	struct sinkb a;
	struct stream t;
	const struct ingest_stats *st;
	struct outrecs o;
	char out[128];
	ingest_t *ing;
	int fd;

	(void)state;
	sink_start(&a, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	memmove(a.r[1], a.r[2], (a.n - 2) * SLOT); /* no sink record */
	a.n--;
	sink_colls(&a, 1, 10);
	stream_make(&t, &a);
	path_in(out, sizeof(out), "plain.fss");
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	for (int i = 0; i < 2; i++) {
		fd = connect_pair(ing, "plain");
		push(ing, fd, t.bytes, t.len);
		hang_up(ing, fd);
	}
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->sources, 2);
	assert_int_equal(st->sinks_merged, 0);
	out_read(&o, out);
	assert_int_equal(o.hellos[0], 1);
	assert_int_equal(o.hellos[1], 1);
	assert_int_equal(o.records, 2 * a.n);
	assert_seqs(&o, 0, 1, 10);
	assert_seqs(&o, 1, 1, 10);
	out_free(&o);
	ingest_free(ing);
	free(t.bytes);
	sink_free(&a);
}

/* Connect to a tcp listener at `port`, send `first` (WIRE_KEY_HELLO_BYTES). */
static int tcp_send_key(int port, const unsigned char *first)
{
	struct wire_address addr;
	char text[64];
	int fd;

	snprintf(text, sizeof(text), "tcp:127.0.0.1:%d", port);
	assert_int_equal(wire_address_parse(text, &addr), 0);
	assert_int_equal(wire_connect(&addr, 5000, &fd), 0);
	assert_int_equal(write(fd, first, WIRE_KEY_HELLO_BYTES), WIRE_KEY_HELLO_BYTES);
	return fd;
}

static int listen_tcp(ingest_t *ing, int *port)
{
	char text[64];
	int rc = -1;

	/* a free port near a per-process base: retried past ports in use */
	for (int i = 0; i < 200 && rc; i++) {
		*port = 20000 + (int)((getpid() * 7 + i * 131) % 30000);
		snprintf(text, sizeof(text), "tcp:127.0.0.1:%d", *port);
		rc = ingest_listen(ing, text);
	}
	return rc;
}

/* TCP: refused at listen without a key; a wrong key is cut and counted with
 * the peer's address; the right key's stream is taken. */
static void test_tcp_key(void **state)
{
	unsigned char key[WIRE_KEY_BYTES], hello[WIRE_KEY_HELLO_BYTES], bad[WIRE_KEY_HELLO_BYTES];
	struct ingest_options opts = {.key = key};
	struct sinkb a;
	struct stream t;
	const struct ingest_stats *st;
	struct outrecs o;
	char out[128];
	int64_t deadline;
	ingest_t *ing;
	int port, fd, bad_fd;
	char c;

	(void)state;
	path_in(out, sizeof(out), "nokey.fss");
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	assert_int_equal(ingest_listen(ing, "tcp:127.0.0.1:7071"), -EACCES);
	ingest_free(ing);

	for (int i = 0; i < WIRE_KEY_BYTES; i++)
		key[i] = (unsigned char)(i * 37 + 1);
	wire_key_hello(key, hello);
	memcpy(bad, hello, sizeof(bad));
	bad[WIRE_KEY_HELLO_BYTES - 1] ^= 1;
	sink_start(&a, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&a, 1, 10);
	stream_make(&t, &a);
	path_in(out, sizeof(out), "key.fss");
	assert_int_equal(ingest_new(&ing, out, &opts), 0);
	assert_int_equal(listen_tcp(ing, &port), 0);
	bad_fd = tcp_send_key(port, bad);
	assert_int_equal(write(bad_fd, t.bytes, t.len), (ssize_t)t.len);
	/* the ingest cuts it: our end reads EOF (or a reset) */
	deadline = now_ms() + 20000;
	for (;;) {
		struct pollfd p = {.fd = bad_fd, .events = POLLIN};

		assert_true(ingest_poll(ing, 10) >= 0);
		if (poll(&p, 1, 0) == 1 && read(bad_fd, &c, 1) <= 0)
			break;
		assert_true(now_ms() < deadline);
	}
	close(bad_fd);
	fd = tcp_send_key(port, hello);
	assert_int_equal(write(fd, t.bytes, t.len), (ssize_t)t.len);
	close(fd);
	deadline = now_ms() + 20000;
	while (ingest_open_connections(ing) > 0 || (ingest_poll(ing, 10), ingest_open_connections(ing) > 0)) {
		assert_true(now_ms() < deadline);
		assert_true(ingest_poll(ing, 10) >= 0);
	}
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->refused_keys, 1);
	assert_int_equal(st->ndamaged, 1);
	assert_non_null(strstr(st->damage[0], "127.0.0.1:"));
	assert_non_null(strstr(st->damage[0], "key"));
	assert_int_equal(st->sources, 1);
	out_read(&o, out);
	assert_seqs(&o, 0, 1, 10);
	out_free(&o);
	ingest_free(ing);
	free(t.bytes);
	sink_free(&a);
}

/* A connection costs little whatever it sends: past 1024 sources it is cut
 * and reported, the others keep their records. */
static void test_connection_sources_capped(void **state)
{
	struct trace_writer_options wopts = {.chunk_payload = CHUNK};
	struct sinkb a;
	const struct ingest_stats *st;
	trace_writer_t *w;
	char out[128];
	ingest_t *ing;
	int sv[2];

	(void)state;
	sink_start(&a, PROCESS_A, 1, FSS_SINK_SOCKET, NULL, 0, 0, 0, 0);
	sink_colls(&a, 1, 1);
	path_in(out, sizeof(out), "many.fss");
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(ingest_add_fd(ing, sv[1], "many"), 0);
	/* 1100 sources, each a hello and a collective (no sink record) */
	{
		FILE *f = tmpfile();
		struct stat sst;
		unsigned char *bytes;

		assert_non_null(f);
		assert_int_equal(trace_writer_open_fd(&w, fileno(f), &wopts), 0);
		for (uint32_t src = 0; src < 1100; src++) {
			((struct fss_record_head *)a.r[0])->source = src;
			((struct fss_record_head *)a.r[a.n - 1])->source = src;
			assert_int_equal(trace_writer_append(w, a.r[0]), 0);
			assert_int_equal(trace_writer_append(w, a.r[a.n - 1]), 0);
		}
		assert_int_equal(trace_writer_close(w), 0);
		assert_int_equal(fstat(fileno(f), &sst), 0);
		bytes = malloc((size_t)sst.st_size);
		assert_non_null(bytes);
		assert_int_equal(pread(fileno(f), bytes, (size_t)sst.st_size, 0), sst.st_size);
		fclose(f);
		assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
		push(ing, sv[0], bytes, (size_t)sst.st_size);
		free(bytes);
	}
	hang_up(ing, sv[0]);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->sources, 1024);
	assert_int_equal(st->by_type[FSS_REC_COLLECTIVE], 1024);
	assert_int_equal(st->ndamaged, 1);
	assert_non_null(strstr(st->damage[0], "more than 1024 sources in one connection"));
	ingest_free(ing);
	sink_free(&a);
}

static int setup_dir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/fss_ingest_live.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static int teardown_dir(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_on_record_and_write_record),
		cmocka_unit_test(test_acks_after_flush),
		cmocka_unit_test(test_acks_by_interval),
		cmocka_unit_test(test_ack_at_one_mib),
		cmocka_unit_test(test_continue_connection),
		cmocka_unit_test(test_continue_partial_trace),
		cmocka_unit_test(test_continue_merged_partial),
		cmocka_unit_test(test_continue_session_records),
		cmocka_unit_test(test_nested_repeat),
		cmocka_unit_test(test_rotate),
		cmocka_unit_test(test_rotate_in_callback),
		cmocka_unit_test(test_no_sink_records),
		cmocka_unit_test(test_tcp_key),
		cmocka_unit_test(test_connection_sources_capped),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
