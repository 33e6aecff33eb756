/*
 * layout.c - which panes fit where, for any terminal size, and what a
 * small terminal hides, said on screen.
 *
 * Rows go, in this order of need: the header; the findings summary line
 * (always on screen); the rank table's header and up to 10 rank rows; the
 * time strip; a few finding lines; the other rank rows; the other finding
 * lines. A terminal of 80x24 holds all of the first four; a smaller one
 * cuts the rank table and hides the strip, and the bottom line says so
 * ("terminal 60x15: rank table cut to 5 rows; strip hidden"). Columns go
 * from the right of the table's list of priorities when the terminal is
 * narrower than 80.
 */
#include <stdio.h>
#include <string.h>

#include "tui/draw.h"

/* Columns dropped first when the terminal is narrow, in order. */
static const int drop_order[] = {TOP_COL_SLOWEST, TOP_COL_DROPS, TOP_COL_LATE,	  TOP_COL_PID,	  TOP_COL_COMPUTE,
				 TOP_COL_HOST,	  TOP_COL_SHARE, TOP_COL_EXPOSED, TOP_COL_GATHERS};

static int min_int(int a, int b)
{
	return a < b ? a : b;
}

static int columns_width(int mask)
{
	int w = 0, n = 0;

	for (int col = 0; col < TOP_COL_MAX; col++)
		if (mask & (1 << col)) {
			w += ranks_column_width(col);
			n++;
		}
	return n > 0 ? w + n - 1 : 0;
}

/* The layout with `bottom` rows at the bottom for keys or what is hidden. */
static void layout_with(const struct top_state *st, int cols, int rows, int bottom, struct top_layout *l)
{
	const struct live_view *v = st->view;
	int want = v && v->nranks > 0 ? (int)v->nranks : 1, nf = v ? (int)v->job.nfindings : 0;
	int avail, rank_rows, finding_lines = 0, first, hidden_cols = 0;
	size_t at = 0;

	memset(l, 0, sizeof *l);
	l->cols = cols;
	l->rows = rows;
	l->header_rows = min_int(header_rows(st, cols), rows > 1 ? rows - 1 : 1);
	l->bottom_row = rows - bottom;
	avail = rows - l->header_rows - bottom;
	if (avail < 0)
		avail = 0;

	/* The summary line first, then the table's header and its first rows. */
	avail -= avail > 0;
	first = min_int(want, TOP_MIN_RANK_ROWS);
	rank_rows = avail > 1 ? min_int(first, avail - 1) : 0;
	avail -= rank_rows > 0 ? rank_rows + 1 : 0;
	if (avail >= TOP_STRIP_ROWS && st->screen == TOP_SCREEN_MAIN) {
		l->strip_rows = TOP_STRIP_ROWS;
		avail -= TOP_STRIP_ROWS;
	}
	{
		int some = min_int(nf, st->pane == TOP_PANE_FINDINGS || st->fix_open ? 8 : 3);

		finding_lines = min_int(some, avail);
		avail -= finding_lines;
	}
	if (rank_rows > 0) {
		int more = min_int(want - rank_rows, avail);

		rank_rows += more;
		avail -= more;
	}
	{
		int more = min_int(nf - finding_lines, avail);

		finding_lines += more;
		avail -= more;
	}

	l->header_row = 0;
	l->table_row = l->header_rows;
	l->table_rows = rank_rows > 0 ? rank_rows + 1 : 0;
	l->findings_row = l->table_row + l->table_rows;
	l->findings_rows = l->findings_row < l->bottom_row ? 1 + finding_lines : 0;
	l->strip_row = l->findings_row + l->findings_rows;

	/* Columns that fit. */
	l->columns = (1 << TOP_COL_MAX) - 1;
	for (size_t i = 0; i < sizeof drop_order / sizeof drop_order[0] && columns_width(l->columns) > cols; i++) {
		l->columns &= ~(1 << drop_order[i]);
		hidden_cols++;
	}

	/* What is hidden, said. */
	if (st->screen != TOP_SCREEN_MAIN)
		return;
	if (rank_rows < first && v && v->nranks > 0)
		at += (size_t)snprintf(l->hides + at, sizeof l->hides - at, "; rank table cut to %d row%s", rank_rows,
				       rank_rows == 1 ? "" : "s");
	if (l->strip_rows == 0)
		at += (size_t)snprintf(l->hides + at, sizeof l->hides - at, "; strip hidden");
	if (hidden_cols > 0) {
		at += (size_t)snprintf(l->hides + at, sizeof l->hides - at, "; columns hidden:");
		for (int i = 0; i < hidden_cols && at < sizeof l->hides; i++)
			at += (size_t)snprintf(l->hides + at, sizeof l->hides - at, "%s %s", i ? "," : "",
					       ranks_column_name(drop_order[i]));
	}
	if (at > 0) {
		char tail[sizeof l->hides];

		memcpy(tail, l->hides + 2, sizeof tail - 2);
		tail[sizeof tail - 1] = '\0';
		if (snprintf(l->hides, sizeof l->hides, "terminal %dx%d: %s", cols, rows, tail) >= (int)sizeof l->hides)
			l->hides[sizeof l->hides - 1] = '\0'; /* cut: the first of what is hidden are said */
	}
}

void layout_compute(const struct top_state *st, int cols, int rows, struct top_layout *l)
{
	int bottom = 1;

	/* The message of what is hidden may need more than one line at the bottom. */
	for (int i = 0; i < 3; i++) {
		int need;

		layout_with(st, cols, rows, bottom, l);
		need = ((int)strlen(l->hides) + cols - 1) / cols;
		if (need <= bottom || bottom >= 3)
			break;
		bottom = need > 3 ? 3 : need;
	}
}

/* The bottom rows: the quit question, a message, what is hidden, or the keys. */
static void draw_bottom(struct top_canvas *c, const struct top_state *st, const struct top_layout *l)
{
	char line[512];
	int row = l->bottom_row, n = c->rows - row;

	if (n <= 0)
		return;
	if (st->asking_quit) {
		canvas_fill(c, row, 0, -1, CANVAS_REVERSE | CANVAS_BOLD, CANVAS_COLOR_NONE, " ");
		canvas_put(c, row, 0, -1, CANVAS_REVERSE | CANVAS_BOLD, CANVAS_COLOR_NONE,
			   " stop the job (s) / leave it running and recorded (l) / cancel (any other key)");
		return;
	}
	if (st->feed_error) {
		snprintf(line, sizeof line, " the feed failed: %s; q quits", strerror(-st->feed_error));
		canvas_put(c, row, 0, -1, CANVAS_BOLD, c->color ? CANVAS_COLOR_RED : 0, line);
		return;
	}
	if (st->message[0]) {
		canvas_put(c, row, 0, -1, CANVAS_BOLD, CANVAS_COLOR_NONE, st->message);
		return;
	}
	if (l->hides[0]) {
		const char *s = l->hides;

		/* wrapped at blanks over the rows the layout left for it */
		for (int r = 0; r < n && *s; r++) {
			size_t len = strlen(s), cut = len;

			if (len > (size_t)c->cols) {
				cut = (size_t)c->cols;
				while (cut > 0 && s[cut] != ' ')
					cut--;
				if (cut == 0)
					cut = (size_t)c->cols;
			}
			canvas_put(c, row + r, 0, (int)cut, CANVAS_BOLD, CANVAS_COLOR_NONE, s);
			s += cut;
			while (*s == ' ')
				s++;
		}
		return;
	}
	if (st->opt.once)
		return; /* a snapshot: no keys to offer */
	if (st->info.job_state == TOP_JOB_ENDED && !st->opt.exit_with_job)
		snprintf(line, sizeof line, " the job has ended: q quits");
	else
		snprintf(line, sizeof line,
			 " q quit  p pause  s < > sort  r rank  f findings  u units  Tab pane  ? help");
	canvas_put(c, row, 0, -1, CANVAS_DIM, CANVAS_COLOR_NONE, line);
	if (st->view && st->screen == TOP_SCREEN_MAIN) {
		int k = snprintf(line, sizeof line, " sort: %s %s", ranks_column_words(st->sort_col),
				 st->sort_desc ? "(highest first)" : "(lowest first)");

		if (c->cols >= 80 + k)
			canvas_put(c, row, c->cols - k, k, CANVAS_DIM, CANVAS_COLOR_NONE, line);
	}
}

void top_draw(struct top_canvas *c, struct top_state *st)
{
	struct top_layout l;
	char line[512];

	canvas_clear(c);
	layout_compute(st, c->cols, c->rows, &l);
	draw_header(c, st, 0);
	if (!st->view) {
		canvas_put(c, l.table_row, 0, -1, CANVAS_BOLD, CANVAS_COLOR_NONE,
			   " waiting for the job's first view...");
		draw_bottom(c, st, &l);
		return;
	}
	if (st->screen == TOP_SCREEN_MAIN && !st->fix_open) {
		draw_ranks(c, st, &l);
		draw_findings(c, st, l.findings_row, l.findings_rows);
		draw_strip(c, st, l.strip_row, l.strip_rows);
	} else if (st->screen == TOP_SCREEN_MAIN) {
		/* The fix opens below the findings pane, over the rank table and the strip. */
		int lines = l.findings_rows > 0 ? min_int(l.findings_rows, 4) : 0;

		draw_findings(c, st, l.table_row, lines);
		draw_fix(c, st, l.table_row + lines, l.bottom_row - l.table_row - lines);
	} else {
		int lower = l.bottom_row - l.table_row - 1;

		if (st->screen == TOP_SCREEN_UNITS)
			draw_units(c, st, l.table_row, lower);
		else
			draw_help(c, st, l.table_row, lower);
		if (l.bottom_row - 1 >= l.table_row)
			canvas_put(c, l.bottom_row - 1, 0, -1, CANVAS_BOLD, CANVAS_COLOR_NONE,
				   findings_summary(st->view, line, sizeof line));
	}
	draw_bottom(c, st, &l);
}
