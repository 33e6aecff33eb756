/*
 * overlap.c - interval arithmetic and the exposure of collectives (see
 * overlap.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analysis.h"
#include "collector/overlap.h"

/* The order of (a1, a2, a3) against (b1, b2, b3), -1, 0 or 1, for the
 * comparators below: the first key that differs decides (a key passed as
 * b, a sorts descending; 0, 0 stands for a key a comparator lacks). */
static int keys_order(uint64_t a1, uint64_t b1, uint64_t a2, uint64_t b2, uint64_t a3, uint64_t b3)
{
	if (a1 != b1)
		return a1 < b1 ? -1 : 1;
	if (a2 != b2)
		return a2 < b2 ? -1 : 1;
	return (a3 > b3) - (a3 < b3);
}

static int interval_cmp(const void *a, const void *b)
{
	const struct interval *x = a, *y = b;

	return keys_order(x->start, y->start, x->end, y->end, 0, 0);
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

/* How many intervals at the front of v[0..n) have their key (end with
 * by_end, else start) below t (or equal to it, with or_equal): a binary
 * search over intervals sorted by that key. */
static size_t count_leading(const struct interval *v, size_t n, int by_end, uint64_t t, int or_equal)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t key = by_end ? v[mid].end : v[mid].start;
		if (key < t || (or_equal && key == t))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* First interval whose end is after t (the first that can cover t or later). */
static size_t first_ending_after(const struct interval *v, size_t n, uint64_t t)
{
	return count_leading(v, n, 1, t, 1);
}

/* How much of [start, end) the merged, sorted set v covers. O(log n +
 * overlapping intervals). */
static uint64_t interval_covered(const struct interval *v, size_t n, uint64_t start, uint64_t end)
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

/* Among the merged, sorted set v, the end of the last interval that starts
 * before t (the compute "before" an event at t); 0 when none does. */
static uint64_t interval_last_end_before(const struct interval *v, size_t n, uint64_t t)
{
	/* last interval with start < t */
	size_t lo = count_leading(v, n, 0, t, 0);
	return lo == 0 ? 0 : v[lo - 1].end;
}

static int range_cmp(const void *a, const void *b)
{
	const struct overlap_range *x = a, *y = b;

	return keys_order(x->thread, y->thread, x->start, y->start, y->end, x->end); /* the parent first */
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

static int unit_cmp(const void *a, const void *b)
{
	const struct interval *x = a, *y = b;

	return keys_order(x->start, y->start, y->end, x->end, 0, 0); /* the outer first */
}

int overlap_host_units(const struct overlap_range *ranges, size_t nranges, struct interval **out, size_t *nout)
{
	*out = NULL;
	*nout = 0;
	if (nranges == 0)
		return 0;
	struct interval *v = malloc(nranges * sizeof *v);
	if (!v)
		return -ENOMEM;
	size_t nv = 0;
	for (size_t i = 0; i + 1 < nranges; i++)
		if (ranges[i + 1].thread == ranges[i].thread && ranges[i + 1].start < ranges[i].end)
			v[nv++] = (struct interval){ranges[i].start, ranges[i].end};
	qsort(v, nv, sizeof *v, unit_cmp);
	*out = v;
	*nout = nv;
	return 0;
}

/* The first start at or after t in the merged set, or `none` when no
 * interval starts then. */
static uint64_t interval_next_start(const struct interval *v, size_t n, uint64_t t, uint64_t none)
{
	size_t lo = count_leading(v, n, 0, t, 0);
	return lo < n ? v[lo].start : none;
}

/* The cause of an exposed gather, judged over [queue start, end) (see
 * overlap_step). */
static int gather_cause(const struct interval *compute, size_t ncompute, const struct overlap_collective *g,
			int device_timing)
{
	uint64_t from = g->queue_start_ns < g->start_ns ? g->queue_start_ns : g->start_ns;
	/* Prefetched or not: a gather issued ahead of need has the compute
	 * before it running under it (or under the queue ahead of it); one
	 * issued only when the compute needed it has (almost) none: at most the
	 * few hook ranges around its issue. A prefetched gather that is still
	 * exposed outlasted its compute. */
	uint64_t hidden = interval_covered(compute, ncompute, from, g->end_ns);
	int started_after_compute = hidden * OVERLAP_PREFETCHED_DIVISOR < g->end_ns - from;
	/* Host late (device timing only): the kernel ran as soon as the host
	 * called, and the host called only after the device's compute had
	 * drained: the host was behind, not the link. */
	uint64_t before = interval_last_end_before(compute, ncompute, from);
	if (g->first_of_phase)
		return ANALYSIS_CAUSE_FIRST_OF_PHASE;
	if (device_timing && g->issue_ns >= before && g->start_ns >= g->issue_ns &&
	    g->start_ns - g->issue_ns <= OVERLAP_LAUNCH_SLACK_NS && started_after_compute)
		return ANALYSIS_CAUSE_HOST_LATE;
	if (started_after_compute)
		return ANALYSIS_CAUSE_NO_PREFETCH;
	return ANALYSIS_CAUSE_BANDWIDTH_BOUND;
}

/* A gather with no compute under it is no-prefetch only in a step that
 * issues its gathers on demand. A gather that started within
 * OVERLAP_QUEUE_SLACK_NS of the previous gather's end, with compute under at
 * most half of the gap (without prefetch, the gap is the compute that
 * needed the gather), was queued behind it: issued ahead (queueing behind a
 * reduce-scatter says nothing of when a gather was issued), whatever compute ran under it (units too small to hide a
 * gather, a wrap per Linear, still prefetch). Where most of the step's
 * gathers past the first of each phase were issued ahead (compute under
 * them, or queued), the job prefetches and advice to prefetch would change
 * nothing: a queued gather without compute under it outlasted the compute
 * (bandwidth-bound); one that started on an idle stream was issued late by
 * a host that was behind (host-late). */
static void prefetch_seen(const struct interval *compute, size_t ncompute, const struct overlap_collective *c, size_t n,
			  struct overlap_figures *out)
{
	uint32_t ahead = 0, on_demand = 0;
	uint64_t prev_end = 0;
	int have_prev = 0;
	for (int pass = 0; pass < 2; pass++) {
		have_prev = 0;
		for (size_t i = 0; i < n; i++) {
			if (c[i].kind != OVERLAP_GATHER || c[i].end_ns <= c[i].start_ns)
				continue;
			int queued = have_prev && c[i].start_ns >= prev_end &&
				     c[i].start_ns - prev_end <= OVERLAP_QUEUE_SLACK_NS &&
				     2 * interval_covered(compute, ncompute, prev_end, c[i].start_ns) <=
					     c[i].start_ns - prev_end;
			prev_end = c[i].end_ns;
			have_prev = 1;
			if (c[i].first_of_phase)
				continue;
			if (pass == 0 && out[i].cause == ANALYSIS_CAUSE_NO_PREFETCH)
				*(queued ? &ahead : &on_demand) += 1;
			else if (pass == 0)
				ahead += out[i].cause == ANALYSIS_CAUSE_HIDDEN ||
					 out[i].cause == ANALYSIS_CAUSE_BANDWIDTH_BOUND;
			else if (out[i].cause == ANALYSIS_CAUSE_NO_PREFETCH)
				out[i].cause = queued ? ANALYSIS_CAUSE_BANDWIDTH_BOUND : ANALYSIS_CAUSE_HOST_LATE;
		}
		if (ahead <= on_demand)
			return;
	}
}

/* An end or start of a gather's interval, for the sweep over them. */
struct edge {
	uint64_t t;
	uint32_t i;
	uint32_t open;
};

static int edge_cmp(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	return keys_order(x->t, y->t, x->open, y->open, x->i, y->i); /* closes first */
}

/* exposed_ns of every gather: each instant with no compute goes to the
 * earliest-issued gather covering it. active[] holds the gathers covering
 * the sweep point, lowest index first. */
static int sweep_exposed(const struct interval *compute, size_t ncompute, const struct overlap_collective *c,
			 size_t n, uint64_t t0, uint64_t t1, struct overlap_figures *out)
{
	struct edge *e = malloc((n ? 2 * n : 1) * sizeof *e);
	uint32_t *active = malloc((n ? n : 1) * sizeof *active);
	if (!e || !active) {
		free(e);
		free(active);
		return -ENOMEM;
	}
	size_t ne = 0, na = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t s = c[i].start_ns > t0 ? c[i].start_ns : t0;
		uint64_t x = c[i].end_ns < t1 ? c[i].end_ns : t1;
		if (c[i].kind != OVERLAP_GATHER || x <= s)
			continue;
		e[ne++] = (struct edge){s, (uint32_t)i, 1};
		e[ne++] = (struct edge){x, (uint32_t)i, 0};
	}
	qsort(e, ne, sizeof *e, edge_cmp);
	uint64_t prev = 0;
	for (size_t k = 0; k < ne; k++) {
		if (na > 0 && e[k].t > prev) {
			uint64_t len = e[k].t - prev;
			out[active[0]].exposed_ns += len - interval_covered(compute, ncompute, prev, e[k].t);
		}
		prev = e[k].t;
		size_t at = 0;
		while (at < na && active[at] < e[k].i)
			at++;
		if (e[k].open) {
			for (size_t m = na; m > at; m--)
				active[m] = active[m - 1];
			active[at] = e[k].i;
			na++;
		} else if (at < na && active[at] == e[k].i) {
			for (size_t m = at; m + 1 < na; m++)
				active[m] = active[m + 1];
			na--;
		}
	}
	free(e);
	free(active);
	return 0;
}

/* A collective that ended while no compute ran, and that stretch. */
struct ending {
	uint64_t gap_start, gap_end, end;
	uint32_t i;
	uint32_t reserved;
};

static int ending_cmp(const void *a, const void *b)
{
	const struct ending *x = a, *y = b;

	return keys_order(x->gap_start, y->gap_start, x->end, y->end, x->i, y->i);
}

/* Is the stretch [a, b) inside a unit's range that closes before `opens`,
 * where the gathered unit's range opens, with no compute between the two
 * (see overlap_step)? That is a thread descheduled inside one unit while the
 * next unit's gather landed. Compute between them (an activation-checkpoint
 * backward runs other units' work before the gathered unit's next range of
 * that name) means the stretch was a real wait. units sorted by start,
 * nested per thread: of the ranges starting before a, the latest-starting
 * one that holds the stretch is the innermost. */
static int inside_other_unit(const struct interval *compute, size_t ncompute, const struct interval *units, size_t n,
			     uint64_t a, uint64_t b, uint64_t opens)
{
	if (opens == 0)
		return 0;
	size_t lo = count_leading(units, n, 0, a, 1);
	for (size_t i = lo; i-- > 0;)
		if (units[i].end >= b)
			return opens >= units[i].end &&
			       interval_next_start(compute, ncompute, units[i].end, UINT64_MAX) >= opens;
	return 0;
}

/* compute_wait_ns of every gather (see overlap_step). */
static int assign_waits(const struct interval *compute, size_t ncompute, const struct interval *units,
			size_t nunits, const struct overlap_collective *c, size_t n, uint64_t t0, uint64_t t1,
			struct overlap_figures *out, uint64_t *other_wait_ns)
{
	struct ending *v = malloc((n ? n : 1) * sizeof *v);
	if (!v)
		return -ENOMEM;
	size_t nv = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t e = c[i].end_ns;
		if (c[i].kind == OVERLAP_BACKGROUND || e <= c[i].start_ns || e <= t0 || e > t1)
			continue;
		if (interval_covered(compute, ncompute, e - 1, e) > 0)
			continue; /* ended while compute ran: nobody waited */
		uint64_t gs = interval_last_end_before(compute, ncompute, e);
		uint64_t ge = interval_next_start(compute, ncompute, e, t1);
		v[nv++] = (struct ending){gs > t0 ? gs : t0, ge < t1 ? ge : t1, e, (uint32_t)i, 0};
	}
	qsort(v, nv, sizeof *v, ending_cmp);
	for (size_t k = 0; k < nv;) {
		size_t last = k;
		while (last + 1 < nv && v[last + 1].gap_start == v[k].gap_start)
			last++;
		uint64_t len = v[k].gap_end - v[k].gap_start;
		size_t first = last;
		while (first > k && c[v[first - 1].i].kind == OVERLAP_GATHER)
			first--;
		if (c[v[last].i].kind != OVERLAP_GATHER) {
			*other_wait_ns += len;
		} else if (!inside_other_unit(compute, ncompute, units, nunits, v[k].gap_start, v[k].gap_end, c[v[first].i].unit_opens_ns)) {
			struct overlap_figures *f = &out[v[first].i];
			f->compute_wait_ns = len;
			f->wait_start_ns = v[k].gap_start;
			f->wait_end_ns = v[k].gap_end;
		}
		k = last + 1;
	}
	free(v);
	return 0;
}

int overlap_step(const struct interval *compute, size_t ncompute, const struct interval *units, size_t nunits,
		 const struct overlap_collective *c, size_t n, uint64_t t0, uint64_t t1, int device_timing,
		 uint64_t min_exposed_ns, struct overlap_figures *out, uint64_t *other_wait_ns)
{
	memset(out, 0, n * sizeof *out);
	*other_wait_ns = 0;
	int rc = sweep_exposed(compute, ncompute, c, n, t0, t1, out);
	if (rc == 0)
		rc = assign_waits(compute, ncompute, units, nunits, c, n, t0, t1, out, other_wait_ns);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		struct overlap_figures *f = &out[i];
		if (c[i].kind != OVERLAP_GATHER || c[i].end_ns <= c[i].start_ns)
			continue;
		f->duration_ns = c[i].end_ns - c[i].start_ns;
		if (f->exposed_ns < min_exposed_ns)
			f->exposed_ns = 0;
		f->hidden_ns = f->duration_ns - f->exposed_ns;
		f->cause = f->exposed_ns ? gather_cause(compute, ncompute, &c[i], device_timing) : ANALYSIS_CAUSE_HIDDEN;
	}
	prefetch_seen(compute, ncompute, c, n, out);
	return 0;
}
