/*
 * feed_viewer.c - `fsdpscope top --connect ADDR`: the views of a running
 * session, read from its viewer socket (collector/viewer.h, protocol
 * fsdpscope.live/2) and decoded back into struct live_view (tui/feeds.h).
 *
 * A thread of the feed reads the snapshot lines and puts each decoded view
 * on a board of its own, so the dashboard reads a connected session the way
 * it reads a session of its own process. The session never waits for us:
 * it skips snapshots a slow reader cannot take (the viewer endpoint's
 * rule), and so do we, by taking only the latest from the board.
 *
 * The decoding is strict: jansson with JSON_REJECT_DUPLICATES, every field
 * the schema requires present with its type; a line that fails is an
 * error the screen shows, never a view half filled.
 */
#include "tui/feeds.h"

#include "collector/analysis.h"
#include "collector/source.h"

#include "collector/viewer.h"
#include "common/error.h"
#include "common/record.h"

#include <assert.h>
#include <stddef.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* How long a viewer socket has to send its first snapshot (it sends one at once). */
#define VIEWER_FIRST_MS 5000
/* One read's wait: how soon the thread sees the feed stopping. */
#define VIEWER_READ_MS 200

/* ---- decoding -------------------------------------------------------------- */

struct dec {
	char *err;
	size_t errlen;
	int failed;
	char path[160]; /* where in the snapshot: "ranks[2].last_step" */
};

static int fail(struct dec *d, const char *key, const char *why)
{
	if (!d->failed)
		snprintf(d->err, d->errlen, "%s%s%s: %s", d->path, d->path[0] && key ? "." : "", key ? key : "", why);
	d->failed = 1;
	return -EPROTO;
}

/* Enter member `key` (or element i when key is NULL) of the path; returns the old length. */
static size_t push(struct dec *d, const char *key, size_t i)
{
	size_t n = strlen(d->path);

	if (key)
		snprintf(d->path + n, sizeof(d->path) - n, "%s%s", n ? "." : "", key);
	else
		snprintf(d->path + n, sizeof(d->path) - n, "[%zu]", i);
	return n;
}

static void pop(struct dec *d, size_t n)
{
	d->path[n] = '\0';
}

static json_t *member(struct dec *d, json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		fail(d, key, "missing");
	return v;
}

/* An unsigned integer; null gives `null_value` when allowed. */
static uint64_t get_u64n(struct dec *d, json_t *o, const char *key, int nullable, uint64_t null_value)
{
	json_t *v = member(d, o, key);

	if (!v)
		return 0;
	if (json_is_null(v)) {
		if (!nullable)
			fail(d, key, "null where a number is required");
		return null_value;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		/* jansson keeps integers as long long: beyond that they come as reals */
		if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) < 18446744073709551616.0)
			return (uint64_t)json_real_value(v);
		fail(d, key, "expected an integer of 0 or more");
		return 0;
	}
	return (uint64_t)json_integer_value(v);
}

static uint64_t get_u64(struct dec *d, json_t *o, const char *key)
{
	return get_u64n(d, o, key, 0, 0);
}

static int64_t get_i64n(struct dec *d, json_t *o, const char *key, int nullable, int64_t null_value)
{
	json_t *v = member(d, o, key);

	if (!v)
		return 0;
	if (json_is_null(v)) {
		if (!nullable)
			fail(d, key, "null where a number is required");
		return null_value;
	}
	if (!json_is_integer(v)) {
		fail(d, key, "expected an integer");
		return 0;
	}
	return (int64_t)json_integer_value(v);
}

static int get_bool(struct dec *d, json_t *o, const char *key)
{
	json_t *v = member(d, o, key);

	if (v && !json_is_boolean(v))
		fail(d, key, "expected true or false");
	return v && json_is_true(v);
}

/* A string into dst (cut to fit); null gives "" when allowed. Returns the string, or NULL. */
static const char *get_text(struct dec *d, json_t *o, const char *key, char *dst, size_t len, int nullable)
{
	json_t *v = member(d, o, key);

	if (dst && len)
		dst[0] = '\0';
	if (!v)
		return NULL;
	if (json_is_null(v)) {
		if (!nullable)
			fail(d, key, "null where a string is required");
		return NULL;
	}
	if (!json_is_string(v)) {
		fail(d, key, "expected a string");
		return NULL;
	}
	if (dst && len)
		snprintf(dst, len, "%s", json_string_value(v));
	return json_string_value(v);
}

static json_t *get_array(struct dec *d, json_t *o, const char *key)
{
	json_t *v = member(d, o, key);

	if (v && !json_is_array(v)) {
		fail(d, key, "expected an array");
		return NULL;
	}
	return v;
}

static json_t *get_object(struct dec *d, json_t *o, const char *key, int nullable)
{
	json_t *v = member(d, o, key);

	if (!v || (nullable && json_is_null(v)))
		return NULL;
	if (!json_is_object(v)) {
		fail(d, key, "expected an object");
		return NULL;
	}
	return v;
}

/* The number whose name(i) is `s`, for i in [0, max); -1 if none. */
static int name_to_int(const char *s, const char *(*name)(int), int max)
{
	for (int i = 0; s && i < max; i++)
		if (!strcmp(name(i), s))
			return i;
	return -1;
}

static const char *op_name(int i)
{
	return record_op_name((uint8_t)i);
}

static const char *dtype_name(int i)
{
	return record_dtype_name((uint8_t)i);
}

static const char *redop_name(int i)
{
	return record_redop_name((uint8_t)i);
}

static const char *severity_name(int i)
{
	static const char *const names[] = {"info", "warning", "error"};

	return i >= 0 && i < 3 ? names[i] : "";
}

static const char *reshard_name(int i)
{
	return analysis_reshard_name(i);
}

static const char *evidence_name(int i)
{
	static const char *const names[] = {"none", "host", "gpu", "sync"};

	return i >= 0 && i < 4 ? names[i] : "";
}

/* A name of the schema's enumeration back into its number; `null_value` for null. */
static int get_enum(struct dec *d, json_t *o, const char *key, const char *(*name)(int), int max, int nullable,
		    int null_value)
{
	const char *s = get_text(d, o, key, NULL, 0, nullable);
	int v;

	if (!s)
		return null_value;
	v = name_to_int(s, name, max);
	if (v < 0) {
		char why[96];

		snprintf(why, sizeof(why), "unknown name \"%.40s\"", s);
		fail(d, key, why);
		return null_value;
	}
	return v;
}

static const char *rank_from_name(int v)
{
	return source_rank_from_name((enum source_rank_from)v);
}

static const char *exposure_source_name(int v)
{
	return analysis_exposure_source_name((enum analysis_exposure_source)v);
}

static uint64_t get_hex(struct dec *d, json_t *o, const char *key)
{
	const char *s = get_text(d, o, key, NULL, 0, 0);
	char *end;
	uint64_t v;

	if (!s)
		return 0;
	errno = 0;
	v = strtoull(s, &end, 16);
	if (!*s || *end || errno)
		fail(d, key, "expected 16 hex digits");
	return v;
}

static void dec_step(struct dec *d, json_t *o, struct live_step *s)
{
	memset(s, 0, sizeof(*s));
	s->ordinal = (uint32_t)get_u64(d, o, "ordinal");
	s->excluded = get_bool(d, o, "excluded");
	s->start_ns = get_u64(d, o, "start_ns");
	s->step_ns = get_u64(d, o, "step_ns");
	s->allgathers = (uint32_t)get_u64(d, o, "allgathers");
	s->microbatches = (uint32_t)get_u64n(d, o, "microbatches", 1, 0);
	s->allgather_ns = get_u64(d, o, "allgather_ns");
	s->exposed_allgather_ns = get_u64(d, o, "exposed_allgather_ns");
	s->compute_wait_ns = get_u64(d, o, "compute_wait_ns");
	s->compute_ns = get_u64(d, o, "compute_ns");
	s->exposed_comm_ns = get_u64(d, o, "exposed_comm_ns");
}

/* Each element of array `key` of o, at most max, through fn; returns how many. */
typedef void (*elem_fn)(struct dec *d, json_t *e, void *out, size_t i);

static size_t dec_array(struct dec *d, json_t *o, const char *key, size_t max, elem_fn fn, void *out)
{
	json_t *a = get_array(d, o, key), *e;
	size_t i, n = 0, at;

	if (!a)
		return 0;
	at = push(d, key, 0);
	json_array_foreach(a, i, e)
	{
		size_t at2;

		if (n == max)
			break;
		at2 = push(d, NULL, i);
		if (!json_is_object(e) && fn) {
			fail(d, NULL, "expected an object");
			pop(d, at2);
			break;
		}
		fn(d, e, out, n++);
		pop(d, at2);
	}
	pop(d, at);
	return n;
}

static void el_step(struct dec *d, json_t *e, void *out, size_t i)
{
	dec_step(d, e, &((struct live_step *)out)[i]);
}

static void el_comm(struct dec *d, json_t *e, void *out, size_t i)
{
	struct live_comm *c = &((struct live_comm *)out)[i];

	memset(c, 0, sizeof(*c));
	c->id_hash = get_hex(d, e, "id_hash");
	c->nranks = (uint32_t)get_u64(d, e, "nranks");
	c->rank = (int32_t)get_i64n(d, e, "rank", 0, -1);
	c->role = (uint8_t)get_enum(d, e, "role", analysis_comm_role_name, ANALYSIS_ROLE_MAX, 0, 0);
	c->collectives = get_u64(d, e, "collectives");
	c->last_seq = get_u64(d, e, "last_seq");
	c->entered = get_u64(d, e, "entered");
	c->left = get_u64(d, e, "left");
}

static void el_event(struct dec *d, json_t *e, void *out, size_t i)
{
	struct live_event *v = &((struct live_event *)out)[i];
	uint64_t calls;

	memset(v, 0, sizeof(*v));
	v->start_ns = get_u64(d, e, "start_ns");
	v->end_ns = get_u64(d, e, "end_ns");
	v->op = (uint8_t)get_enum(d, e, "op", op_name, 256, 0, 0);
	v->phase = (uint8_t)get_enum(d, e, "phase", analysis_phase_name, 8, 1, 0);
	calls = get_u64(d, e, "calls");
	v->calls = calls > UINT16_MAX ? UINT16_MAX : (uint16_t)calls;
	v->unit = (uint32_t)get_u64n(d, e, "unit", 1, UINT32_MAX);
	v->bytes = get_u64(d, e, "bytes");
	v->exposed_ns = get_u64(d, e, "exposed_ns");
}

static void el_rank(struct dec *d, json_t *e, void *out, size_t i)
{
	struct live_rank *r = &((struct live_rank *)out)[i];
	json_t *o;

	memset(r, 0, sizeof(*r));
	r->rank = (int32_t)get_i64n(d, e, "rank", 1, -1);
	r->source = (uint32_t)get_u64(d, e, "source");
	r->pid = (uint32_t)get_u64(d, e, "pid");
	get_text(d, e, "host", r->host, sizeof(r->host), 0);
	get_text(d, e, "command", r->command, sizeof(r->command), 0);
	r->ended = get_bool(d, e, "ended");
	r->records = get_u64(d, e, "records");
	r->dropped = get_u64(d, e, "dropped");
	/* added within fsdpscope.live/2: a session of an older build has neither */
	if (json_object_get(e, "attached"))
		r->attached = get_bool(d, e, "attached");
	if (json_object_get(e, "rank_from"))
		r->rank_from = get_enum(d, e, "rank_from", rank_from_name, SOURCE_RANK_GUESSED_ORDER + 1, 0, 0);
	r->collectives_missing = get_u64(d, e, "collectives_missing");
	r->collectives = get_u64(d, e, "collectives");
	r->last_ns = get_u64(d, e, "last_ns");
	r->lateness_ns = get_i64n(d, e, "lateness_ns", 0, 0);
	o = get_object(d, e, "last_step", 1);
	if (o) {
		size_t at = push(d, "last_step", 0);

		dec_step(d, o, &r->last);
		pop(d, at);
	}
	o = get_object(d, e, "totals", 0);
	if (o) {
		size_t at = push(d, "totals", 0);
		struct live_totals *t = &r->totals;

		t->steps = get_u64(d, o, "steps");
		t->steps_excluded = get_u64(d, o, "steps_excluded");
		t->step_ns_sum = get_u64(d, o, "step_ns_sum");
		t->step_ns_min = get_u64n(d, o, "step_ns_min", 1, 0);
		t->step_ns_max = get_u64n(d, o, "step_ns_max", 1, 0);
		t->allgathers_sum = get_u64(d, o, "allgathers_sum");
		t->exposed_allgather_ns_sum = get_u64(d, o, "exposed_allgather_ns_sum");
		t->compute_wait_ns_sum = get_u64(d, o, "compute_wait_ns_sum");
		t->compute_ns_sum = get_u64(d, o, "compute_ns_sum");
		pop(d, at);
	}
	r->nwindow = dec_array(d, e, "window", LIVE_WINDOW, el_step, r->window);
	r->ncomms = dec_array(d, e, "comms", LIVE_COMMS_MAX, el_comm, r->comms);
	r->nstrip = dec_array(d, e, "strip", LIVE_STRIP_MAX, el_event, r->strip);
}

static void el_finding(struct dec *d, json_t *e, void *out, size_t i)
{
	struct live_finding *f = &((struct live_finding *)out)[i];

	memset(f, 0, sizeof(*f));
	get_text(d, e, "rule", f->rule, sizeof(f->rule), 0);
	f->severity = get_enum(d, e, "severity", severity_name, 3, 0, 0);
	get_text(d, e, "message", f->message, sizeof(f->message), 0);
	get_text(d, e, "evidence", f->evidence, sizeof(f->evidence), 0);
	get_text(d, e, "fix", f->fix, sizeof(f->fix), 1);
}

static void el_gather(struct dec *d, json_t *e, void *out, size_t i)
{
	struct live_gather *g = &((struct live_gather *)out)[i];

	memset(g, 0, sizeof(*g));
	g->unit = (uint32_t)get_u64n(d, e, "unit", 1, UINT32_MAX);
	g->bytes = get_u64(d, e, "bytes");
	g->exposed_ns = get_u64(d, e, "exposed_ns");
	get_text(d, e, "name", g->name, sizeof(g->name), 0);
}

static void el_flight_rank(struct dec *d, json_t *e, void *out, size_t i)
{
	struct analysis_flight_rank *r = &((struct analysis_flight_rank *)out)[i];

	memset(r, 0, sizeof(*r));
	r->rank = (int32_t)get_i64n(d, e, "rank", 0, -1);
	r->global_rank = -1; /* not in the snapshot */
	r->source = (uint32_t)get_u64(d, e, "source");
	r->pid = (uint32_t)get_u64(d, e, "pid");
	r->since_ns = get_u64(d, e, "since_ns");
	r->last_seq = get_u64n(d, e, "last_seq", 1, 0);
	r->last_op = (uint8_t)get_enum(d, e, "last_op", op_name, 256, 1, 0);
	r->evidence = (uint8_t)get_enum(d, e, "evidence", evidence_name, 4, 1, 0);
}

static void el_hang(struct dec *d, json_t *e, void *out, size_t i)
{
	struct analysis_hang *h = &((struct analysis_hang *)out)[i];

	memset(h, 0, sizeof(*h));
	h->comm_id = get_hex(d, e, "comm");
	h->nranks = (int32_t)get_i64n(d, e, "nranks", 0, 0);
	h->comm_seq = get_u64(d, e, "comm_seq");
	h->op = (uint8_t)get_enum(d, e, "op", op_name, 256, 0, 0);
	h->count = get_u64(d, e, "count");
	h->dtype = (uint8_t)get_enum(d, e, "dtype", dtype_name, 256, 1, FSS_DTYPE_UNKNOWN);
	h->waited_ns = get_u64(d, e, "waited_ns");
	h->nwaiting = (uint32_t)get_u64(d, e, "waiting_total");
	dec_array(d, e, "waiting", ANALYSIS_FLIGHT_RANKS_MAX, el_flight_rank, h->waiting);
	h->nmissing = (uint32_t)get_u64(d, e, "missing_total");
	dec_array(d, e, "missing", ANALYSIS_FLIGHT_RANKS_MAX, el_flight_rank, h->missing);
}

static void el_rank_number(struct dec *d, json_t *e, void *out, size_t i)
{
	if (!json_is_integer(e))
		fail(d, NULL, "expected an integer");
	((int32_t *)out)[i] = (int32_t)json_integer_value(e);
}

static uint32_t dec_signature(struct dec *d, json_t *o, const char *key, struct analysis_signature *s, int32_t *ranks)
{
	json_t *e = get_object(d, o, key, 0);
	size_t at;
	uint32_t n;
	json_t *a;
	size_t i;
	json_t *x;

	memset(s, 0, sizeof(*s));
	if (!e)
		return 0;
	at = push(d, key, 0);
	s->op = (uint8_t)get_enum(d, e, "op", op_name, 256, 0, 0);
	s->count = get_u64(d, e, "count");
	s->dtype = (uint8_t)get_enum(d, e, "dtype", dtype_name, 256, 1, FSS_DTYPE_UNKNOWN);
	s->root = (int32_t)get_i64n(d, e, "root", 1, -1);
	s->redop = (uint8_t)get_enum(d, e, "redop", redop_name, 256, 1, FSS_REDOP_NONE);
	n = (uint32_t)get_u64(d, e, "ranks_total");
	a = get_array(d, e, "ranks");
	json_array_foreach(a, i, x)
	{
		if (i == ANALYSIS_FLIGHT_RANKS_MAX)
			break;
		el_rank_number(d, x, ranks, i);
	}
	pop(d, at);
	return n;
}

static void el_mismatch(struct dec *d, json_t *e, void *out, size_t i)
{
	struct analysis_mismatch *m = &((struct analysis_mismatch *)out)[i];

	memset(m, 0, sizeof(*m));
	m->comm_id = get_hex(d, e, "comm");
	m->nranks = (int32_t)get_i64n(d, e, "nranks", 0, 0);
	m->comm_seq = get_u64(d, e, "comm_seq");
	m->na = dec_signature(d, e, "a", &m->a, m->a_ranks);
	m->nb = dec_signature(d, e, "b", &m->b, m->b_ranks);
	m->others = (uint32_t)get_u64(d, e, "other_ranks");
}

static void dec_flight(struct dec *d, json_t *o, struct analysis_flight *f)
{
	size_t at = push(d, "flight", 0);

	memset(f, 0, sizeof(*f));
	(void)get_bool(d, o, "hang");
	(void)get_bool(d, o, "shows_waits");
	f->timeout_ns = get_u64(d, o, "timeout_ns");
	f->now_realtime_ns = get_u64n(d, o, "now_realtime_ns", 1, 0);
	f->sources_enter = (uint32_t)get_u64(d, o, "sources_enter");
	f->sources_cupti = (uint32_t)get_u64(d, o, "sources_cupti");
	f->in_flight = (uint32_t)get_u64(d, o, "in_flight");
	f->hangs_total = (uint32_t)get_u64(d, o, "hangs_total");
	f->nhangs = (uint32_t)dec_array(d, o, "hangs", ANALYSIS_HANGS_MAX, el_hang, f->hangs);
	f->mismatches_total = (uint32_t)get_u64(d, o, "mismatches_total");
	f->mismatched_collectives = get_u64(d, o, "mismatched_collectives");
	f->nmismatches = (uint32_t)dec_array(d, o, "mismatches", ANALYSIS_MISMATCHES_MAX, el_mismatch, f->mismatches);
	pop(d, at);
}

static void dec_job(struct dec *d, json_t *o, struct live_job *j)
{
	size_t at = push(d, "job", 0);
	json_t *fl;
	int dg;

	j->records_total = get_u64(d, o, "records_total");
	j->records_dropped_total = get_u64(d, o, "records_dropped_total");
	j->diagnoses = get_u64(d, o, "diagnoses");
	dg = j->diagnosed = get_bool(d, o, "diagnosed");
	/* added within fsdpscope.live/2: absent from a session of an older build */
	if (json_object_get(o, "sources_attached"))
		j->sources_attached = (uint32_t)get_u64(d, o, "sources_attached");
	if (json_object_get(o, "exposure_source"))
		j->exposure_source = get_enum(d, o, "exposure_source", exposure_source_name, 3, 0, 0);
	/* before the first diagnosis these are null: the view's zeros */
	j->verdict = get_enum(d, o, "verdict", (const char *(*)(int))analysis_verdict_name, 16, !dg, 0);
	j->undecided_reason =
	    get_enum(d, o, "undecided_reason", analysis_undecided_name, ANALYSIS_UNDECIDED_MAX, !dg, 0);
	j->reshard = get_enum(d, o, "reshard", reshard_name, 8, !dg, 0);
	j->repeating_units = (uint32_t)get_u64n(d, o, "repeating_units", !dg, 0);
	j->gathers_per_unit = (uint32_t)get_u64n(d, o, "gathers_per_unit", !dg, 0);
	j->allgathers_per_step = (uint32_t)get_u64n(d, o, "allgathers_per_step", !dg, 0);
	j->microbatches = (uint32_t)get_u64n(d, o, "microbatches", 1, 0);
	j->exposed_allgather_ns_per_step = get_u64n(d, o, "exposed_allgather_ns_per_step", !dg, 0);
	j->compute_wait_ns_per_step = get_u64n(d, o, "compute_wait_ns_per_step", !dg, 0);
	j->nfindings = dec_array(d, o, "findings", LIVE_FINDINGS_MAX, el_finding, j->findings);
	j->ngathers = dec_array(d, o, "gathers", LIVE_GATHERS_MAX, el_gather, j->gathers);
	fl = get_object(d, o, "flight", 1);
	if (fl)
		dec_flight(d, fl, &j->flight);
	pop(d, at);
}

int top_viewer_decode(const char *json, size_t len, struct live_view **out, char *err, size_t errlen)
{
	struct dec d = {.err = err, .errlen = errlen};
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je), *o, *ranks;
	struct live_view *v = NULL;
	const char *schema;
	size_t n;

	*out = NULL;
	if (errlen)
		err[0] = '\0';
	if (!root) {
		snprintf(err, errlen, "not JSON: %s (column %d)", je.text, je.column);
		return -EPROTO;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		snprintf(err, errlen, "not a snapshot: not a JSON object");
		return -EPROTO;
	}
	schema = get_text(&d, root, "schema", NULL, 0, 0);
	if (!schema || strcmp(schema, VIEWER_PROTOCOL)) {
		if (!d.failed)
			snprintf(err, errlen, "schema \"%.60s\", expected \"%s\"", schema, VIEWER_PROTOCOL);
		json_decref(root);
		return -EPROTO;
	}
	ranks = get_array(&d, root, "ranks");
	n = ranks ? json_array_size(ranks) : 0;
	v = calloc(1, sizeof(*v));
	if (v)
		v->ranks = calloc(n ? n : 1, sizeof(*v->ranks));
	if (!v || !v->ranks) {
		live_view_free(v);
		json_decref(root);
		return -ENOMEM;
	}
	v->generation = get_u64(&d, root, "generation");
	v->at_ns = get_u64(&d, root, "at_ns");
	v->at_realtime_ns = get_u64(&d, root, "at_realtime_ns");
	o = get_object(&d, root, "job", 0);
	if (o)
		dec_job(&d, o, &v->job);
	v->nranks = dec_array(&d, root, "ranks", n, el_rank, v->ranks);
	json_decref(root);
	if (d.failed) {
		live_view_free(v);
		return -EPROTO;
	}
	*out = v;
	return 0;
}

/* ---- the feed ---------------------------------------------------------------- */

struct top_viewer_feed {
	struct top_feed inner; /* bf's callbacks, first: top_feed_forward delegates to them */
	viewer_client_t *client;
	live_board_t *board;
	top_board_feed_t *bf;
	struct top_info info;
	struct live_view *first; /* decoded at connect, put on the board by the thread */
	pthread_t thread;
	int thread_started;
	pthread_mutex_t mu;
	int stopping;
};
static_assert(offsetof(struct top_viewer_feed, inner) == 0, "top_feed_forward needs the inner feed first");

static int stopping(top_viewer_feed_t *f)
{
	int s;

	pthread_mutex_lock(&f->mu);
	s = f->stopping;
	pthread_mutex_unlock(&f->mu);
	return s;
}

static void *viewer_thread(void *arg)
{
	top_viewer_feed_t *f = arg;

	live_board_put(f->board, f->first);
	f->first = NULL;
	while (!stopping(f)) {
		const char *line;
		size_t len;
		char why[200], how[160];
		struct live_view *v;
		int rc = viewer_client_next(f->client, &line, &len, VIEWER_READ_MS);

		if (rc == 0)
			continue;
		if (rc == -EPIPE) {
			/* The session has gone: its last view stays on the screen. */
			f->info.job_state = TOP_JOB_UNKNOWN;
			snprintf(f->info.how, sizeof(f->info.how), "the session ended (its viewer socket closed)");
			top_board_feed_set_info(f->bf, &f->info);
			break;
		}
		if (rc < 0) {
			snprintf(how, sizeof(how), "the session sent a line that is not a snapshot: %s",
				 fss_strerror(rc));
			top_board_feed_fail(f->bf, rc, how);
			break;
		}
		rc = top_viewer_decode(line, len, &v, why, sizeof(why));
		if (rc) {
			snprintf(how, sizeof(how), "a snapshot does not decode: %.120s", why);
			top_board_feed_fail(f->bf, rc, how);
			break;
		}
		live_board_put(f->board, v);
	}
	return NULL;
}

/* What to do about a viewer address that does not answer as one. */
static int connect_error(const char *address, int rc, char *err, size_t errlen)
{
	const char *path = strncmp(address, "unix:", 5) ? address : address + 5;
	struct stat st;

	if (stat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
		snprintf(err, errlen, "%s: not a viewer socket (not a socket at all)", path);
	else if (rc == -ENOENT)
		snprintf(
		    err, errlen,
		    "%s: no session there (no such socket): start one with 'fsdpscope collect' or 'fsdpscope run', "
		    "or give the viewer socket it printed",
		    path);
	else if (rc == -ECONNREFUSED)
		snprintf(err, errlen,
			 "%s: no session there (nothing listens on the socket: the session that made it has ended)",
			 path);
	else if (rc == -EACCES || rc == -EPERM)
		snprintf(
		    err, errlen,
		    "%s: permission denied: a session's viewer socket is its user's alone; run top as the user who "
		    "runs the session",
		    path);
	else if (rc == -ENOTSOCK)
		snprintf(err, errlen, "%s: not a viewer socket (not a socket at all)", path);
	else
		snprintf(err, errlen, "%s: %s", path, fss_strerror(rc));
	return rc;
}

int top_viewer_feed_new(top_viewer_feed_t **out, const char *address, char *err, size_t errlen)
{
	top_viewer_feed_t *f;
	const char *line;
	size_t len;
	char why[200];
	int rc;

	*out = NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->mu, NULL);
	rc = viewer_client_connect(&f->client, address);
	if (rc) {
		connect_error(address, rc, err, errlen);
		goto fail;
	}
	rc = viewer_client_next(f->client, &line, &len, VIEWER_FIRST_MS);
	if (rc == 0 || rc == -EPROTO) {
		snprintf(
		    err, errlen, "%s: not a viewer socket (%s): give the session's viewer socket (DIR/.../viewer.sock)",
		    address, rc ? "what it sent is not a " VIEWER_PROTOCOL " snapshot" : "no snapshot came in 5 s");
		rc = -EPROTO;
		goto fail;
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s: the session closed the connection before its first snapshot (%s)", address,
			 fss_strerror(rc));
		goto fail;
	}
	rc = top_viewer_decode(line, len, &f->first, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "%s: its first snapshot does not decode: %s", address, why);
		goto fail;
	}
	f->info.mode = TOP_MODE_CONNECT;
	f->info.job_state = TOP_JOB_RUNNING;
	f->info.exit_status = -1;
	snprintf(f->info.source, sizeof(f->info.source), "%s", address);
	rc = live_board_new(&f->board);
	if (rc)
		goto fail;
	rc = top_board_feed_new(&f->bf, f->board, &f->info);
	if (rc)
		goto fail;
	top_board_feed_bind(f->bf, &f->inner);
	rc = pthread_create(&f->thread, NULL, viewer_thread, f);
	if (rc) {
		rc = -rc;
		goto fail;
	}
	f->thread_started = 1;
	*out = f;
	return 0;
fail:
	if (errlen && !err[0])
		snprintf(err, errlen, "%s: %s", address, fss_strerror(rc));
	top_viewer_feed_free(f);
	return rc;
}

void top_viewer_feed_bind(top_viewer_feed_t *f, struct top_feed *feed)
{
	top_feed_forward(feed, f);
}

void top_viewer_feed_free(top_viewer_feed_t *f)
{
	if (!f)
		return;
	if (f->thread_started) {
		pthread_mutex_lock(&f->mu);
		f->stopping = 1;
		pthread_mutex_unlock(&f->mu);
		pthread_join(f->thread, NULL);
	}
	top_board_feed_free(f->bf);
	if (f->board)
		live_board_close(f->board);
	live_board_free(f->board);
	live_view_free(f->first);
	viewer_client_close(f->client);
	pthread_mutex_destroy(&f->mu);
	free(f);
}
