/*
 * wrap_too_coarse.c - rule wrap-too-coarse: one AllGather materializes most
 * of the model (the whole-model or half-model wrap), or a unit holds several
 * repeating blocks.
 *
 * The transient row of the ledger is param_bytes x U x (1 + prefetch), U the
 * largest unit: a coarse unit makes it the whole model, and a single huge
 * gather has nothing to overlap with.
 */
#include "rules/rules.h"

#include <errno.h>
#include <stdlib.h>

/* The largest forward gather: overall, and among the non-root units (every
 * forward unit but the first, which FSDP2 makes the root). */
struct largest {
	uint64_t elements;         /* overall */
	int is_root;               /* the overall largest is forward unit 0 */
	const char *name;
	uint64_t nonroot_elements; /* largest non-root unit */
	const char *nonroot_name;
	uint64_t root_elements;    /* forward unit 0 */
};

static void find_largest(const struct analysis_result *a, struct largest *l)
{
	int first = 1;

	*l = (struct largest){0};
	for (uint32_t i = 0; i < a->ngathers; i++) {
		const struct analysis_gather *g = &a->gathers[i];

		/* one micro-batch's forward: the units once each (unit -1: another
		 * model's pass, a frozen reference or teacher model) */
		if (g->phase != ANALYSIS_PHASE_FORWARD || g->microbatch != a->gathers[0].microbatch || g->unit < 0)
			continue;
		if (first) {
			l->root_elements = g->elements;
		} else if (g->elements > l->nonroot_elements) {
			l->nonroot_elements = g->elements;
			l->nonroot_name = g->name;
		}
		if (g->elements > l->elements) {
			l->elements = g->elements;
			l->is_root = first;
			l->name = g->name;
		}
		first = 0;
	}
	/* No per-gather table: the summary figure alone. */
	if (l->elements == 0) {
		l->elements = a->units.largest_unit_params;
		l->name = a->units.largest_unit_name;
		l->is_root = a->per_step.forward_allgathers <= 1;
	}
}

/* layer_params - parameters of one repeating unit (one block): the user's
 * layer count splits the non-root parameters; otherwise the motif's copy when
 * it is one gather (with k > 1 a copy is still one block). 0 when unknown. */
static double layer_params(const struct analysis_result *a, const struct largest *l)
{
	const struct analysis_units *u = &a->units;

	if (u->layers_given && u->repeating_units > 0 && u->total_params > l->root_elements)
		return (double)(u->total_params - l->root_elements) / u->repeating_units;
	if (u->repeating_units >= 2 && u->repeating_unit_params > 0)
		return (double)u->repeating_unit_params;
	return 0;
}

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	const struct analysis_units *u = &a->units;
	const struct analysis_ledger *lg = &a->ledger;
	struct largest l;
	double total = (double)u->total_params, share, block, ratio = 0, param_bytes, prefetch;
	enum rule_severity sev;
	char b1[32], b2[32], b3[32], b4[32], container[96], what[160], per_block[128] = "";
	char *message, *evidence, *fsdp2, *fsdp1, *deepspeed;
	const char *name;
	uint64_t unit;
	struct finding *f;

	if (!rule_units_decided(a) || total <= 0)
		return 0;
	find_largest(a, &l);
	if (l.elements == 0)
		return 0;
	share = (double)l.elements / total;
	block = layer_params(a, &l);
	if (share >= rule_threshold(c, RULE_T_COARSE_ERROR_FRACTION)) {
		sev = RULE_ERROR;
		unit = l.elements;
		name = l.name;
	} else if (share >= rule_threshold(c, RULE_T_COARSE_FRACTION)) {
		sev = RULE_WARNING;
		unit = l.elements;
		name = l.name;
	} else if (block > 0 && l.nonroot_elements > 0 &&
		   (ratio = (double)l.nonroot_elements / block) >= rule_threshold(c, RULE_T_COARSE_UNIT_RATIO)) {
		sev = RULE_WARNING;
		unit = l.nonroot_elements;
		name = l.nonroot_name;
		share = (double)unit / total;
		l.is_root = 0;
	} else {
		return 0;
	}
	if (block > 0 && ratio == 0)
		ratio = (double)unit / block;

	param_bytes = lg->param_bytes > 0 ? lg->param_bytes : ANALYSIS_DEFAULT_PARAM_BYTES;
	prefetch = (double)lg->prefetch;
	if (block > 0)
		snprintf(per_block, sizeof(per_block), "; with one unit per block (%s params): %s",
			 rule_format_count(block, b3, sizeof(b3)),
			 rule_format_bytes(param_bytes * block * (1 + prefetch), b4, sizeof(b4)));
	if (name && *name)
		snprintf(what, sizeof(what), "unit '%s'", name);
	else
		snprintf(what, sizeof(what), "%s", l.is_root ? "the root unit" : "one unit");
	rule_unit_container(u->repeating_unit_name, container, sizeof(container));

	if (sev == RULE_ERROR)
		message = finding_printf("one AllGather materializes %.0f%% of the model's parameters: the transient "
					 "memory is the whole model and the gather has nothing to overlap with",
					 100 * share);
	else if (ratio >= rule_threshold(c, RULE_T_COARSE_UNIT_RATIO) && share < rule_threshold(c, RULE_T_COARSE_FRACTION))
		message = finding_printf("%s holds %.1f repeating units' worth of parameters: coarser than the "
					 "model's repeating block",
					 what, ratio);
	else
		message = finding_printf("%s holds %.0f%% of the model's parameters in one AllGather", what,
					 100 * share);
	evidence = finding_printf(
		"largest gather: %s of %s parameters (%.0f%%), %s\n"
		"forward AllGathers per step: %u; repeating units found: %u x %u gather(s)\n"
		"transient (gathered params) = %g B x U x (1 + %u prefetch) = %s per rank%s",
		rule_format_count((double)unit, b1, sizeof(b1)), rule_format_count(total, b2, sizeof(b2)), 100 * share,
		what, a->per_step.forward_allgathers, u->repeating_units, u->gathers_per_unit,
		param_bytes, lg->prefetch,
		rule_format_bytes(param_bytes * (double)unit * (1 + prefetch), b3, sizeof(b3)), per_block);
	if (l.is_root && sev != RULE_ERROR)
		fsdp2 = finding_printf(
			"# The root unit (what no block holds: embeddings, head) is the big one: shard its\n"
			"# large leaves on their own, then the blocks, then the root.\n"
			"fully_shard(model.tok_embeddings, mp_policy=mp)\n"
			"for block in %s:\n"
			"    fully_shard(block, mp_policy=mp)\n"
			"fully_shard([model.norm, model.output], mp_policy=mp)  # recent PyTorch takes a list\n"
			"fully_shard(model, mp_policy=mp)",
			container);
	else
		fsdp2 = finding_printf(
			"# One unit per repeating block, the root last; never only fully_shard(model).\n"
			"mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)\n"
			"for block in %s:\n"
			"    fully_shard(block, mp_policy=mp)   # one block, not a group of blocks\n"
			"fully_shard(model, mp_policy=mp)\n"
			"for i in range(len(%s) - 1):        # hide each gather behind the block before it\n"
			"    %s[i].set_modules_to_forward_prefetch([%s[i + 1]])",
			container, container, container, container);
	fsdp1 = finding_printf(
		"from torch.distributed.fsdp.wrap import ModuleWrapPolicy\n"
		"# auto_wrap_policy=None (or one that only matches big modules) leaves one flat parameter\n"
		"model = FSDP(model,\n"
		"             auto_wrap_policy=ModuleWrapPolicy({Block}),  # transformer_auto_wrap_policy works too\n"
		"             forward_prefetch=True,\n"
		"             backward_prefetch=BackwardPrefetch.BACKWARD_PRE,\n"
		"             limit_all_gathers=True)");
	deepspeed = finding_printf(
		"// ZeRO-3 fetches by bucket: keep buckets and live parameters near one or two blocks\n"
		"\"zero_optimization\": {\n"
		"  \"stage\": 3,\n"
		"  \"stage3_prefetch_bucket_size\": %.0f,   // elements, about one block\n"
		"  \"stage3_max_live_parameters\": %.0f     // about two blocks gathered at once\n"
		"}",
		block > 0 ? block : 5e7, block > 0 ? 2 * block : 1e9);
	f = findings_take(out, self, sev, message, evidence, fsdp2, fsdp1, deepspeed);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "largest_unit_params", (double)unit);
	finding_metric(f, "total_params", total);
	finding_metric(f, "largest_unit_fraction", share);
	if (block > 0) {
		finding_metric(f, "layer_params", block);
		finding_metric(f, "layers_per_largest_unit", ratio);
	}
	finding_metric(f, "transient_bytes_per_rank", param_bytes * (double)unit * (1 + prefetch));
	return 0;
}

const struct rule rule_wrap_too_coarse = {
	.id = "wrap-too-coarse",
	.title = "One AllGather holds most of the model (wrapped whole, or several blocks per unit)",
	.explanation =
		"Each FSDP unit is gathered whole before its forward and its backward: the gathered copy is the "
		"transient row of the memory ledger, param bytes x U x (1 + prefetch) with U the largest unit. "
		"Wrapping the whole model (or half of it, or groups of blocks) as one unit makes U most of the "
		"model, so every rank holds the full parameters at once and the memory win of sharding "
		"evaporates; one huge gather also has no compute before it to hide behind. The right unit is "
		"the model's repeating block: the transient row then holds one block (two with prefetch).",
	.max_severity = RULE_ERROR,
	.check = check,
};
