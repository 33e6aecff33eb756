/*
 * trace_test.c - trace files: chunks, truncation at every byte, the end
 * marker, damage skipped and reported as gaps, the file header checked
 * before it is believed, tiny inputs, incremental parsing, a writer killed
 * mid-run, strings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/record.h"
#include "common/strtab.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "tests/support/sample_records.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct file {
	unsigned char *data;
	size_t len;
};

static struct file slurp(const char *path)
{
	struct file f = {0};
	struct stat st;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	f.len = (size_t)st.st_size;
	f.data = malloc(f.len + 1);
	assert_int_equal(read(fd, f.data, f.len), (ssize_t)f.len);
	close(fd);
	return f;
}

/* A small trace with several chunks: returns its bytes, and the file offset
 * at which each chunk ends plus the records in chunks up to it. */
struct layout {
	size_t chunk_end[64];
	uint64_t records_upto[64];
	size_t chunks;
	size_t header_end;
};

static int count_chunk(void *ctx, uint64_t seq, uint32_t records, uint64_t offset)
{
	struct layout *l = ctx;

	assert_int_equal(seq, l->chunks);
	l->chunk_end[l->chunks] = (size_t)offset;
	l->records_upto[l->chunks] = (l->chunks ? l->records_upto[l->chunks - 1] : 0) + records;
	l->chunks++;
	return 0;
}

static struct file small_trace(struct layout *l)
{
	char path[] = "/tmp/fss_trace_test_XXXXXX";
	struct trace_writer_options opts = {.chunk_payload = 512};
	struct trace_parser_ops ops = {.on_chunk = count_chunk};
	trace_writer_t *w;
	uint64_t n;
	struct file f;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(trace_writer_open(&w, path, &opts), 0);
	assert_int_equal(sample_trace_write(w, 2, 2, &n), 0);
	assert_int_equal(trace_writer_close(w), 0);
	memset(l, 0, sizeof(*l));
	l->header_end = sizeof(struct fss_file_header);
	assert_int_equal(trace_read_file(path, &ops, l, NULL, 0), 0);
	assert_true(l->chunks >= 4);
	assert_int_equal(l->records_upto[l->chunks - 1], n + 1); /* and the writer's trace_end */
	f = slurp(path);
	assert_int_equal(f.len, l->chunk_end[l->chunks - 1]);
	unlink(path);
	return f;
}

struct counter {
	uint64_t records;
	uint64_t gaps_seen; /* on_gap calls */
	uint64_t headers;   /* on_header calls */
	struct fss_file_header header;
};

static int count_header(void *ctx, const struct fss_file_header *h)
{
	struct counter *c = ctx;

	assert_int_equal(c->records, 0); /* before any record, once */
	c->headers++;
	c->header = *h;
	return 0;
}

static int count_record(void *ctx, const struct fss_record_head *rec)
{
	struct counter *c = ctx;

	assert_true(rec->size >= 8);
	c->records++;
	return 0;
}

static int count_gap(void *ctx, const struct trace_gap *gap)
{
	struct counter *c = ctx;

	assert_true(gap->why[0] != '\0');
	c->gaps_seen++;
	return 0;
}

/* What one parse of some bytes gave. */
struct outcome {
	int rc;
	uint64_t records;
	enum trace_input input;
	enum trace_end end;
	struct trace_damage damage;
	struct trace_gap gaps[TRACE_PARSER_GAPS_KEPT];
	size_t ngaps;
	char message[768];
	uint64_t headers; /* on_header calls */
	struct fss_file_header header; /* as on_header had it */
	int salvaged;
	struct trace_salvage salvage;
};

/* Feed bytes[0..len) in pieces of `piece` to a parser (salvage: one that
 * salvages), finish, and tell what came out. */
static struct outcome parse_bytes_mode(const unsigned char *bytes, size_t len, size_t piece, int salvage)
{
	struct counter c = {0};
	struct trace_parser_ops ops = {.on_header = count_header, .on_record = count_record, .on_gap = count_gap};
	trace_parser_t *p = trace_parser_new(&ops, &c);
	const struct trace_gap *gaps;
	struct outcome o;
	int err = 0, damaged;

	assert_non_null(p);
	if (salvage)
		trace_parser_salvage(p);
	memset(&o, 0, sizeof(o));
	for (size_t off = 0; off < len && !err; off += piece)
		err = trace_parser_feed(p, bytes + off, off + piece > len ? len - off : piece);
	if (!err)
		err = trace_parser_finish(p);
	if (err)
		assert_true(trace_parser_error(p)[0] != '\0');
	o.rc = err;
	o.records = c.records;
	o.input = trace_parser_input(p);
	o.end = trace_parser_end(p);
	damaged = trace_parser_damage(p, &o.damage);
	assert_int_equal(damaged, o.damage.gaps != 0);
	o.ngaps = trace_parser_gaps(p, &gaps);
	memcpy(o.gaps, gaps, o.ngaps * sizeof(*gaps));
	snprintf(o.message, sizeof(o.message), "%s", trace_parser_error(p));
	assert_int_equal(trace_parser_records(p), c.records);
	assert_int_equal(c.gaps_seen, o.damage.gaps);
	o.headers = c.headers;
	o.header = c.header;
	o.salvaged = trace_parser_salvaged(p, &o.salvage);
	trace_parser_free(p);
	return o;
}

static struct outcome parse_bytes(const unsigned char *bytes, size_t len, size_t piece)
{
	return parse_bytes_mode(bytes, len, piece, 0);
}

/* Feed a prefix of the trace; return finish()'s value and the count. */
static int parse_prefix(const struct file *f, size_t cut, size_t piece, uint64_t *records)
{
	struct outcome o = parse_bytes(f->data, cut, piece);

	*records = o.records;
	return o.rc;
}

static size_t chunk_start(const struct layout *l, size_t c)
{
	return c ? l->chunk_end[c - 1] : l->header_end;
}

static uint64_t chunk_records(const struct layout *l, size_t c)
{
	return l->records_upto[c] - (c ? l->records_upto[c - 1] : 0);
}

/* Cut the trace at every byte offset: every complete chunk before the cut
 * reads back, nothing of the cut chunk does, and only the whole file (whose
 * last chunk holds the writer's trace_end) reads as ended cleanly; a cut on a
 * chunk boundary is as incomplete as one inside a chunk. No cut is damage. */
static void test_truncation_at_every_offset(void **state)
{
	struct layout l;
	struct file f = small_trace(&l);

	(void)state;
	for (size_t cut = 0; cut <= f.len; cut++) {
		uint64_t expect = 0;
		int boundary = cut == l.header_end;
		struct outcome o;

		for (size_t c = 0; c < l.chunks; c++) {
			if (l.chunk_end[c] <= cut)
				expect = l.records_upto[c];
			if (l.chunk_end[c] == cut)
				boundary = 1;
		}
		o = parse_bytes(f.data, cut, f.len + 1);
		assert_int_equal(o.records, expect);
		assert_int_equal(o.damage.gaps, 0);
		if (cut == f.len) {
			assert_int_equal(o.rc, 0);
			assert_int_equal(o.end, TRACE_END_CLEAN);
			assert_int_equal(o.input, TRACE_INPUT_TRACE);
		} else if (cut == 0) {
			assert_int_equal(o.input, TRACE_INPUT_EMPTY);
			assert_int_equal(o.rc, FSS_E_TRUNCATED);
		} else if (cut < l.header_end) {
			assert_int_equal(o.input, TRACE_INPUT_HEADER_SHORT);
			assert_int_equal(o.rc, FSS_E_TRUNCATED);
		} else {
			assert_int_equal(o.rc, FSS_E_TRUNCATED);
			assert_int_equal(o.end, boundary ? TRACE_END_MISSING : TRACE_END_CUT);
			assert_int_equal(o.input, expect ? TRACE_INPUT_TRACE : TRACE_INPUT_NO_RECORDS);
			assert_non_null(strstr(o.message, boundary ? "without its trace_end" : "truncated"));
		}
	}
	free(f.data);
}

/* Feeding one byte at a time gives the same records as one big feed. */
static void test_incremental_feed(void **state)
{
	struct layout l;
	struct file f = small_trace(&l);
	uint64_t a, b, c;

	(void)state;
	assert_int_equal(parse_prefix(&f, f.len, f.len, &a), 0);
	assert_int_equal(parse_prefix(&f, f.len, 1, &b), 0);
	assert_int_equal(parse_prefix(&f, f.len, 7, &c), 0);
	assert_int_equal(a, l.records_upto[l.chunks - 1]);
	assert_int_equal(a, b);
	assert_int_equal(a, c);
	free(f.data);
}

/* Flip one byte of each chunk in turn, in its header (magic, size, count,
 * CRC, sequence number) or its payload: that chunk alone is lost, every
 * other one is delivered, and the gap is reported exactly (its bytes, the
 * chunk number). Fed whole and a byte at a time alike. */
static void test_damaged_chunk_is_skipped(void **state)
{
	static const size_t where[] = {0, 3, 4, 9, 13, 16, 23, 24, SIZE_MAX / 2, SIZE_MAX};
	static const size_t pieces[] = {1, 7, SIZE_MAX};
	struct layout l;
	struct file f = small_trace(&l);
	uint64_t total;

	(void)state;
	total = l.records_upto[l.chunks - 1];
	for (size_t c = 0; c < l.chunks; c++) {
		size_t start = chunk_start(&l, c), len = l.chunk_end[c] - start;
		int last = c == l.chunks - 1;

		for (size_t w = 0; w < sizeof(where) / sizeof(where[0]); w++) {
			size_t at = where[w] == SIZE_MAX ? len - 1 : where[w] == SIZE_MAX / 2 ? len / 2 : where[w];

			for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
				struct fss_chunk_header flipped;
				struct outcome o;

				f.data[start + at] ^= 0x40;
				memcpy(&flipped, f.data + start, sizeof(flipped));
				o = parse_bytes(f.data, f.len, pieces[k] == SIZE_MAX ? f.len : pieces[k]);
				f.data[start + at] ^= 0x40;
				assert_int_equal(o.input, TRACE_INPUT_TRACE);
				assert_int_equal(o.records, total - chunk_records(&l, c));
				if (last && start + sizeof(flipped) + flipped.payload_bytes > f.len) {
					/* The last chunk's size grown past the end of the
					 * file: from the bytes, that is a chunk cut short. */
					assert_int_equal(o.rc, FSS_E_TRUNCATED);
					assert_int_equal(o.end, TRACE_END_CUT);
					assert_int_equal(o.damage.gaps, 0);
					continue;
				}
				assert_int_equal(o.rc, FSS_E_CORRUPT);
				assert_int_equal(o.damage.gaps, 1);
				assert_int_equal(o.ngaps, 1);
				assert_int_equal(o.gaps[0].offset, start);
				assert_int_equal(o.gaps[0].bytes, len);
				assert_int_equal(o.gaps[0].first_missing, c);
				/* The last chunk held the trace_end: with it lost, the
				 * end cannot be vouched for and the gap runs to the end. */
				assert_int_equal(o.gaps[0].to_end, last);
				assert_int_equal(o.gaps[0].chunks_missing, last ? 0 : 1);
				assert_int_equal(o.end, last ? TRACE_END_MISSING : TRACE_END_CLEAN);
				assert_non_null(strstr(o.message, "1 damaged stretch"));
			}
		}
	}
	free(f.data);
}

/* The bytes of f with `ins` inserted at offset `at`. */
static struct file spliced(const struct file *f, size_t at, const unsigned char *ins, size_t n)
{
	struct file g = {.len = f->len + n};

	g.data = malloc(g.len);
	assert_non_null(g.data);
	memcpy(g.data, f->data, at);
	memcpy(g.data + at, ins, n);
	memcpy(g.data + at + n, f->data + at, f->len - at);
	return g;
}

/* Runs of garbage between chunks, some holding a fake chunk header whose
 * claimed payload reaches into the real chunk after it: every record is
 * delivered, the garbage is one gap of exactly its length, no chunk is
 * missing, and the end is clean. Garbage after the last chunk: a gap to the
 * end, the end still clean. */
static void test_garbage_between_chunks(void **state)
{
	static const size_t lengths[] = {1, 3, 7, 8, 23, 24, 25, 100, 1000, 5000};
	struct layout l;
	struct file f = small_trace(&l);
	unsigned char junk[5000];
	uint64_t total;

	(void)state;
	total = l.records_upto[l.chunks - 1];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 131 + 7);
	for (size_t c = 0; c + 1 < l.chunks; c++) {
		for (size_t k = 0; k < sizeof(lengths) / sizeof(lengths[0]); k++) {
			size_t n = lengths[k];
			struct fss_chunk_header fake = {.magic = FSS_CHUNK_MAGIC, .payload_bytes = 256, .records = 2,
							.crc = 0x12345678, .seq = c + 1};
			struct outcome o;
			struct file g;

			/* From 24 bytes up the garbage starts with a plausible
			 * chunk header for the next chunk, wrong only in its CRC. */
			if (n >= sizeof(fake))
				memcpy(junk, &fake, sizeof(fake));
			g = spliced(&f, l.chunk_end[c], junk, n);
			o = parse_bytes(g.data, g.len, k % 2 ? 1 : g.len);
			assert_int_equal(o.rc, FSS_E_CORRUPT);
			assert_int_equal(o.records, total);
			assert_int_equal(o.ngaps, 1);
			assert_int_equal(o.gaps[0].offset, l.chunk_end[c]);
			assert_int_equal(o.gaps[0].bytes, n);
			assert_int_equal(o.gaps[0].chunks_missing, 0);
			assert_int_equal(o.gaps[0].first_missing, c + 1);
			assert_int_equal(o.end, TRACE_END_CLEAN);
			free(g.data);
		}
	}
	/* Garbage after the end. */
	{
		struct file g = spliced(&f, f.len, junk, 100);
		struct outcome o = parse_bytes(g.data, g.len, g.len);

		assert_int_equal(o.rc, FSS_E_CORRUPT);
		assert_int_equal(o.records, total);
		assert_int_equal(o.ngaps, 1);
		assert_int_equal(o.gaps[0].offset, f.len);
		assert_int_equal(o.gaps[0].bytes, 100);
		assert_true(o.gaps[0].to_end);
		assert_int_equal(o.end, TRACE_END_CLEAN);
		free(g.data);
	}
	free(f.data);
}

/* A chunk cut out whole: the sequence numbers tell, a gap of no bytes. Two
 * damaged chunks: two gaps. */
static void test_missing_chunk_and_two_gaps(void **state)
{
	struct layout l;
	struct file f = small_trace(&l);
	struct file g = {0};
	struct outcome o;
	size_t s1 = chunk_start(&l, 1), len1 = l.chunk_end[1] - s1;

	(void)state;
	g.len = f.len - len1;
	g.data = malloc(g.len);
	memcpy(g.data, f.data, s1);
	memcpy(g.data + s1, f.data + l.chunk_end[1], f.len - l.chunk_end[1]);
	o = parse_bytes(g.data, g.len, g.len);
	assert_int_equal(o.rc, FSS_E_CORRUPT);
	assert_int_equal(o.records, l.records_upto[l.chunks - 1] - chunk_records(&l, 1));
	assert_int_equal(o.ngaps, 1);
	assert_int_equal(o.gaps[0].offset, s1);
	assert_int_equal(o.gaps[0].bytes, 0);
	assert_int_equal(o.gaps[0].first_missing, 1);
	assert_int_equal(o.gaps[0].chunks_missing, 1);
	assert_int_equal(o.end, TRACE_END_CLEAN);
	free(g.data);

	/* Chunks 0 and 2 damaged: both gaps, in order, chunk 1 and 3.. kept. */
	f.data[chunk_start(&l, 0) + 30] ^= 1;
	f.data[chunk_start(&l, 2) + 30] ^= 1;
	o = parse_bytes(f.data, f.len, 5);
	assert_int_equal(o.rc, FSS_E_CORRUPT);
	assert_int_equal(o.records, l.records_upto[l.chunks - 1] - chunk_records(&l, 0) - chunk_records(&l, 2));
	assert_int_equal(o.damage.gaps, 2);
	assert_int_equal(o.damage.chunks_missing, 2);
	assert_int_equal(o.gaps[0].first_missing, 0);
	assert_int_equal(o.gaps[1].first_missing, 2);
	assert_int_equal(o.gaps[1].offset, chunk_start(&l, 2));
	assert_non_null(strstr(o.message, "2 damaged stretches"));
	assert_non_null(strstr(o.message, "checksum"));
	free(f.data);
}

/* The file header: a flip anywhere past the magic is damage found by the CRC
 * before any field is believed (offset 12 is not "version 65.0", offset 9 is
 * not "the other byte order"); in the magic too, a byte off is damage, not
 * another kind of file. A header that holds, of another major or byte
 * order, says so. */
static void test_damaged_header(void **state)
{
	struct layout l;
	struct file f = small_trace(&l);
	struct fss_file_header h;
	struct outcome o;

	(void)state;
	for (size_t at = 0; at < sizeof(struct fss_file_header); at++) {
		f.data[at] ^= 0x40;
		o = parse_bytes(f.data, f.len, at % 2 ? 1 : f.len);
		f.data[at] ^= 0x40;
		assert_int_equal(o.records, 0);
		if (at < 8) {
			assert_int_equal(o.rc, FSS_E_CORRUPT);
			assert_int_equal(o.input, TRACE_INPUT_HEADER_DAMAGED);
			assert_non_null(strstr(o.message, "header is damaged (bad magic: 1 of its 8 bytes"));
		} else {
			assert_int_equal(o.rc, FSS_E_CORRUPT);
			assert_int_equal(o.input, TRACE_INPUT_HEADER_DAMAGED);
			assert_non_null(strstr(o.message, "header is damaged (CRC mismatch"));
			assert_null(strstr(o.message, "version"));
			assert_null(strstr(o.message, "byte order"));
		}
	}
	memcpy(&h, f.data, sizeof(h));
	h.version_major = 2;
	h.crc = crc32c(0, &h, offsetof(struct fss_file_header, crc));
	memcpy(f.data, &h, sizeof(h));
	o = parse_bytes(f.data, f.len, f.len);
	assert_int_equal(o.rc, FSS_E_VERSION);
	assert_int_equal(o.input, TRACE_INPUT_NEWER_VERSION);
	assert_non_null(strstr(o.message, "version 2."));
	h.version_major = FSS_FORMAT_MAJOR;
	h.byte_order = 0x04030201u;
	h.crc = crc32c(0, &h, offsetof(struct fss_file_header, crc));
	memcpy(f.data, &h, sizeof(h));
	o = parse_bytes(f.data, f.len, f.len);
	assert_int_equal(o.rc, FSS_E_ENDIAN);
	assert_int_equal(o.input, TRACE_INPUT_OTHER_BYTE_ORDER);
	free(f.data);
}

/* Salvage: each bit of the file header flipped in turn. Read plainly the
 * file gives nothing; salvaged, every record of every chunk comes back, the
 * assumed header (this version's) reaches on_header once before them, no
 * stretch is skipped, and the read still counts as damaged. */
static void test_salvage_every_header_bit(void **state)
{
	struct layout l;
	struct file f = small_trace(&l);
	uint64_t total = l.records_upto[l.chunks - 1];
	char recovered[64];

	(void)state;
	snprintf(recovered, sizeof(recovered), "recovered %zu of %zu chunks (0 bytes skipped)", l.chunks, l.chunks);
	for (size_t bit = 0; bit < 8 * sizeof(struct fss_file_header); bit++) {
		struct outcome o;

		f.data[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		o = parse_bytes(f.data, f.len, f.len);
		assert_int_equal(o.records, 0);
		assert_int_not_equal(o.input, TRACE_INPUT_TRACE);
		o = parse_bytes_mode(f.data, f.len, bit % 3 ? 7 : f.len, 1);
		f.data[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		assert_int_equal(o.rc, FSS_E_CORRUPT);
		assert_int_equal(o.input, TRACE_INPUT_TRACE);
		assert_int_equal(o.records, total);
		assert_int_equal(o.end, TRACE_END_CLEAN);
		assert_int_equal(o.damage.gaps, 0);
		assert_true(o.salvaged);
		assert_int_equal(o.salvage.header, TRACE_INPUT_HEADER_DAMAGED);
		assert_int_equal(o.headers, 1);
		assert_int_equal(o.header.version_major, FSS_FORMAT_MAJOR);
		assert_int_equal(o.header.version_minor, FSS_FORMAT_MINOR);
		assert_int_equal(o.header.flags, 0);
		assert_non_null(strstr(o.message, "the file header is damaged ("));
		assert_non_null(strstr(o.message, "assuming format"));
		assert_non_null(strstr(o.message, recovered));
	}
	/* A header that holds is read as ever, salvage or not. */
	{
		struct outcome o = parse_bytes_mode(f.data, f.len, f.len, 1);

		assert_int_equal(o.rc, 0);
		assert_false(o.salvaged);
		assert_int_equal(o.records, total);
		assert_int_equal(o.header.chunk_payload_max, 512);
	}
	free(f.data);
}

/* A damaged header and a damaged chunk: the chunk is skipped and counted,
 * every other chunk recovered; chunk 0 lost right after the header is a gap
 * at byte 64. */
static void test_salvage_header_and_chunk(void **state)
{
	struct layout l;
	struct file f = small_trace(&l);
	uint64_t total = l.records_upto[l.chunks - 1];
	char recovered[64];

	(void)state;
	f.data[30] ^= 4; /* created_mono_ns */
	for (size_t c = 0; c + 1 < l.chunks; c++) {
		size_t start = chunk_start(&l, c);
		struct outcome o;

		f.data[start + 40] ^= 1;
		o = parse_bytes_mode(f.data, f.len, c % 2 ? 1 : f.len, 1);
		f.data[start + 40] ^= 1;
		assert_int_equal(o.rc, FSS_E_CORRUPT);
		assert_int_equal(o.records, total - chunk_records(&l, c));
		assert_int_equal(o.ngaps, 1);
		assert_int_equal(o.gaps[0].offset, start);
		assert_int_equal(o.gaps[0].bytes, l.chunk_end[c] - start);
		assert_int_equal(o.gaps[0].first_missing, c);
		assert_int_equal(o.gaps[0].chunks_missing, 1);
		assert_int_equal(o.end, TRACE_END_CLEAN);
		snprintf(recovered, sizeof(recovered), "recovered %zu of %zu chunks (%zu bytes skipped)", l.chunks - 1,
			 l.chunks, l.chunk_end[c] - start);
		assert_non_null(strstr(o.message, recovered));
		assert_non_null(strstr(o.message, "1 damaged stretch"));
	}
	free(f.data);
}

/* A damaged header and garbage (with fake chunk headers) between chunks:
 * every record recovered, the garbage one gap of its length. */
static void test_salvage_header_and_garbage(void **state)
{
	struct layout l;
	struct file f = small_trace(&l);
	uint64_t total = l.records_upto[l.chunks - 1];
	unsigned char junk[300];
	struct fss_chunk_header fake = {.magic = FSS_CHUNK_MAGIC, .payload_bytes = 64, .records = 1, .crc = 1};

	(void)state;
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 97 + 3);
	memcpy(junk + 100, &fake, sizeof(fake));
	memcpy(f.data, "FSSxxxCE", 8); /* a magic too far off to be a trace's: salvaged all the same */
	for (size_t c = 0; c < l.chunks; c++) {
		struct file g = spliced(&f, chunk_start(&l, c), junk, sizeof(junk));
		struct outcome o = parse_bytes_mode(g.data, g.len, c % 2 ? 3 : g.len, 1);

		assert_int_equal(o.rc, FSS_E_CORRUPT);
		assert_int_equal(o.records, total);
		assert_int_equal(o.ngaps, 1);
		assert_int_equal(o.gaps[0].offset, chunk_start(&l, c));
		assert_int_equal(o.gaps[0].bytes, sizeof(junk));
		assert_int_equal(o.gaps[0].chunks_missing, 0);
		assert_int_equal(o.salvage.header, TRACE_INPUT_NOT_TRACE);
		assert_non_null(strstr(o.message, "bad magic: 3 of its 8 bytes"));
		free(g.data);
	}
	free(f.data);
}

/* Salvage finds nothing to read: the file is what its header made of it. A
 * valid header of the other byte order is no damage: refused as ever. */
static void test_salvage_finds_nothing(void **state)
{
	static const char text[] = "not a trace, just some text that runs on past sixty-four bytes of it....";
	struct layout l;
	struct file f = small_trace(&l);
	struct fss_file_header h;
	struct outcome o;

	(void)state;
	o = parse_bytes_mode((const unsigned char *)text, sizeof(text), 5, 1);
	assert_int_equal(o.rc, FSS_E_NOT_TRACE);
	assert_int_equal(o.input, TRACE_INPUT_NOT_TRACE);
	assert_int_equal(o.headers, 0);
	assert_false(o.salvaged);
	assert_int_equal(o.damage.gaps, 0);
	f.data[20] ^= 1;
	o = parse_bytes_mode(f.data, l.header_end + 10, 1, 1); /* the header and 10 bytes of chunk 0 */
	assert_int_equal(o.rc, FSS_E_CORRUPT);
	assert_int_equal(o.input, TRACE_INPUT_HEADER_DAMAGED);
	assert_int_equal(o.records, 0);
	assert_non_null(strstr(o.message, "no intact chunk"));
	f.data[20] ^= 1;
	memcpy(&h, f.data, sizeof(h));
	h.byte_order = 0x04030201u;
	h.crc = crc32c(0, &h, offsetof(struct fss_file_header, crc));
	memcpy(f.data, &h, sizeof(h));
	o = parse_bytes_mode(f.data, f.len, f.len, 1);
	assert_int_equal(o.rc, FSS_E_ENDIAN);
	assert_int_equal(o.records, 0);
	free(f.data);
}

/* Empty and tiny inputs say what they are. */
static void test_tiny_inputs(void **state)
{
	static const unsigned char text[] = "hello, world";
	struct layout l;
	struct file f = small_trace(&l);
	struct outcome o;
	char path[] = "/tmp/fss_trace_tiny_XXXXXX";
	trace_writer_t *w;
	int fd;

	(void)state;
	o = parse_bytes(f.data, 0, 1);
	assert_int_equal(o.input, TRACE_INPUT_EMPTY);
	assert_non_null(strstr(o.message, "empty file"));
	o = parse_bytes(f.data, 10, 1);
	assert_int_equal(o.input, TRACE_INPUT_HEADER_SHORT);
	assert_non_null(strstr(o.message, "10 of 64 bytes"));
	o = parse_bytes(f.data, 3, 3);
	assert_int_equal(o.input, TRACE_INPUT_HEADER_SHORT);
	o = parse_bytes(text, 10, 10);
	assert_int_equal(o.input, TRACE_INPUT_NOT_TRACE);
	assert_int_equal(o.rc, FSS_E_NOT_TRACE);
	o = parse_bytes(text, sizeof(text), 1);
	assert_int_equal(o.input, TRACE_INPUT_NOT_TRACE);
	/* The header alone: a trace with no records, not closed. */
	o = parse_bytes(f.data, l.header_end, l.header_end);
	assert_int_equal(o.input, TRACE_INPUT_NO_RECORDS);
	assert_int_equal(o.end, TRACE_END_MISSING);
	assert_int_equal(o.rc, FSS_E_TRUNCATED);
	free(f.data);
	/* Opened and closed with nothing in it: no records, a clean end. */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(trace_writer_open(&w, path, NULL), 0);
	assert_int_equal(trace_writer_close(w), 0);
	f = slurp(path);
	unlink(path);
	o = parse_bytes(f.data, f.len, f.len);
	assert_int_equal(o.rc, 0);
	assert_int_equal(o.input, TRACE_INPUT_NO_RECORDS);
	assert_int_equal(o.end, TRACE_END_CLEAN);
	assert_int_equal(o.records, 1); /* the trace_end itself */
	free(f.data);
}

/* A 1.0 trace has no end marker: on a chunk boundary it cannot say, and is
 * not called cut short; inside a chunk it still is. */
static void test_version_1_0_cannot_say(void **state)
{
	struct layout l;
	struct file f = small_trace(&l);
	struct fss_file_header h;
	struct outcome o;

	(void)state;
	memcpy(&h, f.data, sizeof(h));
	assert_int_equal(h.version_minor, FSS_FORMAT_MINOR);
	h.version_minor = 0;
	h.crc = crc32c(0, &h, offsetof(struct fss_file_header, crc));
	memcpy(f.data, &h, sizeof(h));
	o = parse_bytes(f.data, l.chunk_end[1], 100);
	assert_int_equal(o.rc, 0);
	assert_int_equal(o.end, TRACE_END_NOT_MARKED);
	assert_int_equal(o.records, l.records_upto[1]);
	o = parse_bytes(f.data, l.chunk_end[1] + 9, 100);
	assert_int_equal(o.rc, FSS_E_TRUNCATED);
	assert_int_equal(o.end, TRACE_END_CUT);
	free(f.data);
}

/* The writer's trace_end: last record, file's source, counts that hold. */
struct last_record {
	struct fss_rec_trace_end end;
	uint64_t records;
	uint64_t chunks;
	uint16_t last_type;
	uint32_t last_source;
};

static int keep_last(void *ctx, const struct fss_record_head *rec)
{
	struct last_record *k = ctx;

	k->records++;
	k->last_type = rec->type;
	k->last_source = rec->source;
	if (rec->type == FSS_REC_TRACE_END && rec->source == FSS_SOURCE_NONE)
		memcpy(&k->end, rec, sizeof(k->end));
	return 0;
}

static int keep_chunks(void *ctx, uint64_t seq, uint32_t records, uint64_t offset)
{
	struct last_record *k = ctx;

	(void)records;
	(void)offset;
	k->chunks = seq + 1;
	return 0;
}

static void test_writer_ends_with_trace_end(void **state)
{
	char path[] = "/tmp/fss_trace_end_XXXXXX";
	struct trace_writer_options opts = {.chunk_payload = 256};
	struct trace_parser_ops ops = {.on_record = keep_last, .on_chunk = keep_chunks};
	struct last_record k = {0};
	struct trace_read_info info;
	trace_writer_t *w;
	uint64_t n;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(trace_writer_open(&w, path, &opts), 0);
	assert_int_equal(sample_trace_write(w, 1, 2, &n), 0);
	assert_int_equal(trace_writer_close(w), 0);
	assert_int_equal(trace_read(path, &ops, &k, &info), 0);
	unlink(path);
	assert_int_equal(k.last_type, FSS_REC_TRACE_END);
	assert_int_equal(k.last_source, FSS_SOURCE_NONE);
	assert_int_equal(k.end.records, n);
	assert_int_equal(k.end.chunks, k.chunks - 1);
	assert_int_equal(k.records, n + 1);
	assert_int_equal(info.input, TRACE_INPUT_TRACE);
	assert_int_equal(info.end, TRACE_END_CLEAN);
	assert_int_equal(info.version_minor, FSS_FORMAT_MINOR);
	assert_string_equal(info.message, "");
}

/* trace_read on files: the classification and the message travel. */
static void test_read_file_classifies(void **state)
{
	char path[] = "/tmp/fss_trace_cls_XXXXXX";
	struct trace_parser_ops ops = {0};
	struct trace_read_info info;
	char err[128];
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(trace_read(path, &ops, NULL, &info), FSS_E_TRUNCATED);
	assert_int_equal(info.input, TRACE_INPUT_EMPTY);
	assert_non_null(strstr(info.message, "empty file"));
	assert_int_equal(write(fd, "FSSTRACE\x04\x03", 10), 10);
	close(fd);
	assert_int_equal(trace_read(path, &ops, NULL, &info), FSS_E_TRUNCATED);
	assert_int_equal(info.input, TRACE_INPUT_HEADER_SHORT);
	assert_int_equal(trace_read_file(path, &ops, NULL, err, sizeof(err)), FSS_E_TRUNCATED);
	assert_non_null(strstr(err, "10 of 64 bytes"));
	unlink(path);
	assert_int_equal(trace_read(path, &ops, NULL, &info), -ENOENT);
	assert_true(info.message[0] != '\0');
}

/* A writer SIGKILLed mid-run leaves <path>.partial whose chunks read back. */
static void test_killed_writer_leaves_readable_partial(void **state)
{
	char dir[] = "/tmp/fss_trace_kill_XXXXXX";
	char path[128], partial[160];
	struct counter c = {0};
	struct trace_parser_ops ops = {.on_record = count_record};
	struct trace_read_info info;
	struct stat st;
	pid_t pid;
	int status, err;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/t.fss", dir);
	snprintf(partial, sizeof(partial), "%s.partial", path);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct trace_writer_options opts = {.chunk_payload = 256};
		trace_writer_t *w;

		if (trace_writer_open(&w, path, &opts))
			_exit(3);
		for (;;)
			if (sample_trace_write(w, 1, 1, NULL))
				_exit(4);
	}
	/* Wait until the file has grown past a few chunks, then kill. */
	for (int i = 0; i < 5000; i++) {
		if (stat(partial, &st) == 0 && st.st_size > 64 * 1024)
			break;
		usleep(1000);
	}
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(access(path, F_OK), -1); /* never renamed */
	err = trace_read(partial, &ops, &c, &info);
	/* Killed: never a clean end, whether it died between chunks or in one. */
	assert_int_equal(err, FSS_E_TRUNCATED);
	assert_true(info.end == TRACE_END_MISSING || info.end == TRACE_END_CUT);
	assert_int_equal(info.damage.gaps, 0);
	assert_true(c.records > 100);
	unlink(partial);
	rmdir(dir);
}

/* Strings come in parts and are assembled per source. */
static void test_strtab_assembles_parts(void **state)
{
	strtab_t *t = strtab_new();
	struct fss_rec_string part;
	char text[300];

	(void)state;
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = (char)('A' + i % 26);
	/* Parts out of order. */
	for (int k = 2; k >= 0; k--) {
		size_t off = (size_t)k * FSS_STRING_PART_BYTES;
		size_t len = sizeof(text) - off < FSS_STRING_PART_BYTES ? sizeof(text) - off : FSS_STRING_PART_BYTES;

		record_init(&part, FSS_REC_STRING, sizeof(part), 4);
		part.id = 7;
		part.total_len = sizeof(text);
		part.offset = (uint16_t)off;
		memcpy(part.text, text + off, len);
		assert_int_equal(strtab_add_part(t, &part), 0);
		if (k > 0)
			assert_null(strtab_get(t, 4, 7)); /* incomplete */
	}
	assert_non_null(strtab_get(t, 4, 7));
	assert_memory_equal(strtab_get(t, 4, 7), text, sizeof(text));
	assert_int_equal(strlen(strtab_get(t, 4, 7)), sizeof(text));
	assert_null(strtab_get(t, 5, 7)); /* other source */
	/* Many strings force the table to grow. */
	for (uint32_t id = 1; id < 2000; id++) {
		record_init(&part, FSS_REC_STRING, sizeof(part), 1);
		part.id = id;
		part.total_len = (uint16_t)snprintf(part.text, sizeof(part.text), "s%u", id);
		assert_int_equal(strtab_add_part(t, &part), 0);
	}
	assert_string_equal(strtab_get(t, 1, 1234), "s1234");
	/* A part that overruns its declared length is refused. */
	part.offset = FSS_STRING_PART_BYTES;
	part.total_len = 3;
	assert_int_equal(strtab_add_part(t, &part), -22);
	strtab_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_truncation_at_every_offset),
		cmocka_unit_test(test_incremental_feed),
		cmocka_unit_test(test_damaged_chunk_is_skipped),
		cmocka_unit_test(test_garbage_between_chunks),
		cmocka_unit_test(test_missing_chunk_and_two_gaps),
		cmocka_unit_test(test_damaged_header),
		cmocka_unit_test(test_salvage_every_header_bit),
		cmocka_unit_test(test_salvage_header_and_chunk),
		cmocka_unit_test(test_salvage_header_and_garbage),
		cmocka_unit_test(test_salvage_finds_nothing),
		cmocka_unit_test(test_tiny_inputs),
		cmocka_unit_test(test_version_1_0_cannot_say),
		cmocka_unit_test(test_writer_ends_with_trace_end),
		cmocka_unit_test(test_read_file_classifies),
		cmocka_unit_test(test_killed_writer_leaves_readable_partial),
		cmocka_unit_test(test_strtab_assembles_parts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
