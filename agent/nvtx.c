/*
 * nvtx.c - NVTX ranges through NVTX injection.
 *
 * Every library built with the NVTX3 headers (the job, NCCL >= 2.21,
 * PyTorch) reads NVTX_INJECTION64_PATH on its first NVTX call, dlopens that
 * library and calls its InitializeInjectionNvtx2 with a table getter; the
 * injection fills the library's function tables (nvtxDetail/nvtxInit.h,
 * nvtxImpl.h). Nothing is linked into the job. Entries left unfilled
 * become no-ops in that library.
 *
 * Recorded: push/pop and start/end ranges of every domain, one nvtx_range
 * record per CLOSED range (a range still open at exit is not reported).
 * Marks are not recorded (the schema has no point event, and nothing in
 * the analysis needs them). NCCL's own per-call ranges (domain "NCCL",
 * named after the API function, parameters in a payload) are recorded like
 * any other range, and a closed one named after a collective (ncclAllGather,
 * ... : NCCL names them with __func__) also yields a `collective` record
 * with path FSS_PATH_NVTX, unless it was opened inside one of the agent's
 * interposed calls (agent_in_nccl_call): that call is recorded already, by
 * the wrapper, with path interpose. Such a record knows only the op, the
 * thread and the times: NCCL passes count, bytes, comm and stream in an
 * NVTX extended payload (a registered schema) that the injection does not
 * decode, so they are 0, dtype is unknown and redop none (docs/format.md).
 * Creating the "NCCL" domain activates the agent, as a wrapped NCCL
 * call does: with a statically linked NCCL nothing else would.
 *
 * Hot path (push, pop, start, end on the job's threads): a clock read, the
 * lock-free intern of the message, the thread's stack (from a static pool)
 * or a lock-free slot, and at close one agent_emit. No lock, no
 * allocation, no syscall.
 * Creating domains and registering strings take a mutex and allocate:
 * they happen once per domain / string, like NVTX intends.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* Types and the injection interface only: the job has the implementation. */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "agent/agent.h"
#include "agent/emit.h"
#include "agent/nccl_wrap.h"
#include "agent/nvtx.h"
#include "agent/strings.h"
#include "common/clock.h"
#include "common/record.h"

#define NVTX_EXPORT __attribute__((visibility("default")))

/* Push/pop nesting kept per thread; deeper pushes are counted, not kept. */
#define NVTX_STACK_MAX 64u
/* Threads with push/pop ranges open at one time (each holds a stack from a
 * static pool while it lives); more are counted, not recorded. */
#ifndef NVTX_STACKS /* the test builds a small pool to reach its end */
#define NVTX_STACKS 1024u
#endif
/* Start/end ranges open at one time (all threads), and how far a start
 * looks for a free slot before it drops the range. */
#define NVTX_OPEN_SLOTS 4096u
#define NVTX_OPEN_PROBES 8u
#define NVTX_DOMAINS_MAX 256u
#define NVTX_STRINGS_MAX 4096u
/* Wide messages are converted to UTF-8 in a stack buffer of this size. */
#define NVTX_WIDE_BYTES 512u

static_assert((NVTX_OPEN_SLOTS & (NVTX_OPEN_SLOTS - 1)) == 0, "slots: a power of two");
static_assert(NVTX_STACKS % 64 == 0, "stacks are claimed in 64-bit masks");

/* A name the job gave once (domain, registered string): its text is kept
 * so that it can be interned again if the agent could not when it was
 * given (string table full, agent not up yet). */
struct nvtx_name {
	char *text;
	_Atomic uint32_t id;
};

struct nvtx_domain {
	struct nvtx_name name;
	int nccl; /* the domain NCCL's own ranges are in */
};

struct nvtx_string {
	struct nvtx_name name;
	const struct nvtx_domain *domain;
	uint8_t op; /* enum fss_coll_op when it names a collective of domain NCCL, else 0 */
};

/* One open push/pop range. */
struct nvtx_frame {
	uint64_t start_ns;
	uint32_t name;
	uint32_t domain; /* string id of the domain name, 0 for the default domain */
	uint32_t category;
	uint32_t thread;
	const void *handle; /* the domain handle: pops are matched per domain */
	uint16_t depth;	    /* open ranges of the same domain below it on this thread */
	uint8_t op;	    /* NCCL's range of a collective not interposed: enum fss_coll_op, else 0 */
	uint64_t seq;	    /* its collective seq, when op */
};

struct nvtx_stack {
	uint32_t depth;	   /* frames in use */
	uint32_t overflow; /* pushes beyond NVTX_STACK_MAX not yet popped */
	struct nvtx_frame frames[NVTX_STACK_MAX];
};

/* One open start/end range. tag: 0 free, NVTX_SLOT_FILLING while its
 * start writes it, else the range id that owns it. */
#define NVTX_SLOT_FILLING UINT64_MAX
struct nvtx_open {
	_Atomic uint64_t tag;
	uint64_t start_ns;
	uint32_t name;
	uint32_t domain;
	uint32_t category;
	uint32_t thread;
	uint8_t op; /* as in struct nvtx_frame */
	uint64_t seq;
};

/* The stacks live in a static pool, not in thread-local storage: the
 * agent has initial-exec TLS, so all of its TLS must fit in the little
 * static TLS glibc keeps for libraries loaded by dlopen (which is how NVTX
 * loads it when it is not also preloaded); 2.5 KB per thread does not. A
 * thread claims a stack on its first push (one CAS, no allocation) and a
 * thread-specific key gives it back when the thread exits. Pool pages
 * nobody claims are never touched. */
static struct nvtx_stack stacks[NVTX_STACKS];
static _Atomic uint64_t stacks_taken[NVTX_STACKS / 64]; /* bit i: stacks[i] belongs to a thread */
static pthread_key_t stacks_key;
static pthread_once_t stacks_key_once = PTHREAD_ONCE_INIT;
static _Atomic int stacks_key_ok;
/* initial-exec like the rest of the agent's TLS (12 bytes): no
 * __tls_get_addr call on the hot path. */
static __thread struct nvtx_stack *tls_stack __attribute__((tls_model("initial-exec")));
/* pushes open while the thread had no stack */
static __thread uint32_t tls_orphans __attribute__((tls_model("initial-exec")));

static struct nvtx_open open_ranges[NVTX_OPEN_SLOTS];
static _Atomic uint64_t next_range_id = 1;

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvtx_domain domains[NVTX_DOMAINS_MAX];
static uint32_t domains_used;
static struct nvtx_domain domain_overflow; /* handed out when the table is full: no name */
static struct nvtx_string strings[NVTX_STRINGS_MAX];
static uint32_t strings_used;

void nvtx_after_fork_child(void)
{
	/* A thread that no longer exists may have held it mid-registration. */
	pthread_mutex_init(&names_lock, NULL);
	/* Only this thread lives on: the other threads' stacks are free. */
	for (uint32_t w = 0; w < NVTX_STACKS / 64; w++)
		atomic_store(&stacks_taken[w], 0);
	if (tls_stack) {
		uint32_t i = (uint32_t)(tls_stack - stacks);

		atomic_fetch_or(&stacks_taken[i / 64], 1ull << (i % 64));
	}
}

/* ---- names ------------------------------------------------------------- */

static uint32_t name_id(struct nvtx_name *n)
{
	uint32_t id = atomic_load_explicit(&n->id, memory_order_relaxed);

	if (id == FSS_STRING_NONE && n->text) {
		id = agent_intern(n->text, -1);
		atomic_store_explicit(&n->id, id, memory_order_relaxed);
	}
	return id;
}

/* UTF-32 (Linux wchar_t) to UTF-8, cut at whole characters. */
static size_t wide_to_utf8(const wchar_t *w, char *out, size_t cap)
{
	size_t n = 0;

	for (; *w; w++) {
		uint32_t c = (uint32_t)*w;
		char b[4];
		size_t k;

		if (c < 0x80) {
			b[0] = (char)c;
			k = 1;
		} else if (c < 0x800) {
			b[0] = (char)(0xc0 | (c >> 6));
			b[1] = (char)(0x80 | (c & 0x3f));
			k = 2;
		} else if (c < 0x10000) {
			if (c >= 0xd800 && c <= 0xdfff)
				c = 0xfffd; /* a lone surrogate is no character */
			b[0] = (char)(0xe0 | (c >> 12));
			b[1] = (char)(0x80 | ((c >> 6) & 0x3f));
			b[2] = (char)(0x80 | (c & 0x3f));
			k = 3;
		} else if (c < 0x110000) {
			b[0] = (char)(0xf0 | (c >> 18));
			b[1] = (char)(0x80 | ((c >> 12) & 0x3f));
			b[2] = (char)(0x80 | ((c >> 6) & 0x3f));
			b[3] = (char)(0x80 | (c & 0x3f));
			k = 4;
		} else {
			b[0] = '?';
			k = 1;
		}
		if (n + k > cap)
			break;
		memcpy(out + n, b, k);
		n += k;
	}
	return n;
}

/* wide_cstr - w as a NUL-terminated UTF-8 string in buf (cut at
 * NVTX_WIDE_BYTES bytes); returns buf. */
static const char *wide_cstr(const wchar_t *w, char buf[NVTX_WIDE_BYTES + 1])
{
	buf[wide_to_utf8(w, buf, NVTX_WIDE_BYTES)] = 0;
	return buf;
}

static uint32_t intern_ascii(const char *s)
{
	return s ? agent_intern(s, -1) : FSS_STRING_NONE;
}

static uint32_t intern_wide(const wchar_t *w)
{
	char buf[NVTX_WIDE_BYTES];

	if (!w)
		return FSS_STRING_NONE;
	return agent_intern(buf, (long)wide_to_utf8(w, buf, sizeof(buf)));
}

/* The element of `base[count]` that `handle` is, or NULL: only handles
 * this file gave out are ever read. */
static void *handle_in(const void *handle, void *base, size_t size, size_t count)
{
	uintptr_t h = (uintptr_t)handle, b = (uintptr_t)base;

	if (h < b || h >= b + size * count || (h - b) % size)
		return NULL;
	return (void *)h;
}

static struct nvtx_string *string_of(nvtxStringHandle_t handle)
{
	return handle_in(handle, strings, sizeof(strings[0]), NVTX_STRINGS_MAX);
}

/* The domain's name id; NULL (the default domain) and others are 0. */
static uint32_t domain_id(nvtxDomainHandle_t handle)
{
	struct nvtx_domain *d = handle_in(handle, domains, sizeof(domains[0]), NVTX_DOMAINS_MAX);

	return d ? name_id(&d->name) : FSS_STRING_NONE;
}

/* Message and category of an event attribute struct. */
static uint32_t attr_name(const nvtxEventAttributes_t *a, uint32_t *category)
{
	struct nvtx_string *s;

	*category = 0;
	if (!a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof(a->message))
		return FSS_STRING_NONE;
	*category = a->category;
	switch (a->messageType) {
	case NVTX_MESSAGE_TYPE_ASCII:
		return intern_ascii(a->message.ascii);
	case NVTX_MESSAGE_TYPE_UNICODE:
		return intern_wide(a->message.unicode);
	case NVTX_MESSAGE_TYPE_REGISTERED:
		s = string_of(a->message.registered);
		return s ? name_id(&s->name) : FSS_STRING_NONE;
	default:
		return FSS_STRING_NONE;
	}
}

/* ---- NCCL's own ranges: collectives of a statically linked NCCL -------- */

/* The collective a range name of domain NCCL stands for, 0 for none. NCCL
 * (>= 2.21, NVTX3_FUNC_WITH_PARAMS) names its ranges with __func__:
 * "ncclAllGather"; the bare API name is taken too. */
static uint8_t nccl_op_of(const char *name)
{
	static const struct {
		const char *name;
		uint8_t op;
	} ops[] = {
	    {"AllGather", FSS_OP_ALLGATHER}, {"ReduceScatter", FSS_OP_REDUCESCATTER},
	    {"AllReduce", FSS_OP_ALLREDUCE}, {"Broadcast", FSS_OP_BROADCAST},
	    {"Reduce", FSS_OP_REDUCE},	     {"Send", FSS_OP_SEND},
	    {"Recv", FSS_OP_RECV},	     {"AlltoAll", FSS_OP_ALLTOALL}, /* nccl.h's spelling */
	    {"AllToAll", FSS_OP_ALLTOALL},   {"Gather", FSS_OP_GATHER},
	    {"Scatter", FSS_OP_SCATTER},
	};

	if (!name)
		return 0;
	if (strncmp(name, "nccl", 4) == 0)
		name += 4;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(name, ops[i].name) == 0)
			return ops[i].op;
	return 0;
}

/* The collective a range opened in `handle`'s domain with `a` stands for,
 * 0 when it is none or when this thread is inside an interposed NCCL call
 * (the wrapper records that call itself). Cheap outside domain NCCL: one
 * range check. */
static uint8_t attr_op(nvtxDomainHandle_t handle, const nvtxEventAttributes_t *a)
{
	struct nvtx_domain *d = handle_in(handle, domains, sizeof(domains[0]), NVTX_DOMAINS_MAX);
	struct nvtx_string *s;
	char buf[NVTX_WIDE_BYTES + 1];
	uint8_t op;

	if (!d || !d->nccl || !a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof(a->message))
		return 0;
	switch (a->messageType) {
	case NVTX_MESSAGE_TYPE_REGISTERED: /* what NCCL uses */
		s = string_of(a->message.registered);
		op = s ? s->op : 0;
		break;
	case NVTX_MESSAGE_TYPE_ASCII:
		op = nccl_op_of(a->message.ascii);
		break;
	case NVTX_MESSAGE_TYPE_UNICODE:
		if (!a->message.unicode)
			return 0;
		op = nccl_op_of(wide_cstr(a->message.unicode, buf));
		break;
	default:
		return 0;
	}
	return op && !agent_in_nccl_call() ? op : 0;
}

/* The seq of a collective seen through its NVTX range, from the counter
 * the wrappers use (so seq stays one sequence per source); 0 while the
 * agent is off, as the wrappers count nothing then. Taken when the range
 * opens: seq is in issue order, like the wrappers' (taken on entry). */
static uint64_t coll_seq_take(void)
{
	if (atomic_load_explicit(&agent_state_now, memory_order_relaxed) == AGENT_OFF)
		return 0;
	return atomic_fetch_add_explicit(&agent_counters.collectives, 1, memory_order_relaxed) + 1;
}

/* The collective record of a closed NCCL range (path nvtx). What NCCL's
 * payload carries (count, bytes, comm, stream, dtype, redop, root/peer)
 * is not decoded: the fields say unknown (docs/format.md). */
static void coll_emit(uint8_t op, uint64_t seq, uint64_t start_ns, uint64_t end_ns, uint32_t thread)
{
	struct fss_rec_collective rec;

	if (!op || !seq || !agent_recording())
		return;
	memset(&rec, 0, sizeof(rec));
	record_init(&rec, FSS_REC_COLLECTIVE, sizeof(rec), 0);
	rec.seq = seq;
	rec.enter_ns = start_ns;
	rec.exit_ns = end_ns;
	rec.thread = thread;
	rec.peer = -1;
	rec.op = op;
	rec.dtype = FSS_DTYPE_UNKNOWN;
	rec.redop = FSS_REDOP_NONE;
	rec.path = FSS_PATH_NVTX;
	agent_emit(&rec);
}

/* ---- closed ranges ----------------------------------------------------- */

static void range_emit(uint16_t kind, uint64_t start_ns, uint64_t end_ns, uint64_t range_id, uint32_t domain,
		       uint32_t name, uint32_t thread, uint16_t depth, uint32_t category)
{
	struct fss_rec_nvtx_range rec;

	if (!agent_recording())
		return;
	record_init(&rec, FSS_REC_NVTX_RANGE, sizeof(rec), 0);
	rec.start_ns = start_ns;
	rec.end_ns = end_ns;
	rec.range_id = range_id;
	rec.domain = domain;
	rec.name = name;
	rec.thread = thread;
	rec.end_thread = agent_thread_id();
	rec.kind = kind;
	rec.depth = depth;
	rec.category = category;
	agent_emit(&rec);
}

/* ---- push / pop: a per-thread stack, pops matched per domain ------------ */

static void stack_release(void *arg)
{
	struct nvtx_stack *st = arg;
	uint32_t i = (uint32_t)(st - stacks);

	/* Thread exit: its open ranges are never closed, never reported. */
	st->depth = 0;
	st->overflow = 0;
	tls_stack = NULL;
	atomic_fetch_and_explicit(&stacks_taken[i / 64], ~(1ull << (i % 64)), memory_order_release);
}

static void stacks_key_create(void)
{
	atomic_store(&stacks_key_ok, pthread_key_create(&stacks_key, stack_release) == 0);
}

/* The calling thread's stack, claimed on first use; NULL when the pool is
 * exhausted (or the key could not be had). */
static struct nvtx_stack *stack_get(void)
{
	if (tls_stack)
		return tls_stack;
	if (!atomic_load_explicit(&stacks_key_ok, memory_order_relaxed))
		return NULL;
	for (uint32_t w = 0; w < NVTX_STACKS / 64; w++) {
		uint64_t taken = atomic_load_explicit(&stacks_taken[w], memory_order_relaxed);

		while (~taken) {
			uint32_t b = (uint32_t)__builtin_ctzll(~taken);

			if (!atomic_compare_exchange_weak_explicit(&stacks_taken[w], &taken, taken | (1ull << b),
								   memory_order_acquire, memory_order_relaxed))
				continue;
			tls_stack = &stacks[w * 64 + b];
			/* For keys below 32 glibc stores this in the thread itself:
			 * no allocation. Without it the stack would leak at exit. */
			if (pthread_setspecific(stacks_key, tls_stack) != 0) {
				stack_release(tls_stack);
				return NULL;
			}
			return tls_stack;
		}
	}
	return NULL;
}

static int push(const void *handle, uint32_t domain, uint32_t name, uint32_t category, uint8_t op)
{
	/* Orphans are the outermost ranges: claim a stack only outside them,
	 * so that pops still match pushes in order. */
	struct nvtx_stack *st = tls_orphans ? NULL : stack_get();
	struct nvtx_frame *f;
	uint16_t depth = 0;

	if (!st) {
		tls_orphans++;
		atomic_fetch_add_explicit(&agent_counters.nvtx_dropped, 1, memory_order_relaxed);
		return (int)tls_orphans - 1;
	}
	/* NVTX keeps one stack per domain and thread: this range's depth
	 * counts the open ranges of its own domain only. */
	for (uint32_t i = st->depth; i-- > 0;)
		if (st->frames[i].handle == handle) {
			depth = (uint16_t)(st->frames[i].depth + 1);
			break;
		}
	if (st->overflow || st->depth == NVTX_STACK_MAX) {
		st->overflow++;
		atomic_fetch_add_explicit(&agent_counters.nvtx_dropped, 1, memory_order_relaxed);
		return (int)(tls_orphans + st->depth + st->overflow) - 1;
	}
	f = &st->frames[st->depth++];
	f->handle = handle;
	f->domain = domain;
	f->name = name;
	f->category = category;
	f->depth = depth;
	f->op = op;
	f->seq = op ? coll_seq_take() : 0;
	f->thread = agent_thread_id();
	f->start_ns = clock_mono_ns(); /* last: the range starts when the push returns */
	return depth;
}

static int pop(const void *handle)
{
	uint64_t now = clock_mono_ns();
	struct nvtx_stack *st = tls_stack;
	struct nvtx_frame f;
	uint32_t i = UINT32_MAX;

	if (st && st->overflow) {
		/* The innermost pushes were the ones not kept. */
		st->overflow--;
		return (int)(tls_orphans + st->depth + st->overflow);
	}
	if (st)
		for (i = st->depth; i-- > 0;)
			if (st->frames[i].handle == handle)
				break;
	if (i == UINT32_MAX) {
		if (tls_orphans)
			return (int)--tls_orphans;
		return -1; /* no open range in this domain on this thread */
	}
	f = st->frames[i];
	/* Domains interleave rarely; when they do, close the gap. */
	memmove(&st->frames[i], &st->frames[i + 1], (st->depth - i - 1) * sizeof(st->frames[0]));
	st->depth--;
	range_emit(FSS_NVTX_PUSH_POP, f.start_ns, now, 0, f.domain, f.name, f.thread, f.depth, f.category);
	coll_emit(f.op, f.seq, f.start_ns, now, f.thread);
	return f.depth;
}

static int NVTX_API push_a(const char *message)
{
	return push(NULL, FSS_STRING_NONE, intern_ascii(message), 0, 0);
}

static int NVTX_API push_w(const wchar_t *message)
{
	return push(NULL, FSS_STRING_NONE, intern_wide(message), 0, 0);
}

static int NVTX_API push_ex(const nvtxEventAttributes_t *attr)
{
	uint32_t category, name = attr_name(attr, &category);

	return push(NULL, FSS_STRING_NONE, name, category, 0);
}

static int NVTX_API pop_default(void)
{
	return pop(NULL);
}

static int NVTX_API domain_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr)
{
	uint32_t category, name = attr_name(attr, &category);

	return push(domain, domain_id(domain), name, category, attr_op(domain, attr));
}

static int NVTX_API domain_pop(nvtxDomainHandle_t domain)
{
	return pop(domain);
}

/* ---- start / end: a lock-free table of open ranges --------------------- */

static nvtxRangeId_t start(uint32_t domain, uint32_t name, uint32_t category, uint8_t op)
{
	uint64_t id = atomic_fetch_add_explicit(&next_range_id, 1, memory_order_relaxed);

	for (uint32_t p = 0; p < NVTX_OPEN_PROBES; p++) {
		struct nvtx_open *o = &open_ranges[(id + p) & (NVTX_OPEN_SLOTS - 1)];
		uint64_t expect = 0;

		/* Claim a free slot; while the tag is FILLING no end reads it. */
		if (!atomic_compare_exchange_strong_explicit(&o->tag, &expect, NVTX_SLOT_FILLING, memory_order_acquire,
							     memory_order_relaxed))
			continue;
		o->name = name;
		o->domain = domain;
		o->category = category;
		o->op = op;
		o->seq = op ? coll_seq_take() : 0;
		o->thread = agent_thread_id();
		o->start_ns = clock_mono_ns();
		atomic_store_explicit(&o->tag, id, memory_order_release);
		return id;
	}
	/* Too many ranges open (or left open): this one is not recorded; its
	 * id is still unique, and its end finds nothing. */
	atomic_fetch_add_explicit(&agent_counters.nvtx_dropped, 1, memory_order_relaxed);
	return id;
}

static void end(nvtxRangeId_t id)
{
	uint64_t now = clock_mono_ns();

	if (id == 0 || id == NVTX_SLOT_FILLING)
		return;
	for (uint32_t p = 0; p < NVTX_OPEN_PROBES; p++) {
		struct nvtx_open *o = &open_ranges[(id + p) & (NVTX_OPEN_SLOTS - 1)];
		struct nvtx_open copy;
		uint64_t expect = id;

		if (atomic_load_explicit(&o->tag, memory_order_acquire) != id)
			continue;
		/* While the tag is our id nobody writes the slot: copy, then
		 * free it; of two ends of one id only one frees it. */
		copy.start_ns = o->start_ns;
		copy.name = o->name;
		copy.domain = o->domain;
		copy.category = o->category;
		copy.thread = o->thread;
		copy.op = o->op;
		copy.seq = o->seq;
		if (!atomic_compare_exchange_strong_explicit(&o->tag, &expect, 0, memory_order_acq_rel,
							     memory_order_relaxed))
			return;
		range_emit(FSS_NVTX_START_END, copy.start_ns, now, id, copy.domain, copy.name, copy.thread, 0,
			   copy.category);
		coll_emit(copy.op, copy.seq, copy.start_ns, now, copy.thread);
		return;
	}
}

static nvtxRangeId_t NVTX_API start_a(const char *message)
{
	return start(FSS_STRING_NONE, intern_ascii(message), 0, 0);
}

static nvtxRangeId_t NVTX_API start_w(const wchar_t *message)
{
	return start(FSS_STRING_NONE, intern_wide(message), 0, 0);
}

static nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t *attr)
{
	uint32_t category, name = attr_name(attr, &category);

	return start(FSS_STRING_NONE, name, category, 0);
}

static void NVTX_API end_default(nvtxRangeId_t id)
{
	end(id);
}

static nvtxRangeId_t NVTX_API domain_start_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr)
{
	uint32_t category, name = attr_name(attr, &category);

	return start(domain_id(domain), name, category, attr_op(domain, attr));
}

static void NVTX_API domain_end(nvtxDomainHandle_t domain, nvtxRangeId_t id)
{
	end(id); /* range ids are unique across domains */
}

/* ---- domains and registered strings (rare: a mutex) ------------------- */

static nvtxDomainHandle_t domain_create(const char *name)
{
	struct nvtx_domain *d = NULL;

	if (!name)
		return NULL; /* the default domain */
	pthread_mutex_lock(&names_lock);
	for (uint32_t i = 0; i < domains_used && !d; i++)
		if (strcmp(domains[i].name.text, name) == 0)
			d = &domains[i]; /* one handle per name */
	if (!d && domains_used < NVTX_DOMAINS_MAX) {
		char *text = strdup(name);

		if (text) {
			d = &domains[domains_used++];
			d->name.text = text;
			d->nccl = strcmp(text, "NCCL") == 0;
			atomic_store(&d->name.id, agent_intern(text, -1));
		}
	}
	pthread_mutex_unlock(&names_lock);
	if (!d)
		d = &domain_overflow; /* ranges still balance; the domain has no name */
	/* NCCL (>= 2.21) creates its domain at its first API call. Where NCCL
	 * is linked statically no wrapper ever runs, so this is the sign that
	 * the process is a rank: start recording (agent.h, agent_activate). */
	if (strcmp(name, "NCCL") == 0)
		agent_activate();
	return (nvtxDomainHandle_t)(void *)d;
}

static nvtxDomainHandle_t NVTX_API domain_create_a(const char *name)
{
	return domain_create(name);
}

static nvtxDomainHandle_t NVTX_API domain_create_w(const wchar_t *name)
{
	char buf[NVTX_WIDE_BYTES + 1];

	return name ? domain_create(wide_cstr(name, buf)) : NULL;
}

static void NVTX_API domain_destroy(nvtxDomainHandle_t domain)
{
	/* Kept: ranges of the domain may still close after this, and a
	 * domain of the same name gets the same handle again. */
}

static nvtxStringHandle_t register_string(nvtxDomainHandle_t domain, const char *text)
{
	const struct nvtx_domain *dom = (const struct nvtx_domain *)(const void *)domain;
	struct nvtx_string *s = NULL;

	if (!text)
		return NULL;
	pthread_mutex_lock(&names_lock);
	for (uint32_t i = 0; i < strings_used && !s; i++)
		if (strings[i].domain == dom && strcmp(strings[i].name.text, text) == 0)
			s = &strings[i];
	if (!s && strings_used < NVTX_STRINGS_MAX) {
		char *copy = strdup(text);

		if (copy) {
			s = &strings[strings_used++];
			s->domain = dom;
			s->name.text = copy;
			/* dom is one of ours or NULL (the default domain): see attr_op */
			s->op = dom && handle_in(dom, domains, sizeof(domains[0]), NVTX_DOMAINS_MAX) && dom->nccl
				    ? nccl_op_of(copy)
				    : 0;
			atomic_store(&s->name.id, agent_intern(copy, -1));
		}
	}
	pthread_mutex_unlock(&names_lock);
	/* NULL when full: its ranges are recorded without a name. */
	return (nvtxStringHandle_t)(void *)s;
}

static nvtxStringHandle_t NVTX_API register_string_a(nvtxDomainHandle_t domain, const char *text)
{
	return register_string(domain, text);
}

static nvtxStringHandle_t NVTX_API register_string_w(nvtxDomainHandle_t domain, const wchar_t *text)
{
	char buf[NVTX_WIDE_BYTES + 1];

	return text ? register_string(domain, wide_cstr(text, buf)) : NULL;
}

/* ---- injection --------------------------------------------------------- */

/* Store fn in slot id of a module's table when the table has that slot. */
static void table_set(NvtxFunctionTable table, unsigned int size, unsigned int id, NvtxFunctionPointer fn)
{
	if (table && id < size && table[id])
		*table[id] = fn;
}

#define FN(f) ((NvtxFunctionPointer)(void (*)(void))(f))

/*
 * InitializeInjectionNvtx2 - called by each NVTX-instrumented library on
 * its first NVTX call when NVTX_INJECTION64_PATH names this library.
 * Returns 1 after filling the CORE and CORE2 (domain) tables; 0 when the
 * agent is off (FSDPSCOPE_DISABLE=1 or failed) or the tables cannot be
 * had: that library's NVTX calls then become no-ops, at no cost.
 */
NVTX_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
	const NvtxExportTableCallbacks *callbacks;
	NvtxFunctionTable core = NULL, core2 = NULL;
	unsigned int core_size = 0, core2_size = 0;

	agent_init();
	if (atomic_load_explicit(&agent_state_now, memory_order_acquire) == AGENT_OFF)
		return 0;
	pthread_once(&stacks_key_once, stacks_key_create);
	if (!get_export_table)
		return 0;
	callbacks = (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
	if (!callbacks || callbacks->struct_size < sizeof(*callbacks) || !callbacks->GetModuleFunctionTable)
		return 0;
	if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) || !core)
		return 0;
	table_set(core, core_size, NVTX_CBID_CORE_RangeStartEx, FN(start_ex));
	table_set(core, core_size, NVTX_CBID_CORE_RangeStartA, FN(start_a));
	table_set(core, core_size, NVTX_CBID_CORE_RangeStartW, FN(start_w));
	table_set(core, core_size, NVTX_CBID_CORE_RangeEnd, FN(end_default));
	table_set(core, core_size, NVTX_CBID_CORE_RangePushEx, FN(push_ex));
	table_set(core, core_size, NVTX_CBID_CORE_RangePushA, FN(push_a));
	table_set(core, core_size, NVTX_CBID_CORE_RangePushW, FN(push_w));
	table_set(core, core_size, NVTX_CBID_CORE_RangePop, FN(pop_default));
	if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) && core2) {
		table_set(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, FN(domain_start_ex));
		table_set(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, FN(domain_end));
		table_set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, FN(domain_push_ex));
		table_set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, FN(domain_pop));
		table_set(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, FN(register_string_a));
		table_set(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringW, FN(register_string_w));
		table_set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, FN(domain_create_a));
		table_set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, FN(domain_create_w));
		table_set(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, FN(domain_destroy));
	}
	return 1;
}

/* NVTX3 falls back to this symbol (weak in every instrumented library)
 * when NVTX_INJECTION64_PATH is not set: with the agent preloaded, NVTX
 * still finds it if a launcher dropped that variable. A path that is set
 * (nsys's, say) always wins. */
NVTX_EXPORT NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = InitializeInjectionNvtx2;
