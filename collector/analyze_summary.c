/*
 * analyze_summary.c - one step of one rank: its summary (counts, exposure per
 * gather, step figures), the bounded sample of steps and the representative
 * step among them, and the steady state they are aggregated into.
 */
#include "collector/analyze_internal.h"

/* ---- one step ------------------------------------------------------------ */

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

int analyze_u64_cmp(const void *x, const void *y)
{
	uint64_t p = *(const uint64_t *)x, q = *(const uint64_t *)y;
	return p < q ? -1 : p > q;
}

/* What a collective is to compute (overlap.h): the FSDP group's parameter
 * gathers; its gradient reductions and the replicas' all-reduces, which
 * compute does not wait for mid-step; the rest (activation collectives, the
 * loss and norm all-reduces, point-to-point), which it waits for at once. */
static enum overlap_kind collective_kind(const struct tl_event *e, const struct ev_info *in)
{
	if (!in->timed)
		return OVERLAP_BACKGROUND;
	if (in->fsdp && e->op == FSS_OP_ALLGATHER)
		return OVERLAP_GATHER;
	if ((in->fsdp && e->op == FSS_OP_REDUCESCATTER) || e->role == ANALYSIS_ROLE_REPLICATE)
		return OVERLAP_BACKGROUND;
	return OVERLAP_AWAITED;
}

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
	IV_ALL,                /* every collective, tensor-parallel ones included */
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
static void name_forward_gathers(const struct tl_source *src, const struct tl_event *ev, struct ev_info *info,
				 size_t n, const struct tl_range *const *ranges, size_t nranges)
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
	(void)src;
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

/*
 * Summarise the events ev[0..n) of one step spanning [t0, t1): counts,
 * exposure per gather and step figures. Uses the source's pending ranges and
 * GPU intervals as they are.
 */
int analyze_summarise(analyzer_t *a, struct rank_state *rs, const struct tl_event *ev, size_t n, uint64_t t0,
		     uint64_t t1, struct step_summary **out)
{
	struct tl_source *src = rs->src;
	int rc = -ENOMEM;
	*out = NULL;
	struct step_summary *s = calloc(1, sizeof *s);
	struct interval *iv = calloc(n ? n : 1, sizeof *iv);
	struct interval *tmp = calloc(n ? n : 1, sizeof *tmp);
	struct interval *compute = NULL, *units = NULL;
	size_t ncompute = 0, nunits = 0;
	struct seq_span *spans = NULL;
	struct overlap_range *ranges = NULL;
	struct overlap_collective *coll = NULL;
	struct overlap_figures *figs = NULL;
	const struct tl_range **named = NULL;
	struct phases_event *pe = NULL;
	struct phases_gather *pg = NULL;
	if (!s || !iv || !tmp)
		goto fail;
	s->nev = n;
	s->ev = malloc((n ? n : 1) * sizeof *s->ev);
	s->info = calloc(n ? n : 1, sizeof *s->info);
	if (!s->ev || !s->info)
		goto fail;
	if (n)
		memcpy(s->ev, ev, n * sizeof *ev); /* a step may have no events: ev is NULL then */
	s->hash = hash_events(ev, n);
	s->fig[FIG_STEP] = t1 > t0 ? t1 - t0 : 0;

	/* the FSDP group's events, and the phases of its gathers from their
	 * structure (phases.h) */
	pe = calloc(n ? n : 1, sizeof *pe);
	pg = calloc(n ? n : 1, sizeof *pg);
	if (!pe || !pg)
		goto fail;
	size_t npe = 0;
	for (size_t i = 0; i < n; i++) {
		struct ev_info *in = &s->info[i];
		in->fsdp = (uint8_t)comm_role_is_fsdp(ev[i].role);
		in->in_steps = (uint8_t)comm_role_in_steps(ev[i].role);
		in->cycle = in->unit = -1;
		if (in->fsdp && (ev[i].op == FSS_OP_ALLGATHER || ev[i].op == FSS_OP_REDUCESCATTER))
			pe[npe++] = (struct phases_event){ev[i].elements, ev[i].nranks, ev[i].op, {0}};
	}
	if (phases_parse(pe, npe, pg, &s->phases) < 0)
		goto fail;
	for (size_t i = 0, k = 0; i < n; i++) {
		if (!s->info[i].fsdp || ev[i].op != FSS_OP_ALLGATHER)
			continue;
		s->info[i].phase = pg[k].phase;
		s->info[i].cycle = pg[k].cycle;
		s->info[i].unit = pg[k].unit;
		s->info[i].recompute = pg[k].recompute;
		k++;
	}

	/* intervals: GPU kernels when this rank has them, else host calls */
	int use_gpu = !a->opt.force_host_timing && src->gpu_comm_seen > 0;
	int attached = src->view && source_is_attached(src->view) && !(src->features & FSS_FEATURE_CUPTI);
	if (use_gpu) {
		size_t ng = tl_array_len(&src->gpu), nspan = 0;
		compute = malloc((ng ? ng : 1) * sizeof *compute);
		spans = malloc((ng ? ng : 1) * sizeof *spans);
		if (!compute || !spans)
			goto fail;
		/* the rank's device: the one its NCCL kernels run on (a process
		 * may touch others; their kernels do not hide this rank's gathers) */
		uint32_t device = 0, votes = 0;
		for (size_t i = 0; i < ng; i++) {
			const struct tl_gpu *g = tl_array_at(&src->gpu, i);
			if (g->kind != FSS_GPU_COMM || g->end <= t0 || g->start >= t1)
				continue;
			if (votes == 0)
				device = g->device;
			votes += g->device == device ? 1 : -1u;
		}
		for (size_t i = 0; i < ng; i++) {
			const struct tl_gpu *g = tl_array_at(&src->gpu, i);
			if (g->end <= t0 || g->start >= t1)
				continue;
			if (g->kind == FSS_GPU_COMPUTE && g->device == device)
				compute[ncompute++] = (struct interval){g->start, g->end};
			else if (g->kind == FSS_GPU_COMM && g->collective_seq)
				spans[nspan++] = (struct seq_span){g->collective_seq, g->start, g->end};
		}
		ncompute = interval_merge(compute, ncompute);
		ncompute = clip(compute, ncompute, t0, t1);
		qsort(spans, nspan, sizeof *spans, seq_span_cmp);
		for (size_t i = 0; i < n; i++) {
			/* the first span with seq >= seq_first */
			size_t lo = 0, hi = nspan;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if (spans[mid].seq < ev[i].seq_first)
					lo = mid + 1;
				else
					hi = mid;
			}
			uint64_t st = UINT64_MAX, en = 0;
			for (size_t j = lo; j < nspan && spans[j].seq <= ev[i].seq_last; j++) {
				if (spans[j].start < st)
					st = spans[j].start;
				if (spans[j].end > en)
					en = spans[j].end;
			}
			if (en > st) {
				iv[i] = (struct interval){st, en};
				s->info[i].timed = 1;
				s->ev[i].gpu_start = st;
				s->ev[i].gpu_end = en;
			}
		}
		s->exposure_source = ANALYSIS_EXPOSURE_CUPTI;
	} else {
		size_t nr = tl_array_len(&src->ranges), m = 0;
		ranges = malloc((nr ? nr : 1) * sizeof *ranges);
		if (!ranges)
			goto fail;
		for (size_t i = 0; i < nr; i++) {
			const struct tl_range *r = tl_array_at(&src->ranges, i);
			if (r->is_compute && r->end > t0 && r->start < t1)
				ranges[m++] = (struct overlap_range){r->start, r->end, r->thread, 0};
		}
		for (size_t i = 0; i < n; i++) {
			iv[i] = (struct interval){ev[i].launch_ns, ev[i].exit_ns};
			s->info[i].timed = ev[i].exit_ns > ev[i].launch_ns;
		}
		/* an attached source's calls are timed by uprobes on the host: on a
		 * real GPU a call returns at enqueue, so host intervals would make
		 * up exposure; it is not measured for them (analysis_attach_exposure_why) */
		if (m > 0 && !attached) {
			if (overlap_host_compute(ranges, m, &compute, &ncompute) < 0 ||
			    overlap_host_units(ranges, m, &units, &nunits) < 0)
				goto fail;
			ncompute = clip(compute, ncompute, t0, t1);
			s->exposure_source = ANALYSIS_EXPOSURE_HOST;
		}
	}

	/* unit names from NVTX, while this rank has none; with host timing in
	 * every step (where each gathered unit's range opens tells a wait for
	 * the gather from a stall of another unit's compute) */
	size_t nnamed = 0;
	if (!use_gpu || !rs->tinfo || !rs->tinfo[0].reserved) {
		size_t nr = tl_array_len(&src->ranges);
		named = malloc((nr ? nr : 1) * sizeof *named);
		if (!named)
			goto fail;
		for (size_t i = 0; i < nr; i++) {
			const struct tl_range *r = tl_array_at(&src->ranges, i);
			if (r->is_compute && r->start >= t0 && r->start < t1)
				named[nnamed++] = r;
		}
		qsort(named, nnamed, sizeof *named, range_ptr_cmp);
		nnamed = module_ranges(named, nnamed);
		name_forward_gathers(src, ev, s->info, n, named, nnamed);
		s->has_names = nnamed > 0;
	}

	if (s->exposure_source != ANALYSIS_EXPOSURE_NONE) {
		coll = calloc(n ? n : 1, sizeof *coll);
		figs = malloc((n ? n : 1) * sizeof *figs);
		if (!coll || !figs)
			goto fail;
		/* A gather queued behind other collectives on its stream (or the
		 * communication thread) waited from the moment the queue ahead of
		 * it started running (back to the previous gather at most). */
		for (size_t i = 0; i < n; i++) {
			uint64_t queue_start = iv[i].start;
			if (ev[i].op == FSS_OP_ALLGATHER && s->info[i].fsdp && s->info[i].timed) {
				for (size_t j = i; j-- > 0;) {
					int same = use_gpu ? ev[j].stream == ev[i].stream : ev[j].thread == ev[i].thread;
					if (!same || !s->info[j].timed)
						continue;
					if ((ev[j].op == FSS_OP_ALLGATHER && s->info[j].fsdp) ||
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
				.kind = (uint8_t)collective_kind(&ev[i], &s->info[i]),
			};
		}
		int first_fwd = 1, first_bwd = 1;
		int32_t cycle = -1;
		for (size_t i = 0; i < n; i++) {
			if (coll[i].kind != OVERLAP_GATHER)
				continue;
			if (s->info[i].cycle != cycle) { /* each micro-batch has its own first gathers */
				cycle = s->info[i].cycle;
				first_fwd = first_bwd = 1;
			}
			int fwd = s->info[i].phase != ANALYSIS_PHASE_BACKWARD;
			coll[i].first_of_phase = (uint8_t)(fwd ? first_fwd : first_bwd);
			if (fwd)
				first_fwd = 0;
			else
				first_bwd = 0;
		}
		if (!use_gpu && unit_opens(ev, s->info, n, named, nnamed, coll) < 0)
			goto fail;
		uint64_t other_wait = 0;
		if (overlap_step(compute, ncompute, units, nunits, coll, n, t0, t1 > t0 ? t1 : t0, use_gpu,
				 a->opt.exposed_min_ns, figs, &other_wait) < 0)
			goto fail;
		s->fig[FIG_OTHER_WAIT] = other_wait;
		for (size_t i = 0; i < n; i++) {
			if (coll[i].kind != OVERLAP_GATHER)
				continue;
			const struct overlap_figures *x = &figs[i];
			struct ev_info *in = &s->info[i];
			int fwd = in->phase != ANALYSIS_PHASE_BACKWARD;
			in->duration = x->duration_ns;
			in->exposed = x->exposed_ns;
			in->hidden = x->hidden_ns;
			in->compute_wait = x->compute_wait_ns;
			in->queued = iv[i].start - coll[i].queue_start_ns;
			in->call = ev[i].exit_ns > ev[i].enter_ns ? ev[i].exit_ns - ev[i].enter_ns : 0;
			in->cause = (uint8_t)x->cause;
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
		/* the other classes: merged time, and merged time with no compute */
		static const struct {
			enum iv_class cls;
			int all, exposed;
		} classes[] = {
			{IV_FSDP_REDUCESCATTER, FIG_RS, FIG_RS_EXPOSED},
			{IV_DP_ALLREDUCE, FIG_AR, FIG_AR_EXPOSED},
			{IV_ALL, -1, FIG_COMM_EXPOSED},
		};
		for (size_t c = 0; c < sizeof classes / sizeof classes[0]; c++) {
			size_t m = op_intervals(ev, s->info, n, classes[c].cls, iv, tmp);
			m = clip(tmp, m, t0, t1 > t0 ? t1 : t0);
			uint64_t total = interval_total(tmp, m);
			uint64_t hidden = interval_intersect_total(tmp, m, compute, ncompute);
			if (classes[c].all >= 0)
				s->fig[classes[c].all] = total;
			s->fig[classes[c].exposed] = total - hidden;
		}
		s->fig[FIG_COMPUTE] = interval_total(compute, ncompute);
	}

	rc = 0;
	*out = s;
	s = NULL;
fail:
	analyze_summary_free(s);
	free(iv);
	free(tmp);
	free(compute);
	free(units);
	free(spans);
	free(ranges);
	free(coll);
	free(figs);
	free(named);
	free(pe);
	free(pg);
	return rc;
}

/* The slot of the sample the next step goes into, or -1 when it is left
 * out (median.h's algorithm, so the sample is reproducible). */
static int sample_slot(struct step_sample *m)
{
	if (m->seen == 0)
		m->rng = 0x9e3779b97f4a7c15ull;
	if (m->seen < STEP_SAMPLE_SLOTS)
		return (int)m->seen++;
	m->seen++;
	uint64_t x = m->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	m->rng = x;
	uint64_t j = x % m->seen;
	return j < STEP_SAMPLE_SLOTS ? (int)j : -1;
}

/* The representative step: among the sampled steps, the one whose compute
 * wait on gathers (the figure fsdp_ref's gather_wait measures) is the lower
 * median, the earliest on ties. Returns its slot, -1 when none. */
int analyze_representative_slot(const struct step_sample *m)
{
	unsigned n = m->seen < STEP_SAMPLE_SLOTS ? (unsigned)m->seen : STEP_SAMPLE_SLOTS;
	if (n == 0)
		return -1;
	unsigned order[STEP_SAMPLE_SLOTS];
	for (unsigned i = 0; i < n; i++)
		order[i] = i;
	/* insertion sort by (wait, ordinal): at most STEP_SAMPLE_SLOTS slots */
	for (unsigned i = 1; i < n; i++) {
		unsigned v = order[i], j = i;
		for (; j > 0; j--) {
			unsigned u = order[j - 1];
			uint64_t wu = m->fig[u][FIG_AG_WAIT], wv = m->fig[v][FIG_AG_WAIT];
			if (wu < wv || (wu == wv && m->ordinal[u] <= m->ordinal[v]))
				break;
			order[j] = u;
		}
		order[j] = v;
	}
	return (int)order[(n - 1) / 2];
}

/* Is this rank one whose per-gather figures may be reported? */
int analyze_wants_detail(const analyzer_t *a, const struct rank_state *rs)
{
	if (a->opt.rank >= 0)
		return rs->src->rank == a->opt.rank || rs->src->rank < 0;
	return rs->src->rank <= a->min_rank_seen;
}

/* Add a steady-state step to the rank's figures. */
int analyze_aggregate(analyzer_t *a, struct rank_state *rs, struct step_summary *s)
{
	if (rs->nev == 0 && !rs->tev) {
		size_t n = s->nev ? s->nev : 1;
		rs->nev = s->nev;
		rs->tev = malloc(n * sizeof *rs->tev);
		rs->tinfo = calloc(n, sizeof *rs->tinfo);
		if (!rs->tev || !rs->tinfo)
			return -ENOMEM;
		memcpy(rs->tev, s->ev, s->nev * sizeof *s->ev);
		for (size_t i = 0; i < s->nev; i++) {
			rs->tinfo[i] = s->info[i];
			rs->tinfo[i].reserved = 0;
		}
		rs->phases = s->phases;
		rs->detail = analyze_wants_detail(a, rs);
		if (rs->detail) {
			rs->sample.gathers = calloc(STEP_SAMPLE_SLOTS * n, sizeof *rs->sample.gathers);
			if (!rs->sample.gathers)
				return -ENOMEM;
		}
	}
	if (s->nev != rs->nev)
		return 0; /* cannot happen: equal hashes */
	/* names from the first step that has them ("reserved" marks it) */
	if (rs->nev && !rs->tinfo[0].reserved && s->has_names) {
		for (size_t i = 0; i < s->nev; i++)
			rs->tinfo[i].name = s->info[i].name;
		rs->tinfo[0].reserved = 1;
	}
	if (s->exposure_source && !rs->exposure_source)
		rs->exposure_source = s->exposure_source;
	int slot = sample_slot(&rs->sample);
	if (slot >= 0) {
		rs->sample.ordinal[slot] = s->ordinal;
		memcpy(rs->sample.fig[slot], s->fig, sizeof s->fig);
		for (size_t i = 0; rs->detail && i < s->nev; i++) {
			const struct ev_info *in = &s->info[i];
			rs->sample.gathers[(size_t)slot * s->nev + i] = (struct gather_fig){
				.duration = in->duration,
				.exposed = in->exposed,
				.compute_wait = in->compute_wait,
				.queued = in->queued,
				.call = in->call,
				.cause = in->cause,
				.timed = (uint8_t)(in->timed && s->exposure_source),
			};
		}
	}
	for (int f = 0; f < FIG_MAX; f++) {
		if (f != FIG_STEP && !s->exposure_source)
			continue;
		median_add(&rs->fig[f], s->fig[f]);
	}
	rs->analyzed++;
	return 0;
}

/* Choose the steady-state step among the early NVTX steps: the most common
 * one (the later on ties); earlier steps are warm-up, others irregular. */
int analyze_decide_template(analyzer_t *a, struct rank_state *rs)
{
	unsigned n = rs->nearly;
	rs->decided = 1;
	if (n == 0)
		return 0;
	unsigned best = 0, best_count = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned c = 0;
		for (unsigned j = 0; j < n; j++)
			c += rs->early[j]->hash == rs->early[i]->hash;
		if (c >= best_count) {
			best_count = c;
			best = i;
		}
	}
	rs->tmpl_hash = rs->early[best]->hash;
	unsigned first = 0;
	while (rs->early[first]->hash != rs->tmpl_hash)
		first++;
	int rc = 0;
	for (unsigned i = 0; i < n; i++) {
		if (i < first)
			rs->warmup++;
		else if (rs->early[i]->hash != rs->tmpl_hash)
			rs->irregular++;
		else if (rc == 0)
			rc = analyze_aggregate(a, rs, rs->early[i]);
		analyze_summary_free(rs->early[i]);
		rs->early[i] = NULL;
	}
	rs->nearly = 0;
	return rc;
}
