/*
 * json_writer_test.c - common/json_writer: one writer, two layouts, two sinks.
 *
 *   - the compact layout is one line: "key":value, no space, no newline;
 *   - the pretty layout to a buffer is byte for byte what it writes to a
 *     stream (the report's layout: two-space indent, one member a line);
 *   - a fixed-size text without a NUL ends with its array, strings are
 *     escaped, identifiers are 16 hex digits, unknown counts are null;
 *   - a buffer grows past its first allocation and hands over a NUL-ended
 *     text of the length it says; an empty one is "".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/json_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The same document through any writer. */
static void write_document(struct jw *w)
{
	char text[4] = {'a', 'b', 'c', 'd'}; /* no NUL: the array's end ends it */

	jw_open(w, NULL, '{');
	jw_str(w, "schema", "test/1");
	jw_u64(w, "big", UINT64_MAX);
	jw_i64(w, "negative", -42);
	jw_bool(w, "yes", 1);
	jw_null(w, "nothing");
	jw_u64_or_null(w, "unknown", 7, 0);
	jw_u64_or_null(w, "known", 7, 1);
	jw_str(w, "absent", NULL);
	jw_strn(w, "text", text, sizeof(text));
	jw_str(w, "escaped", "q\"\\\n\x01");
	jw_hex(w, "id", 0xabcull);
	jw_open(w, "list", '[');
	jw_u64(w, NULL, 1);
	jw_open(w, NULL, '{');
	jw_close(w, '}');
	jw_open(w, NULL, '[');
	jw_close(w, ']');
	jw_close(w, ']');
	jw_sep(w, "raw");
	jw_rawf(w, "%.3g", 0.5);
	jw_close(w, '}');
}

static void test_compact(void **state)
{
	struct jw w;
	char *text;
	size_t len;

	(void)state;
	jw_init_buffer(&w, 1);
	write_document(&w);
	assert_int_equal(jw_buffer_take(&w, &text, &len), 0);
	assert_string_equal(text, "{\"schema\":\"test/1\",\"big\":18446744073709551615,\"negative\":-42,\"yes\":true,"
				  "\"nothing\":null,\"unknown\":null,\"known\":7,\"absent\":null,\"text\":\"abcd\","
				  "\"escaped\":\"q\\\"\\\\\\n\\u0001\",\"id\":\"0000000000000abc\",\"list\":[1,{},[]],"
				  "\"raw\":0.5}");
	assert_int_equal(strlen(text), len);
	free(text);
}

static void test_pretty_buffer_is_the_stream(void **state)
{
	struct jw w;
	char *text, *streamed = NULL;
	size_t len, streamed_len = 0;
	FILE *f = open_memstream(&streamed, &streamed_len);

	(void)state;
	assert_non_null(f);
	jw_init_file(&w, f);
	write_document(&w);
	fclose(f);
	jw_init_buffer(&w, 0);
	write_document(&w);
	assert_int_equal(jw_buffer_take(&w, &text, &len), 0);
	assert_int_equal(len, streamed_len);
	assert_memory_equal(text, streamed, len);
	assert_memory_equal(text, "{\n  \"schema\": \"test/1\",\n  \"big\": 18446744073709551615,", 52);
	assert_non_null(strstr(text, "\n  \"list\": [\n    1,\n    {},\n    []\n  ],\n  \"raw\": 0.5\n}"));
	free(text);
	free(streamed);
}

static void test_buffer_grows(void **state)
{
	struct jw w;
	char *text;
	size_t len;

	(void)state;
	jw_init_buffer(&w, 1);
	assert_int_equal(jw_buffer_take(&w, &text, &len), 0);
	assert_string_equal(text, "");
	assert_int_equal(len, 0);
	free(text);
	jw_open(&w, NULL, '[');
	for (int i = 0; i < 10000; i++)
		jw_u64(&w, NULL, 1000000 + (uint64_t)i);
	jw_close(&w, ']');
	assert_int_equal(jw_buffer_take(&w, &text, &len), 0);
	assert_int_equal(len, 2 + 10000 * 7 + 9999);
	assert_int_equal(strlen(text), len);
	assert_memory_equal(text, "[1000000,1000001,", 17);
	assert_memory_equal(text + len - 9, ",1009999]", 9);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_compact),
	    cmocka_unit_test(test_pretty_buffer_is_the_stream),
	    cmocka_unit_test(test_buffer_grows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
