/*
 * analyze_traces.h - the diagnosis of one job from several traces (one per
 * node), merged as collector/merge.h reads them. Part of the session
 * library (fss_session): the files are read through a session.
 */
#ifndef FSS_COLLECTOR_ANALYZE_TRACES_H
#define FSS_COLLECTOR_ANALYZE_TRACES_H

#include <stddef.h>

#include "collector/analysis.h"
#include "collector/merge.h"

/*
 * analyze_trace - read the trace file at path and analyse it. A trace that
 * ends inside a chunk (a killed writer) or at a damaged chunk is analysed up
 * to there (result->trace.truncated = 1). Returns 0 with *out set, or a
 * negative errno / FSS_E_* (common/error.h) with a message in err when
 * errlen > 0: the file is not a trace, or cannot be read. It reads the file
 * through a session (fss_session).
 */
int analyze_trace(const char *path, const struct analysis_options *opts, struct analysis_result **out, char *err,
		  size_t errlen);

/*
 * analyze_traces - analyse the n traces at paths as one job. One trace is
 * analyze_trace's analysis exactly (*merge set to NULL). Several are read
 * through a merge (sources renumbered, clocks aligned on the first trace's),
 * handed back in *merge (the caller's, merge_free) for what it says of the
 * nodes; the result's trace.truncated, end and gaps are those of the worst
 * trace ("clean" only when every trace is). Returns 0 with *out set, or a
 * negative errno / FSS_E_* with the reason in err: a file that is not a
 * trace or cannot be read (named), a process in two traces (-EEXIST).
 */
int analyze_traces(const char *const *paths, size_t n, const struct analysis_options *opts,
		   struct analysis_result **out, merge_t **merge, char *err, size_t errlen);

struct fss_session_tool;

/*
 * analyze_traces_tool - analyze_traces with a consumer of the records
 * (collector/session.h's struct fss_session_tool, copied; NULL: none): it
 * sees every record of the read as the analysis does, and its on_step
 * every step. For exporters, which write what the records say as they
 * come and what the analysis concluded at the end.
 */
int analyze_traces_tool(const char *const *paths, size_t n, const struct analysis_options *opts,
			const struct fss_session_tool *tool, struct analysis_result **out, merge_t **merge, char *err,
			size_t errlen);

#endif
