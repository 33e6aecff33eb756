/*
 * json_writer.c - the JSON writer of json_writer.h.
 *
 * Every byte goes through jw_raw, so the two layouts and the two sinks
 * differ in two places only: the separator (jw_sep, jw_close) and the sink
 * (jw_raw, a stream or a text_buffer).
 */
#include "common/json_writer.h"

#include "common/json.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void jw_init_file(struct jw *w, FILE *out)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
	w->first = 1;
}

void jw_init_buffer(struct jw *w, int compact)
{
	memset(w, 0, sizeof(*w));
	w->compact = compact;
	w->first = 1;
}

int jw_buffer_take(struct jw *w, char **buf, size_t *len)
{
	int rc = text_buffer_take(&w->text, buf, len);

	jw_init_buffer(w, w->compact);
	return rc;
}

void jw_raw(struct jw *w, const char *s, size_t n)
{
	if (w->out)
		fwrite(s, 1, n, w->out);
	else
		text_buffer_append(&w->text, s, n);
}

void jw_rawf(struct jw *w, const char *fmt, ...)
{
	char small[64];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof(small))
		jw_raw(w, small, (size_t)n);
}

static void put_raw(void *ctx, const char *s, size_t n)
{
	jw_raw(ctx, s, n);
}

static void jw_string(struct jw *w, const char *s, size_t len)
{
	json_string_put(s, len, put_raw, w);
}

static void jw_indent(struct jw *w)
{
	for (int i = 0; i < w->depth; i++)
		jw_raw(w, "  ", 2);
}

void jw_sep(struct jw *w, const char *key)
{
	if (w->compact) {
		if (!w->first)
			jw_raw(w, ",", 1);
	} else {
		if (w->first)
			jw_raw(w, "\n", 1);
		else
			jw_raw(w, ",\n", 2);
		jw_indent(w);
	}
	w->first = 0;
	if (key) {
		jw_string(w, key, strlen(key));
		jw_raw(w, ": ", w->compact ? 1 : 2);
	}
}

void jw_open(struct jw *w, const char *key, char bracket)
{
	if (w->depth > 0)
		jw_sep(w, key);
	jw_raw(w, &bracket, 1);
	w->depth++;
	w->first = 1;
}

void jw_close(struct jw *w, char bracket)
{
	w->depth--;
	if (!w->first && !w->compact) {
		jw_raw(w, "\n", 1);
		jw_indent(w);
	}
	jw_raw(w, &bracket, 1);
	w->first = 0;
}

void jw_u64(struct jw *w, const char *key, uint64_t v)
{
	jw_sep(w, key);
	jw_rawf(w, "%" PRIu64, v);
}

void jw_i64(struct jw *w, const char *key, int64_t v)
{
	jw_sep(w, key);
	jw_rawf(w, "%" PRId64, v);
}

void jw_null(struct jw *w, const char *key)
{
	jw_sep(w, key);
	jw_raw(w, "null", 4);
}

void jw_bool(struct jw *w, const char *key, int v)
{
	jw_sep(w, key);
	jw_raw(w, v ? "true" : "false", v ? 4 : 5);
}

void jw_u64_or_null(struct jw *w, const char *key, uint64_t v, int known)
{
	if (known)
		jw_u64(w, key, v);
	else
		jw_null(w, key);
}

void jw_str(struct jw *w, const char *key, const char *s)
{
	jw_sep(w, key);
	if (s)
		jw_string(w, s, strlen(s));
	else
		jw_raw(w, "null", 4);
}

void jw_strn(struct jw *w, const char *key, const char *s, size_t max)
{
	jw_sep(w, key);
	jw_string(w, s, strnlen(s, max));
}

void jw_hex(struct jw *w, const char *key, uint64_t v)
{
	char hex[24];

	snprintf(hex, sizeof(hex), "%016" PRIx64, v);
	jw_str(w, key, hex);
}
