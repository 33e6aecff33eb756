/*
 * attach_readers_test.c - the readers of a trace fsdpscope attach wrote:
 * sources of path uprobe (features UPROBE | ENTER: no CUPTI, no NVTX) whose
 * communicators were first seen in use (comm event observed, fields
 * inferred). Asserts the per-source ranks and where they came from, that
 * exposure is not measured (source none, the attach reason as a note), that
 * exposed-gather says "not measured" rather than nothing, the attach
 * section's counts, and that sources attach let go are not counted as dead;
 * then the same job with one rank killed (process_exit SIGKILL): that one
 * is reported killed. The live state and /metrics of the same job carry no
 * exposure figures for its ranks (absent, not 0).
 *
 * The job: 4 ranks, a root unit and 4 blocks wrapped per block, resharded,
 * 8 steps, host timing as the stand-in NCCL blocks (no time is asserted).
 * Rank 0 and 3 know their rank from in-place AllGathers, rank 1 from RANK
 * in its environment, rank 2 only by pid order (a guess); each also holds a
 * 2-rank communicator whose membership was guessed (HSDP-like shard groups
 * with the same calls).
 *
 *   attach_readers_test                       the cmocka tests
 *   attach_readers_test --write PATH [--kill] write the trace (for
 *                                             tests/e2e/attach_readers_test.sh)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "collector/analysis.h"
#include "collector/analyze.h"
#include "collector/analyze_traces.h"
#include "collector/live.h"
#include "collector/metrics.h"
#include "common/record.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "rules/findings.h"
#include "rules/rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RANKS 4
#define UNITS 5 /* root + 4 blocks */
#define STEPS 8
#define KILLED_RANK 2
#define THREAD_COMM 101

static const uint32_t rank_bits[RANKS] = {FSS_COMM_INFER_RANK_INPLACE, FSS_COMM_INFER_RANK_ENV,
					  FSS_COMM_INFER_RANK_ORDER, FSS_COMM_INFER_RANK_INPLACE};

static uint64_t world_handle(int r)
{
	return 0xa000 + (uint64_t)r;
}

static uint64_t unit_elements(int u)
{
	return u == 0 ? 1u << 18 : 1u << 20;
}

struct gen {
	trace_writer_t *w;
	uint64_t seq[RANKS];
};

/* One collective of rank r: its enter record, then its collective record
 * (the same seq), as attach writes them. */
static int call(struct gen *g, int r, uint8_t op, uint64_t elements, uint64_t enter, uint64_t exit_ns)
{
	struct fss_rec_enter e;
	struct fss_rec_collective c;
	uint64_t count = elements / RANKS, seq = ++g->seq[r];
	uint8_t dtype = op == FSS_OP_ALLGATHER ? FSS_DTYPE_BFLOAT16 : FSS_DTYPE_FLOAT32;
	uint64_t recv = 0x100000000ull * (uint64_t)(r + 1);
	int rc;

	record_init(&e, FSS_REC_ENTER, sizeof(e), (uint32_t)r);
	e.seq = seq;
	e.comm = world_handle(r);
	e.stream = 0x5;
	e.count = count;
	e.enter_ns = enter;
	e.thread = THREAD_COMM;
	e.peer = -1;
	e.kind = FSS_ENTER_COLLECTIVE;
	e.op = op;
	e.dtype = dtype;
	e.redop = op == FSS_OP_ALLGATHER ? FSS_REDOP_NONE : FSS_REDOP_SUM;
	e.path = FSS_PATH_UPROBE;
	if ((rc = trace_writer_append(g->w, &e)))
		return rc;
	record_init(&c, FSS_REC_COLLECTIVE, sizeof(c), (uint32_t)r);
	c.seq = seq;
	c.comm = world_handle(r);
	c.stream = 0x5;
	c.count = count;
	c.bytes = count * record_dtype_bytes(dtype);
	/* FSDP2 gathers in place: sendbuff = recvbuff + rank x bytes */
	c.recvbuff = recv;
	c.sendbuff = op == FSS_OP_ALLGATHER ? recv + (uint64_t)r * c.bytes : recv + 0x10000000ull;
	c.enter_ns = enter;
	c.exit_ns = exit_ns;
	c.thread = THREAD_COMM;
	c.peer = -1;
	c.op = op;
	c.dtype = dtype;
	c.redop = e.redop;
	c.path = FSS_PATH_UPROBE;
	return trace_writer_append(g->w, &c);
}

/* One step of every rank from t: forward gathers, backward re-gathers and
 * reduce-scatters, the loss all-reduce; rank `skip` (-1: none) has gone. */
static int step(struct gen *g, int skip, uint64_t t, uint64_t *end)
{
	int rc = 0;
	uint64_t e = t;

	for (int r = 0; r < RANKS && !rc; r++) {
		uint64_t at = t;

		if (r == skip)
			continue;
		for (int u = 0; u < UNITS && !rc; u++, at += 50000)
			rc = call(g, r, FSS_OP_ALLGATHER, unit_elements(u), at, at + 20000);
		for (int u = UNITS - 1; u >= 0 && !rc; u--) {
			if (u > 0) {
				rc = call(g, r, FSS_OP_ALLGATHER, unit_elements(u), at, at + 20000);
				at += 30000;
			}
			if (!rc)
				rc = call(g, r, FSS_OP_REDUCESCATTER, unit_elements(u), at, at + 20000);
			at += 80000;
		}
		if (!rc)
			rc = call(g, r, FSS_OP_ALLREDUCE, RANKS, at, at + 5000);
		at += 10000;
		e = at > e ? at : e;
	}
	*end = e;
	return rc;
}

static int observed(struct gen *g, int r, uint64_t handle, uint64_t id, int nranks, int rank, uint32_t inferred,
		    uint64_t t)
{
	struct fss_rec_comm c;

	record_init(&c, FSS_REC_COMM, sizeof(c), (uint32_t)r);
	c.comm = handle;
	c.id_hash = id;
	c.enter_ns = t;
	c.exit_ns = t;
	c.nranks = nranks;
	c.rank = rank;
	c.device = -1;
	c.color = -1;
	c.key = -1;
	c.event = FSS_COMM_OBSERVED;
	c.path = FSS_PATH_UPROBE;
	c.thread = THREAD_COMM;
	c.inferred = inferred;
	return trace_writer_append(g->w, &c);
}

/* The attached job's trace; kill: rank KILLED_RANK is killed halfway
 * (process_exit of SIGKILL, the kernel saw it go) and the last rank exits 0
 * at the end; the others (all of them without kill) are still running when
 * attach lets go (no end record at all). */
static int write_trace(const char *path, int kill)
{
	struct trace_writer_options wo = {.features = FSS_FEATURE_UPROBE | FSS_FEATURE_ENTER};
	struct gen g = {0};
	uint64_t t = 1000000000ull;
	int rc = trace_writer_open(&g.w, path, &wo);

	if (rc)
		return rc;
	for (int r = 0; r < RANKS && !rc; r++) {
		struct fss_rec_process_hello h;
		uint32_t id = FSS_COMM_INFER_ID | FSS_COMM_INFER_NRANKS_ATTACHED;

		record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), (uint32_t)r);
		h.pid = 1000 + (uint32_t)r;
		h.ppid = 999;
		/* only rank 1's launcher set RANK before exec */
		h.rank = r == 1 ? 1 : -1;
		h.local_rank = h.world_size = h.slurm_procid = h.ompi_rank = -1;
		h.path = FSS_PATH_UPROBE;
		h.mono_ns = t;
		h.realtime_ns = t + 1700000000000000000ull;
		h.features = FSS_FEATURE_UPROBE | FSS_FEATURE_ENTER;
		rc = trace_writer_append(g.w, &h);
		if (!rc)
			rc = observed(&g, r, world_handle(r), 0x5eed000000000001ull, RANKS, r, id | rank_bits[r], t + 1000);
		if (!rc)
			rc = observed(&g, r, 0xb000 + (uint64_t)r, 0x5eed000000000100ull + (uint64_t)(r / 2), 2, r % 2,
				      id | FSS_COMM_INFER_RANK_ORDER | FSS_COMM_INFER_MEMBERS, t + 1000);
	}
	t += 100000;
	for (int s = 0; s < STEPS && !rc; s++) {
		uint64_t end;

		/* killed: rank KILLED_RANK stops after half the steps, the others go on */
		rc = step(&g, kill && s >= STEPS / 2 ? KILLED_RANK : -1, t, &end);
		t = end + 10000;
	}
	if (!rc && kill) {
		struct fss_rec_process_exit x;

		record_init(&x, FSS_REC_PROCESS_EXIT, sizeof(x), KILLED_RANK);
		x.at_ns = t;
		x.pid = 1000 + KILLED_RANK;
		x.wait_status = 9; /* waitpid() status of SIGKILL */
		rc = trace_writer_append(g.w, &x);
		/* and the last rank exited 0 at the end: clean, attach writes no process_end */
		record_init(&x, FSS_REC_PROCESS_EXIT, sizeof(x), RANKS - 1);
		x.pid = 1000 + RANKS - 1;
		x.wait_status = 0;
		if (!rc)
			rc = trace_writer_append(g.w, &x);
	}
	if (trace_writer_close(g.w) && !rc)
		rc = -EIO;
	return rc;
}

/* ---- the tests ------------------------------------------------------------ */

struct fixture {
	char path[64];
	struct analysis_result *r;
	findings_t *findings;
};

static int analyse(void **state, int kill)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct analysis_options o;
	struct rule_config rc;
	char err[256] = "";
	int fd;

	assert_non_null(f);
	snprintf(f->path, sizeof(f->path), "/tmp/fss_attach_readers_XXXXXX");
	fd = mkstemp(f->path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(write_trace(f->path, kill), 0);
	analysis_options_init(&o);
	assert_int_equal(analyze_trace(f->path, &o, &f->r, err, sizeof(err)), 0);
	rule_config_init(&rc);
	f->findings = findings_new();
	assert_non_null(f->findings);
	assert_int_equal(rules_run(f->r, &rc, f->findings), 0);
	*state = f;
	return 0;
}

static int setup_detached(void **state)
{
	return analyse(state, 0);
}

static int setup_killed(void **state)
{
	return analyse(state, 1);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	unlink(f->path);
	analysis_result_free(f->r);
	findings_free(f->findings);
	free(f);
	return 0;
}

static const struct source_summary *by_pid(const struct analysis_result *r, uint32_t pid)
{
	for (uint32_t i = 0; i < r->nsources; i++)
		if (r->sources[i].pid == pid)
			return &r->sources[i];
	return NULL;
}

static int has_note(const struct analysis_result *r, const char *text)
{
	for (uint32_t i = 0; i < r->nnotes; i++)
		if (strstr(r->notes[i], text))
			return 1;
	return 0;
}

/* The ranks, and where each came from: never "communicator" for an observed one. */
static void test_ranks_and_origins(void **state)
{
	const struct analysis_result *r = ((struct fixture *)*state)->r;
	static const enum source_rank_from want[RANKS] = {SOURCE_RANK_INFERRED_INPLACE, SOURCE_RANK_INFERRED_ENV,
							   SOURCE_RANK_GUESSED_ORDER, SOURCE_RANK_INFERRED_INPLACE};

	assert_int_equal(r->nsources, RANKS);
	assert_int_equal(r->trace.sources_attached, RANKS);
	for (int k = 0; k < RANKS; k++) {
		const struct source_summary *s = by_pid(r, 1000 + (uint32_t)k);

		assert_non_null(s);
		assert_int_equal(s->rank, k);
		assert_int_equal(s->rank_from, want[k]);
		assert_int_equal(s->path, FSS_PATH_UPROBE);
		assert_int_equal(s->comms, 2);
		assert_int_equal(s->comms_observed, 2);
		assert_true(s->rank_inferred & FSS_COMM_INFER_ID);
		assert_int_equal(source_rank_is_guess((enum source_rank_from)s->rank_from), k == 2);
	}
	assert_string_equal(source_rank_from_name(SOURCE_RANK_GUESSED_ORDER), "guessed:pid-order");
	assert_string_equal(source_rank_from_name(SOURCE_RANK_INFERRED_INPLACE), "inferred:in-place-allgather");
	assert_int_equal(r->world_size, RANKS);
}

/* Steps from the period, exposure not measured, and said why. */
static void test_exposure_not_measured(void **state)
{
	const struct analysis_result *r = ((struct fixture *)*state)->r;

	assert_int_equal(r->step_detection, ANALYSIS_STEPS_PERIOD);
	assert_true(r->steps_analyzed > 0);
	assert_int_equal(r->verdict, ANALYSIS_DIAGNOSED);
	assert_int_equal(r->per_step.allgathers, UNITS + UNITS - 1);
	assert_int_equal(r->exposure.source, ANALYSIS_EXPOSURE_NONE);
	assert_int_equal(r->exposure.exposed_allgather_ns_per_step, 0);
	assert_true(has_note(r, analysis_attach_exposure_why()));
	assert_false(has_note(r, "no compute intervals"));
	assert_non_null(strstr(analysis_attach_exposure_why(), "fsdpscope run"));
}

/* exposed-gather says it did not measure: a finding, never silence. */
static void test_exposed_gather_not_clean(void **state)
{
	const struct fixture *f = *state;
	const struct finding *x = findings_find(f->findings, "exposed-gather");

	assert_non_null(x);
	assert_int_equal(x->severity, RULE_INFO);
	assert_non_null(strstr(x->message, "not measured"));
	assert_null(strstr(x->message, "clean"));
}

/* What attach inferred, each count checkable against its total. */
static void test_attach_section(void **state)
{
	const struct analysis_attach *x = &((struct fixture *)*state)->r->attach;

	assert_int_equal(x->sources, RANKS);
	assert_int_equal(x->ranks_inferred, RANKS);
	assert_int_equal(x->ranks_guessed, 1);
	assert_int_equal(x->ncomms, 2 * RANKS);
	assert_int_equal(x->comms_observed, 2 * RANKS);
	assert_int_equal(x->inferred[0], 2 * RANKS); /* id */
	assert_int_equal(x->inferred[1], 2 * RANKS); /* nranks */
	assert_int_equal(x->inferred[2], 2);         /* rank in place: ranks 0 and 3 */
	assert_int_equal(x->inferred[3], 1);         /* rank env: rank 1 */
	assert_int_equal(x->inferred[4], 1 + RANKS); /* rank order: rank 2, and every pair */
	assert_int_equal(x->inferred[5], RANKS);     /* members guessed: the pairs */
	for (uint32_t i = 0; i < x->ncomms; i++)
		assert_true(x->comms[i].observed);
	assert_string_equal(analysis_inferred_words(0), "identity matched across ranks by their calls");
	assert_string_equal(analysis_inferred_words(4), "rank guessed from pid order");
	assert_string_equal(analysis_inferred_name(5), "members");
}

/* Still running when attach let go: not dead, nothing cut. */
static void test_detached_not_dead(void **state)
{
	const struct analysis_result *r = ((struct fixture *)*state)->r;

	assert_int_equal(r->attach.detached, RANKS);
	assert_int_equal(r->trace.sources_cut, 0);
	assert_int_equal(r->trust.ranks_cut, 0);
	assert_int_equal(r->trust.steps_cut, 0);
	assert_int_equal(r->trust.steps_cut_all, 0);
	for (uint32_t i = 0; i < r->nsources; i++) {
		assert_int_equal(r->sources[i].end, SOURCE_END_DETACHED);
		assert_int_equal(r->sources[i].signal, 0);
	}
	for (uint32_t i = 0; i < r->nper_rank; i++) {
		assert_false(r->per_rank[i].cut);
		assert_int_equal(r->per_rank[i].steps_cut, 0);
	}
	assert_true(has_note(r, SOURCE_END_DETACHED_WORDS));
	assert_false(has_note(r, "died"));
	assert_string_equal(source_end_name(SOURCE_END_DETACHED), "detached");
}

/* One rank killed while attached: that one is reported killed; one that
 * exited 0 ended cleanly; the others detached. */
static void test_killed_reported(void **state)
{
	const struct analysis_result *r = ((struct fixture *)*state)->r;
	const struct source_summary *k = by_pid(r, 1000 + KILLED_RANK);
	const struct source_summary *x = by_pid(r, 1000 + RANKS - 1);

	assert_non_null(k);
	assert_int_equal(k->end, SOURCE_END_SIGNALED);
	assert_int_equal(k->signal, 9);
	assert_non_null(x);
	assert_int_equal(x->end, SOURCE_END_CLEAN);
	assert_int_equal(x->exit_code, 0);
	assert_int_equal(r->attach.detached, RANKS - 2);
	assert_int_equal(r->trace.sources_cut, 1);
	assert_int_equal(r->trust.ranks_cut, 1);
	assert_true(has_note(r, "killed by signal 9"));
	for (uint32_t i = 0; i < r->nsources; i++)
		if (r->sources[i].pid < 1000 + KILLED_RANK)
			assert_int_equal(r->sources[i].end, SOURCE_END_DETACHED);
	for (uint32_t i = 0; i < r->nper_rank; i++) {
		assert_int_equal(r->per_rank[i].cut, r->per_rank[i].pid == 1000 + KILLED_RANK);
		if (r->per_rank[i].pid == 1000 + RANKS - 1)
			assert_int_equal(r->per_rank[i].steps_cut, 0); /* exited 0: its end is whole */
	}
}

/* ---- the live state and /metrics --------------------------------------- */

struct live_session {
	sources_t *sources;
	analyzer_t *a;
	live_t *live;
};

static int live_record(void *ctx, struct source *src, const struct fss_record_head *rec)
{
	struct live_session *s = ctx;
	int rc = analyzer_feed(s->a, rec);

	return rc ? rc : live_on_record(s->live, rec, src);
}

static int live_feed(void *ctx, const struct fss_record_head *rec)
{
	return sources_feed(((struct live_session *)ctx)->sources, rec);
}

/* The ranks of an attached job: steps analysed, no exposure figure. */
static void test_live_and_metrics(void **state)
{
	const struct fixture *f = *state;
	static const struct source_ops ops = {.on_record = live_record};
	struct trace_parser_ops parser = {.on_record = live_feed};
	struct live_session s;
	struct analysis_result *r;
	live_board_t *b;
	char *text;
	size_t len;

	s.sources = sources_new(&ops, &s);
	assert_non_null(s.sources);
	assert_int_equal(analyzer_new(&s.a, NULL), 0);
	assert_int_equal(live_new(&s.live), 0);
	analyzer_on_step(s.a, live_step_cb, s.live);
	assert_int_equal(trace_read(f->path, &parser, &s, NULL), 0);
	assert_int_equal(sources_finish(s.sources), 0);
	assert_int_equal(analyzer_finish(s.a, &r), 0); /* the steps come at the end: 160 events per rank */
	live_set_diagnosis(s.live, r, NULL, 0);
	analysis_result_free(r);
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(live_publish(s.live, b), 0);
	const struct live_view *v = live_board_acquire(b);
	assert_non_null(v);
	assert_int_equal(v->nranks, RANKS);
	assert_int_equal(v->job.sources_attached, RANKS);
	assert_int_equal(v->job.exposure_source, ANALYSIS_EXPOSURE_NONE);
	for (size_t i = 0; i < v->nranks; i++) {
		assert_true(v->ranks[i].attached);
		assert_true(v->ranks[i].totals.steps > 0);
		assert_false(v->ranks[i].ended);
		assert_int_equal(v->ranks[i].rank_from == SOURCE_RANK_GUESSED_ORDER, v->ranks[i].rank == 2);
	}
	assert_int_equal(metrics_render(v, &text, &len), 0);
	/* what uprobes can time is there; what needs GPU timing is not, not as 0 */
	assert_non_null(strstr(text, "\nfsdpscope_step_seconds{"));
	assert_non_null(strstr(text, "\nfsdpscope_allgathers_per_step{"));
	assert_null(strstr(text, "\nfsdpscope_allgather_exposed_seconds_per_step{"));
	assert_null(strstr(text, "\nfsdpscope_allgather_exposed_seconds_total{"));
	assert_null(strstr(text, "\nfsdpscope_compute_seconds_per_step{"));
	assert_null(strstr(text, "\nfsdpscope_compute_wait_seconds_total{"));
	assert_null(strstr(text, "\nfsdpscope_diagnosis_allgather_exposed_seconds_per_step "));
	assert_null(strstr(text, "\nfsdpscope_diagnosis_compute_wait_seconds_per_step "));
	free(text);
	live_board_release(b, v);
	live_board_free(b);
	live_free(s.live);
	analyzer_free(s.a);
	sources_free(s.sources);
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "--write") == 0) {
		int rc = write_trace(argv[2], argc >= 4 && strcmp(argv[3], "--kill") == 0);

		if (rc)
			fprintf(stderr, "attach_readers_test: %s: %s\n", argv[2], strerror(-rc));
		return rc ? 1 : 0;
	}
	const struct CMUnitTest detached[] = {
		cmocka_unit_test_setup_teardown(test_ranks_and_origins, setup_detached, teardown),
		cmocka_unit_test_setup_teardown(test_exposure_not_measured, setup_detached, teardown),
		cmocka_unit_test_setup_teardown(test_exposed_gather_not_clean, setup_detached, teardown),
		cmocka_unit_test_setup_teardown(test_attach_section, setup_detached, teardown),
		cmocka_unit_test_setup_teardown(test_detached_not_dead, setup_detached, teardown),
		cmocka_unit_test_setup_teardown(test_killed_reported, setup_killed, teardown),
		cmocka_unit_test_setup_teardown(test_live_and_metrics, setup_detached, teardown),
	};
	return cmocka_run_group_tests(detached, NULL, NULL);
}
