/*
 * breakdown.c - step time breakdown and MFU (see breakdown.h).
 */
#include <string.h>

#include "collector/breakdown.h"

void breakdown_compute(uint64_t step_ns, uint64_t compute_ns, uint64_t exposed_comm_ns, uint64_t params,
		       uint32_t ranks, const struct analysis_options *opts, struct analysis_breakdown *out)
{
	memset(out, 0, sizeof *out);
	out->step_ns = step_ns;
	out->compute_ns = compute_ns;
	out->exposed_comm_ns = exposed_comm_ns;
	out->idle_ns = step_ns > compute_ns + exposed_comm_ns ? step_ns - compute_ns - exposed_comm_ns : 0;
	out->mfu = ANALYSIS_UNKNOWN;
	double flops = 0;
	if (opts && opts->flops_per_step > 0)
		flops = opts->flops_per_step;
	else if (opts && opts->tokens_per_step > 0 && params > 0)
		flops = 6.0 * (double)params * opts->tokens_per_step;
	out->flops_per_step = flops;
	if (flops > 0 && step_ns > 0) {
		out->achieved_flops = flops / ((double)step_ns * 1e-9);
		if (opts->peak_flops > 0)
			out->mfu = out->achieved_flops / (opts->peak_flops * (ranks ? ranks : 1));
	}
}
