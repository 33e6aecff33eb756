/*
 * kineto_scan.c - the tokenizer of the Kineto reader (kineto_scan.h):
 * chunked reads, gzip through zlib, strings, exact numbers, and values
 * skipped without being built.
 */
#include "collector/kineto_scan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

struct kscan_gzip {
	z_stream z;
	unsigned char *in;
	int in_eof;	    /* the descriptor is at its end */
	int stream_end;	    /* inflate finished a gzip member */
	int pending;	    /* zlib refused the stream after the bytes already handed out */
	char pending_message[96];
};

int kscan_fail(struct kscan *s, enum kineto_read_status status, uint64_t offset, const char *fmt, ...)
{
	if (s->failed)
		return -1;
	s->failed = 1;
	s->status = status;
	s->error_offset = offset;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->message, sizeof(s->message), fmt, ap);
	va_end(ap);
	/* nothing more is read once an error is kept */
	s->pos = s->end;
	s->eof = 1;
	return -1;
}

static ssize_t read_some(struct kscan *s, unsigned char *to, size_t n)
{
	ssize_t got;
	do {
		got = read(s->fd, to, n);
	} while (got < 0 && errno == EINTR);
	if (got < 0) {
		s->error = errno;
		kscan_fail(s, KINETO_READ_IO, kscan_offset(s), "cannot read the file: %s", strerror(errno));
		return -1;
	}
	s->compressed += (uint64_t)got;
	return got;
}

int kscan_open(struct kscan *s, int fd, size_t chunk)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->chunk = chunk ? chunk : KSCAN_CHUNK;
	/* read once, front to back: the kernel may read further ahead */
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	s->chunk_buf = malloc(s->chunk < 2 ? 2 : s->chunk);
	if (!s->chunk_buf)
		return -ENOMEM;
	s->buf = s->chunk_buf;
	/* the first two bytes say gzip (1f 8b) or text */
	unsigned char head[8];
	size_t have = 0;
	while (have < 2) {
		size_t want = s->chunk < 2 - have ? s->chunk : 2 - have;
		ssize_t got = read_some(s, head + have, want);
		if (got < 0)
			return 0;
		if (got == 0)
			break;
		have += (size_t)got;
	}
	if (have == 2 && head[0] == 0x1f && head[1] == 0x8b) {
		s->gz = calloc(1, sizeof(*s->gz));
		if (!s->gz)
			goto nomem;
		s->gz->in = malloc(s->chunk < 2 ? 2 : s->chunk);
		if (!s->gz->in)
			goto nomem;
		if (inflateInit2(&s->gz->z, 16 + MAX_WBITS) != Z_OK)
			goto nomem;
		memcpy(s->gz->in, head, 2);
		s->gz->z.next_in = s->gz->in;
		s->gz->z.avail_in = 2;
		return 0;
	}
	memcpy(s->chunk_buf, head, have);
	s->end = have;
	if (have == 0)
		s->eof = 1;
	return 0;
nomem:
	if (s->gz) {
		free(s->gz->in);
		free(s->gz);
	}
	free(s->chunk_buf);
	memset(s, 0, sizeof(*s));
	return -ENOMEM;
}

void kscan_close(struct kscan *s)
{
	if (s->gz) {
		inflateEnd(&s->gz->z);
		free(s->gz->in);
		free(s->gz);
	}
	free(s->chunk_buf);
	free(s->sbuf);
	s->gz = NULL;
	s->chunk_buf = NULL;
	s->sbuf = NULL;
}

static int fill_gzip(struct kscan *s)
{
	struct kscan_gzip *g = s->gz;
	if (g->pending)
		return kscan_fail(s, KINETO_READ_BAD_GZIP, kscan_offset(s), "%s", g->pending_message);
	for (;;) {
		if (g->z.avail_in == 0 && !g->in_eof) {
			ssize_t got = read_some(s, g->in, s->chunk);
			if (got < 0)
				return -1;
			if (got == 0)
				g->in_eof = 1;
			g->z.next_in = g->in;
			g->z.avail_in = (uInt)got;
		}
		if (g->stream_end) {
			/* another gzip member may follow (gzip concatenates them) */
			if (g->z.avail_in == 0) {
				s->eof = 1;
				return 0;
			}
			inflateReset(&g->z);
			g->stream_end = 0;
		}
		g->z.next_out = s->chunk_buf;
		g->z.avail_out = (uInt)s->chunk;
		int ret = inflate(&g->z, Z_NO_FLUSH);
		size_t produced = s->chunk - g->z.avail_out;
		if (ret == Z_STREAM_END) {
			g->stream_end = 1;
		} else if (ret == Z_BUF_ERROR || (ret == Z_OK && produced == 0)) {
			if (g->in_eof && g->z.avail_in == 0 && produced == 0) {
				s->gzip_cut = 1;
				s->eof = 1;
				return 0;
			}
		} else if (ret != Z_OK) {
			const char *why = g->z.msg ? g->z.msg : "unknown error";
			if (produced == 0)
				return kscan_fail(s, KINETO_READ_BAD_GZIP, kscan_offset(s),
						  "the gzip stream is damaged at compressed byte %llu: %s",
						  (unsigned long long)(s->compressed - g->z.avail_in), why);
			g->pending = 1;
			snprintf(g->pending_message, sizeof(g->pending_message),
				 "the gzip stream is damaged at compressed byte %llu: %s",
				 (unsigned long long)(s->compressed - g->z.avail_in), why);
		}
		if (produced) {
			s->end = produced;
			return 1;
		}
	}
}

int kscan_fill(struct kscan *s)
{
	if (s->failed || s->eof)
		return s->failed ? -1 : 0;
	s->base += s->end;
	s->pos = s->end = 0;
	if (s->gz)
		return fill_gzip(s);
	ssize_t got = read_some(s, s->chunk_buf, s->chunk);
	if (got < 0)
		return -1;
	if (got == 0) {
		s->eof = 1;
		return 0;
	}
	s->end = (size_t)got;
	return 1;
}

int kscan_expect_end(struct kscan *s, const char *what)
{
	if (s->failed)
		return -1;
	if (s->gzip_cut)
		return kscan_fail(s, KINETO_READ_TRUNCATED, kscan_offset(s),
				  "the gzip stream is cut: the text ends inside %s", what);
	return kscan_fail(s, KINETO_READ_TRUNCATED, kscan_offset(s), "the file ends inside %s", what);
}

/* ---- strings ---- */

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Nonzero when one of the 8 bytes is '"', '\\' or a control byte (false
 * positives only after a true one: the byte loop decides). */
static inline uint64_t special8(uint64_t w)
{
	uint64_t q = w ^ (ONES * '"');
	uint64_t b = w ^ (ONES * '\\');
	return ((q - ONES) & ~q & HIGHS) | ((b - ONES) & ~b & HIGHS) | ((w - ONES * 0x20) & ~w & HIGHS);
}

static inline int special(unsigned char c) { return c == '"' || c == '\\' || c < 0x20; }

/* The first special byte of [p, e), or e. */
static inline const unsigned char *scan_plain(const unsigned char *p, const unsigned char *e)
{
#ifdef __SSE2__
	const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), control = _mm_set1_epi8(0x1f);
	while (e - p >= 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
		__m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
					   _mm_cmpeq_epi8(_mm_max_epu8(v, control), control));
		int mask = _mm_movemask_epi8(hit);
		if (mask)
			return p + __builtin_ctz((unsigned)mask);
		p += 16;
	}
#endif
	while (e - p >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		if (special8(w))
			break;
		p += 8;
	}
	while (p < e && !special(*p))
		p++;
	return p;
}

static int sbuf_append(struct kscan *s, const void *text, size_t len)
{
	if (s->slen + len > s->scap) {
		size_t cap = s->scap ? s->scap : 256;
		while (cap < s->slen + len)
			cap *= 2;
		char *p = realloc(s->sbuf, cap);
		if (!p)
			return kscan_fail(s, KINETO_READ_IO, kscan_offset(s), "out of memory for a string");
		s->sbuf = p;
		s->scap = cap;
	}
	memcpy(s->sbuf + s->slen, text, len);
	s->slen += len;
	return 0;
}

static int sbuf_utf8(struct kscan *s, uint32_t cp)
{
	unsigned char u[4];
	size_t n;
	if (cp < 0x80) {
		u[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (unsigned char)(0xc0 | (cp >> 6));
		u[1] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (unsigned char)(0xe0 | (cp >> 12));
		u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (unsigned char)(0xf0 | (cp >> 18));
		u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return sbuf_append(s, u, n);
}

static int take_byte(struct kscan *s, const char *what)
{
	int c = kscan_peek(s);
	if (c < 0)
		return kscan_expect_end(s, what);
	s->pos++;
	return c;
}

static int read_hex4(struct kscan *s, uint32_t *cp)
{
	*cp = 0;
	for (int i = 0; i < 4; i++) {
		uint64_t at = kscan_offset(s);
		int c = take_byte(s, "a string");
		if (c < 0)
			return -1;
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (v < 0)
			return kscan_fail(s, KINETO_READ_BAD_JSON, at, "expected 4 hex digits after \\u");
		*cp = *cp * 16 + (uint32_t)v;
	}
	return 0;
}

/* One escape after its backslash: `c` is the byte after it (taken). */
static int escape_one(struct kscan *s, int c, int keep, uint64_t at)
{
	char out;
	switch (c) {
	case '"': out = '"'; break;
	case '\\': out = '\\'; break;
	case '/': out = '/'; break;
	case 'b': out = '\b'; break;
	case 'f': out = '\f'; break;
	case 'n': out = '\n'; break;
	case 'r': out = '\r'; break;
	case 't': out = '\t'; break;
	case 'u': {
		uint32_t cp;
		if (read_hex4(s, &cp) < 0)
			return -1;
		if (cp >= 0xd800 && cp <= 0xdbff && kscan_peek(s) == '\\') {
			uint64_t at2 = kscan_offset(s);
			s->pos++;
			int c2 = take_byte(s, "a string");
			if (c2 < 0)
				return -1;
			if (c2 != 'u') {
				/* a lone high surrogate, kept as its bytes, then the next escape */
				if (keep && sbuf_utf8(s, cp) < 0)
					return -1;
				return escape_one(s, c2, keep, at2);
			}
			uint32_t low;
			if (read_hex4(s, &low) < 0)
				return -1;
			if (low >= 0xdc00 && low <= 0xdfff)
				return keep ? sbuf_utf8(s, 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00)) : 0;
			if (keep && sbuf_utf8(s, cp) < 0)
				return -1;
			return keep ? sbuf_utf8(s, low) : 0;
		}
		return keep ? sbuf_utf8(s, cp) : 0;
	}
	default:
		return kscan_fail(s, KINETO_READ_BAD_JSON, at, "a bad escape in a string (\\%c)", c >= 0x20 && c < 0x7f ? c : '?');
	}
	return keep ? sbuf_append(s, &out, 1) : 0;
}

/* The rest of a string that straddles a chunk or holds an escape. */
static int string_slow(struct kscan *s, struct kscan_slice *out, int keep)
{
	for (;;) {
		if (s->pos == s->end && kscan_fill(s) <= 0)
			return kscan_expect_end(s, "a string");
		const unsigned char *b = s->buf + s->pos;
		const unsigned char *p = scan_plain(b, s->buf + s->end);
		if (keep && p > b && sbuf_append(s, b, (size_t)(p - b)) < 0)
			return -1;
		s->pos = (size_t)(p - s->buf);
		if (s->pos == s->end)
			continue;
		unsigned char c = *p;
		uint64_t at = kscan_offset(s);
		s->pos++;
		if (c == '"')
			break;
		if (c < 0x20)
			return kscan_fail(s, KINETO_READ_BAD_JSON, at, "a control byte (0x%02x) inside a string", c);
		int e = take_byte(s, "a string");
		if (e < 0 || escape_one(s, e, keep, at) < 0)
			return -1;
	}
	if (out) {
		out->text = s->sbuf ? s->sbuf : "";
		out->len = keep ? s->slen : 0;
	}
	return 0;
}

int kscan_string(struct kscan *s, struct kscan_slice *out, int keep)
{
	s->pos++; /* the opening quote, peeked by the caller */
	const unsigned char *b = s->buf + s->pos, *e = s->buf + s->end;
	const unsigned char *p = scan_plain(b, e);
	if (p < e && *p == '"') {
		if (out) {
			out->text = (const char *)b;
			out->len = (size_t)(p - b);
		}
		s->pos = (size_t)(p - s->buf) + 1;
		return 0;
	}
	s->slen = 0;
	if (keep && p > b && sbuf_append(s, b, (size_t)(p - b)) < 0)
		return -1;
	s->pos = (size_t)(p - s->buf);
	return string_slow(s, out, keep);
}

/* ---- numbers ---- */

static inline int is_digit(int c) { return c >= '0' && c <= '9'; }

/*
 * The common numbers (-?digits, an optional fraction, no exponent, at most
 * 18 integer digits) read straight from the chunk when they end well inside
 * it: 0, or 1 to leave the number to the byte-at-a-time reader.
 */
static int number_fast(struct kscan *s, struct kscan_number *n)
{
	const unsigned char *p = s->buf + s->pos, *limit = s->buf + s->end - 1;
	n->negative = *p == '-';
	p += n->negative;
	if (!is_digit(*p) || (*p == '0' && is_digit(p[1])))
		return 1;
	const unsigned char *digits = p;
	uint64_t v = 0;
	while (is_digit(*p) && p < limit)
		v = v * 10 + (unsigned)(*p++ - '0');
	if (p - digits > 18 || p >= limit)
		return 1;
	n->integer = v;
	if (*p == '.') {
		p++;
		if (!is_digit(*p))
			return 1;
		unsigned k = 0, milli = 0;
		for (; is_digit(*p) && p < limit; p++, k++) {
			if (k < 3)
				milli = milli * 10 + (unsigned)(*p - '0');
			else if (k == 3)
				n->round_up = *p >= '5';
		}
		if (p >= limit)
			return 1;
		for (; k < 3; k++)
			milli *= 10;
		n->milli = milli;
		n->fraction = 1;
	}
	if (*p == 'e' || *p == 'E')
		return 1;
	s->pos = (size_t)(p - s->buf);
	return 0;
}

int kscan_number(struct kscan *s, struct kscan_number *n)
{
	memset(n, 0, sizeof(*n));
	n->offset = kscan_offset(s);
	if (s->end - s->pos >= 48 && number_fast(s, n) == 0)
		return 0;
	memset(n, 0, sizeof(*n));
	n->offset = kscan_offset(s);
	int c = kscan_peek(s);
	if (c == '-') {
		n->negative = 1;
		s->pos++;
		c = kscan_peek(s);
	}
	if (c == 'I')
		return kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "-Infinity is not JSON");
	if (c < 0)
		return kscan_expect_end(s, "a number");
	if (!is_digit(c))
		return kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected a digit in a number");
	if (c == '0') {
		s->pos++;
		c = kscan_peek(s);
		if (is_digit(c))
			return kscan_fail(s, KINETO_READ_BAD_JSON, n->offset, "a number with a leading zero");
	} else {
		uint64_t v = 0;
		while (is_digit(c)) {
			unsigned d = (unsigned)(c - '0');
			if (v > (UINT64_MAX - d) / 10)
				n->overflow = 1;
			else
				v = v * 10 + d;
			s->pos++;
			c = kscan_peek(s);
		}
		n->integer = v;
	}
	if (c == '.') {
		s->pos++;
		c = kscan_peek(s);
		if (!is_digit(c))
			return c < 0 ? kscan_expect_end(s, "a number")
				     : kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected a digit after '.'");
		unsigned k = 0, milli = 0;
		while (is_digit(c)) {
			if (k < 3)
				milli = milli * 10 + (unsigned)(c - '0');
			else if (k == 3)
				n->round_up = c >= '5';
			k++;
			s->pos++;
			c = kscan_peek(s);
		}
		for (unsigned i = k; i < 3; i++)
			milli *= 10;
		n->milli = milli;
		n->fraction = 1;
	}
	if (c == 'e' || c == 'E') {
		s->pos++;
		c = kscan_peek(s);
		if (c == '+' || c == '-') {
			s->pos++;
			c = kscan_peek(s);
		}
		if (!is_digit(c))
			return c < 0 ? kscan_expect_end(s, "a number")
				     : kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected a digit in an exponent");
		while (is_digit(c)) {
			s->pos++;
			c = kscan_peek(s);
		}
		n->exponent = 1;
	}
	return s->failed ? -1 : 0;
}

int kscan_number_int(const struct kscan_number *n, int64_t *out, const char **why)
{
	if (n->fraction || n->exponent) {
		*why = n->exponent ? "a number with an exponent where an integer is due"
				   : "a number with a fraction where an integer is due";
		return -1;
	}
	uint64_t limit = n->negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	if (n->overflow || n->integer > limit) {
		*why = "an integer too large for 64 bits";
		return -1;
	}
	*out = n->negative ? (int64_t)(0 - n->integer) : (int64_t)n->integer;
	return 0;
}

int kscan_number_us_to_ns(const struct kscan_number *n, int64_t *out, const char **why)
{
	if (n->exponent) {
		*why = "a time with an exponent (µs are written as decimals)";
		return -1;
	}
	if (n->overflow || n->integer > ((uint64_t)INT64_MAX - 1000) / 1000) {
		*why = "a time too large for 64-bit ns";
		return -1;
	}
	int64_t ns = (int64_t)n->integer * 1000 + n->milli + n->round_up;
	*out = n->negative ? -ns : ns;
	return 0;
}

/* ---- skipping ---- */

static int literal(struct kscan *s, const char *word)
{
	uint64_t at = kscan_offset(s);
	for (const char *w = word; *w; w++) {
		int c = kscan_peek(s);
		if (c < 0)
			return kscan_expect_end(s, "a literal");
		if (c != *w)
			return kscan_fail(s, KINETO_READ_BAD_JSON, at, "a bad literal (expected %s)", word);
		s->pos++;
	}
	return 0;
}

static int skip_key(struct kscan *s)
{
	int c = kscan_ws(s);
	if (c != '"')
		return c < 0 ? kscan_expect_end(s, "an object")
			     : kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected a key (a string) in an object");
	if (kscan_string(s, NULL, 0) < 0)
		return -1;
	c = kscan_ws(s);
	if (c != ':')
		return c < 0 ? kscan_expect_end(s, "an object")
			     : kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected ':' after an object key");
	s->pos++;
	return 0;
}

/* One scalar at `c` (peeked); 0 or -1. */
static int skip_scalar(struct kscan *s, int c)
{
	struct kscan_number n;
	switch (c) {
	case '"':
		return kscan_string(s, NULL, 0);
	case 't':
		return literal(s, "true");
	case 'f':
		return literal(s, "false");
	case 'n':
		return literal(s, "null");
	case 'N':
		return kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "NaN is not JSON");
	case 'I':
		return kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "Infinity is not JSON");
	case -1:
		return kscan_expect_end(s, "a value");
	default:
		if (c == '-' || is_digit(c))
			return kscan_number(s, &n);
		return kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected a value, found byte 0x%02x", c);
	}
}

int kscan_skip(struct kscan *s)
{
	char stack[KSCAN_MAX_DEPTH];
	int sp = 0;
	for (;;) {
		int c = kscan_ws(s);
		if (c == '{' || c == '[') {
			if (s->depth + sp >= KSCAN_MAX_DEPTH)
				return kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "nested deeper than %d", KSCAN_MAX_DEPTH);
			stack[sp++] = c == '{' ? '}' : ']';
			s->pos++;
			int d = kscan_ws(s);
			if (d == stack[sp - 1]) {
				s->pos++;
				sp--;
			} else if (c == '{') {
				if (skip_key(s) < 0)
					return -1;
				continue;
			} else {
				continue;
			}
		} else if (skip_scalar(s, c) < 0) {
			return -1;
		}
		/* after a value: a comma, or the close of its container */
		while (sp > 0) {
			c = kscan_ws(s);
			if (c == ',') {
				s->pos++;
				if (stack[sp - 1] == '}' && skip_key(s) < 0)
					return -1;
				break;
			}
			if (c != stack[sp - 1])
				return c < 0 ? kscan_expect_end(s, stack[sp - 1] == '}' ? "an object" : "an array")
					     : kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected ',' or '%c'", stack[sp - 1]);
			s->pos++;
			sp--;
		}
		if (sp == 0)
			return 0;
	}
}
