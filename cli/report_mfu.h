/*
 * report_mfu.h - the report's MFU: the "mfu" object of report --json, a
 * source's "device", and the text line's MFU part.
 */
#ifndef FSS_CLI_REPORT_MFU_H
#define FSS_CLI_REPORT_MFU_H

#include <stdio.h>

#include "collector/analysis.h"
#include "collector/source.h"
#include "common/json_writer.h"

/* report_mfu_json - the "mfu" member (docs/report-schema.md, "mfu"). */
void report_mfu_json(struct jw *w, const struct analysis_mfu *m);

/* report_source_device_json - a source's "device" member: its first GPU, or null. */
void report_source_device_json(struct jw *w, const struct source_summary *s);

/*
 * report_mfu_text - the MFU part of the breakdown line, newline included:
 * "; MFU 41.2% (...; peak 989.5e12 FLOP/s x 8 from device table: ...)" or
 * "; MFU unknown: <what is missing>".
 */
void report_mfu_text(FILE *out, const struct analysis_mfu *m);

#endif
