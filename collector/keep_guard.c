/*
 * keep_guard.c - the disk guard and the growth projection (keep_guard.h).
 */
#include "collector/keep_guard.h"

#include <stdio.h>
#include <string.h>

#include "collector/keep_segments.h"

/* "12.3 GB", decimal units (what df -H and disk vendors say). */
static const char *human_bytes(double b, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "kB", "MB", "GB", "TB", "PB"};
	unsigned u = 0;
	while (b >= 1000.0 && u + 1 < sizeof unit / sizeof unit[0]) {
		b /= 1000.0;
		u++;
	}
	snprintf(buf, len, u == 0 ? "%.0f %s" : "%.1f %s", b, unit[u]);
	return buf;
}

/* "1,234,567" */
static const char *grouped(uint64_t v, char *buf, size_t len)
{
	char digits[32];
	int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
	size_t o = 0;
	for (int i = 0; i < n && o + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = 0;
	return buf;
}

static void guard(keeper_t *k)
{
	struct statvfs vfs;
	k->st.guard_checks++;
	int rc = k->statvfs_fn(k->trace_dir, &vfs);
	if (rc < 0) {
		if (!k->guard_failed_said++)
			keep_say(k, "cannot read the free space of %s (%s): the trace is kept in full without a check",
				 k->trace_dir, strerror(-rc));
		return;
	}
	uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize, total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
	uint64_t need = total / 20 > KEEP_GUARD_MIN_FREE ? total / 20 : KEEP_GUARD_MIN_FREE;
	/* the next check is guard_every bytes away: switch while that much still fits */
	if (avail >= need + k->guard_every)
		return;
	char a[32], b[32];
	human_bytes((double)avail, a, sizeof a);
	human_bytes((double)need, b, sizeof b);
	if (!k->policy.is_default) {
		if (!k->guard_warned++)
			keep_say(k,
				 "--keep full: %s free on the trace's file system (%s), under the %s to leave free: "
				 "the trace may fill it (--keep last:N or --keep summary bound it)",
				 a, k->trace_dir, b);
		return;
	}
	k->policy = (struct keep_policy){.mode = KEEP_LAST, .steps = KEEP_GUARD_LAST, .is_default = 1};
	k->st.guard_switched = 1;
	k->guard_step = k->st.steps_done;
	keep_say(k,
		 "%s free on the trace's file system (%s), under the %s to leave free: from step %u on the trace "
		 "keeps only the last %u steps (--keep last:%u; choose with --keep)",
		 a, k->trace_dir, b, k->guard_step, KEEP_GUARD_LAST, KEEP_GUARD_LAST);
	/* what was written so far becomes a segment of its own, removed once old
	 * (a failure is said, and tried again a segment later) */
	keep_segments_rotate(k);
}

/* Count bytes the trace gets; look at the disk every guard_every of them. */
void keep_guard_account(keeper_t *k, uint16_t size)
{
	k->st.bytes += size;
	if (k->policy.mode == KEEP_FULL && k->st.bytes >= k->next_check) {
		k->next_check = k->st.bytes + k->guard_every;
		guard(k);
	}
}

const char *keeper_projection(const keeper_t *k, uint64_t now_ns, char *buf, size_t len)
{
	if (!len)
		return buf;
	buf[0] = 0;
	if (!k->have_first || now_ns <= k->first_ns || !k->st.records_in)
		return buf;
	double secs = (double)(now_ns - k->first_ns) / 1e9;
	char rate[32], day[32], kept[32];
	grouped((uint64_t)((double)k->st.records_in / secs + 0.5), rate, sizeof rate);
	human_bytes((double)k->st.bytes / secs * 86400.0, day, sizeof day);
	int n = snprintf(buf, len, "at %s records/s: about %s a day", rate, day);
	if (n < 0 || (size_t)n >= len)
		return buf;
	if (k->policy.mode == KEEP_LAST && k->st.steps_done) {
		uint32_t per = k->policy.steps / 4 ? k->policy.steps / 4 : 1;
		/* steps since the guard switched (or from the start) are all in segments */
		uint32_t steps = k->st.steps_done - k->guard_step;
		if (steps)
			snprintf(buf + n, len - (size_t)n, ", of which the last %u steps stay: at most about %s",
				 k->policy.steps,
				 human_bytes((double)k->st.bytes / k->st.steps_done * (k->policy.steps + per), kept,
					     sizeof kept));
	} else if (k->policy.mode == KEEP_FULL && k->policy.is_default) {
		snprintf(buf + n, len - (size_t)n, " (--keep full; with the disk short of space, the last %u steps)",
			 KEEP_GUARD_LAST);
	}
	return buf;
}
