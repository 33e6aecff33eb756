/*
 * cupti.c - GPU activity from CUPTI: kernels, copies and sets as
 * gpu_interval records, NCCL kernels tied to the collective that launched
 * them.
 *
 * CUPTI is dlopen'd (cupti_api.h) only once libcuda is in the process, so
 * the agent costs nothing in a process without CUDA, and it may be enabled
 * late, with CUDA already initialised. Before anything else the agent
 * subscribes: CUPTI (before CUDA 13.3 / r610 drivers) allows one
 * subscriber, and nsys or the PyTorch profiler may hold it; then the agent
 * says so once and goes on without kernel data (registering buffer
 * callbacks would take CUPTI's buffers away from the other tool).
 *
 * Tying kernels to collectives: the NCCL wrappers push the collective's
 * seq as a CUSTOM0 external correlation id around the real call, so CUPTI
 * writes an EXTERNAL_CORRELATION record (correlationId -> seq) for each
 * launch inside it. That record and the kernel record can come in either
 * order, in one buffer or in two, so:
 *   - correlation records fill a bounded map correlationId -> seq;
 *   - an NCCL kernel, memcpy or memset whose correlationId is not in the
 *     map yet is held (bounded FIFO) until its correlation record comes,
 *     for at most CUPTI_HOLD_NS, or until a forced flush has delivered
 *     every record written before it (a correlation record is written at
 *     launch, so before its kernel record exists); then it goes out with
 *     collective_seq 0;
 *   - compute kernels are never launched inside a pushed id: they go out
 *     at once, with the seq if the map happens to have one.
 *
 * Host waits on the GPU: on the agent's own subscriber (never when another
 * tool holds CUPTI) the runtime-API callbacks of cudaStreamSynchronize,
 * cudaEventSynchronize and cudaDeviceSynchronize are enabled, one callback
 * id at a time, nothing else of the domain. On API_ENTER an enter record
 * (kind STREAM_SYNC / EVENT_SYNC / DEVICE_SYNC, the stream or event handle,
 * the last collective seq issued, a per-process sync_id) goes into the
 * ring; on API_EXIT a sync_exit with the same sync_id and the cudaError_t
 * returned. Between the two, the sync_id travels in CUPTI's correlationData
 * and the rest in a per-thread stack of SYNC_NEST_MAX entries. These
 * callbacks run on the job's threads: a clock read, a relaxed fetch_add and
 * a ring push, no lock, no allocation, no syscall.
 *
 * Threads: buffers come to cupti_handle_buffer() on CUPTI's thread and, on
 * a flush, on the flushing thread; one mutex guards the map and the held
 * intervals. None of this is the job's hot path. The hot path is
 * cupti_push_correlation()/cupti_pop_correlation(): one atomic load, the
 * CUPTI call, a thread-local counter; no lock, no allocation, no syscall
 * of ours (what CUPTI's push costs is CUPTI's).
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/cupti.h"
#include "agent/cupti_api.h"
#include "agent/emit.h"
#include "agent/strings.h"
#include "common/clock.h"
#include "common/record.h"

/* The record structs of the CUDA 13 headers. Older CUPTI (CUDA 12) emits
 * Kernel9 / Memcpy5 / Memset3 for the same kinds; cuptiActivityGetNextRecord
 * knows their sizes, and every field read here sits at the same offset in
 * both (checked below), so one reader serves both. */
typedef CUpti_ActivityKernel10 cupti_kernel_t;
typedef CUpti_ActivityMemcpy6 cupti_memcpy_t;
typedef CUpti_ActivityMemset4 cupti_memset_t;

#define SAME_OFFSET(A, B, f) static_assert(offsetof(A, f) == offsetof(B, f), #A "." #f " moved")
SAME_OFFSET(CUpti_ActivityKernel10, CUpti_ActivityKernel9, start);
SAME_OFFSET(CUpti_ActivityKernel10, CUpti_ActivityKernel9, end);
SAME_OFFSET(CUpti_ActivityKernel10, CUpti_ActivityKernel9, deviceId);
SAME_OFFSET(CUpti_ActivityKernel10, CUpti_ActivityKernel9, contextId);
SAME_OFFSET(CUpti_ActivityKernel10, CUpti_ActivityKernel9, streamId);
SAME_OFFSET(CUpti_ActivityKernel10, CUpti_ActivityKernel9, correlationId);
SAME_OFFSET(CUpti_ActivityKernel10, CUpti_ActivityKernel9, name);
SAME_OFFSET(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, copyKind);
SAME_OFFSET(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, bytes);
SAME_OFFSET(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, start);
SAME_OFFSET(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, end);
SAME_OFFSET(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, deviceId);
SAME_OFFSET(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, contextId);
SAME_OFFSET(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, streamId);
SAME_OFFSET(CUpti_ActivityMemcpy6, CUpti_ActivityMemcpy5, correlationId);
SAME_OFFSET(CUpti_ActivityMemset4, CUpti_ActivityMemset3, bytes);
SAME_OFFSET(CUpti_ActivityMemset4, CUpti_ActivityMemset3, start);
SAME_OFFSET(CUpti_ActivityMemset4, CUpti_ActivityMemset3, end);
SAME_OFFSET(CUpti_ActivityMemset4, CUpti_ActivityMemset3, deviceId);
SAME_OFFSET(CUpti_ActivityMemset4, CUpti_ActivityMemset3, contextId);
SAME_OFFSET(CUpti_ActivityMemset4, CUpti_ActivityMemset3, streamId);
SAME_OFFSET(CUpti_ActivityMemset4, CUpti_ActivityMemset3, correlationId);

/* Buffers handed to CUPTI: a fixed pool, allocated at start so that a
 * request (which may come on an application thread) never allocates. When
 * all are out CUPTI gets none and counts its drops (cupti_dropped). */
#define CUPTI_POOL_BUFFERS 16u
#define CUPTI_BUFFER_BYTES (2u << 20)
static_assert(CUPTI_POOL_BUFFERS <= 32, "the free mask is 32 bits");

/* correlationId -> seq: 4-way set associative, the oldest way replaced.
 * Only launches inside a pushed id have an entry (about one per
 * collective), so 16384 entries cover far more than the records in flight. */
#define CUPTI_MAP_SETS 4096u
#define CUPTI_MAP_WAYS 4u

/* Intervals waiting for their correlation record. */
#define CUPTI_HELD_MAX 4096u
#define CUPTI_HOLD_NS (5ull * 1000000000ull)

/* A cupti clock anchor at start, at each flush and at most this often. */
#define CUPTI_ANCHOR_EVERY_NS 1000000000ull

/* CUPTI's own periodic delivery of completed buffers. */
#define CUPTI_FLUSH_PERIOD_MS 1000u

struct corr_entry {
	uint64_t seq;	/* 0: empty */
	uint32_t corr;	/* CUPTI correlation id */
	uint32_t stamp; /* insertion order, for replacing the oldest way */
};

struct held {
	struct fss_rec_gpu_interval rec;
	uint64_t held_ns; /* host time it was held */
};

static struct {
	pthread_mutex_t start_lock; /* serialises cupti_start */
	_Atomic int status;	    /* enum agent_cupti_status */
	int said_busy;		    /* the "held by another subscriber" message went out */
	struct cupti_api api;	    /* filled once at start (or by a test) */
	const struct cupti_api *test_api;
	void *lib;
	CUpti_SubscriberHandle subscriber;

	uint8_t *pool[CUPTI_POOL_BUFFERS];
	_Atomic uint32_t pool_free; /* bit i: pool[i] is free */

	pthread_mutex_t lock; /* everything below */
	struct corr_entry map[CUPTI_MAP_SETS][CUPTI_MAP_WAYS];
	uint32_t map_stamp;
	struct held held[CUPTI_HELD_MAX];
	uint32_t held_head, held_count; /* FIFO: oldest at held_head */
	uint64_t hold_ns;
	uint64_t last_anchor_ns;
	uint64_t bad_times; /* records with no usable time stamps (skipped) */
} cupti = {
    .start_lock = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .hold_ns = CUPTI_HOLD_NS,
};

/* External ids this thread pushed and has not popped: a pop never goes to
 * CUPTI without its push (CUPTI may have come up, or a fork taken it away,
 * between the two). */
static __thread uint32_t tls_pushed __attribute__((tls_model("initial-exec")));

static int debug_on(void)
{
	const char *v = getenv(AGENT_ENV_DEBUG);

	return v && v[0] == '1';
}

#define say(...)                                                                                                       \
	do {                                                                                                           \
		if (debug_on())                                                                                        \
			fprintf(stderr, "fsdpscope: cupti: " __VA_ARGS__);                                             \
	} while (0)

/* ---- loading ---------------------------------------------------------- */

static void *load_library(void)
{
	static const char *const sonames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
	static const char *const dirs[] = {"/lib64", "/extras/CUPTI/lib64", "/lib"};
	const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
	char path[4096];
	void *h;

	/* A CUPTI the process already has (PyTorch ships its own) matches its
	 * CUDA runtime: prefer it. */
	for (size_t i = 0; i < sizeof(sonames) / sizeof(sonames[0]); i++)
		if ((h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)))
			return h;
	for (size_t i = 0; i < sizeof(sonames) / sizeof(sonames[0]); i++)
		if ((h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL)))
			return h;
	for (size_t r = 0; r < sizeof(roots) / sizeof(roots[0]); r++) {
		if (!roots[r] || !roots[r][0])
			continue;
		for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
			int n = snprintf(path, sizeof(path), "%s%s/libcupti.so", roots[r], dirs[d]);

			if (n > 0 && (size_t)n < sizeof(path) && (h = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
				return h;
		}
	}
	return NULL;
}

int cupti_api_load(struct cupti_api *api, void **handle)
{
	void *h = load_library();

	if (!h)
		return -ENOENT;
	memset(api, 0, sizeof(*api));
	/* dlsym returns void *; POSIX guarantees it converts to a function
	 * pointer, the memcpy keeps -Wpedantic quiet about it. */
#define RESOLVE(field, sym, required)                                                                                  \
	do {                                                                                                           \
		void *p_ = dlsym(h, sym);                                                                              \
		if (!p_ && (required))                                                                                 \
			goto missing;                                                                                  \
		memcpy(&api->field, &p_, sizeof(p_));                                                                  \
	} while (0)
	RESOLVE(get_version, "cuptiGetVersion", 1);
	RESOLVE(subscribe, "cuptiSubscribe", 1);
	RESOLVE(subscribe_v2, "cuptiSubscribe_v2", 0);
	RESOLVE(unsubscribe, "cuptiUnsubscribe", 1);
	RESOLVE(activity_register_callbacks, "cuptiActivityRegisterCallbacks", 1);
	RESOLVE(activity_enable, "cuptiActivityEnable", 1);
	RESOLVE(activity_disable, "cuptiActivityDisable", 1);
	RESOLVE(activity_get_next_record, "cuptiActivityGetNextRecord", 1);
	RESOLVE(activity_get_num_dropped_records, "cuptiActivityGetNumDroppedRecords", 1);
	RESOLVE(activity_flush_all, "cuptiActivityFlushAll", 1);
	RESOLVE(activity_flush_period, "cuptiActivityFlushPeriod", 0);
	RESOLVE(activity_push_external_correlation_id, "cuptiActivityPushExternalCorrelationId", 1);
	RESOLVE(activity_pop_external_correlation_id, "cuptiActivityPopExternalCorrelationId", 1);
	RESOLVE(get_timestamp, "cuptiGetTimestamp", 1);
	RESOLVE(enable_callback, "cuptiEnableCallback", 0);
#undef RESOLVE
	*handle = h;
	return 0;
missing:
	dlclose(h); /* nothing of it was called: safe to unload */
	memset(api, 0, sizeof(*api));
	return -ENOSYS;
}

/* libcuda in the process: the only time CUPTI can be of use. */
static int cuda_loaded(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	if (!h)
		return 0;
	dlclose(h); /* drops the reference RTLD_NOLOAD just took */
	return 1;
}

/* ---- classification ---------------------------------------------------- */

int cupti_kernel_is_nccl(const char *name)
{
	const char *p = name;

	if (!p)
		return 0;
	if (p[0] == '_' && p[1] == 'Z') {
		/* _Z [N] [L] <length> <identifier>...: look at the identifier. */
		p += 2;
		while (*p == 'N' || *p == 'L')
			p++;
		while (isdigit((unsigned char)*p))
			p++;
	}
	return strncmp(p, "ncclDevKernel_", 14) == 0 || strncmp(p, "ncclKernel_", 11) == 0;
}

/* ---- correlation map (cupti.lock held) --------------------------------- */

static void map_put(uint32_t corr, uint64_t seq)
{
	struct corr_entry *set = cupti.map[corr % CUPTI_MAP_SETS];
	struct corr_entry *victim = NULL;

	for (uint32_t w = 0; w < CUPTI_MAP_WAYS && !victim; w++)
		if (set[w].seq && set[w].corr == corr)
			victim = &set[w]; /* the same launch seen again */
	for (uint32_t w = 0; w < CUPTI_MAP_WAYS && !victim; w++)
		if (!set[w].seq)
			victim = &set[w];
	if (!victim) {
		victim = &set[0];
		for (uint32_t w = 1; w < CUPTI_MAP_WAYS; w++)
			if ((int32_t)(set[w].stamp - victim->stamp) < 0) /* older, wrap-safe */
				victim = &set[w];
	}
	victim->corr = corr;
	victim->seq = seq;
	victim->stamp = ++cupti.map_stamp;
}

static uint64_t map_get(uint32_t corr)
{
	const struct corr_entry *set = cupti.map[corr % CUPTI_MAP_SETS];

	for (uint32_t w = 0; w < CUPTI_MAP_WAYS; w++)
		if (set[w].seq && set[w].corr == corr)
			return set[w].seq;
	return 0;
}

/* ---- held intervals (cupti.lock held) ---------------------------------- */

static void held_hold(const struct fss_rec_gpu_interval *rec, uint64_t now)
{
	struct held *h;

	if (cupti.held_count == CUPTI_HELD_MAX) {
		/* Full: the oldest waited longest; it goes out without a seq. */
		agent_emit(&cupti.held[cupti.held_head].rec);
		cupti.held_head = (cupti.held_head + 1) % CUPTI_HELD_MAX;
		cupti.held_count--;
	}
	h = &cupti.held[(cupti.held_head + cupti.held_count) % CUPTI_HELD_MAX];
	h->rec = *rec;
	h->held_ns = now;
	cupti.held_count++;
}

/* Emit every held interval whose seq is now known, and those held before
 * `release_before` without one; keep the rest in order. */
static void held_resolve(uint64_t release_before)
{
	uint32_t kept = 0, n = cupti.held_count;

	for (uint32_t i = 0; i < n; i++) {
		struct held *h = &cupti.held[(cupti.held_head + i) % CUPTI_HELD_MAX];
		uint64_t seq = map_get(h->rec.correlation_id);

		if (seq || h->held_ns < release_before) {
			h->rec.collective_seq = seq;
			agent_emit(&h->rec);
			continue;
		}
		if (kept != i)
			cupti.held[(cupti.held_head + kept) % CUPTI_HELD_MAX] = *h;
		kept++;
	}
	cupti.held_count = kept;
	if (!kept)
		cupti.held_head = 0;
}

/* ---- records ----------------------------------------------------------- */

/* CUPTI time stamps and CLOCK_MONOTONIC read together (the tightest of a
 * few brackets), so intervals can be placed on the host time line. */
static void anchor_emit(uint64_t now)
{
	struct fss_rec_clock_anchor rec;
	uint64_t best_gap = UINT64_MAX, mono = 0, other = 0;

	if (!cupti.api.get_timestamp || !agent_recording())
		return;
	for (int i = 0; i < 3; i++) {
		uint64_t a = clock_mono_ns(), ts = 0, b;

		if (cupti.api.get_timestamp(&ts) != CUPTI_SUCCESS)
			return;
		b = clock_mono_ns();
		if (b - a < best_gap) {
			best_gap = b - a;
			mono = a + (b - a) / 2;
			other = ts;
		}
	}
	record_init(&rec, FSS_REC_CLOCK_ANCHOR, sizeof(rec), 0);
	rec.mono_ns = mono;
	rec.other_ns = other;
	rec.domain = FSS_CLOCK_CUPTI;
	agent_emit(&rec);
	cupti.last_anchor_ns = now;
}

static void interval_init(struct fss_rec_gpu_interval *rec, uint16_t kind, uint64_t start, uint64_t end,
			  uint32_t device, uint32_t context, uint32_t stream, uint32_t corr)
{
	record_init(rec, FSS_REC_GPU_INTERVAL, sizeof(*rec), 0);
	rec->kind = kind;
	rec->start_ns = start;
	rec->end_ns = end;
	rec->device = device;
	rec->context = context;
	rec->stream = stream;
	rec->correlation_id = corr;
}

/* Out now with its seq, or held when it may still get one. */
static void interval_out(struct fss_rec_gpu_interval *rec, int may_have_seq, uint64_t now)
{
	rec->collective_seq = map_get(rec->correlation_id);
	if (!rec->collective_seq && may_have_seq)
		held_hold(rec, now);
	else
		agent_emit(rec);
}

static int times_ok(uint64_t start, uint64_t end)
{
	/* 0/0: CUPTI could not time it (no device memory); an incomplete
	 * record of a forced flush has end < start. */
	return start && end >= start;
}

static void handle_record(const CUpti_Activity *r, int recording, uint64_t now)
{
	struct fss_rec_gpu_interval rec;

	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
		const CUpti_ActivityExternalCorrelation *e = (const void *)r;

		if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 && e->externalId)
			map_put(e->correlationId, e->externalId);
		return;
	}
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const cupti_kernel_t *k = (const void *)r;
		int nccl;

		if (!recording)
			return;
		if (!times_ok(k->start, k->end)) {
			cupti.bad_times++;
			return;
		}
		nccl = cupti_kernel_is_nccl(k->name);
		interval_init(&rec, nccl ? FSS_GPU_COMM : FSS_GPU_COMPUTE, k->start, k->end, k->deviceId, k->contextId,
			      k->streamId, k->correlationId);
		rec.name = k->name ? agent_intern(k->name, -1) : FSS_STRING_NONE;
		interval_out(&rec, nccl, now);
		return;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const cupti_memcpy_t *m = (const void *)r;

		if (!recording)
			return;
		if (!times_ok(m->start, m->end)) {
			cupti.bad_times++;
			return;
		}
		interval_init(&rec, FSS_GPU_MEMCPY, m->start, m->end, m->deviceId, m->contextId, m->streamId,
			      m->correlationId);
		rec.bytes = m->bytes;
		rec.copy_kind = m->copyKind;
		/* a one-rank collective is a copy inside the pushed id */
		interval_out(&rec, 1, now);
		return;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const cupti_memset_t *m = (const void *)r;

		if (!recording)
			return;
		if (!times_ok(m->start, m->end)) {
			cupti.bad_times++;
			return;
		}
		interval_init(&rec, FSS_GPU_MEMSET, m->start, m->end, m->deviceId, m->contextId, m->streamId,
			      m->correlationId);
		rec.bytes = m->bytes;
		interval_out(&rec, 1, now);
		return;
	}
	case CUPTI_ACTIVITY_KIND_DEVICE:
		if (recording) /* the job's GPU, for MFU: once per device */
			cupti_device_handle(r);
		return;
	default:
		return; /* a kind this agent does not record */
	}
}

void cupti_handle_buffer(uint8_t *buffer, size_t valid_size)
{
	CUpti_Activity *r = NULL;
	int recording = agent_recording();
	uint64_t now = clock_mono_ns();

	if (!buffer || !valid_size || !cupti.api.activity_get_next_record)
		return;
	pthread_mutex_lock(&cupti.lock);
	while (cupti.api.activity_get_next_record(buffer, valid_size, &r) == CUPTI_SUCCESS)
		handle_record(r, recording, now);
	/* This buffer's correlation records may be what older intervals were
	 * waiting for; anything held longer than hold_ns goes out as is. */
	held_resolve(now > cupti.hold_ns ? now - cupti.hold_ns : 0);
	if (recording && now - cupti.last_anchor_ns >= CUPTI_ANCHOR_EVERY_NS)
		anchor_emit(now);
	pthread_mutex_unlock(&cupti.lock);
}

/* ---- buffers ----------------------------------------------------------- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	uint32_t free_mask = atomic_load_explicit(&cupti.pool_free, memory_order_acquire);

	/* Lock-free: claim a free bit. This may run on an application thread. */
	while (free_mask) {
		uint32_t i = (uint32_t)__builtin_ctz(free_mask);

		if (atomic_compare_exchange_weak_explicit(&cupti.pool_free, &free_mask, free_mask & ~(1u << i),
							  memory_order_acq_rel, memory_order_acquire)) {
			*buffer = cupti.pool[i];
			*size = CUPTI_BUFFER_BYTES;
			*max_records = 0;
			return;
		}
	}
	*buffer = NULL; /* CUPTI drops and counts: see cupti_dropped */
	*size = 0;
	*max_records = 0;
}

static void dropped_collect(CUcontext context, uint32_t stream)
{
	size_t dropped = 0;

	if (cupti.api.activity_get_num_dropped_records &&
	    cupti.api.activity_get_num_dropped_records(context, stream, &dropped) == CUPTI_SUCCESS && dropped)
		atomic_fetch_add_explicit(&agent_counters.cupti_dropped, dropped, memory_order_relaxed);
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer, size_t size,
				      size_t valid_size)
{
	cupti_handle_buffer(buffer, valid_size);
	dropped_collect(context, stream);
	for (uint32_t i = 0; i < CUPTI_POOL_BUFFERS; i++)
		if (buffer && buffer == cupti.pool[i]) {
			atomic_fetch_or_explicit(&cupti.pool_free, 1u << i, memory_order_release);
			break;
		}
}

static int pool_alloc(void)
{
	for (uint32_t i = 0; i < CUPTI_POOL_BUFFERS; i++) {
		/* Address space only until CUPTI writes into it. CUPTI wants
		 * 8-byte alignment; malloc gives 16. */
		cupti.pool[i] = malloc(CUPTI_BUFFER_BYTES);
		if (!cupti.pool[i])
			return -ENOMEM;
	}
	atomic_store_explicit(&cupti.pool_free, CUPTI_POOL_BUFFERS == 32 ? UINT32_MAX : (1u << CUPTI_POOL_BUFFERS) - 1,
			      memory_order_release);
	return 0;
}

static void pool_free_all(void)
{
	atomic_store(&cupti.pool_free, 0);
	for (uint32_t i = 0; i < CUPTI_POOL_BUFFERS; i++) {
		free(cupti.pool[i]);
		cupti.pool[i] = NULL;
	}
}

/* ---- host waits: synchronize callbacks -------------------------------- */

/* Every callback id of the three synchronizes in the CUDA 13 headers
 * (cupti_runtime_cbid.h), each with its kind. */
static const struct {
	CUpti_CallbackId cbid;
	uint16_t kind;
} sync_cbids[] = {
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, FSS_ENTER_STREAM_SYNC},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000, FSS_ENTER_STREAM_SYNC},
    {CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, FSS_ENTER_EVENT_SYNC},
    {CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, FSS_ENTER_DEVICE_SYNC},
};
#define SYNC_CBIDS (sizeof(sync_cbids) / sizeof(sync_cbids[0]))

/* The parameters CUPTI hands the callbacks: the handle is their only field. */
static_assert(offsetof(cudaStreamSynchronize_v3020_params, stream) == 0, "stream param moved");
static_assert(offsetof(cudaStreamSynchronize_ptsz_v7000_params, stream) == 0, "stream param moved");
static_assert(offsetof(cudaEventSynchronize_v3020_params, event) == 0, "event param moved");

/* Synchronizes a thread is inside: one, in practice (the runtime does not
 * report the calls it makes itself); an enter whose exit never came is
 * overwritten. */
#define SYNC_NEST_MAX 2u

struct sync_open {
	uint64_t enter_ns;
	uint64_t after_seq;
	uint32_t sync_id;
	uint16_t kind;
	uint16_t reserved;
};

static __thread struct sync_open tls_syncs[SYNC_NEST_MAX] __attribute__((tls_model("initial-exec")));
static __thread uint32_t tls_sync_depth __attribute__((tls_model("initial-exec")));

static _Atomic uint32_t sync_ids; /* the last sync_id drawn in this process */

static uint16_t sync_kind(CUpti_CallbackId cbid)
{
	for (size_t i = 0; i < SYNC_CBIDS; i++)
		if (sync_cbids[i].cbid == cbid)
			return sync_cbids[i].kind;
	return 0;
}

/* The stream (or event) the call waits on, from its parameters. */
static uint64_t sync_handle(uint16_t kind, const void *params)
{
	if (!params)
		return 0;
	if (kind == FSS_ENTER_STREAM_SYNC)
		return (uint64_t)(uintptr_t)((const cudaStreamSynchronize_v3020_params *)params)->stream;
	if (kind == FSS_ENTER_EVENT_SYNC)
		return (uint64_t)(uintptr_t)((const cudaEventSynchronize_v3020_params *)params)->event;
	return 0;
}

static void sync_enter(uint16_t kind, const CUpti_CallbackData *cb)
{
	struct fss_rec_enter r;
	struct sync_open *o;

	memset(&r, 0, sizeof(r));
	r.head.type = FSS_REC_ENTER;
	r.head.size = sizeof(r);
	r.sync_id = atomic_fetch_add_explicit(&sync_ids, 1, memory_order_relaxed) + 1;
	r.seq = atomic_load_explicit(&agent_counters.collectives, memory_order_relaxed);
	r.stream = sync_handle(kind, cb->functionParams);
	r.enter_ns = clock_mono_ns();
	r.thread = agent_thread_id();
	r.peer = -1;
	r.kind = kind;
	r.dtype = FSS_DTYPE_UNKNOWN;
	r.redop = FSS_REDOP_NONE;
	r.path = FSS_PATH_INTERPOSE;
	if (cb->correlationData)
		*cb->correlationData = r.sync_id;
	o = &tls_syncs[tls_sync_depth < SYNC_NEST_MAX ? tls_sync_depth++ : SYNC_NEST_MAX - 1];
	o->enter_ns = r.enter_ns;
	o->after_seq = r.seq;
	o->sync_id = r.sync_id;
	o->kind = kind;
	agent_emit(&r);
}

static void sync_exit(const CUpti_CallbackData *cb)
{
	uint64_t exit_ns = clock_mono_ns();
	struct fss_rec_sync_exit r;
	uint32_t id;
	size_t i;

	if (!tls_sync_depth)
		return; /* its enter was not recorded (state, or CUPTI just came up) */
	id = cb->correlationData ? (uint32_t)*cb->correlationData : tls_syncs[tls_sync_depth - 1].sync_id;
	for (i = tls_sync_depth; i-- > 0;)
		if (tls_syncs[i].sync_id == id)
			break;
	if (i == (size_t)-1)
		return; /* not one of ours */
	/* anything above it lost its exit */
	tls_sync_depth = (uint32_t)i;
	memset(&r, 0, sizeof(r));
	r.head.type = FSS_REC_SYNC_EXIT;
	r.head.size = sizeof(r);
	r.enter_ns = tls_syncs[i].enter_ns;
	r.exit_ns = exit_ns;
	r.after_seq = tls_syncs[i].after_seq;
	r.sync_id = id;
	r.thread = agent_thread_id();
	r.kind = tls_syncs[i].kind;
	r.result = cb->functionReturnValue ? (int32_t)(*(const cudaError_t *)cb->functionReturnValue) : 0;
	agent_emit(&r);
}

/* The subscriber's callback, on the job's thread inside its CUDA call. Only
 * the synchronize ids are enabled; anything else is ignored. */
static void CUPTIAPI subscriber_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id,
					 const void *data)
{
	const CUpti_CallbackData *cb = data;
	uint16_t kind;
	int saved = errno;

	(void)userdata;
	if (domain != CUPTI_CB_DOMAIN_RUNTIME_API || !cb ||
	    atomic_load_explicit(&cupti.status, memory_order_acquire) != AGENT_CUPTI_ON)
		return;
	if (!(kind = sync_kind(id)))
		return;
	if (cb->callbackSite == CUPTI_API_ENTER) {
		if (agent_recording())
			sync_enter(kind, cb);
	} else if (cb->callbackSite == CUPTI_API_EXIT) {
		sync_exit(cb); /* written whenever its enter was, so the pair stays whole */
	}
	errno = saved;
}

/* Enable the synchronize callbacks, only those: the rest of the runtime
 * domain stays off (every enabled id costs the job a callback per call).
 * Without them CUPTI still gives GPU intervals. */
static void sync_callbacks_enable(void)
{
	size_t on = 0;
	CUptiResult rc = CUPTI_SUCCESS;

	if (!cupti.api.enable_callback) {
		say("no cuptiEnableCallback: host waits (synchronizes) are not recorded\n");
		return;
	}
	for (; on < SYNC_CBIDS; on++) {
		rc = cupti.api.enable_callback(1, cupti.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, sync_cbids[on].cbid);
		if (rc != CUPTI_SUCCESS)
			break;
	}
	if (on == SYNC_CBIDS)
		return;
	while (on > 0)
		cupti.api.enable_callback(0, cupti.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, sync_cbids[--on].cbid);
	say("synchronize callbacks refused (%d): host waits are not recorded\n", (int)rc);
}

/* ---- start ------------------------------------------------------------- */

static CUptiResult subscribe(char *holder, size_t holder_size)
{
	holder[0] = 0;
	if (cupti.api.subscribe_v2) {
		CUpti_SubscriberParams params;

		memset(&params, 0, sizeof(params));
		params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
		params.subscriberName = "fsdpscope";
		params.oldSubscriberName = holder;
		params.oldSubscriberSize = holder_size;
		return cupti.api.subscribe_v2(&cupti.subscriber, subscriber_callback, NULL, &params);
	}
	return cupti.api.subscribe(&cupti.subscriber, subscriber_callback, NULL);
}

/* Another tool holds CUPTI: say so once, in the trace and under DEBUG. */
static void become_busy(const char *holder)
{
	char msg[192];

	atomic_store(&cupti.status, AGENT_CUPTI_BUSY);
	if (cupti.said_busy)
		return;
	cupti.said_busy = 1;
	snprintf(msg, sizeof(msg), "cupti: held by another subscriber%s%s%s: no GPU intervals, NCCL events only",
		 holder[0] ? " (" : "", holder, holder[0] ? ")" : "");
	if (debug_on())
		fprintf(stderr, "fsdpscope: %s\n", msg);
	/* A string record survives reconnects (agent_strings_replay) and
	 * shows in `fsdpscope dump`; cupti_status() tells agent.c the same. */
	agent_intern(msg, -1);
}

static const CUpti_ActivityKind wanted_kinds[] = {
    /* correlation first: no kernel record before the map can fill */
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
};

static void start_locked(void)
{
	const char *env = getenv(AGENT_ENV_CUPTI);
	char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1];
	uint32_t version = 0;
	size_t enabled = 0;
	CUptiResult rc;

	if (env && env[0] == '0') {
		atomic_store(&cupti.status, AGENT_CUPTI_DISABLED);
		say("disabled by %s=0\n", AGENT_ENV_CUPTI);
		return;
	}
	if (cupti.test_api) {
		cupti.api = *cupti.test_api;
	} else {
		if (!cuda_loaded())
			return; /* stay IDLE: called again once CUDA is there */
		if (cupti_api_load(&cupti.api, &cupti.lib) < 0) {
			atomic_store(&cupti.status, AGENT_CUPTI_ABSENT);
			say("no usable libcupti: no GPU intervals\n");
			return;
		}
	}
	if (cupti.api.get_version)
		cupti.api.get_version(&version);
	rc = subscribe(holder, sizeof(holder) - 1);
	holder[sizeof(holder) - 1] = 0;
	if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		become_busy(holder);
		return;
	}
	if (rc != CUPTI_SUCCESS) {
		atomic_store(&cupti.status, AGENT_CUPTI_FAILED);
		say("cuptiSubscribe failed (%d): no GPU intervals\n", (int)rc);
		return;
	}
	if (pool_alloc() < 0) {
		rc = CUPTI_ERROR_OUT_OF_MEMORY;
		goto fail;
	}
	rc = cupti.api.activity_register_callbacks(buffer_requested, buffer_completed);
	if (rc != CUPTI_SUCCESS)
		goto fail;
	for (; enabled < sizeof(wanted_kinds) / sizeof(wanted_kinds[0]); enabled++) {
		rc = cupti.api.activity_enable(wanted_kinds[enabled]);
		if (rc != CUPTI_SUCCESS)
			goto fail;
	}
	if (cupti.api.activity_flush_period)
		cupti.api.activity_flush_period(CUPTI_FLUSH_PERIOD_MS);
	/* Optional: without it the GPU model is unknown, nothing else is lost. */
	cupti.api.activity_enable(CUPTI_ACTIVITY_KIND_DEVICE);
	atomic_store(&cupti.status, AGENT_CUPTI_ON);
	sync_callbacks_enable();
	pthread_mutex_lock(&cupti.lock);
	anchor_emit(clock_mono_ns());
	pthread_mutex_unlock(&cupti.lock);
	say("on (CUPTI API version %u)\n", version);
	return;
fail:
	while (enabled > 0)
		cupti.api.activity_disable(wanted_kinds[--enabled]);
	cupti.api.unsubscribe(cupti.subscriber); /* leave the slot to other tools */
	/* The pool stays: CUPTI may still hold the registered callbacks, and
	 * nothing is enabled, so it is never asked for a buffer. */
	if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		become_busy("");
		return;
	}
	atomic_store(&cupti.status, AGENT_CUPTI_FAILED);
	say("activity setup failed (%d): no GPU intervals\n", (int)rc);
}

void cupti_start(void)
{
	if (atomic_load_explicit(&cupti.status, memory_order_acquire) != AGENT_CUPTI_IDLE)
		return;
	pthread_mutex_lock(&cupti.start_lock);
	if (atomic_load(&cupti.status) == AGENT_CUPTI_IDLE)
		start_locked();
	pthread_mutex_unlock(&cupti.start_lock);
}

int cupti_status(void)
{
	return atomic_load_explicit(&cupti.status, memory_order_acquire);
}

void cupti_flush(void)
{
	uint64_t started;

	if (atomic_load_explicit(&cupti.status, memory_order_acquire) != AGENT_CUPTI_ON)
		return;
	started = clock_mono_ns();
	/* Delivers every buffer, incomplete ones too, through
	 * buffer_completed on this thread. Never cuptiFinalize: it races with
	 * other threads still in CUPTI. */
	cupti.api.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	pthread_mutex_lock(&cupti.lock);
	/* Every correlation record written before `started` has been
	 * delivered now, so an interval held since before then has none. */
	held_resolve(started);
	anchor_emit(clock_mono_ns());
	if (cupti.bad_times)
		say("%llu records without time stamps skipped\n", (unsigned long long)cupti.bad_times);
	pthread_mutex_unlock(&cupti.lock);
	dropped_collect(NULL, 0);
}

void cupti_push_correlation(uint64_t seq)
{
	/* Hot path: one load when CUPTI is not on. Acquire: seeing ON must
	 * also show the api table written before it (weakly ordered CPUs). */
	if (atomic_load_explicit(&cupti.status, memory_order_acquire) != AGENT_CUPTI_ON)
		return;
	if (cupti.api.activity_push_external_correlation_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, seq) ==
	    CUPTI_SUCCESS)
		tls_pushed++;
}

void cupti_pop_correlation(void)
{
	uint64_t last;

	if (!tls_pushed)
		return;
	tls_pushed--;
	if (atomic_load_explicit(&cupti.status, memory_order_acquire) != AGENT_CUPTI_ON)
		return;
	cupti.api.activity_pop_external_correlation_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

void cupti_after_fork_child(void)
{
	/* CUDA does not survive fork: the child records no GPU activity and
	 * never calls into the parent's CUPTI state. Locks may have been held
	 * by threads that do not exist here. */
	pthread_mutex_init(&cupti.lock, NULL);
	pthread_mutex_init(&cupti.start_lock, NULL);
	cupti.held_count = 0;
	cupti.held_head = 0;
	tls_pushed = 0;
	tls_sync_depth = 0;
	atomic_store(&sync_ids, 0);
	if (atomic_load(&cupti.status) == AGENT_CUPTI_ON || atomic_load(&cupti.status) == AGENT_CUPTI_IDLE)
		atomic_store(&cupti.status, AGENT_CUPTI_FAILED);
}

/* ---- test hooks -------------------------------------------------------- */

void cupti_test_use_api(const struct cupti_api *api)
{
	cupti.test_api = api;
	if (api)
		cupti.api = *api;
	else
		memset(&cupti.api, 0, sizeof(cupti.api));
}

void cupti_test_reset(void)
{
	pthread_mutex_lock(&cupti.lock);
	memset(cupti.map, 0, sizeof(cupti.map));
	cupti.map_stamp = 0;
	cupti.held_count = 0;
	cupti.held_head = 0;
	cupti.hold_ns = CUPTI_HOLD_NS;
	cupti.last_anchor_ns = 0;
	cupti.bad_times = 0;
	pthread_mutex_unlock(&cupti.lock);
	pool_free_all();
	cupti_device_reset();
	cupti.said_busy = 0;
	tls_pushed = 0;
	tls_sync_depth = 0;
	atomic_store(&sync_ids, 0);
	atomic_store(&cupti.status, AGENT_CUPTI_IDLE);
}

void cupti_test_set_hold_ns(uint64_t hold_ns)
{
	pthread_mutex_lock(&cupti.lock);
	cupti.hold_ns = hold_ns;
	pthread_mutex_unlock(&cupti.lock);
}

size_t cupti_test_held(void)
{
	size_t n;

	pthread_mutex_lock(&cupti.lock);
	n = cupti.held_count;
	pthread_mutex_unlock(&cupti.lock);
	return n;
}

void cupti_test_api_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *data)
{
	subscriber_callback(NULL, domain, cbid, data);
}

const CUpti_CallbackId *cupti_test_sync_cbids(size_t *n)
{
	static CUpti_CallbackId ids[SYNC_CBIDS];

	for (size_t i = 0; i < SYNC_CBIDS; i++)
		ids[i] = sync_cbids[i].cbid;
	*n = SYNC_CBIDS;
	return ids;
}
