/*
 * analyze_figures.c - HTA's comm/compute overlap of one rank (see
 * analyze_figures.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analyze_figures.h"
#include "collector/overlap.h"
#include "common/record.h"

static int list_push(struct figures_list *l, uint64_t start, uint64_t end, uint64_t launch_ns)
{
	if (end <= start)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct figures_interval *v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = (struct figures_interval){start, end, launch_ns};
	return 0;
}

static int list_copy(struct figures_list *dst, const struct figures_list *src)
{
	*dst = (struct figures_list){0};
	if (src->n == 0)
		return 0;
	dst->v = malloc(src->n * sizeof *dst->v);
	if (!dst->v)
		return -ENOMEM;
	memcpy(dst->v, src->v, src->n * sizeof *dst->v);
	dst->n = dst->cap = src->n;
	return 0;
}

/* An interval of one timing; the part before the frontier is settled
 * already and cannot be counted any more. */
static int add(struct rank_figures *f, enum figures_timing timing, int compute, uint64_t start, uint64_t end,
	       uint64_t launch_ns)
{
	struct figures_tally *t = &f->tally[timing];
	if (start < f->frontier)
		start = f->frontier;
	return list_push(compute ? &t->compute : &t->comm, start, end, launch_ns);
}

void analyze_figures_release(struct rank_figures *f)
{
	for (int k = 0; k < FIGURES_TIMINGS; k++) {
		free(f->tally[k].comm.v);
		free(f->tally[k].compute.v);
	}
	free(f->threads);
	*f = (struct rank_figures){0};
}

/* ---- what the timeline hands over ---------------------------------------- */

/* An NCCL kernel by the collective seq it was tied to. */
struct seq_span {
	uint64_t seq, start, end;
};

static int seq_span_cmp(const void *a, const void *b)
{
	const struct seq_span *x = a, *y = b;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The span of the kernels of seq numbers [first, last] in spans[0..n)
 * (sorted by seq); 0 when there is none. */
static int kernel_span(const struct seq_span *spans, size_t n, uint64_t first, uint64_t last, struct interval *out)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (spans[mid].seq < first)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint64_t start = UINT64_MAX, end = 0;
	for (size_t j = lo; j < n && spans[j].seq <= last; j++) {
		if (spans[j].start < start)
			start = spans[j].start;
		if (spans[j].end > end)
			end = spans[j].end;
	}
	if (end <= start)
		return 0;
	*out = (struct interval){start, end};
	return 1;
}

int analyze_figures_events(struct rank_figures *f, const struct tl_source *src, const struct tl_event *ev, size_t n)
{
	if (n == 0)
		return 0;
	size_t ng = tl_array_len(&src->gpu), ns = 0;
	struct seq_span *spans = NULL;
	if (src->gpu_comm_seen) {
		spans = malloc((ng ? ng : 1) * sizeof *spans);
		if (!spans)
			return -ENOMEM;
		for (size_t i = 0; i < ng; i++) {
			const struct tl_gpu *g = tl_array_at(&src->gpu, i);
			if (g->kind == FSS_GPU_COMM && g->collective_seq)
				spans[ns++] = (struct seq_span){g->collective_seq, g->start, g->end};
		}
		qsort(spans, ns, sizeof *spans, seq_span_cmp);
	}
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		uint64_t launch = overlap_hta_launch(ev[i].enter_ns, ev[i].enter_ns);
		/* a group runs at ncclGroupEnd (launch_ns): that is its host interval */
		struct interval host = {ev[i].launch_ns, ev[i].exit_ns}, device = host;
		(void)kernel_span(spans, ns, ev[i].seq_first, ev[i].seq_last, &device);
		rc = add(f, FIGURES_HOST, 0, host.start, host.end, launch);
		if (rc == 0)
			rc = add(f, FIGURES_DEVICE, 0, device.start, device.end, launch);
	}
	free(spans);
	return rc;
}

static struct figures_thread *thread_get(struct rank_figures *f, uint32_t thread)
{
	for (size_t i = 0; i < f->nthreads; i++)
		if (f->threads[i].thread == thread)
			return &f->threads[i];
	if (f->nthreads == f->threads_cap) {
		size_t cap = f->threads_cap ? 2 * f->threads_cap : 8;
		struct figures_thread *v = realloc(f->threads, cap * sizeof *v);
		if (!v)
			return NULL;
		f->threads = v;
		f->threads_cap = cap;
	}
	f->threads[f->nthreads] = (struct figures_thread){.thread = thread};
	return &f->threads[f->nthreads++];
}

int analyze_figures_range(struct rank_figures *f, const struct tl_range *r)
{
	if (!r->is_compute)
		return 0;
	struct figures_thread *th = thread_get(f, r->thread);
	if (!th)
		return -ENOMEM;
	/* A thread's ranges nest and are released as they end, children
	 * before their parent: a range holds another exactly when the one
	 * released before it on its thread started inside it (its last
	 * descendant). Only the leaves are compute (overlap_host_compute). */
	int leaf = !(th->has_last && th->last_start >= r->start && th->last_start < r->end);
	th->last_start = r->start;
	th->has_last = 1;
	if (!leaf)
		return 0;
	return add(f, FIGURES_HOST, 1, r->start, r->end, overlap_hta_launch(0, r->start));
}

int analyze_figures_gpu(struct rank_figures *f, const struct tl_gpu *g)
{
	/* NCCL kernels come with their events; copies and memsets are not compute */
	if (g->kind != FSS_GPU_COMPUTE)
		return 0;
	return add(f, FIGURES_DEVICE, 1, g->start, g->end, overlap_hta_launch(0, g->start));
}

/* ---- settling ------------------------------------------------------------- */

/* The merged parts of l[...] in [from, to) that count (launched in the
 * window when steps is given), malloc'ed into *out (the caller frees). */
static int collect(const struct figures_list *l, uint64_t from, uint64_t to, uint32_t steps, uint64_t last_start,
		   struct interval **out, size_t *nout)
{
	*out = malloc((l->n ? l->n : 1) * sizeof **out);
	*nout = 0;
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < l->n; i++) {
		const struct figures_interval *x = &l->v[i];
		if (!overlap_hta_window(x->launch_ns, steps, last_start))
			continue;
		uint64_t s = x->start > from ? x->start : from, e = x->end < to ? x->end : to;
		if (e > s)
			(*out)[(*nout)++] = (struct interval){s, e};
	}
	*nout = interval_merge(*out, *nout);
	return 0;
}

/* |comm| and |comm n compute| of a tally's lists over [from, to), the
 * window applied (steps, last_start as overlap_hta_window takes them). */
static int measure(const struct figures_tally *t, uint64_t from, uint64_t to, uint32_t steps, uint64_t last_start,
		   uint64_t *comm_ns, uint64_t *overlap_ns)
{
	struct interval *c = NULL, *p = NULL;
	size_t nc = 0, np = 0;
	int rc = collect(&t->comm, from, to, steps, last_start, &c, &nc);
	if (rc == 0)
		rc = collect(&t->compute, from, to, steps, last_start, &p, &np);
	if (rc == 0) {
		*comm_ns = interval_total(c, nc);
		*overlap_ns = interval_intersect_total(c, nc, p, np);
	}
	free(c);
	free(p);
	return rc;
}

/* Drop what lies before t from l, clipping what runs past it. */
static void list_cut(struct figures_list *l, uint64_t t)
{
	size_t o = 0;
	for (size_t i = 0; i < l->n; i++) {
		struct figures_interval x = l->v[i];
		if (x.end <= t)
			continue;
		if (x.start < t)
			x.start = t;
		l->v[o++] = x;
	}
	l->n = o;
}

/* Settle the totals before t: every interval launched before t is held (it
 * starts after its launch), and the ones launched later lie after it, so
 * the part before t is the same for any later window. */
static int settle(struct rank_figures *f, uint64_t t)
{
	if (t <= f->frontier)
		return 0;
	uint64_t comm[FIGURES_TIMINGS], overlap[FIGURES_TIMINGS];
	for (int k = 0; k < FIGURES_TIMINGS; k++) {
		int rc = measure(&f->tally[k], f->frontier, t, 0, 0, &comm[k], &overlap[k]);
		if (rc < 0)
			return rc;
	}
	for (int k = 0; k < FIGURES_TIMINGS; k++) {
		struct figures_tally *x = &f->tally[k];
		x->comm_ns += comm[k];
		x->overlap_ns += overlap[k];
		list_cut(&x->comm, t);
		list_cut(&x->compute, t);
	}
	f->frontier = t;
	return 0;
}

int analyze_figures_step(struct rank_figures *f, uint64_t start_ns)
{
	/* the window ends at the last step's start, not known before the end:
	 * what lies before the previous one's is the same whichever comes last */
	if (f->steps > 0) {
		int rc = settle(f, f->last_step_start);
		if (rc < 0)
			return rc;
	}
	f->steps++;
	if (start_ns > f->last_step_start)
		f->last_step_start = start_ns;
	return 0;
}

size_t analyze_figures_pending(const struct rank_figures *f)
{
	size_t n = 0;
	for (int k = 0; k < FIGURES_TIMINGS; k++)
		n += f->tally[k].comm.n + f->tally[k].compute.n;
	return n;
}

/* ---- reading -------------------------------------------------------------- */

static int figures_copy(struct rank_figures *dst, const struct rank_figures *src)
{
	*dst = *src;
	dst->threads = NULL;
	for (int k = 0; k < FIGURES_TIMINGS; k++)
		dst->tally[k].comm = dst->tally[k].compute = (struct figures_list){0};
	int rc = 0;
	for (int k = 0; k < FIGURES_TIMINGS && rc == 0; k++) {
		rc = list_copy(&dst->tally[k].comm, &src->tally[k].comm);
		if (rc == 0)
			rc = list_copy(&dst->tally[k].compute, &src->tally[k].compute);
	}
	if (rc == 0 && src->nthreads) {
		dst->threads = malloc(src->nthreads * sizeof *dst->threads);
		if (!dst->threads)
			rc = -ENOMEM;
		else
			memcpy(dst->threads, src->threads, src->nthreads * sizeof *dst->threads);
		dst->threads_cap = src->nthreads;
	}
	return rc;
}

/* What the timeline of src still holds, as if released now. */
static int take_leftovers(struct rank_figures *f, const struct tl_source *src)
{
	size_t ne = tl_array_len(&src->events);
	int rc = analyze_figures_events(f, src, ne ? tl_array_at(&src->events, 0) : NULL, ne);
	for (size_t i = 0; i < tl_array_len(&src->ranges) && rc == 0; i++)
		rc = analyze_figures_range(f, tl_array_at(&src->ranges, i));
	for (size_t i = 0; i < tl_array_len(&src->gpu) && rc == 0; i++)
		rc = analyze_figures_gpu(f, tl_array_at(&src->gpu, i));
	return rc;
}

int analyze_figures_read(const struct rank_figures *f, const struct tl_source *src, struct figures_result *out)
{
	*out = (struct figures_result){0};
	struct rank_figures c;
	int rc = figures_copy(&c, f);
	if (rc == 0)
		rc = take_leftovers(&c, src);
	/* the timing the exposure uses: kernels where the rank has NCCL kernel intervals */
	out->device_timing = src->gpu_comm_seen > 0;
	const struct figures_tally *t = &c.tally[out->device_timing ? FIGURES_DEVICE : FIGURES_HOST];
	uint64_t comm = 0, overlap = 0;
	if (rc == 0)
		rc = measure(t, c.frontier, UINT64_MAX, c.steps, c.last_step_start, &comm, &overlap);
	if (rc == 0) {
		out->comm_ns = t->comm_ns + comm;
		out->overlap_ns = t->overlap_ns + overlap;
	}
	analyze_figures_release(&c);
	return rc;
}
