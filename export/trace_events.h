/*
 * trace_events.h - a streaming writer of Chrome-trace JSON (the Trace Event
 * Format that Perfetto's UI, chrome://tracing and PyTorch's profiler use):
 * {"traceEvents": [ event, event, ... ], other keys}, one event at a time.
 *
 * Every event that has a time carries ts, pid and tid. Times are given in
 * nanoseconds and written in microseconds with the nanoseconds kept as
 * three decimals ("12.345"): the format's unit, at the clocks' precision.
 * Strings go through common/json.c's escaping (names from the job may hold
 * anything); the writer writes no number that is not finite.
 *
 * Usage: trace_events_new, then per event trace_events_begin_event (the
 * returned writer takes the event's own members: args, dur, id, ...) and
 * trace_events_end_event; trace_events_end_events closes the array (the
 * writer then takes top-level keys); trace_events_finish closes the
 * document and says whether everything reached the stream.
 */
#ifndef FSS_EXPORT_TRACE_EVENTS_H
#define FSS_EXPORT_TRACE_EVENTS_H

#include <stdint.h>
#include <stdio.h>

#include "common/json_writer.h"

typedef struct trace_events trace_events_t;

/* trace_events_new - a writer onto `out` (borrowed: the caller closes
 * it), with "{\"traceEvents\": [" written. NULL on ENOMEM. */
trace_events_t *trace_events_new(FILE *out);
void trace_events_free(trace_events_t *t);

/*
 * trace_events_begin_event - open one event: ph, name (NULL: none), cat
 * (NULL: none), ts, pid and tid. Returns the writer, inside the event
 * object, for the event's other members; close it with
 * trace_events_end_event.
 */
struct jw *trace_events_begin_event(trace_events_t *t, const char *ph, const char *name, const char *cat,
				    uint64_t ts_ns, int64_t pid, int64_t tid);
void trace_events_end_event(trace_events_t *t);

/* trace_events_time - member `key` as microseconds with three decimals. */
void trace_events_time(struct jw *w, const char *key, uint64_t ns);

/* trace_events_double - member `key` as a number, 0 when v is not finite. */
void trace_events_double(struct jw *w, const char *key, double v);

/*
 * trace_events_metadata - one ph "M" event (process_name, thread_name,
 * process_sort_index, ...): its args hold `key`: `value` (value NULL: the
 * number `number`). Metadata events carry pid and tid, and no ts.
 */
void trace_events_metadata(trace_events_t *t, const char *name, int64_t pid, int64_t tid, const char *key,
			   const char *value, int64_t number);

/* trace_events_begin_metadata - open a ph "M" event with name, pid and
 * tid, for members of the caller's (args); close it with
 * trace_events_end_event. */
struct jw *trace_events_begin_metadata(trace_events_t *t, const char *name, int64_t pid, int64_t tid);

/* trace_events_end_events - close the traceEvents array; the writer
 * returned takes the document's other top-level keys. */
struct jw *trace_events_end_events(trace_events_t *t);

/* trace_events_count - events written so far. */
uint64_t trace_events_count(const trace_events_t *t);

/*
 * trace_events_finish - close the document (and the events array if still
 * open), flush the stream. Returns 0, or -EIO when a write failed (errno's
 * value when the stream kept one).
 */
int trace_events_finish(trace_events_t *t);

#endif
