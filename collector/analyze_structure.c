/*
 * analyze_structure.c - the result's structure from the headline rank's
 * steady-state step: counts, units, reshard, gathers table, ledger, sizes;
 * bucketed fetching (see analyze_structure.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analyze_note.h"
#include "collector/analyze_structure.h"
#include "collector/ledger.h"
#include "collector/median.h"
#include "collector/reshard.h"
#include "collector/units.h"
#include "common/record.h"

void analyze_structure_counts(const struct tl_event *ev, const struct ev_info *info, size_t n,
			      struct analysis_step_counts *c)
{
	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < n; i++) {
		int op = ev[i].op;
		if (op == FSS_OP_ALLGATHER && info[i].step_gather) {
			c->step_allgathers++;
			continue;
		}
		if ((op == FSS_OP_ALLGATHER || op == FSS_OP_REDUCESCATTER) && !info[i].fsdp)
			op = -1;
		if (op == FSS_OP_ALLREDUCE && !info[i].in_steps)
			op = -1;
		switch (op) {
		case FSS_OP_ALLGATHER:
			c->allgathers++;
			c->allgather_calls += ev[i].calls;
			if (info[i].phase == ANALYSIS_PHASE_BACKWARD)
				c->backward_allgathers++;
			else
				c->forward_allgathers++;
			break;
		case FSS_OP_REDUCESCATTER:
			c->reduce_scatters++;
			c->reduce_scatter_calls += ev[i].calls;
			break;
		case FSS_OP_ALLREDUCE:
			c->allreduces++;
			c->allreduce_calls += ev[i].calls;
			break;
		default:
			c->other++;
			break;
		}
	}
}

/* Is gather event i the scales' half of a quantized fetch (ZeRO++ qwZ:
 * the 8-bit values, then right after them on the same communicator their
 * fp32 or fp16 scales, one per group of at least 8 values)? */
static int scales_of_fetch(const struct tl_event *ev, const struct ev_info *ti, size_t i)
{
	const struct tl_event *e = &ev[i];
	if (e->op != FSS_OP_ALLGATHER || (e->dtype != FSS_DTYPE_FLOAT32 && e->dtype != FSS_DTYPE_FLOAT16))
		return 0;
	for (size_t j = i; j-- > 0;) {
		if (!ti[j].fsdp || ev[j].comm_slot != e->comm_slot)
			continue;
		return ev[j].op == FSS_OP_ALLGATHER && (ev[j].dtype == FSS_DTYPE_INT8 || ev[j].dtype == FSS_DTYPE_UINT8) &&
		       e->count * 8 <= ev[j].count;
	}
	return 0;
}

/* min, median, max of the elements of the FSDP group's gather events. */
static int fsdp_gather_elements(const struct tl_event *ev, const struct ev_info *ti, size_t n, uint64_t *mn,
				uint64_t *med, uint64_t *mx)
{
	*mn = *med = *mx = 0;
	uint64_t *v = malloc((n ? n : 1) * sizeof *v);
	if (!v)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (ev[i].op == FSS_OP_ALLGATHER && ti[i].fsdp && !scales_of_fetch(ev, ti, i))
			v[k++] = ev[i].elements;
	if (k) {
		qsort(v, k, sizeof *v, median_u64_cmp);
		*mn = v[0];
		*med = v[(k - 1) / 2];
		*mx = v[k - 1];
	}
	free(v);
	return 0;
}

/* As phases.h sees an event. */
static struct phases_event phases_event_of(const struct tl_event *e)
{
	return (struct phases_event){e->elements, e->bytes, e->nranks, e->op, e->dtype, {0}};
}

int analyze_structure_buckets(const struct tl_event *ev, const struct ev_info *ti, size_t n, struct analysis_buckets *b)
{
	memset(b, 0, sizeof *b);
	size_t *ag = malloc((n ? n : 1) * sizeof *ag);
	uint8_t *taken = calloc(n ? n : 1, 1);
	if (!ag || !taken) {
		free(ag);
		free(taken);
		return -ENOMEM;
	}
	size_t nag = 0;
	for (size_t i = 0; i < n; i++)
		if (ev[i].op == FSS_OP_ALLGATHER && ti[i].fsdp)
			ag[nag++] = i;
	/* each reduce-scatter matched to a gather not matched yet that it can
	 * reduce, by bytes per parameter (phases_reduces): in FSDP every one
	 * finds its unit's gather */
	for (size_t i = 0; i < n; i++) {
		if (!ti[i].fsdp)
			continue;
		if (ev[i].op == FSS_OP_ALLGATHER && scales_of_fetch(ev, ti, i)) {
			b->calls_per_step += ev[i].calls; /* one fetch with its values */
			b->quantized_fetches_per_step++;
		} else if (ev[i].op == FSS_OP_ALLGATHER) {
			b->fetches_per_step++;
			b->regather_fetches_per_step += ev[i].role == ANALYSIS_ROLE_FSDP_REGATHER;
			b->calls_per_step += ev[i].calls;
			b->grouped_fetches += ev[i].calls > 1;
			if (ev[i].calls > b->max_calls_per_fetch)
				b->max_calls_per_fetch = ev[i].calls;
			b->gathered_elements_per_step += ev[i].elements;
		} else if (ev[i].op == FSS_OP_REDUCESCATTER) {
			b->reduce_buckets_per_step++;
			b->reduce_elements_per_step += ev[i].elements;
			if (ev[i].elements > b->reduce_elements_max)
				b->reduce_elements_max = ev[i].elements;
			struct phases_event red = phases_event_of(&ev[i]);
			for (size_t k = 0; k < nag; k++) {
				struct phases_event g = phases_event_of(&ev[ag[k]]);
				if (!taken[k] && phases_reduces(&g, &red)) {
					taken[k] = 1;
					b->reduce_sizes_matching++;
					break;
				}
			}
		}
	}
	free(taken);
	free(ag);
	return fsdp_gather_elements(ev, ti, n, &b->fetch_elements_min, &b->fetch_elements_median,
				    &b->fetch_elements_max);
}

/* The cycle whose units and re-gathers describe the job: the first
 * training cycle (not a forward-only pass) of the typical step; the first
 * cycle when the step reduces nothing (units without phases). */
static int32_t training_cycle(const struct phases_result *ph)
{
	if ((ph->status != PHASES_OK && ph->status != PHASES_NO_REDUCTION) || ph->cycles == 0)
		return -1;
	return ph->first_training >= 0 ? ph->first_training : 0;
}

/* The FSDP gathers of the steady step's training cycle, as the units and
 * the reshard analysis read them. */
struct cycle_gathers {
	int32_t cycle;			/* training_cycle: -1 none */
	size_t nf, nb;			/* its forward gathers; its backward ones, recomputation's aside */
	size_t *fidx;			/* [nf] forward unit -> event */
	uint64_t *keys;			/* [nf] its elements */
	struct reshard_gather *fg, *bg; /* [nf], [nb] */
	int32_t *bunit;			/* [nb] the forward unit each backward gather mirrors */
	uint64_t *params;		/* [nf] its parameters: the elements of the reduction matched to it (by
					   bytes per parameter: a float8 gather counts bytes), else its gathered
					   elements */
	uint64_t reduced;		/* elements the cycle reduces: its trained parameters */
	uint32_t reductions;		/* its ReduceScatters */
};

static void cycle_gathers_free(struct cycle_gathers *g)
{
	free(g->fidx);
	free(g->keys);
	free(g->fg);
	free(g->bg);
	free(g->bunit);
	free(g->params);
}

/* The cycle's gathers of the steady step; its recomputation's re-gathers
 * are counted in r->reshard. Returns 0 or -ENOMEM. */
static int cycle_gathers_new(const struct rank_steady *h, struct cycle_gathers *g, struct analysis_result *r)
{
	size_t n = h->nev;
	const struct tl_event *ev = h->tev;
	const struct ev_info *ti = h->tinfo;
	int32_t c0 = training_cycle(&h->phases);
	size_t nf = 0, nb = 0;
	memset(g, 0, sizeof *g);
	g->cycle = c0;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].op != FSS_OP_ALLGATHER || !ti[i].fsdp || ti[i].cycle != c0 || c0 < 0 || ti[i].unit < 0)
			continue; /* (unit -1: another model's forward pass) */
		if (ti[i].phase == ANALYSIS_PHASE_FORWARD)
			nf++;
		else if (!ti[i].recompute)
			nb++;
	}
	g->fidx = malloc((nf ? nf : 1) * sizeof *g->fidx);
	g->keys = malloc((nf ? nf : 1) * sizeof *g->keys);
	g->fg = calloc(nf ? nf : 1, sizeof *g->fg);
	g->bg = calloc(nb ? nb : 1, sizeof *g->bg);
	g->bunit = malloc((nb ? nb : 1) * sizeof *g->bunit);
	g->params = calloc(nf ? nf : 1, sizeof *g->params);
	if (!g->fidx || !g->keys || !g->fg || !g->bg || !g->bunit || !g->params)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].op != FSS_OP_ALLGATHER || !ti[i].fsdp || ti[i].cycle != c0 || c0 < 0 || ti[i].unit < 0)
			continue; /* (unit -1: another model's forward pass) */
		struct reshard_gather x = {ev[i].elements, ev[i].wire_bytes, ev[i].nranks, 0};
		if (ti[i].phase == ANALYSIS_PHASE_FORWARD) {
			g->fidx[g->nf] = i;
			g->keys[g->nf] = ev[i].elements * 32 + (ev[i].dtype & 31); /* equal keys: equal gathers */
			g->params[g->nf] = ev[i].elements;
			g->fg[g->nf++] = x;
		} else if (!ti[i].recompute) {
			g->bg[g->nb++] = x;
		} else {
			r->reshard.recompute_regathers++;
		}
	}
	/* the reductions of the first cycle that reduces (under accumulation
	 * without sync, the last): those matched to a unit size it */
	int32_t cur = -1, cs = -1;
	for (size_t i = 0; i < n && c0 >= 0; i++) {
		if (ev[i].op == FSS_OP_ALLGATHER && ti[i].cycle >= 0)
			cur = ti[i].cycle;
		if (ev[i].op != FSS_OP_REDUCESCATTER || !ti[i].fsdp)
			continue;
		if (cs < 0)
			cs = cur;
		if (cur != cs)
			continue;
		g->reductions++;
		g->reduced += ev[i].elements;
		if (ti[i].unit >= 0 && (size_t)ti[i].unit < g->nf)
			g->params[ti[i].unit] = ev[i].elements;
	}
	return 0;
}

/* The units: the repeat among the forward gathers of one training cycle
 * (--layers: of exactly that many copies), their parameters and names. */
static void fill_units(const struct analysis_options *o, const struct tl_source *src, const struct rank_steady *h,
		       const struct cycle_gathers *g, struct analysis_result *r, struct units_repeat *rep)
{
	const struct tl_event *ev = h->tev;
	const struct ev_info *ti = h->tinfo;
	size_t nf = g->nf;
	struct analysis_units *u = &r->units;
	struct units_repeat inferred;
	units_find_repeat(g->keys, nf, 0, &inferred);
	*rep = inferred;
	u->layers_match = -1;
	if (o->layers > 0) {
		u->layers_given = 1;
		u->layers_match = units_find_repeat(g->keys, nf, o->layers, rep) == 0;
		if (!u->layers_match)
			*rep = inferred;
	}
	u->inferred_repeating_units = inferred.copies;
	u->inferred_gathers_per_unit = inferred.motif;
	u->repeating_units = o->layers > 0 ? (uint32_t)o->layers : rep->copies;
	u->gathers_per_unit = rep->motif;
	u->motif_start = rep->start;
	u->leading_gathers = rep->start;
	u->trailing_gathers = (uint32_t)nf - rep->start - rep->covered;
	u->root_gathers = u->leading_gathers + u->trailing_gathers;
	u->forward_units = (uint32_t)nf;
	if (o->layers > 0 && !u->layers_match && nf)
		analyze_note(r,
			     "--layers %d: the forward gathers hold no repeat of exactly %d copies (they show %u x %u "
			     "gathers plus %u)",
			     o->layers, o->layers, inferred.copies, inferred.motif, (unsigned)(nf - inferred.covered));
	uint64_t largest = 0;
	size_t largest_f = 0;
	for (size_t k = 0; k < nf; k++) {
		u->total_params += g->params[k];
		if (g->params[k] > largest) {
			largest = g->params[k];
			largest_f = k;
		}
		if ((uint32_t)ev[g->fidx[k]].nranks > u->shard_ranks)
			u->shard_ranks = (uint32_t)ev[g->fidx[k]].nranks;
		if (k >= rep->start && k < rep->start + rep->motif)
			u->repeating_unit_params += g->params[k];
	}
	u->largest_unit_params = largest;
	uint64_t covered_params = u->repeating_unit_params * rep->copies;
	u->root_params = u->total_params > covered_params ? u->total_params - covered_params : 0;
	if (nf) {
		const char *n0 = timeline_name(src, ti[g->fidx[rep->start < nf ? rep->start : 0]].name);
		const char *n1 = rep->copies > 1 ? timeline_name(src, ti[g->fidx[rep->start + rep->motif]].name) : "";
		units_generalize_name(n0, n1, u->repeating_unit_name, sizeof u->repeating_unit_name);
		snprintf(u->largest_unit_name, sizeof u->largest_unit_name, "%s",
			 timeline_name(src, ti[g->fidx[largest_f]].name));
	}
}

/* A mixed policy over several blocks: the blocks decide. torchtitan keeps
 * the last block and the units around the blocks ([norm, output]) from
 * forward to backward, since backward needs them at once, and reshards the
 * rest. When all blocks but one agree, that is the policy and the others
 * are exceptions. (Blocks of one size cannot say which one was kept: the
 * matching re-gathers the last ones, so the table shows an earlier one
 * kept.) Returns 0 or -ENOMEM. */
static int reshard_blocks(const struct cycle_gathers *g, const struct units_repeat *rep, struct analysis_result *r)
{
	size_t nf = g->nf;
	uint8_t *state = malloc(nf ? nf : 1);
	if (!state)
		return -ENOMEM;
	reshard_unit_states(g->fg, nf, g->bg, g->nb, g->bunit, state);
	uint32_t count[3] = {0, 0, 0};
	for (uint32_t k = rep->start; k < rep->start + rep->covered; k++)
		count[state[k] < 3 ? state[k] : 0]++;
	for (uint8_t st = 0; st < 3; st++) {
		if (count[st] + rep->motif < rep->covered)
			continue;
		r->reshard.policy = st == RESHARD_STATE_KEPT	    ? ANALYSIS_RESHARD_FALSE
				    : st == RESHARD_STATE_RESHARDED ? ANALYSIS_RESHARD_TRUE
								    : ANALYSIS_RESHARD_GROUP;
		uint32_t blocks = (rep->covered - count[st] + rep->motif - 1) / rep->motif, around = 0;
		for (size_t k = r->reshard.root_resharded ? 0 : 1; k < nf; k++)
			around += (k < rep->start || k >= rep->start + rep->covered) && state[k] != st;
		r->reshard.exceptions = rep->covered - count[st] + around;
		char others[48] = "";
		if (around)
			snprintf(others, sizeof others, "%s%u unit%s around the blocks", blocks ? " and " : "", around,
				 around == 1 ? "" : "s");
		analyze_note(r,
			     "reshard_after_forward=%s for the blocks, not for %s%s (as torchtitan keeps what backward "
			     "needs at once)",
			     st == RESHARD_STATE_KEPT ? "False" : "True", blocks ? "one block" : "", others);
		break;
	}
	free(state);
	return 0;
}

/* reshard: the re-gathers of the training cycle (recomputation's left
 * aside), times the cycles of a step. Returns 0 or -ENOMEM. */
static int fill_reshard(const struct analysis_options *o, struct cycle_gathers *g, const struct units_repeat *rep,
			struct analysis_result *r)
{
	uint32_t recompute = r->reshard.recompute_regathers;
	reshard_detect(g->fg, g->nf, g->bg, g->nb, o->param_bytes, g->bunit, &r->reshard);
	r->reshard.recompute_regathers = recompute;
	if (r->reshard.policy == ANALYSIS_RESHARD_MIXED && rep->copies >= 3 && reshard_blocks(g, rep, r) < 0)
		return -ENOMEM;
	/* what one cycle shows, times the cycles of a step */
	uint32_t cycles = r->microbatches.per_step ? r->microbatches.per_step : 1;
	r->reshard.regather_bytes_per_step *= cycles;
	r->reshard.reshard_extra_gathers *= cycles;
	r->reshard.reshard_extra_wire_bytes *= cycles;
	if (r->reshard.policy == ANALYSIS_RESHARD_UNKNOWN && g->nf == 1)
		analyze_note(r, "one FSDP unit (the root, never resharded): reshard_after_forward cannot be told");
	return 0;
}

/* The gathers table: every FSDP gather of the step, every cycle; the
 * figures of the representative step. Returns 0 or -ENOMEM. */
static int fill_gathers(const ranks_t *ranks, const struct tl_source *src, const struct rank_steady *h,
			const struct cycle_gathers *cg, const struct units_repeat *rep, struct analysis_result *r)
{
	size_t n = h->nev, nag = 0, gi = 0;
	const struct tl_event *ev = h->tev;
	const struct ev_info *ti = h->tinfo;
	for (size_t i = 0; i < n; i++)
		nag += ev[i].op == FSS_OP_ALLGATHER && ti[i].fsdp;
	r->gathers = calloc(nag ? nag : 1, sizeof *r->gathers);
	if (!r->gathers)
		return -ENOMEM;
	int slot = analyze_steady_representative(&h->sample);
	for (size_t i = 0; i < n; i++) {
		if (ev[i].op != FSS_OP_ALLGATHER || !ti[i].fsdp)
			continue;
		struct analysis_gather *g = &r->gathers[gi];
		g->index = (uint32_t)gi;
		g->phase = ti[i].phase;
		g->dtype = ev[i].dtype;
		g->nranks = ev[i].nranks;
		g->calls = ev[i].calls;
		g->bytes = ev[i].bytes;
		g->elements = ev[i].elements;
		g->microbatch = ti[i].cycle;
		g->recompute = ti[i].recompute;
		int32_t unit = cg->cycle >= 0 && (uint32_t)ti[i].unit < cg->nf ? ti[i].unit : -1;
		g->unit = unit;
		g->repeat = g->motif_pos = -1;
		if (unit >= 0 && (uint32_t)unit >= rep->start && (uint32_t)unit < rep->start + rep->covered &&
		    rep->motif) {
			g->repeat = (int32_t)((unit - rep->start) / rep->motif);
			g->motif_pos = (int32_t)((unit - rep->start) % rep->motif);
		}
		if (unit >= 0)
			snprintf(g->name, sizeof g->name, "%s", timeline_name(src, ti[cg->fidx[unit]].name));
		if (h->detail && slot >= 0 && h->sample.gathers[(size_t)slot * n + i].timed) {
			const struct gather_fig *gf = &h->sample.gathers[(size_t)slot * n + i];
			g->duration_ns = gf->duration;
			g->exposed_ns = gf->exposed;
			g->hide_ns = gf->duration - gf->exposed;
			g->compute_wait_ns = gf->compute_wait;
			g->queued_ns = gf->queued;
			g->call_ns = gf->call;
			g->cause = gf->cause;
			g->start_offset_ns = gf->start_off;
			g->issue_offset_ns = gf->issue_off;
			g->compute_after_ns = gf->compute_after;
		}
		struct ranks_index_stats ri = ranks_index(ranks, (int32_t)gi);
		g->slowest_rank = ri.slowest_rank;
		g->skew_ns = ri.skew_median_ns;
		gi++;
	}
	r->ngathers = (uint32_t)gi;
	return 0;
}

/* The ledger: the model's parameters are the units' elements (each
 * gradient reduced once per synchronisation: the same elements) times the
 * tensor-parallel degree; bucketed jobs reduce every parameter once a
 * step. */
static void fill_ledger(const struct analysis_options *o, const struct rank_steady *h, const struct cycle_gathers *g,
			struct analysis_result *r)
{
	size_t n = h->nev;
	const struct tl_event *ev = h->tev;
	const struct ev_info *ti = h->tinfo;
	uint64_t params = r->units.total_params, largest = r->units.largest_unit_params;
	uint32_t ledger_units = (uint32_t)g->nf, shard_ranks = r->units.shard_ranks;
	if (r->verdict == ANALYSIS_BUCKETED) {
		params = r->buckets.reduce_elements_per_step;
		largest = r->buckets.fetch_elements_max;
		ledger_units = 0;
		uint32_t alltoalls = 0;
		for (size_t i = 0; i < n; i++) {
			if (ti[i].fsdp && (uint32_t)ev[i].nranks > shard_ranks)
				shard_ranks = (uint32_t)ev[i].nranks;
			alltoalls += ev[i].role == ANALYSIS_ROLE_ALL_TO_ALL;
		}
		/* ZeRO++ qgZ reduces the gradients by all-to-all: the
		 * ReduceScatters left are a fraction of them */
		if (alltoalls)
			analyze_note(r,
				     "P counts what the ReduceScatters reduce; %u all-to-alls a step may carry more "
				     "gradients (ZeRO++ qgZ): P can be short",
				     alltoalls);
	}
	struct ledger_input li;
	ledger_input_defaults(&li);
	li.params = (double)params * (r->tp_degree ? r->tp_degree : 1);
	li.ranks = shard_ranks * (r->tp_degree ? r->tp_degree : 1);
	li.units = ledger_units;
	li.largest_unit_params = (double)largest;
	li.prefetch = o->prefetch;
	li.param_bytes = o->param_bytes;
	li.grad_bytes = o->grad_bytes;
	li.master_bytes = o->master_bytes;
	li.optimizer_bytes = o->optimizer_bytes;
	li.gpu_mem_bytes = o->gpu_mem_bytes;
	li.params_with_padding = 1; /* gathered or reduced elements: each unit's flat shard, padded */
	if (r->verdict != ANALYSIS_BUCKETED && g->reductions && g->reduced < params)
		li.trainable_params = (double)g->reduced * (r->tp_degree ? r->tp_degree : 1);
	if (o->param_bytes_from_trace && g->nf && record_dtype_bytes(ev[g->fidx[0]].dtype))
		li.param_bytes = (double)record_dtype_bytes(ev[g->fidx[0]].dtype);
	ledger_compute(&li, &r->ledger);
	uint64_t wire = 0;
	for (size_t i = 0; i < n; i++)
		if (ti[i].in_steps)
			wire += ev[i].wire_bytes;
	r->ledger.wire_bytes_per_step = wire;
}

/* Sizes and dtypes of the FSDP group's traffic. Returns 0 or -ENOMEM. */
static int fill_sizes(const struct tl_event *ev, const struct ev_info *ti, size_t n, struct analysis_sizes *sz)
{
	uint64_t *v = malloc((n ? n : 1) * sizeof *v);
	if (!v)
		return -ENOMEM;
	for (int op = FSS_OP_ALLGATHER; op <= FSS_OP_ALLREDUCE; op++) {
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			int mine = op == FSS_OP_ALLREDUCE ? ti[i].in_steps : ti[i].fsdp;
			if (ev[i].op != op || !mine)
				continue;
			uint32_t bit = ev[i].dtype < 32 ? 1u << ev[i].dtype : 0;
			if (op == FSS_OP_ALLGATHER)
				sz->allgather_dtypes |= bit;
			else if (op == FSS_OP_REDUCESCATTER)
				sz->reduce_scatter_dtypes |= bit;
			else
				sz->allreduce_dtypes |= bit;
			v[k++] = ev[i].bytes;
		}
		if (!k || op == FSS_OP_ALLREDUCE)
			continue;
		qsort(v, k, sizeof *v, median_u64_cmp);
		int ag = op == FSS_OP_ALLGATHER;
		*(ag ? &sz->allgather_bytes_min : &sz->reduce_scatter_bytes_min) = v[0];
		*(ag ? &sz->allgather_bytes_median : &sz->reduce_scatter_bytes_median) = v[(k - 1) / 2];
		*(ag ? &sz->allgather_bytes_max : &sz->reduce_scatter_bytes_max) = v[k - 1];
	}
	free(v);
	return 0;
}

int analyze_structure_fill(const struct analysis_options *o, const ranks_t *ranks, const struct tl_source *src,
			   const struct rank_steady *h, struct analysis_result *r)
{
	struct cycle_gathers g;
	struct units_repeat rep;
	int rc = cycle_gathers_new(h, &g, r);
	if (rc == 0) {
		fill_units(o, src, h, &g, r, &rep);
		/* without reductions the re-gathers are a reading, not a policy */
		if (h->phases.status == PHASES_OK)
			rc = fill_reshard(o, &g, &rep, r);
	}
	if (rc == 0)
		rc = fill_gathers(ranks, src, h, &g, &rep, r);
	if (rc == 0) {
		fill_ledger(o, h, &g, r);
		rc = fill_sizes(h->tev, h->tinfo, h->nev, &r->sizes);
	}
	cycle_gathers_free(&g);
	return rc;
}
