/*
 * gather_count_mismatch.c - rule gather-count-mismatch: with the user's
 * layer count (--layers L), the forward AllGathers per step against what a
 * per-block wrap issues: L + the root.
 *
 * This is the check the FSDP incident write-ups recommend doing first:
 * count the AllGathers per step, compare with the model's repeating units.
 * It needs no repeat inference, so it also catches wraps whose gathers do
 * not form a clean repeat (mixed specs, groups of blocks, buckets).
 */
#include "rules/rules.h"

#include <errno.h>
#include <stdlib.h>

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	const struct analysis_units *u = &a->units;
	uint32_t L, forward = a->units.forward_units, root, blocks, expected;
	enum rule_severity sev;
	char container[96];
	char *message, *evidence, *fsdp2, *fsdp1, *deepspeed;
	struct finding *f;

	if (!rule_diagnosed(a) || a->options.layers <= 0 || forward == 0)
		return 0;
	L = (uint32_t)a->options.layers;
	if (u->layers_given && u->repeating_units == L && u->root_gathers <= 2) {
		/* The repeat of exactly L copies was found and covers all but the
		 * root's gather(s): its outside is the root. (A repeat of L copies
		 * that leaves many gathers outside is a coincidence of sizes, e.g.
		 * k and v of one per-Linear block, not the layers.) */
		root = u->root_gathers;
	} else {
		/* No repeat of L copies: assume FSDP2's one root unit. */
		root = forward > 1 ? 1 : 0;
	}
	blocks = forward - (root < forward ? root : forward);
	expected = L + root;
	if (blocks == L)
		return 0;
	sev = blocks > L ? RULE_ERROR : RULE_WARNING;
	rule_unit_container(u->repeating_unit_name, container, sizeof(container));

	if (blocks > L)
		message = finding_printf("%u forward AllGathers per %s for %u layers: %.1f per layer where a "
					 "per-block wrap issues 1 (%u in all)",
					 forward, rule_per(a), L, (double)blocks / L, expected);
	else
		message = finding_printf("%u forward AllGathers per %s for %u layers: %u unit(s) hold %.1f "
					 "layers each on average, where a per-block wrap issues %u",
					 forward, rule_per(a), L, blocks, blocks ? (double)L / blocks : (double)L, expected);
	evidence = finding_printf(
		"--layers %u: a per-block wrap issues %u forward AllGathers per %s (%u + %u root)\n"
		"the trace: %u forward AllGathers per %s (%u outside the root), %u AllGathers per step in all "
		"(%u forward + %u backward)\n"
		"repeat found in the forward gathers: %u x %u gather(s)%s",
		L, expected, rule_per(a), L, root, forward, rule_per(a), blocks, a->per_step.allgathers,
		a->per_step.forward_allgathers, a->per_step.backward_allgathers,
		u->repeating_units, u->gathers_per_unit,
		u->layers_given && u->repeating_units == L ? " (the --layers count)" : " (none with --layers copies)");
	fsdp2 = finding_printf("# One fully_shard per layer (%u), then the root: %u forward AllGathers per step.\n"
			       "for block in %s:\n"
			       "    fully_shard(block, mp_policy=mp)\n"
			       "fully_shard(model, mp_policy=mp)\n"
			       "# If the model does not have %u repeating layers, pass the right --layers.",
			       L, expected, container, L);
	fsdp1 = finding_printf(
		"model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}),  # exactly the %u blocks\n"
		"             forward_prefetch=True, backward_prefetch=BackwardPrefetch.BACKWARD_PRE)",
		L);
	deepspeed = finding_printf(
		"// ZeRO-3 gathers by bucket: expect about one gather per stage3_prefetch_bucket_size elements;\n"
		"// a bucket of one layer's parameters gives about one gather per layer.\n"
		"\"zero_optimization\": { \"stage\": 3, \"stage3_prefetch_bucket_size\": %.0f }",
		u->total_params > 0 ? (double)u->total_params / (L + 1) : 5e7);
	f = findings_take(out, self, sev, message, evidence, fsdp2, fsdp1, deepspeed);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "layers", L);
	finding_metric(f, "expected_forward_allgathers", expected);
	finding_metric(f, "forward_allgathers", forward);
	finding_metric(f, "root_gathers", root);
	finding_metric(f, "gathers_per_layer", (double)blocks / L);
	return 0;
}

const struct rule rule_gather_count_mismatch = {
	.id = "gather-count-mismatch",
	.title = "AllGathers per step do not match the model's layer count (--layers)",
	.explanation =
		"A model wrapped at its repeating block issues one forward AllGather per block plus one for the "
		"root (embeddings, final norm, head), and one more per block in backward when it reshards after "
		"forward. More gathers than layers means the lifecycle runs several times per layer (a wrap "
		"finer than the block: small latency-bound collectives); fewer means units span several layers "
		"(a coarser wrap: a larger transient memory row and less overlap). Counting gathers per step "
		"against the layer count is the first check to make, before looking anywhere else.",
	.max_severity = RULE_ERROR,
	.check = check,
};
