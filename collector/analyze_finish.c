/*
 * analyze_finish.c - the result of the analysis: per-rank figures, spread,
 * the verdict (or why there is none), and the sections the other files fill.
 */
#include "collector/analyze_internal.h"

/* Every process of the trace as the per-source layer saw it: how it ended. */
static int result_sources(const analyzer_t *a, struct analysis_result *r)
{
	size_t n = 0;
	int rc = sources_summarize(timeline_layer(a->tl), &r->sources, &n);
	r->nsources = (uint32_t)n;
	return rc;
}

static int result_build(analyzer_t *a, struct analysis_result **out);

/* What attach inferred of its sources' communicators; nothing without
 * attached sources. */
static int result_attach(const analyzer_t *a, struct analysis_result *r)
{
	const sources_t *layer = timeline_layer(a->tl);
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
			};
			if (!m->observed)
				continue;
			x->comms_observed++;
			for (int b = 0; b < ANALYSIS_INFER_KINDS; b++)
				x->inferred[b] += (m->inferred >> b) & 1u;
		}
	}
	r->trace.sources_attached = x->sources;
	return 0;
}

/* The calls in flight, measured to the live session's clock in a snapshot
 * (analyzer_set_now), to the trace's own end when finishing. */
int analyze_fill_flight(const analyzer_t *a, struct analysis_result *r)
{
	uint64_t now = a->finished ? 0 : a->now_realtime_ns;

	return flight_fill(a->flight, a->opt.hang_timeout_ns, now, &r->flight);
}

/* "No hang" is never said of a trace that could not show one: no source
 * wrote enter records and none has CUPTI kernels. Last of the notes, so the
 * others keep their places. */
void analyze_flight_note(struct analysis_result *r)
{
	if (r->trace.sources && !r->flight.sources_enter && !r->flight.sources_cupti)
		analyze_note(r, "no source records calls in flight (enter records, format 1.3) or CUPTI kernels: hangs "
				"cannot be seen in this trace");
}

int analyzer_finish(analyzer_t *a, struct analysis_result **out)
{
	*out = NULL;
	if (a->finished)
		return -EINVAL;
	a->finished = 1;
	int rc = timeline_flush_groups(a->tl);
	/* sources that have records but no rank state yet */
	for (size_t i = 0; rc == 0 && i < timeline_sources(a->tl); i++)
		if (!analyze_state_for(a, timeline_source(a->tl, i)))
			rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < a->nrs; i++) {
		if (!a->rs[i]->has_end && a->rs[i]->cutter)
			steps_cutter_set_open_end(a->rs[i]->cutter);
		rc = analyze_service(a, a->rs[i], 1);
	}
	if (rc < 0)
		return rc;
	return result_build(a, out);
}

int analyzer_snapshot(analyzer_t *a, struct analysis_result **out)
{
	*out = NULL;
	if (a->finished)
		return -EINVAL;
	/* Read-only: a source with no rank state yet (no collective, drops or
	 * process_end record so far) adds nothing to the figures; creating its
	 * state here could change the order the ranks are looked at in. */
	return result_build(a, out);
}

/* The result of what the rank states hold now; reads them, changes nothing
 * the analysis goes on with. Its cost follows the state (ranks, the
 * steady-state step's events, communicators, sources), not the trace. */
static int result_build(analyzer_t *a, struct analysis_result **out)
{
	struct analysis_result *r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	r->schema = ANALYSIS_SCHEMA;
	r->options = a->opt;
	r->exposure.exposed_fraction = ANALYSIS_UNKNOWN;
	r->breakdown.mfu = ANALYSIS_UNKNOWN;
	r->spread.slowest_rank = -1;
	r->spread.slowest_rank_fraction = ANALYSIS_UNKNOWN;
	r->units.layers_match = -1;
	r->headline_rank = -1;

	struct timeline_stats ts;
	timeline_stats(a->tl, &ts);
	r->trace.records = ts.records;
	r->trace.collectives = ts.collectives;
	r->trace.gpu_intervals = ts.gpu_intervals;
	r->trace.nvtx_ranges = ts.nvtx_ranges;
	r->trace.sources = (uint32_t)timeline_sources(a->tl);
	r->trace.truncated = a->truncated;
	r->trace.has_cupti = ts.gpu_intervals > 0;
	r->trace.has_nvtx = ts.nvtx_ranges > 0;
	if (result_sources(a, r) < 0 || result_attach(a, r) < 0 || analyze_fill_flight(a, r) < 0) {
		analysis_result_free(r);
		return -ENOMEM;
	}

	/* ranks with collectives */
	size_t nranked = 0;
	for (size_t i = 0; i < a->nrs; i++) {
		r->trace.dropped_records = u64_add_sat(r->trace.dropped_records, a->rs[i]->src->dropped);
		if (a->rs[i]->src->collectives)
			nranked++;
		if (a->rs[i]->src->world_size > r->world_size)
			r->world_size = a->rs[i]->src->world_size;
	}
	r->ranks = (uint32_t)nranked;
	r->per_rank = calloc(nranked ? nranked : 1, sizeof *r->per_rank);
	if (!r->per_rank) {
		analysis_result_free(r);
		return -ENOMEM;
	}

	/* the headline rank: the one asked for, else the lowest with steps */
	struct rank_state *h = NULL;
	for (size_t i = 0; i < a->nrs; i++) {
		struct rank_state *rs = a->rs[i];
		if (!rs->src->collectives)
			continue;
		if (a->opt.rank >= 0 && rs->src->rank == a->opt.rank && rs->analyzed) {
			h = rs;
			break;
		}
		if (rs->analyzed && (!h || rs->src->rank < h->src->rank))
			h = rs;
	}
	if (h && a->opt.rank >= 0 && h->src->rank != a->opt.rank)
		analyze_note(r, "rank %d has no analysed step: figures are rank %d's", a->opt.rank, h->src->rank);

	size_t k = 0;
	struct ranks_totals tot;
	ranks_totals(a->ranks, &tot);
	uint64_t step_min = UINT64_MAX, step_max = 0, exp_min = UINT64_MAX, exp_max = 0;
	uint64_t best_last = 0;
	for (size_t i = 0; i < a->nrs; i++) {
		struct rank_state *rs = a->rs[i];
		if (!rs->src->collectives)
			continue;
		struct analysis_rank *e = &r->per_rank[k++];
		e->rank = rs->src->rank;
		e->source = rs->src->id;
		e->pid = rs->src->pid;
		e->steps_analyzed = rs->analyzed;
		if (rs->tev)
			analyze_count_events(rs->tev, rs->tinfo, rs->nev, &e->per_step);
		e->step_ns = median_get(&rs->fig[FIG_STEP]);
		int rep = analyze_representative_slot(&rs->sample);
		if (rep >= 0) { /* the rank's representative step, as the exposure section */
			e->allgather_ns = rs->sample.fig[rep][FIG_AG];
			e->exposed_allgather_ns = rs->sample.fig[rep][FIG_AG_EXPOSED];
			e->compute_wait_ns = rs->sample.fig[rep][FIG_AG_WAIT];
		}
		e->compute_ns = median_get(&rs->fig[FIG_COMPUTE]);
		struct ranks_rank_stats st = ranks_rank(a->ranks, rs->src->rank);
		e->last_arrivals = (uint32_t)st.last_arrivals;
		e->matched_collectives = (uint32_t)st.matched;
		uint32_t steps = rs->analyzed + rs->warmup + rs->irregular;
		e->late_ns_per_step = steps ? st.late_ns / steps : st.late_ns;
		e->steps_seen = steps;
		e->dropped_records = rs->src->dropped;
		e->steps_lost = rs->steps_lost;
		e->steps_cut = analyze_rank_detached(rs) ? 0 : rs->steps_cut;
		e->collectives_lost = analyze_source_lost(rs);
		e->cut = analyze_rank_stopped(rs);
		if (rs->analyzed) {
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
		if (nranked > 1 && st.last_arrivals > best_last) {
			best_last = st.last_arrivals;
			r->spread.slowest_rank = e->rank;
		}
	}
	r->nper_rank = (uint32_t)k;
	qsort(r->per_rank, k, sizeof *r->per_rank, analyze_rank_entry_cmp);
	if (r->spread.ranks) {
		r->spread.step_ns_min = step_min;
		r->spread.step_ns_max = step_max;
		r->spread.exposed_ns_min = exp_min;
		r->spread.exposed_ns_max = exp_max;
	}
	r->spread.max_skew_ns = tot.max_skew_ns;
	if (tot.matched && r->spread.slowest_rank >= 0)
		r->spread.slowest_rank_fraction = (double)best_last / (double)tot.matched;
	analyze_fill_trust(a, h, r);

	/* the communicators, from the headline rank (or, without steps, the
	 * lowest rank that has collectives) */
	struct rank_state *view = h;
	for (size_t i = 0; !view && i < a->nrs; i++)
		if (a->rs[i]->src->collectives && (!view || a->rs[i]->src->rank < view->src->rank))
			view = a->rs[i];
	r->fsdp_comm = -1;
	r->tp_degree = 1;
	if (view)
		analyze_fill_comms(a, view, r);
	if (a->opt.fsdp_comm && view && view->roles_decided)
		r->fsdp_comm_match = view->roles.given ? 1 : view->roles.override_ambiguous ? -1 : 0;

	if (!h) {
		r->verdict = ANALYSIS_UNDECIDED;
		if (!nranked) {
			r->undecided_reason = ANALYSIS_UNDECIDED_NO_COLLECTIVES;
			analyze_undecided(r, "the trace holds no collective");
		} else if (view && view->roles_decided && view->roles.fsdp < 0) {
			r->undecided_reason = ANALYSIS_UNDECIDED_NO_FSDP;
			analyze_undecided(r, "no communicator carries both AllGathers and ReduceScatters: no FSDP shard group "
				     "(not a sharded data-parallel job, or --fsdp-comm names none)");
		} else if (r->trust.steps_lost_all || r->trust.steps_cut_all) {
			r->undecided_reason = ANALYSIS_UNDECIDED_INCOMPLETE;
			char lost[96] = "", cut[64] = "";
			if (r->trust.steps_lost_all)
				snprintf(lost, sizeof lost, "%u lost collectives (%llu of %llu missing)",
					 r->trust.steps_lost_all, (unsigned long long)r->trust.collectives_lost,
					 (unsigned long long)(r->trace.collectives + r->trust.collectives_lost));
			if (r->trust.steps_cut_all)
				snprintf(cut, sizeof cut, "%u %s in progress where the records stop",
					 r->trust.steps_cut_all, r->trust.steps_cut_all == 1 ? "was" : "were");
			analyze_undecided(r, "no step the trace vouches for: of the steps found, %s%s%s", lost,
				  lost[0] && cut[0] ? " and " : "", cut);
		} else {
			r->undecided_reason = ANALYSIS_UNDECIDED_NO_STEP;
			analyze_undecided(r, "no repeating training step among %llu collectives (too few steps recorded, or "
				     "none alike)",
				  (unsigned long long)r->trace.collectives);
		}
		analyze_keep_finish(a, r);
		analyze_flight_note(r);
		*out = r;
		return 0;
	}
	r->headline_rank = h->src->rank;
	r->step_detection = h->mode == MODE_NVTX ? ANALYSIS_STEPS_NVTX : ANALYSIS_STEPS_PERIOD;
	r->steps_analyzed = h->analyzed;
	r->warmup_steps = h->warmup;
	r->irregular_steps = h->irregular;
	r->steps_seen = h->analyzed + h->warmup + h->irregular + h->steps_lost + h->steps_cut;
	r->step_period = (uint32_t)h->nev;
	r->step_ns = median_get(&h->fig[FIG_STEP]);
	if (h->mode == MODE_NVTX)
		snprintf(r->step_range_name, sizeof r->step_range_name, "%s", h->src->step_name);
	analyze_count_events(h->tev, h->tinfo, h->nev, &r->per_step);
	uint32_t steps = r->steps_seen ? r->steps_seen : 1;
	r->spread.skew_ns_per_step = tot.skew_ns / steps;

	/* the verdict: phases from the structure, bucketed fetching, or why not */
	const struct phases_result *ph = &h->phases;
	if (h->roles.fsdp < 0) {
		r->verdict = ANALYSIS_UNDECIDED;
		r->undecided_reason = ANALYSIS_UNDECIDED_NO_FSDP;
		analyze_undecided(r, "no communicator carries both AllGathers and ReduceScatters: no FSDP shard group (not a "
			     "sharded data-parallel job, or --fsdp-comm names none)");
	} else if (ph->status == PHASES_OK) {
		r->verdict = ANALYSIS_DIAGNOSED;
	} else if (ph->status == PHASES_NO_MIRROR) {
		if (analyze_fill_buckets(h->tev, h->tinfo, h->nev, &r->buckets) < 0) {
			analysis_result_free(r);
			return -ENOMEM;
		}
		const struct analysis_buckets *bk = &r->buckets;
		/* reduce buckets: reduce-scatters without a gather of their size
		 * (FSDP reduces each unit's gathered buffer: every one has one) */
		if (bk->reduce_buckets_per_step && bk->reduce_sizes_matching < bk->reduce_buckets_per_step) {
			r->verdict = ANALYSIS_BUCKETED;
		} else {
			r->verdict = ANALYSIS_UNDECIDED;
			r->undecided_reason = ANALYSIS_UNDECIDED_PATTERN;
			analyze_undecided(r, "the FSDP group's %u ReduceScatters per step (each of a gather's size) do not mirror "
				     "its %u gathers as FSDP units would: a pattern the analysis does not know",
				  bk->reduce_buckets_per_step, bk->fetches_per_step);
		}
	} else {
		r->verdict = ANALYSIS_UNDECIDED;
		r->undecided_reason = ANALYSIS_UNDECIDED_NO_REDUCTION;
		analyze_undecided(r, "the steps reduce no gradient on the FSDP group (no ReduceScatter): forward and "
			     "backward gathers cannot be told apart");
	}
	struct analysis_microbatches *mb = &r->microbatches;
	if (r->verdict == ANALYSIS_DIAGNOSED) {
		mb->phase_source = ANALYSIS_PHASES_STRUCTURE;
		mb->per_step = ph->cycles - ph->forward_only;
		mb->sync = ph->sync_cycles;
		mb->forward_only = ph->forward_only;
		mb->forward_allgathers = ph->forward_allgathers;
		mb->backward_allgathers = ph->backward_allgathers;
		mb->recompute_allgathers = ph->recompute_allgathers;
		/* cycles are told from steps when a step holds several, when NVTX
		 * marks steps, or when something happens once a step besides the
		 * FSDP group's own traffic (a loss or gradient-norm all-reduce) */
		int marker = 0;
		for (size_t i = 0; i < h->nev && !marker; i++)
			marker = h->tinfo[i].in_steps &&
				 !(h->tinfo[i].fsdp && (h->tev[i].op == FSS_OP_ALLGATHER ||
							h->tev[i].op == FSS_OP_REDUCESCATTER)) &&
				 h->tev[i].role != ANALYSIS_ROLE_REPLICATE;
		mb->told = mb->per_step > 1 || r->step_detection == ANALYSIS_STEPS_NVTX || marker;
		if (!mb->told)
			analyze_note(r, "each step is one forward / backward with its ReduceScatters and nothing marks an "
				"optimizer step: with gradient accumulation these steps are micro-batches (NVTX "
				"ProfilerStep# ranges would tell)");
		if (mb->forward_only)
			analyze_note(r, "%u forward-only pass%s inside each step (gathers, no backward, no reduction): not "
				"counted as micro-batches",
			     mb->forward_only, mb->forward_only == 1 ? "" : "es");
	}

	if (analyze_fill_structure(a, h, r) < 0) {
		analysis_result_free(r);
		return -ENOMEM;
	}
	if (r->verdict == ANALYSIS_BUCKETED)
		analyze_note(r, "bucketed fetching: the gathers follow fetch buckets, not modules; the unit, reshard and wrap "
			"analysis does not apply");
	for (uint32_t i = 0; i < r->ncomms; i++)
		if (r->comms[i].role == ANALYSIS_ROLE_PIPELINE) {
			analyze_note(r, "pipeline parallel (%d stages on rank %d's pipeline group): the units, P and the ledger "
				"are this stage's",
			     r->comms[i].nranks, r->headline_rank);
			break;
		}
	analyze_fill_exposure(h, r);
	/* the breakdown of the same step, so that its exposed communication
	 * holds the AllGathers' */
	int rep = analyze_representative_slot(&h->sample);
	const uint64_t *rf = rep >= 0 ? h->sample.fig[rep] : h->sample.fig[0];
	breakdown_compute(rep >= 0 ? rf[FIG_STEP] : r->step_ns, rf[FIG_COMPUTE], rf[FIG_COMM_EXPOSED], r->ledger.params,
			  r->world_size > 0 ? (uint32_t)r->world_size : r->ranks, &a->opt, &r->breakdown);
	if (r->exposure.source == ANALYSIS_EXPOSURE_HOST)
		analyze_note(r, "exposure from host timing: exact where collective calls block until done (the CPU "
			"stand-in NCCL); with real NCCL use CUPTI");
	if (r->exposure.source == ANALYSIS_EXPOSURE_NONE && r->trace.sources_attached)
		analyze_note(r, "%s", analysis_attach_exposure_why());
	else if (r->exposure.source == ANALYSIS_EXPOSURE_NONE)
		analyze_note(r, "no compute intervals (no CUPTI kernels, no NVTX compute ranges): exposure not measured");
	if (!h->detail)
		analyze_note(r, "per-gather figures were kept for another rank: the gather table has no times");
	if (r->trace.truncated)
		analyze_note(r, "the trace is incomplete (cut short, not closed by its writer, or with damaged stretches "
			"skipped): analysed what could be read");
	if (tot.unmatched && r->ranks > 1)
		analyze_note(r, "%llu collectives were not matched across ranks", (unsigned long long)tot.unmatched);
	analyze_keep_finish(a, r);
	analyze_flight_note(r);
	*out = r;
	return 0;
}
