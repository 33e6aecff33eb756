/*
 * screen.c - top_run_screen: the dashboard's loop (tui/top.h).
 *
 * One thread. The loop polls the keyboard, the signal pipe (tui/term.c)
 * and the feed's descriptor; it redraws at once after a key, and for the
 * feed at most every opt->delay_ms (the newest view then: a view that came
 * and went in between is never drawn, so a slow terminal never backs up
 * the feed). With no descriptor from the feed, it waits on the feed in
 * slices of 50 ms between looks at the keyboard.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "tui/canvas.h"
#include "tui/draw.h"
#include "tui/keys.h"
#include "tui/state.h"
#include "tui/term.h"
#include "tui/top.h"

#define SLICE_MS 50

static void redraw(struct top_canvas *c, struct top_state *st)
{
	top_draw(c, st);
	term_present(c);
}

int top_run_screen(struct top_feed *feed, const struct top_options *opt, char *err, size_t errlen)
{
	struct top_state st;
	struct top_canvas *c = NULL;
	int cols, rows, rc, terminated = 0, delay = opt->delay_ms > 0 ? opt->delay_ms : 1000;
	int feed_new = 0, key_since_draw = 0;
	int64_t last_draw;

	if (err && errlen)
		err[0] = '\0';
	state_init(&st, feed, opt);
	rc = term_open(opt->color, err, errlen);
	if (rc < 0)
		return rc;
	term_size(&cols, &rows);
	if (canvas_new(&c, cols, rows, term_utf8()) < 0) {
		term_close();
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->color = term_color();
	if (feed->wait)
		feed->wait(feed->ctx, 0);
	state_refresh(&st);
	redraw(c, &st);
	last_draw = clock_mono_ms();

	while (!st.quit) {
		int ffd = !st.feed_error && feed->fd ? feed->fd(feed->ctx) : -1;
		struct pollfd p[3] = {{.fd = 0, .events = POLLIN},
				      {.fd = term_signal_fd(), .events = POLLIN},
				      {.fd = ffd, .events = POLLIN}};
		int64_t due = last_draw + delay - clock_mono_ms();
		int timeout = due < 0 ? 0 : (int)due, sigs, draw = 0, key;

		if (ffd < 0 && !st.feed_error && feed->wait && timeout > SLICE_MS)
			timeout = 0; /* the feed is waited on below, in slices */
		if (poll(p, ffd >= 0 ? 3 : 2, timeout) < 0 && errno != EINTR)
			break;

		sigs = term_signals();
		if (sigs & TERM_SIG_TERMINATE) {
			terminated = 1;
			break;
		}
		if (sigs & TERM_SIG_RESIZE) {
			term_resize();
			term_size(&cols, &rows);
			canvas_resize(c, cols, rows);
			draw = 1;
		}
		if (sigs & TERM_SIG_INTERRUPT)
			draw |= state_key(&st, TOP_KEY_INTERRUPT);
		while (!st.quit && (key = term_key()) >= 0) {
			if (key == TOP_KEY_RESIZE) {
				term_size(&cols, &rows);
				canvas_resize(c, cols, rows);
			}
			draw |= state_key(&st, key);
			key_since_draw = 1;
		}
		if (st.quit)
			break;

		if (!st.feed_error && feed->wait) {
			int w = 0;

			if (ffd >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR)))
				w = feed->wait(feed->ctx, 0);
			else if (ffd < 0)
				w = feed->wait(feed->ctx, draw || key_since_draw ? 0 : SLICE_MS);
			if (w < 0) {
				st.feed_error = w;
				draw = 1;
			} else if (w > 0) {
				feed_new = 1;
			}
		}
		if (feed_new && key_since_draw)
			draw = 1;
		if (clock_mono_ms() - last_draw >= delay)
			draw = 1;
		if (draw) {
			state_refresh(&st);
			redraw(c, &st);
			last_draw = clock_mono_ms();
			feed_new = key_since_draw = 0;
		}
		if (opt->exit_with_job && st.info.job_state == TOP_JOB_ENDED) {
			/* the last view first, so the screen's end shows the job's */
			if (feed->wait)
				feed->wait(feed->ctx, 0);
			state_refresh(&st);
			redraw(c, &st);
			break;
		}
	}

	state_done(&st);
	term_close();
	canvas_free(c);
	if (terminated) {
		snprintf(err, errlen, "terminated by a signal (SIGTERM or SIGHUP)");
		return -EINTR;
	}
	return 0;
}
