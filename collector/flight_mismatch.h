/*
 * flight_mismatch.h - the mismatch decision of the calls in flight: the
 * signatures the ranks of a communicator issued at each comm_seq, compared
 * (flight_state.h has the window they are kept in).
 */
#ifndef FSS_COLLECTOR_FLIGHT_MISMATCH_H
#define FSS_COLLECTOR_FLIGHT_MISMATCH_H

#include <stdint.h>

#include "collector/flight_state.h"

/* flight_op_has_root - whether collectives of op name a root (Broadcast,
 * Reduce, Gather, Scatter): their signatures compare it. */
int flight_op_has_root(uint8_t op);

/*
 * flight_sig_report - rank `rank` of communicator c (trace source `source`)
 * issued sig as its comm_seq-th call there, at CLOCK_REALTIME rt. A slot the
 * window moves past is retired (its mismatch, if one, counted). Send / Recv
 * stop the comparison of the numbers from theirs on. 0 or -ENOMEM.
 */
int flight_sig_report(struct fl_comm *c, uint64_t comm_seq, int32_t rank, uint32_t source,
		      const struct analysis_signature *sig, uint64_t rt);

/*
 * flight_mismatches_fill - add communicator c's mismatches to out: every one
 * counted, the first it retired listed, else its earliest live one. rts[]
 * holds the CLOCK_REALTIME of out's listed mismatches (they are kept in that
 * order), ANALYSIS_MISMATCHES_MAX of them.
 */
void flight_mismatches_fill(const struct fl_comm *c, struct analysis_flight *out, uint64_t *rts);

#endif
