/*
 * nccl_names.c - how NCCL names its kernels and how PyTorch names a
 * collective, its dtype and its sizes (job_events.h), for exports that
 * other tools read as they read PyTorch profiler traces.
 */
#include "export/job_events.h"

#include <stdio.h>

/* NCCL's short type names in its kernel names (src/device/generate.py). */
static const char *nccl_type(int dtype)
{
	static const char *const names[] = {
	    [FSS_DTYPE_INT8] = "i8",	   [FSS_DTYPE_UINT8] = "u8",	      [FSS_DTYPE_INT32] = "i32",
	    [FSS_DTYPE_UINT32] = "u32",	   [FSS_DTYPE_INT64] = "i64",	      [FSS_DTYPE_UINT64] = "u64",
	    [FSS_DTYPE_FLOAT16] = "f16",   [FSS_DTYPE_FLOAT32] = "f32",	      [FSS_DTYPE_FLOAT64] = "f64",
	    [FSS_DTYPE_BFLOAT16] = "bf16", [FSS_DTYPE_FLOAT8E4M3] = "f8e4m3", [FSS_DTYPE_FLOAT8E5M2] = "f8e5m2",
	};

	return dtype >= 0 && dtype < FSS_DTYPE_MAX ? names[dtype] : "f32";
}

static const char *nccl_redop(int redop)
{
	switch (redop) {
	case FSS_REDOP_PROD:
		return "Prod";
	case FSS_REDOP_MAX:
	case FSS_REDOP_MIN:
		return "MinMax";
	case FSS_REDOP_AVG:
		return "PreMulSum";
	default:
		return "Sum";
	}
}

const char *export_nccl_kernel_name(int op, int dtype, int redop, char *buf, size_t len)
{
	static const char args[] = "(ncclDevKernelArgsStorage<4096ul>)";

	switch (op) {
	case FSS_OP_ALLGATHER:
		snprintf(buf, len, "ncclDevKernel_AllGather_RING_LL%s", args);
		break;
	case FSS_OP_BROADCAST:
		snprintf(buf, len, "ncclDevKernel_Broadcast_RING_LL%s", args);
		break;
	case FSS_OP_REDUCESCATTER:
		snprintf(buf, len, "ncclDevKernel_ReduceScatter_%s_%s_RING_LL%s", nccl_redop(redop), nccl_type(dtype),
			 args);
		break;
	case FSS_OP_ALLREDUCE:
		snprintf(buf, len, "ncclDevKernel_AllReduce_%s_%s_RING_LL%s", nccl_redop(redop), nccl_type(dtype),
			 args);
		break;
	case FSS_OP_REDUCE:
		snprintf(buf, len, "ncclDevKernel_Reduce_%s_%s_RING_LL%s", nccl_redop(redop), nccl_type(dtype), args);
		break;
	default: /* send, recv, all-to-all, gather, scatter: point-to-point in one kernel */
		snprintf(buf, len, "ncclDevKernel_SendRecv%s", args);
	}
	return buf;
}

const char *export_pytorch_dtype(int dtype)
{
	static const char *const names[] = {
	    [FSS_DTYPE_INT8] = "Char",
	    [FSS_DTYPE_UINT8] = "Byte",
	    [FSS_DTYPE_INT32] = "Int",
	    [FSS_DTYPE_UINT32] = "UInt32",
	    [FSS_DTYPE_INT64] = "Long",
	    [FSS_DTYPE_UINT64] = "UInt64",
	    [FSS_DTYPE_FLOAT16] = "Half",
	    [FSS_DTYPE_FLOAT32] = "Float",
	    [FSS_DTYPE_FLOAT64] = "Double",
	    [FSS_DTYPE_BFLOAT16] = "BFloat16",
	    [FSS_DTYPE_FLOAT8E4M3] = "Float8_e4m3fn",
	    [FSS_DTYPE_FLOAT8E5M2] = "Float8_e5m2",
	};

	return dtype >= 0 && dtype < FSS_DTYPE_MAX ? names[dtype] : "Byte";
}

const char *export_pytorch_collective(int op)
{
	switch (op) {
	case FSS_OP_ALLGATHER:
		return "_allgather_base";
	case FSS_OP_REDUCESCATTER:
		return "_reduce_scatter_base";
	case FSS_OP_ALLREDUCE:
		return "allreduce";
	case FSS_OP_BROADCAST:
		return "broadcast";
	case FSS_OP_REDUCE:
		return "reduce";
	case FSS_OP_SEND:
		return "send";
	case FSS_OP_RECV:
		return "recv";
	case FSS_OP_ALLTOALL:
		return "all_to_all";
	case FSS_OP_GATHER:
		return "gather";
	case FSS_OP_SCATTER:
		return "scatter";
	default:
		return "unknown";
	}
}

const char *export_pytorch_coalesced(int op)
{
	switch (op) {
	case FSS_OP_ALLGATHER:
		return "allgather_into_tensor_coalesced";
	case FSS_OP_REDUCESCATTER:
		return "reduce_scatter_tensor_coalesced";
	case FSS_OP_ALLREDUCE:
		return "allreduce_coalesced";
	default:
		return export_pytorch_collective(op);
	}
}

void export_in_out_nelems(int op, uint64_t count, int32_t nranks, uint64_t *in, uint64_t *out)
{
	uint64_t n = nranks > 0 ? (uint64_t)nranks : 1;

	*in = *out = count;
	if (op == FSS_OP_ALLGATHER)
		*out = count * n;
	else if (op == FSS_OP_REDUCESCATTER)
		*in = count * n;
}
