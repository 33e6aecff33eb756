/*
 * fix_gains.c - what each finding's fixes are predicted to gain, and the
 * severity that follows from it (rules_run's last pass, see rules.h).
 *
 * A fix that changes the FSDP policy (wrap per block, reshard, prefetch) is
 * the what-if model's change (collector/whatif.h): its gain is the
 * measured step minus the replayed one. A change the job already has is
 * not a fix of this job and is not listed; a change the model leaves out
 * is listed as not predicted, with the model's reason. A fix the model
 * cannot replay (start the first gather of a phase early, issue gathers
 * from a faster host thread, a faster link) can at most hide the exposed
 * AllGather time of the gathers it is about, which bounds its gain.
 *
 * A warning whose every fix is known to gain under fix_gain_fraction of
 * the step (predicted, or bounded under it) is info: the job cannot do
 * better by the fixes offered, so --fail-on warning passes it. One fix
 * not predicted keeps the warning.
 */
#include "collector/whatif.h"
#include "rules/rules.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The finding's metric `name`, or 0. */
static double metric_of(const struct finding *f, const char *name)
{
	for (size_t i = 0; i < f->nmetrics; i++)
		if (!strcmp(f->metrics[i].name, name))
			return f->metrics[i].value;
	return 0;
}

/* Attach change c's gain: predicted, left out with why, or nothing when
 * the job has it already. Returns 1 when something was attached. */
static int add_change(struct finding *f, const whatif_model_t *m, uint64_t step_ns, enum whatif_change c)
{
	for (uint32_t i = 0; m && i < whatif_count(m); i++) {
		const struct whatif_prediction *p = whatif_get(m, i);

		if (p->change == c) {
			finding_gain(f, whatif_change_name(c), FINDING_GAIN_WHATIF,
				     (int64_t)step_ns - (int64_t)p->step_ns, "the what-if replay of the change");
			return 1;
		}
	}
	for (uint32_t i = 0; m && i < whatif_left_out_count(m); i++) {
		const struct whatif_left_out *l = whatif_left_out_get(m, i);

		if (l->change == c) {
			finding_gain(f, whatif_change_name(c), FINDING_GAIN_NOT_PREDICTED, 0, l->why);
			return 1;
		}
	}
	if (m && whatif_note(m)[0] && c != WHATIF_WRAP_BLOCK) {
		finding_gain(f, whatif_change_name(c), FINDING_GAIN_NOT_PREDICTED, 0, whatif_note(m));
		return 1;
	}
	return 0;
}

/* A fix the model cannot replay, bounded by the exposed time it hides. */
static void add_bound(struct finding *f, const char *fix, double exposed_ns, const char *why)
{
	if (exposed_ns > 0)
		finding_gain(f, fix, FINDING_GAIN_AT_MOST, (int64_t)exposed_ns, why);
}

/* exposed-gather: one fix per cause present, as its fix texts list them. */
static void exposed_gather_gains(struct finding *f, const whatif_model_t *m, uint64_t step_ns)
{
	if (metric_of(f, "no_prefetch_ns") > 0) {
		add_change(f, m, step_ns, WHATIF_PREFETCH_1);
		add_change(f, m, step_ns, WHATIF_PREFETCH_2);
	}
	if (metric_of(f, "latency_bound_ns") > 0 && !add_change(f, m, step_ns, WHATIF_WRAP_BLOCK))
		add_bound(f, "latency-bound", metric_of(f, "latency_bound_ns"),
			  "fewer, larger gathers hide at most the latency-bound gathers' exposed time");
	add_bound(f, "first-of-phase", metric_of(f, "first_of_phase_ns"),
		  "an early first gather hides at most the first gathers' exposed time");
	add_bound(f, "bandwidth-bound", metric_of(f, "bandwidth_bound_ns"),
		  "a faster link or fewer bytes hide at most the bandwidth-bound gathers' exposed time");
	add_bound(f, "host-late", metric_of(f, "host_late_ns"),
		  "issuing on time hides at most the late gathers' exposed time");
}

static void gains_of(struct finding *f, const struct analysis_result *a, const whatif_model_t *m)
{
	const char *id = f->rule->id;

	if (!strcmp(id, "wrap-too-fine")) {
		add_change(f, m, a->step_ns, WHATIF_WRAP_BLOCK);
	} else if (!strcmp(id, "exposed-gather")) {
		exposed_gather_gains(f, m, a->step_ns);
	} else if (!strcmp(id, "small-collectives")) {
		if (!add_change(f, m, a->step_ns, WHATIF_WRAP_BLOCK))
			add_bound(f, "larger-collectives", (double)a->exposure.exposed_allgather_ns_per_step,
				  "larger collectives hide at most the exposed AllGather time");
	} else if (!strcmp(id, "reshard-policy")) {
		add_change(f, m, a->step_ns, WHATIF_RESHARD_FALSE);
		add_change(f, m, a->step_ns, WHATIF_RESHARD_TRUE);
	}
}

/* The evidence line of the gains, and the severity they allow. */
static int judge(struct finding *f, uint64_t step_ns, double fraction)
{
	char line[1024], b1[32];
	int at = snprintf(line, sizeof line, "predicted gain of each fix, per step of %s:",
			  rule_format_ns((double)step_ns, b1, sizeof b1));
	int all_small = step_ns > 0;

	for (size_t i = 0; i < f->ngains && at < (int)sizeof line; i++) {
		const struct finding_gain *g = &f->gains[i];
		double share = step_ns ? (double)g->gain_ns / (double)step_ns : 0;

		if (g->kind == FINDING_GAIN_NOT_PREDICTED) {
			all_small = 0;
			at += snprintf(line + at, sizeof line - (size_t)at, "%s %s not predicted (%s)", i ? ";" : "",
				       g->fix, g->why);
			continue;
		}
		all_small &= share < fraction;
		at += snprintf(line + at, sizeof line - (size_t)at, "%s %s %s%s (%.1f%%)", i ? ";" : "", g->fix,
			       g->kind == FINDING_GAIN_AT_MOST ? "at most " : "",
			       rule_format_ns((double)g->gain_ns, b1, sizeof b1), 100 * share);
	}
	if (finding_append_evidence(f, line) < 0)
		return -ENOMEM;
	if (f->severity != RULE_WARNING || !all_small)
		return 0;
	f->severity = RULE_INFO;
	snprintf(line, sizeof line,
		 "info, not a warning: every fix is predicted to gain under %.3g%% of the step (fix_gain_fraction)",
		 100 * fraction);
	return finding_append_evidence(f, line);
}

int rules_predict_gains(const struct analysis_result *a, const struct rule_config *c, findings_t *out)
{
	whatif_model_t *m = NULL;
	int err = 0;

	if (findings_count(out) == 0)
		return 0;
	if (whatif_new(a, &m) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < findings_count(out) && !err; i++) {
		struct finding *f = findings_at(out, i);

		gains_of(f, a, m);
		if (f->ngains)
			err = judge(f, a->step_ns, rule_threshold(c, RULE_T_FIX_GAIN_FRACTION));
	}
	whatif_free(m);
	return err;
}
