/*
 * analyze_finish.c - the result of the analysis: per-rank figures, spread,
 * the verdict (or why there is none), and the sections the stages fill
 * (see analyze_finish.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "collector/analyze_comms.h"
#include "collector/analyze_exposure.h"
#include "collector/analyze_figures.h"
#include "collector/analyze_finish.h"
#include "collector/analyze_groups.h"
#include "collector/analyze_note.h"
#include "collector/analyze_service.h"
#include "collector/analyze_steady.h"
#include "collector/analyze_structure.h"
#include "collector/analyze_trust.h"
#include "collector/breakdown.h"
#include "collector/median.h"
#include "collector/mfu.h"
#include "common/arith.h"

/* ---- the trace ------------------------------------------------------------ */

/* Every process of the trace as the per-source layer saw it: how it ended. */
static int result_sources(const timeline_t *tl, struct analysis_result *r)
{
	size_t n = 0;
	int rc = sources_summarize(timeline_layer(tl), &r->sources, &n);
	r->nsources = (uint32_t)n;
	return rc;
}

/* Calls in flight at attach: on a communicator several attached sources
 * share, the calls before a source's first one seen that another source was
 * seen to make (numbered alike on every rank: first_call). Entered before
 * the probes, such a call is seen neither at its entry nor at its return. */
static uint64_t comm_in_flight(const sources_t *layer, size_t i, const struct source_comm *m)
{
	uint64_t first = m->first_call ? m->first_call : 1, least = first;

	if (!m->observed)
		return 0;
	for (size_t j = 0; j < sources_count(layer); j++) {
		const struct source *o = sources_at(layer, j);

		for (size_t k = 0; j != i && source_is_attached(o) && k < o->ncomms; k++)
			if (o->comms[k].observed && o->comms[k].id_hash == m->id_hash &&
			    (o->comms[k].first_call ? o->comms[k].first_call : 1) < least)
				least = o->comms[k].first_call ? o->comms[k].first_call : 1;
	}
	return first - least;
}

static void note_in_flight(struct analysis_result *r)
{
	struct analysis_attach *x = &r->attach;

	for (uint32_t c = 0; c < x->ncomms; c++) {
		int first_of_source = 1;

		x->calls_in_flight += x->comms[c].in_flight;
		for (uint32_t d = 0; d < c; d++)
			if (x->comms[d].source == x->comms[c].source && x->comms[d].in_flight)
				first_of_source = 0;
		x->ranks_in_flight += x->comms[c].in_flight && first_of_source;
	}
	if (x->calls_in_flight)
		analyze_note(r, "%llu call%s in flight at attach on %u rank%s (seen on the others): not in the trace",
			     (unsigned long long)x->calls_in_flight, x->calls_in_flight == 1 ? " was" : "s were",
			     x->ranks_in_flight, x->ranks_in_flight == 1 ? "" : "s");
}

/* What attach inferred of its sources' communicators; nothing without
 * attached sources. */
static int result_attach(const timeline_t *tl, struct analysis_result *r)
{
	const sources_t *layer = timeline_layer(tl);
	struct analysis_attach *x = &r->attach;
	size_t n = 0;

	for (size_t i = 0; i < sources_count(layer); i++) {
		const struct source *src = sources_at(layer, i);
		if (source_is_attached(src))
			n += src->ncomms;
	}
	x->comms = n ? calloc(n, sizeof *x->comms) : NULL;
	if (n && !x->comms)
		return -ENOMEM;
	for (size_t i = 0; i < sources_count(layer); i++) {
		const struct source *src = sources_at(layer, i);
		if (!source_is_attached(src))
			continue;
		x->sources++;
		x->detached += source_end_of(src) == SOURCE_END_DETACHED;
		x->ranks_inferred += src->rank_from >= SOURCE_RANK_INFERRED_INPLACE;
		x->ranks_guessed += source_rank_is_guess(src->rank_from) != 0;
		for (size_t c = 0; c < src->ncomms; c++) {
			const struct source_comm *m = &src->comms[c];
			x->comms[x->ncomms++] = (struct analysis_attach_comm){
			    .id = m->id_hash,
			    .source = src->id,
			    .rank = m->rank,
			    .nranks = m->nranks,
			    .inferred = m->inferred,
			    .observed = m->observed,
			    .in_flight = (uint32_t)comm_in_flight(layer, i, m),
			};
			if (!m->observed)
				continue;
			x->comms_observed++;
			for (int b = 0; b < ANALYSIS_INFER_KINDS; b++)
				x->inferred[b] += (m->inferred >> b) & 1u;
		}
	}
	r->trace.sources_attached = x->sources;
	note_in_flight(r);
	return 0;
}

/* A result with nothing known yet. */
static struct analysis_result *result_new(const struct analysis_options *opt)
{
	struct analysis_result *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->schema = ANALYSIS_SCHEMA;
	r->options = *opt;
	r->exposure.exposed_fraction = ANALYSIS_UNKNOWN;
	r->breakdown.mfu = ANALYSIS_UNKNOWN;
	r->spread.slowest_rank = -1;
	r->spread.slowest_rank_fraction = ANALYSIS_UNKNOWN;
	r->units.layers_match = -1;
	r->headline_rank = -1;
	r->headline_world = -1;
	r->duplicate_rank = -1;
	return r;
}

/* What the trace holds: its records, sources, attached sources and calls
 * in flight (measured to in->now_realtime_ns). Returns 0 or -ENOMEM. */
static int fill_trace(const struct analyze_input *in, struct analysis_result *r)
{
	struct timeline_stats ts;
	timeline_stats(in->tl, &ts);
	r->trace.records = ts.records;
	r->trace.collectives = ts.collectives;
	r->trace.gpu_intervals = ts.gpu_intervals;
	r->trace.nvtx_ranges = ts.nvtx_ranges;
	r->trace.sources = (uint32_t)timeline_sources(in->tl);
	r->trace.truncated = in->truncated;
	r->trace.has_cupti = ts.gpu_intervals > 0;
	r->trace.has_nvtx = ts.nvtx_ranges > 0;
	if (result_sources(in->tl, r) < 0 || result_attach(in->tl, r) < 0 ||
	    flight_fill(in->flight, in->opt->hang_timeout_ns, in->now_realtime_ns, &r->flight) < 0)
		return -ENOMEM;
	return 0;
}

/* ---- the ranks ------------------------------------------------------------ */

static int rank_entry_cmp(const void *x, const void *y)
{
	const struct analysis_rank *p = x, *q = y;
	if (p->rank != q->rank)
		return p->rank < q->rank ? -1 : 1;
	return p->source < q->source ? -1 : p->source > q->source;
}

/* One rank's entry of the per-rank table; returns its last arrivals. */
static uint64_t rank_entry(const ranks_t *ranks, rank_state_t *rs, struct analysis_rank *e)
{
	const struct tl_source *src = rank_state_source(rs);
	const struct rank_steady *st = rank_state_steady(rs);
	const struct rank_trust *t = rank_state_trust(rs);
	e->rank = src->rank;
	e->source = src->id;
	e->pid = src->pid;
	e->steps_analyzed = st->analyzed;
	if (st->tev)
		analyze_structure_counts(st->tev, st->tinfo, st->nev, &e->per_step);
	e->step_ns = median_get(&st->fig[FIG_STEP]);
	int rep = analyze_steady_representative(&st->sample);
	if (rep >= 0) { /* the rank's representative step, as the exposure section */
		e->allgather_ns = st->sample.fig[rep][FIG_AG];
		e->exposed_allgather_ns = st->sample.fig[rep][FIG_AG_EXPOSED];
		e->compute_wait_ns = st->sample.fig[rep][FIG_AG_WAIT];
	}
	e->compute_ns = median_get(&st->fig[FIG_COMPUTE]);
	struct ranks_rank_stats rk = ranks_rank(ranks, src->id);
	e->last_arrivals = (uint32_t)rk.last_arrivals;
	e->matched_collectives = (uint32_t)rk.matched;
	uint32_t steps = st->analyzed + st->warmup + st->irregular;
	e->late_ns_per_step = steps ? rk.late_ns / steps : rk.late_ns;
	e->steps_seen = steps;
	e->dropped_records = src->dropped;
	e->steps_lost = t->steps_lost;
	e->steps_cut = analyze_trust_detached(t, src) ? 0 : t->steps_cut;
	e->collectives_lost = analyze_trust_lost(t, src);
	e->cut = analyze_trust_stopped(t, src);
	return rk.last_arrivals;
}

/* One rank's HTA figures: a foreign trace's from its source_figures record
 * (what its own events said, over its whole file), else measured on its
 * records. Returns 0 or -ENOMEM. */
static int rank_figures(rank_state_t *rs, struct analysis_rank *e)
{
	const struct tl_source *src = rank_state_source(rs);
	if (src->view && src->view->have_figures) {
		const struct fss_rec_source_figures *f = &src->view->figures;
		e->comm_ns = f->comm_ns;
		e->comm_overlap_ns = f->overlap_ns < f->comm_ns ? f->overlap_ns : f->comm_ns;
		e->allgather_kernels = f->allgather_kernels;
		e->reduce_scatter_kernels = f->reduce_scatter_kernels;
		e->allreduce_kernels = f->allreduce_kernels;
		e->other_kernels = f->other_kernels;
		e->profiler_steps = f->profiler_steps;
		e->unknown = f->unknown;
		return 0;
	}
	struct figures_result fr;
	int rc = analyze_figures_read(rank_state_figures(rs), src, &fr);
	if (rc < 0)
		return rc;
	e->comm_ns = fr.comm_ns;
	e->comm_overlap_ns = fr.overlap_ns;
	e->allgather_kernels = src->op_calls[FSS_OP_ALLGATHER];
	e->reduce_scatter_kernels = src->op_calls[FSS_OP_REDUCESCATTER];
	e->allreduce_kernels = src->op_calls[FSS_OP_ALLREDUCE];
	for (int op = 0; op < FSS_OP_MAX; op++)
		if (op != FSS_OP_ALLGATHER && op != FSS_OP_REDUCESCATTER && op != FSS_OP_ALLREDUCE)
			e->other_kernels += src->op_calls[op];
	e->profiler_steps = e->steps_seen;
	return 0;
}

/* A source with a per_rank row: one with collectives, or a rank's trace
 * whose own figures came with it (a PyTorch profiler trace of a rank that
 * ran no NCCL kernel: its row says so, with a null overlap). A process of
 * fsdpscope's own traces without collectives (a launcher) has none. */
static int rank_has_row(const struct tl_source *src)
{
	return src->collectives || (src->view && src->view->have_figures && src->rank >= 0);
}

/* The per-rank table (rank_has_row), and the spread over the ranks with
 * collectives. Returns 0 or -ENOMEM. */
static int fill_ranks(const struct analyze_input *in, const struct ranks_totals *tot, struct analysis_result *r)
{
	size_t nranked = 0, nrows = 0;
	for (size_t i = 0; i < in->nrs; i++) {
		const struct tl_source *src = rank_state_source(in->rs[i]);
		r->trace.dropped_records = u64_add_sat(r->trace.dropped_records, src->dropped);
		if (src->collectives)
			nranked++;
		nrows += rank_has_row(src);
		if (src->world_size > r->world_size)
			r->world_size = src->world_size;
	}
	r->ranks = (uint32_t)nranked;
	r->per_rank = calloc(nrows ? nrows : 1, sizeof *r->per_rank);
	if (!r->per_rank)
		return -ENOMEM;
	size_t k = 0;
	uint64_t step_min = UINT64_MAX, step_max = 0, exp_min = UINT64_MAX, exp_max = 0, best_last = 0;
	for (size_t i = 0; i < in->nrs; i++) {
		if (!rank_has_row(rank_state_source(in->rs[i])))
			continue;
		struct analysis_rank *e = &r->per_rank[k++];
		uint64_t last = rank_entry(in->ranks, in->rs[i], e);
		if (rank_figures(in->rs[i], e) < 0)
			return -ENOMEM;
		if (e->steps_analyzed) {
			r->spread.ranks++;
			if (e->step_ns < step_min)
				step_min = e->step_ns;
			if (e->step_ns > step_max)
				step_max = e->step_ns;
			if (e->exposed_allgather_ns < exp_min)
				exp_min = e->exposed_allgather_ns;
			if (e->exposed_allgather_ns > exp_max)
				exp_max = e->exposed_allgather_ns;
		}
		if (nranked > 1 && last > best_last) {
			best_last = last;
			r->spread.slowest_rank = e->rank;
		}
	}
	r->nper_rank = (uint32_t)k;
	qsort(r->per_rank, k, sizeof *r->per_rank, rank_entry_cmp);
	if (r->spread.ranks) {
		r->spread.step_ns_min = step_min;
		r->spread.step_ns_max = step_max;
		r->spread.exposed_ns_min = exp_min;
		r->spread.exposed_ns_max = exp_max;
	}
	r->spread.max_skew_ns = tot->max_skew_ns;
	if (tot->matched && r->spread.slowest_rank >= 0)
		r->spread.slowest_rank_fraction = (double)best_last / (double)tot->matched;
	return 0;
}

/* The headline rank: the one asked for, else the lowest with steps; NULL
 * when no rank has an analysed step. */
static rank_state_t *headline_rank(const struct analyze_input *in, struct analysis_result *r)
{
	rank_state_t *h = NULL;
	int32_t want = in->opt->rank;
	for (size_t i = 0; i < in->nrs; i++) {
		const struct tl_source *src = rank_state_source(in->rs[i]);
		uint32_t analyzed = rank_state_steady(in->rs[i])->analyzed;
		if (!src->collectives)
			continue;
		if (want >= 0 && src->rank == want && analyzed) {
			h = in->rs[i];
			break;
		}
		if (analyzed && (!h || src->rank < rank_state_source(h)->rank))
			h = in->rs[i];
	}
	if (h && want >= 0 && rank_state_source(h)->rank != want)
		analyze_note(r, "rank %d has no analysed step: figures are rank %d's", want,
			     rank_state_source(h)->rank);
	return h;
}

/* The communicators, from the headline rank (or, without steps, the lowest
 * rank that has collectives); returns that rank, NULL none. */
static rank_state_t *fill_comms(const struct analyze_input *in, rank_state_t *h, struct analysis_result *r)
{
	rank_state_t *view = h;
	for (size_t i = 0; !view && i < in->nrs; i++)
		if (rank_state_source(in->rs[i])->collectives &&
		    (!view || rank_state_source(in->rs[i])->rank < rank_state_source(view)->rank))
			view = in->rs[i];
	r->fsdp_comm = -1;
	r->tp_degree = 1;
	if (!view)
		return NULL;
	const struct rank_comms *c = rank_state_comms(view);
	const struct rank_steady *st = rank_state_steady(view);
	analyze_comms_fill(in->tl, rank_state_source(view), c, st->tev, st->nev, st->analyzed, r);
	if (in->opt->fsdp_comm && c->decided)
		r->fsdp_comm_match = c->roles.given ? 1 : c->roles.override_ambiguous ? -1 : 0;
	return view;
}

/* ---- the verdict ---------------------------------------------------------- */

#define NO_FSDP_WORDS                                                                                                  \
	"no communicator carries both AllGathers and ReduceScatters: no FSDP shard group (not a sharded "              \
	"data-parallel job, or --fsdp-comm names none)"

/* Why there is no headline rank. */
static void fill_no_headline(rank_state_t *view, struct analysis_result *r)
{
	r->verdict = ANALYSIS_UNDECIDED;
	if (!r->ranks) {
		r->undecided_reason = ANALYSIS_UNDECIDED_NO_COLLECTIVES;
		analyze_note_undecided(r, "the trace holds no collective");
	} else if (view && rank_state_comms(view)->decided && rank_state_comms(view)->roles.fsdp < 0) {
		r->undecided_reason = ANALYSIS_UNDECIDED_NO_FSDP;
		analyze_note_undecided(r, NO_FSDP_WORDS);
	} else if (r->trust.steps_lost_all || r->trust.steps_cut_all) {
		r->undecided_reason = ANALYSIS_UNDECIDED_INCOMPLETE;
		char lost[96] = "", cut[64] = "";
		if (r->trust.steps_lost_all)
			snprintf(lost, sizeof lost, "%u lost collectives (%llu of %llu missing)",
				 r->trust.steps_lost_all, (unsigned long long)r->trust.collectives_lost,
				 (unsigned long long)(r->trace.collectives + r->trust.collectives_lost));
		if (r->trust.steps_cut_all)
			snprintf(cut, sizeof cut, "%u %s in progress where the records stop", r->trust.steps_cut_all,
				 r->trust.steps_cut_all == 1 ? "was" : "were");
		analyze_note_undecided(r, "no step the trace vouches for: of the steps found, %s%s%s", lost,
				       lost[0] && cut[0] ? " and " : "", cut);
	} else {
		r->undecided_reason = ANALYSIS_UNDECIDED_NO_STEP;
		analyze_note_undecided(r,
				       "no repeating training step among %llu collectives (too few steps recorded, or "
				       "none alike)",
				       (unsigned long long)r->trace.collectives);
	}
}

/* The headline rank's steps. */
static void fill_headline(rank_state_t *h, const struct ranks_totals *tot, struct analysis_result *r)
{
	const struct tl_source *src = rank_state_source(h);
	const struct rank_steady *st = rank_state_steady(h);
	const struct rank_trust *t = rank_state_trust(h);
	int nvtx = rank_state_walk(h)->mode == MODE_NVTX;
	r->headline_rank = src->rank;
	r->step_detection = nvtx ? ANALYSIS_STEPS_NVTX : ANALYSIS_STEPS_PERIOD;
	r->steps_analyzed = st->analyzed;
	r->warmup_steps = st->warmup;
	r->irregular_steps = st->irregular;
	r->steps_seen = st->analyzed + st->warmup + st->irregular + t->steps_lost + t->steps_cut;
	r->step_period = (uint32_t)st->nev;
	r->step_ns = median_get(&st->fig[FIG_STEP]);
	if (nvtx)
		snprintf(r->step_range_name, sizeof r->step_range_name, "%s", src->step_name);
	analyze_structure_counts(st->tev, st->tinfo, st->nev, &r->per_step);
	uint32_t steps = r->steps_seen ? r->steps_seen : 1;
	r->spread.skew_ns_per_step = tot->skew_ns / steps;
	analyze_service_fill(h, r);
}

/* The verdict: phases from the structure, bucketed fetching, or why not.
 * Returns 0 or -ENOMEM. */
static int fill_verdict(rank_state_t *h, struct analysis_result *r)
{
	const struct rank_steady *st = rank_state_steady(h);
	const struct phases_result *ph = &st->phases;
	if (rank_state_comms(h)->roles.fsdp < 0) {
		r->verdict = ANALYSIS_UNDECIDED;
		r->undecided_reason = ANALYSIS_UNDECIDED_NO_FSDP;
		analyze_note_undecided(r, NO_FSDP_WORDS);
	} else if (ph->status == PHASES_OK) {
		r->verdict = ANALYSIS_DIAGNOSED;
		r->units_decided = 1;
	} else if (ph->status == PHASES_NO_PARSE) {
		if (analyze_structure_buckets(st->tev, st->tinfo, st->nev, &r->buckets) < 0)
			return -ENOMEM;
		const struct analysis_buckets *bk = &r->buckets;
		/* reduce buckets: reduce-scatters that reduce no gather of their own
		 * (by bytes per parameter) or one larger than every unit left for it
		 * (FSDP reduces at most one unit's gradients per ReduceScatter); or
		 * fetches that are mostly no unit's (quantized ZeRO++ fetches) */
		if (bk->reduce_buckets_per_step && (bk->reduce_sizes_matching < bk->reduce_buckets_per_step ||
						    !ph->reductions_fit || ph->step_gathers_dominate)) {
			r->verdict = ANALYSIS_BUCKETED;
		} else {
			r->verdict = ANALYSIS_UNDECIDED;
			r->undecided_reason = ANALYSIS_UNDECIDED_PATTERN;
			analyze_note_undecided(r,
					       "the FSDP group's %u gathers and %u ReduceScatters per step parse as no "
					       "sequence of FSDP units: a pattern the analysis does not know",
					       bk->fetches_per_step, bk->reduce_buckets_per_step);
		}
	} else {
		r->verdict = ANALYSIS_UNDECIDED;
		r->undecided_reason = ANALYSIS_UNDECIDED_NO_REDUCTION;
		r->units_decided = ph->units > 0;
		analyze_note_undecided(r,
				       "no ReduceScatter on the FSDP group: units read from its forward gathers (%u a "
				       "pass, %u a step), forward and backward not told",
				       ph->units, ph->cycles);
	}
	return 0;
}

/* The micro-batches of a diagnosed step. */
static void fill_microbatches(const struct rank_steady *st, struct analysis_result *r)
{
	const struct phases_result *ph = &st->phases;
	struct analysis_microbatches *mb = &r->microbatches;
	mb->phase_source = ANALYSIS_PHASES_STRUCTURE;
	mb->per_step = ph->training_cycles;
	mb->sync = ph->sync_cycles;
	mb->forward_only = ph->forward_only;
	mb->forward_allgathers = ph->forward_allgathers;
	mb->backward_allgathers = ph->backward_allgathers;
	mb->recompute_allgathers = ph->recompute_allgathers;
	/* cycles are told from steps when a step holds several, when NVTX
	 * marks steps, or when something happens once a step besides the
	 * FSDP group's own traffic, after its last reduction (a gradient-norm
	 * or loss all-reduce; an all-reduce inside the forward, such as
	 * float8's per-weight amax, happens in every micro-batch) */
	size_t last = 0;
	for (size_t i = 0; i < st->nev; i++)
		if (st->tinfo[i].fsdp && (st->tev[i].op == FSS_OP_REDUCESCATTER ||
					  (ph->reductions == 0 && st->tev[i].op == FSS_OP_ALLGATHER)))
			last = i;
	int marker = 0;
	for (size_t i = last; i < st->nev && !marker; i++)
		marker = st->tinfo[i].in_steps && !st->tinfo[i].step_gather &&
			 !((st->tinfo[i].fsdp || st->tinfo[i].fsdp_group) &&
			   (st->tev[i].op == FSS_OP_ALLGATHER || st->tev[i].op == FSS_OP_REDUCESCATTER)) &&
			 st->tev[i].role != ANALYSIS_ROLE_REPLICATE;
	mb->told = mb->per_step > 1 || r->step_detection == ANALYSIS_STEPS_NVTX || marker;
	if (!mb->told)
		analyze_note(r, "each step is one forward / backward with its ReduceScatters and nothing marks an "
				"optimizer step: with gradient accumulation these steps are micro-batches (NVTX "
				"ProfilerStep# ranges would tell)");
	if (mb->forward_only)
		analyze_note(r,
			     "%u pass%s a step gather%s every unit with no backward: two models of the same repeating "
			     "unit (a frozen reference or teacher model), or forward-only passes",
			     mb->forward_only, mb->forward_only == 1 ? "" : "es", mb->forward_only == 1 ? "s" : "");
	/* with every unit kept from forward to backward, micro-batches after
	 * the first that keep them unsharded and defer their reductions issue
	 * nothing on the FSDP group: it cannot count them */
	if (mb->per_step == 1 && mb->backward_allgathers == 0 && ph->units > 1)
		analyze_note(r, "every unit kept from forward to backward: micro-batches that reuse them unsharded "
				"(reductions deferred) gather nothing and cannot be counted here");
	uint32_t other = r->per_step.step_allgathers;
	if (other)
		analyze_note(r,
			     "%u AllGather%s a step on the FSDP communicator gather%s no unit: per-step collectives "
			     "(metrics, weight sync, activations), counted apart",
			     other, other == 1 ? "" : "s", other == 1 ? "s" : "");
}

/* The exposure section and the breakdown of the same step, so that its
 * exposed communication holds the AllGathers'. */
static void fill_exposure(const struct analysis_options *opt, const struct rank_steady *st, struct analysis_result *r)
{
	analyze_exposure_fill(st, r);
	int rep = analyze_steady_representative(&st->sample);
	const uint64_t *rf = rep >= 0 ? st->sample.fig[rep] : st->sample.fig[0];
	breakdown_compute(rep >= 0 ? rf[FIG_STEP] : r->step_ns, rf[FIG_COMPUTE], rf[FIG_COMM_EXPOSED], r->ledger.params,
			  r->world_size > 0 ? (uint32_t)r->world_size : r->ranks, opt, &r->breakdown);
}

/* ---- the notes that close a result ---------------------------------------- */

/* The notes on what the headline figures stand for. */
static void headline_notes(const struct rank_steady *st, const struct ranks_totals *tot, struct analysis_result *r)
{
	if (r->exposure.source == ANALYSIS_EXPOSURE_HOST)
		analyze_note(r, "exposure from host timing: exact where collective calls block until done (the CPU "
				"stand-in NCCL); with real NCCL use CUPTI");
	if (r->exposure.source == ANALYSIS_EXPOSURE_NONE && r->trace.sources_attached)
		analyze_note(r, "%s", analysis_attach_exposure_why());
	else if (r->exposure.source == ANALYSIS_EXPOSURE_NONE)
		analyze_note(r,
			     "no compute intervals (no CUPTI kernels, no NVTX compute ranges): exposure not measured");
	if (!st->detail)
		analyze_note(r, "per-gather figures were kept for another rank: the gather table has no times");
	if (r->trace.truncated)
		analyze_note(r,
			     "the trace is incomplete (cut short, not closed by its writer, or with damaged stretches "
			     "skipped): analysed what could be read");
	if (tot->unmatched && r->ranks > 1)
		analyze_note(r, "%llu collective%s not matched across ranks", (unsigned long long)tot->unmatched,
			     tot->unmatched == 1 ? " was" : "s were");
}

/* What a --keep trace left out: the note, and what a source's seq numbers
 * miss on purpose is not missing. */
static void keep_notes(const struct analyze_input *in, struct analysis_result *r)
{
	char kept[ANALYSIS_NOTE_BYTES];
	if (step_summaries_note(in->kept, kept, sizeof kept))
		analyze_note(r, "%s", kept);
	if (!in->kept->steps && !in->kept->keep_flags)
		return;
	for (uint32_t i = 0; i < r->nsources; i++)
		for (size_t j = 0; j < in->nrs; j++) {
			const struct tl_source *src = rank_state_source(in->rs[j]);
			if (src->id == r->sources[i].source)
				r->sources[i].collectives_missing =
				    analyze_trust_lost(rank_state_trust(in->rs[j]), src);
		}
}

/* "No hang" is never said of a trace that could not show one: no source
 * wrote enter records and none has CUPTI kernels. Last of the notes, so the
 * others keep their places. */
static void flight_note(struct analysis_result *r)
{
	if (r->trace.sources && !r->flight.sources_enter && !r->flight.sources_cupti)
		analyze_note(r, "no source records calls in flight (enter records, format 1.3) or CUPTI kernels: hangs "
				"cannot be seen in this trace");
}

/* ---- the whole ------------------------------------------------------------ */

/* The sections of a result with a headline rank h. Returns 0 or -ENOMEM. */
static int fill_diagnosis(const struct analyze_input *in, rank_state_t *h, const struct ranks_totals *tot,
			  struct analysis_result *r)
{
	const struct rank_steady *st = rank_state_steady(h);
	fill_headline(h, tot, r);
	if (fill_verdict(h, r) < 0)
		return -ENOMEM;
	if (r->verdict == ANALYSIS_DIAGNOSED)
		fill_microbatches(st, r);
	if (analyze_structure_fill(in->opt, in->ranks, rank_state_source(h), st, r) < 0)
		return -ENOMEM;
	if (r->verdict == ANALYSIS_BUCKETED)
		analyze_note(
		    r, "bucketed fetching: the gathers follow fetch buckets, not modules; the unit, reshard and wrap "
		       "analysis does not apply");
	for (uint32_t i = 0; i < r->ncomms; i++)
		if (r->comms[i].role == ANALYSIS_ROLE_PIPELINE) {
			analyze_note(
			    r,
			    "pipeline parallel (%d stages on rank %d's pipeline group): the units, P and the ledger "
			    "are this stage's",
			    r->comms[i].nranks, r->headline_rank);
			break;
		}
	if (analyze_groups_fill(in->opt, rank_state_source(h), rank_state_comms(h), st, r) < 0)
		return -ENOMEM;
	fill_exposure(in->opt, st, r);
	headline_notes(st, tot, r);
	return 0;
}

int analyze_finish_one(const struct analyze_input *in, struct analysis_result **out)
{
	*out = NULL;
	struct analysis_result *r = result_new(in->opt);
	if (!r)
		return -ENOMEM;
	struct ranks_totals tot;
	ranks_totals(in->ranks, &tot);
	rank_state_t *h = NULL;
	int rc = fill_trace(in, r);
	if (rc == 0) {
		h = headline_rank(in, r);
		rc = fill_ranks(in, &tot, r);
	}
	if (rc == 0) {
		analyze_trust_fill(in->rs, in->nrs, h, r);
		rank_state_t *view = fill_comms(in, h, r);
		if (!h)
			fill_no_headline(view, r);
		else
			rc = fill_diagnosis(in, h, &tot, r);
	}
	if (rc < 0) {
		analysis_result_free(r);
		return rc;
	}
	mfu_fill(in->opt, r);
	keep_notes(in, r);
	flight_note(r);
	*out = r;
	return 0;
}
