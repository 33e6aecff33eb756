/*
 * kineto_figures.c - HTA's communication / computation overlap of one
 * PyTorch profiler trace, computed as HTA computes it (kineto_map.h;
 * docs/kineto.md "The overlap"), so that its figure can be compared with
 * HTA's on the same file:
 *
 *   - GPU events: kept events with a dur and a numeric args.stream >= 0;
 *   - their class by name (hta/utils/utils.py get_kernel_type, the patterns
 *     of hta/common/types.py): communication (^nccl, ^hip, ^hccl,
 *     ncclKernel anywhere), memory (^Memcpy, ^Memset, their hip forms,
 *     ^dma), computation (any other name but HTA's non-compute list);
 *   - a file with a fractional ts is read by HTA with every event rounded
 *     inward to whole µs (hta/common/trace_parser.py round_down_time_stamps:
 *     ceil of the start, floor of the end), which can leave an event of
 *     less than a µs with its end before its start;
 *   - with two or more ProfilerStep# names, only GPU events whose
 *     correlation is a CPU-side event's that starts before the last
 *     ProfilerStep# are counted (hta/common/trace.py
 *     _filter_irrelevant_gpu_kernels: HTA leaves the last step out);
 *   - each class is merged as HTA merges it (hta/utils/utils.py
 *     merge_kernel_intervals: sorted by start, a new group where a start
 *     passes every end before it), comm_ns is the sum of the
 *     communication groups' lengths (a lone inverted group counts with its
 *     negative length, as in HTA), overlap_ns the time both classes run
 *     (hta/analyzers/communication_analysis.py).
 */
#include "collector/kineto_map.h"
#include "collector/overlap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* HTA's ComputeKernelGroupingPattern, inverted: names that are not computation. */
static const char *const not_compute[] = {
    "Memcpy", "Memset", "dma", "Sync", /* anywhere in the name */
};
static const char *const not_compute_prefix[] = {
    "nccl",
    "Stream Wait Event",
    "hip",
    "job_exe",
    "packet",
    "pe_exe",
    "cpum_exe_subgraph",
    "hccl",
    "collective_subgraph_execution",
    "runFunction",
};

static int starts(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* HTA's (cuda.*LaunchKernel): "cuda", then "LaunchKernel" later. */
static int cuda_launch_kernel(const char *name)
{
	const char *c = strstr(name, "cuda");

	return c && strstr(c + 4, "LaunchKernel");
}

enum kineto_kernel_class kineto_kernel_class_of(const char *name)
{
	if (starts(name, "nccl") || starts(name, "hip") || starts(name, "hccl") || strstr(name, "ncclKernel"))
		return KINETO_KERNEL_COMMUNICATION;
	if (starts(name, "Memcpy") || starts(name, "hipMemcpy") || starts(name, "Memset") ||
	    starts(name, "hipMemset") || starts(name, "dma"))
		return KINETO_KERNEL_MEMORY;
	for (size_t i = 0; i < sizeof(not_compute) / sizeof(not_compute[0]); i++)
		if (strstr(name, not_compute[i]))
			return KINETO_KERNEL_OTHER;
	for (size_t i = 0; i < sizeof(not_compute_prefix) / sizeof(not_compute_prefix[0]); i++)
		if (starts(name, not_compute_prefix[i]))
			return KINETO_KERNEL_OTHER;
	if (cuda_launch_kernel(name))
		return KINETO_KERNEL_OTHER;
	return KINETO_KERNEL_COMPUTATION;
}

int kineto_is_profiler_step(const char *name)
{
	return starts(name, "ProfilerStep#") && name[13] >= '0' && name[13] <= '9';
}

static int is_gpu_event(const struct kineto_event *e)
{
	return e->stream >= 0 && (e->cat == KINETO_CAT_KERNEL || e->cat == KINETO_CAT_GPU_MEMCPY ||
				  e->cat == KINETO_CAT_GPU_MEMSET || e->cat == KINETO_CAT_GPU_OTHER);
}

/* An event's start and end as HTA reads them: inward to whole µs when the
 * file's timestamps are fractional. */
static void hta_times(const struct kineto_event *e, int round, int64_t *start, int64_t *end)
{
	int64_t s = e->ts_ns, t = e->ts_ns + e->dur_ns;

	if (round) {
		/* ceil and floor to a multiple of 1000 (ts may be negative in a damaged file) */
		int64_t sq = s / 1000, tq = t / 1000;

		if (s % 1000 > 0)
			sq++;
		if (t % 1000 < 0)
			tq--;
		s = sq * 1000;
		t = tq * 1000;
	}
	*start = s;
	*end = t;
}

/* A sorted set of correlation ids (the window's launches). */
static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

struct span {
	int64_t start, end;
};

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (x->end > y->end) - (x->end < y->end);
}

/* HTA's merge of one class: groups in place; returns their number. */
static size_t hta_merge(struct span *v, size_t n)
{
	size_t out = 0;
	int64_t max_end = INT64_MIN;

	qsort(v, n, sizeof(*v), cmp_span);
	for (size_t i = 0; i < n; i++) {
		if (out && v[i].start <= max_end) {
			if (v[i].end > v[out - 1].end)
				v[out - 1].end = v[i].end;
		} else {
			v[out++] = v[i];
		}
		if (v[i].end > max_end)
			max_end = v[i].end;
	}
	return out;
}

/* The groups of positive length as intervals for overlap.h, in place. */
static size_t positive(const struct span *v, size_t n, struct interval *out)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (v[i].end > v[i].start)
			out[k++] = (struct interval){.start = (uint64_t)v[i].start, .end = (uint64_t)v[i].end};
	return interval_merge(out, k);
}

/* The window's limit: the last ProfilerStep#'s start (HTA's rounded ts);
 * *active 0 when the file has fewer than two ProfilerStep# names. */
static int window_of(const kineto_file_t *f, int round, int *active, int64_t *limit)
{
	const struct kineto_event *ev = kineto_file_events(f);
	size_t n = kineto_file_nevents(f);
	uint32_t first_name = 0;
	int two = 0;

	*active = 0;
	*limit = INT64_MIN;
	for (size_t i = 0; i < n; i++) {
		int64_t s, t;

		if (is_gpu_event(&ev[i]) || !kineto_is_profiler_step(kineto_file_string(f, ev[i].name)))
			continue;
		if (!first_name)
			first_name = ev[i].name;
		else if (ev[i].name != first_name)
			two = 1;
		hta_times(&ev[i], round, &s, &t);
		if (s > *limit)
			*limit = s;
	}
	*active = two;
	return 0;
}

/* The correlations of the CPU-side events that start before limit, sorted. */
static int window_correlations(const kineto_file_t *f, int round, int64_t limit, int64_t **out, size_t *nout)
{
	const struct kineto_event *ev = kineto_file_events(f);
	size_t n = kineto_file_nevents(f), k = 0;
	int64_t *v = malloc((n ? n : 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int64_t s, t;

		if (is_gpu_event(&ev[i]) || ev[i].correlation < 0)
			continue;
		hta_times(&ev[i], round, &s, &t);
		if (s < limit)
			v[k++] = ev[i].correlation;
	}
	qsort(v, k, sizeof(*v), cmp_i64);
	*out = v;
	*nout = k;
	return 0;
}

int kineto_figures_overlap(const kineto_file_t *f, uint64_t *comm_ns, uint64_t *overlap_ns)
{
	const struct kineto_event *ev = kineto_file_events(f);
	size_t n = kineto_file_nevents(f), ncomm = 0, ncomp = 0, ncorr = 0;
	struct span *comm = NULL, *comp = NULL;
	struct interval *a = NULL, *b = NULL;
	int64_t *corr = NULL, limit, total = 0;
	int round = 0, active, rc = -ENOMEM;

	*comm_ns = *overlap_ns = 0;
	for (size_t i = 0; i < n && !round; i++)
		round = (ev[i].flags & KINETO_EV_FRACTIONAL) != 0;
	window_of(f, round, &active, &limit);
	if (active && window_correlations(f, round, limit, &corr, &ncorr))
		return -ENOMEM;
	comm = malloc((n ? n : 1) * sizeof(*comm));
	comp = malloc((n ? n : 1) * sizeof(*comp));
	if (!comm || !comp)
		goto out;
	for (size_t i = 0; i < n; i++) {
		enum kineto_kernel_class c;
		struct span s;

		if (!is_gpu_event(&ev[i]))
			continue;
		/* HTA keeps a GPU event of the window when a CPU-side event has its correlation */
		if (active &&
		    (ev[i].correlation < 0 || !bsearch(&ev[i].correlation, corr, ncorr, sizeof(*corr), cmp_i64)))
			continue;
		c = kineto_kernel_class_of(kineto_file_string(f, ev[i].name));
		hta_times(&ev[i], round, &s.start, &s.end);
		if (c == KINETO_KERNEL_COMMUNICATION)
			comm[ncomm++] = s;
		else if (c == KINETO_KERNEL_COMPUTATION)
			comp[ncomp++] = s;
	}
	ncomm = hta_merge(comm, ncomm);
	ncomp = hta_merge(comp, ncomp);
	for (size_t i = 0; i < ncomm; i++)
		total += comm[i].end - comm[i].start;
	a = malloc((ncomm ? ncomm : 1) * sizeof(*a));
	b = malloc((ncomp ? ncomp : 1) * sizeof(*b));
	if (!a || !b)
		goto out;
	ncomm = positive(comm, ncomm, a);
	ncomp = positive(comp, ncomp, b);
	*comm_ns = total > 0 ? (uint64_t)total : 0;
	*overlap_ns = interval_intersect_total(a, ncomm, b, ncomp);
	rc = 0;
out:
	free(comm);
	free(comp);
	free(a);
	free(b);
	free(corr);
	return rc;
}
