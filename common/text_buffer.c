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

/* Where to cut s[0..room) so a character is not split and, when a line
 * ends in the last quarter, after that line. */
static size_t cut_point(const char *s, size_t room)
{
	size_t at = room;

	while (at > 0 && ((unsigned char)s[at] & 0xc0) == 0x80)
		at--;
	for (size_t i = at; i > at - at / 4 && i > 0; i--)
		if (s[i - 1] == '\n')
			return i;
	return at;
}

size_t text_fit(char *dst, size_t len, const char *src)
{
	static const char long_fmt[] = "\n[cut here: %zu more bytes; fsdpscope lint shows the whole text]";
	static const char short_mark[] = "[cut]";
	size_t n = strlen(src), mark_len, keep;
	int long_mark;

	if (!len)
		return n;
	if (n < len) {
		memcpy(dst, src, n + 1);
		return 0;
	}
	/* room for the mark as it reads with the most bytes cut (all n) */
	mark_len = (size_t)snprintf(NULL, 0, long_fmt, n);
	long_mark = mark_len + 1 <= len / 2;
	if (!long_mark)
		mark_len = sizeof short_mark - 1 < len / 2 ? sizeof short_mark - 1 : 0;
	keep = cut_point(src, len - 1 - mark_len);
	if (long_mark && keep > 0 && src[keep - 1] == '\n')
		keep--; /* the mark opens its own line */
	memcpy(dst, src, keep);
	if (long_mark)
		snprintf(dst + keep, len - keep, long_fmt, n - keep);
	else
		snprintf(dst + keep, len - keep, "%s", mark_len ? short_mark : "");
	return n - keep;
}
