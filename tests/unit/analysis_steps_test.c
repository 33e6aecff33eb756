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
	size_t n;
};

static void add(struct seq *s, uint8_t op, uint64_t bytes)
{
	s->sig[s->n] = steps_signature(op, bytes, 1, 4);
	s->op[s->n] = op;
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
 * does); returns the cuts in order. */
static size_t stream(const struct seq *s, struct steps_cut *cuts, size_t max)
{
	steps_cutter_t *c = steps_cutter_new(0);
	size_t n = 0;
	for (size_t i = 0; i <= s->n; i++) {
		int final = i == s->n;
		if (!final)
			assert_int_equal(steps_cutter_push(c, s->sig[i], s->op[i]), 0);
		struct steps_cut cut;
		while (steps_cutter_next(c, final, &cut) == 1) {
			assert_true(n < max);
			cuts[n++] = cut;
		}
	}
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_period_and_cuts),
		cmocka_unit_test(test_warmup),
		cmocka_unit_test(test_noise),
		cmocka_unit_test(test_starts_mid_step),
		cmocka_unit_test(test_no_period),
		cmocka_unit_test(test_forward_blocks_are_no_step),
		cmocka_unit_test(test_grouped_signature),
		cmocka_unit_test(test_short_trace),
		cmocka_unit_test(test_init_broadcasts),
		cmocka_unit_test(test_interruptions),
		cmocka_unit_test(test_recurring_interruption_is_no_step),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
