/*
 * draw.h - the views of the dashboard, each drawn into a canvas from the
 * screen's state and the view it holds (tui/state.h): never from the
 * terminal. One file a view (draw_header.c, draw_ranks.c, ...); layout.c
 * decides which panes fit where and says on screen what a small terminal
 * hides.
 */
#ifndef FSS_TUI_DRAW_H
#define FSS_TUI_DRAW_H

#include <stddef.h>
#include <stdint.h>

#include "tui/canvas.h"
#include "tui/state.h"

/* What the rank table guarantees at 80x24 (issue 12): at least this many rows. */
#define TOP_MIN_RANK_ROWS 10
/* Rows of the time strip: title, gather numbers, the strip, its legend. */
#define TOP_STRIP_ROWS 4

/* Where each part of the main screen goes (rows from the top; 0 rows: hidden). */
struct top_layout {
	int cols, rows;
	int header_row, header_rows;	 /* mode line, figures line, the hang banner when there is one */
	int table_row, table_rows;	 /* the rank table: its header row, then table_rows - 1 rank rows */
	int findings_row, findings_rows; /* the summary line, then one line a finding */
	int strip_row, strip_rows;
	int bottom_row;	 /* keys / messages / what is hidden */
	int columns;	 /* bit (1 << enum top_column) per column shown */
	char hides[200]; /* "terminal 60x15: rank table cut to 5 rows; strip hidden", "" */
};

/* layout_compute - the main screen's layout for a canvas of cols x rows
 * and the state's view (its ranks and findings). */
void layout_compute(const struct top_state *st, int cols, int rows, struct top_layout *out);

/* top_draw - the whole screen for the state's view (or a line saying none
 * came yet), the layout clamping the state's scroll positions. */
void top_draw(struct top_canvas *c, struct top_state *st);

/* Each view: draws rows [row, row + nrows) of the canvas. */
int draw_header(struct top_canvas *c, const struct top_state *st, int row); /* returns rows used */
int header_rows(const struct top_state *st, int cols);			    /* 3, and the hang banner's 1 or 2 */
void draw_ranks(struct top_canvas *c, struct top_state *st, const struct top_layout *l);
void draw_findings(struct top_canvas *c, struct top_state *st, int row, int nrows);
void draw_fix(struct top_canvas *c, struct top_state *st, int row, int nrows);
void draw_strip(struct top_canvas *c, struct top_state *st, int row, int nrows);
void draw_units(struct top_canvas *c, struct top_state *st, int row, int nrows);
void draw_help(struct top_canvas *c, struct top_state *st, int row, int nrows);

/* findings_summary - "3 findings: 2 errors (collective-hang, wrap-too-fine),
 * 1 warning", "no findings", "not diagnosed yet". Returns buf. */
char *findings_summary(const struct live_view *v, char *buf, size_t len);

/* hang_banner - the first hang as one line: "HANG: rank 1 (host, pid 42) has
 * not entered collective #57 (AllGather) of communicator 0123...; ranks 0, 2
 * wait 63 s". 0 when there is no hang (buf ""), 1 otherwise. */
int hang_banner(const struct live_view *v, char *buf, size_t len);

/* ---- the rank table's figures (draw_ranks.c) ---------------------------- */

/* ranks_order - the view's rank indices as the table lists them (the
 * state's sort column and direction, ties by rank); order holds
 * v->nranks entries. */
void ranks_order(const struct top_state *st, const struct live_view *v, size_t *order);
/* ranks_slowest - index of the rank with the highest last step time, -1 none. */
int ranks_slowest(const struct live_view *v);
/* ranks_headline - the rank whose window the header's sparkline shows: the
 * lowest rank with a step, -1 none. */
int ranks_headline(const struct live_view *v);
/* ranks_column_name - the column's header ("STEP"), and its words for the
 * sort line ("step time"). */
const char *ranks_column_name(int col);
const char *ranks_column_words(int col);
/* ranks_column_width - its cells (a blank separates columns). */
int ranks_column_width(int col);
/* ranks_strip_index - the index of the strip's rank in v (st->strip_rank,
 * or the slowest), -1 none. */
int ranks_strip_index(const struct top_state *st, const struct live_view *v);

/* ---- figures in a few cells (format.c) ----------------------------------- */

/* fmt_ns - a duration in at most 6 cells: "812us", "12.3ms", "512ms", "1.23s", "63s". */
char *fmt_ns(char *buf, size_t len, uint64_t ns);
/* fmt_bytes - "512B", "1.5KB", "12MB", "3.2GB". */
char *fmt_bytes(char *buf, size_t len, uint64_t bytes);
/* fmt_count - "987", "12.3k", "4.5M". */
char *fmt_count(char *buf, size_t len, double n);
/* op_short - "AG", "RS", "AR", ... for a table cell; op_long - "AllGather". */
const char *op_short(int op);
const char *op_long(int op);
/* severity_name - "error", "warning", "info". */
const char *severity_name(int severity);

#endif
