/*
 * analyze_advice.c - the facts the rules' advice is judged by: the job's
 * nodes, and what bounds each gather (see analysis.h).
 */
#include "collector/analysis.h"

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

/* The fastest gather of each size of the step: the points of the fit. A
 * size gathered once (the root, say) is left out: one gather's time is one
 * draw of how late its last rank came. */
struct point {
	double bytes, ns;
	uint32_t count;
};

static size_t size_points(const struct analysis_result *a, struct point *p, size_t max)
{
	size_t n = 0, kept = 0;

	for (uint32_t i = 0; i < a->ngathers; i++) {
		const struct analysis_gather *g = &a->gathers[i];
		size_t j;

		if (g->duration_ns == 0 || g->bytes == 0)
			continue;
		for (j = 0; j < n; j++)
			if (p[j].bytes == (double)g->bytes)
				break;
		if (j < n) {
			p[j].count++;
			if ((double)g->duration_ns < p[j].ns)
				p[j].ns = (double)g->duration_ns;
		} else if (n < max) {
			p[n++] = (struct point){(double)g->bytes, (double)g->duration_ns, 1};
		}
	}
	for (size_t j = 0; j < n; j++)
		if (p[j].count >= 2)
			p[kept++] = p[j];
	return kept;
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
	struct point p[64];
	size_t n;
	double mx = 0, my = 0, sxx = 0, sxy = 0, slope, latency;

	if (!g || g->bytes == 0)
		return ANALYSIS_BOUND_UNKNOWN;
	n = size_points(a, p, sizeof(p) / sizeof(p[0]));
	if (n < 2)
		return by_size(g, small_gathered_bytes);
	for (size_t i = 0; i < n; i++) {
		mx += p[i].bytes / (double)n;
		my += p[i].ns / (double)n;
	}
	for (size_t i = 0; i < n; i++) {
		sxx += (p[i].bytes - mx) * (p[i].bytes - mx);
		sxy += (p[i].bytes - mx) * (p[i].ns - my);
	}
	slope = sxx > 0 ? sxy / sxx : 0;
	if (slope <= 0)
		return ANALYSIS_BOUND_LATENCY;
	latency = my - slope * mx;
	/* A fit through times that late ranks stretch is rough: it decides
	 * only where one term is at least twice the other. */
	if (latency >= 2 * slope * (double)g->bytes)
		return ANALYSIS_BOUND_LATENCY;
	if (slope * (double)g->bytes >= 2 * latency)
		return ANALYSIS_BOUND_BANDWIDTH;
	return by_size(g, small_gathered_bytes);
}

const char *analysis_bound_name(int bound)
{
	switch (bound) {
	case ANALYSIS_BOUND_LATENCY: return "latency-bound";
	case ANALYSIS_BOUND_BANDWIDTH: return "bandwidth-bound";
	default: return "unknown";
	}
}
