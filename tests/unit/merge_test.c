/*
 * merge_test.c - several traces as one job (collector/merge.h): synthetic
 * nodes with known clocks and known collectives.
 *
 * The job: 4 ranks, ranks 0-1 on host "a" (trace A), 2-3 on host "b"
 * (trace B), all on one communicator. True time t (CLOCK_REALTIME of a
 * perfect clock); host A's CLOCK_MONOTONIC is t - A_BOOT, host B's is
 * t - B_BOOT, so B's stamps must move by B_BOOT - A_BOOT = -1000 s. Each
 * collective n: the ranks arrive at different times, all leave within a
 * few microseconds of one instant (host exits on a host-blocking
 * communicator, or NCCL kernel ends on a GPU one).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "collector/merge.h"
#include "collector/merge_align.h"
#include "common/error.h"
#include "common/record.h"
#include "common/trace_writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEC 1000000000ll
#define T0 (1764590000ll * SEC)        /* the job's start, CLOCK_REALTIME */
#define A_MONO_AT_T0 (100ll * SEC)      /* host A booted 100 s before */
#define B_MONO_AT_T0 (1100ll * SEC)     /* host B's CLOCK_MONOTONIC is 1000 s ahead */
#define WANT_OFFSET (-1000ll * SEC)
#define COLLECTIVES 200
#define COMM_HASH 0x5eed5eed5eed5eedull
#define CUPTI_BASE (7ll * SEC)          /* CUPTI time = CLOCK_MONOTONIC + this, on both hosts */

struct job {
	int64_t b_realtime_error_ns; /* host B's CLOCK_REALTIME minus the true time (NTP off) */
	int gpu;                     /* a GPU communicator: kernel ends, host exits at enqueue */
	int untied;                  /* kernels tied to their collective by correlation records, before or after */
	uint64_t process_id_a, process_id_b;
	int run;                     /* a later run of the same job into the same folder: 100 s later, its own
	                                unique id (0: the first) */
};

static int64_t abs64(int64_t v)
{
	return v < 0 ? -v : v;
}

static int64_t mono_of(int host, int64_t t)
{
	return t - T0 + (host ? B_MONO_AT_T0 : A_MONO_AT_T0);
}

#define RUN_AFTER (100ll * SEC) /* a later run starts this long after the first */

static void append(trace_writer_t *w, const void *rec)
{
	assert_int_equal(trace_writer_append(w, rec), 0);
}

/* One node's trace: its two ranks' hellos, sinks, communicators, and
 * COLLECTIVES AllReduces each. */
static void write_node(const char *path, int host, const struct job *job)
{
	trace_writer_t *w;

	assert_int_equal(trace_writer_open(&w, path, NULL), 0);
	for (uint32_t s = 0; s < 2; s++) {
		int32_t rank = host * 2 + (int32_t)s;
		int64_t t = T0 + job->run * RUN_AFTER + (int64_t)s * 1000;
		int64_t rt_err = host ? job->b_realtime_error_ns : 0;
		struct fss_rec_process_hello h;
		struct fss_rec_sink k;
		struct fss_rec_comm c;
		struct fss_rec_clock_anchor a;

		record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), s);
		h.pid = 1000u + (uint32_t)rank;
		h.rank = rank;
		h.world_size = 4;
		h.host = 1;
		h.mono_ns = (uint64_t)mono_of(host, t);
		h.realtime_ns = (uint64_t)(t + rt_err);
		h.features = FSS_FEATURE_NCCL | (job->gpu ? FSS_FEATURE_CUPTI : 0);
		append(w, &h);
		record_init(&k, FSS_REC_SINK, sizeof(k), s);
		k.process_id = (host ? job->process_id_b : job->process_id_a) + s;
		k.serial = 1;
		k.kind = FSS_SINK_SOCKET;
		append(w, &k);
		assert_int_equal(trace_writer_string(w, s, 1, host ? "b" : "a", 1), 0);
		record_init(&a, FSS_REC_CLOCK_ANCHOR, sizeof(a), s);
		a.mono_ns = (uint64_t)mono_of(host, t + 10);
		a.other_ns = (uint64_t)(mono_of(host, t + 10) + CUPTI_BASE);
		a.domain = FSS_CLOCK_CUPTI;
		append(w, &a);
		record_init(&c, FSS_REC_COMM, sizeof(c), s);
		c.comm = 0xc0000 + s;
		c.id_hash = COMM_HASH + (uint64_t)job->run;
		c.enter_ns = (uint64_t)mono_of(host, t + 20);
		c.exit_ns = (uint64_t)mono_of(host, t + 30);
		c.nranks = 4;
		c.rank = rank;
		c.device = job->gpu ? (int32_t)s : -1;
		c.color = c.key = -1;
		c.event = FSS_COMM_INIT;
		append(w, &c);
	}
	for (uint64_t n = 1; n <= COLLECTIVES; n++)
		for (uint32_t s = 0; s < 2; s++) {
			int32_t rank = host * 2 + (int32_t)s;
			/* arrivals spread over 300 us, a different rank last each time */
			int64_t start = T0 + job->run * RUN_AFTER;
			int64_t arrive = start + (int64_t)n * 10000000 + ((rank * 7 + (int64_t)n * 3) % 4) * 100000;
			/* everyone leaves 1 ms after the last arrival, give or take 0-4 us */
			int64_t leave = start + (int64_t)n * 10000000 + 400000 + 1000000 + ((rank * 13 + (int64_t)n) % 5) * 1000;
			struct fss_rec_collective c;

			record_init(&c, FSS_REC_COLLECTIVE, sizeof(c), s);
			c.seq = n;
			c.comm = 0xc0000 + s;
			c.count = 1024;
			c.bytes = 4096;
			c.enter_ns = (uint64_t)mono_of(host, arrive);
			c.exit_ns = (uint64_t)mono_of(host, job->gpu ? arrive + 5000 : leave); /* a GPU call returns at enqueue */
			c.peer = -1;
			c.op = FSS_OP_ALLREDUCE;
			c.dtype = FSS_DTYPE_FLOAT32;
			c.redop = FSS_REDOP_SUM;
			append(w, &c);
			if (job->gpu) {
				struct fss_rec_gpu_interval g;
				struct fss_rec_correlation k;

				record_init(&g, FSS_REC_GPU_INTERVAL, sizeof(g), s);
				g.start_ns = (uint64_t)(mono_of(host, arrive + 8000) + CUPTI_BASE);
				g.end_ns = (uint64_t)(mono_of(host, leave) + CUPTI_BASE);
				g.collective_seq = job->untied ? 0 : n;
				g.correlation_id = (uint32_t)n * 10;
				g.kind = FSS_GPU_COMM;
				record_init(&k, FSS_REC_CORRELATION, sizeof(k), s);
				k.collective_seq = n;
				k.correlation_id = g.correlation_id;
				if (job->untied && n % 2 == 0)
					append(w, &k); /* the tie first, then the kernel */
				append(w, &g);
				if (job->untied && n % 2 == 1)
					append(w, &k); /* the kernel first, tied later */
			}
		}
	for (uint32_t s = 0; s < 2; s++) {
		struct fss_rec_process_end e;

		record_init(&e, FSS_REC_PROCESS_END, sizeof(e), s);
		e.at_ns = (uint64_t)mono_of(host, T0 + job->run * RUN_AFTER + (COLLECTIVES + 2) * 10000000ll);
		e.collectives = COLLECTIVES;
		e.exit_code = 0;
		append(w, &e);
	}
	assert_int_equal(trace_writer_close(w), 0);
}

struct paths {
	char a[64], b[64];
};

static void write_job(struct paths *p, const struct job *job)
{
	snprintf(p->a, sizeof(p->a), "/tmp/fss_merge_test_%d_a.fss", (int)getpid());
	snprintf(p->b, sizeof(p->b), "/tmp/fss_merge_test_%d_b.fss", (int)getpid());
	write_node(p->a, 0, job);
	write_node(p->b, 1, job);
}

static void remove_job(struct paths *p)
{
	unlink(p->a);
	unlink(p->b);
}

/* What the merged stream delivered. */
struct seen {
	merge_t *m;
	uint64_t records, headers;
	uint32_t max_source;
	int64_t exit_spread_max; /* per collective: latest host exit - earliest, over the 4 ranks */
	uint64_t exits[COLLECTIVES + 1][4];
	int cupti_anchor_ok, hello_realtime_ok;
	uint64_t out_of_order; /* records of one node delivered out of their file order */
	uint64_t last_seq[8];
};

static int on_header(void *ctx, const struct fss_file_header *h)
{
	(void)h;
	((struct seen *)ctx)->headers++;
	return 0;
}

static int on_record(void *ctx, const struct fss_record_head *rec)
{
	struct seen *s = ctx;
	size_t node = merge_current(s->m);

	s->records++;
	if (rec->source == FSS_SOURCE_NONE)
		return 0;
	assert_true(rec->source < 4);
	assert_int_equal(rec->source / 2, node); /* renumbered: A 0-1, B 2-3 */
	if (rec->source > s->max_source)
		s->max_source = rec->source;
	if (rec->type == FSS_REC_COLLECTIVE) {
		const struct fss_rec_collective *c = (const void *)rec;

		if (c->seq <= s->last_seq[rec->source])
			s->out_of_order++;
		s->last_seq[rec->source] = c->seq;
		s->exits[c->seq][rec->source] = c->exit_ns;
	}
	if (rec->type == FSS_REC_CLOCK_ANCHOR && node == 1) {
		const struct fss_rec_clock_anchor *a = (const void *)rec;
		/* the anchor's mono side moved with the stamps, its CUPTI side not:
		 * mono - CUPTI now maps CUPTI time onto A's clock */
		s->cupti_anchor_ok += abs64((int64_t)a->other_ns - (int64_t)a->mono_ns - (CUPTI_BASE + 1000ll * SEC)) < 10000;
	}
	if (rec->type == FSS_REC_PROCESS_HELLO && node == 1) {
		const struct fss_rec_process_hello *h = (const void *)rec;
		s->hello_realtime_ok += h->realtime_ns >= (uint64_t)T0; /* CLOCK_REALTIME is not moved */
	}
	return 0;
}

static void check_stream(merge_t *m, int64_t max_spread)
{
	struct seen *s = calloc(1, sizeof(*s));
	struct trace_parser_ops ops = {.on_header = on_header, .on_record = on_record};

	assert_non_null(s);
	s->m = m;
	assert_int_equal(merge_read(m, &ops, s), 0);
	assert_int_equal(s->headers, 2);
	assert_int_equal(s->max_source, 3);
	assert_int_equal(s->out_of_order, 0);
	assert_int_equal(s->cupti_anchor_ok, 2);
	assert_int_equal(s->hello_realtime_ok, 2);
	/* On one time base, the 4 ranks' exits of each collective agree. */
	for (int n = 1; n <= COLLECTIVES; n++) {
		uint64_t lo = UINT64_MAX, hi = 0;

		for (int r = 0; r < 4; r++) {
			assert_true(s->exits[n][r] != 0);
			lo = s->exits[n][r] < lo ? s->exits[n][r] : lo;
			hi = s->exits[n][r] > hi ? s->exits[n][r] : hi;
		}
		assert_true((int64_t)(hi - lo) <= max_spread);
	}
	const struct merge_node *nodes;
	size_t n;
	nodes = merge_nodes(m, &n);
	assert_int_equal(nodes[0].read_rc, 0);
	assert_int_equal(nodes[1].read_rc, 0);
	assert_int_equal(nodes[1].info.end, TRACE_END_CLEAN);
	free(s);
}

/* Synchronised clocks: the anchors give -1000 s, the collectives agree. */
static void test_two_hosts_known_offset(void **state)
{
	struct job job = {.process_id_a = 0xa0, .process_id_b = 0xb0};
	struct paths p;
	const char *paths[2];
	const struct merge_node *nodes;
	merge_t *m;
	char err[256];
	size_t n;

	(void)state;
	write_job(&p, &job);
	paths[0] = p.a;
	paths[1] = p.b;
	assert_int_equal(merge_open(&m, paths, 2, err, sizeof(err)), 0);
	nodes = merge_nodes(m, &n);
	assert_int_equal(n, 2);
	assert_int_equal(nodes[0].basis, MERGE_BASIS_REFERENCE);
	assert_true(nodes[0].offset_ns == 0);
	assert_int_equal(nodes[1].basis, MERGE_BASIS_HOST_EXIT);
	assert_int_equal(nodes[1].collectives, COLLECTIVES);
	assert_int_equal(nodes[1].aligned_to, 0);
	/* the hellos' pairs differ by 1 us of reading: within 10 us */
	assert_true(abs64(nodes[1].anchor_offset_ns - WANT_OFFSET) < 10000);
	assert_true(abs64(nodes[1].offset_ns - WANT_OFFSET) < 5000);
	assert_true(nodes[1].residual_ns < 5000 && nodes[1].residual_max_ns < 10000);
	assert_int_equal(nodes[1].source_base, 2);
	assert_int_equal(nodes[1].nranks, 2);
	assert_int_equal(nodes[1].ranks[0], 2);
	assert_int_equal(nodes[1].ranks[1], 3);
	assert_int_equal(nodes[1].nhosts, 1);
	assert_string_equal(nodes[1].hosts[0], "b");
	check_stream(m, 10000);
	merge_free(m);
	remove_job(&p);
}

/* Host B's CLOCK_REALTIME is 50 ms ahead (NTP not synchronised): the
 * anchors are 50 ms off, the shared collectives put it right. */
static void test_anchors_wrong_by_50ms(void **state)
{
	struct job job = {.b_realtime_error_ns = 50000000, .process_id_a = 0xa0, .process_id_b = 0xb0};
	struct paths p;
	const char *paths[2];
	const struct merge_node *nodes;
	merge_t *m;
	char err[256];
	size_t n;

	(void)state;
	write_job(&p, &job);
	paths[0] = p.a;
	paths[1] = p.b;
	assert_int_equal(merge_open(&m, paths, 2, err, sizeof(err)), 0);
	nodes = merge_nodes(m, &n);
	assert_true(abs64(nodes[1].anchor_offset_ns - (WANT_OFFSET + 50000000)) < 10000);
	assert_true(abs64(nodes[1].collective_offset_ns + 50000000) < 10000);
	assert_true(abs64(nodes[1].offset_ns - WANT_OFFSET) < 5000);
	assert_int_equal(nodes[1].basis, MERGE_BASIS_HOST_EXIT);
	check_stream(m, 10000);
	merge_free(m);
	remove_job(&p);
}

/* A GPU communicator: host exits return at enqueue and are not used; the
 * NCCL kernels' ends (CUPTI, through the CUPTI anchors) align the nodes. */
static void test_gpu_kernel_ends(void **state)
{
	struct job job = {.gpu = 1, .b_realtime_error_ns = -20000000, .process_id_a = 0xa0, .process_id_b = 0xb0};
	struct paths p;
	const char *paths[2];
	const struct merge_node *nodes;
	merge_t *m;
	char err[256];
	size_t n;

	(void)state;
	write_job(&p, &job);
	paths[0] = p.a;
	paths[1] = p.b;
	assert_int_equal(merge_open(&m, paths, 2, err, sizeof(err)), 0);
	nodes = merge_nodes(m, &n);
	assert_int_equal(nodes[1].basis, MERGE_BASIS_GPU_END);
	assert_int_equal(nodes[1].collectives, COLLECTIVES);
	assert_true(abs64(nodes[1].offset_ns - WANT_OFFSET) < 5000);
	merge_free(m);
	remove_job(&p);
}

/* The same with kernels whose records went out before their collective was
 * known (collective_seq 0), tied by correlation records that come before
 * or after them. */
static void test_gpu_kernel_ends_tied_by_correlation(void **state)
{
	struct job job = {.gpu = 1, .untied = 1, .b_realtime_error_ns = 30000000, .process_id_a = 0xa0, .process_id_b = 0xb0};
	struct paths p;
	const char *paths[2];
	const struct merge_node *nodes;
	merge_t *m;
	char err[256];
	size_t n;

	(void)state;
	write_job(&p, &job);
	paths[0] = p.a;
	paths[1] = p.b;
	assert_int_equal(merge_open(&m, paths, 2, err, sizeof(err)), 0);
	nodes = merge_nodes(m, &n);
	assert_int_equal(nodes[1].basis, MERGE_BASIS_GPU_END);
	assert_int_equal(nodes[1].collectives, COLLECTIVES);
	assert_true(abs64(nodes[1].offset_ns - WANT_OFFSET) < 5000);
	merge_free(m);
	remove_job(&p);
}

/* A node whose communicators no other node shares is placed by its
 * anchors alone, and says so. */
static void test_no_shared_communicator_is_anchors_only(void **state)
{
	struct job job = {.b_realtime_error_ns = 50000000, .process_id_a = 0xa0, .process_id_b = 0xb0};
	struct paths p;
	char c_path[64];
	const char *paths[3];
	const struct merge_node *nodes;
	trace_writer_t *w;
	struct fss_rec_process_hello h;
	merge_t *m;
	char err[256];
	size_t n;

	(void)state;
	write_job(&p, &job);
	snprintf(c_path, sizeof(c_path), "/tmp/fss_merge_test_%d_c.fss", (int)getpid());
	assert_int_equal(trace_writer_open(&w, c_path, NULL), 0);
	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), 0);
	h.pid = 2000;
	h.rank = 9;
	h.mono_ns = 5 * SEC;
	h.realtime_ns = (uint64_t)T0;
	append(w, &h);
	assert_int_equal(trace_writer_close(w), 0);
	paths[0] = p.a;
	paths[1] = c_path;
	paths[2] = p.b;
	assert_int_equal(merge_open(&m, paths, 3, err, sizeof(err)), 0);
	nodes = merge_nodes(m, &n);
	assert_int_equal(n, 3);
	assert_int_equal(nodes[1].basis, MERGE_BASIS_ANCHORS);
	assert_int_equal(nodes[1].collectives, 0);
	assert_true(nodes[1].offset_ns == A_MONO_AT_T0 - 5 * SEC);
	assert_int_equal(nodes[2].basis, MERGE_BASIS_HOST_EXIT);
	assert_true(abs64(nodes[2].offset_ns - WANT_OFFSET) < 5000);
	assert_int_equal(nodes[1].source_base, 2);
	assert_int_equal(nodes[2].source_base, 3);
	merge_free(m);
	unlink(c_path);
	remove_job(&p);
}

/* The same process in two traces is refused, naming both; so is one file
 * given twice. */
static void test_process_in_two_traces_is_refused(void **state)
{
	struct job job = {.process_id_a = 0xa0, .process_id_b = 0xa1}; /* B's first = A's second */
	struct paths p;
	const char *paths[2];
	merge_t *m = NULL;
	char err[512];

	(void)state;
	write_job(&p, &job);
	paths[0] = p.a;
	paths[1] = p.b;
	assert_int_equal(merge_open(&m, paths, 2, err, sizeof(err)), -EEXIST);
	assert_null(m);
	assert_non_null(strstr(err, p.a));
	assert_non_null(strstr(err, p.b));
	assert_non_null(strstr(err, "both hold process 1001"));
	paths[1] = p.a;
	assert_int_equal(merge_open(&m, paths, 2, err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "the same file"));
	/* not a trace: named */
	paths[1] = "/dev/null";
	assert_true(merge_open(&m, paths, 2, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "/dev/null"));
	remove_job(&p);
}

/* Two runs of the two-node job into the same folders (issue 24): each run
 * is one job, the four traces together are refused, grouped by run. */
static void test_two_runs_are_two_jobs(void **state)
{
	struct job first = {.process_id_a = 0xa0, .process_id_b = 0xb0};
	struct job second = {.process_id_a = 0xc0, .process_id_b = 0xd0, .run = 1};
	struct paths p, q;
	const char *paths[4];
	merge_t *m = NULL;
	char err[1024];

	(void)state;
	write_job(&p, &first);
	snprintf(q.a, sizeof(q.a), "/tmp/fss_merge_test_%d_a2.fss", (int)getpid());
	snprintf(q.b, sizeof(q.b), "/tmp/fss_merge_test_%d_b2.fss", (int)getpid());
	write_node(q.a, 0, &second);
	write_node(q.b, 1, &second);
	/* the second run's nodes alone: one job, aligned as the first's */
	paths[0] = q.a;
	paths[1] = q.b;
	assert_int_equal(merge_open(&m, paths, 2, err, sizeof(err)), 0);
	check_stream(m, 10000);
	merge_free(m);
	/* all four, the second run's first: refused, the first run is job 1 */
	paths[0] = q.a;
	paths[1] = p.a;
	paths[2] = q.b;
	paths[3] = p.b;
	m = NULL;
	assert_int_equal(merge_open(&m, paths, 4, err, sizeof(err)), FSS_E_USAGE);
	assert_null(m);
	assert_non_null(strstr(err, "the traces are of 2 jobs, not one"));
	assert_non_null(strstr(err, "no communicator in common, their times do not overlap"));
	char want[512];
	snprintf(want, sizeof(want), "): %s, %s; job 2 (ranks 0-3, ", p.a, p.b);
	assert_non_null(strstr(err, want));
	snprintf(want, sizeof(want), "): %s, %s; read one job at a time", q.a, q.b);
	assert_non_null(strstr(err, want));
	remove_job(&p);
	remove_job(&q);
}

/* merge_align alone: the median resists collectives whose ends were
 * disturbed (a rank descheduled after the collective). */
static void test_align_median_resists_outliers(void **state)
{
	struct merge_node nodes[2];
	struct merge_sample s[4 * 100];
	size_t ns = 0;

	(void)state;
	memset(nodes, 0, sizeof(nodes));
	nodes[1].anchor_offset_ns = 3000000; /* anchors say +3 ms */
	for (uint64_t n = 1; n <= 100; n++)
		for (uint32_t r = 0; r < 4; r++) {
			uint64_t end = 1000000000ull + n * 1000000;
			/* node 1 reads 2 ms less than the anchors would put it at; every
			 * tenth collective one of its ranks is 400 us late */
			if (r >= 2)
				end = end - 3000000 + 2000000 + (n % 10 == 0 ? 400000 : 0);
			s[ns++] = (struct merge_sample){.comm = 1, .comm_seq = n, .end_ns = end, .node = r / 2};
		}
	assert_int_equal(merge_align(nodes, 2, s, ns), 0);
	assert_int_equal(nodes[1].collectives, 100);
	assert_true(nodes[1].offset_ns == 1000000); /* +1 ms: the late tenth does not move the median */
	assert_true(nodes[1].residual_ns == 0);
	assert_true(nodes[1].residual_max_ns == 400000);
}

static int count_merged(void *ctx, const struct fss_record_head *rec)
{
	(void)rec;
	(*(uint64_t *)ctx)++;
	return 0;
}

/* One node's file header lost a bit: the merge refuses the job, unless told
 * to salvage; then both passes read that node's chunks, every record comes
 * through, the clocks align as before, and the node says it was salvaged. */
static void test_damaged_header_salvaged(void **state)
{
	struct job job = {.process_id_a = 0xa0, .process_id_b = 0xb0};
	struct trace_parser_ops ops = {.on_record = count_merged};
	struct paths p;
	const char *paths[2];
	const struct merge_node *nodes;
	uint64_t whole = 0, salvaged = 0;
	int64_t offset;
	merge_t *m;
	char err[512];
	size_t n;
	FILE *f;
	int c;

	(void)state;
	write_job(&p, &job);
	paths[0] = p.a;
	paths[1] = p.b;
	assert_int_equal(merge_open(&m, paths, 2, err, sizeof(err)), 0);
	assert_int_equal(merge_read(m, &ops, &whole), 0);
	offset = merge_nodes(m, &n)[1].offset_ns;
	merge_free(m);
	f = fopen(p.b, "r+b");
	assert_non_null(f);
	assert_int_equal(fseek(f, 20, SEEK_SET), 0);
	c = fgetc(f);
	assert_int_equal(fseek(f, 20, SEEK_SET), 0);
	fputc(c ^ 1, f);
	fclose(f);
	assert_int_equal(merge_open(&m, paths, 2, err, sizeof(err)), FSS_E_CORRUPT);
	assert_non_null(strstr(err, "the file header is damaged"));
	assert_int_equal(merge_open_flags(&m, paths, 2, TRACE_READ_SALVAGE, err, sizeof(err)), 0);
	assert_int_equal(merge_read(m, &ops, &salvaged), FSS_E_CORRUPT);
	assert_int_equal(salvaged, whole);
	nodes = merge_nodes(m, &n);
	assert_true(nodes[1].offset_ns == offset);
	assert_false(nodes[0].info.salvage.used);
	assert_true(nodes[1].info.salvage.used);
	assert_int_equal(nodes[1].read_rc, FSS_E_CORRUPT);
	assert_non_null(strstr(nodes[1].info.message, "read with --salvage"));
	merge_free(m);
	remove_job(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_hosts_known_offset),
		cmocka_unit_test(test_anchors_wrong_by_50ms),
		cmocka_unit_test(test_gpu_kernel_ends),
		cmocka_unit_test(test_gpu_kernel_ends_tied_by_correlation),
		cmocka_unit_test(test_no_shared_communicator_is_anchors_only),
		cmocka_unit_test(test_process_in_two_traces_is_refused),
		cmocka_unit_test(test_two_runs_are_two_jobs),
		cmocka_unit_test(test_align_median_resists_outliers),
		cmocka_unit_test(test_damaged_header_salvaged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
