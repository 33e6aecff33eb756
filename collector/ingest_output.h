/*
 * ingest_output.h - the output trace: records appended, flushed, counted.
 *
 * Internal to the ingest (collector/ingest.h is its API).
 */
#ifndef FSS_COLLECTOR_INGEST_OUTPUT_H
#define FSS_COLLECTOR_INGEST_OUTPUT_H

#include "collector/ingest_internal.h"

/* Write the pending chunk, then ack. */
int ingest_flush_and_ack(ingest_t *ing);

/*
 * ingest_append_raw - append one record to the output as it is (no marker
 * check). 0, -EINVAL for a record too large for its chunks (refused, the
 * output goes on), or the write error (sticky).
 */
int ingest_append_raw(ingest_t *ing, const void *rec);

/* Append a record; first, when it would close the pending chunk, the
 * markers due, so that every chunk on disk ends with the sources' counts
 * right. */
int ingest_append_out(ingest_t *ing, const void *rec);

/* A new output source for input `in`. */
int ingest_source_new(ingest_t *ing, struct input *in, uint32_t *out);

/* The stats' copy of what the layer knows about a source. */
void ingest_stats_sync(ingest_t *ing, struct ingest_source_stats *s);

/*
 * One record for output source `out`: renumbered, kept for re-statement,
 * taken in by the layer, shown to the record callback, then written unless
 * the callback leaves it out (and it is not `must_write`). Returns 0 when
 * written, 1 when left out, or a negative errno.
 */
int ingest_emit_record(ingest_t *ing, uint32_t out, const struct fss_record_head *rec, int must_write);

/* ingest_emit_record for callers that need not know whether it was left out. */
int ingest_emit(ingest_t *ing, uint32_t out, const struct fss_record_head *rec);

/* The flush interval has passed since records arrived: write and ack. */
int ingest_flush_if_due(ingest_t *ing);

/* Every input has ended: each noted exit goes after its source's records. */
int ingest_write_exits(ingest_t *ing);

#endif
