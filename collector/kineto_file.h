/*
 * kineto_file.h - one PyTorch profiler (Kineto) trace file, read as a
 * stream into compact per-event state.
 *
 * A Kineto trace is Chrome-trace JSON: {"traceEvents": [...], ...} with the
 * job's metadata (distributedInfo, baseTimeNanoseconds, deviceProperties)
 * in top-level keys that may come before or after the events. The reader
 * (kineto_parse.c, over the tokenizer of kineto_scan.c) reads the file in
 * chunks, through zlib when it is gzip, and keeps only the events the
 * analysis can use, each as a struct kineto_event of a few words, in file
 * order; everything else is counted (struct kineto_counts). No whole-file
 * buffer and no mmap: memory follows the events kept, not the file's size.
 *
 * What is kept:
 *   - GPU events: X events with a dur and a numeric args.stream (kernels,
 *     gpu_memcpy, gpu_memset), with their correlation id;
 *   - launches: cuda_runtime / cuda_driver X events with a correlation id;
 *   - communication ops on the host: cpu_op X events named
 *     record_param_comms, c10d::..., nccl:..., or carrying "Collective name";
 *   - ranges: user_annotation and gpu_user_annotation X events
 *     (ProfilerStep#N among them);
 *   - the NCCL arguments of any of these (struct kineto_comm_args).
 *
 * Times are nanoseconds: a ts or dur in µs, fractional or not, is read
 * exactly to the ns (1234.5678 µs -> 1234568 ns, rounded half up); the
 * event says whether its ts or dur had a fraction (KINETO_EV_FRACTIONAL),
 * because HTA rounds such events inward to whole µs.
 *
 * The args read are the ones struct kineto_comm_args and struct kineto_event
 * name; kineto_parse.c's header lists them with where their spelling was
 * confirmed (Kineto's output_json.cpp, PyTorch's profiler/util.h: "Seq",
 * "Rank", "Process Group Ranks" as a string).
 *
 * The builder (kineto_file_new, kineto_file_intern, kineto_file_add*) is
 * what the parser fills the file with, and what unit tests use to make a
 * file without JSON.
 */
#ifndef FSS_COLLECTOR_KINETO_FILE_H
#define FSS_COLLECTOR_KINETO_FILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct kineto_file kineto_file_t;

/* The category of a kept event (its "cat", or what its args make it). */
enum kineto_cat {
	KINETO_CAT_KERNEL = 1,
	KINETO_CAT_GPU_MEMCPY,
	KINETO_CAT_GPU_MEMSET,
	KINETO_CAT_CUDA_RUNTIME,
	KINETO_CAT_CUDA_DRIVER,
	KINETO_CAT_CPU_OP,	   /* a communication op on the host (record_param_comms, c10d::, nccl:) */
	KINETO_CAT_USER_ANNOTATION,
	KINETO_CAT_GPU_USER_ANNOTATION,
	KINETO_CAT_GPU_OTHER, /* another X event with a numeric args.stream >= 0 and a dur (HTA counts it as a GPU event) */
};

/* struct kineto_event.flags */
enum kineto_event_flags {
	KINETO_EV_FRACTIONAL = 1u << 0, /* its ts or dur had digits after the point */
	KINETO_EV_HAS_STREAM = 1u << 1,
	KINETO_EV_HAS_CORRELATION = 1u << 2,
	KINETO_EV_HAS_EXTERNAL_ID = 1u << 3,
};

#define KINETO_NONE (-1)

/* One kept event. 56 bytes. */
struct kineto_event {
	int64_t ts_ns;	     /* its ts, ns */
	int64_t dur_ns;	     /* its dur, ns (>= 0) */
	int64_t correlation; /* args.correlation, KINETO_NONE */
	int64_t external_id; /* args["External id"], KINETO_NONE */
	int32_t tid;	     /* its tid (a GPU event's: the stream, as Kineto writes it) */
	int32_t stream;	     /* args.stream, KINETO_NONE */
	uint32_t name;	     /* string id (kineto_file_string) */
	uint32_t comm_args;  /* index + 1 into the file's comm args (kineto_file_comm_args), 0: none */
	uint16_t cat;	     /* enum kineto_cat */
	uint16_t flags;	     /* enum kineto_event_flags */
	int32_t pid;	     /* its pid (a GPU event's: the device, as Kineto writes it) */
};

/* The NCCL / c10d arguments of an event (record_param_comms and the NCCL
 * kernels of PyTorch 2.x carry them). Absent values are KINETO_NONE (numbers)
 * or 0 (string ids). */
struct kineto_comm_args {
	uint32_t collective_name; /* "Collective name": allreduce, _allgather_base, reduce_scatter_tensor_coalesced, ... */
	uint32_t dtype;		  /* "dtype": Float, BFloat16, Half, ... */
	uint32_t pg_name;	  /* "Process Group Name" */
	uint32_t pg_desc;	  /* "Process Group Description" */
	uint32_t pg_ranks;	  /* "Process Group Ranks", as written: "[0, 1, 2, 3]" */
	int32_t group_size;	  /* "Group size" */
	int64_t in_nelems;	  /* "In msg nelems" */
	int64_t out_nelems;	  /* "Out msg nelems" */
	int64_t seq;		  /* "Seq" (c10d's sequence number on the group) */
	int64_t rank;		  /* "Rank" where written */
};

/* One process group of distributedInfo.pg_config. */
struct kineto_pg {
	uint32_t name;	/* pg_name */
	uint32_t desc;	/* pg_desc */
	uint32_t ranks; /* its ranks as written ("[0, 1]") */
	int32_t size;	/* pg_size, KINETO_NONE */
	int32_t reserved;
};

/* What the file says of its job (top-level keys). */
struct kineto_meta {
	int have_distributed;	 /* distributedInfo present */
	int32_t rank;		 /* distributedInfo.rank, KINETO_NONE */
	int32_t world_size;	 /* distributedInfo.world_size, KINETO_NONE */
	uint32_t backend;	 /* distributedInfo.backend, string id */
	uint32_t nccl_version;	 /* distributedInfo.nccl_version, string id */
	int have_base_time;	 /* baseTimeNanoseconds present */
	int64_t base_time_ns;	 /* baseTimeNanoseconds: ts 0 in CLOCK_REALTIME ns */
	uint32_t device_name;	 /* deviceProperties[0].name, string id */
	int32_t device_sms;	 /* deviceProperties[0].numSms, KINETO_NONE */
	int64_t device_memory;	 /* deviceProperties[0].totalGlobalMem, KINETO_NONE */
	int64_t schema_version;	 /* schemaVersion, KINETO_NONE */
	uint32_t trace_name;	 /* traceName, string id */
	uint32_t reserved;
};

/* Everything the file held, kept or not. */
struct kineto_counts {
	uint64_t events;	/* elements of traceEvents read whole (a cut file: not the one cut) */
	uint64_t kept;		/* of which kept */
	uint64_t complete;	/* ph X */
	uint64_t flows;		/* ph s, f, t */
	uint64_t instants;	/* ph i, I */
	uint64_t metadata;	/* ph M */
	uint64_t other;		/* any other ph */
	uint64_t cpu_ops;	/* cpu_op X events, kept or not */
	uint64_t skipped;	/* elements left out as not understood (not an object, no ph, a value of the wrong type,
				   a kept kind without ts or dur); counted in no other field but events */
};

/* Why a read stopped. */
enum kineto_read_status {
	KINETO_READ_OK = 0,
	KINETO_READ_TRUNCATED, /* the file (or its gzip stream) ended inside the document: partial */
	KINETO_READ_BAD_GZIP,  /* zlib refused the stream: partial */
	KINETO_READ_BAD_JSON,  /* not JSON at `offset`: partial */
	KINETO_READ_NOT_TRACE, /* JSON, but not a Chrome trace (no traceEvents array): nothing read */
	KINETO_READ_IO,	       /* read(2) failed: errno in `error` */
};

/* How a read ended. Offsets are bytes of the JSON text (after gunzip). */
struct kineto_read_info {
	enum kineto_read_status status;
	int error;		  /* errno for KINETO_READ_IO, else 0 */
	uint64_t offset;	  /* where it stopped: the end of the text, or the first bad byte */
	uint64_t compressed;	  /* bytes of the file read (gzip: compressed) */
	int gzip;		  /* the file was gzip */
	char message[192];	  /* what was wrong, for a status other than OK ("expected ':' after an object key") */
	/* the first element counted in counts.skipped (a stated partial reading, status OK or not) */
	uint64_t skip_offset;	  /* where it was: the offset of the bad value */
	char skip_message[128];	  /* why ("ts is a string"), "" when nothing was skipped */
};

/*
 * kineto_file_read - read the file at `path` (format told by content:
 * gzip magic, else JSON). On success *out is the file (kineto_file_free)
 * and *info says how the read ended: a damaged file gives the events read
 * before the damage with status TRUNCATED / BAD_GZIP / BAD_JSON (a partial
 * reading the caller must state). Returns 0 (check info->status), -ENOENT
 * and other -errno for a file that cannot be opened, -ENOMEM.
 */
int kineto_file_read(const char *path, kineto_file_t **out, struct kineto_read_info *info);

/*
 * kineto_file_read_fd - the same, from an open descriptor (tests, fuzzing:
 * a pipe or a memfd). `name` is for messages only.
 */
int kineto_file_read_fd(int fd, const char *name, kineto_file_t **out, struct kineto_read_info *info);

/*
 * kineto_sniff - what the first bytes of a file say it is: 1 a Chrome-trace
 * JSON or a gzip stream of one (gunzips the start to look), 0 something
 * else (an fsdpscope trace starts with its magic), -errno when it cannot
 * be read.
 */
int kineto_sniff(const char *path);

void kineto_file_free(kineto_file_t *f);

const struct kineto_meta *kineto_file_meta(const kineto_file_t *f);
const struct kineto_counts *kineto_file_counts(const kineto_file_t *f);
size_t kineto_file_nevents(const kineto_file_t *f);
const struct kineto_event *kineto_file_events(const kineto_file_t *f);
const struct kineto_comm_args *kineto_file_comm_args(const kineto_file_t *f, uint32_t index1);
size_t kineto_file_npgs(const kineto_file_t *f);
const struct kineto_pg *kineto_file_pgs(const kineto_file_t *f);
/* kineto_file_string - the text of string id `id` ("" for 0), NUL-terminated, valid while f lives. */
const char *kineto_file_string(const kineto_file_t *f, uint32_t id);

/* ---- the builder ---- */
kineto_file_t *kineto_file_new(void);
/* kineto_file_intern - the id of text[0..len) (the same text, the same id; never 0). 0 or -ENOMEM. */
int kineto_file_intern(kineto_file_t *f, const char *text, size_t len, uint32_t *id);
/* kineto_file_add - append an event (copied). 0 or -ENOMEM. */
int kineto_file_add(kineto_file_t *f, const struct kineto_event *ev);
/* kineto_file_add_comm_args - store args, *index1 their index + 1 for kineto_event.comm_args. */
int kineto_file_add_comm_args(kineto_file_t *f, const struct kineto_comm_args *a, uint32_t *index1);
int kineto_file_add_pg(kineto_file_t *f, const struct kineto_pg *pg);
/* the metadata and counts, to fill in */
struct kineto_meta *kineto_file_meta_mut(kineto_file_t *f);
struct kineto_counts *kineto_file_counts_mut(kineto_file_t *f);

#endif
