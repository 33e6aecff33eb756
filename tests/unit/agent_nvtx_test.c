/* agent_nvtx_test: NVTX injection (agent/nvtx.c), through the real NVTX3
 * loader.
 *
 * This file is built twice (tests/unit/agent_gpu.cmake):
 *  - with AGENT_NVTX_TEST_DOUBLE: test doubles of the agent core (emit into
 *    an array, a lock-free intern table, state) linked with agent/nvtx.c
 *    into a shared library, the injection library;
 *  - without: the test program. It uses the NVTX3 C API the ordinary way
 *    (#include <nvtx3/nvToolsExt.h>, nothing linked for NVTX), sets
 *    NVTX_INJECTION64_PATH to the library above before its first NVTX call,
 *    and reads what the library recorded through its nvtx_double_* calls
 *    (the program links the library, so NVTX's dlopen of the same file
 *    returns the same instance).
 *  With AGENT_NVTX_REAL_AGENT set to the real libfsdpscope-agent.so, the
 *  test also checks that it exports the entry point.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/emit.h"
#include "agent/nccl_wrap.h"
#include "agent/strings.h"
#include "common/record.h"

#ifdef AGENT_NVTX_TEST_DOUBLE

/* ======================= the agent core, doubled ======================== */

#include <unistd.h>

#define DOUBLE_EXPORT __attribute__((visibility("default")))
#define DOUBLE_RECORDS 65536u
#define DOUBLE_SLOTS 8192u /* intern table, power of two */

_Atomic int agent_state_now = AGENT_ON;
struct agent_counters agent_counters;

static struct fss_rec_nvtx_range records[DOUBLE_RECORDS];
static _Atomic uint32_t records_used;
static _Atomic uint64_t records_lost;
static _Atomic uint64_t other_records;
/* collective records (NCCL's ranges, path nvtx) */
static struct fss_rec_collective colls[1024];
static _Atomic uint32_t colls_used;
/* the thread is "inside an interposed NCCL call" (nccl_wrap.c's flag) */
static __thread int inside_nccl;

struct slot {
	_Atomic uint64_t hash; /* 0: free, 1: being filled */
	_Atomic uint32_t id;
	char text[120];
};
static struct slot slots[DOUBLE_SLOTS];
static _Atomic uint32_t next_id = 1;
static _Atomic uint32_t id_slot[DOUBLE_SLOTS + 1]; /* id -> slot index + 1 */

static _Atomic int activations;

void agent_init(void) {}

void agent_activate(void)
{
	atomic_fetch_add(&activations, 1);
}

void agent_disable(const char *why)
{
	(void)why;
}

uint32_t agent_thread_id(void)
{
	static __thread uint32_t tid;

	if (!tid)
		tid = (uint32_t)gettid();
	return tid;
}

/* Lock-free like the real one: a fetch_add for the slot. */
void agent_emit(const void *record)
{
	const struct fss_record_head *h = record;
	uint32_t i;

	if (h->type == FSS_REC_COLLECTIVE) {
		i = atomic_fetch_add(&colls_used, 1);
		if (i < sizeof(colls) / sizeof(colls[0]))
			memcpy(&colls[i], record, sizeof(colls[i]));
		return;
	}
	if (h->type != FSS_REC_NVTX_RANGE) {
		atomic_fetch_add(&other_records, 1);
		return;
	}
	i = atomic_fetch_add_explicit(&records_used, 1, memory_order_relaxed);
	if (i >= DOUBLE_RECORDS) {
		atomic_fetch_add_explicit(&records_lost, 1, memory_order_relaxed);
		return;
	}
	memcpy(&records[i], record, sizeof(records[i]));
}

/* Lock-free open addressing on an FNV-1a hash, as agent/strings.c does. */
uint32_t agent_intern(const char *s, long len)
{
	size_t n = len < 0 ? strlen(s) : (size_t)len;
	uint64_t h = record_hash_bytes(s, n) | 2; /* never 0 or 1 */

	if (n >= sizeof(slots[0].text))
		n = sizeof(slots[0].text) - 1;
	for (uint32_t p = 0; p < DOUBLE_SLOTS; p++) {
		struct slot *sl = &slots[(h + p) & (DOUBLE_SLOTS - 1)];
		uint64_t cur = atomic_load_explicit(&sl->hash, memory_order_acquire);
		uint32_t id;

		if (cur == 0) {
			uint64_t expect = 0;

			if (atomic_compare_exchange_strong(&sl->hash, &expect, 1)) {
				memcpy(sl->text, s, n);
				sl->text[n] = 0;
				id = atomic_fetch_add(&next_id, 1);
				if (id <= DOUBLE_SLOTS)
					atomic_store(&id_slot[id], (uint32_t)(sl - slots) + 1);
				atomic_store_explicit(&sl->id, id, memory_order_release);
				atomic_store_explicit(&sl->hash, h, memory_order_release);
				return id;
			}
			cur = expect;
		}
		while (cur == 1) /* another thread is filling it in */
			cur = atomic_load_explicit(&sl->hash, memory_order_acquire);
		if (cur == h && strncmp(sl->text, s, n) == 0 && sl->text[n] == 0)
			return atomic_load_explicit(&sl->id, memory_order_acquire);
	}
	return FSS_STRING_NONE;
}

int agent_in_nccl_call(void)
{
	return inside_nccl;
}

void agent_strings_replay(void (*emit)(void *ctx, const void *record), void *ctx)
{
	(void)emit;
	(void)ctx;
}

DOUBLE_EXPORT size_t nvtx_double_count(void)
{
	uint32_t n = atomic_load(&records_used);

	return n < DOUBLE_RECORDS ? n : DOUBLE_RECORDS;
}

DOUBLE_EXPORT const struct fss_rec_nvtx_range *nvtx_double_get(size_t i)
{
	return &records[i];
}

DOUBLE_EXPORT const char *nvtx_double_string(uint32_t id)
{
	uint32_t s = id && id <= DOUBLE_SLOTS ? atomic_load(&id_slot[id]) : 0;

	return s ? slots[s - 1].text : NULL;
}

DOUBLE_EXPORT void nvtx_double_clear(void)
{
	atomic_store(&records_used, 0);
	atomic_store(&records_lost, 0);
	atomic_store(&colls_used, 0);
}

DOUBLE_EXPORT size_t nvtx_double_coll_count(void)
{
	uint32_t n = atomic_load(&colls_used);

	return n < sizeof(colls) / sizeof(colls[0]) ? n : sizeof(colls) / sizeof(colls[0]);
}

DOUBLE_EXPORT const struct fss_rec_collective *nvtx_double_coll_get(size_t i)
{
	return &colls[i];
}

DOUBLE_EXPORT void nvtx_double_set_inside(int inside)
{
	inside_nccl = inside;
}

DOUBLE_EXPORT void nvtx_double_set_state(int state)
{
	atomic_store(&agent_state_now, state);
}

DOUBLE_EXPORT uint64_t nvtx_double_dropped(void)
{
	return atomic_load(&agent_counters.nvtx_dropped); /* counted by agent/nvtx.c */
}

DOUBLE_EXPORT int nvtx_double_activations(void)
{
	return atomic_load(&activations);
}

DOUBLE_EXPORT uint64_t nvtx_double_other_records(void)
{
	return atomic_load(&other_records);
}

#else /* the test program */

/* ============================ the test program ========================== */

#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include <cmocka.h>
#include <nvtx3/nvToolsExt.h>

#ifndef AGENT_NVTX_DOUBLE_PATH
#error "AGENT_NVTX_DOUBLE_PATH: the injection double library (tests/unit/agent_gpu.cmake)"
#endif

size_t nvtx_double_count(void);
const struct fss_rec_nvtx_range *nvtx_double_get(size_t i);
const char *nvtx_double_string(uint32_t id);
void nvtx_double_clear(void);
void nvtx_double_set_state(int state);
uint64_t nvtx_double_other_records(void);
uint64_t nvtx_double_dropped(void);
int nvtx_double_activations(void);
size_t nvtx_double_coll_count(void);
const struct fss_rec_collective *nvtx_double_coll_get(size_t i);
void nvtx_double_set_inside(int inside);

static int setup(void **state)
{
	(void)state;
	nvtx_double_set_state(AGENT_ON);
	nvtx_double_clear();
	return 0;
}

static const char *name_of(const struct fss_rec_nvtx_range *r)
{
	const char *s = nvtx_double_string(r->name);

	return s ? s : "";
}

/* The records named `name`, in emission order. */
static size_t find_all(const char *name, const struct fss_rec_nvtx_range **out, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < nvtx_double_count(); i++) {
		const struct fss_rec_nvtx_range *r = nvtx_double_get(i);

		if (strcmp(name_of(r), name) == 0) {
			if (n < cap)
				out[n] = r;
			n++;
		}
	}
	return n;
}

static const struct fss_rec_nvtx_range *find_one(const char *name)
{
	const struct fss_rec_nvtx_range *r = NULL;

	assert_int_equal(find_all(name, &r, 1), 1);
	return r;
}

static void assert_well_formed(const struct fss_rec_nvtx_range *r)
{
	assert_int_equal(r->head.type, FSS_REC_NVTX_RANGE);
	assert_int_equal(r->head.size, sizeof(*r));
	assert_int_equal(r->head.source, 0);
	assert_true(r->start_ns > 0);
	assert_true(r->start_ns <= r->end_ns);
}

/* ---- push / pop -------------------------------------------------------- */

static void test_push_pop_nested(void **state)
{
	const struct fss_rec_nvtx_range *outer, *inner;
	uint32_t me = (uint32_t)gettid();

	(void)state;
	assert_int_equal(nvtxRangePushA("outer"), 0);
	assert_int_equal(nvtxRangePushA("inner"), 1);
	nvtxMarkA("a mark: not recorded");
	assert_int_equal(nvtxRangePop(), 1);
	assert_int_equal(nvtxRangePop(), 0);
	assert_int_equal(nvtxRangePop(), -1); /* nothing open */

	assert_int_equal(nvtx_double_count(), 2);
	inner = nvtx_double_get(0); /* closed first */
	outer = nvtx_double_get(1);
	assert_string_equal(name_of(inner), "inner");
	assert_string_equal(name_of(outer), "outer");
	assert_well_formed(inner);
	assert_well_formed(outer);
	assert_int_equal(outer->depth, 0);
	assert_int_equal(inner->depth, 1);
	assert_true(outer->start_ns <= inner->start_ns && inner->end_ns <= outer->end_ns);
	assert_int_equal(inner->kind, FSS_NVTX_PUSH_POP);
	assert_int_equal(inner->range_id, 0);
	assert_int_equal(inner->domain, 0);
	assert_int_equal(inner->thread, me);
	assert_int_equal(inner->end_thread, me);
	assert_int_equal(inner->category, 0);
}

static void test_push_variants(void **state)
{
	nvtxEventAttributes_t a = {0};
	const struct fss_rec_nvtx_range *r;

	(void)state;
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.category = 17;
	a.colorType = NVTX_COLOR_ARGB;
	a.color = 0xff00ff00;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "ex ascii";
	nvtxRangePushEx(&a);
	nvtxRangePushW(L"wide \u00e9\u2713");
	a.messageType = NVTX_MESSAGE_TYPE_UNICODE;
	a.message.unicode = L"ex wide";
	nvtxRangePushEx(&a);
	nvtxRangePop();
	nvtxRangePop();
	nvtxRangePop();

	r = find_one("ex ascii");
	assert_int_equal(r->category, 17);
	assert_int_equal(r->depth, 0);
	r = find_one("wide \xc3\xa9\xe2\x9c\x93"); /* UTF-8 */
	assert_int_equal(r->depth, 1);
	assert_int_equal(r->category, 0);
	r = find_one("ex wide");
	assert_int_equal(r->depth, 2);
	assert_int_equal(r->category, 17);
}

/* Deeper than the per-thread stack: counted, the rest still balanced. */
static void test_push_overflow(void **state)
{
	char name[32];
	uint64_t dropped_before = nvtx_double_dropped();

	(void)state;
	for (int i = 0; i < 70; i++) {
		snprintf(name, sizeof(name), "deep %d", i);
		assert_int_equal(nvtxRangePushA(name), i);
	}
	for (int i = 69; i >= 0; i--)
		assert_int_equal(nvtxRangePop(), i);
	assert_int_equal(nvtxRangePop(), -1);
	assert_int_equal(nvtx_double_dropped() - dropped_before, 6);
	assert_int_equal(nvtx_double_count(), 64);
	for (int i = 0; i < 64; i++) {
		const struct fss_rec_nvtx_range *r;

		snprintf(name, sizeof(name), "deep %d", i);
		r = find_one(name);
		assert_int_equal(r->depth, i);
	}
}

/* ---- start / end ------------------------------------------------------- */

struct ender {
	nvtxRangeId_t id;
	uint32_t tid;
};

static void *end_on_other_thread(void *arg)
{
	struct ender *e = arg;

	e->tid = (uint32_t)gettid();
	nvtxRangeEnd(e->id);
	return NULL;
}

static void test_start_end_across_threads(void **state)
{
	struct ender e;
	pthread_t t;
	nvtxEventAttributes_t a = {0};
	nvtxRangeId_t w, x;
	const struct fss_rec_nvtx_range *r;

	(void)state;
	e.id = nvtxRangeStartA("crossing");
	assert_true(e.id != 0);
	assert_int_equal(pthread_create(&t, NULL, end_on_other_thread, &e), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	r = find_one("crossing");
	assert_well_formed(r);
	assert_int_equal(r->kind, FSS_NVTX_START_END);
	assert_int_equal(r->range_id, e.id);
	assert_int_equal(r->thread, (uint32_t)gettid());
	assert_int_equal(r->end_thread, e.tid);
	assert_true(r->thread != r->end_thread);
	assert_int_equal(r->depth, 0);

	/* overlapping, ended out of order; W and Ex variants */
	w = nvtxRangeStartW(L"start wide");
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.category = 3;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "start ex";
	x = nvtxRangeStartEx(&a);
	assert_true(w != x && w != e.id);
	nvtxRangeEnd(w);
	nvtxRangeEnd(w);	  /* twice: recorded once */
	nvtxRangeEnd(x + 100000); /* never started: nothing */
	nvtxRangeEnd(x);
	r = find_one("start wide");
	assert_int_equal(r->range_id, w);
	r = find_one("start ex");
	assert_int_equal(r->range_id, x);
	assert_int_equal(r->category, 3);
	assert_int_equal(nvtx_double_count(), 3);
}

/* ---- domains, registered strings, NCCL's ranges ------------------------- */

static void test_domains_and_registered_strings(void **state)
{
	nvtxDomainHandle_t d = nvtxDomainCreateA("fsdp_ref");
	nvtxDomainHandle_t d2 = nvtxDomainCreateA("fsdp_ref");
	nvtxDomainHandle_t dw = nvtxDomainCreateW(L"wide domain");
	nvtxStringHandle_t step = nvtxDomainRegisterStringA(d, "step 1");
	nvtxStringHandle_t fwd = nvtxDomainRegisterStringW(dw, L"forward blocks.0");
	nvtxEventAttributes_t a = {0};
	const struct fss_rec_nvtx_range *r;
	nvtxRangeId_t id;
	uint32_t fsdp_domain;

	(void)state;
	assert_non_null(d);
	assert_ptr_equal(d, d2); /* one handle per name */
	assert_non_null(step);
	assert_non_null(fwd);
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	a.message.registered = step;
	assert_int_equal(nvtxDomainRangePushEx(d, &a), 0);
	a.message.registered = fwd;
	assert_int_equal(nvtxDomainRangePushEx(dw, &a), 0); /* its own domain's depth */
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "in default";
	nvtxRangePushEx(&a);
	/* pops are per domain: this closes "step 1", not the newer ranges */
	assert_int_equal(nvtxDomainRangePop(d), 0);
	assert_int_equal(nvtxDomainRangePop(d), -1);
	assert_int_equal(nvtxRangePop(), 0);
	assert_int_equal(nvtxDomainRangePop(dw), 0);

	r = find_one("step 1");
	assert_well_formed(r);
	fsdp_domain = r->domain;
	assert_string_equal(nvtx_double_string(fsdp_domain), "fsdp_ref");
	assert_int_equal(r->depth, 0);
	r = find_one("forward blocks.0");
	assert_string_equal(nvtx_double_string(r->domain), "wide domain");
	assert_int_equal(r->depth, 0);
	r = find_one("in default");
	assert_int_equal(r->domain, 0);
	assert_int_equal(r->depth, 0);
	assert_true(nvtx_double_get(0) == find_one("step 1"));

	/* start/end in a domain */
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	a.message.registered = step;
	id = nvtxDomainRangeStartEx(d, &a);
	nvtxDomainRangeEnd(d, id);
	nvtxDomainDestroy(d); /* handles stay usable */
	assert_int_equal(find_all("step 1", NULL, 0), 2);
	r = nvtx_double_get(nvtx_double_count() - 1);
	assert_int_equal(r->kind, FSS_NVTX_START_END);
	assert_int_equal(r->domain, fsdp_domain);
	assert_int_equal(r->range_id, id);
}

/* What NCCL >= 2.21 does around each API call: a range in domain "NCCL",
 * named after the function, parameters in a payload. Recorded as is. */
static void test_nccl_style_ranges(void **state)
{
	int activations_before = nvtx_double_activations();
	nvtxDomainHandle_t other = nvtxDomainCreateA("NCCL-lookalike");
	nvtxDomainHandle_t nccl = NULL;
	nvtxStringHandle_t ag;
	nvtxEventAttributes_t a = {0};
	const struct fss_rec_nvtx_range *r;

	(void)state;
	/* only NCCL's own domain activates the agent (statically linked NCCL) */
	assert_non_null(other);
	assert_int_equal(nvtx_double_activations(), activations_before);
	nccl = nvtxDomainCreateA("NCCL");
	assert_int_equal(nvtx_double_activations(), activations_before + 1);

	ag = nvtxDomainRegisterStringA(nccl, "ncclAllGather");
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
	a.payload.ullValue = 1 << 20;
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	a.message.registered = ag;
	nvtxRangePushA("step 7");
	nvtxDomainRangePushEx(nccl, &a);
	nvtxDomainRangePop(nccl);
	nvtxRangePop();
	r = find_one("ncclAllGather");
	assert_string_equal(nvtx_double_string(r->domain), "NCCL");
	assert_int_equal(r->kind, FSS_NVTX_PUSH_POP);
	assert_int_equal(r->depth, 0);
	assert_int_equal(nvtx_double_other_records(), 0); /* nothing but ranges ... */
	/* ... and the collective NCCL's range stands for (next test) */
	assert_int_equal(nvtx_double_coll_count(), 1);
	assert_int_equal(nvtx_double_coll_get(0)->op, FSS_OP_ALLGATHER);
}

/* A statically linked NCCL: nothing is interposed, NCCL's own ranges
 * (domain "NCCL", registered strings named with __func__, push/pop) are
 * the only sign of its calls. Each closed one is a collective, path nvtx. */
static void nccl_range(nvtxDomainHandle_t nccl, nvtxStringHandle_t name)
{
	nvtxEventAttributes_t a = {0};

	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	a.message.registered = name;
	nvtxDomainRangePushEx(nccl, &a);
	nvtxDomainRangePop(nccl);
}

static void test_nccl_ranges_are_collectives(void **state)
{
	nvtxDomainHandle_t nccl = nvtxDomainCreateA("NCCL");
	nvtxStringHandle_t ag = nvtxDomainRegisterStringA(nccl, "ncclAllGather");
	nvtxStringHandle_t rs = nvtxDomainRegisterStringA(nccl, "ncclReduceScatter");
	nvtxStringHandle_t init = nvtxDomainRegisterStringA(nccl, "ncclCommInitRank");
	nvtxDomainHandle_t other = nvtxDomainCreateA("not NCCL");
	nvtxStringHandle_t other_ag = nvtxDomainRegisterStringA(other, "ncclAllGather");
	const uint8_t want[4] = {FSS_OP_ALLGATHER, FSS_OP_ALLGATHER, FSS_OP_ALLGATHER, FSS_OP_REDUCESCATTER};
	const struct fss_rec_nvtx_range *ranges[4];
	nvtxEventAttributes_t a = {0};

	(void)state;
	nccl_range(nccl, init); /* not a collective */
	for (int i = 0; i < 3; i++)
		nccl_range(nccl, ag);
	nccl_range(other, other_ag); /* the name alone is not enough */
	nccl_range(nccl, rs);
	nvtxRangePushA("ncclAllGather"); /* nor in the default domain */
	nvtxRangePop();

	assert_int_equal(nvtx_double_coll_count(), 4);
	assert_int_equal(find_all("ncclAllGather", ranges, 3), 5); /* the ranges are still recorded */
	assert_int_equal(find_all("ncclReduceScatter", &ranges[3], 1), 1);
	for (size_t i = 0; i < 4; i++) {
		const struct fss_rec_collective *c = nvtx_double_coll_get(i);

		assert_int_equal(c->head.type, FSS_REC_COLLECTIVE);
		assert_int_equal(c->head.size, sizeof(*c));
		assert_int_equal(c->path, FSS_PATH_NVTX);
		assert_int_equal(c->op, want[i]);
		assert_true(c->seq > 0);
		if (i > 0)
			assert_true(c->seq > nvtx_double_coll_get(i - 1)->seq);
		/* the same clock reads as the range's */
		assert_int_equal(c->enter_ns, ranges[i]->start_ns);
		assert_int_equal(c->exit_ns, ranges[i]->end_ns);
		assert_int_equal(c->thread, ranges[i]->thread);
		/* what NCCL's payload would say is unknown */
		assert_int_equal(c->bytes, 0);
		assert_int_equal(c->count, 0);
		assert_int_equal(c->comm, 0);
		assert_int_equal(c->stream, 0);
		assert_int_equal(c->dtype, FSS_DTYPE_UNKNOWN);
		assert_int_equal(c->redop, FSS_REDOP_NONE);
		assert_int_equal(c->peer, -1);
		assert_string_equal(record_path_name(c->path), "nvtx");
	}

	/* start/end ranges and ASCII messages are read too */
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "ncclSend";
	nvtxDomainRangeEnd(nccl, nvtxDomainRangeStartEx(nccl, &a));
	assert_int_equal(nvtx_double_coll_count(), 5);
	assert_int_equal(nvtx_double_coll_get(4)->op, FSS_OP_SEND);
	assert_true(nvtx_double_coll_get(4)->seq > nvtx_double_coll_get(3)->seq);
}

/* NCCL's range of a call the agent interposed is opened inside the
 * wrapper: that call is recorded by the wrapper (path interpose), the
 * range must not count it again. */
static void test_nccl_ranges_inside_interposed_call(void **state)
{
	nvtxDomainHandle_t nccl = nvtxDomainCreateA("NCCL");
	nvtxStringHandle_t ag = nvtxDomainRegisterStringA(nccl, "ncclAllGather");
	nvtxEventAttributes_t a = {0};

	(void)state;
	nvtx_double_set_inside(1);
	nccl_range(nccl, ag);
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "ncclAllReduce";
	nvtxDomainRangeEnd(nccl, nvtxDomainRangeStartEx(nccl, &a));
	/* what counts is where the range opened: closing outside changes nothing */
	a.message.ascii = "ncclBroadcast";
	nvtxDomainRangePushEx(nccl, &a);
	nvtx_double_set_inside(0);
	nvtxDomainRangePop(nccl);
	assert_int_equal(find_all("ncclAllGather", NULL, 0), 1); /* ranges as before */
	assert_int_equal(find_all("ncclAllReduce", NULL, 0), 1);
	assert_int_equal(find_all("ncclBroadcast", NULL, 0), 1);
	assert_int_equal(nvtx_double_coll_count(), 0);
	/* outside again: counted */
	nccl_range(nccl, ag);
	assert_int_equal(nvtx_double_coll_count(), 1);
}

/* ---- threads ----------------------------------------------------------- */

#define THREADS 4
#define PAIRS 500

static void *nest_on_thread(void *arg)
{
	char name[32];
	long k = (long)arg;

	for (int i = 0; i < PAIRS; i++) {
		snprintf(name, sizeof(name), "t%ld outer", k);
		nvtxRangePushA(name);
		snprintf(name, sizeof(name), "t%ld inner", k);
		nvtxRangePushA(name);
		nvtxRangePop();
		nvtxRangePop();
	}
	return (void *)(uintptr_t)gettid();
}

static void test_threads_keep_their_own_stacks(void **state)
{
	pthread_t t[THREADS];
	uint32_t tid[THREADS];
	char name[32];

	(void)state;
	nvtxRangePushA("main open"); /* open on main: no effect on the others */
	for (long k = 0; k < THREADS; k++)
		assert_int_equal(pthread_create(&t[k], NULL, nest_on_thread, (void *)k), 0);
	for (int k = 0; k < THREADS; k++) {
		void *ret;

		assert_int_equal(pthread_join(t[k], &ret), 0);
		tid[k] = (uint32_t)(uintptr_t)ret;
	}
	nvtxRangePop();
	assert_int_equal(nvtx_double_count(), THREADS * PAIRS * 2 + 1);
	for (int k = 0; k < THREADS; k++) {
		size_t outer = 0, inner = 0;

		for (size_t i = 0; i < nvtx_double_count(); i++) {
			const struct fss_rec_nvtx_range *r = nvtx_double_get(i);

			snprintf(name, sizeof(name), "t%d outer", k);
			if (strcmp(name_of(r), name) == 0) {
				assert_int_equal(r->depth, 0);
				assert_int_equal(r->thread, tid[k]);
				assert_int_equal(r->end_thread, tid[k]);
				assert_true(r->start_ns <= r->end_ns);
				outer++;
			}
			snprintf(name, sizeof(name), "t%d inner", k);
			if (strcmp(name_of(r), name) == 0) {
				assert_int_equal(r->depth, 1);
				assert_int_equal(r->thread, tid[k]);
				inner++;
			}
		}
		assert_int_equal(outer, PAIRS);
		assert_int_equal(inner, PAIRS);
	}
}

/* Stacks come from a pool (64 in the double, NVTX_STACKS in
 * agent_gpu.cmake) and go back when a thread exits: far more threads than
 * that, one after the other, are all recorded. */
#define CHURN 300

static void *one_range(void *arg)
{
	(void)arg;
	nvtxRangePushA("churn");
	nvtxRangePop();
	return NULL;
}

static void test_thread_exit_returns_stack(void **state)
{
	uint64_t dropped_before = nvtx_double_dropped();

	(void)state;
	for (int i = 0; i < CHURN; i++) {
		pthread_t t;

		assert_int_equal(pthread_create(&t, NULL, one_range, NULL), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
	}
	assert_int_equal(find_all("churn", NULL, 0), CHURN);
	assert_int_equal(nvtx_double_dropped(), dropped_before);
}

/* More threads with ranges open at once than stacks: the extra ones are
 * counted, and their pushes and pops still balance. */
#define CROWD 70
#define POOL 64 /* NVTX_STACKS of the double */

static pthread_barrier_t crowd_barrier;

struct crowd_result {
	int push_outer, push_inner, pop_inner, pop_outer, pop_extra;
};

static void *crowd_member(void *arg)
{
	struct crowd_result *r = arg;

	r->push_outer = nvtxRangePushA("crowd outer");
	r->push_inner = nvtxRangePushA("crowd inner");
	pthread_barrier_wait(&crowd_barrier); /* all open at once */
	r->pop_inner = nvtxRangePop();
	r->pop_outer = nvtxRangePop();
	r->pop_extra = nvtxRangePop();
	pthread_barrier_wait(&crowd_barrier); /* nobody exits (frees a stack) early */
	return NULL;
}

static void test_stack_pool_exhausted(void **state)
{
	pthread_t t[CROWD];
	struct crowd_result r[CROWD];
	uint64_t dropped_before = nvtx_double_dropped();
	/* this (main) thread holds a stack since the first test */
	const int kept = POOL - 1;

	(void)state;
	assert_int_equal(pthread_barrier_init(&crowd_barrier, NULL, CROWD), 0);
	for (int k = 0; k < CROWD; k++)
		assert_int_equal(pthread_create(&t[k], NULL, crowd_member, &r[k]), 0);
	for (int k = 0; k < CROWD; k++)
		assert_int_equal(pthread_join(t[k], NULL), 0);
	pthread_barrier_destroy(&crowd_barrier);
	for (int k = 0; k < CROWD; k++) {
		assert_int_equal(r[k].push_outer, 0);
		assert_int_equal(r[k].push_inner, 1);
		assert_int_equal(r[k].pop_inner, 1);
		assert_int_equal(r[k].pop_outer, 0);
		assert_int_equal(r[k].pop_extra, -1);
	}
	assert_int_equal(find_all("crowd outer", NULL, 0), kept);
	assert_int_equal(find_all("crowd inner", NULL, 0), kept);
	assert_int_equal(nvtx_double_dropped() - dropped_before, 2 * (CROWD - kept));
}

/* ---- not recording, open at exit ---------------------------------------- */

static void test_dormant_records_nothing_but_balances(void **state)
{
	(void)state;
	nvtx_double_set_state(AGENT_DORMANT);
	assert_int_equal(nvtxRangePushA("quiet"), 0);
	nvtx_double_set_state(AGENT_ON); /* a collector came */
	assert_int_equal(nvtxRangePushA("loud"), 1);
	assert_int_equal(nvtxRangePop(), 1);
	assert_int_equal(nvtxRangePop(), 0);
	nvtx_double_set_state(AGENT_DORMANT);
	nvtxRangeEnd(nvtxRangeStartA("quiet start"));
	nvtx_double_set_state(AGENT_ON);
	/* both push/pop ranges closed while recording: both recorded */
	assert_int_equal(nvtx_double_count(), 2);
	assert_int_equal(find_all("quiet start", NULL, 0), 0);
}

static int open_names_count_fd = -1;

static void report_at_exit(void)
{
	/* registered first, so it runs after every later exit handler */
	size_t n = find_all("open at exit", NULL, 0) + find_all("started at exit", NULL, 0);
	size_t closed = find_all("closed before exit", NULL, 0);
	char line[64];
	int len = snprintf(line, sizeof(line), "%zu %zu", n, closed);

	if (write(open_names_count_fd, line, (size_t)len) != len)
		_exit(3);
}

static void test_open_at_exit_not_reported(void **state)
{
	int fds[2];
	pid_t pid;
	char line[64] = {0};
	size_t open_n = 99, closed_n = 99;
	int status;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	fflush(stdout); /* the child must not print the parent's buffered lines */
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		open_names_count_fd = fds[1];
		atexit(report_at_exit);
		nvtxRangePushA("open at exit");
		nvtxRangePushA("closed before exit");
		nvtxRangePop();
		nvtxRangeStartA("started at exit");
		exit(0);
	}
	close(fds[1]);
	assert_true(read(fds[0], line, sizeof(line) - 1) > 0);
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(sscanf(line, "%zu %zu", &open_n, &closed_n), 2);
	assert_int_equal(open_n, 0);
	assert_int_equal(closed_n, 1);
}

/* ---- the real agent, when built ---------------------------------------- */

/* The real agent loads with dlopen, as NVTX loads it when it is not also
 * preloaded (its static TLS must fit what glibc keeps for that), and
 * exports the entry point NVTX looks for. Its records go to its own sink:
 * the end-to-end tests read them. */
static void test_real_agent_exports_entry(void **state)
{
	const char *path = getenv("AGENT_NVTX_REAL_AGENT");
	void *h;

	(void)state;
	if (!path || !path[0]) {
		print_message("AGENT_NVTX_REAL_AGENT not set: the real agent is not checked here\n");
		skip();
	}
	h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (!h)
		print_message("dlopen %s: %s\n", path, dlerror());
	assert_non_null(h); /* e.g. "cannot allocate memory in static TLS block" */
	assert_non_null(dlsym(h, "InitializeInjectionNvtx2"));
}

/* ---- cost -------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Prints, never asserts: a number for the report, not a gate. */
static void test_cost_printed(void **state)
{
	const int n = 50000;
	nvtxDomainHandle_t d = nvtxDomainCreateA("bench");
	nvtxStringHandle_t s = nvtxDomainRegisterStringA(d, "registered");
	nvtxEventAttributes_t a = {0};
	uint64_t t0, t1, t2, t3;

	(void)state;
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	a.message.registered = s;
	for (int i = 0; i < 1000; i++) { /* warm */
		nvtxRangePushA("forward blocks.12.attn");
		nvtxRangePop();
	}
	nvtx_double_clear();
	t0 = now_ns();
	for (int i = 0; i < n; i++) {
		nvtxRangePushA("forward blocks.12.attn");
		nvtxRangePop();
	}
	t1 = now_ns();
	nvtx_double_clear();
	for (int i = 0; i < n; i++) {
		nvtxDomainRangePushEx(d, &a);
		nvtxDomainRangePop(d);
	}
	t2 = now_ns();
	nvtx_double_clear();
	for (int i = 0; i < n; i++)
		nvtxRangeEnd(nvtxRangeStartA("forward blocks.12.attn"));
	t3 = now_ns();
	nvtx_double_clear();
	print_message("nvtx cost per range (push + pop, incl. NVTX dispatch, 2 clock reads, "
		      "intern double, emit double): PushA/Pop %.1f ns, registered DomainPushEx/Pop "
		      "%.1f ns, StartA/End %.1f ns\n",
		      (double)(t1 - t0) / n, (double)(t2 - t1) / n, (double)(t3 - t2) / n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_push_pop_nested, setup),
	    cmocka_unit_test_setup(test_push_variants, setup),
	    cmocka_unit_test_setup(test_push_overflow, setup),
	    cmocka_unit_test_setup(test_start_end_across_threads, setup),
	    cmocka_unit_test_setup(test_domains_and_registered_strings, setup),
	    cmocka_unit_test_setup(test_nccl_style_ranges, setup),
	    cmocka_unit_test_setup(test_nccl_ranges_are_collectives, setup),
	    cmocka_unit_test_setup(test_nccl_ranges_inside_interposed_call, setup),
	    cmocka_unit_test_setup(test_threads_keep_their_own_stacks, setup),
	    cmocka_unit_test_setup(test_thread_exit_returns_stack, setup),
	    cmocka_unit_test_setup(test_stack_pool_exhausted, setup),
	    cmocka_unit_test_setup(test_dormant_records_nothing_but_balances, setup),
	    cmocka_unit_test_setup(test_open_at_exit_not_reported, setup),
	    cmocka_unit_test_setup(test_real_agent_exports_entry, setup),
	    cmocka_unit_test_setup(test_cost_printed, setup),
	};

	/* Before the first NVTX call: NVTX reads it once per library. */
	setenv("NVTX_INJECTION64_PATH", AGENT_NVTX_DOUBLE_PATH, 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
