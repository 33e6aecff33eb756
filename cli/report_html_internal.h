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

/* The width of every chart, in SVG user units (the page scales it). */
#define HTML_CHART_W 760

/* More ranks than this are drawn as a heat strip, not as lanes. */
#define HTML_LANES_MAX 64

/* The fill of a gather's bar by its cause (enum analysis_cause). */
const char *html_cause_colour(int cause);

/* The sections, each an <h2> and its chart; every figure from a, every
 * name escaped. */
void html_waterfall(FILE *out, const struct analysis_result *a);
void html_units(FILE *out, const struct analysis_result *a);
void html_gather_bars(FILE *out, const struct analysis_result *a);
void html_memory(FILE *out, const struct analysis_result *a);
/* The lanes from the per-rank figures (no kernels at hand), or the heat
 * strip past HTML_LANES_MAX ranks. */
void html_rank_lanes(FILE *out, const struct analysis_result *a);

#endif
