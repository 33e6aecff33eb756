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
 * every completed step (keeper_on_step). Its counters and the hooks a test
 * replaces are in keep_hooks.h.
 */
#ifndef FSS_COLLECTOR_KEEP_H
#define FSS_COLLECTOR_KEEP_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analyze.h"
#include "collector/ingest.h"
#include "collector/keep_policy.h"

/* What the disk guard switches a default `full` to. */
#define KEEP_GUARD_LAST 1000

typedef struct keeper keeper_t;

/*
 * keeper_new - a keeper for the trace `ing` writes to `trace_path` (the
 * path given to ingest_new), segments in `folder` (the session's private
 * folder). Returns 0 or -errno.
 */
int keeper_new(keeper_t **out, const struct keep_policy *p, ingest_t *ing, const char *trace_path, const char *folder);

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
