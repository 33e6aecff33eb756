/*
 * viewer_roundtrip_test.c - the live field table end to end: a view
 * rendered as a snapshot (viewer_render), decoded back as top --connect
 * decodes it (top_viewer_decode) and rendered again gives the same line
 * byte for byte, and the same /metrics text (metrics_render), for views of
 * every shape: nulls of every rule (unknown figures before a diagnosis,
 * absent steps, no ranks, sentinel values), lists longer than the struct's
 * room or their counts, hostile texts, every name of every enumeration.
 * What the decoder cannot give back (a text cut at its array's end without
 * a NUL, bytes that are not UTF-8) the views here do not hold.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/live.h"
#include "collector/metrics.h"
#include "collector/source.h"
#include "collector/viewer.h"
#include "common/record.h"
#include "tui/feeds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed;

static uint64_t next(void)
{
	seed ^= seed << 13;
	seed ^= seed >> 7;
	seed ^= seed << 17;
	return seed;
}

static unsigned below(unsigned n)
{
	return (unsigned)(next() % n);
}

/* A figure: often 0 or small, sometimes a sentinel, never past JSON's integers. */
static uint64_t figure(void)
{
	switch (below(6)) {
	case 0:
	case 1:
		return 0;
	case 2:
		return below(100);
	case 3:
		return UINT32_MAX;
	default:
		return next() >> 2;
	}
}

static void text(char *s, size_t size)
{
	static const char *const samples[] = {"", "layers.3", "a\"b\\c\nd\te\x01", "h\xc3\xa9llo"};

	snprintf(s, size, "%s", samples[below(4)]);
}

static void fill_step(struct live_step *s)
{
	s->ordinal = (uint32_t)figure();
	s->excluded = below(4) == 0 ? (int)below(3) : 0;
	s->start_ns = figure();
	s->step_ns = below(3) ? figure() : 0;
	s->allgathers = (uint32_t)figure();
	s->microbatches = (uint32_t)figure();
	s->allgather_ns = figure();
	s->exposed_allgather_ns = figure();
	s->compute_wait_ns = figure();
	s->compute_ns = figure();
	s->exposed_comm_ns = figure();
}

static void fill_flight_rank(struct analysis_flight_rank *r)
{
	r->rank = (int32_t)below(8) - 1;
	r->source = below(8);
	r->pid = below(70000);
	r->since_ns = figure();
	r->last_seq = below(2) ? 0 : figure();
	r->last_op = (uint8_t)(1 + below(FSS_OP_MAX - 1));
	r->evidence = (uint8_t)below(4);
}

static void fill_signature(struct analysis_signature *s)
{
	s->op = (uint8_t)(1 + below(FSS_OP_MAX - 1));
	s->count = figure();
	s->dtype = below(3) ? (uint8_t)below(FSS_DTYPE_MAX) : FSS_DTYPE_UNKNOWN;
	s->root = (int32_t)below(4) - 1;
	s->redop = below(3) ? (uint8_t)below(5) : FSS_REDOP_NONE;
}

static void fill_flight(struct analysis_flight *f)
{
	f->timeout_ns = figure();
	f->now_realtime_ns = figure();
	f->sources_enter = below(3);
	f->sources_cupti = below(3);
	f->in_flight = below(5);
	f->nhangs = below(ANALYSIS_HANGS_MAX + 2);
	f->hangs_total = f->nhangs + below(3);
	f->nmismatches = below(ANALYSIS_MISMATCHES_MAX + 2);
	f->mismatches_total = f->nmismatches;
	f->mismatched_collectives = figure();
	for (int h = 0; h < ANALYSIS_HANGS_MAX; h++) {
		struct analysis_hang *x = &f->hangs[h];

		x->comm_id = next();
		x->comm_seq = figure();
		x->count = figure();
		x->waited_ns = figure();
		x->nranks = (int32_t)below(64);
		x->op = (uint8_t)(1 + below(FSS_OP_MAX - 1));
		x->dtype = below(3) ? (uint8_t)below(FSS_DTYPE_MAX) : FSS_DTYPE_UNKNOWN;
		x->nwaiting = below(ANALYSIS_FLIGHT_RANKS_MAX + 8);
		x->nmissing = below(ANALYSIS_FLIGHT_RANKS_MAX + 8);
		for (int k = 0; k < ANALYSIS_FLIGHT_RANKS_MAX; k++) {
			fill_flight_rank(&x->waiting[k]);
			fill_flight_rank(&x->missing[k]);
		}
	}
	for (int m = 0; m < ANALYSIS_MISMATCHES_MAX; m++) {
		struct analysis_mismatch *x = &f->mismatches[m];

		x->comm_id = next();
		x->comm_seq = figure();
		x->nranks = (int32_t)below(64);
		x->na = below(ANALYSIS_FLIGHT_RANKS_MAX + 8);
		x->nb = below(ANALYSIS_FLIGHT_RANKS_MAX + 8);
		x->others = below(4);
		fill_signature(&x->a);
		fill_signature(&x->b);
		for (int k = 0; k < ANALYSIS_FLIGHT_RANKS_MAX; k++) {
			x->a_ranks[k] = (int32_t)below(64);
			x->b_ranks[k] = (int32_t)below(64);
		}
	}
}

static void fill_job(struct live_job *j)
{
	static const int verdicts[] = {ANALYSIS_DIAGNOSED, ANALYSIS_BUCKETED, ANALYSIS_UNDECIDED};

	j->records_total = figure();
	j->records_dropped_total = figure();
	j->diagnoses = figure();
	j->diagnosed = below(3) ? 1 : 0;
	j->verdict = verdicts[below(3)];
	j->undecided_reason = (int)below(ANALYSIS_UNDECIDED_MAX);
	j->repeating_units = (uint32_t)figure();
	j->gathers_per_unit = (uint32_t)figure();
	j->allgathers_per_step = (uint32_t)figure();
	j->microbatches = (uint32_t)figure();
	j->reshard = (int)below(5);
	j->exposed_allgather_ns_per_step = figure();
	j->compute_wait_ns_per_step = figure();
	j->nfindings = below(LIVE_FINDINGS_MAX + 3);
	for (size_t i = 0; i < LIVE_FINDINGS_MAX; i++) {
		struct live_finding *f = &j->findings[i];

		snprintf(f->rule, sizeof(f->rule), "%s", below(2) ? "wrap-too-fine" : "exposed-allgather");
		f->severity = (int)below(3);
		text(f->message, sizeof(f->message));
		text(f->evidence, sizeof(f->evidence));
		text(f->fix, sizeof(f->fix));
	}
	j->ngathers = below(40);
	for (size_t i = 0; i < j->ngathers; i++) {
		j->gathers[i].unit = below(3) ? below(8) : UINT32_MAX;
		j->gathers[i].bytes = figure();
		j->gathers[i].exposed_ns = figure();
		text(j->gathers[i].name, sizeof(j->gathers[i].name));
	}
	if (j->diagnosed)
		fill_flight(&j->flight);
	j->sources_attached = below(3);
	j->exposure_source = (int)below(3);
}

static void fill_rank(struct live_rank *r)
{
	r->rank = (int32_t)below(6) - 1;
	r->source = below(6);
	r->pid = below(70000);
	r->ended = (int)below(3);
	r->records = figure();
	r->dropped = figure();
	r->collectives_missing = figure();
	r->collectives = figure();
	r->last_ns = figure();
	r->lateness_ns = (int64_t)below(20000) - 10000;
	if (below(3))
		fill_step(&r->last);
	r->totals.steps = below(3) ? figure() : 0;
	r->totals.steps_excluded = figure();
	r->totals.step_ns_sum = figure();
	r->totals.step_ns_min = figure();
	r->totals.step_ns_max = figure();
	r->totals.allgathers_sum = figure();
	r->totals.exposed_allgather_ns_sum = figure();
	r->totals.compute_wait_ns_sum = figure();
	r->totals.compute_ns_sum = figure();
	r->nwindow = below(LIVE_WINDOW + 4);
	for (size_t i = 0; i < LIVE_WINDOW; i++)
		fill_step(&r->window[i]);
	r->ncomms = below(LIVE_COMMS_MAX + 2);
	for (size_t i = 0; i < LIVE_COMMS_MAX; i++) {
		struct live_comm *c = &r->comms[i];

		c->id_hash = below(4) ? next() : (i ? r->comms[i - 1].id_hash : 0);
		c->nranks = below(64);
		c->rank = (int32_t)below(8) - 1;
		c->role = (uint8_t)below(ANALYSIS_ROLE_MAX);
		c->collectives = figure();
		c->last_seq = figure();
		c->entered = figure();
		c->left = figure();
	}
	r->nstrip = below(60);
	for (size_t i = 0; i < r->nstrip; i++) {
		struct live_event *e = &r->strip[i];

		e->start_ns = figure();
		e->end_ns = figure();
		e->op = (uint8_t)(1 + below(FSS_OP_MAX - 1));
		e->phase = (uint8_t)below(3);
		e->calls = (uint16_t)below(70000);
		e->unit = below(3) ? below(8) : UINT32_MAX;
		e->bytes = figure();
		e->exposed_ns = figure();
	}
	text(r->host, sizeof(r->host));
	text(r->command, sizeof(r->command));
	r->attached = (int)below(2);
	r->rank_from = (int32_t)below(SOURCE_RANK_GUESSED_ORDER + 1);
}

static struct live_view *make_view(void)
{
	struct live_view *v = calloc(1, sizeof(*v));

	assert_non_null(v);
	v->generation = 1 + below(1000);
	v->at_ns = figure();
	v->at_realtime_ns = figure();
	fill_job(&v->job);
	v->nranks = below(4);
	v->ranks = calloc(v->nranks ? v->nranks : 1, sizeof(*v->ranks));
	assert_non_null(v->ranks);
	for (size_t i = 0; i < v->nranks; i++)
		fill_rank(&v->ranks[i]);
	return v;
}

static void test_roundtrip(void **state)
{
	(void)state;
	for (int i = 0; i < 300; i++) {
		struct live_view *v, *back;
		char *json, *again, *text, *text_back, err[256];
		size_t len, len_again, tlen, tlen_back;

		seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		v = make_view();
		assert_int_equal(viewer_render(v, &json, &len), 0);
		if (top_viewer_decode(json, len - 1, &back, err, sizeof(err)) != 0)
			fail_msg("view %d does not decode: %s", i, err);
		assert_int_equal(viewer_render(back, &again, &len_again), 0);
		if (len != len_again || memcmp(json, again, len))
			fail_msg("view %d: the snapshot of the decoded view differs:\n%s%s", i, json, again);
		assert_int_equal(metrics_render(v, &text, &tlen), 0);
		assert_int_equal(metrics_render(back, &text_back, &tlen_back), 0);
		if (tlen != tlen_back || memcmp(text, text_back, tlen))
			fail_msg("view %d: /metrics of the decoded view differs:\n%s\n----\n%s", i, text, text_back);
		free(json);
		free(again);
		free(text);
		free(text_back);
		live_view_free(v);
		live_view_free(back);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
