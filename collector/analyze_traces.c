/*
 * analyze_traces.c - the analysis of trace files: one (analyze.h's
 * analyze_trace), or several read as one job (analyze_traces.h), on a
 * session over the files (collector/session.h), whose input keeps what
 * each read says of its file for the result's trace end and gaps.
 */
#include "collector/analyze_traces.h"

#include "collector/analyze.h"
#include "collector/kineto_input.h"
#include "collector/kineto_result.h"
#include "collector/session.h"
#include "common/error.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* How bad an end is, for "the worst trace's". */
static int end_rank(enum trace_end end)
{
	switch (end) {
	case TRACE_END_CLEAN:
		return 0;
	case TRACE_END_NOT_MARKED:
		return 1;
	case TRACE_END_MISSING:
		return 2;
	case TRACE_END_CUT:
		return 3;
	default:
		return 4;
	}
}

/* The words of a trace's end, for the report. */
static const char *end_name(enum trace_end end)
{
	static const char *const ends[] = {
	    [TRACE_END_CLEAN] = "clean",
	    [TRACE_END_NOT_MARKED] = "not-marked",
	    [TRACE_END_MISSING] = "not-closed",
	    [TRACE_END_CUT] = "cut",
	};

	return (size_t)end < sizeof(ends) / sizeof(ends[0]) ? ends[end] : NULL;
}

/* Add what the reader of one trace skipped to r's gaps (the first
 * ANALYSIS_GAPS_MAX over all traces). path, when several traces are read as
 * one, prefixes each gap's words: offsets are of each file. */
static void result_add_gaps(struct analysis_result *r, const struct trace_read_info *info, const char *path)
{
	r->trace.gaps_total += info->damage.gaps;
	for (size_t i = 0; i < info->ngaps && r->trace.ngaps < ANALYSIS_GAPS_MAX; i++) {
		struct analysis_gap *g = &r->trace.gaps[r->trace.ngaps++];

		g->offset = info->gaps[i].offset;
		g->bytes = info->gaps[i].bytes;
		g->first_missing = info->gaps[i].first_missing;
		g->chunks_missing = info->gaps[i].chunks_missing;
		g->to_end = info->gaps[i].to_end;
		if (path)
			snprintf(g->why, sizeof(g->why), "%s: %s", path, info->gaps[i].why);
		else
			snprintf(g->why, sizeof(g->why), "%s", info->gaps[i].why);
	}
}

/* How the file ended and what the reader skipped, for the report. */
static void result_set_read(struct analysis_result *r, const struct trace_read_info *info)
{
	r->trace.end = end_name(info->end);
	r->trace.gaps_total = 0;
	r->trace.ngaps = 0;
	result_add_gaps(r, info, NULL);
}

/* The same over several traces: the worst end, every trace's gaps. */
static void result_set_reads(struct analysis_result *r, const struct merge_node *nodes, size_t n)
{
	enum trace_end worst = TRACE_END_CLEAN;

	r->trace.gaps_total = 0;
	r->trace.ngaps = 0;
	for (size_t k = 0; k < n; k++) {
		if (end_rank(nodes[k].info.end) > end_rank(worst))
			worst = nodes[k].info.end;
		result_add_gaps(r, &nodes[k].info, nodes[k].path);
	}
	r->trace.end = end_name(worst);
}

/* One trace: analysed when it is one; err as the reader words the file. */
static int finish_one(fss_session_t *s, int rc, struct analysis_result **out, char *err, size_t errlen)
{
	const struct trace_read_info *info = fss_session_read_info(s);

	if (info->input != TRACE_INPUT_TRACE) {
		/* Empty, not a trace, an unreadable header, no records: nothing to
		 * analyse, and the reader's words say what the file is. */
		if (rc >= 0)
			rc = FSS_E_NOT_TRACE;
	} else {
		/* Cut short, not closed by its writer, or damaged stretches
		 * skipped: analysed, and said to be incomplete. */
		rc = fss_session_finish_analysis(s, rc, out);
	}
	if (rc == 0)
		result_set_read(*out, info);
	if (rc < 0 && errlen)
		snprintf(err, errlen, "%s%s", info->message[0] ? info->message : fss_strerror(rc),
			 rc == FSS_E_NOT_TRACE && info->input == TRACE_INPUT_NOT_TRACE
				 ? "; nor a PyTorch profiler trace (Chrome-trace JSON, or gzip of one)"
				 : "");
	return rc;
}

/* Several traces: err names the first whose read failed. */
static int finish_job(fss_session_t *s, int rc, struct analysis_result **out, char *err, size_t errlen)
{
	size_t nnodes;
	const struct merge_node *nodes = merge_nodes(fss_session_merge(s), &nnodes);

	/* a trace cut short or damaged: analysed, and said to be incomplete */
	rc = fss_session_finish_analysis(s, rc, out);
	if (rc == 0) {
		result_set_reads(*out, nodes, nnodes);
		/* each trace is one node's collector, whatever its host calls itself */
		for (size_t k = 0; k < nnodes; k++)
			(*out)->merged_nodes += nodes[k].nranks > 0;
	}
	if (rc < 0 && errlen) {
		const char *why = fss_strerror(rc);
		const char *path = "";

		for (size_t k = 0; k < nnodes; k++)
			if (nodes[k].read_rc && nodes[k].read_rc != FSS_E_TRUNCATED &&
			    nodes[k].read_rc != FSS_E_CORRUPT) {
				path = nodes[k].path;
				if (nodes[k].info.message[0])
					why = nodes[k].info.message;
				break;
			}
		snprintf(err, errlen, "%s%s%s", path, path[0] ? ": " : "", why);
	}
	return rc;
}

int analyze_trace(const char *path, const struct analysis_options *opts, struct analysis_result **out, char *err,
		  size_t errlen)
{
	merge_t *merge = NULL;

	return analyze_traces(&path, 1, opts, out, &merge, err, errlen);
}

int analyze_traces(const char *const *paths, size_t n, const struct analysis_options *opts,
		   struct analysis_result **out, merge_t **merge, char *err, size_t errlen)
{
	return analyze_traces_tool(paths, n, opts, NULL, out, merge, err, errlen);
}

int analyze_traces_tool(const char *const *paths, size_t n, const struct analysis_options *opts,
			const struct fss_session_tool *tool, struct analysis_result **out, merge_t **merge, char *err,
			size_t errlen)
{
	struct fss_session_options o = {.analysis = opts, .tool = tool, .read_flags = opts ? opts->read_flags : 0};
	fss_session_t *s;
	int rc;

	*out = NULL;
	*merge = NULL;
	rc = fss_session_new(&s, &o);
	if (rc < 0) {
		if (errlen)
			snprintf(err, errlen, "out of memory");
		return rc;
	}
	rc = fss_session_open_files(s, paths, n, err, errlen);
	if (rc == 0) {
		size_t nkineto;

		rc = fss_session_read(s, 0);
		if (kineto_input_files(s, &nkineto))
			rc = kineto_result_finish(s, rc, out, err, errlen);
		else
			rc = n == 1 ? finish_one(s, rc, out, err, errlen) : finish_job(s, rc, out, err, errlen);
	}
	if (rc == 0 && n > 1 && fss_session_merge(s))
		*merge = fss_session_release_merge(s);
	fss_session_free(s);
	return rc;
}
