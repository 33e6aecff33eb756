/*
 * once.c - top_print_once: one snapshot of the dashboard as plain text
 * (tui/top.h): the same canvas the screen draws, written without escape
 * sequences, for scripts and logs.
 */
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "tui/canvas.h"
#include "tui/draw.h"
#include "tui/state.h"
#include "tui/top.h"

#define FIRST_VIEW_MS 10000

/* The page's size: the options', else COLUMNS / LINES, else 80 x 24. */
static void page_size(const struct top_options *opt, int *cols, int *rows)
{
	const char *ec = getenv("COLUMNS"), *er = getenv("LINES");

	*cols = opt->cols > 0 ? opt->cols : ec && atoi(ec) > 0 ? atoi(ec) : 80;
	*rows = opt->rows > 0 ? opt->rows : er && atoi(er) > 0 ? atoi(er) : 24;
}

/* The environment's locale says UTF-8 (the caller's locale is left as it was). */
static int locale_utf8(void)
{
	const char *vars[] = {"LC_ALL", "LC_CTYPE", "LANG"};

	for (size_t i = 0; i < 3; i++) {
		const char *v = getenv(vars[i]);

		if (v && v[0])
			return strcasestr(v, "UTF-8") != NULL || strcasestr(v, "utf8") != NULL;
	}
	return 0;
}

/* -r N of a view without rank N: the ranks it has, in why. */
static int rank_missing(const struct live_view *v, int rank, char *why, size_t whylen)
{
	int32_t lo = INT32_MAX, hi = -1;

	for (size_t i = 0; i < v->nranks; i++) {
		if (v->ranks[i].rank == rank)
			return 0;
		if (v->ranks[i].rank >= 0) {
			lo = v->ranks[i].rank < lo ? v->ranks[i].rank : lo;
			hi = v->ranks[i].rank > hi ? v->ranks[i].rank : hi;
		}
	}
	if (hi < 0)
		snprintf(why, whylen, "-r %d: the view has no rank known yet", rank);
	else
		snprintf(why, whylen, "-r %d: the view has ranks %d to %d", rank, (int)lo, (int)hi);
	return 1;
}

int top_print_once(struct top_feed *feed, const struct top_options *opt, FILE *f, char *why, size_t whylen)
{
	struct top_state st;
	struct top_canvas *c;
	int cols, rows, rc;
	int64_t until = clock_mono_ms() + FIRST_VIEW_MS;

	if (whylen)
		why[0] = '\0';

	state_init(&st, feed, opt);
	if (feed->wait)
		feed->wait(feed->ctx, 0);
	state_refresh(&st);
	while (!st.view) {
		int64_t left = until - clock_mono_ms();
		int w;

		if (left <= 0 || !feed->wait) {
			state_done(&st);
			return -ETIMEDOUT;
		}
		w = feed->wait(feed->ctx, (int)left);
		if (w < 0) {
			struct top_info info;

			if (feed->info) {
				feed->info(feed->ctx, &info);
				snprintf(why, whylen, "%s", info.how);
			}
			state_done(&st);
			return w;
		}
		state_refresh(&st);
	}
	if (opt->first_rank >= 0 && rank_missing(st.view, opt->first_rank, why, whylen)) {
		state_done(&st);
		return -ERANGE;
	}
	page_size(opt, &cols, &rows);
	rc = canvas_new(&c, cols, rows, locale_utf8());
	if (rc < 0) {
		state_done(&st);
		return rc;
	}
	c->color = 0;
	top_draw(c, &st);
	rc = canvas_write_text(c, f);
	canvas_free(c);
	state_done(&st);
	return rc;
}
