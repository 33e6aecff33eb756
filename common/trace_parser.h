/*
 * trace_parser.h - read a trace incrementally: file or socket stream alike.
 *
 * Bytes go in with trace_parser_feed() in pieces of any size; records come
 * out through callbacks, a whole chunk at a time and only after its CRC32C
 * checks out, so nothing from a damaged chunk is ever delivered. A damaged
 * stretch does not end the reading: the parser looks for the next valid
 * chunk (chunk magic, a header that holds, a payload CRC that matches, a
 * sequence number after the last good one), delivers it and records the
 * stretch it skipped as a gap. The parser keeps at most one chunk (plus the
 * few bytes of a scan) in memory. This is the one decoder of the format:
 * the file reader, `fsdpscope dump`, the collector's socket ingest and the
 * fuzzer all go through it.
 */
#ifndef FSS_COMMON_TRACE_PARSER_H
#define FSS_COMMON_TRACE_PARSER_H

#include <stddef.h>
#include <stdint.h>

#include "common/record.h"
#include "common/trace_format.h"

typedef struct trace_parser trace_parser_t;

/* What the input is, known once the file header has been decided on (at the
 * latest after trace_parser_finish). Only TRACE_INPUT_TRACE has records. */
enum trace_input {
	TRACE_INPUT_TRACE,	      /* a trace holding records */
	TRACE_INPUT_EMPTY,	      /* no byte at all */
	TRACE_INPUT_NOT_TRACE,	      /* does not start with the FSSTRACE magic */
	TRACE_INPUT_HEADER_SHORT,     /* ends inside the 64-byte file header */
	TRACE_INPUT_HEADER_DAMAGED,   /* the file header fails its CRC, holds a size no writer writes, or
				       * its magic is FSSTRACE but for a byte or two */
	TRACE_INPUT_OTHER_BYTE_ORDER, /* a valid header written on a big-endian host */
	TRACE_INPUT_NEWER_VERSION,    /* a valid header of a format major this reader does not know */
	TRACE_INPUT_NO_RECORDS,	      /* a valid header and not one record after it */
};

/* How the input ended, after trace_parser_finish. */
enum trace_end {
	TRACE_END_CLEAN,      /* with the writer's trace_end record: the writer closed it */
	TRACE_END_NOT_MARKED, /* format 1.0 on a chunk boundary: 1.0 writers wrote no end
			       * marker, so whether the writer finished cannot be told */
	TRACE_END_MISSING,    /* no trace_end after the last chunk read: the writer did not
			       * close it (killed, still writing, or the end was damaged) */
	TRACE_END_CUT,	      /* inside a chunk: the writer stopped mid-write */
	TRACE_END_NONE,	      /* no valid header: nothing was read */
};

/* One damaged stretch the parser skipped. */
struct trace_gap {
	uint64_t offset;	 /* first byte not delivered */
	uint64_t bytes;		 /* bytes skipped from there */
	uint64_t first_missing;	 /* sequence number of the first chunk lost */
	uint64_t chunks_missing; /* chunks lost, from the sequence numbers around the gap */
	int to_end;		 /* 1: runs to the end of the input: chunks_missing cannot be told */
	char why[124];		 /* what was wrong at offset */
};

/* Gaps kept for callers; any beyond are counted in trace_parser_damage. */
#define TRACE_PARSER_GAPS_KEPT 16

/* All damage seen, totals over every gap. */
struct trace_damage {
	uint64_t gaps;
	uint64_t bytes;
	uint64_t chunks_missing; /* over the gaps that do not run to the end */
};

struct trace_parser_ops {
	/* The file header, once, before any record. Non-zero return stops. */
	int (*on_header)(void *ctx, const struct fss_file_header *header);
	/* One record. `rec` holds at least record_known_size(type) bytes (a
	 * shorter record of an older writer is zero-extended), and head->size
	 * bytes as written; valid during the call only. Unknown types are passed
	 * too: skip them. The trace_end record is passed as well: its source is
	 * FSS_SOURCE_NONE. A non-zero return stops parsing with that value. */
	int (*on_record)(void *ctx, const struct fss_record_head *rec);
	/* After the last record of each chunk (optional). */
	int (*on_chunk)(void *ctx, uint64_t seq, uint32_t records, uint64_t file_offset);
	/* A gap, once its extent is known: before the first chunk after it is
	 * delivered, or at finish (optional). Non-zero return stops. */
	int (*on_gap)(void *ctx, const struct trace_gap *gap);
};

/* trace_parser_new - a parser calling ops with ctx. NULL on ENOMEM. */
trace_parser_t *trace_parser_new(const struct trace_parser_ops *ops, void *ctx);
void trace_parser_free(trace_parser_t *p);

/*
 * trace_parser_salvage - before the first feed: a file header that does not
 * hold (its magic or CRC wrong, a size no writer writes) no longer stops the
 * reading. The parser assumes this version's header (struct trace_salvage
 * says what), reads on from byte 64 chunk by chunk as after any damage
 * (each chunk's own CRC vouches for it), and calls on_header with the
 * assumed header before the first chunk it delivers. The read is then
 * damaged (trace_parser_finish returns FSS_E_CORRUPT) however whole its
 * chunks are. When no valid chunk follows, the input is what the header
 * said (not a trace, header damaged), as without salvage. A header that
 * holds is read as ever: one of the other byte order or a newer major is
 * not damage, and is refused.
 */
void trace_parser_salvage(trace_parser_t *p);

/* What a salvaged read assumed in place of a file header that did not hold. */
struct trace_salvage {
	int used;			/* 1: the header did not hold and the chunks were read without it */
	enum trace_input header;	/* what the header alone made of the input: NOT_TRACE, HEADER_DAMAGED */
	struct fss_file_header assumed; /* this version's: FSS_FORMAT_MAJOR.MINOR, a file, no keep policy,
					   features and clocks 0 (each hello carries its process's), chunks
					   of up to FSS_CHUNK_MAX_PAYLOAD */
	char why[128];			/* what was wrong with the header: "CRC mismatch: stored ..., ..." */
};

/* trace_parser_salvaged - 1 when a salvage read took the place of the header
 * (*out says what was assumed), else 0. Final after trace_parser_finish. */
int trace_parser_salvaged(const trace_parser_t *p, struct trace_salvage *out);

/*
 * trace_parser_feed - consume len bytes. Returns 0, a callback's non-zero
 * value, -ENOMEM, or an FSS_E_* error for a file header that cannot be read
 * (not a trace, damaged, other byte order, newer major). Those stop the
 * parser for good (later feeds return the same). Damaged chunks do not: they
 * become gaps and the parser carries on.
 */
int trace_parser_feed(trace_parser_t *p, const void *data, size_t len);

/*
 * trace_parser_finish - the input has ended: decide how (trace_parser_end),
 * what it was (trace_parser_input) and close a gap still open. Returns
 *   0               a clean end (or a 1.0 trace on a chunk boundary), no gap;
 *   FSS_E_CORRUPT   gaps were skipped (every valid chunk was delivered);
 *   FSS_E_TRUNCATED no gap, but no clean end: cut inside a chunk or the
 *                   trace_end record missing; also for an empty file or a
 *                   header cut short;
 *   or the header's error, a callback's value, -ENOMEM.
 * trace_parser_error says what and where in every non-zero case.
 */
int trace_parser_finish(trace_parser_t *p);

/* trace_parser_error - what is wrong and where, e.g. "offset 4120: chunk 3
 * truncated: 1000 of 4120 bytes: the writer stopped mid-write"; with gaps,
 * the first few; for TRACE_INPUT_NO_RECORDS, that it holds none; "" for a
 * trace read whole. */
const char *trace_parser_error(const trace_parser_t *p);

/* trace_parser_input / trace_parser_end - see the enums; final after
 * trace_parser_finish (before it, input reads TRACE_INPUT_TRACE once a valid
 * header is in). */
enum trace_input trace_parser_input(const trace_parser_t *p);
enum trace_end trace_parser_end(const trace_parser_t *p);

/* trace_parser_gaps - the first TRACE_PARSER_GAPS_KEPT gaps in input order;
 * returns how many *gaps points to (owned by the parser). */
size_t trace_parser_gaps(const trace_parser_t *p, const struct trace_gap **gaps);
/* trace_parser_damage - totals over all gaps; returns 1 if there was any. */
int trace_parser_damage(const trace_parser_t *p, struct trace_damage *out);

/* Byte offset just past the last complete chunk delivered (or the header). */
uint64_t trace_parser_good_offset(const trace_parser_t *p);
/* Complete chunks and records delivered so far. */
uint64_t trace_parser_chunks(const trace_parser_t *p);
uint64_t trace_parser_records(const trace_parser_t *p);
/* The header, or NULL before a valid one has been read. */
const struct fss_file_header *trace_parser_header(const trace_parser_t *p);

/* What trace_read tells about a file besides its records. */
struct trace_read_info {
	enum trace_input input;
	enum trace_end end;
	uint64_t chunks, records; /* delivered */
	struct trace_damage damage;
	struct trace_gap gaps[TRACE_PARSER_GAPS_KEPT]; /* the first ngaps of damage.gaps */
	size_t ngaps;
	uint16_t version_major, version_minor; /* 0.0 without a valid header (or the assumed one, salvaged) */
	uint32_t reserved;
	struct trace_salvage salvage; /* salvage.used: read without its header (TRACE_READ_SALVAGE) */
	char message[768];	      /* trace_parser_error's text, or the system error; "" if none */
};

/* trace_read_flags' flags. */
#define TRACE_READ_SALVAGE 1u /* trace_parser_salvage: read past a header that does not hold */

/*
 * trace_read - open path, feed all of it through a parser calling ops,
 * finish, and describe the outcome in *info (which may be NULL). Returns
 * what trace_parser_finish does, or -errno when the file cannot be opened
 * or read (info->message says so).
 */
int trace_read(const char *path, const struct trace_parser_ops *ops, void *ctx, struct trace_read_info *info);

/* trace_read_flags - trace_read with TRACE_READ_* flags (0: trace_read). */
int trace_read_flags(const char *path, unsigned flags, const struct trace_parser_ops *ops, void *ctx,
		     struct trace_read_info *info);

/*
 * trace_read_file - trace_read with only the message: on a non-zero return,
 * if errbuf is given, writes what went wrong there.
 */
int trace_read_file(const char *path, const struct trace_parser_ops *ops, void *ctx, char *errbuf, size_t errlen);

#endif
