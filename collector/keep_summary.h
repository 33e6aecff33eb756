/*
 * keep_summary.h - summary: the first steps of every rank in full; then
 * each rank's records of a step are held back (one step in progress per
 * rank, bounded) until the analysis completes the step: a step that stands
 * out (lost collectives, slower than twice the running median) is written
 * in full, any other becomes one step_summary record.
 */
#ifndef FSS_COLLECTOR_KEEP_SUMMARY_H
#define FSS_COLLECTOR_KEEP_SUMMARY_H

#include "collector/keep_state.h"

/* keep_summary_record - a record of source src, offered to the summary: 0
 * write it now, 1 the summary holds it back or leaves it out, or a negative
 * errno. */
int keep_summary_record(keeper_t *k, const struct fss_record_head *rec, const struct source *src);

/* keep_summary_step - a step completed: decided (in full or summarised),
 * the held records it decides written or left out. */
void keep_summary_step(keeper_t *k, const struct analysis_step_info *step);

/* keep_summary_drain - write every record still held back, in full. */
void keep_summary_drain(keeper_t *k);

/* keep_summary_free - release the sources' buffers (the keeper is going). */
void keep_summary_free(keeper_t *k);

#endif
