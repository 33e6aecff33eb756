/* rules_registry_test: the rules' framework (rules/rules.h, findings.h):
 * the registry, the thresholds and their syntax, the findings list, and the
 * promise that a well-wrapped job gets no error and no warning. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rules/rules.h"
#include "tests/unit/rules_fixture.h"

static void test_registry_is_complete(void **state)
{
	static const char *const ids[] = {
		"collective-hang", "collective-mismatch", "restart", "duplicate-rank",
		"not-diagnosed",  "wrap-too-fine",	   "wrap-too-coarse", "gather-count-mismatch",
		"bucketed-fetch", "exposed-gather",	   "reshard-policy",  "small-collectives",
		"fp32-gather",	  "rank-skew",
	};
	size_t n;
	const struct rule *const *all = rules_all(&n);

	(void)state;
	assert_int_equal(n, sizeof(ids) / sizeof(ids[0]));
	for (size_t i = 0; i < n; i++) {
		/* registry order is the report order */
		assert_string_equal(all[i]->id, ids[i]);
		assert_ptr_equal(rules_find(ids[i]), all[i]);
		assert_non_null(all[i]->check);
		assert_true(strlen(all[i]->title) > 10);
		assert_true(strlen(all[i]->explanation) > 200);
	}
	assert_null(rules_find("no-such-rule"));
}

static void test_thresholds_defaults_and_syntax(void **state)
{
	size_t n;
	const struct rule_threshold_def *t = rule_thresholds(&n);
	struct rule_config c;
	double v;

	(void)state;
	assert_int_equal(n, RULE_THRESHOLD_COUNT);
	rule_config_init(&c);
	for (size_t i = 0; i < n; i++) {
		/* the text the help shows is the value the code uses */
		assert_int_equal(rule_parse_number(t[i].default_text, &v), 0);
		assert_true(v == t[i].default_value);
		assert_true(c.threshold[i] == t[i].default_value);
		assert_non_null(strstr(RULE_THRESHOLDS_HELP, t[i].name));
	}
	assert_int_equal(rule_config_set(&c, "small_gather_bytes=4Mi"), 0);
	assert_true(rule_threshold(&c, RULE_T_SMALL_GATHER_BYTES) == 4194304.0);
	assert_int_equal(rule_config_set(&c, "exposed_fraction=35%"), 0);
	assert_true(rule_threshold(&c, RULE_T_EXPOSED_FRACTION) > 0.3499 &&
		    rule_threshold(&c, RULE_T_EXPOSED_FRACTION) < 0.3501);
	assert_int_equal(rule_config_set(&c, "small_gather_bytes=2MB"), 0);
	assert_true(rule_threshold(&c, RULE_T_SMALL_GATHER_BYTES) == 2e6);
	assert_int_equal(rule_config_set(&c, "no_such=1"), -ENOENT);
	assert_int_equal(rule_config_set(&c, "exposed_fraction"), -EINVAL);
	assert_int_equal(rule_config_set(&c, "=1"), -EINVAL);
	assert_int_equal(rule_config_set(&c, "exposed_fraction=abc"), -EINVAL);
	assert_int_equal(rule_config_set(&c, "exposed_fraction=1x"), -EINVAL);
	assert_int_equal(rule_config_set(&c, "exposed_fraction=-1"), -ERANGE);
	assert_int_equal(rule_config_set(&c, "exposed_fraction=inf"), -ERANGE);
	/* each threshold within its range: a fraction to 100%, a count whole, a ratio >= 1 */
	assert_int_equal(rule_config_set(&c, "exposed_fraction=200%"), -EDOM);
	assert_int_equal(rule_config_set(&c, "exposed_fraction=100%"), 0);
	assert_int_equal(rule_config_set(&c, "fine_gathers_per_unit=2.5"), -EDOM);
	assert_int_equal(rule_config_set(&c, "fine_gathers_per_unit=0"), -EDOM);
	assert_int_equal(rule_config_set(&c, "min_units=3"), 0);
	assert_int_equal(rule_config_set(&c, "coarse_unit_ratio=0.5"), -EDOM);
	assert_int_equal(rule_parse_number("80G", &v), 0);
	assert_true(v == 80e9);
	assert_int_equal(rule_parse_number("7e9", &v), 0);
	assert_true(v == 7e9);
	assert_int_equal(rule_parse_number("512B", &v), 0);
	assert_true(v == 512);
	assert_int_equal(rule_parse_number("", &v), -EINVAL);
}

static void test_findings_list(void **state)
{
	findings_t *list = findings_new();
	struct finding *f;
	enum rule_severity s;

	(void)state;
	assert_non_null(list);
	assert_int_equal(findings_count(list), 0);
	assert_int_equal(findings_max_severity(list), -1);
	for (int i = 0; i < 20; i++) { /* past the first growth */
		f = findings_add(list, &rule_rank_skew, i == 7 ? RULE_ERROR : RULE_INFO, "m", "e", "x", NULL, "d");
		assert_non_null(f);
		finding_metric(f, "i", i);
	}
	for (int i = 0; i < FINDING_MAX_METRICS + 4; i++)
		finding_metric(f, "extra", i); /* capped, never past the array */
	assert_int_equal(f->nmetrics, FINDING_MAX_METRICS);
	assert_int_equal(findings_count(list), 20);
	assert_int_equal(findings_max_severity(list), RULE_ERROR);
	assert_int_equal(findings_count_at_least(list, RULE_WARNING), 1);
	assert_int_equal(findings_count_at_least(list, RULE_INFO), 20);
	assert_null(findings_get(list, 19)->fix_fsdp1);
	assert_null(findings_get(list, 20));
	assert_string_equal(findings_get(list, 3)->fix_deepspeed, "d");
	assert_ptr_equal(findings_find(list, "rank-skew"), findings_get(list, 0));
	assert_null(findings_find(list, "wrap-too-fine"));
	assert_null(findings_take(list, &rule_rank_skew, RULE_INFO, NULL, strdup("e"), strdup("f"), NULL, NULL));
	assert_int_equal(findings_count(list), 20);
	findings_free(list);
	findings_free(NULL);

	assert_string_equal(rule_severity_name(RULE_WARNING), "warning");
	assert_int_equal(rule_severity_parse("error", &s), 0);
	assert_int_equal(s, RULE_ERROR);
	assert_int_equal(rule_severity_parse("fatal", &s), -EINVAL);
}

static void test_formatting(void **state)
{
	char b[32];

	(void)state;
	assert_string_equal(rule_format_bytes(14e9, b, sizeof(b)), "14.0 GB");
	assert_string_equal(rule_format_bytes(875e6, b, sizeof(b)), "875 MB");
	assert_string_equal(rule_format_bytes(512, b, sizeof(b)), "512 B");
	assert_string_equal(rule_format_ns(4.2e6, b, sizeof(b)), "4.20 ms");
	assert_string_equal(rule_format_count(7e9, b, sizeof(b)), "7.00B");
	assert_string_equal(rule_unit_container("layers.*", b, sizeof(b)), "model.layers");
	assert_string_equal(rule_unit_container("model.blocks.3", b, sizeof(b)), "model.blocks");
	assert_string_equal(rule_unit_container("", b, sizeof(b)), "model.layers");
	assert_string_equal(rule_unit_container("encoder", b, sizeof(b)), "model.layers");
	assert_string_equal(rule_unit_container("layers.*.part0", b, sizeof(b)), "model.layers");
	assert_string_equal(rule_unit_container("encoder.blocks.*.attn.q", b, sizeof(b)), "model.encoder.blocks");
	assert_string_equal(rule_unit_container("h.11", b, sizeof(b)), "model.h");
}

/* A well-wrapped job (per block, prefetch hiding the gathers): nothing to
 * warn about, only the reshard information. */
static void test_well_wrapped_has_no_error_or_warning(void **state)
{
	struct fixture_model m = fixture_default();
	struct rule_config c;

	(void)state;
	rule_config_init(&c);
	for (uint32_t layers = 2; layers <= 32; layers *= 2)
		for (uint32_t ranks = 1; ranks <= 8; ranks *= 2) {
			struct analysis_result *a;
			findings_t *list = findings_new();

			m.layers = layers;
			m.ranks = ranks;
			a = fixture_new(&m);
			a->options.layers = (int)layers; /* --layers agrees with the wrap */
			assert_int_equal(rules_run(a, &c, list), 0);
			assert_int_equal(findings_count_at_least(list, RULE_WARNING), 0);
			assert_non_null(findings_find(list, "reshard-policy"));
			findings_free(list);
			fixture_free(a);
		}
}

static void test_disable(void **state)
{
	struct fixture_model m = fixture_default();
	struct analysis_result *a;
	struct rule_config c;
	findings_t *list = findings_new();

	(void)state;
	m.k = 8;
	a = fixture_new(&m);
	rule_config_init(&c);
	assert_int_equal(rule_config_disable(&c, "wrap-too-fine"), 0);
	assert_int_equal(rule_config_disable(&c, "nope"), -ENOENT);
	assert_int_equal(rules_run(a, &c, list), 0);
	assert_null(findings_find(list, "wrap-too-fine"));
	assert_non_null(findings_find(list, "reshard-policy"));
	findings_free(list);
	fixture_free(a);
}

/* Nothing analysed (no steps): every rule stays silent. */
static void test_empty_analysis_is_silent(void **state)
{
	struct analysis_result a;
	struct rule_config c;
	findings_t *list = findings_new();

	(void)state;
	memset(&a, 0, sizeof(a));
	analysis_options_init(&a.options);
	a.options.layers = 12;
	rule_config_init(&c);
	assert_int_equal(rules_run(&a, &c, list), 0);
	assert_int_equal(findings_count(list), 0);
	findings_free(list);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry_is_complete),
		cmocka_unit_test(test_thresholds_defaults_and_syntax),
		cmocka_unit_test(test_findings_list),
		cmocka_unit_test(test_formatting),
		cmocka_unit_test(test_well_wrapped_has_no_error_or_warning),
		cmocka_unit_test(test_disable),
		cmocka_unit_test(test_empty_analysis_is_silent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
