/*
 * keep_state.h - what a keeper_t holds, shared by its parts: the life cycle
 * and the record / step entry points (keep.c), the last:N segments
 * (keep_segments.c), the disk guard (keep_guard.c) and the summary
 * (keep_summary.c). Nothing outside collector/keep* includes it.
 */
#ifndef FSS_COLLECTOR_KEEP_STATE_H
#define FSS_COLLECTOR_KEEP_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/statvfs.h>

#include "collector/keep.h"
#include "collector/keep_hooks.h"

#define KEEP_MESSAGES 8
#define KEEP_MESSAGE_BYTES 320

struct kept_source; /* keep_summary.c */

struct segment {
	char *path;
	uint32_t start; /* the slowest rank's completed steps when it began */
};

struct keeper {
	struct keep_policy policy; /* as it is now (the guard may switch it) */
	ingest_t *ing;
	char *trace_path, *folder, *trace_dir;
	struct keeper_ingest_ops ops;
	void *ops_ctx;
	int (*statvfs_fn)(const char *path, struct statvfs *out);
	uint64_t (*now_fn)(void);
	uint64_t guard_every;
	size_t buffer_max;
	int err;
	int drained; /* keeper_drain ran: everything is written as it comes */

	uint64_t next_check;
	int guard_warned, guard_failed_said;
	uint32_t guard_step; /* steps done when the guard switched */

	struct segment *segs; /* [first_kept, nsegs) on disk, the last one open */
	size_t nsegs, segs_cap, first_kept;
	uint32_t seg_number;

	uint32_t *rank_done; /* completed steps per rank */
	size_t nranks;

	struct kept_source *src; /* by output source number */
	size_t nsrc;

	char msg[KEEP_MESSAGES][KEEP_MESSAGE_BYTES];
	unsigned msg_head, msg_count;
	char msg_out[KEEP_MESSAGE_BYTES];
	char note[256];

	int have_first;
	uint64_t first_ns;
	struct keeper_stats st;
};

/* keep_say - queue a line for keeper_take_message; the oldest goes when the
 * queue is full. */
void keep_say(keeper_t *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* keep_fail - keep rc as the keeper's error unless one is kept already. */
void keep_fail(keeper_t *k, int rc);

/* keep_write_own - write a record of the keeper's own (or one it held
 * back) through its ingest, counted. 0, or the write's error (kept). */
int keep_write_own(keeper_t *k, const struct fss_record_head *rec);

#endif
