/*
 * kineto_result.h - the finished analysis of a session over PyTorch
 * profiler traces (collector/kineto_input.h): its read, gaps and notes.
 */
#ifndef FSS_COLLECTOR_KINETO_RESULT_H
#define FSS_COLLECTOR_KINETO_RESULT_H

#include <stddef.h>

#include "collector/analysis.h"

typedef struct fss_session fss_session_t;

/*
 * kineto_result_finish - finish the analysis of s (its input a Kineto
 * input; rc how the read ended) into *out (analysis_result_free): a file
 * read in part marks it truncated and is a gap at its byte offset, and the
 * notes say what the traces cannot tell and what was inferred. Returns 0
 * or the analysis' error (worded in err).
 */
int kineto_result_finish(fss_session_t *s, int rc, struct analysis_result **out, char *err, size_t errlen);

#endif
