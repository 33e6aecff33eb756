/*
 * text_buffer.c - a growing text in memory (text_buffer.h).
 */
#include "common/text_buffer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for `more` bytes and a NUL after the text; 0 when there is none. */
static int reserve(struct text_buffer *b, size_t more)
{
	size_t cap;
	char *p;

	if (b->oom)
		return 0;
	if (b->len + more + 1 <= b->cap)
		return 1;
	cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more + 1)
		cap *= 2;
	p = realloc(b->text, cap);
	if (!p) {
		b->oom = 1;
		return 0;
	}
	b->text = p;
	b->cap = cap;
	return 1;
}

void text_buffer_append(struct text_buffer *b, const char *s, size_t n)
{
	if (!reserve(b, n))
		return;
	memcpy(b->text + b->len, s, n);
	b->len += n;
	b->text[b->len] = '\0';
}

void text_buffer_printf(struct text_buffer *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	/* In the room there is, most often; else again with room made. */
	if (!reserve(b, 0))
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->text + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->text[b->len] = '\0';
		b->oom = 1;
		return;
	}
	if ((size_t)n >= b->cap - b->len) {
		b->text[b->len] = '\0';
		if (!reserve(b, (size_t)n))
			return;
		va_start(ap, fmt);
		vsnprintf(b->text + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

int text_buffer_take(struct text_buffer *b, char **text, size_t *len)
{
	int rc = reserve(b, 0) ? 0 : -ENOMEM;

	if (rc == 0) {
		b->text[b->len] = '\0';
		*text = b->text;
		*len = b->len;
	} else {
		free(b->text);
	}
	memset(b, 0, sizeof(*b));
	return rc;
}
