/*
 * metrics_test.c - collector/metrics: the exposition of live views built
 * by hand is parsed back line by line (every family has # HELP and # TYPE
 * before its samples, its samples together, no series twice) and its
 * numbers are the view's; `promtool check metrics` accepts it; a server on
 * a free port, scraped with curl, returns exactly metrics_render of the
 * board's view, the new numbers after the next live_board_put, 404
 * elsewhere and 405 for other methods; addresses it must refuse are
 * refused with the right errno.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collector/metrics.h"

#ifndef FSS_PROMTOOL
#define FSS_PROMTOOL "promtool"
#endif
#ifndef FSS_SOURCE_DIR
#define FSS_SOURCE_DIR "."
#endif
#ifndef FSS_CURL
#define FSS_CURL "curl"
#endif

/* ---- a view built by hand ---------------------------------------------------- */

#define COMM_A 0x00ab00cd00ef0012ull
#define COMM_B 0xdeadbeef01234567ull
#define ODD_RULE "we\"ird\\rule\nx"

static struct live_view *view_new(size_t nranks)
{
	struct live_view *v = calloc(1, sizeof *v);

	assert_non_null(v);
	v->nranks = nranks;
	v->ranks = calloc(nranks, sizeof *v->ranks);
	assert_non_null(v->ranks);
	return v;
}

static void add_finding(struct live_job *j, const char *rule, int severity)
{
	struct live_finding *f = &j->findings[j->nfindings++];

	snprintf(f->rule, sizeof f->rule, "%s", rule);
	f->severity = severity;
	snprintf(f->message, sizeof f->message, "message of %s", rule);
}

/*
 * Four sources: rank 0 (a last step, three communicators of which one is
 * listed twice), rank 1 (its last step excluded: the gauges show the
 * window's latest analysed step), a second source claiming rank 1 (so it
 * is labelled by source), and a source whose rank is not known yet.
 */
static struct live_view *sample_view(uint64_t step_ns)
{
	struct live_view *v = view_new(4);
	struct live_job *j = &v->job;
	struct live_rank *r;

	v->at_realtime_ns = 1764590000123456789ull;
	j->records_total = 123456;
	j->records_dropped_total = 3;
	j->diagnoses = 4;
	j->diagnosed = 1;
	j->verdict = ANALYSIS_DIAGNOSED;
	j->repeating_units = 12;
	j->gathers_per_unit = 6;
	j->allgathers_per_step = 144;
	j->microbatches = 2;
	j->reshard = ANALYSIS_RESHARD_TRUE;
	j->exposed_allgather_ns_per_step = 3000000000ull;
	j->compute_wait_ns_per_step = 1;
	j->flight.nhangs = 1;
	j->flight.hangs_total = 1;
	add_finding(j, "wrap-too-fine", 2);
	add_finding(j, "exposed-gather", 1);
	add_finding(j, ODD_RULE, 0);
	add_finding(j, "exposed-gather", 1);

	r = &v->ranks[0];
	r->rank = 0;
	r->source = 0;
	r->pid = 100;
	r->records = 1000;
	r->dropped = 3;
	r->collectives_missing = 2;
	r->collectives = 500;
	r->lateness_ns = -1500;
	r->last = (struct live_step){.ordinal = 7,
				     .step_ns = step_ns,
				     .allgathers = 144,
				     .microbatches = 2,
				     .allgather_ns = 40000000,
				     .exposed_allgather_ns = 5000001,
				     .compute_wait_ns = 7000000,
				     .compute_ns = 80000000,
				     .exposed_comm_ns = 6000000};
	r->nwindow = 1;
	r->window[0] = r->last;
	r->totals = (struct live_totals){.steps = 5,
					 .steps_excluded = 1,
					 .step_ns_sum = 5 * step_ns,
					 .allgathers_sum = 720,
					 .exposed_allgather_ns_sum = 25000005,
					 .compute_wait_ns_sum = 35000000,
					 .compute_ns_sum = 400000000};
	r->ncomms = 3;
	r->comms[0] = (struct live_comm){.id_hash = COMM_A,
					 .nranks = 2,
					 .role = ANALYSIS_ROLE_FSDP,
					 .collectives = 4300,
					 .last_seq = 4242,
					 .entered = 4300,
					 .left = 4299};
	r->comms[1] = (struct live_comm){.id_hash = COMM_B, .nranks = 2, .collectives = 3, .last_seq = 2,
					 .entered = 3, .left = 3};
	r->comms[2] = r->comms[0];
	r->comms[2].last_seq = 1;
	/* a communicator whose comm record was not seen: no id, no rank */
	r->comms[3] = (struct live_comm){.rank = -1, .collectives = 7, .entered = 7, .left = 7};
	r->ncomms = 4;

	r = &v->ranks[1];
	r->rank = 1;
	r->source = 1;
	r->pid = 101;
	r->records = 990;
	r->nwindow = 2;
	r->window[0] = (struct live_step){.ordinal = 5, .step_ns = 200000000, .allgathers = 143};
	r->window[1] = (struct live_step){.ordinal = 6, .excluded = 1, .step_ns = 999, .allgathers = 3};
	r->last = r->window[1];
	r->totals.steps = 1;
	r->totals.steps_excluded = 1;
	r->ncomms = 1;
	r->comms[0] = (struct live_comm){.id_hash = COMM_A,
					 .nranks = 2,
					 .rank = 1,
					 .role = ANALYSIS_ROLE_FSDP,
					 .collectives = 4299,
					 .last_seq = 4241,
					 .entered = 4299,
					 .left = 4299};

	r = &v->ranks[2];
	r->rank = 1;
	r->source = 3;
	r->pid = 103;
	r->ended = 1;
	r->records = 10;
	/* it claims rank 1 of COMM_A too (a restarted process): the first
	 * source keeps the series */
	r->ncomms = 1;
	r->comms[0] = v->ranks[1].comms[0];
	r->comms[0].entered = r->comms[0].left = 5;

	r = &v->ranks[3];
	r->rank = -1;
	r->source = 2;
	r->pid = 102;
	r->records = 1;
	return v;
}

/* ---- the exposition parsed back ---------------------------------------------- */

struct sample {
	char name[96];
	char labels[320]; /* as written between the braces, "" without */
	double value;
	char raw[48]; /* the value as written */
};

struct parsed {
	size_t nsamples;
	struct sample samples[512];
	size_t nfamilies;
	char families[96][96];
	char types[96][16];
};

static int name_char(char c, int first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && c >= '0' && c <= '9');
}

/* Length of the metric name at s (0: none). */
static size_t name_len(const char *s)
{
	size_t n = 0;

	while (name_char(s[n], n == 0))
		n++;
	return n;
}

/* The labels at s ("{...}"): checked and copied; returns the length consumed. */
static size_t parse_labels(const char *s, char *out, size_t outlen)
{
	size_t i = 1, o = 0;

	assert_int_equal(s[0], '{');
	while (s[i] != '}') {
		size_t n = name_len(s + i);
		assert_true(n > 0);
		i += n;
		assert_int_equal(s[i], '=');
		assert_int_equal(s[i + 1], '"');
		i += 2;
		while (s[i] != '"') {
			assert_true(s[i] != '\n' && s[i] != '\0');
			if (s[i] == '\\') {
				assert_true(s[i + 1] == '\\' || s[i + 1] == '"' || s[i + 1] == 'n');
				i++;
			}
			i++;
		}
		i++;
		if (s[i] == ',')
			i++;
		else
			assert_int_equal(s[i], '}');
	}
	assert_true(i - 1 < outlen);
	memcpy(out, s + 1, i - 1);
	out[i - 1] = '\0';
	o = i + 1;
	return o;
}

static int family_seen(const struct parsed *p, const char *name)
{
	for (size_t i = 0; i < p->nfamilies; i++)
		if (strcmp(p->families[i], name) == 0)
			return 1;
	return 0;
}

/*
 * Parse the whole text strictly: "# HELP name text", then "# TYPE name
 * gauge|counter", then the family's samples, "name{labels} value", every
 * name that of the family's TYPE line; each family once; no series twice.
 */
static void parse(const char *text, struct parsed *p)
{
	char family[96] = "", type[16] = "";
	const char *line = text;
	int help_seen = 0;

	memset(p, 0, sizeof *p);
	assert_true(strlen(text) > 0);
	assert_int_equal(text[strlen(text) - 1], '\n');
	while (*line) {
		const char *nl = strchr(line, '\n');
		char buf[1024];
		size_t len;

		assert_non_null(nl);
		len = (size_t)(nl - line);
		assert_true(len < sizeof buf);
		memcpy(buf, line, len);
		buf[len] = '\0';
		line = nl + 1;
		if (strncmp(buf, "# HELP ", 7) == 0) {
			size_t n = name_len(buf + 7);
			assert_true(n > 0 && n < sizeof family);
			assert_int_equal(buf[7 + n], ' ');
			assert_true(strlen(buf + 8 + n) > 0);
			memcpy(family, buf + 7, n);
			family[n] = '\0';
			assert_false(family_seen(p, family));
			assert_true(p->nfamilies < sizeof p->families / sizeof p->families[0]);
			snprintf(p->families[p->nfamilies++], sizeof p->families[0], "%s", family);
			assert_int_equal(strncmp(family, "fsdpscope_", 10), 0);
			type[0] = '\0';
			help_seen = 1;
			continue;
		}
		if (strncmp(buf, "# TYPE ", 7) == 0) {
			size_t n = name_len(buf + 7);
			assert_true(help_seen);
			assert_true(n == strlen(family) && strncmp(buf + 7, family, n) == 0);
			snprintf(type, sizeof type, "%s", buf + 8 + n);
			snprintf(p->types[p->nfamilies - 1], sizeof p->types[0], "%s", type);
			assert_true(strcmp(type, "gauge") == 0 || strcmp(type, "counter") == 0);
			/* Counters end in _total, nothing else does. */
			len = strlen(family);
			assert_int_equal(strcmp(type, "counter") == 0,
					 len > 6 && strcmp(family + len - 6, "_total") == 0);
			help_seen = 0;
			continue;
		}
		assert_true(buf[0] != '#');
		{
			struct sample *s = &p->samples[p->nsamples];
			size_t n = name_len(buf), i;
			char *end;

			assert_true(p->nsamples < sizeof p->samples / sizeof p->samples[0]);
			assert_true(type[0] != '\0');
			assert_true(n == strlen(family) && strncmp(buf, family, n) == 0);
			memcpy(s->name, buf, n);
			s->name[n] = '\0';
			i = n;
			if (buf[i] == '{')
				i += parse_labels(buf + i, s->labels, sizeof s->labels);
			assert_int_equal(buf[i], ' ');
			s->value = strtod(buf + i + 1, &end);
			assert_true(end != buf + i + 1 && *end == '\0');
			assert_true(strlen(buf + i + 1) < sizeof s->raw);
			snprintf(s->raw, sizeof s->raw, "%s", buf + i + 1);
			for (size_t k = 0; k < p->nsamples; k++)
				assert_false(strcmp(p->samples[k].name, s->name) == 0 &&
					     strcmp(p->samples[k].labels, s->labels) == 0);
			p->nsamples++;
		}
	}
}

static const struct sample *find(const struct parsed *p, const char *name, const char *labels)
{
	for (size_t i = 0; i < p->nsamples; i++)
		if (strcmp(p->samples[i].name, name) == 0 && strcmp(p->samples[i].labels, labels) == 0)
			return &p->samples[i];
	return NULL;
}

static double value(const struct parsed *p, const char *name, const char *labels)
{
	const struct sample *s = find(p, name, labels);

	if (!s)
		fail_msg("no sample %s{%s}", name, labels);
	return s->value;
}

static size_t count(const struct parsed *p, const char *name)
{
	size_t n = 0;

	for (size_t i = 0; i < p->nsamples; i++)
		n += strcmp(p->samples[i].name, name) == 0;
	return n;
}

/* ---- processes ---------------------------------------------------------------- */

/* Run `cmd` with sh, its stdout (and stderr when asked in cmd) in a malloc'd
 * string; returns the exit status (-1 when it did not exit). */
static int run_capture(const char *cmd, char **out)
{
	FILE *f = popen(cmd, "r");
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	int status;

	assert_non_null(f);
	assert_non_null(buf);
	for (;;) {
		size_t n;
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		if (n == 0)
			break;
		len += n;
	}
	buf[len] = '\0';
	status = pclose(f);
	*out = buf;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The whole file at `path`, NUL-terminated (the test fails without it). */
static char *read_whole(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (!f)
		fail_msg("cannot open %s", path);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* promtool check metrics on `text`: required (setup installs it). */
static void promtool_check(const char *text)
{
	char path[] = "/tmp/fss-metrics-XXXXXX";
	char cmd[512];
	char *out = NULL;
	int fd = mkstemp(path), rc;
	size_t len = strlen(text);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	snprintf(cmd, sizeof cmd, "'%s' check metrics < '%s' 2>&1", FSS_PROMTOOL, path);
	rc = run_capture(cmd, &out);
	unlink(path);
	if (rc != 0)
		fail_msg("promtool check metrics failed (%d; is promtool installed? scripts/setup.sh): %s", rc, out);
	free(out);
}

/* curl (a real HTTP client, proxies off) on the server; -w appends `extra`. */
static int curl(const metrics_server_t *s, const char *args, const char *path, char **out)
{
	char cmd[512];

	snprintf(cmd, sizeof cmd, "'%s' --noproxy '*' -g -sS --max-time 60 %s 'http://%s%s'", FSS_CURL, args,
		 metrics_server_address(s), path);
	return run_capture(cmd, out);
}

static void render_ok(const struct live_view *v, char **text)
{
	size_t len = 0;

	assert_int_equal(metrics_render(v, text, &len), 0);
	assert_int_equal(len, strlen(*text));
}

/* ---- tests ---------------------------------------------------------------------- */

static void test_render_empty(void **state)
{
	struct parsed *p = calloc(1, sizeof *p);
	char *text;

	(void)state;
	assert_non_null(p);
	render_ok(NULL, &text);
	parse(text, p);
	assert_true(value(p, "fsdpscope_live_generation", "") == 0);
	assert_true(value(p, "fsdpscope_ranks", "") == 0);
	assert_true(value(p, "fsdpscope_diagnosed", "") == 0);
	assert_true(value(p, "fsdpscope_collective_hang", "") == 0);
	assert_true(value(p, "fsdpscope_records_total", "") == 0);
	assert_true(value(p, "fsdpscope_verdict", "verdict=\"diagnosed\"") == 0);
	assert_true(value(p, "fsdpscope_build_info", "version=\"" FSS_VERSION "\",format=\"1.5\"") == 1);
	assert_int_equal(count(p, "fsdpscope_step_seconds"), 0);
	assert_int_equal(count(p, "fsdpscope_repeating_units"), 0);
	promtool_check(text);
	free(text);
	free(p);
}

static void test_render_view(void **state)
{
	struct live_view *v = sample_view(123456789);
	struct parsed *p = calloc(1, sizeof *p);
	char *text;

	(void)state;
	assert_non_null(p);
	v->generation = 9;
	render_ok(v, &text);
	parse(text, p);

	/* The job. */
	assert_true(value(p, "fsdpscope_live_generation", "") == 9);
	/* Nanoseconds written as exact decimal seconds, past a double's digits. */
	assert_non_null(find(p, "fsdpscope_live_published_timestamp_seconds", ""));
	assert_string_equal(find(p, "fsdpscope_live_published_timestamp_seconds", "")->raw, "1764590000.123456789");
	assert_true(value(p, "fsdpscope_records_total", "") == 123456);
	assert_true(value(p, "fsdpscope_ranks", "") == 4);
	assert_true(value(p, "fsdpscope_diagnosed", "") == 1);
	assert_true(value(p, "fsdpscope_diagnoses_total", "") == 4);
	assert_true(value(p, "fsdpscope_verdict", "verdict=\"diagnosed\"") == 1);
	assert_true(value(p, "fsdpscope_verdict", "verdict=\"bucketed\"") == 0);
	assert_true(value(p, "fsdpscope_verdict", "verdict=\"undecided\"") == 0);
	assert_true(value(p, "fsdpscope_undecided_reason", "reason=\"no-step\"") == 0);
	assert_true(value(p, "fsdpscope_repeating_units", "") == 12);
	assert_true(value(p, "fsdpscope_gathers_per_unit", "") == 6);
	assert_true(value(p, "fsdpscope_reshard", "policy=\"true\"") == 1);
	assert_true(value(p, "fsdpscope_reshard", "policy=\"false\"") == 0);
	assert_true(value(p, "fsdpscope_diagnosis_allgathers_per_step", "") == 144);
	assert_true(value(p, "fsdpscope_diagnosis_microbatches_per_step", "") == 2);
	assert_true(value(p, "fsdpscope_diagnosis_allgather_exposed_seconds_per_step", "") == 3.0);
	assert_true(value(p, "fsdpscope_diagnosis_compute_wait_seconds_per_step", "") == 1 / 1e9);

	/* Findings counted by (rule, severity); the odd rule id escaped. */
	assert_int_equal(count(p, "fsdpscope_findings"), 3);
	assert_true(value(p, "fsdpscope_findings", "rule=\"wrap-too-fine\",severity=\"error\"") == 1);
	assert_true(value(p, "fsdpscope_findings", "rule=\"exposed-gather\",severity=\"warning\"") == 2);
	assert_true(value(p, "fsdpscope_findings", "rule=\"we\\\"ird\\\\rule\\nx\",severity=\"info\"") == 1);

	/* Rank 0: its last step, in seconds exactly. */
	assert_true(value(p, "fsdpscope_step_seconds", "rank=\"0\"") == 123456789 / 1e9);
	assert_true(value(p, "fsdpscope_step_ordinal", "rank=\"0\"") == 7);
	assert_true(value(p, "fsdpscope_allgathers_per_step", "rank=\"0\"") == 144);
	assert_true(value(p, "fsdpscope_microbatches_per_step", "rank=\"0\"") == 2);
	assert_true(value(p, "fsdpscope_allgather_seconds_per_step", "rank=\"0\"") == 40000000 / 1e9);
	assert_true(value(p, "fsdpscope_allgather_exposed_seconds_per_step", "rank=\"0\"") == 5000001 / 1e9);
	assert_true(value(p, "fsdpscope_compute_wait_seconds_per_step", "rank=\"0\"") == 7000000 / 1e9);
	assert_true(value(p, "fsdpscope_compute_seconds_per_step", "rank=\"0\"") == 80000000 / 1e9);
	assert_true(value(p, "fsdpscope_comm_exposed_seconds_per_step", "rank=\"0\"") == 6000000 / 1e9);
	assert_true(value(p, "fsdpscope_steps_total", "rank=\"0\"") == 5);
	assert_true(value(p, "fsdpscope_steps_excluded_total", "rank=\"0\"") == 1);
	assert_true(value(p, "fsdpscope_analysed_step_seconds_total", "rank=\"0\"") == 5 * 123456789 / 1e9);
	assert_true(value(p, "fsdpscope_allgathers_total", "rank=\"0\"") == 720);
	assert_true(value(p, "fsdpscope_allgather_exposed_seconds_total", "rank=\"0\"") == 25000005 / 1e9);
	assert_true(value(p, "fsdpscope_records_dropped_total", "rank=\"0\"") == 3);
	assert_true(value(p, "fsdpscope_collectives_missing_total", "rank=\"0\"") == 2);
	assert_true(value(p, "fsdpscope_collectives_total", "rank=\"0\"") == 500);
	assert_true(value(p, "fsdpscope_rank_records_total", "rank=\"0\"") == 1000);
	assert_true(value(p, "fsdpscope_rank_lateness_seconds", "rank=\"0\"") == -1500 / 1e9);
	assert_true(value(p, "fsdpscope_rank_info", "rank=\"0\",source=\"0\",pid=\"100\"") == 1);

	/* Rank 1: its last step was left out, the window's analysed one shows. */
	assert_true(value(p, "fsdpscope_step_seconds", "rank=\"1\"") == 0.2);
	assert_true(value(p, "fsdpscope_allgathers_per_step", "rank=\"1\"") == 143);
	assert_true(value(p, "fsdpscope_steps_excluded_total", "rank=\"1\"") == 1);
	assert_null(find(p, "fsdpscope_microbatches_per_step", "rank=\"1\""));

	/* A second source with rank 1, and one whose rank is not known: by source. */
	assert_true(value(p, "fsdpscope_rank_info", "rank=\"source3\",source=\"3\",pid=\"103\"") == 1);
	assert_true(value(p, "fsdpscope_rank_ended", "rank=\"source3\"") == 1);
	assert_true(value(p, "fsdpscope_rank_ended", "rank=\"1\"") == 0);
	assert_true(value(p, "fsdpscope_rank_records_total", "rank=\"source2\"") == 1);
	assert_null(find(p, "fsdpscope_step_seconds", "rank=\"source2\""));
	assert_int_equal(count(p, "fsdpscope_step_seconds"), 2);
	assert_int_equal(count(p, "fsdpscope_rank_info"), 4);

	/* Communicators: the id hash in hex, the repeated one written once;
	 * per communicator and rank in it, the collective numbers entered and
	 * left; none for a communicator without an id or a rank */
	assert_int_equal(count(p, "fsdpscope_collective_seq"), 6);
	assert_true(value(p, "fsdpscope_collective_seq", "comm=\"00ab00cd00ef0012\",rank=\"0\",state=\"entered\"") == 4300);
	assert_true(value(p, "fsdpscope_collective_seq", "comm=\"00ab00cd00ef0012\",rank=\"0\",state=\"left\"") == 4299);
	assert_true(value(p, "fsdpscope_collective_seq", "comm=\"deadbeef01234567\",rank=\"0\",state=\"entered\"") == 3);
	assert_true(value(p, "fsdpscope_collective_seq", "comm=\"deadbeef01234567\",rank=\"0\",state=\"left\"") == 3);
	assert_true(value(p, "fsdpscope_collective_seq", "comm=\"00ab00cd00ef0012\",rank=\"1\",state=\"entered\"") == 4299);
	assert_true(value(p, "fsdpscope_collective_seq", "comm=\"00ab00cd00ef0012\",rank=\"1\",state=\"left\"") == 4299);
	assert_null(find(p, "fsdpscope_collective_seq", "comm=\"0000000000000000\",rank=\"-1\",state=\"entered\""));
	/* the latest diagnosis holds a hang */
	assert_true(value(p, "fsdpscope_collective_hang", "") == 1);
	assert_true(value(p, "fsdpscope_comm_collectives_total", "comm=\"00ab00cd00ef0012\",rank=\"0\"") == 4300);
	assert_true(value(p, "fsdpscope_comm_role", "comm=\"00ab00cd00ef0012\",rank=\"0\",role=\"fsdp\"") == 1);

	promtool_check(text);
	free(text);
	free(p);
	live_view_free(v);
}

/* An undecided diagnosis: its reason is 1, and no unit figures are shown. */
static void test_render_undecided(void **state)
{
	struct live_view *v = sample_view(1000000000);
	struct parsed *p = calloc(1, sizeof *p);
	char *text;

	(void)state;
	assert_non_null(p);
	v->job.verdict = ANALYSIS_UNDECIDED;
	v->job.undecided_reason = ANALYSIS_UNDECIDED_NO_STEP;
	v->job.flight.nhangs = 0; /* the hang cleared */
	v->job.flight.hangs_total = 0;
	render_ok(v, &text);
	parse(text, p);
	assert_true(value(p, "fsdpscope_verdict", "verdict=\"undecided\"") == 1);
	assert_true(value(p, "fsdpscope_verdict", "verdict=\"diagnosed\"") == 0);
	assert_true(value(p, "fsdpscope_undecided_reason", "reason=\"no-step\"") == 1);
	assert_true(value(p, "fsdpscope_undecided_reason", "reason=\"no-fsdp-group\"") == 0);
	assert_int_equal(count(p, "fsdpscope_repeating_units"), 0);
	assert_int_equal(count(p, "fsdpscope_reshard"), 0);
	assert_true(value(p, "fsdpscope_collective_hang", "") == 0);
	assert_true(value(p, "fsdpscope_step_seconds", "rank=\"0\"") == 1);
	promtool_check(text);
	free(text);
	free(p);
	live_view_free(v);
}

/* Every family written is in docs/metrics.md's tables with its type, and
 * every family there is written for a view that has every figure. */
static void test_documented(void **state)
{
	struct live_view *v = sample_view(123456789);
	struct parsed *p = calloc(1, sizeof *p);
	char *text, *doc, *path = NULL;
	size_t rows = 0;

	(void)state;
	assert_non_null(p);
	render_ok(v, &text);
	parse(text, p);
	assert_true(asprintf(&path, "%s/docs/metrics.md", FSS_SOURCE_DIR) > 0);
	doc = read_whole(path);
	for (size_t i = 0; i < p->nfamilies; i++) {
		char row[160];
		snprintf(row, sizeof row, "| `%s` | %s |", p->families[i], p->types[i]);
		if (!strstr(doc, row))
			fail_msg("docs/metrics.md has no row %s", row);
	}
	for (const char *r = doc; (r = strstr(r, "\n| `fsdpscope_")) != NULL; r++) {
		char name[96];
		size_t n = strcspn(r + 4, "`");
		int found = 0;
		assert_true(n < sizeof name);
		memcpy(name, r + 4, n);
		name[n] = '\0';
		for (size_t i = 0; i < p->nfamilies; i++)
			found |= strcmp(p->families[i], name) == 0;
		if (!found)
			fail_msg("docs/metrics.md lists %s, which is not written", name);
		rows++;
	}
	assert_int_equal(rows, p->nfamilies);
	free(path);
	free(doc);
	free(text);
	free(p);
	live_view_free(v);
}

/* The scrape is metrics_render of the board's view, before and after a put. */
static void test_server_scrape(void **state)
{
	live_board_t *b;
	metrics_server_t *s = NULL;
	struct parsed *p = calloc(1, sizeof *p);
	const struct live_view *held;
	char err[256], *text, *got;
	unsigned long requests = 0;

	(void)state;
	assert_non_null(p);
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(metrics_server_start(&s, "127.0.0.1:0", 0, b, err, sizeof err), 0);
	assert_int_equal(strncmp(metrics_server_address(s), "127.0.0.1:", 10), 0);
	assert_true(atoi(metrics_server_address(s) + 10) > 0);

	/* Nothing published yet. */
	render_ok(NULL, &text);
	assert_int_equal(curl(s, "-f", "/metrics", &got), 0);
	requests++;
	assert_string_equal(got, text);
	free(got);
	free(text);

	/* A view on the board. */
	assert_int_equal(live_board_put(b, sample_view(123456789)), 0);
	held = live_board_acquire(b);
	render_ok(held, &text);
	live_board_release(b, held);
	assert_int_equal(curl(s, "-f", "/metrics", &got), 0);
	requests++;
	assert_string_equal(got, text);
	parse(got, p);
	assert_true(value(p, "fsdpscope_live_generation", "") == 1);
	assert_true(value(p, "fsdpscope_step_seconds", "rank=\"0\"") == 123456789 / 1e9);
	free(got);
	free(text);

	/* The next put's numbers in the next scrape. */
	assert_int_equal(live_board_put(b, sample_view(250000000)), 0);
	assert_int_equal(curl(s, "-f", "/metrics", &got), 0);
	requests++;
	parse(got, p);
	assert_true(value(p, "fsdpscope_live_generation", "") == 2);
	assert_true(value(p, "fsdpscope_step_seconds", "rank=\"0\"") == 0.25);
	free(got);

	/* The content type, HEAD, and nothing but GET /metrics. */
	assert_int_equal(curl(s, "-f -o /dev/null -w '%{content_type}'", "/metrics", &got), 0);
	requests++;
	assert_string_equal(got, "text/plain; version=0.0.4; charset=utf-8");
	free(got);
	assert_int_equal(curl(s, "-I -o /dev/null -w '%{http_code}'", "/metrics", &got), 0);
	requests++;
	assert_string_equal(got, "200");
	free(got);
	assert_int_equal(curl(s, "-o /dev/null -w '%{http_code}'", "/other", &got), 0);
	requests++;
	assert_string_equal(got, "404");
	free(got);
	assert_int_equal(curl(s, "-o /dev/null -w '%{http_code}'", "/", &got), 0);
	requests++;
	assert_string_equal(got, "404");
	free(got);
	assert_int_equal(curl(s, "-X POST -d x=1 -o /dev/null -w '%{http_code}'", "/metrics", &got), 0);
	requests++;
	assert_string_equal(got, "405");
	free(got);
	assert_int_equal(curl(s, "-X DELETE -o /dev/null -w '%{http_code}'", "/metrics", &got), 0);
	requests++;
	assert_string_equal(got, "405");
	free(got);
	assert_int_equal(metrics_server_scrapes(s), requests);

	metrics_server_stop(s);
	live_board_free(b);
	free(p);
}

/* [::1] is served too, its address written with brackets. */
static void test_server_ipv6(void **state)
{
	live_board_t *b;
	metrics_server_t *s = NULL;
	char err[256], *text, *got;
	int rc;

	(void)state;
	assert_int_equal(live_board_new(&b), 0);
	rc = metrics_server_start(&s, "[::1]:0", 0, b, err, sizeof err);
	if (rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT) {
		live_board_free(b);
		skip(); /* no IPv6 loopback on this machine */
	}
	assert_int_equal(rc, 0);
	assert_int_equal(strncmp(metrics_server_address(s), "[::1]:", 6), 0);
	assert_int_equal(live_board_put(b, sample_view(123456789)), 0);
	{
		const struct live_view *held = live_board_acquire(b);
		render_ok(held, &text);
		live_board_release(b, held);
	}
	assert_int_equal(curl(s, "-f", "/metrics", &got), 0);
	assert_string_equal(got, text);
	free(got);
	free(text);
	metrics_server_stop(s);
	live_board_free(b);
}

/* Addresses refused: malformed, not loopback (unless allowed), in use. */
static void test_server_addresses(void **state)
{
	live_board_t *b;
	metrics_server_t *s = NULL, *t = NULL;
	char err[256];

	(void)state;
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(metrics_server_start(&s, "127.0.0.1", 0, b, err, sizeof err), -EINVAL);
	assert_true(strlen(err) > 0);
	assert_int_equal(metrics_server_start(&s, "127.0.0.1:99999", 0, b, err, sizeof err), -EINVAL);
	assert_int_equal(metrics_server_start(&s, "127.0.0.1:9x", 0, b, err, sizeof err), -EINVAL);
	assert_int_equal(metrics_server_start(&s, ":9464", 0, b, err, sizeof err), -EINVAL);
	assert_int_equal(metrics_server_start(&s, "[::1:9464", 0, b, err, sizeof err), -EINVAL);
	assert_int_equal(metrics_server_start(&s, "::1:9464", 0, b, err, sizeof err), -EINVAL);
	assert_int_equal(metrics_server_start(&s, "0.0.0.0:0", 0, b, err, sizeof err), -EPERM);
	assert_non_null(strstr(err, "loopback"));
	assert_int_equal(metrics_server_start(&s, "[::]:0", 0, b, err, sizeof err), -EPERM);
	/* Loopback by name. */
	assert_int_equal(metrics_server_start(&s, "localhost:0", 0, b, err, sizeof err), 0);
	metrics_server_stop(s);
	s = NULL;

	/* The port of a running server is in use. */
	assert_int_equal(metrics_server_start(&s, "127.0.0.1:0", 0, b, err, sizeof err), 0);
	assert_int_equal(metrics_server_start(&t, metrics_server_address(s), 0, b, err, sizeof err), -EADDRINUSE);
	assert_non_null(strstr(err, metrics_server_address(s)));
	assert_null(t);
	metrics_server_stop(s);
	metrics_server_stop(NULL);
	live_board_free(b);
}

/* A client that sends half a request and stops is hung up on (the
 * connection timeout), and the server goes on answering others. */
static void test_server_stuck_client(void **state)
{
	live_board_t *b;
	metrics_server_t *s = NULL;
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct pollfd pfd;
	char err[256], c, *text, *got;
	int fd;

	(void)state;
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(metrics_server_start(&s, "127.0.0.1:0", 0, b, err, sizeof err), 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)atoi(strchr(metrics_server_address(s), ':') + 1));
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(write(fd, "GET /metr", 9), 9);

	/* Others are served meanwhile. */
	render_ok(NULL, &text);
	assert_int_equal(curl(s, "-f", "/metrics", &got), 0);
	assert_string_equal(got, text);
	free(got);
	free(text);

	/* The server closes the stuck one: wait for it, generously. */
	pfd = (struct pollfd){.fd = fd, .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 120000), 1);
	assert_true(read(fd, &c, 1) <= 0);
	close(fd);
	metrics_server_stop(s);
	live_board_free(b);
}

/* What a slow client does to every one of fds, in a child process: a byte
 * of its request line now and then, well inside the server's 5 s timeout,
 * so that each connection stays busy (a slowloris). It ends when killed,
 * when the test ends (a failed assertion too), or after two minutes. */
static void trickle(const int *fds, int n)
{
	struct timespec pause = {.tv_sec = 0, .tv_nsec = 200000000L};

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (int round = 0; round < 600; round++) {
		for (int i = 0; i < n; i++)
			(void)send(fds[i], "x", 1, MSG_NOSIGNAL);
		nanosleep(&pause, NULL);
	}
	_exit(0);
}

/* One host's slow connections take at most 4 of the 16 slots: with 16 of
 * 127.0.0.1 kept busy, a scrape from 127.0.0.2 is served (before the cap it
 * waited in the backlog for as long as the slow client went on). */
static void test_server_per_host(void **state)
{
	live_board_t *b;
	metrics_server_t *s = NULL;
	struct sockaddr_in a = {.sin_family = AF_INET};
	char err[256], *text, *got;
	int fds[16], status;
	pid_t slow;

	(void)state;
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(metrics_server_start(&s, "127.0.0.1:0", 0, b, err, sizeof err), 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)atoi(strchr(metrics_server_address(s), ':') + 1));
	for (int i = 0; i < 16; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		assert_true(fds[i] >= 0);
		assert_int_equal(connect(fds[i], (struct sockaddr *)&a, sizeof a), 0);
		assert_int_equal(write(fds[i], "GET /metr", 9), 9);
	}
	slow = fork();
	assert_true(slow >= 0);
	if (slow == 0)
		trickle(fds, 16);
	render_ok(NULL, &text);
	assert_int_equal(curl(s, "-f --interface 127.0.0.2", "/metrics", &got), 0);
	assert_string_equal(got, text);
	free(got);
	free(text);
	kill(slow, SIGKILL);
	assert_int_equal(waitpid(slow, &status, 0), slow);
	for (int i = 0; i < 16; i++)
		close(fds[i]);
	metrics_server_stop(s);
	live_board_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_render_empty),	cmocka_unit_test(test_render_view),
	    cmocka_unit_test(test_render_undecided),	cmocka_unit_test(test_server_scrape),
	    cmocka_unit_test(test_server_ipv6),		cmocka_unit_test(test_server_addresses),
	    cmocka_unit_test(test_server_stuck_client), cmocka_unit_test(test_documented),
	    cmocka_unit_test(test_server_per_host),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
