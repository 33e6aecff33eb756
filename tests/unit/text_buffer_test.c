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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_empty),
	    cmocka_unit_test(test_grows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
