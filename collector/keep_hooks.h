/*
 * keep_hooks.h - what a test reaches inside a keeper (keep.h): its counters
 * and the ways to the world it may replace. The session needs none of it.
 */
#ifndef FSS_COLLECTOR_KEEP_HOOKS_H
#define FSS_COLLECTOR_KEEP_HOOKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/statvfs.h>

#include "collector/keep.h"

/* What a keeper did so far (keeper_get_stats). */
struct keeper_stats {
	uint64_t bytes;		     /* record bytes the trace got (the ingest's and the keeper's) */
	uint64_t records_in;	     /* records offered by keeper_on_record */
	uint64_t records_left_out;   /* of those, never written */
	uint32_t rotations;	     /* ingest_rotate calls */
	uint32_t segments_removed;   /* segment files removed (older than the last N steps) */
	uint32_t segments_kept;	     /* segments on disk now (the open output included) */
	uint32_t steps_done;	     /* the slowest rank's completed steps */
	uint32_t steps_summarised;   /* step_summary records written */
	uint32_t steps_standing_out; /* steps past the full ones kept in full (lost collectives, slow) */
	uint32_t steps_overflowed;   /* steps summarised because their records outgrew the buffer */
	uint32_t guard_checks;	     /* statvfs calls of the disk guard */
	int guard_switched;	     /* the disk guard switched full to last:KEEP_GUARD_LAST */
	size_t buffered_max;	     /* the most bytes one source's buffer held */
};

/* keeper_get_stats - a copy of the counters. */
void keeper_get_stats(const keeper_t *k, struct keeper_stats *out);

/* The keeper's way to the ingest, replaceable by tests (keeper_hooks.ingest). */
struct keeper_ingest_ops {
	int (*write_record)(void *ctx, const struct fss_record_head *rec); /* ingest_write_record */
	int (*rotate)(void *ctx, const char *path);			   /* ingest_rotate */
	/* a new trace at out_path merging inputs[0..n) in order (ingest_new, ingest_add_file, ingest_finish) */
	int (*merge)(void *ctx, const char *out_path, const char *const *inputs, size_t n);
};

/* What a test may replace; a NULL or 0 member keeps the default. */
struct keeper_hooks {
	const struct keeper_ingest_ops *ingest; /* default: the ingest given to keeper_new */
	void *ingest_ctx;
	int (*statvfs)(const char *path, struct statvfs *out); /* default statvfs(3), returning -1/errno */
	uint64_t (*now_ns)(void);			       /* default CLOCK_MONOTONIC */
	uint64_t guard_every;				       /* bytes between disk checks, default KEEP_GUARD_EVERY */
	size_t buffer_max; /* bytes one source may hold back (summary), default KEEP_BUFFER_MAX */
};

#define KEEP_GUARD_EVERY (100ull << 20)
#define KEEP_GUARD_MIN_FREE (1ull << 30) /* and 5 % of the file system */
#define KEEP_BUFFER_MAX ((size_t)4 << 20)

/* keeper_set_hooks - replace the keeper's ways to the world (tests); call
 * before the first record. */
void keeper_set_hooks(keeper_t *k, const struct keeper_hooks *h);

#endif
