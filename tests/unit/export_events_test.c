/*
 * export_events_test.c - export/: the kernels every exporter draws and the
 * Chrome-trace writer.
 *
 *   - a source with GPU intervals: each collective gets exactly one kernel,
 *     its device interval (moved by the CUPTI anchor) whether the interval
 *     comes after its call, before it, or without its seq until a
 *     correlation record; a second interval of one call is not a second
 *     kernel; a call whose interval never comes gets its host interval at
 *     the end;
 *   - a source without: the kernel is the host call, at once, or for a call
 *     in a group the group's interval once its record comes; compute
 *     kernels are the leaves of the compute NVTX ranges (a parent, a step
 *     range and a range outside the patterns are not);
 *   - the writer: ts and dur in microseconds with the nanoseconds as three
 *     decimals, a non-finite number written as 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "export/job_events.h"
#include "export/trace_events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEEN 64

struct seen {
	size_t n;
	struct {
		int kind, from;
		uint64_t seq, start, end, launch;
		char name[64];
	} k[MAX_SEEN];
	size_t calls;
};

static int on_call(void *ctx, const struct source *src, const struct export_call *c)
{
	struct seen *s = ctx;

	(void)src;
	(void)c;
	s->calls++;
	return 0;
}

static int on_kernel(void *ctx, uint32_t source, const struct export_kernel *k)
{
	struct seen *s = ctx;

	(void)source;
	assert_true(s->n < MAX_SEEN);
	s->k[s->n].kind = k->kind;
	s->k[s->n].from = k->from;
	s->k[s->n].seq = k->call ? k->call->rec.seq : 0;
	s->k[s->n].start = k->start_ns;
	s->k[s->n].end = k->end_ns;
	s->k[s->n].launch = k->launch_ns;
	snprintf(s->k[s->n].name, sizeof(s->k[s->n].name), "%s", k->name ? k->name : "");
	s->n++;
	return 0;
}

static void hello(struct fss_session_tool *t, uint64_t features)
{
	struct fss_rec_process_hello h;

	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), 0);
	h.features = features;
	assert_int_equal(t->on_hello(t->ctx, NULL, &h), 0);
}

static void call(struct fss_session_tool *t, const struct source *src, uint64_t seq, uint64_t enter)
{
	struct fss_rec_collective c;

	record_init(&c, FSS_REC_COLLECTIVE, sizeof(c), 0);
	c.seq = seq;
	c.op = FSS_OP_ALLGATHER;
	c.enter_ns = enter;
	c.exit_ns = enter + 10;
	assert_int_equal(t->on_collective(t->ctx, src, &c), 0);
}

static void interval(struct fss_session_tool *t, const struct source *src, uint64_t seq, uint32_t corr, uint64_t start)
{
	struct fss_rec_gpu_interval g;

	record_init(&g, FSS_REC_GPU_INTERVAL, sizeof(g), 0);
	g.start_ns = start;
	g.end_ns = start + 100;
	g.collective_seq = seq;
	g.correlation_id = corr;
	g.kind = FSS_GPU_COMM;
	assert_int_equal(t->on_kernel(t->ctx, src, &g), 0);
}

/* The kernel of call seq among those seen: its index, -1 for none; fails on two. */
static int kernel_of(const struct seen *s, uint64_t seq)
{
	int at = -1;

	for (size_t i = 0; i < s->n; i++)
		if (s->k[i].kind == EXPORT_KERNEL_NCCL && s->k[i].seq == seq) {
			assert_int_equal(at, -1);
			at = (int)i;
		}
	return at;
}

static void test_device_intervals(void **state)
{
	struct seen s = {0};
	struct job_events_sink sink = {.ctx = &s, .on_call = on_call, .on_kernel = on_kernel};
	job_events_t *j = job_events_new(&sink, NULL);
	struct fss_session_tool t;
	struct source src = {.id = 0, .have_cupti_anchor = 1, .cupti_offset = 1000, .rank = 0};
	struct fss_rec_correlation c;
	int k;

	(void)state;
	assert_non_null(j);
	job_events_tool(j, &t);
	hello(&t, FSS_FEATURE_NCCL | FSS_FEATURE_CUPTI);
	call(&t, &src, 1, 100);
	call(&t, &src, 2, 200);
	call(&t, &src, 3, 300);
	assert_int_equal(s.n, 0); /* waiting for their intervals */
	interval(&t, &src, 2, 0, 5000);
	interval(&t, &src, 2, 0, 6000);	 /* a second interval of call 2 */
	interval(&t, &src, 0, 77, 4000); /* call 1's, its seq to come */
	assert_int_equal(s.n, 1);
	record_init(&c, FSS_REC_CORRELATION, sizeof(c), 0);
	c.collective_seq = 1;
	c.correlation_id = 77;
	assert_int_equal(t.on_record(t.ctx, &src, &c.head), 0);
	interval(&t, &src, 4, 0, 9000); /* before its call */
	call(&t, &src, 4, 400);
	assert_int_equal(job_events_finish(j), 0);
	assert_int_equal(s.calls, 4);
	assert_int_equal(s.n, 4);
	k = kernel_of(&s, 1);
	assert_true(k >= 0);
	assert_int_equal(s.k[k].from, EXPORT_FROM_DEVICE);
	assert_int_equal(s.k[k].start, 5000);
	k = kernel_of(&s, 2);
	assert_true(k >= 0);
	assert_int_equal(s.k[k].start, 6000);
	k = kernel_of(&s, 3);
	assert_true(k >= 0);
	assert_int_equal(s.k[k].from, EXPORT_FROM_HOST_CALL);
	assert_int_equal(s.k[k].start, 300);
	assert_int_equal(s.k[k].end, 310);
	k = kernel_of(&s, 4);
	assert_true(k >= 0);
	assert_int_equal(s.k[k].start, 10000);
	job_events_free(j);
}

static void range(struct fss_session_tool *t, uint32_t thread, uint64_t start, uint64_t end, const char *domain,
		  const char *name)
{
	struct fss_rec_nvtx_range r;

	record_init(&r, FSS_REC_NVTX_RANGE, sizeof(r), 0);
	r.start_ns = start;
	r.end_ns = end;
	r.thread = thread;
	assert_int_equal(t->on_nvtx_range(t->ctx, NULL, &r, domain, name), 0);
}

static void test_host_timing(void **state)
{
	struct seen s = {0};
	struct job_events_sink sink = {.ctx = &s, .on_call = on_call, .on_kernel = on_kernel};
	job_events_t *j = job_events_new(&sink, NULL);
	struct fss_session_tool t;
	struct source src = {.id = 0, .rank = 0};

	(void)state;
	assert_non_null(j);
	job_events_tool(j, &t);
	hello(&t, FSS_FEATURE_NCCL | FSS_FEATURE_NVTX);
	call(&t, &src, 1, 100);
	assert_int_equal(s.n, 1); /* at once: nothing to wait for */
	assert_int_equal(s.k[0].from, EXPORT_FROM_HOST_CALL);
	/* ranges close in order: children, then their parent, then the step */
	range(&t, 7, 1000, 2000, "fsdp_ref", "layers.0.attn");
	range(&t, 7, 2000, 3000, "fsdp_ref", "layers.0.mlp");
	range(&t, 7, 1000, 3000, "fsdp_ref", "layers.0");
	range(&t, 8, 1500, 1600, "fsdp_ref", "other thread");
	range(&t, 7, 3000, 3500, "mine", "not compute");
	range(&t, 7, 500, 4000, "fsdp_ref", "step 1");
	range(&t, 7, 4000, 4100, "fsdp_ref", "optimizer");
	assert_int_equal(job_events_finish(j), 0);
	assert_int_equal(s.n, 5);
	assert_string_equal(s.k[1].name, "layers.0.attn");
	assert_string_equal(s.k[2].name, "layers.0.mlp");
	assert_string_equal(s.k[3].name, "other thread");
	assert_string_equal(s.k[4].name, "optimizer");
	for (size_t i = 1; i < s.n; i++) {
		assert_int_equal(s.k[i].kind, EXPORT_KERNEL_COMPUTE);
		assert_int_equal(s.k[i].from, EXPORT_FROM_NVTX_LEAF);
	}
	job_events_free(j);
}

static void group_call(struct fss_session_tool *t, const struct source *src, uint64_t seq, uint32_t group,
		       uint64_t enter)
{
	struct fss_rec_collective c;

	record_init(&c, FSS_REC_COLLECTIVE, sizeof(c), 0);
	c.seq = seq;
	c.op = FSS_OP_ALLGATHER;
	c.enter_ns = enter;
	c.exit_ns = enter + 5;
	c.group_id = group;
	c.group_depth = 1;
	assert_int_equal(t->on_collective(t->ctx, src, &c), 0);
}

/* Without GPU intervals a group's calls run at its ncclGroupEnd: their
 * kernels are the group's interval, launched at its first call. */
static void test_groups_host_timing(void **state)
{
	struct seen s = {0};
	struct job_events_sink sink = {.ctx = &s, .on_call = on_call, .on_kernel = on_kernel};
	job_events_t *j = job_events_new(&sink, NULL);
	struct fss_session_tool t;
	struct source src = {.id = 0, .rank = 0};
	struct fss_rec_group g;

	(void)state;
	assert_non_null(j);
	job_events_tool(j, &t);
	hello(&t, FSS_FEATURE_NCCL);
	group_call(&t, &src, 1, 1, 100);
	group_call(&t, &src, 2, 1, 120);
	assert_int_equal(s.n, 0); /* their group has not run yet */
	record_init(&g, FSS_REC_GROUP, sizeof(g), 0);
	g.group_id = 1;
	g.calls = 2;
	g.start_ns = 90;
	g.end_enter_ns = 200;
	g.end_exit_ns = 260;
	assert_int_equal(t.on_record(t.ctx, &src, &g.head), 0);
	assert_int_equal(s.n, 2);
	call(&t, &src, 3, 300);
	group_call(&t, &src, 4, 2, 400); /* its group's record never comes: its own interval */
	assert_int_equal(job_events_finish(j), 0);
	assert_int_equal(s.n, 4);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(s.k[i].seq, (uint64_t)i + 1);
		assert_int_equal(s.k[i].start, 200);
		assert_int_equal(s.k[i].end, 260);
		assert_int_equal(s.k[i].launch, 100);
	}
	assert_int_equal(s.k[2].seq, 3);
	assert_int_equal(s.k[2].launch, 300);
	assert_int_equal(s.k[3].seq, 4);
	assert_int_equal(s.k[3].start, 400);
	assert_int_equal(s.k[3].end, 405);
	job_events_free(j);
}

static void test_writer(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	trace_events_t *te;
	struct jw *w;

	(void)state;
	assert_non_null(f);
	te = trace_events_new(f);
	assert_non_null(te);
	w = trace_events_begin_event(te, "X", "a\"b", "kernel", 1234567, 3, 4);
	trace_events_time(w, "dur", 5);
	trace_events_double(w, "v", 0.0 / 0.0);
	trace_events_end_event(te);
	assert_int_equal(trace_events_finish(te), 0);
	fclose(f);
	assert_non_null(strstr(buf, "\"ts\":1234.567"));
	assert_non_null(strstr(buf, "\"dur\":0.005"));
	assert_non_null(strstr(buf, "\"v\":0"));
	assert_non_null(strstr(buf, "\"name\":\"a\\\"b\""));
	assert_null(strstr(buf, "nan"));
	assert_int_equal(trace_events_count(te), 1);
	trace_events_free(te);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_device_intervals),
	    cmocka_unit_test(test_host_timing),
	    cmocka_unit_test(test_groups_host_timing),
	    cmocka_unit_test(test_writer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
