/*
 * analysis_phases_test.c - forward, backward and micro-batches from the FSDP
 * group's gathers and reduce-scatters (collector/phases.h), on the streams
 * of docs/patterns.md.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collector/analysis.h"
#include "collector/phases.h"
#include "common/record.h"

#define MAXEV 4096

struct stream {
	struct phases_event ev[MAXEV];
	size_t n;
};

static void ag(struct stream *s, uint64_t elements, int32_t nranks)
{
	assert_true(s->n < MAXEV);
	s->ev[s->n++] = (struct phases_event){elements, elements * 2, nranks, FSS_OP_ALLGATHER, FSS_DTYPE_BFLOAT16, {0}};
}

static void rs(struct stream *s, uint64_t elements)
{
	assert_true(s->n < MAXEV);
	s->ev[s->n++] = (struct phases_event){elements, elements * 4, 4, FSS_OP_REDUCESCATTER, FSS_DTYPE_FLOAT32, {0}};
}

/* Sizes of a model: unit 0 the root, units 1..L blocks (all alike). */
#define ROOT 5000u
#define BLOCK 700u

/* One FSDP2 micro-batch, root + L blocks, reshard true (root kept),
 * backward prefetch 1: the next unit's gather is issued before the current
 * unit's reduce-scatter. sync: reduce-scatter. recompute: every block is
 * gathered once more for an activation-checkpoint recomputation. */
static void microbatch(struct stream *s, int L, int sync, int reshard, int recompute, int32_t regather_ranks)
{
	ag(s, ROOT, 4);
	for (int l = 0; l < L; l++)
		ag(s, BLOCK, 4);
	for (int l = L; l-- > 0;) {
		if (recompute)
			ag(s, BLOCK, regather_ranks);
		if (reshard)
			ag(s, BLOCK, regather_ranks);
		if (sync)
			rs(s, BLOCK);
	}
	if (sync)
		rs(s, ROOT);
}

static struct phases_result parse(const struct stream *s, struct phases_gather *g)
{
	struct phases_result r;
	assert_int_equal(phases_parse(s->ev, s->n, g, &r), 0);
	return r;
}

static void test_one_step(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	microbatch(s, 6, 1, 1, 0, 4);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 7);
	assert_int_equal(r.cycles, 1);
	assert_int_equal(r.sync_cycles, 1);
	assert_int_equal(r.forward_allgathers, 7);
	assert_int_equal(r.backward_allgathers, 6);
	assert_int_equal(r.recompute_allgathers, 0);
	/* the forward gathers units 0..6 in order, backward mirrors 6..1 */
	for (int i = 0; i < 7; i++) {
		assert_int_equal(g[i].phase, ANALYSIS_PHASE_FORWARD);
		assert_int_equal(g[i].unit, i);
	}
	for (int i = 7; i < 13; i++) {
		assert_int_equal(g[i].phase, ANALYSIS_PHASE_BACKWARD);
		assert_int_equal(g[i].unit, 13 - i);
		assert_int_equal(g[i].cycle, 0);
	}
	free(s);
	free(g);
}

/* Gradient accumulation: four micro-batches; reducing every one (FSDP2's
 * default) or only the last (set_requires_gradient_sync(False)). Counting
 * ReduceScatters would make the first 28 gathers "forward" in the first case
 * and 7 in the second; the structure says 4 x (7 + 6) both times. */
static void test_accumulation(void **state)
{
	(void)state;
	for (int sync_last = 0; sync_last <= 1; sync_last++) {
		struct stream *s = calloc(1, sizeof *s);
		struct phases_gather *g = calloc(MAXEV, sizeof *g);
		for (int k = 0; k < 4; k++)
			microbatch(s, 6, !sync_last || k == 3, 1, 0, 4);
		struct phases_result r = parse(s, g);
		assert_int_equal(r.status, PHASES_OK);
		assert_int_equal(r.units, 7);
		assert_int_equal(r.cycles, 4);
		assert_int_equal(r.sync_cycles, sync_last ? 1 : 4);
		assert_int_equal(r.forward_only, 0);
		assert_int_equal(r.backward_allgathers, 6);
		uint32_t fwd = 0, bwd = 0;
		for (size_t i = 0; i < 52; i++) {
			fwd += g[i].phase == ANALYSIS_PHASE_FORWARD;
			bwd += g[i].phase == ANALYSIS_PHASE_BACKWARD;
			assert_int_equal(g[i].cycle, (int32_t)(i / 13));
		}
		assert_int_equal(fwd, 28);
		assert_int_equal(bwd, 24);
		free(s);
		free(g);
	}
}

/* fsdp_ref / FSDP2 per-Linear: the block's rest unit is gathered before
 * its Linears in backward (its pre-backward runs first), but reduced after
 * them: the reduce-scatters mirror the forward exactly, the backward
 * gathers only per size. */
static void test_per_linear_order(void **state)
{
	(void)state;
	static const uint64_t lin[8] = {64, 4096, 1024, 1024, 4096, 12288, 12288, 12288}; /* rest q k v o g u d */
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	const int L = 3;
	ag(s, ROOT, 4);
	for (int l = 0; l < L; l++)
		for (int j = 0; j < 8; j++)
			ag(s, lin[j], 4);
	for (int l = L; l-- > 0;) {
		ag(s, lin[0], 4); /* rest first */
		for (int j = 8; j-- > 1;) {
			ag(s, lin[j], 4);
			rs(s, lin[j]);
		}
		rs(s, lin[0]);
	}
	rs(s, ROOT);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 1 + 8 * L);
	assert_int_equal(r.backward_allgathers, 8 * L);
	/* the last block's rest unit (forward unit 1 + 8 (L-1)) opens the backward */
	assert_int_equal(g[1 + 8 * L].unit, 1 + 8 * (L - 1));
	free(s);
	free(g);
}

/* FSDP1 with checkpoint wrappers around its units: the recomputation gathers
 * every resharded unit once more (3 gathers per unit per step). */
static void test_recompute(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	microbatch(s, 6, 1, 1, 1, 4);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 7);
	assert_int_equal(r.backward_allgathers, 12);
	assert_int_equal(r.recompute_allgathers, 6);
	free(s);
	free(g);
}

/* reshard_after_forward = 2: the backward gathers run on a 2-rank group;
 * they gather the same elements. */
static void test_group_regather(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	microbatch(s, 4, 1, 1, 0, 2);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.backward_allgathers, 4);
	free(s);
	free(g);
}

/* An eval forward inside the step (eval every step): a cycle with no
 * backward and no reduction, apart from the training cycles. */
static void test_forward_only_cycle(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	microbatch(s, 6, 1, 1, 0, 4);
	ag(s, ROOT, 4);
	for (int l = 0; l < 6; l++)
		ag(s, BLOCK, 4);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.cycles, 2);
	assert_int_equal(r.forward_only, 1);
	assert_int_equal(r.backward_allgathers, 6);
	free(s);
	free(g);
}

/* Retained units and accumulation without sync: cycles have no backward
 * gathers, and those without reductions are still micro-batches (not eval
 * forwards), since the synchronising cycle has no backward gathers either. */
static void test_keep_without_sync(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	for (int k = 0; k < 3; k++)
		microbatch(s, 5, k == 2, 0, 0, 4);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.cycles, 3);
	assert_int_equal(r.forward_only, 0);
	assert_int_equal(r.sync_cycles, 1);
	free(s);
	free(g);
}

/* Units all alike and no root gather: one reduce-scatter's mirror (a
 * single unit) would parse the gathers as one-unit cycles; the
 * reduce-scatters of a cycle must be all its units, so the parse takes the
 * whole group of three. */
static void test_alike_units(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	for (int k = 0; k < 2; k++) {
		for (int u = 0; u < 3; u++)
			ag(s, BLOCK, 4);
		ag(s, BLOCK, 4);
		rs(s, BLOCK);
		ag(s, BLOCK, 4);
		rs(s, BLOCK);
		rs(s, BLOCK);
	}
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 3);
	assert_int_equal(r.cycles, 2);
	assert_int_equal(r.backward_allgathers, 2);
	free(s);
	free(g);
}

/* DeepSpeed ZeRO-3: fetch buckets that cut across modules, fewer in
 * backward, one reduce bucket: its reduce-scatter mirrors no gather. */
static void test_buckets_do_not_mirror(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	static const uint64_t fwd[] = {3000, 2600, 2600, 2600, 2600, 1800}, bwd[] = {2600, 2600, 3000};
	for (size_t i = 0; i < 6; i++)
		ag(s, fwd[i], 4);
	for (size_t i = 0; i < 3; i++)
		ag(s, bwd[i], 4);
	rs(s, 15200);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_NO_MIRROR);
	assert_int_equal(g[0].phase, 0); /* nothing claimed */
	free(s);
	free(g);
}

static void test_no_reduction(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	microbatch(s, 4, 0, 1, 0, 4);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_NO_REDUCTION);
	free(s);
	free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_step),
		cmocka_unit_test(test_accumulation),
		cmocka_unit_test(test_per_linear_order),
		cmocka_unit_test(test_recompute),
		cmocka_unit_test(test_group_regather),
		cmocka_unit_test(test_forward_only_cycle),
		cmocka_unit_test(test_keep_without_sync),
		cmocka_unit_test(test_alike_units),
		cmocka_unit_test(test_buckets_do_not_mirror),
		cmocka_unit_test(test_no_reduction),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
