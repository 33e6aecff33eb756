/*
 * json_writer.c - the report's pretty-printing JSON writer (json_writer.h).
 */
#include "cli/json_writer.h"

#include "common/json.h"

#include <inttypes.h>
#include <string.h>

void jw_sep(struct jw *w, const char *key)
{
	fputs(w->first ? "\n" : ",\n", w->out);
	w->first = 0;
	for (int i = 0; i < w->depth; i++)
		fputs("  ", w->out);
	if (key) {
		json_string(w->out, key, strlen(key));
		fputs(": ", w->out);
	}
}

void jw_open(struct jw *w, const char *key, char bracket)
{
	if (w->depth > 0)
		jw_sep(w, key);
	fputc(bracket, w->out);
	w->depth++;
	w->first = 1;
}

void jw_close(struct jw *w, char bracket)
{
	w->depth--;
	if (!w->first) {
		fputc('\n', w->out);
		for (int i = 0; i < w->depth; i++)
			fputs("  ", w->out);
	}
	fputc(bracket, w->out);
	w->first = 0;
}

void jw_u64(struct jw *w, const char *key, uint64_t v)
{
	jw_sep(w, key);
	fprintf(w->out, "%" PRIu64, v);
}

void jw_i64(struct jw *w, const char *key, int64_t v)
{
	jw_sep(w, key);
	fprintf(w->out, "%" PRId64, v);
}

void jw_null(struct jw *w, const char *key)
{
	jw_sep(w, key);
	fputs("null", w->out);
}

void jw_bool(struct jw *w, const char *key, int v)
{
	jw_sep(w, key);
	fputs(v ? "true" : "false", w->out);
}

/* jw_str - a string; NULL prints null. */
void jw_str(struct jw *w, const char *key, const char *s)
{
	jw_sep(w, key);
	if (s)
		json_string(w->out, s, strlen(s));
	else
		fputs("null", w->out);
}
