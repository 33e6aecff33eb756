/* fsdp_ref/nccl_cpu/op.c: names and wire bytes of operations. */
#include "fsdp_ref/nccl_cpu/op.h"

#include "fsdp_ref/nccl_cpu/reduce.h"

const char *op_name(enum op_kind kind)
{
	switch (kind) {
	case OP_ALLGATHER:
		return "ncclAllGather";
	case OP_REDUCE_SCATTER:
		return "ncclReduceScatter";
	case OP_ALLREDUCE:
		return "ncclAllReduce";
	case OP_BROADCAST:
		return "ncclBroadcast";
	case OP_REDUCE:
		return "ncclReduce";
	case OP_SEND:
		return "ncclSend";
	case OP_RECV:
		return "ncclRecv";
	}
	return "nccl?";
}

uint64_t op_wire_bytes(const struct op *op, int nranks)
{
	uint64_t n = (uint64_t)nranks;
	uint64_t bytes = (uint64_t)op->count * reduce_dtype_size(op->dtype);
	if (n <= 1)
		return 0;
	switch (op->kind) {
	case OP_ALLGATHER:	/* count is per rank: (n-1)/n of n*count */
	case OP_REDUCE_SCATTER: /* count is per rank: (n-1)/n of n*count */
		return (n - 1) * bytes;
	case OP_ALLREDUCE:
		return 2 * (n - 1) * bytes / n;
	case OP_BROADCAST:
	case OP_REDUCE:
		return bytes;
	default: /* Send/Recv are accounted by the group */
		return 0;
	}
}
