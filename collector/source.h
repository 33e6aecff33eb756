/*
 * source.h - one view of every source (process) of a trace, the same for
 * every reader.
 *
 * A trace interleaves the records of many sources. What a record means often
 * depends on records of its source that came before it or come after it: the
 * host name of a hello is a string defined after the hello, the rank of a
 * process is known only at its first communicator, an NVTX range may arrive
 * before its name, a drops record is cumulative, and how the process ended
 * is said (or not) by its last records. This layer keeps that per-source
 * state in one place, the way perf's session gives every tool the same view
 * of a perf.data file: dump, the ingest, the timeline (so the analysis) and
 * every later exporter feed it records and read the sources from it.
 *
 *   records -> sources_feed() -> per source: hello, strings, clock anchors,
 *                                communicators, rank, drops, collective
 *                                sequence numbers, end
 *                             -> ops->on_record (every record, after it was
 *                                taken in) and ops->on_nvtx_range (an NVTX
 *                                range once its strings are known)
 *
 * A source's rank is decided here and nowhere else: its rank in its largest
 * communicator, else the hello's hint (RANK, else SLURM_PROCID, else
 * OMPI_COMM_WORLD_RANK), else -1. A communicator `fsdpscope attach` first
 * saw in use (comm event observed) counts as one made, but its rank was
 * inferred, and rank_from says how (never "communicator"): a rank guessed
 * from pid order is SOURCE_RANK_GUESSED_ORDER, and every reader that prints
 * a rank with its origin shows it as a guess.
 *
 * Threading: a sources_t is used by one thread at a time.
 */
#ifndef FSS_COLLECTOR_SOURCE_H
#define FSS_COLLECTOR_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "common/record.h"

/* NVTX ranges one source may hold while their name or domain string has not
 * arrived; one more is counted in nvtx_unnamed instead. */
#define SOURCE_NVTX_PENDING_MAX 4096u

/* GPUs one source keeps device records of (a rank uses one; a process that
 * drives several is rare): more are left out. */
#define SOURCE_DEVICES_MAX 8u

/* Where a source's rank came from. */
enum source_rank_from {
	SOURCE_RANK_UNKNOWN = 0,
	SOURCE_RANK_COMMUNICATOR, /* its rank in its largest communicator */
	SOURCE_RANK_ENV_RANK,     /* the hello's RANK */
	SOURCE_RANK_SLURM_PROCID, /* the hello's SLURM_PROCID */
	SOURCE_RANK_OMPI_RANK,    /* the hello's OMPI_COMM_WORLD_RANK */
	/* its largest communicator is one attach first saw in use (comm event
	 * observed): its rank there was inferred (fss_comm_inferred) */
	SOURCE_RANK_INFERRED_INPLACE, /* from its in-place AllGathers (sendbuff = recvbuff + rank x bytes) */
	SOURCE_RANK_INFERRED_ENV,     /* from RANK (SLURM_PROCID, ...) of its environment, read by attach */
	SOURCE_RANK_GUESSED_ORDER,    /* a guess: its place by pid among the processes that share it */
};

/* How a source ended, as far as the trace tells. */
enum source_end {
	SOURCE_END_CUT_OFF = 0, /* neither process_end nor process_exit: the trace stops without saying why */
	SOURCE_END_CLEAN,       /* process_end, and exit code 0 (or not known) */
	SOURCE_END_EXITED,      /* exited with a non-zero code, or without its process_end (records may be missing) */
	SOURCE_END_SIGNALED,    /* killed by a signal (process_exit) */
	SOURCE_END_DETACHED,    /* an attached source (path uprobe) without process_exit: still running when
	                           `fsdpscope attach` let it go; its records are whole up to there */
	SOURCE_END_NOT_KNOWN,   /* read from a format that does not say how a process ended (a PyTorch
	                           profiler trace, path kineto): its records are whole up to the file's end */
};

/* A communicator of one source, as its init / split record said. */
struct source_comm {
	uint64_t handle;     /* ncclComm_t value in the process */
	uint64_t id_hash;    /* the same on every rank of the communicator */
	uint64_t dimension;  /* the same on every rank for communicators made by the same calls: the
	                        id_hash of an init, hash(parent's dimension, split number) of a split */
	uint64_t parent;     /* handle of the split's parent, 0 for an init */
	int32_t nranks;
	int32_t rank;        /* the source's rank in it */
	int32_t device;      /* CUDA device, -1 unknown */
	int32_t color;       /* split color, -1 for an init */
	uint32_t name;       /* string id of the job's name for it (commName), 0 */
	uint32_t splits;     /* splits made from it so far */
	uint32_t inferred;   /* enum fss_comm_inferred bits of its comm record: 0 unless observed */
	int32_t observed;    /* 1: first seen in use (comm event observed), its creation not seen */
	uint64_t first_call; /* observed: the communicator's number of the first call after its record
	                        (aligned across ranks), 0: from 1 */
};

/* Drop counters: the agent's (latest drops record) and the layer's own. */
struct source_drops {
	uint64_t ring;         /* records the ring had no room for */
	uint64_t sink;         /* records the sink failed to take */
	uint64_t cupti;        /* CUPTI activity records lost */
	uint64_t nvtx;         /* NVTX ranges the agent did not record */
	uint64_t nvtx_unnamed; /* NVTX ranges whose strings never arrived (or too many waited) */
};

/* Everything known about one source. Read-only for consumers; valid until
 * sources_free(). */
struct source {
	uint32_t id;             /* trace source id (fss_record_head.source) */
	int has_hello;
	uint32_t pid, ppid;
	uint32_t host;           /* string ids of the hello (resolve with sources_string) */
	uint32_t command;
	int32_t hint_rank, hint_local_rank, hint_world_size; /* RANK, LOCAL_RANK, WORLD_SIZE: -1 */
	int32_t hint_slurm_procid, hint_ompi_rank;           /* -1 */
	uint16_t path;           /* enum fss_path */
	uint16_t agent_version;
	uint64_t features;       /* FSS_FEATURE_* of the hello */

	int32_t rank;            /* decided once, see the top of this file; -1 unknown */
	enum source_rank_from rank_from;
	int32_t world_size;      /* ranks of its largest communicator, 0 without one */

	int64_t realtime_offset; /* realtime - monotonic, from the hello */
	int64_t cupti_offset;    /* monotonic - CUPTI time, from the latest CUPTI anchor */
	int have_cupti_anchor;

	struct source_comm *comms; /* in the order they were made */
	size_t ncomms;

	struct source_drops drops;
	uint64_t dropped;        /* every drop counter summed */

	uint64_t records;        /* records of this source taken in */
	uint64_t first_ns;       /* host time of its first timed record, 0 */
	uint64_t last_ns;        /* host time of its last timed record, 0 */
	uint64_t collectives;    /* collective records seen */
	uint64_t max_seq;        /* the highest collective seq seen */
	uint64_t nvtx_pending;   /* NVTX ranges waiting for their strings now */

	int has_process_end;
	int32_t end_exit_code;   /* process_end's exit code, -1 */
	uint64_t end_collectives; /* process_end's count of collective calls */
	int has_exit;            /* a process_exit arrived */
	int32_t wait_status;     /* its waitpid() status */
	uint64_t exit_at_ns;     /* the session's time of the reaping */

	int have_figures;        /* a source_figures record arrived (a reader of another format made it) */
	struct fss_rec_source_figures figures; /* the latest one: what that format measured and cannot tell */

	struct fss_rec_device devices[SOURCE_DEVICES_MAX]; /* the GPUs it uses (device records, format 1.5), in the
	                                                     order they came; a later record of the same ordinal
	                                                     replaces the earlier; name: a string id of the source */
	size_t ndevices;          /* 0: the trace does not say (1.4 and older, CUPTI held by another tool) */
};

/* What sources_feed() tells its consumer. Every callback may be NULL; a
 * non-zero return stops sources_feed() with that value. */
struct source_ops {
	/* Every record, after the layer has taken it in. `src` is its source,
	 * NULL for a record of no source (trace_end). */
	int (*on_record)(void *ctx, struct source *src, const struct fss_record_head *rec);
	/* An NVTX range whose strings are known: called at its record when they
	 * had arrived, else when the last of them does (within the source's
	 * order of records). `domain` is "" for the default domain. */
	int (*on_nvtx_range)(void *ctx, struct source *src, const struct fss_rec_nvtx_range *range,
			     const char *domain, const char *name);
	/* A communicator was added to (or replaced in) src->comms at index
	 * `index` by an init or split record. */
	int (*on_comm)(void *ctx, struct source *src, size_t index);
};

typedef struct sources sources_t;

/* sources_new - an empty table calling ops (may be NULL) with ctx. NULL on
 * ENOMEM. */
sources_t *sources_new(const struct source_ops *ops, void *ctx);
void sources_free(sources_t *s);

/*
 * sources_feed - take one record as trace_parser delivers it (at least
 * record_known_size() bytes for a known type). Records of unknown types
 * reach on_record with their source. Returns 0, -ENOMEM, or a callback's
 * value.
 */
int sources_feed(sources_t *s, const struct fss_record_head *rec);

/*
 * sources_finish - the input has ended: NVTX ranges still waiting for their
 * strings are counted in drops.nvtx_unnamed. Returns 0.
 */
int sources_finish(sources_t *s);

/* sources_count / sources_at - the sources by arrival order; NULL past the end. */
size_t sources_count(const sources_t *s);
struct source *sources_at(const sources_t *s, size_t i);

/* sources_find - the source with trace id `id`, or NULL before its first record. */
struct source *sources_find(const sources_t *s, uint32_t id);

/* sources_string - string `id` of source `source`, NULL when unknown or not
 * complete (yet). Valid until the next sources_feed(). */
const char *sources_string(const sources_t *s, uint32_t source, uint32_t id);

/*
 * source_device_first - the source's first device record (the GPU it uses),
 * NULL when the trace has none.
 */
const struct fss_rec_device *source_device_first(const struct source *src);

/* source_comm_find - the latest communicator of src with this handle, or NULL. */
const struct source_comm *source_comm_find(const struct source *src, uint64_t handle);

/* source_is_attached - 1 when src was observed by `fsdpscope attach`
 * (hello path uprobe): host calls only, no CUPTI, no NVTX, no process_end. */
int source_is_attached(const struct source *src);

/* source_end_of - how src ended (SOURCE_END_CUT_OFF while it has not; an
 * attached source SOURCE_END_DETACHED, and CLEAN when it exited 0: attach
 * writes no process_end). */
enum source_end source_end_of(const struct source *src);

/* source_exit_code - the exit code (process_exit, else process_end), -1
 * when none is known or the process was killed. */
int32_t source_exit_code(const struct source *src);

/* source_signal - the signal that killed it, 0 if none. */
int source_signal(const struct source *src);

/* source_collectives_missing - collective calls the source made that are
 * not in the trace: gaps in its sequence numbers, and those process_end
 * counted beyond the last one seen. src is one a sources_t handed out. */
uint64_t source_collectives_missing(const struct source *src);

/* What a result keeps of a source once the trace is read: self-contained
 * (strings copied), for reports and exporters. */
#define SOURCE_TEXT_MAX 64
struct source_summary {
	uint32_t source;            /* trace source id */
	uint32_t pid;
	int32_t rank;
	int32_t rank_from;          /* enum source_rank_from */
	int32_t end;                /* enum source_end */
	int32_t exit_code;          /* source_exit_code() */
	int32_t signal;             /* source_signal() */
	int32_t has_process_end;
	uint64_t first_ns, last_ns; /* host CLOCK_MONOTONIC of its first and last timed record, 0 */
	uint64_t last_realtime_ns;  /* last_ns on CLOCK_REALTIME, 0 unknown */
	uint64_t records;
	uint64_t collectives;       /* collective records in the trace */
	uint64_t collectives_missing; /* source_collectives_missing() */
	struct source_drops drops;
	uint64_t dropped;           /* every drop counter summed */
	char host[SOURCE_TEXT_MAX];    /* "" unknown */
	char command[SOURCE_TEXT_MAX]; /* "" unknown */
	int32_t path;               /* enum fss_path of its hello */
	uint32_t rank_inferred;     /* fss_comm_inferred bits of the communicator its rank came from, 0 */
	uint32_t comms;             /* communicators it made or was seen using */
	uint32_t comms_observed;    /* of them, first seen in use (attach: fields inferred) */
	/* its first GPU (device records, format 1.5; source_device_first) */
	char device_name[SOURCE_TEXT_MAX]; /* as CUDA (or the Kineto file) names it; "" unknown */
	uint64_t device_memory_bytes; /* 0 unknown */
	uint32_t device_sm_count;     /* 0 unknown */
	int32_t device;               /* CUDA ordinal, -1 unknown */
	uint16_t device_origin;       /* enum fss_device_origin, 0 without a device record */
	uint16_t device_compute_major, device_compute_minor; /* compute capability, 0 unknown */
	uint16_t reserved_device;
};

/*
 * sources_summarize - one summary per source, arrival order, into *out (the
 * caller's, released with free()) and *n. Returns 0 or -ENOMEM.
 */
int sources_summarize(const sources_t *s, struct source_summary **out, size_t *n);

/* Names for dump, reports and JSON; never NULL.
 * "cut-off", "clean", "exited", "signaled", "detached"; "communicator", "RANK",
 * "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "inferred:in-place-allgather",
 * "inferred:environment", "guessed:pid-order", "unknown". */
const char *source_end_name(enum source_end end);
const char *source_rank_from_name(enum source_rank_from from);

/* source_rank_is_guess - 1 for a rank nothing measured says (pid order):
 * printed with a mark ("2?") wherever ranks are listed with their origin. */
int source_rank_is_guess(enum source_rank_from from);

/* How a detached source (SOURCE_END_DETACHED) ended, in words: the one
 * place they live (report, dump, lint). */
#define SOURCE_END_DETACHED_WORDS "detached (still running)"
/* How a source of SOURCE_END_NOT_KNOWN ended, in words. */
#define SOURCE_END_NOT_KNOWN_WORDS "not known (a PyTorch profiler trace does not say)"

/* source_end_whole - 1 for an end after which no record is missing that the
 * source made (clean, detached, not known). */
int source_end_whole(enum source_end end);

#endif
