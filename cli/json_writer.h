/*
 * json_writer.h - the pretty-printing JSON writer of `report --json` and
 * `lint --json`: two-space indent, one key per line, strings escaped by
 * common/json.c. Every section of the report writes through it, so the
 * document has one layout.
 */
#ifndef FSS_CLI_JSON_WRITER_H
#define FSS_CLI_JSON_WRITER_H

#include <stdint.h>
#include <stdio.h>

struct jw {
	FILE *out;
	int depth;
	int first; /* no member written yet at this depth */
};

/* jw_sep - the separator and indent before a member; its key (NULL in an array). */
void jw_sep(struct jw *w, const char *key);
/* jw_open / jw_close - an object ('{' '}') or array ('[' ']'); the outermost takes no key. */
void jw_open(struct jw *w, const char *key, char bracket);
void jw_close(struct jw *w, char bracket);
void jw_u64(struct jw *w, const char *key, uint64_t v);
void jw_i64(struct jw *w, const char *key, int64_t v);
void jw_null(struct jw *w, const char *key);
void jw_bool(struct jw *w, const char *key, int v);
/* jw_str - a string; NULL prints null. */
void jw_str(struct jw *w, const char *key, const char *s);

#endif
