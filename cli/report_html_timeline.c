/*
 * report_html_timeline.c - one step of every rank as SVG lanes, from the
 * kernels of that step (report_html_timeline.h): compute above, NCCL below
 * split into the part compute ran under (hidden) and the rest (exposed),
 * HTA's definition as the analysis measures it; each rank's lateness (what
 * the others waited for it per step) past the end of its step.
 */
#include "cli/report_html_timeline.h"
#include "cli/diagnosis.h"
#include "cli/report_html_escape.h"
#include "cli/report_html_internal.h"
#include "collector/analyze_traces.h"
#include "collector/merge.h"
#include "collector/session.h"
#include "export/job_events.h"
#include "rules/rules.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A step of a rank, as the first read's on_step told it. */
struct step_window {
	uint32_t source;
	int32_t rank;
	uint32_t ordinal;
	uint64_t start_ns, step_ns;
};

/* A kernel of the step, from the step's start. */
struct span {
	uint64_t start, end;
	int comm; /* 1: NCCL, 0: compute (memory copies are neither: left out, as HTA leaves them) */
};

struct lane {
	struct step_window w;
	struct span *spans;
	size_t n, cap;
};

struct html_timeline {
	struct step_window *windows; /* first read: every analysed step */
	size_t nwindows, cap;
	struct lane *lanes;          /* second read: the representative step of each rank, by rank */
	size_t nlanes;
	int failed;                  /* ENOMEM in a callback */
};

html_timeline_t *html_timeline_new(void)
{
	return calloc(1, sizeof(struct html_timeline));
}

void html_timeline_free(html_timeline_t *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nlanes; i++)
		free(t->lanes[i].spans);
	free(t->lanes);
	free(t->windows);
	free(t);
}

static void on_step(void *ctx, const struct analysis_step_info *s)
{
	html_timeline_t *t = ctx;

	if (s->excluded || s->step_ns == 0)
		return;
	if (t->nwindows == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		struct step_window *w = realloc(t->windows, cap * sizeof *w);
		if (!w) {
			t->failed = ENOMEM;
			return;
		}
		t->windows = w;
		t->cap = cap;
	}
	t->windows[t->nwindows++] = (struct step_window){s->source, s->rank, s->ordinal, s->start_ns, s->step_ns};
}

void html_timeline_steps_tool(html_timeline_t *t, struct fss_session_tool *out)
{
	memset(out, 0, sizeof *out);
	out->ctx = t;
	out->on_step = on_step;
}

static int on_kernel(void *ctx, uint32_t source, const struct export_kernel *k)
{
	html_timeline_t *t = ctx;
	struct lane *l = NULL;
	uint64_t start, end;

	if (k->kind != EXPORT_KERNEL_NCCL && k->kind != EXPORT_KERNEL_COMPUTE)
		return 0;
	for (size_t i = 0; i < t->nlanes && !l; i++)
		if (t->lanes[i].w.source == source)
			l = &t->lanes[i];
	if (!l || k->end_ns <= l->w.start_ns || k->start_ns >= l->w.start_ns + l->w.step_ns)
		return 0;
	start = k->start_ns > l->w.start_ns ? k->start_ns - l->w.start_ns : 0;
	end = k->end_ns - l->w.start_ns < l->w.step_ns ? k->end_ns - l->w.start_ns : l->w.step_ns;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		struct span *s = realloc(l->spans, cap * sizeof *s);
		if (!s)
			return -ENOMEM;
		l->spans = s;
		l->cap = cap;
	}
	l->spans[l->n++] = (struct span){start, end, k->kind == EXPORT_KERNEL_NCCL};
	return 0;
}

static int by_rank(const void *pa, const void *pb)
{
	const struct lane *a = pa, *b = pb;

	return a->w.rank != b->w.rank ? (a->w.rank < b->w.rank ? -1 : 1) : (a->w.source < b->w.source ? -1 : 1);
}

/* The lanes of the second read: each source's window of the ordinal. */
static int lanes_of(html_timeline_t *t, uint32_t ordinal)
{
	t->lanes = calloc(t->nwindows ? t->nwindows : 1, sizeof *t->lanes);
	if (!t->lanes)
		return -ENOMEM;
	for (size_t i = 0; i < t->nwindows; i++) {
		int seen = 0;

		if (t->windows[i].ordinal != ordinal)
			continue;
		for (size_t j = 0; j < t->nlanes && !seen; j++)
			seen = t->lanes[j].w.source == t->windows[i].source;
		if (!seen)
			t->lanes[t->nlanes++].w = t->windows[i];
	}
	qsort(t->lanes, t->nlanes, sizeof *t->lanes, by_rank);
	return 0;
}

int html_timeline_read(html_timeline_t *t, const struct diagnosis *d, const struct diagnosis_flags *f, char *err,
		       size_t errlen)
{
	const struct analysis_result *a = d->result;
	struct job_events_sink sink = {.ctx = t, .on_kernel = on_kernel};
	struct analysis_result *again = NULL;
	struct fss_session_tool tool;
	merge_t *merge = NULL;
	job_events_t *j;
	int rc;

	if (t->failed) {
		snprintf(err, errlen, "out of memory");
		return -t->failed;
	}
	if (a->nper_rank == 0 || a->nper_rank > HTML_LANES_MAX || a->exposure.source == ANALYSIS_EXPOSURE_NONE ||
	    !d->paths || d->npaths == 0)
		return 0;
	rc = lanes_of(t, a->exposure.step);
	if (rc) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	j = job_events_new(&sink, f->analysis.compute_ranges);
	if (!j) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	job_events_tool(j, &tool);
	rc = analyze_traces_tool((const char *const *)d->paths, d->npaths, &f->analysis, &tool, &again, &merge, err,
				 errlen);
	if (rc == 0)
		rc = job_events_finish(j);
	if (rc && !err[0])
		snprintf(err, errlen, "reading the trace again for the timeline: %s", strerror(rc < 0 ? -rc : rc));
	job_events_free(j);
	analysis_result_free(again);
	merge_free(merge);
	return rc;
}

static int by_start(const void *pa, const void *pb)
{
	const struct span *a = pa, *b = pb;

	return a->start != b->start ? (a->start < b->start ? -1 : 1) : 0;
}

/* Draws [s, e) of a lane's row, merged with the rect before it while the
 * gap is under half a unit of the chart (thousands of kernels a step would
 * otherwise make the page heavy for nothing the eye can see). */
struct painter {
	FILE *out;
	double scale, x0;
	int y, h;
	const char *fill;
	double from, to; /* the rect being grown, to < 0: none */
};

static void paint_flush(struct painter *p)
{
	if (p->to > p->from)
		fprintf(p->out, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>", p->x0 + p->from,
			p->y, p->to - p->from < 0.3 ? 0.3 : p->to - p->from, p->h, p->fill);
	p->to = -1;
}

static void paint(struct painter *p, uint64_t s, uint64_t e)
{
	double a = s * p->scale, b = e * p->scale;

	if (p->to >= 0 && a - p->to < 0.5) {
		p->to = b > p->to ? b : p->to;
		return;
	}
	paint_flush(p);
	p->from = a;
	p->to = b;
}

/* The compute kernels merged into a union, in place at the front of
 * spans[] (sorted by start); returns how many. */
static size_t compute_union(struct span *spans, size_t n, struct span *out)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++) {
		if (spans[i].comm)
			continue;
		if (m && spans[i].start <= out[m - 1].end) {
			if (spans[i].end > out[m - 1].end)
				out[m - 1].end = spans[i].end;
			continue;
		}
		out[m++] = spans[i];
	}
	return m;
}

static void kernel_lane(FILE *out, const struct lane *l, const struct analysis_rank *r, int row, double scale)
{
	struct span *cu = malloc((l->n ? l->n : 1) * sizeof *cu);
	struct painter hid = {out, scale, 70, row * 26 + 13, 10, html_cause_colour(ANALYSIS_CAUSE_HIDDEN), 0, -1};
	struct painter exp = {out, scale, 70, row * 26 + 13, 10, html_cause_colour(ANALYSIS_CAUSE_BANDWIDTH_BOUND), 0, -1};
	struct painter cmp = {out, scale, 70, row * 26 + 2, 10, "#5aa05a", 0, -1};
	size_t m;
	char b1[32], b2[32];

	fprintf(out, "<g class=\"lane\" data-rank=\"%d\"><text x=\"0\" y=\"%d\">rank %d</text>", l->w.rank, row * 26 + 16,
		l->w.rank);
	fprintf(out, "<rect x=\"70\" y=\"%d\" width=\"%.2f\" height=\"23\" fill=\"#eee\"/>", row * 26 + 1,
		l->w.step_ns * scale);
	if (!cu) {
		fputs("</g>\n", out);
		return;
	}
	m = compute_union(l->spans, l->n, cu);
	for (size_t i = 0; i < m; i++)
		paint(&cmp, cu[i].start, cu[i].end);
	paint_flush(&cmp);
	for (size_t i = 0, c = 0; i < l->n; i++) {
		uint64_t at = l->spans[i].start, end = l->spans[i].end;

		if (!l->spans[i].comm)
			continue;
		while (c < m && cu[c].end <= at)
			c++;
		/* across the kernel: under the compute union hidden, between its pieces exposed */
		for (size_t k = c; k < m && cu[k].start < end; k++) {
			uint64_t from = cu[k].start > at ? cu[k].start : at, to = cu[k].end < end ? cu[k].end : end;

			if (to <= at)
				continue;
			if (from > at)
				paint(&exp, at, from);
			paint(&hid, from, to);
			at = to;
		}
		if (at < end)
			paint(&exp, at, end);
	}
	paint_flush(&hid);
	paint_flush(&exp);
	if (r && r->late_ns_per_step)
		fprintf(out, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"23\" fill=\"#222\" fill-opacity=\"0.6\"/>",
			70 + l->w.step_ns * scale, row * 26 + 1, r->late_ns_per_step * scale);
	fprintf(out, "<title>rank %d: step %u, %s, %zu kernels; late %s per step</title></g>\n", l->w.rank, l->w.ordinal,
		rule_format_ns((double)l->w.step_ns, b1, sizeof b1), l->n,
		rule_format_ns(r ? (double)r->late_ns_per_step : 0, b2, sizeof b2));
	free(cu);
}

static const struct analysis_rank *rank_of(const struct analysis_result *a, int32_t rank)
{
	for (uint32_t i = 0; i < a->nper_rank; i++)
		if (a->per_rank[i].rank == rank)
			return &a->per_rank[i];
	return NULL;
}

void html_timeline_draw(FILE *out, const struct analysis_result *a, const html_timeline_t *t)
{
	uint64_t full = 1;

	if (!t || t->nlanes == 0 || a->nper_rank > HTML_LANES_MAX) {
		html_rank_lanes(out, a);
		return;
	}
	for (size_t i = 0; i < t->nlanes; i++) {
		const struct analysis_rank *r = rank_of(a, t->lanes[i].w.rank);
		uint64_t end = t->lanes[i].w.step_ns + (r ? r->late_ns_per_step : 0);

		qsort(t->lanes[i].spans, t->lanes[i].n, sizeof *t->lanes[i].spans, by_start);
		full = end > full ? end : full;
	}
	fputs("<section id=\"ranks\"><h2>5. One step of every rank</h2>\n", out);
	html_printf(out, "Step %u of each rank, from its own start: compute kernels above, NCCL kernels below (as "
			 "export draws them: device intervals, or host calls and NVTX leaves without GPU data).",
		    a->exposure.step);
	fputs("\n<p class=\"legend\"><span><i style=\"background:#5aa05a\"></i>compute</span> "
	      "<span><i style=\"background:#9bbf9b\"></i>communication hidden under compute</span> "
	      "<span><i style=\"background:#c83e3e\"></i>communication exposed</span> "
	      "<span><i style=\"background:#555\"></i>late: what the others waited for the rank</span></p>\n",
	      out);
	fprintf(out, "<svg class=\"chart\" id=\"ranks-svg\" viewBox=\"0 0 %d %zu\" role=\"img\">\n", HTML_CHART_W,
		t->nlanes * 26 + 2);
	for (size_t i = 0; i < t->nlanes; i++)
		kernel_lane(out, &t->lanes[i], rank_of(a, t->lanes[i].w.rank), (int)i, 600.0 / (double)full);
	fputs("</svg>\n</section>\n", out);
}
