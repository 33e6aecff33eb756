/*
 * restart.c - rule restart: the trace holds several worlds (an elastic
 * restart: new processes on new communicators, docs/patterns.md
 * "Restarts"), each diagnosed apart.
 *
 * A fact, not a fault of the wrap: the finding says how many worlds, their
 * sizes, which processes died in each and which stopped first (the one the
 * others most likely waited for), and which world the report's figures
 * are. Each world's own findings are in `lint`'s per-world blocks.
 */
#include "rules/rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* One world in a line of the evidence. */
static size_t world_line(const struct analysis_result *a, uint32_t i, char *buf, size_t len)
{
	const struct analysis_world *w = &a->worlds[i];
	const struct analysis_result *r = analysis_world_result(a, i);
	char policy[32], what[96], end[128];

	if (r->verdict == ANALYSIS_DIAGNOSED)
		snprintf(what, sizeof(what), "diagnosed: %u units x %u, reshard %s", r->units.repeating_units,
			 r->units.gathers_per_unit, analysis_reshard_format(&r->reshard, policy, sizeof(policy)));
	else
		snprintf(what, sizeof(what), "%s", analysis_verdict_name(r->verdict));
	if (!w->died)
		snprintf(end, sizeof(end), "its processes ended cleanly");
	else if (w->first_stop >= 0)
		snprintf(end, sizeof(end), "%u process%s did not end cleanly; rank %d (pid %u) stopped first", w->died,
			 w->died == 1 ? "" : "es", w->processes[w->first_stop].rank, w->processes[w->first_stop].pid);
	else
		snprintf(end, sizeof(end), "%u process%s did not end cleanly", w->died, w->died == 1 ? "" : "es");
	return (size_t)snprintf(buf, len, "\nworld %u%s: %d ranks (%u processes), %u steps analysed, %s; %s", i,
				(int32_t)i == a->headline_world ? " (the report's figures)" : "", (int)w->size,
				w->nprocesses, r->steps_analyzed, what, end);
}

/* The first world in which a process died, -1 none. */
static int first_death(const struct analysis_result *a)
{
	for (uint32_t i = 0; i < a->nworlds; i++)
		if (a->worlds[i].died && a->worlds[i].first_stop >= 0)
			return (int)i;
	return -1;
}

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	char sizes[128] = "", died[160] = "", evidence[2048] = "";
	size_t off = 0, eoff = 0;
	uint32_t dead = 0;

	(void)c;
	if (a->nworlds < 2)
		return 0;
	for (uint32_t i = 0; i < a->nworlds; i++) {
		if (off < sizeof(sizes))
			off += (size_t)snprintf(sizes + off, sizeof(sizes) - off, "%s%d",
						i == 0 ? "" : i + 1 == a->nworlds ? ", then " : ", ",
						(int)a->worlds[i].size);
		if (eoff < sizeof(evidence))
			eoff += world_line(a, i, evidence + eoff, sizeof(evidence) - eoff);
		dead += a->worlds[i].died;
	}
	int d = first_death(a);
	if (d >= 0) {
		const struct analysis_world_process *p = &a->worlds[d].processes[a->worlds[d].first_stop];
		snprintf(died, sizeof(died), "; rank %d (pid %u) of world %d stopped first", p->rank, p->pid, d);
	}
	char *message = finding_printf("restart: %u worlds of %s ranks (new processes on new communicators)%s; each "
				       "world is diagnosed apart, the figures are world %d's",
				       a->nworlds, sizes, died, a->headline_world);
	char *ev = finding_printf("%s", evidence[0] == '\n' ? evidence + 1 : evidence);
	char *fsdp2 = finding_printf(
	    "# Not a wrap problem: the launcher (torchrun / torchelastic) replaced every worker after %s.\n"
	    "# Find why%s died: its stderr, dmesg (the OOM killer), NCCL_DEBUG=INFO, a node that left;\n"
	    "# --max-restarts bounds the restarts, and checkpoints taken often make each one cheap:\n"
	    "#   torchrun --max-restarts 3 --nnodes 1:4 ... train.py",
	    d >= 0 ? "a worker died" : "a membership change", d >= 0 ? " that process" : " a worker");
	struct finding *f = findings_take(out, self, RULE_INFO, message, ev, fsdp2, NULL, NULL);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "worlds", a->nworlds);
	finding_metric(f, "headline_world", a->headline_world);
	finding_metric(f, "first_world_size", a->worlds[0].size);
	finding_metric(f, "last_world_size", a->worlds[a->nworlds - 1].size);
	finding_metric(f, "processes_died", dead);
	if (d >= 0) {
		finding_metric(f, "first_stop_world", d);
		finding_metric(f, "first_stop_rank", a->worlds[d].processes[a->worlds[d].first_stop].rank);
	}
	return 0;
}

const struct rule rule_restart = {
	.id = "restart",
	.title = "The job restarted: the trace holds several worlds",
	.explanation =
		"An elastic launcher (torchrun / torchelastic) that sees a worker die stops every worker it "
		"started and starts new processes, which make new communicators, possibly with fewer ranks, and "
		"reuse the rank numbers. Their traffic is two jobs, not one: fsdpscope diagnoses each world "
		"apart, by the communicators its processes share, and never merges two processes of one rank "
		"number across worlds. The report's figures are the last world's that has an analysed step. Jobs "
		"run one after another into one collector read the same way.",
	.max_severity = RULE_INFO,
	.check = check,
};
