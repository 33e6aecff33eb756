/*
 * small_collectives.c - rule small-collectives: the median AllGather moves
 * so few bytes that its time is latency, not bandwidth.
 *
 * A ring AllGather costs about (N - 1) latency steps plus its bytes over the
 * bus bandwidth; under about a megabyte the latency term dominates and
 * many small gathers cost far more than one gather of the same bytes.
 * Severity: a warning when the wrap is what makes them small (k > 1 gathers
 * per repeating unit, or no repeat at all); information when every block is
 * already one gather (the blocks themselves are small for this many ranks).
 * Latency-bound is analysis_gather_bound's judgement, the one exposed-gather
 * names its gathers by: where it says the median gather is bandwidth-bound,
 * the rule is silent. HSDP is offered only for a job on more than one node.
 */
#include "rules/rules.h"

#include <errno.h>
#include <stdlib.h>

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	const struct analysis_sizes *s = &a->sizes;
	const struct analysis_units *u = &a->units;
	double ranks, median_out, min_out, max_out, threshold = rule_threshold(c, RULE_T_SMALL_GATHER_BYTES);
	double rs_median_in, step_bytes = 0;
	enum rule_severity sev;
	char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], container[96];
	char *message, *evidence, *fsdp2, *fsdp1, *deepspeed;
	struct finding *f;
	struct analysis_gather median_gather;
	int multi_node;

	/* bucketed fetching has its own sizes rule (bucketed-fetch) */
	if (!rule_diagnosed(a) || a->per_step.allgathers == 0 || s->allgather_bytes_median == 0)
		return 0;
	ranks = u->shard_ranks ? (double)u->shard_ranks : a->world_size > 0 ? (double)a->world_size : 1.0;
	median_out = (double)s->allgather_bytes_median * ranks;
	if (median_out >= threshold)
		return 0;
	/* The same judgement as exposed-gather's: where the fitted model puts
	 * the median gather's time in its bytes, merging gathers saves nothing. */
	median_gather = (struct analysis_gather){.bytes = s->allgather_bytes_median, .nranks = (int32_t)ranks};
	if (analysis_gather_bound(a, &median_gather, threshold) == ANALYSIS_BOUND_BANDWIDTH)
		return 0;
	multi_node = analysis_nodes(a) > 1;
	min_out = (double)s->allgather_bytes_min * ranks;
	max_out = (double)s->allgather_bytes_max * ranks;
	rs_median_in = (double)s->reduce_scatter_bytes_median * ranks;
	for (uint32_t i = 0; i < a->ngathers; i++)
		step_bytes += (double)a->gathers[i].bytes * (a->gathers[i].nranks > 0 ? a->gathers[i].nranks : 1);
	sev = u->gathers_per_unit == 1 && u->repeating_units >= 1 ? RULE_INFO : RULE_WARNING;
	rule_unit_container(u->repeating_unit_name, container, sizeof(container));

	if (sev == RULE_WARNING)
		message = finding_printf("AllGathers are small and latency-bound: median %s gathered per call, %u "
					 "calls per step; fewer, larger units would move the same bytes",
					 rule_format_bytes(median_out, b1, sizeof(b1)), a->per_step.allgathers);
	else
		message = finding_printf("AllGathers are small (median %s gathered) although each block is one "
					 "unit: the blocks are small for %.0f ranks",
					 rule_format_bytes(median_out, b1, sizeof(b1)), ranks);
	evidence = finding_printf(
		"AllGather per event, gathered bytes over %.0f ranks: median %s (min %s, max %s); threshold %s\n"
		"AllGathers per step: %u moving %s; repeating units: %u x %u gather(s)\n"
		"ReduceScatter per event, input bytes: median %s; %u per step",
		ranks, rule_format_bytes(median_out, b1, sizeof(b1)), rule_format_bytes(min_out, b2, sizeof(b2)),
		rule_format_bytes(max_out, b3, sizeof(b3)), rule_format_bytes(threshold, b4, sizeof(b4)),
		a->per_step.allgathers, rule_format_bytes(step_bytes, b5, sizeof(b5)), u->repeating_units,
		u->gathers_per_unit, rule_format_bytes(rs_median_in, b6, sizeof(b6)), a->per_step.reduce_scatters);
	if (sev == RULE_WARNING)
		fsdp2 = finding_printf("# One unit per block, not per Linear: one gather moves the whole block.\n"
				       "for block in %s:\n"
				       "    fully_shard(block, mp_policy=mp)\n"
				       "fully_shard(model, mp_policy=mp)",
				       container);
	else
		fsdp2 = finding_printf("# Blocks this small: put two (or more) blocks in one unit%s\n"
				       "blocks = list(%s)\n"
				       "for i in range(0, len(blocks), 2):\n"
				       "    fully_shard(blocks[i:i + 2], mp_policy=mp)  # a list: one unit (PyTorch 2.6+)\n"
				       "fully_shard(model, mp_policy=mp)",
				       multi_node ? ", or use fewer ranks\n# per shard group (HSDP) so each rank's shard is larger."
						  : ".",
				       container);
	fsdp1 = finding_printf("# Wrap at the block (or by size, so that units are not tiny):\n"
			       "model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}))\n"
			       "# or: functools.partial(size_based_auto_wrap_policy, min_num_params=int(1e8))");
	deepspeed = finding_printf("\"zero_optimization\": { \"stage\": 3,\n"
				   "  \"stage3_prefetch_bucket_size\": 5e7,          // elements per fetch bucket\n"
				   "  \"stage3_param_persistence_threshold\": 1e6,   // params under this stay resident\n"
				   "  \"reduce_bucket_size\": 5e8 }                  // elements per reduce bucket");
	f = findings_take(out, self, sev, message, evidence, fsdp2, fsdp1, deepspeed);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "median_gathered_bytes", median_out);
	finding_metric(f, "min_gathered_bytes", min_out);
	finding_metric(f, "max_gathered_bytes", max_out);
	finding_metric(f, "threshold_bytes", threshold);
	finding_metric(f, "allgathers", a->per_step.allgathers);
	finding_metric(f, "gathered_bytes_per_step", step_bytes);
	return 0;
}

const struct rule rule_small_collectives = {
	.id = "small-collectives",
	.title = "Latency-bound collectives: AllGathers too small to use the bandwidth",
	.explanation =
		"A collective's time is a fixed latency per call (kernel launch, ring steps, synchronization) "
		"plus its bytes over the bandwidth. Below about a megabyte the fixed part dominates: moving the "
		"same bytes in many small gathers costs several times what one gather would, and each small "
		"gather has little compute to hide behind. Collectives love large contiguous payloads: that is "
		"why FSDP flattens a unit's parameters into one buffer, and why the unit should be a whole "
		"block. The threshold is the gathered (output) size per call; where the job's gathers come in "
		"two or more sizes, the latency and bandwidth fitted on them decide instead (the judgement "
		"exposed-gather names its gathers by), and gathers whose time is their bytes are not "
		"reported. Fewer ranks per shard group (HSDP) is offered only for a job on more than one node.",
	.max_severity = RULE_WARNING,
	.check = check,
};
