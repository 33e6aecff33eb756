/* fsdp_ref/nccl_cpu/coll.c: AllGather, ReduceScatter, AllReduce, Broadcast
 * and Reduce over the staging sets of the shared segment.
 *
 * The protocol, one barrier per chunk. Barriers are numbered by
 * comm->barriers, which advances identically on every rank; the chunk
 * moved through barrier b is staged in set b & 1:
 *   write my part into set b & 1 -> barrier b -> read set b & 1.
 * A rank writes set b & 1 again only before barrier b + 2, that is after
 * passing barrier b + 1, which every rank reaches only once it finished
 * reading set b & 1. So the two sets alternate without a second barrier.
 *
 * AllReduce and Reduce need two phases per chunk (reduce, then gather the
 * reduced pieces); they are pipelined: after barrier b rank r reduces its
 * r-th n-th of chunk b into out[b & 1] and, in the same step, copies out
 * the previous chunk (complete in out[(b - 1) & 1] since barrier b). One
 * extra barrier at the end releases the last chunk. Every element is
 * reduced by exactly one rank, in rank order 0..n-1. */
#include "fsdp_ref/nccl_cpu/coll.h"

#include <errno.h>
#include <string.h>

#include "fsdp_ref/nccl_cpu/comm.h"
#include "fsdp_ref/nccl_cpu/op.h"
#include "fsdp_ref/nccl_cpu/reduce.h"
#include "fsdp_ref/nccl_cpu/sync.h"

static int op_reduces(enum op_kind kind)
{
	return kind == OP_REDUCE_SCATTER || kind == OP_ALLREDUCE || kind == OP_REDUCE;
}

static int op_has_root(enum op_kind kind)
{
	return kind == OP_BROADCAST || kind == OP_REDUCE;
}

static struct coll_desc coll_describe(const struct op *op)
{
	struct coll_desc d = {
	    .kind = (int32_t)op->kind,
	    .dtype = (int32_t)op->dtype,
	    .redop = op_reduces(op->kind) ? (int32_t)op->redop : 0,
	    .root = op_has_root(op->kind) ? (int32_t)op->root : 0,
	    .count = op->count,
	};
	return d;
}

/* The staging set the next barrier publishes. */
static unsigned coll_set(const struct ncclComm *c)
{
	return (unsigned)(c->barriers & 1);
}

/* Barrier number comm->barriers. For the first barrier of an operation it
 * also checks that every rank called the same collective: each rank
 * compares all descriptors with its own, so if any differ every rank sees
 * it, and all fail together instead of some waiting forever. */
static ncclResult_t coll_sync(struct op *op, int first, uint64_t *t_last_ns)
{
	struct ncclComm *c = op->comm;
	unsigned parity = coll_set(c);
	int rc = sync_barrier(c, first ? t_last_ns : NULL);
	if (rc)
		return comm_fail_wait(c, rc, op_name(op->kind));
	if (!first)
		return ncclSuccess;
	struct coll_desc mine = coll_describe(op);
	for (int r = 0; r < c->nranks; r++) {
		struct coll_desc d = c->ranks[r].desc[parity];
		if (memcmp(&d, &mine, sizeof(d)) != 0)
			return comm_fail(c, ncclInvalidUsage,
					 "%s(count=%llu, datatype=%d, op=%d, root=%d) here, but rank %d "
					 "called %s(count=%llu, datatype=%d, op=%d, root=%d)",
					 op_name(op->kind), (unsigned long long)mine.count, mine.dtype, mine.redop,
					 mine.root, r, op_name((enum op_kind)d.kind), (unsigned long long)d.count,
					 d.dtype, d.redop, d.root);
	}
	return ncclSuccess;
}

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* recv[j*B + off ...] = slot j, for every rank j. */
static ncclResult_t coll_allgather(struct op *op, size_t es, uint64_t *t_last_ns)
{
	struct ncclComm *c = op->comm;
	const unsigned char *send = op->send;
	unsigned char *recv = op->recv;
	size_t per_rank = op->count * es, off = 0;
	ncclResult_t res;
	do {
		size_t len = min_size(c->layout.chunk, per_rank - off);
		unsigned set = coll_set(c);
		if (len)
			memcpy(comm_slot(c, set, c->rank), send + off, len);
		if ((res = coll_sync(op, off == 0, t_last_ns)) != ncclSuccess)
			return res;
		/* In place (send == recv + rank*B) this rewrites equal bytes
		 * of a chunk already staged. */
		for (int j = 0; j < c->nranks && len; j++)
			memcpy(recv + (size_t)j * per_rank + off, comm_slot(c, set, j), len);
		off += len;
	} while (off < per_rank);
	return ncclSuccess;
}

/* Each rank stages its n pieces of the chunk side by side in its slot;
 * rank r reduces piece r of every slot, in rank order, into recv. */
static ncclResult_t coll_reduce_scatter(struct op *op, size_t es, uint64_t *t_last_ns)
{
	struct ncclComm *c = op->comm;
	const unsigned char *send = op->send;
	unsigned char *recv = op->recv;
	int n = c->nranks;
	size_t per_rank = op->count * es, off = 0;
	size_t piece_cap = c->layout.chunk / (size_t)n / es * es;
	const void *src[SEGMENT_MAX_RANKS];
	ncclResult_t res;
	do {
		size_t len = min_size(piece_cap, per_rank - off);
		unsigned set = coll_set(c);
		for (int i = 0; i < n && len; i++)
			memcpy(comm_slot(c, set, c->rank) + (size_t)i * len, send + (size_t)i * per_rank + off, len);
		if ((res = coll_sync(op, off == 0, t_last_ns)) != ncclSuccess)
			return res;
		for (int j = 0; j < n; j++)
			src[j] = comm_slot(c, set, j) + (size_t)c->rank * len;
		/* In place, recv + off is send + rank*B + off: staged already. */
		if (len)
			reduce_run(op->dtype, op->redop, n, src, recv + off, len / es, n);
		off += len;
	} while (off < per_rank);
	return ncclSuccess;
}

/* AllReduce and Reduce, pipelined as described at the top. */
static ncclResult_t coll_allreduce(struct op *op, size_t es, uint64_t *t_last_ns)
{
	struct ncclComm *c = op->comm;
	const unsigned char *send = op->send;
	unsigned char *recv = op->recv;
	int n = c->nranks;
	int copy_out = op->kind == OP_ALLREDUCE || c->rank == op->root;
	size_t total = op->count * es, off = 0;
	size_t cap = c->layout.chunk / es * es;
	size_t prev_off = 0, prev_len = 0; /* the chunk reduced in the previous step */
	unsigned prev_set = 0;
	const void *src[SEGMENT_MAX_RANKS];
	ncclResult_t res;
	do {
		size_t len = min_size(cap, total - off);
		unsigned set = coll_set(c);
		if (len)
			memcpy(comm_slot(c, set, c->rank), send + off, len);
		if ((res = coll_sync(op, off == 0, t_last_ns)) != ncclSuccess)
			return res;
		/* Copy out before reducing: in place, recv + prev_off was
		 * consumed when that chunk was staged. */
		if (copy_out && prev_len)
			memcpy(recv + prev_off, comm_out(c, prev_set), prev_len);
		size_t elems = len / es;
		size_t lo = elems * (size_t)c->rank / (size_t)n;
		size_t hi = elems * (size_t)(c->rank + 1) / (size_t)n;
		for (int j = 0; j < n; j++)
			src[j] = comm_slot(c, set, j) + lo * es;
		if (hi > lo)
			reduce_run(op->dtype, op->redop, n, src, comm_out(c, set) + lo * es, hi - lo, n);
		prev_off = off;
		prev_len = len;
		prev_set = set;
		off += len;
	} while (off < total);
	/* The last chunk is complete once every rank reduced its piece. */
	if ((res = coll_sync(op, 0, NULL)) != ncclSuccess)
		return res;
	if (copy_out && prev_len)
		memcpy(recv + prev_off, comm_out(c, prev_set), prev_len);
	return ncclSuccess;
}

/* The root stages up to n chunks at once (the slots of a set are
 * contiguous). */
static ncclResult_t coll_broadcast(struct op *op, size_t es, uint64_t *t_last_ns)
{
	struct ncclComm *c = op->comm;
	const unsigned char *send = op->send;
	unsigned char *recv = op->recv;
	int is_root = c->rank == op->root;
	size_t total = op->count * es, off = 0;
	size_t cap = c->layout.chunk * (size_t)c->nranks;
	ncclResult_t res;
	do {
		size_t len = min_size(cap, total - off);
		unsigned char *staging = comm_slot(c, coll_set(c), 0);
		if (is_root && len) {
			memcpy(staging, send + off, len);
			if (recv + off != send + off)
				memmove(recv + off, send + off, len);
		}
		if ((res = coll_sync(op, off == 0, t_last_ns)) != ncclSuccess)
			return res;
		if (!is_root && len)
			memcpy(recv + off, staging, len);
		off += len;
	} while (off < total);
	return ncclSuccess;
}

ncclResult_t coll_run(struct op *op, uint64_t *t_last_ns)
{
	struct ncclComm *c = op->comm;
	size_t es = reduce_dtype_size(op->dtype);
	/* Once a rank gave up, barrier counts are stale: a late rank could
	 * otherwise "complete" a barrier the others have left. */
	if (atomic_load(&c->header->aborted))
		return comm_fail_wait(c, -ECONNABORTED, op_name(op->kind));
	c->ranks[c->rank].desc[coll_set(c)] = coll_describe(op);
	switch (op->kind) {
	case OP_ALLGATHER:
		return coll_allgather(op, es, t_last_ns);
	case OP_REDUCE_SCATTER:
		return coll_reduce_scatter(op, es, t_last_ns);
	case OP_ALLREDUCE:
	case OP_REDUCE:
		return coll_allreduce(op, es, t_last_ns);
	case OP_BROADCAST:
		return coll_broadcast(op, es, t_last_ns);
	default:
		return comm_fail(c, ncclInternalError, "coll_run: not a collective (%d)", (int)op->kind);
	}
}
