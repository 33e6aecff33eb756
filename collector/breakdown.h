/*
 * breakdown.h - step time: compute, exposed communication, idle; MFU.
 *
 * Per step, from the merged intervals of one rank: compute = time covered by
 * compute; exposed communication = communication time with no compute under
 * it; idle = the rest. MFU = achieved FLOP/s over the peak of all ranks,
 * with FLOPs per step given, or 6 P x tokens per step.
 */
#ifndef FSS_COLLECTOR_BREAKDOWN_H
#define FSS_COLLECTOR_BREAKDOWN_H

#include <stdint.h>

#include "collector/analysis.h"

/*
 * breakdown_compute - fill *out from a step's figures. params: P (for
 * 6 P tokens); ranks: the ranks sharing the step's FLOPs. Idle is what
 * compute and exposed communication leave of the step (0 when they exceed
 * it).
 */
void breakdown_compute(uint64_t step_ns, uint64_t compute_ns, uint64_t exposed_comm_ns, uint64_t params,
		       uint32_t ranks, const struct analysis_options *opts, struct analysis_breakdown *out);

#endif
