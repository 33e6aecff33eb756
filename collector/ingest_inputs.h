/*
 * ingest_inputs.h - an input (connection or file): its parser, its end, a file merged.
 *
 * Internal to the ingest (collector/ingest.h is its API).
 */
#ifndef FSS_COLLECTOR_INGEST_INPUTS_H
#define FSS_COLLECTOR_INGEST_INPUTS_H

#include "collector/ingest_internal.h"

/*
 * ingest_input_new - a new input of `kind` (fd -1 for a file) with its own
 * parser, added to the ingest's inputs. 0 with *out, or -ENOMEM.
 */
int ingest_input_new(ingest_t *ing, enum input_kind kind, int fd, struct input **out);

/*
 * The input has ended (EOF, a file read to its end, or cut by
 * ingest_finish when `cut`): say what was lost, if anything.
 */
int ingest_input_end(ingest_t *ing, struct input *in, int cut);

/* Parsing done for good: free the chunk buffer and the map now, keep the
 * numbers. */
void ingest_input_release_parser(struct input *in);

/*
 * ingest_input_feed - bytes of the input, through its parser; a parser that
 * stops marks the input failed (the rest is counted, not parsed).
 */
void ingest_input_feed(ingest_t *ing, struct input *in, const void *data, size_t len);

#endif
