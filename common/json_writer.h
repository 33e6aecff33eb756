/*
 * json_writer.h - the one JSON writer of the tool: the pretty documents of
 * `report --json` and `lint --json` (two-space indent, one member per
 * line) and the compact one-line snapshots of the live viewer
 * (collector/viewer.h), to a stdio stream or to a growing buffer. Strings
 * are escaped by common/json.c; every section of a document writes through
 * one writer, so a document has one layout.
 *
 * The writer is a value the caller owns (on its stack): jw_init_file or
 * jw_init_buffer, then the members, then for a buffer jw_buffer_take.
 */
#ifndef FSS_COMMON_JSON_WRITER_H
#define FSS_COMMON_JSON_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/text_buffer.h"

struct jw {
	FILE *out;		 /* the stream written to; NULL: the buffer below */
	struct text_buffer text; /* the growing buffer (jw_init_buffer) */
	int compact;		 /* one line: no newline, no indent, "key":value */
	int depth;
	int first; /* no member written yet at this depth */
};

/* jw_init_file - a pretty writer to `out` (the report's layout). */
void jw_init_file(struct jw *w, FILE *out);

/* jw_init_buffer - a writer to a growing buffer, compact (one line) or pretty. */
void jw_init_buffer(struct jw *w, int compact);

/*
 * jw_buffer_take - the buffer's text (NUL-terminated, caller frees) in *buf
 * and its length in *len; 0, or -ENOMEM when it could not grow (the text
 * is freed then). The writer is empty afterwards.
 */
int jw_buffer_take(struct jw *w, char **buf, size_t *len);

/* jw_raw - n bytes as they are (a number formatted by the caller, a '\n' after a document). */
void jw_raw(struct jw *w, const char *s, size_t n);

/* jw_rawf - printf-formatted text as it is, after jw_sep (numbers only: a value fits 63 bytes). */
__attribute__((format(printf, 2, 3))) void jw_rawf(struct jw *w, const char *fmt, ...);

/* jw_sep - the separator and indent before a member; its key (NULL in an array). */
void jw_sep(struct jw *w, const char *key);
/* jw_open / jw_close - an object ('{' '}') or array ('[' ']'); the outermost takes no key. */
void jw_open(struct jw *w, const char *key, char bracket);
void jw_close(struct jw *w, char bracket);
void jw_u64(struct jw *w, const char *key, uint64_t v);
void jw_i64(struct jw *w, const char *key, int64_t v);
void jw_null(struct jw *w, const char *key);
void jw_bool(struct jw *w, const char *key, int v);
/* jw_u64_or_null - v when it is known, else null. */
void jw_u64_or_null(struct jw *w, const char *key, uint64_t v, int known);
/* jw_str - a string; NULL prints null. */
void jw_str(struct jw *w, const char *key, const char *s);
/* jw_strn - the string s[0..strnlen(s, max)): a fixed-size text field need not end in a NUL. */
void jw_strn(struct jw *w, const char *key, const char *s, size_t max);
/* jw_hex - a 64-bit identifier as 16 hex digits in a string: not a quantity, and JavaScript's numbers would round it.
 */
void jw_hex(struct jw *w, const char *key, uint64_t v);

#endif
