/*
 * report_text.c - the diagnosis as text: the report's sections and the
 * findings' blocks (lint, report, the summary after `fsdpscope run`).
 */
#include "cli/diagnosis.h"
#include "cli/report_mfu.h"
#include "cli/report_nodes.h"
#include "cli/report_sources.h"
#include "cli/report_worlds.h"
#include "collector/whatif_print.h"

#include "common/record.h"
#include "rules/finding_text.h"
#include "rules/flight_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* put_line - a finding's line (rules/finding_text.h) on the FILE ctx. */
static void put_line(void *ctx, const char *indent, const char *text, size_t len)
{
	fprintf(ctx, "%s%.*s\n", indent, (int)len, text);
}

void diagnosis_print_summary(FILE *out, const struct analysis_result *a)
{
	const struct analysis_microbatches *mb = &a->microbatches;
	if (a->verdict == ANALYSIS_UNDECIDED) {
		fprintf(out, "not diagnosed: %s", a->undecided_why);
		return;
	}
	fprintf(out, "%u step%s analysed, ", a->steps_analyzed, a->steps_analyzed == 1 ? "" : "s");
	if (a->verdict == ANALYSIS_BUCKETED) {
		fprintf(out, "bucketed fetching: %u AllGathers per step (%u calls), %u reduce buckets",
			a->buckets.fetches_per_step, a->buckets.calls_per_step, a->buckets.reduce_buckets_per_step);
		return;
	}
	if (mb->per_step > 1)
		fprintf(out, "%u micro-batches per step, %u AllGathers per step (%u + %u per micro-batch), ", mb->per_step,
			a->per_step.allgathers, mb->forward_allgathers, mb->backward_allgathers);
	else
		fprintf(out, "%u AllGathers per step (%u + %u), ", a->per_step.allgathers, a->per_step.forward_allgathers,
			a->per_step.backward_allgathers);
	fprintf(out, "%u repeating units x %u", a->units.repeating_units, a->units.gathers_per_unit);
}

void diagnosis_print_tally(FILE *out, const findings_t *list)
{
	size_t n[3] = {0, 0, 0};

	for (size_t i = 0; i < findings_count(list); i++)
		n[findings_get(list, i)->severity]++;
	fprintf(out, "%zu error%s, %zu warning%s, %zu info", n[RULE_ERROR], n[RULE_ERROR] == 1 ? "" : "s",
		n[RULE_WARNING], n[RULE_WARNING] == 1 ? "" : "s", n[RULE_INFO]);
}

void diagnosis_print_findings(FILE *out, const findings_t *list, int explain, int fsdp2_only)
{
	unsigned flags = (explain ? FINDING_TEXT_WHY : 0) | (fsdp2_only ? FINDING_TEXT_FSDP2_ONLY : 0);

	for (size_t i = 0; i < findings_count(list); i++) {
		if (i)
			fputc('\n', out);
		finding_text_lines(findings_get(list, i), flags, put_line, out);
	}
}

static const char *dtype_list(uint32_t bits, char *buf, size_t len)
{
	buf[0] = 0;
	for (unsigned d = 0; d < FSS_DTYPE_MAX; d++)
		if (bits & (1u << d))
			snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? "," : "", record_dtype_name((uint8_t)d));
	if (!buf[0])
		snprintf(buf, len, "-");
	return buf;
}

static void print_overview(FILE *out, const struct diagnosis *d)
{
	const struct analysis_result *a = d->result;
	const struct analysis_step_counts *s = &a->per_step;
	const struct analysis_units *u = &a->units;
	const struct analysis_exposure *e = &a->exposure;
	const struct analysis_breakdown *b = &a->breakdown;
	char b1[32], b2[32], b3[32], b4[32], policy[32];
	/* attached sources have no NVTX: the period is all there is */
	int attach_period = a->trace.sources_attached && a->step_detection == ANALYSIS_STEPS_PERIOD;

	fprintf(out, "fsdpscope report: %s\n\n", d->trace_path);
	fprintf(out, "trace       %u rank%s (largest communicator %d), headline rank %d; %" PRIu64 " records, %" PRIu64
		     " collectives, %" PRIu64 " GPU intervals, %" PRIu64 " NVTX ranges, %" PRIu64 " dropped\n",
		a->ranks, a->ranks == 1 ? "" : "s", a->world_size, a->headline_rank, a->trace.records,
		a->trace.collectives, a->trace.gpu_intervals, a->trace.nvtx_ranges, a->trace.dropped_records);
	fprintf(out, "steps       %u analysed of %u seen (%u warm-up, %u irregular), found by %s%s%s%s%s%s%s; step %s\n",
		a->steps_analyzed, a->steps_seen, a->warmup_steps, a->irregular_steps,
		analysis_step_detection_name(a->step_detection), a->step_range_name[0] ? " (e.g. \"" : "",
		a->step_range_name, a->step_range_name[0] ? "\")" : "", attach_period ? " (" : "",
		attach_period ? analysis_attach_steps_why() : "", attach_period ? ")" : "",
		rule_format_ns((double)a->step_ns, b1, sizeof(b1)));
	if (a->trust.collectives_lost)
		fprintf(out, "left out    %u step%s (all ranks) that lost collectives: %" PRIu64 " missing on %u rank%s\n",
			a->trust.steps_lost_all, a->trust.steps_lost_all == 1 ? "" : "s", a->trust.collectives_lost,
			a->trust.ranks_lost, a->trust.ranks_lost == 1 ? "" : "s");
	if (a->trace.sources_cut && a->trace.sources_attached)
		fprintf(out, "left out    %u step%s in progress where %u process%s died while attached (killed, or "
			     "exited non-zero)\n",
			a->trust.steps_cut_all, a->trust.steps_cut_all == 1 ? "" : "s", a->trace.sources_cut,
			a->trace.sources_cut == 1 ? "" : "es");
	else if (a->trace.sources_cut)
		fprintf(out, "left out    %u step%s in progress where the records of %u process%s stop without a "
			     "process_end (cut short, or died)%s\n",
			a->trust.steps_cut_all, a->trust.steps_cut_all == 1 ? "" : "s", a->trace.sources_cut,
			a->trace.sources_cut == 1 ? "" : "es", a->trust.steps_cut_all ? "" : ": they stop before a step was told");
	if (a->verdict == ANALYSIS_UNDECIDED)
		fprintf(out, "verdict     NOT DIAGNOSED (%s): %s\n", analysis_undecided_name(a->undecided_reason),
			a->undecided_why);
	else if (a->verdict == ANALYSIS_BUCKETED)
		fprintf(out, "verdict     bucketed fetching (DeepSpeed ZeRO-3): gathers follow fetch buckets, not modules; "
			     "no unit analysis\n");
	else
		fprintf(out, "verdict     diagnosed: FSDP units, phases and reshard policy read from the stream\n");
	if (a->steps_analyzed == 0) {
		fprintf(out, "\nNo step could be analysed: the sections below are empty.\n");
	}
	const struct analysis_microbatches *mb = &a->microbatches;
	if (mb->phase_source != ANALYSIS_PHASES_NONE) {
		fprintf(out, "per step    AllGather %u (%u forward + %u backward; %u calls), ReduceScatter %u, AllReduce %u, "
			     "other %u\n",
			s->allgathers, s->forward_allgathers, s->backward_allgathers, s->allgather_calls,
			s->reduce_scatters, s->allreduces, s->other);
		if (s->step_allgathers)
			fprintf(out, "            and %u AllGather%s of no unit on the FSDP group: per-step collectives "
				     "(see notes)\n",
				s->step_allgathers, s->step_allgathers == 1 ? "" : "s");
		fprintf(out, "micro-batch %u per step (%u reduce-scatter gradients), each %u forward + %u backward gathers%s%s\n",
			mb->per_step, mb->sync, mb->forward_allgathers, mb->backward_allgathers,
			mb->recompute_allgathers ? " (recomputation re-gathers included)" : "",
			mb->told ? "" : "; not told from steps (see notes)");
	} else {
		fprintf(out, "per step    AllGather %u (forward / backward not told; %u calls), ReduceScatter %u, AllReduce "
			     "%u, other %u\n",
			s->allgathers, s->allgather_calls, s->reduce_scatters, s->allreduces, s->other);
	}
	if (a->verdict == ANALYSIS_BUCKETED) {
		const struct analysis_buckets *bk = &a->buckets;
		fprintf(out,
			"buckets     %u fetches per step (%u calls, %u grouped), %s .. %s elements each (median %s); "
			"%u reduce buckets, %s elements\n",
			bk->fetches_per_step, bk->calls_per_step, bk->grouped_fetches,
			rule_format_count((double)bk->fetch_elements_min, b1, sizeof(b1)),
			rule_format_count((double)bk->fetch_elements_max, b2, sizeof(b2)),
			rule_format_count((double)bk->fetch_elements_median, b3, sizeof(b3)), bk->reduce_buckets_per_step,
			rule_format_count((double)bk->reduce_elements_per_step, b4, sizeof(b4)));
	}
	fprintf(out, "units       %u repeating unit%s x %u gather%s + %u root gather%s (%u leading, %u trailing)%s%s%s%s\n",
		u->repeating_units, u->repeating_units == 1 ? "" : "s", u->gathers_per_unit,
		u->gathers_per_unit == 1 ? "" : "s", u->root_gathers, u->root_gathers == 1 ? "" : "s",
		u->leading_gathers, u->trailing_gathers, u->layers_given ? ", --layers given" : "",
		u->repeating_unit_name[0] ? ", unit \"" : "", u->repeating_unit_name,
		u->repeating_unit_name[0] ? "\"" : "");
	fprintf(out, "            parameters: %s in all, %s per repeating unit, %s in the root, largest gather %s%s%s%s; "
		     "sharded over %u ranks\n",
		rule_format_count((double)u->total_params, b1, sizeof(b1)),
		rule_format_count((double)u->repeating_unit_params, b2, sizeof(b2)),
		rule_format_count((double)u->root_params, b3, sizeof(b3)),
		rule_format_count((double)u->largest_unit_params, b4, sizeof(b4)), u->largest_unit_name[0] ? " (\"" : "",
		u->largest_unit_name, u->largest_unit_name[0] ? "\")" : "", u->shard_ranks);
	fprintf(out, "reshard     reshard_after_forward=%s (non-root units: %u resharded, %u retained, %u to a group; "
		     "root %s)\n",
		analysis_reshard_format(&a->reshard, policy, sizeof(policy)), a->reshard.resharded_units,
		a->reshard.retained_units, a->reshard.group_units, a->reshard.root_resharded ? "resharded" : "kept");
	if (e->source == ANALYSIS_EXPOSURE_NONE && a->trace.sources_attached) {
		fprintf(out, "exposure    %s\n", analysis_attach_exposure_why());
	} else if (e->source == ANALYSIS_EXPOSURE_NONE) {
		fprintf(out, "exposure    not measured (no GPU intervals and no compute ranges in the trace)\n");
	} else {
		fprintf(out, "exposure    from %s timing, of step %u (the representative step: its compute wait is the median; "
			     "the gathers table and the breakdown are the same step's)\n",
			analysis_exposure_source_name(e->source), e->step);
		fprintf(out, "            AllGather %s, exposed %s", rule_format_ns((double)e->allgather_ns_per_step, b1, sizeof(b1)),
			rule_format_ns((double)e->exposed_allgather_ns_per_step, b2, sizeof(b2)));
		if (e->exposed_fraction >= 0)
			fprintf(out, " (%.1f%%)", 100 * e->exposed_fraction);
		fprintf(out, " (its own time minus compute, as HTA): forward %s, backward %s\n",
			rule_format_ns((double)e->forward_exposed_ns_per_step, b1, sizeof(b1)),
			rule_format_ns((double)e->backward_exposed_ns_per_step, b2, sizeof(b2)));
		fprintf(out, "            compute waited %s on gathers (their queueing behind other collectives included): "
			     "forward %s, backward %s; %s on other collectives\n",
			rule_format_ns((double)e->compute_wait_ns_per_step, b1, sizeof(b1)),
			rule_format_ns((double)e->forward_compute_wait_ns_per_step, b2, sizeof(b2)),
			rule_format_ns((double)e->backward_compute_wait_ns_per_step, b3, sizeof(b3)),
			rule_format_ns((double)e->other_compute_wait_ns_per_step, b4, sizeof(b4)));
		fprintf(out, "            ReduceScatter %s (exposed %s), AllReduce %s (exposed %s)\n",
			rule_format_ns((double)e->reduce_scatter_ns_per_step, b1, sizeof(b1)),
			rule_format_ns((double)e->exposed_reduce_scatter_ns_per_step, b2, sizeof(b2)),
			rule_format_ns((double)e->allreduce_ns_per_step, b3, sizeof(b3)),
			rule_format_ns((double)e->exposed_allreduce_ns_per_step, b4, sizeof(b4)));
		fprintf(out, "            causes (gathers, exposed, compute wait):");
		for (int c = 0; c < ANALYSIS_CAUSE_MAX; c++)
			fprintf(out, "%s %s %u %s %s", c > 0 ? "," : "", analysis_cause_name(c), e->cause_gathers[c],
				rule_format_ns((double)e->cause_ns[c], b1, sizeof(b1)),
				rule_format_ns((double)e->cause_compute_wait_ns[c], b2, sizeof(b2)));
		fprintf(out, "\n");
	}
	if (e->source == ANALYSIS_EXPOSURE_NONE)
		fprintf(out, "breakdown   step %s; compute, exposed communication and idle not measured",
			rule_format_ns((double)b->step_ns, b1, sizeof(b1)));
	else
		fprintf(out, "breakdown   step %u: %s = compute %s + exposed communication %s + idle %s", e->step,
			rule_format_ns((double)b->step_ns, b1, sizeof(b1)),
			rule_format_ns((double)b->compute_ns, b2, sizeof(b2)),
			rule_format_ns((double)b->exposed_comm_ns, b3, sizeof(b3)),
			rule_format_ns((double)b->idle_ns, b4, sizeof(b4)));
	report_mfu_text(out, &a->mfu);
}

static void print_comms(FILE *out, const struct analysis_result *a)
{
	if (a->ncomms == 0)
		return;
	fprintf(out, "\nCommunicators of rank %d (events per step; --fsdp-comm takes the id or dimension)\n",
		a->headline_rank);
	fprintf(out, "  %-16s %-16s %-16s %5s %4s %5s %5s %5s %5s %7s  %s\n", "role", "id", "dimension", "ranks", "rank",
		"AG", "RS", "AR", "other", "outside", "evidence");
	for (uint32_t i = 0; i < a->ncomms; i++) {
		const struct analysis_comm *c = &a->comms[i];
		fprintf(out, "  %-16s %016" PRIx64 " %016" PRIx64 " %5d %4d %5u %5u %5u %5u %7u  %s%s%s%s\n",
			analysis_comm_role_name(c->role), c->id, c->dimension, c->nranks, c->rank, c->allgathers,
			c->reduce_scatters, c->allreduces, c->broadcasts + c->point_to_point + c->alltoalls + c->other,
			c->outside, c->name[0] ? "\"" : "", c->name, c->name[0] ? "\": " : "", c->evidence);
	}
	if (a->tp_degree > 1)
		fprintf(out, "  tensor parallel over %u ranks: the model holds %u x the parameters the FSDP group gathers\n",
			a->tp_degree, a->tp_degree);
	if (a->nfsdp_groups < 2)
		return;
	fprintf(out, "  %u FSDP groups, the primary first (its figures are the report's; the ledger adds up their "
		     "shares, so its rows are sums, not P / N):\n",
		a->nfsdp_groups);
	for (uint32_t i = 0; i < a->nfsdp_groups && i < ANALYSIS_FSDP_GROUPS_MAX; i++) {
		const struct analysis_fsdp_group *g = &a->fsdp_groups[i];
		char policy[32], b1[32], b2[32], b3[32];
		fprintf(out,
			"    %u. communicator %d, %d ranks: %u AG, %u RS per step; %u forward units (%u x %u); reshard %s; "
			"P %s (x %u); AllGather %s, exposed %s\n",
			i + 1, g->comm, g->nranks, g->allgathers, g->reduce_scatters, g->forward_units, g->repeating_units,
			g->gathers_per_unit, analysis_reshard_format(&g->reshard, policy, sizeof(policy)),
			rule_format_count((double)g->params, b1, sizeof(b1)), g->degree,
			g->exposure_measured ? rule_format_ns((double)g->allgather_ns_per_step, b2, sizeof(b2)) : "not measured",
			g->exposure_measured ? rule_format_ns((double)g->exposed_allgather_ns_per_step, b3, sizeof(b3))
					     : "not measured");
	}
}

static void print_ledger(FILE *out, const struct analysis_ledger *l)
{
	char b1[32], b2[32], b3[32], b4[32];
	double per_param = l->param_bytes + l->grad_bytes + l->master_bytes + l->optimizer_bytes;

	fprintf(out, "\nMemory ledger (P %s parameters%s, N %u ranks, U %s, prefetch %u; bytes per rank)\n",
		rule_format_count((double)l->params, b1, sizeof(b1)),
		l->params_with_padding ? " including padding" : "", l->ranks,
		rule_format_count((double)l->largest_unit_params, b2, sizeof(b2)), l->prefetch);
	if (l->trainable_params && l->trainable_params < l->params)
		fprintf(out, "  persistent   (%g + %g) B x P + (%g + %g) B x T trained %s, / N   %s\n", l->param_bytes,
			l->master_bytes, l->grad_bytes, l->optimizer_bytes,
			rule_format_count((double)l->trainable_params, b2, sizeof(b2)),
			rule_format_bytes((double)l->persistent_bytes_per_rank, b1, sizeof(b1)));
	else
		fprintf(out, "  persistent   (%g + %g + %g + %g) B x P / N          %s\n", l->param_bytes, l->grad_bytes,
			l->master_bytes, l->optimizer_bytes,
			rule_format_bytes((double)l->persistent_bytes_per_rank, b1, sizeof(b1)));
	fprintf(out, "  transient    %g B x U x (1 + %u)                    %s\n", l->param_bytes, l->prefetch,
		rule_format_bytes((double)l->transient_bytes_per_rank, b1, sizeof(b1)));
	fprintf(out, "  peak state   persistent + transient              %s", rule_format_bytes((double)l->peak_state_bytes_per_rank, b1, sizeof(b1)));
	if (l->gpu_mem_bytes)
		fprintf(out, "; headroom %s of %s\n", rule_format_bytes((double)l->headroom_bytes, b2, sizeof(b2)),
			rule_format_bytes((double)l->gpu_mem_bytes, b3, sizeof(b3)));
	else
		fprintf(out, " (headroom: give --gpu-mem)\n");
	fprintf(out, "  wire / step  %s (model 3 P x %g B: %s; DDP 2 P: %s)\n",
		rule_format_bytes((double)l->wire_bytes_per_step, b1, sizeof(b1)), l->param_bytes,
		rule_format_bytes((double)l->model_wire_bytes_per_step, b2, sizeof(b2)),
		rule_format_bytes((double)l->ddp_wire_bytes_per_step, b3, sizeof(b3)));
	fprintf(out, "  for scale    DDP would hold %g B x P = %s per rank; the whole model as one unit gathers %s\n",
		per_param, rule_format_bytes((double)l->ddp_persistent_bytes_per_rank, b1, sizeof(b1)),
		rule_format_bytes((double)l->whole_model_transient_bytes, b4, sizeof(b4)));
}

/* Attached sources: the figures exposure needs were not measured (GPU
 * timing), so they read n/a, never a measured 0. */
static int attach_not_measured(const struct analysis_result *a)
{
	return a->trace.sources_attached && a->exposure.source == ANALYSIS_EXPOSURE_NONE;
}

static char *ns_or_na(int na, uint64_t ns, char *buf, size_t len)
{
	if (!na)
		return rule_format_ns((double)ns, buf, len);
	snprintf(buf, len, "n/a");
	return buf;
}

static void print_gathers(FILE *out, const struct analysis_result *a)
{
	char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], b7[32], b8[32];
	uint64_t sum[5] = {0, 0, 0, 0, 0};
	int na = attach_not_measured(a);

	if (a->ngathers == 0)
		return;
	fprintf(out, "\nAllGathers of step %u, the representative step (issue order; time: its own interval, exposed: of "
		     "it with no compute, hidden: the rest,\n  wait: compute's wait on it, queueing included; the total "
		     "row sums the rows: the exposure figures above)\n",
		a->exposure.step);
	fprintf(out, "  %4s %3s %-8s %5s %6s %-24s %-8s %5s %10s %10s %9s %9s %9s %9s %9s %9s %s\n", "#", "mb", "phase", "unit",
		"repeat", "name", "dtype", "ranks", "bytes/rank", "gathered", "time", "exposed", "hidden", "wait", "queued",
		"call", "cause");
	for (uint32_t i = 0; i < a->ngathers; i++) {
		const struct analysis_gather *g = &a->gathers[i];
		char mbuf[16];

		if (g->microbatch >= 0)
			snprintf(mbuf, sizeof mbuf, "%d", g->microbatch);
		else
			snprintf(mbuf, sizeof mbuf, "-");
		fprintf(out, "  %4u %3s %-8s %5d %6d %-24.24s %-8s %5d %10s %10s %9s %9s %9s %9s %9s %9s %s%s\n", g->index,
			mbuf, g->phase ? analysis_phase_name(g->phase) : "-", g->unit, g->repeat, g->name[0] ? g->name : "-",
			record_dtype_name(g->dtype), g->nranks, rule_format_bytes((double)g->bytes, b1, sizeof(b1)),
			rule_format_bytes((double)g->bytes * (g->nranks > 0 ? g->nranks : 1), b2, sizeof(b2)),
			ns_or_na(na, g->duration_ns, b3, sizeof(b3)), ns_or_na(na, g->exposed_ns, b4, sizeof(b4)),
			ns_or_na(na, g->hide_ns, b5, sizeof(b5)), ns_or_na(na, g->compute_wait_ns, b6, sizeof(b6)),
			ns_or_na(na, g->queued_ns, b7, sizeof(b7)), ns_or_na(na, g->call_ns, b8, sizeof(b8)),
			na ? "n/a" : analysis_cause_name(g->cause), g->recompute ? " (recompute)" : "");
		sum[0] += g->duration_ns;
		sum[1] += g->exposed_ns;
		sum[2] += g->hide_ns;
		sum[3] += g->compute_wait_ns;
		sum[4] += g->queued_ns;
	}
	fprintf(out, "  %-92s %9s %9s %9s %9s %9s\n", "total", ns_or_na(na, sum[0], b3, sizeof(b3)),
		ns_or_na(na, sum[1], b4, sizeof(b4)), ns_or_na(na, sum[2], b5, sizeof(b5)),
		ns_or_na(na, sum[3], b6, sizeof(b6)), ns_or_na(na, sum[4], b7, sizeof(b7)));
}

/* A rank's steps the verdict left out, for its row: "-" when none. */
static void report_left_out(const struct analysis_rank *r, char *buf, size_t len)
{
	int n = 0;

	buf[0] = 0;
	if (r->steps_lost)
		n += snprintf(buf + n, len - (size_t)n, "%u step%s lost collectives (%" PRIu64 " missing)",
			      r->steps_lost, r->steps_lost == 1 ? "" : "s", r->collectives_lost);
	else if (r->collectives_lost)
		n += snprintf(buf + n, len - (size_t)n, "%" PRIu64 " collective%s missing", r->collectives_lost,
			      r->collectives_lost == 1 ? "" : "s");
	if (r->cut && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "%s%s", n ? "; " : "",
			 r->steps_cut ? "1 cut off (no process_end)" : "no process_end");
	if (!buf[0])
		snprintf(buf, len, "-");
}

static void print_ranks(FILE *out, const struct analysis_result *a)
{
	const struct analysis_spread *sp = &a->spread;
	char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
	int na = attach_not_measured(a);

	fprintf(out, "\nRanks (%u with analysed steps; AG time, exposed and wait: each rank's representative step)", sp->ranks);
	if (sp->slowest_rank >= 0)
		fprintf(out, ": rank %d entered collectives last most often (%.0f%%); arrival spread %s per step, "
			     "largest %s",
			sp->slowest_rank, 100 * sp->slowest_rank_fraction,
			rule_format_ns((double)sp->skew_ns_per_step, b1, sizeof(b1)),
			rule_format_ns((double)sp->max_skew_ns, b2, sizeof(b2)));
	fprintf(out, "\n  %4s %6s %7s %6s %9s %9s %9s %9s %9s %11s %9s %7s  %s\n", "rank", "pid", "steps", "AG", "step",
		"AG time", "exposed", "wait", "compute", "last/match", "late", "dropped", "left out");
	for (uint32_t i = 0; i < a->nper_rank; i++) {
		const struct analysis_rank *r = &a->per_rank[i];
		char lm[32], left[96];

		snprintf(lm, sizeof(lm), "%u/%u", r->last_arrivals, r->matched_collectives);
		report_left_out(r, left, sizeof(left));
		if (r->steps_analyzed == 0 && (r->steps_lost || r->steps_cut)) {
			/* no figure: every step it has was left out, none measured zero */
			fprintf(out, "  %4d %6u %7u %6s %9s %9s %9s %9s %9s %11s %9s %7" PRIu64 "  %s\n", r->rank, r->pid,
				0u, "-", "-", "-", "-", "-", "-", lm, "-", r->dropped_records, left);
			continue;
		}
		fprintf(out, "  %4d %6u %7u %6u %9s %9s %9s %9s %9s %11s %9s %7" PRIu64 "  %s\n", r->rank, r->pid,
			r->steps_analyzed, r->per_step.allgathers, rule_format_ns((double)r->step_ns, b1, sizeof(b1)),
			ns_or_na(na, r->allgather_ns, b2, sizeof(b2)), ns_or_na(na, r->exposed_allgather_ns, b3, sizeof(b3)),
			ns_or_na(na, r->compute_wait_ns, b6, sizeof(b6)), ns_or_na(na, r->compute_ns, b4, sizeof(b4)), lm,
			rule_format_ns((double)r->late_ns_per_step, b5, sizeof(b5)), r->dropped_records, left);
	}
}

/*
 * Calls in flight, when there is something to say: the hangs and the
 * mismatches, or calls still in flight at the end under the timeout, or
 * that this trace cannot show a wait at all (then no hang is ruled out, and
 * the report must not read as if it were).
 */
static void print_flight(FILE *out, const struct analysis_result *a)
{
	const struct analysis_flight *f = &a->flight;
	char line[1024], t[32];

	if (!flight_shows_waits(a)) {
		if (a->trace.collectives)
			fprintf(out, "\nCalls in flight: not recorded (no enter records, no GPU intervals): a hang cannot be "
				     "seen in this trace, so none is ruled out\n");
		return;
	}
	if (!f->nhangs && !f->nmismatches && !f->in_flight)
		return;
	fprintf(out, "\nCalls in flight (--hang-timeout %s; %u source%s with enter records, %u with GPU intervals)\n",
		rule_format_ns((double)f->timeout_ns, t, sizeof(t)), f->sources_enter, f->sources_enter == 1 ? "" : "s",
		f->sources_cupti);
	for (uint32_t i = 0; i < f->nhangs && i < ANALYSIS_HANGS_MAX; i++)
		fprintf(out, "  hang: %s\n", flight_hang_line(a, &f->hangs[i], line, sizeof(line)));
	if (f->hangs_total > f->nhangs)
		fprintf(out, "  and %u more hang%s\n", f->hangs_total - f->nhangs, f->hangs_total - f->nhangs == 1 ? "" : "s");
	for (uint32_t i = 0; i < f->nmismatches && i < ANALYSIS_MISMATCHES_MAX; i++)
		fprintf(out, "  mismatch: %s\n", flight_mismatch_line(a, &f->mismatches[i], line, sizeof(line)));
	if (f->mismatched_collectives > f->nmismatches)
		fprintf(out, "  %" PRIu64 " mismatched collectives in all\n", f->mismatched_collectives);
	if (!f->nhangs && f->in_flight)
		fprintf(out, "  %u collective%s in flight at the end, none waited past the timeout\n", f->in_flight,
			f->in_flight == 1 ? "" : "s");
}

void diagnosis_print_report(FILE *out, const struct diagnosis *d)
{
	const struct analysis_result *a = d->result;
	const struct analysis_sizes *s = &a->sizes;
	char b1[32], b2[32], b3[32], b4[32], t1[64], t2[64];

	print_overview(out, d);
	report_nodes_text(out, d);
	fprintf(out, "sizes       AllGather per call %s .. %s (median %s per rank, %s), ReduceScatter median %s (%s)\n",
		rule_format_bytes((double)s->allgather_bytes_min, b1, sizeof(b1)),
		rule_format_bytes((double)s->allgather_bytes_max, b2, sizeof(b2)),
		rule_format_bytes((double)s->allgather_bytes_median, b3, sizeof(b3)), dtype_list(s->allgather_dtypes, t1, sizeof(t1)),
		rule_format_bytes((double)s->reduce_scatter_bytes_median, b4, sizeof(b4)),
		dtype_list(s->reduce_scatter_dtypes, t2, sizeof(t2)));
	report_worlds_text(out, d);
	print_comms(out, a);
	print_ledger(out, &a->ledger);
	print_gathers(out, a);
	if (whatif_text(out, a) < 0)
		fprintf(out, "\nWhat-if: out of memory\n");
	print_ranks(out, a);
	print_flight(out, a);
	report_sources_table(out, a);
	report_sources_attach(out, a);
	if (a->nnotes) {
		fprintf(out, "\nNotes\n");
		for (uint32_t i = 0; i < a->nnotes && i < ANALYSIS_NOTES_MAX; i++)
			fprintf(out, "  - %s\n", a->notes[i]);
	}
	if (d->damage[0])
		fprintf(out, "\nThe trace is damaged: %s; analysed up to there.\n", d->damage);
	fprintf(out, "\nFindings (");
	diagnosis_print_tally(out, d->findings);
	fprintf(out, ")\n\n");
	if (findings_count(d->findings) == 0)
		fprintf(out, "none\n");
	diagnosis_print_findings(out, d->findings, 1, 0);
}
