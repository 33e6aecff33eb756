/* agent_cupti_test: the agent's CUPTI activity handling (agent/cupti.c).
 *
 * No GPU is needed: buffers of REAL CUPTI activity structs from the CUDA 13
 * headers (kernels with NCCL and other names, memcpy, memset, external
 * correlation, kinds the agent does not record) are walked by the real
 * cuptiActivityGetNextRecord of the toolkit's libcupti (it works without a
 * device) and fed to cupti_handle_buffer(), the handler the agent
 * registers. The rest of CUPTI (subscribe, enable, flush, push/pop) is a
 * fake table, so the "another subscriber holds CUPTI" paths can be played.
 * The synchronize callbacks (host waits on the GPU) are played with real
 * CUpti_CallbackData structs and the runtime API's own parameter structs.
 *
 * The agent core is replaced by test doubles defined here: agent_emit
 * copies records into an array, agent_intern keeps a string table. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/agent.h"
#include "agent/cupti.h"
#include "agent/emit.h"
#include "agent/strings.h"
#include "agent/cupti_api.h"
#include "common/record.h"

/* ---- agent core doubles ------------------------------------------------ */

_Atomic int agent_state_now = AGENT_ON;
struct agent_counters agent_counters;

#define MAX_EMITTED 8192
static union {
	struct fss_record_head head;
	uint8_t bytes[FSS_RECORD_MAX_BYTES];
} emitted[MAX_EMITTED];
static size_t n_emitted;

#define MAX_STRINGS 256
static char *strings[MAX_STRINGS];
static size_t n_strings;
static size_t n_intern_calls;

void agent_init(void) {}

void agent_disable(const char *why)
{
	(void)why;
}

uint32_t agent_thread_id(void)
{
	return (uint32_t)gettid();
}

void agent_emit(const void *record)
{
	const struct fss_record_head *h = record;

	assert_true(h->size >= sizeof(*h) && h->size <= FSS_RECORD_MAX_BYTES);
	assert_int_equal(h->source, 0);
	assert_true(n_emitted < MAX_EMITTED);
	memcpy(emitted[n_emitted++].bytes, record, h->size);
}

uint32_t agent_intern(const char *s, long len)
{
	size_t n = len < 0 ? strlen(s) : (size_t)len;

	n_intern_calls++;
	for (size_t i = 0; i < n_strings; i++)
		if (strlen(strings[i]) == n && memcmp(strings[i], s, n) == 0)
			return (uint32_t)(i + 1);
	assert_true(n_strings < MAX_STRINGS);
	strings[n_strings] = strndup(s, n);
	return (uint32_t)++n_strings;
}

void agent_strings_replay(void (*emit)(void *ctx, const void *record), void *ctx)
{
	(void)emit;
	(void)ctx;
}

static const char *string_text(uint32_t id)
{
	return id && id <= n_strings ? strings[id - 1] : NULL;
}

/* The i-th emitted record of a type, or NULL. */
static const void *nth_of_type(uint16_t type, size_t nth)
{
	for (size_t i = 0; i < n_emitted; i++)
		if (emitted[i].head.type == type && nth-- == 0)
			return emitted[i].bytes;
	return NULL;
}

static size_t count_of_type(uint16_t type)
{
	size_t n = 0;

	for (size_t i = 0; i < n_emitted; i++)
		n += emitted[i].head.type == type;
	return n;
}

/* The emitted interval with a correlation id (exactly one expected). */
static const struct fss_rec_gpu_interval *interval_of(uint32_t corr)
{
	const struct fss_rec_gpu_interval *found = NULL;

	for (size_t i = 0; i < n_emitted; i++) {
		const struct fss_rec_gpu_interval *iv = (const void *)emitted[i].bytes;

		if (emitted[i].head.type != FSS_REC_GPU_INTERVAL || iv->correlation_id != corr)
			continue;
		assert_null(found); /* never emitted twice */
		found = iv;
	}
	return found;
}

/* ---- a fake CUPTI, with the real record walker ------------------------- */

static struct cupti_api real_api;
static int have_real;

static struct {
	CUptiResult subscribe_rc;
	const char *holder;		/* written by the fake subscribe_v2 */
	CUpti_ActivityKind refuse_kind; /* activity_enable fails for it ... */
	CUptiResult refuse_rc;		/* ... with this */
	int subscribed, unsubscribed, registered;
	int enabled[64], disabled[64];
	int flushes;
	uint32_t last_flush_flag;
	size_t dropped_to_report;
	int pushes, pops;
	uint64_t last_push;
	CUpti_BuffersCallbackRequestFunc requested;
	CUpti_BuffersCallbackCompleteFunc completed;
	/* cuptiEnableCallback calls, in order */
	struct {
		uint32_t enable;
		CUpti_SubscriberHandle subscriber;
		CUpti_CallbackDomain domain;
		CUpti_CallbackId cbid;
	} callbacks[32];
	int ncallbacks;
	int refuse_callback_at; /* > 0: the n-th enable is refused */
} fake;

static CUptiResult fake_get_version(uint32_t *v)
{
	*v = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

static CUptiResult fake_subscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *u)
{
	fake.subscribed++;
	*s = (CUpti_SubscriberHandle)(uintptr_t)0x5u;
	return fake.subscribe_rc;
}

static CUptiResult fake_subscribe_v2(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *u,
				     CUpti_SubscriberParams *p)
{
	assert_non_null(p);
	assert_int_equal(p->structSize, CUpti_SubscriberParams_STRUCT_SIZE);
	assert_string_equal(p->subscriberName, "fsdpscope");
	if (fake.subscribe_rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && fake.holder && p->oldSubscriberName)
		snprintf(p->oldSubscriberName, p->oldSubscriberSize, "%s", fake.holder);
	return fake_subscribe(s, cb, u);
}

static CUptiResult fake_unsubscribe(CUpti_SubscriberHandle s)
{
	fake.unsubscribed++;
	return CUPTI_SUCCESS;
}

static CUptiResult fake_register(CUpti_BuffersCallbackRequestFunc rq, CUpti_BuffersCallbackCompleteFunc cp)
{
	fake.registered++;
	fake.requested = rq;
	fake.completed = cp;
	return CUPTI_SUCCESS;
}

static CUptiResult fake_enable(CUpti_ActivityKind k)
{
	if (k == fake.refuse_kind && fake.refuse_rc != CUPTI_SUCCESS)
		return fake.refuse_rc;
	fake.enabled[k]++;
	return CUPTI_SUCCESS;
}

static CUptiResult fake_disable(CUpti_ActivityKind k)
{
	fake.disabled[k]++;
	return CUPTI_SUCCESS;
}

static CUptiResult fake_dropped(CUcontext c, uint32_t s, size_t *d)
{
	*d = fake.dropped_to_report;
	fake.dropped_to_report = 0; /* CUPTI resets its count on read */
	return CUPTI_SUCCESS;
}

static CUptiResult fake_flush_all(uint32_t flag)
{
	fake.flushes++;
	fake.last_flush_flag = flag;
	return CUPTI_SUCCESS;
}

static CUptiResult fake_push(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
	assert_int_equal(kind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
	fake.pushes++;
	fake.last_push = id;
	return CUPTI_SUCCESS;
}

static CUptiResult fake_pop(CUpti_ExternalCorrelationKind kind, uint64_t *last)
{
	assert_int_equal(kind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
	fake.pops++;
	*last = fake.last_push;
	return CUPTI_SUCCESS;
}

static CUptiResult fake_enable_callback(uint32_t enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain,
					CUpti_CallbackId cbid)
{
	assert_true(fake.ncallbacks < 32);
	fake.callbacks[fake.ncallbacks].enable = enable;
	fake.callbacks[fake.ncallbacks].subscriber = sub;
	fake.callbacks[fake.ncallbacks].domain = domain;
	fake.callbacks[fake.ncallbacks].cbid = cbid;
	fake.ncallbacks++;
	if (enable && fake.refuse_callback_at > 0 && fake.ncallbacks == fake.refuse_callback_at)
		return CUPTI_ERROR_INVALID_PARAMETER;
	return CUPTI_SUCCESS;
}

#define FAKE_TIMESTAMP 1234567890123ull

static CUptiResult fake_timestamp(uint64_t *t)
{
	*t = FAKE_TIMESTAMP;
	return CUPTI_SUCCESS;
}

static struct cupti_api fake_api;

static void fake_api_init(void)
{
	memset(&fake, 0, sizeof(fake));
	fake.subscribe_rc = CUPTI_SUCCESS;
	fake_api = (struct cupti_api){
	    .get_version = fake_get_version,
	    .subscribe = fake_subscribe,
	    .subscribe_v2 = fake_subscribe_v2,
	    .unsubscribe = fake_unsubscribe,
	    .activity_register_callbacks = fake_register,
	    .activity_enable = fake_enable,
	    .activity_disable = fake_disable,
	    .activity_get_next_record = real_api.activity_get_next_record,
	    .activity_get_num_dropped_records = fake_dropped,
	    .activity_flush_all = fake_flush_all,
	    .activity_flush_period = NULL,
	    .activity_push_external_correlation_id = fake_push,
	    .activity_pop_external_correlation_id = fake_pop,
	    .get_timestamp = fake_timestamp,
	    .enable_callback = fake_enable_callback,
	};
}

static int setup(void **state)
{
	(void)state;
	for (size_t i = 0; i < n_strings; i++)
		free(strings[i]);
	n_strings = 0;
	n_emitted = 0;
	n_intern_calls = 0;
	atomic_store(&agent_state_now, AGENT_ON);
	atomic_store(&agent_counters.cupti_dropped, 0);
	atomic_store(&agent_counters.collectives, 0);
	unsetenv(AGENT_ENV_CUPTI);
	unsetenv(AGENT_ENV_DEBUG);
	cupti_test_reset();
	fake_api_init();
	cupti_test_use_api(&fake_api);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	cupti_test_use_api(NULL);
	cupti_test_reset();
	return 0;
}

#define NEED_REAL_WALKER()                                                                                             \
	do {                                                                                                           \
		if (!have_real) {                                                                                      \
			print_message("libcupti not loadable here: record walk not tested\n");                         \
			skip();                                                                                        \
		}                                                                                                      \
	} while (0)

/* ---- building buffers of real CUPTI records ----------------------------- */

struct buf {
	uint8_t *data;
	size_t used, cap;
};

static void buf_new(struct buf *b, size_t cap)
{
	b->data = aligned_alloc(8, cap);
	assert_non_null(b->data);
	memset(b->data, 0, cap);
	b->used = 0;
	b->cap = cap;
}

static void *buf_add(struct buf *b, size_t size)
{
	void *p;

	assert_true(size % 8 == 0 && b->used + size <= b->cap);
	p = b->data + b->used;
	b->used += size;
	return p;
}

static void add_kernel(struct buf *b, const char *name, uint32_t corr, uint64_t start, uint64_t end)
{
	CUpti_ActivityKernel10 *k = buf_add(b, sizeof(*k));

	k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k->name = name;
	k->correlationId = corr;
	k->start = start;
	k->end = end;
	k->deviceId = 1;
	k->contextId = 2;
	k->streamId = 7;
	k->gridX = k->gridY = k->gridZ = 1;
	k->blockX = 128;
	k->blockY = k->blockZ = 1;
}

static void add_memcpy(struct buf *b, uint32_t corr, uint64_t bytes, uint8_t copy_kind, uint64_t start, uint64_t end)
{
	CUpti_ActivityMemcpy6 *m = buf_add(b, sizeof(*m));

	m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m->correlationId = corr;
	m->bytes = bytes;
	m->copyKind = copy_kind;
	m->start = start;
	m->end = end;
	m->deviceId = 0;
	m->contextId = 1;
	m->streamId = 13;
	m->copyCount = 1;
}

static void add_memset(struct buf *b, uint32_t corr, uint64_t bytes, uint64_t start, uint64_t end)
{
	CUpti_ActivityMemset4 *m = buf_add(b, sizeof(*m));

	m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
	m->correlationId = corr;
	m->bytes = bytes;
	m->start = start;
	m->end = end;
	m->deviceId = 3;
	m->contextId = 4;
	m->streamId = 5;
}

static void add_ext(struct buf *b, CUpti_ExternalCorrelationKind kind, uint32_t corr, uint64_t seq)
{
	CUpti_ActivityExternalCorrelation *e = buf_add(b, sizeof(*e));

	e->kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
	e->externalKind = kind;
	e->correlationId = corr;
	e->externalId = seq;
}

static void add_runtime_api(struct buf *b, uint32_t corr)
{
	CUpti_ActivityAPI *a = buf_add(b, sizeof(*a));

	a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	a->cbid = 211;
	a->start = 10;
	a->end = 20;
	a->correlationId = corr;
}

static void add_device(struct buf *b, uint32_t id, const char *name, uint32_t sms, uint64_t memory, uint32_t major,
		       uint32_t minor)
{
	CUpti_ActivityDevice5 *d = buf_add(b, sizeof(*d));

	d->kind = CUPTI_ACTIVITY_KIND_DEVICE;
	d->id = id;
	d->name = name;
	d->numMultiprocessors = sms;
	d->globalMemorySize = memory;
	d->globalMemoryBandwidth = 4800000000ull;
	d->coreClockRate = 1980000;
	d->computeCapabilityMajor = major;
	d->computeCapabilityMinor = minor;
	d->isCudaVisible = 1;
}

#define NCCL_AG "ncclDevKernel_AllGather_RING_LL"
#define NCCL_RS_MANGLED "_Z33ncclDevKernel_ReduceScatter_RING_LL24ncclDevKernelArgsStorageILm4096EE"
#define GEMM "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"

/* ---- tests: classification --------------------------------------------- */

static void test_nccl_kernel_names(void **state)
{
	(void)state;
	assert_true(cupti_kernel_is_nccl(NCCL_AG));
	assert_true(cupti_kernel_is_nccl("ncclKernel_AllReduce_RING_LL_Sum_float"));
	assert_true(cupti_kernel_is_nccl(NCCL_RS_MANGLED));
	assert_true(cupti_kernel_is_nccl("_Z24ncclKernel_Broadcast_RING_LLv"));
	assert_true(cupti_kernel_is_nccl("_ZN29ncclDevKernel_SendRecv_whatever4implEv"));
	assert_false(cupti_kernel_is_nccl(GEMM));
	assert_false(cupti_kernel_is_nccl("_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_"));
	assert_false(cupti_kernel_is_nccl("my_ncclDevKernel_lookalike"));
	assert_false(cupti_kernel_is_nccl("ncclDevKernel")); /* no underscore: not the prefix */
	assert_false(cupti_kernel_is_nccl("_Z"));
	assert_false(cupti_kernel_is_nccl(""));
	assert_false(cupti_kernel_is_nccl(NULL));
}

/* ---- tests: record handling -------------------------------------------- */

/* One buffer: correlation before and after its records, kinds skipped. */
static void test_one_buffer_classified_and_tied(void **state)
{
	struct buf b;
	const struct fss_rec_gpu_interval *iv;

	(void)state;
	NEED_REAL_WALKER();
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_ON);
	n_emitted = 0;

	buf_new(&b, 4096);
	add_ext(&b, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 10, 5); /* before its kernel */
	add_kernel(&b, NCCL_AG, 10, 1000, 2000);
	add_runtime_api(&b, 10); /* not recorded */
	add_kernel(&b, GEMM, 11, 1500, 2500);
	add_memcpy(&b, 12, 4096, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 3000, 3100);
	add_ext(&b, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 12, 99); /* someone else's id */
	add_memset(&b, 13, 256, 4000, 4010);
	add_ext(&b, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 13, 6); /* after its memset */
	cupti_handle_buffer(b.data, b.used);

	/* NCCL kernel: comm, tied to seq 5, everything carried */
	iv = interval_of(10);
	assert_non_null(iv);
	assert_int_equal(iv->head.size, sizeof(*iv));
	assert_int_equal(iv->kind, FSS_GPU_COMM);
	assert_int_equal(iv->collective_seq, 5);
	assert_int_equal(iv->start_ns, 1000);
	assert_int_equal(iv->end_ns, 2000);
	assert_int_equal(iv->device, 1);
	assert_int_equal(iv->context, 2);
	assert_int_equal(iv->stream, 7);
	assert_int_equal(iv->bytes, 0);
	assert_int_equal(iv->copy_kind, 0);
	assert_string_equal(string_text(iv->name), NCCL_AG);

	/* compute kernel: out at once, no seq */
	iv = interval_of(11);
	assert_non_null(iv);
	assert_int_equal(iv->kind, FSS_GPU_COMPUTE);
	assert_int_equal(iv->collective_seq, 0);
	assert_string_equal(string_text(iv->name), GEMM);

	/* memset whose correlation came later in the same buffer: seq 6 */
	iv = interval_of(13);
	assert_non_null(iv);
	assert_int_equal(iv->kind, FSS_GPU_MEMSET);
	assert_int_equal(iv->collective_seq, 6);
	assert_int_equal(iv->bytes, 256);
	assert_int_equal(iv->name, FSS_STRING_NONE);
	assert_int_equal(iv->device, 3);
	assert_int_equal(iv->stream, 5);

	/* memcpy with only a CUSTOM1 id: held for its CUSTOM0 one */
	assert_null(interval_of(12));
	assert_int_equal(cupti_test_held(), 1);
	assert_int_equal(count_of_type(FSS_REC_GPU_INTERVAL), 3);

	/* a forced flush delivers every correlation: the memcpy has none */
	cupti_flush();
	assert_int_equal(fake.flushes, 1);
	assert_int_equal(fake.last_flush_flag, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	iv = interval_of(12);
	assert_non_null(iv);
	assert_int_equal(iv->kind, FSS_GPU_MEMCPY);
	assert_int_equal(iv->collective_seq, 0);
	assert_int_equal(iv->bytes, 4096);
	assert_int_equal(iv->copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
	assert_int_equal(iv->start_ns, 3000);
	assert_int_equal(iv->end_ns, 3100);
	assert_int_equal(cupti_test_held(), 0);
	assert_int_equal(count_of_type(FSS_REC_GPU_INTERVAL), 4);
	free(b.data);
}

/* CUPTI's device records, as CUDA names the GPUs: one device record per
 * device id (the second record of device 0 adds nothing), none for a record
 * no GPU could have written (0 SMs: a struct of another CUPTI), none while
 * the agent is not recording; and the agent asked for the kind. */
static void test_device_records(void **state)
{
	struct buf b;
	const struct fss_rec_device *d;

	(void)state;
	NEED_REAL_WALKER();
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_ON);
	assert_int_equal(fake.enabled[CUPTI_ACTIVITY_KIND_DEVICE], 1);
	n_emitted = 0;
	buf_new(&b, 8192);
	add_device(&b, 0, "NVIDIA H100 80GB HBM3", 132, 85029158912ull, 9, 0);
	add_device(&b, 1, "NVIDIA H100 PCIe", 114, 85029158912ull, 9, 0);
	add_device(&b, 0, "NVIDIA H100 80GB HBM3", 132, 85029158912ull, 9, 0);
	add_device(&b, 2, "NVIDIA garbage", 0, 1, 9, 0);
	cupti_handle_buffer(b.data, b.used);
	assert_int_equal(count_of_type(FSS_REC_DEVICE), 2);
	d = nth_of_type(FSS_REC_DEVICE, 0);
	assert_int_equal(d->device, 0);
	assert_string_equal(string_text(d->name), "NVIDIA H100 80GB HBM3");
	assert_int_equal(d->sm_count, 132);
	assert_true(d->memory_bytes == 85029158912ull);
	assert_true(d->memory_bandwidth == 4800000000ull);
	assert_int_equal(d->clock_khz, 1980000);
	assert_int_equal(d->compute_major, 9);
	assert_int_equal(d->compute_minor, 0);
	assert_int_equal(d->origin, FSS_DEVICE_CUPTI);
	assert_int_equal(d->head.size, sizeof(*d));
	d = nth_of_type(FSS_REC_DEVICE, 1);
	assert_int_equal(d->device, 1);
	assert_string_equal(string_text(d->name), "NVIDIA H100 PCIe");
	assert_int_equal(d->sm_count, 114);

	/* Not recording: device 3 is not written, and comes out once it is. */
	b.used = 0;
	add_device(&b, 3, "NVIDIA H200", 132, 150754820096ull, 9, 0);
	atomic_store(&agent_state_now, AGENT_DORMANT);
	cupti_handle_buffer(b.data, b.used);
	assert_int_equal(count_of_type(FSS_REC_DEVICE), 2);
	atomic_store(&agent_state_now, AGENT_ON);
	cupti_handle_buffer(b.data, b.used);
	assert_int_equal(count_of_type(FSS_REC_DEVICE), 3);
	d = nth_of_type(FSS_REC_DEVICE, 2);
	assert_string_equal(string_text(d->name), "NVIDIA H200");
	free(b.data);
}

/* Records and their correlation in different buffers, in both orders. */
static void test_across_buffers_both_orders(void **state)
{
	struct buf b1, b2, b3, b4;
	const struct fss_rec_gpu_interval *iv;

	(void)state;
	NEED_REAL_WALKER();
	/* kernel and memcpy first, their correlation in the next buffer */
	buf_new(&b1, 4096);
	add_kernel(&b1, NCCL_RS_MANGLED, 20, 5000, 9000);
	add_memcpy(&b1, 21, 1 << 20, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, 6000, 6500);
	add_kernel(&b1, GEMM, 22, 5000, 5600);
	cupti_handle_buffer(b1.data, b1.used);
	assert_null(interval_of(20));
	assert_null(interval_of(21));
	assert_non_null(interval_of(22));
	assert_int_equal(cupti_test_held(), 2);

	buf_new(&b2, 4096);
	add_ext(&b2, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 21, 8);
	add_ext(&b2, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 20, 7);
	cupti_handle_buffer(b2.data, b2.used);
	assert_int_equal(cupti_test_held(), 0);
	iv = interval_of(20);
	assert_non_null(iv);
	assert_int_equal(iv->kind, FSS_GPU_COMM); /* mangled NCCL name */
	assert_int_equal(iv->collective_seq, 7);
	assert_string_equal(string_text(iv->name), NCCL_RS_MANGLED);
	iv = interval_of(21);
	assert_non_null(iv);
	assert_int_equal(iv->kind, FSS_GPU_MEMCPY); /* a one-rank collective */
	assert_int_equal(iv->collective_seq, 8);
	assert_int_equal(iv->bytes, 1 << 20);
	assert_int_equal(iv->copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD);

	/* correlation first, its kernel in a later buffer: out at once */
	buf_new(&b3, 4096);
	add_ext(&b3, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 30, 9);
	cupti_handle_buffer(b3.data, b3.used);
	assert_int_equal(count_of_type(FSS_REC_GPU_INTERVAL), 3);
	buf_new(&b4, 4096);
	add_kernel(&b4, "ncclKernel_AllReduce_RING_LL_Sum_float", 30, 10000, 12000);
	cupti_handle_buffer(b4.data, b4.used);
	iv = interval_of(30);
	assert_non_null(iv);
	assert_int_equal(iv->kind, FSS_GPU_COMM);
	assert_int_equal(iv->collective_seq, 9);
	assert_int_equal(cupti_test_held(), 0);
	assert_int_equal(count_of_type(FSS_REC_GPU_INTERVAL), 4);
	free(b1.data);
	free(b2.data);
	free(b3.data);
	free(b4.data);
}

/* An NCCL kernel whose correlation never comes goes out after hold_ns. */
static void test_hold_expires(void **state)
{
	struct buf b1, b2;
	struct timespec ms = {0, 1000000};
	const struct fss_rec_gpu_interval *iv;

	(void)state;
	NEED_REAL_WALKER();
	cupti_test_set_hold_ns(1);
	buf_new(&b1, 4096);
	add_kernel(&b1, NCCL_AG, 40, 100, 200);
	cupti_handle_buffer(b1.data, b1.used);
	assert_int_equal(cupti_test_held(), 1); /* held in the same instant */
	assert_null(interval_of(40));
	nanosleep(&ms, NULL); /* CLOCK_MONOTONIC moves on */
	buf_new(&b2, 4096);
	add_kernel(&b2, GEMM, 41, 300, 400);
	cupti_handle_buffer(b2.data, b2.used);
	iv = interval_of(40);
	assert_non_null(iv);
	assert_int_equal(iv->collective_seq, 0);
	assert_int_equal(iv->kind, FSS_GPU_COMM);
	assert_int_equal(cupti_test_held(), 0);
	free(b1.data);
	free(b2.data);
}

/* The held FIFO is bounded: the oldest goes out first, without a seq. */
static void test_held_is_bounded(void **state)
{
	const uint32_t n = 4097; /* one more than cupti.c holds */
	struct buf b, b2;
	const struct fss_rec_gpu_interval *iv;

	(void)state;
	NEED_REAL_WALKER();
	buf_new(&b, n * sizeof(CUpti_ActivityKernel10));
	for (uint32_t i = 0; i < n; i++)
		add_kernel(&b, NCCL_AG, 1000 + i, 10 + i, 20 + i);
	cupti_handle_buffer(b.data, b.used);
	assert_int_equal(cupti_test_held(), n - 1);
	assert_int_equal(count_of_type(FSS_REC_GPU_INTERVAL), 1);
	iv = interval_of(1000);
	assert_non_null(iv);
	assert_int_equal(iv->collective_seq, 0);
	/* the others still get their seq */
	buf_new(&b2, 4096);
	add_ext(&b2, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1000 + n - 1, 77);
	cupti_handle_buffer(b2.data, b2.used);
	iv = interval_of(1000 + n - 1);
	assert_non_null(iv);
	assert_int_equal(iv->collective_seq, 77);
	assert_int_equal(cupti_test_held(), n - 2);
	free(b.data);
	free(b2.data);
}

/* No time stamps (CUPTI lacked device memory): nothing to place. */
static void test_untimed_records_skipped(void **state)
{
	struct buf b;

	(void)state;
	NEED_REAL_WALKER();
	buf_new(&b, 4096);
	add_kernel(&b, GEMM, 50, 0, 0);
	add_memcpy(&b, 51, 8, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 500, 400); /* incomplete */
	add_kernel(&b, GEMM, 52, 700, 800);				  /* timed: out at once */
	add_memset(&b, 53, 8, 0, 0);
	cupti_handle_buffer(b.data, b.used);
	assert_null(interval_of(50));
	assert_null(interval_of(51));
	assert_non_null(interval_of(52));
	assert_int_equal(cupti_test_held(), 0); /* untimed ones are not even held */
	assert_int_equal(count_of_type(FSS_REC_GPU_INTERVAL), 1);
	free(b.data);
}

/* Not recording (dormant): no intervals, but correlations are kept. */
static void test_dormant_keeps_map_only(void **state)
{
	struct buf b1, b2;
	const struct fss_rec_gpu_interval *iv;

	(void)state;
	NEED_REAL_WALKER();
	atomic_store(&agent_state_now, AGENT_DORMANT);
	buf_new(&b1, 4096);
	add_ext(&b1, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 60, 3);
	add_kernel(&b1, NCCL_AG, 61, 1, 2);
	cupti_handle_buffer(b1.data, b1.used);
	assert_int_equal(n_emitted, 0);
	assert_int_equal(n_intern_calls, 0);
	assert_int_equal(cupti_test_held(), 0);
	atomic_store(&agent_state_now, AGENT_ON);
	buf_new(&b2, 4096);
	add_kernel(&b2, NCCL_AG, 60, 10, 20);
	cupti_handle_buffer(b2.data, b2.used);
	iv = interval_of(60);
	assert_non_null(iv);
	assert_int_equal(iv->collective_seq, 3);
	free(b1.data);
	free(b2.data);
}

/* A buffer whose valid part ends mid-record, or is empty. */
static void test_empty_and_short_buffers(void **state)
{
	struct buf b;

	(void)state;
	NEED_REAL_WALKER();
	buf_new(&b, 4096);
	add_kernel(&b, GEMM, 70, 1, 2);
	add_kernel(&b, GEMM, 71, 3, 4);
	cupti_handle_buffer(b.data, 0);
	cupti_handle_buffer(NULL, 100);
	assert_int_equal(n_emitted, 0);
	cupti_handle_buffer(b.data, b.used - 8); /* the second record is cut */
	assert_non_null(interval_of(70));
	assert_null(interval_of(71));
	free(b.data);
}

/* ---- tests: start, subscribers, buffers, correlation push ------------- */

static int stderr_to_file(FILE **f)
{
	int saved = dup(STDERR_FILENO);

	*f = tmpfile();
	assert_non_null(*f);
	fflush(stderr);
	dup2(fileno(*f), STDERR_FILENO);
	return saved;
}

static void stderr_restore(int saved, FILE *f, char *out, size_t cap)
{
	size_t n;

	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(f);
	n = fread(out, 1, cap - 1, f);
	out[n] = 0;
	fclose(f);
}

static size_t strings_containing(const char *needle)
{
	size_t n = 0;

	for (size_t i = 0; i < n_strings; i++)
		n += strstr(strings[i], needle) != NULL;
	return n;
}

static void test_start_busy_at_subscribe(void **state)
{
	FILE *f;
	char err[1024];
	int saved;

	(void)state;
	fake.subscribe_rc = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	fake.holder = "Nsight Systems";
	setenv(AGENT_ENV_DEBUG, "1", 1);
	saved = stderr_to_file(&f);
	cupti_start();
	cupti_start(); /* decided: says nothing more */
	stderr_restore(saved, f, err, sizeof(err));

	assert_int_equal(cupti_status(), AGENT_CUPTI_BUSY);
	assert_int_equal(fake.subscribed, 1);
	assert_int_equal(fake.registered, 0); /* the other tool keeps its buffers */
	assert_int_equal(fake.enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 0);
	assert_int_equal(fake.ncallbacks, 0); /* nor its callbacks: no synchronize is seen */
	/* said once on stderr (DEBUG) and once in the trace, naming the holder */
	assert_non_null(strstr(err, "held by another subscriber (Nsight Systems)"));
	assert_null(strstr(strstr(err, "held by another") + 1, "held by another"));
	assert_int_equal(strings_containing("held by another subscriber (Nsight Systems)"), 1);
	assert_int_equal(count_of_type(FSS_REC_GPU_INTERVAL), 0);

	/* the NCCL wrappers' calls cost nothing and reach no CUPTI */
	cupti_push_correlation(1);
	cupti_pop_correlation();
	cupti_flush();
	assert_int_equal(fake.pushes, 0);
	assert_int_equal(fake.pops, 0);
	assert_int_equal(fake.flushes, 0);
}

static void test_start_busy_quiet_without_debug(void **state)
{
	FILE *f;
	char err[1024];
	int saved;

	(void)state;
	fake.subscribe_rc = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	fake_api.subscribe_v2 = NULL; /* old CUPTI: no holder name */
	cupti_test_use_api(&fake_api);
	saved = stderr_to_file(&f);
	cupti_start();
	stderr_restore(saved, f, err, sizeof(err));
	assert_int_equal(cupti_status(), AGENT_CUPTI_BUSY);
	assert_string_equal(err, "");
	assert_int_equal(strings_containing("held by another subscriber: no GPU intervals"), 1);
}

/* Subscribed, but enabling activity finds the other tool. */
static void test_start_busy_at_enable(void **state)
{
	(void)state;
	fake.refuse_kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	fake.refuse_rc = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_BUSY);
	/* what was enabled before is disabled again; the slot is given back */
	assert_int_equal(fake.enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION], 1);
	assert_int_equal(fake.disabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION], 1);
	assert_int_equal(fake.enabled[CUPTI_ACTIVITY_KIND_MEMCPY], 0);
	assert_int_equal(fake.unsubscribed, 1);
	assert_int_equal(fake.ncallbacks, 0);
	assert_int_equal(strings_containing("held by another subscriber"), 1);
}

static void test_start_fails_without_device(void **state)
{
	(void)state;
	fake.subscribe_rc = CUPTI_ERROR_UNKNOWN; /* what libcupti says on this machine */
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_FAILED);
	assert_int_equal(fake.registered, 0);
	assert_int_equal(strings_containing("held by another"), 0);
}

static void test_disabled_by_env(void **state)
{
	(void)state;
	setenv(AGENT_ENV_CUPTI, "0", 1);
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_DISABLED);
	assert_int_equal(fake.subscribed, 0);
}

/* Without CUDA in the process the real loader is not even tried. */
static void test_idle_without_libcuda(void **state)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	(void)state;
	if (cuda) {
		dlclose(cuda);
		print_message("libcuda is loaded in this test: the IDLE path is not testable\n");
		skip();
	}
	cupti_test_use_api(NULL);
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_IDLE);
	cupti_push_correlation(3);
	cupti_pop_correlation();
	cupti_flush();
}

/* Start, then play CUPTI: request buffers, complete one, drops, flush. */
static void test_on_buffers_drops_and_correlation(void **state)
{
	uint8_t *bufs[17], *again;
	size_t size = 0, max = 99;
	const struct fss_rec_clock_anchor *a;
	const struct fss_rec_gpu_interval *iv;
	struct buf b;

	(void)state;
	NEED_REAL_WALKER();
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_ON);
	assert_int_equal(fake.registered, 1);
	assert_int_equal(fake.enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 1);
	assert_int_equal(fake.enabled[CUPTI_ACTIVITY_KIND_MEMCPY], 1);
	assert_int_equal(fake.enabled[CUPTI_ACTIVITY_KIND_MEMSET], 1);
	assert_int_equal(fake.enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION], 1);
	assert_int_equal(fake.unsubscribed, 0);

	/* a cupti clock anchor at start */
	a = nth_of_type(FSS_REC_CLOCK_ANCHOR, 0);
	assert_non_null(a);
	assert_int_equal(a->domain, FSS_CLOCK_CUPTI);
	assert_int_equal(a->other_ns, FAKE_TIMESTAMP);
	assert_true(a->mono_ns > 0);

	/* the pool: 16 buffers, then none (CUPTI drops and counts) */
	for (int i = 0; i < 17; i++) {
		fake.requested(&bufs[i], &size, &max);
		if (i < 16) {
			assert_non_null(bufs[i]);
			assert_int_equal(size, 2u << 20);
			assert_int_equal(max, 0);
			assert_int_equal((uintptr_t)bufs[i] % 8, 0);
		} else {
			assert_null(bufs[i]);
			assert_int_equal(size, 0);
		}
	}

	/* CUPTI fills one and hands it back */
	buf_new(&b, 4096);
	add_ext(&b, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 80, 42);
	add_kernel(&b, NCCL_AG, 80, 100, 900);
	memcpy(bufs[3], b.data, b.used);
	fake.dropped_to_report = 3;
	fake.completed(NULL, 0, bufs[3], 2u << 20, b.used);
	iv = interval_of(80);
	assert_non_null(iv);
	assert_int_equal(iv->collective_seq, 42);
	assert_int_equal(atomic_load(&agent_counters.cupti_dropped), 3);
	/* ... and the buffer is free again */
	fake.requested(&again, &size, &max);
	assert_ptr_equal(again, bufs[3]);
	for (int i = 0; i < 16; i++)
		fake.completed(NULL, 0, bufs[i], 2u << 20, 0);

	/* push/pop around a wrapped launch; a pop without push stays here */
	cupti_push_correlation(42);
	assert_int_equal(fake.pushes, 1);
	assert_int_equal(fake.last_push, 42);
	cupti_pop_correlation();
	assert_int_equal(fake.pops, 1);
	cupti_pop_correlation();
	assert_int_equal(fake.pops, 1);

	/* flush: forced, an anchor, drops read */
	fake.dropped_to_report = 2;
	cupti_flush();
	assert_int_equal(fake.flushes, 1);
	assert_int_equal(fake.last_flush_flag, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	assert_int_equal(count_of_type(FSS_REC_CLOCK_ANCHOR), 2);
	assert_int_equal(atomic_load(&agent_counters.cupti_dropped), 5);
	free(b.data);
}

/* The buffer pool under contention: a buffer is never out twice. */
#define POOL_THREADS 4
#define POOL_ROUNDS 20000

static _Atomic int pool_owner[16];
static uint8_t *pool_seen[16];
static _Atomic int pool_errors;

static int pool_index(uint8_t *b)
{
	for (int i = 0; i < 16; i++)
		if (pool_seen[i] == b)
			return i;
	return -1;
}

static void *pool_hammer(void *arg)
{
	(void)arg;
	for (int r = 0; r < POOL_ROUNDS; r++) {
		uint8_t *b = NULL;
		size_t size, max;
		int i;

		fake.requested(&b, &size, &max);
		if (!b)
			continue; /* all out right now: CUPTI would drop */
		i = pool_index(b);
		if (i < 0 || atomic_exchange(&pool_owner[i], 1) != 0)
			atomic_fetch_add(&pool_errors, 1);
		b[0] = (uint8_t)r; /* ours while we hold it */
		atomic_store(&pool_owner[i], 0);
		fake.completed(NULL, 0, b, size, 0);
	}
	return NULL;
}

static void test_pool_concurrent(void **state)
{
	pthread_t t[POOL_THREADS];
	size_t size, max;

	(void)state;
	NEED_REAL_WALKER();
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_ON);
	for (int i = 0; i < 16; i++) {
		fake.requested(&pool_seen[i], &size, &max);
		assert_non_null(pool_seen[i]);
		atomic_store(&pool_owner[i], 0);
	}
	for (int i = 0; i < 16; i++)
		fake.completed(NULL, 0, pool_seen[i], size, 0);
	atomic_store(&pool_errors, 0);
	for (int k = 0; k < POOL_THREADS; k++)
		assert_int_equal(pthread_create(&t[k], NULL, pool_hammer, NULL), 0);
	for (int k = 0; k < POOL_THREADS; k++)
		assert_int_equal(pthread_join(t[k], NULL), 0);
	assert_int_equal(atomic_load(&pool_errors), 0);
	/* every buffer came back */
	for (int i = 0; i < 16; i++) {
		uint8_t *b = NULL;

		fake.requested(&b, &size, &max);
		assert_true(pool_index(b) >= 0);
	}
}

/* Buffers completed on two threads at once (CUPTI's thread and a flush),
 * records and correlations split across them in both orders. */
#define FEED_BUFFERS 200

struct feeder {
	int side; /* 0: kernels, 1: correlations */
};

static void *feed(void *arg)
{
	const struct feeder *f = arg;

	for (uint32_t i = 0; i < FEED_BUFFERS; i++) {
		uint8_t data[256] __attribute__((aligned(8)));
		struct buf b = {data, 0, sizeof(data)};
		uint32_t corr = 5000 + i;

		memset(data, 0, sizeof(data));
		if (f->side == 0)
			add_kernel(&b, NCCL_AG, corr, 100 + i, 200 + i);
		else
			add_ext(&b, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, corr, 100000 + i);
		cupti_handle_buffer(b.data, b.used);
	}
	return NULL;
}

static void test_concurrent_buffers(void **state)
{
	pthread_t t[2];
	struct feeder f[2] = {{0}, {1}};

	(void)state;
	NEED_REAL_WALKER();
	cupti_start();
	for (int k = 0; k < 2; k++)
		assert_int_equal(pthread_create(&t[k], NULL, feed, &f[k]), 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(pthread_join(t[k], NULL), 0);
	/* whatever the interleaving, every kernel found its seq */
	assert_int_equal(cupti_test_held(), 0);
	for (uint32_t i = 0; i < FEED_BUFFERS; i++) {
		const struct fss_rec_gpu_interval *iv = interval_of(5000 + i);

		assert_non_null(iv);
		assert_int_equal(iv->collective_seq, 100000 + i);
	}
	assert_int_equal(count_of_type(FSS_REC_GPU_INTERVAL), FEED_BUFFERS);
}

/* ---- host waits: the synchronize callbacks ----------------------------- */

/* A callback as CUPTI makes it for a runtime API function: the real
 * CUpti_CallbackData of cupti_callbacks.h. */
static void play_callback(CUpti_CallbackId cbid, CUpti_ApiCallbackSite site, const void *params, cudaError_t *ret,
			  uint64_t *correlation)
{
	CUpti_CallbackData d;

	memset(&d, 0, sizeof(d));
	d.callbackSite = site;
	d.functionName = "cudaSomething";
	d.functionParams = params;
	d.functionReturnValue = site == CUPTI_API_EXIT ? ret : NULL;
	d.correlationData = correlation;
	d.correlationId = 77;
	cupti_test_api_callback(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &d);
}

/* Started: the four synchronize ids of the runtime domain are enabled on
 * the agent's subscriber, one by one, and nothing else. */
static void test_sync_callbacks_enabled(void **state)
{
	static const CUpti_CallbackId want[] = {
	    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
	    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
	    CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
	    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
	};
	size_t n;
	const CUpti_CallbackId *ids = cupti_test_sync_cbids(&n);

	(void)state;
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_ON);
	assert_int_equal(n, 4);
	assert_int_equal(fake.ncallbacks, 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(ids[i], want[i]);
		assert_int_equal(fake.callbacks[i].enable, 1);
		assert_int_equal(fake.callbacks[i].domain, CUPTI_CB_DOMAIN_RUNTIME_API);
		assert_int_equal(fake.callbacks[i].cbid, want[i]);
		assert_ptr_equal(fake.callbacks[i].subscriber, (CUpti_SubscriberHandle)(uintptr_t)0x5u);
	}
	cupti_start(); /* decided: nothing enabled twice */
	assert_int_equal(fake.ncallbacks, 4);
}

/* One refused: those enabled before are disabled again; GPU activity
 * stays on. */
static void test_sync_callbacks_refused(void **state)
{
	(void)state;
	fake.refuse_callback_at = 3;
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_ON);
	assert_int_equal(fake.ncallbacks, 5); /* 2 enabled, the third refused, 2 disabled */
	assert_int_equal(fake.callbacks[3].enable, 0);
	assert_int_equal(fake.callbacks[3].cbid, fake.callbacks[1].cbid);
	assert_int_equal(fake.callbacks[4].enable, 0);
	assert_int_equal(fake.callbacks[4].cbid, fake.callbacks[0].cbid);
	assert_int_equal(fake.enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 1);
}

static const struct fss_rec_enter *enter_of(size_t nth)
{
	return nth_of_type(FSS_REC_ENTER, nth);
}

static const struct fss_rec_sync_exit *sync_exit_of(size_t nth)
{
	return nth_of_type(FSS_REC_SYNC_EXIT, nth);
}

/* Each synchronize: an enter at API_ENTER (its handle, the last collective
 * issued, a new sync_id), a sync_exit at API_EXIT (the same sync_id, enter
 * time and seq, the cudaError_t returned). */
static void test_sync_records(void **state)
{
	cudaStreamSynchronize_v3020_params sp = {.stream = (cudaStream_t)(uintptr_t)0x1234};
	cudaStreamSynchronize_ptsz_v7000_params pp = {.stream = (cudaStream_t)(uintptr_t)0x5678};
	cudaEventSynchronize_v3020_params ep = {.event = (cudaEvent_t)(uintptr_t)0x9abc};
	cudaError_t ok = cudaSuccess, failed = cudaErrorLaunchFailure;
	uint64_t corr[4] = {0};
	static const struct {
		CUpti_CallbackId cbid;
		uint16_t kind;
		uint64_t handle;
	} calls[] = {
	    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, FSS_ENTER_STREAM_SYNC, 0x1234},
	    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000, FSS_ENTER_STREAM_SYNC, 0x5678},
	    {CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, FSS_ENTER_EVENT_SYNC, 0x9abc},
	    {CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, FSS_ENTER_DEVICE_SYNC, 0},
	};
	const void *params[] = {&sp, &pp, &ep, NULL};

	(void)state;
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_ON);
	n_emitted = 0; /* the start's clock anchor */
	for (size_t i = 0; i < 4; i++) {
		atomic_store(&agent_counters.collectives, 10 * (i + 1)); /* collectives issued before it */
		play_callback(calls[i].cbid, CUPTI_API_ENTER, params[i], NULL, &corr[i]);
		assert_int_equal(count_of_type(FSS_REC_ENTER), i + 1);
		assert_int_equal(count_of_type(FSS_REC_SYNC_EXIT), i);
		atomic_fetch_add(&agent_counters.collectives, 3); /* other threads go on issuing */
		play_callback(calls[i].cbid, CUPTI_API_EXIT, params[i], i == 2 ? &failed : &ok, &corr[i]);
		assert_int_equal(count_of_type(FSS_REC_SYNC_EXIT), i + 1);
	}
	assert_int_equal(n_emitted, 8);
	for (size_t i = 0; i < 4; i++) {
		const struct fss_rec_enter *e = enter_of(i);
		const struct fss_rec_sync_exit *x = sync_exit_of(i);

		assert_non_null(e);
		assert_non_null(x);
		assert_ptr_equal((const void *)emitted[2 * i].bytes, (const void *)e); /* enter, then its exit */
		assert_int_equal(e->head.size, sizeof(*e));
		assert_int_equal(e->kind, calls[i].kind);
		assert_int_equal(e->stream, calls[i].handle);
		assert_int_equal(e->seq, 10 * (i + 1));
		assert_int_equal(e->sync_id, i + 1);
		assert_int_equal(corr[i], i + 1); /* handed to the exit through CUPTI */
		assert_int_equal(e->comm, 0);
		assert_int_equal(e->count, 0);
		assert_int_equal(e->peer, -1);
		assert_int_equal(e->group_id, 0);
		assert_int_equal(e->op, 0);
		assert_int_equal(e->dtype, FSS_DTYPE_UNKNOWN);
		assert_int_equal(e->redop, FSS_REDOP_NONE);
		assert_int_equal(e->path, FSS_PATH_INTERPOSE);
		assert_int_equal(e->thread, (uint32_t)gettid());
		assert_true(e->enter_ns > 0);
		assert_int_equal(x->head.size, sizeof(*x));
		assert_int_equal(x->sync_id, e->sync_id);
		assert_int_equal(x->kind, e->kind);
		assert_int_equal(x->enter_ns, e->enter_ns);
		assert_true(x->exit_ns >= x->enter_ns);
		assert_int_equal(x->after_seq, e->seq);
		assert_int_equal(x->thread, e->thread);
		assert_int_equal(x->result, i == 2 ? cudaErrorLaunchFailure : cudaSuccess);
		assert_int_equal(x->reserved, 0);
	}
}

/* Two waits open on one thread (the second's exit first) pair by
 * sync_id; an exit without a recorded enter writes nothing. */
static void test_sync_pairs_by_id(void **state)
{
	cudaStreamSynchronize_v3020_params sp = {.stream = (cudaStream_t)(uintptr_t)0x1};
	cudaError_t ok = cudaSuccess;
	uint64_t a = 0, b = 0, stranger = 999;

	(void)state;
	cupti_start();
	n_emitted = 0;
	play_callback(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_API_ENTER, &sp, NULL, &a);
	play_callback(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, CUPTI_API_ENTER, NULL, NULL, &b);
	play_callback(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, CUPTI_API_EXIT, NULL, &ok, &b);
	play_callback(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_API_EXIT, &sp, &ok, &a);
	play_callback(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_API_EXIT, &sp, &ok, &stranger);
	assert_int_equal(count_of_type(FSS_REC_ENTER), 2);
	assert_int_equal(count_of_type(FSS_REC_SYNC_EXIT), 2);
	assert_int_equal(a, 1);
	assert_int_equal(b, 2);
	assert_int_equal(sync_exit_of(0)->sync_id, 2);
	assert_int_equal(sync_exit_of(0)->kind, FSS_ENTER_DEVICE_SYNC);
	assert_int_equal(sync_exit_of(0)->enter_ns, enter_of(1)->enter_ns);
	assert_int_equal(sync_exit_of(1)->sync_id, 1);
	assert_int_equal(sync_exit_of(1)->kind, FSS_ENTER_STREAM_SYNC);
	assert_int_equal(sync_exit_of(1)->enter_ns, enter_of(0)->enter_ns);
}

/* Dormant: nothing; an enter recorded while ON keeps its exit when the
 * state changes in between; ids the agent did not enable, another domain,
 * or CUPTI not on (a fork child): nothing. */
static void test_sync_only_when_recording(void **state)
{
	cudaStreamSynchronize_v3020_params sp = {.stream = (cudaStream_t)(uintptr_t)0x1};
	cudaError_t ok = cudaSuccess;
	uint64_t c = 0;
	CUpti_CallbackData d;

	(void)state;
	cupti_start();
	n_emitted = 0;
	atomic_store(&agent_state_now, AGENT_DORMANT);
	play_callback(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_API_ENTER, &sp, NULL, &c);
	play_callback(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_API_EXIT, &sp, &ok, &c);
	assert_int_equal(n_emitted, 0);

	atomic_store(&agent_state_now, AGENT_ON);
	play_callback(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_API_ENTER, &sp, NULL, &c);
	atomic_store(&agent_state_now, AGENT_DORMANT);
	play_callback(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_API_EXIT, &sp, &ok, &c);
	assert_int_equal(count_of_type(FSS_REC_ENTER), 1);
	assert_int_equal(count_of_type(FSS_REC_SYNC_EXIT), 1);
	assert_int_equal(enter_of(0)->sync_id, 1); /* the dormant one drew no id */
	atomic_store(&agent_state_now, AGENT_ON);

	n_emitted = 0;
	play_callback(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_API_ENTER, NULL, NULL, &c);
	play_callback(CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020, CUPTI_API_ENTER, &sp, NULL, &c);
	memset(&d, 0, sizeof(d));
	d.callbackSite = CUPTI_API_ENTER;
	d.correlationData = &c;
	cupti_test_api_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, &d);
	cupti_test_api_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
				NULL);
	assert_int_equal(n_emitted, 0);

	cupti_after_fork_child();
	play_callback(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_API_ENTER, &sp, NULL, &c);
	assert_int_equal(n_emitted, 0);
}

/* Without cuptiEnableCallback (an older CUPTI's table): GPU activity, no
 * synchronizes. */
static void test_sync_without_enable_callback(void **state)
{
	(void)state;
	fake_api.enable_callback = NULL;
	cupti_test_use_api(&fake_api);
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_ON);
	assert_int_equal(fake.ncallbacks, 0);
}

/* A forked child never calls into the parent's CUPTI. */
static void test_fork_child_stops(void **state)
{
	(void)state;
	cupti_start();
	assert_int_equal(cupti_status(), AGENT_CUPTI_ON);
	cupti_push_correlation(5);
	assert_int_equal(fake.pushes, 1);
	cupti_after_fork_child();
	assert_int_equal(cupti_status(), AGENT_CUPTI_FAILED);
	cupti_pop_correlation(); /* the push was the parent's */
	cupti_push_correlation(6);
	cupti_flush();
	assert_int_equal(fake.pushes, 1);
	assert_int_equal(fake.pops, 0);
	assert_int_equal(fake.flushes, 0);
}

/* The real loader finds every required symbol in the toolkit's libcupti. */
static void test_real_library_loads(void **state)
{
	(void)state;
	NEED_REAL_WALKER();
	assert_non_null(real_api.subscribe);
	assert_non_null(real_api.activity_register_callbacks);
	assert_non_null(real_api.activity_push_external_correlation_id);
	assert_non_null(real_api.get_timestamp);
	assert_non_null(real_api.enable_callback); /* synchronizes are seen with the real library */
}

int main(void)
{
	void *handle = NULL;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_nccl_kernel_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_one_buffer_classified_and_tied, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_across_buffers_both_orders, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_device_records, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hold_expires, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_held_is_bounded, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_untimed_records_skipped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dormant_keeps_map_only, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_empty_and_short_buffers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_busy_at_subscribe, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_busy_quiet_without_debug, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_busy_at_enable, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_fails_without_device, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_disabled_by_env, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_without_libcuda, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_on_buffers_drops_and_correlation, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pool_concurrent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_buffers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork_child_stops, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_real_library_loads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sync_callbacks_enabled, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sync_callbacks_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sync_records, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sync_pairs_by_id, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sync_only_when_recording, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sync_without_enable_callback, setup, teardown),
	};

	have_real = cupti_api_load(&real_api, &handle) == 0;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
