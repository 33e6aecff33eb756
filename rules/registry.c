/*
 * registry.c - the list of rules, in the order they run and are reported:
 * a job that hangs or desyncs first (nothing else matters until it runs),
 * which world the figures are (a restart) and a rank claimed twice,
 * then the wrap (the thing to fix before looking anywhere else), then
 * overlap, policy, sizes, dtypes and ranks.
 */
#include "rules/rules.h"

#include <string.h>

static const struct rule *const registry[] = {
	&rule_collective_hang,
	&rule_collective_mismatch,
	&rule_restart,
	&rule_duplicate_rank,
	&rule_not_diagnosed,
	&rule_wrap_too_fine,
	&rule_wrap_too_coarse,
	&rule_gather_count_mismatch,
	&rule_bucketed_fetch,
	&rule_exposed_gather,
	&rule_reshard_policy,
	&rule_small_collectives,
	&rule_fp32_gather,
	&rule_rank_skew,
};

/* The disabled mask has one bit per rule. */
_Static_assert(sizeof(registry) / sizeof(registry[0]) <= 64, "rule_config.disabled holds 64 rules");

const struct rule *const *rules_all(size_t *n)
{
	*n = sizeof(registry) / sizeof(registry[0]);
	return registry;
}

const struct rule *rules_find(const char *id)
{
	for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++)
		if (strcmp(registry[i]->id, id) == 0)
			return registry[i];
	return NULL;
}

int rules_run(const struct analysis_result *a, const struct rule_config *c, findings_t *out)
{
	for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++) {
		int err;

		if (c->disabled & (1ull << i))
			continue;
		err = registry[i]->check(registry[i], a, c, out);
		if (err)
			return err;
	}
	return rules_predict_gains(a, c, out);
}
