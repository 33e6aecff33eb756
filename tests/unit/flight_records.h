/*
 * flight_records.h - records of a synthetic job for the calls-in-flight
 * tests (flight_test.c, flight_cupti_test.c): ranks with their own clocks,
 * communicators, collectives with their enter records, groups,
 * synchronizes, GPU intervals and ends, fed to an analyzer, a trace writer,
 * or the flight state alone. Include after <cmocka.h>.
 */
#ifndef FSS_TESTS_FLIGHT_RECORDS_H
#define FSS_TESTS_FLIGHT_RECORDS_H

#include <stdint.h>
#include <string.h>

#include "collector/analyze.h"
#include "collector/flight.h"
#include "collector/source.h"
#include "common/record.h"
#include "common/trace_writer.h"

#define S 1000000000ull
#define MS 1000000ull
#define COMM_ID 0xc011ec7e0000c0ffull
#define HANDLE 0x7f0000001000ull

/* ---- records ------------------------------------------------------------- */

/* Where records go: an analyzer, a trace file, or the flight state alone. */
struct out {
	analyzer_t *a;
	trace_writer_t *w;
	sources_t *layer;
	flight_t *f;
	uint64_t records;
};

static inline void put(struct out *o, const void *rec)
{
	o->records++;
	if (o->a)
		assert_int_equal(analyzer_feed(o->a, rec), 0);
	if (o->w)
		assert_int_equal(trace_writer_append(o->w, rec), 0);
	if (o->f) {
		const struct fss_record_head *h = rec;

		assert_int_equal(sources_feed(o->layer, h), 0);
		assert_int_equal(flight_feed(o->f, sources_find(o->layer, h->source), h), 0);
	}
}

/* A rank: its source, its clock (realtime = mono + rt_offset) and its
 * state of calls. */
struct rank {
	uint32_t source;
	int32_t rank;
	uint64_t seq; /* per-source call number of the latest call */
	int64_t rt_offset;
	uint32_t sync_id;
	uint64_t features;
};

static inline void hello(struct out *o, struct rank *r, uint32_t source, int32_t rank, uint64_t mono, int64_t rt_offset,
			 uint64_t features)
{
	struct fss_rec_process_hello h;

	memset(r, 0, sizeof(*r));
	r->source = source;
	r->rank = rank;
	r->rt_offset = rt_offset;
	r->features = features;
	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), source);
	h.pid = 1000 + source;
	h.rank = rank;
	h.local_rank = h.world_size = h.slurm_procid = h.ompi_rank = -1;
	h.path = FSS_PATH_SYNTHETIC;
	h.mono_ns = mono;
	h.realtime_ns = (uint64_t)((int64_t)mono + rt_offset);
	h.features = features;
	put(o, &h);
}

static inline void comm(struct out *o, const struct rank *r, uint64_t handle, uint64_t id, int32_t nranks, int32_t rank,
			uint64_t t)
{
	struct fss_rec_comm c;

	record_init(&c, FSS_REC_COMM, sizeof(c), r->source);
	c.comm = handle;
	c.id_hash = id;
	c.enter_ns = t;
	c.exit_ns = t + 1000;
	c.nranks = nranks;
	c.rank = rank;
	c.device = -1;
	c.color = c.key = -1;
	c.event = FSS_COMM_INIT;
	c.path = FSS_PATH_SYNTHETIC;
	put(o, &c);
}

struct call {
	uint8_t op, dtype, redop;
	uint64_t count;
	int32_t root;
	uint32_t group_id;
	uint64_t handle; /* 0: HANDLE */
};

static const struct call AG
    __attribute__((unused)) = {FSS_OP_ALLGATHER, FSS_DTYPE_BFLOAT16, FSS_REDOP_NONE, 4096, -1, 0, 0};

static inline void enter(struct out *o, struct rank *r, const struct call *c, uint64_t t)
{
	struct fss_rec_enter e;

	record_init(&e, FSS_REC_ENTER, sizeof(e), r->source);
	e.seq = ++r->seq;
	e.comm = c->handle ? c->handle : HANDLE;
	e.count = c->count;
	e.enter_ns = t;
	e.peer = c->root;
	e.group_id = c->group_id;
	e.kind = FSS_ENTER_COLLECTIVE;
	e.op = c->op;
	e.dtype = c->dtype;
	e.redop = c->redop;
	e.path = FSS_PATH_SYNTHETIC;
	put(o, &e);
}

/* The collective record of the latest call entered (with_enter), or of a
 * new one, returning ncclResult_t result. */
static inline void collective_result(struct out *o, struct rank *r, const struct call *c, uint64_t t0, uint64_t t1,
				     int with_enter, int32_t result)
{
	struct fss_rec_collective k;

	if (with_enter)
		enter(o, r, c, t0);
	else
		r->seq++;
	record_init(&k, FSS_REC_COLLECTIVE, sizeof(k), r->source);
	k.seq = r->seq;
	k.comm = c->handle ? c->handle : HANDLE;
	k.count = c->count;
	k.bytes = c->count * record_dtype_bytes(c->dtype);
	k.enter_ns = t0;
	k.exit_ns = t1;
	k.group_id = c->group_id;
	k.peer = c->root;
	k.op = c->op;
	k.dtype = c->dtype;
	k.redop = c->redop;
	k.result = result;
	k.path = FSS_PATH_SYNTHETIC;
	put(o, &k);
}

static inline void collective(struct out *o, struct rank *r, const struct call *c, uint64_t t0, uint64_t t1,
			      int with_enter)
{
	collective_result(o, r, c, t0, t1, with_enter, 0);
}

/* The return of the call r entered last (its enter record came), with
 * ncclResult_t result. */
static inline void returned(struct out *o, struct rank *r, const struct call *c, uint64_t t0, uint64_t t1,
			    int32_t result)
{
	r->seq--;
	collective_result(o, r, c, t0, t1, 0, result);
}

/* A record at host time t: the source is alive then (the agent writes drops
 * records as it goes). */
static inline void alive(struct out *o, const struct rank *r, uint64_t t)
{
	struct fss_rec_drops d;

	record_init(&d, FSS_REC_DROPS, sizeof(d), r->source);
	d.at_ns = t;
	put(o, &d);
}

static inline void process_end(struct out *o, const struct rank *r, uint64_t t)
{
	struct fss_rec_process_end e;

	record_init(&e, FSS_REC_PROCESS_END, sizeof(e), r->source);
	e.at_ns = t;
	e.collectives = r->seq;
	e.exit_code = 0;
	put(o, &e);
}

static inline void process_exit(struct out *o, const struct rank *r, uint64_t t, int signal)
{
	struct fss_rec_process_exit x;

	record_init(&x, FSS_REC_PROCESS_EXIT, sizeof(x), r->source);
	x.at_ns = t;
	x.pid = 1000 + r->source;
	x.wait_status = signal; /* WIFSIGNALED */
	put(o, &x);
}

static inline void anchor(struct out *o, const struct rank *r, uint32_t domain, uint64_t mono, uint64_t other)
{
	struct fss_rec_clock_anchor a;

	record_init(&a, FSS_REC_CLOCK_ANCHOR, sizeof(a), r->source);
	a.mono_ns = mono;
	a.other_ns = other;
	a.domain = domain;
	put(o, &a);
}

/* An interval as agent/cupti.c writes it: CUPTI time base, an NCCL kernel
 * tied to its call's seq (0: not tied yet). */
static inline void gpu(struct out *o, const struct rank *r, uint16_t kind, uint64_t start, uint64_t end, uint64_t seq,
		       uint32_t corr)
{
	struct fss_rec_gpu_interval g;

	record_init(&g, FSS_REC_GPU_INTERVAL, sizeof(g), r->source);
	g.start_ns = start;
	g.end_ns = end;
	g.stream = kind == FSS_GPU_COMM ? 13 : 7;
	g.collective_seq = seq;
	g.correlation_id = corr;
	g.device = (uint32_t)r->rank;
	g.context = 1;
	g.kind = kind;
	put(o, &g);
}

static inline void correlation(struct out *o, const struct rank *r, uint64_t seq, uint32_t corr)
{
	struct fss_rec_correlation c;

	record_init(&c, FSS_REC_CORRELATION, sizeof(c), r->source);
	c.collective_seq = seq;
	c.correlation_id = corr;
	put(o, &c);
}

static inline void sync_enter(struct out *o, struct rank *r, uint16_t kind, uint64_t t)
{
	struct fss_rec_enter e;

	record_init(&e, FSS_REC_ENTER, sizeof(e), r->source);
	e.seq = r->seq;
	e.stream = 0x5000;
	e.enter_ns = t;
	e.peer = -1;
	e.sync_id = ++r->sync_id;
	e.kind = kind;
	e.redop = FSS_REDOP_NONE;
	e.path = FSS_PATH_SYNTHETIC;
	put(o, &e);
}

static inline void sync_exit(struct out *o, const struct rank *r, uint16_t kind, uint64_t t0, uint64_t t1)
{
	struct fss_rec_sync_exit x;

	record_init(&x, FSS_REC_SYNC_EXIT, sizeof(x), r->source);
	x.enter_ns = t0;
	x.exit_ns = t1;
	x.after_seq = r->seq;
	x.sync_id = r->sync_id;
	x.kind = kind;
	put(o, &x);
}

/* ---- a job ----------------------------------------------------------------- */

#define RANKS_MAX 8
#define BASE (1000 * S) /* every rank's CLOCK_MONOTONIC at its hello */
#define RT0 (1700000000ull * S)
#define STEP (10 * MS) /* one collective every 10 ms */

struct job {
	struct out o;
	struct rank r[RANKS_MAX];
	int n;
};

static inline void job_start_opts(struct job *j, int n, uint64_t features, const struct analysis_options *opt)
{
	memset(j, 0, sizeof(*j));
	assert_int_equal(analyzer_new(&j->o.a, opt), 0);
	j->n = n;
	for (int i = 0; i < n; i++) {
		hello(&j->o, &j->r[i], (uint32_t)i, i, BASE, (int64_t)(RT0 - BASE), features);
		comm(&j->o, &j->r[i], HANDLE, COMM_ID, n, i, BASE + MS);
	}
}

static inline void job_start(struct job *j, int n, uint64_t features)
{
	job_start_opts(j, n, features, NULL);
}

/* Collectives 1..k on every rank, each entered and returned (blocking, as
 * on the stand-in). */
static inline void job_run(struct job *j, int k, int with_enter)
{
	for (int c = 1; c <= k; c++)
		for (int i = 0; i < j->n; i++) {
			uint64_t t = BASE + S + (uint64_t)c * STEP;

			collective(&j->o, &j->r[i], &AG, t, t + STEP / 2, with_enter);
		}
}

static struct analysis_result *snap(struct job *j)
{
	struct analysis_result *r = NULL;

	assert_int_equal(analyzer_snapshot(j->o.a, &r), 0);
	assert_non_null(r);
	return r;
}

static inline void job_end(struct job *j)
{
	analyzer_free(j->o.a);
	j->o.a = NULL;
}

static inline void group_end(struct out *o, const struct rank *r, uint32_t group_id, uint32_t calls, uint64_t t0,
			     uint64_t t1)
{
	struct fss_rec_group g;

	record_init(&g, FSS_REC_GROUP, sizeof(g), r->source);
	g.group_id = group_id;
	g.calls = calls;
	g.start_ns = t0;
	g.end_enter_ns = t0 + 1000;
	g.end_exit_ns = t1;
	put(o, &g);
}

#endif
