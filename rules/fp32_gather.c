/*
 * fp32_gather.c - rule fp32-gather: parameters gathered in fp32 where the
 * compute is 16-bit.
 *
 * FSDP gathers parameters in MixedPrecisionPolicy.param_dtype. A unit
 * sharded without the policy (or a job without one) gathers fp32: twice the
 * wire bytes and twice the transient memory of bf16, for weights the
 * compute casts to bf16 anyway. The compute dtype is known when other
 * gathers are 16-bit (a unit missed the policy) or from the user's
 * --param-dtype (default bf16; pass fp32 for a job that computes in fp32).
 */
#include "rules/rules.h"

#include "common/record.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DTYPE_BIT(d) (1u << (d))

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	uint32_t dtypes = a->sizes.allgather_dtypes;
	uint32_t half_bits = DTYPE_BIT(FSS_DTYPE_BFLOAT16) | DTYPE_BIT(FSS_DTYPE_FLOAT16);
	int half_seen = (dtypes & half_bits) != 0, declared_half;
	double fp32_bytes = 0, all_bytes = 0, share;
	uint32_t fp32_gathers = 0;
	char names[160] = "", b1[32], b2[32], declared[64];
	char *message, *evidence, *fsdp2, *fsdp1, *deepspeed;
	struct finding *f;

	if (a->steps_analyzed == 0 || !(dtypes & DTYPE_BIT(FSS_DTYPE_FLOAT32)))
		return 0;
	declared_half = a->options.param_bytes > 0 && a->options.param_bytes < 4;
	if (!half_seen && !declared_half)
		return 0;
	for (uint32_t i = 0; i < a->ngathers; i++) {
		const struct analysis_gather *g = &a->gathers[i];
		double out_bytes = (double)g->bytes * (g->nranks > 0 ? g->nranks : 1);

		all_bytes += out_bytes;
		if (g->dtype != FSS_DTYPE_FLOAT32)
			continue;
		fp32_bytes += out_bytes;
		fp32_gathers++;
		/* Name a few of the fp32 units, to point at the fully_shard call. */
		if (g->name[0] && strlen(names) + strlen(g->name) + 8 < sizeof(names) && !strstr(names, g->name))
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s'%s'", names[0] ? ", " : "",
				 g->name);
	}
	/* No per-gather table: all we know is that fp32 gathers exist. */
	share = all_bytes > 0 ? fp32_bytes / all_bytes : 1.0;
	if (share < rule_threshold(c, RULE_T_FP32_GATHER_FRACTION))
		return 0;
	if (half_seen)
		snprintf(declared, sizeof(declared), "other gathers are 16-bit");
	else
		snprintf(declared, sizeof(declared), "compute declared %g-byte (--param-dtype)", a->options.param_bytes);

	message = finding_printf("%.0f%% of gathered bytes are fp32 while %s: twice the wire bytes and transient "
				 "memory of bf16",
				 100 * share, declared);
	evidence = finding_printf("fp32 AllGathers per step: %u of %u, %s of %s gathered%s%s\n"
				  "AllGather dtypes seen:%s%s%s%s; parameter bytes declared: %g",
				  fp32_gathers, a->ngathers, rule_format_bytes(fp32_bytes, b1, sizeof(b1)),
				  rule_format_bytes(all_bytes, b2, sizeof(b2)), names[0] ? "; fp32 units: " : "", names,
				  dtypes & DTYPE_BIT(FSS_DTYPE_FLOAT32) ? " fp32" : "",
				  dtypes & DTYPE_BIT(FSS_DTYPE_BFLOAT16) ? " bf16" : "",
				  dtypes & DTYPE_BIT(FSS_DTYPE_FLOAT16) ? " fp16" : "",
				  dtypes & ~(half_bits | DTYPE_BIT(FSS_DTYPE_FLOAT32)) ? " other" : "",
				  a->options.param_bytes);
	fsdp2 = finding_printf(
		"# Pass the same policy to every fully_shard call, the root's included:\n"
		"mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)\n"
		"for block in model.layers:\n"
		"    fully_shard(block, mp_policy=mp)\n"
		"fully_shard(model, mp_policy=mp)\n"
		"# If the job computes in fp32 on purpose: fsdpscope lint --param-dtype fp32");
	fsdp1 = finding_printf("model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}),\n"
			       "             mixed_precision=MixedPrecision(param_dtype=torch.bfloat16,\n"
			       "                                            reduce_dtype=torch.float32,\n"
			       "                                            buffer_dtype=torch.bfloat16))");
	deepspeed = finding_printf("// ZeRO-3 gathers the 16-bit copy when mixed precision is on:\n"
				   "\"bf16\": { \"enabled\": true }");
	f = findings_take(out, self, RULE_WARNING, message, evidence, fsdp2, fsdp1, deepspeed);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "fp32_gathered_fraction", share);
	finding_metric(f, "fp32_gathered_bytes_per_step", fp32_bytes);
	finding_metric(f, "fp32_allgathers", fp32_gathers);
	finding_metric(f, "declared_param_bytes", a->options.param_bytes);
	return 0;
}

const struct rule rule_fp32_gather = {
	.id = "fp32-gather",
	.title = "Parameters gathered in fp32 where the compute is 16-bit",
	.explanation =
		"With mixed precision FSDP keeps fp32 master shards but gathers the parameters in the compute "
		"dtype (MixedPrecisionPolicy.param_dtype, usually bf16). A unit sharded without the policy, or "
		"a job that forgot it, gathers fp32 and casts after: every AllGather moves twice the bytes, the "
		"gathered copy takes twice the memory (the transient row of the ledger), and gathers that were "
		"hidden become bandwidth-bound. Reduce in fp32 is fine and common; gather in fp32 is not.",
	.max_severity = RULE_WARNING,
	.check = check,
};
