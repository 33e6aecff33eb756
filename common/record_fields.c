/*
 * record_fields.c - the field tables of record_fields.h.
 */
#include "common/record_fields.h"

#include "common/record.h"

#include <string.h>

/* Adapters from the typed name functions of record.h to one signature. */
static const char *op_name(unsigned v) { return record_op_name((uint8_t)v); }
static const char *dtype_name(unsigned v) { return record_dtype_name((uint8_t)v); }
static const char *redop_name(unsigned v) { return record_redop_name((uint8_t)v); }
static const char *path_name(unsigned v) { return record_path_name((uint16_t)v); }
static const char *comm_event_name(unsigned v) { return record_comm_event_name((uint16_t)v); }
static const char *gpu_kind_name(unsigned v) { return record_gpu_kind_name((uint16_t)v); }
static const char *nvtx_kind_name(unsigned v) { return record_nvtx_kind_name((uint16_t)v); }
static const char *clock_domain_name(unsigned v) { return record_clock_domain_name(v); }
static const char *enter_kind_name(unsigned v) { return record_enter_kind_name((uint16_t)v); }
static const char *device_origin_name(unsigned v) { return record_device_origin_name((uint16_t)v); }

#define F(T, field, kind) {#field, offsetof(T, field), sizeof(((T *)0)->field), kind, NULL, FIELD_CLOCK_NONE}
#define E(T, field, kind, fn) {#field, offsetof(T, field), sizeof(((T *)0)->field), kind, fn, FIELD_CLOCK_NONE}
/* A time field: u64 nanoseconds on `clock`. */
#define TM(T, field, clock) {#field, offsetof(T, field), sizeof(((T *)0)->field), FIELD_U64, NULL, clock}
#define MONO FIELD_CLOCK_MONO

#define T struct fss_rec_process_hello
static const struct record_field hello_fields[] = {
	F(T, pid, FIELD_U32), F(T, ppid, FIELD_U32), F(T, rank, FIELD_I32), F(T, local_rank, FIELD_I32),
	F(T, world_size, FIELD_I32), F(T, slurm_procid, FIELD_I32), F(T, ompi_rank, FIELD_I32),
	F(T, host, FIELD_STRING_ID), F(T, command, FIELD_STRING_ID), E(T, path, FIELD_ENUM16, path_name),
	F(T, agent_version, FIELD_U16), TM(T, mono_ns, MONO), TM(T, realtime_ns, FIELD_CLOCK_REALTIME),
	F(T, features, FIELD_U64),
};
#undef T

#define T struct fss_rec_string
static const struct record_field string_fields[] = {
	F(T, id, FIELD_U32), F(T, total_len, FIELD_U16), F(T, offset, FIELD_U16), F(T, text, FIELD_TEXT),
};
#undef T

#define T struct fss_rec_comm
static const struct record_field comm_fields[] = {
	F(T, comm, FIELD_HEX64), F(T, id_hash, FIELD_HEX64), F(T, parent_comm, FIELD_HEX64),
	TM(T, enter_ns, MONO), TM(T, exit_ns, MONO), F(T, nranks, FIELD_I32), F(T, rank, FIELD_I32),
	F(T, device, FIELD_I32), F(T, color, FIELD_I32), F(T, key, FIELD_I32), F(T, result, FIELD_I32),
	E(T, event, FIELD_ENUM16, comm_event_name), E(T, path, FIELD_ENUM16, path_name), F(T, thread, FIELD_U32),
	F(T, name, FIELD_STRING_ID), F(T, inferred, FIELD_U32), F(T, first_call, FIELD_U64),
};
#undef T

#define T struct fss_rec_collective
static const struct record_field collective_fields[] = {
	F(T, seq, FIELD_U64), F(T, comm, FIELD_HEX64), F(T, stream, FIELD_HEX64), F(T, count, FIELD_U64),
	F(T, bytes, FIELD_U64), F(T, sendbuff, FIELD_HEX64), F(T, recvbuff, FIELD_HEX64),
	TM(T, enter_ns, MONO), TM(T, exit_ns, MONO), F(T, group_id, FIELD_U32), F(T, thread, FIELD_U32),
	F(T, peer, FIELD_I32), F(T, result, FIELD_I32), F(T, group_depth, FIELD_U16),
	E(T, op, FIELD_ENUM8, op_name), E(T, dtype, FIELD_ENUM8, dtype_name), E(T, redop, FIELD_ENUM8, redop_name),
	E(T, path, FIELD_ENUM8, path_name), F(T, reserved, FIELD_RESERVED),
};
#undef T

#define T struct fss_rec_group
static const struct record_field group_fields[] = {
	F(T, group_id, FIELD_U32), F(T, calls, FIELD_U32), TM(T, start_ns, MONO),
	TM(T, end_enter_ns, MONO), TM(T, end_exit_ns, MONO), F(T, result, FIELD_I32),
	F(T, thread, FIELD_U32),
};
#undef T

#define T struct fss_rec_gpu_interval
static const struct record_field gpu_interval_fields[] = {
	TM(T, start_ns, FIELD_CLOCK_CUPTI), TM(T, end_ns, FIELD_CLOCK_CUPTI), F(T, stream, FIELD_U64),
	F(T, collective_seq, FIELD_U64), F(T, bytes, FIELD_U64), F(T, correlation_id, FIELD_U32),
	F(T, device, FIELD_U32), F(T, context, FIELD_U32), F(T, name, FIELD_STRING_ID),
	E(T, kind, FIELD_ENUM16, gpu_kind_name), F(T, copy_kind, FIELD_U16), F(T, reserved, FIELD_RESERVED),
};
#undef T

#define T struct fss_rec_nvtx_range
static const struct record_field nvtx_range_fields[] = {
	TM(T, start_ns, MONO), TM(T, end_ns, MONO), F(T, range_id, FIELD_U64),
	F(T, domain, FIELD_STRING_ID), F(T, name, FIELD_STRING_ID), F(T, thread, FIELD_U32),
	F(T, end_thread, FIELD_U32), E(T, kind, FIELD_ENUM16, nvtx_kind_name), F(T, depth, FIELD_U16),
	F(T, category, FIELD_U32),
};
#undef T

#define T struct fss_rec_clock_anchor
static const struct record_field clock_anchor_fields[] = {
	TM(T, mono_ns, MONO), TM(T, other_ns, FIELD_CLOCK_DOMAIN), E(T, domain, FIELD_ENUM32, clock_domain_name),
	F(T, reserved, FIELD_RESERVED),
};
#undef T

#define T struct fss_rec_drops
static const struct record_field drops_fields[] = {
	TM(T, at_ns, MONO), F(T, ring_dropped, FIELD_U64), F(T, sink_dropped, FIELD_U64),
	F(T, cupti_dropped, FIELD_U64), F(T, records_written, FIELD_U64), F(T, nvtx_dropped, FIELD_U64),
};
#undef T

#define T struct fss_rec_process_end
static const struct record_field process_end_fields[] = {
	TM(T, at_ns, MONO), F(T, collectives, FIELD_U64), F(T, exit_code, FIELD_I32),
	F(T, reserved, FIELD_RESERVED),
};
#undef T

#define T struct fss_rec_correlation
static const struct record_field correlation_fields[] = {
	F(T, collective_seq, FIELD_U64), F(T, correlation_id, FIELD_U32), F(T, reserved, FIELD_RESERVED),
};
#undef T

#define T struct fss_rec_process_exit
static const struct record_field process_exit_fields[] = {
	TM(T, at_ns, MONO), F(T, pid, FIELD_U32), F(T, wait_status, FIELD_I32),
};
#undef T

#define T struct fss_rec_trace_end
static const struct record_field trace_end_fields[] = {
	F(T, chunks, FIELD_U64), F(T, records, FIELD_U64),
};
#undef T

#define T struct fss_rec_sink
static const struct record_field sink_fields[] = {
	F(T, process_id, FIELD_U64), F(T, serial, FIELD_U32),       F(T, kind, FIELD_U16),
	F(T, preamble, FIELD_U16),   F(T, prev_serial, FIELD_U32),  F(T, prev_kind, FIELD_U16), F(T, reserved, FIELD_RESERVED),
	F(T, repeat_first, FIELD_U64), F(T, repeat_count, FIELD_U64),
};
#undef T

#define T struct fss_rec_step_summary
static const struct record_field step_summary_fields[] = {
	F(T, rank, FIELD_I32),
	F(T, ordinal, FIELD_U32),
	TM(T, start_ns, MONO),
	TM(T, step_ns, FIELD_CLOCK_DURATION),
	TM(T, allgather_ns, FIELD_CLOCK_DURATION),
	TM(T, exposed_allgather_ns, FIELD_CLOCK_DURATION),
	TM(T, compute_wait_ns, FIELD_CLOCK_DURATION),
	TM(T, compute_ns, FIELD_CLOCK_DURATION),
	TM(T, exposed_comm_ns, FIELD_CLOCK_DURATION),
	F(T, seq_first, FIELD_U64),
	F(T, seq_last, FIELD_U64),
	F(T, events, FIELD_U32),
	F(T, allgathers, FIELD_U32),
	F(T, collectives, FIELD_U32),
	F(T, records, FIELD_U32),
	F(T, exposure_source, FIELD_U16),
	F(T, flags, FIELD_U16),
	F(T, reserved, FIELD_RESERVED),
};
#undef T

#define T struct fss_rec_enter
static const struct record_field enter_fields[] = {
	F(T, seq, FIELD_U64), F(T, comm, FIELD_HEX64), F(T, stream, FIELD_HEX64), F(T, count, FIELD_U64),
	TM(T, enter_ns, MONO), F(T, thread, FIELD_U32), F(T, peer, FIELD_I32), F(T, group_id, FIELD_U32),
	F(T, sync_id, FIELD_U32), E(T, kind, FIELD_ENUM16, enter_kind_name), E(T, op, FIELD_ENUM8, op_name),
	E(T, dtype, FIELD_ENUM8, dtype_name), E(T, redop, FIELD_ENUM8, redop_name), E(T, path, FIELD_ENUM8, path_name),
	F(T, reserved, FIELD_RESERVED),
};
#undef T

#define T struct fss_rec_sync_exit
static const struct record_field sync_exit_fields[] = {
	TM(T, enter_ns, MONO), TM(T, exit_ns, MONO), F(T, after_seq, FIELD_U64), F(T, sync_id, FIELD_U32),
	F(T, thread, FIELD_U32), E(T, kind, FIELD_ENUM16, enter_kind_name), F(T, reserved, FIELD_RESERVED),
	F(T, result, FIELD_I32),
};
#undef T

#define T struct fss_rec_source_figures
static const struct record_field source_figures_fields[] = {
	TM(T, comm_ns, FIELD_CLOCK_DURATION), TM(T, overlap_ns, FIELD_CLOCK_DURATION), F(T, allgather_kernels, FIELD_U64),
	F(T, reduce_scatter_kernels, FIELD_U64), F(T, allreduce_kernels, FIELD_U64), F(T, other_kernels, FIELD_U64),
	F(T, profiler_steps, FIELD_U32), F(T, unknown, FIELD_U32), F(T, host_view_missing, FIELD_U32),
	F(T, reserved, FIELD_RESERVED),
};
#undef T

#define T struct fss_rec_device
static const struct record_field device_fields[] = {
	F(T, memory_bytes, FIELD_U64), F(T, memory_bandwidth, FIELD_U64), F(T, device, FIELD_U32),
	F(T, name, FIELD_STRING_ID), F(T, sm_count, FIELD_U32), F(T, clock_khz, FIELD_U32),
	F(T, compute_major, FIELD_U16), F(T, compute_minor, FIELD_U16),
	E(T, origin, FIELD_ENUM16, device_origin_name), F(T, reserved, FIELD_RESERVED),
};
#undef T

#define TABLE(t) {t, sizeof(t) / sizeof(t[0])}
static const struct {
	const struct record_field *fields;
	size_t count;
} tables[FSS_REC_TYPE_MAX] = {
	[FSS_REC_PROCESS_HELLO] = TABLE(hello_fields),
	[FSS_REC_STRING] = TABLE(string_fields),
	[FSS_REC_COMM] = TABLE(comm_fields),
	[FSS_REC_COLLECTIVE] = TABLE(collective_fields),
	[FSS_REC_GROUP] = TABLE(group_fields),
	[FSS_REC_GPU_INTERVAL] = TABLE(gpu_interval_fields),
	[FSS_REC_NVTX_RANGE] = TABLE(nvtx_range_fields),
	[FSS_REC_CLOCK_ANCHOR] = TABLE(clock_anchor_fields),
	[FSS_REC_DROPS] = TABLE(drops_fields),
	[FSS_REC_PROCESS_END] = TABLE(process_end_fields),
	[FSS_REC_CORRELATION] = TABLE(correlation_fields),
	[FSS_REC_PROCESS_EXIT] = TABLE(process_exit_fields),
	[FSS_REC_TRACE_END] = TABLE(trace_end_fields),
	[FSS_REC_SINK] = TABLE(sink_fields),
	[FSS_REC_STEP_SUMMARY] = TABLE(step_summary_fields),
	[FSS_REC_ENTER] = TABLE(enter_fields),
	[FSS_REC_SYNC_EXIT] = TABLE(sync_exit_fields),
	[FSS_REC_SOURCE_FIGURES] = TABLE(source_figures_fields),
	[FSS_REC_DEVICE] = TABLE(device_fields),
};

const struct record_field *record_fields(uint16_t type, size_t *count)
{
	if (type >= FSS_REC_TYPE_MAX || !tables[type].fields) {
		*count = 0;
		return NULL;
	}
	*count = tables[type].count;
	return tables[type].fields;
}

uint64_t record_field_uint(const void *rec, const struct record_field *f)
{
	const unsigned char *p = (const unsigned char *)rec + f->offset;

	switch (f->size) {
	case 1: return *p;
	case 2: {
		uint16_t v;
		memcpy(&v, p, 2);
		return v;
	}
	case 4: {
		uint32_t v;
		memcpy(&v, p, 4);
		if (f->kind == FIELD_I32)
			return (uint64_t)(int64_t)(int32_t)v;
		return v;
	}
	case 8: {
		uint64_t v;
		memcpy(&v, p, 8);
		return v;
	}
	default: return 0;
	}
}

unsigned record_shift_clock(void *rec, enum field_clock clock, int64_t delta_ns)
{
	const struct fss_record_head *head = rec;
	const struct record_field *f;
	unsigned moved = 0;
	size_t n;

	f = record_fields(head->type, &n);
	for (size_t i = 0; f && i < n; i++) {
		unsigned char *p = (unsigned char *)rec + f[i].offset;
		uint64_t v;

		if (f[i].clock != clock || f[i].size != 8)
			continue;
		memcpy(&v, p, 8);
		if (!v)
			continue;
		if (delta_ns < 0 && v <= (uint64_t)-(delta_ns + 1) + 1)
			v = 1;
		else
			v += (uint64_t)delta_ns;
		memcpy(p, &v, 8);
		moved++;
	}
	return moved;
}

uint64_t record_latest_time(const void *rec, enum field_clock clock)
{
	const struct fss_record_head *head = rec;
	const struct record_field *f;
	uint64_t latest = 0;
	size_t n;

	f = record_fields(head->type, &n);
	for (size_t i = 0; f && i < n; i++) {
		uint64_t v;

		if (f[i].clock != clock || f[i].size != 8)
			continue;
		v = record_field_uint(rec, &f[i]);
		if (v > latest)
			latest = v;
	}
	return latest;
}
