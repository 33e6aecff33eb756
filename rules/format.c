/*
 * format.c - numbers in the units a reader expects, for findings' texts.
 */
#include "rules/rules.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

char *rule_format_bytes(double bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
	unsigned u = 0;
	double v = bytes;

	while (fabs(v) >= 1000 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1000;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%.0f B", v);
	else
		snprintf(buf, len, "%.*f %s", fabs(v) < 10 ? 2 : fabs(v) < 100 ? 1 : 0, v, units[u]);
	return buf;
}

char *rule_format_ns(double ns, char *buf, size_t len)
{
	static const char *const units[] = {"ns", "us", "ms", "s"};
	unsigned u = 0;
	double v = ns;

	while (fabs(v) >= 1000 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1000;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%.0f ns", v);
	else
		snprintf(buf, len, "%.*f %s", fabs(v) < 10 ? 2 : fabs(v) < 100 ? 1 : 0, v, units[u]);
	return buf;
}

char *rule_format_count(double n, char *buf, size_t len)
{
	if (fabs(n) < 1e4)
		snprintf(buf, len, "%.0f", n);
	else if (fabs(n) < 1e6)
		snprintf(buf, len, "%.1fk", n / 1e3);
	else if (fabs(n) < 1e9)
		snprintf(buf, len, "%.1fM", n / 1e6);
	else
		snprintf(buf, len, "%.2fB", n / 1e9);
	return buf;
}

char *rule_unit_container(const char *unit_name, char *buf, size_t len)
{
	const char *p = unit_name ? unit_name : "", *cut = NULL;

	/* The list is the name up to its last index segment: "layers.3",
	 * "layers.*" and "layers.*.attn.q" all give "layers". */
	for (const char *seg = p; *seg;) {
		const char *dot = strchr(seg, '.');
		size_t n = dot ? (size_t)(dot - seg) : strlen(seg);

		if (seg > p && n > 0 && (strncmp(seg, "*", n) == 0 || strspn(seg, "0123456789") >= n))
			cut = seg - 1;
		if (!dot)
			break;
		seg = dot + 1;
	}
	if (!cut) {
		snprintf(buf, len, "model.layers");
		return buf;
	}
	/* Names from PyTorch's module tree may already start at the model. */
	if (strncmp(p, "model.", 6) == 0)
		snprintf(buf, len, "%.*s", (int)(cut - p), p);
	else
		snprintf(buf, len, "model.%.*s", (int)(cut - p), p);
	return buf;
}

char *rule_left_out(const struct analysis_result *a, char *buf, size_t len)
{
	uint32_t left = a->trust.steps_lost + a->trust.steps_cut;

	if (len == 0)
		return buf;
	buf[0] = 0;
	if (left)
		snprintf(buf, len, "\nfrom the %u step%s the trace vouches for on rank %d; %u left out (%u for lost collectives, "
			 "%u cut off)",
			 a->steps_analyzed, a->steps_analyzed == 1 ? "" : "s", a->headline_rank, left, a->trust.steps_lost,
			 a->trust.steps_cut);
	return buf;
}
