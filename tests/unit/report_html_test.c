/*
 * report_html_test.c - the HTML report's escaper (cli/report_html_escape.c)
 * and its page on hand-built results (cli/report_html.c): markup and
 * invalid UTF-8 from the job come out as text, never as markup; the charts
 * have a bar per gather and a lane per rank (a heat cell past 64 ranks);
 * MFU is shown when the result has it and said unknown otherwise; the file
 * is written whole through a temporary name and replaces a link.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/diagnosis.h"
#include "cli/report_html.h"
#include "cli/report_html_escape.h"
#include "collector/source.h"

/* What html_escape_n makes of len bytes, in a malloc'ed string. */
static char *escaped(const char *s, size_t len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&buf, &n);

	assert_non_null(m);
	html_escape_n(m, s, len);
	fclose(m);
	return buf;
}

static void expect_escaped(const char *in, size_t len, const char *want)
{
	char *got = escaped(in, len);

	assert_string_equal(got, want);
	assert_true(html_utf8_valid(got, strlen(got)));
	free(got);
}

static void test_markup(void **state)
{
	(void)state;
	expect_escaped("</title><script>alert(1)</script>", 33,
		       "&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;");
	expect_escaped("\"><img src=x onerror=alert(1)>", 30, "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;");
	expect_escaped("a'b&c", 5, "a&#39;b&amp;c");
	expect_escaped("javascript:alert(1)", 19, "javascript:alert(1)"); /* text: harmless without a link */
	expect_escaped("tab\tnl\n", 7, "tab\tnl\n");
	expect_escaped("nul\0bel\a", 8, "nul\xEF\xBF\xBD" "bel\xEF\xBF\xBD");
}

static void test_utf8(void **state)
{
	(void)state;
	/* well-formed: 2, 3 and 4 bytes pass as they are */
	expect_escaped("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 9, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
	/* a lone continuation byte, a lead byte never used, a cut sequence at the end */
	expect_escaped("a\x80" "b", 3, "a\xEF\xBF\xBD" "b");
	expect_escaped("\xFF\xFE", 2, "\xEF\xBF\xBD\xEF\xBF\xBD");
	expect_escaped("x\xE2\x82", 3, "x\xEF\xBF\xBD\xEF\xBF\xBD");
	/* an overlong '/', a UTF-16 surrogate, a code point past U+10FFFF: each byte replaced */
	expect_escaped("\xC0\xAF", 2, "\xEF\xBF\xBD\xEF\xBF\xBD");
	expect_escaped("\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
	expect_escaped("\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
	/* a bad byte followed by markup: both handled */
	expect_escaped("\xC3<", 2, "\xEF\xBF\xBD&lt;");
	assert_false(html_utf8_valid("\xC3(", 2));
	assert_true(html_utf8_valid("\xC3\xA9", 2));
}

static void test_printf_long(void **state)
{
	char *big = malloc(20001), *buf = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&buf, &n);

	(void)state;
	memset(big, '<', 20000);
	big[20000] = 0;
	html_printf(m, "%s", big);
	fclose(m);
	/* cut at 16 kB less the NUL, every '<' a reference */
	assert_int_equal(n, 16383 * 4);
	assert_null(strchr(buf, '<'));
	free(buf);
	free(big);
}

/* A result of `ranks` ranks and `ngathers` gathers, names hostile. */
static struct analysis_result *result_new(uint32_t ranks, uint32_t ngathers)
{
	struct analysis_result *a = calloc(1, sizeof *a);

	a->verdict = ANALYSIS_DIAGNOSED;
	a->steps_analyzed = 4;
	a->breakdown.step_ns = 10000000;
	a->breakdown.compute_ns = 6000000;
	a->breakdown.exposed_comm_ns = 3000000;
	a->breakdown.idle_ns = 1000000;
	a->breakdown.mfu = ANALYSIS_UNKNOWN;
#if __has_include("collector/mfu.h") /* MFU with its inputs named */
	a->mfu.mfu = ANALYSIS_UNKNOWN;
	a->mfu.missing = ANALYSIS_MFU_NO_FLOPS;
#endif
	a->exposure.source = ANALYSIS_EXPOSURE_HOST;
	a->exposure.cause_ns[ANALYSIS_CAUSE_NO_PREFETCH] = 2000000;
	a->ngathers = ngathers;
	a->gathers = calloc(ngathers, sizeof *a->gathers);
	for (uint32_t i = 0; i < ngathers; i++) {
		struct analysis_gather *g = &a->gathers[i];
		g->index = i;
		g->phase = i < ngathers / 2 ? ANALYSIS_PHASE_FORWARD : ANALYSIS_PHASE_BACKWARD;
		g->repeat = (int32_t)(i % (ngathers / 2)) / 2;
		g->duration_ns = 100000 + i;
		g->exposed_ns = i % 2 ? 50000 : 0;
		g->cause = i % 2 ? ANALYSIS_CAUSE_NO_PREFETCH : ANALYSIS_CAUSE_HIDDEN;
		snprintf(g->name, sizeof g->name, "</title><script>alert(%u)</script>", i);
	}
	a->nper_rank = ranks;
	a->per_rank = calloc(ranks, sizeof *a->per_rank);
	for (uint32_t r = 0; r < ranks; r++) {
		a->per_rank[r].rank = (int32_t)r;
		a->per_rank[r].step_ns = 10000000 + r * 1000;
		a->per_rank[r].compute_ns = 6000000;
		a->per_rank[r].allgather_ns = 2000000;
		a->per_rank[r].exposed_allgather_ns = 1000000;
	}
	a->ncomms = 1;
	a->fsdp_comm = 0;
	a->comms[0].role = ANALYSIS_ROLE_FSDP;
	a->comms[0].nranks = (int32_t)ranks;
	snprintf(a->comms[0].name, sizeof a->comms[0].name, "\"><img src=x onerror=alert(1)>\xff");
	a->nsources = 1;
	a->sources = calloc(1, sizeof *a->sources);
	snprintf(a->sources[0].command, sizeof a->sources[0].command, "train.py --name '<b>bold</b>' \xC0\xAF");
	snprintf(a->sources[0].host, sizeof a->sources[0].host, "host<1>");
	return a;
}

static void result_free(struct analysis_result *a)
{
	free(a->gathers);
	free(a->per_rank);
	free(a->sources);
	free(a);
}

static size_t occurrences(const char *s, const char *what)
{
	size_t n = 0;

	for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

static char *page_of(struct analysis_result *a)
{
	struct diagnosis d = {0};
	char *buf = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&buf, &n);

	d.result = a;
	d.findings = findings_new();
	d.trace_path = "run<1>.fss";
	findings_add(d.findings, &rule_wrap_too_fine, RULE_WARNING, "8 gathers <per> unit", "evidence <script>x</script>",
		     "fully_shard(block)  # <one per block>", NULL, NULL);
	report_html_page(m, &d, NULL);
	fclose(m);
	findings_free(d.findings);
	assert_true(html_utf8_valid(buf, n));
	return buf;
}

static void test_page_lanes(void **state)
{
	struct analysis_result *a = result_new(4, 12);
	char *page;

	(void)state;
	page = page_of(a);
	assert_int_equal(occurrences(page, "<g class=\"gather\""), 12);
	assert_int_equal(occurrences(page, "<g class=\"lane\""), 4);
	assert_int_equal(occurrences(page, "class=\"heat\""), 0);
	for (int r = 0; r < 4; r++) {
		char lane[32];
		snprintf(lane, sizeof lane, ">rank %d</text>", r);
		assert_non_null(strstr(page, lane));
	}
	/* every name from the job as text: no markup of theirs, no request */
	assert_int_equal(occurrences(page, "<script"), 0);
	assert_int_equal(occurrences(page, "<img"), 0);
	assert_int_equal(occurrences(page, "<b>bold"), 0);
	assert_int_equal(occurrences(page, "href="), 0);
	assert_int_equal(occurrences(page, "url("), 0);
	assert_non_null(strstr(page, "&lt;/title&gt;&lt;script&gt;alert(3)&lt;/script&gt;"));
	assert_non_null(strstr(page, "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;\xEF\xBF\xBD"));
	assert_non_null(strstr(page, "<title>fsdpscope report: run&lt;1&gt;.fss</title>"));
	/* the verdict and the top finding before the first chart */
	assert_true(strstr(page, "wrap-too-fine") < strstr(page, "<svg"));
	assert_true(strstr(page, "1. Verdict") < strstr(page, "<svg"));
	assert_non_null(strstr(page, "MFU unknown"));
	/* the what-if table: its rows, or why there are none (never an empty table without a word) */
	assert_non_null(strstr(page, "<table class=\"whatif\">"));
	assert_true(strstr(page, "<tr class=\"whatif-row\">") || strstr(page, "what-if: not computed ("));
	assert_non_null(strstr(page, "fully_shard(block)  # &lt;one per block&gt;"));
	free(page);
	result_free(a);
}

static void test_page_heat_and_mfu(void **state)
{
	struct analysis_result *a = result_new(256, 6);
	char *page;

	(void)state;
	a->breakdown.mfu = 0.42;
	a->breakdown.achieved_flops = 1e15;
#if __has_include("collector/mfu.h")
	a->mfu.mfu = 0.42;
	a->mfu.missing = 0;
	a->mfu.achieved_flops = 1e15;
	snprintf(a->mfu.peak_source, sizeof a->mfu.peak_source, "device table: <GPU>");
#endif
	a->per_rank[200].step_ns = 99000000; /* the slowest, listed first */
	page = page_of(a);
	assert_int_equal(occurrences(page, "<g class=\"lane\""), 0);
	assert_int_equal(occurrences(page, "class=\"heat\""), 256);
	assert_int_equal(occurrences(page, "<g class=\"gather\""), 6);
	assert_non_null(strstr(page, "<ol class=\"slowest\">\n<li>rank 200:"));
	assert_null(strstr(page, "MFU unknown"));
	assert_non_null(strstr(page, "MFU 42.0%"));
	free(page);
	result_free(a);
}

static void test_write_follows_own_link(void **state)
{
	char dir[] = "/tmp/report_html_test.XXXXXX", path[128], target[128], err[256];
	struct analysis_result *a = result_new(2, 4);
	struct diagnosis d = {0};
	struct stat st;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/out.html", dir);
	snprintf(target, sizeof target, "%s/target", dir);
	f = fopen(target, "w");
	fputs("keep", f);
	fclose(f);
	assert_int_equal(symlink(target, path), 0);
	d.result = a;
	d.trace_path = "t.fss";
	assert_int_equal(report_html_write(path, &d, NULL, err, sizeof err), 0);
	/* a link in a folder only we can write is ours: the page goes to its
	 * target, renamed there whole, and the link stays (one in a folder
	 * others can write is refused: out_file_test) */
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(stat(target, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_true(st.st_size > 4);
	unlink(path);
	unlink(target);
	/* a folder that cannot hold it: an error that names the file, and no file left */
	snprintf(path, sizeof path, "%s/missing/out.html", dir);
	assert_true(report_html_write(path, &d, NULL, err, sizeof err) < 0);
	assert_non_null(strstr(err, "missing/out.html"));
	assert_int_equal(rmdir(dir), 0); /* empty: no temporary file left */
	result_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_markup),          cmocka_unit_test(test_utf8),
	    cmocka_unit_test(test_printf_long),     cmocka_unit_test(test_page_lanes),
	    cmocka_unit_test(test_page_heat_and_mfu), cmocka_unit_test(test_write_follows_own_link),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
