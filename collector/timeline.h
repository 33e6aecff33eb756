/*
 * timeline.h - per-rank timelines from a trace's records.
 *
 * The records of a trace come per source (process) in the order its agent
 * wrote them, sources interleaved. The timeline turns them into, per
 * source: collective *events* (a call, or the calls of one
 * ncclGroupStart/End group, counted once as PyTorch's coalesced variants
 * are), NVTX step ranges, NVTX compute ranges, and GPU intervals placed on
 * the host's CLOCK_MONOTONIC. It keeps only what the steps not yet analysed
 * need: the analysis (analyze_service.c) takes the oldest items once it has used
 * them, so memory follows the steps in flight, not the length of the run.
 *
 * What a source is (its hello, strings, clocks, communicators, rank,
 * drops, end) comes from the per-source layer (collector/source.h) the
 * timeline feeds; struct tl_source repeats the facts the analysis reads.
 *
 * Internal to the collector: the structs are visible so that the analysis
 * can read the pending arrays directly.
 */
#ifndef FSS_COLLECTOR_TIMELINE_H
#define FSS_COLLECTOR_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "collector/source.h"
#include "common/record.h"

/* A growable array of fixed-size items with a moving front: items are
 * appended at the back and taken from the front. */
struct tl_array {
	void *v;
	size_t size;  /* bytes per item */
	size_t head;  /* first live item */
	size_t n;     /* items stored (live ones are [head, n)) */
	size_t cap;
};

/* tl_array_at - pointer to live item i (0 = the front). */
static inline void *tl_array_at(const struct tl_array *a, size_t i)
{
	return (char *)a->v + (a->head + i) * a->size;
}

/* tl_array_len - live items. */
static inline size_t tl_array_len(const struct tl_array *a)
{
	return a->n - a->head;
}

/* One collective event. */
struct tl_event {
	uint64_t seq_first, seq_last; /* collective seq numbers of its calls */
	uint64_t enter_ns;            /* host: first call entered */
	uint64_t exit_ns;             /* host: last call returned, or ncclGroupEnd returned */
	uint64_t launch_ns;           /* host: ncclGroupEnd entered (groups), else enter_ns */
	uint64_t bytes;               /* count x dtype size, summed over the calls */
	uint64_t elements;            /* gathered / reduced elements: count x nranks for AG and RS */
	uint64_t wire_bytes;          /* output of AG, input of RS, 2 x buffer of AR */
	uint64_t comm_hash;           /* id_hash of the communicator (0 unknown) */
	uint64_t stream;              /* cudaStream_t handle of its (first) call */
	uint64_t sig;                 /* steps_signature */
	uint64_t gpu_start, gpu_end;  /* its kernels, host time base; 0 when none seen */
	uint32_t calls;
	int32_t nranks;
	uint32_t comm_index;          /* calls on this communicator before it (cross-rank key) */
	uint32_t thread;
	uint32_t group_id;
	uint8_t op, dtype;
	uint8_t role;                 /* enum analysis_comm_role of its communicator, once decided */
	uint8_t fsdp_group;           /* FSDP roles: which FSDP group (0: the primary, the one the unit analysis
	                                 reads; g: comm_roles' fsdp_groups[g]); 0 otherwise */
	uint32_t comm_slot;           /* index of its communicator in the source's comms, UINT32_MAX unknown */
	uint32_t moving_calls;        /* calls with a non-zero count: a ring rotation issued as an all-to-all
	                                 (zero to every peer but one) moves data in two */
	uint64_t count;               /* count argument of its (first) call */
};

/* One closed NVTX range that marks a step or counts as compute. */
struct tl_range {
	uint64_t start, end;
	uint32_t thread;
	uint32_t name;   /* index into the source's name table (tl_name); step ranges: 0 */
	uint8_t is_step;
	uint8_t is_compute;
	uint16_t reserved;
	uint32_t reserved2;
};

/* One GPU interval, host time base. */
struct tl_gpu {
	uint64_t start, end;
	uint64_t collective_seq;
	uint32_t device;
	uint16_t kind; /* enum fss_gpu_kind */
	uint16_t reserved;
};

/* A communicator handle of one source. */
struct tl_comm {
	uint64_t handle;
	uint64_t id_hash;
	int32_t nranks;
	int32_t rank;
	uint32_t calls;
	int32_t device;
	uint64_t dimension;  /* the same on every rank for communicators made by the same calls: the
			        id_hash of an init, hash(parent's dimension, split number) of a split */
	uint64_t parent;     /* handle of the split's parent, 0 */
	uint32_t splits;     /* splits made from it so far */
	uint32_t name;       /* string id of the job's name for it (commName), 0 */
	int32_t color;       /* split color, -1 */
	int32_t reserved;
};

struct tl_source {
	uint32_t id;            /* trace source id */
	uint32_t pid;
	int32_t hello_rank;     /* the hello's rank hint (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK), -1 */
	int32_t rank;           /* the layer's rank: in its largest communicator, else hello_rank, else -1 */
	int32_t world_size;     /* ranks of its largest communicator */
	uint64_t features;
	int64_t realtime_offset; /* realtime - monotonic from the hello: places ranks on one clock */
	int64_t cupti_offset;    /* monotonic - CUPTI time, from the latest anchor */
	int have_cupti_anchor;
	uint64_t dropped;        /* every drop counter of the source summed (ring, sink, CUPTI, NVTX) */
	int ended;               /* process_end or process_exit seen: nothing more will come */
	const struct source *view; /* the layer's source: everything else known about it */

	struct tl_comm *comms;
	size_t ncomms, comms_cap;

	struct tl_array events;  /* struct tl_event, issue order */
	uint64_t events_base;    /* event number of events' front */
	struct tl_event open;    /* a group being assembled (calls > 0) */
	struct tl_array ranges;  /* struct tl_range: step and compute ranges, in arrival (end) order */
	struct tl_array gpu;     /* struct tl_gpu, arrival order */
	uint64_t gpu_seen_end;   /* latest GPU interval end seen */
	uint64_t gpu_comm_seen;  /* GPU communication intervals seen */
	uint64_t last_ns;        /* latest host time seen in any record */
	uint64_t collectives;    /* collective records */
	uint64_t step_ranges;    /* step ranges seen */
	char step_name[64];      /* the latest step range's name ("step 3") */

	/* module names of compute ranges, interned (bounded by distinct names) */
	char **names;
	size_t nnames, names_cap;
	void *name_index; /* hash of names */

	uint64_t op_calls[FSS_OP_MAX]; /* collective records by enum fss_coll_op (0: an op this version does
					  not know): each call is one NCCL kernel */
};

typedef struct timeline timeline_t;

/*
 * timeline_new - an empty timeline. step_ranges and compute_ranges are
 * pattern lists (see timeline_pattern_match); they are borrowed. NULL on
 * ENOMEM.
 */
timeline_t *timeline_new(const char *step_ranges, const char *compute_ranges);
void timeline_free(timeline_t *t);

/*
 * timeline_new_on - a timeline on a per-source view the caller owns and
 * feeds (a session's, collector/session.h), so that a record is decoded
 * once for every reader: the owner made `view` with callbacks that pass
 * timeline_view_ops()'s on to the timeline (ctx: the timeline) as the
 * view calls them, and calls timeline_feed with each record right after
 * sources_feed took it. The view is borrowed: it must outlive the
 * timeline. NULL on ENOMEM.
 */
timeline_t *timeline_new_on(sources_t *view, const char *step_ranges, const char *compute_ranges);

/* timeline_view_ops - the timeline's part of a view's callbacks (ctx: the
 * timeline), for the owner of a view given to timeline_new_on. */
const struct source_ops *timeline_view_ops(void);

/*
 * timeline_feed - take one record (as trace_parser delivers it; on a
 * borrowed view, one the view has just taken in). Returns the
 * source it concerned (or NULL for records of no source's timeline: unknown
 * types, strings) in *touched, and 0 or -ENOMEM.
 */
int timeline_feed(timeline_t *t, const struct fss_record_head *rec, struct tl_source **touched);

/*
 * timeline_flush_groups - close every group still being assembled (at the
 * end of the trace). Returns 0 or -ENOMEM.
 */
int timeline_flush_groups(timeline_t *t);

/* The sources seen so far, by position (0..count-1, arrival order). */
size_t timeline_sources(const timeline_t *t);
struct tl_source *timeline_source(const timeline_t *t, size_t i);

/* timeline_string - string `id` of source `source` ("" when unknown or not
 * complete). */
const char *timeline_string(const timeline_t *t, uint32_t source, uint32_t id);

/* timeline_layer - the per-source layer the timeline feeds (the strings,
 * ends and drops of every source). */
const sources_t *timeline_layer(const timeline_t *t);

/* timeline_name - a compute range's name by index; "" for 0 / unknown. */
const char *timeline_name(const struct tl_source *s, uint32_t name);

/*
 * timeline_pattern_match - does an NVTX range of `domain` ("" for the
 * default domain) named `name` match the list? The list is comma separated
 * `DOMAIN:NAME` glob pairs (fnmatch); an item without ':' matches NAME in any
 * domain; a leading '-' makes an item exclude; the last item that matches
 * decides. NULL or "" matches nothing.
 */
int timeline_pattern_match(const char *patterns, const char *domain, const char *name);

/* tl_array_take - drop the first k live items. */
void tl_array_take(struct tl_array *a, size_t k);

/* Statistics of the whole trace so far. */
struct timeline_stats {
	uint64_t records, collectives, gpu_intervals, nvtx_ranges;
};
void timeline_stats(const timeline_t *t, struct timeline_stats *out);

#endif
