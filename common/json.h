/*
 * json.h - JSON string literals, written one way for every JSON the tool
 * writes (the report, dump, the live snapshots).
 */
#ifndef FSS_COMMON_JSON_H
#define FSS_COMMON_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Where an escaped string goes, piece by piece. */
typedef void (*json_put_fn)(void *ctx, const char *s, size_t n);

/*
 * json_string_put - s[0..len) as a JSON string literal, quotes included,
 * handed to put: '"', '\\', '\n', '\r', '\t' escaped by name, other control
 * characters and DEL as \u00XX; valid UTF-8 passed through; a byte that is
 * not part of a valid UTF-8 sequence (overlong forms, surrogates and code
 * points past U+10FFFF included) as \u00XX of the byte, so the result is
 * valid JSON in valid UTF-8 whatever s holds.
 */
void json_string_put(const char *s, size_t len, json_put_fn put, void *ctx);

/* json_string - json_string_put into a stdio stream. */
void json_string(FILE *f, const char *s, size_t len);

#endif
