/*
 * text_buffer_test.c - common/text_buffer: a growing text.
 *
 *   - an empty buffer hands over "" (a text to free, never NULL);
 *   - appends and printf output of any length, past the first allocation
 *     and in the room there is, come out in order, NUL-ended, of the
 *     length said; the buffer is empty after its text is taken.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/text_buffer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_empty(void **state)
{
	struct text_buffer b = {0};
	char *text;
	size_t len;

	(void)state;
	assert_int_equal(text_buffer_take(&b, &text, &len), 0);
	assert_non_null(text);
	assert_string_equal(text, "");
	assert_int_equal(len, 0);
	free(text);
}

static void test_grows(void **state)
{
	struct text_buffer b = {0};
	char long_text[10001], *text;
	size_t len;

	(void)state;
	memset(long_text, 'y', sizeof(long_text) - 1);
	long_text[sizeof(long_text) - 1] = '\0';
	text_buffer_append(&b, "ab", 2);
	text_buffer_printf(&b, "%d-%s", 42, "c");
	text_buffer_printf(&b, "[%s]", long_text);
	text_buffer_append(&b, "z", 1);
	assert_int_equal(text_buffer_take(&b, &text, &len), 0);
	assert_int_equal(len, 2 + 4 + 10002 + 1);
	assert_int_equal(strlen(text), len);
	assert_memory_equal(text, "ab42-c[yyy", 10);
	assert_memory_equal(text + len - 4, "yy]z", 4);
	free(text);
	assert_null(b.text);
	assert_int_equal(b.len, 0);
}

/* text_fit: whole when it fits; else cut where a character starts, after
 * a line when one ends near the cut, and marked with the bytes cut. */
static void test_fit(void **state)
{
	char small[8], room[200], text[400], want[160];
	size_t cut;

	(void)state;
	assert_int_equal(text_fit(room, sizeof room, "fits"), 0);
	assert_string_equal(room, "fits");
	assert_int_equal(text_fit(room, 5, "five!"), 1); /* a NUL needs room too */
	assert_string_equal(room, "five");	     /* "[cut]" would take more than half */
	assert_int_equal(text_fit(small, sizeof small, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"), 4);
	assert_string_equal(small, "\xc3\xa9\xc3\xa9\xc3\xa9"); /* no half character */
	for (int i = 0; i < 40; i++)
		snprintf(text + 9 * i, sizeof text - 9 * (size_t)i, "line %03d\n", i);
	cut = text_fit(room, sizeof room, text);
	assert_true(cut > 0);
	/* the kept part is whole lines, the mark on its own line, the count exact */
	const char *mark = strstr(room, "\n[cut here: ");
	assert_non_null(mark);
	assert_int_equal((size_t)(mark - room) + cut, strlen(text));
	snprintf(want, sizeof want, "\n[cut here: %zu more bytes; fsdpscope lint shows the whole text]", cut);
	assert_string_equal(mark, want);
	assert_int_equal(strncmp(room, text, (size_t)(mark - room)), 0);
	assert_true(strlen(room) < sizeof room);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_empty),
	    cmocka_unit_test(test_grows),
	    cmocka_unit_test(test_fit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
