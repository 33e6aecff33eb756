/*
 * diagnosis.h - from an analysis to what is said about it: the rules run
 * over one analysis_result, giving the findings and the bounded copy of
 * them that a live state keeps (collector/live.h).
 *
 * lint, report, the end of a session, the session's live diagnoses and the
 * dashboard's replay all diagnose through diagnosis_from_result, so a
 * result gets the same findings wherever it is diagnosed.
 */
#ifndef FSS_RULES_DIAGNOSIS_H
#define FSS_RULES_DIAGNOSIS_H

#include <stddef.h>

#include "collector/analysis.h"
#include "collector/live.h"
#include "rules/findings.h"
#include "rules/rules.h"

/*
 * diagnosis_from_result - run the rules enabled in rc (NULL: every rule,
 * default thresholds) over r. Appends the findings to out (the caller's
 * list, empty as a rule; NULL when only the live copy is wanted) and, when
 * live is not NULL, writes the list's first findings (at most live_max)
 * into live[] as a live state keeps them (diagnosis_live_findings), their
 * number in *nlive (nlive may be NULL). r is read only. Returns 0 or
 * -ENOMEM; on failure out may hold some findings and *nlive is 0.
 */
int diagnosis_from_result(const struct analysis_result *r, const struct rule_config *rc, findings_t *out,
			  struct live_finding *live, size_t live_max, size_t *nlive);

/*
 * diagnosis_live_findings - the findings of list as a live state keeps
 * them (bounded, plain): rule, severity, message, evidence, and the fix
 * (FSDP2 first, then FSDP1 and DeepSpeed under their names, cut to fit).
 * Returns how many of out[0..max) it filled; list may be NULL (none).
 */
size_t diagnosis_live_findings(const findings_t *list, struct live_finding *out, size_t max);

#endif
