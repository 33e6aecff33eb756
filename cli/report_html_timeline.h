/*
 * report_html_timeline.h - the kernels of one step of every rank, for the
 * HTML report's timeline (section 5). Two reads of the trace: the first,
 * the diagnosis itself, tells each rank's step windows (its steps' start
 * and length, by ordinal) through its on_step; once the analysis has named
 * the representative step, the second keeps only the kernels (compute and
 * NCCL, as export/job_events.h draws them) that fall in that step's window
 * of their rank, so that memory follows one step, not the run.
 */
#ifndef FSS_CLI_REPORT_HTML_TIMELINE_H
#define FSS_CLI_REPORT_HTML_TIMELINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collector/analysis.h"

struct fss_session_tool;
struct diagnosis;
struct diagnosis_flags;

typedef struct html_timeline html_timeline_t;

/* html_timeline_new - an empty one, NULL on ENOMEM; html_timeline_free releases it (NULL ok). */
html_timeline_t *html_timeline_new(void);
void html_timeline_free(html_timeline_t *t);

/* html_timeline_steps_tool - the session tool for the first read (the
 * diagnosis): it records every step's window; ctx is t. */
void html_timeline_steps_tool(html_timeline_t *t, struct fss_session_tool *out);

/*
 * html_timeline_read - the second read of d's traces with f's options:
 * keeps the kernels of step d->result->exposure.step of every rank. Not
 * done (0, nothing kept) past HTML_LANES_MAX ranks, where the page draws a
 * heat strip. Returns 0 or a negative errno with why in err.
 */
int html_timeline_read(html_timeline_t *t, const struct diagnosis *d, const struct diagnosis_flags *f, char *err,
		       size_t errlen);

/* html_timeline_draw - section 5: a lane per rank from t's kernels (t NULL
 * or empty: from the per-rank figures), or the heat strip past
 * HTML_LANES_MAX ranks. */
void html_timeline_draw(FILE *out, const struct analysis_result *a, const html_timeline_t *t);

#endif
