/*
 * trace_parser.c - incremental, validating trace decoder.
 *
 * The bytes not yet decided on sit in one buffer, buf[start..have), whose
 * first byte is at file offset `pos`. Each state says how many bytes it needs
 * there; feed() appends no more than that, so in the normal course the buffer
 * holds one chunk. After damage the parser scans the buffer byte by byte for
 * a chunk magic and tries each candidate in full (header, CRC, sequence
 * number) before it believes it; a candidate needs at most one chunk of the
 * writer's largest size, so the scan is bounded the same way.
 */
#include "common/trace_parser.h"

#include "common/crc32c.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bytes a scan asks for at a time while no chunk magic is in sight. */
#define SCAN_WINDOW 4096u
/* The largest file header a reader accepts (later minors may grow it). */
#define HEADER_MAX_BYTES 4096u

enum parse_state {
	WANT_FILE_HEADER,
	SKIP_HEADER_REST, /* a header larger than this version's: skip the rest */
	WANT_CHUNK,
	SCANNING, /* after damage: looking for the next valid chunk */
	FAILED,
};

struct trace_parser {
	struct trace_parser_ops ops;
	void *ctx;
	enum parse_state state;
	int error;
	int at_eof;
	enum trace_input input;
	enum trace_end end;
	uint64_t pos;	      /* file offset of buf[start] */
	uint64_t good_offset; /* end of the last complete chunk delivered */
	uint64_t chunks;
	uint64_t records;
	uint64_t process_records; /* records other than trace_end */
	uint64_t next_seq;	  /* the sequence number the next chunk should carry */
	uint64_t skip;		  /* header bytes still to skip */
	uint32_t payload_limit;	  /* largest payload a chunk of this writer can have */
	int have_header;
	int end_marker;		       /* the last record delivered was a trace_end */
	int salvage;		       /* trace_parser_salvage: read past a header that does not hold */
	struct trace_salvage salvaged; /* used: it did, header is the assumed one */
	struct fss_file_header header;
	unsigned char *buf;
	size_t start, have, cap;
	/* The gap being scanned across; a cut at the end of the input opens one
	 * tentatively (cut = 1): if no valid chunk follows, it was a cut. */
	int gap_open;
	int gap_is_cut;
	struct trace_gap gap;
	uint64_t cut_have, cut_want;
	struct trace_gap gaps[TRACE_PARSER_GAPS_KEPT];
	size_t ngaps;
	struct trace_damage damage;
	char message[768];
};

trace_parser_t *trace_parser_new(const struct trace_parser_ops *ops, void *ctx)
{
	trace_parser_t *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->ops = *ops;
	p->ctx = ctx;
	p->cap = FSS_CHUNK_DEFAULT_PAYLOAD + sizeof(struct fss_chunk_header);
	p->buf = malloc(p->cap);
	if (!p->buf) {
		free(p);
		return NULL;
	}
	p->state = WANT_FILE_HEADER;
	p->input = TRACE_INPUT_TRACE;
	p->end = TRACE_END_NONE;
	p->payload_limit = FSS_CHUNK_MAX_PAYLOAD;
	return p;
}

void trace_parser_salvage(trace_parser_t *p)
{
	p->salvage = 1;
}

void trace_parser_free(trace_parser_t *p)
{
	if (!p)
		return;
	free(p->buf);
	free(p);
}

__attribute__((format(printf, 3, 4))) static int fail(trace_parser_t *p, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->message, sizeof(p->message), fmt, ap);
	va_end(ap);
	p->state = FAILED;
	p->error = err;
	return err;
}

static void consume(trace_parser_t *p, size_t n)
{
	p->start += n;
	p->pos += n;
	if (p->start == p->have)
		p->start = p->have = 0;
}

/* Room for `need` bytes from buf[start]: slide them to the front, grow. */
static int reserve(trace_parser_t *p, size_t need)
{
	unsigned char *nb;

	if (p->start + need <= p->cap)
		return 0;
	if (p->start) {
		memmove(p->buf, p->buf + p->start, p->have - p->start);
		p->have -= p->start;
		p->start = 0;
	}
	if (need <= p->cap)
		return 0;
	nb = realloc(p->buf, need);
	if (!nb)
		return fail(p, -ENOMEM, "out of memory for a %zu-byte chunk", need);
	p->buf = nb;
	p->cap = need;
	return 0;
}

/* ---- the file header ----------------------------------------------------- */

/*
 * Salvage: the header at buf[start] does not hold (input says how the
 * header alone classes the file, why in what way). This version's header is
 * assumed in its place and the chunks are read from byte 64 as after any
 * damage, each on its own CRC; the assumed header reaches on_header before
 * the first chunk that holds (deliver_chunk), so that a file with none is
 * still what its header made of it (trace_parser_finish).
 */
__attribute__((format(printf, 3, 4))) static int salvage_start(trace_parser_t *p, enum trace_input input,
							       const char *fmt, ...)
{
	struct fss_file_header *h = &p->salvaged.assumed;
	va_list ap;

	p->salvaged.used = 1;
	p->salvaged.header = input;
	va_start(ap, fmt);
	vsnprintf(p->salvaged.why, sizeof(p->salvaged.why), fmt, ap);
	va_end(ap);
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, FSS_FILE_MAGIC, sizeof(h->magic));
	h->byte_order = FSS_BYTE_ORDER_MARK;
	h->version_major = FSS_FORMAT_MAJOR;
	h->version_minor = FSS_FORMAT_MINOR;
	h->header_size = sizeof(*h);
	/* the writer's limit is unknown: any chunk the format allows */
	h->chunk_payload_max = FSS_CHUNK_MAX_PAYLOAD;
	h->crc = crc32c(0, h, offsetof(struct fss_file_header, crc));
	p->header = *h;
	p->payload_limit = FSS_CHUNK_MAX_PAYLOAD;
	consume(p, sizeof(*h));
	p->good_offset = p->pos;
	p->state = WANT_CHUNK;
	return 0;
}

/* Bytes of magic that differ from FSSTRACE. */
static int magic_off_by(const char magic[8])
{
	int n = 0;

	for (int i = 0; i < 8; i++)
		n += magic[i] != FSS_FILE_MAGIC[i];
	return n;
}

/* A magic off by this many bytes at most is a trace's, damaged (a flipped
 * bit or two), not another kind of file. */
#define MAGIC_DAMAGED_MAX 2

/* All 64 bytes are in: the CRC first, so that no field of a damaged header
 * is believed (a flipped version byte is damage, not a newer format). */
static int read_header(trace_parser_t *p)
{
	struct fss_file_header h;
	uint32_t crc;
	int off_by;

	memcpy(&h, p->buf + p->start, sizeof(h));
	off_by = magic_off_by(h.magic);
	if (off_by) {
		enum trace_input input =
		    off_by <= MAGIC_DAMAGED_MAX ? TRACE_INPUT_HEADER_DAMAGED : TRACE_INPUT_NOT_TRACE;

		if (p->salvage)
			return salvage_start(p, input, "bad magic: %d of its 8 bytes are not FSSTRACE's", off_by);
		p->input = input;
		if (input == TRACE_INPUT_HEADER_DAMAGED)
			return fail(
			    p, FSS_E_CORRUPT,
			    "the file header is damaged (bad magic: %d of its 8 bytes are not FSSTRACE's): none "
			    "of its fields can be trusted",
			    off_by);
		return fail(p, FSS_E_NOT_TRACE, "not an fsdpscope trace: it does not start with the FSSTRACE magic");
	}
	crc = crc32c(0, &h, offsetof(struct fss_file_header, crc));
	if (crc != h.crc) {
		if (p->salvage)
			return salvage_start(p, TRACE_INPUT_HEADER_DAMAGED,
					     "CRC mismatch: stored 0x%08x, computed 0x%08x", h.crc, crc);
		p->input = TRACE_INPUT_HEADER_DAMAGED;
		return fail(p, FSS_E_CORRUPT,
			    "the file header is damaged (CRC mismatch: stored 0x%08x, computed 0x%08x): none of its "
			    "fields can be trusted",
			    h.crc, crc);
	}
	if (h.byte_order != FSS_BYTE_ORDER_MARK) {
		p->input = TRACE_INPUT_OTHER_BYTE_ORDER;
		return fail(p, FSS_E_ENDIAN,
			    "written on a host of the other byte order (mark 0x%08x): this reader "
			    "reads little-endian traces only",
			    h.byte_order);
	}
	if (h.version_major != FSS_FORMAT_MAJOR) {
		p->input = TRACE_INPUT_NEWER_VERSION;
		return fail(p, FSS_E_VERSION,
			    "format version %u.%u, this reader knows %u.x: read it with a newer fsdpscope",
			    h.version_major, h.version_minor, FSS_FORMAT_MAJOR);
	}
	if (h.header_size < sizeof(h) || h.header_size > HEADER_MAX_BYTES || h.header_size % 8) {
		if (p->salvage)
			return salvage_start(p, TRACE_INPUT_HEADER_DAMAGED,
					     "it gives its size as %u bytes, which no writer writes", h.header_size);
		p->input = TRACE_INPUT_HEADER_DAMAGED;
		return fail(p, FSS_E_CORRUPT,
			    "the file header gives its size as %u bytes, which no writer writes: it "
			    "cannot be read",
			    h.header_size);
	}
	p->header = h;
	if (h.chunk_payload_max >= sizeof(struct fss_record_head) && h.chunk_payload_max <= FSS_CHUNK_MAX_PAYLOAD)
		p->payload_limit = h.chunk_payload_max;
	p->skip = h.header_size - sizeof(h);
	consume(p, sizeof(h));
	p->state = SKIP_HEADER_REST;
	return 0;
}

/* The header is decided on: the reader hears of it. */
static int header_announce(trace_parser_t *p)
{
	p->have_header = 1;
	if (p->ops.on_header) {
		int rc = p->ops.on_header(p->ctx, &p->header);

		if (rc)
			return fail(p, rc, "stopped by the reader after the header");
	}
	return 0;
}

static int header_done(trace_parser_t *p)
{
	p->good_offset = p->pos;
	p->state = WANT_CHUNK;
	return header_announce(p);
}

/* ---- gaps ------------------------------------------------------------------ */

__attribute__((format(printf, 2, 3))) static void gap_open(trace_parser_t *p, const char *fmt, ...)
{
	va_list ap;

	if (p->gap_open)
		return;
	p->gap_open = 1;
	p->gap_is_cut = 0;
	memset(&p->gap, 0, sizeof(p->gap));
	p->gap.offset = p->pos;
	p->gap.first_missing = p->next_seq;
	va_start(ap, fmt);
	vsnprintf(p->gap.why, sizeof(p->gap.why), fmt, ap);
	va_end(ap);
}

/* The gap ends at the current position, before a chunk numbered seq (or at
 * the end of the input when to_end). */
static int gap_close(trace_parser_t *p, uint64_t seq, int to_end)
{
	p->gap_open = 0;
	p->gap.bytes = p->pos - p->gap.offset;
	p->gap.to_end = to_end;
	p->gap.chunks_missing = to_end ? 0 : seq - p->gap.first_missing;
	p->damage.gaps++;
	p->damage.bytes += p->gap.bytes;
	p->damage.chunks_missing += p->gap.chunks_missing;
	if (p->ngaps < TRACE_PARSER_GAPS_KEPT)
		p->gaps[p->ngaps++] = p->gap;
	if (p->ops.on_gap) {
		int rc = p->ops.on_gap(p->ctx, &p->gap);

		if (rc)
			return fail(p, rc, "stopped by the reader at the gap at offset %llu",
				    (unsigned long long)p->gap.offset);
	}
	return 0;
}

/* ---- chunks ---------------------------------------------------------------- */

/* The 24-byte chunk header at buf[start]: 0 if it can be a chunk here. */
static int chunk_header_check(const trace_parser_t *p, struct fss_chunk_header *ch, char *why, size_t len)
{
	memcpy(ch, p->buf + p->start, sizeof(*ch));
	if (ch->magic != FSS_CHUNK_MAGIC) {
		snprintf(why, len, "no chunk header (magic 0x%08x)", ch->magic);
		return -1;
	}
	if (ch->payload_bytes > p->payload_limit || ch->payload_bytes % 8) {
		snprintf(why, len, "chunk payload size %u is not valid (the writer's chunks hold at most %u)",
			 ch->payload_bytes, p->payload_limit);
		return -1;
	}
	if (ch->records > ch->payload_bytes / sizeof(struct fss_record_head)) {
		snprintf(why, len, "chunk record count %u does not fit in %u bytes", ch->records, ch->payload_bytes);
		return -1;
	}
	if (ch->seq < p->next_seq) {
		snprintf(why, len, "chunk sequence number %llu, expected %llu or later", (unsigned long long)ch->seq,
			 (unsigned long long)p->next_seq);
		return -1;
	}
	return 0;
}

/* The whole chunk is at buf[start]: its CRC and its records tiling it. */
static int chunk_body_check(const trace_parser_t *p, const struct fss_chunk_header *ch, char *why, size_t len)
{
	struct fss_chunk_header zeroed = *ch;
	const unsigned char *payload = p->buf + p->start + sizeof(*ch);
	uint32_t crc, n = 0;
	size_t at = 0;

	zeroed.crc = 0;
	crc = crc32c(crc32c(0, &zeroed, sizeof(zeroed)), payload, ch->payload_bytes);
	if (crc != ch->crc) {
		snprintf(why, len, "chunk %llu: checksum 0x%08x, expected 0x%08x", (unsigned long long)ch->seq, ch->crc,
			 crc);
		return -1;
	}
	while (at < ch->payload_bytes) {
		struct fss_record_head head;

		if (ch->payload_bytes - at < sizeof(head))
			break;
		memcpy(&head, payload + at, sizeof(head));
		if (head.size < sizeof(head) || head.size % 8 || head.size > ch->payload_bytes - at)
			break;
		at += head.size;
		n++;
	}
	if (at != ch->payload_bytes || n != ch->records) {
		snprintf(why, len, "chunk %llu: records do not tile the payload (%u of %u declared)",
			 (unsigned long long)ch->seq, n, ch->records);
		return -1;
	}
	return 0;
}

/* The writer's own trace_end, in the chunk it says it is in: a record of that
 * type from a process (a test's sample, a merge gone wrong) is no end. */
static int is_trace_end(const struct fss_record_head *rec, uint64_t seq)
{
	struct fss_rec_trace_end end;

	if (rec->type != FSS_REC_TRACE_END || rec->source != FSS_SOURCE_NONE || rec->size < sizeof(end))
		return 0;
	memcpy(&end, rec, sizeof(end));
	return end.chunks == seq;
}

/* Deliver the records of a verified chunk at buf[start]. */
static int deliver_chunk(trace_parser_t *p, const struct fss_chunk_header *ch)
{
	const unsigned char *payload;
	size_t at;
	int rc;
	/* Scratch for zero-extending records shorter than this version's struct. */
	_Alignas(8) unsigned char scratch[FSS_RECORD_MAX_BYTES];

	if (!p->have_header) { /* salvaged: the assumed header, now that a chunk holds */
		rc = header_announce(p);
		if (rc)
			return rc;
	}
	if (p->gap_open) {
		rc = gap_close(p, ch->seq, 0);
		if (rc)
			return rc;
	} else if (ch->seq > p->next_seq) {
		gap_open(p, "chunk sequence numbers jump from %llu to %llu", (unsigned long long)p->next_seq,
			 (unsigned long long)ch->seq);
		rc = gap_close(p, ch->seq, 0);
		if (rc)
			return rc;
	}
	/* A scan may have left the chunk at any byte: records are read in
	 * place as structs, so they must lie 8-aligned. */
	if (p->start % 8) {
		memmove(p->buf, p->buf + p->start, p->have - p->start);
		p->have -= p->start;
		p->start = 0;
	}
	payload = p->buf + p->start + sizeof(*ch);
	for (at = 0; at < ch->payload_bytes;) {
		const struct fss_record_head *rec = (const void *)(payload + at);
		size_t known = record_known_size(rec->type);

		at += rec->size;
		p->records++;
		p->end_marker = is_trace_end(rec, ch->seq);
		if (!p->end_marker)
			p->process_records++;
		if (known > rec->size) {
			memset(scratch, 0, sizeof(scratch));
			memcpy(scratch, rec, rec->size);
			rec = (const void *)scratch;
		}
		rc = p->ops.on_record ? p->ops.on_record(p->ctx, rec) : 0;
		if (rc)
			return fail(p, rc, "stopped by the reader in chunk %llu", (unsigned long long)ch->seq);
	}
	p->chunks++;
	p->next_seq = ch->seq + 1;
	consume(p, sizeof(*ch) + ch->payload_bytes);
	p->good_offset = p->pos;
	if (p->ops.on_chunk) {
		rc = p->ops.on_chunk(p->ctx, ch->seq, ch->records, p->pos);
		if (rc)
			return fail(p, rc, "stopped by the reader after chunk %llu", (unsigned long long)ch->seq);
	}
	return 0;
}

/* Where a chunk should start there is none, or it is damaged: scan on from
 * the next byte. */
static void damaged_here(trace_parser_t *p, const char *why)
{
	gap_open(p, "offset %llu: %s", (unsigned long long)p->pos, why);
	consume(p, 1);
	p->state = SCANNING;
}

/* The input ended inside what would be chunk next_seq: a cut, unless a
 * valid chunk turns up in the bytes after it (then its header was damaged). */
static void cut_here(trace_parser_t *p, size_t have, size_t want)
{
	gap_open(p, "offset %llu: chunk %llu: its header announces more bytes than there are before the next chunk",
		 (unsigned long long)p->pos, (unsigned long long)p->next_seq);
	p->gap_is_cut = 1;
	p->cut_have = have;
	p->cut_want = want;
	consume(p, 1);
	p->state = SCANNING;
}

static size_t find_magic(const unsigned char *at, size_t avail)
{
	const uint32_t magic = FSS_CHUNK_MAGIC;

	for (size_t i = 0; i + sizeof(magic) <= avail; i++)
		if (memcmp(at + i, &magic, sizeof(magic)) == 0)
			return i;
	return avail;
}

/*
 * Run the states on the bytes in the buffer until one needs more: then
 * *need is the number of bytes it wants from buf[start] (more than there
 * are). At the end of the input (at_eof) every state finishes with what
 * there is instead, and this returns with the buffer used up.
 */
static int process(trace_parser_t *p, size_t *need)
{
	for (;;) {
		size_t avail = p->have - p->start;
		struct fss_chunk_header ch;
		char why[100];
		size_t total, i;
		int rc;

		*need = 0;
		switch (p->state) {
		case WANT_FILE_HEADER:
			if (avail < sizeof(struct fss_file_header)) {
				*need = sizeof(struct fss_file_header);
				return 0;
			}
			rc = read_header(p);
			if (rc)
				return rc;
			continue;
		case SKIP_HEADER_REST:
			i = avail < p->skip ? avail : (size_t)p->skip;
			consume(p, i);
			p->skip -= i;
			if (p->skip) {
				*need = p->skip < SCAN_WINDOW ? (size_t)p->skip : SCAN_WINDOW;
				return 0;
			}
			rc = header_done(p);
			if (rc)
				return rc;
			continue;
		case WANT_CHUNK:
			if (avail < sizeof(ch)) {
				if (p->at_eof && avail) {
					cut_here(p, avail, sizeof(ch));
					continue;
				}
				*need = sizeof(ch);
				return 0;
			}
			if (chunk_header_check(p, &ch, why, sizeof(why))) {
				damaged_here(p, why);
				continue;
			}
			total = sizeof(ch) + ch.payload_bytes;
			if (avail < total) {
				if (p->at_eof) {
					cut_here(p, avail, total);
					continue;
				}
				*need = total;
				return 0;
			}
			if (chunk_body_check(p, &ch, why, sizeof(why))) {
				damaged_here(p, why);
				continue;
			}
			rc = deliver_chunk(p, &ch);
			if (rc)
				return rc;
			continue;
		case SCANNING:
			i = find_magic(p->buf + p->start, avail);
			if (i == avail) {
				if (p->at_eof) {
					consume(p, avail);
					return 0;
				}
				consume(p, avail > 3 ? avail - 3 : 0);
				*need = SCAN_WINDOW;
				return 0;
			}
			consume(p, i);
			avail -= i;
			if (avail < sizeof(ch)) {
				if (p->at_eof) {
					consume(p, avail);
					return 0;
				}
				*need = sizeof(ch);
				return 0;
			}
			if (chunk_header_check(p, &ch, why, sizeof(why))) {
				consume(p, 1);
				continue;
			}
			total = sizeof(ch) + ch.payload_bytes;
			if (avail < total) {
				if (p->at_eof) {
					consume(p, 1);
					continue;
				}
				*need = total;
				return 0;
			}
			if (chunk_body_check(p, &ch, why, sizeof(why))) {
				consume(p, 1);
				continue;
			}
			/* A chunk that holds: it is delivered from the normal state. */
			p->gap_is_cut = 0;
			p->state = WANT_CHUNK;
			continue;
		case FAILED:
			return p->error;
		}
	}
}

int trace_parser_feed(trace_parser_t *p, const void *data, size_t len)
{
	const unsigned char *in = data;

	if (p->state == FAILED)
		return p->error;
	for (;;) {
		size_t need, avail, take;
		int rc = process(p, &need);

		if (rc)
			return rc;
		if (len == 0)
			return 0;
		avail = p->have - p->start;
		if (need <= avail)
			return 0; /* fed after finish: nothing more to do */
		take = need - avail < len ? need - avail : len;
		rc = reserve(p, avail + take);
		if (rc)
			return rc;
		memcpy(p->buf + p->have, in, take);
		p->have += take;
		in += take;
		len -= take;
	}
}

/* ---- the end ----------------------------------------------------------------- */

static size_t append(char *buf, size_t size, size_t used, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static size_t append(char *buf, size_t size, size_t used, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (used >= size)
		return used;
	va_start(ap, fmt);
	n = vsnprintf(buf + used, size - used, fmt, ap);
	va_end(ap);
	return n < 0 ? used : used + (size_t)n;
}

/* The file ended before a valid header was complete: what is it? */
static int classify_short(trace_parser_t *p)
{
	size_t avail = p->have - p->start;
	size_t n = avail < sizeof(FSS_FILE_MAGIC) - 1 ? avail : sizeof(FSS_FILE_MAGIC) - 1;

	if (p->state == SKIP_HEADER_REST) {
		p->input = TRACE_INPUT_HEADER_SHORT;
		return fail(p, FSS_E_TRUNCATED, "a trace cut short inside its file header: %llu of %u bytes",
			    (unsigned long long)p->pos, p->header.header_size);
	}
	if (p->pos == 0 && avail == 0) {
		p->input = TRACE_INPUT_EMPTY;
		return fail(p, FSS_E_TRUNCATED,
			    "an empty file (0 bytes), not a trace: its writer never wrote the file "
			    "header");
	}
	if (memcmp(p->buf + p->start, FSS_FILE_MAGIC, n) != 0) {
		p->input = TRACE_INPUT_NOT_TRACE;
		return fail(p, FSS_E_NOT_TRACE, "not an fsdpscope trace: it does not start with the FSSTRACE magic");
	}
	p->input = TRACE_INPUT_HEADER_SHORT;
	return fail(p, FSS_E_TRUNCATED, "a trace cut short inside its file header: %zu of %zu bytes", avail,
		    sizeof(struct fss_file_header));
}

/* A salvage read found no chunk that holds: the file is what its header
 * made of it, nothing was read, and no stretch counts as skipped. */
static int salvage_found_nothing(trace_parser_t *p)
{
	p->gap_open = 0;
	p->salvaged.used = 0;
	p->input = p->salvaged.header;
	if (p->input == TRACE_INPUT_NOT_TRACE)
		return fail(p, FSS_E_NOT_TRACE,
			    "not an fsdpscope trace: it does not start with the FSSTRACE magic, and no intact "
			    "chunk of one follows");
	return fail(p, FSS_E_CORRUPT,
		    "the file header is damaged (%s), and no intact chunk follows it: nothing to read",
		    p->salvaged.why);
}

/* The start of the message of a salvaged read: what was wrong, what was
 * assumed, what was recovered. Returns the bytes used. */
static size_t salvage_words(const trace_parser_t *p, char *buf, size_t size)
{
	const struct fss_file_header *h = &p->salvaged.assumed;
	int to_end = 0;

	for (size_t i = 0; i < p->ngaps; i++)
		to_end |= p->gaps[i].to_end;
	return append(buf, size, 0,
		      "the file header is damaged (%s): read with --salvage, assuming format %u.%u, a file written "
		      "with no keep policy, chunks of up to %u MiB, each process's clocks from its own hello; "
		      "recovered %llu of %s%llu chunks (%llu bytes skipped)",
		      p->salvaged.why, h->version_major, h->version_minor, h->chunk_payload_max >> 20,
		      (unsigned long long)p->chunks, to_end ? "at least " : "",
		      (unsigned long long)(p->chunks + p->damage.chunks_missing), (unsigned long long)p->damage.bytes);
}

int trace_parser_finish(trace_parser_t *p)
{
	size_t need, used = 0;
	int rc;

	if (p->state == FAILED)
		return p->error;
	p->at_eof = 1;
	rc = process(p, &need);
	if (rc)
		return rc;
	if (p->state == WANT_FILE_HEADER || p->state == SKIP_HEADER_REST)
		return classify_short(p);
	if (p->salvaged.used && !p->have_header)
		return salvage_found_nothing(p);
	p->message[0] = '\0';
	if (p->gap_open && p->gap_is_cut) {
		p->gap_open = 0;
		p->end = TRACE_END_CUT;
		used = append(p->message, sizeof(p->message), used,
			      "offset %llu: chunk %llu truncated: %llu of %llu bytes: the writer stopped mid-write",
			      (unsigned long long)p->gap.offset, (unsigned long long)p->gap.first_missing,
			      (unsigned long long)p->cut_have, (unsigned long long)p->cut_want);
	} else {
		if (p->gap_open) {
			rc = gap_close(p, 0, 1);
			if (rc)
				return rc;
		}
		if (p->end_marker)
			p->end = TRACE_END_CLEAN;
		else if (p->header.version_minor == 0)
			p->end = TRACE_END_NOT_MARKED;
		else
			p->end = TRACE_END_MISSING;
	}
	if (p->end == TRACE_END_MISSING)
		used = append(p->message, sizeof(p->message), used,
			      "offset %llu: the trace ends after %llu chunk%s without its trace_end record: its writer "
			      "did not close it (killed, or still writing)",
			      (unsigned long long)p->good_offset, (unsigned long long)p->chunks,
			      p->chunks == 1 ? "" : "s");
	if (p->damage.gaps) {
		used = append(p->message, sizeof(p->message), used, "%s%llu damaged stretch%s skipped (%llu bytes",
			      used ? "; " : "", (unsigned long long)p->damage.gaps, p->damage.gaps > 1 ? "es" : "",
			      (unsigned long long)p->damage.bytes);
		if (p->damage.chunks_missing)
			used = append(p->message, sizeof(p->message), used, ", %llu chunk%s lost",
				      (unsigned long long)p->damage.chunks_missing,
				      p->damage.chunks_missing > 1 ? "s" : "");
		used = append(p->message, sizeof(p->message), used, ")");
		for (size_t i = 0; i < p->ngaps && i < 3; i++) {
			const struct trace_gap *g = &p->gaps[i];

			used = append(p->message, sizeof(p->message), used, "%s bytes %llu..%llu", i ? ";" : ":",
				      (unsigned long long)g->offset, (unsigned long long)(g->offset + g->bytes));
			if (g->to_end)
				used = append(p->message, sizeof(p->message), used, " to the end");
			else if (g->chunks_missing == 1)
				used = append(p->message, sizeof(p->message), used, " (chunk %llu lost)",
					      (unsigned long long)g->first_missing);
			else if (g->chunks_missing)
				used = append(p->message, sizeof(p->message), used, " (chunks %llu..%llu lost)",
					      (unsigned long long)g->first_missing,
					      (unsigned long long)(g->first_missing + g->chunks_missing - 1));
			used = append(p->message, sizeof(p->message), used, ", %s", g->why);
		}
		if (p->damage.gaps > 3)
			used = append(p->message, sizeof(p->message), used, "; ...");
	}
	if (p->process_records == 0) {
		char end[sizeof(p->message)];

		p->input = TRACE_INPUT_NO_RECORDS;
		snprintf(end, sizeof(end), "%s", p->message);
		append(p->message, sizeof(p->message), 0, "a trace with no records: a valid file header and %s%s%s",
		       p->damage.gaps ? "no readable chunk"
		       : p->chunks    ? "only the writer's end marker"
				      : "nothing after it",
		       end[0] ? "; " : "", end);
	}
	if (p->salvaged.used) {
		char rest[sizeof(p->message)];

		snprintf(rest, sizeof(rest), "%s", p->message);
		used = salvage_words(p, p->message, sizeof(p->message));
		if (rest[0])
			append(p->message, sizeof(p->message), used, "; %s", rest);
		return FSS_E_CORRUPT; /* the header was: however whole the chunks */
	}
	if (p->damage.gaps)
		return FSS_E_CORRUPT;
	if (p->end == TRACE_END_CUT || p->end == TRACE_END_MISSING)
		return FSS_E_TRUNCATED;
	return 0;
}

int trace_parser_salvaged(const trace_parser_t *p, struct trace_salvage *out)
{
	if (out)
		*out = p->salvaged;
	return p->salvaged.used;
}

const char *trace_parser_error(const trace_parser_t *p)
{
	return p->message;
}

enum trace_input trace_parser_input(const trace_parser_t *p)
{
	return p->input;
}

enum trace_end trace_parser_end(const trace_parser_t *p)
{
	return p->end;
}

size_t trace_parser_gaps(const trace_parser_t *p, const struct trace_gap **gaps)
{
	*gaps = p->gaps;
	return p->ngaps;
}

int trace_parser_damage(const trace_parser_t *p, struct trace_damage *out)
{
	*out = p->damage;
	return p->damage.gaps != 0;
}

uint64_t trace_parser_good_offset(const trace_parser_t *p)
{
	return p->good_offset;
}

uint64_t trace_parser_chunks(const trace_parser_t *p)
{
	return p->chunks;
}

uint64_t trace_parser_records(const trace_parser_t *p)
{
	return p->records;
}

const struct fss_file_header *trace_parser_header(const trace_parser_t *p)
{
	return p->have_header ? &p->header : NULL;
}

int trace_read(const char *path, const struct trace_parser_ops *ops, void *ctx, struct trace_read_info *info)
{
	return trace_read_flags(path, 0, ops, ctx, info);
}

int trace_read_flags(const char *path, unsigned flags, const struct trace_parser_ops *ops, void *ctx,
		     struct trace_read_info *info)
{
	unsigned char block[64 << 10];
	struct trace_read_info scratch;
	trace_parser_t *p;
	int fd, err = 0;

	if (!info)
		info = &scratch;
	memset(info, 0, sizeof(*info));
	info->end = TRACE_END_NONE;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		snprintf(info->message, sizeof(info->message), "%s", strerror(-err));
		return err;
	}
	p = trace_parser_new(ops, ctx);
	if (!p) {
		close(fd);
		snprintf(info->message, sizeof(info->message), "out of memory");
		return -ENOMEM;
	}
	if (flags & TRACE_READ_SALVAGE)
		trace_parser_salvage(p);
	for (;;) {
		ssize_t n = read(fd, block, sizeof(block));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		if (n == 0) {
			err = trace_parser_finish(p);
			break;
		}
		err = trace_parser_feed(p, block, (size_t)n);
		if (err)
			break;
	}
	info->input = trace_parser_input(p);
	info->end = trace_parser_end(p);
	info->chunks = trace_parser_chunks(p);
	info->records = trace_parser_records(p);
	trace_parser_damage(p, &info->damage);
	info->ngaps = p->ngaps;
	memcpy(info->gaps, p->gaps, p->ngaps * sizeof(p->gaps[0]));
	trace_parser_salvaged(p, &info->salvage);
	if (trace_parser_header(p)) {
		info->version_major = trace_parser_header(p)->version_major;
		info->version_minor = trace_parser_header(p)->version_minor;
	}
	if (trace_parser_error(p)[0])
		snprintf(info->message, sizeof(info->message), "%s", trace_parser_error(p));
	else if (err)
		snprintf(info->message, sizeof(info->message), "read failed after offset %llu: %s",
			 (unsigned long long)trace_parser_good_offset(p), strerror(-err));
	trace_parser_free(p);
	close(fd);
	return err;
}

int trace_read_file(const char *path, const struct trace_parser_ops *ops, void *ctx, char *errbuf, size_t errlen)
{
	struct trace_read_info info;
	int err = trace_read(path, ops, ctx, &info);

	if (errbuf && errlen)
		snprintf(errbuf, errlen, "%s", err ? info.message : "");
	return err;
}
