/*
 * feed_end.c - the end of a feed (feed_end.h).
 */
#include "tui/feed_end.h"

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
