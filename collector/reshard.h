/*
 * reshard.h - reshard_after_forward, from the backward gathers.
 *
 * FSDP's backward gathers a unit again only when forward resharded it, and
 * it walks the units in reverse forward order. So each backward gather is
 * matched to the forward unit it mirrors (same gathered elements, reverse
 * order among the units of that size), and a unit gathered twice per step was resharded, once was kept;
 * a backward gather on a smaller communicator than the forward one was
 * resharded to a group (an integer reshard_after_forward: FSDP2's intra-node
 * variant). The first forward unit is the root, which FSDP2 never reshards:
 * the policy is that of the other units.
 */
#ifndef FSS_COLLECTOR_RESHARD_H
#define FSS_COLLECTOR_RESHARD_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analysis.h"

/* One gather event, as reshard detection needs it. */
struct reshard_gather {
	uint64_t elements;   /* gathered elements (count x nranks) */
	uint64_t wire_bytes; /* gathered output bytes (elements x dtype size) */
	int32_t nranks;      /* communicator ranks */
	int32_t reserved;
};

/*
 * reshard_detect - match bwd[0..nb) (issue order) to fwd[0..nf) (forward
 * order) and decide the policy. bwd_unit[0..nb) receives the forward unit
 * each backward gather mirrors (-1: none). param_bytes prices the memory a
 * kept unit would hold. Fills *out completely.
 */
void reshard_detect(const struct reshard_gather *fwd, size_t nf, const struct reshard_gather *bwd, size_t nb,
		    double param_bytes, int32_t *bwd_unit, struct analysis_reshard_info *out);

/* What each forward unit did (reshard_unit_states). */
enum reshard_state {
	RESHARD_STATE_KEPT = 0,      /* gathered once: kept from forward to backward */
	RESHARD_STATE_RESHARDED = 1, /* gathered again on the same communicator */
	RESHARD_STATE_GROUP = 2,     /* gathered again on a smaller one */
};

/*
 * reshard_unit_states - state[u] for every forward unit u, from the match
 * reshard_detect made (bwd_unit, nb backward gathers).
 */
void reshard_unit_states(const struct reshard_gather *fwd, size_t nf, const struct reshard_gather *bwd, size_t nb,
			 const int32_t *bwd_unit, uint8_t *state);

#endif
