/*
 * lint_gen_trace.c - write a synthetic trace of an FSDP job for the lint and
 * report end-to-end tests: N ranks, a root unit plus L blocks wrapped with
 * k gathers each, T steps, NVTX step and compute ranges in fsdp_ref's
 * domain, host timing only (collectives on a communication thread, compute
 * ranges on the compute thread, as fsdp_ref records them). Only the leaf
 * ranges (one per unit's forward and backward, the optimizer) are written:
 * the tests here are about the rules, not about range nesting.
 *
 *   lint_gen_trace --out PATH [--ranks N] [--layers L] [--k K] [--steps T]
 *                  [--reshard 0|1] [--prefetch 0|1] [--dtype bf16|fp32]
 *                  [--block-params P] [--root-params R] [--no-nvtx-steps]
 *                  [--no-nvtx] [--last-rank-steps S] [--device NAME]
 *                  [--hosts H]
 *
 * --last-rank-steps S: the last rank records only its first S steps (a rank
 * that stopped early), the others all T.
 *
 * --hosts H names each rank's host, the ranks spread evenly over H hosts
 * ("node0", "node1", ...): a job on H nodes (default: no host named).
 *
 * --no-nvtx writes no range at all (a job without markers: steps from the
 * period of the collectives, exposure not measurable).
 *
 * --device NAME writes a device record (format 1.5) of a GPU of that name
 * for every rank, as the agent writes one from CUPTI: MFU's peak.
 *
 * How ranks end, for the per-source reports: --no-rank-hint writes hellos
 * without RANK (the rank is known from the communicator only); --kill R
 * stops rank R's records after half the steps and ends it with a
 * process_exit of SIGKILL and no process_end, as `fsdpscope run` records a
 * killed rank; --cut R stops rank R there with no end at all; --lose R:N
 * makes rank R's sequence numbers skip N calls at its second step (records
 * the agent lost).
 *
 * Calls in flight (format 1.3): --stall R:S makes every source write an
 * enter record before each collective (FSS_FEATURE_ENTER), and rank R stop
 * before the first collective of step S while the others enter it (an
 * AllGather, comm_seq = their collectives on the communicator so far + 1)
 * and never return; --stall-for SEC later (default 5) every rank's sender
 * still reports (a drops record) and then the trace stops with no end, as
 * the trace of a hung job killed under `fsdpscope collect` does.
 * --mismatch R:S makes rank R issue the first AllGather of step S with one
 * element fewer per rank than the others (a desync; the job goes on).
 *
 * --layers 0 is the whole-model wrap: one unit, the root, holding the root
 * and 4 blocks' parameters.
 *
 * Timing model (per unit): a gather takes 20 us + 10 us / k; a block
 * computes 400 us forward, 800 us backward (split evenly over its k
 * pieces); the root 100 us. With prefetch the next unit's gather is issued
 * when the current unit's compute starts (hidden); without, when it ends
 * (exposed).
 */
#include "common/record.h"
#include "common/trace_writer.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gen {
	int ranks, layers, k, steps, reshard, prefetch, nvtx_steps, nvtx, hosts;
	int rank_hint, kill_rank, cut_rank, lose_rank, lose_calls;
	int last_rank_steps; /* -1: every rank records every step */
	int stall_rank, stall_step, stall_for_s; /* --stall R:S, --stall-for SEC; stall_rank -1: none */
	int mismatch_rank, mismatch_step;        /* --mismatch R:S; -1: none */
	uint8_t dtype;
	uint64_t block_params, root_params;
};

/* One record waiting to be written, with the host time it is emitted at. */
struct pending {
	uint64_t at;
	union {
		struct fss_record_head head;
		struct fss_rec_collective coll;
		struct fss_rec_nvtx_range range;
		struct fss_rec_enter enter;
	} u;
};

struct source {
	int rank;
	uint64_t seq;
	int enter;  /* write an enter record before each collective (--stall) */
	int shrink; /* the next collective has one element fewer per rank (--mismatch) */
	struct pending *items;
	size_t n, cap;
};

static int push(struct source *s, const struct pending *p)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		struct pending *v = realloc(s->items, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->items = v;
		s->cap = cap;
	}
	s->items[s->n++] = *p;
	return 0;
}

static int by_time(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

enum { THREAD_COMPUTE = 100, THREAD_COMM = 101 };
/* String ids per source: 1 domain, 2 "forward", 3 "backward", 4
 * "optimizer", 5 "root", 6 the device, 7 the host, 10 + step: "step N",
 * 1000 + unit: unit names. */
enum { STR_DOMAIN = 1, STR_FORWARD = 2, STR_BACKWARD = 3, STR_OPTIM = 4, STR_ROOT = 5, STR_DEVICE = 6, STR_HOST = 7,
       STR_STEP = 10, STR_UNIT = 1000 };

static int add_range(struct source *s, uint64_t start, uint64_t end, uint32_t name, uint16_t depth)
{
	struct pending p = {.at = end};

	record_init(&p.u.range, FSS_REC_NVTX_RANGE, sizeof(p.u.range), (uint32_t)s->rank);
	p.u.range.start_ns = start;
	p.u.range.end_ns = end;
	p.u.range.domain = STR_DOMAIN;
	p.u.range.name = name;
	p.u.range.thread = THREAD_COMPUTE;
	p.u.range.end_thread = THREAD_COMPUTE;
	p.u.range.kind = FSS_NVTX_PUSH_POP;
	p.u.range.depth = depth;
	return push(s, &p);
}

/* The enter record of collective `seq` (written before the call, as the agent does). */
static int add_enter(struct source *s, uint8_t op, uint8_t dtype, uint64_t count, uint64_t enter, uint64_t seq)
{
	struct pending p = {.at = enter};

	record_init(&p.u.enter, FSS_REC_ENTER, sizeof(p.u.enter), (uint32_t)s->rank);
	p.u.enter.seq = seq;
	p.u.enter.comm = 0xc0ffee;
	p.u.enter.stream = 0x5;
	p.u.enter.count = count;
	p.u.enter.enter_ns = enter;
	p.u.enter.thread = THREAD_COMM;
	p.u.enter.peer = -1;
	p.u.enter.kind = FSS_ENTER_COLLECTIVE;
	p.u.enter.op = op;
	p.u.enter.dtype = dtype;
	p.u.enter.redop = op == FSS_OP_ALLGATHER ? FSS_REDOP_NONE : FSS_REDOP_SUM;
	p.u.enter.path = FSS_PATH_SYNTHETIC;
	return push(s, &p);
}

static int add_coll(struct source *s, const struct gen *g, uint8_t op, uint8_t dtype, uint64_t elements,
		    uint64_t enter, uint64_t exit_ns)
{
	struct pending p = {.at = exit_ns};
	uint64_t count = elements / (uint64_t)g->ranks - (s->shrink ? 1 : 0);

	s->shrink = 0;
	if (s->enter) {
		int rc = add_enter(s, op, dtype, count, enter, s->seq + 1);

		if (rc)
			return rc;
	}
	record_init(&p.u.coll, FSS_REC_COLLECTIVE, sizeof(p.u.coll), (uint32_t)s->rank);
	p.u.coll.seq = ++s->seq;
	p.u.coll.comm = 0xc0ffee;
	p.u.coll.stream = 0x5;
	p.u.coll.count = count;
	p.u.coll.bytes = count * record_dtype_bytes(dtype);
	p.u.coll.sendbuff = 0x1000;
	p.u.coll.recvbuff = 0x2000;
	p.u.coll.enter_ns = enter;
	p.u.coll.exit_ns = exit_ns;
	p.u.coll.thread = THREAD_COMM;
	p.u.coll.peer = -1;
	p.u.coll.op = op;
	p.u.coll.dtype = dtype;
	p.u.coll.redop = op == FSS_OP_ALLGATHER ? FSS_REDOP_NONE : FSS_REDOP_SUM;
	p.u.coll.path = FSS_PATH_SYNTHETIC;
	return push(s, &p);
}

/* unit_params - parameters of forward unit u (0 = root). The k pieces of a
 * block differ in size (piece j holds j + 1 shares), as a block's Linears do
 * (q, k, v, o, gate, up, down): equal pieces would be one repeating gather. */
static uint64_t unit_params(const struct gen *g, int u)
{
	uint64_t k = (uint64_t)g->k, j = (uint64_t)((u - 1) % g->k);

	if (u == 0)
		return g->root_params;
	return g->block_params * 2 * (j + 1) / (k * (k + 1));
}

/* One step of one rank, starting at t0; returns the step's end time. */
static int gen_step(struct source *s, const struct gen *g, int step, uint64_t t0, uint64_t *end_out)
{
	int units = 1 + g->layers * g->k, rc = 0;
	uint64_t gather = 20000 + 10000 / (uint64_t)g->k;
	uint64_t fwd_piece = 400000 / (uint64_t)g->k, bwd_piece = 800000 / (uint64_t)g->k;
	uint64_t t = t0, issue, gend, cstart, cend = t0, prev_start = t0;

	/* forward: gather unit u (issued at the previous unit's compute start
	 * with prefetch, at its end without), then compute it */
	for (int u = 0; u < units && !rc; u++) {
		uint64_t c = u == 0 ? 100000 : fwd_piece;

		issue = u == 0 ? t : g->prefetch ? prev_start : cend;
		gend = issue + gather;
		rc = add_coll(s, g, FSS_OP_ALLGATHER, g->dtype, unit_params(g, u), issue, gend);
		cstart = gend > cend ? gend : cend;
		cend = cstart + c;
		prev_start = cstart;
		if (!rc && g->nvtx)
			rc = add_range(s, cstart, cend, u == 0 ? STR_ROOT : STR_UNIT + (uint32_t)u, 2);
	}
	/* backward, in reverse: gather again when resharded (never the root),
	 * compute, reduce-scatter the gradients */
	t = cend;
	prev_start = cend;
	for (int u = units - 1; u >= 0 && !rc; u--) {
		uint64_t c = u == 0 ? 100000 : bwd_piece, bstart = t;

		if (g->reshard && u > 0) {
			issue = g->prefetch && u < units - 1 ? prev_start : t;
			gend = issue + gather;
			rc = add_coll(s, g, FSS_OP_ALLGATHER, g->dtype, unit_params(g, u), issue, gend);
			bstart = gend > t ? gend : t;
		}
		cend = bstart + c;
		prev_start = bstart;
		if (!rc && g->nvtx)
			rc = add_range(s, bstart, cend, u == 0 ? STR_ROOT : STR_UNIT + (uint32_t)u, 2);
		if (!rc)
			rc = add_coll(s, g, FSS_OP_REDUCESCATTER, FSS_DTYPE_FLOAT32, unit_params(g, u), cend, cend + 5000);
		t = cend;
	}
	if (!rc && g->nvtx)
		rc = add_range(s, t, t + 50000, STR_OPTIM, 1);
	t += 60000;
	if (!rc && g->nvtx_steps)
		rc = add_range(s, t0, t, STR_STEP + (uint32_t)step, 0);
	*end_out = t;
	return rc;
}

static int write_strings(trace_writer_t *w, const struct gen *g, uint32_t src)
{
	char name[64];
	int rc = 0;
	static const char *const fixed[] = {"fsdp_ref", "forward", "backward", "optimizer", "root"};

	for (uint32_t i = 0; i < 5 && !rc; i++)
		rc = trace_writer_string(w, src, i + 1, fixed[i], strlen(fixed[i]));
	if (g->hosts > 0 && !rc) {
		snprintf(name, sizeof(name), "node%d", (int)src * g->hosts / g->ranks);
		rc = trace_writer_string(w, src, STR_HOST, name, strlen(name));
	}
	for (int s = 0; s < g->steps && !rc; s++) {
		snprintf(name, sizeof(name), "step %d", s);
		rc = trace_writer_string(w, src, STR_STEP + (uint32_t)s, name, strlen(name));
	}
	for (int u = 1; u <= g->layers * g->k && !rc; u++) {
		int layer = (u - 1) / g->k, piece = (u - 1) % g->k;

		if (g->k == 1)
			snprintf(name, sizeof(name), "layers.%d", layer);
		else
			snprintf(name, sizeof(name), "layers.%d.part%d", layer, piece);
		rc = trace_writer_string(w, src, STR_UNIT + (uint32_t)u, name, strlen(name));
	}
	return rc;
}

/* --device NAME: the device record an agent writes from CUPTI (format 1.5):
 * an H100-like GPU of that name, device r on rank r. */
static int add_device(trace_writer_t *w, uint32_t src, const char *name)
{
	struct fss_rec_device d;
	int rc = trace_writer_string(w, src, STR_DEVICE, name, strlen(name));

	record_init(&d, FSS_REC_DEVICE, sizeof(d), src);
	d.memory_bytes = 85029158912ull;
	d.device = src;
	d.name = STR_DEVICE;
	d.sm_count = 132;
	d.compute_major = 9;
	d.origin = FSS_DEVICE_CUPTI;
	return rc ? rc : trace_writer_append(w, &d);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"out", required_argument, NULL, 'o'},         {"ranks", required_argument, NULL, 'n'},
		{"layers", required_argument, NULL, 'l'},      {"k", required_argument, NULL, 'k'},
		{"steps", required_argument, NULL, 's'},       {"reshard", required_argument, NULL, 'r'},
		{"prefetch", required_argument, NULL, 'p'},    {"dtype", required_argument, NULL, 'd'},
		{"block-params", required_argument, NULL, 'b'}, {"root-params", required_argument, NULL, 'R'},
		{"no-nvtx-steps", no_argument, NULL, 'N'}, {"no-nvtx", no_argument, NULL, 'M'},
		{"no-rank-hint", no_argument, NULL, 'H'},       {"kill", required_argument, NULL, 'K'},
		{"cut", required_argument, NULL, 'C'},          {"lose", required_argument, NULL, 'L'},
		{"last-rank-steps", required_argument, NULL, 'S'}, {"stall", required_argument, NULL, 'T'},
		{"stall-for", required_argument, NULL, 'F'},    {"mismatch", required_argument, NULL, 'X'},
		{"device", required_argument, NULL, 'D'},
		{"hosts", required_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct gen g = {.ranks = 2, .layers = 4, .k = 1, .steps = 6, .reshard = 1, .prefetch = 1, .nvtx_steps = 1, .nvtx = 1,
			.rank_hint = 1, .kill_rank = -1, .cut_rank = -1, .lose_rank = -1, .last_rank_steps = -1,
			.stall_rank = -1, .stall_for_s = 5, .mismatch_rank = -1,
			.dtype = FSS_DTYPE_BFLOAT16, .block_params = 1 << 20, .root_params = 1 << 18};
	const char *out = NULL, *device = NULL;
	struct trace_writer_options wo = {.features = FSS_FEATURE_NCCL | FSS_FEATURE_NVTX};
	trace_writer_t *w;
	struct source *src;
	uint64_t t = 1000000000ull;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'o': out = optarg; break;
		case 'n': g.ranks = atoi(optarg); break;
		case 'l': g.layers = atoi(optarg); break;
		case 'k': g.k = atoi(optarg); break;
		case 's': g.steps = atoi(optarg); break;
		case 'r': g.reshard = atoi(optarg); break;
		case 'p': g.prefetch = atoi(optarg); break;
		case 'h': g.hosts = atoi(optarg); break;
		case 'd': g.dtype = strcmp(optarg, "fp32") == 0 ? FSS_DTYPE_FLOAT32 : FSS_DTYPE_BFLOAT16; break;
		case 'b': g.block_params = strtoull(optarg, NULL, 0); break;
		case 'R': g.root_params = strtoull(optarg, NULL, 0); break;
		case 'N': g.nvtx_steps = 0; break;
		case 'M': g.nvtx = g.nvtx_steps = 0; break;
		case 'H': g.rank_hint = 0; break;
		case 'K': g.kill_rank = atoi(optarg); break;
		case 'C': g.cut_rank = atoi(optarg); break;
		case 'L':
			if (sscanf(optarg, "%d:%d", &g.lose_rank, &g.lose_calls) != 2) {
				fprintf(stderr, "lint_gen_trace: --lose RANK:CALLS\n");
				return 2;
			}
			break;
		case 'S': g.last_rank_steps = atoi(optarg); break;
		case 'T':
			if (sscanf(optarg, "%d:%d", &g.stall_rank, &g.stall_step) != 2) {
				fprintf(stderr, "lint_gen_trace: --stall RANK:STEP\n");
				return 2;
			}
			break;
		case 'F': g.stall_for_s = atoi(optarg); break;
		case 'D': device = optarg; break;
		case 'X':
			if (sscanf(optarg, "%d:%d", &g.mismatch_rank, &g.mismatch_step) != 2) {
				fprintf(stderr, "lint_gen_trace: --mismatch RANK:STEP\n");
				return 2;
			}
			break;
		default: fprintf(stderr, "lint_gen_trace: bad option\n"); return 2;
		}
	}
	if (!out || g.ranks < 1 || g.layers < 0 || g.k < 1 || g.steps < 1) {
		fprintf(stderr, "usage: lint_gen_trace --out PATH [--ranks N] [--layers L] [--k K] [--steps T] ...\n");
		return 2;
	}
	if (g.stall_rank >= 0)
		wo.features |= FSS_FEATURE_ENTER;
	if (g.layers == 0) {
		g.root_params += 4 * g.block_params;
		g.k = 1;
	}
	src = calloc((size_t)g.ranks, sizeof(*src));
	rc = src ? trace_writer_open(&w, out, &wo) : -ENOMEM;
	if (rc) {
		fprintf(stderr, "lint_gen_trace: %s: %s\n", out, strerror(-rc));
		return 1;
	}
	for (int r = 0; r < g.ranks && !rc; r++) {
		struct fss_rec_process_hello h;
		struct fss_rec_comm c;

		src[r].rank = r;
		src[r].enter = g.stall_rank >= 0;
		record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), (uint32_t)r);
		h.pid = 1000 + (uint32_t)r;
		h.ppid = 999;
		h.rank = g.rank_hint ? r : -1;
		h.local_rank = g.rank_hint ? r : -1;
		h.world_size = g.ranks;
		h.slurm_procid = -1;
		h.ompi_rank = -1;
		h.path = FSS_PATH_SYNTHETIC;
		h.host = g.hosts > 0 ? STR_HOST : 0;
		h.mono_ns = t;
		h.realtime_ns = t + 1700000000000000000ull;
		h.features = wo.features;
		rc = trace_writer_append(w, &h);
		if (!rc)
			rc = write_strings(w, &g, (uint32_t)r);
		record_init(&c, FSS_REC_COMM, sizeof(c), (uint32_t)r);
		c.comm = 0xc0ffee;
		c.id_hash = 0x5eed;
		c.enter_ns = t;
		c.exit_ns = t + 1000;
		c.nranks = g.ranks;
		c.rank = r;
		c.device = r;
		c.color = -1;
		c.key = -1;
		c.event = FSS_COMM_INIT;
		c.path = FSS_PATH_SYNTHETIC;
		c.thread = THREAD_COMM;
		if (!rc)
			rc = trace_writer_append(w, &c);
		if (!rc && device)
			rc = add_device(w, (uint32_t)r, device);
	}
	t += 100000;
	/* Step by step, every rank's records of that step (ranks interleave in
	 * a real merged trace too). */
	for (int s = 0; s < g.steps && !rc; s++) {
		uint64_t end = t;

		if (s == g.stall_step && g.stall_rank >= 0) {
			/* the hang: the others enter the step's first gather, rank
			 * stall_rank never does, nobody returns; their senders still
			 * report stall_for_s later */
			for (int r = 0; r < g.ranks && !rc; r++) {
				struct fss_rec_drops d;

				src[r].n = 0;
				if (r != g.stall_rank)
					rc = add_enter(&src[r], FSS_OP_ALLGATHER, g.dtype, unit_params(&g, 0) / (uint64_t)g.ranks,
						       t + 1000 * (uint64_t)r, src[r].seq + 1);
				for (size_t i = 0; i < src[r].n && !rc; i++)
					rc = trace_writer_append(w, &src[r].items[i].u);
				record_init(&d, FSS_REC_DROPS, sizeof(d), (uint32_t)r);
				d.at_ns = t + (uint64_t)g.stall_for_s * 1000000000ull;
				if (!rc)
					rc = trace_writer_append(w, &d);
			}
			break;
		}
		for (int r = 0; r < g.ranks && !rc; r++) {
			uint64_t e;

			src[r].shrink = r == g.mismatch_rank && s == g.mismatch_step;

			if (r == g.ranks - 1 && g.last_rank_steps >= 0 && s >= g.last_rank_steps)
				continue;
			if ((r == g.kill_rank || r == g.cut_rank) && s >= g.steps / 2)
				continue; /* this rank is gone */
			if (r == g.lose_rank && s == 1)
				src[r].seq += (uint64_t)g.lose_calls;
			src[r].n = 0;
			rc = gen_step(&src[r], &g, s, t, &e);
			end = e > end ? e : end;
			qsort(src[r].items, src[r].n, sizeof(struct pending), by_time);
			for (size_t i = 0; i < src[r].n && !rc; i++)
				rc = trace_writer_append(w, &src[r].items[i].u);
		}
		t = end + 10000;
	}
	for (int r = 0; r < g.ranks && !rc; r++) {
		struct fss_rec_process_end e;
		struct fss_rec_process_exit x;

		if (r == g.cut_rank || (g.stall_rank >= 0 && g.stall_step < g.steps))
			continue;
		if (r == g.kill_rank) {
			record_init(&x, FSS_REC_PROCESS_EXIT, sizeof(x), (uint32_t)r);
			x.at_ns = t;
			x.pid = 1000 + (uint32_t)r;
			x.wait_status = 9; /* waitpid() status of a process killed by SIGKILL */
			rc = trace_writer_append(w, &x);
			continue;
		}
		record_init(&e, FSS_REC_PROCESS_END, sizeof(e), (uint32_t)r);
		e.at_ns = t;
		e.collectives = src[r].seq;
		e.exit_code = 0;
		rc = trace_writer_append(w, &e);
	}
	if (trace_writer_close(w) && !rc)
		rc = -EIO;
	for (int r = 0; r < g.ranks; r++)
		free(src[r].items);
	free(src);
	if (rc) {
		fprintf(stderr, "lint_gen_trace: writing %s: %s\n", out, strerror(-rc));
		return 1;
	}
	return 0;
}
