/*
 * analysis_advice.h - the facts the rules' advice is judged by
 * (collector/analyze_advice.c), so that every rule reads the same one.
 * Included by collector/analysis.h.
 */
#ifndef FSS_COLLECTOR_ANALYSIS_ADVICE_H
#define FSS_COLLECTOR_ANALYSIS_ADVICE_H

#include <stdint.h>

struct analysis_result;
struct analysis_gather;

/*
 * analysis_nodes - the nodes the job ran on: the traces merged as its
 * nodes (merged_nodes), or the distinct hosts of the sources that hold a
 * rank where those are more; 0 when neither is known.
 */
uint32_t analysis_nodes(const struct analysis_result *a);

/* What bounds a collective's time: its fixed latency or its bytes. */
enum analysis_bound {
	ANALYSIS_BOUND_UNKNOWN = 0,
	ANALYSIS_BOUND_LATENCY = 1,   /* the fixed part of its time is at least its bytes' part */
	ANALYSIS_BOUND_BANDWIDTH = 2, /* its bytes' part is the larger */
};

/*
 * analysis_gather_bound - latency- or bandwidth-bound, decided once per
 * gather: the what-if model's fit of its communicator (collector/whatif.h,
 * time = latency + bytes / bandwidth over the representative step's
 * gathers), the one judgement every rule and the what-if table read. Where
 * the communicator has no fit (fewer than two sizes: the two terms cannot be
 * told apart), the gathered size decides: under small_gathered_bytes
 * (bytes x ranks), latency. analysis_bound_name: "latency-bound",
 * "bandwidth-bound" or "unknown".
 */
enum analysis_bound analysis_gather_bound(const struct analysis_result *a, const struct analysis_gather *g,
					  double small_gathered_bytes);
const char *analysis_bound_name(int bound);

#endif
