/*
 * trace_writer.h - write records into a trace file or a socket stream.
 *
 * Records are buffered into a chunk and each chunk goes out with one write,
 * so a writer killed at any instant leaves every complete chunk readable.
 * Files are written to "<path>.partial" and renamed to <path> by
 * trace_writer_close(), which ends the trace with a trace_end record; a
 * killed writer leaves the .partial file without one, which trace readers
 * read and report as not closed.
 */
#ifndef FSS_COMMON_TRACE_WRITER_H
#define FSS_COMMON_TRACE_WRITER_H

#include <stddef.h>
#include <stdint.h>

typedef struct trace_writer trace_writer_t;

struct trace_writer_options {
	int exclusive;           /* create "<path>.partial" mode 0600, O_EXCL | O_NOFOLLOW: -EEXIST when the
	                          * name exists (a symlink included) instead of truncating what it names */
	uint64_t features;       /* FSS_FEATURE_* bits for the file header */
	uint32_t chunk_payload;  /* payload bytes per chunk, 0: FSS_CHUNK_DEFAULT_PAYLOAD */
	int sync_on_close;       /* fsync the file before the rename, its folder after */
	uint32_t keep_flags;     /* FSS_FILE_KEEP_* for the header (a session's --keep policy), 0: full */
	uint32_t keep_steps;     /* the header's keep_steps */
	/* Called after each chunk went out whole to the fd (optional): its seq,
	 * its record count, and its bytes exactly as written (chunk header then
	 * payload, valid during the call only). An agent keeps these until the
	 * collector acknowledges them (docs/format.md, "The return channel"). */
	void (*on_chunk)(void *ctx, uint64_t seq, uint32_t records, const void *bytes, size_t len);
	void *on_chunk_ctx;
};

/*
 * trace_writer_open - create "<path>.partial", write the file header.
 * opts may be NULL for defaults. On success *out owns the file; the caller
 * ends it with trace_writer_close(). Returns 0 or a negative errno.
 */
int trace_writer_open(trace_writer_t **out, const char *path, const struct trace_writer_options *opts);

/*
 * trace_writer_open_fd - write the same bytes to a connected stream socket
 * (or any fd). The fd stays the caller's: close() of the writer does not
 * close it. Writes block until the bytes are out or fail.
 */
int trace_writer_open_fd(trace_writer_t **out, int fd, const struct trace_writer_options *opts);

/*
 * trace_writer_append - append one record (its head says its size, which
 * must be >= 8, a multiple of 8 and fit in a chunk). A full chunk is written
 * out first. Returns 0 or a negative errno; after a write error the writer
 * refuses further records with the same error.
 */
int trace_writer_append(trace_writer_t *w, const void *record);

/*
 * trace_writer_string - append the FSS_REC_STRING part records that define
 * string `id` = s[0..len) for `source`. Strings over FSS_STRING_MAX_BYTES are
 * cut there.
 */
int trace_writer_string(trace_writer_t *w, uint32_t source, uint32_t id, const char *s, size_t len);

/* trace_writer_flush - write the pending chunk now, if it holds records. */
int trace_writer_flush(trace_writer_t *w);

/*
 * trace_writer_close - append the trace_end record, flush, and for a file:
 * (fsync), close, rename "<path>.partial" to <path>, (fsync the folder),
 * the steps in parentheses when sync_on_close; an fd writer is only
 * flushed. Frees w in every case. Returns the first error the writer met,
 * or 0.
 */
int trace_writer_close(trace_writer_t *w);

/*
 * trace_writer_unsent - the records appended but not yet written out (the
 * chunk being filled, or the one whose write failed: after an error it is
 * kept as it was). *payload points into the writer (valid until its next
 * call), *len bytes of whole records, *records of them. Returns *records.
 */
uint32_t trace_writer_unsent(const trace_writer_t *w, const void **payload, size_t *len, uint32_t *records);

/* trace_writer_records - records appended so far. */
uint64_t trace_writer_records(const trace_writer_t *w);

/* trace_writer_bytes - bytes written out so far (header and chunks). */
uint64_t trace_writer_bytes(const trace_writer_t *w);

#endif
