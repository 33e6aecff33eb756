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

/* A gather of `elements` (count x nranks) in bf16: each rank sends its
 * count, bytes = count x 2. */
static void ag(struct stream *s, uint64_t elements, int32_t nranks)
{
	assert_true(s->n < MAXEV);
	s->ev[s->n++] =
	    (struct phases_event){elements, elements / (uint64_t)nranks * 2, nranks, FSS_OP_ALLGATHER, FSS_DTYPE_BFLOAT16, {0}};
}

/* A gather in another dtype: bytes = count x its size. */
static void ag_dtype(struct stream *s, uint64_t elements, int32_t nranks, uint8_t dtype)
{
	assert_true(s->n < MAXEV);
	s->ev[s->n++] = (struct phases_event){elements, elements / (uint64_t)nranks * record_dtype_bytes(dtype), nranks,
					      FSS_OP_ALLGATHER, dtype, {0}};
}

/* A ReduceScatter of `elements` fp32 gradients over 4 ranks. */
static void rs(struct stream *s, uint64_t elements)
{
	assert_true(s->n < MAXEV);
	s->ev[s->n++] = (struct phases_event){elements, elements / 4 * 4, 4, FSS_OP_REDUCESCATTER, FSS_DTYPE_FLOAT32, {0}};
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
	/* each block twice back to back, the last first: the second is the
	 * recomputation's pair */
	for (int i = 7; i < 19; i++) {
		assert_int_equal(g[i].unit, 6 - (i - 7) / 2);
		assert_int_equal(g[i].recompute, (i - 7) % 2);
	}
	free(s);
	free(g);
}

/* fsdp_ref's FSDP1 checkpoint wrappers with BACKWARD_PRE: a block's
 * recomputation gather is issued before the next block's reduction, its
 * backward gather after it, so the pairs straddle the reductions. A
 * prefix one longer (F + the first recomputation gather) would read fewer
 * recomputations; the unit it adds is the one no reduction matches. */
static void test_recompute_across_reductions(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	ag(s, ROOT, 4);
	for (int l = 0; l < 6; l++)
		ag(s, BLOCK, 4);
	ag(s, BLOCK, 4); /* block 6: recomputation, backward */
	ag(s, BLOCK, 4);
	for (int l = 5; l >= 1; l--) {
		ag(s, BLOCK, 4); /* block l's recomputation */
		rs(s, BLOCK);    /* block l + 1 */
		ag(s, BLOCK, 4); /* block l's backward */
	}
	rs(s, BLOCK);
	rs(s, ROOT);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 7);
	assert_int_equal(r.backward_allgathers, 12);
	assert_int_equal(r.recompute_allgathers, 6);
	assert_int_equal(r.matched_reductions, 7);
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
 * backward, one reduce bucket. The gathers would parse (partial reductions
 * are allowed), but the one reduce bucket is larger than every unit: no
 * FSDP unit's reduction (phases_reductions_fit), so no parse; fill_verdict
 * calls it bucketed. */
static void test_buckets_do_not_fit(void **state)
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
	assert_int_equal(r.status, PHASES_NO_PARSE);
	assert_int_equal(r.reductions_fit, 0);
	for (size_t i = 0; i < 9; i++)
		assert_int_equal(g[i].phase, 0); /* nothing claimed */
	/* a bucket of one unit's size fits; the same parse with the bucket does not */
	s->ev[s->n - 1].elements = 3000;
	r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(phases_reductions_fit(s->ev, s->n, g, &r), 1);
	s->ev[s->n - 1].elements = 15200;
	assert_int_equal(phases_reductions_fit(s->ev, s->n, g, &r), 0);
	free(s);
	free(g);
}

/* No reduction at all (every parameter frozen, or an eval-only trace): the
 * units are still S, the phases are the gathers' reading alone. */
static void test_no_reduction(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	microbatch(s, 4, 0, 1, 0, 4);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_NO_REDUCTION);
	assert_int_equal(r.units, 5);
	assert_int_equal(r.cycles, 1);
	assert_int_equal(r.training_cycles, 1);
	assert_int_equal(r.backward_allgathers, 4);
	for (int i = 0; i < 5; i++)
		assert_int_equal(g[i].phase, ANALYSIS_PHASE_FORWARD);
	for (int i = 5; i < 9; i++) {
		assert_int_equal(g[i].phase, ANALYSIS_PHASE_BACKWARD);
		assert_int_equal(g[i].unit, 9 - i);
	}
	free(s);
	free(g);
}

/* Count the gathers of each phase, and check that every forward gather of
 * cycle c gathers the unit it should. */
static void count_phases(const struct phases_gather *g, size_t nag, uint32_t *fwd, uint32_t *bwd, uint32_t *other)
{
	*fwd = *bwd = *other = 0;
	for (size_t i = 0; i < nag; i++) {
		*fwd += g[i].phase == ANALYSIS_PHASE_FORWARD;
		*bwd += g[i].phase == ANALYSIS_PHASE_BACKWARD;
		*other += g[i].step_gather;
	}
}

/* Parameter-efficient fine-tuning (LoRA adapters in every block, the root
 * frozen): each block reduces its adapters only (a small fraction of its
 * gather), the root nothing. The units and phases hold; no reduction
 * matches a unit. */
static void test_partial_reductions(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	ag(s, ROOT, 4);
	for (int l = 0; l < 6; l++)
		ag(s, BLOCK, 4);
	for (int l = 6; l-- > 0;) {
		ag(s, BLOCK, 4);
		rs(s, 32);
	}
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 7);
	assert_int_equal(r.cycles, 1);
	assert_int_equal(r.backward_allgathers, 6);
	assert_int_equal(r.reductions, 6);
	assert_int_equal(r.matched_reductions, 0);
	assert_int_equal(r.unreduced_units, 7);
	assert_int_equal(phases_reductions_fit(s->ev, s->n, g, &r), 1);
	for (int i = 7; i < 13; i++)
		assert_int_equal(g[i].unit, 13 - i);
	free(s);
	free(g);
}

/* Frozen blocks and a frozen root: the first three blocks and the root are
 * never reduced; the others' reductions match their units, mirrored. */
static void test_unreduced_units(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	ag(s, ROOT, 4);
	for (int l = 0; l < 6; l++)
		ag(s, BLOCK, 4);
	for (int l = 6; l-- > 0;) {
		ag(s, BLOCK, 4);
		if (l >= 3)
			rs(s, BLOCK);
	}
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 7);
	assert_int_equal(r.backward_allgathers, 6);
	assert_int_equal(r.matched_reductions, 3);
	assert_int_equal(r.unreduced_units, 4);
	assert_int_equal(r.mirrored, 1);
	int32_t rs_unit[64];
	int mirrored = 0;
	assert_int_equal(phases_match_reductions(s->ev, s->n, g, 0, r.units, rs_unit, &mirrored), 3);
	/* the three reductions took blocks 6, 5, 4 (forward units) */
	int32_t want[3] = {6, 5, 4}, k = 0;
	for (size_t i = 0; i < s->n; i++)
		if (s->ev[i].op == FSS_OP_REDUCESCATTER)
			assert_int_equal(rs_unit[i], want[k++]);
	free(s);
	free(g);
}

/* FSDP2's final callback reduces the root before the first block: an order
 * that is not the mirror; every reduction still matches its unit. */
static void test_root_first(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	ag(s, ROOT, 4);
	for (int l = 0; l < 6; l++)
		ag(s, BLOCK + 4 * (uint64_t)l, 4); /* blocks told apart by size */
	for (int l = 6; l-- > 1;) {
		ag(s, BLOCK + 4 * (uint64_t)l, 4);
		rs(s, BLOCK + 4 * (uint64_t)l);
	}
	ag(s, BLOCK, 4);
	rs(s, ROOT);
	rs(s, BLOCK);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 7);
	assert_int_equal(r.cycles, 1);
	assert_int_equal(r.matched_reductions, 7);
	assert_int_equal(r.unreduced_units, 0);
	assert_int_equal(r.mirrored, 0);
	free(s);
	free(g);
}

/* Interleaved pipeline stages: two chunks on this rank, each its own FSDP
 * units kept from forward to backward (reshard off under PP); chunk 1's
 * units are gathered later in the schedule, and each chunk reduces its
 * units in forward order after its last micro-batch, chunk 1 first. */
static void test_interleaved_chunks(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	ag(s, ROOT, 4); /* chunk 0: embeddings, two blocks */
	ag(s, BLOCK, 4);
	ag(s, BLOCK, 4);
	ag(s, BLOCK, 4); /* chunk 1: two blocks, norm + output */
	ag(s, BLOCK, 4);
	ag(s, 4800, 4);
	rs(s, BLOCK);
	rs(s, BLOCK);
	rs(s, 4800);
	rs(s, ROOT);
	rs(s, BLOCK);
	rs(s, BLOCK);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 6);
	assert_int_equal(r.cycles, 1);
	assert_int_equal(r.training_cycles, 1);
	assert_int_equal(r.backward_allgathers, 0);
	assert_int_equal(r.matched_reductions, 6);
	assert_int_equal(r.mirrored, 0);
	free(s);
	free(g);
}

/* Reductions deferred to the last of K micro-batches with the parameters
 * kept unsharded: micro-batches 2..K gather nothing, so the FSDP group shows
 * one forward and then every reduction: one cycle, whatever K. */
static void test_deferred_no_later_gathers(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	microbatch(s, 6, 1, 0, 0, 4);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 7);
	assert_int_equal(r.cycles, 1);
	assert_int_equal(r.sync_cycles, 1);
	assert_int_equal(r.backward_allgathers, 0);
	assert_int_equal(r.forward_only, 0);
	assert_int_equal(r.matched_reductions, 7);
	free(s);
	free(g);
}

/* Reductions deferred with the units kept unsharded between micro-batches
 * but resharded after forward (set_reshard_after_backward(False), the
 * blocks' reshard_after_forward True): the first micro-batch gathers every
 * unit, the later ones gather nothing in forward and the blocks again for
 * backward; the last reduces. Three rounds of re-gathers, three cycles;
 * with checkpoint-wrapper pairs the reductions interleave the first round. */
static void test_deferred_regather_rounds(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	ag(s, ROOT, 4);
	for (int l = 0; l < 4; l++)
		ag(s, BLOCK, 4);
	for (int k = 0; k < 3; k++)
		for (int l = 4; l-- > 0;) {
			ag(s, BLOCK, 4); /* the last round: each block's gather prefetched before the one
					    after it is reduced */
			if (k == 2 && l < 3)
				rs(s, BLOCK);
		}
	rs(s, BLOCK);
	rs(s, ROOT);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 5);
	assert_int_equal(r.cycles, 3);
	assert_int_equal(r.training_cycles, 3);
	assert_int_equal(r.sync_cycles, 1);
	assert_int_equal(r.backward_allgathers, 4);
	assert_int_equal(r.recompute_allgathers, 0);
	assert_int_equal(r.matched_reductions, 5);
	for (int i = 5; i < 17; i++) {
		assert_int_equal(g[i].cycle, (i - 5) / 4);
		assert_int_equal(g[i].unit, 4 - (i - 5) % 4);
	}
	free(s);
	free(g);
}

/* fsdp_ref's FSDP1 checkpoint wrappers with two blocks: the pairs of
 * re-gathers (b2 b2, b1 b1) look like two rounds, but the first block's
 * recomputation gather comes before the second block's reduction, and its
 * backward gather after it: one backward with recomputations, not two
 * micro-batches. */
static void test_recompute_two_blocks(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	ag(s, ROOT, 4);
	ag(s, BLOCK, 4);
	ag(s, BLOCK, 4);
	ag(s, BLOCK, 4); /* block 2: recomputation, backward */
	ag(s, BLOCK, 4);
	ag(s, BLOCK, 4); /* block 1's recomputation */
	rs(s, BLOCK);
	ag(s, BLOCK, 4); /* block 1's backward */
	rs(s, BLOCK);
	rs(s, ROOT);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 3);
	assert_int_equal(r.cycles, 1);
	assert_int_equal(r.backward_allgathers, 4);
	assert_int_equal(r.recompute_allgathers, 2);
	free(s);
	free(g);
}

/* TRL DPO: the frozen reference model (the same units, no_grad) runs its
 * forward, then the policy's; the trainer gathers its metrics (small fp32
 * AllGathers, one of a bf16 block's gathered bytes) on the same world
 * communicator; then the policy's backward. 14 forward gathers (two
 * passes), 6 backward, 8 per-step collectives; the first pass is
 * forward-only. */
static void test_two_models_and_metrics(void **state)
{
	(void)state;
	for (int metrics_between = 0; metrics_between <= 1; metrics_between++) {
		struct stream *s = calloc(1, sizeof *s);
		struct phases_gather *g = calloc(MAXEV, sizeof *g);
		ag(s, ROOT, 4);
		for (int l = 0; l < 6; l++)
			ag(s, BLOCK, 4);
		if (metrics_between)
			ag_dtype(s, 8, 4, FSS_DTYPE_FLOAT32);
		ag(s, ROOT, 4);
		for (int l = 0; l < 6; l++)
			ag(s, BLOCK, 4);
		for (int m = 0; m < 7; m++) /* rewards, log-probs, margins; one as large as a block */
			ag_dtype(s, m == 3 ? BLOCK / 2 : 8, 4, FSS_DTYPE_FLOAT32);
		for (int l = 6; l-- > 0;) {
			ag(s, BLOCK, 4);
			rs(s, BLOCK);
		}
		rs(s, ROOT);
		struct phases_result r = parse(s, g);
		assert_int_equal(r.status, PHASES_OK);
		assert_int_equal(r.units, 7);
		assert_int_equal(r.cycles, 2);
		assert_int_equal(r.forward_only, 1);
		assert_int_equal(r.training_cycles, 1);
		assert_int_equal(r.first_training, 1);
		assert_int_equal(r.step_gathers, 7 + metrics_between);
		assert_int_equal(r.backward_allgathers, 6);
		assert_int_equal(r.recompute_allgathers, 0);
		assert_int_equal(r.matched_reductions, 7);
		uint32_t fwd, bwd, other;
		count_phases(g, 7 + 7 + 7 + 6 + (size_t)metrics_between, &fwd, &bwd, &other);
		assert_int_equal(fwd, 14);
		assert_int_equal(bwd, 6);
		assert_int_equal(other, 7 + metrics_between);
		assert_int_equal(g[7 + metrics_between].cycle, 1); /* the policy's root */
		assert_int_equal(g[7 + metrics_between].unit, 0);
		free(s);
		free(g);
	}
}

/* Weight sync to an inference engine after the optimizer step: one fp32
 * AllGather per parameter, some of a bf16 unit's gathered bytes, on the
 * FSDP communicator: per-step collectives, never units. */
static void test_weight_sync(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	microbatch(s, 6, 1, 1, 0, 4);
	for (int p = 0; p < 20; p++)
		ag_dtype(s, p % 5 == 0 ? BLOCK / 2 : 64 + 4 * (uint64_t)p, 4, FSS_DTYPE_FLOAT32);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 7);
	assert_int_equal(r.cycles, 1);
	assert_int_equal(r.step_gathers, 20);
	assert_int_equal(r.backward_allgathers, 6);
	free(s);
	free(g);
}

/* The same weight sync where the step is cut to begin after the last
 * reduction: the fp32 gathers open the step, before the bf16 forward. S
 * begins where the floating dtype changes; the sync stays no unit. */
static void test_weight_sync_opens_step(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	for (int p = 0; p < 20; p++)
		ag_dtype(s, p % 5 == 0 ? BLOCK : 64 + 4 * (uint64_t)p, 4, FSS_DTYPE_FLOAT32);
	microbatch(s, 6, 1, 1, 0, 4);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 7);
	assert_int_equal(r.cycles, 1);
	assert_int_equal(r.step_gathers, 20);
	assert_int_equal(r.backward_allgathers, 6);
	assert_int_equal(r.matched_reductions, 7);
	for (int i = 0; i < 20; i++)
		assert_int_equal(g[i].step_gather, 1);
	assert_int_equal(g[20].unit, 0);
	assert_int_equal(g[20].phase, ANALYSIS_PHASE_FORWARD);
	free(s);
	free(g);
}

/* Ulysses with the sequence-parallel group the FSDP world: every layer's
 * forward all-gathers its position ids (int64) on the world, between the
 * blocks' gathers. No parameter is a wide integer: not a unit, and S runs
 * past them. */
static void test_integer_gathers(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	ag(s, ROOT, 4);
	for (int l = 0; l < 4; l++) {
		ag(s, BLOCK, 4);
		ag_dtype(s, 256, 4, FSS_DTYPE_INT64);
	}
	for (int l = 4; l-- > 0;) {
		ag(s, BLOCK, 4);
		rs(s, BLOCK);
	}
	rs(s, ROOT);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 5);
	assert_int_equal(r.step_gathers, 4);
	assert_int_equal(r.backward_allgathers, 4);
	for (int l = 0; l < 4; l++) {
		assert_int_equal(g[2 + 2 * l].step_gather, 1);
		assert_int_equal(g[1 + 2 * l].unit, 1 + l);
	}
	free(s);
	free(g);
}

/* Compiler bucketing (inductor's all-gather and reduce-scatter bucketing):
 * two blocks per gather and per reduction. The units are the buckets. */
static void test_compiler_buckets(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	ag(s, ROOT, 4);
	for (int b = 0; b < 3; b++)
		ag(s, 2 * BLOCK, 4);
	for (int b = 3; b-- > 0;) {
		ag(s, 2 * BLOCK, 4);
		rs(s, 2 * BLOCK);
	}
	rs(s, ROOT);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 4);
	assert_int_equal(r.backward_allgathers, 3);
	assert_int_equal(r.matched_reductions, 4);
	free(s);
	free(g);
}

/* torchao float8 training with the float8 all-gather: a block's float8
 * weights and bf16 norms travel as one uint8 gather counted in bytes (680
 * float8 + 20 bf16 parameters: 720 bytes); its ReduceScatter is fp32, 700
 * elements. A float8-only unit (NCCL >= 2.24) travels as float8e4m3, one
 * byte per parameter. Matched by bytes per parameter. */
static void test_float8(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	ag(s, ROOT, 4);
	for (int l = 0; l < 4; l++)
		ag_dtype(s, 720, 4, FSS_DTYPE_UINT8);
	ag_dtype(s, 1024, 4, FSS_DTYPE_FLOAT8E4M3); /* a float8-only unit, kept for backward */
	ag_dtype(s, 720, 4, FSS_DTYPE_UINT8);
	rs(s, 1024);
	for (int l = 4; l-- > 0;) {
		if (l > 0)
			ag_dtype(s, 720, 4, FSS_DTYPE_UINT8);
		rs(s, 700);
	}
	rs(s, ROOT);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 6);
	assert_int_equal(r.backward_allgathers, 4);
	assert_int_equal(r.matched_reductions, 6);
	assert_int_equal(r.unreduced_units, 0);
	assert_int_equal(r.mirrored, 1);
	assert_int_equal(phases_reductions_fit(s->ev, s->n, g, &r), 1);
	struct phases_event f8 = s->ev[1], red = {700, 700, 4, FSS_OP_REDUCESCATTER, FSS_DTYPE_FLOAT32, {0}};
	assert_int_equal(phases_reduces(&f8, &red), 1);
	red.elements = 300; /* would be more than two bytes per parameter */
	assert_int_equal(phases_reduces(&f8, &red), 0);
	free(s);
	free(g);
}

/* The eval forward between training micro-batches of the same units, and
 * two passes in a row at the start: S is one pass, never two. */
static void test_forward_passes_in_a_row(void **state)
{
	(void)state;
	struct stream *s = calloc(1, sizeof *s);
	struct phases_gather *g = calloc(MAXEV, sizeof *g);
	for (int k = 0; k < 2; k++) {
		ag(s, ROOT, 4);
		for (int l = 0; l < 4; l++)
			ag(s, BLOCK, 4);
	}
	microbatch(s, 4, 1, 1, 0, 4);
	struct phases_result r = parse(s, g);
	assert_int_equal(r.status, PHASES_OK);
	assert_int_equal(r.units, 5);
	assert_int_equal(r.cycles, 3);
	assert_int_equal(r.forward_only, 2);
	assert_int_equal(r.first_training, 2);
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
		cmocka_unit_test(test_recompute_across_reductions),
		cmocka_unit_test(test_group_regather),
		cmocka_unit_test(test_forward_only_cycle),
		cmocka_unit_test(test_keep_without_sync),
		cmocka_unit_test(test_alike_units),
		cmocka_unit_test(test_buckets_do_not_fit),
		cmocka_unit_test(test_no_reduction),
		cmocka_unit_test(test_partial_reductions),
		cmocka_unit_test(test_unreduced_units),
		cmocka_unit_test(test_root_first),
		cmocka_unit_test(test_interleaved_chunks),
		cmocka_unit_test(test_deferred_no_later_gathers),
		cmocka_unit_test(test_deferred_regather_rounds),
		cmocka_unit_test(test_recompute_two_blocks),
		cmocka_unit_test(test_two_models_and_metrics),
		cmocka_unit_test(test_weight_sync),
		cmocka_unit_test(test_weight_sync_opens_step),
		cmocka_unit_test(test_integer_gathers),
		cmocka_unit_test(test_compiler_buckets),
		cmocka_unit_test(test_float8),
		cmocka_unit_test(test_forward_passes_in_a_row),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
