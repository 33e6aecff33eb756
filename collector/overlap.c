/*
 * overlap.c - interval arithmetic and the exposure of collectives (see
 * overlap.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "collector/analysis.h"
#include "collector/overlap.h"

static int interval_cmp(const void *a, const void *b)
{
	const struct interval *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

size_t interval_merge(struct interval *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof *v, interval_cmp);
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].end <= v[i].start)
			continue;
		if (out > 0 && v[i].start <= v[out - 1].end) {
			if (v[i].end > v[out - 1].end)
				v[out - 1].end = v[i].end;
		} else {
			v[out++] = v[i];
		}
	}
	return out;
}

uint64_t interval_total(const struct interval *v, size_t n)
{
	uint64_t t = 0;
	for (size_t i = 0; i < n; i++)
		t += v[i].end - v[i].start;
	return t;
}

/* First interval whose end is after t (the first that can cover t or later). */
static size_t first_ending_after(const struct interval *v, size_t n, uint64_t t)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].end <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint64_t interval_covered(const struct interval *v, size_t n, uint64_t start, uint64_t end)
{
	uint64_t c = 0;
	if (end <= start)
		return 0;
	for (size_t i = first_ending_after(v, n, start); i < n && v[i].start < end; i++) {
		uint64_t s = v[i].start > start ? v[i].start : start;
		uint64_t e = v[i].end < end ? v[i].end : end;
		if (e > s)
			c += e - s;
	}
	return c;
}

uint64_t interval_intersect_total(const struct interval *a, size_t na, const struct interval *b, size_t nb)
{
	uint64_t t = 0;
	size_t i = 0, j = 0;
	while (i < na && j < nb) {
		uint64_t s = a[i].start > b[j].start ? a[i].start : b[j].start;
		uint64_t e = a[i].end < b[j].end ? a[i].end : b[j].end;
		if (e > s)
			t += e - s;
		if (a[i].end < b[j].end)
			i++;
		else
			j++;
	}
	return t;
}

uint64_t interval_last_end_before(const struct interval *v, size_t n, uint64_t t)
{
	/* last interval with start < t */
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].start < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == 0 ? 0 : v[lo - 1].end;
}

static int range_cmp(const void *a, const void *b)
{
	const struct overlap_range *x = a, *y = b;
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1; /* the parent first */
	return 0;
}

/* The leaf ranges of one thread's ranges [r, r + n) (sorted by start,
 * parents first), appended to out. */
static void thread_leaves(const struct overlap_range *r, size_t n, struct interval *out, size_t *nout)
{
	for (size_t i = 0; i < n; i++) {
		/* sorted by start, parents first: the next range starting inside
		 * this one is a child */
		if (i + 1 < n && r[i + 1].start < r[i].end)
			continue;
		out[(*nout)++] = (struct interval){r[i].start, r[i].end};
	}
}

int overlap_host_compute(struct overlap_range *ranges, size_t nranges, struct interval **out, size_t *nout)
{
	*out = NULL;
	*nout = 0;
	if (nranges == 0)
		return 0;
	qsort(ranges, nranges, sizeof *ranges, range_cmp);
	struct interval *v = malloc(nranges * sizeof *v);
	if (!v)
		return -ENOMEM;
	size_t nv = 0;
	for (size_t i = 0; i < nranges;) {
		size_t j = i;
		while (j < nranges && ranges[j].thread == ranges[i].thread)
			j++;
		thread_leaves(ranges + i, j - i, v, &nv);
		i = j;
	}
	nv = interval_merge(v, nv);
	*out = v;
	*nout = nv;
	return 0;
}

uint64_t interval_next_start(const struct interval *v, size_t n, uint64_t t, uint64_t none)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].start < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n ? v[lo].start : none;
}

struct overlap_exposure overlap_gather_exposure(const struct interval *compute, size_t ncompute,
						const struct overlap_gather *g, uint64_t min_exposed_ns)
{
	struct overlap_exposure x = {0};
	if (g->end_ns <= g->start_ns)
		return x;
	x.duration_ns = g->end_ns - g->start_ns;
	x.wait_end_ns = g->end_ns;
	if (g->until_resume && g->until_ns > g->end_ns &&
	    interval_covered(compute, ncompute, g->end_ns - 1, g->end_ns) == 0)
		x.wait_end_ns = g->until_ns;
	uint64_t from = g->from_ns > g->start_ns ? g->from_ns : g->start_ns;
	if (x.wait_end_ns > from) {
		x.hidden_ns = interval_covered(compute, ncompute, from, x.wait_end_ns);
		x.exposed_ns = x.wait_end_ns - from - x.hidden_ns;
	}
	if (x.exposed_ns < min_exposed_ns || x.exposed_ns == 0) {
		x.cause = ANALYSIS_CAUSE_HIDDEN;
		return x;
	}
	/* Prefetched or not: a gather issued ahead of need has the compute
	 * before it running under it; one issued only when the compute needed
	 * it has (almost) none: at most the few hook ranges around its issue.
	 * A prefetched gather that is still exposed outlasted its compute. */
	int started_after_compute = x.hidden_ns * OVERLAP_PREFETCHED_DIVISOR < x.duration_ns;
	/* Host late (device timing only): the kernel ran as soon as the host
	 * called, and the host called only after the device's compute had
	 * drained: the host was behind, not the link. */
	uint64_t before = interval_last_end_before(compute, ncompute, g->start_ns);
	if (g->first_of_phase)
		x.cause = ANALYSIS_CAUSE_FIRST_OF_PHASE;
	else if (g->device_timing && g->issue_ns >= before && g->start_ns >= g->issue_ns &&
		 g->start_ns - g->issue_ns <= OVERLAP_LAUNCH_SLACK_NS && started_after_compute)
		x.cause = ANALYSIS_CAUSE_HOST_LATE;
	else if (started_after_compute)
		x.cause = ANALYSIS_CAUSE_NO_PREFETCH;
	else
		x.cause = ANALYSIS_CAUSE_BANDWIDTH_BOUND;
	return x;
}
