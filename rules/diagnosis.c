/*
 * diagnosis.c - the rules over one analysis result, and the findings as a
 * live state keeps them.
 */
#include "rules/diagnosis.h"
#include "rules/finding_text.h"

#include "common/text_buffer.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

size_t diagnosis_live_findings(const findings_t *list, struct live_finding *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; list && i < findings_count(list) && n < max; i++) {
		const struct finding *f = findings_get(list, i);
		struct live_finding *l = &out[n++];

		memset(l, 0, sizeof(*l));
		text_fit(l->rule, sizeof(l->rule), f->rule->id);
		l->severity = (int)f->severity;
		text_fit(l->title, sizeof(l->title), f->rule->title);
		text_fit(l->message, sizeof(l->message), f->message ? f->message : "");
		text_fit(l->evidence, sizeof(l->evidence), f->evidence ? f->evidence : "");
		finding_text_fixes(f, l->fix, sizeof(l->fix));
	}
	return n;
}

int diagnosis_from_result(const struct analysis_result *r, const struct rule_config *rc, findings_t *out,
			  struct live_finding *live, size_t live_max, size_t *nlive)
{
	findings_t *list = out ? out : findings_new();
	struct rule_config defaults;
	int err;

	if (nlive)
		*nlive = 0;
	if (!list)
		return -ENOMEM;
	if (!rc) {
		rule_config_init(&defaults);
		rc = &defaults;
	}
	err = rules_run(r, rc, list);
	if (!err && live) {
		size_t n = diagnosis_live_findings(list, live, live_max);

		if (nlive)
			*nlive = n;
	}
	if (!out)
		findings_free(list);
	return err;
}
