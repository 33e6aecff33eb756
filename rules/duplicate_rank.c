/*
 * duplicate_rank.c - rule duplicate-rank: two processes that ran at the
 * same time claim one rank.
 *
 * Not a restart (a restart's processes follow one another in time, and its
 * worlds are diagnosed apart): two jobs recorded into one trace, one
 * process's records given twice under two identities, or a damaged trace.
 * The analysis lists the processes apart and never merges their figures;
 * the headline figures are one of them, so the verdict may be about one
 * job only.
 */
#include "rules/rules.h"

#include <errno.h>
#include <stdlib.h>

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	(void)c;
	if (!a->duplicate_ranks)
		return 0;
	char *message = finding_printf("rank %d is claimed by two processes that ran at the same time (pids %u and %u): "
				       "not a restart; they are listed apart, not merged",
				       a->duplicate_rank, a->duplicate_pids[0], a->duplicate_pids[1]);
	char *evidence = finding_printf("%u rank%s claimed by more than one process of one world; %u processes with "
					"collectives; the headline figures (rank %d) are of the first such process the "
					"trace holds",
					a->duplicate_ranks, a->duplicate_ranks == 1 ? "" : "s", a->ranks,
					a->headline_rank);
	char *fsdp2 = finding_printf(
	    "# Record one job per trace: a collector (fsdpscope collect) that two jobs send to writes both\n"
	    "# into one trace; give each job its own --out / socket, or each node's trace once");
	struct finding *f = findings_take(out, self, RULE_WARNING, message, evidence, fsdp2, NULL, NULL);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "duplicate_ranks", a->duplicate_ranks);
	finding_metric(f, "duplicate_rank", a->duplicate_rank);
	return 0;
}

const struct rule rule_duplicate_rank = {
	.id = "duplicate-rank",
	.title = "Two processes that ran at the same time claim one rank",
	.explanation =
		"Every rank of a world is one process. Two processes with the same rank whose records overlap in "
		"time are not a restart: the trace holds two jobs (two launchers that sent to one collector), or "
		"the same records twice, or it is damaged. Merging them would count collectives twice and make "
		"a job of ranks that never ran, so fsdpscope lists them apart; the figures are one of them.",
	.max_severity = RULE_WARNING,
	.check = check,
};
