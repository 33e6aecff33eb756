/*
 * export_gen_trace.c - write a trace whose names are hostile to a JSON
 * writer, for the export tests (tests/e2e/export.cmake): the job's
 * communicator name and its NVTX ranges hold quotes, backslashes, control
 * characters, markup, multi-byte UTF-8 and bytes that are not UTF-8.
 * N ranks, T steps of a root and two blocks (AllGather, compute range,
 * ReduceScatter), host timing only, each range nested in a step range.
 *
 *   export_gen_trace --out PATH [--ranks N] [--steps T]
 *
 * The valid UTF-8 part of the names (what a reader must get back exactly)
 * is printed on stdout, one per line: the communicator's, then the range's.
 */
#include "common/record.h"
#include "common/trace_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOSTILE_COMM "dp \"shard\" \\ </script> \xc3\xa9\xe2\x82\xac"
#define HOSTILE_RANGE "layer \"1\"\\n\t{evil}: \xf0\x9f\x94\xa5"
#define NOT_UTF8 "\x01\xff\xfe\x7f"

enum { STR_DOMAIN = 1, STR_COMM = 2, STR_RANGE = 3, STR_STEP = 4 };
enum { THREAD_COMPUTE = 100, THREAD_COMM = 101 };

static int range(trace_writer_t *w, uint32_t src, uint64_t start, uint64_t end, uint32_t name, uint16_t depth)
{
	struct fss_rec_nvtx_range r;

	record_init(&r, FSS_REC_NVTX_RANGE, sizeof(r), src);
	r.start_ns = start;
	r.end_ns = end;
	r.domain = STR_DOMAIN;
	r.name = name;
	r.thread = r.end_thread = THREAD_COMPUTE;
	r.kind = FSS_NVTX_PUSH_POP;
	r.depth = depth;
	return trace_writer_append(w, &r);
}

static int coll(trace_writer_t *w, uint32_t src, uint64_t *seq, uint8_t op, uint64_t count, uint64_t enter,
		uint64_t exit_ns)
{
	struct fss_rec_collective c;

	record_init(&c, FSS_REC_COLLECTIVE, sizeof(c), src);
	c.seq = ++*seq;
	c.comm = 0xc0ffee;
	c.stream = 0x5;
	c.count = count;
	c.bytes = count * 2;
	c.enter_ns = enter;
	c.exit_ns = exit_ns;
	c.thread = THREAD_COMM;
	c.peer = -1;
	c.op = op;
	c.dtype = op == FSS_OP_ALLGATHER ? FSS_DTYPE_BFLOAT16 : FSS_DTYPE_FLOAT32;
	c.redop = op == FSS_OP_ALLGATHER ? FSS_REDOP_NONE : FSS_REDOP_SUM;
	c.path = FSS_PATH_SYNTHETIC;
	return trace_writer_append(w, &c);
}

static int hello(trace_writer_t *w, uint32_t r, int ranks, uint64_t t)
{
	struct fss_rec_process_hello h;
	struct fss_rec_comm c;
	static const char range_name[] = HOSTILE_RANGE NOT_UTF8;
	static const char comm_name[] = HOSTILE_COMM NOT_UTF8;
	int rc;

	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), r);
	h.pid = 2000 + r;
	h.ppid = 1999;
	h.rank = (int32_t)r;
	h.local_rank = (int32_t)r;
	h.world_size = ranks;
	h.slurm_procid = h.ompi_rank = -1;
	h.path = FSS_PATH_SYNTHETIC;
	h.mono_ns = t;
	h.realtime_ns = t + 1700000000000000000ull;
	h.features = FSS_FEATURE_NCCL | FSS_FEATURE_NVTX;
	rc = trace_writer_append(w, &h);
	if (!rc)
		rc = trace_writer_string(w, r, STR_DOMAIN, "fsdp_ref", 8);
	if (!rc)
		rc = trace_writer_string(w, r, STR_COMM, comm_name, sizeof(comm_name) - 1);
	if (!rc)
		rc = trace_writer_string(w, r, STR_RANGE, range_name, sizeof(range_name) - 1);
	if (!rc)
		rc = trace_writer_string(w, r, STR_STEP, "step", 4);
	record_init(&c, FSS_REC_COMM, sizeof(c), r);
	c.comm = 0xc0ffee;
	c.id_hash = 0x5eed;
	c.enter_ns = t;
	c.exit_ns = t + 1000;
	c.nranks = ranks;
	c.rank = (int32_t)r;
	c.device = (int32_t)r;
	c.color = c.key = -1;
	c.event = FSS_COMM_INIT;
	c.path = FSS_PATH_SYNTHETIC;
	c.thread = THREAD_COMM;
	c.name = STR_COMM;
	return rc ? rc : trace_writer_append(w, &c);
}

/* One step of rank r from t: per unit an AllGather, its compute, later the
 * ReduceScatters; the step range around it all. Returns the step's end. */
static int step(trace_writer_t *w, uint32_t r, uint64_t *seq, uint64_t t, uint64_t *end)
{
	uint64_t s = t;
	int rc = 0;

	for (int u = 0; u < 3 && !rc; u++) {
		rc = coll(w, r, seq, FSS_OP_ALLGATHER, 1000 * (uint64_t)(u ? 4 : 1), t, t + 20000);
		if (!rc)
			rc = range(w, r, t + 15000, t + 415000, STR_RANGE, 1);
		t += 415000;
	}
	for (int u = 2; u >= 0 && !rc; u--) {
		rc = range(w, r, t, t + 300000, STR_RANGE, 1);
		if (!rc)
			rc =
			    coll(w, r, seq, FSS_OP_REDUCESCATTER, 1000 * (uint64_t)(u ? 4 : 1), t + 300000, t + 330000);
		t += 330000;
	}
	if (!rc)
		rc = range(w, r, s, t, STR_STEP, 0);
	*end = t + 10000;
	return rc;
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	int ranks = 2, steps = 6, rc = 0;
	struct trace_writer_options wo = {.features = FSS_FEATURE_NCCL | FSS_FEATURE_NVTX};
	trace_writer_t *w;
	uint64_t t = 1000000000ull, *seq, *at;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--out") == 0)
			out = argv[i + 1];
		else if (strcmp(argv[i], "--ranks") == 0)
			ranks = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--steps") == 0)
			steps = atoi(argv[i + 1]);
	}
	if (!out || ranks < 1 || steps < 1) {
		fprintf(stderr, "usage: export_gen_trace --out PATH [--ranks N] [--steps T]\n");
		return 2;
	}
	seq = calloc((size_t)ranks, sizeof(*seq));
	at = calloc((size_t)ranks, sizeof(*at));
	if (!seq || !at || trace_writer_open(&w, out, &wo)) {
		fprintf(stderr, "export_gen_trace: %s: cannot write\n", out);
		return 1;
	}
	for (int r = 0; r < ranks && !rc; r++) {
		rc = hello(w, (uint32_t)r, ranks, t);
		at[r] = t + 100000 + 3000 * (uint64_t)r;
	}
	for (int s = 0; s < steps && !rc; s++)
		for (int r = 0; r < ranks && !rc; r++)
			rc = step(w, (uint32_t)r, &seq[r], at[r], &at[r]);
	for (int r = 0; r < ranks && !rc; r++) {
		struct fss_rec_process_end e;

		record_init(&e, FSS_REC_PROCESS_END, sizeof(e), (uint32_t)r);
		e.at_ns = at[r];
		e.collectives = seq[r];
		e.exit_code = 0;
		rc = trace_writer_append(w, &e);
	}
	if (trace_writer_close(w) || rc) {
		fprintf(stderr, "export_gen_trace: %s: write failed\n", out);
		return 1;
	}
	printf("%s\n%s\n", HOSTILE_COMM, HOSTILE_RANGE);
	free(seq);
	free(at);
	return 0;
}
