/*
 * state.h - the screen's state (tui/): which view and pane, the rank
 * table's sort and scroll, the rank of the time strip, the findings pane's
 * selection and open fix, pause, and the view being shown.
 *
 * The view shown is held (feed->acquire) until a newer one replaces it;
 * while paused it is kept and newer views are not taken, so the feed goes
 * on and the screen freezes. Keys change the state only through
 * state_key, from the one key table (keys.c).
 */
#ifndef FSS_TUI_STATE_H
#define FSS_TUI_STATE_H

#include "collector/live.h"
#include "tui/top.h"

/* What fills the screen below the header. */
enum top_screen_kind {
	TOP_SCREEN_MAIN = 0,  /* rank table, findings, time strip */
	TOP_SCREEN_UNITS = 1, /* forward gathers by repeating unit, communicator roles */
	TOP_SCREEN_HELP = 2,  /* the key table */
};

/* Panes of the main screen the scroll keys can act on (Tab cycles). */
enum top_pane { TOP_PANE_RANKS = 0, TOP_PANE_FINDINGS = 1, TOP_PANE_STRIP = 2, TOP_PANE_MAX };

/* Columns of the rank table, left to right. */
enum top_column {
	TOP_COL_RANK = 0,
	TOP_COL_HOST,
	TOP_COL_PID,
	TOP_COL_STEP,
	TOP_COL_GATHERS,
	TOP_COL_EXPOSED,
	TOP_COL_SHARE,
	TOP_COL_COMPUTE,
	TOP_COL_SLOWEST,
	TOP_COL_LATE,
	TOP_COL_DROPS,
	TOP_COL_MAX
};

struct top_state {
	struct top_feed *feed;
	struct top_options opt;
	const struct live_view *view; /* shown, held from feed->acquire; NULL before the first */
	struct top_info info;
	int paused;
	int missed;	 /* paused: newer views came since (the header says so) */
	int screen;	 /* enum top_screen_kind */
	int pane;	 /* enum top_pane: where the scroll keys act */
	int sort_col;	 /* enum top_column */
	int sort_desc;	 /* 1: highest first */
	int strip_rank;	 /* rank of the time strip; -1: the slowest rank */
	int rank_sel;	 /* selected row of the rank table, in sorted order */
	int rank_scroll; /* first row shown */
	int finding_sel, finding_scroll;
	int fix_open, fix_scroll;
	int units_scroll, help_scroll;
	int page[TOP_PANE_MAX]; /* rows each pane showed when last drawn (PgUp / PgDn) */
	int asking_quit;	/* run mode: the stop / leave / cancel question is on screen */
	int quit;		/* the screen is to end */
	int crash_key;		/* FSDPSCOPE_TOP_CRASH_KEY=1: `C` aborts (test hook) */
	int feed_error;		/* the feed's last failure (negative errno), 0 */
	char message[200];	/* one line for the bottom of the screen, "" */
};

/* state_init - the state at start: main screen, ranks pane, sorted by
 * rank, the strip of opt->first_rank (-1 the slowest); reads
 * FSDPSCOPE_TOP_CRASH_KEY. No view yet: call state_refresh. */
void state_init(struct top_state *st, struct top_feed *feed, const struct top_options *opt);

/* state_done - release the view held. */
void state_done(struct top_state *st);

/* state_refresh - the feed's info, and (unless paused) its newest view in
 * place of the one held. Returns 1 when what is shown changed (another
 * view, other info), 0 otherwise. */
int state_refresh(struct top_state *st);

/*
 * state_key - what key `code` (keys.h) does to the state: the action from
 * the key table, or while the quit question is asked its answer (s stop,
 * l leave, anything else cancels). Calls feed->step (n) and feed->quit
 * (the answer) as the key says; sets st->quit when the screen is to end.
 * Returns 1 when the screen must be redrawn.
 */
int state_key(struct top_state *st, int code);

/* state_sort_column - set the sort column; the same column again reverses
 * the order, another starts in its natural order (figures highest first,
 * rank / host / pid lowest first). */
void state_sort_column(struct top_state *st, int col);

#endif
