/*
 * reshard.c - reshard_after_forward from the backward gathers (see
 * reshard.h).
 */
#include <stdlib.h>
#include <string.h>

#include "collector/reshard.h"

void reshard_detect(const struct reshard_gather *fwd, size_t nf, const struct reshard_gather *bwd, size_t nb,
		    double param_bytes, int32_t *bwd_unit, struct analysis_reshard_info *out)
{
	memset(out, 0, sizeof *out);
	int32_t *match = nf ? malloc(nf * sizeof *match) : NULL; /* forward unit -> backward gather */
	for (size_t u = 0; u < nf && match; u++)
		match[u] = -1;
	/* Backward walks the units in reverse forward order, but a framework may
	 * visit a block before its inner units (fsdp_ref's per-Linear wrap:
	 * norms, then down .. q): so match within each size, where the order is
	 * exactly reversed: the last forward unit of that size not yet matched. */
	for (size_t b = 0; b < nb; b++) {
		bwd_unit[b] = -1;
		for (size_t u = nf; match && u-- > 0;) {
			if (match[u] < 0 && fwd[u].elements == bwd[b].elements) {
				bwd_unit[b] = (int32_t)u;
				match[u] = (int32_t)b;
				break;
			}
		}
		if (bwd_unit[b] < 0)
			out->unmatched_backward++;
	}
	for (size_t b = 0; b < nb; b++)
		out->regather_bytes_per_step += bwd[b].wire_bytes;
	if (!match) {
		out->policy = ANALYSIS_RESHARD_UNKNOWN;
		return;
	}
	out->root_resharded = nf > 0 && match[0] >= 0;
	/* the root (unit 0) is left out unless it was resharded too */
	size_t first = out->root_resharded ? 0 : 1;
	uint32_t group = 0;
	int groups_differ = 0;
	for (size_t u = first; u < nf; u++) {
		out->units++;
		int32_t b = match[u];
		uint64_t unit_bytes = (uint64_t)((double)fwd[u].elements * param_bytes);
		if (b < 0) {
			out->retained_units++;
			out->reshard_extra_gathers++;
			out->reshard_extra_wire_bytes += fwd[u].wire_bytes;
			continue;
		}
		out->retain_extra_bytes += unit_bytes;
		if (bwd[b].nranks < fwd[u].nranks) {
			out->group_units++;
			if (group && group != (uint32_t)bwd[b].nranks)
				groups_differ = 1;
			group = (uint32_t)bwd[b].nranks;
		} else {
			out->resharded_units++;
		}
	}
	free(match);
	if (out->units == 0)
		out->policy = ANALYSIS_RESHARD_UNKNOWN;
	else if (out->resharded_units == out->units)
		out->policy = ANALYSIS_RESHARD_TRUE;
	else if (out->retained_units == out->units)
		out->policy = ANALYSIS_RESHARD_FALSE;
	else if (out->group_units == out->units && !groups_differ)
		out->policy = ANALYSIS_RESHARD_GROUP;
	else
		out->policy = ANALYSIS_RESHARD_MIXED;
	if (out->group_units)
		out->group_size = group;
}

void reshard_unit_states(const struct reshard_gather *fwd, size_t nf, const struct reshard_gather *bwd, size_t nb,
			 const int32_t *bwd_unit, uint8_t *state)
{
	for (size_t u = 0; u < nf; u++)
		state[u] = RESHARD_STATE_KEPT;
	for (size_t b = 0; b < nb; b++) {
		int32_t u = bwd_unit[b];
		if (u < 0 || (size_t)u >= nf)
			continue;
		state[u] = bwd[b].nranks < fwd[u].nranks ? RESHARD_STATE_GROUP : RESHARD_STATE_RESHARDED;
	}
}
