/*
 * state.c - the screen's state and what keys do to it (state.h).
 */
#include "tui/state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui/draw.h"
#include "tui/keys.h"

void state_init(struct top_state *st, struct top_feed *feed, const struct top_options *opt)
{
	const char *crash = getenv("FSDPSCOPE_TOP_CRASH_KEY");

	memset(st, 0, sizeof *st);
	st->feed = feed;
	st->opt = *opt;
	st->strip_rank = opt->first_rank >= 0 ? opt->first_rank : -1;
	st->sort_col = TOP_COL_RANK;
	st->crash_key = crash && strcmp(crash, "1") == 0;
	for (int p = 0; p < TOP_PANE_MAX; p++)
		st->page[p] = 1;
}

void state_done(struct top_state *st)
{
	if (st->view && st->feed->release)
		st->feed->release(st->feed->ctx, st->view);
	st->view = NULL;
}

int state_refresh(struct top_state *st)
{
	struct top_info info;
	const struct live_view *v;
	int changed = 0;

	memset(&info, 0, sizeof info);
	if (st->feed->info) {
		st->feed->info(st->feed->ctx, &info);
		if (st->paused && st->view) {
			/* the replay's position belongs to the view shown: it freezes with it */
			info.replay_step = st->info.replay_step;
			info.replay_steps = st->info.replay_steps;
		}
		changed = memcmp(&info, &st->info, sizeof info) != 0;
		st->info = info;
	}
	if (!st->feed->acquire)
		return changed;
	v = st->feed->acquire(st->feed->ctx);
	if (!v)
		return changed;
	if (v == st->view || (st->paused && st->view)) {
		/* The same copy (held twice now), or paused: keep the one shown. */
		if (v != st->view && v->generation != st->view->generation)
			st->missed = 1;
		st->feed->release(st->feed->ctx, v);
		return changed;
	}
	if (st->view)
		st->feed->release(st->feed->ctx, st->view);
	st->view = v;
	return 1;
}

void state_sort_column(struct top_state *st, int col)
{
	if (col == st->sort_col) {
		st->sort_desc = !st->sort_desc;
		return;
	}
	st->sort_col = col;
	st->sort_desc = !(col == TOP_COL_RANK || col == TOP_COL_HOST || col == TOP_COL_PID);
}

static int clamp(int v, int lo, int hi)
{
	if (v > hi)
		v = hi;
	return v < lo ? lo : v;
}

/* Deltas that go to an end of a list. */
#define TO_FIRST (-1000000)
#define TO_LAST 1000000

/* Move the focused list by delta rows (TO_FIRST / TO_LAST: to an end); the
 * layout clamps to the list's length when it draws. */
static void scroll_by(struct top_state *st, int delta)
{
	int *at;

	if (st->screen == TOP_SCREEN_HELP)
		at = &st->help_scroll;
	else if (st->screen == TOP_SCREEN_UNITS)
		at = &st->units_scroll;
	else if (st->fix_open)
		at = &st->fix_scroll;
	else if (st->pane == TOP_PANE_FINDINGS)
		at = &st->finding_sel;
	else if (st->pane == TOP_PANE_RANKS)
		at = &st->rank_sel;
	else
		return;
	if (delta == TO_FIRST)
		*at = 0;
	else if (delta == TO_LAST)
		*at = 1 << 28;
	else
		*at = clamp(*at + delta, 0, 1 << 28);
}

/* A page: the selection and the window move together (the layout clamps). */
static void page_by(struct top_state *st, int delta)
{
	scroll_by(st, delta);
	if (st->screen != TOP_SCREEN_MAIN || st->fix_open)
		return;
	if (st->pane == TOP_PANE_RANKS)
		st->rank_scroll = clamp(st->rank_scroll + delta, 0, 1 << 28);
	else if (st->pane == TOP_PANE_FINDINGS)
		st->finding_scroll = clamp(st->finding_scroll + delta, 0, 1 << 28);
}

static int page_of(const struct top_state *st)
{
	int p = st->pane < TOP_PANE_MAX ? st->page[st->pane] : 1;

	if (st->screen != TOP_SCREEN_MAIN || st->fix_open)
		p = st->page[TOP_PANE_STRIP]; /* the lower area's rows, set by the layout */
	return p > 1 ? p - 1 : 1;
}

/* The rank after the strip's one, in rank order (or the selected row's). */
static void next_strip_rank(struct top_state *st, int use_selection)
{
	const struct live_view *v = st->view;
	size_t *order;
	int cur;

	if (!v || v->nranks == 0)
		return;
	order = calloc(v->nranks, sizeof *order);
	if (!order)
		return;
	cur = ranks_strip_index(st, v);
	if (use_selection) {
		ranks_order(st, v, order);
		st->strip_rank = v->ranks[order[clamp(st->rank_sel, 0, (int)v->nranks - 1)]].rank;
	} else {
		st->strip_rank = v->ranks[cur < 0 ? 0 : ((size_t)cur + 1) % v->nranks].rank;
	}
	free(order);
	snprintf(st->message, sizeof st->message, "time strip: rank %d", st->strip_rank);
}

static int answer_quit(struct top_state *st, int code)
{
	int how = code == 's' ? TOP_QUIT_STOP : code == 'l' ? TOP_QUIT_LEAVE : 0;
	int rc;

	st->asking_quit = 0;
	if (!how) {
		snprintf(st->message, sizeof st->message, "quit cancelled");
		return 1;
	}
	rc = st->feed->quit(st->feed->ctx, how);
	if (rc < 0) {
		snprintf(st->message, sizeof st->message, "could not %s the job: %s",
			 how == TOP_QUIT_STOP ? "stop" : "leave", strerror(-rc));
		return 1;
	}
	st->quit = 1;
	return 1;
}

static void do_quit(struct top_state *st)
{
	if (st->info.mode == TOP_MODE_RUN && st->info.job_state == TOP_JOB_RUNNING && st->feed->quit) {
		st->asking_quit = 1;
		return;
	}
	st->quit = 1;
}

static void do_step(struct top_state *st)
{
	int rc;

	if (!st->feed->step) {
		snprintf(st->message, sizeof st->message, "n steps a replay (top TRACE --step-keys)");
		return;
	}
	rc = st->feed->step(st->feed->ctx);
	if (rc == -ENODATA)
		snprintf(st->message, sizeof st->message, "end of the trace");
	else if (rc < 0)
		snprintf(st->message, sizeof st->message, "step: %s", strerror(-rc));
	else
		st->message[0] = '\0';
}

int state_key(struct top_state *st, int code)
{
	int action;

	if (st->asking_quit) {
		if (code == TOP_KEY_INTERRUPT)
			code = 's'; /* ^C again while asked: stop, as run's ^C would */
		return answer_quit(st, code);
	}
	action = keys_action(code);
	if (code == TOP_KEY_RESIZE)
		return 1;
	st->message[0] = '\0';
	switch (action) {
	case TOP_ACT_QUIT:
		do_quit(st);
		break;
	case TOP_ACT_PAUSE:
		st->paused = !st->paused;
		st->missed = 0;
		if (!st->paused)
			state_refresh(st); /* resume at the newest view */
		break;
	case TOP_ACT_SORT_NEXT:
		state_sort_column(st, (st->sort_col + 1) % TOP_COL_MAX);
		break;
	case TOP_ACT_SORT_LEFT:
		state_sort_column(st, (st->sort_col + TOP_COL_MAX - 1) % TOP_COL_MAX);
		break;
	case TOP_ACT_SORT_RIGHT:
		state_sort_column(st, (st->sort_col + 1) % TOP_COL_MAX);
		break;
	case TOP_ACT_SORT_REVERSE:
		st->sort_desc = !st->sort_desc;
		break;
	case TOP_ACT_RANK:
		next_strip_rank(st, 0);
		break;
	case TOP_ACT_FINDINGS:
		st->screen = TOP_SCREEN_MAIN;
		if (st->pane == TOP_PANE_FINDINGS && !st->fix_open) {
			st->fix_open = 1;
			st->fix_scroll = 0;
		} else if (st->fix_open) {
			st->fix_open = 0;
		} else {
			st->pane = TOP_PANE_FINDINGS;
		}
		break;
	case TOP_ACT_UNITS:
		st->screen = st->screen == TOP_SCREEN_UNITS ? TOP_SCREEN_MAIN : TOP_SCREEN_UNITS;
		break;
	case TOP_ACT_HELP:
		st->screen = st->screen == TOP_SCREEN_HELP ? TOP_SCREEN_MAIN : TOP_SCREEN_HELP;
		break;
	case TOP_ACT_NEXT_PANE:
		st->screen = TOP_SCREEN_MAIN;
		st->fix_open = 0;
		st->pane = (st->pane + 1) % TOP_PANE_MAX;
		break;
	case TOP_ACT_UP:
		scroll_by(st, -1);
		break;
	case TOP_ACT_DOWN:
		scroll_by(st, 1);
		break;
	case TOP_ACT_PAGE_UP:
		page_by(st, -page_of(st));
		break;
	case TOP_ACT_PAGE_DOWN:
		page_by(st, page_of(st));
		break;
	case TOP_ACT_HOME:
		scroll_by(st, TO_FIRST);
		if (st->screen == TOP_SCREEN_MAIN && st->pane == TOP_PANE_RANKS)
			st->rank_scroll = 0;
		break;
	case TOP_ACT_END:
		scroll_by(st, TO_LAST);
		break;
	case TOP_ACT_OPEN:
		if (st->screen != TOP_SCREEN_MAIN)
			break;
		if (st->pane == TOP_PANE_FINDINGS) {
			st->fix_open = !st->fix_open;
			st->fix_scroll = 0;
		} else if (st->pane == TOP_PANE_RANKS) {
			next_strip_rank(st, 1);
		}
		break;
	case TOP_ACT_CLOSE:
		if (st->fix_open)
			st->fix_open = 0;
		else
			st->screen = TOP_SCREEN_MAIN;
		break;
	case TOP_ACT_STEP:
		do_step(st);
		break;
	case TOP_ACT_CRASH:
		if (st->crash_key)
			abort(); /* test hook: the crash path restores the terminal */
		return 0;
	default:
		return 0;
	}
	return 1;
}
