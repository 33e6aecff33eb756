/*
 * feed_board.c - a dashboard feed of the views on a board (tui/feeds.h).
 *
 * The producer (a session's thread, a viewer client, a replay) publishes on
 * the board and never waits for the dashboard; the dashboard takes the
 * latest view. A small thread of the feed waits on the board and turns
 * each new generation into a readable eventfd, so that the screen can poll
 * the keyboard and the feed together.
 */
#include "tui/feed_thread.h"
#include "tui/feeds.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* How long the watcher sleeps in one board wait: how soon it sees the feed stopping. */
#define BOARD_WATCH_MS 200

struct top_board_feed {
	live_board_t *board;
	int efd;
	pthread_t thread;
	int thread_started;
	pthread_mutex_t mu; /* guards what follows */
	struct top_info info;
	uint64_t info_gen;  /* rises with every set_info / fail */
	uint64_t info_seen; /* info_gen as the dashboard last saw it (wait) */
	uint64_t published; /* the board's newest generation as the watcher saw it */
	uint64_t shown;	    /* the generation the dashboard was last told of (wait) */
	int error;	    /* a negative errno once the producer failed */
	int stopping;
};

static void poke(top_board_feed_t *f)
{
	uint64_t one = 1;

	/* The counter only saturates after 2^64 - 1 pokes: a failed write loses nothing. */
	if (write(f->efd, &one, sizeof(one)) < 0)
		return;
}

static void *watch(void *arg)
{
	top_board_feed_t *f = arg;
	uint64_t seen = 0;

	for (;;) {
		uint64_t g;
		int stop;

		pthread_mutex_lock(&f->mu);
		stop = f->stopping;
		pthread_mutex_unlock(&f->mu);
		if (stop)
			break;
		g = live_board_wait(f->board, seen, BOARD_WATCH_MS);
		if (g > seen) {
			seen = g;
			pthread_mutex_lock(&f->mu);
			f->published = g;
			pthread_mutex_unlock(&f->mu);
			poke(f);
		} else if (live_board_closed(f->board)) {
			/* No publish will come: wake the dashboard once more and stop. */
			poke(f);
			break;
		}
	}
	return NULL;
}

int top_board_feed_new(top_board_feed_t **out, live_board_t *board, const struct top_info *info)
{
	top_board_feed_t *f = calloc(1, sizeof(*f));
	int err;

	*out = NULL;
	if (!f)
		return -ENOMEM;
	f->board = board;
	if (info)
		f->info = *info;
	f->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (f->efd < 0) {
		err = -errno;
		free(f);
		return err;
	}
	pthread_mutex_init(&f->mu, NULL);
	err = pthread_create(&f->thread, NULL, watch, f);
	if (err) {
		close(f->efd);
		pthread_mutex_destroy(&f->mu);
		free(f);
		return -err;
	}
	f->thread_started = 1;
	*out = f;
	return 0;
}

static const struct live_view *cb_acquire(void *ctx)
{
	top_board_feed_t *f = ctx;

	return live_board_acquire(f->board);
}

static void cb_release(void *ctx, const struct live_view *v)
{
	top_board_feed_t *f = ctx;

	if (v)
		live_board_release(f->board, v);
}

/* Something the dashboard has not been told of: 1 and noted as told, else 0. */
static int take_news(top_board_feed_t *f)
{
	int news = 0;
	/* The board itself, not only the watcher's note: a view published just
	 * now (a replay's step) is news at once. */
	uint64_t g = live_board_wait(f->board, UINT64_MAX, 0);

	pthread_mutex_lock(&f->mu);
	if (g > f->published)
		f->published = g;
	if (f->published > f->shown) {
		f->shown = f->published;
		news = 1;
	}
	if (f->info_gen != f->info_seen) {
		f->info_seen = f->info_gen;
		news = 1;
	}
	pthread_mutex_unlock(&f->mu);
	return news;
}

static int cb_wait(void *ctx, int timeout_ms)
{
	top_board_feed_t *f = ctx;
	struct pollfd p = {.fd = f->efd, .events = POLLIN};
	uint64_t drained;
	int err;

	pthread_mutex_lock(&f->mu);
	err = f->error;
	pthread_mutex_unlock(&f->mu);
	if (err)
		return err;
	if (take_news(f))
		goto drain;
	if (poll(&p, 1, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	pthread_mutex_lock(&f->mu);
	err = f->error;
	pthread_mutex_unlock(&f->mu);
	if (err)
		return err;
	if (!take_news(f))
		return 0;
drain:
	/* Readable again only for what comes after this. */
	if (read(f->efd, &drained, sizeof(drained)) < 0)
		drained = 0;
	return 1;
}

static int cb_fd(void *ctx)
{
	return ((top_board_feed_t *)ctx)->efd;
}

/* Distinct host names among the view's ranks, 0 when none is known. */
static uint32_t count_hosts(const struct live_view *v)
{
	uint32_t n = 0;

	for (size_t i = 0; v && i < v->nranks; i++) {
		size_t k;

		if (!v->ranks[i].host[0])
			continue;
		for (k = 0; k < i && strncmp(v->ranks[k].host, v->ranks[i].host, LIVE_NAME_BYTES); k++)
			;
		n += k == i;
	}
	return n;
}

static void cb_info(void *ctx, struct top_info *out)
{
	top_board_feed_t *f = ctx;

	top_board_feed_get_info(f, out);
	/* The producer left the nodes to the view: the hosts its ranks name. */
	if (!out->nodes) {
		const struct live_view *v = live_board_acquire(f->board);

		out->nodes = count_hosts(v);
		if (v)
			live_board_release(f->board, v);
	}
}

void top_board_feed_bind(top_board_feed_t *f, struct top_feed *feed)
{
	memset(feed, 0, sizeof(*feed));
	feed->ctx = f;
	feed->acquire = cb_acquire;
	feed->release = cb_release;
	feed->wait = cb_wait;
	feed->fd = cb_fd;
	feed->info = cb_info;
}

void top_board_feed_set_info(top_board_feed_t *f, const struct top_info *info)
{
	pthread_mutex_lock(&f->mu);
	f->info = *info;
	f->info_gen++;
	pthread_mutex_unlock(&f->mu);
	poke(f);
}

void top_board_feed_get_info(top_board_feed_t *f, struct top_info *out)
{
	pthread_mutex_lock(&f->mu);
	*out = f->info;
	pthread_mutex_unlock(&f->mu);
}

void top_board_feed_fail(top_board_feed_t *f, int err, const char *how)
{
	pthread_mutex_lock(&f->mu);
	if (!f->error)
		f->error = err < 0 ? err : -EIO;
	if (how)
		strncpy(f->info.how, how, sizeof(f->info.how) - 1);
	f->info_gen++;
	pthread_mutex_unlock(&f->mu);
	poke(f);
}

void top_board_feed_free(top_board_feed_t *f)
{
	if (!f)
		return;
	if (f->thread_started)
		top_feed_stop_thread(f->thread, &f->mu, NULL, &f->stopping);
	close(f->efd);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* ---- feeds built on a board feed ------------------------------------------ */

/* ctx begins with the struct top_feed the call goes to (top_feed_forward). */
static const struct live_view *fwd_acquire(void *ctx)
{
	const struct top_feed *in = ctx;

	return in->acquire(in->ctx);
}

static void fwd_release(void *ctx, const struct live_view *v)
{
	const struct top_feed *in = ctx;

	in->release(in->ctx, v);
}

static int fwd_wait(void *ctx, int timeout_ms)
{
	const struct top_feed *in = ctx;

	return in->wait(in->ctx, timeout_ms);
}

static int fwd_fd(void *ctx)
{
	const struct top_feed *in = ctx;

	return in->fd(in->ctx);
}

static void fwd_info(void *ctx, struct top_info *out)
{
	const struct top_feed *in = ctx;

	in->info(in->ctx, out);
}

void top_feed_forward(struct top_feed *feed, void *owner)
{
	memset(feed, 0, sizeof(*feed));
	feed->ctx = owner;
	feed->acquire = fwd_acquire;
	feed->release = fwd_release;
	feed->wait = fwd_wait;
	feed->fd = fwd_fd;
	feed->info = fwd_info;
}
