/* fsdp_ref/wrap.c: wrap policy specs (see wrap.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_ref/wrap.h"

#define WRAP_ACCEPTED "accepted: block, linear, model, group:K, or per-range policies like linear:0-3,block:4-11"

__attribute__((format(printf, 3, 4))) static int wrap_fail(char *err, size_t errlen, const char *fmt, ...)
{
	char what[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "bad --wrap: %s (%s)", what, WRAP_ACCEPTED);
	return -EINVAL;
}

/* A non-negative decimal integer that is the whole of s[0..n). */
static int parse_uint(const char *s, size_t n, int *out)
{
	if (n == 0 || n > 9)
		return -1;
	int v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

/* One item: POLICY[:RANGE], POLICY = block | linear | group:K. */
static int parse_item(const char *item, int layers, struct wrap_range *r, int *has_range, char *err, size_t errlen)
{
	const char *rest;
	r->group = 1;
	if (strncmp(item, "block", 5) == 0) {
		r->policy = WRAP_BLOCK;
		rest = item + 5;
	} else if (strncmp(item, "linear", 6) == 0) {
		r->policy = WRAP_LINEAR;
		rest = item + 6;
	} else if (strncmp(item, "group:", 6) == 0) {
		r->policy = WRAP_GROUP;
		const char *k = item + 6;
		size_t n = strcspn(k, ":");
		if (parse_uint(k, n, &r->group) < 0 || r->group < 1)
			return wrap_fail(err, errlen, "'%s': group:K needs a block count K >= 1", item);
		rest = k + n;
	} else {
		return wrap_fail(err, errlen, "unknown policy in '%s'", item);
	}
	r->first = 0;
	r->last = layers - 1;
	*has_range = 0;
	if (*rest == '\0')
		return 0;
	if (*rest != ':')
		return wrap_fail(err, errlen, "unknown policy in '%s'", item);
	rest++;
	*has_range = 1;
	const char *dash = strchr(rest, '-');
	if (dash) {
		if (parse_uint(rest, (size_t)(dash - rest), &r->first) < 0 ||
		    parse_uint(dash + 1, strlen(dash + 1), &r->last) < 0)
			return wrap_fail(err, errlen, "'%s': a range is A-B or A, in block numbers", item);
	} else {
		if (parse_uint(rest, strlen(rest), &r->first) < 0)
			return wrap_fail(err, errlen, "'%s': a range is A-B or A, in block numbers", item);
		r->last = r->first;
	}
	if (r->first > r->last)
		return wrap_fail(err, errlen, "'%s': range goes backwards", item);
	if (r->last >= layers)
		return wrap_fail(err, errlen, "'%s': the model has blocks 0-%d", item, layers - 1);
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	return ((const struct wrap_range *)a)->first - ((const struct wrap_range *)b)->first;
}

int wrap_parse(const char *text, int layers, struct wrap_spec *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	if (!text || !*text)
		return wrap_fail(err, errlen, "empty spec");
	if (layers < 1)
		return wrap_fail(err, errlen, "the model has no blocks");
	if (strcmp(text, "model") == 0) {
		out->model = 1;
		return 0;
	}
	char buf[1024];
	if (strlen(text) >= sizeof buf)
		return wrap_fail(err, errlen, "spec too long");
	strcpy(buf, text);
	int unranged = 0;
	char *save = NULL;
	for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (strcmp(item, "model") == 0)
			return wrap_fail(err, errlen, "model cannot be combined with other items");
		if (out->nranges == WRAP_MAX_RANGES)
			return wrap_fail(err, errlen, "too many ranges");
		int has_range = 0;
		int rc = parse_item(item, layers, &out->ranges[out->nranges], &has_range, err, errlen);
		if (rc < 0)
			return rc;
		out->nranges++;
		if (!has_range)
			unranged++;
	}
	if (out->nranges == 0)
		return wrap_fail(err, errlen, "empty spec");
	if (unranged && out->nranges > 1)
		return wrap_fail(err, errlen, "with several items, every item needs a block range");
	qsort(out->ranges, (size_t)out->nranges, sizeof out->ranges[0], range_cmp);
	int next = 0;
	for (int i = 0; i < out->nranges; i++) {
		if (out->ranges[i].first < next)
			return wrap_fail(err, errlen, "block %d is in two ranges", out->ranges[i].first);
		if (out->ranges[i].first > next)
			return wrap_fail(err, errlen, "blocks %d-%d are in no range", next, out->ranges[i].first - 1);
		next = out->ranges[i].last + 1;
	}
	if (next != layers)
		return wrap_fail(err, errlen, "blocks %d-%d are in no range", next, layers - 1);
	return 0;
}

int wrap_range_units(const struct wrap_range *r)
{
	int len = r->last - r->first + 1;
	switch (r->policy) {
	case WRAP_BLOCK:
		return len;
	case WRAP_LINEAR:
		return 8 * len; /* 7 linears + the rest of the block */
	case WRAP_GROUP:
		return (len + r->group - 1) / r->group;
	}
	return 0;
}

int wrap_unit_count(const struct wrap_spec *spec)
{
	if (spec->model)
		return 1;
	int n = 1; /* root */
	for (int i = 0; i < spec->nranges; i++)
		n += wrap_range_units(&spec->ranges[i]);
	return n;
}
