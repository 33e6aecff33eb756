/*
 * flight.h - collectives in flight: which rank is inside which collective,
 * and whether ranks of one communicator disagree (docs/hangs.md).
 *
 * A collective is named across ranks by (communicator id hash, comm_seq):
 * comm_seq numbers each rank's collectives on that communicator from 1 in
 * issue order, counted at the call's first record (its enter record, else
 * its collective record). From enter, collective, group, gpu_interval,
 * correlation, sync_exit, clock anchor and end records the state keeps, per
 * rank and communicator: the highest comm_seq entered and left, the call it
 * is inside and since when, its last completed collective, the collectives
 * returned at enqueue whose NCCL kernel CUPTI has not reported, and a
 * synchronize it has not returned from; per communicator a window of recent
 * comm_seq numbers with the signatures the ranks issued there. Memory is
 * ranks x communicators x bounded windows, never the trace's length.
 *
 *   records -> flight_feed (after the per-source layer, collector/source.h,
 *              has taken them in: it knows the communicators)
 *           -> flight_fill: struct analysis_flight (hangs, mismatches) for
 *              a timeout and an instant, read-only
 *
 * Threading: a flight_t is used by one thread at a time.
 */
#ifndef FSS_COLLECTOR_FLIGHT_H
#define FSS_COLLECTOR_FLIGHT_H

#include <stdint.h>

#include "collector/analysis.h"
#include "collector/source.h"
#include "common/record.h"

typedef struct flight flight_t;

/* flight_new - an empty state. NULL on ENOMEM. */
flight_t *flight_new(void);

/* flight_free - release it (NULL ok). */
void flight_free(flight_t *f);

/*
 * flight_feed - one record of source src, after sources_feed() has taken it
 * in (src is the layer's view of its source: its communicators, clock and
 * features). Records of no source (src NULL) and of types the state does not
 * read are ignored. Returns 0 or -ENOMEM.
 */
int flight_feed(flight_t *f, const struct source *src, const struct fss_record_head *rec);

/*
 * flight_fill - the calls in flight as of now_realtime_ns (CLOCK_REALTIME;
 * 0: the trace's own end, the latest record of any source placed on
 * CLOCK_REALTIME through its hello and clock anchors, a process_exit
 * included), with waits longer than timeout_ns (0: the default) reported as
 * hangs. Overwrites *out. Reads the state only: feeding may go on after it.
 * Returns 0 or -ENOMEM (then *out is zeroed but for timeout_ns).
 */
int flight_fill(const flight_t *f, uint64_t timeout_ns, uint64_t now_realtime_ns, struct analysis_flight *out);

/*
 * flight_set_stopped - trace source `source` had stopped by realtime_ns
 * (CLOCK_REALTIME) though no record says so: a later world of a restarted
 * job started (collector/worlds.h), and its launcher stops every worker
 * before it starts new ones. Its waits are measured to there at most, as
 * those of a process that ended. The earliest instant given stays; a source
 * not met yet is ignored.
 */
void flight_set_stopped(flight_t *f, uint32_t source, uint64_t realtime_ns);

/*
 * flight_footprint - bytes the state holds now (its tables and windows): it
 * follows ranks x communicators, not the number of records fed.
 */
size_t flight_footprint(const flight_t *f);

#endif
