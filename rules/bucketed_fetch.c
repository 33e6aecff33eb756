/*
 * bucketed_fetch.c - rule bucketed-fetch: the gathers follow fetch buckets
 * (DeepSpeed ZeRO-3), not FSDP units.
 *
 * ZeRO-3 gathers the parameters a module needs plus those of the next
 * modules until a bucket (stage3_prefetch_bucket_size elements) is full,
 * as one flat gather or as per-parameter gathers coalesced in one group;
 * it reduces gradients in reduce buckets. Its granularity is set by those
 * sizes, not by wrapping, so the wrap rules do not apply: this rule says
 * so, with the job's own numbers, and words the advice in DeepSpeed's
 * terms. Severity: a warning when the median fetch is small enough to be
 * latency-bound (the small-collectives threshold), information otherwise.
 */
#include "rules/rules.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One significant digit, rounded up: 3.7e6 -> 4e6. */
static double round_up_1sig(double x)
{
	if (x <= 0)
		return 0;
	double p = pow(10.0, floor(log10(x)));
	return ceil(x / p) * p;
}

/* Ranks per node when the job ran on several (analysis_nodes, the count
 * every rule's node-level advice reads) and they split evenly, 0
 * otherwise: the node size hpZ's group would have. */
static uint32_t ranks_per_node(const struct analysis_result *a)
{
	uint32_t nodes = analysis_nodes(a);
	uint32_t ranks = a->world_size > 0 ? (uint32_t)a->world_size : a->ranks;
	return nodes > 1 && ranks % nodes == 0 ? ranks / nodes : 0;
}

/* ZeRO++'s settings as they apply to what was seen (DeepSpeed
 * partition_parameters.py: all_gather_coalesced, _all_gather_coalesced):
 * qwZ fetches 8-bit values and their scales, two gathers a fetch, half the
 * bytes: worth it where fetches are bandwidth-bound, not where they are
 * latency-bound; hpZ fetches the backward's parameters from a secondary
 * partition inside the node. Writes the lines of the DeepSpeed block and
 * the evidence's line. */
static void zeropp_advice(const struct analysis_result *a, int latency_bound, char *fix, size_t fixlen, char *seen,
			  size_t seenlen)
{
	const struct analysis_buckets *b = &a->buckets;
	int32_t hpz = 0;
	for (uint32_t i = 0; i < a->ncomms; i++)
		if (a->comms[i].role == ANALYSIS_ROLE_FSDP_REGATHER)
			hpz = a->comms[i].nranks;
	uint32_t node = ranks_per_node(a);
	char hpz_line[200] = "", qwz_line[200] = "";
	if (hpz)
		snprintf(hpz_line, sizeof hpz_line,
			 "\n  \"zero_hpz_partition_size\": %d  // on: %u backward fetches from the secondary partition "
			 "on the %d-rank group",
			 hpz, b->regather_fetches_per_step, hpz);
	else if (node)
		snprintf(hpz_line, sizeof hpz_line,
			 "\n  \"zero_hpz_partition_size\": %u  // hpZ: the %u ranks of a node keep a secondary "
			 "partition: backward fetches stay inside it",
			 node, node);
	const char *comma = hpz_line[0] ? "," : "";
	if (b->quantized_fetches_per_step)
		snprintf(qwz_line, sizeof qwz_line,
			 "\n  \"zero_quantized_weights\": %s%s  // on: %u fetches are int8 values + fp32 scales, two "
			 "gathers each%s",
			 latency_bound ? "false" : "true", comma, b->quantized_fetches_per_step,
			 latency_bound ? ": small fetches pay for the second (off, or larger buckets)" : "");
	else if (!latency_bound)
		snprintf(qwz_line, sizeof qwz_line,
			 "\n  \"zero_quantized_weights\": true%s  // qwZ: int8 fetches, half the bytes of bf16, two "
			 "gathers each",
			 comma);
	snprintf(fix, fixlen, "%s%s", qwz_line, hpz_line);
	seen[0] = 0;
	if (b->quantized_fetches_per_step || b->regather_fetches_per_step) {
		char on_hpz[64] = "";
		if (b->regather_fetches_per_step)
			snprintf(on_hpz, sizeof on_hpz, ", %u on the %d-rank hpZ group", b->regather_fetches_per_step,
				 hpz);
		snprintf(seen, seenlen, "\nZeRO++: %u fetches quantized (int8 values + fp32 scales: one fetch)%s",
			 b->quantized_fetches_per_step, on_hpz);
	}
}

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	const struct analysis_buckets *b = &a->buckets;
	if (a->verdict != ANALYSIS_BUCKETED || a->steps_analyzed == 0 || b->fetches_per_step == 0)
		return 0;
	double pbytes = a->options.param_bytes > 0 ? a->options.param_bytes : 2.0;
	double median_bytes = (double)b->fetch_elements_median * pbytes;
	double threshold = rule_threshold(c, RULE_T_SMALL_GATHER_BYTES);
	enum rule_severity sev = median_bytes < threshold ? RULE_WARNING : RULE_INFO;
	double P = (double)b->reduce_elements_per_step;
	double ratio = P > 0 ? (double)b->gathered_elements_per_step / P : 0;
	int L = a->options.layers;
	double layer = L > 0 && P > 0 ? P / L : 0;
	double bucket = round_up_1sig(layer > 2.0 * (double)b->fetch_elements_max ? layer : 2.0 * (double)b->fetch_elements_max);
	char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], b7[32], b8[32], form[160], per_layer[96] = "", reuse[200];
	char zeropp[400], zeropp_seen[160];
	zeropp_advice(a, sev == RULE_WARNING, zeropp, sizeof zeropp, zeropp_seen, sizeof zeropp_seen);

	if (b->grouped_fetches)
		snprintf(form, sizeof form,
			 "%u of them coalesce per-parameter gathers in one group (up to %u calls each): %u calls",
			 b->grouped_fetches, b->max_calls_per_fetch, b->calls_per_step);
	else
		snprintf(form, sizeof form, "each one flat gather of a bucket (%u calls)", b->calls_per_step);
	if (layer > 0)
		snprintf(per_layer, sizeof per_layer, "\n--layers %d: one layer holds about %s parameters", L,
			 rule_format_count(layer, b1, sizeof b1));
	if (ratio > 1.05)
		snprintf(reuse, sizeof reuse,
			 "%.2f x the parameters: backward fetches %.0f%% of them again (released after forward)", ratio,
			 100 * (ratio - 1));
	else if (ratio > 0 && ratio < 0.95)
		snprintf(reuse, sizeof reuse,
			 "%.2f x the parameters: %.0f%% are never fetched in a step (persistent, under "
			 "stage3_param_persistence_threshold, or kept live)",
			 ratio, 100 * (1 - ratio));
	else
		snprintf(reuse, sizeof reuse, "%.2f x the parameters: each fetched about once a step", ratio);

	char *message = finding_printf(
		"bucketed fetching (DeepSpeed ZeRO-3): %u gathers per step of median %s elements follow fetch "
		"buckets, not modules; granularity is set by the bucket sizes, and the wrap rules do not apply",
		b->fetches_per_step, rule_format_count((double)b->fetch_elements_median, b1, sizeof b1));
	char *evidence = finding_printf(
		"fetches per step: %u AllGather events; %s\n"
		"elements per fetch: min %s, median %s, max %s (median %s gathered in the parameter dtype)\n"
		"gathered per step: %s elements, %s\n"
		"reduce buckets per step: %u ReduceScatters, %s elements in all (every gradient once: %s "
		"parameters), largest %s; %u of them of a size some gather has%s%s",
		b->fetches_per_step, form, rule_format_count((double)b->fetch_elements_min, b1, sizeof b1),
		rule_format_count((double)b->fetch_elements_median, b2, sizeof b2),
		rule_format_count((double)b->fetch_elements_max, b3, sizeof b3),
		rule_format_bytes(median_bytes, b4, sizeof b4),
		rule_format_count((double)b->gathered_elements_per_step, b5, sizeof b5), reuse,
		b->reduce_buckets_per_step, rule_format_count(P, b6, sizeof b6), rule_format_count(P, b7, sizeof b7),
		rule_format_count((double)b->reduce_elements_max, b8, sizeof b8), b->reduce_sizes_matching, per_layer,
		zeropp_seen);
	char *deepspeed = finding_printf(
		"// the fetches seen hold at most %.3g elements: larger buckets make fewer, larger gathers\n"
		"\"zero_optimization\": {\n"
		"  \"stage\": 3,\n"
		"  \"stage3_prefetch_bucket_size\": %.3g,   // elements per fetch%s\n"
		"  \"stage3_max_live_parameters\": %.3g,    // at least two buckets gathered at once\n"
		"  \"stage3_param_persistence_threshold\": %.3g,  // tensors under this are fetched once and stay\n"
		"  \"stage3_max_reuse_distance\": %.3g%s      // parameters reused within this stay gathered%s\n"
		"}",
		(double)b->fetch_elements_max, bucket, layer > 0 ? ": at least one layer" : "",
		bucket * 2 > 1e9 ? bucket * 2 : 1e9,
		(double)b->fetch_elements_min < 1e5 ? 1e5 : round_up_1sig((double)b->fetch_elements_min),
		bucket * 2 > 1e9 ? bucket * 2 : 1e9, zeropp[0] ? "," : "", zeropp);
	char *fsdp2 = finding_printf("# This job fetches by buckets (DeepSpeed ZeRO-3). In FSDP2 the unit plays the "
				     "bucket's part:\n"
				     "for block in model.layers:\n"
				     "    fully_shard(block)   # one gather per block\n"
				     "fully_shard(model)");
	struct finding *f = findings_take(out, self, sev, message, evidence, fsdp2, NULL, deepspeed);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "fetches_per_step", b->fetches_per_step);
	finding_metric(f, "calls_per_step", b->calls_per_step);
	finding_metric(f, "grouped_fetches", b->grouped_fetches);
	finding_metric(f, "fetch_elements_median", (double)b->fetch_elements_median);
	finding_metric(f, "fetch_elements_max", (double)b->fetch_elements_max);
	finding_metric(f, "gathered_elements_per_step", (double)b->gathered_elements_per_step);
	finding_metric(f, "reduce_buckets_per_step", b->reduce_buckets_per_step);
	finding_metric(f, "params", P);
	finding_metric(f, "suggested_prefetch_bucket_size", bucket);
	return 0;
}

const struct rule rule_bucketed_fetch = {
	.id = "bucketed-fetch",
	.title = "Bucketed fetching (DeepSpeed ZeRO-3): granularity set by bucket sizes, not by wrapping",
	.explanation =
		"DeepSpeed ZeRO-3 does not gather per wrapped module: it fetches the parameters the next modules "
		"need in buckets of stage3_prefetch_bucket_size elements, keeps small tensors resident "
		"(stage3_param_persistence_threshold), keeps parameters that are reused soon "
		"(stage3_max_reuse_distance, stage3_max_live_parameters), and reduces gradients in reduce "
		"buckets. So its gathers need not line up with blocks, and per-module wrap advice does not "
		"apply: the number and size of its gathers, and so how latency-bound they are, follow from "
		"those settings.",
	.max_severity = RULE_WARNING,
	.check = check,
};
