/*
 * keep_policy.c - the --keep policy's text (keep_policy.h).
 */
#include "collector/keep_policy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define KEEP_STEPS_MAX 10000000u

/* A step count: digits only, 1..KEEP_STEPS_MAX. */
static int parse_steps(const char *s, uint32_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > KEEP_STEPS_MAX)
			return -EINVAL;
	}
	if (v == 0)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int keep_policy_parse(const char *text, struct keep_policy *out)
{
	struct keep_policy p = {0};
	if (!text)
		return -EINVAL;
	if (strcmp(text, "full") == 0) {
		p.mode = KEEP_FULL;
	} else if (strcmp(text, "summary") == 0) {
		p.mode = KEEP_SUMMARY;
		p.steps = KEEP_SUMMARY_STEPS;
	} else if (strncmp(text, "summary:", 8) == 0) {
		p.mode = KEEP_SUMMARY;
		if (parse_steps(text + 8, &p.steps) < 0)
			return -EINVAL;
	} else if (strncmp(text, "last:", 5) == 0) {
		p.mode = KEEP_LAST;
		if (parse_steps(text + 5, &p.steps) < 0)
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	*out = p;
	return 0;
}

void keep_policy_default(struct keep_policy *out)
{
	*out = (struct keep_policy){.mode = KEEP_FULL, .steps = 0, .is_default = 1};
}

const char *keep_policy_format(const struct keep_policy *p, char *buf, size_t len)
{
	if (!len)
		return buf;
	switch (p->mode) {
	case KEEP_LAST:
		snprintf(buf, len, "last:%u", p->steps);
		break;
	case KEEP_SUMMARY:
		if (p->steps == KEEP_SUMMARY_STEPS)
			snprintf(buf, len, "summary");
		else
			snprintf(buf, len, "summary:%u", p->steps);
		break;
	default:
		snprintf(buf, len, "full");
		break;
	}
	return buf;
}
