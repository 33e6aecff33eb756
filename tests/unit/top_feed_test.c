/*
 * top_feed_test.c - the feeds of `fsdpscope top` (tui/feeds.h, cli/top_run.h)
 * on real jobs: fsdp_ref per-Linear under `fsdpscope run` gives the trace.
 *
 *   replay_step_keys     each step() shows one more step; the end equals lint --json
 *   replay_once          --once: one view, the end's; --once --step N: step N's
 *   viewer_roundtrip     a real state's snapshot decodes into the view the board held
 *   viewer_feed_socket   the feed over a real viewer socket: the same view; the session
 *                        ending leaves it, job state unknown
 *   viewer_bad_lines     lines that do not decode are errors (and the feed fails on one)
 *   viewer_connect_errors no socket, not a socket, a socket that is not a viewer's
 *   run_log_stdin        run mode: the job's output in the log file, its stdin closed
 *   run_quit_stop        quit STOP: SIGTERM to the job, reaped, the trace written
 *   run_quit_leave       quit LEAVE: recorded to the job's end, the trace complete
 *
 * No test depends on timing: waits are for conditions, with generous bounds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cli/session.h"
#include "cli/top_run.h"
#include "collector/viewer.h"
#include "tui/feeds.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FSS_FSDPSCOPE
#error "FSS_FSDPSCOPE, FSS_FSDP_REF and FSS_AGENT are set by tests/unit/top.cmake"
#endif

#define STEPS 6
/* Generous: a condition that takes this long is a failure, not a slow machine. */
#define WAIT_MS 120000

static char tmp[256], trace[300], lint_json[300];

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int group_setup(void **state)
{
	(void)state;
	snprintf(tmp, sizeof(tmp), "/tmp/top_feed_test.XXXXXX");
	if (!mkdtemp(tmp))
		return -1;
	setenv("FSDPSCOPE_AGENT", FSS_AGENT, 1);
	snprintf(trace, sizeof(trace), "%s/lin.fss", tmp);
	snprintf(lint_json, sizeof(lint_json), "%s/lint.json", tmp);
	if (sh("%s run --out %s --name lin -- %s --backend cpu --nranks 2 --layers 4 --wrap linear --steps %d --quiet "
	       ">/dev/null 2>%s/run.err",
	       FSS_FSDPSCOPE, tmp, FSS_FSDP_REF, STEPS, tmp))
		return -1;
	/* lint exits 1 on an error finding: that is the point of the trace */
	sh("%s lint --json %s > %s", FSS_FSDPSCOPE, trace, lint_json);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	sh("rm -rf %s", tmp);
	return 0;
}

/* The newest view, waiting for the first. */
static const struct live_view *first_view(struct top_feed *f)
{
	int64_t end = now_ms() + WAIT_MS;
	const struct live_view *v;

	while (!(v = f->acquire(f->ctx)) && now_ms() < end)
		f->wait(f->ctx, 100);
	return v;
}

static json_t *load_lint(void)
{
	json_error_t e;
	json_t *j = json_load_file(lint_json, JSON_REJECT_DUPLICATES, &e);

	assert_non_null(j);
	return j;
}

static const struct live_finding *finding(const struct live_view *v, const char *rule)
{
	for (size_t i = 0; i < v->job.nfindings; i++)
		if (!strcmp(v->job.findings[i].rule, rule))
			return &v->job.findings[i];
	return NULL;
}

/* The final view says what lint says: units, gathers per unit, steps per rank, the findings. */
static void assert_equals_lint(const struct live_view *v)
{
	json_t *j = load_lint(), *units = json_object_get(j, "units"), *per_rank = json_object_get(j, "per_rank"), *e;
	json_t *findings = json_object_get(j, "findings");
	const struct live_finding *wtf;
	size_t i;

	assert_true(v->job.diagnosed);
	assert_int_equal(v->job.repeating_units, json_integer_value(json_object_get(units, "repeating_units")));
	assert_int_equal(v->job.gathers_per_unit, json_integer_value(json_object_get(units, "gathers_per_unit")));
	assert_int_equal(v->job.gathers_per_unit, 8); /* per Linear: 8 gathers per block */
	assert_int_equal(v->job.nfindings, json_array_size(findings));
	json_array_foreach(findings, i, e)
	{
		assert_string_equal(v->job.findings[i].rule, json_string_value(json_object_get(e, "rule")));
		assert_string_equal(v->job.findings[i].title, json_string_value(json_object_get(e, "title")));
		assert_string_equal(v->job.findings[i].message, json_string_value(json_object_get(e, "message")));
	}
	wtf = finding(v, "wrap-too-fine");
	assert_non_null(wtf);
	assert_non_null(strstr(wtf->evidence, "8 gathers per repeating unit"));
	assert_non_null(strstr(wtf->fix, "fully_shard"));
	assert_non_null(strstr(wtf->fix, "FSDP1:"));
	/* every rank lint analysed, with its steps */
	json_array_foreach(per_rank, i, e)
	{
		int rank = (int)json_integer_value(json_object_get(e, "rank"));
		size_t k;

		for (k = 0; k < v->nranks && v->ranks[k].rank != rank; k++)
			;
		assert_true(k < v->nranks);
		assert_int_equal(v->ranks[k].totals.steps, json_integer_value(json_object_get(e, "steps_analyzed")));
		assert_int_equal(v->ranks[k].last.ordinal + 1, STEPS);
		assert_string_not_equal(v->ranks[k].host, "");
		assert_string_not_equal(v->ranks[k].command, "");
	}
	json_decref(j);
}

static void replay_step_keys(void **state)
{
	struct top_replay_options o = {.speed = 0, .step_keys = 1};
	const char *paths[] = {trace};
	top_replay_feed_t *rf;
	struct top_feed f;
	struct top_info info;
	const struct live_view *v;
	char err[256];
	uint64_t shown, gen;
	int steps = 0, rc;

	(void)state;
	assert_int_equal(top_replay_feed_new(&rf, paths, 1, &o, err, sizeof(err)), 0);
	top_replay_feed_bind(rf, &f);
	assert_non_null(f.step);
	assert_null(f.quit);
	v = first_view(&f);
	assert_non_null(v);
	f.info(f.ctx, &info);
	assert_int_equal(info.mode, TOP_MODE_REPLAY);
	assert_int_equal(info.replay_stepping, 1);
	assert_int_equal(info.replay_step, 1);
	shown = info.replay_step;
	gen = v->generation;
	f.release(f.ctx, v);
	/* Nothing moves without the key. */
	f.wait(f.ctx, 0); /* what is news now, taken */
	assert_int_equal(f.wait(f.ctx, 50), 0);
	while ((rc = f.step(f.ctx)) == 0) {
		steps++;
		assert_int_equal(f.wait(f.ctx, 0), 1);
		v = f.acquire(f.ctx);
		f.info(f.ctx, &info);
		assert_true(v->generation == gen + 1);
		gen = v->generation;
		if (info.job_state == TOP_JOB_RUNNING) {
			/* one more step, and every rank has completed it */
			assert_int_equal(info.replay_step, shown + 1);
			for (size_t i = 0; i < v->nranks; i++)
				if (v->ranks[i].collectives)
					assert_true(v->ranks[i].last.ordinal + 1 >= info.replay_step);
		}
		shown = info.replay_step;
		f.release(f.ctx, v);
		assert_true(steps < 1000);
	}
	assert_int_equal(rc, -ENODATA);
	f.info(f.ctx, &info);
	assert_int_equal(info.job_state, TOP_JOB_ENDED);
	assert_int_equal(info.replay_step, STEPS);
	assert_int_equal(info.replay_steps, STEPS);
	v = f.acquire(f.ctx);
	assert_equals_lint(v);
	f.release(f.ctx, v);
	top_replay_feed_free(rf);
}

static void replay_once(void **state)
{
	const char *paths[] = {trace};
	struct top_replay_options o = {.speed = 0, .only_end = 1};
	top_replay_feed_t *rf;
	struct top_feed f;
	struct top_info info;
	const struct live_view *v;
	char err[256];

	(void)state;
	assert_int_equal(top_replay_feed_new(&rf, paths, 1, &o, err, sizeof(err)), 0);
	top_replay_feed_bind(rf, &f);
	assert_null(f.step);
	v = first_view(&f);
	assert_non_null(v);
	assert_int_equal(v->generation, 1); /* the only view is the end's */
	assert_equals_lint(v);
	f.info(f.ctx, &info);
	assert_int_equal(info.nodes, 1); /* the ranks' hosts: one machine */
	f.release(f.ctx, v);
	top_replay_feed_free(rf);

	o.first_step = 3;
	assert_int_equal(top_replay_feed_new(&rf, paths, 1, &o, err, sizeof(err)), 0);
	top_replay_feed_bind(rf, &f);
	v = first_view(&f);
	assert_non_null(v);
	assert_int_equal(v->generation, 1);
	/* the info of step 3 comes with its view */
	for (int64_t end = now_ms() + WAIT_MS; now_ms() < end;) {
		f.info(f.ctx, &info);
		if (info.replay_step)
			break;
		f.wait(f.ctx, 100);
	}
	assert_int_equal(info.replay_step, 3);
	for (size_t i = 0; i < v->nranks; i++)
		if (v->ranks[i].collectives)
			assert_true(v->ranks[i].last.ordinal + 1 >= 3 && v->ranks[i].last.ordinal + 1 < STEPS);
	f.release(f.ctx, v);
	top_replay_feed_free(rf);

	/* not a trace: said before any thread starts */
	{
		char notrace[300];
		const char *bad[] = {notrace};

		snprintf(notrace, sizeof(notrace), "%s/lint.json", tmp);
		assert_int_not_equal(top_replay_feed_new(&rf, bad, 1, &o, err, sizeof(err)), 0);
		assert_non_null(strstr(err, "lint.json"));
	}
}

/* The final view of the replay: a real live state's. */
static top_replay_feed_t *final_state(struct top_feed *f, const struct live_view **v)
{
	const char *paths[] = {trace};
	struct top_replay_options o = {.speed = 0, .only_end = 1};
	top_replay_feed_t *rf;
	char err[256];

	assert_int_equal(top_replay_feed_new(&rf, paths, 1, &o, err, sizeof(err)), 0);
	top_replay_feed_bind(rf, f);
	*v = first_view(f);
	assert_non_null(*v);
	return rf;
}

/* Field by field, what the screen draws. */
static void assert_same_view(const struct live_view *a, const struct live_view *b)
{
	assert_int_equal(a->at_ns, b->at_ns);
	assert_int_equal(a->job.records_total, b->job.records_total);
	assert_int_equal(a->job.records_dropped_total, b->job.records_dropped_total);
	assert_int_equal(a->job.diagnosed, b->job.diagnosed);
	assert_int_equal(a->job.verdict, b->job.verdict);
	assert_int_equal(a->job.undecided_reason, b->job.undecided_reason);
	assert_int_equal(a->job.repeating_units, b->job.repeating_units);
	assert_int_equal(a->job.gathers_per_unit, b->job.gathers_per_unit);
	assert_int_equal(a->job.allgathers_per_step, b->job.allgathers_per_step);
	assert_int_equal(a->job.microbatches, b->job.microbatches);
	assert_int_equal(a->job.reshard, b->job.reshard);
	assert_int_equal(a->job.exposed_allgather_ns_per_step, b->job.exposed_allgather_ns_per_step);
	assert_int_equal(a->job.compute_wait_ns_per_step, b->job.compute_wait_ns_per_step);
	assert_int_equal(a->job.nfindings, b->job.nfindings);
	for (size_t i = 0; i < a->job.nfindings; i++) {
		const struct live_finding *x = &a->job.findings[i], *y = &b->job.findings[i];

		assert_string_equal(x->rule, y->rule);
		assert_int_equal(x->severity, y->severity);
		assert_string_equal(x->title, y->title);
		assert_string_equal(x->message, y->message);
		assert_string_equal(x->evidence, y->evidence);
		assert_string_equal(x->fix, y->fix);
	}
	assert_int_equal(a->job.ngathers, b->job.ngathers);
	for (size_t i = 0; i < a->job.ngathers; i++) {
		assert_int_equal(a->job.gathers[i].unit, b->job.gathers[i].unit);
		assert_int_equal(a->job.gathers[i].bytes, b->job.gathers[i].bytes);
		assert_int_equal(a->job.gathers[i].exposed_ns, b->job.gathers[i].exposed_ns);
		assert_string_equal(a->job.gathers[i].name, b->job.gathers[i].name);
	}
	assert_int_equal(a->job.flight.nhangs, b->job.flight.nhangs);
	assert_int_equal(a->job.flight.in_flight, b->job.flight.in_flight);
	assert_int_equal(a->job.flight.timeout_ns, b->job.flight.timeout_ns);
	assert_int_equal(a->nranks, b->nranks);
	for (size_t i = 0; i < a->nranks; i++) {
		const struct live_rank *x = &a->ranks[i], *y = &b->ranks[i];

		assert_int_equal(x->rank, y->rank);
		assert_int_equal(x->source, y->source);
		assert_int_equal(x->pid, y->pid);
		assert_string_equal(x->host, y->host);
		assert_string_equal(x->command, y->command);
		assert_int_equal(x->ended, y->ended);
		assert_int_equal(x->records, y->records);
		assert_int_equal(x->dropped, y->dropped);
		assert_int_equal(x->collectives, y->collectives);
		assert_int_equal(x->lateness_ns, y->lateness_ns);
		assert_memory_equal(&x->last, &y->last, sizeof(x->last));
		assert_memory_equal(&x->totals, &y->totals, sizeof(x->totals));
		assert_int_equal(x->nwindow, y->nwindow);
		assert_memory_equal(x->window, y->window, x->nwindow * sizeof(x->window[0]));
		assert_int_equal(x->ncomms, y->ncomms);
		assert_memory_equal(x->comms, y->comms, x->ncomms * sizeof(x->comms[0]));
		assert_int_equal(x->nstrip, y->nstrip);
		assert_memory_equal(x->strip, y->strip, x->nstrip * sizeof(x->strip[0]));
	}
}

static void viewer_roundtrip(void **state)
{
	struct top_feed f;
	const struct live_view *v;
	struct live_view *back;
	top_replay_feed_t *rf = final_state(&f, &v);
	char *json, err[256];
	size_t len;

	(void)state;
	assert_true(v->nranks >= 2);
	assert_int_equal(viewer_render(v, &json, &len), 0);
	assert_int_equal(top_viewer_decode(json, len - 1, &back, err, sizeof(err)), 0);
	assert_same_view(v, back);
	live_view_free(back);
	free(json);
	f.release(f.ctx, v);
	top_replay_feed_free(rf);
}

static void viewer_feed_socket(void **state)
{
	struct top_feed f, vf;
	const struct live_view *v, *got;
	top_replay_feed_t *rf = final_state(&f, &v);
	top_viewer_feed_t *feed;
	viewer_server_t *srv;
	live_board_t *board;
	struct live_view *copy;
	char path[300], addr[310], err[512];
	struct top_info info;

	(void)state;
	/* the view on a session's board, served as a session serves it */
	assert_int_equal(live_board_new(&board), 0);
	copy = malloc(sizeof(*copy));
	*copy = *v;
	copy->ranks = malloc(v->nranks * sizeof(*v->ranks));
	memcpy(copy->ranks, v->ranks, v->nranks * sizeof(*v->ranks));
	live_board_put(board, copy);
	snprintf(path, sizeof(path), "%s/vs", tmp);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/vs/viewer.sock", tmp);
	assert_int_equal(viewer_server_start(&srv, path, board, err, sizeof(err)), 0);
	snprintf(addr, sizeof(addr), "unix:%s", path);
	assert_int_equal(top_viewer_feed_new(&feed, addr, err, sizeof(err)), 0);
	top_viewer_feed_bind(feed, &vf);
	assert_null(vf.step);
	assert_null(vf.quit);
	assert_true(vf.fd(vf.ctx) >= 0);
	got = first_view(&vf);
	assert_non_null(got);
	{
		/* the board renumbers generations; everything else is the view */
		const struct live_view *held = live_board_acquire(board);

		assert_same_view(held, got);
		live_board_release(board, held);
	}
	vf.release(vf.ctx, got);
	vf.info(vf.ctx, &info);
	assert_int_equal(info.mode, TOP_MODE_CONNECT);
	assert_int_equal(info.job_state, TOP_JOB_RUNNING);
	assert_non_null(strstr(info.source, "viewer.sock"));
	/* the session goes: the job's state is unknown, the last view stays */
	live_board_close(board);
	viewer_server_stop(srv);
	for (int64_t end = now_ms() + WAIT_MS; now_ms() < end;) {
		vf.wait(vf.ctx, 100);
		vf.info(vf.ctx, &info);
		if (info.job_state != TOP_JOB_RUNNING)
			break;
	}
	assert_int_equal(info.job_state, TOP_JOB_UNKNOWN);
	got = vf.acquire(vf.ctx);
	assert_non_null(got);
	vf.release(vf.ctx, got);
	top_viewer_feed_free(feed);
	live_board_free(board);
	f.release(f.ctx, v);
	top_replay_feed_free(rf);
}

/* A server that sends `first` then `second` lines and keeps the connection open. */
struct fake {
	int lfd;
	const char *first, *second;
	int cfd;
};

static void *fake_serve(void *arg)
{
	struct fake *fk = arg;

	fk->cfd = accept(fk->lfd, NULL, NULL);
	if (fk->cfd >= 0) {
		if (fk->first && write(fk->cfd, fk->first, strlen(fk->first)) < 0)
			return NULL;
		if (fk->second && write(fk->cfd, fk->second, strlen(fk->second)) < 0)
			return NULL;
	}
	return NULL;
}

static int fake_listen(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	unlink(path);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(fd, 4), 0);
	return fd;
}

static void viewer_bad_lines(void **state)
{
	struct top_feed f;
	const struct live_view *v;
	top_replay_feed_t *rf = final_state(&f, &v);
	struct live_view *out;
	char *json, *bad, err[256], path[300], *dup;
	size_t len;

	(void)state;
	assert_int_equal(viewer_render(v, &json, &len), 0);
	/* not JSON */
	assert_int_equal(top_viewer_decode("{\"schema\":", 10, &out, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "not JSON"));
	/* another schema */
	assert_int_equal(top_viewer_decode("{\"schema\":\"other/1\"}", 20, &out, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "schema"));
	/* a duplicate key */
	assert_int_equal(asprintf(&dup, "{\"schema\":\"%s\",\"schema\":\"%s\"}", VIEWER_PROTOCOL, VIEWER_PROTOCOL) > 0,
			 1);
	assert_int_equal(top_viewer_decode(dup, strlen(dup), &out, err, sizeof(err)), -EPROTO);
	free(dup);
	/* a field of the wrong type, named with its place */
	bad = strdup(json);
	{
		char *p = strstr(bad, "\"step_ns\":");

		assert_non_null(p);
		p += strlen("\"step_ns\":");
		*p = '"'; /* "step_ns":"2... : a string where a number goes */
		p = strchr(p + 1, ',');
		*(p - 1) = '"';
	}
	assert_int_equal(top_viewer_decode(bad, len - 1, &out, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "step_ns"));
	assert_non_null(strstr(err, "ranks[0]"));
	free(bad);
	/* a missing field */
	bad = strdup(json);
	memcpy(strstr(bad, "\"host\":"), "\"hozt\":", 7);
	assert_int_equal(top_viewer_decode(bad, len - 1, &out, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "host: missing"));
	free(bad);
	/* a finding without its title, from a session of an older build: taken, the title not known */
	bad = strdup(json);
	{
		char *p = strstr(bad, "\"title\":\""), *end = p ? strstr(p, "\",") : NULL;

		assert_non_null(end);
		memmove(p, end + 2, strlen(end + 2) + 1);
	}
	assert_int_equal(top_viewer_decode(bad, strlen(bad) - 1, &out, err, sizeof(err)), 0);
	assert_true(out->job.nfindings > 0);
	assert_string_equal(out->job.findings[0].title, "");
	assert_string_equal(out->job.findings[0].rule, v->job.findings[0].rule);
	live_view_free(out);
	free(bad);

	/* the feed: a good first snapshot, then a bad line: wait fails, info says why */
	{
		struct fake fk = {.first = json, .second = "{\"schema\":\"fsdpscope.live/2\",\"generation\":\"x\"}\n"};
		pthread_t t;
		top_viewer_feed_t *feed;
		struct top_feed vf;
		struct top_info info;
		int rc = 0;

		snprintf(path, sizeof(path), "%s/fake.sock", tmp);
		fk.lfd = fake_listen(path);
		pthread_create(&t, NULL, fake_serve, &fk);
		assert_int_equal(top_viewer_feed_new(&feed, path, err, sizeof(err)), 0);
		top_viewer_feed_bind(feed, &vf);
		for (int64_t end = now_ms() + WAIT_MS; now_ms() < end && rc >= 0;)
			rc = vf.wait(vf.ctx, 100);
		assert_int_equal(rc, -EPROTO);
		vf.info(vf.ctx, &info);
		assert_non_null(strstr(info.how, "does not decode"));
		pthread_join(t, NULL);
		top_viewer_feed_free(feed);
		close(fk.cfd);
		close(fk.lfd);
	}
	free(json);
	f.release(f.ctx, v);
	top_replay_feed_free(rf);
}

static void viewer_connect_errors(void **state)
{
	top_viewer_feed_t *feed;
	char err[512], path[300];

	(void)state;
	snprintf(path, sizeof(path), "%s/none.sock", tmp);
	assert_int_equal(top_viewer_feed_new(&feed, path, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no session there"));
	/* a regular file */
	assert_int_not_equal(top_viewer_feed_new(&feed, lint_json, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "not a viewer socket"));
	/* a socket that says nothing (an agents' socket waits for the agent to speak) */
	{
		struct fake fk = {0};
		pthread_t t;

		snprintf(path, sizeof(path), "%s/quiet.sock", tmp);
		fk.lfd = fake_listen(path);
		pthread_create(&t, NULL, fake_serve, &fk);
		assert_int_equal(top_viewer_feed_new(&feed, path, err, sizeof(err)), -EPROTO);
		assert_non_null(strstr(err, "not a viewer socket"));
		pthread_join(t, NULL);
		close(fk.cfd);
		close(fk.lfd);
	}
}

static char *read_file(const char *path)
{
	FILE *fp = fopen(path, "r");
	char *buf = calloc(1, 1 << 20);

	assert_non_null(fp);
	if (fread(buf, 1, (1 << 20) - 1, fp) == 0)
		buf[0] = '\0';
	fclose(fp);
	return buf;
}

static top_run_t *start_job(const char *name, const char *script, struct top_feed *f)
{
	struct session_run_options o;
	static char dir[300];
	char *argv[] = {"sh", "-c", (char *)script, NULL};
	static char *args[4];
	top_run_t *r;

	memcpy(args, argv, sizeof(argv));
	session_run_options_init(&o);
	snprintf(dir, sizeof(dir), "%s/runs", tmp);
	o.dir = dir;
	o.name = name;
	o.flush_timeout_s = 30;
	assert_int_equal(top_run_start(&r, &o, args), 0);
	top_run_bind(r, f);
	return r;
}

static void run_log_stdin(void **state)
{
	struct top_feed f;
	struct top_info info;
	top_run_t *r;
	char *log;

	(void)state;
	r = start_job(
	    "io", "echo out-line; echo err-line >&2; if read x; then echo stdin-open; else echo stdin-closed; fi", &f);
	assert_non_null(f.quit);
	assert_null(f.step);
	f.info(f.ctx, &info);
	assert_int_equal(info.mode, TOP_MODE_RUN);
	assert_non_null(strstr(info.source, "runs/io.log"));
	assert_non_null(strstr(info.trace, "runs/io.fss"));
	assert_non_null(strstr(info.command, "sh -c echo out-line"));
	assert_int_equal(top_run_finish(r), 0);
	f.info(f.ctx, &info);
	assert_int_equal(info.job_state, TOP_JOB_ENDED);
	assert_string_equal(info.how, "exited 0");
	log = read_file(top_run_log_path(r));
	assert_non_null(strstr(log, "out-line\n"));
	assert_non_null(strstr(log, "err-line\n"));
	assert_non_null(strstr(log, "stdin-closed\n"));
	assert_null(strstr(log, "stdin-open"));
	free(log);
	top_run_free(r);
}

/* The first view with a completed step of every rank. */
static void wait_for_steps(struct top_feed *f, uint32_t ranks)
{
	int64_t end = now_ms() + WAIT_MS;

	while (now_ms() < end) {
		const struct live_view *v = f->acquire(f->ctx);
		uint32_t n = 0;

		for (size_t i = 0; v && i < v->nranks; i++)
			n += v->ranks[i].totals.steps > 0;
		if (v)
			f->release(f->ctx, v);
		if (n >= ranks)
			return;
		f->wait(f->ctx, 200);
	}
	fail_msg("no view with a step of %u ranks", ranks);
}

static void run_quit_stop(void **state)
{
	struct top_feed f;
	struct top_info info;
	top_run_t *r;
	char script[1024], out[400];
	struct stat st;
	int code;

	(void)state;
	snprintf(script, sizeof(script),
		 "exec %s --backend cpu --nranks 2 --layers 2 --wrap linear --steps 1000000 --quiet", FSS_FSDP_REF);
	r = start_job("stop", script, &f);
	wait_for_steps(&f, 2);
	assert_int_equal(f.quit(f.ctx, TOP_QUIT_STOP), 0);
	code = top_run_finish(r);
	/* SIGTERM ended it (fsdp_ref's launcher may pass its ranks' ending on as an exit code) */
	assert_true(code != 0);
	f.info(f.ctx, &info);
	assert_int_equal(info.job_state, TOP_JOB_ENDED);
	assert_true(info.how[0] != '\0');
	snprintf(out, sizeof(out), "%s/runs/stop.fss", tmp);
	assert_string_equal(info.trace, out);
	assert_int_equal(stat(out, &st), 0);
	/* the trace holds the steps the dashboard saw */
	assert_int_equal(sh("%s lint %s >/dev/null 2>&1; test $? -le 1 -o $? -eq 4", FSS_FSDPSCOPE, out), 0);
	top_run_free(r);
}

static void run_quit_leave(void **state)
{
	struct top_feed f;
	struct top_info info;
	top_run_t *r;
	char script[1024], go[320], out[400], json[400];
	json_t *j;
	json_error_t je;

	(void)state;
	snprintf(go, sizeof(go), "%s/go", tmp);
	/* The job waits for `go`, so that the quit comes while it runs, whatever the machine's speed. */
	snprintf(script, sizeof(script),
		 "while [ ! -e %s ]; do sleep 0.05; done; exec %s --backend cpu --nranks 2 --layers 4 --wrap linear "
		 "--steps %d --quiet",
		 go, FSS_FSDP_REF, STEPS);
	r = start_job("leave", script, &f);
	assert_int_equal(f.quit(f.ctx, TOP_QUIT_LEAVE), 0);
	f.info(f.ctx, &info);
	assert_int_equal(info.job_state, TOP_JOB_DETACHED);
	assert_int_equal(sh("touch %s", go), 0);
	assert_int_equal(top_run_finish(r), 0);
	f.info(f.ctx, &info);
	assert_int_equal(info.job_state, TOP_JOB_DETACHED);
	snprintf(out, sizeof(out), "%s/runs/leave.fss", tmp);
	assert_string_equal(info.trace, out);
	/* the trace is complete: every step of every rank, closed cleanly */
	snprintf(json, sizeof(json), "%s/leave.json", tmp);
	sh("%s lint --json %s > %s", FSS_FSDPSCOPE, out, json);
	j = json_load_file(json, JSON_REJECT_DUPLICATES, &je);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(j, "steps_seen")), STEPS);
	assert_int_equal(json_integer_value(json_object_get(j, "ranks")), 2);
	json_decref(j);
	top_run_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(replay_step_keys), cmocka_unit_test(replay_once),
	    cmocka_unit_test(viewer_roundtrip), cmocka_unit_test(viewer_feed_socket),
	    cmocka_unit_test(viewer_bad_lines), cmocka_unit_test(viewer_connect_errors),
	    cmocka_unit_test(run_log_stdin),	cmocka_unit_test(run_quit_stop),
	    cmocka_unit_test(run_quit_leave),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
