/*
 * json.h - the small JSON output helpers the commands share.
 */
#ifndef FSS_CLI_JSON_H
#define FSS_CLI_JSON_H

#include <stddef.h>
#include <stdio.h>

/* json_string - write s[0..len) as a JSON string literal, escaped (control
 * characters as \u00XX; bytes >= 0x80 are passed through, so valid UTF-8
 * stays valid; invalid bytes are written as \u00XX of the byte). */
void json_string(FILE *f, const char *s, size_t len);

#endif
