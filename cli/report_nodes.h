/*
 * report_nodes.h - the nodes of a job, as report prints them: per trace
 * (one per node's collector) its hosts, ranks, and the clock offset the
 * merge applied (collector/merge.h), in the JSON report ("nodes",
 * docs/report-schema.md) and the text one.
 */
#ifndef FSS_CLI_REPORT_NODES_H
#define FSS_CLI_REPORT_NODES_H

#include <stdio.h>

#include "cli/diagnosis.h"

/*
 * report_nodes_json - the report's "nodes" member (an object) through the
 * report's writer, at its depth. One trace gives one node, the reference,
 * its figures from the analysis' sources.
 */
struct jw;
void report_nodes_json(struct jw *w, const struct diagnosis *d);

/*
 * report_nodes_text - a "nodes" block for the text report when the job was
 * read from several traces or its trace holds only some of its ranks;
 * nothing otherwise.
 */
void report_nodes_text(FILE *out, const struct diagnosis *d);

#endif
