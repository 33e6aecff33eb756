/*
 * trace_test.c - trace files: chunks, truncation at every byte, damage,
 * incremental parsing, a writer killed mid-run, strings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/error.h"
#include "common/record.h"
#include "common/strtab.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "tests/support/sample_records.h"

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
	assert_int_equal(l->records_upto[l->chunks - 1], n);
	f = slurp(path);
	assert_int_equal(f.len, l->chunk_end[l->chunks - 1]);
	unlink(path);
	return f;
}

struct counter {
	uint64_t records;
};

static int count_record(void *ctx, const struct fss_record_head *rec)
{
	struct counter *c = ctx;

	assert_true(rec->size >= 8);
	c->records++;
	return 0;
}

/* Feed a prefix of the trace; return finish()'s value and the count. */
static int parse_prefix(const struct file *f, size_t cut, size_t piece, uint64_t *records)
{
	struct counter c = {0};
	struct trace_parser_ops ops = {.on_record = count_record};
	trace_parser_t *p = trace_parser_new(&ops, &c);
	int err = 0;

	assert_non_null(p);
	for (size_t off = 0; off < cut && !err; off += piece)
		err = trace_parser_feed(p, f->data + off, off + piece > cut ? cut - off : piece);
	if (!err)
		err = trace_parser_finish(p);
	if (err)
		assert_true(trace_parser_error(p)[0] != '\0');
	*records = c.records;
	assert_int_equal(trace_parser_records(p), c.records);
	trace_parser_free(p);
	return err;
}

/* Cut the trace at every byte offset: every complete chunk before the cut
 * reads back, nothing of the cut chunk does, and the end is reported as
 * clean only at a chunk boundary. */
static void test_truncation_at_every_offset(void **state)
{
	struct layout l;
	struct file f = small_trace(&l);

	(void)state;
	for (size_t cut = 0; cut <= f.len; cut++) {
		uint64_t records, expect = 0;
		int boundary = cut == l.header_end, err;

		for (size_t c = 0; c < l.chunks; c++) {
			if (l.chunk_end[c] <= cut)
				expect = l.records_upto[c];
			if (l.chunk_end[c] == cut)
				boundary = 1;
		}
		err = parse_prefix(&f, cut, f.len + 1, &records);
		assert_int_equal(records, expect);
		if (boundary)
			assert_int_equal(err, 0);
		else
			assert_int_equal(err, FSS_E_TRUNCATED);
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

/* Flip one byte inside each chunk in turn: the chunks before it read back,
 * the damaged one is refused as corrupt, and nothing after it is delivered. */
static void test_damaged_chunk_is_refused(void **state)
{
	struct layout l;
	struct file f = small_trace(&l);

	(void)state;
	for (size_t c = 0; c < l.chunks; c++) {
		size_t start = c ? l.chunk_end[c - 1] : l.header_end;
		size_t mid = start + (l.chunk_end[c] - start) / 2;
		uint64_t records;

		f.data[mid] ^= 0x40;
		assert_int_equal(parse_prefix(&f, f.len, f.len, &records), FSS_E_CORRUPT);
		assert_int_equal(records, c ? l.records_upto[c - 1] : 0);
		f.data[mid] ^= 0x40;
	}
	/* A damaged file header: nothing at all. */
	uint64_t records;
	f.data[40] ^= 1;
	assert_int_equal(parse_prefix(&f, f.len, f.len, &records), FSS_E_CORRUPT);
	assert_int_equal(records, 0);
	f.data[40] ^= 1;
	f.data[0] = 'X';
	assert_int_equal(parse_prefix(&f, f.len, f.len, &records), FSS_E_NOT_TRACE);
	f.data[0] = 'F';
	f.data[12] = 9; /* major version 9 */
	assert_int_equal(parse_prefix(&f, f.len, f.len, &records), FSS_E_VERSION);
	free(f.data);
}

/* A writer SIGKILLed mid-run leaves <path>.partial whose chunks read back. */
static void test_killed_writer_leaves_readable_partial(void **state)
{
	char dir[] = "/tmp/fss_trace_kill_XXXXXX";
	char path[128], partial[160];
	struct counter c = {0};
	struct trace_parser_ops ops = {.on_record = count_record};
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
	err = trace_read_file(partial, &ops, &c, NULL, 0);
	assert_true(err == 0 || err == FSS_E_TRUNCATED);
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
		cmocka_unit_test(test_damaged_chunk_is_refused),
		cmocka_unit_test(test_killed_writer_leaves_readable_partial),
		cmocka_unit_test(test_strtab_assembles_parts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
