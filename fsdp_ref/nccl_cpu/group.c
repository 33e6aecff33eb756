/* fsdp_ref/nccl_cpu/group.c: per-thread queue of grouped calls. */
#include "fsdp_ref/nccl_cpu/group.h"

#include <stdlib.h>

#include "fsdp_ref/nccl_cpu/coll.h"
#include "fsdp_ref/nccl_cpu/comm.h"
#include "fsdp_ref/nccl_cpu/error.h"
#include "fsdp_ref/nccl_cpu/link_model.h"
#include "fsdp_ref/nccl_cpu/op.h"
#include "fsdp_ref/nccl_cpu/p2p.h"
#include "fsdp_ref/nccl_cpu/sync.h"

struct group_state {
	int depth;	    /* GroupStart nesting */
	ncclResult_t error; /* first failed argument check inside the group */
	struct op *ops;	    /* queued calls, heap, freed at the outermost end */
	size_t nops;
	size_t cap;
};

static __thread struct group_state group_tls;

ncclResult_t group_start(void)
{
	group_tls.depth++;
	return ncclSuccess;
}

ncclResult_t group_note_error(ncclResult_t res)
{
	if (group_tls.depth > 0 && group_tls.error == ncclSuccess)
		group_tls.error = res;
	return res;
}

static int op_is_collective(const struct op *op)
{
	return op->kind != OP_SEND && op->kind != OP_RECV;
}

static ncclResult_t group_execute(struct op *ops, size_t nops)
{
	/* Arrival stamps are compared with other ranks' (the barrier's, the
	 * Send headers'): on the clock all processes share. */
	uint64_t start = sync_shared_now_ns();
	for (size_t i = 0; i < nops; i++) {
		struct ncclComm *c = ops[i].comm;
		c->group_active = 1;
		c->group_has_collective = 0;
		c->group_t0_ns = start;
		c->group_wire_bytes = 0;
		c->group_sent_bytes = 0;
		c->group_recv_bytes = 0;
	}
	ncclResult_t res = ncclSuccess;
	for (size_t i = 0; i < nops && res == ncclSuccess; i++) {
		struct op *op = &ops[i];
		if (!op_is_collective(op))
			continue;
		struct ncclComm *c = op->comm;
		if (c->async_error != ncclSuccess) { /* failed earlier in this group */
			res = c->async_error;
			break;
		}
		uint64_t t_last = 0;
		res = coll_run(op, &t_last);
		/* Time counts from when the last rank arrived at the group, which
		 * is when it arrived at its first collective. */
		if (!c->group_has_collective && t_last > c->group_t0_ns)
			c->group_t0_ns = t_last;
		c->group_has_collective = 1;
		c->group_wire_bytes += op_wire_bytes(op, c->nranks);
	}
	if (res == ncclSuccess)
		res = p2p_run(ops, nops, start);
	uint64_t deadline = 0;
	for (size_t i = 0; i < nops; i++) {
		struct ncclComm *c = ops[i].comm;
		if (!c->group_active)
			continue;
		c->group_active = 0;
		uint64_t p2p = c->group_sent_bytes > c->group_recv_bytes ? c->group_sent_bytes : c->group_recv_bytes;
		uint64_t d = link_model_deadline(&c->link, c->group_t0_ns, c->group_wire_bytes + p2p);
		if (d > deadline)
			deadline = d;
	}
	if (res == ncclSuccess)
		link_model_sleep_until(deadline);
	return res;
}

ncclResult_t group_end(void)
{
	if (group_tls.depth == 0) {
		error_set("nccl_cpu: ncclGroupEnd without a matching ncclGroupStart");
		return ncclInvalidUsage;
	}
	if (--group_tls.depth > 0)
		return ncclSuccess;
	ncclResult_t res = group_tls.error;
	if (res == ncclSuccess && group_tls.nops > 0)
		res = group_execute(group_tls.ops, group_tls.nops);
	free(group_tls.ops);
	group_tls.ops = NULL;
	group_tls.nops = group_tls.cap = 0;
	group_tls.error = ncclSuccess;
	return res;
}

ncclResult_t group_submit(const struct op *op)
{
	if (group_tls.depth == 0) {
		struct op single = *op;
		return group_execute(&single, 1);
	}
	if (group_tls.nops == group_tls.cap) {
		size_t cap = group_tls.cap ? group_tls.cap * 2 : 16;
		struct op *grown = realloc(group_tls.ops, cap * sizeof(*grown));
		if (!grown) {
			error_set("nccl_cpu: %s: out of memory queueing a grouped call", op_name(op->kind));
			return group_note_error(ncclSystemError);
		}
		group_tls.ops = grown;
		group_tls.cap = cap;
	}
	group_tls.ops[group_tls.nops++] = *op;
	return ncclSuccess;
}
