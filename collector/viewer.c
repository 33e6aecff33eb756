/*
 * viewer.c - the viewer endpoint: the live view as a stream of JSON
 * snapshots (docs/live.md, docs/live-schema.json).
 *
 * The server is one thread around one epoll set: the listening socket, an
 * eventfd that stop() writes, and the viewers. The session never talks to
 * it: it puts views on the board, and the thread learns of them from the
 * board (live_board_wait). A thread cannot wait on a condition variable
 * and on an epoll set at once, so it waits on whichever matters:
 *
 *   - no viewer: on the epoll set alone (a connection or stop wakes it);
 *   - every viewer up to date: on the board, VIEWER_TICK_MS at most, then
 *     a look at the epoll set without waiting;
 *   - a viewer with a snapshot half written: on the epoll set (its socket
 *     taking more wakes it), VIEWER_TICK_MS at most, then a look at the
 *     board without waiting.
 *
 * A rendered snapshot is shared by every viewer it goes to and rendered
 * only when a viewer is free to take it, so a viewer that does not read
 * costs one snapshot of memory and no rendering: it holds the one it is
 * being written, and the newest generation is noted as its pending one.
 */
#include "collector/viewer.h"
#include "collector/source.h"

#include "common/json.h"
#include "common/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The longest the server thread waits on the board or on its sockets
 * before looking at the other: bounds how late a new viewer gets its first
 * snapshot while every other viewer is up to date, and how late stop() is
 * noticed then. */
#define VIEWER_TICK_MS 50
/* The longest snapshot line a client takes: a rank with a full strip,
 * window and communicators renders to about 94 kB, so this is some 2,800
 * such ranks (docs/live.md, "Size"). */
#define VIEWER_LINE_MAX (256u << 20)

/* ---- rendering ------------------------------------------------------------ */

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

/* ---- the server ------------------------------------------------------------ */

/* One rendered generation, shared by the viewers it is being written to. */
struct snap {
	uint64_t generation;
	char *json;
	size_t len;
	unsigned refs; /* the server's latest, and each viewer writing it (the server thread only) */
};

struct viewer {
	int fd;
	struct snap *cur; /* being written, NULL when the viewer is up to date */
	size_t off;	  /* bytes of cur written */
	uint64_t last;	  /* generation of the latest snapshot started, 0 before the first */
	uint64_t pending; /* a newer generation to send once cur is whole, 0 none */
	int polling_out;  /* EPOLLOUT is in its epoll interest */
	struct viewer *next;
};

struct viewer_server {
	live_board_t *board;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int listen_fd, wake_fd, epoll_fd;
	int listen_paused; /* out of file descriptors: the listener is out of the epoll set */
	pthread_t thread;
	int thread_started;
	struct viewer *viewers;
	struct snap *latest; /* the newest rendered generation, NULL before the first */
	uint64_t seen;	     /* the board's generation as the thread last read it */
	int board_closed;
	int stopping;
	pthread_mutex_t mu; /* guards stats, read by viewer_server_stats on any thread */
	struct viewer_stats stats;
};

static void snap_unref(struct snap *s)
{
	if (s && --s->refs == 0) {
		free(s->json);
		free(s);
	}
}

static void stats_add(viewer_server_t *s, uint64_t *field, uint64_t n)
{
	pthread_mutex_lock(&s->mu);
	*field += n;
	pthread_mutex_unlock(&s->mu);
}

/* Take connections again after running out of descriptors (server_accept). */
static void server_resume_listen(viewer_server_t *s)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->listen_fd};

	if (s->listen_paused && epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &ev) == 0)
		s->listen_paused = 0;
}

static void viewer_close(viewer_server_t *s, struct viewer *v)
{
	struct viewer **pp = &s->viewers;

	while (*pp && *pp != v)
		pp = &(*pp)->next;
	if (*pp)
		*pp = v->next;
	epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, v->fd, NULL);
	close(v->fd);
	snap_unref(v->cur);
	free(v);
	pthread_mutex_lock(&s->mu);
	s->stats.open--;
	pthread_mutex_unlock(&s->mu);
	server_resume_listen(s);
}

static void viewer_poll_out(viewer_server_t *s, struct viewer *v, int on)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0), .data.ptr = v};

	if (v->polling_out == on)
		return;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, v->fd, &ev) == 0)
		v->polling_out = on;
}

/*
 * Generation g is the newest the viewer could have: it becomes its pending
 * one. Counted as skipped: the pending one it replaces, and every
 * generation between the viewer's latest and g that it never had, so that
 * per viewer sent + skipped covers every generation from its first on.
 */
static void viewer_notice(viewer_server_t *s, struct viewer *v, uint64_t g)
{
	uint64_t base = v->pending ? v->pending : v->last;

	if (g <= base)
		return;
	if (base)
		stats_add(s, &s->stats.skipped, g - base - (v->pending ? 0 : 1));
	v->pending = g;
}

/* The latest view on the board rendered as s->latest. 0, or -ENOMEM with
 * the older rendering kept. */
static int server_render_latest(viewer_server_t *s)
{
	const struct live_view *view;
	struct snap *n;
	int err;

	if (s->latest && s->latest->generation >= s->seen)
		return 0;
	view = live_board_acquire(s->board);
	if (!view)
		return 0;
	n = calloc(1, sizeof(*n));
	if (!n) {
		live_board_release(s->board, view);
		return -ENOMEM;
	}
	n->generation = view->generation;
	err = viewer_render(view, &n->json, &n->len);
	live_board_release(s->board, view);
	if (err) {
		free(n);
		return err;
	}
	n->refs = 1;
	snap_unref(s->latest);
	s->latest = n;
	if (n->generation > s->seen)
		s->seen = n->generation;
	return 0;
}

/* Write what the viewer's socket takes. 0, or -1 when the viewer was closed. */
static int viewer_flush(viewer_server_t *s, struct viewer *v)
{
	for (;;) {
		if (!v->cur) {
			if (!v->pending)
				break;
			if (server_render_latest(s) < 0 || !s->latest)
				break; /* tried again on the next round */
			viewer_notice(s, v, s->latest->generation);
			v->cur = s->latest;
			v->cur->refs++;
			v->off = 0;
			v->last = v->cur->generation;
			v->pending = 0;
		}
		while (v->off < v->cur->len) {
			ssize_t n =
			    send(v->fd, v->cur->json + v->off, v->cur->len - v->off, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (n > 0) {
				v->off += (size_t)n;
			} else if (n < 0 && errno == EINTR) {
				continue;
			} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				viewer_poll_out(s, v, 1);
				return 0;
			} else {
				viewer_close(s, v);
				return -1;
			}
		}
		snap_unref(v->cur);
		v->cur = NULL;
		stats_add(s, &s->stats.sent, 1);
	}
	viewer_poll_out(s, v, 0);
	return 0;
}

/* The peer runs as this process's effective user (SO_PEERCRED). */
static int peer_is_user(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred))
		return 0;
	return cred.uid == geteuid();
}

static void server_accept(viewer_server_t *s)
{
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
		struct viewer *v;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* The pending connection stays in the backlog and the
				 * listener would wake the loop at once, again and again:
				 * leave it out until a viewer goes. */
				if (epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, s->listen_fd, NULL) == 0)
					s->listen_paused = 1;
			}
			return;
		}
		if (!peer_is_user(fd)) {
			close(fd);
			stats_add(s, &s->stats.refused, 1);
			continue;
		}
		v = calloc(1, sizeof(*v));
		ev.data.ptr = v;
		if (!v || epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			free(v);
			close(fd);
			continue;
		}
		v->fd = fd;
		v->next = s->viewers;
		s->viewers = v;
		pthread_mutex_lock(&s->mu);
		s->stats.accepted++;
		s->stats.open++;
		pthread_mutex_unlock(&s->mu);
		/* No pending generation yet: the loop's next look at the board
		 * gives it the latest as its first, with nothing counted skipped. */
	}
}

/* A viewer writes nothing: bytes from it, or its end, close it. */
static void viewer_readable(viewer_server_t *s, struct viewer *v)
{
	char byte;
	ssize_t n = recv(v->fd, &byte, 1, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	viewer_close(s, v);
}

static int server_any_behind(const viewer_server_t *s)
{
	for (const struct viewer *v = s->viewers; v; v = v->next)
		if (v->cur)
			return 1;
	return 0;
}

static void *server_main(void *arg)
{
	viewer_server_t *s = arg;
	struct epoll_event ev[32];

	while (!s->stopping) {
		int timeout, n;

		if (!s->board_closed && live_board_closed(s->board))
			s->board_closed = 1; /* no generation comes any more */
		server_resume_listen(s);
		if (s->listen_paused) {
			timeout = VIEWER_TICK_MS; /* to try the listener again */
		} else if (!s->viewers || s->board_closed) {
			timeout = -1;
		} else if (server_any_behind(s)) {
			timeout = VIEWER_TICK_MS;
		} else {
			s->seen = live_board_wait(s->board, s->seen, VIEWER_TICK_MS);
			timeout = 0;
		}
		n = epoll_wait(s->epoll_fd, ev, (int)(sizeof(ev) / sizeof(ev[0])), timeout);
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;

			if (p == &s->wake_fd) {
				s->stopping = 1;
			} else if (p == &s->listen_fd) {
				server_accept(s);
			} else if (ev[i].events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP | EPOLLIN)) {
				viewer_readable(s, p);
			} else if (ev[i].events & EPOLLOUT) {
				viewer_flush(s, p);
			}
		}
		if (s->stopping)
			break;
		/* A look at the board without waiting (it may have moved while the
		 * thread waited on its sockets), then every viewer gets its due. */
		s->seen = live_board_wait(s->board, s->seen, 0);
		for (struct viewer *v = s->viewers, *next; v; v = next) {
			next = v->next;
			viewer_notice(s, v, s->seen);
			viewer_flush(s, v);
		}
	}
	return NULL;
}

static int folder_check(const char *path, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!slash) {
		snprintf(dir, sizeof(dir), ".");
	} else if (slash == path) {
		snprintf(dir, sizeof(dir), "/");
	} else {
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
	}
	if (stat(dir, &st) < 0) {
		int e = errno;

		snprintf(err, errlen, "viewer socket folder %s: %s", dir, strerror(e));
		return -e;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "viewer socket folder %s is not a folder", dir);
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid()) {
		snprintf(
		    err, errlen,
		    "viewer socket folder %s belongs to user %u, not to you (%u): use a folder of your own, mode 0700",
		    dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (st.st_mode & 0077) {
		snprintf(err, errlen,
			 "viewer socket folder %s has mode %04o: other users could reach the socket; make it 0700 "
			 "(chmod 700 %s)",
			 dir, (unsigned)(st.st_mode & 07777), dir);
		return -EPERM;
	}
	return 0;
}

/* -EADDRINUSE when a live server answers at addr (wire_listen would take
 * the path from it: it replaces a socket file, stale or not). */
static int socket_in_use(const struct wire_address *addr)
{
	const struct sockaddr_un *sun = (const struct sockaddr_un *)&addr->addr;
	struct stat st;
	int fd;

	if (lstat(sun->sun_path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return 0;
	if (wire_connect(addr, 1000, &fd) < 0)
		return 0;
	close(fd);
	return -EADDRINUSE;
}

int viewer_server_start(viewer_server_t **out, const char *path, live_board_t *board, char *err, size_t errlen)
{
	struct wire_address addr;
	viewer_server_t *s;
	struct epoll_event ev = {.events = EPOLLIN};
	int rc;

	*out = NULL;
	if (errlen)
		err[0] = '\0';
	if (strncmp(path, "unix:", 5) == 0)
		path += 5;
	if (path[0] == '@' || strncmp(path, "tcp:", 4) == 0) {
		snprintf(err, errlen, "viewer socket %s: only a unix socket in a folder of your own (a path) is served",
			 path);
		return -EINVAL;
	}
	rc = wire_address_parse(path, &addr);
	if (rc < 0) {
		snprintf(err, errlen, "viewer socket %s: %s", path,
			 rc == -ENAMETOOLONG ? "the path is too long for a unix socket" : "not a socket path");
		return rc;
	}
	rc = folder_check(path, err, errlen);
	if (rc < 0)
		return rc;
	rc = socket_in_use(&addr);
	if (rc < 0) {
		snprintf(err, errlen, "viewer socket %s is served by another session: give another path", path);
		return rc;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "viewer socket %s: out of memory", path);
		return -ENOMEM;
	}
	s->board = board;
	s->listen_fd = s->wake_fd = s->epoll_fd = -1;
	pthread_mutex_init(&s->mu, NULL);
	snprintf(s->path, sizeof(s->path), "%s", path);
	rc = wire_listen(&addr, &s->listen_fd);
	if (rc < 0) {
		snprintf(err, errlen, "viewer socket %s: %s", path, strerror(-rc));
		goto fail;
	}
	/* bind() made the file through the umask; the folder keeps others out
	 * meanwhile, and from here on the socket is the user's alone. */
	if (chmod(s->path, 0600) < 0 || fcntl(s->listen_fd, F_SETFL, O_NONBLOCK) < 0) {
		rc = -errno;
		snprintf(err, errlen, "viewer socket %s: %s", path, strerror(-rc));
		goto fail;
	}
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (s->wake_fd < 0 || s->epoll_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "viewer socket %s: %s", path, strerror(-rc));
		goto fail;
	}
	ev.data.ptr = &s->listen_fd;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &ev) < 0)
		goto fail_errno;
	ev.data.ptr = &s->wake_fd;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->wake_fd, &ev) < 0)
		goto fail_errno;
	rc = -pthread_create(&s->thread, NULL, server_main, s);
	if (rc < 0) {
		snprintf(err, errlen, "viewer socket %s: no thread: %s", path, strerror(-rc));
		goto fail;
	}
	s->thread_started = 1;
	*out = s;
	return 0;
fail_errno:
	rc = -errno;
	snprintf(err, errlen, "viewer socket %s: %s", path, strerror(-rc));
fail:
	viewer_server_stop(s);
	return rc;
}

void viewer_server_stats(viewer_server_t *s, struct viewer_stats *out)
{
	pthread_mutex_lock(&s->mu);
	*out = s->stats;
	pthread_mutex_unlock(&s->mu);
}

void viewer_server_stop(viewer_server_t *s)
{
	if (!s)
		return;
	if (s->thread_started) {
		uint64_t one = 1;

		ssize_t n;

		/* The thread notices within VIEWER_TICK_MS when it waits on the
		 * board, at once when it waits on its sockets. Adding 1 to an
		 * eventfd fails only at a counter of 2^64 - 2: never here. */
		n = write(s->wake_fd, &one, sizeof(one));
		(void)n;
		pthread_join(s->thread, NULL);
	}
	while (s->viewers)
		viewer_close(s, s->viewers);
	snap_unref(s->latest);
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		unlink(s->path);
	}
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	if (s->epoll_fd >= 0)
		close(s->epoll_fd);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* ---- the client ------------------------------------------------------------ */

struct viewer_client {
	int fd;
	char *buf;
	size_t len, cap;
	size_t consumed; /* bytes of buf handed out by the previous next() */
	int eof;
};

int viewer_client_connect(viewer_client_t **out, const char *address)
{
	struct wire_address addr;
	viewer_client_t *c;
	int rc, fd;

	*out = NULL;
	rc = wire_address_parse(address, &addr);
	if (rc < 0)
		return rc;
	if (addr.family != AF_UNIX)
		return -EINVAL;
	rc = wire_connect(&addr, 10000, &fd);
	if (rc < 0)
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->fd = fd;
	*out = c;
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The line at buf[0..n) is a snapshot of this protocol: it starts with the
 * schema field, as the server writes it. */
static int client_line_ok(const char *line, size_t n)
{
	static const char prefix[] = "{\"schema\":\"" VIEWER_PROTOCOL "\"";
	size_t p = sizeof(prefix) - 1;

	return n > p && memcmp(line, prefix, p) == 0 && (line[p] == ',' || line[p] == '}') && line[n - 1] == '}';
}

int viewer_client_next(viewer_client_t *c, const char **json, size_t *len, int timeout_ms)
{
	int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;

	if (c->consumed) {
		memmove(c->buf, c->buf + c->consumed, c->len - c->consumed);
		c->len -= c->consumed;
		c->consumed = 0;
	}
	for (size_t scanned = 0;;) {
		char *nl = c->len > scanned ? memchr(c->buf + scanned, '\n', c->len - scanned) : NULL;
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		ssize_t n;
		int wait, r;

		if (nl) {
			size_t n_line = (size_t)(nl - c->buf);

			c->consumed = n_line + 1;
			if (!client_line_ok(c->buf, n_line))
				return -EPROTO;
			*nl = '\0';
			*json = c->buf;
			*len = n_line;
			return 1;
		}
		scanned = c->len;
		if (c->eof)
			return -EPIPE; /* a half line at the end is no snapshot */
		if (c->len >= VIEWER_LINE_MAX)
			return -EPROTO;
		if (c->cap - c->len < 65536) {
			size_t cap = c->cap ? c->cap * 2 : 1u << 20;
			char *b = realloc(c->buf, cap);

			if (!b)
				return -ENOMEM;
			c->buf = b;
			c->cap = cap;
		}
		wait = -1;
		if (timeout_ms >= 0) {
			int64_t left = deadline - now_ms();

			wait = left > 0 ? (int)left : 0;
		}
		r = poll(&pfd, 1, wait);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return 0;
		n = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
		if (n > 0)
			c->len += (size_t)n;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK))
			c->eof = 1;
	}
}

void viewer_client_close(viewer_client_t *c)
{
	if (!c)
		return;
	close(c->fd);
	free(c->buf);
	free(c);
}
