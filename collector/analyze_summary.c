/*
 * analyze_summary.c - one step of one rank summarised: the phases of its
 * gathers, their intervals (GPU kernels or host calls), the units' names,
 * exposure per gather and the step figures (see analyze_summary.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analyze_summary.h"
#include "collector/comm_roles.h"
#include "collector/overlap.h"
#include "common/record.h"

/* What the summary of one step works from, and what it builds on the way. */
struct step_work {
	const struct analysis_options *opt;
	const struct tl_source *src;
	const struct tl_event *ev; /* [n] the step's events */
	size_t n;
	uint64_t t0, t1; /* the step's span */
	struct step_summary *s;
	int use_gpu;		  /* intervals of GPU kernels, else of host calls */
	struct interval *iv;	  /* [n] each event's interval (info.timed: it has one) */
	struct interval *compute; /* [ncompute] merged compute in [t0, t1) */
	struct interval *units;	  /* [nunits] host timing: the units' ranges (overlap_host_units) */
	size_t ncompute, nunits;
	const struct tl_range **named; /* [nnamed] the step's module ranges, when they were looked for */
	size_t nnamed;
};

/* The step's signature: equal steps (the same events in the same order),
 * equal hashes. */
static uint64_t hash_events(const struct tl_event *ev, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;
	for (size_t i = 0; i < n; i++) {
		h ^= ev[i].sig;
		h *= 0x100000001b3ull;
		h ^= h >> 31;
	}
	return h;
}

/* What a collective is to compute (overlap.h): the FSDP group's parameter
 * gathers; its gradient reductions and the replicas' all-reduces, which
 * compute does not wait for mid-step; the rest (activation collectives, the
 * loss and norm all-reduces, point-to-point), which it waits for at once. */
static enum overlap_kind collective_kind(const struct tl_event *e, const struct ev_info *in)
{
	int param = in->fsdp || in->fsdp_group;
	if (!in->timed)
		return OVERLAP_BACKGROUND;
	if (param && e->op == FSS_OP_ALLGATHER)
		return OVERLAP_GATHER;
	if ((param && e->op == FSS_OP_REDUCESCATTER) || e->role == ANALYSIS_ROLE_REPLICATE)
		return OVERLAP_BACKGROUND;
	return OVERLAP_AWAITED;
}

/* One NCCL kernel of a collective call (GPU timing), by the call's seq. */
struct seq_span {
	uint64_t seq, start, end;
};

static int seq_span_cmp(const void *a, const void *b)
{
	const struct seq_span *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Clip a merged set to [t0, t1) in place. */
static size_t clip(struct interval *v, size_t n, uint64_t t0, uint64_t t1)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t s = v[i].start > t0 ? v[i].start : t0;
		uint64_t e = v[i].end < t1 ? v[i].end : t1;
		if (e > s)
			v[o++] = (struct interval){s, e};
	}
	return o;
}

/* The classes of communication the step figures sum. */
enum iv_class {
	IV_FSDP_ALLGATHER,     /* the FSDP group's parameter gathers */
	IV_FSDP_REDUCESCATTER, /* its gradient reduce-scatters */
	IV_DP_ALLREDUCE,       /* all-reduces of the data-parallel side (HSDP, loss, norm) */
	IV_ALL,		       /* every collective, tensor-parallel ones included */
};

static int in_class(const struct tl_event *e, const struct ev_info *in, enum iv_class cls)
{
	switch (cls) {
	case IV_FSDP_ALLGATHER:
		return e->op == FSS_OP_ALLGATHER && in->fsdp;
	case IV_FSDP_REDUCESCATTER:
		return e->op == FSS_OP_REDUCESCATTER && in->fsdp;
	case IV_DP_ALLREDUCE:
		return e->op == FSS_OP_ALLREDUCE && in->in_steps;
	default:
		return 1;
	}
}

/* The merged intervals of the events of a class that have timing. */
static size_t op_intervals(const struct tl_event *ev, const struct ev_info *info, size_t n, enum iv_class cls,
			   const struct interval *iv, struct interval *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (info[i].timed && in_class(&ev[i], &info[i], cls))
			out[k++] = iv[i];
	return interval_merge(out, k);
}

/* Which range does each forward gather's unit run in? The first module
 * range (see module_ranges) that starts after the gather completed and
 * after the previous unit's range started (FSDP runs a unit right after its
 * gather lands). */
static void name_forward_gathers(const struct tl_event *ev, struct ev_info *info, size_t n,
				 const struct tl_range *const *ranges, size_t nranges)
{
	size_t r = 0;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].op != FSS_OP_ALLGATHER || !info[i].fsdp || info[i].phase != ANALYSIS_PHASE_FORWARD)
			continue;
		while (r < nranges && ranges[r]->start < ev[i].exit_ns)
			r++;
		if (r == nranges)
			break;
		info[i].name = ranges[r]->name;
		r++;
	}
}

static int range_ptr_cmp(const void *a, const void *b)
{
	const struct tl_range *x = *(const struct tl_range *const *)a, *y = *(const struct tl_range *const *)b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end > y->end ? -1 : x->end < y->end;
}

/* Keep, of v[0..n) (sorted by range_ptr_cmp), the ranges that hold another
 * range of their thread: modules. The leaves are ops (fsdp_ref's op ranges
 * and its hooks' "fsdp.*" ranges; PyTorch's per-op ranges when
 * --compute-ranges takes them) and name no unit: a unit's range holds its
 * ops. (A trace that marks units but not ops names only the units that hold
 * other units.) Returns how many are kept, in order. */
static size_t module_ranges(const struct tl_range **v, size_t n)
{
	uint8_t *parent = calloc(n ? n : 1, 1);
	if (!parent)
		return n; /* no memory to tell them apart: name from every range */
	for (size_t i = 1; i < n; i++) {
		/* a range that holds others is followed, in start order on its
		 * thread, by its first child: marking the range just before each
		 * one when it starts inside it finds every parent */
		for (size_t j = i; j-- > 0;) {
			if (v[j]->thread != v[i]->thread)
				continue;
			if (v[i]->start < v[j]->end)
				parent[j] = 1;
			break;
		}
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (parent[i])
			v[k++] = v[i];
	free(parent);
	return k;
}

/* A unit's range by name and start, to find where a unit runs next. */
struct name_start {
	uint32_t name;
	uint32_t reserved;
	uint64_t start;
};

static int name_start_cmp(const void *a, const void *b)
{
	const struct name_start *x = a, *y = b;
	if (x->name != y->name)
		return x->name < y->name ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* unit_opens_ns of each FSDP gather (overlap.h): the start of the first
 * range of the unit it gathers (the name of its forward gather) that opens
 * after it ends. mods[0..nmods) are the step's module ranges. */
static int unit_opens(const struct tl_event *ev, const struct ev_info *info, size_t n, const struct tl_range **mods,
		      size_t nmods, struct overlap_collective *coll)
{
	struct name_start *v = malloc((nmods ? nmods : 1) * sizeof *v);
	uint32_t *unit_name = calloc(n ? n : 1, sizeof *unit_name); /* by forward unit index (< n) */
	if (!v || !unit_name) {
		free(v);
		free(unit_name);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nmods; i++)
		v[i] = (struct name_start){mods[i]->name, 0, mods[i]->start};
	qsort(v, nmods, sizeof *v, name_start_cmp);
	for (size_t i = 0; i < n; i++)
		if (info[i].phase == ANALYSIS_PHASE_FORWARD && info[i].unit >= 0 && (size_t)info[i].unit < n &&
		    info[i].name && !unit_name[info[i].unit])
			unit_name[info[i].unit] = info[i].name;
	for (size_t i = 0; i < n; i++) {
		if (coll[i].kind != OVERLAP_GATHER || info[i].unit < 0 || (size_t)info[i].unit >= n)
			continue;
		uint32_t name = unit_name[info[i].unit];
		if (!name)
			continue;
		struct name_start key = {name, 0, ev[i].exit_ns > coll[i].end_ns ? ev[i].exit_ns : coll[i].end_ns};
		size_t lo = 0, hi = nmods;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (name_start_cmp(&v[mid], &key) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < nmods && v[lo].name == name)
			coll[i].unit_opens_ns = v[lo].start;
	}
	free(v);
	free(unit_name);
	return 0;
}

void analyze_summary_free(struct step_summary *s)
{
	if (!s)
		return;
	free(s->ev);
	free(s->info);
	free(s);
}

/* A summary of the step's events with nothing measured yet. */
static struct step_summary *summary_alloc(const struct tl_event *ev, size_t n, uint64_t t0, uint64_t t1)
{
	struct step_summary *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->nev = n;
	s->ev = malloc((n ? n : 1) * sizeof *s->ev);
	s->info = calloc(n ? n : 1, sizeof *s->info);
	if (!s->ev || !s->info) {
		analyze_summary_free(s);
		return NULL;
	}
	if (n)
		memcpy(s->ev, ev, n * sizeof *ev); /* a step may have no events: ev is NULL then */
	s->hash = hash_events(ev, n);
	s->fig[FIG_STEP] = t1 > t0 ? t1 - t0 : 0;
	return s;
}

/* AllGathers on the primary FSDP group's communicators that the roles gave
 * another role event by event (activations on the FSDP world: context
 * parallel's k and v) gather no unit either: per-step collectives of the
 * group, counted with those the parse found. */
static void mark_other_gathers(struct step_summary *s, const struct tl_event *ev, size_t n)
{
	uint64_t comms[8];
	size_t nc = 0;
	for (size_t i = 0; i < n; i++) {
		if (!s->info[i].fsdp || !ev[i].comm_hash)
			continue;
		size_t k = 0;
		while (k < nc && comms[k] != ev[i].comm_hash)
			k++;
		if (k == nc && nc < 8)
			comms[nc++] = ev[i].comm_hash;
	}
	for (size_t i = 0; i < n; i++) {
		struct ev_info *in = &s->info[i];
		if (ev[i].op != FSS_OP_ALLGATHER || in->fsdp || in->fsdp_group || in->step_gather || !ev[i].comm_hash)
			continue;
		for (size_t k = 0; k < nc; k++)
			if (comms[k] == ev[i].comm_hash)
				in->step_gather = 1;
	}
}

/* The FSDP group's events, the phases of its gathers from their structure
 * (phases.h), and the unit each of its reductions was matched to; each
 * further FSDP group parsed on its own, its result left out of the step's
 * (the primary's). A gather of the primary group that gathers no unit is a
 * per-step collective: no longer an FSDP event for what follows (counts,
 * exposure, sizes). */
static int summary_phases(struct step_summary *s, const struct tl_event *ev, size_t n)
{
	int rc = -ENOMEM;
	struct phases_event *pe = calloc(n ? n : 1, sizeof *pe);
	struct phases_gather *pg = calloc(n ? n : 1, sizeof *pg);
	size_t *at = calloc(n ? n : 1, sizeof *at); /* event of each phases event */
	int32_t *rs_unit = calloc(n ? n : 1, sizeof *rs_unit);
	if (!pe || !pg || !at || !rs_unit)
		goto out;
	uint8_t groups = 0;
	for (size_t i = 0; i < n; i++) {
		struct ev_info *in = &s->info[i];
		in->fsdp = (uint8_t)comm_roles_event_primary(&ev[i]);
		in->fsdp_group = comm_roles_is_fsdp(ev[i].role) ? ev[i].fsdp_group : 0;
		in->in_steps = (uint8_t)comm_roles_in_steps(ev[i].role);
		in->cycle = in->unit = -1;
		if (in->fsdp_group > groups)
			groups = in->fsdp_group;
	}
	for (uint8_t g = groups + 1; g-- > 0;) { /* the primary (0) last: its arrays stay for the matching */
		size_t npe = 0;
		for (size_t i = 0; i < n; i++)
			if ((g ? s->info[i].fsdp_group == g : s->info[i].fsdp) &&
			    (ev[i].op == FSS_OP_ALLGATHER || ev[i].op == FSS_OP_REDUCESCATTER)) {
				at[npe] = i;
				pe[npe++] = (struct phases_event){ev[i].elements, ev[i].bytes, ev[i].nranks,
								  ev[i].op,	  ev[i].dtype, {0}};
			}
		struct phases_result other;
		if (phases_parse(pe, npe, pg, g ? &other : &s->phases) < 0)
			goto out;
		for (size_t j = 0, k = 0; j < npe; j++) {
			if (pe[j].op != FSS_OP_ALLGATHER)
				continue;
			struct ev_info *in = &s->info[at[j]];
			in->phase = pg[k].phase;
			in->cycle = pg[k].cycle;
			in->unit = pg[k].unit;
			in->recompute = pg[k].recompute;
			if (g == 0) {
				in->step_gather = pg[k].step_gather;
				in->fsdp = !pg[k].step_gather;
			}
			k++;
		}
		if (g == 0)
			mark_other_gathers(s, ev, n);
		for (uint32_t c = 0; g == 0 && s->phases.status == PHASES_OK && c < s->phases.cycles; c++) {
			if (phases_match_reductions(pe, npe, pg, (int32_t)c, s->phases.units, rs_unit, NULL) < 0)
				goto out;
			for (size_t j = 0; j < npe; j++)
				if (rs_unit[j] >= 0)
					s->info[at[j]].unit = rs_unit[j];
		}
	}
	rc = 0;
out:
	free(pe);
	free(pg);
	free(at);
	free(rs_unit);
	return rc;
}

/* The rank's device: the one its NCCL kernels in [t0, t1) run on (a
 * process may touch others; their kernels do not hide this rank's
 * gathers). */
static uint32_t comm_device(const struct tl_source *src, uint64_t t0, uint64_t t1)
{
	size_t ng = tl_array_len(&src->gpu);
	uint32_t device = 0, votes = 0;
	for (size_t i = 0; i < ng; i++) {
		const struct tl_gpu *g = tl_array_at(&src->gpu, i);
		if (g->kind != FSS_GPU_COMM || g->end <= t0 || g->start >= t1)
			continue;
		if (votes == 0)
			device = g->device;
		votes += g->device == device ? 1 : -1u;
	}
	return device;
}

/* GPU timing: compute is the rank's compute kernels; each event's interval
 * spans the NCCL kernels of its calls' seq numbers. */
static int gpu_intervals(struct step_work *w)
{
	const struct tl_source *src = w->src;
	struct step_summary *s = w->s;
	size_t ng = tl_array_len(&src->gpu), nspan = 0;
	w->compute = malloc((ng ? ng : 1) * sizeof *w->compute);
	struct seq_span *spans = malloc((ng ? ng : 1) * sizeof *spans);
	if (!w->compute || !spans) {
		free(spans);
		return -ENOMEM;
	}
	uint32_t device = comm_device(src, w->t0, w->t1);
	for (size_t i = 0; i < ng; i++) {
		const struct tl_gpu *g = tl_array_at(&src->gpu, i);
		if (g->end <= w->t0 || g->start >= w->t1)
			continue;
		if (g->kind == FSS_GPU_COMPUTE && g->device == device)
			w->compute[w->ncompute++] = (struct interval){g->start, g->end};
		else if (g->kind == FSS_GPU_COMM && g->collective_seq)
			spans[nspan++] = (struct seq_span){g->collective_seq, g->start, g->end};
	}
	w->ncompute = interval_merge(w->compute, w->ncompute);
	w->ncompute = clip(w->compute, w->ncompute, w->t0, w->t1);
	qsort(spans, nspan, sizeof *spans, seq_span_cmp);
	for (size_t i = 0; i < w->n; i++) {
		/* the first span with seq >= seq_first */
		size_t lo = 0, hi = nspan;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (spans[mid].seq < w->ev[i].seq_first)
				lo = mid + 1;
			else
				hi = mid;
		}
		uint64_t st = UINT64_MAX, en = 0;
		for (size_t j = lo; j < nspan && spans[j].seq <= w->ev[i].seq_last; j++) {
			if (spans[j].start < st)
				st = spans[j].start;
			if (spans[j].end > en)
				en = spans[j].end;
		}
		if (en > st) {
			w->iv[i] = (struct interval){st, en};
			s->info[i].timed = 1;
			s->ev[i].gpu_start = st;
			s->ev[i].gpu_end = en;
		}
	}
	s->exposure_source = ANALYSIS_EXPOSURE_CUPTI;
	free(spans);
	return 0;
}

/* Host timing: compute is the NVTX compute ranges; each event's interval is
 * its calls', from launch to return. */
static int host_intervals(struct step_work *w)
{
	const struct tl_source *src = w->src;
	int attached = src->view && source_is_attached(src->view) && !(src->features & FSS_FEATURE_CUPTI);
	size_t nr = tl_array_len(&src->ranges), m = 0;
	struct overlap_range *ranges = malloc((nr ? nr : 1) * sizeof *ranges);
	if (!ranges)
		return -ENOMEM;
	for (size_t i = 0; i < nr; i++) {
		const struct tl_range *r = tl_array_at(&src->ranges, i);
		if (r->is_compute && r->end > w->t0 && r->start < w->t1)
			ranges[m++] = (struct overlap_range){r->start, r->end, r->thread, 0};
	}
	for (size_t i = 0; i < w->n; i++) {
		w->iv[i] = (struct interval){w->ev[i].launch_ns, w->ev[i].exit_ns};
		w->s->info[i].timed = w->ev[i].exit_ns > w->ev[i].launch_ns;
	}
	/* an attached source's calls are timed by uprobes on the host: on a
	 * real GPU a call returns at enqueue, so host intervals would make
	 * up exposure; it is not measured for them (analysis_attach_exposure_why) */
	int rc = 0;
	if (m > 0 && !attached) {
		if (overlap_host_compute(ranges, m, &w->compute, &w->ncompute) < 0 ||
		    overlap_host_units(ranges, m, &w->units, &w->nunits) < 0)
			rc = -ENOMEM;
		else {
			w->ncompute = clip(w->compute, w->ncompute, w->t0, w->t1);
			w->s->exposure_source = ANALYSIS_EXPOSURE_HOST;
		}
	}
	free(ranges);
	return rc;
}

/* Unit names from the module ranges that start in the step. */
static int name_gathers(struct step_work *w)
{
	const struct tl_source *src = w->src;
	size_t nr = tl_array_len(&src->ranges);
	w->named = malloc((nr ? nr : 1) * sizeof *w->named);
	if (!w->named)
		return -ENOMEM;
	for (size_t i = 0; i < nr; i++) {
		const struct tl_range *r = tl_array_at(&src->ranges, i);
		if (r->is_compute && r->start >= w->t0 && r->start < w->t1)
			w->named[w->nnamed++] = r;
	}
	qsort(w->named, w->nnamed, sizeof *w->named, range_ptr_cmp);
	w->nnamed = module_ranges(w->named, w->nnamed);
	name_forward_gathers(w->ev, w->s->info, w->n, w->named, w->nnamed);
	w->s->has_names = w->nnamed > 0;
	return 0;
}

/* The step's collectives as overlap_step takes them. A gather queued behind
 * other collectives on its stream (or the communication thread) waited from
 * the moment the queue ahead of it started running (back to the previous
 * gather at most). Each micro-batch has its own first gathers. */
static void step_collectives(const struct step_work *w, struct overlap_collective *coll)
{
	const struct tl_event *ev = w->ev;
	const struct ev_info *info = w->s->info;
	const struct interval *iv = w->iv;
	for (size_t i = 0; i < w->n; i++) {
		uint64_t queue_start = iv[i].start;
		if (ev[i].op == FSS_OP_ALLGATHER && (info[i].fsdp || info[i].fsdp_group) && info[i].timed) {
			for (size_t j = i; j-- > 0;) {
				int same = w->use_gpu ? ev[j].stream == ev[i].stream : ev[j].thread == ev[i].thread;
				if (!same || !info[j].timed)
					continue;
				if ((ev[j].op == FSS_OP_ALLGATHER && (info[j].fsdp || info[j].fsdp_group)) ||
				    iv[j].end + OVERLAP_QUEUE_SLACK_NS < queue_start || iv[j].start >= queue_start)
					break;
				queue_start = iv[j].start;
			}
		}
		coll[i] = (struct overlap_collective){
		    .issue_ns = ev[i].launch_ns,
		    .start_ns = iv[i].start,
		    .end_ns = iv[i].end,
		    .queue_start_ns = queue_start,
		    .kind = (uint8_t)collective_kind(&ev[i], &info[i]),
		};
	}
	/* per FSDP group: its own cycles and phases */
	int first_fwd[COMM_ROLES_GROUPS_MAX], first_bwd[COMM_ROLES_GROUPS_MAX];
	int32_t cycle[COMM_ROLES_GROUPS_MAX];
	for (int g = 0; g < COMM_ROLES_GROUPS_MAX; g++) {
		cycle[g] = -1;
		first_fwd[g] = first_bwd[g] = 1;
	}
	for (size_t i = 0; i < w->n; i++) {
		int g = info[i].fsdp_group;
		if (coll[i].kind != OVERLAP_GATHER || g >= COMM_ROLES_GROUPS_MAX)
			continue;
		if (info[i].cycle != cycle[g]) {
			cycle[g] = info[i].cycle;
			first_fwd[g] = first_bwd[g] = 1;
		}
		int fwd = info[i].phase != ANALYSIS_PHASE_BACKWARD;
		coll[i].first_of_phase = (uint8_t)(fwd ? first_fwd[g] : first_bwd[g]);
		if (fwd)
			first_fwd[g] = 0;
		else
			first_bwd[g] = 0;
	}
}

/* How much compute of w runs in [a, b). */
static uint64_t compute_in(const struct step_work *w, uint64_t a, uint64_t b)
{
	if (b <= a)
		return 0;
	struct interval span = {a, b};
	return interval_intersect_total(w->compute, w->ncompute, &span, 1);
}

/* Where each primary FSDP gather sat in the step: start and issue offsets,
 * and the compute its arrival let run (to the next such gather's end). */
static void gather_places(struct step_work *w, const struct overlap_collective *coll)
{
	struct ev_info *info = w->s->info;
	size_t prev = SIZE_MAX;
	for (size_t i = 0; i <= w->n; i++) {
		int last = i == w->n;
		if (!last && (coll[i].kind != OVERLAP_GATHER || info[i].fsdp_group))
			continue;
		uint64_t end = last ? w->t1 : coll[i].end_ns;
		if (prev != SIZE_MAX)
			info[prev].compute_after = compute_in(w, coll[prev].end_ns, end);
		if (last)
			break;
		info[i].start_off = coll[i].start_ns > w->t0 ? coll[i].start_ns - w->t0 : 0;
		info[i].issue_off = coll[i].issue_ns > w->t0 ? coll[i].issue_ns - w->t0 : 0;
		prev = i;
	}
}

/* Each gather's figures into its info and the step figures. */
static void gather_figures(struct step_work *w, const struct overlap_collective *coll,
			   const struct overlap_figures *figs)
{
	struct step_summary *s = w->s;
	for (size_t i = 0; i < w->n; i++) {
		if (coll[i].kind != OVERLAP_GATHER)
			continue;
		const struct overlap_figures *x = &figs[i];
		struct ev_info *in = &s->info[i];
		int fwd = in->phase != ANALYSIS_PHASE_BACKWARD;
		in->duration = x->duration_ns;
		in->exposed = x->exposed_ns;
		in->hidden = x->hidden_ns;
		in->compute_wait = x->compute_wait_ns;
		in->queued = w->iv[i].start - coll[i].queue_start_ns;
		in->call = w->ev[i].exit_ns > w->ev[i].enter_ns ? w->ev[i].exit_ns - w->ev[i].enter_ns : 0;
		in->cause = (uint8_t)x->cause;
		if (in->fsdp_group)
			continue; /* another FSDP group's: its own figures (analyze_groups.c), not the step's */
		s->fig[FIG_AG] += x->duration_ns;
		s->fig[FIG_AG_EXPOSED] += x->exposed_ns;
		s->fig[FIG_AG_WAIT] += x->compute_wait_ns;
		s->fig[fwd ? FIG_FWD_EXPOSED : FIG_BWD_EXPOSED] += x->exposed_ns;
		s->fig[fwd ? FIG_FWD_WAIT : FIG_BWD_WAIT] += x->compute_wait_ns;
		s->fig[FIG_CAUSE_N + x->cause]++;
		s->fig[FIG_CAUSE_NS + x->cause] += x->exposed_ns;
		s->fig[FIG_CAUSE_WAIT + x->cause] += x->compute_wait_ns;
		if (x->cause != ANALYSIS_CAUSE_HIDDEN)
			s->fig[FIG_EXPOSED_GATHERS]++;
	}
}

/* The other classes of communication: merged time, and merged time with no
 * compute; and the compute time. */
static int class_figures(struct step_work *w)
{
	static const struct {
		enum iv_class cls;
		int all, exposed;
	} classes[] = {
	    {IV_FSDP_REDUCESCATTER, FIG_RS, FIG_RS_EXPOSED},
	    {IV_DP_ALLREDUCE, FIG_AR, FIG_AR_EXPOSED},
	    {IV_ALL, -1, FIG_COMM_EXPOSED},
	};
	struct step_summary *s = w->s;
	struct interval *tmp = calloc(w->n ? w->n : 1, sizeof *tmp);
	if (!tmp)
		return -ENOMEM;
	for (size_t c = 0; c < sizeof classes / sizeof classes[0]; c++) {
		size_t m = op_intervals(w->ev, s->info, w->n, classes[c].cls, w->iv, tmp);
		m = clip(tmp, m, w->t0, w->t1 > w->t0 ? w->t1 : w->t0);
		uint64_t total = interval_total(tmp, m);
		uint64_t hidden = interval_intersect_total(tmp, m, w->compute, w->ncompute);
		if (classes[c].all >= 0)
			s->fig[classes[c].all] = total;
		s->fig[classes[c].exposed] = total - hidden;
	}
	s->fig[FIG_COMPUTE] = interval_total(w->compute, w->ncompute);
	free(tmp);
	return 0;
}

/* Exposure per gather (overlap_step) and the step figures. */
static int summary_exposure(struct step_work *w)
{
	int rc = -ENOMEM;
	size_t n = w->n;
	struct overlap_collective *coll = calloc(n ? n : 1, sizeof *coll);
	struct overlap_figures *figs = malloc((n ? n : 1) * sizeof *figs);
	if (!coll || !figs)
		goto out;
	step_collectives(w, coll);
	if (!w->use_gpu && unit_opens(w->ev, w->s->info, n, w->named, w->nnamed, coll) < 0)
		goto out;
	uint64_t other_wait = 0;
	if (overlap_step(w->compute, w->ncompute, w->units, w->nunits, coll, n, w->t0, w->t1 > w->t0 ? w->t1 : w->t0,
			 w->use_gpu, w->opt->exposed_min_ns, figs, &other_wait) < 0)
		goto out;
	w->s->fig[FIG_OTHER_WAIT] = other_wait;
	gather_figures(w, coll, figs);
	gather_places(w, coll);
	rc = class_figures(w);
out:
	free(coll);
	free(figs);
	return rc;
}

int analyze_summary_new(const struct analysis_options *o, const struct tl_source *src, int names_known,
			const struct tl_event *ev, size_t n, uint64_t t0, uint64_t t1, struct step_summary **out)
{
	struct step_work w = {.opt = o, .src = src, .ev = ev, .n = n, .t0 = t0, .t1 = t1};
	int rc = -ENOMEM;
	*out = NULL;
	w.s = summary_alloc(ev, n, t0, t1);
	w.iv = calloc(n ? n : 1, sizeof *w.iv);
	if (!w.s || !w.iv)
		goto out;
	if ((rc = summary_phases(w.s, ev, n)) < 0)
		goto out;
	/* intervals: GPU kernels when this rank has them, else host calls */
	w.use_gpu = !o->force_host_timing && src->gpu_comm_seen > 0;
	if ((rc = w.use_gpu ? gpu_intervals(&w) : host_intervals(&w)) < 0)
		goto out;
	/* unit names from NVTX, while this rank has none; with host timing in
	 * every step (where each gathered unit's range opens tells a wait for
	 * the gather from a stall of another unit's compute) */
	if ((!w.use_gpu || !names_known) && (rc = name_gathers(&w)) < 0)
		goto out;
	if (w.s->exposure_source != ANALYSIS_EXPOSURE_NONE && (rc = summary_exposure(&w)) < 0)
		goto out;
	rc = 0;
	*out = w.s;
	w.s = NULL;
out:
	analyze_summary_free(w.s);
	free(w.iv);
	free(w.compute);
	free(w.units);
	free(w.named);
	return rc;
}
