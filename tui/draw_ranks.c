/*
 * draw_ranks.c - the rank table: a row per rank, sortable by any column,
 * the slowest rank in bold reverse video, scrolled to keep the selected
 * row on screen. Figures a mode cannot measure read n/a, never 0 (attach:
 * exposure and compute); a rank with no analysed step yet reads "-".
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui/draw.h"

struct column {
	const char *label; /* header; the sort marker goes after it */
	const char *words; /* for messages */
	int width;
	int left; /* 1: left-aligned text */
};

/* Widths add up to 80 with a blank between columns (80x24 shows them all). */
static const struct column columns[TOP_COL_MAX] = {
    [TOP_COL_RANK] = {"RANK", "rank", 5, 0},
    [TOP_COL_HOST] = {"HOST", "host", 6, 1},
    [TOP_COL_PID] = {"PID", "pid", 7, 0},
    [TOP_COL_STEP] = {"STEP", "step time", 7, 0},
    [TOP_COL_GATHERS] = {"AG/st", "AllGathers per step", 7, 0},
    [TOP_COL_EXPOSED] = {"EXPOS", "exposed gather time", 6, 0},
    [TOP_COL_SHARE] = {"EXP%", "exposed share of the step", 5, 0},
    [TOP_COL_COMPUTE] = {"COMP", "compute", 6, 0},
    [TOP_COL_SLOWEST] = {"SLOWEST", "slowest collective", 9, 1},
    [TOP_COL_LATE] = {"LATE", "lateness", 7, 0},
    [TOP_COL_DROPS] = {"DROP", "records dropped", 5, 0},
};

const char *ranks_column_name(int col)
{
	return col >= 0 && col < TOP_COL_MAX ? columns[col].label : "?";
}

const char *ranks_column_words(int col)
{
	return col >= 0 && col < TOP_COL_MAX ? columns[col].words : "?";
}

int ranks_column_width(int col)
{
	return col >= 0 && col < TOP_COL_MAX ? columns[col].width : 0;
}

int ranks_slowest(const struct live_view *v)
{
	int best = -1;

	for (size_t i = 0; v && i < v->nranks; i++)
		if (v->ranks[i].last.step_ns > 0 &&
		    (best < 0 || v->ranks[i].last.step_ns > v->ranks[best].last.step_ns))
			best = (int)i;
	return best;
}

int ranks_headline(const struct live_view *v)
{
	for (size_t i = 0; v && i < v->nranks; i++)
		if (v->ranks[i].nwindow > 0 || v->ranks[i].last.step_ns > 0)
			return (int)i;
	return -1;
}

int ranks_strip_index(const struct top_state *st, const struct live_view *v)
{
	if (!v || v->nranks == 0)
		return -1;
	if (st->strip_rank >= 0)
		for (size_t i = 0; i < v->nranks; i++)
			if (v->ranks[i].rank == st->strip_rank)
				return (int)i;
	return ranks_slowest(v) >= 0 ? ranks_slowest(v) : 0;
}

/* The longest event of the rank's last step, NULL none. */
static const struct live_event *slowest_event(const struct live_rank *r)
{
	const struct live_event *best = NULL;

	for (size_t i = 0; i < r->nstrip; i++) {
		const struct live_event *e = &r->strip[i];

		if (e->end_ns >= e->start_ns && (!best || e->end_ns - e->start_ns > best->end_ns - best->start_ns))
			best = e;
	}
	return best;
}

/* Attach mode, or a rank the live state says attach observed: uprobes time
 * host calls only, exposure and compute read n/a. */
static int measures_exposure(int mode, const struct live_rank *r)
{
	return mode != TOP_MODE_ATTACH && !r->attached;
}

/* The figure a column sorts by; 0 when the rank has none (it sorts last). */
static int column_value(const struct live_rank *r, int col, int mode, double *out)
{
	const struct live_event *e;
	int stepped = r->last.step_ns > 0;

	switch (col) {
	case TOP_COL_RANK:
		*out = r->rank;
		return r->rank >= 0;
	case TOP_COL_PID:
		*out = r->pid;
		return 1;
	case TOP_COL_STEP:
		*out = (double)r->last.step_ns;
		return stepped;
	case TOP_COL_GATHERS:
		*out = r->last.allgathers;
		return stepped;
	case TOP_COL_EXPOSED:
		*out = (double)r->last.exposed_allgather_ns;
		return stepped && measures_exposure(mode, r);
	case TOP_COL_SHARE:
		*out = stepped ? (double)r->last.exposed_allgather_ns / (double)r->last.step_ns : 0;
		return stepped && measures_exposure(mode, r);
	case TOP_COL_COMPUTE:
		*out = (double)r->last.compute_ns;
		return stepped && measures_exposure(mode, r);
	case TOP_COL_SLOWEST:
		e = slowest_event(r);
		*out = e ? (double)(e->end_ns - e->start_ns) : 0;
		return e != NULL;
	case TOP_COL_LATE:
		*out = (double)r->lateness_ns;
		return stepped;
	case TOP_COL_DROPS:
		*out = (double)r->dropped;
		return 1;
	default:
		*out = 0;
		return 0;
	}
}

struct sort_ctx {
	const struct live_view *v;
	int col, desc, mode;
};

static int rank_cmp(const void *pa, const void *pb, void *pc)
{
	const struct sort_ctx *s = pc;
	const struct live_rank *a = &s->v->ranks[*(const size_t *)pa], *b = &s->v->ranks[*(const size_t *)pb];
	int c = 0;

	if (s->col == TOP_COL_HOST) {
		c = strcmp(a->host, b->host);
	} else {
		double x, y;
		int kx = column_value(a, s->col, s->mode, &x), ky = column_value(b, s->col, s->mode, &y);

		if (kx != ky)
			return kx ? -1 : 1; /* figures not known last, either way */
		if (kx)
			c = x < y ? -1 : x > y ? 1 : 0;
	}
	if (s->desc)
		c = -c;
	if (c == 0) {
		/* ties by rank, unknown ranks last, then by source */
		if ((a->rank < 0) != (b->rank < 0))
			return a->rank < 0 ? 1 : -1;
		c = a->rank < b->rank ? -1 : a->rank > b->rank ? 1 : 0;
		if (c == 0)
			c = a->source < b->source ? -1 : a->source > b->source;
	}
	return c;
}

void ranks_order(const struct top_state *st, const struct live_view *v, size_t *order)
{
	struct sort_ctx s = {v, st->sort_col, st->sort_desc, st->info.mode};

	for (size_t i = 0; i < v->nranks; i++)
		order[i] = i;
	qsort_r(order, v->nranks, sizeof *order, rank_cmp, &s);
}

/* The cell text of rank r in column col. */
static void cell_text(const struct top_state *st, const struct live_view *v, const struct live_rank *r, int col,
		      char *buf, size_t len)
{
	const struct live_event *e;
	int stepped = r->last.step_ns > 0, exposure = measures_exposure(st->info.mode, r);
	char a[32];

	switch (col) {
	case TOP_COL_RANK:
		if (r->rank >= 0) /* a rank guessed from pid order reads as one */
			snprintf(buf, len, "%d%s", r->rank, r->rank_from == SOURCE_RANK_GUESSED_ORDER ? "?" : "");
		else
			snprintf(buf, len, "?");
		return;
	case TOP_COL_HOST:
		snprintf(buf, len, "%s", r->host[0] ? r->host : "-");
		return;
	case TOP_COL_PID:
		snprintf(buf, len, "%u", r->pid);
		return;
	case TOP_COL_DROPS:
		fmt_count(buf, len, (double)r->dropped);
		return;
	default:
		break;
	}
	if (col == TOP_COL_SLOWEST) {
		e = slowest_event(r);
		if (e)
			snprintf(buf, len, "%s %s", op_short(e->op), fmt_ns(a, sizeof a, e->end_ns - e->start_ns));
		else
			snprintf(buf, len, "-");
		return;
	}
	if ((col == TOP_COL_EXPOSED || col == TOP_COL_SHARE || col == TOP_COL_COMPUTE) && !exposure) {
		snprintf(buf, len, "n/a");
		return;
	}
	if (!stepped) {
		snprintf(buf, len, "-");
		return;
	}
	switch (col) {
	case TOP_COL_STEP:
		fmt_ns(buf, len, r->last.step_ns);
		break;
	case TOP_COL_GATHERS:
		if (v->job.repeating_units > 0 && v->job.allgathers_per_step > 0)
			snprintf(buf, len, "%u/%u", r->last.allgathers, v->job.allgathers_per_step);
		else
			snprintf(buf, len, "%u", r->last.allgathers);
		break;
	case TOP_COL_EXPOSED:
		fmt_ns(buf, len, r->last.exposed_allgather_ns);
		break;
	case TOP_COL_SHARE:
		snprintf(buf, len, "%.0f%%", 100.0 * (double)r->last.exposed_allgather_ns / (double)r->last.step_ns);
		break;
	case TOP_COL_COMPUTE:
		fmt_ns(buf, len, r->last.compute_ns);
		break;
	case TOP_COL_LATE:
		if (r->lateness_ns == 0 && !v->job.diagnosed)
			snprintf(buf, len, "-");
		else if (r->lateness_ns < 0)
			snprintf(buf, len, "-%s", fmt_ns(a, sizeof a, (uint64_t)(-r->lateness_ns)));
		else
			fmt_ns(buf, len, (uint64_t)r->lateness_ns);
		break;
	default:
		snprintf(buf, len, "?");
		break;
	}
}

/* Put text in a column's cell, aligned, clipped to its width. */
static void put_cell(struct top_canvas *c, int row, int col, int width, int left, uint8_t attr, uint8_t color,
		     const char *text)
{
	int n = utf8_cells(text);

	if (n > width)
		n = width;
	canvas_put(c, row, left ? col : col + width - n, width, attr, color, text);
}

void draw_ranks(struct top_canvas *c, struct top_state *st, const struct top_layout *l)
{
	const struct live_view *v = st->view;
	int rows = l->table_rows - 1, slowest = ranks_slowest(v), focused = st->pane == TOP_PANE_RANKS;
	const char *down = c->utf8 ? "▼" : "v", *up = c->utf8 ? "▲" : "^";
	size_t *order;
	int x = 0;

	if (l->table_rows <= 0)
		return;
	/* The header row names the columns, the sort column marked and bold. */
	canvas_fill(c, l->table_row, 0, -1, CANVAS_REVERSE, CANVAS_COLOR_NONE, " ");
	for (int col = 0; col < TOP_COL_MAX; col++) {
		char label[32];

		if (!(l->columns & (1 << col)))
			continue;
		snprintf(label, sizeof label, "%s%s", columns[col].label,
			 col == st->sort_col ? (st->sort_desc ? down : up) : "");
		put_cell(c, l->table_row, x, columns[col].width, columns[col].left,
			 CANVAS_REVERSE | (col == st->sort_col ? CANVAS_BOLD : 0),
			 col == st->sort_col && c->color ? CANVAS_COLOR_CYAN : CANVAS_COLOR_NONE, label);
		x += columns[col].width + 1;
	}
	st->page[TOP_PANE_RANKS] = rows;
	if (rows <= 0 || !v || v->nranks == 0)
		return;
	order = calloc(v->nranks, sizeof *order);
	if (!order)
		return;
	ranks_order(st, v, order);

	/* Keep the selection on the list and on screen. */
	if (st->rank_sel >= (int)v->nranks)
		st->rank_sel = (int)v->nranks - 1;
	if (st->rank_sel < st->rank_scroll)
		st->rank_scroll = st->rank_sel;
	if (st->rank_sel >= st->rank_scroll + rows)
		st->rank_scroll = st->rank_sel - rows + 1;
	if (st->rank_scroll > (int)v->nranks - rows)
		st->rank_scroll = (int)v->nranks - rows;
	if (st->rank_scroll < 0)
		st->rank_scroll = 0;

	for (int i = 0; i < rows && st->rank_scroll + i < (int)v->nranks; i++) {
		int idx = st->rank_scroll + i, row = l->table_row + 1 + i;
		const struct live_rank *r = &v->ranks[order[idx]];
		uint8_t attr = 0, color = CANVAS_COLOR_NONE;

		if ((int)order[idx] == slowest && v->nranks > 1) {
			attr = CANVAS_BOLD | CANVAS_REVERSE;
			color = c->color ? CANVAS_COLOR_YELLOW : CANVAS_COLOR_NONE;
		}
		if (r->ended)
			attr |= CANVAS_DIM;
		if (attr & CANVAS_REVERSE)
			canvas_fill(c, row, 0, x > 0 ? x - 1 : 0, attr, color, " ");
		x = 0;
		for (int col = 0; col < TOP_COL_MAX; col++) {
			char text[64];

			if (!(l->columns & (1 << col)))
				continue;
			cell_text(st, v, r, col, text, sizeof text);
			put_cell(c, row, x, columns[col].width, columns[col].left, attr, color, text);
			x += columns[col].width + 1;
		}
		if (focused && idx == st->rank_sel)
			canvas_put(c, row, 0, 1, attr | CANVAS_BOLD, color, c->utf8 ? "▶" : ">");
	}
	/* More rows than fit and room right of the columns: say where the window is
	 * (the bottom line says it too). */
	if ((int)v->nranks > rows) {
		char more[48];
		int n = snprintf(more, sizeof more, " %d-%d/%zu", st->rank_scroll + 1,
				 st->rank_scroll + rows < (int)v->nranks ? st->rank_scroll + rows : (int)v->nranks,
				 v->nranks);

		if (c->cols - x >= n)
			canvas_put(c, l->table_row, c->cols - n, n, CANVAS_REVERSE, CANVAS_COLOR_NONE, more);
	}
	free(order);
}
