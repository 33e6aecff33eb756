/*
 * rank_skew.c - rule rank-skew: ranks arrive at collectives at different
 * times, and the others wait for the last one.
 *
 * Every collective completes only when its last rank joins, so the arrival
 * spread (last rank's enter - first rank's enter) is time the early ranks
 * spend waiting. A spread above a share of the step is reported; when one
 * rank is the last one consistently it is named (warning: a straggler:
 * its host, its data or its GPU differs); when the last rank changes from
 * collective to collective it is jitter (information).
 */
#include "rules/rules.h"

#include <errno.h>
#include <stdlib.h>

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	const struct analysis_spread *sp = &a->spread;
	const struct analysis_rank *slow = NULL;
	double step_frac, chance, share = sp->slowest_rank_fraction;
	int consistent;
	char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], who[160] = "";
	char *message, *evidence, *fsdp2;
	struct finding *f;

	if (a->steps_analyzed == 0 || sp->ranks < 2 || a->step_ns == 0)
		return 0;
	step_frac = (double)sp->skew_ns_per_step / (double)a->step_ns;
	if (step_frac < rule_threshold(c, RULE_T_SKEW_STEP_FRACTION))
		return 0;
	/* A rank is last 1/ranks of the time by chance alone: ask for clearly
	 * more than that, and at least the threshold. */
	chance = 1.5 / sp->ranks;
	if (chance > 0.9)
		chance = 0.9;
	consistent = sp->slowest_rank >= 0 && share >= rule_threshold(c, RULE_T_SKEW_SLOWEST_SHARE) && share >= chance;
	for (uint32_t i = 0; i < a->nper_rank; i++)
		if (a->per_rank[i].rank == sp->slowest_rank)
			slow = &a->per_rank[i];
	if (consistent && slow)
		snprintf(who, sizeof(who), "\nrank %d entered last in %u of %u matched collectives (%.0f%%); the others "
			 "waited %s per step for it",
			 sp->slowest_rank, slow->last_arrivals, slow->matched_collectives, 100 * share,
			 rule_format_ns((double)slow->late_ns_per_step, b5, sizeof(b5)));
	else if (sp->slowest_rank >= 0 && share >= 0)
		snprintf(who, sizeof(who), "\nthe last rank changes: rank %d is last most often, in %.0f%% of collectives",
			 sp->slowest_rank, 100 * share);

	if (consistent)
		message = finding_printf("rank %d is a straggler: it enters collectives last in %.0f%% of them; the "
					 "ranks' arrival spread, summed over a step's collectives, is %.0f%% of the step",
					 sp->slowest_rank, 100 * share, 100 * step_frac);
	else
		message = finding_printf("the ranks' arrival spread, summed over a step's collectives, is %.0f%% of the "
					 "step, with no single slow rank (jitter)",
					 100 * step_frac);
	evidence = finding_printf("arrival spread (last rank's enter - first rank's enter) summed over a step: %s "
				  "(%.1f%% of the %s step); largest for one collective: %s%s\n"
				  "step time per rank: %s .. %s%s",
				  rule_format_ns((double)sp->skew_ns_per_step, b1, sizeof(b1)), 100 * step_frac,
				  rule_format_ns((double)a->step_ns, b2, sizeof(b2)),
				  rule_format_ns((double)sp->max_skew_ns, b3, sizeof(b3)), who,
				  rule_format_ns((double)sp->step_ns_min, b4, sizeof(b4)),
				  rule_format_ns((double)sp->step_ns_max, b6, sizeof(b6)),
				  a->trust.ranks_lost ? "\nmatched across ranks up to each rank's first lost collective" : "");
	/* Not an FSDP setting: the same advice for every framework. */
	fsdp2 = finding_printf(
		"# Find what differs on the slow rank; the wrap is not the cause.\n"
		"#  - host: CPU affinity / NUMA (numactl --cpunodebind), noisy neighbours, throttling\n"
		"#  - data: uneven batches (variable sequence lengths: pack or bucket them),\n"
		"#          DataLoader(num_workers>0, pin_memory=True)\n"
		"#  - syncs: .item() / logging / checkpointing on one rank only\n"
		"#  - GPU or link: nvidia-smi -q -d CLOCK,PERFORMANCE; NCCL_DEBUG=INFO for the topology");
	f = findings_take(out, self, consistent ? RULE_WARNING : RULE_INFO, message, evidence, fsdp2, NULL, NULL);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "skew_ns_per_step", (double)sp->skew_ns_per_step);
	finding_metric(f, "skew_step_fraction", step_frac);
	finding_metric(f, "slowest_rank", sp->slowest_rank);
	finding_metric(f, "slowest_rank_fraction", share);
	finding_metric(f, "max_skew_ns", (double)sp->max_skew_ns);
	if (slow)
		finding_metric(f, "slowest_rank_late_ns_per_step", (double)slow->late_ns_per_step);
	return 0;
}

const struct rule rule_rank_skew = {
	.id = "rank-skew",
	.title = "Ranks reach collectives at different times (a straggler or jitter)",
	.explanation =
		"A collective finishes only when its last rank joins, so every rank waits for the slowest at "
		"every AllGather and ReduceScatter: the step runs at the pace of the slowest rank. When the same "
		"rank is last again and again, something about it differs (its host's CPU or NUMA placement, "
		"its share of the data, a host-side sync only it does, its GPU's clocks or links); when the last "
		"rank changes from call to call, it is jitter spread over all ranks. Measured from the host "
		"enter times of matched collectives.",
	.max_severity = RULE_WARNING,
	.check = check,
};
