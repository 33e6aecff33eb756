/*
 * report_html_escape.h - text into HTML, safely: the one way a string from
 * the job reaches the page (cli/report_html*.c). The output is valid UTF-8
 * whatever the input: a byte that does not start or continue a well-formed
 * sequence (overlong forms, surrogates and code points past U+10FFFF
 * included) becomes U+FFFD, and so does a control character other than tab
 * and newline. & < > " ' become character references, so the same text is
 * safe in element content and in a quoted attribute value.
 */
#ifndef FSS_CLI_REPORT_HTML_ESCAPE_H
#define FSS_CLI_REPORT_HTML_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* html_escape_n - write len bytes of s, escaped, to out. */
void html_escape_n(FILE *out, const char *s, size_t len);

/* html_escape - html_escape_n of a NUL-terminated string (NULL writes nothing). */
void html_escape(FILE *out, const char *s);

/* html_printf - format, then write the result escaped: for text that mixes
 * figures with strings from the job. A result past 16 kB is cut there (at
 * a character boundary: the cut sequence becomes U+FFFD at worst). */
void html_printf(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* html_utf8_valid - 1 when the len bytes at s are well-formed UTF-8 (what
 * html_escape_n leaves unchanged, markup aside), else 0. */
int html_utf8_valid(const char *s, size_t len);

#endif
