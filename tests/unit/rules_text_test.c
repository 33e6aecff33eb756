/* rules_text_test: from an analysis to what is said about it
 * (rules/diagnosis.h) and one finding as text (rules/finding_text.h): the
 * rules run once for the list and its live copy, the block layout every
 * text output shares, and the fix text the live state keeps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rules/diagnosis.h"
#include "rules/finding_text.h"
#include "rules/rules.h"
#include "tests/unit/rules_fixture.h"

/* The lines of a finding, each ended by a newline. */
struct text {
	char buf[8192];
	size_t len;
};

static void collect(void *ctx, const char *indent, const char *s, size_t len)
{
	struct text *t = ctx;
	int n = snprintf(t->buf + t->len, sizeof(t->buf) - t->len, "%s%.*s\n", indent, (int)len, s);

	assert_true(n > 0 && (size_t)n < sizeof(t->buf) - t->len);
	t->len += (size_t)n;
}

static const struct rule test_rule = {
    .id = "test-rule",
    .title = "A rule for the layout",
    .explanation = "Why it matters, said at some length so that the paragraph has to be folded: the "
		   "explanation of a rule is a paragraph, and a paragraph longer than the screen is "
		   "cut at blanks into lines of at most eighty columns.",
    .max_severity = RULE_WARNING,
};

/* one finding of test_rule with every text, fixes for each framework */
static findings_t *one_finding(const char *fsdp1, const char *deepspeed)
{
	findings_t *list = findings_new();

	assert_non_null(list);
	assert_non_null(findings_add(list, &test_rule, RULE_WARNING,
				     "what is wrong, in a message long enough to be folded once it passes the "
				     "eighty columns of a terminal line",
				     "first evidence line\nsecond evidence line", "fsdp2()\nfsdp2_more()", fsdp1,
				     deepspeed));
	return list;
}

static void test_block_layout(void **state)
{
	findings_t *list = one_finding("fsdp1()", "{\"zero\": 3}");
	struct text t = {0};

	(void)state;
	finding_text_lines(findings_get(list, 0), 0, collect, &t);
	assert_string_equal(t.buf, "warning test-rule: A rule for the layout\n"
				   "  what is wrong, in a message long enough to be folded once it passes the eighty\n"
				   "  columns of a terminal line\n"
				   "  evidence:\n"
				   "    first evidence line\n"
				   "    second evidence line\n"
				   "  fix (PyTorch FSDP2):\n"
				   "    fsdp2()\n"
				   "    fsdp2_more()\n"
				   "  fix (PyTorch FSDP1):\n"
				   "    fsdp1()\n"
				   "  fix (DeepSpeed ZeRO-3):\n"
				   "    {\"zero\": 3}\n");
	findings_free(list);
}

static void test_block_flags(void **state)
{
	findings_t *list = one_finding("fsdp1()", NULL);
	struct text why = {0}, brief = {0};

	(void)state;
	finding_text_lines(findings_get(list, 0), FINDING_TEXT_WHY, collect, &why);
	assert_non_null(strstr(why.buf, "\n  why:\n    Why it matters"));
	assert_non_null(strstr(why.buf, "  fix (PyTorch FSDP1):\n    fsdp1()\n"));
	assert_null(strstr(why.buf, "DeepSpeed")); /* no DeepSpeed fix: no heading */
	for (const char *p = why.buf; *p;) {
		const char *nl = strchr(p, '\n');

		assert_true(nl - p <= 80); /* every folded line fits a terminal */
		p = nl + 1;
	}
	finding_text_lines(findings_get(list, 0), FINDING_TEXT_FSDP2_ONLY, collect, &brief);
	assert_null(strstr(brief.buf, "why:"));
	assert_null(strstr(brief.buf, "FSDP1"));
	assert_non_null(strstr(brief.buf, "  fix (PyTorch FSDP2):\n    fsdp2()\n    fsdp2_more()\n"));
	findings_free(list);
}

/* the layout of a finding's parts is the finding's, and folds at the
 * reader's width */
static void test_parts_layout(void **state)
{
	findings_t *list = one_finding("fsdp1()", NULL);
	struct finding_text_parts p;
	struct text whole = {0}, parts = {0}, narrow = {0};
	char head[64];

	(void)state;
	finding_text_lines(findings_get(list, 0), FINDING_TEXT_WHY, collect, &whole);
	finding_text_parts_of(findings_get(list, 0), &p);
	finding_text_parts_lines(&p, FINDING_TEXT_WHY, FINDING_TEXT_COLUMNS, collect, &parts);
	assert_string_equal(whole.buf, parts.buf);
	assert_int_equal(finding_text_heading(&p, head, sizeof(head)),
			 strlen("warning test-rule: A rule for the layout"));
	assert_string_equal(head, "warning test-rule: A rule for the layout");
	finding_text_parts_lines(&p, 0, 40, collect, &narrow);
	assert_non_null(
	    strstr(narrow.buf, "\n  what is wrong, in a message long\n  enough to be folded once it passes the\n"));
	findings_free(list);
}

/* a finding's live copy reads as the finding: its fixes split back at
 * their markers; without a title the message heads it */
static void test_live_layout(void **state)
{
	findings_t *list = one_finding("fsdp1()", "{\"zero\": 3}");
	struct live_finding live;
	struct finding_text_parts p;
	struct text whole = {0}, copy = {0}, untitled = {0};
	char fixes[LIVE_FIX_BYTES];

	(void)state;
	assert_int_equal(diagnosis_live_findings(list, &live, 1), 1);
	finding_text_lines(findings_get(list, 0), 0, collect, &whole);
	finding_text_parts_of_live(&live, &p, fixes, sizeof(fixes));
	finding_text_parts_lines(&p, 0, FINDING_TEXT_COLUMNS, collect, &copy);
	assert_string_equal(whole.buf, copy.buf);
	live.title[0] = '\0';
	live.fix[0] = '\0';
	finding_text_parts_of_live(&live, &p, fixes, sizeof(fixes));
	finding_text_parts_lines(&p, 0, FINDING_TEXT_COLUMNS, collect, &untitled);
	assert_string_equal(untitled.buf,
			    "warning test-rule: what is wrong, in a message long enough to be folded once "
			    "it passes the eighty columns of a terminal line\n"
			    "  evidence:\n"
			    "    first evidence line\n"
			    "    second evidence line\n"
			    "  fix:\n"
			    "    (this rule gives no fix)\n");
	findings_free(list);
}

/* A synthetic finding with fixes of several kB (not today's rule texts):
 * the live state keeps the three parts whole where they fit, and marks
 * the cut where they do not, the FSDP2 fix first. */
static void test_live_long_fix(void **state)
{
	char fsdp2[2000], fsdp1[900], ds[900];
	struct live_finding live;
	findings_t *list;

	(void)state;
	memset(fsdp2, 'a', sizeof fsdp2 - 1), fsdp2[sizeof fsdp2 - 1] = '\0';
	memset(fsdp1, 'b', sizeof fsdp1 - 1), fsdp1[sizeof fsdp1 - 1] = '\0';
	memset(ds, 'c', sizeof ds - 1), ds[sizeof ds - 1] = '\0';
	ds[sizeof ds - 2] = 'Z'; /* the DeepSpeed part's last byte */
	list = one_finding(fsdp1, ds);
	free(findings_at(list, 0)->fix_fsdp2);
	findings_at(list, 0)->fix_fsdp2 = strdup(fsdp2);
	assert_int_equal(diagnosis_live_findings(list, &live, 1), 1);
	assert_int_equal(strlen(live.fix), strlen(fsdp2) + strlen("\nFSDP1:\n") + strlen(fsdp1) +
						strlen("\nDeepSpeed:\n") + strlen(ds));
	assert_int_equal(live.fix[strlen(live.fix) - 1], 'Z');
	findings_free(list);

	char big[6000];
	memset(big, 'a', sizeof big - 1), big[sizeof big - 1] = '\0';
	list = one_finding(fsdp1, ds);
	free(findings_at(list, 0)->fix_fsdp2);
	findings_at(list, 0)->fix_fsdp2 = strdup(big);
	assert_int_equal(diagnosis_live_findings(list, &live, 1), 1);
	assert_true(strlen(live.fix) < sizeof live.fix);
	assert_int_equal(strncmp(live.fix, big, 3000), 0);
	assert_non_null(strstr(live.fix, "more bytes; fsdpscope lint shows the whole text]"));
	findings_free(list);
}

static void test_fixes_text(void **state)
{
	findings_t *list = one_finding("fsdp1()", "{\"zero\": 3}");
	char buf[LIVE_FIX_BYTES], small[12];

	(void)state;
	assert_string_equal(finding_text_fixes(findings_get(list, 0), buf, sizeof(buf)),
			    "fsdp2()\nfsdp2_more()\nFSDP1:\nfsdp1()\nDeepSpeed:\n{\"zero\": 3}");
	/* cut to fit, the FSDP2 fix first, and the cut marked */
	assert_string_equal(finding_text_fixes(findings_get(list, 0), small, sizeof(small)), "fsdp2([cut]");
	findings_free(list);
}

static void test_from_result(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	struct live_finding live[LIVE_FINDINGS_MAX];
	struct rule_config c;
	findings_t *list = findings_new();
	size_t nlive = 99, again = 99;

	(void)state;
	m.k = 8; /* per-Linear: wrap-too-fine, an error */
	a = fixture_new(&m);
	rule_config_init(&c);
	assert_non_null(list);
	assert_int_equal(diagnosis_from_result(a, &c, list, live, LIVE_FINDINGS_MAX, &nlive), 0);
	assert_true(findings_count(list) > 0);
	assert_int_equal(nlive, findings_count(list) < LIVE_FINDINGS_MAX ? findings_count(list) : LIVE_FINDINGS_MAX);
	for (size_t i = 0; i < nlive; i++) {
		const struct finding *f = findings_get(list, i);

		assert_string_equal(live[i].rule, f->rule->id);
		assert_int_equal(live[i].severity, (int)f->severity);
	}
	assert_non_null(findings_find(list, "wrap-too-fine"));
	/* the live copy alone, with default thresholds: the same findings */
	assert_int_equal(diagnosis_from_result(a, NULL, NULL, live, 1, &again), 0);
	assert_int_equal(again, 1);
	assert_string_equal(live[0].rule, findings_get(list, 0)->rule->id);
	/* the list alone */
	findings_free(list);
	list = findings_new();
	assert_int_equal(diagnosis_from_result(a, &c, list, NULL, 0, NULL), 0);
	assert_int_equal(diagnosis_live_findings(list, live, LIVE_FINDINGS_MAX), nlive);
	assert_int_equal(diagnosis_live_findings(NULL, live, LIVE_FINDINGS_MAX), 0);
	findings_free(list);
	fixture_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_block_layout), cmocka_unit_test(test_block_flags),
	    cmocka_unit_test(test_parts_layout), cmocka_unit_test(test_live_layout),
	    cmocka_unit_test(test_fixes_text),	 cmocka_unit_test(test_live_long_fix),	 cmocka_unit_test(test_from_result),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
