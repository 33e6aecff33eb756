/*
 * analyze_groups.c - the result's FSDP groups (see analyze_groups.h).
 *
 * Each FSDP group is read as the primary is (docs/patterns.md, "Telling
 * communicators apart"): its gathers and reduce-scatters of the steady step
 * parsed on their own (phases.h), the repeat among the forward gathers of a
 * training cycle (units.h), its backward re-gathers against its forward
 * (reshard.h), and the figures of its gathers in the representative step.
 * The primary's entry repeats the top-level figures.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analyze_groups.h"
#include "collector/analyze_note.h"
#include "collector/comm_roles.h"
#include "collector/ledger.h"
#include "collector/phases.h"
#include "collector/reshard.h"
#include "collector/units.h"
#include "common/arith.h"
#include "common/record.h"

/* The communicators table's entry of source slot `slot`, -1 none. */
static int32_t comm_index(const struct analysis_result *r, const struct tl_source *src, int slot)
{
	if (slot < 0 || (size_t)slot >= src->ncomms)
		return -1;
	for (uint32_t i = 0; i < r->ncomms; i++)
		if (r->comms[i].id == src->comms[slot].id_hash && r->comms[i].dimension == src->comms[slot].dimension)
			return (int32_t)i;
	return -1;
}

/* Is event i of the steady step one of group g's? */
static int of_group(const struct rank_steady *h, size_t i, uint32_t g)
{
	const struct tl_event *e = &h->tev[i];
	return comm_roles_is_fsdp(e->role) && e->fsdp_group == g;
}

/* The first training cycle of group g (one with backward gathers or
 * reductions), 0 when none shows one. */
static int32_t training_cycle(const struct rank_steady *h, uint32_t g, const struct phases_result *ph)
{
	for (int32_t c = 0; c < (int32_t)ph->cycles; c++) {
		int32_t cur = -1;
		uint32_t seen = 0;
		for (size_t i = 0; i < h->nev; i++) {
			if (!of_group(h, i, g))
				continue;
			if (h->tev[i].op == FSS_OP_ALLGATHER)
				cur = h->tinfo[i].cycle;
			if (cur == c &&
			    (h->tev[i].op == FSS_OP_REDUCESCATTER || h->tinfo[i].phase == ANALYSIS_PHASE_BACKWARD))
				seen++;
		}
		if (seen)
			return c;
	}
	return 0;
}

/* Group g's units and reshard policy from its own gathers (a group other
 * than the primary). Returns 0 or -ENOMEM. */
static int group_structure(const struct analysis_options *o, const struct rank_steady *h, uint32_t g,
			   struct analysis_fsdp_group *x)
{
	size_t n = h->nev, npe = 0, nf = 0, nb = 0;
	struct phases_event *pe = calloc(n ? n : 1, sizeof *pe);
	struct phases_gather *pg = calloc(n ? n : 1, sizeof *pg);
	uint64_t *keys = malloc((n ? n : 1) * sizeof *keys);
	struct reshard_gather *fg = calloc(n ? n : 1, sizeof *fg), *bg = calloc(n ? n : 1, sizeof *bg);
	int32_t *bunit = malloc((n ? n : 1) * sizeof *bunit);
	int rc = -ENOMEM;
	if (!pe || !pg || !keys || !fg || !bg || !bunit)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct tl_event *e = &h->tev[i];
		if (of_group(h, i, g) && (e->op == FSS_OP_ALLGATHER || e->op == FSS_OP_REDUCESCATTER))
			pe[npe++] = (struct phases_event){e->elements, e->bytes, e->nranks, e->op, e->dtype, {0}};
	}
	struct phases_result ph;
	if (phases_parse(pe, npe, pg, &ph) < 0)
		goto out;
	rc = 0;
	if (ph.status != PHASES_OK)
		goto out;
	x->phase_source = ANALYSIS_PHASES_STRUCTURE;
	x->microbatches = ph.cycles - ph.forward_only;
	int32_t c0 = training_cycle(h, g, &ph);
	for (size_t i = 0; i < n; i++) {
		const struct tl_event *e = &h->tev[i];
		const struct ev_info *in = &h->tinfo[i];
		if (!of_group(h, i, g) || e->op != FSS_OP_ALLGATHER)
			continue;
		x->forward_allgathers += in->phase != ANALYSIS_PHASE_BACKWARD;
		x->backward_allgathers += in->phase == ANALYSIS_PHASE_BACKWARD;
		if (in->cycle != c0)
			continue;
		struct reshard_gather rg = {e->elements, e->wire_bytes, e->nranks, 0};
		if (in->phase != ANALYSIS_PHASE_BACKWARD) {
			keys[nf] = e->elements;
			fg[nf++] = rg;
			if (e->elements > x->largest_unit_params)
				x->largest_unit_params = e->elements;
			x->params += e->elements;
		} else if (!in->recompute) {
			bg[nb++] = rg;
		}
	}
	struct units_repeat rep;
	units_find_repeat(keys, nf, 0, &rep);
	x->forward_units = (uint32_t)nf;
	x->repeating_units = rep.copies;
	x->gathers_per_unit = rep.motif;
	reshard_detect(fg, nf, bg, nb, o->param_bytes, bunit, &x->reshard);
out:
	free(pe);
	free(pg);
	free(keys);
	free(fg);
	free(bg);
	free(bunit);
	return rc;
}

/* Group g's traffic in the steady step, and the figures of its gathers in
 * the representative step (the primary's: the step figures, as the
 * exposure section reads them). */
static void group_traffic(const struct rank_steady *h, uint32_t g, struct analysis_fsdp_group *x)
{
	for (size_t i = 0; i < h->nev; i++) {
		if (!of_group(h, i, g))
			continue;
		if (h->tev[i].op == FSS_OP_ALLGATHER)
			x->gathered_bytes_per_step += h->tev[i].wire_bytes;
		if (g == 0) /* the counts are the top-level ones (primary_entry) */
			continue;
		if (h->tev[i].op == FSS_OP_ALLGATHER) {
			x->allgathers++;
			x->allgather_calls += h->tev[i].calls;
		} else if (h->tev[i].op == FSS_OP_REDUCESCATTER) {
			x->reduce_scatters++;
		}
	}
	int slot = analyze_steady_representative(&h->sample);
	if (slot < 0 || h->exposure_source == ANALYSIS_EXPOSURE_NONE)
		return;
	if (g == 0) {
		const uint64_t *f = h->sample.fig[slot];
		x->exposure_measured = 1;
		x->allgather_ns_per_step = f[FIG_AG];
		x->exposed_allgather_ns_per_step = f[FIG_AG_EXPOSED];
		x->compute_wait_ns_per_step = f[FIG_AG_WAIT];
		x->exposed_gathers = (uint32_t)f[FIG_EXPOSED_GATHERS];
		return;
	}
	if (!h->detail)
		return;
	x->exposure_measured = 1;
	for (size_t i = 0; i < h->nev; i++) {
		const struct gather_fig *gf = &h->sample.gathers[(size_t)slot * h->nev + i];
		if (!of_group(h, i, g) || h->tev[i].op != FSS_OP_ALLGATHER || !gf->timed)
			continue;
		x->allgather_ns_per_step += gf->duration;
		x->exposed_allgather_ns_per_step += gf->exposed;
		x->compute_wait_ns_per_step += gf->compute_wait;
		x->exposed_gathers += gf->cause != ANALYSIS_CAUSE_HIDDEN;
	}
}

/* The degree a group's gathered elements are multiplied by to count the
 * model's parameters: an expert group's ranks each hold their share of the
 * experts, one of as many as the expert-parallel communicator has ranks. */
static uint32_t group_degree(const struct analysis_result *r)
{
	for (uint32_t i = 0; i < r->ncomms; i++)
		if (r->comms[i].role == ANALYSIS_ROLE_EXPERT && r->comms[i].nranks > 1)
			return (uint32_t)r->comms[i].nranks;
	return 1;
}

/* Group x's share of the ledger (another group than the primary). */
static void group_ledger(const struct analysis_options *o, const struct analysis_result *r,
			 struct analysis_fsdp_group *x)
{
	struct ledger_input li;
	struct analysis_ledger share;
	x->degree = group_degree(r);
	x->params *= x->degree;
	x->ledger_ranks = (uint32_t)(x->nranks > 0 ? x->nranks : 1) * x->degree;
	ledger_input_defaults(&li);
	li.params = (double)x->params;
	li.ranks = x->ledger_ranks;
	li.units = x->forward_units;
	li.largest_unit_params = (double)x->largest_unit_params;
	li.prefetch = o->prefetch;
	li.param_bytes = r->ledger.param_bytes;
	li.grad_bytes = o->grad_bytes;
	li.master_bytes = o->master_bytes;
	li.optimizer_bytes = o->optimizer_bytes;
	ledger_compute(&li, &share);
	x->persistent_bytes_per_rank = share.persistent_bytes_per_rank;
	x->transient_bytes_per_rank = share.transient_bytes_per_rank;
}

/* The job's ledger: the primary's plus the other groups' shares. Each block
 * gathers its part on every group at once, so the largest units add up as
 * the transient rows do. */
static void ledger_add(struct analysis_ledger *l, const struct analysis_fsdp_group *x)
{
	double pb = l->param_bytes, per = l->param_bytes + l->grad_bytes + l->master_bytes + l->optimizer_bytes;
	l->params = u64_add_sat(l->params, x->params);
	l->largest_unit_params = u64_add_sat(l->largest_unit_params, x->largest_unit_params);
	l->units += x->forward_units;
	l->persistent_bytes_per_rank = u64_add_sat(l->persistent_bytes_per_rank, x->persistent_bytes_per_rank);
	l->transient_bytes_per_rank = u64_add_sat(l->transient_bytes_per_rank, x->transient_bytes_per_rank);
	l->peak_state_bytes_per_rank = u64_add_sat(l->persistent_bytes_per_rank, l->transient_bytes_per_rank);
	if (l->gpu_mem_bytes) /* both under 2^63: LEDGER_GPU_MEM_MAX, and the peak saturated below */
		l->headroom_bytes =
		    (int64_t)l->gpu_mem_bytes - (int64_t)(l->peak_state_bytes_per_rank > (uint64_t)INT64_MAX
							      ? (uint64_t)INT64_MAX
							      : l->peak_state_bytes_per_rank);
	l->model_wire_bytes_per_step =
	    u64_add_sat(l->model_wire_bytes_per_step, (uint64_t)(3 * pb * (double)x->params));
	l->ddp_wire_bytes_per_step = u64_add_sat(l->ddp_wire_bytes_per_step, (uint64_t)(2 * pb * (double)x->params));
	l->ddp_persistent_bytes_per_rank =
	    u64_add_sat(l->ddp_persistent_bytes_per_rank, (uint64_t)(per * (double)x->params));
	l->whole_model_transient_bytes =
	    u64_add_sat(l->whole_model_transient_bytes, (uint64_t)(pb * (double)x->params));
}

/* The primary's entry: the top-level figures. */
static void primary_entry(const struct analysis_result *r, struct analysis_fsdp_group *x)
{
	x->allgathers = r->per_step.allgathers;
	x->allgather_calls = r->per_step.allgather_calls;
	x->forward_allgathers = r->per_step.forward_allgathers;
	x->backward_allgathers = r->per_step.backward_allgathers;
	x->reduce_scatters = r->per_step.reduce_scatters;
	x->phase_source = r->microbatches.phase_source;
	x->microbatches = r->microbatches.per_step;
	x->forward_units = r->units.forward_units;
	x->repeating_units = r->units.repeating_units;
	x->gathers_per_unit = r->units.gathers_per_unit;
	x->reshard = r->reshard;
	x->degree = r->tp_degree ? r->tp_degree : 1;
	x->params = r->ledger.params;
	x->ledger_ranks = r->ledger.ranks;
	x->largest_unit_params = r->ledger.largest_unit_params;
	x->persistent_bytes_per_rank = r->ledger.persistent_bytes_per_rank;
	x->transient_bytes_per_rank = r->ledger.transient_bytes_per_rank;
}

int analyze_groups_fill(const struct analysis_options *o, const struct tl_source *src, const struct rank_comms *comms,
			const struct rank_steady *h, struct analysis_result *r)
{
	const struct comm_roles *roles = &comms->roles;
	r->nfsdp_groups = 0;
	if (!comms->decided || roles->fsdp < 0 || roles->ngroups == 0)
		return 0;
	for (uint32_t g = 0; g < roles->ngroups && g < ANALYSIS_FSDP_GROUPS_MAX; g++) {
		struct analysis_fsdp_group *x = &r->fsdp_groups[r->nfsdp_groups++];
		int slot = roles->groups[g];
		memset(x, 0, sizeof *x);
		x->comm = comm_index(r, src, slot);
		x->regather_comm = -1;
		x->nranks = src->comms[slot].nranks;
		for (size_t c = 0; c < roles->ncomms && x->regather_comm < 0; c++)
			if (roles->role[c] == ANALYSIS_ROLE_FSDP_REGATHER &&
			    comm_roles_group_of(roles, (uint32_t)c) == g)
				x->regather_comm = comm_index(r, src, (int)c);
		if (g == 0) {
			primary_entry(r, x);
			group_traffic(h, 0, x);
			continue;
		}
		if (group_structure(o, h, g, x) < 0)
			return -ENOMEM;
		group_traffic(h, g, x);
		group_ledger(o, r, x);
	}
	if (r->nfsdp_groups > 1) {
		for (uint32_t g = 1; g < r->nfsdp_groups; g++)
			ledger_add(&r->ledger, &r->fsdp_groups[g]);
		analyze_note(r,
			     "%u FSDP groups (fsdp_groups): per_step, units, reshard and exposure are the primary's "
			     "(the most gathered bytes); the ledger adds up every group's share",
			     r->nfsdp_groups);
	}
	if (roles->ambiguity[0])
		analyze_note(r, "%s", roles->ambiguity);
	if (roles->shared[0])
		analyze_note(r, "%s", roles->shared);
	return 0;
}
