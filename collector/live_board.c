/*
 * live_board.c - the latest copy of the live view, shared with readers on
 * other threads (/metrics, the viewer endpoint).
 *
 * A copy is immutable once put; each holds a count of its readers. The
 * session's thread only swaps a pointer under the mutex: a reader that
 * keeps a copy for a long time (a slow viewer) costs memory for that copy,
 * never time on the session's thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "collector/live.h"

struct held {
	struct live_view *view;
	unsigned readers;
	int current;
	struct held *next;
};

struct live_board {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct held *held; /* the current copy and copies readers still hold */
	uint64_t generation;
	int closed;
};

void live_view_free(struct live_view *v)
{
	if (!v)
		return;
	free(v->ranks);
	free(v);
}

int live_board_new(live_board_t **out)
{
	live_board_t *b = calloc(1, sizeof *b);
	pthread_condattr_t ca;

	if (!b)
		return -ENOMEM;
	pthread_mutex_init(&b->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->cv, &ca);
	pthread_condattr_destroy(&ca);
	*out = b;
	return 0;
}

void live_board_free(live_board_t *b)
{
	if (!b)
		return;
	for (struct held *h = b->held, *n; h; h = n) {
		n = h->next;
		live_view_free(h->view);
		free(h);
	}
	pthread_cond_destroy(&b->cv);
	pthread_mutex_destroy(&b->mu);
	free(b);
}

/* Drop copies that are neither current nor read; b->mu held. */
static void board_sweep(live_board_t *b)
{
	struct held **pp = &b->held;

	while (*pp) {
		struct held *h = *pp;
		if (!h->current && h->readers == 0) {
			*pp = h->next;
			live_view_free(h->view);
			free(h);
		} else {
			pp = &h->next;
		}
	}
}

int live_board_put(live_board_t *b, struct live_view *v)
{
	struct held *h = calloc(1, sizeof *h);

	pthread_mutex_lock(&b->mu);
	if (!h) {
		/* Out of memory: the view is lost, the previous copy stays. */
		pthread_mutex_unlock(&b->mu);
		live_view_free(v);
		return 0;
	}
	v->generation = ++b->generation;
	for (struct held *o = b->held; o; o = o->next)
		o->current = 0;
	h->view = v;
	h->current = 1;
	h->next = b->held;
	b->held = h;
	board_sweep(b);
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	return 0;
}

const struct live_view *live_board_acquire(live_board_t *b)
{
	const struct live_view *v = NULL;

	pthread_mutex_lock(&b->mu);
	for (struct held *h = b->held; h; h = h->next)
		if (h->current) {
			h->readers++;
			v = h->view;
			break;
		}
	pthread_mutex_unlock(&b->mu);
	return v;
}

void live_board_release(live_board_t *b, const struct live_view *v)
{
	if (!v)
		return;
	pthread_mutex_lock(&b->mu);
	for (struct held *h = b->held; h; h = h->next)
		if (h->view == v && h->readers > 0) {
			h->readers--;
			break;
		}
	board_sweep(b);
	pthread_mutex_unlock(&b->mu);
}

uint64_t live_board_wait(live_board_t *b, uint64_t seen, int timeout_ms)
{
	struct timespec ts;
	uint64_t g;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&b->mu);
	while (b->generation == seen && !b->closed) {
		if (timeout_ms < 0)
			pthread_cond_wait(&b->cv, &b->mu);
		else if (pthread_cond_timedwait(&b->cv, &b->mu, &ts) == ETIMEDOUT)
			break;
	}
	g = b->generation;
	pthread_mutex_unlock(&b->mu);
	return g;
}

void live_board_close(live_board_t *b)
{
	pthread_mutex_lock(&b->mu);
	b->closed = 1;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

int live_board_closed(live_board_t *b)
{
	int c;

	pthread_mutex_lock(&b->mu);
	c = b->closed;
	pthread_mutex_unlock(&b->mu);
	return c;
}
