/*
 * report_html_escape.c - text into HTML (report_html_escape.h): UTF-8
 * checked byte by byte (RFC 3629's table of well-formed sequences), markup
 * characters as references.
 */
#include "cli/report_html_escape.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HTML_REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */

/* The length of the well-formed sequence at s (at most len bytes), 0 when
 * s[0] starts none. The second byte's range depends on the first, which is
 * what rules out overlong forms, surrogates and values past U+10FFFF. */
static size_t utf8_sequence(const unsigned char *s, size_t len)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xBF;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 3;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 4;
	else
		return 0;
	if (c == 0xE0)
		lo = 0xA0;
	else if (c == 0xED)
		hi = 0x9F;
	else if (c == 0xF0)
		lo = 0x90;
	else if (c == 0xF4)
		hi = 0x8F;
	if (len < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return n;
}

int html_utf8_valid(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		size_t n = utf8_sequence(u + i, len - i);
		if (!n)
			return 0;
		i += n;
	}
	return 1;
}

/* The reference that stands for an ASCII byte in HTML, NULL when it stands
 * for itself. C0 controls (tab and newline aside) and DEL are not allowed
 * as text by the HTML standard: they become U+FFFD. */
static const char *html_reference(unsigned char c)
{
	switch (c) {
	case '&':
		return "&amp;";
	case '<':
		return "&lt;";
	case '>':
		return "&gt;";
	case '"':
		return "&quot;";
	case '\'':
		return "&#39;";
	case '\t':
	case '\n':
		return NULL;
	default:
		return c < 0x20 || c == 0x7F ? HTML_REPLACEMENT : NULL;
	}
}

void html_escape_n(FILE *out, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t run = 0; /* bytes at u + i - run that pass through as they are */

	for (size_t i = 0; i < len;) {
		size_t n = utf8_sequence(u + i, len - i);
		const char *ref = n == 0 ? HTML_REPLACEMENT : n == 1 ? html_reference(u[i]) : NULL;

		if (!ref) {
			run += n;
			i += n;
			continue;
		}
		fwrite(u + i - run, 1, run, out);
		fputs(ref, out);
		run = 0;
		i += n ? n : 1;
	}
	fwrite(u + len - run, 1, run, out);
}

void html_escape(FILE *out, const char *s)
{
	if (s)
		html_escape_n(out, s, strlen(s));
}

void html_printf(FILE *out, const char *fmt, ...)
{
	char buf[16384];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	html_escape_n(out, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}
