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
 *             step much slower than the median, a new finding)
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

/* keep_policy_parse - "full", "summary", "last:N" (N >= 1). 0 or -EINVAL. */
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

/* keeper_on_record - from the session's ingest_record_fn: 0 write, 1 leave
 * out of the file, <0 error (as ingest_record_fn). */
int keeper_on_record(keeper_t *k, const struct fss_record_head *rec, const struct source *src);

/* keeper_on_step - every completed step of every rank (analysis_step_fn). */
void keeper_on_step(keeper_t *k, const struct analysis_step_info *step);

/*
 * keeper_finish - the ingest has finished (its output is closed at
 * trace_path): put what was kept into trace_path (merging segments for
 * last:N). *note (may be NULL) is set to a static or keeper-owned line
 * saying what the trace holds ("the last 1000 of 5200 steps"), valid until
 * keeper_free. 0 or -errno.
 */
int keeper_finish(keeper_t *k, const char **note);

void keeper_free(keeper_t *k);

#endif
