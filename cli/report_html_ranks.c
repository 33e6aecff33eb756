/*
 * report_html_ranks.c - the HTML report's one step of every rank: a lane
 * per rank ("rank 0", "rank 1", ...) of its representative step's time,
 * compute and exposed AllGather laid end to end, the hidden AllGather time
 * under the compute it ran beside, and its lateness (what the others
 * waited for it per step) at the end; past HTML_LANES_MAX ranks, a heat
 * strip of step times with the slowest ranks listed. The lanes show how
 * each rank's step divides, from the per-rank figures, not when each
 * kernel ran.
 */
#include "cli/report_html_internal.h"
#include "cli/report_html_escape.h"
#include "rules/rules.h"

#include <inttypes.h>
#include <stdlib.h>

static double part(uint64_t v, uint64_t full, double width)
{
	return full ? width * (double)v / (double)full : 0;
}

static void lane(FILE *out, const struct analysis_rank *r, int row, uint64_t full)
{
	uint64_t hidden = r->allgather_ns > r->exposed_allgather_ns ? r->allgather_ns - r->exposed_allgather_ns : 0;
	double x0 = 70, wc = part(r->compute_ns, full, 600), we = part(r->exposed_allgather_ns, full, 600);
	double wh = part(hidden, full, 600), wstep = part(r->step_ns, full, 600), wl = part(r->late_ns_per_step, full, 600);
	int y = row * 18;
	char b[4][32];

	fprintf(out, "<g class=\"lane\" data-rank=\"%d\"><text x=\"0\" y=\"%d\">rank %d</text>", r->rank, y + 12, r->rank);
	fprintf(out, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"14\" fill=\"#eee\"/>", x0, y + 1, wstep);
	fprintf(out, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"14\" fill=\"#5aa05a\"/>", x0, y + 1, wc);
	fprintf(out, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"4\" fill=\"%s\"/>", x0, y + 11,
		wh < wc ? wh : wc, html_cause_colour(ANALYSIS_CAUSE_HIDDEN));
	fprintf(out, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"14\" fill=\"%s\"/>", x0 + wc, y + 1, we,
		html_cause_colour(ANALYSIS_CAUSE_BANDWIDTH_BOUND));
	fprintf(out, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"14\" fill=\"#222\" fill-opacity=\"0.6\"/>",
		x0 + wstep, y + 1, wl);
	fprintf(out, "<title>rank %d: step %s, compute %s, AllGather exposed %s, late %s per step</title></g>\n",
		r->rank, rule_format_ns((double)r->step_ns, b[0], 32), rule_format_ns((double)r->compute_ns, b[1], 32),
		rule_format_ns((double)r->exposed_allgather_ns, b[2], 32),
		rule_format_ns((double)r->late_ns_per_step, b[3], 32));
}

static int slower_first(const void *pa, const void *pb)
{
	const struct analysis_rank *a = *(const struct analysis_rank *const *)pa;
	const struct analysis_rank *b = *(const struct analysis_rank *const *)pb;

	if (a->step_ns != b->step_ns)
		return a->step_ns < b->step_ns ? 1 : -1;
	return a->rank - b->rank;
}

/* The heat strip: a cell per rank, darker the longer its step. */
static void heat_strip(FILE *out, const struct analysis_result *a)
{
	const struct analysis_rank **order = calloc(a->nper_rank, sizeof *order);
	uint64_t lo = UINT64_MAX, hi = 0;
	double cw = (double)HTML_CHART_W / a->nper_rank;
	char b1[32], b2[32];

	for (uint32_t i = 0; i < a->nper_rank; i++) {
		uint64_t s = a->per_rank[i].step_ns;
		lo = s < lo ? s : lo;
		hi = s > hi ? s : hi;
	}
	fprintf(out, "<svg class=\"chart\" id=\"ranks-svg\" viewBox=\"0 0 %d 40\" role=\"img\">\n", HTML_CHART_W);
	for (uint32_t i = 0; i < a->nper_rank; i++) {
		const struct analysis_rank *r = &a->per_rank[i];
		double t = hi > lo ? (double)(r->step_ns - lo) / (double)(hi - lo) : 0;

		fprintf(out, "<rect class=\"heat\" data-rank=\"%d\" x=\"%.2f\" y=\"0\" width=\"%.2f\" height=\"30\" "
			     "fill=\"rgb(%d,%d,%d)\"><title>rank %d: step %s</title></rect>\n",
			r->rank, i * cw, cw, 255 - (int)(55 * t), 235 - (int)(175 * t), 200 - (int)(170 * t), r->rank,
			rule_format_ns((double)r->step_ns, b1, sizeof b1));
	}
	fputs("</svg>\n", out);
	html_printf(out, "Step time from %s (light) to %s (dark).", rule_format_ns((double)lo, b1, sizeof b1),
		    rule_format_ns((double)hi, b2, sizeof b2));
	if (!order)
		return;
	for (uint32_t i = 0; i < a->nper_rank; i++)
		order[i] = &a->per_rank[i];
	qsort(order, a->nper_rank, sizeof *order, slower_first);
	fputs("<p>Slowest ranks:</p><ol class=\"slowest\">\n", out);
	for (uint32_t i = 0; i < a->nper_rank && i < 8; i++)
		fprintf(out, "<li>rank %d: step %s, late %s per step</li>\n", order[i]->rank,
			rule_format_ns((double)order[i]->step_ns, b1, sizeof b1),
			rule_format_ns((double)order[i]->late_ns_per_step, b2, sizeof b2));
	fputs("</ol>\n", out);
	free(order);
}

void html_rank_lanes(FILE *out, const struct analysis_result *a)
{
	uint64_t full = 1;

	fputs("<section id=\"ranks\"><h2>5. One step of every rank</h2>\n", out);
	if (a->nper_rank == 0) {
		fputs("<p>No rank has an analysed step.</p></section>\n", out);
		return;
	}
	if (a->nper_rank > HTML_LANES_MAX) {
		html_printf(out, "%u ranks, drawn as a heat strip of their step times.", a->nper_rank);
		heat_strip(out, a);
		fputs("</section>\n", out);
		return;
	}
	for (uint32_t i = 0; i < a->nper_rank; i++) {
		uint64_t end = a->per_rank[i].step_ns + a->per_rank[i].late_ns_per_step;
		full = end > full ? end : full;
	}
	fputs("<p class=\"legend\"><span><i style=\"background:#5aa05a\"></i>compute</span> "
	      "<span><i style=\"background:#9bbf9b\"></i>AllGather hidden under compute</span> "
	      "<span><i style=\"background:#c83e3e\"></i>AllGather exposed</span> "
	      "<span><i style=\"background:#eee\"></i>rest of the step</span> "
	      "<span><i style=\"background:#555\"></i>late: what the others waited for the rank</span></p>\n",
	      out);
	fprintf(out, "<svg class=\"chart\" id=\"ranks-svg\" viewBox=\"0 0 %d %u\" role=\"img\">\n", HTML_CHART_W,
		a->nper_rank * 18 + 2);
	for (uint32_t i = 0; i < a->nper_rank; i++)
		lane(out, &a->per_rank[i], (int)i, full);
	fputs("</svg>\n</section>\n", out);
}
