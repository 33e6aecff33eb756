/*
 * not_diagnosed.c - rule not-diagnosed: the trace could not be diagnosed.
 *
 * "Could not diagnose" is never "clean": a trace without a training step,
 * without an FSDP group, or with a pattern the analysis does not cover gets
 * this finding, at error severity, and `lint` exits with its own status
 * (3) whatever --fail-on says, so that a CI gate cannot pass on a verdict
 * that was never reached. Beside a hang or a mismatch (the job's own error,
 * which lint's exit status carries) it is information.
 */
#include "rules/rules.h"

#include <errno.h>
#include <stdlib.h>

static const char *what_to_do(enum analysis_undecided reason)
{
	switch (reason) {
	case ANALYSIS_UNDECIDED_NO_COLLECTIVES:
		return "record the job under 'fsdpscope run' (or with the agent preloaded in every rank) so that its "
		       "NCCL calls are seen";
	case ANALYSIS_UNDECIDED_NO_FSDP:
		return "if the job shards parameters, name its FSDP communicator with --fsdp-comm ID (the ids are "
		       "listed under 'communicators' in 'fsdpscope report')";
	case ANALYSIS_UNDECIDED_NO_STEP:
		return "record more steps (at least three alike after the first), or mark steps with NVTX ranges "
		       "and pass --step-ranges";
	case ANALYSIS_UNDECIDED_INCOMPLETE:
		return "record again with a larger ring (FSDPSCOPE_RING_SLOTS) if collectives were lost, and let the "
		       "job end (or record more steps) if its records stop early";
	case ANALYSIS_UNDECIDED_NO_REDUCTION:
		return "record training steps (not only evaluation), or name the FSDP communicator with --fsdp-comm";
	default:
		return "look at 'fsdpscope report' for the communicators and the step, and report the pattern "
		       "with the trace";
	}
}

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	(void)c;
	if (a->verdict != ANALYSIS_UNDECIDED)
		return 0;
	/* A job that hangs or desyncs has its error already (collective-hang,
	 * collective-mismatch): the wrap not judged is then information, not
	 * a second error beside the one that stopped the job. */
	int stopped = a->flight.hangs_total > 0 || a->flight.mismatches_total > 0;
	char *message = stopped ? finding_printf("the wrap was not judged: %s; the job's error is its %s", a->undecided_why,
						 a->flight.hangs_total ? "collective-hang" : "collective-mismatch")
				: finding_printf("could not diagnose this trace: %s", a->undecided_why);
	char *evidence = finding_printf("%llu collectives from %u ranks; %u steps analysed (%s); %u communicators "
					"on rank %d; reason: %s",
					(unsigned long long)a->trace.collectives, a->ranks, a->steps_analyzed,
					analysis_step_detection_name(a->step_detection), a->ncomms, a->headline_rank,
					analysis_undecided_name(a->undecided_reason));
	char *fsdp2 = finding_printf("# %s", what_to_do(a->undecided_reason));
	struct finding *f = findings_take(out, self, stopped ? RULE_INFO : RULE_ERROR, message, evidence, fsdp2, NULL, NULL);
	if (!f)
		return -ENOMEM;
	finding_metric(f, "reason", a->undecided_reason);
	finding_metric(f, "steps_analyzed", a->steps_analyzed);
	return 0;
}

const struct rule rule_not_diagnosed = {
	.id = "not-diagnosed",
	.title = "The trace could not be diagnosed",
	.explanation =
		"Every verdict of fsdpscope rests on reading the FSDP group's gathers and reduce-scatters step "
		"by step. When the trace has no training step, no communicator that carries FSDP's traffic, or "
		"a pattern the analysis does not know, no verdict was reached: that is not a clean bill of "
		"health, and lint says so with an exit status of its own.",
	.max_severity = RULE_ERROR,
	.check = check,
};
