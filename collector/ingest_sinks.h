/*
 * ingest_sinks.h - one output source per process: sink records, repeats held, markers.
 *
 * Internal to the ingest (collector/ingest.h is its API).
 */
#ifndef FSS_COLLECTOR_INGEST_SINKS_H
#define FSS_COLLECTOR_INGEST_SINKS_H

#include "collector/ingest_internal.h"

/* ingest_sink_find - p's sink `serial`, or NULL when the output knows none. */
struct sink_info *ingest_sink_find(struct process *p, uint32_t serial);

/* A resume marker in the output: the next record of p is read by a later
 * reader as sink `serial`'s record `index`, and the records before it are
 * held. Written to the file only (it says nothing to an analysis). */
int ingest_write_marker(ingest_t *ing, struct process *p, uint32_t serial, uint64_t index);

/* Where a marker for p's current sink resumes: past every record of it
 * the output has taken (written, left out, or held). */
uint64_t ingest_resume_index(struct process *p);

/* The markers of the drifting processes, before a chunk is written. */
int ingest_markers_due(ingest_t *ing);

/*
 * ingest_drifting_add - p's reader count falls behind: a marker is due
 * before the chunk is written. 0 or -ENOMEM.
 */
int ingest_drifting_add(ingest_t *ing, struct process *p);

/* The hello of m waited in vain (its source has no sink record): it starts
 * a source of its own. */
int ingest_hello_release(ingest_t *ing, struct input *in, struct source_map *m);

/*
 * ingest_take_record - one verified record of input `in`: which output
 * source it belongs to (hellos wait for their next record), whether the
 * output holds it already, then emitted. 0, a negative errno, or
 * INGEST_STOP_TOO_MANY_SOURCES.
 */
int ingest_take_record(ingest_t *ing, struct input *in, const struct fss_record_head *rec);

#endif
