/*
 * json.c - JSON string literals.
 */
#include "common/json.h"

#include <stdint.h>

/* The length of the valid UTF-8 sequence at s[0..n), 0 when it is not one. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
	uint32_t cp;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static int plain(unsigned char c)
{
	return c >= 0x20 && c != 0x7f && c != '"' && c != '\\';
}

void json_string_put(const char *s, size_t len, json_put_fn put, void *ctx)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	put(ctx, "\"", 1);
	while (i < len) {
		size_t run = i, n;

		/* The longest run that needs no escaping, in one piece. */
		while (run < len && plain(p[run]) && (n = utf8_sequence(p + run, len - run)) > 0)
			run += n;
		if (run > i)
			put(ctx, s + i, run - i);
		if (run == len)
			break;
		i = run;
		switch (p[i]) {
		case '"': put(ctx, "\\\"", 2); break;
		case '\\': put(ctx, "\\\\", 2); break;
		case '\n': put(ctx, "\\n", 2); break;
		case '\r': put(ctx, "\\r", 2); break;
		case '\t': put(ctx, "\\t", 2); break;
		default: {
			char u[6] = {'\\', 'u', '0', '0', hex[p[i] >> 4], hex[p[i] & 15]};
			put(ctx, u, sizeof(u));
		}
		}
		i++;
	}
	put(ctx, "\"", 1);
}

static void put_stream(void *ctx, const char *s, size_t n)
{
	fwrite(s, 1, n, (FILE *)ctx);
}

void json_string(FILE *f, const char *s, size_t len)
{
	json_string_put(s, len, put_stream, f);
}
