/*
 * feeds.h - the three ways views reach `fsdpscope top` (tui/top.h, struct
 * top_feed): a board another thread of this process publishes to (run
 * mode: the session of the job top launched), a session's viewer socket
 * (connect mode: JSON lines decoded back into views), and a recorded trace
 * replayed through an analyzer and a live state as a session would (replay
 * mode). Each is a board feed underneath: its producer puts views on a
 * board (collector/live.h), the dashboard takes the latest one, and a slow
 * dashboard only ever misses views.
 */
#ifndef FSS_TUI_FEEDS_H
#define FSS_TUI_FEEDS_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analysis.h"
#include "collector/live.h"
#include "rules/findings.h"
#include "rules/rules.h"
#include "tui/top.h"

/* ---- the board feed -------------------------------------------------------- */

typedef struct top_board_feed top_board_feed_t;

/*
 * top_board_feed_new - a feed of the views published on `board` (borrowed:
 * it must outlive the feed), with `info` as what it says of the job until
 * top_board_feed_set_info; an info.nodes of 0 is filled in with the
 * distinct hosts the latest view's ranks name. Its fd is readable when a
 * newer view or a new info is there. 0 with *out, or a negative errno (-ENOMEM, an eventfd or
 * thread that could not be made).
 */
int top_board_feed_new(top_board_feed_t **out, live_board_t *board, const struct top_info *info);

/* top_board_feed_bind - fill `feed` with f's callbacks (step and quit NULL). */
void top_board_feed_bind(top_board_feed_t *f, struct top_feed *feed);

/*
 * top_feed_forward - fill `feed` so that its view and info callbacks go to
 * the struct top_feed that `owner` begins with (a feed built on a board
 * feed keeps that feed's callbacks as its first member), and its ctx is
 * owner, for the step and quit the caller sets after (NULL here).
 */
void top_feed_forward(struct top_feed *feed, void *owner);

/* top_board_feed_set_info - replace what the feed says of the job (any thread); wakes the dashboard. */
void top_board_feed_set_info(top_board_feed_t *f, const struct top_info *info);

/* top_board_feed_get_info - what the feed says of the job now (any thread). */
void top_board_feed_get_info(top_board_feed_t *f, struct top_info *out);

/*
 * top_board_feed_fail - the producer failed for good with negative errno
 * `err`: every later wait returns it (any thread). `how` (may be NULL)
 * replaces info.how, the words the screen shows.
 */
void top_board_feed_fail(top_board_feed_t *f, int err, const char *how);

/* top_board_feed_free - stop the feed's thread and free it (NULL ok); no view may be held. */
void top_board_feed_free(top_board_feed_t *f);

/* ---- connect mode: a session's viewer socket ------------------------------- */

typedef struct top_viewer_feed top_viewer_feed_t;

/*
 * top_viewer_feed_new - connect to the viewer socket at `address`
 * ("unix:/path" or a path) and decode its snapshots into views. A line
 * that does not decode fails the feed (-EPROTO, info.how says why); the
 * session ending makes the job state TOP_JOB_UNKNOWN, the last view stays.
 * 0 with *out (bind it with top_viewer_feed_bind), or a negative errno with
 * what to do in err: no session there (-ENOENT / -ECONNREFUSED),
 * permission (-EACCES), not a viewer socket (-EPROTO).
 */
int top_viewer_feed_new(top_viewer_feed_t **out, const char *address, char *err, size_t errlen);
void top_viewer_feed_bind(top_viewer_feed_t *f, struct top_feed *feed);
void top_viewer_feed_free(top_viewer_feed_t *f);

/*
 * top_viewer_decode - one snapshot line of docs/live-schema.json
 * ("fsdpscope.live/2") back into a view: *out and (*out)->ranks are
 * malloc'd (live_view_free). Names the view keeps as numbers (verdict,
 * roles, ops, severities) are turned back into them; null figures become
 * the view's "not known" values. Duplicate keys, a wrong schema, a missing
 * or mistyped field: -EPROTO with the reason in err. -ENOMEM.
 */
int top_viewer_decode(const char *json, size_t len, struct live_view **out, char *err, size_t errlen);

/* ---- replay mode: a recorded trace ------------------------------------------ */

struct top_replay_options {
	double speed;	     /* paced by the trace's own time: 1 real time, 2 twice as fast; 0 as fast as it reads */
	int step_keys;	     /* advance only on feed->step (after the first view): the deterministic mode */
	uint64_t first_step; /* --step N: read to step N before the first view (0: the first step) */
	int only_end;	     /* one view only: at first_step when given, else at the trace's end (--once) */
	const struct analysis_options *analysis; /* borrowed; NULL: defaults */
	const struct rule_config *rules;	 /* borrowed; NULL: defaults */
};

typedef struct top_replay_feed top_replay_feed_t;

/*
 * top_replay_feed_new - replay the traces at paths[0..n) (several: one job
 * read as `lint` reads them, clocks aligned): records go to an analyzer and
 * a live state exactly as a session feeds them, and a view is published at
 * each completed step (every rank that has collectives has completed it),
 * diagnosed as a session diagnoses (the analyzer's snapshot and the rules);
 * at the trace's end the finished analysis and the rules on it, as `lint`
 * says them. The strings in paths and in o are borrowed. 0 with *out, or a
 * negative errno with the reason in err (a file that is not a trace, two
 * traces holding one process).
 */
int top_replay_feed_new(top_replay_feed_t **out, const char *const *paths, size_t n, const struct top_replay_options *o,
			char *err, size_t errlen);
void top_replay_feed_bind(top_replay_feed_t *f, struct top_feed *feed);
void top_replay_feed_free(top_replay_feed_t *f);

#endif
