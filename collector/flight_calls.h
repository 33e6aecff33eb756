/*
 * flight_calls.h - the per-source and per-communicator sequence tracking of
 * the calls in flight: each rank's calls numbered by comm_seq on their
 * communicator from its enter, collective and group records, its
 * synchronizes, and their signatures reported to the mismatch window.
 */
#ifndef FSS_COLLECTOR_FLIGHT_CALLS_H
#define FSS_COLLECTOR_FLIGHT_CALLS_H

#include "collector/flight_state.h"
#include "common/record.h"

/* flight_source_get - the state of source src, made at its first record.
 * NULL on ENOMEM. */
struct fl_source *flight_source_get(flight_t *f, const struct source *src);

/* flight_calls_enter - an enter record of source fs: a collective entered
 * (placed, its signature reported) or a synchronize. 0 or -ENOMEM. */
int flight_calls_enter(flight_t *f, struct fl_source *fs, const struct fss_rec_enter *r);

/* flight_calls_sync_exit - a synchronize of source fs returned. */
void flight_calls_sync_exit(struct fl_source *fs, const struct fss_rec_sync_exit *x);

/* flight_calls_collective - a collective record of source fs: the call
 * returned (at enqueue inside a group). 0 or -ENOMEM. */
int flight_calls_collective(flight_t *f, struct fl_source *fs, const struct fss_rec_collective *r);

/* flight_calls_group - a group of source fs ended: its calls are left. */
void flight_calls_group(struct fl_source *fs, const struct fss_rec_group *g);

#endif
