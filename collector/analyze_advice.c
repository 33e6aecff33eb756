/*
 * analyze_advice.c - the facts the rules' advice is judged by: the job's
 * nodes, and what bounds each gather (see analysis.h).
 */
#include "collector/analysis.h"
#include "collector/whatif.h"

#include <string.h>

uint32_t analysis_nodes(const struct analysis_result *a)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < a->nsources; i++) {
		const struct source_summary *s = &a->sources[i];
		uint32_t j;

		if (s->rank < 0 || !s->host[0])
			continue;
		for (j = 0; j < i; j++)
			if (a->sources[j].rank >= 0 && strcmp(a->sources[j].host, s->host) == 0)
				break;
		n += j == i;
	}
	return a->merged_nodes > n ? a->merged_nodes : n;
}

/* Without a fit that decides: the gathered size against the threshold. */
static enum analysis_bound by_size(const struct analysis_gather *g, double small_gathered_bytes)
{
	double ranks = g->nranks > 0 ? (double)g->nranks : 1.0;

	return (double)g->bytes * ranks < small_gathered_bytes ? ANALYSIS_BOUND_LATENCY : ANALYSIS_BOUND_BANDWIDTH;
}

enum analysis_bound analysis_gather_bound(const struct analysis_result *a, const struct analysis_gather *g,
					  double small_gathered_bytes)
{
	if (!g || g->bytes == 0)
		return ANALYSIS_BOUND_UNKNOWN;
	switch (whatif_bound_of(a, g)) {
	case WHATIF_BOUND_LATENCY: return ANALYSIS_BOUND_LATENCY;
	case WHATIF_BOUND_BANDWIDTH: return ANALYSIS_BOUND_BANDWIDTH;
	default: return by_size(g, small_gathered_bytes);
	}
}

const char *analysis_bound_name(int bound)
{
	switch (bound) {
	case ANALYSIS_BOUND_LATENCY: return "latency-bound";
	case ANALYSIS_BOUND_BANDWIDTH: return "bandwidth-bound";
	default: return "unknown";
	}
}
