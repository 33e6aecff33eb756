/*
 * clock.c - clock anchors.
 */
#include "common/clock.h"

void clock_anchor(uint64_t *mono_ns, uint64_t *realtime_ns)
{
	uint64_t best_width = UINT64_MAX;

	for (int i = 0; i < 5; i++) {
		uint64_t before = clock_mono_ns();
		uint64_t real = clock_realtime_ns();
		uint64_t after = clock_mono_ns();

		if (after - before < best_width) {
			best_width = after - before;
			*mono_ns = before + (after - before) / 2;
			*realtime_ns = real;
		}
	}
}
