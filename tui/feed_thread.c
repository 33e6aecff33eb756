/*
 * feed_thread.c - a feed's start and end (feed_thread.h).
 */
#include "tui/feed_thread.h"

int top_feed_start(top_board_feed_t **bf, live_board_t *board, const struct top_info *info, struct top_feed *feed,
		   pthread_t *thread, void *(*fn)(void *), void *arg)
{
	int rc = top_board_feed_new(bf, board, info);

	if (rc)
		return rc;
	top_board_feed_bind(*bf, feed);
	return -pthread_create(thread, NULL, fn, arg);
}

void top_feed_stop_thread(pthread_t thread, pthread_mutex_t *mu, pthread_cond_t *cv, int *stopping)
{
	pthread_mutex_lock(mu);
	*stopping = 1;
	if (cv)
		pthread_cond_broadcast(cv);
	pthread_mutex_unlock(mu);
	pthread_join(thread, NULL);
}

void top_feed_close_board(top_board_feed_t *bf, live_board_t *board)
{
	top_board_feed_free(bf);
	if (board)
		live_board_close(board);
	live_board_free(board);
}
