/*
 * clock.h - the clocks every record is stamped with.
 */
#ifndef FSS_COMMON_CLOCK_H
#define FSS_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* clock_mono_ns - CLOCK_MONOTONIC in ns: the time base of records. Through
 * the vDSO this is a memory read, not a system call. */
static inline uint64_t clock_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* clock_mono_ms - CLOCK_MONOTONIC in ms: deadlines and poll intervals of
 * the CLI, the viewer and the dashboard. */
static inline int64_t clock_mono_ms(void)
{
	return (int64_t)(clock_mono_ns() / 1000000u);
}

/* clock_realtime_ns - CLOCK_REALTIME in ns (wall clock, for anchors). */
static inline uint64_t clock_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * clock_anchor - read CLOCK_MONOTONIC and CLOCK_REALTIME "together": the
 * realtime read is bracketed by two monotonic reads and paired with their
 * midpoint; the pair with the tightest bracket of a few tries wins.
 */
void clock_anchor(uint64_t *mono_ns, uint64_t *realtime_ns);

#endif
