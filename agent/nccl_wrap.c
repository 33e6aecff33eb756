/*
 * nccl_wrap.c - the interposed NCCL API.
 *
 * Every wrapper has the signature of the toolkit's nccl.h (included, so the
 * compiler checks each one) and forwards to the real implementation: the
 * real library's pncclX (NCCL's profiling name, which this library does not
 * export), else the next ncclX after this library, found once with
 * dlsym(RTLD_NEXT) and cached in an atomic pointer. When the real library
 * is not in the global scope (a Python extension that dlopen'd it with
 * RTLD_LOCAL) it is found by its soname with RTLD_NOLOAD.
 *
 * What a wrapper adds to a collective call, in state ON (docs/agent.md):
 * two clock reads (vDSO), one relaxed fetch_add for the call number, a few
 * thread-local loads and stores, and two ring reservations, each record
 * built in place: the enter record before the real call, the collective
 * record after it. No lock, no allocation, no syscall. Arguments are passed
 * through untouched and the real result is returned as is. In state DORMANT
 * a call is only counted; in OFF it is only forwarded.
 *
 * Calls in flight (docs/format.md): the enter record goes into the ring
 * before the real call, so a caller that never returns (a peer that never
 * came) has told the collector which collective it is waiting in: the
 * sender drains an idle ring within milliseconds, whatever the caller does.
 *
 * Reentrancy: NCCL may call its own exported API internally (ncclBcast ->
 * ncclBroadcast, ncclCommInitAll -> ncclGroupStart ...). Those calls resolve
 * to these wrappers too; a thread-local flag makes them plain forwards, so
 * one user call is one record.
 *
 * Groups: NCCL groups are per thread, so is the nesting kept here. The
 * outermost ncclGroupStart takes a new group id; collectives inside record
 * it with their depth; the outermost ncclGroupEnd, where NCCL launches the
 * group's kernels, writes one FSS_REC_GROUP record.
 *
 * CUPTI external correlation: a collective outside any group is bracketed
 * by cupti_push_correlation(seq) / cupti_pop_correlation(), seq being the
 * collective record's own seq. A group's kernels are launched by the
 * outermost ncclGroupEnd, which is bracketed with the seq of the group's
 * first collective: a kernel tied to seq S belongs to the collective S if
 * that collective has group_id 0, else to its whole group (every collective
 * record with the same group_id).
 *
 * Communicators: each live ncclComm_t goes into the communicator table
 * (comms.c) with its fss_rec_comm, so that a split can derive its child's
 * id_hash from the parent's and a new sink can be told about every live
 * communicator.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <nccl.h>

#include "agent/agent.h"
#include "agent/comms.h"
#include "agent/cupti.h"
#include "agent/emit.h"
#include "agent/nccl_wrap.h"
#include "agent/strings.h"
#include "common/clock.h"
#include "common/record.h"
#include "common/ring.h"

#define WRAP_API __attribute__((visibility("default")))

/* ---- the real functions -------------------------------------------------- */

#define WRAP_FUNCTIONS(X)                                                                                              \
	X(ncclAllGather)                                                                                               \
	X(ncclReduceScatter)                                                                                           \
	X(ncclAllReduce)                                                                                               \
	X(ncclBroadcast)                                                                                               \
	X(ncclBcast)                                                                                                   \
	X(ncclReduce)                                                                                                  \
	X(ncclSend)                                                                                                    \
	X(ncclRecv)                                                                                                    \
	X(ncclAlltoAll)                                                                                                \
	X(ncclGather)                                                                                                  \
	X(ncclScatter)                                                                                                 \
	X(ncclGroupStart)                                                                                              \
	X(ncclGroupEnd)                                                                                                \
	X(ncclCommInitRank)                                                                                            \
	X(ncclCommInitRankConfig)                                                                                      \
	X(ncclCommInitAll)                                                                                             \
	X(ncclCommSplit)                                                                                               \
	X(ncclCommDestroy)                                                                                             \
	X(ncclCommAbort)                                                                                               \
	X(ncclCommFinalize)                                                                                            \
	X(ncclCommCount)                                                                                               \
	X(ncclCommUserRank)                                                                                            \
	X(ncclCommCuDevice)

enum wrap_fn {
#define WRAP_ENUM(name) WRAP_FN_##name,
	WRAP_FUNCTIONS(WRAP_ENUM)
#undef WRAP_ENUM
	    WRAP_FN_COUNT
};

static const char *const wrap_fn_names[WRAP_FN_COUNT] = {
#define WRAP_NAME(name) #name,
    WRAP_FUNCTIONS(WRAP_NAME)
#undef WRAP_NAME
};

static void *_Atomic wrap_real_fn[WRAP_FN_COUNT];

/* Is p inside this library? (Never forward to ourselves: another copy of an
 * interposer is fine, this one would loop.) */
static int wrap_is_self(void *p)
{
	Dl_info mine, theirs;

	if (!dladdr((void *)wrap_is_self, &mine) || !dladdr(p, &theirs))
		return 0;
	return mine.dli_fbase == theirs.dli_fbase;
}

static void *wrap_lookup(void *handle, const char *name)
{
	char pname[64];
	void *p;

	snprintf(pname, sizeof(pname), "p%s", name);
	p = dlsym(handle, pname);
	if (p && wrap_is_self(p))
		p = NULL;
	if (!p) {
		p = dlsym(handle, name);
		if (p && wrap_is_self(p))
			p = NULL;
	}
	return p;
}

/* The slow path, once per function (racing threads find the same answer). */
static __attribute__((noinline)) void *wrap_resolve(enum wrap_fn fn)
{
	static const char *const sonames[] = {"libnccl.so.2", "libnccl.so"};
	int saved = errno;
	void *p = wrap_lookup(RTLD_NEXT, wrap_fn_names[fn]);

	for (size_t i = 0; !p && i < sizeof(sonames) / sizeof(sonames[0]); i++) {
		void *h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			p = wrap_lookup(h, wrap_fn_names[fn]);
			dlclose(h); /* RTLD_NOLOAD took a reference: give it back */
			if (p)
				agent_debug("%s found in %s, outside the global scope", wrap_fn_names[fn], sonames[i]);
		}
	}
	if (p)
		atomic_store_explicit(&wrap_real_fn[fn], p, memory_order_release);
	else
		agent_debug("the real %s was not found: the call returns ncclInternalError", wrap_fn_names[fn]);
	errno = saved;
	return p;
}

static inline void *wrap_real(enum wrap_fn fn)
{
	void *p = atomic_load_explicit(&wrap_real_fn[fn], memory_order_acquire);

	if (__builtin_expect(p != NULL, 1))
		return p;
	return wrap_resolve(fn);
}

/* The real function, typed as nccl.h declares it. */
#define REAL(name) ((__typeof__(&name))wrap_real(WRAP_FN_##name))

/* ---- per-thread state ------------------------------------------------------ */

struct wrap_thread {
	int inside;		  /* in a wrapper: NCCL's own calls to its API are forwarded only */
	int depth;		  /* ncclGroupStart nesting */
	uint32_t group_id;	  /* the outermost group's id, while depth > 0 */
	uint32_t group_calls;	  /* collectives issued in that group */
	uint64_t group_start_ns;  /* outermost ncclGroupStart */
	uint64_t group_first_seq; /* seq of its first collective: the group's correlation id */
};

/* initial-exec: a plain %fs-relative access, no __tls_get_addr call. The
 * agent is normally preloaded (static TLS); when dlopen'd through NVTX
 * injection these 32 bytes come from glibc's static TLS surplus. */
static __thread struct wrap_thread wrap_tls __attribute__((tls_model("initial-exec")));

static _Atomic uint32_t wrap_group_ids;

int agent_in_nccl_call(void)
{
	return wrap_tls.inside;
}

/* The state, initialising the agent if a constructor order or a dlopen
 * made this call come first. */
static inline int wrap_state(void)
{
	int st = atomic_load_explicit(&agent_state_now, memory_order_relaxed);

	if (__builtin_expect(st == AGENT_OFF, 0)) {
		agent_init();
		st = atomic_load_explicit(&agent_state_now, memory_order_relaxed);
	}
	return st;
}

static inline void wrap_activate(void)
{
	if (__builtin_expect(!atomic_load_explicit(&agent_activated, memory_order_relaxed), 0))
		agent_activate();
}

/* ---- collectives ------------------------------------------------------------ */

enum wrap_mode { WRAP_FORWARD = 0, WRAP_COUNT, WRAP_RECORD };

struct wrap_call {
	int mode;
	int correlated;
	uint64_t seq;
	uint64_t enter_ns;
};

struct coll_args {
	uint8_t op;
	int dtype;
	int redop;
	int peer;
	size_t count;
	const void *sendbuff;
	const void *recvbuff;
	ncclComm_t comm;
	cudaStream_t stream;
};

/* Element sizes of ncclDataType_t (fss_dtype has the same numbering), here
 * rather than a call into record_dtype_bytes on every collective. */
static const uint8_t coll_dtype_bytes[FSS_DTYPE_MAX] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

/* Out-of-range values are kept (truncated) rather than lost: the dtype enum
 * is NCCL's own numbering. */
static inline uint8_t coll_dtype(const struct coll_args *a)
{
	unsigned dtype = (unsigned)a->dtype;

	return dtype < 255 ? (uint8_t)dtype : 254;
}

static inline uint8_t coll_redop(const struct coll_args *a)
{
	return a->redop < 0 ? FSS_REDOP_NONE : (a->redop < 255 ? (uint8_t)a->redop : 254);
}

/* The fields an enter record and its collective record share, written in
 * place: a macro, the two being different structs (stores only: no lock, no
 * allocation, no syscall). */
#define COLL_RECORD_COMMON(r, rec_type, c, a)                                                                          \
	do {                                                                                                           \
		(r)->head.type = (rec_type);                                                                           \
		(r)->head.size = sizeof(*(r));                                                                         \
		(r)->head.source = 0;                                                                                  \
		(r)->seq = (c)->seq;                                                                                   \
		(r)->comm = (uint64_t)(uintptr_t)(a)->comm;                                                            \
		(r)->stream = (uint64_t)(uintptr_t)(a)->stream;                                                        \
		(r)->count = (a)->count;                                                                               \
		(r)->op = (a)->op;                                                                                     \
		(r)->dtype = coll_dtype(a);                                                                            \
		(r)->redop = coll_redop(a);                                                                            \
		(r)->path = FSS_PATH_INTERPOSE;                                                                        \
		(r)->reserved = 0;                                                                                     \
	} while (0)

/* The enter record of a collective about to be called, built in place in a
 * reserved slot and committed at once: one ring reservation (a CAS), no
 * lock, no allocation, no syscall. Every field is written (reserved
 * included), so no stale bytes of an older record remain. */
static inline void coll_enter(const struct wrap_call *c, const struct coll_args *a)
{
	ring_t *ring = agent_ring();
	void *slot;
	if (!ring || ring_reserve(ring, sizeof(struct fss_rec_enter), &slot) != 0)
		return; /* full: dropped and counted by the ring */
	struct fss_rec_enter *r = slot;
	COLL_RECORD_COMMON(r, FSS_REC_ENTER, c, a);
	r->enter_ns = c->enter_ns;
	r->thread = agent_thread_id();
	r->peer = a->peer;
	r->group_id = wrap_tls.depth > 0 ? wrap_tls.group_id : 0;
	r->sync_id = 0;
	r->kind = FSS_ENTER_COLLECTIVE;
	ring_commit(ring, slot);
}

static inline void coll_begin(struct wrap_call *c, const struct coll_args *a)
{
	c->mode = WRAP_FORWARD;
	c->correlated = 0;
	if (wrap_tls.inside)
		return;
	int st = wrap_state();
	if (st == AGENT_OFF)
		return;
	wrap_activate();
	c->seq = atomic_fetch_add_explicit(&agent_counters.collectives, 1, memory_order_relaxed) + 1;
	wrap_tls.inside = 1;
	if (wrap_tls.depth > 0 && wrap_tls.group_calls++ == 0)
		wrap_tls.group_first_seq = c->seq;
	if (st != AGENT_ON) {
		c->mode = WRAP_COUNT;
		return;
	}
	c->mode = WRAP_RECORD;
	if (wrap_tls.depth == 0) {
		cupti_push_correlation(c->seq);
		c->correlated = 1;
	}
	c->enter_ns = clock_mono_ns();
	coll_enter(c, a);
}

static inline void coll_end(const struct wrap_call *c, const struct coll_args *a, ncclResult_t res)
{
	if (c->mode == WRAP_FORWARD)
		return;
	uint64_t exit_ns = c->mode == WRAP_RECORD ? clock_mono_ns() : 0;
	if (c->correlated)
		cupti_pop_correlation();
	wrap_tls.inside = 0;
	if (c->mode != WRAP_RECORD)
		return;
	ring_t *ring = agent_ring();
	void *slot;
	if (!ring || ring_reserve(ring, sizeof(struct fss_rec_collective), &slot) != 0)
		return; /* full: dropped and counted by the ring */
	/* Built in place in the reserved slot: no copy. Every field is
	 * written (reserved included), so no stale bytes of an older record
	 * remain. Commit follows at once. */
	struct fss_rec_collective *r = slot;
	int depth = wrap_tls.depth;
	unsigned dtype = (unsigned)a->dtype;
	COLL_RECORD_COMMON(r, FSS_REC_COLLECTIVE, c, a);
	r->bytes = dtype < FSS_DTYPE_MAX ? (uint64_t)a->count * coll_dtype_bytes[dtype] : 0; /* 0: unknown size */
	r->sendbuff = (uint64_t)(uintptr_t)a->sendbuff;
	r->recvbuff = (uint64_t)(uintptr_t)a->recvbuff;
	r->enter_ns = c->enter_ns;
	r->exit_ns = exit_ns;
	r->group_id = depth > 0 ? wrap_tls.group_id : 0;
	r->thread = agent_thread_id();
	r->peer = a->peer;
	r->result = (int32_t)res;
	r->group_depth = (uint16_t)depth;
	ring_commit(ring, slot);
}

/* The body of every collective wrapper: resolve, gather the arguments,
 * bracket (the enter record goes out before the real call), forward,
 * record. The arguments are only copied into a struct on the stack: in
 * states OFF and DORMANT nothing else of them is used. */
#define WRAP_COLLECTIVE(name, args_init, ...)                                                                          \
	do {                                                                                                           \
		__typeof__(&name) real = REAL(name);                                                                   \
		struct wrap_call c;                                                                                    \
		if (__builtin_expect(!real, 0))                                                                        \
			return ncclInternalError;                                                                      \
		const struct coll_args a = args_init;                                                                  \
		coll_begin(&c, &a);                                                                                    \
		ncclResult_t res = real(__VA_ARGS__);                                                                  \
		coll_end(&c, &a, res);                                                                                 \
		return res;                                                                                            \
	} while (0)

#define COLL_ARGS(OP, COUNT, DTYPE, REDOP, PEER, SEND, RECV, COMM, STREAM)                                             \
	{                                                                                                              \
		.op = (OP), .count = (COUNT), .dtype = (int)(DTYPE), .redop = (REDOP), .peer = (PEER),                 \
		.sendbuff = (SEND), .recvbuff = (RECV), .comm = (COMM), .stream = (STREAM)                             \
	}

WRAP_API ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
				    ncclComm_t comm, cudaStream_t stream)
{
	WRAP_COLLECTIVE(ncclAllGather,
			COLL_ARGS(FSS_OP_ALLGATHER, sendcount, datatype, -1, -1, sendbuff, recvbuff, comm, stream),
			sendbuff, recvbuff, sendcount, datatype, comm, stream);
}

WRAP_API ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
					ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	WRAP_COLLECTIVE(
	    ncclReduceScatter,
	    COLL_ARGS(FSS_OP_REDUCESCATTER, recvcount, datatype, (int)op, -1, sendbuff, recvbuff, comm, stream),
	    sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}

WRAP_API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	WRAP_COLLECTIVE(ncclAllReduce,
			COLL_ARGS(FSS_OP_ALLREDUCE, count, datatype, (int)op, -1, sendbuff, recvbuff, comm, stream),
			sendbuff, recvbuff, count, datatype, op, comm, stream);
}

WRAP_API ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				    int root, ncclComm_t comm, cudaStream_t stream)
{
	WRAP_COLLECTIVE(ncclBroadcast,
			COLL_ARGS(FSS_OP_BROADCAST, count, datatype, -1, root, sendbuff, recvbuff, comm, stream),
			sendbuff, recvbuff, count, datatype, root, comm, stream);
}

WRAP_API ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
				cudaStream_t stream)
{
	WRAP_COLLECTIVE(ncclBcast, COLL_ARGS(FSS_OP_BROADCAST, count, datatype, -1, root, buff, buff, comm, stream),
			buff, count, datatype, root, comm, stream);
}

WRAP_API ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				 ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
	WRAP_COLLECTIVE(ncclReduce,
			COLL_ARGS(FSS_OP_REDUCE, count, datatype, (int)op, root, sendbuff, recvbuff, comm, stream),
			sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

WRAP_API ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
			       cudaStream_t stream)
{
	WRAP_COLLECTIVE(ncclSend, COLL_ARGS(FSS_OP_SEND, count, datatype, -1, peer, sendbuff, NULL, comm, stream),
			sendbuff, count, datatype, peer, comm, stream);
}

WRAP_API ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
			       cudaStream_t stream)
{
	WRAP_COLLECTIVE(ncclRecv, COLL_ARGS(FSS_OP_RECV, count, datatype, -1, peer, NULL, recvbuff, comm, stream),
			recvbuff, count, datatype, peer, comm, stream);
}

WRAP_API ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				   ncclComm_t comm, cudaStream_t stream)
{
	WRAP_COLLECTIVE(ncclAlltoAll,
			COLL_ARGS(FSS_OP_ALLTOALL, count, datatype, -1, -1, sendbuff, recvbuff, comm, stream), sendbuff,
			recvbuff, count, datatype, comm, stream);
}

WRAP_API ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
				 ncclComm_t comm, cudaStream_t stream)
{
	WRAP_COLLECTIVE(ncclGather,
			COLL_ARGS(FSS_OP_GATHER, count, datatype, -1, root, sendbuff, recvbuff, comm, stream), sendbuff,
			recvbuff, count, datatype, root, comm, stream);
}

WRAP_API ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
				  ncclComm_t comm, cudaStream_t stream)
{
	WRAP_COLLECTIVE(ncclScatter,
			COLL_ARGS(FSS_OP_SCATTER, count, datatype, -1, root, sendbuff, recvbuff, comm, stream),
			sendbuff, recvbuff, count, datatype, root, comm, stream);
}

/* ---- groups ------------------------------------------------------------------- */

WRAP_API ncclResult_t ncclGroupStart(void)
{
	__typeof__(&ncclGroupStart) real = REAL(ncclGroupStart);
	if (!real)
		return ncclInternalError;
	if (wrap_tls.inside || wrap_state() == AGENT_OFF)
		return real();
	wrap_activate();
	uint64_t enter_ns = clock_mono_ns();
	wrap_tls.inside = 1;
	ncclResult_t res = real();
	wrap_tls.inside = 0;
	if (res == ncclSuccess && wrap_tls.depth++ == 0) {
		wrap_tls.group_id = atomic_fetch_add_explicit(&wrap_group_ids, 1, memory_order_relaxed) + 1;
		wrap_tls.group_calls = 0;
		wrap_tls.group_first_seq = 0;
		wrap_tls.group_start_ns = enter_ns;
	}
	return res;
}

WRAP_API ncclResult_t ncclGroupEnd(void)
{
	__typeof__(&ncclGroupEnd) real = REAL(ncclGroupEnd);
	if (!real)
		return ncclInternalError;
	int st;
	if (wrap_tls.inside || (st = wrap_state()) == AGENT_OFF)
		return real();
	int outermost = wrap_tls.depth == 1;
	int correlated = 0;
	uint64_t enter_ns = clock_mono_ns();
	if (outermost && st == AGENT_ON && wrap_tls.group_calls > 0) {
		/* The group's kernels are launched here. */
		cupti_push_correlation(wrap_tls.group_first_seq);
		correlated = 1;
	}
	wrap_tls.inside = 1;
	ncclResult_t res = real();
	wrap_tls.inside = 0;
	uint64_t exit_ns = clock_mono_ns();
	if (correlated)
		cupti_pop_correlation();
	if (wrap_tls.depth > 0)
		wrap_tls.depth--; /* NCCL leaves the group even when the launch fails */
	if (outermost) {
		if (st == AGENT_ON) {
			struct fss_rec_group g = {
			    .head = {.type = FSS_REC_GROUP, .size = sizeof(g), .source = 0},
			    .group_id = wrap_tls.group_id,
			    .calls = wrap_tls.group_calls,
			    .start_ns = wrap_tls.group_start_ns,
			    .end_enter_ns = enter_ns,
			    .end_exit_ns = exit_ns,
			    .result = (int32_t)res,
			    .thread = agent_thread_id(),
			};
			agent_emit(&g);
		}
		wrap_tls.group_id = 0;
		wrap_tls.group_calls = 0;
	}
	return res;
}

/* ---- communicator life cycle ------------------------------------------------------ */

struct comm_call {
	int state;
	uint64_t enter_ns;
	uint64_t exit_ns;
};

static int comm_begin(struct comm_call *c)
{
	if (wrap_tls.inside)
		return 0;
	c->state = wrap_state();
	if (c->state == AGENT_OFF)
		return 0;
	wrap_activate();
	wrap_tls.inside = 1;
	c->enter_ns = clock_mono_ns();
	return 1;
}

static void comm_end(struct comm_call *c)
{
	c->exit_ns = clock_mono_ns();
	wrap_tls.inside = 0;
}

/* Build, remember and emit the record of a new communicator. nranks and rank
 * come from the communicator itself when it answers (a non-blocking init
 * still in progress does not: then from the arguments). */
static void comm_note(const struct comm_call *c, uint16_t event, ncclComm_t comm, uint64_t id_hash, int nranks,
		      int rank, ncclComm_t parent, int color, int key, uint32_t name, ncclResult_t res)
{
	struct fss_rec_comm r = {
	    .head = {.type = FSS_REC_COMM, .size = sizeof(r), .source = 0},
	    .comm = (uint64_t)(uintptr_t)comm,
	    .id_hash = comm ? id_hash : 0,
	    .parent_comm = (uint64_t)(uintptr_t)parent,
	    .enter_ns = c->enter_ns,
	    .exit_ns = c->exit_ns,
	    .nranks = nranks,
	    .rank = rank,
	    .device = -1,
	    .color = color,
	    .key = key,
	    .result = (int32_t)res,
	    .event = event,
	    .path = FSS_PATH_INTERPOSE,
	    .thread = agent_thread_id(),
	    .name = name,
	};
	if (comm && res == ncclSuccess) {
		__typeof__(&ncclCommCount) count_fn = REAL(ncclCommCount);
		__typeof__(&ncclCommUserRank) rank_fn = REAL(ncclCommUserRank);
		__typeof__(&ncclCommCuDevice) device_fn = REAL(ncclCommCuDevice);
		int v;

		if (count_fn && count_fn(comm, &v) == ncclSuccess)
			r.nranks = v;
		if (rank_fn && rank_fn(comm, &v) == ncclSuccess)
			r.rank = v;
		if (device_fn && device_fn(comm, &v) == ncclSuccess)
			r.device = v;
	}
	uint64_t ring_before = COMMS_NOT_IN_RING;
	if (c->state == AGENT_ON) {
		/* Into the ring first, then into the table: a replay that runs in
		 * between misses it in the table but finds it in the ring. */
		ring_t *ring = agent_ring();
		uint64_t before = ring ? ring_pushed(ring) : 0;
		if (ring && ring_push(ring, &r, sizeof(r)) == 0)
			ring_before = before;
	}
	if (comm && (res == ncclSuccess || res == ncclInProgress))
		comms_put(&r, ring_before);
	if (c->state == AGENT_ON && comm && res == ncclSuccess)
		agent_cupti_maybe_start(); /* CUDA is up now: late enable */
}

/* The name a job gave a communicator (ncclConfig_t.commName), interned; 0
 * when there is none. The struct may come from an older nccl.h: its size
 * says which fields it has (NCCL only ever appends), its magic that it was
 * initialised with NCCL_CONFIG_INITIALIZER. */
static uint32_t config_name(const ncclConfig_t *config)
{
	if (!config || config->magic != 0xcafebeef ||
	    config->size < offsetof(ncclConfig_t, commName) + sizeof(config->commName))
		return FSS_STRING_NONE;
	const char *name = config->commName;
	if (name == NCCL_CONFIG_UNDEF_PTR || !name[0])
		return FSS_STRING_NONE;
	return agent_intern(name, (long)strnlen(name, FSS_STRING_MAX_BYTES));
}

WRAP_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	__typeof__(&ncclCommInitRank) real = REAL(ncclCommInitRank);
	struct comm_call c;
	if (!real)
		return ncclInternalError;
	if (!comm_begin(&c))
		return real(comm, nranks, commId, rank);
	ncclResult_t res = real(comm, nranks, commId, rank);
	comm_end(&c);
	ncclComm_t made = (comm && (res == ncclSuccess || res == ncclInProgress)) ? *comm : NULL;
	comm_note(&c, FSS_COMM_INIT, made, record_hash_bytes(&commId, sizeof(commId)), nranks, rank, NULL, -1, -1,
		  FSS_STRING_NONE, res);
	return res;
}

WRAP_API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
					     ncclConfig_t *config)
{
	__typeof__(&ncclCommInitRankConfig) real = REAL(ncclCommInitRankConfig);
	struct comm_call c;
	if (!real)
		return ncclInternalError;
	if (!comm_begin(&c))
		return real(comm, nranks, commId, rank, config);
	ncclResult_t res = real(comm, nranks, commId, rank, config);
	comm_end(&c);
	ncclComm_t made = (comm && (res == ncclSuccess || res == ncclInProgress)) ? *comm : NULL;
	comm_note(&c, FSS_COMM_INIT, made, record_hash_bytes(&commId, sizeof(commId)), nranks, rank, NULL, -1, -1,
		  config_name(config), res);
	return res;
}

WRAP_API ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	static _Atomic uint64_t init_all_calls;
	__typeof__(&ncclCommInitAll) real = REAL(ncclCommInitAll);
	struct comm_call c;
	if (!real)
		return ncclInternalError;
	if (!comm_begin(&c))
		return real(comms, ndev, devlist);
	ncclResult_t res = real(comms, ndev, devlist);
	comm_end(&c);
	/* No unique id: all ndev communicators live in this process, so a
	 * per-process key is enough to tie them together. */
	struct {
		uint64_t pid;
		uint64_t call;
	} key = {(uint64_t)getpid(), atomic_fetch_add(&init_all_calls, 1)};
	uint64_t id_hash = record_hash_bytes(&key, sizeof(key));
	if (res != ncclSuccess || !comms || ndev < 1) {
		comm_note(&c, FSS_COMM_INIT, NULL, 0, ndev, -1, NULL, -1, -1, FSS_STRING_NONE, res);
		return res;
	}
	for (int i = 0; i < ndev; i++)
		comm_note(&c, FSS_COMM_INIT, comms[i], id_hash, ndev, i, NULL, -1, -1, FSS_STRING_NONE, res);
	return res;
}

WRAP_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
	__typeof__(&ncclCommSplit) real = REAL(ncclCommSplit);
	struct comm_call c;
	if (!real)
		return ncclInternalError;
	if (!comm_begin(&c))
		return real(comm, color, key, newcomm, config);
	/* Every rank of the parent calls ncclCommSplit the same number of times
	 * (it is collective), so (parent id_hash, color, number of the split)
	 * is the same on all ranks of the child. */
	uint64_t id_hash = 0, split_no;
	struct fss_rec_comm prec;
	if (comms_next_split((uint64_t)(uintptr_t)comm, &prec, &split_no) == 0) {
		unsigned char k[20];
		int32_t col = color;

		memcpy(k, &prec.id_hash, 8);
		memcpy(k + 8, &split_no, 8);
		memcpy(k + 16, &col, 4);
		id_hash = record_hash_bytes(k, sizeof(k));
	}
	ncclResult_t res = real(comm, color, key, newcomm, config);
	comm_end(&c);
	ncclComm_t made = (newcomm && (res == ncclSuccess || res == ncclInProgress)) ? *newcomm : NULL;
	comm_note(&c, FSS_COMM_SPLIT, made, id_hash, -1, -1, comm, color, key, config_name(config), res);
	return res;
}

/* Destroy and abort: the record carries what the communicator was. */
static void comm_note_end(const struct comm_call *c, uint16_t event, ncclComm_t comm, int known,
			  const struct fss_rec_comm *was, ncclResult_t res)
{
	if (c->state != AGENT_ON)
		return;
	struct fss_rec_comm r = {
	    .head = {.type = FSS_REC_COMM, .size = sizeof(r), .source = 0},
	    .comm = (uint64_t)(uintptr_t)comm,
	    .id_hash = known ? was->id_hash : 0,
	    .parent_comm = known ? was->parent_comm : 0,
	    .enter_ns = c->enter_ns,
	    .exit_ns = c->exit_ns,
	    .nranks = known ? was->nranks : -1,
	    .rank = known ? was->rank : -1,
	    .device = known ? was->device : -1,
	    .color = -1,
	    .key = -1,
	    .result = (int32_t)res,
	    .event = event,
	    .path = FSS_PATH_INTERPOSE,
	    .thread = agent_thread_id(),
	};
	agent_emit(&r);
}

static ncclResult_t comm_end_of_life(ncclComm_t comm, uint16_t event, enum wrap_fn fn)
{
	ncclResult_t (*real)(ncclComm_t) = (ncclResult_t(*)(ncclComm_t))wrap_real(fn);
	struct comm_call c;
	struct fss_rec_comm was;
	if (!real)
		return ncclInternalError;
	if (!comm_begin(&c))
		return real(comm);
	/* Out of the table before the call: once freed, the handle may come
	 * back from another thread's init at once. */
	int known = comm && comms_take((uint64_t)(uintptr_t)comm, &was) == 0;
	ncclResult_t res = real(comm);
	comm_end(&c);
	if (known && res != ncclSuccess && res != ncclInProgress)
		comms_put(&was, COMMS_NOT_IN_RING); /* still alive */
	comm_note_end(&c, event, comm, known, &was, res);
	return res;
}

WRAP_API ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	return comm_end_of_life(comm, FSS_COMM_DESTROY, WRAP_FN_ncclCommDestroy);
}

WRAP_API ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	return comm_end_of_life(comm, FSS_COMM_ABORT, WRAP_FN_ncclCommAbort);
}

/* Finalize is forwarded, not recorded: the handle lives on until
 * ncclCommDestroy, which is recorded (one end-of-life record per
 * communicator). */
WRAP_API ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	__typeof__(&ncclCommFinalize) real = REAL(ncclCommFinalize);
	if (!real)
		return ncclInternalError;
	if (wrap_tls.inside)
		return real(comm);
	wrap_tls.inside = 1;
	ncclResult_t res = real(comm);
	wrap_tls.inside = 0;
	return res;
}
