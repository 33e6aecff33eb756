/*
 * viewer_test.c - collector/viewer: the viewer endpoint over a board whose
 * views the test puts by hand.
 *
 *   - viewer_render's line is strict JSON that validates against
 *     docs/live-schema.json and keeps the relations docs/live.md promises
 *     (tests/e2e/live_snapshot_check.py), strings escaped to valid UTF-8;
 *     the checker refuses a view whose figures do not add up, and a
 *     duplicate key;
 *   - a viewer gets the latest snapshot at once, then newer generations,
 *     rising, up to the last one put, every line whole;
 *   - a viewer that does not read while 2,000 large views are put neither
 *     stops the putter nor gets a half line: it misses snapshots (counted
 *     skipped) and then reads whole lines up to the last generation;
 *   - a peer of another user is refused and counted (root only: the child
 *     connects as user nobody), the socket's folder must be the user's own
 *     and 0700, the socket file is 0600 whatever the umask;
 *   - a viewer that writes, or goes, is closed; stop ends every viewer's
 *     stream and removes the socket; the client refuses lines of another
 *     protocol and a half line at the end.
 *
 * No timing: the test waits for counts and lines (generous timeouts).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/live.h"
#include "collector/viewer.h"
#include "common/record.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOBODY 65534
/* What a test waits at most for a condition it then asserts. */
#define WAIT_MS 30000

static char tmpdir[64];
static char sock_dir[128];
static char sock_path[160];

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/fss_viewer_test.XXXXXX");
	if (!mkdtemp(tmpdir)) /* mkdtemp makes it 0700 */
		return -1;
	snprintf(sock_dir, sizeof(sock_dir), "%s/run", tmpdir);
	if (mkdir(sock_dir, 0700) < 0 || chmod(sock_dir, 0700) < 0)
		return -1;
	snprintf(sock_path, sizeof(sock_path), "%s/viewer.sock", sock_dir);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- views built by hand ------------------------------------------------- */

struct view_shape {
	size_t nranks;
	size_t nstrip; /* strip events per rank */
	int diagnosed;
	int hostile_text; /* findings and names with quotes, controls, bad UTF-8 */
	int inconsistent; /* records_dropped_total off by one */
};

static void fill_rank(struct live_rank *r, size_t i, size_t nranks, const struct view_shape *shape)
{
	/* The last rank is not known yet: it sorts last. */
	r->rank = i + 1 < nranks ? (int32_t)i : -1;
	r->source = (uint32_t)i;
	r->pid = 1000 + (uint32_t)i;
	r->ended = i == 0;
	r->collectives = 50 + i;
	r->records = r->collectives + 10;
	r->dropped = i;
	r->collectives_missing = i % 2;
	r->last_ns = 9000000 + i;
	r->lateness_ns = i % 2 ? -1500 : 2500;
	r->ncomms = 2;
	for (size_t c = 0; c < r->ncomms; c++) {
		r->comms[c].id_hash = 0xfedcba9876543210ull + c;
		r->comms[c].nranks = (uint32_t)nranks;
		r->comms[c].rank = (int32_t)i;
		r->comms[c].role = c == 0 ? 1 : 8; /* fsdp, step */
		r->comms[c].collectives = c == 0 ? 40 : 10;
		r->comms[c].last_seq = r->comms[c].collectives;
	}
	/* Five steps, the second left out: the totals are of the other four. */
	r->nwindow = 5;
	r->totals.step_ns_min = UINT64_MAX;
	for (size_t s = 0; s < r->nwindow; s++) {
		struct live_step *st = &r->window[s];

		st->ordinal = (uint32_t)s;
		st->excluded = s == 1;
		st->start_ns = 1000000 * (s + 1);
		st->step_ns = 900000 + 1000 * s + i;
		st->allgathers = 24;
		st->microbatches = s % 2 ? 0 : 2;
		st->allgather_ns = 300000;
		st->exposed_allgather_ns = 20000 + s;
		st->compute_wait_ns = 15000;
		st->compute_ns = 600000;
		st->exposed_comm_ns = 30000;
		if (st->excluded) {
			r->totals.steps_excluded++;
			continue;
		}
		r->totals.steps++;
		r->totals.step_ns_sum += st->step_ns;
		if (st->step_ns < r->totals.step_ns_min)
			r->totals.step_ns_min = st->step_ns;
		if (st->step_ns > r->totals.step_ns_max)
			r->totals.step_ns_max = st->step_ns;
		r->totals.allgathers_sum += st->allgathers;
		r->totals.exposed_allgather_ns_sum += st->exposed_allgather_ns;
		r->totals.compute_wait_ns_sum += st->compute_wait_ns;
		r->totals.compute_ns_sum += st->compute_ns;
	}
	r->last = r->window[r->nwindow - 1];
	r->nstrip = shape->nstrip;
	for (size_t e = 0; e < r->nstrip; e++) {
		struct live_event *ev = &r->strip[e];

		ev->start_ns = 5000000 + 1000 * e;
		ev->end_ns = ev->start_ns + 700;
		ev->op = (uint8_t)(1 + e % 3);
		ev->phase = (uint8_t)(e % 3);
		ev->calls = (uint16_t)(1 + e % 2);
		ev->unit = e % 5 == 0 ? UINT32_MAX : (uint32_t)(e / 8);
		ev->bytes = 1u << 20;
		ev->exposed_ns = e % 700;
	}
}

/* A malloc'd view the board can take (live_board_put). */
static struct live_view *make_view(const struct view_shape *shape)
{
	struct live_view *v = calloc(1, sizeof(*v));
	struct live_job *j;

	assert_non_null(v);
	v->ranks = calloc(shape->nranks ? shape->nranks : 1, sizeof(*v->ranks));
	assert_non_null(v->ranks);
	v->nranks = shape->nranks;
	v->generation = 1;
	v->at_ns = 123456789;
	v->at_realtime_ns = 1764547200000000000ull; /* past 2^53: JSON integers hold it, doubles do not */
	j = &v->job;
	for (size_t i = 0; i < v->nranks; i++) {
		fill_rank(&v->ranks[i], i, v->nranks, shape);
		j->records_total += v->ranks[i].records;
		j->records_dropped_total += v->ranks[i].dropped;
	}
	j->records_total += 3; /* the session's own records, of no rank */
	if (shape->inconsistent)
		j->records_dropped_total++;
	if (!shape->diagnosed)
		return v;
	j->diagnoses = 2;
	j->diagnosed = 1;
	j->verdict = 0;
	j->repeating_units = 4;
	j->gathers_per_unit = 1;
	j->allgathers_per_step = 6;
	j->microbatches = 1;
	j->reshard = 1;
	j->exposed_allgather_ns_per_step = 80000;
	j->compute_wait_ns_per_step = 60000;
	j->nfindings = 2;
	snprintf(j->findings[0].rule, sizeof(j->findings[0].rule), "wrap-too-fine");
	j->findings[0].severity = 1;
	snprintf(j->findings[0].message, sizeof(j->findings[0].message), "12 AllGathers per step for 4 units");
	snprintf(j->findings[0].evidence, sizeof(j->findings[0].evidence), "k=3");
	snprintf(j->findings[1].rule, sizeof(j->findings[1].rule), "rank-skew");
	j->findings[1].severity = 2;
	if (shape->hostile_text) {
		/* A quote, a backslash, a newline, a control byte, a byte that is
		 * not UTF-8, an accented letter (valid UTF-8), a lone surrogate
		 * in UTF-8 form (not valid). */
		snprintf(j->findings[1].message, sizeof(j->findings[1].message),
			 "a\"b\\c\nd\x01"
			 "e\xff"
			 "f \xc3\xa9 \xed\xa0\x80");
		/* Every byte used, no NUL: the text ends with the array. */
		memset(j->findings[1].evidence, 'x', sizeof(j->findings[1].evidence));
	}
	j->ngathers = 5;
	for (size_t g = 0; g < j->ngathers; g++) {
		j->gathers[g].unit = g == 0 ? UINT32_MAX : (uint32_t)(g - 1);
		j->gathers[g].bytes = 4096 * (g + 1);
		j->gathers[g].exposed_ns = 100 * g;
		snprintf(j->gathers[g].name, sizeof(j->gathers[g].name), g == 0 ? "embed" : "layers.%zu", g - 1);
	}
	if (shape->hostile_text)
		memset(j->gathers[4].name, 'n', sizeof(j->gathers[4].name));
	return v;
}

/* ---- helpers -------------------------------------------------------------- */

static void write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/*
 * live_snapshot_check.py on `path`. With want NULL it must pass; otherwise
 * it must fail and say `want` (so that it fails for the reason meant).
 */
static void snapshot_check(const char *path, const char *want)
{
	char cmd[1024], check[256], out[4096] = "";
	size_t n = 0;
	FILE *f;
	int st;

	snprintf(check, sizeof(check), "%s.check", path);
	snprintf(cmd, sizeof(cmd), "python3 '%s' '%s' '%s' >'%s' 2>&1", FSS_LIVE_CHECK, FSS_LIVE_SCHEMA, path, check);
	st = system(cmd);
	f = fopen(check, "r");
	if (f) {
		n = fread(out, 1, sizeof(out) - 1, f);
		fclose(f);
	}
	out[n] = '\0';
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) != (want ? 1 : 0) || (want && !strstr(out, want)))
		print_message("live_snapshot_check on %s (wanted %s):\n%s\n", path, want ? want : "valid", out);
	assert_int_equal(WEXITSTATUS(st), want ? 1 : 0);
	if (want)
		assert_non_null(strstr(out, want));
	else
		assert_non_null(strstr(out, "valid (jsonschema and the built-in validator)"));
}

static uint64_t generation_of(const char *json)
{
	const char *p = strstr(json, "\"generation\":");

	assert_non_null(p);
	return strtoull(p + strlen("\"generation\":"), NULL, 10);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

enum stat_field { ST_ACCEPTED, ST_REFUSED, ST_OPEN, ST_SENT, ST_SKIPPED, ST_SENT_PLUS_SKIPPED };

static uint64_t stat_of(viewer_server_t *s, enum stat_field f)
{
	struct viewer_stats st;

	viewer_server_stats(s, &st);
	switch (f) {
	case ST_ACCEPTED:
		return st.accepted;
	case ST_REFUSED:
		return st.refused;
	case ST_OPEN:
		return st.open;
	case ST_SENT:
		return st.sent;
	case ST_SKIPPED:
		return st.skipped;
	default:
		return st.sent + st.skipped;
	}
}

/* Wait until the server's count reaches `want` (WAIT_MS at most); the
 * caller asserts the count. */
static uint64_t wait_stat(viewer_server_t *s, enum stat_field f, uint64_t want)
{
	for (int waited = 0; stat_of(s, f) != want && waited < WAIT_MS; waited++)
		sleep_ms(1);
	return stat_of(s, f);
}

static void set_sun_path(struct sockaddr_un *sun, const char *path)
{
	size_t n = strlen(path);

	assert_true(n < sizeof(sun->sun_path));
	memcpy(sun->sun_path, path, n + 1);
}

static int raw_connect(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	set_sun_path(&sun, path);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/* Read fd until its end (WAIT_MS at most): the bytes read, -1 on timeout. */
static long read_to_eof(int fd)
{
	char buf[65536];
	long total = 0;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, WAIT_MS) != 1)
			return -1;
		n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			return n == 0 || errno == ECONNRESET ? total : -1;
		total += n;
	}
}

/* ---- rendering ------------------------------------------------------------- */

static void test_render(void **state)
{
	struct view_shape diagnosed = {.nranks = 3, .nstrip = 20, .diagnosed = 1, .hostile_text = 1};
	struct view_shape early = {.nranks = 2, .nstrip = 0};
	struct view_shape none = {.nranks = 0};
	struct view_shape wrong = {.nranks = 2, .nstrip = 3, .diagnosed = 1, .inconsistent = 1};
	struct live_view *v;
	char path[256], *json, *both;
	size_t len, len2;
	char *json2;
	char evidence[LIVE_EVIDENCE_BYTES + 1];

	(void)state;
	v = make_view(&diagnosed);
	assert_int_equal(viewer_render(v, &json, &len), 0);
	live_view_free(v);
	assert_int_equal(strlen(json), len);
	/* One line, '\n' ended, the schema first. */
	assert_true(len > 2 && json[len - 1] == '\n' && json[len - 2] == '}');
	assert_ptr_equal(strchr(json, '\n'), json + len - 1);
	assert_memory_equal(json, "{\"schema\":\"fsdpscope.live/2\",\"generation\":1,", 43);
	/* Escapes: every byte that is not valid UTF-8 as \u00XX, valid UTF-8 kept. */
	assert_non_null(strstr(json, "\"message\":\"a\\\"b\\\\c\\nd\\u0001e\\u00fff \xc3\xa9 \\u00ed\\u00a0\\u0080\""));
	/* A text that fills its array, with no NUL, ends with the array. */
	memset(evidence, 'x', LIVE_EVIDENCE_BYTES);
	evidence[LIVE_EVIDENCE_BYTES] = '\0';
	{
		char want[LIVE_EVIDENCE_BYTES + 32];

		snprintf(want, sizeof(want), "\"evidence\":\"%s\"}", evidence);
		assert_non_null(strstr(json, want));
	}
	assert_non_null(strstr(json, "\"at_realtime_ns\":1764547200000000000,"));
	assert_non_null(strstr(json, "\"id_hash\":\"fedcba9876543210\""));
	assert_non_null(strstr(json, "\"rank\":null"));
	assert_non_null(strstr(json, "\"lateness_ns\":-1500"));

	v = make_view(&early);
	v->generation = 2; /* the checker wants rising generations within a file */
	assert_int_equal(viewer_render(v, &json2, &len2), 0);
	live_view_free(v);
	assert_non_null(strstr(json2, "\"diagnosed\":false,\"verdict\":null,"));
	both = malloc(len + len2 + 1);
	assert_non_null(both);
	memcpy(both, json, len);
	memcpy(both + len, json2, len2);
	assert_memory_equal(both + len, "{\"schema\":\"fsdpscope.live/2\",\"generation\":2,", 43);
	snprintf(path, sizeof(path), "%s/render.jsonl", tmpdir);
	write_file(path, both, len + len2);
	snapshot_check(path, NULL);
	free(both);
	free(json2);

	/* A view of no rank yet. */
	v = make_view(&none);
	assert_int_equal(viewer_render(v, &json2, &len2), 0);
	live_view_free(v);
	snprintf(path, sizeof(path), "%s/empty.jsonl", tmpdir);
	write_file(path, json2, len2);
	snapshot_check(path, NULL);
	free(json2);

	/* The checker can fail: figures that do not add up, a duplicate key. */
	v = make_view(&wrong);
	assert_int_equal(viewer_render(v, &json2, &len2), 0);
	live_view_free(v);
	snprintf(path, sizeof(path), "%s/wrong.jsonl", tmpdir);
	write_file(path, json2, len2);
	snapshot_check(path, "records_dropped_total 2, the ranks' dropped add up to 1");
	free(json2);
	{
		/* The valid line with its schema key written twice. */
		char *dup = malloc(len + 32);

		assert_non_null(dup);
		memcpy(dup, "{\"schema\":\"fsdpscope.live/2\",", 29);
		memcpy(dup + 29, json + 1, len - 1);
		snprintf(path, sizeof(path), "%s/dup.jsonl", tmpdir);
		write_file(path, dup, len + 28);
		snapshot_check(path, "duplicate key 'schema'");
		free(dup);
	}
	free(json);
}

/*
 * The calls in flight of a diagnosis: a hang (rank 2 missing, three waiting)
 * and a mismatch carried in the snapshot as the view holds them, each list
 * as long as the count beside it; the checker refuses a list cut short.
 */
static void test_flight(void **state)
{
	struct view_shape shape = {.nranks = 3, .nstrip = 2, .diagnosed = 1};
	struct live_view *v = make_view(&shape);
	struct analysis_flight *f = &v->job.flight;
	struct analysis_hang *h = &f->hangs[0];
	struct analysis_mismatch *m = &f->mismatches[0];
	char path[256], *json, *cut;
	size_t len;

	(void)state;
	v->ranks[0].comms[0].entered = 41;
	v->ranks[0].comms[0].left = 40;
	f->timeout_ns = 1000000000;
	f->now_realtime_ns = 1764547200000000000ull;
	f->sources_enter = 3;
	f->in_flight = 1;
	f->nhangs = f->hangs_total = 1;
	h->comm_id = 0xfedcba9876543210ull;
	h->comm_seq = 41;
	h->count = 1024;
	h->waited_ns = 5000000000ull;
	h->nranks = 4;
	h->op = FSS_OP_ALLGATHER;
	h->dtype = FSS_DTYPE_BFLOAT16;
	for (int32_t r = 0; r < 4; r++) {
		struct analysis_flight_rank fr = {.rank = r, .source = (uint32_t)r, .pid = 100 + (uint32_t)r};

		if (r == 2) {
			fr.since_ns = 6000000000ull;
			fr.last_seq = 40;
			fr.last_op = FSS_OP_REDUCESCATTER;
			h->missing[h->nmissing++] = fr;
		} else {
			fr.since_ns = 5000000000ull;
			fr.last_seq = 41;
			fr.last_op = FSS_OP_ALLGATHER;
			fr.evidence = ANALYSIS_WAIT_HOST;
			h->waiting[h->nwaiting++] = fr;
		}
	}
	f->nmismatches = f->mismatches_total = 1;
	f->mismatched_collectives = 1;
	m->comm_id = h->comm_id;
	m->comm_seq = 7;
	m->nranks = 4;
	m->a = (struct analysis_signature){.count = 1000, .root = -1, .op = FSS_OP_ALLGATHER,
					   .dtype = FSS_DTYPE_BFLOAT16, .redop = FSS_REDOP_NONE};
	m->b = m->a;
	m->b.count = 999;
	m->na = 3;
	m->a_ranks[0] = 0;
	m->a_ranks[1] = 1;
	m->a_ranks[2] = 3;
	m->nb = 1;
	m->b_ranks[0] = 2;
	assert_int_equal(viewer_render(v, &json, &len), 0);
	live_view_free(v);
	assert_non_null(strstr(json, "\"entered\":41,\"left\":40"));
	assert_non_null(strstr(json, "\"flight\":{\"hang\":true,\"shows_waits\":true,\"timeout_ns\":1000000000,"));
	assert_non_null(strstr(json, "\"comm\":\"fedcba9876543210\",\"nranks\":4,\"comm_seq\":41,\"op\":\"AllGather\""));
	assert_non_null(strstr(json, "\"waiting_total\":3,\"waiting\":[{\"rank\":0,"));
	assert_non_null(
	    strstr(json, "\"missing_total\":1,\"missing\":[{\"rank\":2,\"source\":2,\"pid\":102,"
			 "\"since_ns\":6000000000,\"last_seq\":40,\"last_op\":\"ReduceScatter\",\"evidence\":null,"
			 "\"wait_end\":null}],\"died_total\":0,\"died\":[]"));
	/* a hang still waited in: no end; each waiting rank still waiting */
	assert_non_null(strstr(json, "\"waited_ns\":5000000000,\"ended\":null,\"waiting_total\":3"));
	assert_non_null(strstr(json, "\"evidence\":\"host\",\"wait_end\":\"waiting\"}"));
	assert_non_null(strstr(json, "\"b\":{\"op\":\"AllGather\",\"count\":999,\"dtype\":\"bfloat16\",\"root\":null,"
				     "\"redop\":null,\"ranks_total\":1,\"ranks\":[2]}"));
	snprintf(path, sizeof(path), "%s/flight.jsonl", tmpdir);
	write_file(path, json, len);
	snapshot_check(path, NULL);
	/* one waiting rank more counted than listed */
	cut = strdup(json);
	assert_non_null(cut);
	memcpy(strstr(cut, "\"waiting_total\":3") + strlen("\"waiting_total\":"), "4", 1);
	snprintf(path, sizeof(path), "%s/flight-cut.jsonl", tmpdir);
	write_file(path, cut, len);
	snapshot_check(path, "waiting: 3 items, but waiting_total is 4");
	free(cut);
	free(json);
}

/*
 * The sizes docs/live.md gives ("Size"), for full lists of realistic
 * figures (a step of 0.9 s, host times of a day's uptime, 256-rank
 * communicators), printed and held to the bounds said there.
 */
static void test_sizes(void **state)
{
	struct live_view *v = calloc(1, sizeof(*v));
	struct live_rank *r;
	char *json;
	size_t empty, full_job, one_rank;

	(void)state;
	assert_non_null(v);
	v->ranks = calloc(1, sizeof(*v->ranks));
	assert_non_null(v->ranks);
	v->generation = 123456;
	v->at_ns = 86400000000000ull;
	v->at_realtime_ns = 1764547200000000000ull;
	assert_int_equal(viewer_render(v, &json, &empty), 0);
	free(json);
	v->job.diagnosed = 1;
	v->job.diagnoses = 1000;
	v->job.nfindings = LIVE_FINDINGS_MAX;
	v->job.ngathers = LIVE_GATHERS_MAX;
	for (int i = 0; i < LIVE_FINDINGS_MAX; i++) {
		snprintf(v->job.findings[i].rule, sizeof(v->job.findings[i].rule), "wrap-too-fine");
		memset(v->job.findings[i].title, 't', 100); /* as long as the longest rule titles */
		/* the longest of today's rules: a 150-byte message, 1 kB of
		 * evidence, 1.3 kB of fixes (exposed-gather's, wrap-too-fine's) */
		memset(v->job.findings[i].message, 'm', 150);
		memset(v->job.findings[i].evidence, 'e', 1000);
		memset(v->job.findings[i].fix, 'f', 1300);
	}
	for (int i = 0; i < LIVE_GATHERS_MAX; i++) {
		v->job.gathers[i].unit = (uint32_t)i;
		v->job.gathers[i].bytes = 123456789;
		v->job.gathers[i].nranks = 256;
		v->job.gathers[i].exposed_ns = 1234567;
		snprintf(v->job.gathers[i].name, sizeof(v->job.gathers[i].name), "model.layers.%d.self_attn", i % 32);
	}
	assert_int_equal(viewer_render(v, &json, &full_job), 0);
	free(json);
	v->nranks = 1;
	r = &v->ranks[0];
	r->rank = 255;
	r->records = r->collectives = 1000000000;
	r->last_ns = 86400000000000ull;
	r->nwindow = LIVE_WINDOW;
	r->nstrip = LIVE_STRIP_MAX;
	r->ncomms = LIVE_COMMS_MAX;
	for (int i = 0; i < LIVE_WINDOW; i++) {
		struct live_step *st = &r->window[i];

		st->ordinal = 100000 + (uint32_t)i;
		st->start_ns = 86400000000000ull + (uint64_t)i * 912345678;
		st->step_ns = 912345678;
		st->allgathers = 120;
		st->microbatches = 4;
		st->allgather_ns = 312345678;
		st->exposed_allgather_ns = 12345678;
		st->compute_wait_ns = 2345678;
		st->compute_ns = 612345678;
		st->exposed_comm_ns = 22345678;
	}
	r->last = r->window[LIVE_WINDOW - 1];
	for (int i = 0; i < LIVE_STRIP_MAX; i++) {
		struct live_event *e = &r->strip[i];

		e->start_ns = 86400000000000ull + (uint64_t)i * 1000000;
		e->end_ns = e->start_ns + 1234567;
		e->op = 1;
		e->phase = 1;
		e->calls = 1;
		e->unit = (uint32_t)i / 4;
		e->bytes = 123456789;
		e->exposed_ns = 123456;
	}
	for (int i = 0; i < LIVE_COMMS_MAX; i++) {
		r->comms[i].id_hash = UINT64_MAX - (uint64_t)i;
		r->comms[i].nranks = 256;
		r->comms[i].rank = 255;
		r->comms[i].collectives = r->comms[i].last_seq = 123456789;
	}
	assert_int_equal(viewer_render(v, &json, &one_rank), 0);
	free(json);
	live_view_free(v);
	one_rank -= full_job;
	print_message("snapshot sizes: no rank, no diagnosis %zu bytes; full job lists +%zu bytes; one full rank "
		      "+%zu bytes\n",
		      empty, full_job - empty, one_rank);
	assert_true(empty < 1000);
	assert_true(full_job - empty < 110000);
	assert_true(one_rank < 100000);
}

/* ---- the server ------------------------------------------------------------ */

static void put(live_board_t *b, const struct view_shape *shape)
{
	assert_int_equal(live_board_put(b, make_view(shape)), 0);
}

#define STREAM_VIEWERS 3

static void test_stream(void **state)
{
	struct view_shape shape = {.nranks = 2, .nstrip = 8, .diagnosed = 1};
	char err[256], path[256];
	live_board_t *b;
	viewer_server_t *s;
	viewer_client_t *c[STREAM_VIEWERS];
	const char *json;
	size_t len;
	uint64_t lines = 0;
	FILE *f;

	(void)state;
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(viewer_server_start(&s, sock_path, b, err, sizeof(err)), 0);
	put(b, &shape);
	snprintf(path, sizeof(path), "%s/stream.jsonl", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	for (int i = 0; i < STREAM_VIEWERS; i++) {
		assert_int_equal(viewer_client_connect(&c[i], sock_path), 0);
		/* The first snapshot at once: no further put. */
		assert_int_equal(viewer_client_next(c[i], &json, &len, WAIT_MS), 1);
		assert_int_equal(generation_of(json), 1);
		if (i == 0)
			fprintf(f, "%s\n", json);
		lines++;
	}
	for (int i = 0; i < 50; i++)
		put(b, &shape);
	/* Each viewer: newer generations, rising, up to the last one put. */
	for (int i = 0; i < STREAM_VIEWERS; i++) {
		for (uint64_t last = 1, g; last < 51; last = g) {
			assert_int_equal(viewer_client_next(c[i], &json, &len, WAIT_MS), 1);
			assert_int_equal(strlen(json), len);
			g = generation_of(json);
			assert_true(g > last);
			if (i == 0)
				fprintf(f, "%s\n", json);
			lines++;
			if (g == 51)
				break;
		}
		/* Nothing newer: a wait times out with nothing. */
		assert_int_equal(viewer_client_next(c[i], &json, &len, 0), 0);
	}
	assert_int_equal(fclose(f), 0);
	/* What came over the socket validates, generations rising. */
	snapshot_check(path, NULL);
	/* Per viewer every generation from its first was sent or skipped, and
	 * the viewers read every one sent. */
	assert_int_equal(wait_stat(s, ST_SENT_PLUS_SKIPPED, 51 * STREAM_VIEWERS), 51 * STREAM_VIEWERS);
	assert_int_equal(stat_of(s, ST_SENT), lines);
	assert_int_equal(stat_of(s, ST_ACCEPTED), STREAM_VIEWERS);
	assert_int_equal(stat_of(s, ST_OPEN), STREAM_VIEWERS);
	/* A viewer that goes is closed. */
	for (int i = 0; i < STREAM_VIEWERS; i++)
		viewer_client_close(c[i]);
	assert_int_equal(wait_stat(s, ST_OPEN, 0), 0);
	viewer_server_stop(s);
	live_board_free(b);
}

static void test_slow_viewer(void **state)
{
	/* 16 ranks of full strips: about 1.5 MB a snapshot, more than a unix
	 * socket buffers (asserted below). */
	struct view_shape shape = {.nranks = 16, .nstrip = LIVE_STRIP_MAX, .diagnosed = 1};
	char err[256], path[256], *json0;
	int sv[2], sndbuf = 0;
	socklen_t optlen = sizeof(sndbuf);
	live_board_t *b;
	viewer_server_t *s;
	viewer_client_t *c;
	const char *json;
	size_t len, len0;
	uint64_t g, last, lines;
	struct live_view *v;
	FILE *f;

	(void)state;
	v = make_view(&shape);
	assert_int_equal(viewer_render(v, &json0, &len0), 0);
	live_view_free(v);
	free(json0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, &optlen), 0);
	close(sv[0]);
	close(sv[1]);
	assert_true(len0 > 2 * (size_t)sndbuf);

	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(viewer_server_start(&s, sock_path, b, err, sizeof(err)), 0);
	put(b, &shape);
	assert_int_equal(viewer_client_connect(&c, sock_path), 0);
	assert_int_equal(viewer_client_next(c, &json, &len, WAIT_MS), 1);
	assert_int_equal(generation_of(json), 1);
	/* The viewer stops reading; the putter goes on: the puts complete. */
	for (int i = 0; i < 2000; i++)
		put(b, &shape);
	/* A snapshot does not fit the socket: at most the one in flight when the
	 * reader stopped, and none since, were written whole. */
	assert_true(stat_of(s, ST_SENT) <= 2);
	/* Reading again: whole lines, rising, up to the last generation. */
	snprintf(path, sizeof(path), "%s/slow.jsonl", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	last = 1;
	lines = 1;
	while (last < 2001) {
		assert_int_equal(viewer_client_next(c, &json, &len, WAIT_MS), 1);
		g = generation_of(json);
		assert_true(g > last);
		last = g;
		lines++;
		fprintf(f, "%s\n", json);
	}
	assert_int_equal(fclose(f), 0);
	assert_int_equal(last, 2001);
	assert_true(lines < 10);
	snapshot_check(path, NULL);
	assert_int_equal(wait_stat(s, ST_SENT_PLUS_SKIPPED, 2001), 2001);
	assert_int_equal(stat_of(s, ST_SENT), lines);
	assert_true(stat_of(s, ST_SKIPPED) > 0);
	viewer_client_close(c);
	viewer_server_stop(s);
	live_board_free(b);
}

/* A viewer that writes is cut; stop ends the others' streams. */
static void test_close_and_stop(void **state)
{
	struct view_shape shape = {.nranks = 1, .nstrip = 4};
	char err[256];
	live_board_t *b;
	viewer_server_t *s;
	viewer_client_t *c;
	const char *json;
	size_t len;
	int fd;
	struct stat st;

	(void)state;
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(viewer_server_start(&s, sock_path, b, err, sizeof(err)), 0);
	put(b, &shape);
	fd = raw_connect(sock_path);
	assert_true(fd >= 0);
	assert_int_equal(wait_stat(s, ST_OPEN, 1), 1);
	assert_int_equal(write(fd, "hello\n", 6), 6);
	/* Its snapshot, maybe, then the end. */
	assert_true(read_to_eof(fd) >= 0);
	close(fd);
	assert_int_equal(wait_stat(s, ST_OPEN, 0), 0);

	/* A viewer that goes in the middle of a line: a view larger than the
	 * socket takes, never read. */
	{
		struct view_shape big = {.nranks = 16, .nstrip = LIVE_STRIP_MAX};
		uint64_t sent = stat_of(s, ST_SENT);
		char byte = 0;

		fd = raw_connect(sock_path);
		assert_true(fd >= 0);
		/* First the small view on the board, whole. */
		while (byte != '\n')
			assert_int_equal(read(fd, &byte, 1), 1);
		assert_int_equal(wait_stat(s, ST_SENT, sent + 1), sent + 1);
		put(b, &big);
		close(fd);
		assert_int_equal(wait_stat(s, ST_OPEN, 0), 0);
		assert_int_equal(stat_of(s, ST_SENT), sent + 1);
	}

	assert_int_equal(viewer_client_connect(&c, sock_path), 0);
	assert_int_equal(viewer_client_next(c, &json, &len, WAIT_MS), 1);
	/* A second session cannot take the path of a live one. */
	{
		viewer_server_t *t;

		assert_int_equal(viewer_server_start(&t, sock_path, b, err, sizeof(err)), -EADDRINUSE);
		assert_non_null(strstr(err, sock_path));
	}
	viewer_server_stop(s);
	assert_int_equal(viewer_client_next(c, &json, &len, WAIT_MS), -EPIPE);
	viewer_client_close(c);
	assert_int_equal(lstat(sock_path, &st), -1);
	assert_int_equal(errno, ENOENT);
	live_board_free(b);
}

/* The child's side of test_peer_refused: exit 0 when what it met is what
 * the test wants. */
static int refused_child(int keep_fs_root)
{
	int fd;

	if (setgroups(0, NULL) < 0 || setegid(NOBODY) < 0 || seteuid(NOBODY) < 0)
		return 10;
	if (!keep_fs_root) {
		/* The folder keeps user nobody from the socket itself. */
		fd = raw_connect(sock_path);
		return fd == -EACCES ? 0 : 11;
	}
	/* Through the folder with root's file-system identity, as user nobody
	 * to SO_PEERCRED (the effective uid): the server must refuse it. */
	setfsuid(0);
	if ((int)setfsuid((uid_t)-1) != 0)
		return 12;
	fd = raw_connect(sock_path);
	if (fd < 0)
		return 13;
	/* Refused: closed without a byte, though a view is on the board. */
	return read_to_eof(fd) == 0 ? 0 : 14;
}

static void test_peer_refused(void **state)
{
	struct view_shape shape = {.nranks = 1, .nstrip = 2};
	char err[256];
	live_board_t *b;
	viewer_server_t *s;
	viewer_client_t *c;
	const char *json;
	size_t len;

	(void)state;
	if (geteuid() != 0) {
		print_message("skipped: connecting as user nobody needs root\n");
		skip();
	}
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(viewer_server_start(&s, sock_path, b, err, sizeof(err)), 0);
	put(b, &shape);
	for (int keep_fs_root = 0; keep_fs_root <= 1; keep_fs_root++) {
		int status;
		pid_t child = fork();

		assert_true(child >= 0);
		if (child == 0)
			_exit(refused_child(keep_fs_root));
		assert_int_equal(waitpid(child, &status, 0), child);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	assert_int_equal(wait_stat(s, ST_REFUSED, 1), 1);
	assert_int_equal(stat_of(s, ST_ACCEPTED), 0);
	assert_int_equal(stat_of(s, ST_SENT), 0);
	/* The user itself still gets in. */
	assert_int_equal(viewer_client_connect(&c, sock_path), 0);
	assert_int_equal(viewer_client_next(c, &json, &len, WAIT_MS), 1);
	viewer_client_close(c);
	assert_int_equal(stat_of(s, ST_ACCEPTED), 1);
	viewer_server_stop(s);
	live_board_free(b);
}

static void test_folder(void **state)
{
	char err[256], dir[160], path[200];
	live_board_t *b;
	viewer_server_t *s;
	struct stat st;
	mode_t old;

	(void)state;
	assert_int_equal(live_board_new(&b), 0);
	/* A folder others can enter. */
	snprintf(dir, sizeof(dir), "%s/open", tmpdir);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(chmod(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/v.sock", dir);
	assert_int_equal(viewer_server_start(&s, path, b, err, sizeof(err)), -EPERM);
	assert_null(s);
	assert_non_null(strstr(err, "0755"));
	assert_non_null(strstr(err, dir));
	assert_int_equal(lstat(path, &st), -1);
	/* A folder of another user. */
	if (geteuid() == 0) {
		assert_int_equal(chmod(dir, 0700), 0);
		assert_int_equal(chown(dir, NOBODY, NOBODY), 0);
		assert_int_equal(viewer_server_start(&s, path, b, err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, "belongs to user 65534"));
	} else {
		print_message("not checked: a folder of another user (needs root to make one)\n");
	}
	/* No folder; a file where the folder should be; no path at all. */
	snprintf(path, sizeof(path), "%s/missing/v.sock", tmpdir);
	assert_int_equal(viewer_server_start(&s, path, b, err, sizeof(err)), -ENOENT);
	snprintf(dir, sizeof(dir), "%s/file", tmpdir);
	write_file(dir, "x", 1);
	snprintf(path, sizeof(path), "%s/file/v.sock", tmpdir);
	assert_int_equal(viewer_server_start(&s, path, b, err, sizeof(err)), -ENOTDIR);
	assert_int_equal(viewer_server_start(&s, "unix:@fss-viewer", b, err, sizeof(err)), -EINVAL);
	/* The folder is right: the socket is 0600 whatever the umask. */
	for (int i = 0; i < 2; i++) {
		old = umask(i == 0 ? 0 : 0777);
		assert_int_equal(viewer_server_start(&s, sock_path, b, err, sizeof(err)), 0);
		umask(old);
		assert_int_equal(lstat(sock_path, &st), 0);
		assert_true(S_ISSOCK(st.st_mode));
		assert_int_equal(st.st_mode & 07777, 0600);
		viewer_server_stop(s);
	}
	live_board_free(b);
}

/* ---- the client ------------------------------------------------------------ */

static void test_client_protocol(void **state)
{
	static const char other[] = "{\"schema\":\"fsdpscope.live/1\",\"generation\":1}\n";
	static const char good[] = "{\"schema\":\"fsdpscope.live/2\",\"generation\":7}\n";
	static const char half[] = "{\"schema\":\"fsdpscope.live/2\",\"gener";
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char path[200];
	viewer_client_t *c;
	const char *json;
	size_t len;
	int l, fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/fake.sock", sock_dir);
	set_sun_path(&sun, path);
	l = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(viewer_client_connect(&c, path), 0);
	fd = accept(l, NULL, NULL);
	assert_true(fd >= 0);
	assert_int_equal(viewer_client_next(c, &json, &len, 0), 0);
	assert_int_equal(write(fd, other, sizeof(other) - 1), (ssize_t)(sizeof(other) - 1));
	assert_int_equal(write(fd, good, sizeof(good) - 1), (ssize_t)(sizeof(good) - 1));
	assert_int_equal(write(fd, half, sizeof(half) - 1), (ssize_t)(sizeof(half) - 1));
	close(fd);
	assert_int_equal(viewer_client_next(c, &json, &len, WAIT_MS), -EPROTO);
	assert_int_equal(viewer_client_next(c, &json, &len, WAIT_MS), 1);
	assert_int_equal(len, sizeof(good) - 2);
	assert_string_equal(json, "{\"schema\":\"fsdpscope.live/2\",\"generation\":7}");
	/* A half line at the end is no snapshot. */
	assert_int_equal(viewer_client_next(c, &json, &len, WAIT_MS), -EPIPE);
	viewer_client_close(c);
	close(l);
	unlink(path);
	assert_int_equal(viewer_client_connect(&c, path), -ENOENT);
	assert_int_equal(viewer_client_connect(&c, "tcp:127.0.0.1:1"), -EINVAL);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_render),
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_flight),
	    cmocka_unit_test(test_stream),
	    cmocka_unit_test(test_slow_viewer),
	    cmocka_unit_test(test_close_and_stop),
	    cmocka_unit_test(test_peer_refused),
	    cmocka_unit_test(test_folder),
	    cmocka_unit_test(test_client_protocol),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, setup, teardown);
}
