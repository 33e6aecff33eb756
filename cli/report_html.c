/*
 * report_html.c - `fsdpscope report --html`: the page and its sections in
 * the reading order of docs/report-html.md (the verdict and the top finding
 * first, then the charts, the findings with their fixes and the what-if
 * table, how the trace ended last), and the one file it is written to.
 */
#include "cli/report_html.h"
#include "cli/diagnosis.h"
#include "cli/report_html_escape.h"
#include "cli/report_html_internal.h"
#include "cli/report_html_timeline.h"
#include "collector/source.h"
#include "common/out_file.h"
#include "rules/rules.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The page's style: inline, no font or image fetched (the page must open
 * offline, and no request may leave it). */
static const char html_style[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:980px;color:#222;background:#fff}"
    "h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:1.6em}"
    ".verdict{font-size:1.1em;padding:.6em .8em;background:#f4f4f0;border-left:5px solid #777}"
    ".sev-error{border-color:#c83e3e}.sev-warning{border-color:#e08a2c}.sev-info{border-color:#4f7fc0}"
    ".top{font-weight:600}code,pre{font:12px/1.4 ui-monospace,monospace}"
    "pre{background:#f6f6f6;padding:.5em;overflow-x:auto;white-space:pre-wrap;word-break:break-all}"
    "svg.chart{width:100%;height:auto;font:11px sans-serif;display:block;margin:.4em 0}"
    "table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;"
    "vertical-align:top}th{background:#f0f0f0}.legend span{margin-right:.8em;white-space:nowrap}"
    ".legend i{display:inline-block;width:10px;height:10px;margin-right:3px}"
    ".finding{border-left:4px solid #999;padding-left:.8em;margin:1em 0}q.job{word-break:break-all}"
    "td code{word-break:break-all}.muted{color:#666}";

/* The finding the verdict names: the most severe, then the one whose fix
 * the what-if model predicts to gain most; the registry's order decides
 * ties, so that the pick is stable. NULL without findings. */
static const struct finding *top_finding(const findings_t *list)
{
	const struct finding *top = NULL;
	double top_gain = -1;

	for (size_t i = 0; list && i < findings_count(list); i++) {
		const struct finding *f = findings_get(list, i);
		const struct finding_gain *g = html_best_gain(f);
		double gain = g ? (double)g->gain_ns : -1;

		if (!top || f->severity > top->severity || (f->severity == top->severity && gain > top_gain)) {
			top = f;
			top_gain = gain;
		}
	}
	return top;
}

static void html_head(FILE *out, const struct diagnosis *d)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width\">\n<title>fsdpscope report: ",
	      out);
	html_escape(out, d->trace_path);
	fprintf(out, "</title>\n<style>%s</style></head>\n<body>\n<h1>fsdpscope report</h1>\n<p class=\"muted\">", html_style);
	html_escape(out, d->trace_path);
	fputs("</p>\n", out);
}

static void html_verdict(FILE *out, const struct diagnosis *d)
{
	const struct analysis_result *a = d->result;
	const struct finding *top = top_finding(d->findings);
	const struct finding_gain *best;
	char b1[32], b2[32], mfu[768];
	char *summary = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&summary, &len);

	if (m) {
		diagnosis_print_summary(m, a);
		fclose(m);
	}
	fprintf(out, "<section id=\"verdict\" class=\"verdict sev-%s\"><h2>1. Verdict</h2>\n<p>verdict <b>%s</b>: ",
		top ? rule_severity_name(top->severity) : "info", analysis_verdict_name(a->verdict));
	if (summary)
		html_escape_n(out, summary, len);
	free(summary);
	fputs("</p>\n<p class=\"top\">", out);
	if (top) {
		html_printf(out, "Top finding: %s %s: ", rule_severity_name(top->severity), top->rule->id);
		html_escape(out, top->message);
		best = html_best_gain(top);
		fputs("<br>", out);
		if (best)
			html_printf(out, "Predicted gain of fixing it (%s): %s%s a step, %.1f%% of %s.", best->fix,
				    best->kind == FINDING_GAIN_AT_MOST ? "at most " : "",
				    rule_format_ns((double)best->gain_ns, b1, sizeof b1),
				    a->step_ns ? 100.0 * (double)best->gain_ns / (double)a->step_ns : 0.0,
				    rule_format_ns((double)a->step_ns, b2, sizeof b2));
		else
			fputs("Predicted gain of fixing it: not predicted (no what-if replay or bound for its fixes).", out);
	} else {
		fputs("No finding: every rule passed.", out);
	}
	fputs("</p>\n<p>", out);
	html_mfu(a, mfu, sizeof mfu);
	html_escape(out, mfu);
	fputs("</p></section>\n", out);
}

static void html_fix(FILE *out, const char *framework, const char *code)
{
	if (!code)
		return;
	fprintf(out, "<p>%s:</p><pre><code>", framework);
	html_escape(out, code);
	fputs("</code></pre>\n", out);
}

static void html_findings(FILE *out, const findings_t *list, const struct analysis_result *a, const html_whatif_t *w)
{
	fputs("<section id=\"findings\"><h2>7. Findings and their fixes</h2>\n", out);
	if (!list || findings_count(list) == 0)
		fputs("<p>No finding.</p>\n", out);
	for (size_t i = 0; list && i < findings_count(list); i++) {
		const struct finding *f = findings_get(list, i);
		const struct finding_gain *best;

		fprintf(out, "<div class=\"finding sev-%s\"><h3>%s <code>%s</code>: ", rule_severity_name(f->severity),
			rule_severity_name(f->severity), f->rule->id);
		html_escape(out, f->rule->title);
		fputs("</h3>\n<p>", out);
		html_escape(out, f->message);
		best = html_best_gain(f);
		if (best && a->step_ns)
			html_printf(out, " (predicted gain of its best fix, %s: %s%.1f%% of the step)", best->fix,
				    best->kind == FINDING_GAIN_AT_MOST ? "at most " : "",
				    100.0 * (double)best->gain_ns / (double)a->step_ns);
		fputs("</p>\n<pre class=\"evidence\">", out);
		html_escape(out, f->evidence);
		fputs("</pre>\n", out);
		html_fix(out, "FSDP2", f->fix_fsdp2);
		html_fix(out, "FSDP1", f->fix_fsdp1);
		html_fix(out, "DeepSpeed", f->fix_deepspeed);
		fputs("</div>\n", out);
	}
	html_whatif_table(out, a, w);
	fputs("</section>\n", out);
}

static void html_sources(FILE *out, const struct analysis_result *a)
{
	fputs("<table><tr><th>source</th><th>rank</th><th>pid</th><th>host</th><th>command</th><th>ended</th>"
	      "<th>collectives</th><th>missing</th><th>dropped</th></tr>\n",
	      out);
	for (uint32_t i = 0; i < a->nsources; i++) {
		const struct source_summary *s = &a->sources[i];

		fprintf(out, "<tr><td>%u</td><td>%d</td><td>%u</td><td>", s->source, s->rank, s->pid);
		html_escape_n(out, s->host, strnlen(s->host, sizeof s->host));
		fputs("</td><td><code>", out);
		html_escape_n(out, s->command, strnlen(s->command, sizeof s->command));
		fprintf(out, "</code></td><td>%s</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td></tr>\n",
			source_end_name(s->end), s->collectives, s->collectives_missing, s->dropped);
	}
	fputs("</table>\n", out);
}

static void html_end(FILE *out, const struct diagnosis *d)
{
	const struct analysis_result *a = d->result;
	const struct analysis_trace_info *t = &a->trace;

	fputs("<section id=\"trace\"><h2>8. How the trace ended, its sources, drops and notes</h2>\n<p>", out);
	html_printf(out, "Trace %s: %" PRIu64 " records, %" PRIu64 " collectives, %" PRIu64 " GPU intervals, %" PRIu64
			 " NVTX ranges, %u processes; ended %s%s; %" PRIu64 " records dropped by the agents, %" PRIu64
			 " collectives lost, %u steps left out (lost) and %u (cut).",
		    d->trace_path, t->records, t->collectives, t->gpu_intervals, t->nvtx_ranges, t->sources,
		    t->end ? t->end : "(not read from a file)", t->truncated ? ", incomplete" : "", t->dropped_records,
		    a->trust.collectives_lost, a->trust.steps_lost_all, a->trust.steps_cut_all);
	if (d->damage[0]) {
		fputs("</p>\n<p>Damage: ", out);
		html_escape(out, d->damage);
	}
	fputs("</p>\n", out);
	html_sources(out, a);
	if (a->undecided_why[0]) {
		fputs("<p>Not diagnosed: ", out);
		html_escape_n(out, a->undecided_why, strnlen(a->undecided_why, sizeof a->undecided_why));
		fputs("</p>\n", out);
	}
	fputs("<ul class=\"notes\">\n", out);
	for (uint32_t i = 0; i < a->nnotes && i < ANALYSIS_NOTES_MAX; i++) {
		fputs("<li>", out);
		html_escape_n(out, a->notes[i], strnlen(a->notes[i], sizeof a->notes[i]));
		fputs("</li>\n", out);
	}
	fputs("</ul>\n</section>\n", out);
}

void report_html_page(FILE *out, const struct diagnosis *d, const struct html_timeline *t)
{
	html_whatif_t *w = html_whatif_new(d->result);

	html_head(out, d);
	html_verdict(out, d);
	html_waterfall(out, d->result);
	html_units(out, d->result);
	html_gather_bars(out, d->result);
	html_timeline_draw(out, d->result, t);
	html_memory(out, d->result);
	html_findings(out, d->findings, d->result, w);
	html_end(out, d);
	fputs("<p class=\"muted\">Written by fsdpscope report --html: one file, nothing fetched.</p>\n</body></html>\n",
	      out);
	html_whatif_free(w);
}

int report_html_write(const char *path, const struct diagnosis *d, const struct html_timeline *t, char *err,
		      size_t errlen)
{
	out_file_t *f;
	int rc = out_file_open(path, 0644, &f, err, errlen);

	if (rc)
		return rc;
	report_html_page(out_file_stream(f), d, t);
	return out_file_commit(f, err, errlen);
}
