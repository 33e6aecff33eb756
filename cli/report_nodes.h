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
 * report_nodes_json - the value of the report's "nodes" key (an object),
 * pretty-printed as report_json.c prints the rest, its members `depth`
 * levels deep; no newline after its closing brace. One trace gives one
 * node, the reference, its figures from the analysis' sources.
 */
void report_nodes_json(FILE *out, const struct diagnosis *d, int depth);

/*
 * report_nodes_text - a "nodes" block for the text report when the job was
 * read from several traces or its trace holds only some of its ranks;
 * nothing otherwise.
 */
void report_nodes_text(FILE *out, const struct diagnosis *d);

#endif
