/*
 * trace_events.c - the streaming Chrome-trace writer (trace_events.h).
 */
#include "export/trace_events.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

struct trace_events {
	FILE *out;
	struct jw w;
	int events_open; /* inside the traceEvents array */
	int finished;
	uint64_t count;
};

trace_events_t *trace_events_new(FILE *out)
{
	trace_events_t *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->out = out;
	jw_init_file(&t->w, out);
	t->w.compact = 1;
	jw_open(&t->w, NULL, '{');
	jw_open(&t->w, "traceEvents", '[');
	t->events_open = 1;
	return t;
}

void trace_events_free(trace_events_t *t)
{
	free(t);
}

void trace_events_time(struct jw *w, const char *key, uint64_t ns)
{
	jw_sep(w, key);
	jw_rawf(w, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

void trace_events_double(struct jw *w, const char *key, double v)
{
	jw_sep(w, key);
	if (!isfinite(v))
		v = 0;
	jw_rawf(w, "%.17g", v);
}

struct jw *trace_events_begin_event(trace_events_t *t, const char *ph, const char *name, const char *cat,
				    uint64_t ts_ns, int64_t pid, int64_t tid)
{
	struct jw *w = &t->w;

	/* one event per line: readable with grep, and still one document */
	jw_raw(w, "\n", 1);
	jw_open(w, NULL, '{');
	jw_str(w, "ph", ph);
	if (name)
		jw_str(w, "name", name);
	if (cat)
		jw_str(w, "cat", cat);
	trace_events_time(w, "ts", ts_ns);
	jw_i64(w, "pid", pid);
	jw_i64(w, "tid", tid);
	return w;
}

void trace_events_end_event(trace_events_t *t)
{
	jw_close(&t->w, '}');
	t->count++;
}

struct jw *trace_events_begin_metadata(trace_events_t *t, const char *name, int64_t pid, int64_t tid)
{
	struct jw *w = &t->w;

	jw_raw(w, "\n", 1);
	jw_open(w, NULL, '{');
	jw_str(w, "ph", "M");
	jw_str(w, "name", name);
	jw_i64(w, "pid", pid);
	jw_i64(w, "tid", tid);
	return w;
}

void trace_events_metadata(trace_events_t *t, const char *name, int64_t pid, int64_t tid, const char *key,
			   const char *value, int64_t number)
{
	struct jw *w = trace_events_begin_metadata(t, name, pid, tid);

	jw_open(w, "args", '{');
	if (value)
		jw_str(w, key, value);
	else
		jw_i64(w, key, number);
	jw_close(w, '}');
	jw_close(w, '}');
	t->count++;
}

struct jw *trace_events_end_events(trace_events_t *t)
{
	if (t->events_open) {
		jw_raw(&t->w, "\n", 1);
		jw_close(&t->w, ']');
		t->events_open = 0;
	}
	return &t->w;
}

uint64_t trace_events_count(const trace_events_t *t)
{
	return t->count;
}

int trace_events_finish(trace_events_t *t)
{
	if (!t->finished) {
		trace_events_end_events(t);
		jw_close(&t->w, '}');
		jw_raw(&t->w, "\n", 1);
		t->finished = 1;
	}
	if (fflush(t->out) != 0 || ferror(t->out))
		return errno ? -errno : -EIO;
	return 0;
}
