/*
 * report_json.c - the diagnosis as one JSON document, schema
 * "fsdpscope.report/2" (docs/report-schema.md, docs/report-schema.json).
 *
 * Keys are only ever added within a schema version; a removal or a change
 * of meaning is a new version. Unknown values are null, never a sentinel
 * number: a ratio that could not be computed, a rank that does not exist.
 */
#include "cli/diagnosis.h"
#include "cli/report_mfu.h"
#include "cli/report_nodes.h"
#include "cli/report_worlds.h"
#include "collector/whatif_print.h"
#include "common/json.h"
#include "common/json_writer.h"
#include "rules/flight_text.h"

#include "common/record.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* jw_num - a double; null when not finite (JSON has no NaN). */
static void jw_num(struct jw *w, const char *key, double v)
{
	jw_sep(w, key);
	if (isfinite(v))
		jw_rawf(w, "%.10g", v);
	else
		jw_raw(w, "null", 4);
}

/* jw_ratio - a ratio the analysis may not know (negative): null then. */
static void jw_ratio(struct jw *w, const char *key, double v)
{
	if (v < 0)
		jw_null(w, key);
	else
		jw_num(w, key, v);
}

/* jw_name - a name field that is "" when unknown: null then. */
static void jw_name(struct jw *w, const char *key, const char *s)
{
	jw_str(w, key, s && s[0] ? s : NULL);
}

static void jw_dtypes(struct jw *w, const char *key, uint32_t bits)
{
	jw_open(w, key, '[');
	for (unsigned d = 0; d < FSS_DTYPE_MAX; d++)
		if (bits & (1u << d))
			jw_str(w, NULL, record_dtype_name((uint8_t)d));
	jw_close(w, ']');
}

/* Forward and backward gathers: numbers when the phases are known, else
 * null (not told). */
static void write_phase_gathers(struct jw *w, uint64_t forward, uint64_t backward, int phases_known)
{
	if (phases_known) {
		jw_u64(w, "forward_allgathers", forward);
		jw_u64(w, "backward_allgathers", backward);
	} else {
		jw_null(w, "forward_allgathers");
		jw_null(w, "backward_allgathers");
	}
}

/* phases_known: forward / backward are numbers, else null (not told). */
static void write_counts(struct jw *w, const char *key, const struct analysis_step_counts *s, int phases_known)
{
	jw_open(w, key, '{');
	jw_u64(w, "allgathers", s->allgathers);
	write_phase_gathers(w, s->forward_allgathers, s->backward_allgathers, phases_known);
	jw_u64(w, "allgather_calls", s->allgather_calls);
	jw_u64(w, "reduce_scatters", s->reduce_scatters);
	jw_u64(w, "reduce_scatter_calls", s->reduce_scatter_calls);
	jw_u64(w, "allreduces", s->allreduces);
	jw_u64(w, "allreduce_calls", s->allreduce_calls);
	jw_u64(w, "other", s->other);
	jw_u64(w, "step_allgathers", s->step_allgathers);
	jw_close(w, '}');
}

static void write_units(struct jw *w, const struct analysis_units *u, int decided)
{
	jw_open(w, "units", '{');
	jw_bool(w, "decided", decided);
	jw_u64(w, "repeating_units", u->repeating_units);
	jw_u64(w, "gathers_per_unit", u->gathers_per_unit);
	jw_u64(w, "root_gathers", u->root_gathers);
	jw_u64(w, "leading_gathers", u->leading_gathers);
	jw_u64(w, "trailing_gathers", u->trailing_gathers);
	jw_u64(w, "motif_start", u->motif_start);
	jw_u64(w, "forward_units", u->forward_units);
	jw_bool(w, "layers_given", u->layers_given);
	jw_u64(w, "largest_unit_params", u->largest_unit_params);
	jw_u64(w, "total_params", u->total_params);
	jw_u64(w, "repeating_unit_params", u->repeating_unit_params);
	jw_u64(w, "root_params", u->root_params);
	jw_u64(w, "shard_ranks", u->shard_ranks);
	jw_name(w, "repeating_unit_name", u->repeating_unit_name);
	jw_name(w, "largest_unit_name", u->largest_unit_name);
	jw_close(w, '}');
}

static void write_reshard(struct jw *w, const struct analysis_reshard_info *r)
{
	jw_open(w, "reshard", '{');
	jw_u64(w, "units", r->units);
	jw_u64(w, "resharded_units", r->resharded_units);
	jw_u64(w, "retained_units", r->retained_units);
	jw_u64(w, "group_units", r->group_units);
	if (r->policy == ANALYSIS_RESHARD_GROUP || r->group_units)
		jw_u64(w, "group_size", r->group_size);
	else
		jw_null(w, "group_size");
	jw_bool(w, "root_resharded", r->root_resharded);
	jw_u64(w, "unmatched_backward", r->unmatched_backward);
	jw_u64(w, "regather_bytes_per_step", r->regather_bytes_per_step);
	jw_u64(w, "retain_extra_bytes", r->retain_extra_bytes);
	jw_u64(w, "reshard_extra_gathers", r->reshard_extra_gathers);
	jw_u64(w, "reshard_extra_wire_bytes", r->reshard_extra_wire_bytes);
	jw_u64(w, "recompute_regathers", r->recompute_regathers);
	jw_u64(w, "exceptions", r->exceptions);
	jw_close(w, '}');
}

static void write_comms(struct jw *w, const struct analysis_result *a)
{
	jw_open(w, "communicators", '[');
	for (uint32_t i = 0; i < a->ncomms; i++) {
		const struct analysis_comm *c = &a->comms[i];
		jw_open(w, NULL, '{');
		jw_hex(w, "id", c->id);
		jw_hex(w, "dimension", c->dimension);
		jw_name(w, "name", c->name);
		jw_i64(w, "nranks", c->nranks);
		jw_i64(w, "rank", c->rank);
		jw_str(w, "role", analysis_comm_role_name(c->role));
		jw_bool(w, "role_given", c->role_given);
		jw_open(w, "per_step", '{');
		jw_u64(w, "allgathers", c->allgathers);
		jw_u64(w, "reduce_scatters", c->reduce_scatters);
		jw_u64(w, "allreduces", c->allreduces);
		jw_u64(w, "broadcasts", c->broadcasts);
		jw_u64(w, "point_to_point", c->point_to_point);
		jw_u64(w, "alltoalls", c->alltoalls);
		jw_u64(w, "other", c->other);
		jw_close(w, '}');
		jw_u64(w, "outside_steps", c->outside);
		jw_u64(w, "bytes_per_step", c->bytes_per_step);
		jw_u64(w, "elements_median", c->elements_median);
		jw_str(w, "evidence", c->evidence);
		jw_close(w, '}');
	}
	jw_close(w, ']');
	if (a->fsdp_comm >= 0)
		jw_i64(w, "fsdp_communicator", a->fsdp_comm);
	else
		jw_null(w, "fsdp_communicator");
	jw_u64(w, "tp_degree", a->tp_degree);
}

/* Each FSDP group of the job, the primary first (docs/report-schema.md,
 * "fsdp_groups"). */
static void write_fsdp_groups(struct jw *w, const struct analysis_result *a)
{
	char policy[32];
	jw_open(w, "fsdp_groups", '[');
	for (uint32_t i = 0; i < a->nfsdp_groups && i < ANALYSIS_FSDP_GROUPS_MAX; i++) {
		const struct analysis_fsdp_group *g = &a->fsdp_groups[i];
		int phases = g->phase_source != ANALYSIS_PHASES_NONE;
		jw_open(w, NULL, '{');
		jw_bool(w, "primary", i == 0);
		jw_i64(w, "communicator", g->comm);
		if (g->regather_comm >= 0)
			jw_i64(w, "regather_communicator", g->regather_comm);
		else
			jw_null(w, "regather_communicator");
		jw_i64(w, "nranks", g->nranks);
		jw_open(w, "per_step", '{');
		jw_u64(w, "allgathers", g->allgathers);
		write_phase_gathers(w, g->forward_allgathers, g->backward_allgathers, phases);
		jw_u64(w, "allgather_calls", g->allgather_calls);
		jw_u64(w, "reduce_scatters", g->reduce_scatters);
		jw_u64(w, "gathered_bytes", g->gathered_bytes_per_step);
		jw_close(w, '}');
		jw_str(w, "phases", analysis_phase_source_name(g->phase_source));
		if (phases)
			jw_u64(w, "microbatches", g->microbatches);
		else
			jw_null(w, "microbatches");
		jw_open(w, "units", '{');
		jw_u64(w, "forward_units", g->forward_units);
		jw_u64(w, "repeating_units", g->repeating_units);
		jw_u64(w, "gathers_per_unit", g->gathers_per_unit);
		jw_close(w, '}');
		jw_str(w, "reshard_after_forward", analysis_reshard_format(&g->reshard, policy, sizeof(policy)));
		jw_open(w, "exposure", '{');
		jw_bool(w, "measured", g->exposure_measured);
		jw_u64(w, "allgather_ns_per_step", g->allgather_ns_per_step);
		jw_u64(w, "exposed_allgather_ns_per_step", g->exposed_allgather_ns_per_step);
		jw_u64(w, "compute_wait_ns_per_step", g->compute_wait_ns_per_step);
		jw_u64(w, "exposed_gathers", g->exposed_gathers);
		jw_close(w, '}');
		jw_open(w, "ledger", '{');
		jw_u64(w, "params", g->params);
		jw_u64(w, "degree", g->degree);
		jw_u64(w, "ranks", g->ledger_ranks);
		jw_u64(w, "largest_unit_params", g->largest_unit_params);
		jw_u64(w, "persistent_bytes_per_rank", g->persistent_bytes_per_rank);
		jw_u64(w, "transient_bytes_per_rank", g->transient_bytes_per_rank);
		jw_close(w, '}');
		jw_close(w, '}');
	}
	jw_close(w, ']');
}

static void write_microbatches(struct jw *w, const struct analysis_microbatches *m, int known)
{
	if (!known) {
		jw_null(w, "microbatches");
		return;
	}
	jw_open(w, "microbatches", '{');
	jw_u64(w, "per_step", m->per_step);
	jw_u64(w, "sync", m->sync);
	jw_u64(w, "forward_only", m->forward_only);
	jw_u64(w, "forward_allgathers", m->forward_allgathers);
	jw_u64(w, "backward_allgathers", m->backward_allgathers);
	jw_u64(w, "recompute_allgathers", m->recompute_allgathers);
	jw_bool(w, "told", m->told);
	jw_str(w, "phases", analysis_phase_source_name(m->phase_source));
	jw_close(w, '}');
}

static void write_buckets(struct jw *w, const struct analysis_result *a)
{
	const struct analysis_buckets *b = &a->buckets;
	if (a->verdict != ANALYSIS_BUCKETED) {
		jw_null(w, "buckets");
		return;
	}
	jw_open(w, "buckets", '{');
	jw_u64(w, "fetches_per_step", b->fetches_per_step);
	jw_u64(w, "calls_per_step", b->calls_per_step);
	jw_u64(w, "grouped_fetches", b->grouped_fetches);
	jw_u64(w, "max_calls_per_fetch", b->max_calls_per_fetch);
	jw_u64(w, "fetch_elements_min", b->fetch_elements_min);
	jw_u64(w, "fetch_elements_median", b->fetch_elements_median);
	jw_u64(w, "fetch_elements_max", b->fetch_elements_max);
	jw_u64(w, "gathered_elements_per_step", b->gathered_elements_per_step);
	jw_u64(w, "reduce_buckets_per_step", b->reduce_buckets_per_step);
	jw_u64(w, "reduce_sizes_matching", b->reduce_sizes_matching);
	jw_u64(w, "reduce_elements_per_step", b->reduce_elements_per_step);
	jw_u64(w, "reduce_elements_max", b->reduce_elements_max);
	jw_u64(w, "regather_fetches_per_step", b->regather_fetches_per_step);
	jw_u64(w, "quantized_fetches_per_step", b->quantized_fetches_per_step);
	jw_close(w, '}');
}

static void write_exposure(struct jw *w, const struct analysis_result *a, const struct rule_config *rules)
{
	const struct analysis_exposure *e = &a->exposure;
	struct rule_config defaults;
	double small;

	if (!rules) {
		rule_config_init(&defaults);
		rules = &defaults;
	}
	small = rule_threshold(rules, RULE_T_SMALL_GATHER_BYTES);

	jw_open(w, "exposure", '{');
	jw_str(w, "source", analysis_exposure_source_name(e->source));
	if (a->steps_analyzed)
		jw_u64(w, "step", e->step);
	else
		jw_null(w, "step");
	jw_u64(w, "allgather_ns_per_step", e->allgather_ns_per_step);
	jw_u64(w, "exposed_allgather_ns_per_step", e->exposed_allgather_ns_per_step);
	jw_ratio(w, "exposed_fraction", e->exposed_fraction);
	jw_u64(w, "forward_exposed_ns_per_step", e->forward_exposed_ns_per_step);
	jw_u64(w, "backward_exposed_ns_per_step", e->backward_exposed_ns_per_step);
	jw_u64(w, "reduce_scatter_ns_per_step", e->reduce_scatter_ns_per_step);
	jw_u64(w, "exposed_reduce_scatter_ns_per_step", e->exposed_reduce_scatter_ns_per_step);
	jw_u64(w, "allreduce_ns_per_step", e->allreduce_ns_per_step);
	jw_u64(w, "exposed_allreduce_ns_per_step", e->exposed_allreduce_ns_per_step);
	jw_u64(w, "exposed_gathers", e->exposed_gathers);
	jw_u64(w, "compute_wait_ns_per_step", e->compute_wait_ns_per_step);
	jw_u64(w, "forward_compute_wait_ns_per_step", e->forward_compute_wait_ns_per_step);
	jw_u64(w, "backward_compute_wait_ns_per_step", e->backward_compute_wait_ns_per_step);
	jw_u64(w, "other_compute_wait_ns_per_step", e->other_compute_wait_ns_per_step);
	jw_open(w, "causes", '{');
	for (int c = 0; c < ANALYSIS_CAUSE_MAX; c++) {
		jw_open(w, analysis_cause_name(c), '{');
		jw_u64(w, "gathers", e->cause_gathers[c]);
		jw_u64(w, "ns", e->cause_ns[c]);
		jw_u64(w, "compute_wait_ns", e->cause_compute_wait_ns[c]);
		jw_close(w, '}');
	}
	jw_close(w, '}');
	jw_open(w, "gathers", '[');
	for (uint32_t i = 0; i < a->ngathers; i++) {
		const struct analysis_gather *g = &a->gathers[i];

		jw_open(w, NULL, '{');
		jw_u64(w, "index", g->index);
		if (g->phase)
			jw_str(w, "phase", analysis_phase_name(g->phase));
		else
			jw_null(w, "phase");
		if (g->microbatch >= 0)
			jw_i64(w, "microbatch", g->microbatch);
		else
			jw_null(w, "microbatch");
		jw_bool(w, "recompute", g->recompute);
		jw_i64(w, "unit", g->unit);
		jw_i64(w, "repeat", g->repeat);
		jw_i64(w, "motif_pos", g->motif_pos);
		jw_name(w, "name", g->name);
		jw_str(w, "dtype", record_dtype_name(g->dtype));
		jw_i64(w, "nranks", g->nranks);
		jw_u64(w, "calls", g->calls);
		jw_u64(w, "bytes", g->bytes);
		jw_u64(w, "elements", g->elements);
		jw_u64(w, "duration_ns", g->duration_ns);
		jw_u64(w, "exposed_ns", g->exposed_ns);
		jw_u64(w, "hide_ns", g->hide_ns);
		jw_u64(w, "compute_wait_ns", g->compute_wait_ns);
		jw_u64(w, "queued_ns", g->queued_ns);
		jw_u64(w, "call_ns", g->call_ns);
		jw_str(w, "cause", analysis_cause_name(g->cause));
		if (g->slowest_rank >= 0)
			jw_i64(w, "slowest_rank", g->slowest_rank);
		else
			jw_null(w, "slowest_rank");
		jw_u64(w, "skew_ns", g->skew_ns);
		/* the rules' own judgement (exposed-gather, small-collectives) */
		jw_str(w, "bound", analysis_bound_name(analysis_gather_bound(a, g, small)));
		jw_close(w, '}');
	}
	jw_close(w, ']');
	jw_close(w, '}');
}

static void write_ledger(struct jw *w, const struct analysis_ledger *l)
{
	jw_open(w, "ledger", '{');
	jw_u64(w, "params", l->params);
	jw_u64(w, "ranks", l->ranks);
	jw_u64(w, "prefetch", l->prefetch);
	jw_u64(w, "largest_unit_params", l->largest_unit_params);
	jw_u64(w, "units", l->units);
	jw_num(w, "param_bytes", l->param_bytes);
	jw_num(w, "grad_bytes", l->grad_bytes);
	jw_num(w, "master_bytes", l->master_bytes);
	jw_num(w, "optimizer_bytes", l->optimizer_bytes);
	jw_u64(w, "persistent_bytes_per_rank", l->persistent_bytes_per_rank);
	jw_u64(w, "transient_bytes_per_rank", l->transient_bytes_per_rank);
	jw_u64(w, "peak_state_bytes_per_rank", l->peak_state_bytes_per_rank);
	if (l->gpu_mem_bytes) {
		jw_u64(w, "gpu_mem_bytes", l->gpu_mem_bytes);
		jw_i64(w, "headroom_bytes", l->headroom_bytes);
	} else {
		jw_null(w, "gpu_mem_bytes");
		jw_null(w, "headroom_bytes");
	}
	jw_u64(w, "wire_bytes_per_step", l->wire_bytes_per_step);
	jw_u64(w, "model_wire_bytes_per_step", l->model_wire_bytes_per_step);
	jw_u64(w, "ddp_wire_bytes_per_step", l->ddp_wire_bytes_per_step);
	jw_u64(w, "ddp_persistent_bytes_per_rank", l->ddp_persistent_bytes_per_rank);
	jw_u64(w, "whole_model_transient_bytes", l->whole_model_transient_bytes);
	jw_u64(w, "trainable_params", l->trainable_params);
	jw_bool(w, "params_include_padding", l->params_with_padding);
	jw_close(w, '}');
}

/* A finding's predicted_gains (docs/report-schema.md "findings"). */
static void write_gains(struct jw *w, const struct finding *f, uint64_t step_ns)
{
	jw_open(w, "predicted_gains", '[');
	for (size_t i = 0; i < f->ngains; i++) {
		const struct finding_gain *g = &f->gains[i];
		int known = g->kind != FINDING_GAIN_NOT_PREDICTED;

		jw_open(w, NULL, '{');
		jw_str(w, "fix", g->fix);
		jw_str(w, "kind", finding_gain_kind_name(g->kind));
		if (known)
			jw_i64(w, "gain_ns", g->gain_ns);
		else
			jw_null(w, "gain_ns");
		if (known && step_ns)
			jw_num(w, "step_fraction", (double)g->gain_ns / (double)step_ns);
		else
			jw_null(w, "step_fraction");
		jw_str(w, "why", g->why);
		jw_close(w, '}');
	}
	jw_close(w, ']');
}

static void write_findings(struct jw *w, const findings_t *list, uint64_t step_ns)
{
	jw_open(w, "findings", '[');
	for (size_t i = 0; i < findings_count(list); i++) {
		const struct finding *f = findings_get(list, i);

		jw_open(w, NULL, '{');
		jw_str(w, "rule", f->rule->id);
		jw_str(w, "title", f->rule->title);
		jw_str(w, "severity", rule_severity_name(f->severity));
		jw_str(w, "message", f->message);
		jw_str(w, "evidence", f->evidence);
		jw_str(w, "explanation", f->rule->explanation);
		jw_open(w, "fix", '{');
		jw_str(w, "fsdp2", f->fix_fsdp2);
		jw_str(w, "fsdp1", f->fix_fsdp1);
		jw_str(w, "deepspeed", f->fix_deepspeed);
		jw_close(w, '}');
		jw_open(w, "metrics", '{');
		for (size_t m = 0; m < f->nmetrics; m++)
			jw_num(w, f->metrics[m].name, f->metrics[m].value);
		jw_close(w, '}');
		write_gains(w, f, step_ns);
		jw_close(w, '}');
	}
	jw_close(w, ']');
}

/* A rank's HTA figures (docs/report-schema.md "comm_comp_overlap"). */
static void write_rank_figures(struct jw *w, const struct analysis_rank *r)
{
	jw_ratio(w, "comm_comp_overlap", r->comm_ns ? (double)r->comm_overlap_ns / (double)r->comm_ns : -1);
	jw_open(w, "nccl_kernels", '{');
	jw_u64(w, "allgather", r->allgather_kernels);
	jw_u64(w, "reduce_scatter", r->reduce_scatter_kernels);
	jw_u64(w, "allreduce", r->allreduce_kernels);
	jw_u64(w, "other", r->other_kernels);
	jw_close(w, '}');
	jw_u64(w, "profiler_steps", r->profiler_steps);
}

static void write_per_rank(struct jw *w, const struct analysis_result *a)
{
	jw_open(w, "per_rank", '[');
	for (uint32_t i = 0; i < a->nper_rank; i++) {
		const struct analysis_rank *r = &a->per_rank[i];
		/* what the source's format cannot tell is null, not 0 */
		int end_known = !(r->unknown & FSS_FIGURES_NO_END);

		jw_open(w, NULL, '{');
		jw_i64(w, "rank", r->rank);
		jw_u64(w, "source", r->source);
		jw_u64_or_null(w, "pid", r->pid, !(r->unknown & FSS_FIGURES_NO_PID));
		jw_u64(w, "steps_analyzed", r->steps_analyzed);
		write_counts(w, "per_step", &r->per_step, a->microbatches.phase_source != ANALYSIS_PHASES_NONE);
		jw_u64(w, "step_ns", r->step_ns);
		jw_u64(w, "allgather_ns_per_step", r->allgather_ns);
		jw_u64(w, "exposed_allgather_ns_per_step", r->exposed_allgather_ns);
		jw_u64(w, "compute_wait_ns_per_step", r->compute_wait_ns);
		jw_u64(w, "compute_ns_per_step", r->compute_ns);
		jw_u64(w, "last_arrivals", r->last_arrivals);
		jw_u64(w, "matched_collectives", r->matched_collectives);
		jw_u64(w, "late_ns_per_step", r->late_ns_per_step);
		jw_u64_or_null(w, "dropped_records", r->dropped_records, !(r->unknown & FSS_FIGURES_NO_DROPS));
		jw_u64(w, "steps_lost", r->steps_lost);
		jw_u64_or_null(w, "steps_cut", r->steps_cut, end_known);
		jw_u64(w, "collectives_lost", r->collectives_lost);
		if (end_known)
			jw_bool(w, "cut", r->cut);
		else
			jw_null(w, "cut");
		write_rank_figures(w, r);
		jw_close(w, '}');
	}
	jw_close(w, ']');
}

/* The steps the verdict leaves out, and why (docs/report-schema.md, "excluded"). */
static void write_excluded(struct jw *w, const struct analysis_trust *t)
{
	jw_open(w, "excluded", '{');
	jw_u64(w, "steps_lost", t->steps_lost);
	jw_u64(w, "steps_cut", t->steps_cut);
	jw_u64(w, "steps_lost_all_ranks", t->steps_lost_all);
	jw_u64(w, "steps_cut_all_ranks", t->steps_cut_all);
	jw_u64(w, "ranks_lost", t->ranks_lost);
	jw_u64(w, "ranks_cut", t->ranks_cut);
	jw_u64(w, "collectives_lost", t->collectives_lost);
	jw_open(w, "dropped", '{');
	jw_u64(w, "ring", t->ring_dropped);
	jw_u64(w, "sink", t->sink_dropped);
	jw_u64(w, "cupti", t->cupti_dropped);
	jw_u64(w, "nvtx", t->nvtx_dropped);
	jw_close(w, '}');
	jw_u64(w, "records_unplaced", t->records_unplaced);
	jw_close(w, '}');
}

/* What the step search saw beside the steady step, where it saw anything:
 * the step's variants when a period holds steps that differ, the events it
 * left out (sizes that change from step to step). Absent otherwise. */
static void write_step_search(struct jw *w, const struct analysis_result *a)
{
	if (a->nstep_variants > 1) {
		jw_open(w, "step_variants", '[');
		for (uint32_t k = 0; k < a->nstep_variants && k < ANALYSIS_STEP_VARIANTS_MAX; k++) {
			const struct analysis_step_variant *v = &a->step_variants[k];
			jw_open(w, NULL, '{');
			jw_u64(w, "steps", v->steps);
			jw_u64(w, "collectives", v->collectives);
			jw_u64(w, "allgathers", v->allgathers);
			jw_u64(w, "reduce_scatters", v->reduce_scatters);
			jw_close(w, '}');
		}
		jw_close(w, ']');
	}
	if (a->step_search_left_out)
		jw_u64(w, "step_search_left_out", a->step_search_left_out);
}

/* Every process of the trace: its rank, how it ended, what it lost. */
/* A source's rank and where it came from (null while not known). */
static void source_rank_json(struct jw *w, const struct source_summary *s)
{
	if (s->rank >= 0)
		jw_i64(w, "rank", s->rank);
	else
		jw_null(w, "rank");
	if (s->rank_from == SOURCE_RANK_UNKNOWN)
		jw_null(w, "rank_from");
	else
		jw_name(w, "rank_from", source_rank_from_name((enum source_rank_from)s->rank_from));
}

static void write_sources(struct jw *w, const struct analysis_result *a)
{
	jw_open(w, "sources", '[');
	for (uint32_t i = 0; i < a->nsources; i++) {
		const struct source_summary *s = &a->sources[i];

		jw_open(w, NULL, '{');
		jw_u64(w, "source", s->source);
		source_rank_json(w, s);
		jw_u64(w, "pid", s->pid);
		jw_name(w, "host", s->host);
		jw_name(w, "command", s->command);
		jw_name(w, "end", source_end_name((enum source_end)s->end));
		if (s->exit_code >= 0)
			jw_i64(w, "exit_code", s->exit_code);
		else
			jw_null(w, "exit_code");
		if (s->signal)
			jw_i64(w, "signal", s->signal);
		else
			jw_null(w, "signal");
		jw_bool(w, "process_end", s->has_process_end);
		if (s->last_ns)
			jw_u64(w, "last_record_ns", s->last_ns);
		else
			jw_null(w, "last_record_ns");
		jw_u64(w, "records", s->records);
		jw_u64(w, "collectives", s->collectives);
		jw_u64(w, "collectives_missing", s->collectives_missing);
		jw_open(w, "drops", '{');
		jw_u64(w, "ring", s->drops.ring);
		jw_u64(w, "sink", s->drops.sink);
		jw_u64(w, "cupti", s->drops.cupti);
		jw_u64(w, "nvtx", s->drops.nvtx);
		jw_u64(w, "nvtx_unnamed", s->drops.nvtx_unnamed);
		jw_close(w, '}');
		jw_u64(w, "dropped", s->dropped);
		report_source_device_json(w, s);
		jw_close(w, '}');
	}
	jw_close(w, ']');
}

/* What fsdpscope attach inferred (docs/report-schema.md, "attach"): only
 * when the trace has attached sources. Every count beside its total:
 * inferred[].communicators <= communicators_observed <= communicators;
 * detached and ranks_inferred <= sources; ranks_guessed <= ranks_inferred. */
static void write_attach(struct jw *w, const struct analysis_result *a)
{
	const struct analysis_attach *x = &a->attach;

	jw_open(w, "attach", '{');
	jw_u64(w, "sources", x->sources);
	jw_u64(w, "detached", x->detached);
	jw_u64(w, "ranks_inferred", x->ranks_inferred);
	jw_u64(w, "ranks_guessed", x->ranks_guessed);
	jw_u64(w, "communicators", x->ncomms);
	jw_u64(w, "communicators_observed", x->comms_observed);
	jw_str(w, "steps", a->step_detection == ANALYSIS_STEPS_NVTX ? NULL : analysis_attach_steps_why());
	jw_str(w, "exposure", a->exposure.source == ANALYSIS_EXPOSURE_NONE ? analysis_attach_exposure_why() : NULL);
	jw_open(w, "inferred", '[');
	for (int b = 0; b < ANALYSIS_INFER_KINDS; b++) {
		if (!x->inferred[b])
			continue;
		jw_open(w, NULL, '{');
		jw_str(w, "what", analysis_inferred_name(b));
		jw_str(w, "words", analysis_inferred_words(b));
		jw_u64(w, "communicators", x->inferred[b]);
		jw_close(w, '}');
	}
	jw_close(w, ']');
	jw_open(w, "per_source", '[');
	for (uint32_t i = 0; i < a->nsources; i++) {
		const struct source_summary *s = &a->sources[i];
		uint32_t ncomms = 0;

		if (s->path != FSS_PATH_UPROBE)
			continue;
		jw_open(w, NULL, '{');
		jw_u64(w, "source", s->source);
		jw_str(w, "path", "uprobe");
		source_rank_json(w, s);
		jw_bool(w, "rank_guessed", source_rank_is_guess((enum source_rank_from)s->rank_from));
		jw_name(w, "end", source_end_name((enum source_end)s->end));
		for (uint32_t c = 0; c < x->ncomms; c++)
			ncomms += x->comms[c].source == s->source;
		jw_u64(w, "communicators", ncomms);
		jw_open(w, "per_communicator", '[');
		for (uint32_t c = 0; c < x->ncomms; c++) {
			const struct analysis_attach_comm *m = &x->comms[c];

			if (m->source != s->source)
				continue;
			jw_open(w, NULL, '{');
			jw_hex(w, "id", m->id);
			jw_i64(w, "nranks", m->nranks);
			jw_i64(w, "rank", m->rank);
			jw_bool(w, "observed", m->observed);
			jw_open(w, "inferred", '[');
			for (int b = 0; b < ANALYSIS_INFER_KINDS; b++)
				if (m->inferred & (1u << b))
					jw_str(w, NULL, analysis_inferred_name(b));
			jw_close(w, ']');
			jw_open(w, "words", '[');
			for (int b = 0; b < ANALYSIS_INFER_KINDS; b++)
				if (m->inferred & (1u << b))
					jw_str(w, NULL, analysis_inferred_words(b));
			jw_close(w, ']');
			jw_close(w, '}');
		}
		jw_close(w, ']');
		jw_close(w, '}');
	}
	jw_close(w, ']');
	jw_close(w, '}');
}

/* One rank of a hang (docs/report-schema.md, "flight"). */
static void write_flight_rank(struct jw *w, const struct analysis_result *a, const struct analysis_flight_rank *r,
			      int waiting)
{
	const struct source_summary *s = flight_source(a, r->source);
	char name[32];

	jw_open(w, NULL, '{');
	jw_i64(w, "rank", r->rank);
	jw_i64(w, "global_rank", r->global_rank);
	jw_u64(w, "source", r->source);
	jw_u64(w, "pid", r->pid);
	jw_name(w, "host", s ? s->host : NULL);
	jw_u64(w, "since_ns", r->since_ns);
	if (r->last_seq) {
		jw_u64(w, "last_seq", r->last_seq);
		jw_str(w, "last_op", record_op_name(r->last_op));
	} else {
		jw_null(w, "last_seq");
		jw_null(w, "last_op");
	}
	if (waiting || r->evidence)
		jw_str(w, "evidence", flight_evidence_name(r->evidence));
	else
		jw_null(w, "evidence");
	if (s)
		jw_str(w, "end", source_end_name((enum source_end)s->end));
	else
		jw_null(w, "end");
	/* how the wait stands: an ended one is still the hang's (docs/hangs.md) */
	jw_str(w, "wait_end", waiting ? flight_wait_end_name(r->end) : NULL);
	if (waiting)
		jw_null(w, "arrived_late");
	else
		jw_bool(w, "arrived_late", r->late);
	jw_str(w, "nccl_result",
	       waiting && r->end == ANALYSIS_WAIT_GAVE_UP ? flight_nccl_result_name(r->result, name, sizeof(name)) : NULL);
	jw_close(w, '}');
}

static void write_comm_names(struct jw *w, const struct analysis_result *a, uint64_t id)
{
	const struct analysis_comm *c = flight_comm(a, id);

	jw_hex(w, "comm", id);
	jw_str(w, "comm_role", c ? analysis_comm_role_name(c->role) : NULL);
	jw_name(w, "comm_name", c ? c->name : NULL);
}

static void write_signature(struct jw *w, const char *key, const struct analysis_signature *s, const int32_t *ranks,
			    uint32_t n)
{
	jw_open(w, key, '{');
	jw_str(w, "op", record_op_name(s->op));
	jw_u64(w, "count", s->count);
	jw_str(w, "dtype", s->dtype == FSS_DTYPE_UNKNOWN ? NULL : record_dtype_name(s->dtype));
	if (s->root >= 0)
		jw_i64(w, "root", s->root);
	else
		jw_null(w, "root");
	jw_str(w, "redop", s->redop == FSS_REDOP_NONE ? NULL : record_redop_name(s->redop));
	jw_u64(w, "ranks_total", n);
	jw_open(w, "ranks", '[');
	for (uint32_t i = 0; i < n && i < ANALYSIS_FLIGHT_RANKS_MAX; i++)
		jw_i64(w, NULL, ranks[i]);
	jw_close(w, ']');
	jw_close(w, '}');
}

/* Calls in flight: hangs and mismatches (collector/flight.c, docs/hangs.md). */
static void write_flight(struct jw *w, const struct analysis_result *a)
{
	const struct analysis_flight *f = &a->flight;

	jw_open(w, "flight", '{');
	jw_bool(w, "shows_waits", flight_shows_waits(a));
	jw_u64(w, "timeout_ns", f->timeout_ns ? f->timeout_ns : a->options.hang_timeout_ns);
	if (f->now_realtime_ns)
		jw_u64(w, "now_realtime_ns", f->now_realtime_ns);
	else
		jw_null(w, "now_realtime_ns");
	jw_u64(w, "sources_enter", f->sources_enter);
	jw_u64(w, "sources_cupti", f->sources_cupti);
	jw_u64(w, "in_flight", f->in_flight);
	jw_u64(w, "hangs_total", f->hangs_total);
	jw_open(w, "hangs", '[');
	for (uint32_t i = 0; i < f->nhangs && i < ANALYSIS_HANGS_MAX; i++) {
		const struct analysis_hang *h = &f->hangs[i];

		jw_open(w, NULL, '{');
		write_comm_names(w, a, h->comm_id);
		jw_i64(w, "nranks", h->nranks);
		jw_u64(w, "comm_seq", h->comm_seq);
		jw_str(w, "op", record_op_name(h->op));
		jw_u64(w, "count", h->count);
		jw_str(w, "dtype", h->dtype == FSS_DTYPE_UNKNOWN ? NULL : record_dtype_name(h->dtype));
		jw_u64(w, "waited_ns", h->waited_ns);
		jw_bool(w, "cascade", h->cascade);
		jw_str(w, "ended", h->ended ? flight_wait_end_name(h->ended) : NULL);
		jw_u64(w, "waiting_total", h->nwaiting);
		jw_open(w, "waiting", '[');
		for (uint32_t k = 0; k < h->nwaiting && k < ANALYSIS_FLIGHT_RANKS_MAX; k++)
			write_flight_rank(w, a, &h->waiting[k], 1);
		jw_close(w, ']');
		jw_u64(w, "missing_total", h->nmissing);
		jw_open(w, "missing", '[');
		for (uint32_t k = 0; k < h->nmissing && k < ANALYSIS_FLIGHT_RANKS_MAX; k++)
			write_flight_rank(w, a, &h->missing[k], 0);
		jw_close(w, ']');
		jw_u64(w, "died_total", h->ndied);
		jw_open(w, "died", '[');
		for (uint32_t k = 0; k < h->ndied && k < ANALYSIS_FLIGHT_RANKS_MAX; k++)
			write_flight_rank(w, a, &h->died[k], 1);
		jw_close(w, ']');
		jw_close(w, '}');
	}
	jw_close(w, ']');
	jw_u64(w, "mismatches_total", f->mismatches_total);
	jw_u64(w, "mismatched_collectives", f->mismatched_collectives);
	jw_open(w, "mismatches", '[');
	for (uint32_t i = 0; i < f->nmismatches && i < ANALYSIS_MISMATCHES_MAX; i++) {
		const struct analysis_mismatch *m = &f->mismatches[i];

		jw_open(w, NULL, '{');
		write_comm_names(w, a, m->comm_id);
		jw_i64(w, "nranks", m->nranks);
		jw_u64(w, "comm_seq", m->comm_seq);
		write_signature(w, "a", &m->a, m->a_ranks, m->na);
		write_signature(w, "b", &m->b, m->b_ranks, m->nb);
		jw_u64(w, "b_source", m->b_source);
		jw_u64(w, "other_ranks", m->others);
		jw_close(w, '}');
	}
	jw_close(w, ']');
	jw_close(w, '}');
}

static void write_options(struct jw *w, const struct analysis_options *o, const struct rule_config *rules)
{
	size_t n;
	const struct rule_threshold_def *t = rule_thresholds(&n);

	jw_open(w, "options", '{');
	if (o->layers > 0)
		jw_i64(w, "layers", o->layers);
	else
		jw_null(w, "layers");
	jw_i64(w, "rank", o->rank);
	jw_i64(w, "prefetch", o->prefetch);
	jw_i64(w, "warmup_steps", o->warmup_steps);
	jw_num(w, "param_bytes", o->param_bytes);
	jw_num(w, "grad_bytes", o->grad_bytes);
	jw_num(w, "master_bytes", o->master_bytes);
	jw_num(w, "optimizer_bytes", o->optimizer_bytes);
	jw_str(w, "step_ranges", o->step_ranges ? o->step_ranges : ANALYSIS_DEFAULT_STEP_RANGES);
	jw_str(w, "compute_ranges", o->compute_ranges ? o->compute_ranges : ANALYSIS_DEFAULT_COMPUTE_RANGES);
	jw_bool(w, "host_timing", o->force_host_timing);
	jw_u64(w, "exposed_min_ns", o->exposed_min_ns);
	jw_num(w, "peak_flops", o->peak_flops);
	jw_num(w, "flops_per_step", o->flops_per_step);
	jw_num(w, "tokens_per_step", o->tokens_per_step);
	jw_u64(w, "gpu_mem_bytes", o->gpu_mem_bytes);
	jw_str(w, "fsdp_comm", o->fsdp_comm);
	jw_u64(w, "hang_timeout_ns", o->hang_timeout_ns);
	jw_open(w, "thresholds", '{');
	for (size_t i = 0; i < n; i++)
		jw_num(w, t[i].name, rules ? rules->threshold[i] : t[i].default_value);
	jw_close(w, '}');
	jw_close(w, '}');
}

/* The FSDP groups, then what changing their policy is predicted to do
 * (collector/whatif_print.h). */
static void write_groups_whatif(struct jw *w, const struct analysis_result *a)
{
	write_fsdp_groups(w, a);
	whatif_json(w, a);
}

void diagnosis_print_json(FILE *out, const struct diagnosis *d, const struct rule_config *rules)
{
	const struct analysis_result *a = d->result;
	struct jw w;
	char policy[32];
	size_t sev[3] = {0, 0, 0};

	jw_init_file(&w, out);
	jw_open(&w, NULL, '{');
	jw_str(&w, "schema", ANALYSIS_SCHEMA);
	jw_open(&w, "tool", '{');
	jw_str(&w, "name", "fsdpscope");
#ifdef FSS_VERSION
	jw_str(&w, "version", FSS_VERSION);
#else
	jw_null(&w, "version");
#endif
	jw_close(&w, '}');
	jw_open(&w, "trace", '{');
	jw_str(&w, "path", d->trace_path);
	jw_u64(&w, "records", a->trace.records);
	jw_u64(&w, "collectives", a->trace.collectives);
	jw_u64(&w, "gpu_intervals", a->trace.gpu_intervals);
	jw_u64(&w, "nvtx_ranges", a->trace.nvtx_ranges);
	jw_u64(&w, "dropped_records", a->trace.dropped_records);
	jw_u64(&w, "sources", a->trace.sources);
	jw_bool(&w, "truncated", a->trace.truncated);
	jw_u64(&w, "sources_cut", a->trace.sources_cut);
	jw_str(&w, "damage", d->damage[0] ? d->damage : NULL);
	jw_str(&w, "end", a->trace.end);
	jw_u64(&w, "gaps_total", a->trace.gaps_total);
	jw_open(&w, "gaps", '[');
	for (uint32_t i = 0; i < a->trace.ngaps; i++) {
		const struct analysis_gap *g = &a->trace.gaps[i];

		jw_open(&w, NULL, '{');
		jw_u64(&w, "offset", g->offset);
		jw_u64(&w, "bytes", g->bytes);
		jw_u64(&w, "first_missing_chunk", g->first_missing);
		if (g->to_end)
			jw_null(&w, "chunks_missing");
		else
			jw_u64(&w, "chunks_missing", g->chunks_missing);
		jw_bool(&w, "to_end", g->to_end);
		jw_str(&w, "why", g->why);
		jw_close(&w, '}');
	}
	jw_close(&w, ']');
	jw_bool(&w, "has_cupti", a->trace.has_cupti);
	jw_bool(&w, "has_nvtx", a->trace.has_nvtx);
	jw_close(&w, '}');
	jw_str(&w, "verdict", analysis_verdict_name(a->verdict));
	if (a->verdict == ANALYSIS_UNDECIDED) {
		jw_open(&w, "undecided", '{');
		jw_str(&w, "reason", analysis_undecided_name(a->undecided_reason));
		jw_str(&w, "why", a->undecided_why);
		jw_close(&w, '}');
	} else {
		jw_null(&w, "undecided");
	}
	jw_u64(&w, "ranks", a->ranks);
	jw_i64(&w, "world_size", a->world_size);
	jw_i64(&w, "headline_rank", a->headline_rank);
	jw_u64(&w, "steps_analyzed", a->steps_analyzed);
	jw_u64(&w, "steps_seen", a->steps_seen);
	jw_u64(&w, "warmup_steps", a->warmup_steps);
	jw_u64(&w, "irregular_steps", a->irregular_steps);
	write_excluded(&w, &a->trust);
	write_step_search(&w, a);
	jw_u64(&w, "step_period", a->step_period);
	jw_str(&w, "step_detection", analysis_step_detection_name(a->step_detection));
	jw_name(&w, "step_range_name", a->step_range_name);
	jw_u64(&w, "step_ns", a->step_ns);
	write_counts(&w, "per_step", &a->per_step, a->microbatches.phase_source != ANALYSIS_PHASES_NONE);
	write_microbatches(&w, &a->microbatches, a->microbatches.phase_source != ANALYSIS_PHASES_NONE);
	write_comms(&w, a);
	write_buckets(&w, a);
	write_units(&w, &a->units, a->units_decided);
	jw_str(&w, "reshard_after_forward", analysis_reshard_format(&a->reshard, policy, sizeof(policy)));
	write_reshard(&w, &a->reshard);
	write_exposure(&w, a, rules);
	write_ledger(&w, &a->ledger);
	write_groups_whatif(&w, a);

	jw_open(&w, "breakdown", '{');
	jw_u64(&w, "step_ns", a->breakdown.step_ns);
	jw_u64(&w, "compute_ns", a->breakdown.compute_ns);
	jw_u64(&w, "exposed_comm_ns", a->breakdown.exposed_comm_ns);
	jw_u64(&w, "idle_ns", a->breakdown.idle_ns);
	if (a->breakdown.flops_per_step > 0) {
		jw_num(&w, "flops_per_step", a->breakdown.flops_per_step);
		jw_num(&w, "achieved_flops", a->breakdown.achieved_flops);
	} else {
		jw_null(&w, "flops_per_step");
		jw_null(&w, "achieved_flops");
	}
	jw_ratio(&w, "mfu", a->breakdown.mfu);
	jw_close(&w, '}');
	report_mfu_json(&w, &a->mfu);

	jw_open(&w, "spread", '{');
	jw_u64(&w, "ranks", a->spread.ranks);
	if (a->spread.slowest_rank >= 0)
		jw_i64(&w, "slowest_rank", a->spread.slowest_rank);
	else
		jw_null(&w, "slowest_rank");
	jw_ratio(&w, "slowest_rank_fraction", a->spread.slowest_rank_fraction);
	jw_u64(&w, "skew_ns_per_step", a->spread.skew_ns_per_step);
	jw_u64(&w, "max_skew_ns", a->spread.max_skew_ns);
	jw_u64(&w, "step_ns_min", a->spread.step_ns_min);
	jw_u64(&w, "step_ns_max", a->spread.step_ns_max);
	jw_u64(&w, "exposed_ns_min", a->spread.exposed_ns_min);
	jw_u64(&w, "exposed_ns_max", a->spread.exposed_ns_max);
	jw_close(&w, '}');

	jw_open(&w, "sizes", '{');
	jw_dtypes(&w, "allgather_dtypes", a->sizes.allgather_dtypes);
	jw_dtypes(&w, "reduce_scatter_dtypes", a->sizes.reduce_scatter_dtypes);
	jw_dtypes(&w, "allreduce_dtypes", a->sizes.allreduce_dtypes);
	jw_u64(&w, "allgather_bytes_min", a->sizes.allgather_bytes_min);
	jw_u64(&w, "allgather_bytes_median", a->sizes.allgather_bytes_median);
	jw_u64(&w, "allgather_bytes_max", a->sizes.allgather_bytes_max);
	jw_u64(&w, "reduce_scatter_bytes_min", a->sizes.reduce_scatter_bytes_min);
	jw_u64(&w, "reduce_scatter_bytes_median", a->sizes.reduce_scatter_bytes_median);
	jw_u64(&w, "reduce_scatter_bytes_max", a->sizes.reduce_scatter_bytes_max);
	jw_close(&w, '}');

	write_findings(&w, d->findings, a->step_ns);
	for (size_t i = 0; i < findings_count(d->findings); i++)
		sev[findings_get(d->findings, i)->severity]++;
	jw_open(&w, "findings_count", '{');
	jw_u64(&w, "error", sev[RULE_ERROR]);
	jw_u64(&w, "warning", sev[RULE_WARNING]);
	jw_u64(&w, "info", sev[RULE_INFO]);
	jw_close(&w, '}');
	write_per_rank(&w, a);
	write_sources(&w, a);
	if (a->trace.sources_attached)
		write_attach(&w, a);
	report_worlds_json(&w, d);
	report_nodes_json(&w, d);
	write_flight(&w, a);
	write_options(&w, &a->options, rules);
	jw_open(&w, "notes", '[');
	for (uint32_t i = 0; i < a->nnotes && i < ANALYSIS_NOTES_MAX; i++)
		jw_str(&w, NULL, a->notes[i]);
	jw_close(&w, ']');
	jw_close(&w, '}');
	fputc('\n', out);
}

void diagnosis_print_ledger_json(FILE *out, const struct analysis_ledger *l)
{
	struct jw w;

	jw_init_file(&w, out);
	jw_open(&w, NULL, '{');
	jw_str(&w, "schema", "fsdpscope.ledger/1");
	write_ledger(&w, l);
	jw_close(&w, '}');
	fputc('\n', out);
}
