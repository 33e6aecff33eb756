/*
 * analyze_traces.c - the analysis of trace files: one (analyze.h's
 * analyze_trace), or several read as one job (analyze_traces.h).
 */
#include "collector/analyze_traces.h"

#include "collector/analyze.h"
#include "common/error.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct traces_ctx {
	analyzer_t *analyzer;
	uint32_t keep_flags, keep_steps; /* over every header so far */
};

static int traces_on_header(void *ctx, const struct fss_file_header *h)
{
	struct traces_ctx *t = ctx;

	/* A trace that kept part of its steps makes the job's reading partial
	 * too: the union of the policies. */
	t->keep_flags |= h->flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY);
	if (h->keep_steps && (!t->keep_steps || h->keep_steps < t->keep_steps))
		t->keep_steps = h->keep_steps;
	analyzer_set_keep(t->analyzer, t->keep_flags, t->keep_steps);
	return 0;
}

static int traces_on_record(void *ctx, const struct fss_record_head *rec)
{
	return analyzer_feed(((struct traces_ctx *)ctx)->analyzer, rec);
}

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

static int on_record(void *ctx, const struct fss_record_head *rec)
{
	return analyzer_feed(ctx, rec);
}

static int on_header(void *ctx, const struct fss_file_header *h)
{
	analyzer_set_keep(ctx, h->flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY), h->keep_steps);
	return 0;
}

int analyze_trace(const char *path, const struct analysis_options *opts, struct analysis_result **out, char *err,
		  size_t errlen)
{
	*out = NULL;
	analyzer_t *a;
	int rc = analyzer_new(&a, opts);
	if (rc < 0) {
		if (errlen)
			snprintf(err, errlen, "out of memory");
		return rc;
	}
	struct trace_parser_ops ops = {.on_header = on_header, .on_record = on_record};
	struct trace_read_info info;
	rc = trace_read(path, &ops, a, &info);
	if (info.input != TRACE_INPUT_TRACE) {
		/* Empty, not a trace, an unreadable header, no records: nothing to
		 * analyse, and the reader's words say what the file is. */
		if (rc >= 0)
			rc = FSS_E_NOT_TRACE;
	} else if (rc == FSS_E_TRUNCATED || rc == FSS_E_CORRUPT) {
		/* Cut short, not closed by its writer, or damaged stretches
		 * skipped: analysed, and said to be incomplete. */
		analyzer_set_truncated(a);
		rc = 0;
	}
	if (rc == 0)
		rc = analyzer_finish(a, out);
	if (rc == 0)
		result_set_read(*out, &info);
	if (rc < 0 && errlen)
		snprintf(err, errlen, "%s", info.message[0] ? info.message : fss_strerror(rc));
	analyzer_free(a);
	return rc;
}

int analyze_traces(const char *const *paths, size_t n, const struct analysis_options *opts,
		   struct analysis_result **out, merge_t **merge, char *err, size_t errlen)
{
	struct traces_ctx t = {0};
	struct trace_parser_ops ops = {.on_header = traces_on_header, .on_record = traces_on_record};
	const struct merge_node *nodes;
	size_t nnodes;
	merge_t *m = NULL;
	int rc;

	*out = NULL;
	*merge = NULL;
	if (n == 1)
		return analyze_trace(paths[0], opts, out, err, errlen);
	rc = merge_open(&m, paths, n, err, errlen);
	if (rc)
		return rc;
	rc = analyzer_new(&t.analyzer, opts);
	if (rc < 0) {
		if (errlen)
			snprintf(err, errlen, "out of memory");
		merge_free(m);
		return rc;
	}
	rc = merge_read(m, &ops, &t);
	nodes = merge_nodes(m, &nnodes);
	if (rc == FSS_E_TRUNCATED || rc == FSS_E_CORRUPT) {
		/* a trace cut short or damaged: analysed, and said to be incomplete */
		analyzer_set_truncated(t.analyzer);
		rc = 0;
	}
	if (rc == 0)
		rc = analyzer_finish(t.analyzer, out);
	if (rc == 0)
		result_set_reads(*out, nodes, nnodes);
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
	analyzer_free(t.analyzer);
	if (rc) {
		merge_free(m);
		return rc;
	}
	*merge = m;
	return 0;
}
