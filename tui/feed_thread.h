/*
 * feed_thread.h - how a feed of `fsdpscope top` (tui/feeds.h) with a
 * producer thread of its own starts and ends, the same for each: a board
 * feed over its board, bound to the feed, then the thread; at the end the
 * thread told to stop and joined, then the board feed freed and the board
 * closed (waking any waiter for good) and freed.
 */
#ifndef FSS_TUI_FEED_THREAD_H
#define FSS_TUI_FEED_THREAD_H

#include <pthread.h>

#include "collector/live.h"
#include "tui/feeds.h"

/*
 * top_feed_start - a board feed of `board` (top_board_feed_new) in *bf,
 * bound to `feed`, then `thread` running fn(arg). 0, or a negative errno
 * with what was made left to top_feed_close_board.
 */
int top_feed_start(top_board_feed_t **bf, live_board_t *board, const struct top_info *info, struct top_feed *feed,
		   pthread_t *thread, void *(*fn)(void *), void *arg);

/* top_feed_stop_thread - set *stopping under mu, wake cv (NULL: none), and join thread. */
void top_feed_stop_thread(pthread_t thread, pthread_mutex_t *mu, pthread_cond_t *cv, int *stopping);

/* top_feed_close_board - free bf, then close and free board (either NULL ok). */
void top_feed_close_board(top_board_feed_t *bf, live_board_t *board);

#endif
