/*
 * report_html_internal.h - what the files of the HTML report share: the
 * sections drawn as SVG (report_html_svg.c, report_html_ranks.c) and the
 * colours both the charts and their legends use.
 */
#ifndef FSS_CLI_REPORT_HTML_INTERNAL_H
#define FSS_CLI_REPORT_HTML_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "collector/analysis.h"
#include "rules/findings.h"

/* The width of every chart, in SVG user units (the page scales it). */
#define HTML_CHART_W 760

/* More ranks than this are drawn as a heat strip, not as lanes. */
#define HTML_LANES_MAX 64

/* The fill of a gather's bar by its cause (enum analysis_cause). */
const char *html_cause_colour(int cause);

/* html_mfu - MFU of the representative step (ANALYSIS_UNKNOWN when not
 * known) and, in words, either it with where its peak came from or what is
 * missing: text from the job (a GPU's name) included, for escaping. */
double html_mfu(const struct analysis_result *a, char *words, size_t len);

/* The sections, each an <h2> and its chart; every figure from a, every
 * name escaped. */
void html_waterfall(FILE *out, const struct analysis_result *a);
void html_units(FILE *out, const struct analysis_result *a);
void html_gather_bars(FILE *out, const struct analysis_result *a);
void html_memory(FILE *out, const struct analysis_result *a);
/* The lanes from the per-rank figures (no kernels at hand), or the heat
 * strip past HTML_LANES_MAX ranks. */
void html_rank_lanes(FILE *out, const struct analysis_result *a);

/* The what-if model of a result (cli/report_html_whatif.c), opaque: NULL
 * when the build's analysis has none or it could not be made. */
typedef struct html_whatif html_whatif_t;
html_whatif_t *html_whatif_new(const struct analysis_result *a);
void html_whatif_free(html_whatif_t *w);

/* html_best_gain - the largest known gain of f's fixes (predicted or
 * bounded), NULL when none is known. */
const struct finding_gain *html_best_gain(const struct finding *f);

/* html_whatif_table - the what-if table: a row per prediction with its
 * basis and the changes left out with why, or "what-if: not computed" and
 * why; never a row made up. */
void html_whatif_table(FILE *out, const struct analysis_result *a, const html_whatif_t *w);

#endif
