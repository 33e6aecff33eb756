/*
 * analysis_figures_test.c - the per_rank HTA figures (collector/
 * analyze_figures.h): comm_comp_overlap on hand-placed records whose
 * overlap is worked out here by hand (partial overlaps, nested compute
 * ranges where only the leaves count, the last step left out, one step
 * only, no communication, kernel intervals with CUPTI), nccl_kernels
 * against the calls the trace issued, and a foreign source's figures from
 * its source_figures record with the fields its format cannot tell printed
 * as null by report --json.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/diagnosis.h"
#include "collector/analyze.h"
#include "collector/overlap.h"
#include "common/record.h"
#include "common/trace_parser.h"
#include "rules/diagnosis.h"
#include "tests/unit/analysis_synth.h"

/* ---- records ------------------------------------------------------------- */

#define COMPUTE_THREAD 7
#define COMM_THREAD 8
#define OTHER_THREAD 9

enum { S_DOMAIN = 1, S_STEP0, S_STEP1, S_STEP2, S_LAYER, S_MM };

static void feed(analyzer_t *a, const void *rec)
{
	assert_int_equal(analyzer_feed(a, rec), 0);
}

static void put_string(analyzer_t *a, uint32_t src, uint32_t id, const char *text)
{
	struct fss_rec_string s;
	record_init(&s, FSS_REC_STRING, sizeof s, src);
	s.id = id;
	s.total_len = (uint16_t)strlen(text);
	memcpy(s.text, text, strlen(text));
	feed(a, &s);
}

/* hello, the strings of the ranges, one communicator of two ranks */
static void open_source(analyzer_t *a, uint32_t src, uint64_t features)
{
	struct fss_rec_process_hello h;
	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof h, src);
	h.pid = 100 + src;
	h.rank = h.local_rank = (int32_t)src;
	h.world_size = 2;
	h.slurm_procid = h.ompi_rank = -1;
	h.path = FSS_PATH_SYNTHETIC;
	h.mono_ns = 500;
	h.realtime_ns = 500;
	h.features = features;
	feed(a, &h);
	static const char *names[] = {"", "fsdp_ref", "step 0", "step 1", "step 2", "layer", "mm"};
	for (uint32_t id = S_DOMAIN; id <= S_MM; id++)
		put_string(a, src, id, names[id]);
	struct fss_rec_comm cm;
	record_init(&cm, FSS_REC_COMM, sizeof cm, src);
	cm.comm = 0x1000 + src;
	cm.id_hash = 0xabcdef;
	cm.nranks = 2;
	cm.rank = (int32_t)src;
	cm.device = cm.color = cm.key = -1;
	cm.event = FSS_COMM_INIT;
	cm.enter_ns = 600;
	cm.exit_ns = 700;
	feed(a, &cm);
}

static void coll(analyzer_t *a, uint32_t src, uint64_t seq, uint8_t op, uint64_t enter, uint64_t exit, uint32_t group)
{
	struct fss_rec_collective c;
	record_init(&c, FSS_REC_COLLECTIVE, sizeof c, src);
	c.seq = seq;
	c.comm = 0x1000 + src;
	c.count = 1024;
	c.dtype = FSS_DTYPE_BFLOAT16;
	c.bytes = 2048;
	c.op = op;
	c.peer = -1;
	c.path = FSS_PATH_SYNTHETIC;
	c.thread = COMM_THREAD;
	c.enter_ns = enter;
	c.exit_ns = exit;
	c.group_id = group;
	feed(a, &c);
}

static void range(analyzer_t *a, uint32_t src, uint32_t name, uint32_t thread, uint64_t start, uint64_t end)
{
	struct fss_rec_nvtx_range r;
	record_init(&r, FSS_REC_NVTX_RANGE, sizeof r, src);
	r.start_ns = start;
	r.end_ns = end;
	r.domain = S_DOMAIN;
	r.name = name;
	r.thread = r.end_thread = thread;
	r.kind = FSS_NVTX_PUSH_POP;
	feed(a, &r);
}

static void gpu(analyzer_t *a, uint32_t src, uint16_t kind, uint64_t seq, uint64_t start, uint64_t end)
{
	struct fss_rec_gpu_interval g;
	record_init(&g, FSS_REC_GPU_INTERVAL, sizeof g, src);
	g.start_ns = start;
	g.end_ns = end;
	g.collective_seq = seq;
	g.kind = kind;
	feed(a, &g);
}

static void end_source(analyzer_t *a, uint32_t src, uint64_t at)
{
	struct fss_rec_process_end e;
	record_init(&e, FSS_REC_PROCESS_END, sizeof e, src);
	e.at_ns = at;
	e.exit_code = 0;
	feed(a, &e);
}

static struct analysis_result *finish(analyzer_t *a)
{
	struct analysis_result *r;
	assert_int_equal(analyzer_finish(a, &r), 0);
	analyzer_free(a);
	return r;
}

static const struct analysis_rank *row(const struct analysis_result *r, uint32_t source)
{
	for (uint32_t i = 0; i < r->nper_rank; i++)
		if (r->per_rank[i].source == source)
			return &r->per_rank[i];
	fail_msg("no per_rank row for source %u", source);
	return NULL;
}

/* ---- host timing ----------------------------------------------------------- */

/*
 * One rank, host timing, records in the order an agent writes them (at
 * their end). Communication (thread 8) and compute (threads 7 and 9):
 *
 *   step 0 [1000, 2000): AG [1100, 1300); "layer" [1000, 1500) holds the
 *     leaves "mm" [1000, 1150) and [1250, 1400): overlap 50 + 50 (the
 *     layer's own time [1150, 1250) is not compute: +100 if it were)
 *   step 1 [2000, 3000): RS [2100, 2400) under mm [2300, 2600): 100; AG
 *     [2500, 2550) under it: 50; AR [2900, 3200) launched before the last
 *     step, so all of it counts, under mm [2950, 3050) (thread 9): 100
 *   step 2 [3000, 4000), the last: AG [3100, 3500) and mm [3000, 4000)
 *     launched in it: left out (HTA leaves the last step out), so AR's
 *     [3050, 3200) is not covered either
 *
 * comm 200 + 300 + 50 + 300 = 850, overlap 350. With `steps` 1 (one step
 * range over all of it) nothing is left out: AR and the last AG then make
 * one stretch [2900, 3500), so comm 200 + 300 + 50 + 600 = 1150, and
 * compute covers [2950, 4000) of it: overlap 100 + 100 + 50 + 550 = 800.
 */
static analyzer_t *host_trace(int steps)
{
	analyzer_t *a;
	assert_int_equal(analyzer_new(&a, NULL), 0);
	open_source(a, 0, FSS_FEATURE_NCCL | FSS_FEATURE_NVTX);
	range(a, 0, S_MM, COMPUTE_THREAD, 1000, 1150);
	coll(a, 0, 1, FSS_OP_ALLGATHER, 1100, 1300, 0);
	range(a, 0, S_MM, COMPUTE_THREAD, 1250, 1400);
	range(a, 0, S_LAYER, COMPUTE_THREAD, 1000, 1500);
	if (steps == 3)
		range(a, 0, S_STEP0, COMPUTE_THREAD, 1000, 2000);
	coll(a, 0, 2, FSS_OP_REDUCESCATTER, 2100, 2400, 0);
	coll(a, 0, 3, FSS_OP_ALLGATHER, 2500, 2550, 0);
	range(a, 0, S_MM, COMPUTE_THREAD, 2300, 2600);
	if (steps == 3)
		range(a, 0, S_STEP1, COMPUTE_THREAD, 2000, 3000);
	range(a, 0, S_MM, OTHER_THREAD, 2950, 3050);
	coll(a, 0, 4, FSS_OP_ALLREDUCE, 2900, 3200, 0);
	coll(a, 0, 5, FSS_OP_ALLGATHER, 3100, 3500, 0);
	range(a, 0, S_MM, COMPUTE_THREAD, 3000, 4000);
	range(a, 0, steps == 3 ? S_STEP2 : S_STEP0, COMPUTE_THREAD, steps == 3 ? 3000 : 1000, 4000);
	end_source(a, 0, 4100);
	return a;
}

static void test_host_last_step_left_out(void **state)
{
	(void)state;
	struct analysis_result *r = finish(host_trace(3));
	const struct analysis_rank *e = row(r, 0);
	assert_int_equal(e->profiler_steps, 3);
	assert_int_equal(e->comm_ns, 850);
	assert_int_equal(e->comm_overlap_ns, 350);
	/* every call, the last step's included: the kernels of the whole trace */
	assert_int_equal(e->allgather_kernels, 3);
	assert_int_equal(e->reduce_scatter_kernels, 1);
	assert_int_equal(e->allreduce_kernels, 1);
	assert_int_equal(e->other_kernels, 0);
	assert_int_equal(e->unknown, 0);
	analysis_result_free(r);
}

static void test_host_one_step(void **state)
{
	(void)state;
	struct analysis_result *r = finish(host_trace(1));
	const struct analysis_rank *e = row(r, 0);
	assert_int_equal(e->profiler_steps, 1);
	assert_int_equal(e->comm_ns, 1150);
	assert_int_equal(e->comm_overlap_ns, 800);
	analysis_result_free(r);
}

/* Calls that take no time: no communication time, so no overlap (null). */
static void test_no_communication_time(void **state)
{
	(void)state;
	analyzer_t *a;
	assert_int_equal(analyzer_new(&a, NULL), 0);
	open_source(a, 0, FSS_FEATURE_NCCL | FSS_FEATURE_NVTX);
	range(a, 0, S_MM, COMPUTE_THREAD, 1000, 1500);
	coll(a, 0, 1, FSS_OP_ALLGATHER, 1200, 1200, 0);
	coll(a, 0, 2, FSS_OP_REDUCESCATTER, 1600, 1600, 0);
	end_source(a, 0, 2000);
	struct analysis_result *r = finish(a);
	const struct analysis_rank *e = row(r, 0);
	assert_int_equal(e->comm_ns, 0);
	assert_int_equal(e->comm_overlap_ns, 0);
	assert_int_equal(e->allgather_kernels, 1);
	assert_int_equal(e->reduce_scatter_kernels, 1);
	analysis_result_free(r);
}

/* ---- device timing ---------------------------------------------------------- */

/*
 * CUPTI: the AG's host call [1100, 1110) only enqueues; its kernel runs
 * [1200, 1400), under the compute kernel [1300, 1500): 100. The RS has no
 * kernel tied to it: its host interval [1600, 1700), under the compute
 * kernel [1680, 1750): 20. A copy [1100, 1300) is no compute (+100 if it
 * were), and the NVTX leaf [1000, 1200) is not read with kernels (host
 * timing would give 10 of 110). comm 200 + 100, overlap 120.
 */
static void test_device_kernels(void **state)
{
	(void)state;
	analyzer_t *a;
	assert_int_equal(analyzer_new(&a, NULL), 0);
	open_source(a, 0, FSS_FEATURE_NCCL | FSS_FEATURE_NVTX | FSS_FEATURE_CUPTI);
	struct fss_rec_clock_anchor k;
	record_init(&k, FSS_REC_CLOCK_ANCHOR, sizeof k, 0);
	k.mono_ns = k.other_ns = 800; /* CUPTI's clock is the host's here */
	k.domain = FSS_CLOCK_CUPTI;
	feed(a, &k);
	coll(a, 0, 1, FSS_OP_ALLGATHER, 1100, 1110, 0);
	range(a, 0, S_MM, COMPUTE_THREAD, 1000, 1200);
	coll(a, 0, 2, FSS_OP_REDUCESCATTER, 1600, 1700, 0);
	gpu(a, 0, FSS_GPU_MEMCPY, 0, 1100, 1300);
	gpu(a, 0, FSS_GPU_COMM, 1, 1200, 1400);
	gpu(a, 0, FSS_GPU_COMPUTE, 0, 1300, 1500);
	gpu(a, 0, FSS_GPU_COMPUTE, 0, 1680, 1750);
	end_source(a, 0, 2000);
	struct analysis_result *r = finish(a);
	const struct analysis_rank *e = row(r, 0);
	assert_int_equal(e->comm_ns, 300);
	assert_int_equal(e->comm_overlap_ns, 120);
	analysis_result_free(r);
}

/* ---- kernels by type ------------------------------------------------------- */

/* Every call is one kernel, the calls of a group each their own; the ops
 * other than the three named are "other". */
static void test_kernel_counts(void **state)
{
	(void)state;
	analyzer_t *a;
	assert_int_equal(analyzer_new(&a, NULL), 0);
	open_source(a, 0, FSS_FEATURE_NCCL);
	static const uint8_t ops[] = {FSS_OP_BROADCAST, FSS_OP_ALLGATHER, FSS_OP_REDUCESCATTER, FSS_OP_SEND,
				      FSS_OP_RECV,      FSS_OP_ALLREDUCE, FSS_OP_REDUCESCATTER, FSS_OP_ALLTOALL};
	uint64_t t = 1000, seq = 0;
	for (size_t i = 0; i < sizeof ops; i++, t += 100)
		coll(a, 0, ++seq, ops[i], t, t + 50, 0);
	coll(a, 0, ++seq, FSS_OP_ALLGATHER, t, t + 10, 3);
	coll(a, 0, ++seq, FSS_OP_ALLGATHER, t + 10, t + 20, 3);
	struct fss_rec_group g;
	record_init(&g, FSS_REC_GROUP, sizeof g, 0);
	g.group_id = 3;
	g.calls = 2;
	g.start_ns = t;
	g.end_enter_ns = t + 20;
	g.end_exit_ns = t + 60;
	g.thread = COMM_THREAD;
	feed(a, &g);
	end_source(a, 0, t + 100);
	struct analysis_result *r = finish(a);
	const struct analysis_rank *e = row(r, 0);
	assert_int_equal(e->allgather_kernels, 3);
	assert_int_equal(e->reduce_scatter_kernels, 2);
	assert_int_equal(e->allreduce_kernels, 1);
	assert_int_equal(e->other_kernels, 4);
	/* 8 calls of 50, and the group where it runs: ncclGroupEnd's 40 */
	assert_int_equal(e->comm_ns, 8 * 50 + 40);
	assert_int_equal(e->profiler_steps, 0);
	analysis_result_free(r);
}

/* ---- a foreign source -------------------------------------------------------- */

static char *report_json(struct analysis_result *r)
{
	struct diagnosis d = {.result = r, .trace_path = "figures.json"};
	d.findings = findings_new();
	assert_non_null(d.findings);
	assert_int_equal(diagnosis_from_result(r, NULL, d.findings, NULL, 0, NULL), 0);
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	assert_non_null(out);
	diagnosis_print_json(out, &d, NULL);
	fclose(out);
	findings_free(d.findings);
	return buf;
}

/* A source whose reader measured the figures itself (a PyTorch profiler
 * trace): the row takes them from its record, not from its events, and
 * what the format cannot tell is null in the report. */
static void test_foreign_figures(void **state)
{
	(void)state;
	analyzer_t *a;
	assert_int_equal(analyzer_new(&a, NULL), 0);
	open_source(a, 0, FSS_FEATURE_NCCL);
	coll(a, 0, 1, FSS_OP_ALLGATHER, 1000, 1500, 0);
	struct fss_rec_source_figures f;
	record_init(&f, FSS_REC_SOURCE_FIGURES, sizeof f, 0);
	f.comm_ns = 1000;
	f.overlap_ns = 250;
	f.allgather_kernels = 7;
	f.reduce_scatter_kernels = 5;
	f.allreduce_kernels = 3;
	f.other_kernels = 2;
	f.profiler_steps = 9;
	f.unknown = FSS_FIGURES_NO_PID | FSS_FIGURES_NO_DROPS | FSS_FIGURES_NO_END | FSS_FIGURES_NO_ENTER;
	feed(a, &f);
	struct analysis_result *r = finish(a);
	const struct analysis_rank *e = row(r, 0);
	assert_int_equal(e->comm_ns, 1000);
	assert_int_equal(e->comm_overlap_ns, 250);
	assert_int_equal(e->allgather_kernels, 7);
	assert_int_equal(e->other_kernels, 2);
	assert_int_equal(e->profiler_steps, 9);
	char *json = report_json(r);
	const char *p = strstr(json, "\"per_rank\"");
	assert_non_null(p);
	assert_non_null(strstr(p, "\"pid\": null"));
	assert_non_null(strstr(p, "\"dropped_records\": null"));
	assert_non_null(strstr(p, "\"steps_cut\": null"));
	assert_non_null(strstr(p, "\"cut\": null"));
	assert_non_null(strstr(p, "\"comm_comp_overlap\": 0.25"));
	assert_non_null(strstr(p, "\"profiler_steps\": 9"));
	free(json);
	analysis_result_free(r);

	/* what it can tell is printed */
	assert_int_equal(analyzer_new(&a, NULL), 0);
	open_source(a, 0, FSS_FEATURE_NCCL);
	coll(a, 0, 1, FSS_OP_ALLGATHER, 1000, 1500, 0);
	f.unknown = 0;
	f.comm_ns = 0;
	feed(a, &f);
	end_source(a, 0, 2000);
	r = finish(a);
	json = report_json(r);
	p = strstr(json, "\"per_rank\"");
	assert_non_null(p);
	assert_non_null(strstr(p, "\"pid\": 100"));
	assert_non_null(strstr(p, "\"dropped_records\": 0"));
	assert_non_null(strstr(p, "\"cut\": false"));
	assert_non_null(strstr(p, "\"comm_comp_overlap\": null")); /* no communication time */
	free(json);
	analysis_result_free(r);
}

/* ---- streamed as the analysis does it, against the whole trace at once ---- */

/* One source's records, kept whole: what the test reads the figure from
 * by the definition, with nothing dropped on the way. */
struct batch_source {
	int64_t cupti_offset;
	struct interval *host, *device, *compute_kernels;
	uint64_t *launch, *kernel_launch;
	size_t nev, nkern;
	struct overlap_range *ranges;
	uint64_t *range_launch;
	size_t nranges;
	uint64_t steps[SYNTH_MAX_STEPS + 1];
	size_t nsteps;
	uint64_t open_group;	     /* group id of the event being assembled, 0 */
	uint64_t comm_seq[1 << 14];  /* per event: its first call's seq */
	char step_name[4096][16];    /* the strings of ids below 4096, their start: is it a step range's name */
};

struct batch {
	struct batch_source src[8];
};

static void *grow(void *v, size_t n, size_t size)
{
	void *p = realloc(v, (n + 1) * size);
	assert_non_null(p);
	return p;
}

static int batch_record(void *ctx, const struct fss_record_head *rec)
{
	struct batch *b = ctx;
	if (rec->source >= 8)
		return 0;
	struct batch_source *s = &b->src[rec->source];
	switch (rec->type) {
	case FSS_REC_STRING: {
		const struct fss_rec_string *x = (const void *)rec;
		if (x->id < 4096 && x->offset == 0)
			snprintf(s->step_name[x->id], sizeof s->step_name[x->id], "%.*s", (int)x->total_len, x->text);
		break;
	}
	case FSS_REC_CLOCK_ANCHOR: {
		const struct fss_rec_clock_anchor *a = (const void *)rec;
		if (a->domain == FSS_CLOCK_CUPTI)
			s->cupti_offset = (int64_t)(a->mono_ns - a->other_ns);
		break;
	}
	case FSS_REC_COLLECTIVE: {
		const struct fss_rec_collective *c = (const void *)rec;
		if (c->group_id && c->group_id == s->open_group) { /* a later call of the group */
			if (c->exit_ns > s->host[s->nev - 1].end)
				s->host[s->nev - 1].end = c->exit_ns;
			break;
		}
		s->host = grow(s->host, s->nev, sizeof *s->host);
		s->device = grow(s->device, s->nev, sizeof *s->device);
		s->launch = grow(s->launch, s->nev, sizeof *s->launch);
		s->device[s->nev] = (struct interval){0, 0}; /* until its kernel comes */
		assert_true(s->nev < sizeof s->comm_seq / sizeof s->comm_seq[0]);
		s->host[s->nev] = (struct interval){c->enter_ns, c->exit_ns};
		s->launch[s->nev] = c->enter_ns;
		s->comm_seq[s->nev] = c->seq;
		s->nev++;
		s->open_group = c->group_id;
		break;
	}
	case FSS_REC_GROUP: {
		const struct fss_rec_group *g = (const void *)rec;
		if (g->group_id == s->open_group) { /* it runs at ncclGroupEnd */
			s->host[s->nev - 1].start = g->end_enter_ns;
			if (g->end_exit_ns > s->host[s->nev - 1].end)
				s->host[s->nev - 1].end = g->end_exit_ns;
		}
		s->open_group = 0;
		break;
	}
	case FSS_REC_GPU_INTERVAL: {
		const struct fss_rec_gpu_interval *g = (const void *)rec;
		struct interval iv = {g->start_ns + (uint64_t)s->cupti_offset, g->end_ns + (uint64_t)s->cupti_offset};
		if (g->kind == FSS_GPU_COMPUTE) {
			s->compute_kernels = grow(s->compute_kernels, s->nkern, sizeof *s->compute_kernels);
			s->kernel_launch = grow(s->kernel_launch, s->nkern, sizeof *s->kernel_launch);
			s->compute_kernels[s->nkern] = iv;
			s->kernel_launch[s->nkern++] = iv.start;
		} else if (g->kind == FSS_GPU_COMM) {
			/* the synthetic trace ties one kernel to each event's first call */
			for (size_t i = s->nev; i-- > 0;)
				if (s->comm_seq[i] == g->collective_seq) {
					s->device[i] = iv;
					break;
				}
		}
		break;
	}
	case FSS_REC_NVTX_RANGE: {
		const struct fss_rec_nvtx_range *r = (const void *)rec;
		if (r->name < 4096 && strncmp(s->step_name[r->name], "step ", 5) == 0) {
			assert_true(s->nsteps < SYNTH_MAX_STEPS + 1);
			s->steps[s->nsteps++] = r->start_ns;
			break;
		}
		s->ranges = grow(s->ranges, s->nranges, sizeof *s->ranges);
		s->ranges[s->nranges++] = (struct overlap_range){r->start_ns, r->end_ns, r->thread, 0};
		break;
	}
	default:
		break;
	}
	return 0;
}

/* The figure by its definition over the whole of one source's records:
 * device (kernels) or host (host intervals, leaves of the ranges). */
static void batch_figure(struct batch_source *s, int device, uint64_t *comm_ns, uint64_t *overlap_ns)
{
	uint64_t last = 0;
	for (size_t i = 0; i < s->nsteps; i++)
		if (s->steps[i] > last)
			last = s->steps[i];
	uint32_t steps = (uint32_t)s->nsteps;
	struct interval *c = calloc(s->nev + 1, sizeof *c), *p = NULL;
	size_t nc = 0, np = 0;
	assert_non_null(c);
	for (size_t i = 0; i < s->nev; i++)
		if (overlap_hta_window(s->launch[i], steps, last))
			c[nc++] = device && s->device[i].end > s->device[i].start ? s->device[i] : s->host[i];
	if (device) {
		p = calloc(s->nkern + 1, sizeof *p);
		assert_non_null(p);
		for (size_t i = 0; i < s->nkern; i++)
			if (overlap_hta_window(s->kernel_launch[i], steps, last))
				p[np++] = s->compute_kernels[i];
		np = interval_merge(p, np);
	} else {
		size_t m = 0;
		for (size_t i = 0; i < s->nranges; i++) /* a range is launched at its start */
			if (overlap_hta_window(s->ranges[i].start, steps, last))
				s->ranges[m++] = s->ranges[i];
		assert_int_equal(overlap_host_compute(s->ranges, m, &p, &np), 0);
	}
	nc = interval_merge(c, nc);
	*comm_ns = interval_total(c, nc);
	*overlap_ns = interval_intersect_total(c, nc, p, np);
	free(c);
	free(p);
}

static void batch_free(struct batch *b)
{
	for (size_t k = 0; k < 8; k++) {
		struct batch_source *s = &b->src[k];
		free(s->host);
		free(s->device);
		free(s->compute_kernels);
		free(s->launch);
		free(s->kernel_launch);
		free(s->ranges);
	}
	free(b);
}

static int analyzer_record(void *ctx, const struct fss_record_head *rec)
{
	return analyzer_feed(ctx, rec);
}

/* Long synthetic jobs whose GPU intervals come milliseconds late (CUPTI's
 * buffers), with groups: the figure the analysis streams, settling as the
 * steps go and dropping what it settled, is the one read from the whole
 * trace at once, to the nanosecond, on every rank. */
static void test_streamed_equals_whole(void **state)
{
	(void)state;
	char dir[] = "/tmp/fsdpscope-figures.XXXXXX";
	assert_non_null(mkdtemp(dir));
	for (int cupti = 0; cupti <= 1; cupti++) {
		for (int grouped = 0; grouped <= 1; grouped++) {
			struct synth_config c;
			synth_defaults(&c);
			c.ranks = 2;
			c.steps = 40;
			c.cupti = cupti;
			c.grouped = grouped;
			char path[128];
			snprintf(path, sizeof path, "%s/long.fss", dir);
			struct synth_truth *t = malloc(sizeof *t);
			assert_non_null(t);
			assert_int_equal(synth_write(path, &c, t), 0);
			analyzer_t *a;
			assert_int_equal(analyzer_new(&a, NULL), 0);
			struct trace_parser_ops ops = {.on_record = analyzer_record};
			assert_int_equal(trace_read_file(path, &ops, a, NULL, 0), 0);
			struct analysis_result *r = finish(a);
			struct batch *b = calloc(1, sizeof *b);
			assert_non_null(b);
			ops.on_record = batch_record;
			assert_int_equal(trace_read_file(path, &ops, b, NULL, 0), 0);
			assert_int_equal(r->nper_rank, 2);
			for (uint32_t i = 0; i < r->nper_rank; i++) {
				const struct analysis_rank *e = &r->per_rank[i];
				uint64_t comm, overlap;
				batch_figure(&b->src[e->source], cupti, &comm, &overlap);
				assert_int_equal(b->src[e->source].nsteps, 40);
				assert_int_equal(e->profiler_steps, 40);
				assert_true(comm > 0 && overlap > 0 && overlap < comm);
				assert_int_equal(e->comm_ns, comm);
				assert_int_equal(e->comm_overlap_ns, overlap);
				if (cupti) { /* the kernels' figure, not the host calls' */
					uint64_t host_comm, host_overlap;
					batch_figure(&b->src[e->source], 0, &host_comm, &host_overlap);
					assert_true(host_comm != comm && host_overlap != overlap);
				}
			}
			batch_free(b);
			analysis_result_free(r);
			free(t);
			unlink(path);
		}
	}
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_host_last_step_left_out),
	    cmocka_unit_test(test_host_one_step),
	    cmocka_unit_test(test_no_communication_time),
	    cmocka_unit_test(test_device_kernels),
	    cmocka_unit_test(test_kernel_counts),
	    cmocka_unit_test(test_foreign_figures),
	    cmocka_unit_test(test_streamed_equals_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
