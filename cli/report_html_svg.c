/*
 * report_html_svg.c - the HTML report's charts of the representative step:
 * the step-time waterfall, the gathers per step against what the units
 * need, the per-gather exposure bars and the memory ledger, as inline SVG.
 * The numbers come from the analysis result only, the same the text report
 * prints, so that the page and `report` never disagree.
 */
#include "cli/report_html_internal.h"
#include "cli/report_html_escape.h"
#include "common/record.h"
#include "rules/rules.h"

#include <inttypes.h>
#include <string.h>

const char *html_cause_colour(int cause)
{
	static const char *colour[ANALYSIS_CAUSE_MAX] = {"#9bbf9b", "#4f7fc0", "#e08a2c", "#c83e3e", "#8a5bb0"};

	return cause >= 0 && cause < ANALYSIS_CAUSE_MAX ? colour[cause] : "#888";
}

#if __has_include("collector/mfu.h")
/* MFU with its inputs named (collector/mfu.h): the peak's source, or the
 * input that is missing; the GPU's memory from its device record when
 * --gpu-mem was not given. */
static double page_mfu(const struct analysis_result *a, char *words, size_t len)
{
	const struct analysis_mfu *m = &a->mfu;
	char missing[512];

	if (!m->missing && m->mfu >= 0) {
		snprintf(words, len, "MFU %.1f%% (%.3g FLOP/s achieved; peak %.4g FLOP/s x %u GPUs, %s)", 100 * m->mfu,
			 m->achieved_flops, m->peak_flops, m->ranks, m->peak_source);
		return m->mfu;
	}
	snprintf(words, len, "MFU unknown: %s", analysis_mfu_missing_text(m, missing, sizeof missing));
	return -1;
}

static uint64_t page_gpu_memory(const struct analysis_result *a)
{
	return a->ledger.gpu_mem_bytes ? a->ledger.gpu_mem_bytes : a->mfu.device_memory_bytes;
}
#else
static double page_mfu(const struct analysis_result *a, char *words, size_t len)
{
	const struct analysis_breakdown *b = &a->breakdown;

	if (b->mfu >= 0)
		snprintf(words, len, "MFU %.1f%% (%.3g FLOP/s achieved)", 100 * b->mfu, b->achieved_flops);
	else
		snprintf(words, len, "MFU unknown (give --peak-flops and --model-flops or --tokens-per-step)");
	return b->mfu;
}

static uint64_t page_gpu_memory(const struct analysis_result *a)
{
	return a->ledger.gpu_mem_bytes;
}
#endif

double html_mfu(const struct analysis_result *a, char *words, size_t len)
{
	return page_mfu(a, words, len);
}

static double scaled(uint64_t v, uint64_t full, double width)
{
	return full ? width * (double)v / (double)full : 0;
}

/* One row of the waterfall: a bar from `from` to `from + len` (ns);
 * fill NULL: a figure not known, said so in place of the bar. */
static void waterfall_row(FILE *out, int row, const char *label, uint64_t from, uint64_t len, uint64_t full,
			  const char *fill)
{
	char b[32];

	if (!fill) {
		fprintf(out, "<g class=\"wf\"><text x=\"225\" y=\"%d\" text-anchor=\"end\">%s</text><text x=\"234\" "
			     "y=\"%d\">unknown</text></g>\n",
			row * 22 + 15, label, row * 22 + 15);
		return;
	}
	double x = 230 + scaled(from, full, 430), w = scaled(len, full, 430);

	fprintf(out, "<g class=\"wf\"><text x=\"225\" y=\"%d\" text-anchor=\"end\">", row * 22 + 15);
	html_escape(out, label);
	fprintf(out, "</text><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"16\" fill=\"%s\"/>", x, row * 22 + 3,
		w > 0 || len == 0 ? w : 0.5, fill);
	fprintf(out, "<text x=\"%.1f\" y=\"%d\">%s</text></g>\n", x + w + 4, row * 22 + 15,
		rule_format_ns((double)len, b, sizeof b));
}

void html_waterfall(FILE *out, const struct analysis_result *a)
{
	const struct analysis_breakdown *b = &a->breakdown;
	const struct analysis_exposure *e = &a->exposure;
	uint64_t ideal = 0, at = 0, full, exposed_ag = 0, comm_named, other;
	int row = 0, rows;
	char mfu[768];
	double known;

	fputs("<section id=\"waterfall\"><h2>2. Where the step goes</h2>\n", out);
	if (b->step_ns == 0) {
		fputs("<p>No analysed step: no waterfall.</p></section>\n", out);
		return;
	}
	known = page_mfu(a, mfu, sizeof mfu);
	if (known >= 0)
		ideal = (uint64_t)((double)b->step_ns * known);
	fprintf(out, "<p class=\"mfu\">");
	html_escape(out, mfu);
	fputs("</p>\n", out);
	for (int c = 1; c < ANALYSIS_CAUSE_MAX; c++)
		exposed_ag += e->cause_ns[c];
	comm_named = exposed_ag + e->exposed_reduce_scatter_ns_per_step + e->exposed_allreduce_ns_per_step;
	other = b->exposed_comm_ns > comm_named ? b->exposed_comm_ns - comm_named : 0;
	full = b->step_ns;
	if (b->compute_ns + comm_named + other + b->idle_ns > full)
		full = b->compute_ns + comm_named + other + b->idle_ns;
	rows = 6 + ANALYSIS_CAUSE_MAX;
	fprintf(out, "<svg class=\"chart\" id=\"waterfall-svg\" viewBox=\"0 0 %d %d\" role=\"img\">\n", HTML_CHART_W,
		rows * 22 + 6);
	waterfall_row(out, row++, "ideal compute (at peak)", 0, ideal, full, known >= 0 ? "#2e6b2e" : NULL);
	waterfall_row(out, row++, "compute", 0, b->compute_ns, full, "#5aa05a");
	at = b->compute_ns;
	for (int c = 1; c < ANALYSIS_CAUSE_MAX; c++) {
		char label[64];

		snprintf(label, sizeof label, "exposed AllGather: %s", analysis_cause_name(c));
		waterfall_row(out, row++, label, at, e->cause_ns[c], full, html_cause_colour(c));
		at += e->cause_ns[c];
	}
	waterfall_row(out, row++, "exposed ReduceScatter", at, e->exposed_reduce_scatter_ns_per_step, full, "#b07030");
	at += e->exposed_reduce_scatter_ns_per_step;
	waterfall_row(out, row++, "exposed AllReduce", at, e->exposed_allreduce_ns_per_step, full, "#a06090");
	at += e->exposed_allreduce_ns_per_step;
	waterfall_row(out, row++, "other communication", at, other, full, "#708090");
	at += other;
	waterfall_row(out, row++, "host-bound or idle", at, b->idle_ns, full, "#c8c8c8");
	waterfall_row(out, row, "measured step", 0, b->step_ns, full, "#333");
	fputs("</svg>\n", out);
	html_printf(out, "Step %u (the representative step), exposure from %s timing.", e->step,
		    analysis_exposure_source_name(e->source));
	fputs("</section>\n", out);
}

/* The forward gathers that need a gather of their own if every repeating
 * unit were one FSDP unit: one per copy of the motif, each root gather
 * alone. */
static uint32_t gathers_needed(const struct analysis_result *a, int phase)
{
	uint32_t n = 0;
	int32_t last_repeat = -2, last_mb = -2;

	for (uint32_t i = 0; i < a->ngathers; i++) {
		const struct analysis_gather *g = &a->gathers[i];

		if (g->phase != phase)
			continue;
		if (g->repeat < 0 || g->repeat != last_repeat || g->microbatch != last_mb)
			n++;
		last_repeat = g->repeat;
		last_mb = g->microbatch;
	}
	return n;
}

static void units_rows(FILE *out, const struct analysis_result *a)
{
	uint32_t rows = 0, col = 0;
	int32_t last = -2;
	char b[32];

	for (uint32_t i = 0; i < a->ngathers; i++)
		if (a->gathers[i].phase == ANALYSIS_PHASE_FORWARD && a->gathers[i].microbatch <= 0 &&
		    (a->gathers[i].repeat < 0 || a->gathers[i].repeat != last || i == 0)) {
			rows++;
			last = a->gathers[i].repeat;
		}
	fprintf(out, "<svg class=\"chart\" id=\"units-svg\" viewBox=\"0 0 %d %u\" role=\"img\">\n", HTML_CHART_W,
		rows * 16 + 4);
	rows = 0;
	last = -2;
	for (uint32_t i = 0; i < a->ngathers; i++) {
		const struct analysis_gather *g = &a->gathers[i];

		if (g->phase != ANALYSIS_PHASE_FORWARD || g->microbatch > 0)
			continue;
		if (g->repeat < 0 || g->repeat != last || rows == 0) {
			if (rows)
				fputs("</g>\n", out);
			fprintf(out, "<g class=\"unit-row\"><text x=\"0\" y=\"%u\">", rows * 16 + 13);
			if (g->repeat >= 0)
				fprintf(out, "unit %d", g->repeat);
			else
				fputs("root", out);
			fputs("</text>", out);
			rows++;
			col = 0;
			last = g->repeat;
		}
		fprintf(out, "<rect class=\"mark\" x=\"%u\" y=\"%u\" width=\"12\" height=\"12\" fill=\"%s\"><title>#%u ",
			70 + col * 15, (rows - 1) * 16 + 3, html_cause_colour(g->cause), g->index);
		html_escape(out, g->name[0] ? g->name : "-");
		fprintf(out, " %s</title></rect>", rule_format_bytes((double)g->bytes, b, sizeof b));
		col++;
	}
	if (rows)
		fputs("</g>\n", out);
	fputs("</svg>\n", out);
}

void html_units(FILE *out, const struct analysis_result *a)
{
	uint32_t need_f = gathers_needed(a, ANALYSIS_PHASE_FORWARD), need_b = gathers_needed(a, ANALYSIS_PHASE_BACKWARD);

	fputs("<section id=\"units\"><h2>3. AllGathers per step against what the units need</h2>\n", out);
	fputs("<table><tr><th>communicator</th><th>role</th><th>ranks</th><th>AllGathers / step</th>"
	      "<th>ReduceScatters / step</th><th>AllReduces / step</th><th>needed, one unit per repeat</th></tr>\n",
	      out);
	for (uint32_t i = 0; i < a->ncomms; i++) {
		const struct analysis_comm *c = &a->comms[i];

		fputs("<tr><td>", out);
		html_printf(out, "%016" PRIx64, c->id);
		if (c->name[0]) {
			fputs(" <q class=\"job\">", out);
			html_escape_n(out, c->name, strnlen(c->name, sizeof c->name));
			fputs("</q>", out);
		}
		fprintf(out, "</td><td>%s</td><td>%d</td><td>%u</td><td>%u</td><td>%u</td><td>", analysis_comm_role_name(c->role),
			c->nranks, c->allgathers, c->reduce_scatters, c->allreduces);
		if ((int32_t)i == a->fsdp_comm && a->ngathers)
			fprintf(out, "%u (%u forward + %u backward)", need_f + need_b, need_f, need_b);
		else
			fputs("-", out);
		fputs("</td></tr>\n", out);
	}
	fputs("</table>\n", out);
	if (a->fsdp_comm >= 0 && a->ngathers && a->per_step.allgathers) {
		double have = a->per_step.allgathers, need = need_f + need_b, top = have > need ? have : need;

		fprintf(out, "<svg class=\"chart\" id=\"need-svg\" viewBox=\"0 0 %d 50\" role=\"img\">\n"
			     "<text x=\"225\" y=\"15\" text-anchor=\"end\">AllGathers per step, measured</text>"
			     "<rect x=\"230\" y=\"3\" width=\"%.1f\" height=\"16\" fill=\"#c83e3e\"/>"
			     "<text x=\"%.1f\" y=\"15\">%u</text>\n"
			     "<text x=\"225\" y=\"37\" text-anchor=\"end\">needed, one unit per repeat</text>"
			     "<rect x=\"230\" y=\"25\" width=\"%.1f\" height=\"16\" fill=\"#5aa05a\"/>"
			     "<text x=\"%.1f\" y=\"37\">%u</text>\n</svg>\n",
			HTML_CHART_W, 430 * have / top, 234 + 430 * have / top, a->per_step.allgathers, 430 * need / top,
			234 + 430 * need / top, need_f + need_b);
	}
	if (a->units.repeating_units == 0 || a->ngathers == 0) {
		fputs("<p>No repeating unit in the forward gathers.</p></section>\n", out);
		return;
	}
	html_printf(out, "%u gather%s per repeating unit, %u units (\"%s\"); %u AllGathers a step, %u needed were "
			 "each unit one FSDP unit.",
		    a->units.gathers_per_unit, a->units.gathers_per_unit == 1 ? "" : "s", a->units.repeating_units,
		    a->units.repeating_unit_name[0] ? a->units.repeating_unit_name : "-", a->per_step.allgathers,
		    need_f + need_b);
	fputs("\n<p>The forward gathers of the first micro-batch, one row a unit copy and a mark a gather "
	      "(as <code>fsdpscope top</code>'s units view):</p>\n",
	      out);
	units_rows(out, a);
	fputs("</section>\n", out);
}

void html_gather_bars(FILE *out, const struct analysis_result *a)
{
	uint64_t longest = 1;
	double bw;

	fputs("<section id=\"gathers\"><h2>4. Exposure of each AllGather</h2>\n", out);
	if (a->ngathers == 0 || a->exposure.source == ANALYSIS_EXPOSURE_NONE) {
		fputs("<p>Exposure not measured: no gathers, or no compute timing in the trace.</p></section>\n", out);
		return;
	}
	for (uint32_t i = 0; i < a->ngathers; i++)
		if (a->gathers[i].duration_ns > longest)
			longest = a->gathers[i].duration_ns;
	bw = (double)(HTML_CHART_W - 40) / a->ngathers;
	fputs("<p class=\"legend\">", out);
	for (int c = 0; c < ANALYSIS_CAUSE_MAX; c++)
		fprintf(out, "<span><i style=\"background:%s\"></i>%s</span> ", html_cause_colour(c), analysis_cause_name(c));
	fputs("(bar: the gather's own time; dark: its exposed part; numbered as in <code>fsdpscope report</code>)</p>\n",
	      out);
	fprintf(out, "<svg class=\"chart\" id=\"gathers-svg\" viewBox=\"0 0 %d 190\" role=\"img\">\n", HTML_CHART_W);
	for (uint32_t i = 0; i < a->ngathers; i++) {
		const struct analysis_gather *g = &a->gathers[i];
		double h = scaled(g->duration_ns, longest, 150), he = scaled(g->exposed_ns, longest, 150);
		double x = 30 + i * bw, w = bw > 2 ? bw - 1 : bw;
		char b1[32], b2[32];

		fprintf(out, "<g class=\"gather\" data-index=\"%u\"><rect class=\"gather-bar\" x=\"%.2f\" y=\"%.2f\" "
			     "width=\"%.2f\" height=\"%.2f\" fill=\"%s\" fill-opacity=\"0.45\"/>",
			g->index, x, 160 - h, w, h, html_cause_colour(g->cause));
		fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/><title>#%u %s ",
			x, 160 - he, w, he, html_cause_colour(g->cause), g->index,
			g->phase ? analysis_phase_name(g->phase) : "-");
		html_escape_n(out, g->name, strnlen(g->name, sizeof g->name));
		fprintf(out, ": %s, exposed %s, %s</title>", rule_format_ns((double)g->duration_ns, b1, sizeof b1),
			rule_format_ns((double)g->exposed_ns, b2, sizeof b2), analysis_cause_name(g->cause));
		if (bw >= 14 || i % 10 == 0)
			fprintf(out, "<text x=\"%.2f\" y=\"175\" font-size=\"9\">%u</text>", x, g->index);
		fputs("</g>\n", out);
	}
	fputs("</svg>\n</section>\n", out);
}

static void memory_row(FILE *out, int row, const char *label, uint64_t bytes, uint64_t full, const char *fill)
{
	char b[32];
	double w = scaled(bytes, full, 430);

	if (!fill) {
		fprintf(out, "<text x=\"225\" y=\"%d\" text-anchor=\"end\">%s</text><text x=\"234\" y=\"%d\">unknown "
			     "(--gpu-mem)</text>\n",
			row * 22 + 15, label, row * 22 + 15);
		return;
	}
	fprintf(out, "<text x=\"225\" y=\"%d\" text-anchor=\"end\">%s</text><rect x=\"230\" y=\"%d\" width=\"%.1f\" "
		     "height=\"16\" fill=\"%s\"/><text x=\"%.1f\" y=\"%d\">%s</text>\n",
		row * 22 + 15, label, row * 22 + 3, w, fill, 234 + w, row * 22 + 15, rule_format_bytes((double)bytes, b, sizeof b));
}

void html_memory(FILE *out, const struct analysis_result *a)
{
	const struct analysis_ledger *l = &a->ledger;
	uint64_t gpu = page_gpu_memory(a);
	uint64_t full = gpu > l->peak_state_bytes_per_rank ? gpu : l->peak_state_bytes_per_rank;
	char b1[32], b2[32], b3[32];

	fputs("<section id=\"memory\"><h2>6. Memory ledger, per rank</h2>\n", out);
	if (l->params == 0) {
		fputs("<p>No ledger: the parameters are not known.</p></section>\n", out);
		return;
	}
	fprintf(out, "<svg class=\"chart\" id=\"memory-svg\" viewBox=\"0 0 %d 94\" role=\"img\">\n", HTML_CHART_W);
	memory_row(out, 0, "persistent (16 P / N)", l->persistent_bytes_per_rank, full, "#4f7fc0");
	memory_row(out, 1, "transient (gathered units)", l->transient_bytes_per_rank, full, "#e08a2c");
	memory_row(out, 2, "peak state", l->peak_state_bytes_per_rank, full, "#333");
	memory_row(out, 3, "GPU memory", gpu, full, gpu ? "#c8c8c8" : NULL);
	fputs("</svg>\n<p>", out);
	if (gpu)
		html_printf(out, "Headroom %s of the GPU's %s%s (activations not included).",
			    rule_format_bytes((double)gpu - (double)l->peak_state_bytes_per_rank, b1, sizeof b1),
			    rule_format_bytes((double)gpu, b2, sizeof b2),
			    l->gpu_mem_bytes ? "" : ", from its device record");
	else
		fputs("The GPU's memory is not known (give --gpu-mem): no headroom.", out);
	html_printf(out, " P = %s parameters over N = %u ranks, prefetch %u; wire %s per step (DDP: %s).",
		    rule_format_count((double)l->params, b1, sizeof b1), l->ranks, l->prefetch,
		    rule_format_bytes((double)l->wire_bytes_per_step, b2, sizeof b2),
		    rule_format_bytes((double)l->ddp_wire_bytes_per_step, b3, sizeof b3));
	fputs("</p></section>\n", out);
}
