/*
 * whatif_print.h - the what-if model in the report: the JSON members
 * "whatif" and "whatif_model" (docs/report-schema.md) and the text report's
 * table.
 */
#ifndef FSS_COLLECTOR_WHATIF_PRINT_H
#define FSS_COLLECTOR_WHATIF_PRINT_H

#include <stdio.h>

#include "collector/analysis.h"

struct jw;

/*
 * whatif_json - "whatif" (the predicted changes, each at most once, only
 * where they differ from the job) and "whatif_model" (the fits, the depth
 * seen, the changes left out and why) through the report's writer at its
 * depth; out of memory, an empty list and a model whose note says so.
 */
void whatif_json(struct jw *w, const struct analysis_result *r);

/*
 * whatif_text - the text report's "What-if" table: one line per change with
 * its predicted step, exposed AllGather and peak, then the changes left
 * out, or why nothing could be predicted. Returns 0 or -ENOMEM.
 */
int whatif_text(FILE *out, const struct analysis_result *r);

/* whatif_bound_name - "latency", "bandwidth", or NULL when unknown. */
const char *whatif_bound_name(int bound);

#endif
