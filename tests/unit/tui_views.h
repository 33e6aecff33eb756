/*
 * tui_views.h - hand-made live views and a feed over a board, for the
 * dashboard's tests (tui_*_test.c).
 */
#ifndef FSS_TESTS_TUI_VIEWS_H
#define FSS_TESTS_TUI_VIEWS_H

#include <stddef.h>

#include "collector/live.h"
#include "tui/top.h"

/* tv_view - a view of n ranks (rank i: host "node<i/8>", pid 1000 + i, one
 * analysed step of 100 ms + (i * 37 % n) us, i % 5 drops, a strip of a
 * forward gather and a reduce-scatter), not diagnosed. malloc'd: free with
 * live_view_free (or give it to a board). */
struct live_view *tv_view(size_t n);

/* tv_units - diagnosed with `units` repeating units of k gathers each
 * (per-Linear: k 8; per-block: k 1), a root gather first, and the findings
 * such a job has (wrap-too-fine when k > 1). */
void tv_units(struct live_view *v, unsigned units, unsigned k);

/* tv_hang - a hang: rank 1 has not entered collective #57 (AllGather) of
 * communicator 0x00c0ffee00000001; ranks 0, 2 wait 63 s. */
void tv_hang(struct live_view *v);

/* A feed over a board: views put with tv_feed_put, info from tv_feed.info. */
struct tv_feed {
	live_board_t *board;
	uint64_t seen;
	struct top_info info;
	int steps;	     /* feed->step calls */
	int quits, quit_how; /* feed->quit calls, the last how */
	struct top_feed feed;
};
void tv_feed_init(struct tv_feed *f, int mode);
void tv_feed_done(struct tv_feed *f);
void tv_feed_put(struct tv_feed *f, struct live_view *v);

#endif
