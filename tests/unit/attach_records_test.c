/*
 * attach_records_test.c - agent/bpf/attach_records: the probe events of a
 * known job become the agent's records. A generator makes the events of N
 * ranks of an FSDP2-like per-Linear step (per layer 8 AllGathers of
 * distinct sizes, in place or not; the backward's gathers and
 * ReduceScatters; a loss AllReduce), each rank's stream starting at its own
 * call offset (the attach landed mid-step), interleaved by time; the
 * records are checked for identity, ranks, order and pairing, and a
 * generated job's records are written to a trace and analysed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/bpf/attach_records.h"
#include "collector/analyze.h"
#include "collector/analyze_traces.h"
#include "common/record.h"
#include "common/trace_writer.h"

#include "tests/support/scratch_dir.h"

#define MAX_RANKS 8
#define LAYERS 4
#define LINEARS 8

/* ---- what the module sent ---------------------------------------------------- */

struct sent {
	uint32_t pid;
	_Alignas(8) unsigned char rec[FSS_RECORD_MAX_BYTES]; /* records are read in place */
};

struct sink {
	struct sent *v;
	size_t n, cap;
};

static int on_record(void *ctx, uint32_t pid, const void *record)
{
	struct sink *s = ctx;
	const struct fss_record_head *h = record;
	assert_true(h->size <= FSS_RECORD_MAX_BYTES);
	assert_int_equal(h->source, 0);
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		assert_non_null(s->v);
	}
	s->v[s->n].pid = pid;
	memcpy(s->v[s->n].rec, record, h->size);
	s->n++;
	return 0;
}

static const struct fss_record_head *head_of(const struct sent *e)
{
	return (const void *)e->rec;
}

/* ---- the events of a job -------------------------------------------------------- */

struct job {
	int ranks;
	int steps;
	int inplace;	       /* AllGathers in place (FSDP2) */
	int env;	       /* RANK in every process's environment */
	int shard;	       /* HSDP: shard groups of this many ranks, and a replicate communicator; 0 none */
	int exit;	       /* the processes exit (status 0) after their last step */
	int offset[MAX_RANKS]; /* calls of its stream before the attach */
};

struct evs {
	struct attach_event *v;
	size_t n, cap;
};

static void ev_push(struct evs *e, const struct attach_event *ev)
{
	if (e->n == e->cap) {
		e->cap = e->cap ? e->cap * 2 : 4096;
		e->v = realloc(e->v, e->cap * sizeof(*e->v));
		assert_non_null(e->v);
	}
	e->v[e->n++] = *ev;
}

static uint32_t pid_of(int r)
{
	return 4000u + 10u * (uint32_t)r;
}

/* Units: 0 the root (embedding, head), then LAYERS x LINEARS Linears whose
 * sizes differ within a layer. Padded elements of each. */
static uint64_t unit_elems(int u)
{
	static const uint64_t linear[LINEARS] = {4096, 4096, 1024, 4096, 11008, 11008, 11008, 256};
	return u == 0 ? 65536 : linear[(u - 1) % LINEARS];
}

struct gen_rank {
	struct job *j;
	int r;
	uint64_t t;
	int calls; /* calls generated so far */
	struct evs *out;
	uint64_t shard_comm, rep_comm;
};

static void gen_call(struct gen_rank *g, uint16_t fn, const uint64_t arg[8])
{
	int keep = g->calls++ >= g->j->offset[g->r];
	struct attach_event ev = {.pid = pid_of(g->r), .tid = pid_of(g->r) + 1, .fn = fn};
	g->t += 50000; /* compute before it */
	ev.ts_ns = g->t;
	ev.kind = ATTACH_EV_ENTER;
	memcpy(ev.arg, arg, sizeof(ev.arg));
	if (keep)
		ev_push(g->out, &ev);
	g->t += 20000;
	memset(ev.arg, 0, sizeof(ev.arg));
	ev.ts_ns = g->t;
	ev.kind = ATTACH_EV_EXIT;
	ev.ret = 0;
	if (keep)
		ev_push(g->out, &ev);
}

static int shard_n(const struct job *j)
{
	return j->shard ? j->shard : j->ranks;
}

static void gen_gather(struct gen_rank *g, int u)
{
	int n = shard_n(g->j), rank = g->r % n;
	uint64_t shard = unit_elems(u) / (uint64_t)n, bytes = shard * 2;
	uint64_t recv = 0x7f0000000000ull + (uint64_t)g->r * 0x100000000ull + (uint64_t)u * 0x1000000ull;
	uint64_t send = g->j->inplace ? recv + (uint64_t)rank * bytes : recv + 0x800000ull;
	uint64_t a[8] = {send, recv, shard, FSS_DTYPE_BFLOAT16, g->shard_comm, 0x99};
	gen_call(g, ATTACH_FN_ALLGATHER, a);
}

static void gen_reduce(struct gen_rank *g, int u)
{
	int n = shard_n(g->j);
	uint64_t shard = unit_elems(u) / (uint64_t)n;
	uint64_t base = 0x7e0000000000ull + (uint64_t)g->r * 0x100000000ull + (uint64_t)u * 0x1000000ull;
	uint64_t a[8] = {base, base + 0x800000ull, shard, FSS_DTYPE_FLOAT32, FSS_REDOP_AVG, g->shard_comm, 0x99};
	gen_call(g, ATTACH_FN_REDUCESCATTER, a);
	if (g->j->shard) { /* HSDP: the reduced shard is all-reduced across the replicas */
		uint64_t b[8] = {base + 0x800000ull, base + 0x800000ull, shard, FSS_DTYPE_FLOAT32,
				 FSS_REDOP_AVG,	     g->rep_comm,	 0x99};
		gen_call(g, ATTACH_FN_ALLREDUCE, b);
	}
}

/* One step: forward gathers (root, then every Linear), backward gathers in
 * reverse with each unit's ReduceScatter, the root's, the loss AllReduce. */
static void gen_step(struct gen_rank *g)
{
	gen_gather(g, 0);
	for (int u = 1; u <= LAYERS * LINEARS; u++)
		gen_gather(g, u);
	for (int u = LAYERS * LINEARS; u >= 1; u--) {
		gen_gather(g, u);
		gen_reduce(g, u);
	}
	gen_reduce(g, 0);
	uint64_t loss[8] = {
	    0x6000, 0x6000, 1, FSS_DTYPE_FLOAT32, FSS_REDOP_SUM, g->j->shard ? g->rep_comm : g->shard_comm, 0x99};
	gen_call(g, ATTACH_FN_ALLREDUCE, loss);
}

static int ev_cmp(const void *x, const void *y)
{
	const struct attach_event *a = x, *b = y;
	if (a->ts_ns != b->ts_ns)
		return a->ts_ns < b->ts_ns ? -1 : 1;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return a->kind < b->kind ? -1 : a->kind > b->kind; /* a thread's enter before its exit */
}

/* The events of the whole job, interleaved by time (rank r runs r x 3 us late). */
static struct evs gen_job(struct job *j)
{
	struct evs e = {0};
	for (int r = 0; r < j->ranks; r++) {
		struct gen_rank g = {.j = j, .r = r, .t = 1000000000ull + (uint64_t)r * 3000u, .out = &e};
		g.shard_comm = 0x5550000ull + (uint64_t)r * 0x10000u;
		g.rep_comm = 0x6660000ull + (uint64_t)r * 0x10000u;
		for (int s = 0; s < j->steps; s++)
			gen_step(&g);
		if (j->exit) {
			struct attach_event x = {.ts_ns = g.t + 1000,
						 .pid = pid_of(r),
						 .tid = pid_of(r),
						 .fn = ATTACH_FN_PROCESS_EXIT,
						 .kind = ATTACH_EV_EXIT};
			ev_push(&e, &x);
		}
	}
	qsort(e.v, e.n, sizeof(*e.v), ev_cmp);
	return e;
}

static void add_procs(attach_records_t *a, const struct job *j)
{
	for (int r = 0; r < j->ranks; r++) {
		struct attach_process p = {.pid = pid_of(r),
					   .ppid = 1,
					   .rank = j->env ? r : -1,
					   .local_rank = -1,
					   .world_size = -1,
					   .slurm_procid = -1,
					   .ompi_rank = -1,
					   .command = "python",
					   .host = "node7",
					   .mono_ns = 1000,
					   .realtime_ns = 5000};
		assert_int_equal(attach_records_add(a, &p), 0);
	}
}

/* Run a job through the module; the sink gets the records. */
static void run_job(struct job *j, struct sink *s, int decide_final, struct attach_records_stats *st)
{
	attach_records_t *a = NULL;
	assert_int_equal(attach_records_new(&a, on_record, s), 0);
	add_procs(a, j);
	struct evs e = gen_job(j);
	for (size_t i = 0; i < e.n; i++)
		assert_int_equal(attach_records_event(a, &e.v[i]), 0);
	if (decide_final)
		assert_int_equal(attach_records_decide(a, 1), 0);
	if (st)
		attach_records_stats(a, st);
	attach_records_free(a);
	free(e.v);
}

/* ---- checks common to every job ------------------------------------------------------ */

/* Per process: hello first (path uprobe, features), its strings, then every
 * collective after the comm record of its handle, seq contiguous from 1,
 * each enter before its collective with the same seq. */
static void check_order(const struct sink *s, uint32_t pid, uint64_t want_calls)
{
	uint64_t next_enter = 1, next_coll = 1;
	size_t k = 0;
	uint64_t comms[16];
	size_t ncomms = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i].pid != pid)
			continue;
		const struct fss_record_head *h = head_of(&s->v[i]);
		if (k++ == 0) {
			assert_int_equal(h->type, FSS_REC_PROCESS_HELLO);
			const struct fss_rec_process_hello *hello = (const void *)h;
			assert_int_equal(hello->path, FSS_PATH_UPROBE);
			assert_int_equal(hello->features, FSS_FEATURE_UPROBE | FSS_FEATURE_ENTER);
			assert_int_equal(hello->pid, pid);
			assert_int_not_equal(hello->host, 0);
			continue;
		}
		if (h->type == FSS_REC_COMM) {
			const struct fss_rec_comm *c = (const void *)h;
			if (c->event == FSS_COMM_OBSERVED || c->event == FSS_COMM_INIT || c->event == FSS_COMM_SPLIT) {
				assert_true(ncomms < 16);
				comms[ncomms++] = c->comm;
			}
		} else if (h->type == FSS_REC_ENTER) {
			const struct fss_rec_enter *en = (const void *)h;
			assert_int_equal(en->seq, next_enter);
			assert_int_equal(en->path, FSS_PATH_UPROBE);
			next_enter++;
		} else if (h->type == FSS_REC_COLLECTIVE) {
			const struct fss_rec_collective *c = (const void *)h;
			assert_int_equal(c->seq, next_coll);
			assert_true(c->seq < next_enter); /* its enter came first */
			assert_int_equal(c->path, FSS_PATH_UPROBE);
			int known = 0;
			for (size_t m = 0; m < ncomms; m++)
				known |= comms[m] == c->comm;
			assert_true(known); /* after its communicator's record */
			next_coll++;
		}
	}
	assert_int_equal(next_coll - 1, want_calls);
	assert_int_equal(next_enter - 1, want_calls);
}

static const struct fss_rec_comm *observed(const struct sink *s, uint32_t pid, uint64_t handle)
{
	const struct fss_rec_comm *found = NULL;
	for (size_t i = 0; i < s->n; i++) {
		const struct fss_record_head *h = head_of(&s->v[i]);
		if (s->v[i].pid != pid || h->type != FSS_REC_COMM)
			continue;
		const struct fss_rec_comm *c = (const void *)h;
		if (c->event == FSS_COMM_OBSERVED && c->comm == handle) {
			assert_null(found); /* one record per communicator */
			found = c;
		}
	}
	assert_non_null(found);
	assert_int_equal(found->path, FSS_PATH_UPROBE);
	return found;
}

static uint64_t calls_per_step(const struct job *j)
{
	return 1 + 2 * LAYERS * LINEARS + LAYERS * LINEARS * (j->shard ? 2 : 1) + (j->shard ? 2 : 1) + 1;
}

static void job_inplace(int ranks)
{
	struct job j = {.ranks = ranks, .steps = 6, .inplace = 1, .offset = {0, 7, 23, 51}};
	struct sink s = {0};
	struct attach_records_stats st;
	run_job(&j, &s, 1, &st);
	const struct fss_rec_comm *c0 = observed(&s, pid_of(0), 0x5550000ull);
	for (int r = 0; r < ranks; r++) {
		const struct fss_rec_comm *c = observed(&s, pid_of(r), 0x5550000ull + (uint64_t)r * 0x10000u);
		assert_int_equal(c->id_hash, c0->id_hash);
		assert_int_not_equal(c->id_hash, 0);
		assert_int_equal(c->nranks, ranks);
		assert_int_equal(c->rank, r);
		assert_int_equal(c->inferred,
				 FSS_COMM_INFER_ID | FSS_COMM_INFER_NRANKS_ATTACHED | FSS_COMM_INFER_RANK_INPLACE);
		/* the same call has the same number on every rank: rank r came in offset[r] calls
		 * later than rank 0, whose first call is number 1 (its offset is the lowest, 0) */
		assert_int_equal(c->first_call, (uint64_t)j.offset[r] + 1);
		check_order(&s, pid_of(r), (uint64_t)j.steps * calls_per_step(&j) - (uint64_t)j.offset[r]);
	}
	assert_int_equal(st.comms_observed, ranks);
	assert_int_equal(st.rank_inplace, ranks);
	assert_int_equal(st.held, 0);
	assert_int_equal(st.events_unknown, 0);
	free(s.v);
}

static void test_inplace_3(void **state)
{
	(void)state;
	job_inplace(3);
}

static void test_inplace_4(void **state)
{
	(void)state;
	job_inplace(4);
}

/* Decided within the job, not only at the end: the window. */
static void test_decided_live(void **state)
{
	(void)state;
	struct job j = {.ranks = 3, .steps = 8, .inplace = 1, .offset = {5, 0, 90}};
	struct sink s = {0};
	struct attach_records_stats st;
	run_job(&j, &s, 0, &st); /* no attach_records_decide, no exit */
	assert_int_equal(st.comms_observed, 3);
	assert_int_equal(st.held, 0);
	assert_int_equal(st.collectives, 3ull * j.steps * calls_per_step(&j) - 95);
	/* windows nearly a step apart still match */
	const struct fss_rec_comm *c0 = observed(&s, pid_of(0), 0x5550000ull);
	for (int r = 0; r < 3; r++) {
		const struct fss_rec_comm *c = observed(&s, pid_of(r), 0x5550000ull + (uint64_t)r * 0x10000u);
		assert_int_equal(c->id_hash, c0->id_hash);
		assert_int_equal(c->rank, r);
		assert_int_equal(c->nranks, 3);
		/* numbered alike: rank 1 came in first (offset 0), rank 2 90 calls later */
		assert_int_equal(c->first_call, (uint64_t)j.offset[r] + 1);
	}
	free(s.v);
}

static void test_env_and_order(void **state)
{
	(void)state;
	for (int env = 0; env < 2; env++) {
		struct job j = {.ranks = 3, .steps = 6, .inplace = 0, .env = env, .offset = {10, 0, 3}};
		struct sink s = {0};
		run_job(&j, &s, 1, NULL);
		uint64_t h0 = 0;
		for (int r = 0; r < 3; r++) {
			const struct fss_rec_comm *c = observed(&s, pid_of(r), 0x5550000ull + (uint64_t)r * 0x10000u);
			if (r == 0)
				h0 = c->id_hash;
			assert_int_equal(c->id_hash, h0);
			assert_int_equal(c->nranks, 3);
			assert_int_equal(c->rank, r); /* env: RANK; order: pid order, which the generator follows */
			assert_int_equal(c->inferred, FSS_COMM_INFER_ID | FSS_COMM_INFER_NRANKS_ATTACHED |
							  (env ? FSS_COMM_INFER_RANK_ENV : FSS_COMM_INFER_RANK_ORDER));
		}
		free(s.v);
	}
}

static void test_hsdp(void **state)
{
	(void)state;
	struct job j = {.ranks = 4, .steps = 6, .inplace = 1, .shard = 2, .offset = {0, 9, 4, 30}};
	struct sink s = {0};
	struct attach_records_stats st;
	run_job(&j, &s, 1, &st);
	const struct fss_rec_comm *sh[4], *rep[4];
	for (int r = 0; r < 4; r++) {
		sh[r] = observed(&s, pid_of(r), 0x5550000ull + (uint64_t)r * 0x10000u);
		rep[r] = observed(&s, pid_of(r), 0x6660000ull + (uint64_t)r * 0x10000u);
		assert_int_equal(sh[r]->nranks, 2);
		assert_int_equal(sh[r]->rank, r % 2);
		assert_int_equal(sh[r]->inferred, FSS_COMM_INFER_ID | FSS_COMM_INFER_NRANKS_ATTACHED |
						      FSS_COMM_INFER_RANK_INPLACE | FSS_COMM_INFER_MEMBERS);
		check_order(&s, pid_of(r), (uint64_t)j.steps * calls_per_step(&j) - (uint64_t)j.offset[r]);
	}
	/* shard groups {0,1} and {2,3}: members by pid order */
	assert_int_equal(sh[0]->id_hash, sh[1]->id_hash);
	assert_int_equal(sh[2]->id_hash, sh[3]->id_hash);
	assert_int_not_equal(sh[0]->id_hash, sh[2]->id_hash);
	/* the replicas {0,2} and {1,3}: the mesh's other dimension, a guess */
	for (int r = 0; r < 4; r++) {
		assert_int_not_equal(rep[r]->id_hash, sh[0]->id_hash);
		assert_int_not_equal(rep[r]->id_hash, sh[2]->id_hash);
		assert_int_equal(rep[r]->id_hash, rep[r % 2]->id_hash);
		assert_int_equal(rep[r]->nranks, 2);
		assert_int_equal(rep[r]->rank, r / 2);
		assert_int_equal(rep[r]->inferred, FSS_COMM_INFER_ID | FSS_COMM_INFER_NRANKS_ATTACHED |
						       FSS_COMM_INFER_RANK_ORDER | FSS_COMM_INFER_MEMBERS);
	}
	assert_int_not_equal(rep[0]->id_hash, rep[1]->id_hash);
	assert_int_equal(st.members_guessed, 8);
	assert_int_equal(st.rank_inplace, 4);
	assert_int_equal(st.rank_order, 4);
	free(s.v);
}

/* ---- communicators seen made, groups, exits ---------------------------------------------- */

static attach_records_t *one_proc(struct sink *s)
{
	attach_records_t *a = NULL;
	assert_int_equal(attach_records_new(&a, on_record, s), 0);
	struct attach_process p = {.pid = 77,
				   .ppid = 1,
				   .rank = -1,
				   .local_rank = -1,
				   .world_size = -1,
				   .slurm_procid = -1,
				   .ompi_rank = -1,
				   .command = "train",
				   .host = "h"};
	assert_int_equal(attach_records_add(a, &p), 0);
	assert_int_equal(attach_records_add(a, &p), -EEXIST);
	return a;
}

static void ev(attach_records_t *a, uint16_t fn, uint16_t kind, uint64_t ts, const uint64_t *arg, int32_t ret)
{
	struct attach_event e = {.ts_ns = ts, .pid = 77, .tid = 78, .fn = fn, .kind = kind, .ret = ret};
	if (arg)
		memcpy(e.arg, arg, sizeof(e.arg));
	assert_int_equal(attach_records_event(a, &e), 0);
}

static void test_init_seen(void **state)
{
	(void)state;
	struct sink s = {0};
	attach_records_t *a = one_proc(&s);
	struct attach_event in = {.ts_ns = 10,
				  .pid = 77,
				  .tid = 78,
				  .fn = ATTACH_FN_COMM_INIT_RANK,
				  .kind = ATTACH_EV_ENTER,
				  .arg = {0x1234, 8, 0, 5}, /* C positions: the id is in uid[] */
				  .uid_ok = 1};
	for (int i = 0; i < ATTACH_UNIQUE_ID_BYTES; i++)
		in.uid[i] = (uint8_t)(i * 7 + 3);
	assert_int_equal(attach_records_event(a, &in), 0);
	struct attach_event outev = {.ts_ns = 20,
				     .pid = 77,
				     .tid = 78,
				     .fn = ATTACH_FN_COMM_INIT_RANK,
				     .kind = ATTACH_EV_EXIT,
				     .out = {0xc0ffee},
				     .nout = 1};
	assert_int_equal(attach_records_event(a, &outev), 0);
	uint64_t ag[8] = {0x1000, 0x1000, 64, FSS_DTYPE_FLOAT32, 0xc0ffee, 0};
	for (int i = 0; i < 3; i++) {
		ev(a, ATTACH_FN_ALLGATHER, ATTACH_EV_ENTER, 100 + 10 * (uint64_t)i, ag, 0);
		ev(a, ATTACH_FN_ALLGATHER, ATTACH_EV_EXIT, 105 + 10 * (uint64_t)i, NULL, 0);
		struct attach_records_stats st;
		attach_records_stats(a, &st);
		assert_int_equal(st.held, 0); /* nothing waits: the communicator is known */
		assert_int_equal(st.collectives, (uint64_t)i + 1);
	}
	const struct fss_rec_comm *c = NULL;
	for (size_t i = 0; i < s.n; i++) {
		const struct fss_record_head *h = head_of(&s.v[i]);
		if (h->type == FSS_REC_COMM) {
			assert_null(c);
			c = (const void *)h;
		}
	}
	assert_non_null(c);
	assert_int_equal(c->event, FSS_COMM_INIT);
	assert_int_equal(c->id_hash, record_hash_bytes(in.uid, ATTACH_UNIQUE_ID_BYTES));
	assert_int_equal(c->nranks, 8);
	assert_int_equal(c->rank, 5);
	assert_int_equal(c->comm, 0xc0ffee);
	assert_int_equal(c->inferred, 0);
	assert_int_equal(c->path, FSS_PATH_UPROBE);
	assert_int_equal(c->enter_ns, 10);
	assert_int_equal(c->exit_ns, 20);
	/* the collective: bytes = count x dtype size, buffers, no root */
	const struct fss_rec_collective *k = (const void *)head_of(&s.v[s.n - 1]);
	assert_int_equal(k->head.type, FSS_REC_COLLECTIVE);
	assert_int_equal(k->bytes, 64 * 4);
	assert_int_equal(k->peer, -1);
	assert_int_equal(k->redop, FSS_REDOP_NONE);
	assert_int_equal(k->enter_ns, 120);
	assert_int_equal(k->exit_ns, 125);
	assert_int_equal(k->thread, 78);
	struct attach_records_stats st;
	attach_records_stats(a, &st);
	assert_int_equal(st.comms_made, 1);
	assert_int_equal(st.comms_observed, 0);
	attach_records_free(a);
	free(s.v);
}

/* A split of a communicator seen made: the agent's key, nranks from the
 * attached processes (one here), held until then. */
static void test_split_of_init(void **state)
{
	(void)state;
	struct sink s = {0};
	attach_records_t *a = one_proc(&s);
	struct attach_event in = {.ts_ns = 10,
				  .pid = 77,
				  .tid = 78,
				  .fn = ATTACH_FN_COMM_INIT_RANK,
				  .kind = ATTACH_EV_ENTER,
				  .arg = {0x1234, 1, 0, 0},
				  .uid_ok = 1};
	assert_int_equal(attach_records_event(a, &in), 0);
	struct attach_event o = {.ts_ns = 20,
				 .pid = 77,
				 .tid = 78,
				 .fn = ATTACH_FN_COMM_INIT_RANK,
				 .kind = ATTACH_EV_EXIT,
				 .out = {0xa},
				 .nout = 1};
	assert_int_equal(attach_records_event(a, &o), 0);
	uint64_t sp[8] = {0xa, 3, 0, 0x5678, 0};
	ev(a, ATTACH_FN_COMM_SPLIT, ATTACH_EV_ENTER, 30, sp, 0);
	struct attach_event so = {.ts_ns = 40,
				  .pid = 77,
				  .tid = 78,
				  .fn = ATTACH_FN_COMM_SPLIT,
				  .kind = ATTACH_EV_EXIT,
				  .out = {0xb},
				  .nout = 1};
	assert_int_equal(attach_records_event(a, &so), 0);
	const struct fss_rec_comm *c = (const void *)head_of(&s.v[s.n - 1]);
	assert_int_equal(c->event, FSS_COMM_SPLIT);
	unsigned char k[20];
	uint64_t ph = record_hash_bytes(in.uid, ATTACH_UNIQUE_ID_BYTES), no = 0;
	int32_t color = 3;
	memcpy(k, &ph, 8);
	memcpy(k + 8, &no, 8);
	memcpy(k + 16, &color, 4);
	assert_int_equal(c->id_hash, record_hash_bytes(k, sizeof k));
	assert_int_equal(c->parent_comm, 0xa);
	assert_int_equal(c->nranks, 1);
	assert_int_equal(c->rank, 0);
	assert_int_equal(c->color, 3);
	assert_int_equal(c->inferred, FSS_COMM_INFER_NRANKS_ATTACHED);
	attach_records_free(a);
	free(s.v);
}

static void test_groups(void **state)
{
	(void)state;
	struct sink s = {0};
	attach_records_t *a = one_proc(&s);
	uint64_t ag[8] = {0x1000, 0x2000, 16, FSS_DTYPE_BFLOAT16, 0xd00d, 0};
	for (int g = 0; g < 2; g++) {
		uint64_t t = 1000 * (uint64_t)(g + 1);
		ev(a, ATTACH_FN_GROUP_START, ATTACH_EV_ENTER, t, NULL, 0);
		ev(a, ATTACH_FN_GROUP_START, ATTACH_EV_EXIT, t + 1, NULL, 0);
		ev(a, ATTACH_FN_GROUP_START, ATTACH_EV_ENTER, t + 2, NULL, 0); /* nested */
		ev(a, ATTACH_FN_GROUP_START, ATTACH_EV_EXIT, t + 3, NULL, 0);
		ev(a, ATTACH_FN_ALLGATHER, ATTACH_EV_ENTER, t + 4, ag, 0);
		ev(a, ATTACH_FN_ALLGATHER, ATTACH_EV_EXIT, t + 5, NULL, 0);
		ev(a, ATTACH_FN_GROUP_END, ATTACH_EV_ENTER, t + 6, NULL, 0);
		ev(a, ATTACH_FN_GROUP_END, ATTACH_EV_EXIT, t + 7, NULL, 0);
		ev(a, ATTACH_FN_ALLGATHER, ATTACH_EV_ENTER, t + 8, ag, 0);
		ev(a, ATTACH_FN_ALLGATHER, ATTACH_EV_EXIT, t + 9, NULL, 0);
		ev(a, ATTACH_FN_GROUP_END, ATTACH_EV_ENTER, t + 10, NULL, 0);
		ev(a, ATTACH_FN_GROUP_END, ATTACH_EV_EXIT, t + 11, NULL, 0);
	}
	ev(a, ATTACH_FN_ALLGATHER, ATTACH_EV_ENTER, 5000, ag, 0);
	ev(a, ATTACH_FN_ALLGATHER, ATTACH_EV_EXIT, 5001, NULL, 0);
	assert_int_equal(attach_records_decide(a, 1), 0);
	unsigned groups = 0, colls = 0;
	for (size_t i = 0; i < s.n; i++) {
		const struct fss_record_head *h = head_of(&s.v[i]);
		if (h->type == FSS_REC_GROUP) {
			const struct fss_rec_group *g = (const void *)h;
			groups++;
			assert_int_equal(g->group_id, groups);
			assert_int_equal(g->calls, 2);
			assert_int_equal(g->start_ns, 1000 * groups);
			assert_int_equal(g->end_enter_ns, 1000 * groups + 10);
			assert_int_equal(g->end_exit_ns, 1000 * groups + 11);
		} else if (h->type == FSS_REC_COLLECTIVE) {
			const struct fss_rec_collective *c = (const void *)h;
			colls++;
			if (colls == 5) {
				assert_int_equal(c->group_id, 0);
				assert_int_equal(c->group_depth, 0);
			} else {
				assert_int_equal(c->group_id, (colls + 1) / 2);
				assert_int_equal(c->group_depth, colls % 2 ? 2 : 1);
			}
		} else if (h->type == FSS_REC_ENTER) {
			const struct fss_rec_enter *e = (const void *)h;
			assert_int_equal(e->group_id, e->seq == 5 ? 0 : (e->seq + 1) / 2);
		}
	}
	assert_int_equal(groups, 2);
	assert_int_equal(colls, 5);
	attach_records_free(a);
	free(s.v);
}

/* NCCL's own nested calls (ncclBcast -> ncclBroadcast) are one record; an
 * exit without its enter is counted and writes nothing; process_exit last. */
static void test_nested_unpaired_exit(void **state)
{
	(void)state;
	struct sink s = {0};
	attach_records_t *a = one_proc(&s);
	ev(a, ATTACH_FN_ALLREDUCE, ATTACH_EV_EXIT, 5, NULL, 0); /* entered before the attach */
	struct attach_records_stats st;
	attach_records_stats(a, &st);
	assert_int_equal(st.events_unknown, 1);
	size_t before = s.n;
	uint64_t bc[8] = {0x3000, 77, FSS_DTYPE_INT8, 2, 0xbeef, 0};
	uint64_t br[8] = {0x3000, 0x3000, 77, FSS_DTYPE_INT8, 2, 0xbeef, 0};
	ev(a, ATTACH_FN_BCAST, ATTACH_EV_ENTER, 10, bc, 0);
	ev(a, ATTACH_FN_BROADCAST, ATTACH_EV_ENTER, 11, br, 0);
	ev(a, ATTACH_FN_BROADCAST, ATTACH_EV_EXIT, 12, NULL, 0);
	ev(a, ATTACH_FN_BCAST, ATTACH_EV_EXIT, 13, NULL, 3);
	struct attach_event x = {
	    .ts_ns = 99, .pid = 77, .tid = 77, .fn = ATTACH_FN_PROCESS_EXIT, .kind = ATTACH_EV_EXIT, .ret = 9};
	assert_int_equal(attach_records_event(a, &x), 0);
	ev(a, ATTACH_FN_ALLREDUCE, ATTACH_EV_EXIT, 100, NULL, 0); /* the process is gone */
	attach_records_stats(a, &st);
	assert_int_equal(st.events_unknown, 2);
	assert_int_equal(st.collectives, 1);
	/* the observed comm, the enter, the collective, the exit */
	assert_int_equal(s.n - before, 4);
	const struct fss_rec_comm *c = (const void *)head_of(&s.v[before]);
	assert_int_equal(c->head.type, FSS_REC_COMM);
	assert_int_equal(c->event, FSS_COMM_OBSERVED);
	assert_int_equal(c->nranks, 1);
	assert_int_equal(c->inferred, FSS_COMM_INFER_ID | FSS_COMM_INFER_NRANKS_ATTACHED | FSS_COMM_INFER_RANK_ORDER);
	const struct fss_rec_collective *k = (const void *)head_of(&s.v[before + 2]);
	assert_int_equal(k->head.type, FSS_REC_COLLECTIVE);
	assert_int_equal(k->op, FSS_OP_BROADCAST);
	assert_int_equal(k->peer, 2);
	assert_int_equal(k->sendbuff, 0x3000);
	assert_int_equal(k->recvbuff, 0x3000);
	assert_int_equal(k->bytes, 77);
	assert_int_equal(k->result, 3);
	const struct fss_rec_process_exit *e = (const void *)head_of(&s.v[s.n - 1]);
	assert_int_equal(e->head.type, FSS_REC_PROCESS_EXIT);
	assert_int_equal(e->pid, 77);
	assert_int_equal(e->wait_status, 9);
	assert_int_equal(e->at_ns, 99);
	attach_records_free(a);
	free(s.v);
}

/* ---- bounds, late ranks, splits of observed communicators, ends ------------------------- */

static void call_on(attach_records_t *a, uint32_t pid, uint64_t t, uint16_t fn, const uint64_t arg[8])
{
	struct attach_event e = {.ts_ns = t, .pid = pid, .tid = pid, .fn = fn, .kind = ATTACH_EV_ENTER};
	memcpy(e.arg, arg, sizeof(e.arg));
	assert_int_equal(attach_records_event(a, &e), 0);
	memset(e.arg, 0, sizeof(e.arg));
	e.kind = ATTACH_EV_EXIT;
	e.ts_ns = t + 1;
	assert_int_equal(attach_records_event(a, &e), 0);
}

static void add_pid(attach_records_t *a, uint32_t pid, int32_t rank)
{
	struct attach_process p = {.pid = pid,
				   .ppid = 1,
				   .rank = rank,
				   .local_rank = -1,
				   .world_size = -1,
				   .slurm_procid = -1,
				   .ompi_rank = -1,
				   .command = "python",
				   .host = "n"};
	assert_int_equal(attach_records_add(a, &p), 0);
}

/* An in-place AllGather of rank r of n on comm. */
static void gather_on(attach_records_t *a, uint32_t pid, uint64_t t, uint64_t comm, int r, uint64_t count)
{
	uint64_t recv = 0x10000000ull;
	uint64_t g[8] = {recv + (uint64_t)r * count * 4, recv, count, FSS_DTYPE_FLOAT32, comm, 0};
	call_on(a, pid, t, ATTACH_FN_ALLGATHER, g);
}

/* A rank that stops calling keeps the others' windows incomplete: the cap
 * on held records decides, and memory stays bounded. */
static void test_hold_cap(void **state)
{
	(void)state;
	struct sink s = {0};
	attach_records_t *a = NULL;
	assert_int_equal(attach_records_new(&a, on_record, &s), 0);
	add_pid(a, 10, -1);
	add_pid(a, 20, -1);
	gather_on(a, 20, 1, 0xb, 1, 100); /* one call, then silence */
	uint64_t max_held = 0;
	struct attach_records_stats st;
	for (uint64_t i = 0; i < 2u * ATTACH_RECORDS_HOLD_MAX; i++) {
		gather_on(a, 10, 10 + 2 * i, 0xa, 0, 100 + i % 3);
		attach_records_stats(a, &st);
		if (st.held > max_held)
			max_held = st.held;
	}
	/* pid 10 holds at most the cap and the one record over it, pid 20 its
	 * comm, enter and collective */
	assert_true(max_held <= ATTACH_RECORDS_HOLD_MAX + 1 + 3);
	assert_true(max_held >= ATTACH_RECORDS_HOLD_MAX); /* it did hold until the cap */
	assert_int_equal(st.held, 0);
	assert_int_equal(st.comms_observed, 2);
	assert_int_equal(st.collectives, 2u * ATTACH_RECORDS_HOLD_MAX + 1);
	attach_records_free(a);
	free(s.v);
}

/* A rank attached after the others were decided joins their communicator. */
static void test_late_rank(void **state)
{
	(void)state;
	struct sink s = {0};
	attach_records_t *a = NULL;
	assert_int_equal(attach_records_new(&a, on_record, &s), 0);
	add_pid(a, 10, -1);
	add_pid(a, 20, -1);
	uint64_t t = 100;
	for (unsigned i = 0; i < ATTACH_RECORDS_WINDOW; i++, t += 10) {
		gather_on(a, 10, t, 0xa, 0, 64 + i % 5);
		gather_on(a, 20, t + 1, 0xb, 1, 64 + i % 5);
	}
	struct attach_records_stats st;
	attach_records_stats(a, &st);
	assert_int_equal(st.comms_observed, 2); /* decided at the window, not at the end */
	add_pid(a, 30, -1);
	for (unsigned i = 0; i < ATTACH_RECORDS_WINDOW; i++, t += 10)
		gather_on(a, 30, t, 0xc, 2, 64 + i % 5);
	const struct fss_rec_comm *c0 = observed(&s, 10, 0xa), *c2 = observed(&s, 30, 0xc);
	assert_int_equal(c0->nranks, 2);
	assert_int_equal(c2->id_hash, c0->id_hash);
	assert_int_equal(c2->rank, 2);
	assert_int_equal(c2->nranks, 3); /* raised by its rank */
	assert_int_equal(c2->inferred,
			 FSS_COMM_INFER_ID | FSS_COMM_INFER_NRANKS_ATTACHED | FSS_COMM_INFER_RANK_INPLACE);
	attach_records_free(a);
	free(s.v);
}

/* A split of a communicator first seen in use: the child's id_hash is the
 * agent's key over the parent's inferred one (INFER_ID said), its nranks
 * the processes that made it, its rank from the keys; a destroy of an
 * observed communicator carries what it was decided to be. */
static void test_split_observed(void **state)
{
	(void)state;
	struct sink s = {0};
	attach_records_t *a = NULL;
	assert_int_equal(attach_records_new(&a, on_record, &s), 0);
	add_pid(a, 10, -1);
	add_pid(a, 20, -1);
	for (int r = 0; r < 2; r++) {
		uint32_t pid = r ? 20 : 10;
		gather_on(a, pid, 100, r ? 0xb : 0xa, r, 64);
		/* split(parent, color 5, key 1 - r): the keys reverse the ranks */
		struct attach_event e = {.ts_ns = 200,
					 .pid = pid,
					 .tid = pid,
					 .fn = ATTACH_FN_COMM_SPLIT,
					 .kind = ATTACH_EV_ENTER,
					 .arg = {r ? 0xb : 0xa, 5, (uint64_t)(1 - r), 0x777}};
		assert_int_equal(attach_records_event(a, &e), 0);
		e.kind = ATTACH_EV_EXIT;
		e.ts_ns = 201;
		e.out[0] = r ? 0xbb : 0xaa;
		e.nout = 1;
		assert_int_equal(attach_records_event(a, &e), 0);
		uint64_t d[8] = {r ? 0xb : 0xa};
		call_on(a, pid, 300, ATTACH_FN_COMM_DESTROY, d);
	}
	struct attach_records_stats st;
	attach_records_stats(a, &st);
	assert_true(st.held > 0); /* undecided: too few calls */
	assert_int_equal(attach_records_decide(a, 1), 0);
	const struct fss_rec_comm *p0 = observed(&s, 10, 0xa), *p1 = observed(&s, 20, 0xb);
	assert_int_equal(p0->id_hash, p1->id_hash);
	const struct fss_rec_comm *child[2] = {NULL, NULL}, *end[2] = {NULL, NULL};
	for (size_t i = 0; i < s.n; i++) {
		const struct fss_rec_comm *c = (const void *)head_of(&s.v[i]);
		int r = s.v[i].pid == 20;
		if (c->head.type != FSS_REC_COMM)
			continue;
		if (c->event == FSS_COMM_SPLIT)
			child[r] = c;
		if (c->event == FSS_COMM_DESTROY)
			end[r] = c;
	}
	unsigned char k[20];
	uint64_t ph = p0->id_hash, no = 0;
	int32_t color = 5;
	memcpy(k, &ph, 8);
	memcpy(k + 8, &no, 8);
	memcpy(k + 16, &color, 4);
	for (int r = 0; r < 2; r++) {
		assert_non_null(child[r]);
		assert_int_equal(child[r]->id_hash, record_hash_bytes(k, sizeof k));
		assert_int_equal(child[r]->nranks, 2);
		assert_int_equal(child[r]->rank, 1 - r);
		assert_true(child[r]->inferred & FSS_COMM_INFER_ID);
		assert_true(child[r]->inferred & FSS_COMM_INFER_NRANKS_ATTACHED);
		assert_non_null(end[r]);
		assert_int_equal(end[r]->id_hash, p0->id_hash);
		assert_int_equal(end[r]->nranks, 2);
		assert_int_equal(end[r]->rank, r);
		assert_true(end[r]->inferred & FSS_COMM_INFER_ID);
	}
	attach_records_stats(a, &st);
	assert_int_equal(st.held, 0);
	attach_records_free(a);
	free(s.v);
}

/* ncclCommInitAll: the agent's per-process key, one record per device. */
static void test_init_all(void **state)
{
	(void)state;
	struct sink s = {0};
	attach_records_t *a = one_proc(&s);
	size_t before = s.n;
	struct attach_event e = {.ts_ns = 5,
				 .pid = 77,
				 .tid = 78,
				 .fn = ATTACH_FN_COMM_INIT_ALL,
				 .kind = ATTACH_EV_ENTER,
				 .arg = {0x9000, 2, 0}};
	assert_int_equal(attach_records_event(a, &e), 0);
	/* NCCL's own group calls inside it are not recorded */
	ev(a, ATTACH_FN_GROUP_START, ATTACH_EV_ENTER, 6, NULL, 0);
	ev(a, ATTACH_FN_GROUP_START, ATTACH_EV_EXIT, 7, NULL, 0);
	ev(a, ATTACH_FN_GROUP_END, ATTACH_EV_ENTER, 8, NULL, 0);
	ev(a, ATTACH_FN_GROUP_END, ATTACH_EV_EXIT, 9, NULL, 0);
	e.kind = ATTACH_EV_EXIT;
	e.ts_ns = 10;
	e.out[0] = 0x100;
	e.out[1] = 0x200;
	e.nout = 2;
	assert_int_equal(attach_records_event(a, &e), 0);
	assert_int_equal(s.n - before, 2);
	struct {
		uint64_t pid, call;
	} key = {77, 0};
	for (int i = 0; i < 2; i++) {
		const struct fss_rec_comm *c = (const void *)head_of(&s.v[before + (size_t)i]);
		assert_int_equal(c->head.type, FSS_REC_COMM);
		assert_int_equal(c->event, FSS_COMM_INIT);
		assert_int_equal(c->comm, i ? 0x200 : 0x100);
		assert_int_equal(c->id_hash, record_hash_bytes(&key, sizeof key));
		assert_int_equal(c->nranks, 2);
		assert_int_equal(c->rank, i);
	}
	attach_records_free(a);
	free(s.v);
}

/* A collective whose exit was lost (a full ring) does not make the
 * thread's later calls look nested in it. */
static void test_lost_exit(void **state)
{
	(void)state;
	struct sink s = {0};
	attach_records_t *a = one_proc(&s);
	uint64_t ar[8] = {0x10, 0x10, 4, FSS_DTYPE_FLOAT32, FSS_REDOP_SUM, 0, 0};
	ev(a, ATTACH_FN_ALLREDUCE, ATTACH_EV_ENTER, 10, ar, 0); /* its exit never comes */
	for (uint64_t i = 0; i < 3; i++) {
		ev(a, ATTACH_FN_ALLREDUCE, ATTACH_EV_ENTER, 20 + 2 * i, ar, 0);
		ev(a, ATTACH_FN_ALLREDUCE, ATTACH_EV_EXIT, 21 + 2 * i, NULL, 0);
	}
	struct attach_records_stats st;
	attach_records_stats(a, &st);
	assert_int_equal(st.collectives, 3); /* comm 0: no communicator, nothing held */
	assert_int_equal(st.held, 0);
	assert_int_equal(st.events_unknown, 1);
	const struct fss_rec_collective *k = (const void *)head_of(&s.v[s.n - 1]);
	assert_int_equal(k->seq, 4); /* the lost one had its seq and its enter */
	attach_records_free(a);
	free(s.v);
}

/* ---- the analysis reads them as the agent's ---------------------------------------------- */

static char dir[] = "/tmp/fss-attach-records-XXXXXX";

static void test_analysis(void **state)
{
	(void)state;
	struct job j = {.ranks = 3, .steps = 12, .inplace = 1, .exit = 1, .offset = {0, 13, 60}};
	struct sink s = {0};
	run_job(&j, &s, 1, NULL);
	char path[128];
	snprintf(path, sizeof path, "%s/attach.fss", dir);
	trace_writer_t *w = NULL;
	struct trace_writer_options o = {.features = FSS_FEATURE_UPROBE | FSS_FEATURE_ENTER};
	assert_int_equal(trace_writer_open(&w, path, &o), 0);
	for (size_t i = 0; i < s.n; i++) {
		struct fss_record_head *h = (void *)s.v[i].rec;
		h->source = (s.v[i].pid - pid_of(0)) / 10; /* one source per process, as the ingest numbers them */
		assert_int_equal(trace_writer_append(w, h), 0);
	}
	assert_int_equal(trace_writer_close(w), 0);
	struct analysis_options opts;
	analysis_options_init(&opts);
	struct analysis_result *r = NULL;
	char err[256];
	int rc = analyze_trace(path, &opts, &r, err, sizeof err);
	if (rc)
		fprintf(stderr, "analyze_trace: %s\n", err);
	assert_int_equal(rc, 0);
	assert_int_equal(r->ranks, 3);
	assert_int_equal(r->step_detection, ANALYSIS_STEPS_PERIOD);
	assert_int_equal(r->per_step.allgathers, 1 + 2 * LAYERS * LINEARS);
	assert_int_equal(r->per_step.reduce_scatters, 1 + LAYERS * LINEARS);
	assert_int_equal(r->units.shard_ranks, 3);
	/* every generated step is found; a rank whose attach landed inside
	 * step 0 analyses the others */
	assert_int_equal(r->steps_seen, j.steps);
	assert_int_equal(r->steps_analyzed, j.steps);
	assert_int_equal(r->nper_rank, 3);
	for (uint32_t i = 0; i < r->nper_rank; i++) {
		const struct analysis_rank *k = &r->per_rank[i];
		assert_int_equal(k->rank, (int32_t)i);
		assert_int_equal(k->steps_seen, j.steps);
		assert_int_equal(k->steps_analyzed, j.offset[i] ? j.steps - 1 : j.steps);
	}
	assert_int_equal(r->nsources, 3);
	for (uint32_t i = 0; i < r->nsources; i++)
		assert_int_equal(r->sources[i].rank, (int32_t)r->sources[i].source);
	analysis_result_free(r);
	unlink(path);
	free(s.v);
}

static int setup(void **state)
{
	(void)state;
	return scratch_dir_make(dir);
}

static int teardown(void **state)
{
	(void)state;
	return scratch_dir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_inplace_3),
	    cmocka_unit_test(test_inplace_4),
	    cmocka_unit_test(test_decided_live),
	    cmocka_unit_test(test_env_and_order),
	    cmocka_unit_test(test_hsdp),
	    cmocka_unit_test(test_init_seen),
	    cmocka_unit_test(test_split_of_init),
	    cmocka_unit_test(test_groups),
	    cmocka_unit_test(test_nested_unpaired_exit),
	    cmocka_unit_test(test_hold_cap),
	    cmocka_unit_test(test_late_rank),
	    cmocka_unit_test(test_split_observed),
	    cmocka_unit_test(test_init_all),
	    cmocka_unit_test(test_lost_exit),
	    cmocka_unit_test(test_analysis),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
