/*
 * tui_state_test.c - the dashboard's state and keys (tui/state.c,
 * tui/keys.c) and --once (tui/once.c), over a feed whose views the test
 * puts on a board by hand; no terminal, no timing.
 *
 *   - pause keeps the view shown while newer views arrive (the step counter
 *     stays), and a second press shows the newest;
 *   - the help view lists every key of the table (the test hook excepted),
 *     and every action has a help line;
 *   - q in run mode while the job runs asks; s stops, l leaves (feed->quit),
 *     another key cancels; q in replay quits at once; n calls feed->step;
 *     C aborts only with the test hook set (else nothing);
 *   - --once writes opt->rows lines of plain text with the rank rows and no
 *     escape byte; with no view it gives up with -ETIMEDOUT only after
 *     waiting on the feed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/tui_views.h"
#include "tui/canvas.h"
#include "tui/draw.h"
#include "tui/keys.h"
#include "tui/state.h"

static const struct top_options opts = {.delay_ms = 1000, .color = 1, .first_rank = -1, .cols = 80, .rows = 24};

static struct live_view *view_at_step(uint32_t ordinal)
{
	struct live_view *v = tv_view(4);

	for (size_t i = 0; i < v->nranks; i++)
		v->ranks[i].last.ordinal = ordinal;
	return v;
}

static void test_pause_freezes(void **state)
{
	struct tv_feed f;
	struct top_state st;
	struct top_canvas *c;
	uint64_t first;

	(void)state;
	tv_feed_init(&f, TOP_MODE_REPLAY);
	state_init(&st, &f.feed, &opts);
	assert_int_equal(canvas_new(&c, 80, 24, 1), 0);
	tv_feed_put(&f, view_at_step(4));
	assert_int_equal(state_refresh(&st), 1);
	first = st.view->generation;
	top_draw(c, &st);
	assert_true(canvas_find(c, 0, "steps 5") == 1);

	assert_int_equal(state_key(&st, 'p'), 1);
	assert_true(st.paused);
	tv_feed_put(&f, view_at_step(5));
	tv_feed_put(&f, view_at_step(6));
	state_refresh(&st);
	assert_int_equal(st.view->generation, first);
	top_draw(c, &st);
	assert_true(canvas_find(c, 0, "steps 5") == 1);
	assert_true(canvas_find(c, 0, "PAUSED (newer views)") == 0);

	/* space resumes, at the newest view */
	assert_int_equal(state_key(&st, ' '), 1);
	assert_false(st.paused);
	assert_int_equal(st.view->generation, first + 2);
	top_draw(c, &st);
	assert_true(canvas_find(c, 0, "steps 7") == 1);
	assert_int_equal(canvas_find(c, 0, "PAUSED"), -1);

	canvas_free(c);
	state_done(&st);
	tv_feed_done(&f);
}

static void test_help_lists_every_key(void **state)
{
	struct tv_feed f;
	struct top_state st;
	struct top_canvas *c;
	const struct top_key *keys;
	size_t n;
	char text[16384] = "", line[512];

	(void)state;
	tv_feed_init(&f, TOP_MODE_RUN);
	state_init(&st, &f.feed, &opts);
	tv_feed_put(&f, tv_view(2));
	state_refresh(&st);
	assert_int_equal(canvas_new(&c, 100, 60, 1), 0);
	state_key(&st, '?');
	assert_int_equal(st.screen, TOP_SCREEN_HELP);
	top_draw(c, &st);
	for (int r = 0; r < c->rows; r++) {
		strncat(text, canvas_row_text(c, r, line, sizeof line), sizeof text - strlen(text) - 2);
		strcat(text, "\n");
	}
	keys = keys_table(&n);
	for (size_t i = 0; i < n; i++) {
		char name[40];

		if (keys[i].hidden) {
			snprintf(name, sizeof name, "\n %s ", keys[i].name);
			assert_null(strstr(text, keys[i].help));
			continue;
		}
		/* each key's name is listed as a word of a help line's key column */
		snprintf(name, sizeof name, " %s ", keys[i].name);
		if (!strstr(text, name))
			fail_msg("help does not list key %s", keys[i].name);
	}
	/* every action has its help line */
	for (int a = TOP_ACT_QUIT; a < TOP_ACT_MAX; a++) {
		int helped = 0;

		for (size_t i = 0; i < n; i++)
			helped |=
			    keys[i].action == a && keys[i].help[0] && (keys[i].hidden || strstr(text, keys[i].help));
		if (!helped)
			fail_msg("action %d has no help line", a);
	}
	/* h (and ?) goes back */
	state_key(&st, 'h');
	assert_int_equal(st.screen, TOP_SCREEN_MAIN);
	canvas_free(c);
	state_done(&st);
	tv_feed_done(&f);
}

static void test_quit_asks_in_run_mode(void **state)
{
	struct tv_feed f;
	struct top_state st;
	struct top_canvas *c;

	(void)state;
	tv_feed_init(&f, TOP_MODE_RUN);
	f.info.job_state = TOP_JOB_RUNNING;
	state_init(&st, &f.feed, &opts);
	tv_feed_put(&f, tv_view(2));
	state_refresh(&st);
	assert_int_equal(canvas_new(&c, 80, 24, 1), 0);

	state_key(&st, 'q');
	assert_true(st.asking_quit);
	assert_false(st.quit);
	top_draw(c, &st);
	assert_true(canvas_find(c, 0, "stop the job (s) / leave it running and recorded (l) / cancel") == 23);
	state_key(&st, 'x'); /* cancel */
	assert_false(st.quit);
	assert_int_equal(f.quits, 0);

	state_key(&st, TOP_KEY_INTERRUPT); /* ^C is q */
	assert_true(st.asking_quit);
	state_key(&st, 'l');
	assert_true(st.quit);
	assert_int_equal(f.quits, 1);
	assert_int_equal(f.quit_how, TOP_QUIT_LEAVE);

	st.quit = 0;
	state_key(&st, TOP_KEY_F10);
	state_key(&st, 's');
	assert_true(st.quit);
	assert_int_equal(f.quit_how, TOP_QUIT_STOP);

	/* the job has ended: q quits without asking */
	st.quit = 0;
	f.info.job_state = TOP_JOB_ENDED;
	state_refresh(&st);
	state_key(&st, 'q');
	assert_true(st.quit);
	assert_int_equal(f.quits, 2);
	canvas_free(c);
	state_done(&st);
	tv_feed_done(&f);
}

static void test_replay_keys(void **state)
{
	struct tv_feed f;
	struct top_state st;

	(void)state;
	unsetenv("FSDPSCOPE_TOP_CRASH_KEY");
	tv_feed_init(&f, TOP_MODE_REPLAY);
	state_init(&st, &f.feed, &opts);
	tv_feed_put(&f, tv_view(2));
	state_refresh(&st);
	state_key(&st, 'n');
	state_key(&st, 'n');
	assert_int_equal(f.steps, 2);
	assert_int_equal(state_key(&st, 'C'), 0); /* no hook: nothing */
	state_key(&st, 'q');
	assert_true(st.quit);
	state_done(&st);
	tv_feed_done(&f);
}

static void test_crash_key_aborts(void **state)
{
	struct tv_feed f;
	struct top_state st;
	pid_t pid;
	int status;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("FSDPSCOPE_TOP_CRASH_KEY", "1", 1);
		tv_feed_init(&f, TOP_MODE_REPLAY);
		state_init(&st, &f.feed, &opts);
		state_key(&st, 'C');
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
}

static void test_once_plain_text(void **state)
{
	struct tv_feed f;
	struct top_options o = opts;
	char *buf = NULL, why[256];
	size_t len = 0, lines = 0;
	FILE *mem;

	(void)state;
	tv_feed_init(&f, TOP_MODE_REPLAY);
	{
		struct live_view *v = tv_view(4);

		tv_units(v, 4, 8);
		tv_hang(v);
		tv_feed_put(&f, v);
	}
	o.cols = 100;
	o.rows = 30;
	mem = open_memstream(&buf, &len);
	o.first_rank = 9; /* no rank 9 of 4: the ranks it has are said, nothing printed */
	assert_int_equal(top_print_once(&f.feed, &o, mem, why, sizeof why), -ERANGE);
	assert_string_equal(why, "-r 9: the view has ranks 0 to 3");
	o.first_rank = 3;
	assert_int_equal(top_print_once(&f.feed, &o, mem, why, sizeof why), 0);
	fclose(mem);
	assert_null(memchr(buf, 0x1b, len));
	for (size_t i = 0; i < len; i++)
		lines += buf[i] == '\n';
	assert_int_equal(lines, 30);
	assert_non_null(strstr(buf, "fsdpscope top"));
	assert_non_null(strstr(buf, "HANG: rank 1"));
	for (int r = 1; r < 4; r++) { /* (rank 0's row starts with the selection mark) */
		char row[64];

		snprintf(row, sizeof row, "    %d node0     %d   100ms", r, 1000 + r);
		assert_non_null(strstr(buf, row));
	}
	free(buf);
	tv_feed_done(&f);
}

static int no_view_waits;

static const struct live_view *none_acquire(void *ctx)
{
	(void)ctx;
	return NULL;
}

static int none_wait(void *ctx, int timeout_ms)
{
	(void)ctx;
	(void)timeout_ms;
	/* the clock is not the test's: say the time is up after a few waits */
	return ++no_view_waits > 3 ? -ETIMEDOUT : 0;
}

static void test_once_no_view(void **state)
{
	struct top_feed feed = {.acquire = none_acquire, .wait = none_wait};
	FILE *mem;
	char *buf = NULL, why[256];
	size_t len = 0;

	(void)state;
	mem = open_memstream(&buf, &len);
	assert_int_equal(top_print_once(&feed, &opts, mem, why, sizeof why), -ETIMEDOUT);
	fclose(mem);
	assert_true(no_view_waits > 1);
	assert_int_equal(len, 0);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pause_freezes),	  cmocka_unit_test(test_help_lists_every_key),
	    cmocka_unit_test(test_quit_asks_in_run_mode), cmocka_unit_test(test_replay_keys),
	    cmocka_unit_test(test_crash_key_aborts),	  cmocka_unit_test(test_once_plain_text),
	    cmocka_unit_test(test_once_no_view),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
