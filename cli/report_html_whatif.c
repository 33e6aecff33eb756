/*
 * report_html_whatif.c - the HTML report's what-if table and the predicted
 * gains of the findings' fixes, from the analysis' what-if model
 * (collector/whatif.h); the gains are the findings' own (rules/fix_gains.c).
 */
#include "cli/report_html_escape.h"
#include "cli/report_html_internal.h"
#include "collector/whatif.h"
#include "rules/rules.h"

#include <stdlib.h>
#include <string.h>

static const char whatif_head[] = "<h3 id=\"whatif\">What-if</h3>\n<table class=\"whatif\"><tr><th>change</th>"
				  "<th>predicted step</th><th>predicted exposed AllGather</th><th>predicted peak memory</th>"
				  "<th>basis</th></tr>\n";

struct html_whatif {
	whatif_model_t *model;
};

html_whatif_t *html_whatif_new(const struct analysis_result *a)
{
	html_whatif_t *w = calloc(1, sizeof *w);

	if (w && whatif_new(a, &w->model) < 0) {
		free(w);
		return NULL;
	}
	return w;
}

void html_whatif_free(html_whatif_t *w)
{
	if (!w)
		return;
	whatif_free(w->model);
	free(w);
}

const struct finding_gain *html_best_gain(const struct finding *f)
{
	const struct finding_gain *best = NULL;

	for (size_t i = 0; f && i < f->ngains; i++) {
		const struct finding_gain *g = &f->gains[i];

		if (g->kind != FINDING_GAIN_NOT_PREDICTED && (!best || g->gain_ns > best->gain_ns))
			best = g;
	}
	return best;
}

void html_whatif_table(FILE *out, const struct analysis_result *a, const html_whatif_t *w)
{
	char b1[32], b2[32], b3[32];

	(void)a;
	fputs(whatif_head, out);
	if (!w || !w->model) {
		fputs("</table>\n<p>what-if: not computed (out of memory).</p>\n", out);
		return;
	}
	for (uint32_t i = 0; i < whatif_count(w->model); i++) {
		const struct whatif_prediction *p = whatif_get(w->model, i);

		fprintf(out, "<tr class=\"whatif-row\"><td><code>%s</code></td><td>%s</td><td>%s</td><td>%s</td><td>",
			whatif_change_name(p->change), rule_format_ns((double)p->step_ns, b1, sizeof b1),
			rule_format_ns((double)p->exposed_allgather_ns, b2, sizeof b2),
			p->peak_known ? rule_format_bytes((double)p->peak_bytes, b3, sizeof b3) : "not known");
		html_escape_n(out, p->basis, strnlen(p->basis, sizeof p->basis));
		fputs("</td></tr>\n", out);
	}
	fputs("</table>\n", out);
	if (whatif_count(w->model) == 0) {
		fputs("<p>", out);
		html_printf(out, "what-if: not computed (%s)",
			    whatif_note(w->model)[0] ? whatif_note(w->model) : "no change to predict");
		fputs("</p>\n", out);
	}
	fputs("<ul class=\"whatif-left-out\">\n", out);
	for (uint32_t i = 0; i < whatif_left_out_count(w->model); i++) {
		const struct whatif_left_out *l = whatif_left_out_get(w->model, i);

		fprintf(out, "<li><code>%s</code> not predicted: ", whatif_change_name(l->change));
		html_escape_n(out, l->why, strnlen(l->why, sizeof l->why));
		fputs("</li>\n", out);
	}
	fputs("</ul>\n", out);
}

