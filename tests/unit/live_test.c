/*
 * live_test.c - the live state (collector/live.c) and the analyzer's
 * snapshot (analyzer_snapshot), fed as a session feeds them: every record
 * through a per-source layer into the analyzer and the live state, every
 * step through the analyzer's step callback.
 *
 *  - a synthetic fsdp_ref-like trace (analysis_synth.h): per rank the live
 *    last step is the last step the callback reported, the totals are the
 *    sums of the steps reported, the window holds the last LIVE_WINDOW
 *    steps in order, the strip the last step's events, the per-source
 *    counters what was fed;
 *  - the snapshot mid-trace has fewer steps than the finished result, and
 *    after the whole trace the same verdict, units and counts; the live
 *    diagnosis from it carries them, the gathers and the roles;
 *  - the board: a reader thread acquires and releases copies while the
 *    session publishes (counts of generations, no timing);
 *  - collectives in flight: per rank and communicator the numbers entered
 *    (enter records) and left (collective records), from 1 per
 *    communicator whatever the per-source seq, groups and sources without
 *    enter records included; the diagnosis' hangs held and cleared;
 *  - memory: 200 k steps of records keep the analyzer's pending items under
 *    a bound and the live state's size fixed once the window has filled.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "analysis_synth.h"
#include "collector/analyze.h"
#include "collector/analyze_traces.h"
#include "collector/live.h"
#include "collector/source.h"
#include "common/record.h"
#include "common/trace_parser.h"

#include "tests/support/scratch_dir.h"

static char dir[] = "/tmp/fss-live-XXXXXX";

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

/* ---- a session in small: sources -> analyzer + live ---------------------- */

#define MAX_SOURCES 16

/* What the test saw of one source's steps, to check the live state by. */
struct seen_rank {
	int any;
	struct analysis_step_info last;
	uint64_t steps, excluded, step_ns_sum, allgathers_sum, exposed_sum, wait_sum, compute_sum;
	uint64_t step_ns_min, step_ns_max;
	uint32_t ordinals[LIVE_WINDOW]; /* ring of the latest ordinals */
	uint64_t nordinals;
	size_t nevents;
	struct analysis_step_event first_event;
	uint64_t collectives, max_seq;
};

struct session {
	sources_t *sources;
	analyzer_t *a;
	live_t *live;
	uint64_t records;     /* fed */
	uint64_t stop_after;  /* feed no more than this many (0: all) */
	uint64_t lose_seq;    /* source 1's collective with this seq is not fed (a call lost), 0 */
	uint64_t steps_reported;
	uint64_t snapshot_every; /* take (and drop) a snapshot every this many records, 0 never */
	uint64_t snapshots;
	size_t memory_at_window; /* live_memory when the first rank's window had filled */
	int fail;
	struct seen_rank seen[MAX_SOURCES];
};

static void on_step(void *ctx, const struct analysis_step_info *si)
{
	struct session *s = ctx;
	s->steps_reported++;
	if (si->source < MAX_SOURCES) {
		struct seen_rank *r = &s->seen[si->source];
		r->any = 1;
		r->last = *si;
		r->nevents = si->nstep_events;
		if (si->nstep_events)
			r->first_event = si->step_events[0];
		if (si->excluded) {
			r->excluded++;
		} else {
			if (r->steps == 0 || si->step_ns < r->step_ns_min)
				r->step_ns_min = si->step_ns;
			if (si->step_ns > r->step_ns_max)
				r->step_ns_max = si->step_ns;
			r->steps++;
			r->step_ns_sum += si->step_ns;
			r->allgathers_sum += si->allgathers;
			r->exposed_sum += si->exposed_allgather_ns;
			r->wait_sum += si->compute_wait_ns;
			r->compute_sum += si->compute_ns;
		}
		r->ordinals[r->nordinals++ % LIVE_WINDOW] = si->ordinal;
		if (r->nordinals == LIVE_WINDOW + 1 && !s->memory_at_window)
			s->memory_at_window = live_memory(s->live);
	}
	live_step_cb(s->live, si);
}

static int on_source_record(void *ctx, struct source *src, const struct fss_record_head *rec)
{
	struct session *s = ctx;
	s->records++;
	if (src && rec->type == FSS_REC_COLLECTIVE && src->id < MAX_SOURCES) {
		const struct fss_rec_collective *c = (const void *)rec;
		s->seen[src->id].collectives++;
		if (c->seq > s->seen[src->id].max_seq)
			s->seen[src->id].max_seq = c->seq;
	}
	int rc = analyzer_feed(s->a, rec);
	if (rc == 0)
		rc = live_on_record(s->live, rec, src);
	if (rc == 0 && s->snapshot_every && s->records % s->snapshot_every == 0) {
		struct analysis_result *r;
		rc = analyzer_snapshot(s->a, &r);
		analysis_result_free(r);
		s->snapshots++;
	}
	return rc;
}

static void session_open(struct session *s)
{
	memset(s, 0, sizeof *s);
	static const struct source_ops ops = {.on_record = on_source_record};
	s->sources = sources_new(&ops, s);
	assert_non_null(s->sources);
	assert_int_equal(analyzer_new(&s->a, NULL), 0);
	assert_int_equal(live_new(&s->live), 0);
	analyzer_on_step(s->a, on_step, s);
}

static void session_close(struct session *s)
{
	live_free(s->live);
	analyzer_free(s->a);
	sources_free(s->sources);
}

static int feed_record(void *ctx, const struct fss_record_head *rec)
{
	struct session *s = ctx;
	if (s->stop_after && s->records >= s->stop_after)
		return 1; /* stop here: the rest is fed by a second read */
	if (s->lose_seq && rec->type == FSS_REC_COLLECTIVE && rec->source == 1 &&
	    ((const struct fss_rec_collective *)rec)->seq == s->lose_seq)
		return 0;
	return sources_feed(s->sources, rec);
}

/* Records of a file after the first `skip` (a second pass over the same file). */
struct skipper {
	struct session *s;
	uint64_t skip, at;
};

static int feed_rest(void *ctx, const struct fss_record_head *rec)
{
	struct skipper *k = ctx;
	if (k->at++ < k->skip)
		return 0;
	return sources_feed(k->s->sources, rec);
}

static void write_synth(const char *name, int steps, uint64_t skew_ns, char *path, size_t len,
			struct synth_truth *truth)
{
	struct synth_config c;
	synth_defaults(&c);
	c.ranks = 2;
	c.steps = steps;
	c.skew_ns = skew_ns;
	snprintf(path, len, "%s/%s.fss", dir, name);
	assert_int_equal(synth_write(path, &c, truth), 0);
}

static const struct live_rank *view_rank(const struct live_view *v, uint32_t source)
{
	for (size_t i = 0; i < v->nranks; i++)
		if (v->ranks[i].source == source)
			return &v->ranks[i];
	return NULL;
}

/* ---- the live state against what the callback reported ------------------ */

static void test_live_follows_the_steps(void **state)
{
	(void)state;
	char path[256];
	struct synth_truth truth;
	write_synth("steps", 100, 0, path, sizeof path, &truth);

	struct session s;
	session_open(&s);
	s.lose_seq = (uint64_t)truth.allgathers * 50; /* in the middle: one step of rank 1 left out */
	struct trace_parser_ops ops = {.on_record = feed_record};
	assert_int_equal(trace_read(path, &ops, &s, NULL), 0);
	struct analysis_result *r;
	assert_int_equal(analyzer_finish(s.a, &r), 0);
	assert_int_equal(r->verdict, ANALYSIS_DIAGNOSED);

	live_board_t *b;
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(live_publish(s.live, b), 0);
	const struct live_view *v = live_board_acquire(b);
	assert_non_null(v);
	assert_int_equal(v->generation, 1);
	assert_int_equal(v->job.records_total, s.records);
	assert_int_equal(v->nranks, 2);
	assert_int_equal(v->ranks[0].rank, 0);
	assert_int_equal(v->ranks[1].rank, 1);

	for (uint32_t src = 0; src < 2; src++) {
		const struct seen_rank *e = &s.seen[src];
		const struct live_rank *lr = view_rank(v, src);
		assert_non_null(lr);
		assert_true(e->any);
		assert_true(e->steps >= 90); /* 100 steps less the warm-up and the last */
		/* the lost call: rank 1 has steps left out, and counts the call missing */
		assert_int_equal(e->excluded > 0, src == 1);
		assert_int_equal(lr->collectives_missing, src == 1);
		/* the last step */
		assert_int_equal(lr->last.ordinal, e->last.ordinal);
		assert_int_equal(lr->last.step_ns, e->last.step_ns);
		assert_int_equal(lr->last.allgathers, e->last.allgathers);
		assert_int_equal(lr->last.excluded, e->last.excluded);
		/* the whole run */
		assert_int_equal(lr->totals.steps, e->steps);
		assert_int_equal(lr->totals.steps_excluded, e->excluded);
		assert_int_equal(lr->totals.step_ns_sum, e->step_ns_sum);
		assert_int_equal(lr->totals.step_ns_min, e->step_ns_min);
		assert_int_equal(lr->totals.step_ns_max, e->step_ns_max);
		assert_int_equal(lr->totals.allgathers_sum, e->allgathers_sum);
		assert_int_equal(lr->totals.exposed_allgather_ns_sum, e->exposed_sum);
		assert_int_equal(lr->totals.compute_wait_ns_sum, e->wait_sum);
		assert_int_equal(lr->totals.compute_ns_sum, e->compute_sum);
		assert_true(lr->totals.allgathers_sum > 0 && lr->totals.exposed_allgather_ns_sum > 0);
		/* the window: the last LIVE_WINDOW steps, oldest first */
		assert_true(e->nordinals > LIVE_WINDOW);
		assert_int_equal(lr->nwindow, LIVE_WINDOW);
		for (size_t i = 0; i < LIVE_WINDOW; i++)
			assert_int_equal(lr->window[i].ordinal, e->ordinals[(e->nordinals + i) % LIVE_WINDOW]);
		for (size_t i = 1; i < LIVE_WINDOW; i++)
			assert_true(lr->window[i].ordinal > lr->window[i - 1].ordinal);
		assert_int_equal(lr->window[LIVE_WINDOW - 1].ordinal, lr->last.ordinal);
		/* the time strip: the last step's events */
		assert_true(e->nevents > 0);
		assert_int_equal(lr->nstrip, e->nevents < LIVE_STRIP_MAX ? e->nevents : LIVE_STRIP_MAX);
		assert_int_equal(lr->strip[0].start_ns, e->first_event.start_ns);
		assert_int_equal(lr->strip[0].op, e->first_event.op);
		assert_int_equal(lr->strip[0].bytes, e->first_event.bytes);
		/* an analysed step: its FSDP gathers have their phase and (forward) unit */
		uint32_t phased = 0, forward_units = 0;
		for (size_t i = 0; i < lr->nstrip; i++) {
			phased += lr->strip[i].op == FSS_OP_ALLGATHER && lr->strip[i].phase != 0;
			forward_units += lr->strip[i].phase == ANALYSIS_PHASE_FORWARD && lr->strip[i].unit != UINT32_MAX;
		}
		assert_int_equal(lr->last.excluded, 0);
		assert_int_equal(phased, lr->last.allgathers);
		assert_int_equal(forward_units, (uint32_t)truth.forward_allgathers);
		/* the source's counters */
		assert_int_equal(lr->collectives, e->collectives);
		assert_int_equal(lr->ncomms, 1);
		assert_int_equal(lr->comms[0].collectives, e->collectives);
		assert_int_equal(lr->comms[0].last_seq, e->max_seq);
		assert_int_equal(lr->comms[0].nranks, 2);
		assert_int_equal(lr->comms[0].rank, (int32_t)src);
		assert_int_equal(lr->dropped, 0);
		assert_true(lr->ended);
	}
	/* every record of the trace belongs to a source but the trace_end */
	assert_int_equal(view_rank(v, 0)->records + view_rank(v, 1)->records + 1, s.records);
	live_board_release(b, v);
	live_board_free(b);
	analysis_result_free(r);
	session_close(&s);
}

/* ---- the snapshot --------------------------------------------------------- */

static void test_snapshot(void **state)
{
	(void)state;
	char path[256];
	struct synth_truth truth;
	write_synth("snapshot", 40, 50000, path, sizeof path, &truth);

	/* mid-trace: the steps so far */
	struct session s;
	session_open(&s);
	s.stop_after = truth.records / 2;
	s.snapshot_every = 97; /* snapshots all along change nothing the analysis says at the end */
	struct trace_parser_ops ops = {.on_record = feed_record};
	trace_read(path, &ops, &s, NULL); /* stops at stop_after */
	assert_int_equal(s.records, truth.records / 2);
	struct analysis_result *mid;
	assert_int_equal(analyzer_snapshot(s.a, &mid), 0);
	assert_true(mid->steps_analyzed > 0);

	/* the rest, then a snapshot of everything, then the finished result */
	struct skipper k = {.s = &s, .skip = s.records};
	s.stop_after = 0;
	struct trace_parser_ops rest = {.on_record = feed_rest};
	assert_int_equal(trace_read(path, &rest, &k, NULL), 0);
	struct analysis_result *all, *fin, *after;
	assert_int_equal(analyzer_snapshot(s.a, &all), 0);
	assert_int_equal(analyzer_finish(s.a, &fin), 0);
	assert_int_equal(analyzer_snapshot(s.a, &after), -EINVAL);

	assert_true(mid->steps_analyzed < fin->steps_analyzed);
	assert_true(all->steps_analyzed <= fin->steps_analyzed);
	assert_true(all->steps_analyzed + 2 >= fin->steps_analyzed); /* the last step waited for the end */
	assert_int_equal(fin->verdict, ANALYSIS_DIAGNOSED);
	assert_int_equal(all->verdict, fin->verdict);
	assert_int_equal(all->undecided_reason, fin->undecided_reason);
	assert_int_equal(all->ranks, fin->ranks);
	assert_int_equal(all->headline_rank, fin->headline_rank);
	assert_int_equal(all->step_detection, fin->step_detection);
	assert_int_equal(all->units.repeating_units, fin->units.repeating_units);
	assert_int_equal(all->units.gathers_per_unit, fin->units.gathers_per_unit);
	assert_int_equal(all->units.total_params, fin->units.total_params);
	assert_int_equal(all->per_step.allgathers, fin->per_step.allgathers);
	assert_int_equal(all->per_step.forward_allgathers, fin->per_step.forward_allgathers);
	assert_int_equal(all->per_step.reduce_scatters, fin->per_step.reduce_scatters);
	assert_int_equal(all->reshard.policy, fin->reshard.policy);
	assert_int_equal(all->microbatches.per_step, fin->microbatches.per_step);
	assert_int_equal(all->ngathers, fin->ngathers);
	/* what the steady-state step decides is the same whole */
	assert_memory_equal(&all->units, &fin->units, sizeof fin->units);
	assert_memory_equal(&all->reshard, &fin->reshard, sizeof fin->reshard);
	assert_memory_equal(&all->per_step, &fin->per_step, sizeof fin->per_step);
	assert_memory_equal(&all->microbatches, &fin->microbatches, sizeof fin->microbatches);
	assert_memory_equal(&all->ledger, &fin->ledger, sizeof fin->ledger);
	assert_int_equal(all->ncomms, fin->ncomms);
	for (uint32_t i = 0; i < fin->ncomms; i++)
		assert_int_equal(all->comms[i].role, fin->comms[i].role);
	assert_int_equal(fin->units.repeating_units, truth.repeating_units);
	/* the same trace analysed without snapshots */
	struct analysis_result *plain;
	char err[128];
	assert_true(s.snapshots > 10);
	assert_int_equal(analyze_trace(path, NULL, &plain, err, sizeof err), 0);
	assert_int_equal(plain->steps_analyzed, fin->steps_analyzed);
	assert_int_equal(plain->steps_seen, fin->steps_seen);
	assert_int_equal(plain->step_ns, fin->step_ns);
	assert_int_equal(plain->exposure.exposed_allgather_ns_per_step, fin->exposure.exposed_allgather_ns_per_step);
	assert_int_equal(plain->exposure.compute_wait_ns_per_step, fin->exposure.compute_wait_ns_per_step);
	assert_int_equal(plain->exposure.step, fin->exposure.step);
	assert_int_equal(plain->units.repeating_units, fin->units.repeating_units);
	assert_int_equal(plain->ngathers, fin->ngathers);
	for (uint32_t i = 0; i < fin->ngathers; i++) {
		assert_int_equal(plain->gathers[i].exposed_ns, fin->gathers[i].exposed_ns);
		assert_int_equal(plain->gathers[i].unit, fin->gathers[i].unit);
	}
	analysis_result_free(plain);
	assert_int_equal(fin->per_step.allgathers, truth.allgathers);

	/* the diagnosis in the live state */
	struct live_finding f = {.rule = "wrap-too-fine", .severity = 2, .message = "m", .evidence = "e"};
	live_set_diagnosis(s.live, all, &f, 1);
	live_board_t *b;
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(live_publish(s.live, b), 0);
	const struct live_view *v = live_board_acquire(b);
	assert_int_equal(v->job.diagnoses, 1);
	assert_int_equal(v->job.verdict, fin->verdict);
	assert_int_equal(v->job.repeating_units, fin->units.repeating_units);
	assert_int_equal(v->job.gathers_per_unit, fin->units.gathers_per_unit);
	assert_int_equal(v->job.allgathers_per_step, fin->per_step.allgathers);
	assert_int_equal(v->job.reshard, fin->reshard.policy);
	assert_int_equal(v->job.nfindings, 1);
	assert_string_equal(v->job.findings[0].rule, "wrap-too-fine");
	assert_int_equal(v->job.ngathers, fin->per_step.forward_allgathers);
	uint32_t repeated = 0;
	for (size_t i = 0; i < v->job.ngathers; i++) {
		repeated += v->job.gathers[i].unit != UINT32_MAX;
		if (i > 0 && v->job.gathers[i].unit != UINT32_MAX && v->job.gathers[i - 1].unit != UINT32_MAX)
			assert_true(v->job.gathers[i].unit >= v->job.gathers[i - 1].unit); /* grouped by unit */
	}
	assert_int_equal(repeated, fin->units.repeating_units * fin->units.gathers_per_unit);
	assert_true(view_rank(v, 1)->lateness_ns > 0); /* rank 1 runs 50 us behind */
	for (size_t i = 0; i < v->nranks; i++) {
		assert_int_equal(v->ranks[i].comms[0].role, ANALYSIS_ROLE_FSDP);
		for (uint32_t k2 = 0; k2 < all->nper_rank; k2++)
			if (all->per_rank[k2].source == v->ranks[i].source)
				assert_int_equal(v->ranks[i].lateness_ns, (int64_t)all->per_rank[k2].late_ns_per_step);
	}
	live_board_release(b, v);
	live_board_free(b);
	analysis_result_free(mid);
	analysis_result_free(all);
	analysis_result_free(fin);
	session_close(&s);
}

/* ---- records made here: one rank, a period step of 9 collectives ---------- */

static void gen_open_features(struct session *s, uint32_t src, uint64_t features)
{
	struct fss_rec_process_hello h;
	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof h, src);
	h.pid = 100 + src;
	h.rank = h.local_rank = (int32_t)src;
	h.world_size = 2;
	h.slurm_procid = h.ompi_rank = -1;
	h.path = FSS_PATH_SYNTHETIC;
	h.mono_ns = 1000;
	h.realtime_ns = 1000;
	h.features = features;
	assert_int_equal(sources_feed(s->sources, &h.head), 0);
	struct fss_rec_comm cm;
	record_init(&cm, FSS_REC_COMM, sizeof cm, src);
	cm.comm = 0x1000 + src;
	cm.id_hash = 0xabcdef;
	cm.nranks = 2;
	cm.rank = (int32_t)src;
	cm.device = cm.color = cm.key = -1;
	cm.event = FSS_COMM_INIT;
	cm.enter_ns = 2000;
	cm.exit_ns = 3000;
	assert_int_equal(sources_feed(s->sources, &cm.head), 0);
}

static void gen_open(struct session *s, uint32_t src)
{
	gen_open_features(s, src, FSS_FEATURE_NCCL);
}

/* One step of source src: forward gathers of 3 units, backward re-gathers of
 * the last two mirrored, a reduce-scatter per unit, the loss all-reduce. */
static void gen_step(struct session *s, uint32_t src, uint64_t *seq, uint64_t *t)
{
	static const uint8_t ops[] = {FSS_OP_ALLGATHER, FSS_OP_ALLGATHER, FSS_OP_ALLGATHER,
				      FSS_OP_ALLGATHER, FSS_OP_REDUCESCATTER, FSS_OP_ALLGATHER,
				      FSS_OP_REDUCESCATTER, FSS_OP_REDUCESCATTER, FSS_OP_ALLREDUCE};
	static const uint64_t counts[] = {100, 2000, 2000, 2000, 2000, 2000, 2000, 100, 1};
	for (size_t i = 0; i < sizeof ops; i++) {
		struct fss_rec_collective c;
		record_init(&c, FSS_REC_COLLECTIVE, sizeof c, src);
		c.seq = ++*seq;
		c.comm = 0x1000 + src;
		c.count = counts[i];
		c.dtype = FSS_DTYPE_FLOAT32;
		c.bytes = counts[i] * 4;
		c.op = ops[i];
		c.peer = -1;
		c.path = FSS_PATH_SYNTHETIC;
		c.thread = 7;
		c.enter_ns = *t;
		c.exit_ns = *t + 500;
		*t += 1000;
		assert_int_equal(sources_feed(s->sources, &c.head), 0);
	}
}

/* ---- the board under a reader ------------------------------------------- */

struct reader {
	live_board_t *b;
	pthread_mutex_t mu;   /* guards last, for the publisher's handshake */
	pthread_cond_t cv;
	uint64_t generations; /* distinct generations seen */
	uint64_t last;
	int inconsistent;     /* a copy whose parts disagree, or a generation going back */
};

/* Wait until the reader has seen generation g (generous: 30 s). */
static int reader_reached(struct reader *r, uint64_t g)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 30;
	int ok = 1;
	pthread_mutex_lock(&r->mu);
	while (r->last < g && ok)
		ok = pthread_cond_timedwait(&r->cv, &r->mu, &ts) == 0;
	ok = r->last >= g;
	pthread_mutex_unlock(&r->mu);
	return ok;
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint64_t seen = 0;
	for (;;) {
		int closed = live_board_closed(r->b);
		const struct live_view *v = live_board_acquire(r->b);
		if (v) {
			if (v->generation < r->last)
				r->inconsistent = 1;
			if (v->generation != r->last)
				r->generations++;
			pthread_mutex_lock(&r->mu);
			r->last = v->generation;
			pthread_cond_signal(&r->cv);
			pthread_mutex_unlock(&r->mu);
			/* every record the copy counts is one of its ranks' */
			uint64_t sum = 0;
			for (size_t i = 0; i < v->nranks; i++)
				sum += v->ranks[i].records;
			if (sum != v->job.records_total)
				r->inconsistent = 1;
			seen = v->generation;
			live_board_release(r->b, v);
		}
		if (closed)
			return NULL;
		live_board_wait(r->b, seen, 1000);
	}
}

static void test_board_reader(void **state)
{
	(void)state;
	struct session s;
	session_open(&s);
	live_board_t *b;
	assert_int_equal(live_board_new(&b), 0);
	struct reader rd = {.b = b};
	pthread_mutex_init(&rd.mu, NULL);
	pthread_cond_init(&rd.cv, NULL);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, reader_main, &rd), 0);
	/* a process whose rank is not known arrives first: its rank comes last */
	struct fss_rec_process_hello h;
	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof h, 9);
	h.rank = h.local_rank = h.world_size = h.slurm_procid = h.ompi_rank = -1;
	h.path = FSS_PATH_SYNTHETIC;
	assert_int_equal(sources_feed(s.sources, &h.head), 0);
	gen_open(&s, 1);
	gen_open(&s, 0);
	uint64_t seq[2] = {0, 0}, t[2] = {10000, 10000};
	/* the first HANDSHAKES copies each wait until the reader has seen them,
	 * so that it reads while the session publishes; then free running */
	enum { PUBLISHES = 300, HANDSHAKES = 50 };
	for (int i = 0; i < PUBLISHES; i++) {
		gen_step(&s, (uint32_t)(i & 1), &seq[i & 1], &t[i & 1]);
		assert_int_equal(live_publish(s.live, b), 0);
		if (i < HANDSHAKES)
			assert_true(reader_reached(&rd, (uint64_t)i + 1));
	}
	live_board_close(b);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_false(rd.inconsistent);
	assert_true(rd.generations >= HANDSHAKES && rd.generations <= PUBLISHES);
	assert_int_equal(rd.last, PUBLISHES); /* the reader's last look came after the last publish */
	const struct live_view *v = live_board_acquire(b);
	assert_int_equal(v->generation, PUBLISHES);
	assert_int_equal(v->job.records_total, s.records);
	assert_int_equal(v->nranks, 3);
	assert_int_equal(v->ranks[0].rank, 0);
	assert_int_equal(v->ranks[1].rank, 1);
	assert_int_equal(v->ranks[2].rank, -1);
	assert_int_equal(v->ranks[2].source, 9);
	assert_int_equal(v->ranks[2].records, 1);
	assert_int_equal(v->ranks[0].collectives, PUBLISHES / 2 * 9);
	assert_int_equal(v->ranks[1].collectives, PUBLISHES / 2 * 9);
	live_board_release(b, v);
	live_board_free(b);
	pthread_cond_destroy(&rd.cv);
	pthread_mutex_destroy(&rd.mu);
	session_close(&s);
}

/* ---- memory over a long job -------------------------------------------- */

static void test_memory_bounded(void **state)
{
	(void)state;
	enum { STEPS = 200000 };
	struct session s;
	session_open(&s);
	gen_open(&s, 0);
	uint64_t seq = 0, t = 10000;
	for (int i = 0; i < STEPS; i++)
		gen_step(&s, 0, &seq, &t);
	struct analysis_result *r;
	assert_int_equal(analyzer_snapshot(s.a, &r), 0);
	assert_true(r->steps_analyzed > STEPS - 100);
	assert_int_equal(r->per_step.allgathers, 5);
	analysis_result_free(r);
	/* the role window (4096 events) and a few steps, not 1.8 M records */
	assert_true(analyzer_pending_max(s.a) < 8192);
	assert_true(s.steps_reported > STEPS - 100);
	assert_true(s.memory_at_window > 0);
	assert_int_equal(live_memory(s.live), s.memory_at_window);
	live_board_t *b;
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(live_publish(s.live, b), 0);
	const struct live_view *v = live_board_acquire(b);
	assert_int_equal(v->job.records_total, s.records);
	assert_int_equal(v->ranks[0].totals.steps + v->ranks[0].totals.steps_excluded, s.steps_reported);
	assert_int_equal(v->ranks[0].nwindow, LIVE_WINDOW);
	assert_int_equal(v->ranks[0].comms[0].last_seq, seq);
	live_board_release(b, v);
	live_board_free(b);
	session_close(&s);
}

/* ---- collectives in flight: entered and left per communicator ------------ */

static void feed_comm(struct session *s, uint32_t src, uint64_t handle, uint64_t id_hash, int32_t rank)
{
	struct fss_rec_comm cm;
	record_init(&cm, FSS_REC_COMM, sizeof cm, src);
	cm.comm = handle;
	cm.id_hash = id_hash;
	cm.nranks = 2;
	cm.rank = rank;
	cm.device = cm.color = cm.key = -1;
	cm.event = FSS_COMM_INIT;
	cm.enter_ns = 2000;
	cm.exit_ns = 3000;
	assert_int_equal(sources_feed(s->sources, &cm.head), 0);
}

static void feed_enter(struct session *s, uint32_t src, uint64_t handle, uint64_t seq, uint16_t kind)
{
	struct fss_rec_enter e;
	record_init(&e, FSS_REC_ENTER, sizeof e, src);
	e.seq = seq;
	e.comm = kind == FSS_ENTER_COLLECTIVE ? handle : 0;
	e.count = 10;
	e.enter_ns = 5000 + seq * 100;
	e.peer = -1;
	e.kind = kind;
	e.op = kind == FSS_ENTER_COLLECTIVE ? FSS_OP_ALLGATHER : 0;
	e.dtype = FSS_DTYPE_FLOAT32;
	e.redop = FSS_REDOP_NONE;
	e.path = FSS_PATH_SYNTHETIC;
	assert_int_equal(sources_feed(s->sources, &e.head), 0);
}

static void feed_coll(struct session *s, uint32_t src, uint64_t handle, uint64_t seq)
{
	struct fss_rec_collective c;
	record_init(&c, FSS_REC_COLLECTIVE, sizeof c, src);
	c.seq = seq;
	c.comm = handle;
	c.count = 10;
	c.dtype = FSS_DTYPE_FLOAT32;
	c.bytes = 40;
	c.op = FSS_OP_ALLGATHER;
	c.peer = -1;
	c.path = FSS_PATH_SYNTHETIC;
	c.enter_ns = 5000 + seq * 100;
	c.exit_ns = c.enter_ns + 50;
	assert_int_equal(sources_feed(s->sources, &c.head), 0);
}

static const struct live_comm *view_comm(const struct live_view *v, uint32_t source, uint64_t id_hash)
{
	const struct live_rank *r = view_rank(v, source);
	assert_non_null(r);
	for (size_t i = 0; i < r->ncomms; i++)
		if (r->comms[i].id_hash == id_hash)
			return &r->comms[i];
	fail_msg("source %u has no communicator %llx", source, (unsigned long long)id_hash);
	return NULL;
}

/*
 * Source 0 (enter records) issues on communicators A and B: A#1, B#1, A#2,
 * a stream sync, a group of A#3 and A#4 (both entered, then both return),
 * A#5 entered and never returned. Source 1 (no enter records) issues A#1,
 * A#2 and B#1 as collective records only. The numbers are per
 * communicator, from 1, in issue order, whatever the per-source seq: the
 * collectives entered and left there, counted.
 */
static void test_entered_left_per_comm(void **state)
{
	(void)state;
	struct session s;
	session_open(&s);
	gen_open_features(&s, 0, FSS_FEATURE_NCCL | FSS_FEATURE_ENTER); /* its comm 0x1000 stays unused */
	gen_open(&s, 1);
	feed_comm(&s, 0, 0xa0, 0xaaaa, 0);
	feed_comm(&s, 0, 0xb0, 0xbbbb, 1);
	feed_comm(&s, 1, 0xa1, 0xaaaa, 1);
	feed_comm(&s, 1, 0xb1, 0xbbbb, 0);

	feed_enter(&s, 0, 0xa0, 1, FSS_ENTER_COLLECTIVE);
	feed_coll(&s, 0, 0xa0, 1);
	feed_enter(&s, 0, 0xb0, 2, FSS_ENTER_COLLECTIVE);
	feed_coll(&s, 0, 0xb0, 2);
	feed_enter(&s, 0, 0xa0, 3, FSS_ENTER_COLLECTIVE);
	feed_coll(&s, 0, 0xa0, 3);
	feed_enter(&s, 0, 0, 3, FSS_ENTER_STREAM_SYNC); /* not a collective: numbers nothing */
	feed_enter(&s, 0, 0xa0, 4, FSS_ENTER_COLLECTIVE);
	feed_enter(&s, 0, 0xa0, 5, FSS_ENTER_COLLECTIVE);
	assert_true(live_in_flight(s.live)); /* inside the group's calls */
	feed_coll(&s, 0, 0xa0, 4);
	feed_coll(&s, 0, 0xa0, 5);
	feed_enter(&s, 0, 0xa0, 6, FSS_ENTER_COLLECTIVE);

	feed_coll(&s, 1, 0xa1, 1);
	feed_coll(&s, 1, 0xa1, 2);
	feed_coll(&s, 1, 0xb1, 3);

	live_board_t *b;
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(live_publish(s.live, b), 0);
	const struct live_view *v = live_board_acquire(b);
	const struct live_comm *c = view_comm(v, 0, 0xaaaa);
	assert_int_equal(c->entered, 5); /* A#1..A#5: source seqs 1, 3, 4, 5, 6 */
	assert_int_equal(c->left, 4);
	assert_int_equal(c->rank, 0);
	assert_int_equal(c->collectives, 4);
	c = view_comm(v, 0, 0xbbbb);
	assert_int_equal(c->entered, 1);
	assert_int_equal(c->left, 1);
	assert_int_equal(c->rank, 1);
	c = view_comm(v, 1, 0xaaaa);
	assert_int_equal(c->entered, 2);
	assert_int_equal(c->left, 2);
	c = view_comm(v, 1, 0xbbbb);
	assert_int_equal(c->entered, 1);
	assert_int_equal(c->left, 1);
	live_board_release(b, v);
	/* source 0 is still inside A#5 */
	assert_true(live_in_flight(s.live));
	feed_coll(&s, 0, 0xa0, 6);
	assert_false(live_in_flight(s.live));
	assert_int_equal(live_publish(s.live, b), 0);
	v = live_board_acquire(b);
	assert_int_equal(view_comm(v, 0, 0xaaaa)->left, 5);
	live_board_release(b, v);
	/* a collective record whose enter record was lost: never more out than in */
	feed_coll(&s, 0, 0xb0, 9);
	assert_int_equal(live_publish(s.live, b), 0);
	v = live_board_acquire(b);
	assert_int_equal(view_comm(v, 0, 0xbbbb)->entered, 2);
	assert_int_equal(view_comm(v, 0, 0xbbbb)->left, 2);
	live_board_release(b, v);
	live_board_free(b);
	session_close(&s);
}

/* The diagnosis' calls in flight are held as they were given. */
static void test_flight_in_diagnosis(void **state)
{
	(void)state;
	live_t *l;
	struct analysis_result *r = calloc(1, sizeof *r);
	assert_non_null(r);
	assert_int_equal(live_new(&l), 0);
	r->flight.timeout_ns = 1000000000;
	r->flight.nhangs = 1;
	r->flight.hangs_total = 1;
	r->flight.hangs[0].comm_id = 0xaaaa;
	r->flight.hangs[0].comm_seq = 57;
	r->flight.hangs[0].nmissing = 1;
	r->flight.hangs[0].missing[0].rank = 1;
	live_set_diagnosis(l, r, NULL, 0);
	live_board_t *b;
	assert_int_equal(live_board_new(&b), 0);
	assert_int_equal(live_publish(l, b), 0);
	const struct live_view *v = live_board_acquire(b);
	assert_int_equal(v->job.flight.nhangs, 1);
	assert_int_equal(v->job.flight.hangs[0].comm_seq, 57);
	assert_int_equal(v->job.flight.hangs[0].missing[0].rank, 1);
	live_board_release(b, v);
	/* the next diagnosis without it clears it */
	memset(&r->flight, 0, sizeof r->flight);
	live_set_diagnosis(l, r, NULL, 0);
	assert_int_equal(live_publish(l, b), 0);
	v = live_board_acquire(b);
	assert_int_equal(v->job.flight.nhangs, 0);
	live_board_release(b, v);
	live_board_free(b);
	live_free(l);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_live_follows_the_steps),
		cmocka_unit_test(test_snapshot),
		cmocka_unit_test(test_board_reader),
		cmocka_unit_test(test_memory_bounded),
		cmocka_unit_test(test_entered_left_per_comm),
		cmocka_unit_test(test_flight_in_diagnosis),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
