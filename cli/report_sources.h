/*
 * report_sources.h - how each process of a trace ended, as lint and report
 * print it (the JSON form is in report_json.c, "sources").
 */
#ifndef FSS_CLI_REPORT_SOURCES_H
#define FSS_CLI_REPORT_SOURCES_H

#include <stdio.h>

#include "collector/analysis.h"

/* report_source_troubled - the process did not end cleanly (killed, exited
 * non-zero or without its process_end, cut off) or the trace misses some
 * of its collectives. */
int report_source_troubled(const struct source_summary *s);

/* report_sources_troubled - how many processes of a are troubled. */
uint32_t report_sources_troubled(const struct analysis_result *a);

/*
 * report_sources_troubles - one line per troubled process, under a heading,
 * e.g. "  rank 1, pid 1001, host node-b: killed by signal 9 (SIGKILL), last
 * record at 2026-12-01 11:40:02.123 UTC (2.1 s after its first)"; nothing
 * when every process ended cleanly. `indent` prefixes every line.
 */
void report_sources_troubles(FILE *out, const struct analysis_result *a, const char *indent);

/* report_sources_table - every process: rank, pid, host, end, records,
 * collectives seen and missing, drops; then report_sources_troubles(). */
void report_sources_table(FILE *out, const struct analysis_result *a);

/* report_sources_attach - what fsdpscope attach inferred, for a trace with
 * attached sources (a->attach): how steps were found, why exposure is not
 * measured, how each attached process ended, and per communicator what was
 * inferred, in words; nothing without attached sources. */
void report_sources_attach(FILE *out, const struct analysis_result *a);

/* report_rank_from_words - enum source_rank_from in words ("rank from
 * in-place AllGathers", "rank guessed from pid order", ...). Never NULL. */
const char *report_rank_from_words(int from);

#endif
