/*
 * keep.h - what a session keeps of a long job in its trace (--keep).
 *
 *   full      every record (a 3-day, 8-rank job at 1,000 collectives per
 *             second per rank writes about 70 GB a day)
 *   last:N    the last N steps in full: the trace is written in segments
 *             of about N/4 steps, each standing alone (ingest_rotate), and
 *             segments older than the last N steps are removed; at the end
 *             the kept segments are merged into the trace
 *   summary   the first steps in full (enough to diagnose: units, phases,
 *             reshard), then per step and rank one summary record (15), and
 *             in full only the steps that stand out (lost collectives, a
 *             step over twice its rank's running median)
 *
 * The policy is in the trace's header (flags and keep_steps) so a reader
 * knows what it holds. The default never fills a disk unannounced
 * (docs/collect.md says how).
 *
 * A keeper sits between the session's ingest and its trace file: the
 * session hands it every record (keeper_on_record: write it or not) and
 * every completed step (keeper_on_step).
 */
#ifndef FSS_COLLECTOR_KEEP_H
#define FSS_COLLECTOR_KEEP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/statvfs.h>

#include "collector/analyze.h"
#include "collector/ingest.h"

enum keep_mode {
	KEEP_FULL = 0,
	KEEP_LAST = 1,
	KEEP_SUMMARY = 2,
};

struct keep_policy {
	enum keep_mode mode;
	uint32_t steps; /* N of last:N; for summary, the steps kept in full at the start */
	int is_default; /* not chosen by the user (messages say so) */
};

/* Steps a summary keeps in full at the start when "summary" names none. */
#define KEEP_SUMMARY_STEPS 16
/* What the disk guard switches a default `full` to. */
#define KEEP_GUARD_LAST 1000

/* keep_policy_parse - "full", "summary", "summary:N", "last:N" (1 <= N <=
 * 10,000,000). 0 or -EINVAL; *out is set only on success (is_default 0). */
int keep_policy_parse(const char *text, struct keep_policy *out);

/* keep_policy_default - the policy when --keep is not given. */
void keep_policy_default(struct keep_policy *out);

/* keep_policy_format - "full", "last:1000", "summary" into buf. */
const char *keep_policy_format(const struct keep_policy *p, char *buf, size_t len);

typedef struct keeper keeper_t;

/*
 * keeper_new - a keeper for the trace `ing` writes to `trace_path` (the
 * path given to ingest_new), segments in `folder` (the session's private
 * folder). Returns 0 or -errno.
 */
int keeper_new(keeper_t **out, const struct keep_policy *p, ingest_t *ing, const char *trace_path,
	       const char *folder);

/*
 * keeper_on_record - from the session's ingest_record_fn: 0 write, 1 leave
 * out of the file, <0 error (as ingest_record_fn). Feed the session's
 * analyzer with the record first, then ask the keeper: the step the record
 * completes is then known when the record is placed (the other order works,
 * a record later). A keeper may write records of its own through the ingest
 * (ingest_write_record) and rotate its output (ingest_rotate) from here and
 * from keeper_on_step, inside the ingest's callback.
 */
int keeper_on_record(keeper_t *k, const struct fss_record_head *rec, const struct source *src);

/* keeper_on_step - every completed step of every rank (analysis_step_fn).
 * An error writing or rotating is kept and returned by keeper_drain and
 * keeper_finish. */
void keeper_on_step(keeper_t *k, const struct analysis_step_info *step);

/*
 * keeper_drain - the session is about to finish its ingest: write what the
 * keeper still holds back (summary: the steps in progress, in full). Call
 * before ingest_finish; from then on every record offered is written,
 * steps are no longer summarised and the output no longer rotated (what
 * ingest_finish still reads from its inputs goes to the file in full). 0 or
 * the first error the keeper met.
 */
int keeper_drain(keeper_t *k);

/*
 * keeper_take_message - the next line the session should print (the disk
 * guard switched the policy, a segment could not be removed, ...), oldest
 * first, or NULL when none waits. The text is the keeper's, valid until the
 * next call or keeper_free.
 */
const char *keeper_take_message(keeper_t *k);

/*
 * keeper_projection - one line on the growth of the trace at the rate seen
 * from the keeper's first record to now_ns (CLOCK_MONOTONIC, or the clock of
 * keeper_hooks.now_ns): "at 1,234 records/s: about 10.2 GB a day" (and for
 * last:N what stays on disk). Returns buf; "" before a rate can be told.
 */
const char *keeper_projection(const keeper_t *k, uint64_t now_ns, char *buf, size_t len);

/* What a keeper did so far (keeper_get_stats). */
struct keeper_stats {
	uint64_t bytes;             /* record bytes the trace got (the ingest's and the keeper's) */
	uint64_t records_in;        /* records offered by keeper_on_record */
	uint64_t records_left_out;  /* of those, never written */
	uint32_t rotations;         /* ingest_rotate calls */
	uint32_t segments_removed;  /* segment files removed (older than the last N steps) */
	uint32_t segments_kept;     /* segments on disk now (the open output included) */
	uint32_t steps_done;        /* the slowest rank's completed steps */
	uint32_t steps_summarised;  /* step_summary records written */
	uint32_t steps_standing_out; /* steps past the full ones kept in full (lost collectives, slow) */
	uint32_t steps_overflowed;  /* steps summarised because their records outgrew the buffer */
	uint32_t guard_checks;      /* statvfs calls of the disk guard */
	int guard_switched;         /* the disk guard switched full to last:KEEP_GUARD_LAST */
	size_t buffered_max;        /* the most bytes one source's buffer held */
};

/* keeper_get_stats - a copy of the counters. */
void keeper_get_stats(const keeper_t *k, struct keeper_stats *out);

/* The keeper's way to the ingest, replaceable by tests (keeper_hooks.ingest). */
struct keeper_ingest_ops {
	int (*write_record)(void *ctx, const struct fss_record_head *rec); /* ingest_write_record */
	int (*rotate)(void *ctx, const char *path);                        /* ingest_rotate */
	/* a new trace at out_path merging inputs[0..n) in order (ingest_new, ingest_add_file, ingest_finish) */
	int (*merge)(void *ctx, const char *out_path, const char *const *inputs, size_t n);
};

/* What a test may replace; a NULL or 0 member keeps the default. */
struct keeper_hooks {
	const struct keeper_ingest_ops *ingest; /* default: the ingest given to keeper_new */
	void *ingest_ctx;
	int (*statvfs)(const char *path, struct statvfs *out); /* default statvfs(3), returning -1/errno */
	uint64_t (*now_ns)(void);  /* default CLOCK_MONOTONIC */
	uint64_t guard_every;      /* bytes between disk checks, default KEEP_GUARD_EVERY */
	size_t buffer_max;         /* bytes one source may hold back (summary), default KEEP_BUFFER_MAX */
};

#define KEEP_GUARD_EVERY (100ull << 20)
#define KEEP_GUARD_MIN_FREE (1ull << 30) /* and 5 % of the file system */
#define KEEP_BUFFER_MAX ((size_t)4 << 20)

/* keeper_set_hooks - replace the keeper's ways to the world (tests); call
 * before the first record. */
void keeper_set_hooks(keeper_t *k, const struct keeper_hooks *h);

/*
 * keeper_finish - the ingest has finished (its output is closed at
 * trace_path, or at the segment it was rotated to last): put what was kept
 * into trace_path (merging segments for last:N, then removing them) and
 * mark the policy in its header (flags, keep_steps). *note (may be NULL) is
 * set to a keeper-owned line saying what the trace holds ("the last 1000 of
 * 5200 steps"), or NULL for a full trace, valid until keeper_free. 0 or
 * -errno (the first error the keeper met, or the merge's).
 */
int keeper_finish(keeper_t *k, const char **note);

/* keeper_free - NULL ok. Segment files still on disk are left there. */
void keeper_free(keeper_t *k);

#endif
