/*
 * viewer_render.c - a live view as one snapshot line of the viewer
 * protocol (docs/live.md, docs/live-schema.json): viewer_render.
 */
#include "collector/source.h"
#include "collector/viewer.h"

#include "common/json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing output buffer; on allocation failure it stops growing and
 * remembers, so the writers below need no checks of their own. */
struct out {
	char *buf;
	size_t len, cap;
	int oom;
	int comma; /* the next value or key needs a ',' before it */
};

static void out_raw(struct out *o, const char *s, size_t n)
{
	if (o->oom)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap : 4096;
		char *b;

		while (cap < o->len + n + 1)
			cap *= 2;
		b = realloc(o->buf, cap);
		if (!b) {
			o->oom = 1;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

__attribute__((format(printf, 2, 3))) static void out_fmt(struct out *o, const char *fmt, ...)
{
	char small[64];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	/* Only numbers go through here: they always fit. */
	if (n > 0 && (size_t)n < sizeof(small))
		out_raw(o, small, (size_t)n);
}

static void out_sep(struct out *o)
{
	if (o->comma)
		out_raw(o, ",", 1);
}

static void out_open(struct out *o, char c)
{
	out_sep(o);
	out_raw(o, &c, 1);
	o->comma = 0;
}

static void out_close(struct out *o, char c)
{
	out_raw(o, &c, 1);
	o->comma = 1;
}

static void out_put(void *ctx, const char *s, size_t n)
{
	out_raw(ctx, s, n);
}

/* A JSON string of s[0..strnlen(s, max)): the fixed-size text fields of the
 * view need not end in a NUL (common/json.h escapes). */
static void out_string(struct out *o, const char *s, size_t max)
{
	out_sep(o);
	json_string_put(s, strnlen(s, max), out_put, o);
	o->comma = 1;
}

static void out_key(struct out *o, const char *key)
{
	out_sep(o);
	out_raw(o, "\"", 1);
	out_raw(o, key, strlen(key));
	out_raw(o, "\":", 2);
	o->comma = 0;
}

static void out_u64(struct out *o, const char *key, uint64_t v)
{
	out_key(o, key);
	out_fmt(o, "%" PRIu64, v);
	o->comma = 1;
}

static void out_i64(struct out *o, const char *key, int64_t v)
{
	out_key(o, key);
	out_fmt(o, "%" PRId64, v);
	o->comma = 1;
}

static void out_null(struct out *o, const char *key)
{
	out_key(o, key);
	out_raw(o, "null", 4);
	o->comma = 1;
}

/* A count that the view writes as 0 (or UINT32_MAX) for "not known": null then. */
static void out_u64_or_null(struct out *o, const char *key, uint64_t v, int known)
{
	if (known)
		out_u64(o, key, v);
	else
		out_null(o, key);
}

static void out_bool(struct out *o, const char *key, int v)
{
	out_key(o, key);
	out_raw(o, v ? "true" : "false", v ? 4 : 5);
	o->comma = 1;
}

static void out_text(struct out *o, const char *key, const char *s, size_t max)
{
	out_key(o, key);
	out_string(o, s, max);
}

/* The names below are the report's (cli/report_json.c) where it has them.
 * The collector cannot call rules/ (the layers go one way), so the
 * severities are named here as rules/findings.c names them. */
static const char *severity_name(int severity)
{
	static const char *const names[] = {"info", "warning", "error"};

	return severity >= 0 && severity < 3 ? names[severity] : "unknown";
}

static void render_step(struct out *o, const struct live_step *s)
{
	out_open(o, '{');
	out_u64(o, "ordinal", s->ordinal);
	out_bool(o, "excluded", s->excluded != 0);
	out_u64(o, "start_ns", s->start_ns);
	out_u64(o, "step_ns", s->step_ns);
	out_u64(o, "allgathers", s->allgathers);
	out_u64_or_null(o, "microbatches", s->microbatches, s->microbatches != 0);
	out_u64(o, "allgather_ns", s->allgather_ns);
	out_u64(o, "exposed_allgather_ns", s->exposed_allgather_ns);
	out_u64(o, "compute_wait_ns", s->compute_wait_ns);
	out_u64(o, "compute_ns", s->compute_ns);
	out_u64(o, "exposed_comm_ns", s->exposed_comm_ns);
	out_close(o, '}');
}

static void render_totals(struct out *o, const struct live_totals *t)
{
	out_key(o, "totals");
	out_open(o, '{');
	out_u64(o, "steps", t->steps);
	out_u64(o, "steps_excluded", t->steps_excluded);
	out_u64(o, "step_ns_sum", t->step_ns_sum);
	out_u64_or_null(o, "step_ns_min", t->step_ns_min, t->steps > 0);
	out_u64_or_null(o, "step_ns_max", t->step_ns_max, t->steps > 0);
	out_u64(o, "allgathers_sum", t->allgathers_sum);
	out_u64(o, "exposed_allgather_ns_sum", t->exposed_allgather_ns_sum);
	out_u64(o, "compute_wait_ns_sum", t->compute_wait_ns_sum);
	out_u64(o, "compute_ns_sum", t->compute_ns_sum);
	out_close(o, '}');
}

static void render_comm(struct out *o, const struct live_comm *c)
{
	char hash[24];

	/* Hex text: a 64-bit identifier is not a quantity, and JavaScript's
	 * numbers would round it. */
	snprintf(hash, sizeof(hash), "%016" PRIx64, c->id_hash);
	out_open(o, '{');
	out_text(o, "id_hash", hash, sizeof(hash));
	out_u64(o, "nranks", c->nranks);
	out_i64(o, "rank", c->rank);
	out_text(o, "role", analysis_comm_role_name(c->role), 32);
	out_u64(o, "collectives", c->collectives);
	out_u64(o, "last_seq", c->last_seq);
	out_u64(o, "entered", c->entered);
	out_u64(o, "left", c->left);
	out_close(o, '}');
}

static void render_event(struct out *o, const struct live_event *e)
{
	out_open(o, '{');
	out_u64(o, "start_ns", e->start_ns);
	out_u64(o, "end_ns", e->end_ns);
	out_text(o, "op", record_op_name(e->op), 32);
	if (e->phase == ANALYSIS_PHASE_FORWARD || e->phase == ANALYSIS_PHASE_BACKWARD)
		out_text(o, "phase", analysis_phase_name(e->phase), 32);
	else
		out_null(o, "phase");
	out_u64(o, "calls", e->calls);
	out_u64_or_null(o, "unit", e->unit, e->unit != UINT32_MAX);
	out_u64(o, "bytes", e->bytes);
	out_u64(o, "exposed_ns", e->exposed_ns);
	out_close(o, '}');
}

static size_t at_most(size_t n, size_t max)
{
	return n < max ? n : max;
}

static void render_rank(struct out *o, const struct live_rank *r)
{
	size_t n;

	out_open(o, '{');
	if (r->rank >= 0)
		out_i64(o, "rank", r->rank);
	else
		out_null(o, "rank");
	out_u64(o, "source", r->source);
	out_u64(o, "pid", r->pid);
	out_text(o, "host", r->host, sizeof(r->host));
	out_text(o, "command", r->command, sizeof(r->command));
	out_bool(o, "ended", r->ended != 0);
	out_u64(o, "records", r->records);
	out_u64(o, "dropped", r->dropped);
	/* observed by fsdpscope attach: what it cannot measure is n/a, and its rank may be inferred */
	out_bool(o, "attached", r->attached != 0);
	out_text(o, "rank_from", source_rank_from_name((enum source_rank_from)r->rank_from), 40);
	out_u64(o, "collectives_missing", r->collectives_missing);
	out_u64(o, "collectives", r->collectives);
	out_u64(o, "last_ns", r->last_ns);
	out_i64(o, "lateness_ns", r->lateness_ns);
	out_key(o, "last_step");
	if (r->last.ordinal == 0 && r->last.step_ns == 0) {
		out_raw(o, "null", 4);
		o->comma = 1;
	} else {
		render_step(o, &r->last);
	}
	render_totals(o, &r->totals);
	out_key(o, "window");
	out_open(o, '[');
	n = at_most(r->nwindow, LIVE_WINDOW);
	for (size_t i = 0; i < n; i++)
		render_step(o, &r->window[i]);
	out_close(o, ']');
	out_key(o, "comms");
	out_open(o, '[');
	n = at_most(r->ncomms, LIVE_COMMS_MAX);
	for (size_t i = 0; i < n; i++)
		render_comm(o, &r->comms[i]);
	out_close(o, ']');
	out_key(o, "strip");
	out_open(o, '[');
	n = at_most(r->nstrip, LIVE_STRIP_MAX);
	for (size_t i = 0; i < n; i++)
		render_event(o, &r->strip[i]);
	out_close(o, ']');
	out_close(o, '}');
}

/* enum analysis_wait_evidence's names, as the report writes them
 * (rules/flight_text.c, which the collector cannot link). */
static const char *evidence_name(int evidence)
{
	static const char *const names[] = {"none", "host", "gpu", "sync"};

	return evidence >= 0 && evidence < 4 ? names[evidence] : "none";
}

static void out_hex(struct out *o, const char *key, uint64_t v)
{
	char hex[24];

	snprintf(hex, sizeof(hex), "%016" PRIx64, v);
	out_text(o, key, hex, sizeof(hex));
}

static void render_flight_rank(struct out *o, const struct analysis_flight_rank *r, int waiting)
{
	out_open(o, '{');
	out_i64(o, "rank", r->rank);
	out_u64(o, "source", r->source);
	out_u64(o, "pid", r->pid);
	out_u64(o, "since_ns", r->since_ns);
	out_u64_or_null(o, "last_seq", r->last_seq, r->last_seq != 0);
	if (r->last_seq)
		out_text(o, "last_op", record_op_name(r->last_op), 32);
	else
		out_null(o, "last_op");
	if (waiting)
		out_text(o, "evidence", evidence_name(r->evidence), 16);
	else
		out_null(o, "evidence");
	out_close(o, '}');
}

static void render_signature(struct out *o, const char *key, const struct analysis_signature *s, const int32_t *ranks,
			     uint32_t n)
{
	out_key(o, key);
	out_open(o, '{');
	out_text(o, "op", record_op_name(s->op), 32);
	out_u64(o, "count", s->count);
	if (s->dtype == FSS_DTYPE_UNKNOWN)
		out_null(o, "dtype");
	else
		out_text(o, "dtype", record_dtype_name(s->dtype), 32);
	if (s->root >= 0)
		out_i64(o, "root", s->root);
	else
		out_null(o, "root");
	if (s->redop == FSS_REDOP_NONE)
		out_null(o, "redop");
	else
		out_text(o, "redop", record_redop_name(s->redop), 32);
	out_u64(o, "ranks_total", n);
	out_key(o, "ranks");
	out_open(o, '[');
	for (uint32_t i = 0; i < at_most(n, ANALYSIS_FLIGHT_RANKS_MAX); i++) {
		out_sep(o);
		out_fmt(o, "%" PRId32, ranks[i]);
		o->comma = 1;
	}
	out_close(o, ']');
	out_close(o, '}');
}

/* The latest diagnosis' calls in flight (docs/live.md, "flight"): null
 * before the first diagnosis. */
static void render_flight(struct out *o, const struct live_job *j)
{
	const struct analysis_flight *f = &j->flight;

	out_key(o, "flight");
	if (!j->diagnosed) {
		out_raw(o, "null", 4);
		o->comma = 1;
		return;
	}
	out_open(o, '{');
	out_bool(o, "hang", f->nhangs > 0);
	out_bool(o, "shows_waits", f->sources_enter > 0 || f->sources_cupti > 0);
	out_u64(o, "timeout_ns", f->timeout_ns);
	out_u64_or_null(o, "now_realtime_ns", f->now_realtime_ns, f->now_realtime_ns != 0);
	out_u64(o, "sources_enter", f->sources_enter);
	out_u64(o, "sources_cupti", f->sources_cupti);
	out_u64(o, "in_flight", f->in_flight);
	out_u64(o, "hangs_total", f->hangs_total);
	out_key(o, "hangs");
	out_open(o, '[');
	for (uint32_t i = 0; i < at_most(f->nhangs, ANALYSIS_HANGS_MAX); i++) {
		const struct analysis_hang *h = &f->hangs[i];

		out_open(o, '{');
		out_hex(o, "comm", h->comm_id);
		out_i64(o, "nranks", h->nranks);
		out_u64(o, "comm_seq", h->comm_seq);
		out_text(o, "op", record_op_name(h->op), 32);
		out_u64(o, "count", h->count);
		if (h->dtype == FSS_DTYPE_UNKNOWN)
			out_null(o, "dtype");
		else
			out_text(o, "dtype", record_dtype_name(h->dtype), 32);
		out_u64(o, "waited_ns", h->waited_ns);
		out_u64(o, "waiting_total", h->nwaiting);
		out_key(o, "waiting");
		out_open(o, '[');
		for (uint32_t k = 0; k < at_most(h->nwaiting, ANALYSIS_FLIGHT_RANKS_MAX); k++)
			render_flight_rank(o, &h->waiting[k], 1);
		out_close(o, ']');
		out_u64(o, "missing_total", h->nmissing);
		out_key(o, "missing");
		out_open(o, '[');
		for (uint32_t k = 0; k < at_most(h->nmissing, ANALYSIS_FLIGHT_RANKS_MAX); k++)
			render_flight_rank(o, &h->missing[k], 0);
		out_close(o, ']');
		out_close(o, '}');
	}
	out_close(o, ']');
	out_u64(o, "mismatches_total", f->mismatches_total);
	out_u64(o, "mismatched_collectives", f->mismatched_collectives);
	out_key(o, "mismatches");
	out_open(o, '[');
	for (uint32_t i = 0; i < at_most(f->nmismatches, ANALYSIS_MISMATCHES_MAX); i++) {
		const struct analysis_mismatch *m = &f->mismatches[i];

		out_open(o, '{');
		out_hex(o, "comm", m->comm_id);
		out_i64(o, "nranks", m->nranks);
		out_u64(o, "comm_seq", m->comm_seq);
		render_signature(o, "a", &m->a, m->a_ranks, m->na);
		render_signature(o, "b", &m->b, m->b_ranks, m->nb);
		out_u64(o, "other_ranks", m->others);
		out_close(o, '}');
	}
	out_close(o, ']');
	out_close(o, '}');
}

static void render_job(struct out *o, const struct live_job *j)
{
	int d = j->diagnosed != 0;
	size_t n;

	out_key(o, "job");
	out_open(o, '{');
	out_u64(o, "records_total", j->records_total);
	out_u64(o, "records_dropped_total", j->records_dropped_total);
	out_u64(o, "diagnoses", j->diagnoses);
	out_bool(o, "diagnosed", d);
	/* Before the first diagnosis the figures below are not zeros but unknown. */
	if (d) {
		out_text(o, "verdict", analysis_verdict_name(j->verdict), 32);
		out_text(o, "undecided_reason", analysis_undecided_name(j->undecided_reason), 32);
		out_text(o, "reshard", analysis_reshard_name(j->reshard), 32);
	} else {
		out_null(o, "verdict");
		out_null(o, "undecided_reason");
		out_null(o, "reshard");
	}
	out_u64_or_null(o, "repeating_units", j->repeating_units, d);
	out_u64_or_null(o, "gathers_per_unit", j->gathers_per_unit, d);
	out_u64_or_null(o, "allgathers_per_step", j->allgathers_per_step, d);
	out_u64_or_null(o, "microbatches", j->microbatches, d && j->microbatches != 0);
	out_u64_or_null(o, "exposed_allgather_ns_per_step", j->exposed_allgather_ns_per_step, d);
	out_u64_or_null(o, "compute_wait_ns_per_step", j->compute_wait_ns_per_step, d);
	out_u64(o, "sources_attached", j->sources_attached);
	out_text(o, "exposure_source", analysis_exposure_source_name((enum analysis_exposure_source)j->exposure_source),
		 16);
	out_key(o, "findings");
	out_open(o, '[');
	n = at_most(j->nfindings, LIVE_FINDINGS_MAX);
	for (size_t i = 0; i < n; i++) {
		const struct live_finding *f = &j->findings[i];

		out_open(o, '{');
		out_text(o, "rule", f->rule, sizeof(f->rule));
		out_text(o, "severity", severity_name(f->severity), 32);
		out_text(o, "message", f->message, sizeof(f->message));
		if (f->fix[0])
			out_text(o, "fix", f->fix, sizeof(f->fix));
		else
			out_null(o, "fix");
		out_text(o, "evidence", f->evidence, sizeof(f->evidence));
		out_close(o, '}');
	}
	out_close(o, ']');
	out_key(o, "gathers");
	out_open(o, '[');
	n = at_most(j->ngathers, LIVE_GATHERS_MAX);
	for (size_t i = 0; i < n; i++) {
		const struct live_gather *g = &j->gathers[i];

		out_open(o, '{');
		out_u64_or_null(o, "unit", g->unit, g->unit != UINT32_MAX);
		out_u64(o, "bytes", g->bytes);
		out_u64(o, "exposed_ns", g->exposed_ns);
		out_text(o, "name", g->name, sizeof(g->name));
		out_close(o, '}');
	}
	out_close(o, ']');
	render_flight(o, j);
	out_close(o, '}');
}

int viewer_render(const struct live_view *v, char **json, size_t *len)
{
	struct out o = {0};

	/* "schema" first, always: a client checks the version from the line's
	 * first bytes (viewer_client_next). */
	out_open(&o, '{');
	out_text(&o, "schema", VIEWER_PROTOCOL, sizeof(VIEWER_PROTOCOL));
	out_u64(&o, "generation", v->generation);
	out_u64(&o, "at_ns", v->at_ns);
	out_u64(&o, "at_realtime_ns", v->at_realtime_ns);
	render_job(&o, &v->job);
	out_key(&o, "ranks");
	out_open(&o, '[');
	for (size_t i = 0; v->ranks && i < v->nranks; i++)
		render_rank(&o, &v->ranks[i]);
	out_close(&o, ']');
	out_close(&o, '}');
	out_raw(&o, "\n", 1);
	if (o.oom) {
		free(o.buf);
		return -ENOMEM;
	}
	*json = o.buf;
	*len = o.len;
	return 0;
}
