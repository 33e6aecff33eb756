/*
 * collect_stream.c - one simulated rank's agent stream (collect_stream.h).
 */
#include "bench/collect_stream.h"

#include "common/record.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define STR_DOMAIN 1u
#define STR_HOST 2u
#define STR_COMMAND 3u
#define STR_STEP_FIRST 10u				       /* "step 0" .. */
#define PREAMBLE_RECORDS (3u + COLLECT_STREAM_STEP_NAMES + 2u) /* strings, comm, clock anchor */

#define COMM_HANDLE_BASE 0x7f0000001000ull
#define COMM_ID_HASH 0x5eed5eedc0ffeeull
#define BLOCK_ELEMENTS (12ull << 20) /* a transformer block's parameters, bf16 */
#define ROOT_ELEMENTS (64ull << 20)  /* embeddings and head */

static int append(struct collect_stream *s, trace_writer_t *w, const void *rec)
{
	int rc = trace_writer_append(w, rec);

	if (rc == 0)
		s->records++;
	return rc;
}

static int append_string(struct collect_stream *s, trace_writer_t *w, uint32_t id, const char *text)
{
	int rc = trace_writer_string(w, 0, id, text, strlen(text));

	if (rc == 0)
		s->records++; /* every string here fits one part */
	return rc;
}

uint32_t collect_stream_per_step(const struct collect_stream_config *c)
{
	return 3u * (uint32_t)c->layers + 1u;
}

int collect_stream_begin(struct collect_stream *s, trace_writer_t *w, const struct collect_stream_config *c, int rank,
			 uint64_t now_ns)
{
	struct fss_rec_process_hello h;
	struct fss_rec_sink sink;
	struct fss_rec_comm comm;
	struct fss_rec_clock_anchor anchor;
	char name[32];
	uint32_t who[3];
	int rc;

	memset(s, 0, sizeof(*s));
	s->c = *c;
	s->rank = rank;
	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), 0);
	h.pid = c->pid_base + (uint32_t)rank;
	h.ppid = (uint32_t)getpid();
	h.rank = rank;
	h.local_rank = rank % 8;
	h.world_size = c->ranks;
	h.slurm_procid = h.ompi_rank = -1;
	h.host = STR_HOST;
	h.command = STR_COMMAND;
	h.path = FSS_PATH_SYNTHETIC;
	h.agent_version = 1u << 8 | 2u;
	h.mono_ns = now_ns;
	h.realtime_ns = now_ns + 1700000000000000000ull;
	h.features = FSS_FEATURE_NCCL | FSS_FEATURE_NVTX;
	if ((rc = append(s, w, &h)) != 0)
		return rc;

	record_init(&sink, FSS_REC_SINK, sizeof(sink), 0);
	who[0] = h.pid;
	who[1] = h.ppid;
	who[2] = (uint32_t)rank;
	sink.process_id = record_hash_bytes(who, sizeof(who));
	sink.serial = 1;
	sink.kind = FSS_SINK_SOCKET;
	sink.preamble = PREAMBLE_RECORDS;
	if ((rc = append(s, w, &sink)) != 0)
		return rc;

	if ((rc = append_string(s, w, STR_DOMAIN, "fsdp_ref")) != 0 ||
	    (rc = append_string(s, w, STR_HOST, "collect-load")) != 0 ||
	    (rc = append_string(s, w, STR_COMMAND, "collect_load")) != 0)
		return rc;
	for (uint32_t i = 0; i < COLLECT_STREAM_STEP_NAMES; i++) {
		snprintf(name, sizeof(name), "step %u", i);
		if ((rc = append_string(s, w, STR_STEP_FIRST + i, name)) != 0)
			return rc;
	}

	record_init(&comm, FSS_REC_COMM, sizeof(comm), 0);
	comm.comm = COMM_HANDLE_BASE + (uint64_t)rank * 0x100;
	comm.id_hash = COMM_ID_HASH;
	comm.enter_ns = now_ns;
	comm.exit_ns = now_ns + 1000;
	comm.nranks = c->ranks;
	comm.rank = rank;
	comm.device = rank % 8;
	comm.color = comm.key = -1;
	comm.event = FSS_COMM_INIT;
	comm.path = FSS_PATH_SYNTHETIC;
	comm.thread = 1000u + (uint32_t)rank;
	if ((rc = append(s, w, &comm)) != 0)
		return rc;

	record_init(&anchor, FSS_REC_CLOCK_ANCHOR, sizeof(anchor), 0);
	anchor.mono_ns = now_ns;
	anchor.other_ns = h.realtime_ns;
	anchor.domain = FSS_CLOCK_REALTIME;
	return append(s, w, &anchor);
}

/* The collective at position pos of a step: its op and unit. */
static void step_slot(const struct collect_stream_config *c, uint32_t pos, uint8_t *op, int *unit)
{
	uint32_t L = (uint32_t)c->layers;

	if (pos < L) {
		*op = FSS_OP_ALLGATHER;
		*unit = (int)pos;
	} else if (pos < 3 * L) {
		uint32_t j = pos - L;

		*op = j % 2 ? FSS_OP_REDUCESCATTER : FSS_OP_ALLGATHER;
		*unit = (int)(L - 1 - j / 2);
	} else {
		*op = FSS_OP_ALLREDUCE;
		*unit = -1;
	}
}

static void advance(struct collect_stream *s)
{
	s->issued++;
	if (++s->pos == collect_stream_per_step(&s->c)) {
		s->pos = 0;
		s->step++;
	}
}

int collect_stream_next(struct collect_stream *s, trace_writer_t *w, uint64_t t_ns)
{
	struct fss_rec_collective x;
	uint8_t op;
	int unit, rc;
	uint64_t elements;

	step_slot(&s->c, s->pos, &op, &unit);
	if (s->pos == 0 || !s->step_start_ns)
		s->step_start_ns = t_ns;
	elements = unit < 0 ? 1 : unit == 0 ? ROOT_ELEMENTS : BLOCK_ELEMENTS;
	record_init(&x, FSS_REC_COLLECTIVE, sizeof(x), 0);
	x.seq = s->issued + 1;
	x.comm = COMM_HANDLE_BASE + (uint64_t)s->rank * 0x100;
	x.stream = 0x7000 + (uint64_t)s->rank;
	x.count = unit < 0 ? 1 : elements / (uint64_t)s->c.ranks;
	x.dtype = op == FSS_OP_REDUCESCATTER || unit < 0 ? FSS_DTYPE_FLOAT32 : FSS_DTYPE_BFLOAT16;
	x.bytes = x.count * record_dtype_bytes(x.dtype);
	x.sendbuff = 0x10000000ull + (uint64_t)(unit + 1) * 0x100000;
	x.recvbuff = 0x20000000ull + (uint64_t)(unit + 1) * 0x100000;
	x.enter_ns = t_ns;
	x.exit_ns = t_ns + s->c.period_ns / 2;
	x.thread = 2000u + (uint32_t)s->rank;
	x.peer = -1;
	x.op = op;
	x.redop = op == FSS_OP_ALLGATHER ? FSS_REDOP_NONE : FSS_REDOP_SUM;
	x.path = FSS_PATH_SYNTHETIC;
	if ((rc = append(s, w, &x)) != 0)
		return rc;
	s->written++;
	if (s->pos + 1 == collect_stream_per_step(&s->c)) {
		struct fss_rec_nvtx_range r;

		record_init(&r, FSS_REC_NVTX_RANGE, sizeof(r), 0);
		r.start_ns = s->step_start_ns - 1000;
		r.end_ns = x.exit_ns + 1000;
		r.domain = STR_DOMAIN;
		r.name = STR_STEP_FIRST + (uint32_t)(s->step % COLLECT_STREAM_STEP_NAMES);
		r.thread = r.end_thread = 1000u + (uint32_t)s->rank;
		r.kind = FSS_NVTX_PUSH_POP;
		if ((rc = append(s, w, &r)) != 0)
			return rc;
		s->nvtx++;
		s->step_start_ns = 0;
	}
	advance(s);
	return 0;
}

void collect_stream_drop(struct collect_stream *s, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		if (s->pos + 1 == collect_stream_per_step(&s->c))
			s->step_start_ns = 0;
		advance(s);
	}
	s->dropped += n;
}

int collect_stream_drops(struct collect_stream *s, trace_writer_t *w, uint64_t now_ns)
{
	struct fss_rec_drops d;

	record_init(&d, FSS_REC_DROPS, sizeof(d), 0);
	d.at_ns = now_ns;
	d.ring_dropped = s->dropped;
	d.records_written = s->records + s->dropped;
	return append(s, w, &d);
}

int collect_stream_end(struct collect_stream *s, trace_writer_t *w, uint64_t now_ns)
{
	struct fss_rec_process_end e;
	int rc;

	if ((rc = collect_stream_drops(s, w, now_ns)) != 0)
		return rc;
	record_init(&e, FSS_REC_PROCESS_END, sizeof(e), 0);
	e.at_ns = now_ns;
	e.collectives = s->issued;
	e.exit_code = 0;
	return append(s, w, &e);
}
