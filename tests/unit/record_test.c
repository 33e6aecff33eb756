/*
 * record_test.c - the schema: sizes, field tables, names, round trip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/record.h"
#include "common/record_fields.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "tests/support/sample_records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The field table of every type covers every byte after the head exactly
 * once, in order: a field added to a struct without a description fails. */
static void test_field_tables_cover_every_byte(void **state)
{
	(void)state;
	for (uint16_t t = 1; t < FSS_REC_TYPE_MAX; t++) {
		size_t n, pos = sizeof(struct fss_record_head);
		const struct record_field *f = record_fields(t, &n);

		assert_non_null(f);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(f[i].offset, pos);
			assert_true(f[i].size > 0);
			if (f[i].kind >= FIELD_ENUM8 && f[i].kind <= FIELD_ENUM32)
				assert_non_null(f[i].enum_name);
			pos += f[i].size;
		}
		assert_int_equal(pos, record_known_size(t));
		assert_string_not_equal(record_type_name(t), "unknown");
	}
	size_t n;
	assert_null(record_fields(0, &n));
	assert_null(record_fields(FSS_REC_TYPE_MAX, &n));
	assert_int_equal(record_known_size(FSS_REC_TYPE_MAX), 0);
}

/* Every time field says which clock it is on, so that a trace's stamps can
 * be moved onto another time base from the table alone: a field named *_ns
 * without a clock (a new record type's) fails here. */
static void test_time_fields_name_their_clock(void **state)
{
	unsigned mono = 0;

	(void)state;
	for (uint16_t t = 1; t < FSS_REC_TYPE_MAX; t++) {
		size_t n;
		const struct record_field *f = record_fields(t, &n);

		for (size_t i = 0; i < n; i++) {
			size_t len = strlen(f[i].name);
			int named_ns = len > 3 && strcmp(f[i].name + len - 3, "_ns") == 0;

			if (named_ns && f[i].clock == FIELD_CLOCK_NONE)
				fail_msg("%s.%s is a time without a clock in common/record_fields.c", record_type_name(t),
					 f[i].name);
			if (f[i].clock != FIELD_CLOCK_NONE) {
				assert_int_equal(f[i].size, 8);
				assert_int_equal(f[i].kind, FIELD_U64);
			}
			mono += f[i].clock == FIELD_CLOCK_MONO;
		}
	}
	assert_true(mono >= 17); /* hello, comm x2, collective x2, group x3, nvtx x2, anchor, drops, ... */
}

/* record_shift_clock moves exactly the fields on the clock it is given, by
 * delta, and back; zero stays zero; nothing falls to zero or below. */
static void test_shift_clock_moves_only_that_clock(void **state)
{
	_Alignas(8) unsigned char rec[FSS_RECORD_MAX_BYTES], orig[FSS_RECORD_MAX_BYTES];

	(void)state;
	for (uint16_t t = 1; t < FSS_REC_TYPE_MAX; t++) {
		size_t n, size = sample_record(t, 0, t, rec);
		const struct record_field *f = record_fields(t, &n);
		unsigned want = 0;

		memcpy(orig, rec, size);
		for (size_t i = 0; i < n; i++)
			want += f[i].clock == FIELD_CLOCK_MONO;
		assert_int_equal(record_shift_clock(rec, FIELD_CLOCK_MONO, -1000), want);
		for (size_t i = 0; i < n; i++) {
			uint64_t before = record_field_uint(orig, &f[i]), after = record_field_uint(rec, &f[i]);

			if (f[i].clock == FIELD_CLOCK_MONO)
				assert_true(after == before - 1000);
			else if (f[i].kind != FIELD_TEXT)
				assert_true(after == before);
		}
		if (want)
			assert_true(record_latest_time(rec, FIELD_CLOCK_MONO) + 1000 ==
				    record_latest_time(orig, FIELD_CLOCK_MONO));
		else
			assert_true(record_latest_time(rec, FIELD_CLOCK_MONO) == 0);
		record_shift_clock(rec, FIELD_CLOCK_MONO, 1000);
		assert_memory_equal(rec, orig, size);
	}
	/* A stamp of 0 is no time; one that would fall to 0 or below stops at 1. */
	struct fss_rec_collective c;
	record_init(&c, FSS_REC_COLLECTIVE, sizeof(c), 0);
	c.enter_ns = 500;
	c.exit_ns = 0;
	assert_int_equal(record_shift_clock(&c, FIELD_CLOCK_MONO, -500), 1);
	assert_true(c.enter_ns == 1 && c.exit_ns == 0);
	c.enter_ns = 10;
	record_shift_clock(&c, FIELD_CLOCK_MONO, INT64_MIN);
	assert_true(c.enter_ns == 1);
	/* The GPU side is on the CUPTI base: not moved with CLOCK_MONOTONIC. */
	struct fss_rec_gpu_interval g;
	record_init(&g, FSS_REC_GPU_INTERVAL, sizeof(g), 0);
	g.start_ns = 100;
	g.end_ns = 200;
	assert_int_equal(record_shift_clock(&g, FIELD_CLOCK_MONO, 7), 0);
	assert_true(record_latest_time(&g, FIELD_CLOCK_CUPTI) == 200);
	struct fss_rec_string str;
	record_init(&str, FSS_REC_STRING, sizeof(str), 0);
	assert_true(record_latest_time(&str, FIELD_CLOCK_MONO) == 0);
}

static void test_names_and_dtypes(void **state)
{
	(void)state;
	assert_string_equal(record_op_name(FSS_OP_ALLGATHER), "AllGather");
	assert_string_equal(record_op_name(0), "unknown");
	assert_string_equal(record_op_name(200), "unknown");
	assert_string_equal(record_dtype_name(FSS_DTYPE_BFLOAT16), "bfloat16");
	assert_int_equal(record_dtype_bytes(FSS_DTYPE_BFLOAT16), 2);
	assert_int_equal(record_dtype_bytes(FSS_DTYPE_FLOAT64), 8);
	assert_int_equal(record_dtype_bytes(FSS_DTYPE_MAX), 0);
	assert_string_equal(record_redop_name(FSS_REDOP_NONE), "none");
	assert_string_equal(record_gpu_kind_name(FSS_GPU_MEMCPY), "memcpy");
	/* FNV-1a 64 reference values. */
	assert_true(record_hash_bytes("", 0) == 0xcbf29ce484222325ull);
	assert_true(record_hash_bytes("a", 1) == 0xaf63dc4c8601ec8cull);
}

struct collect {
	unsigned char *bytes; /* every record as read, concatenated */
	size_t len, cap;
	uint64_t records;
};

static int collect_record(void *ctx, const struct fss_record_head *rec)
{
	struct collect *c = ctx;

	if (rec->source == FSS_SOURCE_NONE)
		return 0; /* the writer's, not one of the records written */
	if (c->len + rec->size > c->cap) {
		c->cap = (c->len + rec->size) * 2;
		c->bytes = realloc(c->bytes, c->cap);
		assert_non_null(c->bytes);
	}
	memcpy(c->bytes + c->len, rec, rec->size);
	c->len += rec->size;
	c->records++;
	return 0;
}

/* Every record type written through the writer reads back bit-exact. */
static void test_every_type_round_trips_bit_exact(void **state)
{
	char path[] = "/tmp/fss_record_test_XXXXXX";
	_Alignas(8) unsigned char buf[FSS_RECORD_MAX_BYTES];
	struct trace_parser_ops ops = {.on_record = collect_record};
	struct collect got = {0};
	unsigned char *want = NULL;
	size_t want_len = 0;
	trace_writer_t *w;
	char err[256];
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(trace_writer_open(&w, path, NULL), 0);
	for (uint32_t salt = 0; salt < 3; salt++)
		for (uint16_t t = 1; t < FSS_REC_TYPE_MAX; t++) {
			size_t size = sample_record(t, salt, salt * 7 + t, buf);

			assert_true(size > 0);
			assert_int_equal(trace_writer_append(w, buf), 0);
			want = realloc(want, want_len + size);
			memcpy(want + want_len, buf, size);
			want_len += size;
		}
	/* A long string in parts. */
	char text[250];
	memset(text, 'x', sizeof(text));
	assert_int_equal(trace_writer_string(w, 0, 9, text, sizeof(text)), 0);
	assert_int_equal(trace_writer_close(w), 0);
	assert_int_equal(access(path, F_OK), 0);

	assert_int_equal(trace_read_file(path, &ops, &got, err, sizeof(err)), 0);
	assert_int_equal(got.records, 3 * (FSS_REC_TYPE_MAX - 1) + 3);
	assert_true(got.len >= want_len);
	assert_memory_equal(got.bytes, want, want_len);
	unlink(path);
	free(want);
	free(got.bytes);
}

/* A record of an unknown type is passed to the reader with its size and
 * skipped by it; the records after it still come through. A record shorter
 * than this version's struct (an older writer) is zero-extended. */
static void test_unknown_and_short_records(void **state)
{
	char path[] = "/tmp/fss_record_test_XXXXXX";
	_Alignas(8) unsigned char buf[FSS_RECORD_MAX_BYTES];
	struct trace_parser_ops ops = {.on_record = collect_record};
	struct collect got = {0};
	trace_writer_t *w;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(trace_writer_open(&w, path, NULL), 0);
	record_init(buf, 999, 40, 0);
	memset(buf + 8, 0xab, 32);
	assert_int_equal(trace_writer_append(w, buf), 0);
	/* A collective as an older writer might have written it: 48 bytes. */
	sample_record(FSS_REC_COLLECTIVE, 0, 5, buf);
	((struct fss_record_head *)buf)->size = 48;
	assert_int_equal(trace_writer_append(w, buf), 0);
	assert_int_equal(trace_writer_close(w), 0);

	assert_int_equal(trace_read_file(path, &ops, &got, NULL, 0), 0);
	assert_int_equal(got.records, 2);
	assert_int_equal(((struct fss_record_head *)got.bytes)->type, 999);
	const struct fss_rec_collective *c = (const void *)(got.bytes + 40);
	assert_int_equal(c->head.size, 48);
	uint64_t seq;
	memcpy(&seq, buf + offsetof(struct fss_rec_collective, seq), 8);
	assert_true(c->seq == seq);
	unlink(path);
	free(got.bytes);
}

/* docs/format.md lists every field of every record at its offset and size
 * (the table is generated by scripts/format_tables.py from record.h). */
static void test_format_doc_lists_every_field(void **state)
{
	FILE *f = fopen(FSS_SOURCE_DIR "/docs/format.md", "r");
	static char doc[1 << 20];
	size_t len;

	(void)state;
	assert_non_null(f);
	len = fread(doc, 1, sizeof(doc) - 1, f);
	doc[len] = '\0';
	fclose(f);
	for (uint16_t t = 1; t < FSS_REC_TYPE_MAX; t++) {
		size_t n;
		const struct record_field *fields = record_fields(t, &n);
		char want[160];

		snprintf(want, sizeof(want), "| %u | `%s` | %zu |", t, record_type_name(t), record_known_size(t));
		if (!strstr(doc, want))
			fail_msg("docs/format.md lacks the type row '%s'", want);
		for (size_t i = 0; i < n; i++) {
			snprintf(want, sizeof(want), "| %zu | %zu | ", fields[i].offset, fields[i].size);
			char name[64];
			snprintf(name, sizeof(name), "| `%s` |", fields[i].name);
			/* Find the row: offset and size, then the name on the same line. */
			const char *p = doc;
			int found = 0;
			while ((p = strstr(p, want))) {
				const char *eol = strchr(p, '\n');
				const char *hit = strstr(p, name);
				if (hit && (!eol || hit < eol)) {
					found = 1;
					break;
				}
				p++;
			}
			if (!found)
				fail_msg("docs/format.md lacks %s.%s at offset %zu (run scripts/format_tables.py)",
					 record_type_name(t), fields[i].name, fields[i].offset);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_field_tables_cover_every_byte),
		cmocka_unit_test(test_time_fields_name_their_clock),
		cmocka_unit_test(test_shift_clock_moves_only_that_clock),
		cmocka_unit_test(test_names_and_dtypes),
		cmocka_unit_test(test_every_type_round_trips_bit_exact),
		cmocka_unit_test(test_unknown_and_short_records),
		cmocka_unit_test(test_format_doc_lists_every_field),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
