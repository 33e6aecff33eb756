/*
 * kineto_map.c - what one Kineto file's events say, for its records
 * (kineto_map.h): the host pid, each NCCL kernel's host op, the
 * collectives in issue order with their op, dtype and count, the
 * communicators, the ranges' nesting, and the source's figures.
 */
#include "collector/kineto_map_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- an int64 -> event index table (correlation, External id) ---- */

struct idx_table {
	int64_t *keys;
	uint32_t *vals;
	size_t cap; /* a power of 2; 0: empty */
};

static size_t idx_slot(const struct idx_table *t, int64_t key)
{
	uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 17) & (t->cap - 1);
}

static int idx_init(struct idx_table *t, size_t n)
{
	t->cap = 16;
	while (t->cap < 2 * n)
		t->cap *= 2;
	t->keys = malloc(t->cap * sizeof(*t->keys));
	t->vals = malloc(t->cap * sizeof(*t->vals));
	if (!t->keys || !t->vals)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		t->keys[i] = KINETO_NONE;
	return 0;
}

/* The first event with key wins (a later one with the same key is ignored). */
static void idx_put(struct idx_table *t, int64_t key, uint32_t val)
{
	size_t i = idx_slot(t, key);

	while (t->keys[i] != KINETO_NONE && t->keys[i] != key)
		i = (i + 1) & (t->cap - 1);
	if (t->keys[i] == KINETO_NONE) {
		t->keys[i] = key;
		t->vals[i] = val;
	}
}

static uint32_t idx_get(const struct idx_table *t, int64_t key)
{
	size_t i;

	if (key == KINETO_NONE || !t->cap)
		return KMAP_NONE;
	for (i = idx_slot(t, key); t->keys[i] != KINETO_NONE; i = (i + 1) & (t->cap - 1))
		if (t->keys[i] == key)
			return t->vals[i];
	return KMAP_NONE;
}

static void idx_free(struct idx_table *t)
{
	free(t->keys);
	free(t->vals);
}

/* ---- the host side ---- */

/* The communication ops of the file by thread and start, with their
 * enclosing op (ops on one thread nest). */
struct host_ops {
	uint32_t *ev;	  /* event indices, sorted by (tid, ts, longer first) */
	uint32_t *parent; /* position in ev of the enclosing op, KMAP_NONE */
	size_t n;
	struct idx_table by_external;
};

static int cmp_ops(const void *a, const void *b, void *events)
{
	const struct kineto_event *ev = events;
	const struct kineto_event *x = &ev[*(const uint32_t *)a], *y = &ev[*(const uint32_t *)b];

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts_ns != y->ts_ns)
		return x->ts_ns < y->ts_ns ? -1 : 1;
	if (x->dur_ns != y->dur_ns)
		return x->dur_ns > y->dur_ns ? -1 : 1;
	return (*(const uint32_t *)a > *(const uint32_t *)b) - (*(const uint32_t *)a < *(const uint32_t *)b);
}

static int contains(const struct kineto_event *outer, const struct kineto_event *inner)
{
	return outer->ts_ns <= inner->ts_ns && inner->ts_ns + inner->dur_ns <= outer->ts_ns + outer->dur_ns;
}

/* A communication op on the host: the kept cpu_ops, and the nccl: / c10d::
 * annotations older PyTorch wrote as user_annotation (nccl:all_to_all). */
static int is_host_comm(const kineto_file_t *f, const struct kineto_event *e)
{
	const char *name;

	if (e->cat == KINETO_CAT_CPU_OP)
		return 1;
	if (e->cat != KINETO_CAT_USER_ANNOTATION)
		return 0;
	name = kineto_file_string(f, e->name);
	return strncmp(name, "nccl:", 5) == 0 || strncmp(name, "c10d::", 6) == 0;
}

/* The ops of cat (KINETO_CAT_CPU_OP: the communication ops of is_host_comm)
 * sorted, each with its parent: a stack per thread. */
static int host_ops_build(struct host_ops *h, const kineto_file_t *f, uint32_t cat)
{
	const struct kineto_event *ev = kineto_file_events(f);
	size_t nev = kineto_file_nevents(f);
	size_t depth = 0;
	uint32_t *stack;

	h->n = 0;
	h->ev = malloc((nev ? nev : 1) * sizeof(*h->ev));
	if (!h->ev)
		return -ENOMEM;
	for (size_t i = 0; i < nev; i++)
		if (cat == KINETO_CAT_CPU_OP ? is_host_comm(f, &ev[i]) : ev[i].cat == cat)
			h->ev[h->n++] = (uint32_t)i;
	qsort_r(h->ev, h->n, sizeof(*h->ev), cmp_ops, (void *)ev);
	h->parent = malloc((h->n ? h->n : 1) * sizeof(*h->parent));
	stack = malloc((h->n ? h->n : 1) * sizeof(*stack));
	if (!h->parent || !stack || idx_init(&h->by_external, h->n)) {
		free(stack);
		return -ENOMEM;
	}
	for (size_t k = 0; k < h->n; k++) {
		const struct kineto_event *e = &ev[h->ev[k]];

		while (depth &&
		       (ev[h->ev[stack[depth - 1]]].tid != e->tid || !contains(&ev[h->ev[stack[depth - 1]]], e)))
			depth--;
		h->parent[k] = depth ? stack[depth - 1] : KMAP_NONE;
		stack[depth++] = (uint32_t)k;
		idx_put(&h->by_external, e->external_id, (uint32_t)k);
	}
	free(stack);
	return 0;
}

static void host_ops_free(struct host_ops *h)
{
	free(h->ev);
	free(h->parent);
	idx_free(&h->by_external);
}

/* The position of the innermost op on launch l's thread around it, KMAP_NONE. */
static uint32_t host_op_around(const struct host_ops *h, const struct kineto_event *ev, const struct kineto_event *l)
{
	size_t lo = 0, hi = h->n;
	uint32_t k;

	/* the last op that starts at or before the launch on its thread */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct kineto_event *e = &ev[h->ev[mid]];

		if (e->tid < l->tid || (e->tid == l->tid && e->ts_ns <= l->ts_ns))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || ev[h->ev[lo - 1]].tid != l->tid)
		return KMAP_NONE;
	for (k = (uint32_t)(lo - 1); k != KMAP_NONE; k = h->parent[k])
		if (contains(&ev[h->ev[k]], l))
			return k;
	return KMAP_NONE;
}

/* ---- the collectives ---- */

static const struct kineto_comm_args *args_of(const kineto_file_t *f, const struct kineto_event *e)
{
	return e->comm_args ? kineto_file_comm_args(f, e->comm_args) : NULL;
}

/* The op, dtype, count and bytes of collective c from its args, its host
 * ops' names (innermost first, from position k) and its kernel's name. */
static void coll_describe(const kineto_file_t *f, const struct host_ops *h, uint32_t k, struct kmap_coll *c,
			  const struct kineto_comm_args **argsp)
{
	const struct kineto_event *ev = kineto_file_events(f);
	const struct kineto_event *kern = &ev[c->kernel];
	const struct kineto_comm_args *a = args_of(f, kern);
	const char *kname = kineto_file_string(f, kern->name);

	if (!a || !a->collective_name)
		for (uint32_t p = k; p != KMAP_NONE; p = h->parent[p]) {
			const struct kineto_comm_args *pa = args_of(f, &ev[h->ev[p]]);

			if (pa && pa->collective_name) {
				a = pa;
				break;
			}
		}
	/* the args say it exactly; a kernel's name names its collective, but
	 * SendRecv serves all-to-all and point-to-point alike: then the host
	 * ops' names (c10d::alltoall_base_) tell */
	c->op = a && a->collective_name ? kineto_op_of_name(kineto_file_string(f, a->collective_name)) : 0;
	if (!c->op && kineto_op_of_kernel(kname) != FSS_OP_SEND)
		c->op = kineto_op_of_kernel(kname);
	for (uint32_t p = k; !c->op && p != KMAP_NONE; p = h->parent[p])
		c->op = kineto_op_of_name(kineto_file_string(f, ev[h->ev[p]].name));
	if (!c->op)
		c->op = kineto_op_of_kernel(kname);
	/* NCCL runs a collective in its own kernel: SendRecv kernels are
	 * point-to-point work, whatever the c10d op around them was called
	 * (TorchRec's uneven reduce-scatters run as all-to-all) */
	if (kineto_op_of_kernel(kname) == FSS_OP_SEND && c->op != FSS_OP_SEND && c->op != FSS_OP_RECV &&
	    c->op != FSS_OP_ALLTOALL && c->op != FSS_OP_GATHER && c->op != FSS_OP_SCATTER)
		c->op = FSS_OP_ALLTOALL;
	c->dtype = a && a->dtype ? kineto_dtype_of_arg(kineto_file_string(f, a->dtype)) : FSS_DTYPE_UNKNOWN;
	if (c->dtype == FSS_DTYPE_UNKNOWN)
		c->dtype = kineto_dtype_of_kernel(kname);
	c->count = 0;
	if (a) {
		/* fss_rec_collective.count: per rank for AllGather's input and ReduceScatter's output */
		int64_t n = c->op == FSS_OP_REDUCESCATTER ? a->out_nelems : a->in_nelems;

		if (n < 0)
			n = c->op == FSS_OP_REDUCESCATTER ? a->in_nelems : a->out_nelems;
		c->count = n > 0 ? (uint64_t)n : 0;
	}
	c->bytes = c->count * record_dtype_bytes(c->dtype);
	*argsp = a;
}

/* The host side of collective c: its op, else its launch, else its kernel. */
static uint32_t coll_host(const kineto_file_t *f, const struct host_ops *h, const struct idx_table *launches,
			  struct kmap_coll *c)
{
	const struct kineto_event *ev = kineto_file_events(f);
	const struct kineto_event *kern = &ev[c->kernel];
	uint32_t k = KMAP_NONE, root;

	c->launch = kern->flags & KINETO_EV_HAS_CORRELATION ? idx_get(launches, kern->correlation) : KMAP_NONE;
	c->host_op = KMAP_NONE;
	if (c->launch != KMAP_NONE) {
		const struct kineto_event *l = &ev[c->launch];

		k = host_op_around(h, ev, l);
		if (k == KMAP_NONE)
			k = idx_get(&h->by_external, l->external_id);
	}
	if (k != KMAP_NONE) {
		for (root = k; h->parent[root] != KMAP_NONE; root = h->parent[root])
			;
		c->host_op = h->ev[root];
		c->host_from = KMAP_HOST_OP;
		c->enter_ns = ev[c->host_op].ts_ns;
		c->exit_ns = ev[c->host_op].ts_ns + ev[c->host_op].dur_ns;
		c->thread = (uint32_t)ev[c->host_op].tid;
	} else if (c->launch != KMAP_NONE) {
		c->host_from = KMAP_HOST_LAUNCH;
		c->enter_ns = ev[c->launch].ts_ns;
		c->exit_ns = ev[c->launch].ts_ns + ev[c->launch].dur_ns;
		c->thread = (uint32_t)ev[c->launch].tid;
	} else {
		c->host_from = KMAP_HOST_KERNEL;
		c->enter_ns = c->exit_ns = kern->ts_ns;
		c->thread = 0;
	}
	return k;
}

static int cmp_colls(const void *a, const void *b, void *events)
{
	const struct kineto_event *ev = events;
	const struct kmap_coll *x = a, *y = b;

	if (x->enter_ns != y->enter_ns)
		return x->enter_ns < y->enter_ns ? -1 : 1;
	if (ev[x->kernel].ts_ns != ev[y->kernel].ts_ns)
		return ev[x->kernel].ts_ns < ev[y->kernel].ts_ns ? -1 : 1;
	return (x->kernel > y->kernel) - (x->kernel < y->kernel);
}

/* ---- communicators ---- */

/* How many ranks a "[0, 1, 2]" list holds, and where `rank` is in it (-1). */
static int ranks_list(const char *s, int32_t rank, int32_t *index)
{
	int n = 0;

	*index = -1;
	while (*s) {
		char *end;
		long v;

		if (*s < '0' || *s > '9') {
			s++;
			continue;
		}
		v = strtol(s, &end, 10);
		if (v == rank && *index < 0)
			*index = n;
		n++;
		s = end;
	}
	return n;
}

/* The group of name pg_name in distributedInfo.pg_config, NULL. */
static const struct kineto_pg *pg_config_find(const kineto_file_t *f, uint32_t pg_name)
{
	const struct kineto_pg *pg = kineto_file_pgs(f);

	for (size_t i = 0; i < kineto_file_npgs(f); i++)
		if (pg[i].name == pg_name)
			return &pg[i];
	return NULL;
}

static uint64_t hash_text2(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char buf[512];

	if (la + lb + 1 > sizeof(buf))
		lb = la + 1 < sizeof(buf) ? sizeof(buf) - la - 1 : 0;
	if (la + 1 > sizeof(buf))
		la = sizeof(buf) - 1;
	memcpy(buf, a, la);
	buf[la] = '|';
	memcpy(buf + la + 1, b, lb);
	return record_hash_bytes(buf, la + 1 + lb);
}

/* The communicator of collective c (args a, NULL), made when new. */
static int coll_comm(kineto_map_t *m, struct kmap_coll *c, const struct kineto_comm_args *a, size_t *cap)
{
	const struct kineto_meta *meta = kineto_file_meta(m->f);
	const struct kineto_event *kern = &kineto_file_events(m->f)[c->kernel];
	uint32_t pg_name = a ? a->pg_name : 0, pg_ranks = a ? a->pg_ranks : 0, desc = a ? a->pg_desc : 0;
	int by_group = pg_name || pg_ranks;
	struct kmap_comm *x;
	int32_t index = -1;
	char stream[32];

	if (pg_name && !pg_ranks) {
		const struct kineto_pg *pg = pg_config_find(m->f, pg_name);

		if (pg) {
			pg_ranks = pg->ranks;
			if (!desc)
				desc = pg->desc;
		}
	}
	for (size_t i = 0; i < m->ncomms; i++) {
		x = &m->comms[i];
		if (by_group ? x->pg_name == pg_name && x->pg_ranks == pg_ranks : x->stream == kern->stream) {
			c->comm = (uint32_t)i;
			return 0;
		}
	}
	if (m->ncomms == *cap) {
		size_t ncap = *cap ? 2 * *cap : 8;
		struct kmap_comm *v = realloc(m->comms, ncap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		m->comms = v;
		*cap = ncap;
	}
	x = &m->comms[m->ncomms];
	memset(x, 0, sizeof(*x));
	x->pg_name = pg_name;
	x->pg_ranks = pg_ranks;
	x->stream = by_group ? -1 : kern->stream;
	x->nranks = a && a->group_size > 0 ? a->group_size : 0;
	x->rank = meta->rank;
	if (by_group) {
		int n = pg_ranks ? ranks_list(kineto_file_string(m->f, pg_ranks), meta->rank, &index) : 0;

		if (!x->nranks)
			x->nranks = n;
		if (index >= 0)
			x->rank = index;
		x->name = desc ? desc : pg_name;
		x->id_hash = hash_text2(kineto_file_string(m->f, pg_name), kineto_file_string(m->f, pg_ranks));
	} else {
		/* no group named: one communicator per NCCL stream, matched
		 * across the files by the stream's number */
		snprintf(stream, sizeof(stream), "%d", kern->stream);
		x->inferred = FSS_COMM_INFER_ID | FSS_COMM_INFER_RANK_ENV;
		x->id_hash = hash_text2("kineto-nccl-stream", stream);
		m->info.comms_inferred++;
	}
	if (x->nranks <= 0)
		x->nranks = meta->world_size > 0 ? meta->world_size : 1;
	if (x->rank < 0 || x->rank >= x->nranks)
		x->rank = 0;
	c->comm = (uint32_t)m->ncomms++;
	return 0;
}

/*
 * NCCL kernels that share one launch are the calls of one ncclGroupStart /
 * End: a group of calls launches once, and the launch's correlation id is on
 * each kernel it ran. Such calls, next to each other in issue order, become
 * one fss group (group_id), so that they count as one event, as the agent's
 * groups do. A coalesced op of PyTorch (allgather_into_tensor_coalesced)
 * writes one kernel for the whole group: one call, nothing to group.
 */
static void map_groups(kineto_map_t *m)
{
	const struct kineto_event *ev = kineto_file_events(m->f);
	uint32_t groups = 0;

	for (size_t i = 1; i < m->ncolls; i++) {
		const struct kineto_event *a = &ev[m->colls[i - 1].kernel], *b = &ev[m->colls[i].kernel];

		if (!(a->flags & KINETO_EV_HAS_CORRELATION) || !(b->flags & KINETO_EV_HAS_CORRELATION) ||
		    a->correlation != b->correlation || m->colls[i - 1].launch == KMAP_NONE)
			continue;
		if (!m->colls[i - 1].group_id)
			m->colls[i - 1].group_id = ++groups;
		m->colls[i].group_id = m->colls[i - 1].group_id;
	}
	m->info.groups = groups;
}

/* Every NCCL kernel as a collective, in issue order, with its communicator. */
static int map_collectives(kineto_map_t *m)
{
	const struct kineto_event *ev = kineto_file_events(m->f);
	size_t nev = kineto_file_nevents(m->f), n = 0, comm_cap = 0;
	struct host_ops h = {0};
	struct idx_table launches = {0};
	const struct kineto_comm_args **args = NULL;
	int rc = -ENOMEM;

	for (size_t i = 0; i < nev; i++)
		n += ev[i].cat == KINETO_CAT_KERNEL && kineto_is_nccl_kernel(kineto_file_string(m->f, ev[i].name));
	m->colls = calloc(n ? n : 1, sizeof(*m->colls));
	args = calloc(n ? n : 1, sizeof(*args));
	m->coll_of_event = calloc(nev ? nev : 1, sizeof(*m->coll_of_event));
	if (!m->colls || !args || !m->coll_of_event || idx_init(&launches, nev) ||
	    host_ops_build(&h, m->f, KINETO_CAT_CPU_OP))
		goto out;
	for (size_t i = 0; i < nev; i++)
		if ((ev[i].cat == KINETO_CAT_CUDA_RUNTIME || ev[i].cat == KINETO_CAT_CUDA_DRIVER) &&
		    (ev[i].flags & KINETO_EV_HAS_CORRELATION))
			idx_put(&launches, ev[i].correlation, (uint32_t)i);
	for (size_t i = 0; i < nev; i++) {
		struct kmap_coll *c = &m->colls[m->ncolls];

		if (ev[i].cat != KINETO_CAT_KERNEL || !kineto_is_nccl_kernel(kineto_file_string(m->f, ev[i].name)))
			continue;
		c->kernel = (uint32_t)i;
		coll_describe(m->f, &h, coll_host(m->f, &h, &launches, c), c, &args[m->ncolls]);
		m->ncolls++;
	}
	/* issue order: by host enter (the args go with their collective) */
	for (size_t i = 0; i < m->ncolls; i++)
		m->colls[i].comm = (uint32_t)i;
	qsort_r(m->colls, m->ncolls, sizeof(*m->colls), cmp_colls, (void *)ev);
	for (size_t i = 0; i < m->ncolls; i++) {
		struct kmap_coll *c = &m->colls[i];
		const struct kineto_comm_args *a = args[c->comm];

		if ((rc = coll_comm(m, c, a, &comm_cap)))
			goto out;
		c->key = i && m->colls[i - 1].key > c->exit_ns ? m->colls[i - 1].key : c->exit_ns;
		m->coll_of_event[c->kernel] = (uint32_t)(i + 1);
		m->info.host_from_launch += c->host_from == KMAP_HOST_LAUNCH;
		m->info.host_from_kernel += c->host_from == KMAP_HOST_KERNEL;
	}
	map_groups(m);
	m->info.collectives = (uint32_t)m->ncolls;
	m->info.comms = (uint32_t)m->ncomms;
	rc = 0;
out:
	free(args);
	idx_free(&launches);
	host_ops_free(&h);
	return rc;
}

/* ---- the rest ---- */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* The pid most host events carry, 0 when none does. */
static int map_pid(kineto_map_t *m)
{
	const struct kineto_event *ev = kineto_file_events(m->f);
	size_t nev = kineto_file_nevents(m->f), n = 0, best = 0;
	uint32_t *pids = malloc((nev ? nev : 1) * sizeof(*pids));

	if (!pids)
		return -ENOMEM;
	for (size_t i = 0; i < nev; i++)
		if (ev[i].cat == KINETO_CAT_CPU_OP || ev[i].cat == KINETO_CAT_CUDA_RUNTIME ||
		    ev[i].cat == KINETO_CAT_CUDA_DRIVER || ev[i].cat == KINETO_CAT_USER_ANNOTATION)
			if (ev[i].pid > 0)
				pids[n++] = (uint32_t)ev[i].pid;
	qsort(pids, n, sizeof(*pids), cmp_u32);
	for (size_t i = 0, run = 0; i < n; i++) {
		run = i && pids[i] == pids[i - 1] ? run + 1 : 1;
		if (run > best) {
			best = run;
			m->info.pid = pids[i];
		}
	}
	free(pids);
	return 0;
}

/* The nesting depth of each range on its thread (user_annotation and
 * gpu_user_annotation apart). */
static int map_depths(kineto_map_t *m)
{
	size_t nev = kineto_file_nevents(m->f);
	static const uint32_t cats[] = {KINETO_CAT_USER_ANNOTATION, KINETO_CAT_GPU_USER_ANNOTATION};

	m->depth = calloc(nev ? nev : 1, sizeof(*m->depth));
	if (!m->depth)
		return -ENOMEM;
	for (size_t c = 0; c < 2; c++) {
		struct host_ops h = {0};
		int rc = host_ops_build(&h, m->f, cats[c]);

		for (size_t k = 0; !rc && k < h.n; k++) {
			uint16_t d = 0;

			for (uint32_t p = h.parent[k]; p != KMAP_NONE && d < UINT16_MAX; p = h.parent[p])
				d++;
			m->depth[h.ev[k]] = d;
			m->info.ranges++;
		}
		host_ops_free(&h);
		if (rc)
			return rc;
	}
	return 0;
}

/* The source_figures record's figures. */
static int map_figures(kineto_map_t *m)
{
	const struct kineto_event *ev = kineto_file_events(m->f);
	size_t nev = kineto_file_nevents(m->f);
	struct fss_rec_source_figures *x = &m->figures;
	int rc;

	record_init(x, FSS_REC_SOURCE_FIGURES, sizeof(*x), m->source);
	rc = kineto_figures_overlap(m->f, &x->comm_ns, &x->overlap_ns);
	if (rc)
		return rc;
	for (size_t i = 0; i < m->ncolls; i++)
		switch (m->colls[i].op) {
		case FSS_OP_ALLGATHER:
			x->allgather_kernels++;
			break;
		case FSS_OP_REDUCESCATTER:
			x->reduce_scatter_kernels++;
			break;
		case FSS_OP_ALLREDUCE:
			x->allreduce_kernels++;
			break;
		default:
			x->other_kernels++;
			break;
		}
	for (size_t i = 0; i < nev; i++)
		x->profiler_steps += ev[i].cat == KINETO_CAT_USER_ANNOTATION &&
				     kineto_is_profiler_step(kineto_file_string(m->f, ev[i].name));
	x->host_view_missing = m->info.host_from_launch + m->info.host_from_kernel;
	x->unknown = FSS_FIGURES_NO_ENTER | FSS_FIGURES_NO_DROPS | FSS_FIGURES_NO_END;
	if (!m->info.pid)
		x->unknown |= FSS_FIGURES_NO_PID;
	if (x->host_view_missing)
		x->unknown |= FSS_FIGURES_NO_HOST_VIEW;
	if (m->info.comms_inferred)
		x->unknown |= FSS_FIGURES_NO_COMM_IDS;
	return 0;
}

/* The command: traceName, else the file's name without its folders. */
static int map_command(kineto_map_t *m, const char *path)
{
	const struct kineto_meta *meta = kineto_file_meta(m->f);
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;

	if (meta->trace_name && kineto_file_string(m->f, meta->trace_name)[0]) {
		m->command = meta->trace_name;
		return 0;
	}
	return kineto_file_intern(m->f, name, strlen(name), &m->command);
}

int kineto_map_new(kineto_file_t *f, const char *path, uint32_t source, kineto_map_t **out)
{
	const struct kineto_meta *meta = kineto_file_meta(f);
	const struct kineto_event *ev = kineto_file_events(f);
	size_t nev = kineto_file_nevents(f);
	kineto_map_t *m = calloc(1, sizeof(*m));
	int rc;

	*out = NULL;
	if (!m) {
		kineto_file_free(f);
		return -ENOMEM;
	}
	m->f = f;
	m->source = source;
	m->info.rank = meta->rank;
	m->info.world_size = meta->world_size;
	m->info.have_distributed = meta->have_distributed;
	m->base_ts = nev ? INT64_MAX : 0;
	for (size_t i = 0; i < nev; i++)
		if (ev[i].ts_ns < m->base_ts)
			m->base_ts = ev[i].ts_ns;
	m->realtime_offset = meta->have_base_time ? meta->base_time_ns : 0;
	rc = kineto_file_intern(f, "gpu_user_annotation", 19, &m->gpu_domain);
	if (!rc)
		rc = map_command(m, path);
	if (!rc)
		rc = map_pid(m);
	if (!rc)
		rc = map_collectives(m);
	if (!rc)
		rc = map_depths(m);
	if (!rc)
		rc = map_figures(m);
	if (!rc)
		rc = kmap_items(m);
	if (rc) {
		kineto_map_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void kineto_map_free(kineto_map_t *m)
{
	if (!m)
		return;
	kineto_file_free(m->f);
	free(m->comms);
	free(m->colls);
	free(m->coll_of_event);
	free(m->depth);
	free(m->items);
	free(m->sent);
	free(m);
}

const struct kineto_map_info *kineto_map_info(const kineto_map_t *m)
{
	return &m->info;
}

const struct fss_rec_source_figures *kineto_map_figures(const kineto_map_t *m)
{
	return &m->figures;
}

const kineto_file_t *kineto_map_file(const kineto_map_t *m)
{
	return m->f;
}
