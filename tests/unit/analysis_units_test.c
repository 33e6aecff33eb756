/*
 * analysis_units_test.c - tandem-repeat detection of repeating units on
 * synthetic forward gather sequences (collector/units.h).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "collector/units.h"

#define ROOT 1000003u
#define BLOCK 70000u
/* per-Linear wrap of one fsdp_ref block: norms, q, k, v, o, gate, up, down */
static const uint64_t linear_block[8] = {128, 4096, 1024, 1024, 4096, 11008, 11008, 11008};

static size_t build_linear(uint64_t *keys, int layers)
{
	size_t n = 0;
	keys[n++] = ROOT;
	for (int l = 0; l < layers; l++)
		for (int k = 0; k < 8; k++)
			keys[n++] = linear_block[k];
	return n;
}

static void expect(const uint64_t *keys, size_t n, int layers, int rc, uint32_t start, uint32_t motif,
		   uint32_t copies)
{
	struct units_repeat r;
	assert_int_equal(units_find_repeat(keys, n, layers, &r), rc);
	assert_int_equal(r.start, start);
	assert_int_equal(r.motif, motif);
	assert_int_equal(r.copies, copies);
	assert_int_equal(r.covered, motif * copies);
}

static void test_per_block(void **state)
{
	(void)state;
	for (int L = 2; L <= 40; L++) {
		uint64_t keys[64];
		size_t n = 0;
		keys[n++] = ROOT;
		for (int l = 0; l < L; l++)
			keys[n++] = BLOCK;
		expect(keys, n, 0, 0, 1, 1, (uint32_t)L);
	}
}

static void test_per_linear(void **state)
{
	(void)state;
	uint64_t keys[1 + 8 * 48];
	int layers[] = {2, 5, 12, 48};
	for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
		size_t n = build_linear(keys, layers[i]);
		expect(keys, n, 0, 0, 1, 8, (uint32_t)layers[i]);
		/* the user's --layers agrees */
		expect(keys, n, layers[i], 0, 1, 8, (uint32_t)layers[i]);
	}
}

static void test_whole_model(void **state)
{
	(void)state;
	uint64_t keys[1] = {123456789};
	expect(keys, 1, 0, 0, 0, 1, 1);
}

static void test_group2(void **state)
{
	(void)state;
	/* wrap group:2 over 12 blocks: 6 units of two blocks */
	uint64_t keys[7] = {ROOT, 2 * BLOCK, 2 * BLOCK, 2 * BLOCK, 2 * BLOCK, 2 * BLOCK, 2 * BLOCK};
	expect(keys, 7, 0, 0, 1, 1, 6);
	/* the user says 12 layers: no repeat of 12 copies; the inference stays */
	expect(keys, 7, 12, -ENOENT, 1, 1, 6);
}

static void test_heterogeneous_first_blocks(void **state)
{
	(void)state;
	/* the first two blocks differ (a dense prefix before MoE blocks) */
	uint64_t keys[11] = {ROOT, 5000, 6000, BLOCK, BLOCK, BLOCK, BLOCK, BLOCK, BLOCK, BLOCK, BLOCK};
	expect(keys, 11, 0, 0, 3, 1, 8);
	/* ... and wrapped per Linear */
	uint64_t lk[1 + 2 * 3 + 8 * 6];
	size_t n = 0;
	lk[n++] = ROOT;
	for (int l = 0; l < 2; l++) {
		lk[n++] = 64;
		lk[n++] = 77;
		lk[n++] = 99;
	}
	for (int l = 0; l < 6; l++)
		for (int k = 0; k < 8; k++)
			lk[n++] = linear_block[k];
	expect(lk, n, 0, 0, 7, 8, 6);
}

static void test_trailing_head(void **state)
{
	(void)state;
	/* embeddings first, blocks, then a separately wrapped head */
	uint64_t keys[8] = {ROOT, BLOCK, BLOCK, BLOCK, BLOCK, BLOCK, 4242, 777};
	struct units_repeat r;
	assert_int_equal(units_find_repeat(keys, 8, 0, &r), 0);
	assert_int_equal(r.start, 1);
	assert_int_equal(r.copies, 5);
	assert_int_equal(8 - r.start - r.covered, 2);
}

static void test_smallest_motif_on_ties(void **state)
{
	(void)state;
	/* [a a a a]: motif 1 x 4 and motif 2 x 2 cover the same: the smaller wins */
	uint64_t keys[5] = {ROOT, 9, 9, 9, 9};
	expect(keys, 5, 0, 0, 1, 1, 4);
	/* with --layers 2 the two-gather motif is the one of two copies */
	expect(keys, 5, 2, 0, 1, 2, 2);
}

static void test_no_repeat(void **state)
{
	(void)state;
	uint64_t keys[4] = {ROOT, 1, 2, 3};
	expect(keys, 4, 0, 0, 1, 3, 1);
	/* one block */
	uint64_t one[2] = {ROOT, BLOCK};
	expect(one, 2, 0, 0, 1, 1, 1);
	expect(one, 2, 1, 0, 1, 1, 1);
	struct units_repeat r;
	assert_int_equal(units_find_repeat(NULL, 0, 0, &r), 0);
	assert_int_equal(r.covered, 0);
}

static void test_generalize_name(void **state)
{
	(void)state;
	char out[64];
	units_generalize_name("layers.0", "layers.1", out, sizeof out);
	assert_string_equal(out, "layers.*");
	units_generalize_name("model.layers.10.mlp", "model.layers.11.mlp", out, sizeof out);
	assert_string_equal(out, "model.layers.*.mlp");
	units_generalize_name("layers.3", "", out, sizeof out);
	assert_string_equal(out, "layers.3");
	units_generalize_name("root", "head", out, sizeof out);
	assert_string_equal(out, "root");
	units_generalize_name("layers.2-3", "layers.4-5", out, sizeof out);
	assert_string_equal(out, "layers.*-*");
	units_generalize_name("layers.0", "layers.1", out, 5);
	assert_string_equal(out, "laye");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_per_block),
		cmocka_unit_test(test_per_linear),
		cmocka_unit_test(test_whole_model),
		cmocka_unit_test(test_group2),
		cmocka_unit_test(test_heterogeneous_first_blocks),
		cmocka_unit_test(test_trailing_head),
		cmocka_unit_test(test_smallest_motif_on_ties),
		cmocka_unit_test(test_no_repeat),
		cmocka_unit_test(test_generalize_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
