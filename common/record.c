/*
 * record.c - names and sizes of the record types in record.h.
 */
#include "common/record.h"

#include <string.h>

size_t record_known_size(uint16_t type)
{
	switch (type) {
	case FSS_REC_PROCESS_HELLO: return sizeof(struct fss_rec_process_hello);
	case FSS_REC_STRING: return sizeof(struct fss_rec_string);
	case FSS_REC_COMM: return sizeof(struct fss_rec_comm);
	case FSS_REC_COLLECTIVE: return sizeof(struct fss_rec_collective);
	case FSS_REC_GROUP: return sizeof(struct fss_rec_group);
	case FSS_REC_GPU_INTERVAL: return sizeof(struct fss_rec_gpu_interval);
	case FSS_REC_NVTX_RANGE: return sizeof(struct fss_rec_nvtx_range);
	case FSS_REC_CLOCK_ANCHOR: return sizeof(struct fss_rec_clock_anchor);
	case FSS_REC_DROPS: return sizeof(struct fss_rec_drops);
	case FSS_REC_PROCESS_END: return sizeof(struct fss_rec_process_end);
	case FSS_REC_CORRELATION: return sizeof(struct fss_rec_correlation);
	case FSS_REC_PROCESS_EXIT: return sizeof(struct fss_rec_process_exit);
	case FSS_REC_TRACE_END: return sizeof(struct fss_rec_trace_end);
	case FSS_REC_SINK: return sizeof(struct fss_rec_sink);
	case FSS_REC_STEP_SUMMARY: return sizeof(struct fss_rec_step_summary);
	case FSS_REC_ENTER: return sizeof(struct fss_rec_enter);
	case FSS_REC_SYNC_EXIT: return sizeof(struct fss_rec_sync_exit);
	case FSS_REC_SOURCE_FIGURES: return sizeof(struct fss_rec_source_figures);
	case FSS_REC_DEVICE: return sizeof(struct fss_rec_device);
	default: return 0;
	}
}

/* Look a value up in a table of names; out of range or a hole is "unknown". */
static const char *name_of(const char *const *names, size_t n, unsigned value)
{
	if (value >= n || !names[value])
		return "unknown";
	return names[value];
}

#define NAME_OF(table, value) name_of(table, sizeof(table) / sizeof(table[0]), (value))

const char *record_type_name(uint16_t type)
{
	static const char *const names[] = {
		[FSS_REC_PROCESS_HELLO] = "process_hello",
		[FSS_REC_STRING] = "string",
		[FSS_REC_COMM] = "comm",
		[FSS_REC_COLLECTIVE] = "collective",
		[FSS_REC_GROUP] = "group",
		[FSS_REC_GPU_INTERVAL] = "gpu_interval",
		[FSS_REC_NVTX_RANGE] = "nvtx_range",
		[FSS_REC_CLOCK_ANCHOR] = "clock_anchor",
		[FSS_REC_DROPS] = "drops",
		[FSS_REC_PROCESS_END] = "process_end",
		[FSS_REC_CORRELATION] = "correlation",
		[FSS_REC_PROCESS_EXIT] = "process_exit",
		[FSS_REC_TRACE_END] = "trace_end",
		[FSS_REC_SINK] = "sink",
		[FSS_REC_STEP_SUMMARY] = "step_summary",
		[FSS_REC_ENTER] = "enter",
		[FSS_REC_SYNC_EXIT] = "sync_exit",
		[FSS_REC_SOURCE_FIGURES] = "source_figures",
		[FSS_REC_DEVICE] = "device",
	};
	return NAME_OF(names, type);
}

const char *record_op_name(uint8_t op)
{
	static const char *const names[] = {
		[FSS_OP_ALLGATHER] = "AllGather",
		[FSS_OP_REDUCESCATTER] = "ReduceScatter",
		[FSS_OP_ALLREDUCE] = "AllReduce",
		[FSS_OP_BROADCAST] = "Broadcast",
		[FSS_OP_REDUCE] = "Reduce",
		[FSS_OP_SEND] = "Send",
		[FSS_OP_RECV] = "Recv",
		[FSS_OP_ALLTOALL] = "AllToAll",
		[FSS_OP_GATHER] = "Gather",
		[FSS_OP_SCATTER] = "Scatter",
	};
	return NAME_OF(names, op);
}

static const struct {
	const char *name;
	size_t bytes;
} dtypes[] = {
	[FSS_DTYPE_INT8] = {"int8", 1},       [FSS_DTYPE_UINT8] = {"uint8", 1},
	[FSS_DTYPE_INT32] = {"int32", 4},     [FSS_DTYPE_UINT32] = {"uint32", 4},
	[FSS_DTYPE_INT64] = {"int64", 8},     [FSS_DTYPE_UINT64] = {"uint64", 8},
	[FSS_DTYPE_FLOAT16] = {"float16", 2}, [FSS_DTYPE_FLOAT32] = {"float32", 4},
	[FSS_DTYPE_FLOAT64] = {"float64", 8}, [FSS_DTYPE_BFLOAT16] = {"bfloat16", 2},
	[FSS_DTYPE_FLOAT8E4M3] = {"float8e4m3", 1}, [FSS_DTYPE_FLOAT8E5M2] = {"float8e5m2", 1},
};

const char *record_dtype_name(uint8_t dtype)
{
	return dtype < FSS_DTYPE_MAX ? dtypes[dtype].name : "unknown";
}

size_t record_dtype_bytes(uint8_t dtype)
{
	return dtype < FSS_DTYPE_MAX ? dtypes[dtype].bytes : 0;
}

const char *record_redop_name(uint8_t redop)
{
	static const char *const names[] = {
		[FSS_REDOP_SUM] = "sum", [FSS_REDOP_PROD] = "prod", [FSS_REDOP_MAX] = "max",
		[FSS_REDOP_MIN] = "min", [FSS_REDOP_AVG] = "avg",
	};
	if (redop == FSS_REDOP_NONE)
		return "none";
	return NAME_OF(names, redop);
}

const char *record_path_name(uint16_t path)
{
	static const char *const names[] = {
		[FSS_PATH_INTERPOSE] = "interpose", [FSS_PATH_NVTX] = "nvtx",
		[FSS_PATH_UPROBE] = "uprobe", [FSS_PATH_SYNTHETIC] = "synthetic",
		[FSS_PATH_KINETO] = "kineto",
	};
	return NAME_OF(names, path);
}

const char *record_enter_kind_name(uint16_t kind)
{
	static const char *const names[] = {
		[FSS_ENTER_COLLECTIVE] = "collective", [FSS_ENTER_STREAM_SYNC] = "stream-sync",
		[FSS_ENTER_EVENT_SYNC] = "event-sync", [FSS_ENTER_DEVICE_SYNC] = "device-sync",
	};
	return NAME_OF(names, kind);
}

const char *record_comm_event_name(uint16_t event)
{
	static const char *const names[] = {
		[FSS_COMM_INIT] = "init", [FSS_COMM_SPLIT] = "split",
		[FSS_COMM_DESTROY] = "destroy", [FSS_COMM_ABORT] = "abort", [FSS_COMM_OBSERVED] = "observed",
	};
	return NAME_OF(names, event);
}

const char *record_gpu_kind_name(uint16_t kind)
{
	static const char *const names[] = {
		[FSS_GPU_COMPUTE] = "compute", [FSS_GPU_COMM] = "comm",
		[FSS_GPU_MEMCPY] = "memcpy", [FSS_GPU_MEMSET] = "memset",
	};
	return NAME_OF(names, kind);
}

const char *record_nvtx_kind_name(uint16_t kind)
{
	static const char *const names[] = {
		[FSS_NVTX_PUSH_POP] = "push_pop", [FSS_NVTX_START_END] = "start_end",
	};
	return NAME_OF(names, kind);
}

const char *record_clock_domain_name(uint32_t domain)
{
	static const char *const names[] = {
		[FSS_CLOCK_REALTIME] = "realtime", [FSS_CLOCK_CUPTI] = "cupti",
	};
	return NAME_OF(names, domain);
}

const char *record_device_origin_name(uint16_t origin)
{
	static const char *const names[] = {
		[FSS_DEVICE_CUPTI] = "cupti", [FSS_DEVICE_KINETO] = "kineto",
	};
	return NAME_OF(names, origin);
}

void record_init(void *rec, uint16_t type, uint16_t size, uint32_t source)
{
	struct fss_record_head *head = rec;

	memset(rec, 0, size);
	head->type = type;
	head->size = size;
	head->source = source;
}

uint64_t record_hash_bytes(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}
