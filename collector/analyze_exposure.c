/*
 * analyze_exposure.c - the result's exposure section (see analyze_exposure.h).
 */
#include "collector/analyze_exposure.h"

void analyze_exposure_fill(const struct rank_steady *h, struct analysis_result *r)
{
	struct analysis_exposure *x = &r->exposure;
	x->source = h->exposure_source;
	x->exposed_fraction = ANALYSIS_UNKNOWN;
	int slot = analyze_steady_representative(&h->sample);
	if (slot < 0)
		return;
	const uint64_t *f = h->sample.fig[slot];
	x->step = h->sample.ordinal[slot];
	x->allgather_ns_per_step = f[FIG_AG];
	x->exposed_allgather_ns_per_step = f[FIG_AG_EXPOSED];
	x->exposed_fraction = x->allgather_ns_per_step
				  ? (double)x->exposed_allgather_ns_per_step / (double)x->allgather_ns_per_step
				  : ANALYSIS_UNKNOWN;
	x->forward_exposed_ns_per_step = f[FIG_FWD_EXPOSED];
	x->backward_exposed_ns_per_step = f[FIG_BWD_EXPOSED];
	x->reduce_scatter_ns_per_step = f[FIG_RS];
	x->exposed_reduce_scatter_ns_per_step = f[FIG_RS_EXPOSED];
	x->allreduce_ns_per_step = f[FIG_AR];
	x->exposed_allreduce_ns_per_step = f[FIG_AR_EXPOSED];
	x->exposed_gathers = (uint32_t)f[FIG_EXPOSED_GATHERS];
	x->compute_wait_ns_per_step = f[FIG_AG_WAIT];
	x->forward_compute_wait_ns_per_step = f[FIG_FWD_WAIT];
	x->backward_compute_wait_ns_per_step = f[FIG_BWD_WAIT];
	x->other_compute_wait_ns_per_step = f[FIG_OTHER_WAIT];
	for (int c = 0; c < ANALYSIS_CAUSE_MAX; c++) {
		x->cause_gathers[c] = (uint32_t)f[FIG_CAUSE_N + c];
		x->cause_ns[c] = f[FIG_CAUSE_NS + c];
		x->cause_compute_wait_ns[c] = f[FIG_CAUSE_WAIT + c];
	}
}
