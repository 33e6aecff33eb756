/*
 * trace_parser.h - read a trace incrementally: file or socket stream alike.
 *
 * Bytes go in with trace_parser_feed() in pieces of any size; records come
 * out through callbacks, a whole chunk at a time and only after its CRC32C
 * checks out, so nothing from a damaged chunk is ever delivered. The parser
 * keeps at most one chunk in memory. This is the one decoder of the format:
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

struct trace_parser_ops {
	/* The file header, once, before any record. Non-zero return stops. */
	int (*on_header)(void *ctx, const struct fss_file_header *header);
	/* One record. `rec` holds at least record_known_size(type) bytes (a
	 * shorter record of an older writer is zero-extended), and head->size
	 * bytes as written; valid during the call only. Unknown types are passed
	 * too: skip them. A non-zero return stops parsing with that value. */
	int (*on_record)(void *ctx, const struct fss_record_head *rec);
	/* After the last record of each chunk (optional). */
	int (*on_chunk)(void *ctx, uint64_t seq, uint32_t records, uint64_t file_offset);
};

/* trace_parser_new - a parser calling ops with ctx. NULL on ENOMEM. */
trace_parser_t *trace_parser_new(const struct trace_parser_ops *ops, void *ctx);
void trace_parser_free(trace_parser_t *p);

/*
 * trace_parser_feed - consume len bytes. Returns 0, a callback's non-zero
 * value, or an FSS_E_* error; errors are sticky (later feeds return it).
 */
int trace_parser_feed(trace_parser_t *p, const void *data, size_t len);

/*
 * trace_parser_finish - the input has ended. Returns 0 when it ended on a
 * chunk boundary after a valid header, FSS_E_TRUNCATED when it ended inside
 * the header or a chunk, or the sticky error.
 */
int trace_parser_finish(trace_parser_t *p);

/* trace_parser_error - what went wrong and where, e.g. "offset 4120: chunk 3
 * truncated: 1000 of 4096 payload bytes"; "" when nothing did. */
const char *trace_parser_error(const trace_parser_t *p);

/* Byte offset just past the last complete chunk (or the header). */
uint64_t trace_parser_good_offset(const trace_parser_t *p);
/* Complete chunks and records delivered so far. */
uint64_t trace_parser_chunks(const trace_parser_t *p);
uint64_t trace_parser_records(const trace_parser_t *p);
/* The header, or NULL before it has been read. */
const struct fss_file_header *trace_parser_header(const trace_parser_t *p);

/*
 * trace_read_file - open path, feed all of it through a parser calling ops,
 * finish. On error, if errbuf is given, writes the parser's message (or the
 * system error) there. Returns 0, a callback's value, an FSS_E_* or -errno.
 */
int trace_read_file(const char *path, const struct trace_parser_ops *ops, void *ctx, char *errbuf,
		    size_t errlen);

#endif
