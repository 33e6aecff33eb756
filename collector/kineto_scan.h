/*
 * kineto_scan.h - the tokenizer under the Kineto reader: Chrome-trace JSON
 * read from a descriptor in chunks (through zlib's inflate when the file is
 * gzip, told by its first two bytes), one token at a time.
 *
 * An internal header of the reader (kineto_parse.c), not an interface of
 * the collector: the struct is visible so that the per-byte steps (peek,
 * skip whitespace) inline into the parser. Everything else goes through the
 * functions below.
 *
 * Strings without escapes that lie inside the current chunk are handed out
 * as slices of it; strings with escapes, or that straddle a chunk boundary,
 * are decoded into the scanner's own buffer. Either way a slice is valid
 * until the next scanner call. Numbers are read exactly, as decimal digits
 * (struct kscan_number), never through a double.
 *
 * Errors: the first one is kept (status, message, offset of its byte in the
 * JSON text) and every later call fails at once with -1.
 */
#ifndef FSS_COLLECTOR_KINETO_SCAN_H
#define FSS_COLLECTOR_KINETO_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "collector/kineto_file.h"

/* The default read size: one read(2) (or one inflate output) at a time. */
#define KSCAN_CHUNK (256 * 1024)
/* Arrays and objects nested deeper than this are refused. */
#define KSCAN_MAX_DEPTH 64

struct kscan_slice {
	const char *text;
	size_t len;
};

/* A JSON number as written: sign, integer part, the first fraction digits. */
struct kscan_number {
	uint64_t integer;   /* the integer part (valid when !overflow) */
	uint32_t milli;	    /* the first 3 fraction digits as thousandths (0..999) */
	uint8_t round_up;   /* the 4th fraction digit is 5 or more */
	uint8_t negative;   /* a leading '-' */
	uint8_t fraction;   /* digits after the point */
	uint8_t exponent;   /* an e or E part */
	uint8_t overflow;   /* the integer part does not fit 64 bits */
	uint64_t offset;    /* where it started, in the text */
};

struct kscan_gzip;

struct kscan {
	const unsigned char *buf; /* the current chunk of JSON text, [pos, end) unread */
	size_t pos, end;
	uint64_t base;		  /* text offset of buf[0] */
	int eof;		  /* no more text */
	int failed;		  /* an error is set */

	/* the error */
	enum kineto_read_status status;
	int error;
	uint64_t error_offset;
	char message[192];

	/* input */
	int fd;
	size_t chunk;
	unsigned char *chunk_buf;
	struct kscan_gzip *gz;	  /* NULL for plain JSON */
	uint64_t compressed;	  /* bytes read from the descriptor */
	int gzip_cut;		  /* the gzip stream ended before its end marker */

	/* decoded strings */
	char *sbuf;
	size_t slen, scap;
	int depth;
};

/*
 * kscan_open - start reading fd with reads of `chunk` bytes (0: the
 * default). Reads the first bytes to tell gzip from text. 0, or -ENOMEM
 * (nothing to free); an I/O error is kept as the scanner's error.
 */
int kscan_open(struct kscan *s, int fd, size_t chunk);
void kscan_close(struct kscan *s);

/* kscan_hash - a hash of text[0..len), a word at a time (keys, interned strings). */
static inline uint64_t kscan_hash(const char *text, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		__builtin_memcpy(&w, text + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	uint64_t tail = 0;
	for (size_t j = 0; i < len; i++, j += 8)
		tail |= (uint64_t)(unsigned char)text[i] << j;
	h = (h ^ tail) * 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 29);
}

/* kscan_fail - keep the first error at `offset`; returns -1. */
int kscan_fail(struct kscan *s, enum kineto_read_status status, uint64_t offset, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* kscan_fill - the next chunk when [pos, end) is empty: 1, 0 at the end, -1. */
int kscan_fill(struct kscan *s);

static inline uint64_t kscan_offset(const struct kscan *s) { return s->base + s->pos; }

/* The next byte without taking it, -1 at the end or on an error. */
static inline int kscan_peek(struct kscan *s)
{
	if (s->pos < s->end)
		return s->buf[s->pos];
	if (s->failed || kscan_fill(s) <= 0)
		return -1;
	return s->buf[s->pos];
}

/* The next byte that is not JSON whitespace, not taken; -1 at the end. */
static inline int kscan_ws(struct kscan *s)
{
	for (;;) {
		while (s->pos < s->end) {
			unsigned char c = s->buf[s->pos];
			if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
				return c;
			s->pos++;
		}
		if (s->failed || kscan_fill(s) <= 0)
			return -1;
	}
}

/* kscan_expect_end - -1 with TRUNCATED (or the kept error) where a byte was due. */
int kscan_expect_end(struct kscan *s, const char *what);

/*
 * kscan_string - at a '"' (peeked, not taken): read the string. keep 1: its
 * bytes in *out (escapes decoded, \u as UTF-8; other bytes as they are);
 * keep 0: only checked. 0 or -1.
 */
int kscan_string(struct kscan *s, struct kscan_slice *out, int keep);

/* kscan_number - at a '-' or digit (peeked): read a number. 0 or -1. */
int kscan_number(struct kscan *s, struct kscan_number *n);

/*
 * kscan_skip - skip one value of any kind (checked, not built), at its
 * first byte (peeked). Nesting counts towards KSCAN_MAX_DEPTH from
 * s->depth. 0 or -1.
 */
int kscan_skip(struct kscan *s);

/* The number as int64 (no fraction, no exponent, in range): 0, or -1 (why in *why). */
int kscan_number_int(const struct kscan_number *n, int64_t *out, const char **why);
/* The number of µs as ns: thousandths kept, the rest rounded half up. 0 or -1 (why). */
int kscan_number_us_to_ns(const struct kscan_number *n, int64_t *out, const char **why);

/*
 * kineto_file_read_fd_chunk - kineto_file_read_fd with reads of `chunk`
 * bytes (tests read with 1 and 7 to cross every token boundary).
 */
int kineto_file_read_fd_chunk(int fd, size_t chunk, kineto_file_t **out, struct kineto_read_info *info);

#endif
