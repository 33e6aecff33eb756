/*
 * wrap_too_fine.c - rule wrap-too-fine: more than one AllGather per
 * repeating architectural unit (the per-Linear wrap).
 *
 * The forward gathers of a step are root gathers plus a motif of k gathers
 * repeated L times (collector/units.c). k > 1 means each block runs the FSDP
 * lifecycle k times: k small latency-bound gathers (and k reduce-scatters)
 * where one would move the same bytes.
 */
#include "rules/rules.h"

#include <errno.h>
#include <stdlib.h>

/* motif_gathered_bytes - gathered (output) bytes of the first copy of the
 * motif: what one per-block gather would move. 0 when not known. */
static double motif_gathered_bytes(const struct analysis_result *a, double *largest_piece)
{
	double sum = 0;

	*largest_piece = 0;
	for (uint32_t i = 0; i < a->ngathers; i++) {
		const struct analysis_gather *g = &a->gathers[i];
		double out;

		if (g->phase != ANALYSIS_PHASE_FORWARD || g->repeat != 0 || g->microbatch != a->gathers[0].microbatch)
			continue;
		out = (double)g->bytes * (g->nranks > 0 ? g->nranks : 1);
		sum += out;
		if (out > *largest_piece)
			*largest_piece = out;
	}
	return sum;
}

/* The job's other FSDP groups (an MoE's experts on their own mesh), read
 * per block as the primary is: one gather per block on every group is
 * per-block wrapping, whatever the gathers of a block add up to. A group
 * whose own repeat holds several gathers per unit is wrapped finer. */
static int other_groups(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
			findings_t *out)
{
	for (uint32_t g = 1; g < a->nfsdp_groups && g < ANALYSIS_FSDP_GROUPS_MAX; g++) {
		const struct analysis_fsdp_group *x = &a->fsdp_groups[g];
		if ((double)x->gathers_per_unit < rule_threshold(c, RULE_T_FINE_GATHERS_PER_UNIT) ||
		    (double)x->repeating_units < rule_threshold(c, RULE_T_MIN_UNITS))
			continue;
		char *message = finding_printf(
		    "the wrap is finer than the model's repeating unit on FSDP group %u (%d ranks): %u AllGathers "
		    "per unit where 1 would do",
		    g + 1, x->nranks, x->gathers_per_unit);
		char *evidence = finding_printf(
		    "FSDP group %u of %u: %u gathers per repeating unit x %u units in %u forward gathers; %u "
		    "AllGathers, %u ReduceScatters per step\nthe primary group gathers %u per unit",
		    g + 1, a->nfsdp_groups, x->gathers_per_unit, x->repeating_units, x->forward_units, x->allgathers,
		    x->reduce_scatters, a->units.gathers_per_unit);
		char *fsdp2 = finding_printf("# One fully_shard per block for this group's modules too (an MoE's "
					     "experts: fully_shard(block.moe.experts, mesh=...) once per block),\n"
					     "# none on the modules inside them");
		struct finding *f = findings_take(out, self, RULE_ERROR, message, evidence, fsdp2, NULL, NULL);
		if (!f)
			return -ENOMEM;
		finding_metric(f, "gathers_per_unit", x->gathers_per_unit);
		finding_metric(f, "repeating_units", x->repeating_units);
		finding_metric(f, "fsdp_group", g + 1);
		return 0;
	}
	return 0;
}

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	const struct analysis_units *u = &a->units;
	uint32_t k = u->gathers_per_unit, L = u->repeating_units, root = u->root_gathers;
	uint32_t per_block_forward, per_block_backward, backward_blocks, mb;
	double block_bytes, piece_bytes;
	char container[96], b1[32], b2[32], b3[32], b4[32], ds_bucket[48], exposed[16] = "", left_out[128];
	char *message, *evidence, *fsdp2, *fsdp1, *deepspeed, *root_text;
	struct finding *f;

	/* A --layers count the forward gathers hold no repeat of: k is the
	 * motif that was seen, so L must be its copies too; k x the user's
	 * count would claim gathers the trace never had. */
	if (u->layers_given && u->layers_match == 0 && u->inferred_repeating_units)
		L = u->inferred_repeating_units;
	if (!rule_diagnosed(a) || k == 0 || L == 0)
		return 0;
	if ((double)k < rule_threshold(c, RULE_T_FINE_GATHERS_PER_UNIT))
		return other_groups(self, a, c, out);
	/* Without the user's layer count, a motif seen once is no evidence of a
	 * repeat at all. */
	if (!u->layers_given && (double)L < rule_threshold(c, RULE_T_MIN_UNITS))
		return 0;

	per_block_forward = L + root;
	/* Backward re-gathers of the blocks, scaled down the same way (per
	 * micro-batch: a step may hold several). */
	mb = rule_microbatches(a);
	backward_blocks = (a->microbatches.backward_allgathers + k / 2) / k;
	per_block_backward = backward_blocks;
	block_bytes = motif_gathered_bytes(a, &piece_bytes);
	rule_unit_container(u->repeating_unit_name, container, sizeof(container));
	if (u->repeating_unit_params > 0)
		snprintf(ds_bucket, sizeof(ds_bucket), "%llu", (unsigned long long)u->repeating_unit_params);
	else
		snprintf(ds_bucket, sizeof(ds_bucket), "5e7");

	if (a->exposure.exposed_fraction >= 0)
		snprintf(exposed, sizeof(exposed), "%.0f%%", 100 * a->exposure.exposed_fraction);
	root_text = root ? finding_printf(" + %u root", root) : finding_printf("%s", "");
	if (!root_text)
		return -ENOMEM;
	/* what was left out: other communicators' gathers are not parameter gathers */
	char *others = NULL;
	for (uint32_t i = 0; i < a->ncomms && !others; i++)
		if (a->comms[i].role == ANALYSIS_ROLE_TENSOR_PARALLEL && a->comms[i].allgathers)
			others = finding_printf("\nnot counted: the tensor-parallel group's %u AllGathers and %u "
						"ReduceScatters per step (activations, not parameters)",
						a->comms[i].allgathers, a->comms[i].reduce_scatters);
	for (uint32_t g = 1; g < a->nfsdp_groups && g < ANALYSIS_FSDP_GROUPS_MAX && !others; g++)
		others = finding_printf("\nnot counted: FSDP group %u's %u AllGathers per step (%d ranks, %u per unit: "
					"its own wrap)",
					g + 1, a->fsdp_groups[g].allgathers, a->fsdp_groups[g].nranks,
					a->fsdp_groups[g].gathers_per_unit);
	if (!others)
		others = finding_printf("%s", "");
	if (!others) {
		free(root_text);
		return -ENOMEM;
	}
	message = finding_printf("the wrap is finer than the model's repeating unit: %u AllGathers per unit where 1 "
				 "would do (%u forward AllGathers per %s instead of %u)",
				 k, a->units.forward_units, rule_per(a), per_block_forward);
	evidence = finding_printf(
		"%u gathers per repeating unit x %u units = %u%s per %s; per-block wrap would issue %u\n"
		"AllGathers per step: %u (%u forward + %u backward); per-block wrap: %u (%u + %u)\n"
		"one unit's %u gathers move %s in pieces of at most %s; one gather per unit would move %s at once\n"
		"AllGather time per step: %s%s%s%s%s",
		k, L, k * L, root_text, rule_per(a), per_block_forward, a->per_step.allgathers,
		a->per_step.forward_allgathers, a->per_step.backward_allgathers,
		mb * (per_block_forward + per_block_backward), mb * per_block_forward, mb * per_block_backward, k,
		rule_format_bytes(block_bytes, b1, sizeof(b1)), rule_format_bytes(piece_bytes, b2, sizeof(b2)),
		rule_format_bytes(block_bytes, b3, sizeof(b3)),
		a->trace.sources_attached && a->exposure.source == ANALYSIS_EXPOSURE_NONE
			? "not measured in attach mode"
			: rule_format_ns((double)a->exposure.allgather_ns_per_step, b4, sizeof(b4)),
		a->exposure.exposed_fraction >= 0 ? ", exposed " : "", exposed, others,
		rule_left_out(a, left_out, sizeof(left_out)));
	free(others);
	free(root_text);
	fsdp2 = finding_printf(
		"# One fully_shard per repeating unit (the transformer block); none on the Linears inside it.\n"
		"mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)\n"
		"for block in %s:   # %u blocks: %u AllGathers in forward with the root\n"
		"    fully_shard(block, mp_policy=mp)\n"
		"fully_shard(model, mp_policy=mp)      # the root: embeddings, final norm, head\n"
		"# and delete the loop that called fully_shard(linear) for q/k/v/o/gate/up/down",
		container, L, per_block_forward);
	fsdp1 = finding_printf(
		"from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, BackwardPrefetch\n"
		"from torch.distributed.fsdp.wrap import ModuleWrapPolicy\n"
		"model = FSDP(model,\n"
		"             auto_wrap_policy=ModuleWrapPolicy({Block}),  # your block class, not nn.Linear\n"
		"             forward_prefetch=True,\n"
		"             backward_prefetch=BackwardPrefetch.BACKWARD_PRE)\n"
		"# same with functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block});\n"
		"# a size_based_auto_wrap_policy with a small min_num_params wraps per Linear");
	deepspeed = finding_printf(
		"// ZeRO-3 gathers per fetch bucket, not per module: make a bucket hold at least one block\n"
		"\"zero_optimization\": {\n"
		"  \"stage\": 3,\n"
		"  \"stage3_prefetch_bucket_size\": %s,   // elements: >= one block's parameters\n"
		"  \"stage3_param_persistence_threshold\": 1e5  // small params stay resident, never re-gathered\n"
		"}",
		ds_bucket);
	f = findings_take(out, self, RULE_ERROR, message, evidence, fsdp2, fsdp1, deepspeed);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "gathers_per_unit", k);
	finding_metric(f, "repeating_units", L);
	finding_metric(f, "root_gathers", root);
	finding_metric(f, "forward_allgathers", a->per_step.forward_allgathers);
	finding_metric(f, "allgathers", a->per_step.allgathers);
	finding_metric(f, "per_block_forward_allgathers", mb * per_block_forward);
	finding_metric(f, "per_block_allgathers", mb * (per_block_forward + per_block_backward));
	finding_metric(f, "microbatches", mb);
	finding_metric(f, "unit_gathered_bytes", block_bytes);
	return 0;
}

const struct rule rule_wrap_too_fine = {
	.id = "wrap-too-fine",
	.title = "More than one AllGather per repeating unit (wrapped per Linear, not per block)",
	.explanation =
		"FSDP runs its lifecycle (AllGather, compute, reshard, AllGather again for backward, "
		"ReduceScatter) once per wrapped module. Wrapping every Linear inside a transformer block runs "
		"it once per Linear: each block issues several small, latency-bound collectives instead of one "
		"that moves the same bytes, and each gather has only one matmul of compute to hide behind. The "
		"model trains correctly, only slower (a third of the expected MFU is common), and nothing "
		"announces it: only the number of AllGathers per step against the number of repeating units "
		"tells the two apart. The right unit is the model's repeating block.",
	.max_severity = RULE_ERROR,
	.check = check,
};
