/* fsdp_ref_units_test: wrap specs, the unit table and the closed-form counts.
 *
 * Pins down the FSDP2 unit order (--wrap linear: rest of block, then q k v o
 * gate up down; backward mirrored), the tensor layout (every tensor in
 * exactly one unit, aligned, non-overlapping), the rejection of bad specs
 * with a message, the count formula on hand-computed cases, and with
 * tensor parallelism the local-to-global index of every tensor element and
 * the units' replicated spans. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fsdp_ref/counts.h"
#include "fsdp_ref/model.h"
#include "fsdp_ref/units.h"
#include "fsdp_ref/wrap.h"

static const struct model_config cfg8 = {
    .vocab = 64,
    .layers = 8,
    .d_model = 64,
    .ffn = 192,
    .heads = 4,
    .kv_heads = 2,
    .seq = 32,
    .rope_theta = 10000.0f,
    .norm_eps = 1e-5f,
};

static void test_wrap_accepts(void **state)
{
	struct wrap_spec s;
	char err[256];
	assert_int_equal(wrap_parse("block", 8, &s, err, sizeof err), 0);
	assert_int_equal(wrap_unit_count(&s), 9);
	assert_int_equal(wrap_parse("linear", 8, &s, err, sizeof err), 0);
	assert_int_equal(wrap_unit_count(&s), 8 * 8 + 1);
	assert_int_equal(wrap_parse("model", 8, &s, err, sizeof err), 0);
	assert_int_equal(wrap_unit_count(&s), 1);
	assert_int_equal(wrap_parse("group:2", 8, &s, err, sizeof err), 0);
	assert_int_equal(wrap_unit_count(&s), 5);
	assert_int_equal(wrap_parse("group:3", 8, &s, err, sizeof err), 0);
	assert_int_equal(wrap_unit_count(&s), 4); /* 3 + 3 + 2 blocks, + root */
	assert_int_equal(wrap_parse("linear:0-3,block:4-11", 12, &s, err, sizeof err), 0);
	assert_int_equal(wrap_unit_count(&s), 1 + 32 + 8);
	/* ranges in any order, single-block ranges, group ranges */
	assert_int_equal(wrap_parse("block:4-7,group:2:0-1,linear:2,block:3", 8, &s, err, sizeof err), 0);
	assert_int_equal(s.nranges, 4);
	assert_int_equal(s.ranges[0].first, 0);
	assert_int_equal(s.ranges[0].policy, WRAP_GROUP);
	assert_int_equal(wrap_unit_count(&s), 1 + 1 + 8 + 1 + 4);
}

static void expect_reject(const char *spec, int layers, const char *needle)
{
	struct wrap_spec s;
	char err[256] = "";
	assert_int_equal(wrap_parse(spec, layers, &s, err, sizeof err), -EINVAL);
	if (!strstr(err, needle))
		fail_msg("spec '%s': message '%s' lacks '%s'", spec, err, needle);
	assert_non_null(strstr(err, "accepted:")); /* every message says what is accepted */
}

static void test_wrap_rejects(void **state)
{
	expect_reject("", 8, "empty");
	expect_reject("blocks", 8, "unknown policy");
	expect_reject("group:0", 8, "K >= 1");
	expect_reject("group:x", 8, "K >= 1");
	expect_reject("linear:0-3", 8, "4-7 are in no range");
	expect_reject("linear:0-3,block:3-7", 8, "block 3 is in two ranges");
	expect_reject("linear:0-3,block:5-7", 8, "block");
	expect_reject("block:0-8", 8, "0-7");
	expect_reject("block:5-2", 8, "backwards");
	expect_reject("block:a-b", 8, "range is A-B");
	expect_reject("block,linear", 8, "every item needs a block range");
	expect_reject("model,block:0-7", 8, "model cannot be combined");
}

/* Every tensor in exactly one unit, aligned, inside the unit, no overlap. */
static void check_layout(const struct unit_table *t, const struct model_config *cfg, int shards)
{
	int n = model_tensor_count(cfg);
	struct model_tensor *tensors = calloc((size_t)n, sizeof *tensors);
	model_tensors(cfg, tensors);
	size_t total = 0;
	for (int u = 0; u < t->nunits; u++) {
		assert_int_equal(t->units[u].padded % ((size_t)UNITS_ALIGN * (size_t)shards), 0);
		assert_int_equal(t->units[u].shard * (size_t)shards, t->units[u].padded);
		total += t->units[u].numel;
	}
	assert_int_equal(total, model_param_count(cfg));
	for (int a = 0; a < n; a++) {
		const struct unit_info *ua = &t->units[t->tensor_unit[a]];
		assert_int_equal(t->tensor_offset[a] % UNITS_ALIGN, 0);
		assert_true(t->tensor_offset[a] + tensors[a].numel <= ua->padded);
		for (int b = a + 1; b < n; b++) {
			if (t->tensor_unit[a] != t->tensor_unit[b])
				continue;
			size_t a0 = t->tensor_offset[a], a1 = a0 + tensors[a].numel;
			size_t b0 = t->tensor_offset[b], b1 = b0 + tensors[b].numel;
			assert_true(a1 <= b0 || b1 <= a0);
		}
	}
	free(tensors);
}

static struct unit_table *build(const char *spec, int layers, int shards)
{
	struct model_config cfg = cfg8;
	cfg.layers = layers;
	struct wrap_spec s;
	char err[256];
	assert_int_equal(wrap_parse(spec, layers, &s, err, sizeof err), 0);
	struct unit_table *t = units_build(&cfg, &s, shards);
	assert_non_null(t);
	check_layout(t, &cfg, shards);
	return t;
}

static void test_linear_order_is_fsdp2(void **state)
{
	struct unit_table *t = build("linear", 2, 4);
	static const char *const fwd[] = {
	    "root",
	    "layers.0",
	    "layers.0.attn.q",
	    "layers.0.attn.k",
	    "layers.0.attn.v",
	    "layers.0.attn.o",
	    "layers.0.mlp.gate",
	    "layers.0.mlp.up",
	    "layers.0.mlp.down",
	    "layers.1",
	    "layers.1.attn.q",
	    "layers.1.attn.k",
	    "layers.1.attn.v",
	    "layers.1.attn.o",
	    "layers.1.mlp.gate",
	    "layers.1.mlp.up",
	    "layers.1.mlp.down",
	};
	static const char *const bwd[] = {
	    "root",
	    "layers.1",
	    "layers.1.mlp.down",
	    "layers.1.mlp.up",
	    "layers.1.mlp.gate",
	    "layers.1.attn.o",
	    "layers.1.attn.v",
	    "layers.1.attn.k",
	    "layers.1.attn.q",
	    "layers.0",
	    "layers.0.mlp.down",
	    "layers.0.mlp.up",
	    "layers.0.mlp.gate",
	    "layers.0.attn.o",
	    "layers.0.attn.v",
	    "layers.0.attn.k",
	    "layers.0.attn.q",
	};
	assert_int_equal(t->nunits, 17);
	for (int u = 0; u < t->nunits; u++) {
		assert_string_equal(t->units[u].name, fwd[u]);
		assert_string_equal(t->units[t->bwd_order[u]].name, bwd[u]);
		assert_int_equal(t->bwd_pos[t->bwd_order[u]], u);
	}
	/* the rest unit holds the two norms; each linear unit its own weight */
	assert_int_equal(t->units[1].numel, 2 * 64);
	assert_int_equal(t->units[2].numel, 64 * 64);
	assert_int_equal(t->units[3].numel, 32 * 64);
	assert_int_equal(t->units[6].numel, 192 * 64);
	/* the root holds embeddings, final norm and head */
	assert_int_equal(t->units[0].numel, 64 * 64 * 2 + 64);
	units_free(t);
}

static void test_group_and_mixed_units(void **state)
{
	struct unit_table *t = build("group:3", 8, 2);
	assert_int_equal(t->nunits, 4);
	assert_string_equal(t->units[1].name, "layers.0-2");
	assert_string_equal(t->units[3].name, "layers.6-7");
	/* a group opens at its first block in forward, at its last in backward */
	assert_int_equal(t->units[1].fwd_open.layer, 0);
	assert_int_equal(t->units[1].fwd_close.layer, 2);
	assert_int_equal(t->units[1].bwd_open.layer, 2);
	assert_int_equal(t->units[1].bwd_close.layer, 0);
	assert_int_equal(t->bwd_order[1], 3);
	assert_int_equal(t->bwd_order[3], 1);
	units_free(t);

	t = build("block:2-3,linear:0-1", 4, 3);
	assert_int_equal(t->nunits, 1 + 16 + 2);
	assert_string_equal(t->units[17].name, "layers.2");
	assert_string_equal(t->units[t->bwd_order[1]].name, "layers.3");
	assert_string_equal(t->units[t->bwd_order[3]].name, "layers.1");
	units_free(t);

	t = build("model", 4, 4);
	assert_int_equal(t->nunits, 1);
	assert_int_equal(t->units[0].numel,
			 model_param_count(&(struct model_config){
			     .vocab = 64, .layers = 4, .d_model = 64, .ffn = 192, .heads = 4, .kv_heads = 2}));
	units_free(t);
}

static void expect_counts(const char *wrap, int layers, const char *reshard, int n, int s, int units, int fwd, int bwd,
			  int rs, int ar)
{
	struct fsdp_count_config c = {.wrap = wrap, .layers = layers, .reshard_after_forward = reshard,
				      .world_size = n, .shard_group = s};
	struct fsdp_counts k;
	char err[256];
	if (fsdp_expected_counts(&c, &k, err, sizeof err) != 0)
		fail_msg("%s: %s", wrap, err);
	assert_int_equal(k.units, units);
	assert_int_equal(k.forward_allgathers, fwd);
	assert_int_equal(k.backward_allgathers, bwd);
	assert_int_equal(k.allgathers, fwd + bwd);
	assert_int_equal(k.reduce_scatters, rs);
	assert_int_equal(k.allreduces, ar);
	assert_int_equal(k.loss_allreduces, 1);
}

static void test_counts_closed_form(void **state)
{
	/* wrap, L, reshard, N, S: units, fwd AG, bwd AG, RS, AR */
	expect_counts("linear", 8, "true", 4, 0, 65, 65, 64, 65, 1); /* 8 x 8 + 1 */
	expect_counts("block", 8, "true", 4, 0, 9, 9, 8, 9, 1);	     /* 8 + 1 */
	expect_counts("block", 8, "false", 4, 0, 9, 9, 0, 9, 1);
	expect_counts("block", 8, "2", 4, 0, 9, 9, 8, 9, 1);
	expect_counts("block", 8, "1", 4, 0, 9, 9, 0, 9, 1);	/* G = 1 is false */
	expect_counts("model", 8, "true", 4, 0, 1, 1, 0, 1, 1); /* root only: never resharded */
	expect_counts("group:2", 8, "true", 2, 0, 5, 5, 4, 5, 1);
	expect_counts("block", 8, "true", 4, 2, 9, 9, 8, 9, 10); /* HSDP: + 9 all-reduces */
	expect_counts("linear:0-3,block:4-11", 12, "false", 8, 4, 41, 41, 0, 41, 42);
	expect_counts("block", 4, "true", 1, 0, 5, 5, 4, 5, 1); /* one rank: same counts */
	expect_counts(NULL, 4, NULL, 2, 0, 5, 5, 4, 5, 1);	/* defaults: block, true */

	struct fsdp_counts k;
	char err[256] = "";
	struct fsdp_count_config bad_s = {.wrap = "block", .layers = 8, .reshard_after_forward = "true", .world_size = 4, .shard_group = 3};
	assert_int_equal(fsdp_expected_counts(&bad_s, &k, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "--shard-group"));
	struct fsdp_count_config bad_g = {.wrap = "block", .layers = 8, .reshard_after_forward = "3", .world_size = 4, .shard_group = 0};
	assert_int_equal(fsdp_expected_counts(&bad_g, &k, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "--reshard-after-forward"));
	struct fsdp_count_config bad_w = {.wrap = "block:0-3", .layers = 8, .reshard_after_forward = "true", .world_size = 4, .shard_group = 0};
	assert_int_equal(fsdp_expected_counts(&bad_w, &k, NULL, 0), -EINVAL);
}

/* A tiny model with T = 2 and T = 4 dividing heads, kv heads and ffn. */
static const struct model_config tp_cfg = {
    .vocab = 16,
    .layers = 2,
    .d_model = 8,
    .ffn = 12,
    .heads = 4,
    .kv_heads = 4,
    .seq = 4,
    .rope_theta = 10000.0f,
    .norm_eps = 1e-5f,
};

/* Every element of every whole tensor is held by exactly one tp rank when
 * split (and by all when replicated), at the index the Megatron cut says,
 * with the initial value the model without TP gives it. */
static void test_tp_global_index(void **state)
{
	int n = model_tensor_count(&tp_cfg);
	struct model_tensor *whole = calloc((size_t)n, sizeof *whole), *local = calloc((size_t)n, sizeof *local);
	assert_non_null(whole);
	assert_non_null(local);
	model_tensors(&tp_cfg, whole);
	for (int T = 1; T <= 4; T *= 2) {
		struct model_config cfg = tp_cfg;
		cfg.tp = T;
		model_tensors(&cfg, local);
		for (int id = 0; id < n; id++) {
			const struct model_tensor *w = &whole[id], *t = &local[id];
			assert_int_equal(w->rows * w->cols, w->numel);
			assert_int_equal(t->rows, w->rows);
			assert_int_equal(t->cols, w->cols);
			assert_int_equal(t->fan_in, w->fan_in); /* initialisation sees the whole tensor */
			int split = t->split != MODEL_TP_REPLICATED;
			assert_int_equal(t->numel * (split ? (size_t)T : 1), w->numel);
			unsigned char *seen = calloc(w->numel, 1);
			assert_non_null(seen);
			for (int r = 0; r < T; r++)
				for (size_t i = 0; i < t->numel; i++) {
					size_t g = model_tensor_global_index(&cfg, t, r, i);
					assert_true(g < w->numel);
					seen[g]++;
					assert_true(model_init_value(&cfg, t, id, g, 7) ==
						    model_init_value(&tp_cfg, w, id, g, 7));
				}
			for (size_t g = 0; g < w->numel; g++)
				assert_int_equal(seen[g], split ? 1 : T);
			free(seen);
		}
	}
	/* hand-computed, T = 2: C = 8, F = 12, kv dim 8 */
	struct model_config cfg = tp_cfg;
	cfg.tp = 2;
	model_tensors(&cfg, local);
	const struct model_tensor *q = &local[model_tensor_id(1, MODEL_PART_Q)];
	const struct model_tensor *o = &local[model_tensor_id(1, MODEL_PART_O)];
	const struct model_tensor *down = &local[model_tensor_id(0, MODEL_PART_DOWN)];
	const struct model_tensor *up = &local[model_tensor_id(0, MODEL_PART_UP)];
	assert_int_equal(q->split, MODEL_TP_ROWS);
	assert_int_equal(up->split, MODEL_TP_ROWS);
	assert_int_equal(o->split, MODEL_TP_COLS);
	assert_int_equal(down->split, MODEL_TP_COLS);
	assert_int_equal(local[model_tensor_id(0, MODEL_PART_MLP_NORM)].split, MODEL_TP_REPLICATED);
	assert_int_equal(local[MODEL_OUTPUT].split, MODEL_TP_REPLICATED);
	/* column-parallel: rank 1 holds rows 4..7 of q [8, 8], rows 6..11 of up [12, 8] */
	assert_int_equal(model_tensor_global_index(&cfg, q, 1, 3), 4 * 8 + 3);
	assert_int_equal(model_tensor_global_index(&cfg, up, 1, 9), 6 * 8 + 9);
	/* row-parallel: rank 1 holds columns 4..7 of each row of o [8, 8] and
	 * columns 6..11 of down [8, 12] */
	assert_int_equal(model_tensor_global_index(&cfg, o, 1, 5), 1 * 8 + 4 + 1);
	assert_int_equal(model_tensor_global_index(&cfg, o, 0, 5), 1 * 8 + 0 + 1);
	assert_int_equal(model_tensor_global_index(&cfg, down, 1, 7), 1 * 12 + 6 + 1);
	assert_int_equal(model_tensor_global_index(&cfg, down, 1, 47), 7 * 12 + 6 + 5);
	free(whole);
	free(local);
}

/* With TP, units hold the local tensors, split ones first and the
 * replicated ones in one span at the end. */
static void test_tp_units_layout(void **state)
{
	struct model_config cfg = tp_cfg;
	cfg.tp = 2;
	int n = model_tensor_count(&cfg);
	struct model_tensor *tensors = calloc((size_t)n, sizeof *tensors);
	assert_non_null(tensors);
	model_tensors(&cfg, tensors);
	static const char *const specs[] = {"block", "linear", "group:2", "model"};
	for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
		struct wrap_spec s;
		char err[256];
		assert_int_equal(wrap_parse(specs[k], cfg.layers, &s, err, sizeof err), 0);
		struct unit_table *t = units_build(&cfg, &s, 2);
		assert_non_null(t);
		size_t total = 0, local_total = 0;
		int with_span = 0;
		for (int u = 0; u < t->nunits; u++)
			total += t->units[u].numel;
		for (int id = 0; id < n; id++) {
			const struct unit_info *ui = &t->units[t->tensor_unit[id]];
			size_t a = t->tensor_offset[id], b = a + tensors[id].numel;
			local_total += tensors[id].numel;
			assert_int_equal(a % UNITS_ALIGN, 0);
			if (tensors[id].split == MODEL_TP_REPLICATED)
				assert_true(a >= ui->replicated_begin && b <= ui->replicated_end);
			else
				assert_true(b <= ui->replicated_begin || ui->replicated_begin == ui->replicated_end);
		}
		for (int u = 0; u < t->nunits; u++)
			with_span += t->units[u].replicated_end > t->units[u].replicated_begin;
		assert_int_equal(total, local_total);
		struct fsdp_count_config c = {.wrap = specs[k], .layers = cfg.layers, .world_size = 2, .tp = 2};
		struct fsdp_counts counts;
		assert_int_equal(fsdp_expected_counts(&c, &counts, err, sizeof err), 0);
		assert_int_equal(with_span, counts.tp_replicated_units); /* one tp AllReduce per such unit */
		units_free(t);
	}
	/* without TP no span: nothing is all-reduced over tp */
	struct wrap_spec s;
	char err[256];
	assert_int_equal(wrap_parse("block", tp_cfg.layers, &s, err, sizeof err), 0);
	struct unit_table *t = units_build(&tp_cfg, &s, 2);
	assert_non_null(t);
	for (int u = 0; u < t->nunits; u++)
		assert_int_equal(t->units[u].replicated_end, t->units[u].replicated_begin);
	units_free(t);
	free(tensors);
}

/* --tp T: the FSDP counts are those of dp = N / T; the tp communicator
 * carries 4 L gathers and 4 L reductions per micro-batch, and one
 * all-reduce per unit holding replicated tensors (+ 1 with clipping). */
static void test_counts_tensor_parallel(void **state)
{
	struct fsdp_counts k, plain;
	char err[256] = "";
	struct fsdp_count_config c = {
	    .wrap = "linear", .layers = 4, .reshard_after_forward = "true", .world_size = 4, .tp = 2};
	assert_int_equal(fsdp_expected_counts(&c, &k, err, sizeof err), 0);
	struct fsdp_count_config dp_only = {
	    .wrap = "linear", .layers = 4, .reshard_after_forward = "true", .world_size = 2};
	assert_int_equal(fsdp_expected_counts(&dp_only, &plain, err, sizeof err), 0);
	/* FSDP's side: exactly the dp = 2 counts */
	assert_int_equal(k.units, plain.units);
	assert_int_equal(k.allgathers, plain.allgathers);
	assert_int_equal(k.reduce_scatters, plain.reduce_scatters);
	assert_int_equal(k.allreduces, plain.allreduces);
	assert_int_equal(k.tp, 2);
	assert_int_equal(k.dp, 2);
	assert_int_equal(k.tp_replicated_units, 1 + 4); /* root + one rest unit per block */
	assert_int_equal(k.tp_allgathers, 16);		/* 2 L forward + 2 L backward */
	assert_int_equal(k.tp_reduce_scatters, 16);
	assert_int_equal(k.tp_allreduces, 5);
	assert_int_equal(k.eval_tp_allgathers, 8);
	assert_int_equal(k.eval_tp_reduce_scatters, 8);
	assert_int_equal(plain.tp, 1);
	assert_int_equal(plain.tp_allgathers + plain.tp_reduce_scatters + plain.tp_allreduces, 0);

	/* every block, group or model unit holds norms (or is the root) */
	static const struct {
		const char *wrap;
		int units;
	} rep[] = {{"block", 5}, {"group:3", 3}, {"model", 1}, {"linear:0-1,block:2-3", 1 + 2 + 2}};
	for (size_t i = 0; i < sizeof rep / sizeof rep[0]; i++) {
		c.wrap = rep[i].wrap;
		assert_int_equal(fsdp_expected_counts(&c, &k, err, sizeof err), 0);
		assert_int_equal(k.tp_replicated_units, rep[i].units);
	}

	/* micro-batches multiply the tp traffic whatever --grad-sync; clipping
	 * adds its second mesh dimension; HSDP lives inside dp */
	struct fsdp_count_config loop = {.wrap = "block",
					 .layers = 4,
					 .reshard_after_forward = "false",
					 .world_size = 8,
					 .shard_group = 2,
					 .grad_accum = 3,
					 .grad_sync_last = 1,
					 .clip_grad = 1,
					 .tp = 2};
	assert_int_equal(fsdp_expected_counts(&loop, &k, err, sizeof err), 0);
	assert_int_equal(k.dp, 4);
	assert_int_equal(k.hsdp_allreduces, 5); /* R = 4 / 2, one sync micro-batch */
	assert_int_equal(k.tp_allgathers, 3 * 16);
	assert_int_equal(k.tp_reduce_scatters, 3 * 16);
	assert_int_equal(k.tp_clip_allreduces, 1);
	assert_int_equal(k.tp_allreduces, 3 * 5 + 1);
	assert_int_equal(k.clip_allreduces, 1);

	/* T must divide N, S must divide N / T */
	struct fsdp_count_config bad_t = {.wrap = "block", .layers = 4, .world_size = 4, .tp = 3};
	assert_int_equal(fsdp_expected_counts(&bad_t, &k, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "--tp"));
	struct fsdp_count_config bad_s = {.wrap = "block", .layers = 4, .world_size = 4, .shard_group = 4, .tp = 2};
	assert_int_equal(fsdp_expected_counts(&bad_s, &k, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "--shard-group"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wrap_accepts),	  cmocka_unit_test(test_wrap_rejects),
	    cmocka_unit_test(test_linear_order_is_fsdp2), cmocka_unit_test(test_group_and_mixed_units),
	    cmocka_unit_test(test_counts_closed_form),	  cmocka_unit_test(test_counts_tensor_parallel),
	    cmocka_unit_test(test_tp_global_index),	  cmocka_unit_test(test_tp_units_layout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
