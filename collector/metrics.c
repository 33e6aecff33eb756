/*
 * metrics.c - Prometheus /metrics of a live session: the text exposition
 * (version 0.0.4) of a live view, and a libmicrohttpd server that renders
 * the board's latest view for each scrape (docs/metrics.md lists every
 * metric).
 *
 * Families are written one after the other, each with its # HELP and
 * # TYPE lines before its first sample and all its samples together, as
 * the format requires; a family with no sample (a figure not known yet) is
 * left out whole, which is how Prometheus says "unknown".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "collector/live_fields.h"
#include "collector/metrics.h"
#include "common/text_buffer.h"
#include "common/trace_format.h"

#ifndef FSS_VERSION
#define FSS_VERSION "unknown"
#endif

/* ---- the text being built ------------------------------------------------ */

static void out_str(struct text_buffer *o, const char *s)
{
	text_buffer_append(o, s, strlen(s));
}

/*
 * A label value as the format wants it: backslash, double quote and
 * newline escaped. Bytes that are not printable ASCII become '_': the
 * values come from fixed-size fields (rule ids) that may be cut in the
 * middle of a UTF-8 sequence, and the exposition must be valid UTF-8.
 */
static void out_label_value(struct text_buffer *o, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\')
			text_buffer_append(o, "\\\\", 2);
		else if (c == '"')
			text_buffer_append(o, "\\\"", 2);
		else if (c == '\n')
			text_buffer_append(o, "\\n", 2);
		else if (c < 0x20 || c >= 0x7f)
			text_buffer_append(o, "_", 1);
		else
			text_buffer_append(o, (const char *)&c, 1);
	}
}

/* Nanoseconds as seconds, exactly: "1.5", "0.000001234", "3". */
static void out_ns(struct text_buffer *o, uint64_t ns, int negative)
{
	char frac[16];
	uint64_t f = ns % 1000000000u;
	size_t n;

	if (negative && ns)
		text_buffer_append(o, "-", 1);
	if (f == 0) {
		text_buffer_printf(o, "%" PRIu64, ns / 1000000000u);
		return;
	}
	n = (size_t)snprintf(frac, sizeof frac, "%09" PRIu64, f);
	while (n > 0 && frac[n - 1] == '0')
		n--;
	frac[n] = '\0';
	text_buffer_printf(o, "%" PRIu64 ".%s", ns / 1000000000u, frac);
}

static void out_signed_ns(struct text_buffer *o, int64_t ns)
{
	if (ns < 0)
		out_ns(o, (uint64_t)0 - (uint64_t)ns, 1);
	else
		out_ns(o, (uint64_t)ns, 0);
}

/* ---- families -------------------------------------------------------------- */

enum family_id {
	F_BUILD_INFO,
	F_LIVE_GENERATION,
	F_LIVE_PUBLISHED,
	F_RECORDS,
	F_RECORDS_DROPPED_JOB,
	F_RANKS,
	F_DIAGNOSED,
	F_DIAGNOSES,
	F_VERDICT,
	F_UNDECIDED,
	F_REPEATING_UNITS,
	F_GATHERS_PER_UNIT,
	F_RESHARD,
	F_DIAG_ALLGATHERS,
	F_DIAG_MICROBATCHES,
	F_DIAG_EXPOSED,
	F_DIAG_COMPUTE_WAIT,
	F_FINDINGS,
	F_COLLECTIVE_HANG,
	F_RANK_INFO,
	F_COLLECTIVE_SEQ,
	F_COMM_COLLECTIVES,
	F_COMM_ROLE,
	F_MAX
};

/*
 * Where each family's name, type and help are: on the field of the live
 * view it describes (live_fields.h), or here for those that describe no
 * one field. The text is docs/metrics.md's table, one line each.
 */
struct family {
	const struct live_table *table;
	const char *field;
	struct live_metric own;
};

static const struct family families[F_MAX] = {
    [F_BUILD_INFO] = {NULL,
		      NULL,
		      {.name = "fsdpscope_build_info",
		       .type = "gauge",
		       .help = "Always 1; the labels say the fsdpscope version and the trace format it writes."}},
    [F_LIVE_GENERATION] = {&live_table_snapshot, "generation", {0}},
    [F_LIVE_PUBLISHED] = {&live_table_snapshot, "at_realtime_ns", {0}},
    [F_RECORDS] = {&live_table_job, "records_total", {0}},
    [F_RECORDS_DROPPED_JOB] = {&live_table_job, "records_dropped_total", {0}},
    [F_RANKS] = {&live_table_snapshot, "ranks", {0}},
    [F_DIAGNOSED] = {&live_table_job, "diagnosed", {0}},
    [F_DIAGNOSES] = {&live_table_job, "diagnoses", {0}},
    [F_VERDICT] = {&live_table_job, "verdict", {0}},
    [F_UNDECIDED] = {&live_table_job, "undecided_reason", {0}},
    [F_REPEATING_UNITS] = {&live_table_job, "repeating_units", {0}},
    [F_GATHERS_PER_UNIT] = {&live_table_job, "gathers_per_unit", {0}},
    [F_RESHARD] = {&live_table_job, "reshard", {0}},
    [F_DIAG_ALLGATHERS] = {&live_table_job, "allgathers_per_step", {0}},
    [F_DIAG_MICROBATCHES] = {&live_table_job, "microbatches", {0}},
    [F_DIAG_EXPOSED] = {&live_table_job, "exposed_allgather_ns_per_step", {0}},
    [F_DIAG_COMPUTE_WAIT] = {&live_table_job, "compute_wait_ns_per_step", {0}},
    [F_FINDINGS] = {&live_table_job, "findings", {0}},
    [F_COLLECTIVE_HANG] = {&live_table_flight, "hang", {0}},
    [F_RANK_INFO] = {NULL,
		     NULL,
		     {.name = "fsdpscope_rank_info",
		      .type = "gauge",
		      .help = "Always 1; the process behind a rank label."}},
    [F_COLLECTIVE_SEQ] = {NULL,
			  NULL,
			  {.name = "fsdpscope_collective_seq",
			   .type = "gauge",
			   .help = "Highest collective number (from 1 per communicator, in issue order) the rank (its "
				   "rank in the communicator) has entered or left there."}},
    [F_COMM_COLLECTIVES] = {&live_table_comm, "collectives", {0}},
    [F_COMM_ROLE] = {&live_table_comm, "role", {0}},
};

/* Room for the per-rank families of the field tables (live_metric.order). */
#define RANK_FAMILIES_MAX 32

struct render {
	struct text_buffer o;
	const struct live_view *v;
	char (*rank_label)[24]; /* per ranks[] entry */
	unsigned char started[F_MAX];
	unsigned char rank_started[RANK_FAMILIES_MAX];
};

/* Start a sample of a family: its header first when it is the first one (*started). */
static void sample_begin_family(struct render *r, const char *name, const char *type, const char *help,
				unsigned char *started)
{
	if (!*started) {
		*started = 1;
		text_buffer_printf(&r->o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
	}
	out_str(&r->o, name);
}

static void sample_begin(struct render *r, enum family_id f)
{
	const struct live_metric *m =
	    families[f].table ? live_table_field(families[f].table, families[f].field)->metric : &families[f].own;

	sample_begin_family(r, m->name, m->type, m->help, &r->started[f]);
}

/* A sample with no labels and an integer value. */
static void sample_u64(struct render *r, enum family_id f, uint64_t value)
{
	sample_begin(r, f);
	text_buffer_printf(&r->o, " %" PRIu64 "\n", value);
}

/* A sample with one label and an integer value. */
static void sample_label_u64(struct render *r, enum family_id f, const char *label, const char *text, uint64_t value)
{
	sample_begin(r, f);
	text_buffer_printf(&r->o, "{%s=\"", label);
	out_label_value(&r->o, text, strlen(text));
	text_buffer_printf(&r->o, "\"} %" PRIu64 "\n", value);
}

/* ---- ranks ------------------------------------------------------------------ */

/*
 * The rank label of each ranks[] entry: the rank number while it is known
 * and no source with a lower number has it too; "source<N>" (the trace's
 * source number) otherwise. The lowest source keeps a rank's label, so a
 * label never moves from one process to another while sources are added;
 * a rank that becomes known changes its label from source<N> to the number
 * once, and no two entries ever share a label.
 */
static int rank_labels(struct render *r)
{
	const struct live_view *v = r->v;

	r->rank_label = calloc(v->nranks ? v->nranks : 1, sizeof *r->rank_label);
	if (!r->rank_label)
		return -ENOMEM;
	for (size_t i = 0; i < v->nranks; i++) {
		const struct live_rank *a = &v->ranks[i];
		int first = a->rank >= 0;

		for (size_t j = 0; first && j < v->nranks; j++) {
			const struct live_rank *b = &v->ranks[j];
			if (j != i && b->rank == a->rank &&
			    (b->source < a->source || (b->source == a->source && j < i)))
				first = 0;
		}
		if (first)
			snprintf(r->rank_label[i], sizeof r->rank_label[i], "%" PRId32, a->rank);
		else
			snprintf(r->rank_label[i], sizeof r->rank_label[i], "source%" PRIu32, a->source);
	}
	return 0;
}

/* The step the per-step gauges describe: the last one, or the latest
 * analysed one of the window when the last was left out; NULL when none. */
static const struct live_step *rank_step(const struct live_rank *k)
{
	size_t n = k->nwindow < LIVE_WINDOW ? k->nwindow : LIVE_WINDOW;

	if (k->last.step_ns && !k->last.excluded)
		return &k->last;
	for (size_t i = n; i-- > 0;)
		if (k->window[i].step_ns && !k->window[i].excluded)
			return &k->window[i];
	return NULL;
}

/* The families of one sample per rank (live_fields.h), in the order they
 * are written: a field of the rank itself, of the step the per-step gauges
 * describe (rank_step), or of its totals. */
struct rank_family {
	const struct live_table *table;
	const struct live_field *field;
};

static size_t rank_families(struct rank_family *out)
{
	static const struct live_table *const tables[] = {&live_table_rank, &live_table_step, &live_table_totals};
	size_t n = 0;

	memset(out, 0, RANK_FAMILIES_MAX * sizeof(*out));
	for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
		for (size_t i = 0; i < tables[t]->nfields; i++) {
			const struct live_metric *m = tables[t]->fields[i].metric;

			if (m && m->order < RANK_FAMILIES_MAX) {
				out[m->order] = (struct rank_family){tables[t], &tables[t]->fields[i]};
				n = m->order + 1 > n ? m->order + 1 : n;
			}
		}
	return n;
}

/* The object of rank k that family f reads: NULL when it has none (no analysed step yet). */
static const void *family_object(const struct rank_family *f, const struct live_rank *k)
{
	if (f->table == &live_table_step)
		return rank_step(k);
	if (f->table == &live_table_totals)
		return &k->totals;
	return k;
}

/* The sample of rank k for family f: 0 when it has none (not known, not measured). */
static int rank_sample(struct render *r, const struct rank_family *f, const struct live_rank *k, const char *label)
{
	const struct live_metric *m = f->field->metric;
	const void *o = family_object(f, k);

	/* uprobes time host calls only: an attached rank's AllGather time,
	 * exposure and compute are not measured, so not written as 0 */
	if (!o || (k->attached && m->attach_unknown) || live_field_is_null(o, f->field, 1))
		return 0;
	sample_begin_family(r, m->name, m->type, m->help, &r->rank_started[m->order]);
	text_buffer_printf(&r->o, "{rank=\"%s\"} ", label);
	if (m->unit == LIVE_METRIC_COUNT)
		text_buffer_printf(&r->o, "%" PRIu64, live_field_uint(o, f->field));
	else if (f->field->kind == LIVE_FIELD_INT)
		out_signed_ns(&r->o, live_field_int(o, f->field));
	else
		out_ns(&r->o, live_field_uint(o, f->field), 0);
	text_buffer_append(&r->o, "\n", 1);
	return 1;
}

static void render_ranks(struct render *r)
{
	const struct live_view *v = r->v;
	struct rank_family families_of_ranks[RANK_FAMILIES_MAX];
	size_t n = rank_families(families_of_ranks);

	for (size_t i = 0; i < v->nranks; i++) {
		const struct live_rank *k = &v->ranks[i];
		sample_begin(r, F_RANK_INFO);
		text_buffer_printf(&r->o, "{rank=\"%s\",source=\"%" PRIu32 "\",pid=\"%" PRIu32 "\"} 1\n",
				   r->rank_label[i], k->source, k->pid);
	}
	for (size_t f = 0; f < n; f++)
		for (size_t i = 0; families_of_ranks[f].field && i < v->nranks; i++)
			rank_sample(r, &families_of_ranks[f], &v->ranks[i], r->rank_label[i]);
}

/* A communicator a rank lists twice (the same id) is written once: two
 * samples with the same labels would make the scrape fail. */
static int comm_repeated(const struct live_rank *k, size_t c)
{
	for (size_t j = 0; j < c; j++)
		if (k->comms[j].id_hash == k->comms[c].id_hash)
			return 1;
	return 0;
}

/* The (communicator, rank in it) of ranks[i].comms[c] was written for an
 * earlier entry already (two sources claiming one rank of a communicator:
 * a restarted process): its first writer keeps the labels. */
static int comm_rank_repeated(const struct live_view *v, size_t i, size_t c)
{
	const struct live_comm *m = &v->ranks[i].comms[c];

	for (size_t j = 0; j <= i; j++) {
		const struct live_rank *k = &v->ranks[j];
		size_t n = j == i ? c : (k->ncomms < LIVE_COMMS_MAX ? k->ncomms : LIVE_COMMS_MAX);

		for (size_t d = 0; d < n; d++)
			if (k->comms[d].id_hash == m->id_hash && k->comms[d].rank == m->rank)
				return 1;
	}
	return 0;
}

/* fsdpscope_collective_seq{comm,rank,state}: per communicator and rank in
 * it, the highest collective number entered and left. Labelled by the rank
 * in the communicator, not the process's: the same series on every node's
 * collector of a job, so that the fleet's Prometheus compares the ranks of
 * one communicator across nodes (docs/metrics.md). */
static void render_collective_seq(struct render *r)
{
	static const char *const states[] = {"entered", "left"};
	const struct live_view *v = r->v;

	for (size_t st = 0; st < 2; st++)
		for (size_t i = 0; i < v->nranks; i++) {
			const struct live_rank *k = &v->ranks[i];
			size_t n = k->ncomms < LIVE_COMMS_MAX ? k->ncomms : LIVE_COMMS_MAX;

			for (size_t c = 0; c < n; c++) {
				const struct live_comm *m = &k->comms[c];

				/* a communicator without its comm record has no id and no
				 * rank to be labelled with */
				if (!m->id_hash || m->rank < 0 || comm_rank_repeated(v, i, c))
					continue;
				sample_begin(r, F_COLLECTIVE_SEQ);
				text_buffer_printf(
				    &r->o, "{comm=\"%016" PRIx64 "\",rank=\"%" PRId32 "\",state=\"%s\"} %" PRIu64 "\n",
				    m->id_hash, m->rank, states[st], st == 0 ? m->entered : m->left);
			}
		}
}

static void render_comms(struct render *r)
{
	static const enum family_id comm_families[] = {F_COMM_COLLECTIVES, F_COMM_ROLE};
	const struct live_view *v = r->v;

	render_collective_seq(r);

	for (size_t f = 0; f < sizeof comm_families / sizeof comm_families[0]; f++) {
		for (size_t i = 0; i < v->nranks; i++) {
			const struct live_rank *k = &v->ranks[i];
			size_t n = k->ncomms < LIVE_COMMS_MAX ? k->ncomms : LIVE_COMMS_MAX;
			for (size_t c = 0; c < n; c++) {
				const struct live_comm *m = &k->comms[c];
				if (comm_repeated(k, c))
					continue;
				sample_begin(r, comm_families[f]);
				text_buffer_printf(&r->o, "{comm=\"%016" PRIx64 "\",rank=\"%s\"", m->id_hash,
						   r->rank_label[i]);
				if (comm_families[f] == F_COMM_COLLECTIVES)
					text_buffer_printf(&r->o, "} %" PRIu64 "\n", m->collectives);
				else
					text_buffer_printf(&r->o, ",role=\"%s\"} 1\n",
							   analysis_comm_role_name(m->role));
			}
		}
	}
}

/* ---- the job ---------------------------------------------------------------- */

/* enum rule_severity's names: rules/ sits above collector/, so its
 * rule_severity_name cannot be linked from here. */
static const char *severity_name(int s)
{
	return s == 0 ? "info" : s == 1 ? "warning" : s == 2 ? "error" : "unknown";
}

/* enum analysis_reshard's names, as docs/metrics.md lists them. */
static const char *const reshard_names[] = {"unknown", "true", "false", "group", "mixed"};

static void render_findings(struct render *r)
{
	const struct live_job *j = &r->v->job;
	size_t n = j->nfindings < LIVE_FINDINGS_MAX ? j->nfindings : LIVE_FINDINGS_MAX;

	for (size_t i = 0; i < n; i++) {
		const struct live_finding *a = &j->findings[i];
		uint64_t count = 0;
		int seen = 0;

		for (size_t k = 0; k < i && !seen; k++)
			seen = j->findings[k].severity == a->severity &&
			       strncmp(j->findings[k].rule, a->rule, sizeof a->rule) == 0;
		if (seen)
			continue;
		for (size_t k = i; k < n; k++)
			count += j->findings[k].severity == a->severity &&
				 strncmp(j->findings[k].rule, a->rule, sizeof a->rule) == 0;
		sample_begin(r, F_FINDINGS);
		out_str(&r->o, "{rule=\"");
		out_label_value(&r->o, a->rule, sizeof a->rule);
		text_buffer_printf(&r->o, "\",severity=\"%s\"} %" PRIu64 "\n", severity_name(a->severity), count);
	}
}

static void render_job(struct render *r)
{
	const struct live_view *v = r->v;
	const struct live_job *j = v ? &v->job : NULL;
	int diagnosed = j && j->diagnosed;
	static const int verdicts[] = {ANALYSIS_DIAGNOSED, ANALYSIS_BUCKETED, ANALYSIS_UNDECIDED};

	sample_begin(r, F_BUILD_INFO);
	text_buffer_printf(&r->o, "{version=\"%s\",format=\"%d.%d\"} 1\n", FSS_VERSION, FSS_FORMAT_MAJOR,
			   FSS_FORMAT_MINOR);
	sample_u64(r, F_LIVE_GENERATION, v ? v->generation : 0);
	if (v && v->at_realtime_ns) {
		sample_begin(r, F_LIVE_PUBLISHED);
		text_buffer_append(&r->o, " ", 1);
		out_ns(&r->o, v->at_realtime_ns, 0);
		text_buffer_append(&r->o, "\n", 1);
	}
	sample_u64(r, F_RECORDS, j ? j->records_total : 0);
	sample_u64(r, F_RECORDS_DROPPED_JOB, j ? j->records_dropped_total : 0);
	sample_u64(r, F_RANKS, v ? v->nranks : 0);
	sample_u64(r, F_DIAGNOSED, diagnosed);
	sample_u64(r, F_DIAGNOSES, j ? j->diagnoses : 0);
	sample_u64(r, F_COLLECTIVE_HANG, diagnosed && j->flight.nhangs > 0);
	for (size_t i = 0; i < sizeof verdicts / sizeof verdicts[0]; i++)
		sample_label_u64(r, F_VERDICT, "verdict", analysis_verdict_name(verdicts[i]),
				 diagnosed && j->verdict == verdicts[i]);
	if (!diagnosed)
		return;
	for (int reason = ANALYSIS_UNDECIDED_NONE + 1; reason < ANALYSIS_UNDECIDED_MAX; reason++)
		sample_label_u64(r, F_UNDECIDED, "reason", analysis_undecided_name(reason),
				 j->verdict == ANALYSIS_UNDECIDED && j->undecided_reason == reason);
	if (j->verdict == ANALYSIS_DIAGNOSED) {
		sample_u64(r, F_REPEATING_UNITS, j->repeating_units);
		sample_u64(r, F_GATHERS_PER_UNIT, j->gathers_per_unit);
		for (int p = 0; p < (int)(sizeof reshard_names / sizeof reshard_names[0]); p++)
			sample_label_u64(r, F_RESHARD, "policy", reshard_names[p], j->reshard == p);
	}
	if (j->verdict != ANALYSIS_UNDECIDED) {
		sample_u64(r, F_DIAG_ALLGATHERS, j->allgathers_per_step);
		if (j->microbatches)
			sample_u64(r, F_DIAG_MICROBATCHES, j->microbatches);
		/* attach mode: not measured, left out rather than 0 */
		if (!(j->sources_attached && j->exposure_source == ANALYSIS_EXPOSURE_NONE)) {
			sample_begin(r, F_DIAG_EXPOSED);
			text_buffer_append(&r->o, " ", 1);
			out_ns(&r->o, j->exposed_allgather_ns_per_step, 0);
			text_buffer_append(&r->o, "\n", 1);
			sample_begin(r, F_DIAG_COMPUTE_WAIT);
			text_buffer_append(&r->o, " ", 1);
			out_ns(&r->o, j->compute_wait_ns_per_step, 0);
			text_buffer_append(&r->o, "\n", 1);
		}
	}
	render_findings(r);
}

int metrics_render(const struct live_view *v, char **text, size_t *len)
{
	struct render r = {.v = v};

	render_job(&r);
	if (v) {
		if (rank_labels(&r) < 0) {
			free(r.o.text);
			return -ENOMEM;
		}
		render_ranks(&r);
		render_comms(&r);
		free(r.rank_label);
	}
	return text_buffer_take(&r.o, text, len);
}

/* ---- the server ------------------------------------------------------------- */

/* A scraper that stops reading holds a connection at most this long, and no
 * more than this many are open at once: stuck clients cannot pile up. One
 * host has at most METRICS_CONNECTIONS_PER_HOST of them (libmicrohttpd
 * closes the next at once), so that idle connections of one client cannot
 * take every slot from the Prometheus that scrapes (one per scrape, and one
 * kept alive between scrapes, are all it uses). */
#define METRICS_CONNECTIONS_MAX 16
#define METRICS_CONNECTIONS_PER_HOST 4
#define METRICS_TIMEOUT_S 5

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics_server {
	struct MHD_Daemon *daemon;
	live_board_t *board;
	atomic_ulong scrapes;
	char address[INET6_ADDRSTRLEN + 16];
};

static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned status, const char *text, const char *allow)
{
	struct MHD_Response *res = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!res)
		return MHD_NO;
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (allow)
		MHD_add_response_header(res, MHD_HTTP_HEADER_ALLOW, allow);
	ret = MHD_queue_response(c, status, res);
	MHD_destroy_response(res);
	return ret;
}

/* One request: GET (or HEAD) /metrics renders the board's latest view. */
static enum MHD_Result metrics_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				      const char *version, const char *upload_data, size_t *upload_data_size,
				      void **con_cls)
{
	struct metrics_server *s = cls;
	const struct live_view *v;
	struct MHD_Response *res;
	enum MHD_Result ret;
	char *text = NULL;
	size_t len = 0;
	int rc;

	atomic_fetch_add(&s->scrapes, 1);
	if (strcmp(url, "/metrics") != 0)
		return respond_text(c, MHD_HTTP_NOT_FOUND, "not found: fsdpscope serves GET /metrics\n", NULL);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return respond_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: use GET\n", "GET, HEAD");
	v = live_board_acquire(s->board);
	rc = metrics_render(v, &text, &len);
	live_board_release(s->board, v);
	if (rc < 0)
		return respond_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
	res = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!res) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_CONTENT_TYPE);
	ret = MHD_queue_response(c, MHD_HTTP_OK, res);
	MHD_destroy_response(res);
	return ret;
}

/* Split "host:port" / "[v6]:port"; 0 or -EINVAL with the reason in err. */
static int split_hostport(const char *hostport, char *host, size_t hostlen, unsigned *port, char *err, size_t errlen)
{
	const char *colon, *p;
	char *end;
	unsigned long n;
	size_t hl;

	if (hostport[0] == '[') {
		const char *close = strchr(hostport, ']');
		if (!close || close[1] != ':') {
			snprintf(err, errlen, "'%s': an IPv6 address is written [ADDR]:PORT", hostport);
			return -EINVAL;
		}
		hl = (size_t)(close - hostport - 1);
		p = hostport + 1;
		colon = close + 1;
	} else {
		colon = strrchr(hostport, ':');
		if (!colon || strchr(hostport, ':') != colon) {
			snprintf(err, errlen, "'%s': expected HOST:PORT (127.0.0.1:9464, [::1]:9464)", hostport);
			return -EINVAL;
		}
		hl = (size_t)(colon - hostport);
		p = hostport;
	}
	if (hl == 0 || hl >= hostlen) {
		snprintf(err, errlen, "'%s': expected HOST:PORT (127.0.0.1:9464, [::1]:9464)", hostport);
		return -EINVAL;
	}
	memcpy(host, p, hl);
	host[hl] = '\0';
	errno = 0;
	n = strtoul(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end || errno || n > 65535) {
		snprintf(err, errlen, "'%s': the port must be a number from 0 to 65535", hostport);
		return -EINVAL;
	}
	*port = (unsigned)n;
	return 0;
}

static int is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return 1;
		return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
	}
	return 0;
}

/* The address actually listened on, the port filled in. */
static void server_address(struct metrics_server *s)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_LISTEN_FD);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char host[INET6_ADDRSTRLEN];

	if (!info || getsockname(info->listen_fd, (struct sockaddr *)&ss, &sl) != 0)
		return;
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
		snprintf(s->address, sizeof s->address, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
		snprintf(s->address, sizeof s->address, "%s:%u", host, ntohs(in->sin_port));
	}
}

int metrics_server_start(metrics_server_t **out, const char *hostport, int allow_remote, live_board_t *board, char *err,
			 size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
	struct metrics_server *s = NULL;
	char host[256], port_text[8];
	unsigned port;
	unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD;
	int rc, gai;

	if (errlen)
		err[0] = '\0';
	rc = split_hostport(hostport, host, sizeof host, &port, err, errlen);
	if (rc < 0)
		return rc;
	snprintf(port_text, sizeof port_text, "%u", port);
	gai = getaddrinfo(host, port_text, &hints, &ai);
	if (gai != 0 || !ai) {
		snprintf(err, errlen, "'%s': cannot resolve %s: %s", hostport, host,
			 gai ? gai_strerror(gai) : "no address");
		if (ai)
			freeaddrinfo(ai);
		return -EINVAL;
	}
	if (!allow_remote && !is_loopback(ai->ai_addr)) {
		snprintf(err, errlen, "'%s' is not a loopback address: /metrics is served elsewhere only when asked",
			 hostport);
		rc = -EPERM;
		goto fail;
	}
	s = calloc(1, sizeof *s);
	if (!s) {
		rc = -ENOMEM;
		goto fail;
	}
	s->board = board;
	atomic_init(&s->scrapes, 0);
	/* epoll (MHD_USE_AUTO): a collector with hundreds of agent
	 * connections has descriptors past select()'s FD_SETSIZE. No error
	 * log: the collector's stderr is the user's, and the errors that
	 * matter come back here. */
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	errno = 0;
	s->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, metrics_handle, s, MHD_OPTION_SOCK_ADDR,
				     ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_CONNECTIONS_MAX,
				     MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)METRICS_CONNECTIONS_PER_HOST,
				     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_TIMEOUT_S, MHD_OPTION_END);
	if (!s->daemon) {
		/* MHD says nothing with its log off; the failed bind() or
		 * listen() has left its errno. */
		rc = errno ? -errno : -EIO;
		snprintf(err, errlen, "cannot serve /metrics on '%s': %s", hostport,
			 errno ? strerror(errno) : "libmicrohttpd could not start");
		goto fail;
	}
	snprintf(s->address, sizeof s->address, "%s", hostport);
	server_address(s);
	freeaddrinfo(ai);
	*out = s;
	return 0;
fail:
	free(s);
	freeaddrinfo(ai);
	return rc;
}

const char *metrics_server_address(const metrics_server_t *s)
{
	return s->address;
}

unsigned long metrics_server_scrapes(const metrics_server_t *s)
{
	return atomic_load(&s->scrapes);
}

void metrics_server_stop(metrics_server_t *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->daemon);
	free(s);
}
