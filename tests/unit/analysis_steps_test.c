/*
 * analysis_steps_test.c - period detection, rotation and streaming step
 * cuts on synthetic collective sequences (collector/steps.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* The period search and the rotation are steps.c's own (static): the test
 * builds that file in to reach them; the library's copy is not linked. */
#include "collector/steps.c"
#include "common/record.h"

#define AG FSS_OP_ALLGATHER
#define RS FSS_OP_REDUCESCATTER
#define AR FSS_OP_ALLREDUCE
#define BC FSS_OP_BROADCAST

struct seq {
	uint64_t sig[8192];
	uint8_t op[8192];
	uint64_t bytes[8192];
	uint64_t cls[8192]; /* 0: always read */
	size_t n;
};

static void add(struct seq *s, uint8_t op, uint64_t bytes)
{
	s->sig[s->n] = steps_signature(op, bytes, 1, 4);
	s->op[s->n] = op;
	s->bytes[s->n] = bytes;
	s->cls[s->n] = 0;
	s->n++;
}

/* An event compared by its class's sizes (a group of `calls` calls). */
static void add_class(struct seq *s, uint8_t op, uint64_t bytes, uint32_t calls, uint64_t cls)
{
	s->sig[s->n] = steps_signature(op, bytes, calls, 4);
	s->op[s->n] = op;
	s->bytes[s->n] = bytes;
	s->cls[s->n] = cls;
	s->n++;
}

/* One fsdp_ref-like step: root + L blocks, reshard true, prefetch 0
 * (backward gathers interleave with reduce-scatters), loss all-reduce. */
static size_t add_step(struct seq *s, int L, int prefetch)
{
	size_t n0 = s->n;
	add(s, AG, 5000);
	for (int l = 0; l < L; l++)
		add(s, AG, 700);
	if (prefetch) {
		for (int l = 0; l < L; l++)
			add(s, AG, 700);
		for (int l = 0; l < L; l++)
			add(s, RS, 700);
	} else {
		for (int l = 0; l < L; l++) {
			add(s, AG, 700);
			add(s, RS, 700);
		}
	}
	add(s, RS, 5000);
	add(s, AR, 8);
	return s->n - n0;
}

static void test_rotation(void **state)
{
	(void)state;
	/* a period read from the middle: ... RS RS AR | AG AG ... */
	uint8_t ops[] = {AG, RS, AG, RS, RS, AR, AG, AG, AG, AG};
	assert_int_equal(steps_rotation(ops, sizeof ops), 6);
	uint8_t fwd_only[] = {AR, AG, AG, AG, BC};
	assert_int_equal(steps_rotation(fwd_only, sizeof fwd_only), 1);
	uint8_t ddp[] = {AR, AR};
	assert_int_equal(steps_rotation(ddp, 2), 0);
}

static void test_period_and_cuts(void **state)
{
	(void)state;
	for (int prefetch = 0; prefetch <= 1; prefetch++) {
		for (int L = 1; L <= 12; L += 11) {
			struct seq *s = calloc(1, sizeof *s);
			size_t p = 0;
			for (int k = 0; k < 20; k++)
				p = add_step(s, L, prefetch);
			struct steps_period sp;
			assert_int_equal(steps_find_period(s->sig, s->op, s->n, 0, &sp), 1);
			assert_int_equal(sp.period, p);
			assert_int_equal(sp.first, 0);
			steps_cutter_t *c = steps_cutter_new(0);
			for (size_t i = 0; i < s->n; i++)
				assert_int_equal(steps_cutter_push(c, s->sig[i], s->op[i]), 0);
			struct steps_cut cut;
			uint64_t expect = 0;
			int regular = 0;
			while (steps_cutter_next(c, 1, &cut) == 1) {
				assert_int_equal(cut.first, expect);
				assert_int_equal(cut.kind, STEPS_REGULAR);
				assert_int_equal(cut.count, p);
				assert_int_equal(s->op[cut.first], AG);
				expect += cut.count;
				regular++;
			}
			assert_int_equal(regular, 20);
			steps_cutter_free(c);
			free(s);
		}
	}
}

/* Feed events one at a time, taking cuts as they come (as the analysis
 * does), with their classes and sizes; returns the cuts in order, and the
 * cutter when keep is given (else freed). */
static size_t stream_keep(const struct seq *s, struct steps_cut *cuts, size_t max, steps_cutter_t **keep)
{
	steps_cutter_t *c = steps_cutter_new(0);
	size_t n = 0;
	for (size_t i = 0; i <= s->n; i++) {
		int final = i == s->n;
		if (!final) {
			struct steps_event e = {.sig = s->sig[i], .bytes = s->bytes[i], .cls = s->cls[i], .op = s->op[i]};
			assert_int_equal(steps_cutter_push_event(c, &e), 0);
		}
		struct steps_cut cut;
		while (steps_cutter_next(c, final, &cut) == 1) {
			assert_true(n < max);
			cuts[n++] = cut;
		}
	}
	if (keep)
		*keep = c;
	else
		steps_cutter_free(c);
	/* cuts cover every event once, in order */
	uint64_t at = 0;
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(cuts[i].first, at);
		at += cuts[i].count;
	}
	assert_int_equal(at, s->n);
	return n;
}

static size_t stream(const struct seq *s, struct steps_cut *cuts, size_t max)
{
	return stream_keep(s, cuts, max, NULL);
}

static void test_warmup(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	/* set-up: a broadcast of the initial weights, a barrier all-reduce */
	add(s, BC, 1 << 20);
	add(s, AR, 4);
	/* step 0 differs: lazy init gathers in fp32 (other sizes) */
	add(s, AG, 10000);
	for (int l = 0; l < 4; l++)
		add(s, AG, 1400);
	for (int l = 0; l < 4; l++)
		add(s, RS, 700);
	add(s, RS, 5000);
	add(s, AR, 8);
	size_t p = 0;
	for (int k = 0; k < 30; k++)
		p = add_step(s, 4, 1);
	struct steps_cut cuts[64];
	size_t n = stream(s, cuts, 64);
	assert_int_equal(cuts[0].kind, STEPS_WARMUP);
	assert_int_equal(cuts[0].count, 2 + 11);
	assert_int_equal(cuts[0].steps, 1);
	int regular = 0;
	for (size_t i = 1; i < n; i++) {
		assert_int_equal(cuts[i].kind, STEPS_REGULAR);
		assert_int_equal(cuts[i].count, p);
		regular++;
	}
	assert_int_equal(regular, 30);
	free(s);
}

static void test_noise(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	size_t p = 0;
	for (int k = 0; k < 40; k++) {
		p = add_step(s, 6, 0);
		if (k == 17)
			add(s, BC, 12345); /* a checkpoint's broadcast after step 17 */
		if (k == 29)
			s->sig[s->n - 3] = steps_signature(RS, 701, 1, 4); /* a different size once */
	}
	struct steps_cut cuts[64];
	size_t n = stream(s, cuts, 64);
	int regular = 0, irregular = 0, stray = 0;
	for (size_t i = 0; i < n; i++) {
		if (cuts[i].kind == STEPS_REGULAR) {
			assert_int_equal(cuts[i].count, p);
			regular++;
		} else {
			assert_int_equal(cuts[i].kind, STEPS_IRREGULAR);
			irregular += cuts[i].steps;
			stray += cuts[i].steps == 0;
		}
	}
	/* step 29 differs; the broadcast between steps 17 and 18 is no step */
	assert_int_equal(regular, 39);
	assert_int_equal(irregular, 1);
	assert_int_equal(stray, 1);
	free(s);
}

static void test_starts_mid_step(void **state)
{
	(void)state;
	/* attach: the trace begins inside a step's backward */
	struct seq *full = calloc(1, sizeof *full), *s = calloc(1, sizeof *s);
	size_t p = 0;
	for (int k = 0; k < 25; k++)
		p = add_step(full, 3, 1);
	size_t skip = p / 2 + 1;
	memcpy(s->sig, full->sig + skip, (full->n - skip) * sizeof s->sig[0]);
	memcpy(s->op, full->op + skip, full->n - skip);
	s->n = full->n - skip;
	struct steps_cut cuts[64];
	size_t n = stream(s, cuts, 64);
	assert_int_equal(cuts[0].kind, STEPS_WARMUP);
	assert_int_equal(cuts[0].count, p - skip);
	for (size_t i = 1; i < n; i++) {
		assert_int_equal(cuts[i].kind, STEPS_REGULAR);
		assert_int_equal(s->op[cuts[i].first], AG);
	}
	assert_int_equal(n, 25);
	free(full);
	free(s);
}

/* One step of the attached fsdp_ref job (4 blocks, backward prefetch): the
 * root's gather and the blocks', two backward gathers prefetched ahead of
 * the reductions, the rest interleaved, the root's reduction, the loss. */
static size_t add_prefetch_step(struct seq *s, int with_gathers)
{
	size_t n0 = s->n;
	if (with_gathers) {
		add(s, AG, 2816);
		for (int l = 0; l < 6; l++)
			add(s, AG, 6272);
	}
	for (int l = 0; l < 4; l++) {
		add(s, RS, 12544);
		if (with_gathers && l < 2)
			add(s, AG, 6272);
	}
	add(s, RS, 5632);
	add(s, AR, 8);
	return s->n - n0;
}

static void test_attached_then_detached(void **state)
{
	(void)state;
	/* attach starts the trace inside a step's backward; letting go removes
	 * the AllGather probe before the others, so the trace ends in steps
	 * without gathers: one and two reductions (rank 0), or two (rank 2). The
	 * step is read where the sequence is steady, not from its last events:
	 * each regular step begins with the root's gather. */
	for (int tail = 0; tail < 2; tail++) {
		struct seq *full = calloc(1, sizeof *full), *s = calloc(1, sizeof *s);
		size_t p = 0;
		for (int k = 0; k < 62; k++)
			p = add_prefetch_step(full, 1);
		add_prefetch_step(full, 0);
		if (tail) {
			add_prefetch_step(full, 0);
		} else {
			add(full, RS, 12544);
			add(full, RS, 12544);
		}
		size_t skip = p - 8; /* 8 events of the first step: its backward's end */
		memcpy(s->sig, full->sig + skip, (full->n - skip) * sizeof s->sig[0]);
		memcpy(s->op, full->op + skip, full->n - skip);
		s->n = full->n - skip;
		struct steps_cut cuts[128];
		size_t n = stream(s, cuts, 128);
		assert_int_equal(cuts[0].kind, STEPS_WARMUP);
		assert_int_equal(cuts[0].count, 8);
		size_t regular = 0;
		for (size_t i = 1; i < n; i++) {
			if (cuts[i].kind != STEPS_REGULAR)
				continue;
			regular++;
			assert_int_equal(cuts[i].count, p);
			assert_int_equal(s->sig[cuts[i].first], steps_signature(AG, 2816, 1, 4));
		}
		assert_int_equal(regular, 61);
		free(full);
		free(s);
	}
}

static void test_no_period(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	uint64_t x = 88172645463325252ull;
	for (int i = 0; i < 500; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		add(s, (uint8_t)(1 + x % 3), x % 1000);
	}
	struct steps_period sp;
	assert_int_equal(steps_find_period(s->sig, s->op, s->n, 1, &sp), 0);
	struct steps_cut cuts[64];
	size_t n = stream(s, cuts, 64);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(cuts[i].kind, STEPS_IRREGULAR);
	free(s);
}

static void test_forward_blocks_are_no_step(void **state)
{
	(void)state;
	/* per-Linear wrap of 12 blocks: the forward alone is 97 gathers that
	 * repeat every 8; the step is 290 events */
	struct seq *s = calloc(1, sizeof *s);
	size_t p = 0;
	for (int step = 0; step < 25; step++) {
		size_t n0 = s->n;
		add(s, AG, 5000);
		for (int l = 0; l < 12; l++)
			for (int k = 0; k < 8; k++)
				add(s, AG, 100 + (uint64_t)k * (k % 3));
		for (int l = 0; l < 12 * 8; l++) {
			add(s, AG, 100);
			add(s, RS, 100);
		}
		add(s, AR, 8);
		p = s->n - n0;
	}
	/* a window of the forward alone looks periodic ... */
	struct steps_period sp;
	assert_int_equal(steps_find_period(s->sig, s->op, 64, 0, &sp), 1);
	assert_int_equal(sp.period, 8);
	/* ... so the cutter waits for a window of several steps */
	assert_int_equal(steps_find_period(s->sig, s->op, 6 * p, 0, &sp), 1);
	assert_int_equal(sp.period, p);
	struct steps_cut cuts[64];
	size_t n = stream(s, cuts, 64);
	assert_int_equal(n, 25);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(cuts[i].kind, STEPS_REGULAR);
		assert_int_equal(cuts[i].count, p);
	}
	free(s);
}

static void test_grouped_signature(void **state)
{
	(void)state;
	/* a coalesced group of 4 gathers is one event, not four */
	assert_true(steps_signature(AG, 4000, 4, 8) != steps_signature(AG, 4000, 1, 8));
	assert_true(steps_signature(AG, 4000, 1, 8) != steps_signature(AG, 4000, 1, 4));
	assert_true(steps_signature(AG, 4000, 1, 8) != steps_signature(RS, 4000, 1, 8));
	assert_true(steps_signature(AG, 4000, 1, 8) == steps_signature(AG, 4000, 1, 8));
}

static void test_short_trace(void **state)
{
	(void)state;
	/* two steps only: found at the end of the trace */
	struct seq *s = calloc(1, sizeof *s);
	size_t p = add_step(s, 2, 1);
	add_step(s, 2, 1);
	struct steps_cut cuts[8];
	size_t n = stream(s, cuts, 8);
	assert_int_equal(n, 2);
	assert_int_equal(cuts[0].kind, STEPS_REGULAR);
	assert_int_equal(cuts[1].count, p);
	free(s);
}

/* FSDP1's sync_module_states: a broadcast per unit on two communicators
 * before the first step, more of them than the steps recorded: set-up, not
 * part of any step (the completeness test once required them in a step). */
static void test_init_broadcasts(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	for (int u = 0; u < 66; u++)
		add(s, BC, 700 + (u % 33 == 0 ? 4300 : 0));
	size_t p = 0;
	for (int k = 0; k < 6; k++)
		p = add_step(s, 32, 1);
	struct steps_cut cuts[16];
	size_t n = stream(s, cuts, 16);
	assert_int_equal(cuts[0].kind, STEPS_WARMUP);
	assert_int_equal(cuts[0].count, 66);
	assert_int_equal(cuts[0].steps, 0); /* set-up holds no training step */
	for (size_t i = 1; i < n; i++) {
		assert_int_equal(cuts[i].kind, STEPS_REGULAR);
		assert_int_equal(cuts[i].count, p);
	}
	assert_int_equal(n, 7);
	free(s);
}

/* A forward-only eval pass (gathers and its loss all-reduce) after every
 * third step, a checkpoint's planning collectives after every fourth: no
 * shift of the sequence matches itself, the step is found between anchors,
 * and the interruptions stand for no step. */
static void test_interruptions(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	size_t p = 0;
	for (int k = 1; k <= 24; k++) {
		p = add_step(s, 6, 1);
		if (k % 3 == 0) {
			add(s, AG, 5000);
			for (int l = 0; l < 6; l++)
				add(s, AG, 700);
			add(s, AR, 8);
		}
		if (k % 4 == 0) {
			add(s, AG, 8);
			add(s, AG, 96);
			add(s, BC, 8);
			add(s, BC, 192);
			add(s, AR, 4);
		}
	}
	struct steps_cut cuts[64];
	size_t n = stream(s, cuts, 64);
	uint32_t regular = 0, irregular_steps = 0;
	for (size_t i = 0; i < n; i++) {
		if (cuts[i].kind == STEPS_REGULAR) {
			assert_int_equal(cuts[i].count, p);
			assert_int_equal(s->op[cuts[i].first], AG);
			regular++;
		} else {
			irregular_steps += cuts[i].steps;
		}
	}
	assert_true(regular >= 22); /* the first and the last may be cut by the anchors */
	assert_int_equal(regular + irregular_steps, 24);
	free(s);
}

/* Two micro-batches per step and the clip-norm all-reduce, with an eval pass
 * after every third step: the whole sequence repeats every three steps, but
 * the step is one optimizer step (two micro-batches), not three. */
static void test_recurring_interruption_is_no_step(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	size_t p = 0;
	for (int k = 1; k <= 18; k++) {
		size_t n0 = s->n;
		add_step(s, 4, 1);
		s->n--; /* no loss all-reduce after the first micro-batch */
		add_step(s, 4, 1);
		add(s, AR, 4); /* the gradient norm */
		p = s->n - n0;
		if (k % 3 == 0) {
			add(s, AG, 5000);
			for (int l = 0; l < 4; l++)
				add(s, AG, 700);
			add(s, AR, 8);
		}
	}
	struct steps_period sp;
	assert_int_equal(steps_find_period(s->sig, s->op, s->n, 1, &sp), 1);
	assert_int_equal(sp.period, p);
	free(s);
}

/* fsdp_ref --eval-every 3 --checkpoint-every 4 over 6 steps: too short for
 * the sequence to repeat, the step is found between anchors, though the
 * checkpoint's two broadcasts are most of the broadcasts the window has. */
static void test_short_trace_with_interruptions(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	size_t p = 0;
	for (int k = 1; k <= 6; k++) {
		p = add_step(s, 6, 0);
		if (k == 3) {
			add(s, AG, 5000);
			for (int l = 0; l < 6; l++)
				add(s, AG, 700);
			add(s, AR, 8);
		}
		if (k == 4) {
			add(s, AG, 8);
			add(s, AG, 45);
			add(s, BC, 8);
			add(s, BC, 90);
			add(s, AR, 4);
		}
	}
	struct steps_cut cuts[32];
	size_t n = stream(s, cuts, 32);
	uint32_t regular = 0, steps = 0;
	for (size_t i = 0; i < n; i++) {
		if (cuts[i].kind == STEPS_REGULAR) {
			assert_int_equal(cuts[i].count, p);
			regular++;
		}
		steps += cuts[i].kind == STEPS_REGULAR ? 1 : cuts[i].steps;
	}
	assert_true(regular >= 4);
	assert_int_equal(steps, 6);
	free(s);
}

/* verl's FSDP2 actor (stream_job rl, L blocks): a log-prob forward, the
 * training forward (root, embedding, blocks), the backward with the blocks'
 * reductions, then the root's and the embedding's, and the clip-norm
 * all-reduce. */
static size_t add_rl_step(struct seq *s, int L)
{
	size_t n0 = s->n;
	for (int pass = 0; pass < 2; pass++) {
		add(s, AG, 524544);
		add(s, AG, 524288);
		for (int l = 0; l < L; l++)
			add(s, AG, 852480);
	}
	add(s, AG, 524544);
	for (int l = 0; l < L; l++) {
		add(s, AG, 852480);
		add(s, RS, 1704960);
	}
	add(s, AG, 524288);
	add(s, RS, 1049088);
	add(s, RS, 1048576);
	add(s, AR, 4);
	return s->n - n0;
}

/* The weight sync to the rollout engine: one fp32 gather per parameter
 * (sizes no unit has), no reduction. */
static size_t add_weight_sync(struct seq *s, int L)
{
	size_t n0 = s->n;
	add(s, AG, 1048576);
	for (int l = 0; l < L; l++) {
		for (int k = 0; k < 4; k++)
			add(s, AG, 131072);
		for (int k = 0; k < 3; k++)
			add(s, AG, 393216);
		add(s, AG, 512);
		add(s, AG, 512);
	}
	add(s, AG, 512);
	add(s, AG, 1048576);
	return s->n - n0;
}

/* A weight sync before every second step: the sequence repeats every two
 * steps and a sync, the steps are the training steps and the syncs are
 * outside them (warm-up or irregular, standing for no step). */
static void test_weight_sync_outside_steps(void **state)
{
	(void)state;
	for (int every = 2; every <= 3; every++) {
		struct seq *s = calloc(1, sizeof *s);
		size_t p = 0, sync = 0;
		int syncs = 0;
		for (int k = 0; k < 6; k++) {
			if (k % every == 0) {
				sync = add_weight_sync(s, 4);
				syncs++;
			}
			p = add_rl_step(s, 4);
		}
		struct steps_cut cuts[32];
		size_t n = stream(s, cuts, 32);
		uint32_t regular = 0, other_steps = 0, outside = 0;
		for (size_t i = 0; i < n; i++) {
			if (cuts[i].kind == STEPS_REGULAR) {
				assert_int_equal(cuts[i].count, p);
				assert_int_equal(cuts[i].variant, 0);
				regular++;
			} else {
				other_steps += cuts[i].steps;
				outside += cuts[i].steps == 0 && cuts[i].count == sync;
			}
		}
		assert_int_equal(regular, 6);
		assert_int_equal(other_steps, 0);
		assert_int_equal(outside, syncs);
		free(s);
	}
}

/* The same sync at every step repeats with the steps: nothing tells it
 * from the step's own forward without step ranges (docs/patterns.md
 * section 2), and the step holds it. */
static void test_weight_sync_every_step_is_in_the_step(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	size_t p = 0;
	for (int k = 0; k < 6; k++)
		p = add_weight_sync(s, 4) + add_rl_step(s, 4);
	struct steps_cut cuts[16];
	size_t n = stream(s, cuts, 16);
	assert_int_equal(n, 6);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(cuts[i].kind, STEPS_REGULAR);
		assert_int_equal(cuts[i].count, p);
	}
	free(s);
}

/* Gradient sync and the reshard after backward deferred to the last of K
 * micro-batches, reshard_after_forward true (stream_job deferred): the
 * first forward gathers the root and the blocks, each micro-batch
 * re-gathers the blocks for backward, the last reduces every unit once. */
static size_t add_deferred_step(struct seq *s, int L, int K)
{
	size_t n0 = s->n;
	add(s, AG, 524416);
	for (int l = 0; l < L; l++)
		add(s, AG, 426240);
	for (int mb = 0; mb < K; mb++) {
		for (int l = 0; l < L; l++) {
			add(s, AG, 426240);
			if (mb == K - 1)
				add(s, RS, 852480);
		}
	}
	add(s, RS, 1048832);
	return s->n - n0;
}

/* The micro-batch count changes from step to step (2, 3, 2, 3, ...): the
 * period holds two optimizer steps, each cut as a step of its variant;
 * none is cut at a micro-batch. */
static void test_changing_microbatch_count(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	size_t len[2] = {0};
	for (int k = 0; k < 6; k++)
		len[k % 2] = add_deferred_step(s, 4, 2 + k % 2);
	struct steps_cut cuts[16];
	steps_cutter_t *c;
	size_t n = stream_keep(s, cuts, 16, &c);
	assert_int_equal(n, 6);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(cuts[i].kind, STEPS_REGULAR);
		assert_int_equal(cuts[i].count, len[i % 2]);
		/* the variant with the most events (3 micro-batches) is the steady one */
		assert_int_equal(cuts[i].variant, i % 2 == 1 ? 0 : 1);
	}
	struct steps_variant v[STEPS_VARIANTS_MAX];
	assert_int_equal(steps_cutter_variants(c, v, STEPS_VARIANTS_MAX), 2);
	assert_int_equal(v[0].events, len[1]);
	assert_int_equal(v[0].allgathers, 1 + 4 + 3 * 4);
	assert_int_equal(v[0].reduce_scatters, 5);
	assert_int_equal(v[0].per_period, 1);
	assert_int_equal(v[1].allgathers, 1 + 4 + 2 * 4);
	assert_int_equal(v[1].reduce_scatters, 5);
	steps_cutter_free(c);
	free(s);
}

/* A schedule of 2, 2, 3: the period holds three steps, two alike. */
static void test_microbatch_schedule_of_three(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	static const int K[3] = {2, 2, 3};
	size_t len[3] = {0};
	for (int k = 0; k < 9; k++)
		len[k % 3] = add_deferred_step(s, 4, K[k % 3]);
	struct steps_cut cuts[16];
	size_t n = stream(s, cuts, 16);
	uint32_t regular = 0, steps = 0;
	for (size_t i = 0; i < n; i++) {
		regular += cuts[i].kind == STEPS_REGULAR;
		steps += cuts[i].kind == STEPS_REGULAR ? 1 : cuts[i].steps;
		if (cuts[i].kind == STEPS_REGULAR)
			assert_true(cuts[i].count == len[0] || cuts[i].count == len[2]);
	}
	assert_int_equal(steps, 9);
	assert_true(regular >= 6);
	free(s);
}

/* Every block its own FSDP root, re-gathered at its own pre-backward with
 * no prefetch (stream_job ddp-fsdp --block-reshard): units all of one size,
 * no distinct root unit; DDP's two bucket all-reduces; set-up (DDP's
 * metadata gather and broadcast) and the buckets' rebuild in step 1. */
static void test_units_alike_without_root(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	size_t p = 0;
	for (int k = 0; k < 6; k++) {
		size_t n0 = s->n;
		if (k == 0) {
			add(s, AG, 80);
			add(s, BC, 4195328);
		}
		if (k == 1) {
			add(s, BC, 32);
			add(s, BC, 16);
		}
		for (int l = 0; l < 4; l++)
			add(s, AG, 426240);
		if (k > 0)
			add(s, AR, 2097152);
		for (int l = 0; l < 4; l++) {
			add(s, AG, 426240);
			add(s, RS, 852480);
		}
		add(s, AR, k == 0 ? 4195328 : 2098176);
		p = s->n - n0;
	}
	struct steps_cut cuts[16];
	size_t n = stream(s, cuts, 16);
	uint32_t regular = 0, steps = 0;
	for (size_t i = 0; i < n; i++) {
		if (cuts[i].kind == STEPS_REGULAR) {
			assert_int_equal(cuts[i].count, p);
			regular++;
		}
		steps += cuts[i].kind == STEPS_REGULAR ? 1 : cuts[i].steps;
	}
	/* step 0 is warm-up (set-up, one bucket); the rebuild's broadcasts
	 * before step 1's forward are too */
	assert_int_equal(cuts[0].kind, STEPS_WARMUP);
	assert_int_equal(cuts[0].steps, 1);
	assert_int_equal(regular, 5);
	assert_int_equal(steps, 6);
	free(s);
}

/* A frozen root (gathered, never reduced) before blocks of one size: the
 * forward is no burst outside the step, though it reduces nothing and the
 * blocks' reductions are all alike. */
static void test_forward_is_no_burst(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	size_t p = 0;
	for (int k = 0; k < 6; k++) {
		size_t n0 = s->n;
		add(s, AG, 2097664);
		for (int l = 0; l < 6; l++)
			add(s, AG, 1704960);
		for (int l = 0; l < 3; l++) {
			add(s, RS, 3409920);
			add(s, AG, 1704960);
		}
		add(s, RS, 3409920);
		p = s->n - n0;
	}
	struct steps_cut cuts[16];
	size_t n = stream(s, cuts, 16);
	assert_int_equal(n, 6);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(cuts[i].kind, STEPS_REGULAR);
		assert_int_equal(cuts[i].count, p);
	}
	free(s);
}

/* xorshift: the routing of a step */
static uint64_t next_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* MoE with expert parallelism on the FSDP communicator itself (stream_job
 * moe, 2 ranks): per block, the tokens-per-expert counts (an equal split,
 * one size) and the routed rows (sizes from the routing, new every step),
 * each one group of Send/Recv to every peer. */
static void add_moe_step(struct seq *s, int L, uint64_t *route)
{
	const uint64_t counts = 1, rows = 2;
	add(s, AG, 524288);
	for (int l = 0; l < L; l++) {
		add(s, AG, 363008);
		add_class(s, FSS_OP_SEND, 32, 4, counts);
		add_class(s, FSS_OP_SEND, 2 * (200000 + next_rand(route) % 60000), 4, rows);
		add_class(s, FSS_OP_SEND, 2 * (200000 + next_rand(route) % 60000), 4, rows);
	}
	add(s, AG, 524544);
	for (int l = 0; l < L; l++) {
		add(s, AG, 363008);
		add_class(s, FSS_OP_SEND, 2 * (200000 + next_rand(route) % 60000), 4, rows);
		add_class(s, FSS_OP_SEND, 2 * (200000 + next_rand(route) % 60000), 4, rows);
		add(s, RS, 726016);
	}
	add(s, RS, 1049088);
	add(s, RS, 1048576);
	add(s, AR, 4);
}

/* The routed all-to-alls never make two steps alike: they are left out of
 * the period search, and cut into the steps they fall in. */
static void test_varying_alltoalls_left_out(void **state)
{
	(void)state;
	struct seq *s = calloc(1, sizeof *s);
	uint64_t route = 88172645463325252ull;
	size_t p = 0;
	for (int k = 0; k < 6; k++) {
		size_t n0 = s->n;
		add_moe_step(s, 4, &route);
		p = s->n - n0;
	}
	struct steps_cut cuts[64];
	steps_cutter_t *c;
	size_t n = stream_keep(s, cuts, 64, &c);
	assert_int_equal(n, 6);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(cuts[i].kind, STEPS_REGULAR);
		assert_int_equal(cuts[i].count, p); /* the all-to-alls are in it */
		assert_int_equal(s->op[cuts[i].first], AG);
	}
	assert_int_equal(steps_cutter_left_out(c), 6 * 4 * 4);
	steps_cutter_free(c);
	/* read as sizes that never change, they leave no step to find */
	for (size_t i = 0; i < s->n; i++)
		s->cls[i] = 0;
	n = stream(s, cuts, 64);
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(cuts[i].kind, STEPS_REGULAR);
	free(s);
}

/* Which classes vary: sizes that change every time do; one size, sizes
 * that cycle, and classes seen a few times do not; nor anything when the
 * varying classes would be half the window. */
static void test_varying_classes(void **state)
{
	(void)state;
	uint64_t cls[400], sig[400], out[4];
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < 400; i++) {
		cls[i] = 0;
		sig[i] = 7;
		switch (i % 8) {
		case 1: /* the routing's sizes */
			cls[i] = 11;
			sig[i] = next_rand(&x) % 50;
			break;
		case 2: /* a sequence length cycling over four steps */
			cls[i] = 12;
			sig[i] = 100 + (i / 40) % 4;
			break;
		case 3: /* one size */
			cls[i] = 13;
			sig[i] = 5;
			break;
		}
	}
	cls[5] = 14; /* set-up, once */
	sig[5] = 99;
	assert_int_equal(steps_varying_classes(cls, sig, 400, out, 4), 1);
	assert_int_equal(out[0], 11);
	for (size_t i = 0; i < 400; i++)
		if (i % 8 < 4) {
			cls[i] = 11;
			sig[i] = next_rand(&x) % 50;
		}
	assert_int_equal(steps_varying_classes(cls, sig, 400, out, 4), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_period_and_cuts),
		cmocka_unit_test(test_warmup),
		cmocka_unit_test(test_noise),
		cmocka_unit_test(test_starts_mid_step),
		cmocka_unit_test(test_attached_then_detached),
		cmocka_unit_test(test_no_period),
		cmocka_unit_test(test_forward_blocks_are_no_step),
		cmocka_unit_test(test_grouped_signature),
		cmocka_unit_test(test_short_trace),
		cmocka_unit_test(test_init_broadcasts),
		cmocka_unit_test(test_interruptions),
		cmocka_unit_test(test_recurring_interruption_is_no_step),
		cmocka_unit_test(test_short_trace_with_interruptions),
		cmocka_unit_test(test_weight_sync_outside_steps),
		cmocka_unit_test(test_weight_sync_every_step_is_in_the_step),
		cmocka_unit_test(test_changing_microbatch_count),
		cmocka_unit_test(test_microbatch_schedule_of_three),
		cmocka_unit_test(test_units_alike_without_root),
		cmocka_unit_test(test_forward_is_no_burst),
		cmocka_unit_test(test_varying_alltoalls_left_out),
		cmocka_unit_test(test_varying_classes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
