/*
 * feed_end.h - how a feed of `fsdpscope top` (tui/feeds.h) ends, the same
 * for each: its thread told to stop and joined, then its board feed freed
 * and the board it reads closed (waking any waiter for good) and freed.
 */
#ifndef FSS_TUI_FEED_END_H
#define FSS_TUI_FEED_END_H

#include <pthread.h>

#include "collector/live.h"
#include "tui/feeds.h"

/* top_feed_stop_thread - set *stopping under mu, wake cv (NULL: none), and join thread. */
void top_feed_stop_thread(pthread_t thread, pthread_mutex_t *mu, pthread_cond_t *cv, int *stopping);

/* top_feed_close_board - free bf, then close and free board (either NULL ok). */
void top_feed_close_board(top_board_feed_t *bf, live_board_t *board);

#endif
