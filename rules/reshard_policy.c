/*
 * reshard_policy.c - rule reshard-policy (info): the reshard_after_forward
 * policy the backward gathers show, and what the other choice would cost in
 * memory and in gathers.
 *
 * Neither choice is a bug: resharding pays a second AllGather per unit for
 * less peak memory; retaining pays memory for one gather fewer. The rule
 * states the trade with this job's numbers so the choice is read off the
 * ledger, not off a framework default.
 */
#include "rules/rules.h"

#include <errno.h>
#include <stdlib.h>

/* retained_bytes - gathered bytes of the non-root forward units that have no
 * backward gather (kept from forward to backward): what resharding them
 * would free. The first forward unit is the root. */
static double retained_bytes(const struct analysis_result *a)
{
	double sum = 0;

	for (uint32_t i = 0; i < a->ngathers; i++) {
		const struct analysis_gather *g = &a->gathers[i];
		int regathered = 0;

		if (g->phase != ANALYSIS_PHASE_FORWARD || g->unit <= 0 || g->microbatch != a->gathers[0].microbatch)
			continue;
		for (uint32_t j = 0; j < a->ngathers && !regathered; j++)
			regathered = a->gathers[j].phase == ANALYSIS_PHASE_BACKWARD && a->gathers[j].unit == g->unit;
		if (!regathered)
			sum += (double)g->bytes * (g->nranks > 0 ? g->nranks : 1);
	}
	return sum;
}

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	const struct analysis_reshard_info *r = &a->reshard;
	const struct analysis_ledger *lg = &a->ledger;
	char policy[32], b1[32], b2[32], b3[32], b4[32], headroom[96] = "", container[96];
	char *message, *evidence, *fsdp2, *fsdp1, *deepspeed;
	struct finding *f;
	double held;
	uint32_t mb, nodes, ranks;
	char in_node[112] = "";

	if (!rule_diagnosed(a) || r->policy == ANALYSIS_RESHARD_UNKNOWN || r->units == 0)
		return 0;
	mb = rule_microbatches(a);
	held = retained_bytes(a);
	analysis_reshard_format(r, policy, sizeof(policy));
	rule_unit_container(a->units.repeating_unit_name, container, sizeof(container));
	if (lg->gpu_mem_bytes > 0)
		snprintf(headroom, sizeof(headroom), "\nheadroom: %s of %s left after the sharded state (before activations)",
			 rule_format_bytes((double)lg->headroom_bytes, b1, sizeof(b1)),
			 rule_format_bytes((double)lg->gpu_mem_bytes, b2, sizeof(b2)));

	switch (r->policy) {
	case ANALYSIS_RESHARD_TRUE:
		message = finding_printf("reshard_after_forward=True: %u non-root units are gathered again for "
					 "backward (%u extra AllGathers per step); retaining them would save those "
					 "gathers for %s more memory",
					 r->resharded_units, mb * r->resharded_units,
					 rule_format_bytes((double)r->retain_extra_bytes, b3, sizeof(b3)));
		break;
	case ANALYSIS_RESHARD_FALSE:
		message = finding_printf("reshard_after_forward=False: %u non-root units stay gathered from forward "
					 "to backward; resharding would free up to %s at the cost of %u more AllGathers "
					 "per step",
					 r->retained_units, rule_format_bytes(held, b3, sizeof(b3)),
					 r->reshard_extra_gathers);
		break;
	case ANALYSIS_RESHARD_GROUP:
		message = finding_printf("reshard_after_forward=%u: %u non-root units are gathered again for backward "
					 "on a %u-rank group (inside the node)",
					 r->group_size, r->group_units, r->group_size);
		break;
	default:
		message = finding_printf("reshard_after_forward differs between units: %u resharded, %u retained, "
					 "%u resharded to a group",
					 r->resharded_units, r->retained_units, r->group_units);
		break;
	}
	{
		char retain[200] = "", reshard[200] = "", cycles[200] = "";

		if (r->resharded_units + r->group_units)
			snprintf(retain, sizeof(retain),
				 "\nretaining every resharded unit: %u fewer AllGathers per step, +%s held from forward "
				 "to backward",
				 mb * (r->resharded_units + r->group_units),
				 rule_format_bytes((double)r->retain_extra_bytes, b2, sizeof(b2)));
		if (r->retained_units)
			snprintf(reshard, sizeof(reshard),
				 "\nresharding every retained unit: %u more AllGathers per step (+%s on the wire), up "
				 "to %s freed",
				 r->reshard_extra_gathers,
				 rule_format_bytes((double)r->reshard_extra_wire_bytes, b3, sizeof(b3)),
				 rule_format_bytes(held, b4, sizeof(b4)));
		if (mb > 1 || r->recompute_regathers)
			snprintf(cycles, sizeof(cycles),
				 "\n%u micro-batch%s per step, each gathering its resharded units again%s", mb,
				 mb == 1 ? "" : "es",
				 r->recompute_regathers ? "; activation checkpointing re-gathers each once more for "
							  "its recomputation (not a wrap or reshard choice)"
							: "");
		evidence = finding_printf("detected: %s (non-root units: %u; resharded %u, retained %u, to a group %u; "
					  "root %s)\n"
					  "backward AllGathers per step: %u, moving %s on the wire%s%s%s%s",
					  policy, r->units, r->resharded_units, r->retained_units, r->group_units,
					  r->root_resharded ? "resharded too" : "kept (as FSDP2 does)",
					  a->per_step.backward_allgathers,
					  rule_format_bytes((double)r->regather_bytes_per_step, b1, sizeof(b1)),
					  cycles, retain, reshard, headroom);
	}
	/* an integer (and HYBRID_SHARD) keep gathers inside a node: advice
	 * only for a job on more than one */
	nodes = analysis_nodes(a);
	ranks = a->world_size > 0 ? (uint32_t)a->world_size : a->ranks;
	if (nodes > 1 && ranks >= nodes)
		snprintf(in_node, sizeof(in_node),
			 "fully_shard(block, mp_policy=mp, reshard_after_forward=%u)      # backward gather inside the node\n",
			 ranks / nodes);
	fsdp2 = finding_printf(
		"# The trade, per unit:\n"
		"fully_shard(block, mp_policy=mp, reshard_after_forward=True)   # less peak memory, +1 AllGather\n"
		"fully_shard(block, mp_policy=mp, reshard_after_forward=False)  # +1 unit held, -1 AllGather\n"
		"%s"
		"# torchtitan's default: True for %s except the last block (backward needs it at once)%s",
		in_node, container,
		mb > 1 && a->microbatches.sync < mb
			? "\n# Accumulating without sync: keep the units gathered between those micro-batches too\n"
			  "model.set_requires_gradient_sync(False)   # micro-batches 1 .. K-1\n"
			  "model.set_reshard_after_backward(False)   # no re-gather in the next micro-batch's forward"
			: "");
	fsdp1 = finding_printf(
		"# FSDP1 chooses it with the sharding strategy:\n"
		"sharding_strategy=ShardingStrategy.FULL_SHARD     # reshard after forward\n"
		"sharding_strategy=ShardingStrategy.SHARD_GRAD_OP  # keep parameters from forward to backward%s",
		in_node[0] ? "\nsharding_strategy=ShardingStrategy.HYBRID_SHARD   # shard inside the node, replicate across"
			   : "");
	deepspeed = finding_printf(
		"// ZeRO-3 releases parameters after use; keep them longer (fewer re-gathers, more memory):\n"
		"\"zero_optimization\": { \"stage\": 3,\n"
		"  \"stage3_max_reuse_distance\": 1e9,      // parameters reused within this distance stay\n"
		"  \"stage3_max_live_parameters\": 1e9,\n"
		"  \"stage3_param_persistence_threshold\": 1e5 }");
	f = findings_take(out, self, RULE_INFO, message, evidence, fsdp2, fsdp1, deepspeed);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "units", r->units);
	finding_metric(f, "resharded_units", r->resharded_units);
	finding_metric(f, "retained_units", r->retained_units);
	finding_metric(f, "group_units", r->group_units);
	if (r->policy == ANALYSIS_RESHARD_GROUP)
		finding_metric(f, "group_size", r->group_size);
	finding_metric(f, "regather_bytes_per_step", (double)r->regather_bytes_per_step);
	finding_metric(f, "retain_extra_bytes", (double)r->retain_extra_bytes);
	finding_metric(f, "reshard_extra_gathers", r->reshard_extra_gathers);
	finding_metric(f, "microbatches", mb);
	finding_metric(f, "recompute_regathers", r->recompute_regathers);
	finding_metric(f, "reshard_extra_wire_bytes", (double)r->reshard_extra_wire_bytes);
	finding_metric(f, "retained_bytes", held);
	return 0;
}

const struct rule rule_reshard_policy = {
	.id = "reshard-policy",
	.title = "reshard_after_forward: the policy in use and what the other choice would cost",
	.explanation =
		"After a unit's forward, FSDP either frees the gathered parameters (reshard_after_forward=True: "
		"less peak memory, one more AllGather per unit for backward) or keeps them until backward "
		"(False: one gather fewer, the unit's full parameters held through the step); an integer "
		"reshards to a smaller group so the backward gather stays inside the node, offered (with "
		"FSDP1's HYBRID_SHARD) only for a job on more than one node. FSDP2 never "
		"reshards the root. Neither choice is right in general: a large block on a full GPU wants to "
		"reshard, a small block with headroom to spare wants to retain. This is information, not a "
		"fault: it states the trade with this job's numbers.",
	.max_severity = RULE_INFO,
	.check = check,
};
