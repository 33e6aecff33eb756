/*
 * keep_segments.h - last:N: the trace written in segments of about N/4
 * steps of the slowest rank, the ones older than the last N steps removed,
 * the rest merged into the trace at the end.
 */
#ifndef FSS_COLLECTOR_KEEP_SEGMENTS_H
#define FSS_COLLECTOR_KEEP_SEGMENTS_H

#include <stdint.h>

#include "collector/keep_state.h"

/* keep_segments_push - track path (owned by the keeper from now on) as a
 * segment begun at the slowest rank's `start` completed steps. 0 or
 * -ENOMEM (path is then the caller's). */
int keep_segments_push(keeper_t *k, char *path, uint32_t start);

/* keep_segments_rotate - close the open output as a segment and go on in a
 * new one in the keeper's folder. 0, or the error (said through keep_say:
 * the trace goes on in the current file). */
int keep_segments_rotate(keeper_t *k);

/* keep_segments_step - a step completed: rotate when the open segment holds
 * its steps, remove the segments whose steps are all older than the last N. */
void keep_segments_step(keeper_t *k);

/* keep_segments_merge - merge the kept segments (the closed tail included)
 * into the trace, then remove them. 0 or the merge's error. */
int keep_segments_merge(keeper_t *k);

#endif
