/*
 * flight_hang.h - the hang decision of the calls in flight: how each rank
 * waits on each communicator, and which waits are hangs (docs/hangs.md).
 */
#ifndef FSS_COLLECTOR_FLIGHT_HANG_H
#define FSS_COLLECTOR_FLIGHT_HANG_H

#include <stddef.h>

#include "collector/flight_state.h"

struct fl_wait;

/* The waits of one communicator's members: a buffer flight_comm_hangs grows
 * and reuses from one communicator to the next; the caller frees v. */
struct flight_waits {
	struct fl_wait *v;
	size_t cap;
};

/*
 * flight_comm_hangs - add communicator c's calls in flight (out->in_flight)
 * and its hang, if one, to out, as of out->now_realtime_ns with
 * out->timeout_ns. Hangs are kept longest wait first; flight_hangs_order
 * orders them in the end. 0 or -ENOMEM (out is then as it was).
 */
int flight_comm_hangs(const flight_t *f, const struct fl_comm *c, struct flight_waits *w, struct analysis_flight *out);

/*
 * flight_hangs_order - once every communicator's hang is in out: mark the
 * hangs whose missing ranks all wait in other collectives (cascade) and list
 * the hangs that have a free missing rank first, then by the longest wait.
 */
void flight_hangs_order(const flight_t *f, struct analysis_flight *out);

#endif
