/*
 * merge.h - several traces (one per node) read as the record stream of one
 * job, their clocks aligned.
 *
 * Each node's collector writes its own trace, with its own source numbers
 * and its host's CLOCK_MONOTONIC. A merge reads them twice:
 *
 *   merge_open:  every trace once, to learn its processes (hello, sink
 *                process_id, ranks, hosts), its clock anchors and the end
 *                times of the collectives its ranks share with other nodes;
 *                then the offset that puts each trace on the first trace's
 *                CLOCK_MONOTONIC (docs/collect.md, "More than one node"):
 *                  1. from the anchors: the median over the node's
 *                     CLOCK_MONOTONIC / CLOCK_REALTIME pairs (hellos and
 *                     FSS_CLOCK_REALTIME anchors) against the first node's,
 *                     as good as the hosts' NTP;
 *                  2. refined by the collectives shared with nodes already
 *                     aligned: the n-th collective of a communicator ends at
 *                     nearly the same instant on every rank (all of them wait
 *                     for the last one to arrive, so ends line up where
 *                     entries do not), on the end of its NCCL kernel (CUPTI,
 *                     through FSS_CLOCK_CUPTI anchors) or, on a host-blocking
 *                     communicator (device -1: the CPU stand-in), its host
 *                     exit; the median over collectives of the difference of
 *                     the nodes' median ends;
 *   merge_read:  all traces together, each in its own order, interleaved by
 *                time, every record with its source renumbered (the node's
 *                source_base added) and every CLOCK_MONOTONIC field moved by
 *                the node's offset (record_shift_clock: the hello's and the
 *                anchors' mono side too, so that realtime - mono and
 *                mono - CUPTI stay true of the shifted stamps; GPU stamps,
 *                on the CUPTI base, are left as they are).
 *
 * A process found in two traces (the same sink process_id, or without one
 * the same pid on the same host) is refused: counting it twice would make a
 * job of ranks that never ran. So are traces of more than one job (two runs
 * into one folder): the first pass keeps what trace_jobs_check needs (each
 * process's ranks in its communicators and world, each trace's
 * CLOCK_REALTIME span), and merge_open asks it. Traces are regular files (read twice).
 * Memory: per node one chunk being parsed, plus the end times of a bounded
 * sample of each rank's collectives (all of the first 4096 per communicator,
 * then thinner: MERGE_SAMPLE_*).
 */
#ifndef FSS_COLLECTOR_MERGE_H
#define FSS_COLLECTOR_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "common/trace_parser.h"

typedef struct merge merge_t;

/* Collectives per communicator and rank always sampled; past it, one in 2,
 * then one in 4 from twice as many, and so on. */
#define MERGE_SAMPLE_FULL 4096u
/* Ranks and hosts a node lists (beyond: counted only). */
#define MERGE_NODE_RANKS_MAX 256u
#define MERGE_NODE_HOSTS_MAX 8u
#define MERGE_HOST_MAX 64u

/* What a node's offset rests on. */
enum merge_basis {
	MERGE_BASIS_REFERENCE = 0, /* the first trace: its clock is the time base */
	MERGE_BASIS_ANCHORS,       /* clock anchors only: no collective shared with an aligned node */
	MERGE_BASIS_HOST_EXIT,     /* anchors, refined by the host exits of blocking collectives */
	MERGE_BASIS_GPU_END,       /* anchors, refined by the ends of NCCL kernels (CUPTI) */
};

/* One trace of the merge. */
struct merge_node {
	const char *path;          /* as given to merge_open (borrowed) */
	uint32_t source_base;      /* added to the source of each of its records */
	uint32_t sources;          /* processes (hellos) */
	int64_t offset_ns;         /* added to each CLOCK_MONOTONIC stamp: anchors + collectives */
	int64_t anchor_offset_ns;  /* the part the clock anchors give */
	int64_t collective_offset_ns; /* the refinement from shared collectives (0 without) */
	uint64_t residual_ns;      /* median |difference - refinement| over those collectives, after alignment */
	uint64_t residual_max_ns;  /* the largest of them */
	uint64_t collectives;      /* shared collectives the refinement rests on */
	uint64_t anchors;          /* CLOCK_MONOTONIC / CLOCK_REALTIME pairs the anchor part rests on */
	enum merge_basis basis;
	int32_t aligned_to;        /* the node whose collectives it was refined against, -1 */
	uint32_t nranks;           /* ranks (sources with a rank) */
	int32_t ranks[MERGE_NODE_RANKS_MAX]; /* the first MERGE_NODE_RANKS_MAX, ascending */
	uint32_t nhosts;           /* distinct host names */
	char hosts[MERGE_NODE_HOSTS_MAX][MERGE_HOST_MAX]; /* the first MERGE_NODE_HOSTS_MAX, in order seen */
	int32_t world_size;        /* ranks of its largest communicator, 0 */
	uint32_t keep_flags;       /* FSS_FILE_KEEP_* of its header */
	struct trace_read_info info; /* how merge_read found it (after merge_read) */
	int read_rc;               /* what trace_read would have returned for it (after merge_read) */
};

/*
 * merge_open - read the n traces at paths (n >= 1, regular files; the
 * strings are borrowed and must outlive the merge) and align their clocks.
 * Returns 0 with *out set, or a negative errno / FSS_E_* with the reason in
 * err: a file that cannot be opened or is not a trace (named), a process
 * present in two traces (-EEXIST, naming both and the process), or traces
 * of more than one job (FSS_E_USAGE, trace_jobs_check's words: each job's
 * files).
 */
int merge_open(merge_t **out, const char *const *paths, size_t n, char *err, size_t errlen);

/* merge_open_flags - merge_open with TRACE_READ_* flags for both passes
 * (TRACE_READ_SALVAGE: each trace's chunks read past a damaged header). */
int merge_open_flags(merge_t **out, const char *const *paths, size_t n, unsigned read_flags, char *err,
		     size_t errlen);

/* merge_nodes - the nodes, in the order of paths; *n gets their number. */
const struct merge_node *merge_nodes(const merge_t *m, size_t *n);

/*
 * merge_read - deliver every record of every trace through ops (on_header
 * once per trace, before its records; on_gap as found; on_chunk is not
 * called), renumbered and shifted as the top of this file says; within a
 * trace in file order, across traces by time. merge_current() tells which
 * node the record (header, gap) in hand came from. Returns the worst of the
 * traces' outcomes as trace_read returns them (0, FSS_E_CORRUPT,
 * FSS_E_TRUNCATED, a header error, -errno), a callback's non-zero value
 * (which stops the read), or -ENOMEM; each node's info and read_rc say its
 * own. May be called again: each call reads the traces from their start
 * (a reader that needs two passes, as dump's, makes two calls).
 */
int merge_read(merge_t *m, const struct trace_parser_ops *ops, void *ctx);

/* merge_current - the node (index into merge_nodes) of what is being delivered. */
size_t merge_current(const merge_t *m);

/* merge_basis_name - "reference", "anchors", "host-exit", "gpu-end". */
const char *merge_basis_name(enum merge_basis basis);

/* merge_free - release a merge (NULL ok). */
void merge_free(merge_t *m);

#endif
