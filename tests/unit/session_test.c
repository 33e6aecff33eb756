/*
 * session_test.c - collector/session: a trace read through a session is
 * analysed as lint analyses it, whichever the input (files, a live ingest
 * merging the file), and its tool sees every record once, by type.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include "collector/analyze_traces.h"
#include "collector/session.h"
#include "common/error.h"
#include "common/record.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct counts {
	uint64_t hellos, collectives, kernels, ends, others, nvtx_named, steps;
	uint64_t job_steps, last_job_step;
	int job_steps_in_order;
};

static int c_hello(void *ctx, const struct source *src, const struct fss_rec_process_hello *rec)
{
	struct counts *c = ctx;

	assert_non_null(src);
	assert_int_equal(src->pid, rec->pid);
	c->hellos++;
	return 0;
}

static int c_collective(void *ctx, const struct source *src, const struct fss_rec_collective *rec)
{
	struct counts *c = ctx;

	/* the view took the record in before the tool sees it */
	assert_non_null(src);
	assert_true(src->max_seq >= rec->seq);
	c->collectives++;
	return 0;
}

static int c_kernel(void *ctx, const struct source *src, const struct fss_rec_gpu_interval *rec)
{
	(void)src;
	(void)rec;
	((struct counts *)ctx)->kernels++;
	return 0;
}

static int c_end(void *ctx, const struct source *src, const struct fss_record_head *rec)
{
	assert_true(rec->type == FSS_REC_PROCESS_END || rec->type == FSS_REC_PROCESS_EXIT);
	assert_non_null(src);
	((struct counts *)ctx)->ends++;
	return 0;
}

static int c_record(void *ctx, const struct source *src, const struct fss_record_head *rec)
{
	/* the typed ones do not fall back */
	assert_true(rec->type != FSS_REC_PROCESS_HELLO && rec->type != FSS_REC_COLLECTIVE &&
		    rec->type != FSS_REC_GPU_INTERVAL && rec->type != FSS_REC_PROCESS_END);
	(void)src;
	((struct counts *)ctx)->others++;
	return 0;
}

static int c_nvtx(void *ctx, const struct source *src, const struct fss_rec_nvtx_range *range, const char *domain,
		  const char *name)
{
	(void)src;
	(void)range;
	assert_non_null(domain);
	assert_non_null(name);
	((struct counts *)ctx)->nvtx_named++;
	return 0;
}

static void c_step(void *ctx, const struct analysis_step_info *step)
{
	(void)step;
	((struct counts *)ctx)->steps++;
}

static int c_job_step(void *ctx, uint64_t job_step)
{
	struct counts *c = ctx;

	if (job_step != c->last_job_step + 1)
		c->job_steps_in_order = 0;
	c->last_job_step = job_step;
	c->job_steps++;
	return 0;
}

static struct fss_session_tool counting_tool(struct counts *c)
{
	struct fss_session_tool t = {.ctx = c,
				     .on_hello = c_hello,
				     .on_collective = c_collective,
				     .on_kernel = c_kernel,
				     .on_source_end = c_end,
				     .on_record = c_record,
				     .on_nvtx_range = c_nvtx,
				     .on_step = c_step,
				     .on_job_step = c_job_step};

	memset(c, 0, sizeof(*c));
	c->job_steps_in_order = 1;
	return t;
}

/* What lint says of the trace, and what a session says: the same. */
static void assert_same_analysis(const struct analysis_result *a, const struct analysis_result *b)
{
	assert_int_equal(a->ranks, b->ranks);
	assert_int_equal(a->world_size, b->world_size);
	assert_int_equal(a->steps_seen, b->steps_seen);
	assert_int_equal(a->steps_analyzed, b->steps_analyzed);
	assert_int_equal(a->warmup_steps, b->warmup_steps);
	assert_int_equal(a->irregular_steps, b->irregular_steps);
	assert_string_equal(a->step_range_name, b->step_range_name);
	assert_int_equal(a->nsources, b->nsources);
	for (size_t i = 0; i < a->nsources; i++) {
		assert_int_equal(a->sources[i].rank, b->sources[i].rank);
		assert_int_equal(a->sources[i].records, b->sources[i].records);
		assert_int_equal(a->sources[i].collectives, b->sources[i].collectives);
		assert_int_equal(a->sources[i].dropped, b->sources[i].dropped);
	}
}

static struct analysis_result *lint_analysis(const char *path)
{
	struct analysis_result *r = NULL;
	merge_t *merge = NULL;
	char err[256];

	assert_int_equal(analyze_traces(&path, 1, NULL, &r, &merge, err, sizeof(err)), 0);
	merge_free(merge);
	return r;
}

static void files_as_lint(const char *name)
{
	char path[512];
	const char *paths[1] = {path};
	struct counts c;
	struct fss_session_tool tool = counting_tool(&c);
	struct fss_session_options o = {.tool = &tool};
	struct analysis_result *r = NULL, *lint;
	fss_session_t *s;
	uint64_t collectives = 0;
	char err[256];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", FSS_GOLDEN_DIR, name);
	lint = lint_analysis(path);
	assert_int_equal(fss_session_new(&s, &o), 0);
	assert_int_equal(fss_session_open_files(s, paths, 1, err, sizeof(err)), 0);
	assert_int_equal(fss_session_open_files(s, paths, 1, err, sizeof(err)), -EBUSY);
	rc = fss_session_read(s, 0);
	assert_true(rc == 0 || rc == FSS_E_TRUNCATED || rc == FSS_E_CORRUPT);
	for (size_t i = 0; i < sources_count(fss_session_view(s)); i++)
		collectives += sources_at(fss_session_view(s), i)->collectives;
	assert_int_equal(c.collectives, collectives);
	assert_int_equal(c.hellos, sources_count(fss_session_view(s)));
	assert_true(c.others > 0);
	assert_true(c.job_steps_in_order);
	assert_int_equal(c.last_job_step, fss_session_job_step(s));
	assert_int_equal(fss_session_finish_analysis(s, rc, &r), 0);
	assert_same_analysis(lint, r);
	assert_int_equal(lint->trace.truncated, r->trace.truncated);
	analysis_result_free(r);
	analysis_result_free(lint);
	fss_session_free(s);
}

static void test_files_linear(void **state)
{
	(void)state;
	files_as_lint("linear.fss");
}

static void test_files_block(void **state)
{
	(void)state;
	files_as_lint("block.fss");
}

static void test_files_cut(void **state)
{
	(void)state;
	files_as_lint("cut.fss");
}

/* A live ingest input that merges the trace: the session's view is the
 * ingest's, and the analysis streamed from its callback is lint's of the
 * trace it wrote. */
static void test_ingest_as_lint(void **state)
{
	char src[512], dir[] = "/tmp/session_test.XXXXXX", out[600];
	struct counts c;
	struct fss_session_tool tool = counting_tool(&c);
	struct fss_session_options o = {.tool = &tool, .live = 1};
	struct fss_session_ingest_options io = {0};
	const struct ingest_stats *stats = NULL;
	struct analysis_result *r = NULL, *lint;
	const char *what, *note;
	fss_session_t *s;
	ingest_t *ing;

	(void)state;
	snprintf(src, sizeof(src), "%s/%s", FSS_GOLDEN_DIR, "linear.fss");
	assert_non_null(mkdtemp(dir));
	snprintf(out, sizeof(out), "%s/out.fss", dir);
	io.output_path = out;
	io.folder = dir;
	assert_int_equal(fss_session_new(&s, &o), 0);
	assert_non_null(fss_session_live(s));
	assert_int_equal(fss_session_open_ingest(s, &io, &ing, &what), 0);
	fss_session_in_files(s, 1);
	assert_int_equal(ingest_add_file(ing, src), 0);
	fss_session_in_files(s, 0);
	assert_int_equal(fss_session_agent_records(s), 0);
	assert_int_equal(fss_session_end_ingest(s, &stats, &note), 0);
	assert_non_null(stats);
	assert_null(note);
	/* one view: the ingest's stats point into the session's */
	assert_int_equal(stats->sources, sources_count(fss_session_view(s)));
	assert_ptr_equal(stats->per_source[0].view, sources_find(fss_session_view(s), 0));
	assert_int_equal(c.collectives, stats->by_type[FSS_REC_COLLECTIVE]);
	assert_int_equal(fss_session_finish_analysis(s, 0, &r), 0);
	lint = lint_analysis(out);
	assert_same_analysis(lint, r);
	analysis_result_free(r);
	analysis_result_free(lint);
	fss_session_free(s);
	unlink(out);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_files_linear),
	    cmocka_unit_test(test_files_block),
	    cmocka_unit_test(test_files_cut),
	    cmocka_unit_test(test_ingest_as_lint),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
