/*
 * analysis_synth.c - synthetic fsdp_ref-like traces (see analysis_synth.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_synth.h"
#include "common/record.h"
#include "common/trace_writer.h"

/* fsdp_ref-like dimensions: d_model 64, kv 32, ffn 176, vocab 512 */
#define C 64
#define KV 32
#define F 176
#define V 512
static const uint64_t linear_elems[7] = {C * C, C * KV, C * KV, C * C, F * C, F * C, C * F};
static const char *const linear_names[7] = {"attn.q", "attn.k", "attn.v", "attn.o", "mlp.gate", "mlp.up",
					    "mlp.down"};
#define NORM_ELEMS (2 * C)
#define BLOCK_ELEMS (C * C * 2 + C * KV * 2 + 3 * F * C + NORM_ELEMS)
#define ROOT_ELEMS (2 * V * C + C)
#define ATTN_COST_ELEMS (C * C) /* attention between v and o, in elements of compute */

enum { COMM_WORLD = 0, COMM_REGATHER = 1 };

struct unit {
	uint64_t padded;
	char name[32];
	int block_first, block_last; /* -1 for the root */
	int linear;                  /* -1 block-level, else 0..6 */
};

/* What rank 0 did, to be written for every rank with its time shift. */
struct sim_coll {
	uint64_t enter, exit, count;
	uint8_t op, dtype, comm, grouped;
};
struct sim_range {
	uint64_t start, end;
	char name[40];
	uint16_t depth;
	uint8_t step;
};
struct sim_kernel {
	uint64_t start, end;
};

struct sim {
	const struct synth_config *c;
	int N, G, nunits, step;
	struct unit *u;
	int *bwd_order, *bwd_pos;
	int *full, *pending;
	uint64_t *gather_end;
	uint64_t t, cf, rs_last;
	uint64_t gather_wait;
	uint64_t unmarked;
	struct sim_coll *coll;
	size_t ncoll, coll_cap;
	struct sim_range *range;
	size_t nrange, range_cap;
	struct sim_kernel *kern;
	size_t nkern, kern_cap;
	/* open NVTX ranges */
	uint64_t open_start[16];
	char open_name[16][40];
	int depth;
};

static void *grow(void *v, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return v;
	size_t c = *cap ? 2 * *cap : 256;
	void *p = realloc(v, c * size);
	if (!p) {
		free(v);
		return NULL;
	}
	*cap = c;
	return p;
}

static uint64_t round_up(uint64_t x, uint64_t m)
{
	return (x + m - 1) / m * m;
}

static uint64_t cost(const struct sim *s, double elements)
{
	return (uint64_t)(elements * s->c->ns_per_element);
}

static void compute(struct sim *s, uint64_t ns)
{
	if (ns == 0)
		return;
	if (s->c->cupti) {
		s->kern = grow(s->kern, &s->kern_cap, s->nkern, sizeof *s->kern);
		if (s->kern)
			s->kern[s->nkern++] = (struct sim_kernel){s->t, s->t + ns};
	}
	s->t += ns;
}

/* Compute in a parent range's own time (no leaf range around it). */
static void compute_unmarked(struct sim *s, uint64_t ns)
{
	s->unmarked += ns;
	compute(s, ns);
}

static void push(struct sim *s, const char *name);
static void pop(struct sim *s);

static int op_ranges(const struct sim *s)
{
	return s->c->nvtx_compute && s->c->op_ranges;
}

/* One op: in its own leaf range when the trace marks ops; else plain
 * compute, unmarked when it runs in a parent's own time (in_parent). */
static void op(struct sim *s, const char *name, uint64_t ns, int in_parent)
{
	if (op_ranges(s)) {
		push(s, name);
		compute(s, ns);
		pop(s);
	} else if (in_parent) {
		compute_unmarked(s, ns);
	} else {
		compute(s, ns);
	}
}

/* The op ranges' names: "layers.L.<what>". */
static const char *op_name(int l, const char *what)
{
	static char buf[40]; /* as the ranges keep them */
	snprintf(buf, sizeof buf, "layers.%d.%s", l, what);
	return buf;
}

static void push(struct sim *s, const char *name)
{
	s->open_start[s->depth] = s->t;
	snprintf(s->open_name[s->depth], sizeof s->open_name[0], "%s", name);
	s->depth++;
	s->t += 50; /* the push itself */
}

static void pop_range(struct sim *s, int step)
{
	s->depth--;
	s->range = grow(s->range, &s->range_cap, s->nrange, sizeof *s->range);
	if (!s->range)
		return;
	struct sim_range *r = &s->range[s->nrange++];
	r->start = s->open_start[s->depth];
	r->end = s->t;
	snprintf(r->name, sizeof r->name, "%s", s->open_name[s->depth]);
	r->depth = (uint16_t)s->depth;
	r->step = (uint8_t)step;
	s->t += 50;
}

static void pop(struct sim *s)
{
	pop_range(s, 0);
}

/* The comm thread runs one call at a time, each until done. Returns its end. */
static uint64_t submit(struct sim *s, uint8_t op, uint64_t count, uint8_t dtype, int comm, int nranks)
{
	uint64_t start = s->t > s->cf ? s->t : s->cf;
	start += 200; /* the comm thread wakes */
	size_t dsize = record_dtype_bytes(dtype);
	uint64_t wire = op == FSS_OP_ALLREDUCE ? 2 * count * dsize : count * (uint64_t)nranks * dsize;
	uint64_t end = start + s->c->latency_ns + (uint64_t)((double)wire / s->c->bytes_per_ns);
	s->coll = grow(s->coll, &s->coll_cap, s->ncoll, sizeof *s->coll);
	if (s->coll)
		s->coll[s->ncoll++] = (struct sim_coll){start, end, count, op, dtype, (uint8_t)comm,
							(uint8_t)(op == FSS_OP_ALLGATHER && s->c->grouped)};
	s->cf = end;
	return end;
}

static void wait_until(struct sim *s, uint64_t end, int gather)
{
	if (end > s->t) {
		if (gather)
			s->gather_wait += end - s->t;
		s->t = end;
	}
	s->t += 100; /* the compute thread wakes */
}

static void gather_issue(struct sim *s, int u, int backward)
{
	if (s->full[u] || s->pending[u])
		return;
	int regather = backward && s->G > 1 && s->G < s->N && s->u[u].block_first >= 0;
	int n = regather ? s->G : s->N;
	/* warm-up: step 0 gathers the root in fp32 (lazy init) */
	uint8_t dtype = s->c->warmup_extra && s->step == 0 && u == 0 ? FSS_DTYPE_FLOAT32 : FSS_DTYPE_BFLOAT16;
	s->gather_end[u] = submit(s, FSS_OP_ALLGATHER, s->u[u].padded / (uint64_t)n, dtype,
				  regather ? COMM_REGATHER : COMM_WORLD, n);
	s->pending[u] = 1;
	s->full[u] = 1;
}

static void gather_wait(struct sim *s, int u)
{
	if (!s->pending[u])
		return;
	wait_until(s, s->gather_end[u], 1);
	s->pending[u] = 0;
}

static void pre_forward(struct sim *s, int u)
{
	if (op_ranges(s))
		push(s, "fsdp.unshard");
	for (int k = u; k <= u + s->c->prefetch && k < s->nunits; k++)
		gather_issue(s, k, 0);
	if (op_ranges(s))
		pop(s);
	gather_wait(s, u);
	if (s->c->nvtx_compute)
		push(s, s->u[u].name);
}

static void post_forward(struct sim *s, int u)
{
	if (s->c->nvtx_compute)
		pop(s);
	if (s->u[u].block_first >= 0 && s->c->reshard != 0)
		s->full[u] = 0;
}

static void pre_backward(struct sim *s, int u)
{
	int pos = s->bwd_pos[u];
	if (op_ranges(s))
		push(s, "fsdp.unshard");
	for (int k = pos; k <= pos + s->c->prefetch && k < s->nunits; k++)
		gather_issue(s, s->bwd_order[k], 1);
	if (op_ranges(s))
		pop(s);
	gather_wait(s, u);
	uint64_t zero = s->u[u].padded * 4 / 20; /* zero the unit's gradient (a hook's own work) */
	if (op_ranges(s)) {
		push(s, "fsdp.grad_alloc");
		s->t += zero;
		pop(s);
	} else {
		s->t += zero;
		s->unmarked += zero;
	}
	if (s->c->nvtx_compute)
		push(s, s->u[u].name);
}

static void post_backward(struct sim *s, int u)
{
	if (s->c->nvtx_compute)
		pop(s);
	if (op_ranges(s))
		push(s, "fsdp.reduce_scatter");
	if (!s->c->no_reduce)
		s->rs_last = submit(s, FSS_OP_REDUCESCATTER, s->u[u].padded / (uint64_t)s->N, FSS_DTYPE_FLOAT32,
				    COMM_WORLD, s->N);
	s->full[u] = 0;
	if (op_ranges(s))
		pop(s);
}

/* The block-level unit that opens (forward) / closes (backward) at block l. */
static int block_unit_first(const struct sim *s, int l)
{
	for (int u = 1; u < s->nunits; u++)
		if (s->u[u].linear < 0 && s->u[u].block_first == l)
			return u;
	return -1;
}

static int block_unit_last(const struct sim *s, int l)
{
	for (int u = 1; u < s->nunits; u++)
		if (s->u[u].linear < 0 && s->u[u].block_last == l)
			return u;
	return -1;
}

static int linear_unit(const struct sim *s, int l, int j)
{
	for (int u = 1; u < s->nunits; u++)
		if (s->u[u].linear == j && s->u[u].block_first == l)
			return u;
	return -1;
}

static int is_linear_wrap(const struct sim *s)
{
	return strcmp(s->c->wrap, "linear") == 0;
}

/* A linear's matmul, forward (x1) or backward (x2). */
static void linear_op(struct sim *s, int l, int j, int times)
{
	char what[16]; /* "mlp.gate.matmul" */
	snprintf(what, sizeof what, "%s.matmul", linear_names[j]);
	op(s, op_name(l, what), (uint64_t)times * cost(s, (double)linear_elems[j]), 0);
}

static void forward(struct sim *s)
{
	int L = s->c->layers;
	if (s->c->nvtx_compute)
		push(s, "forward");
	pre_forward(s, 0);
	op(s, "embedding", 1000, 1);
	for (int l = 0; l < L; l++) {
		int bu = block_unit_first(s, l);
		if (bu >= 0)
			pre_forward(s, bu);
		for (int j = 0; j < 7; j++) {
			int lu = is_linear_wrap(s) ? linear_unit(s, l, j) : -1;
			if (lu >= 0)
				pre_forward(s, lu);
			linear_op(s, l, j, 1);
			if (lu >= 0)
				post_forward(s, lu);
			if (j == 2) /* attention between v and o: the block's own op */
				op(s, op_name(l, "attn.core"), cost(s, ATTN_COST_ELEMS), is_linear_wrap(s));
		}
		int be = block_unit_last(s, l);
		if (be >= 0)
			post_forward(s, be);
	}
	op(s, "head", cost(s, V * C), s->nunits > 1);
	post_forward(s, 0);
	if (s->c->nvtx_compute)
		pop(s);
}

static void backward(struct sim *s)
{
	int L = s->c->layers;
	if (s->c->nvtx_compute)
		push(s, "backward");
	pre_backward(s, 0);
	op(s, "head", 2 * cost(s, V * C), s->nunits > 1);
	for (int l = L - 1; l >= 0; l--) {
		int bu = block_unit_last(s, l); /* bwd_open: the last block of a group */
		if (bu >= 0)
			pre_backward(s, bu);
		for (int j = 6; j >= 0; j--) {
			int lu = is_linear_wrap(s) ? linear_unit(s, l, j) : -1;
			if (lu >= 0)
				pre_backward(s, lu);
			linear_op(s, l, j, 2);
			if (lu >= 0)
				post_backward(s, lu);
			if (j == 3)
				op(s, op_name(l, "attn.core"), 2 * cost(s, ATTN_COST_ELEMS), is_linear_wrap(s));
		}
		int be = block_unit_first(s, l);
		if (be >= 0)
			post_backward(s, be);
	}
	op(s, "embedding", 1000, 1);
	post_backward(s, 0);
	wait_until(s, s->rs_last, 0); /* reduce_reap: wait for every reduction */
	if (s->c->nvtx_compute)
		pop(s);
}

static int build_units(struct sim *s)
{
	const struct synth_config *c = s->c;
	int L = c->layers, K = 0;
	int cap = 1 + 8 * L;
	s->u = calloc((size_t)cap, sizeof *s->u);
	s->bwd_order = calloc((size_t)cap, sizeof(int));
	s->bwd_pos = calloc((size_t)cap, sizeof(int));
	s->full = calloc((size_t)cap, sizeof(int));
	s->pending = calloc((size_t)cap, sizeof(int));
	s->gather_end = calloc((size_t)cap, sizeof(uint64_t));
	if (!s->u || !s->bwd_order || !s->bwd_pos || !s->full || !s->pending || !s->gather_end)
		return -ENOMEM;
	uint64_t align = 64 * (uint64_t)s->N;
	int n = 0;
	s->u[n++] = (struct unit){ROOT_ELEMS, "root", -1, -1, -1};
	if (strcmp(c->wrap, "model") == 0) {
		s->u[0].padded += (uint64_t)L * BLOCK_ELEMS;
	} else if (strcmp(c->wrap, "block") == 0 || sscanf(c->wrap, "group:%d", &K) == 1) {
		if (K <= 0)
			K = 1;
		for (int l = 0; l < L; l += K) {
			int last = l + K - 1 < L ? l + K - 1 : L - 1;
			struct unit *u = &s->u[n++];
			*u = (struct unit){(uint64_t)(last - l + 1) * BLOCK_ELEMS, "", l, last, -1};
			if (last == l)
				snprintf(u->name, sizeof u->name, "layers.%d", l);
			else
				snprintf(u->name, sizeof u->name, "layers.%d-%d", l, last);
		}
	} else if (strcmp(c->wrap, "linear") == 0) {
		for (int l = 0; l < L; l++) {
			struct unit *u = &s->u[n++];
			*u = (struct unit){NORM_ELEMS, "", l, l, -1};
			snprintf(u->name, sizeof u->name, "layers.%d", l);
			for (int j = 0; j < 7; j++) {
				u = &s->u[n++];
				*u = (struct unit){linear_elems[j], "", l, l, j};
				snprintf(u->name, sizeof u->name, "layers.%d.%s", l, linear_names[j]);
			}
		}
	} else {
		return -EINVAL;
	}
	s->nunits = n;
	for (int i = 0; i < n; i++)
		s->u[i].padded = round_up(s->u[i].padded, align);
	/* backward order: root, then per block from the last: the block-level
	 * unit, then its linears down .. q */
	int nb = 0;
	s->bwd_order[nb++] = 0;
	for (int l = L - 1; l >= 0 && n > 1; l--) {
		int bu = block_unit_last(s, l);
		if (bu >= 0)
			s->bwd_order[nb++] = bu;
		for (int j = 6; j >= 0 && is_linear_wrap(s); j--)
			s->bwd_order[nb++] = linear_unit(s, l, j);
	}
	for (int i = 0; i < nb; i++)
		s->bwd_pos[s->bwd_order[i]] = i;
	return 0;
}

/* ---- writing --------------------------------------------------------------- */

struct out_rec {
	uint64_t at;     /* when the agent would emit it */
	uint32_t source;
	uint32_t order;  /* ties: emission order */
	uint8_t bytes[FSS_RECORD_MAX_BYTES];
};

struct out {
	struct out_rec *v;
	size_t n, cap;
};

static int out_add(struct out *o, uint64_t at, const void *rec)
{
	o->v = grow(o->v, &o->cap, o->n, sizeof *o->v);
	if (!o->v)
		return -ENOMEM;
	struct out_rec *r = &o->v[o->n];
	const struct fss_record_head *h = rec;
	r->at = at;
	r->source = h->source;
	r->order = (uint32_t)o->n;
	memcpy(r->bytes, rec, h->size);
	o->n++;
	return 0;
}

static int out_cmp(const void *a, const void *b)
{
	const struct out_rec *x = a, *y = b;
	if (x->at != y->at)
		return x->at < y->at ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

#define STR_DOMAIN 1
#define STR_HOST 2
#define STR_CMD 3
#define STR_NAMES 10 /* range names from here: index in the name list */

struct names {
	char (*v)[40];
	size_t n, cap;
};

static uint32_t name_id(struct names *nm, const char *name)
{
	for (size_t i = 0; i < nm->n; i++)
		if (strcmp(nm->v[i], name) == 0)
			return (uint32_t)(STR_NAMES + i);
	nm->v = grow(nm->v, &nm->cap, nm->n, sizeof *nm->v);
	if (!nm->v)
		return 0;
	snprintf(nm->v[nm->n], sizeof nm->v[0], "%s", name);
	return (uint32_t)(STR_NAMES + nm->n++);
}

static int emit_rank(struct out *o, const struct sim *s, int r, const struct names *nm, uint64_t t_start)
{
	const struct synth_config *c = s->c;
	uint64_t shift = (uint64_t)r * c->skew_ns;
	uint32_t src = (uint32_t)r;
	uint64_t comm_world = 0x1000 + (uint64_t)r, comm_regather = 0x2000 + (uint64_t)r;
	uint32_t compute_tid = 1000 + (uint32_t)r, comm_tid = 2000 + (uint32_t)r;
	const int64_t cupti_offset = -123456789;
	int rc = 0;

	struct fss_rec_process_hello h;
	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof h, src);
	h.pid = 500 + (uint32_t)r;
	h.rank = r;
	h.local_rank = r;
	h.world_size = s->N;
	h.slurm_procid = h.ompi_rank = -1;
	h.host = STR_HOST;
	h.command = STR_CMD;
	h.path = FSS_PATH_SYNTHETIC;
	h.mono_ns = t_start;
	h.realtime_ns = t_start + 1700000000000000000ull;
	h.features = FSS_FEATURE_NCCL | FSS_FEATURE_NVTX | (c->cupti ? FSS_FEATURE_CUPTI : 0);
	rc |= out_add(o, 0, &h);

	/* strings first (the agent defines them before use) */
	struct {
		uint32_t id;
		const char *text;
	} fixed[] = {{STR_DOMAIN, "fsdp_ref"}, {STR_HOST, "synth"}, {STR_CMD, "fsdp_ref"}};
	for (size_t i = 0; i < 3; i++) {
		struct fss_rec_string st;
		record_init(&st, FSS_REC_STRING, sizeof st, src);
		st.id = fixed[i].id;
		st.total_len = (uint16_t)strlen(fixed[i].text);
		memcpy(st.text, fixed[i].text, st.total_len);
		rc |= out_add(o, 0, &st);
	}
	for (size_t i = 0; i < nm->n; i++) {
		struct fss_rec_string st;
		record_init(&st, FSS_REC_STRING, sizeof st, src);
		st.id = (uint32_t)(STR_NAMES + i);
		st.total_len = (uint16_t)strlen(nm->v[i]);
		memcpy(st.text, nm->v[i], st.total_len);
		rc |= out_add(o, 0, &st);
	}
	if (c->cupti) {
		struct fss_rec_clock_anchor a;
		record_init(&a, FSS_REC_CLOCK_ANCHOR, sizeof a, src);
		a.mono_ns = t_start;
		a.other_ns = (uint64_t)((int64_t)t_start + cupti_offset);
		a.domain = FSS_CLOCK_CUPTI;
		rc |= out_add(o, 0, &a);
	}

	struct fss_rec_comm cm;
	record_init(&cm, FSS_REC_COMM, sizeof cm, src);
	cm.comm = comm_world;
	cm.id_hash = 0xabcdef;
	cm.nranks = s->N;
	cm.rank = r;
	cm.device = r;
	cm.color = cm.key = -1;
	cm.event = FSS_COMM_INIT;
	cm.thread = compute_tid;
	cm.enter_ns = t_start + shift;
	cm.exit_ns = t_start + shift + 1000;
	rc |= out_add(o, 1, &cm);
	if (s->G > 1 && s->G < s->N) {
		cm.comm = comm_regather;
		cm.id_hash = 0x5000 + (uint64_t)(r / s->G);
		cm.parent_comm = comm_world;
		cm.nranks = s->G;
		cm.rank = r % s->G;
		cm.color = r / s->G;
		cm.key = r;
		cm.event = FSS_COMM_SPLIT;
		rc |= out_add(o, 1, &cm);
	}

	uint64_t seq = 0;
	uint32_t group = 0;
	for (size_t i = 0; i < s->ncoll; i++) {
		const struct sim_coll *k = &s->coll[i];
		struct fss_rec_collective x;
		record_init(&x, FSS_REC_COLLECTIVE, sizeof x, src);
		x.comm = k->comm == COMM_REGATHER ? comm_regather : comm_world;
		x.stream = 7;
		x.dtype = k->dtype;
		x.op = k->op;
		x.redop = k->op == FSS_OP_ALLGATHER || k->op == FSS_OP_BROADCAST ? FSS_REDOP_NONE : FSS_REDOP_SUM;
		x.thread = comm_tid;
		x.peer = -1;
		x.path = FSS_PATH_SYNTHETIC;
		x.sendbuff = 0x10000;
		x.recvbuff = 0x20000;
		uint64_t enter = k->enter + shift, exit = k->exit + shift;
		uint64_t first_seq = seq + 1;
		if (k->grouped) {
			group++;
			for (int part = 0; part < 2; part++) {
				x.seq = ++seq;
				x.count = part ? k->count - k->count / 2 : k->count / 2;
				x.bytes = x.count * record_dtype_bytes(k->dtype);
				x.enter_ns = enter + (uint64_t)part * 50;
				x.exit_ns = enter + (uint64_t)part * 50 + 40;
				x.group_id = group;
				x.group_depth = 1;
				rc |= out_add(o, x.exit_ns, &x);
			}
			struct fss_rec_group g;
			record_init(&g, FSS_REC_GROUP, sizeof g, src);
			g.group_id = group;
			g.calls = 2;
			g.start_ns = enter - 10;
			g.end_enter_ns = enter + 150;
			g.end_exit_ns = exit;
			g.thread = comm_tid;
			rc |= out_add(o, exit, &g);
		} else {
			x.seq = ++seq;
			x.count = k->count;
			x.bytes = k->count * record_dtype_bytes(k->dtype);
			x.enter_ns = enter;
			x.exit_ns = exit;
			rc |= out_add(o, exit, &x);
		}
		if (c->cupti) {
			struct fss_rec_gpu_interval gi;
			record_init(&gi, FSS_REC_GPU_INTERVAL, sizeof gi, src);
			gi.start_ns = (uint64_t)((int64_t)(enter + 300) + cupti_offset);
			gi.end_ns = (uint64_t)((int64_t)exit + cupti_offset);
			gi.collective_seq = first_seq;
			gi.device = (uint32_t)r;
			gi.kind = FSS_GPU_COMM;
			gi.stream = 7;
			/* CUPTI buffers: delivered a while after the kernel ends */
			rc |= out_add(o, exit + 3000000, &gi);
		}
	}
	for (size_t i = 0; i < s->nrange; i++) {
		const struct sim_range *g = &s->range[i];
		if (g->step ? !c->nvtx_steps : !c->nvtx_compute)
			continue;
		struct fss_rec_nvtx_range x;
		record_init(&x, FSS_REC_NVTX_RANGE, sizeof x, src);
		x.start_ns = g->start + shift;
		x.end_ns = g->end + shift;
		x.domain = STR_DOMAIN;
		x.name = name_id((struct names *)nm, g->name);
		x.thread = x.end_thread = compute_tid;
		x.kind = FSS_NVTX_PUSH_POP;
		x.depth = g->depth;
		rc |= out_add(o, x.end_ns, &x);
	}
	for (size_t i = 0; c->cupti && i < s->nkern; i++) {
		struct fss_rec_gpu_interval gi;
		record_init(&gi, FSS_REC_GPU_INTERVAL, sizeof gi, src);
		gi.start_ns = (uint64_t)((int64_t)(s->kern[i].start + shift) + cupti_offset);
		gi.end_ns = (uint64_t)((int64_t)(s->kern[i].end + shift) + cupti_offset);
		gi.device = (uint32_t)r;
		gi.kind = FSS_GPU_COMPUTE;
		gi.stream = 1;
		rc |= out_add(o, s->kern[i].end + shift + 3000000, &gi);
	}
	struct fss_rec_process_end e;
	record_init(&e, FSS_REC_PROCESS_END, sizeof e, src);
	e.at_ns = s->t + shift;
	e.collectives = seq;
	e.exit_code = 0;
	rc |= out_add(o, UINT64_MAX, &e);
	return rc ? -ENOMEM : 0;
}

void synth_defaults(struct synth_config *c)
{
	memset(c, 0, sizeof *c);
	c->ranks = 4;
	c->layers = 4;
	c->wrap = "block";
	c->reshard = 1;
	c->prefetch = 1;
	c->steps = 8;
	c->nvtx_steps = 1;
	c->nvtx_compute = 1;
	c->op_ranges = 1;
	c->ns_per_element = 3.0;
	c->latency_ns = 20000;
	c->bytes_per_ns = 10.0;
}

static void sim_free(struct sim *s)
{
	free(s->u);
	free(s->bwd_order);
	free(s->bwd_pos);
	free(s->full);
	free(s->pending);
	free(s->gather_end);
	free(s->coll);
	free(s->range);
	free(s->kern);
}

int synth_write(const char *path, const struct synth_config *c, struct synth_truth *truth)
{
	struct sim s = {0};
	struct out o = {0};
	struct names nm = {0};
	trace_writer_t *w = NULL;
	int rc;
	memset(truth, 0, sizeof *truth);
	if (c->steps > SYNTH_MAX_STEPS || c->ranks < 1)
		return -EINVAL;
	s.c = c;
	s.N = c->ranks;
	s.G = c->reshard > 1 ? c->reshard : 0;
	if ((rc = build_units(&s)) < 0)
		goto out;
	const uint64_t t_start = 1000000000ull;
	s.t = t_start + 10000;
	if (c->warmup_extra) {
		wait_until(&s, submit(&s, FSS_OP_BROADCAST, 1 << 20, FSS_DTYPE_UINT8, COMM_WORLD, s.N), 0);
		wait_until(&s, submit(&s, FSS_OP_ALLREDUCE, 1, FSS_DTYPE_FLOAT32, COMM_WORLD, s.N), 0);
	}
	for (int step = 0; step < c->steps; step++) {
		char name[32];
		snprintf(name, sizeof name, "step %d", step);
		s.step = step;
		uint64_t t0 = s.t;
		push(&s, name);
		s.gather_wait = 0;
		s.unmarked = 0;
		forward(&s);
		backward(&s);
		if (c->nvtx_compute)
			push(&s, "optimizer");
		compute(&s, (uint64_t)(0.05 * (double)BLOCK_ELEMS * c->layers * c->ns_per_element));
		if (c->nvtx_compute)
			pop(&s);
		wait_until(&s, submit(&s, FSS_OP_ALLREDUCE, 1, FSS_DTYPE_FLOAT64, COMM_WORLD, s.N), 0);
		pop_range(&s, 1);
		truth->gather_wait_ns[step] = s.gather_wait;
		truth->unmarked_ns[step] = s.unmarked;
		truth->step_ns[step] = s.t - t0;
		s.t += 5000; /* logging between steps */
	}
	/* intern every range name (ids must exist before emitting) */
	for (size_t i = 0; i < s.nrange; i++)
		if (!name_id(&nm, s.range[i].name)) {
			rc = -ENOMEM;
			goto out;
		}
	for (int r = 0; r < s.N; r++)
		if ((rc = emit_rank(&o, &s, r, &nm, t_start)) < 0)
			goto out;
	qsort(o.v, o.n, sizeof *o.v, out_cmp);
	struct trace_writer_options wo = {.features = FSS_FEATURE_NCCL | FSS_FEATURE_NVTX |
						      (c->cupti ? FSS_FEATURE_CUPTI : 0),
					  .chunk_payload = c->chunk_payload};
	if ((rc = trace_writer_open(&w, path, &wo)) < 0)
		goto out;
	for (size_t i = 0; i < o.n && rc == 0; i++)
		rc = trace_writer_append(w, o.v[i].bytes);
	int rc2 = trace_writer_close(w);
	if (rc == 0)
		rc = rc2;
	truth->records = o.n;

	/* the truth */
	truth->units = s.nunits;
	int nonroot = s.nunits - 1;
	truth->forward_allgathers = s.nunits;
	truth->backward_allgathers = c->reshard != 0 ? nonroot : 0;
	truth->allgathers = truth->forward_allgathers + truth->backward_allgathers;
	truth->reduce_scatters = s.nunits;
	truth->allreduces = 1;
	int K = 1;
	if (strcmp(c->wrap, "linear") == 0) {
		truth->gathers_per_block = 8;
		truth->repeating_units = c->layers;
	} else if (strcmp(c->wrap, "model") == 0) {
		truth->gathers_per_block = 1;
		truth->repeating_units = 1;
	} else {
		sscanf(c->wrap, "group:%d", &K);
		/* a shorter last group is not a copy of the motif: it trails */
		truth->gathers_per_block = 1;
		truth->repeating_units = c->layers / K;
		if (c->layers / K == 1 && c->layers % K) { /* [root, K blocks, rest]: no repeat */
			truth->gathers_per_block = 2;
			truth->repeating_units = 1;
		}
	}
	for (int u = 0; u < s.nunits; u++) {
		truth->total_params += s.u[u].padded;
		if (s.u[u].padded > truth->largest_unit)
			truth->largest_unit = s.u[u].padded;
	}
out:
	free(o.v);
	free(nm.v);
	sim_free(&s);
	return rc;
}
