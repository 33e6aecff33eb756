/*
 * keep_policy.h - the --keep policy a session is given: full, last:N or
 * summary[:N] (keep.h says what each keeps; keep.h includes this).
 */
#ifndef FSS_COLLECTOR_KEEP_POLICY_H
#define FSS_COLLECTOR_KEEP_POLICY_H

#include <stddef.h>
#include <stdint.h>

enum keep_mode {
	KEEP_FULL = 0,
	KEEP_LAST = 1,
	KEEP_SUMMARY = 2,
};

struct keep_policy {
	enum keep_mode mode;
	uint32_t steps; /* N of last:N; for summary, the steps kept in full at the start */
	int is_default; /* not chosen by the user (messages say so) */
};

/* Steps a summary keeps in full at the start when "summary" names none. */
#define KEEP_SUMMARY_STEPS 16

/* keep_policy_parse - "full", "summary", "summary:N", "last:N" (1 <= N <=
 * 10,000,000). 0 or -EINVAL; *out is set only on success (is_default 0). */
int keep_policy_parse(const char *text, struct keep_policy *out);

/* keep_policy_default - the policy when --keep is not given. */
void keep_policy_default(struct keep_policy *out);

/* keep_policy_format - "full", "last:1000", "summary" into buf. */
const char *keep_policy_format(const struct keep_policy *p, char *buf, size_t len);

#endif
