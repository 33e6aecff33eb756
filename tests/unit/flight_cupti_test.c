/*
 * flight_cupti_test.c - a hang seen only by CUPTI, with the GPU intervals
 * made by the agent's own CUPTI code.
 *
 * Real NCCL returns at enqueue: every host returned from #N, and only the
 * GPU knows that #N's kernel never ends. Each rank's GPU activity is a
 * buffer of real CUPTI activity structs from the CUDA 13 headers
 * (CUpti_ActivityExternalCorrelation tying a launch to the collective's seq,
 * CUpti_ActivityKernel10 for NCCL and compute kernels), walked by the real
 * cuptiActivityGetNextRecord of the toolkit's libcupti and handled by
 * agent/cupti.c's cupti_handle_buffer() as in a job; the gpu_interval
 * records it emits go, with the host records of the same rank, to the
 * analyzer. As in agent_cupti_test, the agent core is replaced by doubles
 * (agent_emit hands records to the analyzer); the test skips where
 * libcupti cannot be loaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/agent.h"
#include "agent/cupti.h"
#include "agent/cupti_api.h"
#include "agent/emit.h"
#include "agent/strings.h"

#include "flight_records.h"

/* ---- agent core doubles --------------------------------------------------- */

_Atomic int agent_state_now = AGENT_ON;
struct agent_counters agent_counters;

/* Where agent_emit sends: the rank whose buffer is being handled. */
static struct out *emit_out;
static const struct rank *emit_rank;
static size_t emitted_intervals;

void agent_init(void) {}

void agent_disable(const char *why)
{
	(void)why;
}

uint32_t agent_thread_id(void)
{
	return (uint32_t)gettid();
}

void agent_emit(const void *record)
{
	union {
		struct fss_record_head head;
		uint8_t bytes[FSS_RECORD_MAX_BYTES];
	} r;
	const struct fss_record_head *h = record;

	assert_true(h->size >= sizeof(*h) && h->size <= FSS_RECORD_MAX_BYTES);
	memcpy(r.bytes, record, h->size);
	/* the agent's own CUPTI anchors read the machine's clocks; the test
	 * writes the job's (its host stamps are made up) */
	if (h->type == FSS_REC_CLOCK_ANCHOR)
		return;
	assert_non_null(emit_out);
	r.head.source = emit_rank->source;
	if (h->type == FSS_REC_GPU_INTERVAL)
		emitted_intervals++;
	put(emit_out, &r);
}

uint32_t agent_intern(const char *s, long len)
{
	(void)s;
	(void)len;
	return 1; /* names are not what this test looks at */
}

void agent_strings_replay(void (*emit)(void *ctx, const void *record), void *ctx)
{
	(void)emit;
	(void)ctx;
}

/* ---- CUPTI: the real record walker, nothing else ------------------------------ */

static struct cupti_api real_api, walker_api;
static int have_real;

static CUptiResult fixed_timestamp(uint64_t *t)
{
	*t = 1;
	return CUPTI_SUCCESS;
}

struct buf {
	uint8_t *data;
	size_t used, cap;
};

static void *buf_add(struct buf *b, size_t size)
{
	void *p;

	assert_true(size % 8 == 0 && b->used + size <= b->cap);
	p = b->data + b->used;
	b->used += size;
	return p;
}

static void add_ext(struct buf *b, uint32_t corr, uint64_t seq)
{
	CUpti_ActivityExternalCorrelation *e = buf_add(b, sizeof(*e));

	e->kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
	e->externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
	e->correlationId = corr;
	e->externalId = seq;
}

static void add_kernel(struct buf *b, const char *name, uint32_t corr, uint32_t device, uint64_t start, uint64_t end)
{
	CUpti_ActivityKernel10 *k = buf_add(b, sizeof(*k));

	k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k->name = name;
	k->correlationId = corr;
	k->start = start;
	k->end = end;
	k->deviceId = device;
	k->contextId = 1;
	k->streamId = 13;
	k->gridX = k->gridY = k->gridZ = 1;
	k->blockX = 128;
	k->blockY = k->blockZ = 1;
}

#define NCCL_AG "ncclDevKernel_AllGather_RING_LL"
#define GEMM "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
#define CUPTI_BASE (5 * S) /* CUPTI's clock reads this at CLOCK_MONOTONIC BASE */
#define N_HUNG 5
#define T_HUNG (BASE + S + (uint64_t)N_HUNG * STEP)

static uint64_t to_cupti(uint64_t mono)
{
	return mono - BASE + CUPTI_BASE;
}

/* One CUPTI buffer of rank i through the agent's handler. */
static void handle(struct job *j, int i, struct buf *b)
{
	emit_out = &j->o;
	emit_rank = &j->r[i];
	cupti_handle_buffer(b->data, b->used);
	emit_out = NULL;
	b->used = 0;
}

/* 4 ranks on real NCCL: #1..#N-1 run on every GPU (their kernels are in a
 * CUPTI buffer after their launch); ranks 0, 1, 3 enqueue #N and return;
 * its kernel never ends, so CUPTI never delivers it; rank 2 never issues
 * #N. With later_activity a compute kernel that ends after #N's launch
 * arrives in a later buffer of ranks 0, 1, 3 (the GPU goes on with other
 * streams: CUPTI is alive). */
/* rank 2's #N in the desync variant: one element short, as fsdp_ref
 * --mismatch-at issues it */
static const struct call AG_SHORT = {FSS_OP_ALLGATHER, FSS_DTYPE_BFLOAT16, FSS_REDOP_NONE, 4095, -1, 0, 0};

static void cupti_job_ex(struct job *j, int later_activity, int desync)
{
	struct buf b = {.data = aligned_alloc(8, 1 << 16), .cap = 1 << 16};

	assert_non_null(b.data);
	memset(b.data, 0, b.cap);
	job_start(j, 4, FSS_FEATURE_NCCL | FSS_FEATURE_ENTER | FSS_FEATURE_CUPTI);
	for (int i = 0; i < 4; i++)
		anchor(&j->o, &j->r[i], FSS_CLOCK_CUPTI, BASE, CUPTI_BASE);
	for (int c = 1; c <= N_HUNG; c++) {
		for (int i = 0; i < 4; i++) {
			uint64_t t = BASE + S + (uint64_t)c * STEP;
			uint32_t corr = (uint32_t)(100 * c + i);

			if (c == N_HUNG && i == 2 && !desync)
				continue;
			/* returns at enqueue; in the desync, rank 2 issues #N with another count and
			 * real NCCL does not check: every rank's #N kernel waits for ever */
			collective(&j->o, &j->r[i], c == N_HUNG && i == 2 ? &AG_SHORT : &AG, t, t + 20000, 1);
			add_ext(&b, corr, j->r[i].seq); /* written at launch, inside the pushed seq */
			if (c < N_HUNG) {
				/* #N's kernel never ends, and the compute after it waits on it */
				add_kernel(&b, NCCL_AG, corr, (uint32_t)i, to_cupti(t + MS), to_cupti(t + 3 * MS));
				add_kernel(&b, GEMM, corr + 50, (uint32_t)i, to_cupti(t + 2 * MS),
					   to_cupti(t + 4 * MS));
			}
			handle(j, i, &b);
		}
	}
	if (later_activity)
		for (int i = 0; i < 4; i++) {
			if (i == 2 && !desync)
				continue;
			add_kernel(&b, GEMM, 9000, (uint32_t)i, to_cupti(T_HUNG + MS), to_cupti(T_HUNG + 2 * S));
			handle(j, i, &b);
		}
	for (int i = 0; i < 4; i++)
		alive(&j->o, &j->r[i], T_HUNG + 70 * S);
	free(b.data);
}

static void cupti_job(struct job *j, int later_activity)
{
	cupti_job_ex(j, later_activity, 0);
}

static int setup(void **state)
{
	(void)state;
	cupti_test_reset();
	walker_api = (struct cupti_api){.activity_get_next_record = real_api.activity_get_next_record,
					.get_timestamp = fixed_timestamp};
	cupti_test_use_api(&walker_api);
	emitted_intervals = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	cupti_test_use_api(NULL);
	cupti_test_reset();
	return 0;
}

static void test_hang_seen_by_cupti_only(void **state)
{
	(void)state;
	if (!have_real) {
		print_message("libcupti not loadable here: the CUPTI walk is not tested\n");
		skip();
	}
	struct job j;
	cupti_job(&j, 1);
	/* NCCL and compute kernels of #1..#N-1 on 4 ranks, and the later
	 * compute kernels of ranks 0, 1, 3 */
	assert_int_equal(emitted_intervals, 4 * (N_HUNG - 1) * 2 + 3);
	struct analysis_result *r = snap(&j);
	const struct analysis_flight *fl = &r->flight;
	assert_int_equal(fl->sources_cupti, 4);
	assert_int_equal(fl->nhangs, 1);
	const struct analysis_hang *h = &fl->hangs[0];
	assert_int_equal(h->comm_id, COMM_ID);
	assert_int_equal(h->comm_seq, N_HUNG);
	assert_int_equal(h->op, FSS_OP_ALLGATHER);
	assert_int_equal(h->nwaiting, 3);
	const int32_t want[] = {0, 1, 3};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(h->waiting[i].rank, want[i]);
		assert_int_equal(h->waiting[i].evidence, ANALYSIS_WAIT_GPU);
		assert_int_equal(h->waiting[i].since_ns, 70 * S);
	}
	assert_int_equal(h->nmissing, 1);
	assert_int_equal(h->missing[0].rank, 2);
	assert_int_equal(h->missing[0].last_seq, N_HUNG - 1);
	analysis_result_free(r);
	job_end(&j);
}

/* CUPTI delivered nothing after #N's launch: no GPU evidence, no hang. */
static void test_cupti_silent_is_no_evidence(void **state)
{
	(void)state;
	if (!have_real) {
		print_message("libcupti not loadable here: the CUPTI walk is not tested\n");
		skip();
	}
	struct job j;
	cupti_job(&j, 0);
	struct analysis_result *r = snap(&j);
	assert_int_equal(r->flight.nhangs, 0);
	analysis_result_free(r);
	job_end(&j);
}

/* A desync on real NCCL: every host returned from #N at enqueue, only the
 * signatures and CUPTI tell. The mismatch names both counts; the hang is
 * every rank inside #N with GPU evidence, none missing. */
static void test_desync_seen_on_the_gpu(void **state)
{
	(void)state;
	if (!have_real) {
		print_message("libcupti not loadable here: the CUPTI walk is not tested\n");
		skip();
	}
	struct job j;
	cupti_job_ex(&j, 1, 1);
	struct analysis_result *r = snap(&j);
	const struct analysis_flight *fl = &r->flight;
	assert_int_equal(fl->nmismatches, 1);
	const struct analysis_mismatch *m = &fl->mismatches[0];
	assert_int_equal(m->comm_id, COMM_ID);
	assert_int_equal(m->comm_seq, N_HUNG);
	assert_int_equal(m->a.count, 4096);
	assert_int_equal(m->na, 3);
	assert_int_equal(m->b.count, 4095);
	assert_int_equal(m->nb, 1);
	assert_int_equal(m->b_ranks[0], 2);
	assert_int_equal(fl->nhangs, 1);
	const struct analysis_hang *h = &fl->hangs[0];
	assert_int_equal(h->comm_seq, N_HUNG);
	assert_int_equal(h->nmissing, 0);
	assert_int_equal(h->nwaiting, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(h->waiting[i].evidence, ANALYSIS_WAIT_GPU);
	analysis_result_free(r);
	job_end(&j);
}

int main(void)
{
	void *handle_lib = NULL;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_hang_seen_by_cupti_only, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cupti_silent_is_no_evidence, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_desync_seen_on_the_gpu, setup, teardown),
	};

	have_real = cupti_api_load(&real_api, &handle_lib) == 0;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
