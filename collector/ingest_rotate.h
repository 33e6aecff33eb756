/*
 * ingest_rotate.h - a new output file that stands alone: what it re-states, the switch.
 *
 * Internal to the ingest (collector/ingest.h is its API).
 */
#ifndef FSS_COLLECTOR_INGEST_ROTATE_H
#define FSS_COLLECTOR_INGEST_ROTATE_H

#include "collector/ingest_internal.h"

/*
 * ingest_restate_note - keep what a new file must re-state of a record of
 * the source (hello, strings, live communicators, latest anchors, drops).
 * 0 or -ENOMEM.
 */
int ingest_restate_note(struct restate *r, const struct fss_record_head *rec);

/* ingest_restate_free - release what r holds (not r). */
void ingest_restate_free(struct restate *r);

/* A rotation asked for inside the record callback happens once the input
 * record being handed over is taken whole (a hello and its sink record stay
 * in one file). */
int ingest_rotate_pending(ingest_t *ing);

#endif
