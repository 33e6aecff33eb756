/*
 * thresholds.c - the rules' thresholds: defaults from the table in rules.h,
 * overrides from "NAME=VALUE" text.
 */
#include "rules/rules.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct rule_threshold_def thresholds[RULE_THRESHOLD_COUNT] = {
#define RULE_X_DEF(id, name, def, unit, help) [id] = {name, (double)(def), #def, unit, help},
	RULE_THRESHOLDS(RULE_X_DEF)
#undef RULE_X_DEF
};

const struct rule_threshold_def *rule_thresholds(size_t *n)
{
	*n = RULE_THRESHOLD_COUNT;
	return thresholds;
}

void rule_config_init(struct rule_config *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < RULE_THRESHOLD_COUNT; i++)
		c->threshold[i] = thresholds[i].default_value;
}

/* suffix_scale - the multiplier of a value suffix, 0 when it is not one. */
static double suffix_scale(const char *s)
{
	static const struct {
		const char *text;
		double scale;
	} suffixes[] = {
		{"", 1},         {"%", 0.01},        {"k", 1e3},         {"K", 1e3},
		{"M", 1e6},      {"G", 1e9},         {"T", 1e12},        {"Ki", 1024.0},
		{"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
	};
	size_t len = strlen(s);

	/* A trailing 'B' (bytes) is allowed after any size suffix: 80GB, 1MiB. */
	if (len > 0 && s[len - 1] == 'B')
		len--;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (strlen(suffixes[i].text) == len && strncmp(s, suffixes[i].text, len) == 0)
			return suffixes[i].scale;
	return 0;
}

int rule_parse_number(const char *text, double *out)
{
	char *end;
	double v, scale;

	if (!text || !*text)
		return -EINVAL;
	errno = 0;
	v = strtod(text, &end);
	if (end == text || errno == ERANGE)
		return end == text ? -EINVAL : -ERANGE;
	/* "B" alone is a unit, not a suffix to reject: "512B". */
	scale = strcmp(end, "B") == 0 ? 1 : suffix_scale(end);
	if (scale == 0)
		return -EINVAL;
	v *= scale;
	if (!isfinite(v) || v < 0)
		return -ERANGE;
	*out = v;
	return 0;
}

const char *rule_threshold_range(const struct rule_threshold_def *t, double *lo, double *hi)
{
	if (strcmp(t->unit, "fraction") == 0) {
		*lo = 0, *hi = 1;
		return "a fraction from 0 to 1 (0% to 100%)";
	}
	if (strcmp(t->unit, "ratio") == 0) {
		*lo = 1, *hi = INFINITY;
		return "a ratio of at least 1";
	}
	if (strcmp(t->unit, "bytes") == 0) {
		*lo = 0, *hi = INFINITY;
		return "a number of bytes (suffixes k, M, G, Ki, Mi, Gi)";
	}
	*lo = 1, *hi = INFINITY; /* a count: gathers, units */
	return "a whole number of at least 1";
}

static int in_range(const struct rule_threshold_def *t, double v)
{
	double lo, hi;

	(void)rule_threshold_range(t, &lo, &hi);
	if (v < lo || v > hi)
		return 0;
	/* a count is whole: 2.5 gathers per unit decides nothing 2 or 3 would not */
	return strcmp(t->unit, "fraction") == 0 || strcmp(t->unit, "ratio") == 0 || strcmp(t->unit, "bytes") == 0 ||
	       v == floor(v);
}

int rule_config_set(struct rule_config *c, const char *assignment)
{
	const char *eq = strchr(assignment, '=');
	double v;
	int err;

	if (!eq || eq == assignment)
		return -EINVAL;
	for (size_t i = 0; i < RULE_THRESHOLD_COUNT; i++) {
		size_t n = strlen(thresholds[i].name);

		if ((size_t)(eq - assignment) != n || strncmp(assignment, thresholds[i].name, n) != 0)
			continue;
		err = rule_parse_number(eq + 1, &v);
		if (err)
			return err;
		if (!in_range(&thresholds[i], v))
			return -EDOM;
		c->threshold[i] = v;
		return 0;
	}
	return -ENOENT;
}

int rule_config_disable(struct rule_config *c, const char *id)
{
	size_t n;
	const struct rule *const *all = rules_all(&n);

	for (size_t i = 0; i < n; i++) {
		if (strcmp(all[i]->id, id) == 0) {
			c->disabled |= 1ull << i;
			return 0;
		}
	}
	return -ENOENT;
}
