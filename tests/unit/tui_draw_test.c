/*
 * tui_draw_test.c - the dashboard's views (tui/), drawn from hand-made live
 * views into a canvas and read back as text and attributes; no terminal.
 *
 *   - a row per rank (rank, host, pid) for 4 ranks; 300 ranks scroll (End,
 *     PgUp) and the window follows;
 *   - the slowest rank's row is bold and reverse, the others are not;
 *   - sorting by each column, both ways, orders the rows by that figure;
 *   - "8 gathers per repeating unit" and 8 marks a unit row on a
 *     per-Linear-like view, neither on a per-block one; bucketed and
 *     undecided jobs say why there are no units;
 *   - the hang banner names the missing rank (host, pid), the collective and
 *     the waiting ranks, in reverse video;
 *   - attach mode shows n/a for exposure, never 0; a rank without a step "-";
 *   - 80x24 holds the header, 10 rank rows and the findings summary and hides
 *     nothing; 40x12 says what it hides;
 *   - the fix box shows the selected finding's fix; the time strip numbers
 *     the gathers and marks exposure; an ASCII canvas has no byte >= 0x80;
 *   - the header: replay step k/n, PAUSED, how the job ended, tokens/s and
 *     MFU when known (no MFU otherwise), the drops in bold.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analysis.h"
#include "common/text_buffer.h"
#include "tests/unit/tui_views.h"
#include "tui/canvas.h"
#include "tui/draw.h"
#include "tui/keys.h"
#include "tui/state.h"

struct fixture {
	struct tv_feed feed;
	struct top_state st;
	struct top_canvas *c;
	struct top_options opt;
};

static struct fixture fx;

static void dump(const struct top_canvas *c)
{
	char line[2048];

	for (int r = 0; r < c->rows; r++)
		fprintf(stderr, "|%s\n", canvas_row_text(c, r, line, sizeof line));
}

/* The view v on a canvas of cols x rows, in `mode`, utf8 as given. */
static void show(struct live_view *v, int mode, int cols, int rows, int utf8)
{
	tv_feed_init(&fx.feed, mode);
	fx.opt = (struct top_options){.delay_ms = 1000, .color = 0, .first_rank = -1, .cols = cols, .rows = rows};
	state_init(&fx.st, &fx.feed.feed, &fx.opt);
	tv_feed_put(&fx.feed, v);
	assert_int_equal(state_refresh(&fx.st), 1);
	assert_int_equal(canvas_new(&fx.c, cols, rows, utf8), 0);
	top_draw(fx.c, &fx.st);
}

static void redraw(void)
{
	top_draw(fx.c, &fx.st);
}

static int teardown(void **state)
{
	(void)state;
	state_done(&fx.st);
	tv_feed_done(&fx.feed);
	canvas_free(fx.c);
	fx.c = NULL;
	return 0;
}

/* The row of rank r in the table (its text starts with r then the host), -1 none. */
static int rank_row(const struct top_canvas *c, int rank)
{
	char line[2048], pat[64];
	regex_t re;
	int found = -1;

	snprintf(pat, sizeof pat, "^[^ 0-9]* *%d +node[0-9]+ +%d ", rank, 1000 + rank);
	assert_int_equal(regcomp(&re, pat, REG_EXTENDED | REG_NOSUB), 0);
	for (int r = 0; r < c->rows && found < 0; r++)
		if (regexec(&re, canvas_row_text(c, r, line, sizeof line), 0, NULL, 0) == 0)
			found = r;
	regfree(&re);
	return found;
}

static int count_rank_rows(const struct top_canvas *c, int nranks)
{
	int n = 0;

	for (int i = 0; i < nranks; i++)
		n += rank_row(c, i) >= 0;
	return n;
}

static void test_row_per_rank(void **state)
{
	(void)state;
	show(tv_view(4), TOP_MODE_RUN, 80, 24, 1);
	for (int i = 0; i < 4; i++)
		if (rank_row(fx.c, i) < 0) {
			dump(fx.c);
			fail_msg("no row for rank %d", i);
		}
	assert_int_equal(rank_row(fx.c, 4), -1);
	/* the rows follow the header row, in rank order */
	assert_true(rank_row(fx.c, 0) < rank_row(fx.c, 3));
	assert_true(canvas_find(fx.c, 0, "RANK") >= 0);
}

static void test_scroll_300(void **state)
{
	int first, shown;

	(void)state;
	show(tv_view(300), TOP_MODE_RUN, 80, 24, 1);
	first = rank_row(fx.c, 0);
	assert_true(first > 0);
	assert_int_equal(rank_row(fx.c, 299), -1);
	shown = count_rank_rows(fx.c, 300);
	assert_true(shown >= TOP_MIN_RANK_ROWS);
	/* End: the last rank on screen, the first gone */
	assert_int_equal(state_key(&fx.st, TOP_KEY_END), 1);
	redraw();
	assert_true(rank_row(fx.c, 299) > 0);
	assert_int_equal(rank_row(fx.c, 0), -1);
	assert_int_equal(count_rank_rows(fx.c, 300), shown);
	/* a page up: the rank a page above the last is on screen, the last is not */
	state_key(&fx.st, TOP_KEY_PGUP);
	redraw();
	assert_int_equal(rank_row(fx.c, 299), -1);
	assert_true(rank_row(fx.c, 299 - shown + 1) >= 0);
	/* Home and Down moves the selection, the window starts at rank 0 again */
	state_key(&fx.st, TOP_KEY_HOME);
	state_key(&fx.st, TOP_KEY_DOWN);
	redraw();
	assert_int_equal(rank_row(fx.c, 0), first);
	assert_int_equal(fx.st.rank_sel, 1);
}

static void test_slowest_stands_out(void **state)
{
	struct live_view *v = tv_view(6);
	int row, other;

	(void)state;
	v->ranks[4].last.step_ns = 500000000ull; /* rank 4: 500 ms, the others ~100 ms */
	show(v, TOP_MODE_RUN, 80, 24, 1);
	row = rank_row(fx.c, 4);
	other = rank_row(fx.c, 2);
	assert_true(row > 0 && other > 0);
	for (int col = 2; col < 60; col++) {
		assert_true(canvas_cell(fx.c, row, col)->attr & CANVAS_BOLD);
		assert_true(canvas_cell(fx.c, row, col)->attr & CANVAS_REVERSE);
		assert_false(canvas_cell(fx.c, other, col)->attr & CANVAS_REVERSE);
	}
	assert_int_equal(ranks_slowest(v), 4);
}

/* The figure the test expects a column to sort by (known: 1). */
static int figure(const struct live_rank *r, int col, double *out)
{
	uint64_t longest = 0;

	for (size_t i = 0; i < r->nstrip; i++)
		if (r->strip[i].end_ns - r->strip[i].start_ns > longest)
			longest = r->strip[i].end_ns - r->strip[i].start_ns;
	switch (col) {
	case TOP_COL_RANK:
		*out = r->rank;
		break;
	case TOP_COL_PID:
		*out = r->pid;
		break;
	case TOP_COL_STEP:
		*out = (double)r->last.step_ns;
		break;
	case TOP_COL_GATHERS:
		*out = r->last.allgathers;
		break;
	case TOP_COL_EXPOSED:
		*out = (double)r->last.exposed_allgather_ns;
		break;
	case TOP_COL_SHARE:
		*out = (double)r->last.exposed_allgather_ns / (double)r->last.step_ns;
		break;
	case TOP_COL_COMPUTE:
		*out = (double)r->last.compute_ns;
		break;
	case TOP_COL_SLOWEST:
		*out = (double)longest;
		break;
	case TOP_COL_LATE:
		*out = (double)r->lateness_ns;
		break;
	case TOP_COL_DROPS:
		*out = (double)r->dropped;
		break;
	default:
		return 0;
	}
	return 1;
}

static void test_sort_each_column(void **state)
{
	struct live_view *v = tv_view(23);
	size_t order[23];

	(void)state;
	/* hosts out of rank order, so the host column has something to sort */
	for (size_t i = 0; i < 23; i++)
		snprintf(v->ranks[i].host, sizeof v->ranks[i].host, "node%zu", (i * 7) % 5);
	show(v, TOP_MODE_RUN, 80, 40, 1);
	for (int col = 0; col < TOP_COL_MAX; col++) {
		for (int pass = 0; pass < 2; pass++) {
			state_sort_column(&fx.st, col); /* its natural order, then (again) reversed */
			ranks_order(&fx.st, v, order);
			for (size_t i = 1; i < 23; i++) {
				const struct live_rank *a = &v->ranks[order[i - 1]], *b = &v->ranks[order[i]];
				double x = 0, y = 0;
				int cmp;

				if (col == TOP_COL_HOST) {
					cmp = strcmp(a->host, b->host);
				} else {
					assert_true(figure(a, col, &x) && figure(b, col, &y));
					cmp = x < y ? -1 : x > y;
				}
				if (fx.st.sort_desc)
					cmp = -cmp;
				if (cmp > 0)
					fail_msg("column %s (%s): rows %zu and %zu out of order",
						 ranks_column_name(col), fx.st.sort_desc ? "desc" : "asc", i - 1, i);
				if (cmp == 0)
					assert_true(a->rank < b->rank); /* ties by rank */
			}
		}
	}
	/* On screen: by step time, highest first, the slowest rank's row is the first. */
	fx.st.sort_col = TOP_COL_RANK;
	state_sort_column(&fx.st, TOP_COL_STEP);
	assert_true(fx.st.sort_desc);
	redraw();
	{
		int top = fx.c->rows;

		for (int i = 0; i < 23; i++)
			if (rank_row(fx.c, i) >= 0 && rank_row(fx.c, i) < top)
				top = rank_row(fx.c, i);
		assert_int_equal(rank_row(fx.c, ranks_slowest(v)), top);
	}
	/* the header row names the sort column, marked */
	assert_true(canvas_find(fx.c, 0, "STEP▼") >= 0);
	/* keys: s moves to the next column, R reverses, < goes back */
	state_key(&fx.st, 's');
	assert_int_equal(fx.st.sort_col, TOP_COL_GATHERS);
	state_key(&fx.st, 'R');
	assert_false(fx.st.sort_desc);
	state_key(&fx.st, '<');
	assert_int_equal(fx.st.sort_col, TOP_COL_STEP);
}

static void test_units_per_linear(void **state)
{
	struct live_view *v = tv_view(4);
	char line[2048];
	int row;

	(void)state;
	tv_units(v, 4, 8);
	show(v, TOP_MODE_REPLAY, 80, 24, 1);
	state_key(&fx.st, 'u');
	redraw();
	if (canvas_find(fx.c, 0, "8 gathers per repeating unit") < 0) {
		dump(fx.c);
		fail_msg("no \"8 gathers per repeating unit\"");
	}
	row = canvas_find(fx.c, 0, "unit 0 ");
	assert_true(row > 0);
	canvas_row_text(fx.c, row, line, sizeof line);
	assert_non_null(strstr(line, "▮▮▮▮▮▮▮▮ "));
	assert_null(strstr(line, "▮▮▮▮▮▮▮▮▮"));
	assert_non_null(strstr(line, "8 gathers"));
	/* gathered bytes, as lint counts them: 8 x 64 KiB per rank x 4 ranks */
	assert_non_null(strstr(line, "2.10 MB gathered"));
	assert_true(canvas_find(fx.c, 0, "unit 3 ") > row);
	assert_true(canvas_find(fx.c, 0, "root") > 0);
	/* the communicator roles beside it */
	assert_true(canvas_find(fx.c, 0, "00c0ffee00000001 fsdp") > 0);
	/* and the findings summary is still there */
	assert_true(canvas_find(fx.c, 0, "2 findings: 1 error (wrap-too-fine), 1 warning") > 0);
}

static void test_units_per_block(void **state)
{
	struct live_view *v = tv_view(4);
	char line[2048];
	int row;

	(void)state;
	tv_units(v, 4, 1);
	show(v, TOP_MODE_REPLAY, 80, 24, 1);
	state_key(&fx.st, 'u');
	redraw();
	assert_int_equal(canvas_find(fx.c, 0, "8 gathers per repeating unit"), -1);
	assert_true(canvas_find(fx.c, 0, "1 gather per repeating unit, 4 units") > 0);
	row = canvas_find(fx.c, 0, "unit 0 ");
	assert_true(row > 0);
	canvas_row_text(fx.c, row, line, sizeof line);
	assert_null(strstr(line, "▮▮"));
	assert_non_null(strstr(line, "1 gather "));
}

static void test_units_why_none(void **state)
{
	struct live_view *v = tv_view(2);

	(void)state;
	v->job.diagnosed = 1;
	v->job.verdict = ANALYSIS_BUCKETED;
	show(v, TOP_MODE_REPLAY, 80, 24, 1);
	state_key(&fx.st, 'u');
	redraw();
	assert_true(canvas_find(fx.c, 0, "no units: verdict bucketed") > 0);
	teardown(NULL);

	v = tv_view(2);
	v->job.diagnosed = 1;
	v->job.verdict = ANALYSIS_UNDECIDED;
	v->job.undecided_reason = ANALYSIS_UNDECIDED_NO_STEP;
	show(v, TOP_MODE_REPLAY, 80, 24, 1);
	state_key(&fx.st, 'u');
	redraw();
	assert_true(canvas_find(fx.c, 0, "no units: verdict undecided (no-step)") > 0);
}

static void test_hang_banner(void **state)
{
	struct live_view *v = tv_view(3);
	int row;

	(void)state;
	tv_hang(v);
	show(v, TOP_MODE_RUN, 140, 24, 1);
	row = canvas_find(fx.c, 0,
			  "HANG: rank 1 (node0, pid 1001) has not entered collective #57 (AllGather) of "
			  "communicator 00c0ffee00000001; ranks 0, 2 wait 63 s");
	if (row < 0) {
		dump(fx.c);
		fail_msg("no hang banner");
	}
	assert_true(canvas_cell(fx.c, row, 0)->attr & CANVAS_REVERSE);
	/* the job's own timeout ended the waits: still the hang, in the past */
	teardown(NULL);
	v = tv_view(3);
	tv_hang(v);
	v->job.flight.hangs[0].ended = ANALYSIS_WAIT_GAVE_UP;
	show(v, TOP_MODE_RUN, 140, 24, 1);
	if (canvas_find(fx.c, 0,
			"HANG: rank 1 (node0, pid 1001) never entered collective #57 (AllGather) of "
			"communicator 00c0ffee00000001; ranks 0, 2 waited 63 s, then gave") < 0 ||
	    canvas_find(fx.c, 0, "up (NCCL error)") < 0) {
		dump(fx.c);
		fail_msg("no banner of the ended hang");
	}
	/* no hang, no banner */
	teardown(NULL);
	show(tv_view(3), TOP_MODE_RUN, 140, 24, 1);
	assert_int_equal(canvas_find(fx.c, 0, "HANG"), -1);
}

static void test_attach_na(void **state)
{
	struct live_view *v = tv_view(4);
	char line[2048];
	int row;

	(void)state;
	v->ranks[3].last.step_ns = 0; /* no analysed step yet */
	show(v, TOP_MODE_ATTACH, 80, 24, 1);
	row = rank_row(fx.c, 1);
	assert_true(row > 0);
	canvas_row_text(fx.c, row, line, sizeof line);
	/* exposure, its share and compute: n/a three times */
	{
		int n = 0;

		for (const char *p = line; (p = strstr(p, "n/a")); p += 3)
			n++;
		assert_int_equal(n, 3);
	}
	canvas_row_text(fx.c, rank_row(fx.c, 3), line, sizeof line);
	assert_non_null(strstr(line, " - "));
	teardown(NULL);
	/* measured in run mode: no n/a anywhere */
	show(tv_view(4), TOP_MODE_RUN, 80, 24, 1);
	assert_int_equal(canvas_find(fx.c, 0, "n/a"), -1);
}

static void test_80x24(void **state)
{
	struct live_view *v = tv_view(12);
	char line[2048];

	(void)state;
	tv_units(v, 4, 8);
	tv_hang(v);
	show(v, TOP_MODE_RUN, 80, 24, 1);
	canvas_row_text(fx.c, 0, line, sizeof line);
	assert_non_null(strstr(line, "fsdpscope top"));
	assert_non_null(strstr(line, "fsdp_ref --wrap linear"));
	assert_true(canvas_find(fx.c, 0, "ranks 12") == 1);
	assert_true(canvas_find(fx.c, 0, "HANG: rank 1") == 3);
	/* the banner is longer than 80 cells: its end on the next row */
	assert_true(canvas_find(fx.c, 0, "ranks 0, 2 wait 63 s") == 4);
	if (count_rank_rows(fx.c, 12) < TOP_MIN_RANK_ROWS) {
		dump(fx.c);
		fail_msg("%d rank rows at 80x24", count_rank_rows(fx.c, 12));
	}
	assert_true(canvas_find(fx.c, 0, "3 findings: 2 errors (wrap-too-fine, collective-hang), 1 warning") > 0);
	assert_int_equal(canvas_find(fx.c, 0, "terminal 80x24"), -1);
	assert_true(canvas_find(fx.c, 0, "time strip of rank") > 0);
}

static void test_40x12(void **state)
{
	char text[4096] = "", line[512];

	(void)state;
	show(tv_view(12), TOP_MODE_RUN, 40, 12, 1);
	for (int r = 0; r < fx.c->rows; r++) {
		strncat(text, canvas_row_text(fx.c, r, line, sizeof line), sizeof text - strlen(text) - 2);
		strcat(text, " ");
	}
	if (!strstr(text, "terminal 40x12: rank table cut to") || !strstr(text, "strip hidden")) {
		dump(fx.c);
		fail_msg("the 40x12 screen does not say what it hides");
	}
	assert_non_null(strstr(text, "columns hidden: SLOWEST"));
	/* the rank rows that fit, without host and pid */
	assert_true(canvas_find(fx.c, 0, "    1   100ms") > 0);
	assert_true(canvas_find(fx.c, 0, "running") == 0);
	assert_true(canvas_find(fx.c, 0, "findings") > 0);
}

static void test_fix_box(void **state)
{
	struct live_view *v = tv_view(4);

	(void)state;
	tv_units(v, 4, 8);
	show(v, TOP_MODE_REPLAY, 80, 24, 1);
	assert_int_equal(canvas_find(fx.c, 0, "fully_shard(block)"), -1);
	state_key(&fx.st, 'f'); /* the findings pane */
	assert_int_equal(fx.st.pane, TOP_PANE_FINDINGS);
	/* the list: each finding by its heading, as lint heads it */
	assert_true(canvas_find(fx.c, 0, " error wrap-too-fine: More than one AllGather per repeating unit") > 0);
	assert_true(canvas_find(fx.c, 0, " warning exposed-gather: gathers exposed 12% of the step") > 0);
	state_key(&fx.st, 'f'); /* its selected finding's fix */
	redraw();
	assert_true(canvas_find(fx.c, 0, "fix: wrap-too-fine") > 0);
	/* the finding whole, in lint's layout, each framework's fix under its heading */
	assert_true(canvas_find(fx.c, 0, "  error wrap-too-fine: More than one AllGather per repeating unit") > 0);
	assert_true(canvas_find(fx.c, 0, "    8 gathers per repeating unit: the job wraps each Linear") > 0);
	assert_true(canvas_find(fx.c, 0, "    evidence:") > 0);
	assert_true(canvas_find(fx.c, 0, "      evidence of wrap-too-fine") > 0);
	assert_true(canvas_find(fx.c, 0, "    fix (PyTorch FSDP2):") > 0);
	assert_true(canvas_find(fx.c, 0, "      fully_shard(block) for each transformer block") > 0);
	assert_true(canvas_find(fx.c, 0, "          for block in model.layers:") > 0);
	assert_true(canvas_find(fx.c, 0, "    fix (PyTorch FSDP1):") > 0);
	assert_true(canvas_find(fx.c, 0, "      FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}))") > 0);
	assert_int_equal(canvas_find(fx.c, 0, "FSDP1:"), -1); /* the marker is a heading now */
	state_key(&fx.st, TOP_KEY_ESC);
	state_key(&fx.st, TOP_KEY_DOWN); /* the next finding */
	state_key(&fx.st, TOP_KEY_ENTER);
	redraw();
	assert_true(canvas_find(fx.c, 0, "fix: exposed-gather") > 0);
	/* no title (an older session): the message heads the finding, once */
	assert_true(canvas_find(fx.c, 0, "  warning exposed-gather: gathers exposed 12% of the step") > 0);
	assert_int_equal(canvas_find(fx.c, 0, "    gathers exposed 12%"), -1);
	assert_true(canvas_find(fx.c, 0, "(this rule gives no fix)") > 0);
}

/* a narrow box wraps the finding's lines: nothing is cut at its edge */
static void test_fix_box_narrow(void **state)
{
	struct live_view *v = tv_view(4);
	int row;

	(void)state;
	tv_units(v, 4, 8);
	show(v, TOP_MODE_REPLAY, 40, 40, 1);
	state_key(&fx.st, 'f');
	state_key(&fx.st, 'f');
	redraw();
	row = canvas_find(fx.c, 0, "fix: wrap-too-fine");
	assert_true(row >= 0);
	/* the heading, wider than the box, goes on over the next line */
	row = canvas_find(fx.c, row, "  error wrap-too-fine: More than one");
	assert_true(row > 0);
	assert_true(canvas_find(fx.c, row + 1, "Linear, not per block)") == row + 2 ||
		    canvas_find(fx.c, row + 1, "Linear, not per block)") == row + 1);
	/* the message folded at the box's width */
	assert_true(canvas_find(fx.c, row, "    8 gathers per repeating unit: the") > row);
	assert_true(canvas_find(fx.c, row, "    job wraps each Linear") > row);
	/* a line of code longer than the box, wrapped at a blank, its rest under its indent */
	assert_true(canvas_find(fx.c, row, "      fully_shard(block) for each") > row);
	assert_true(canvas_find(fx.c, row, "      transformer block, not each") > row);
	assert_true(canvas_find(fx.c, row, "      auto_wrap_policy=") > row);
}

/* A synthetic fix of several kB (not today's rule texts): FSDP2 lines,
 * then FSDP1 and DeepSpeed parts. */
static void long_fix(char *buf, size_t len, int fsdp2_lines, int other_lines)
{
	size_t at = 0;

	for (int i = 0; i < fsdp2_lines; i++)
		at += (size_t)snprintf(buf + at, len - at, "fully_shard(model.layers[%d], mp_policy=mp)  # fsdp2 %d\n",
				       i, i);
	at += (size_t)snprintf(buf + at, len - at, "FSDP1:\n");
	for (int i = 0; i < other_lines; i++)
		at += (size_t)snprintf(buf + at, len - at, "fsdp1 line %d\n", i);
	at += (size_t)snprintf(buf + at, len - at, "DeepSpeed:\n");
	for (int i = 0; i < other_lines; i++)
		at += (size_t)snprintf(buf + at, len - at, "%sdeepspeed line %d", i ? "\n" : "", i);
}

/* a fix of several kB reaches the box whole: scrolled to its end, the
 * DeepSpeed part's last line is there; one longer than the live state's
 * room ends with the cut's mark, never in silence */
static void test_fix_box_long(void **state)
{
	struct live_view *v = tv_view(4);
	char whole[16384];
	struct live_finding *f;

	(void)state;
	tv_units(v, 4, 8);
	f = &v->job.findings[0];
	long_fix(whole, sizeof whole, 50, 20); /* about 3.4 kB */
	assert_true(strlen(whole) > 3000 && strlen(whole) < sizeof f->fix);
	assert_int_equal(text_fit(f->fix, sizeof f->fix, whole), 0);
	show(v, TOP_MODE_REPLAY, 80, 24, 1);
	state_key(&fx.st, 'f');
	state_key(&fx.st, 'f');
	state_key(&fx.st, TOP_KEY_END);
	redraw();
	assert_true(canvas_find(fx.c, 0, "fix: wrap-too-fine") > 0);
	assert_true(canvas_find(fx.c, 0, "      deepspeed line 19") > 0);
	assert_true(canvas_find(fx.c, 0, " of 1") > 0 || canvas_find(fx.c, 0, " lines ") > 0);
	state_key(&fx.st, TOP_KEY_HOME);
	redraw();
	assert_true(canvas_find(fx.c, 0, "fully_shard(model.layers[0], mp_policy=mp)") > 0);
	teardown(NULL);

	v = tv_view(4);
	tv_units(v, 4, 8);
	f = &v->job.findings[0];
	long_fix(whole, sizeof whole, 200, 40); /* about 12 kB */
	assert_true(text_fit(f->fix, sizeof f->fix, whole) > 0);
	show(v, TOP_MODE_REPLAY, 80, 24, 1);
	state_key(&fx.st, 'f');
	state_key(&fx.st, 'f');
	state_key(&fx.st, TOP_KEY_END);
	redraw();
	assert_true(canvas_find(fx.c, 0, "[cut here: ") > 0);
	assert_true(canvas_find(fx.c, 0, "fsdpscope lint shows the whole text]") > 0);
}

static void test_strip_ascii(void **state)
{
	int row;
	char line[512];

	(void)state;
	show(tv_view(4), TOP_MODE_RUN, 80, 24, 0);
	row = canvas_find(fx.c, 0, "time strip of rank 3");
	assert_true(row > 0);
	canvas_row_text(fx.c, row + 1, line, sizeof line);
	assert_int_equal(line[0], '0'); /* the gather of unit 0, at the step's start */
	canvas_row_text(fx.c, row + 2, line, sizeof line);
	assert_int_equal(line[0], '#');	    /* exposed at the start */
	assert_non_null(strstr(line, "=")); /* hidden after it */
	assert_non_null(strstr(line, ".")); /* compute */
	assert_true(canvas_find(fx.c, 0, "# exposed comm  = hidden comm  . compute  cell ") > 0);
	/* ASCII only on a canvas that is not UTF-8 */
	for (int r = 0; r < fx.c->rows; r++)
		for (const unsigned char *p = (const unsigned char *)canvas_row_text(fx.c, r, line, sizeof line); *p;
		     p++)
			assert_true(*p < 0x80);
	/* r: the next rank's strip */
	state_key(&fx.st, 'r');
	redraw();
	assert_true(canvas_find(fx.c, 0, "time strip of rank 0") > 0);
}

static void test_header(void **state)
{
	struct live_view *v = tv_view(4);
	char line[2048];
	const char *p;

	(void)state;
	v->job.records_dropped_total = 42;
	show(v, TOP_MODE_REPLAY, 100, 24, 1);
	/* rank 0's last step: 100 ms; 8192 tokens a step: 81.9k tok/s; 1e12 FLOPs a
	 * step on a 1e14 FLOP/s peak: 10% */
	fx.feed.info.tokens_per_step = 8192;
	fx.feed.info.flops_per_step = 1e12;
	fx.feed.info.peak_flops = 1e14;
	fx.feed.info.replay_step = 3;
	fx.feed.info.replay_steps = 8;
	fx.feed.info.job_state = TOP_JOB_ENDED;
	snprintf(fx.feed.info.how, sizeof fx.feed.info.how, "exited 0");
	assert_int_equal(state_refresh(&fx.st), 1);
	state_key(&fx.st, 'p');
	redraw();
	canvas_row_text(fx.c, 0, line, sizeof line);
	assert_non_null(strstr(line, "PAUSED  step 3/8  job ended: exited 0"));
	canvas_row_text(fx.c, 1, line, sizeof line);
	assert_non_null(strstr(line, "ranks 4  steps 8  step 100ms ▁▂▃▄▅▆▇█  tok/s 81.9k  MFU 10%  dropped 42"));
	/* the drops in bold */
	p = strstr(line, "dropped");
	assert_true(canvas_cell(fx.c, 1, utf8_cells(line) - utf8_cells(p))->attr & CANVAS_BOLD);
	assert_false(canvas_cell(fx.c, 1, 1)->attr & CANVAS_BOLD);
	/* no MFU without FLOPs a step */
	fx.feed.info.flops_per_step = 0;
	state_refresh(&fx.st);
	redraw();
	assert_int_equal(canvas_find(fx.c, 0, "MFU"), -1);
	/* a replay in progress reads a trace: "replaying", never "running" */
	fx.feed.info.job_state = TOP_JOB_RUNNING;
	state_refresh(&fx.st);
	redraw();
	canvas_row_text(fx.c, 0, line, sizeof line);
	assert_non_null(strstr(line, "replaying"));
	assert_null(strstr(line, "running"));
}

/* the figures line counts the steps every rank completed, the job's step
 * the replay's position counts, not the fastest rank's */
static void test_header_steps_of_the_job(void **state)
{
	struct live_view *v = tv_view(4);
	char line[2048];

	(void)state;
	v->ranks[2].last.ordinal -= 1; /* one rank a step behind */
	show(v, TOP_MODE_REPLAY, 100, 24, 1);
	canvas_row_text(fx.c, 1, line, sizeof line);
	assert_non_null(strstr(line, "ranks 4  steps 7  "));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_row_per_rank, teardown),
	    cmocka_unit_test_teardown(test_scroll_300, teardown),
	    cmocka_unit_test_teardown(test_slowest_stands_out, teardown),
	    cmocka_unit_test_teardown(test_sort_each_column, teardown),
	    cmocka_unit_test_teardown(test_units_per_linear, teardown),
	    cmocka_unit_test_teardown(test_units_per_block, teardown),
	    cmocka_unit_test_teardown(test_units_why_none, teardown),
	    cmocka_unit_test_teardown(test_hang_banner, teardown),
	    cmocka_unit_test_teardown(test_attach_na, teardown),
	    cmocka_unit_test_teardown(test_80x24, teardown),
	    cmocka_unit_test_teardown(test_40x12, teardown),
	    cmocka_unit_test_teardown(test_fix_box, teardown),
	    cmocka_unit_test_teardown(test_fix_box_narrow, teardown),
	    cmocka_unit_test_teardown(test_fix_box_long, teardown),
	    cmocka_unit_test_teardown(test_strip_ascii, teardown),
	    cmocka_unit_test_teardown(test_header, teardown),
	    cmocka_unit_test_teardown(test_header_steps_of_the_job, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
