/*
 * exposed_gather.c - rule exposed-gather: AllGather time with no compute
 * under it (HTA's exposed figure), above a threshold, with the causes the
 * analysis assigned and, beside it, how long compute waited on the gathers.
 * Every figure is of the analysis' representative step (analysis.h).
 *
 * The fix depends on the cause, so the fix texts list one remedy per cause
 * present, the cause that cost the most first.
 */
#include "rules/rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The remedies, per cause and per framework. */
struct remedy {
	const char *fsdp2, *fsdp1, *deepspeed;
};

static const struct remedy remedies[ANALYSIS_CAUSE_MAX] = {
	[ANALYSIS_CAUSE_NO_PREFETCH] = {
		"# no-prefetch: gather block i+1 while block i computes (and i-1 in backward)\n"
		"blocks = list(model.layers)\n"
		"for i, block in enumerate(blocks):\n"
		"    if i + 1 < len(blocks):\n"
		"        block.set_modules_to_forward_prefetch([blocks[i + 1]])\n"
		"    if i > 0:\n"
		"        block.set_modules_to_backward_prefetch([blocks[i - 1]])\n",
		"# no-prefetch: let FSDP issue the next unit's gather early\n"
		"model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}),\n"
		"             forward_prefetch=True,\n"
		"             backward_prefetch=BackwardPrefetch.BACKWARD_PRE,\n"
		"             limit_all_gathers=True)\n",
		"// no-prefetch: overlap fetches with compute and fetch further ahead\n"
		"\"zero_optimization\": { \"stage\": 3, \"overlap_comm\": true,\n"
		"  \"stage3_prefetch_bucket_size\": 1e8,     // elements: about two blocks\n"
		"  \"stage3_max_live_parameters\": 1e9 }\n",
	},
	[ANALYSIS_CAUSE_BANDWIDTH_BOUND] = {
		"# bandwidth-bound: the gather outlasts the compute it hides behind; move fewer bytes\n"
		"# or do more compute per gather\n"
		"mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)\n"
		"fully_shard(block, mp_policy=mp, reshard_after_forward=8)  # backward gathers inside the node\n"
		"# or HSDP: shard inside the node, replicate across nodes\n"
		"mesh = init_device_mesh(\"cuda\", (nodes, gpus_per_node), mesh_dim_names=(\"replicate\", \"shard\"))\n"
		"fully_shard(block, mesh=mesh, mp_policy=mp)\n"
		"# and a larger micro-batch gives each gather more compute to hide behind\n",
		"# bandwidth-bound: gather in bf16 and keep the gathers inside the node\n"
		"model = FSDP(model, mixed_precision=MixedPrecision(param_dtype=torch.bfloat16,\n"
		"                                                  reduce_dtype=torch.float32),\n"
		"             sharding_strategy=ShardingStrategy.HYBRID_SHARD)\n",
		"// bandwidth-bound: bf16 parameters; hierarchical partitioning (ZeRO++) keeps gathers in the node\n"
		"\"bf16\": { \"enabled\": true },\n"
		"\"zero_optimization\": { \"stage\": 3, \"zero_hpz_partition_size\": 8 }\n",
	},
	[ANALYSIS_CAUSE_FIRST_OF_PHASE] = {
		"# first-of-phase: nothing of the phase runs before the first gather. Start it early\n"
		"# and keep the last block gathered into backward (torchtitan does):\n"
		"model.unshard(async_op=True)          # before the batch is loaded / moved\n"
		"fully_shard(model.layers[-1], mp_policy=mp, reshard_after_forward=False)\n",
		"# first-of-phase: the root's gather starts each forward; forward_prefetch=True\n"
		"# overlaps the rest. Keep the root small (wrap embeddings and head separately).\n",
		NULL,
	},
	[ANALYSIS_CAUSE_HOST_LATE] = {
		"# host-late: the GPU waited for the CPU to issue work. Reduce host overhead:\n"
		"model = torch.compile(model)          # fewer Python ops per block\n"
		"# no .item() / .cpu() / print(tensor) inside the step; pin_memory=True and\n"
		"# num_workers > 0 in the DataLoader\n",
		NULL,
		NULL,
	},
};

/* by_ns - the causes ordered by exposed ns, most first; returns how many
 * causes (other than hidden) have exposure. */
static int causes_by_ns(const struct analysis_exposure *e, int order[ANALYSIS_CAUSE_MAX])
{
	int n = 0;

	for (int c = 1; c < ANALYSIS_CAUSE_MAX; c++)
		if (e->cause_ns[c] > 0 || e->cause_gathers[c] > 0)
			order[n++] = c;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && e->cause_ns[order[j]] > e->cause_ns[order[j - 1]]; j--) {
			int t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	return n;
}

/* top_gathers - up to 3 gathers with the most exposed ns, as text lines,
 * each with its figures of the representative step. */
static void top_gathers(const struct analysis_result *a, FILE *f)
{
	uint32_t picked[3];
	int n = 0;

	for (int round = 0; round < 3; round++) {
		int best = -1;

		for (uint32_t i = 0; i < a->ngathers; i++) {
			int used = 0;

			for (int j = 0; j < n; j++)
				used |= picked[j] == i;
			/* a gather the analysis judged hidden is not an example */
			if (used || a->gathers[i].exposed_ns == 0 || a->gathers[i].cause == ANALYSIS_CAUSE_HIDDEN)
				continue;
			if (best < 0 || a->gathers[i].exposed_ns > a->gathers[best].exposed_ns)
				best = (int)i;
		}
		if (best < 0)
			break;
		picked[n++] = (uint32_t)best;
	}
	for (int j = 0; j < n; j++) {
		const struct analysis_gather *g = &a->gathers[picked[j]];
		char d[32], x[32], h[32], w[32], q[32];

		fprintf(f, "\ngather #%u (%s%s%s): %s, exposed %s, hidden %s; compute waited %s on it (queued %s); cause %s",
			g->index, analysis_phase_name(g->phase), g->name[0] ? ", " : "", g->name,
			rule_format_ns((double)g->duration_ns, d, sizeof(d)), rule_format_ns((double)g->exposed_ns, x, sizeof(x)),
			rule_format_ns((double)g->hide_ns, h, sizeof(h)), rule_format_ns((double)g->compute_wait_ns, w, sizeof(w)),
			rule_format_ns((double)g->queued_ns, q, sizeof(q)), analysis_cause_name(g->cause));
	}
}

/* An attached job: its gathers were seen, their exposure cannot be. Said
 * as a finding, so that no list of findings reads as if exposure were clean. */
static int not_measured(const struct rule *self, findings_t *out)
{
	char *message = finding_printf("AllGather exposure not measured: %s", analysis_attach_exposure_why());
	char *evidence = finding_printf("the trace's sources were observed by `fsdpscope attach` (uprobes on "
					"libnccl: host calls, no GPU intervals): exposed-gather was not checked");
	char *fix = finding_printf("fsdpscope run -- <the job's command>: the agent records GPU intervals with "
				   "CUPTI, from which exposure is measured");

	return findings_take(out, self, RULE_INFO, message, evidence, fix, NULL, NULL) ? 0 : -ENOMEM;
}

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	const struct analysis_exposure *e = &a->exposure;
	double frac = e->exposed_fraction, step_frac;
	uint64_t step_ns;
	int order[ANALYSIS_CAUSE_MAX], ncauses;
	char b1[32], b2[32], b3[32], b4[32];
	char *message = NULL, *evidence = NULL, *fix[3] = {NULL, NULL, NULL};
	size_t len;
	FILE *f;
	struct finding *fd;

	if (a->steps_analyzed && e->source == ANALYSIS_EXPOSURE_NONE && a->trace.sources_attached)
		return not_measured(self, out);
	if (a->steps_analyzed == 0 || e->source == ANALYSIS_EXPOSURE_NONE || frac < 0)
		return 0;
	if (frac < rule_threshold(c, RULE_T_EXPOSED_FRACTION))
		return 0;
	/* the breakdown is the representative step's, as the exposure figures */
	step_ns = a->breakdown.step_ns ? a->breakdown.step_ns : a->step_ns;
	step_frac = step_ns > 0 ? (double)e->exposed_allgather_ns_per_step / (double)step_ns : -1;
	if (step_frac >= 0 && step_frac < rule_threshold(c, RULE_T_EXPOSED_STEP_FRACTION))
		return 0;
	ncauses = causes_by_ns(e, order);

	if (step_frac >= 0)
		snprintf(b2, sizeof(b2), ", %.0f%% of the step", 100 * step_frac);
	else
		b2[0] = 0;
	message = finding_printf("%.0f%% of AllGather time is exposed (%s in a typical step%s): no compute runs under "
				 "it%s%s",
				 100 * frac, rule_format_ns((double)e->exposed_allgather_ns_per_step, b1, sizeof(b1)), b2,
				 ncauses ? "; mostly " : "", ncauses ? analysis_cause_name(order[0]) : "");

	f = open_memstream(&evidence, &len);
	if (!f)
		goto nomem;
	fprintf(f, "step %u (the representative step), from %s timing", e->step, analysis_exposure_source_name(e->source));
	if (step_ns > 0)
		fprintf(f, ": %s", rule_format_ns((double)step_ns, b3, sizeof(b3)));
	fprintf(f, "\nexposed AllGather (its own time minus compute, as HTA): %s of %s (%.0f%%); forward %s, backward %s; "
		   "%u of %u gathers exposed",
		rule_format_ns((double)e->exposed_allgather_ns_per_step, b1, sizeof(b1)),
		rule_format_ns((double)e->allgather_ns_per_step, b2, sizeof(b2)), 100 * frac,
		rule_format_ns((double)e->forward_exposed_ns_per_step, b3, sizeof(b3)),
		rule_format_ns((double)e->backward_exposed_ns_per_step, b4, sizeof(b4)), e->exposed_gathers,
		a->per_step.allgathers);
	fprintf(f, "\ncompute wait on the gathers (queueing behind other collectives included): %s",
		rule_format_ns((double)e->compute_wait_ns_per_step, b1, sizeof(b1)));
	if (ncauses) {
		fprintf(f, "\ncauses (exposed, compute wait):");
		for (int i = 0; i < ncauses; i++)
			fprintf(f, "%s %s %u gather(s) %s, %s", i ? ";" : "", analysis_cause_name(order[i]),
				e->cause_gathers[order[i]], rule_format_ns((double)e->cause_ns[order[i]], b1, sizeof(b1)),
				rule_format_ns((double)e->cause_compute_wait_ns[order[i]], b2, sizeof(b2)));
	}
	top_gathers(a, f);
	if (fclose(f))
		goto nomem;

	/* One remedy per cause present, the costliest first; the no-prefetch
	 * remedy when the analysis could not assign causes. */
	if (!ncauses)
		order[ncauses++] = ANALYSIS_CAUSE_NO_PREFETCH;
	for (int which = 0; which < 3; which++) {
		int any = 0;

		f = open_memstream(&fix[which], &len);
		if (!f)
			goto nomem;
		for (int i = 0; i < ncauses; i++) {
			const struct remedy *r = &remedies[order[i]];
			const char *text = which == 0 ? r->fsdp2 : which == 1 ? r->fsdp1 : r->deepspeed;

			if (!r->fsdp2)
				continue;
			/* A framework without its own remedy for a cause: the
			 * FSDP2 advice is not code it can run; skip it. */
			if (text) {
				any = 1;
				fputs(text, f);
			}
		}
		if (fclose(f))
			goto nomem;
		/* No remedy of its own for any cause present: say nothing. */
		if (which > 0 && !any) {
			free(fix[which]);
			fix[which] = NULL;
		}
	}
	fd = findings_take(out, self, RULE_WARNING, message, evidence, fix[0], fix[1], fix[2]);
	if (!fd)
		return -ENOMEM;
	finding_metric(fd, "exposed_fraction", frac);
	finding_metric(fd, "exposed_allgather_ns_per_step", (double)e->exposed_allgather_ns_per_step);
	finding_metric(fd, "allgather_ns_per_step", (double)e->allgather_ns_per_step);
	finding_metric(fd, "compute_wait_ns_per_step", (double)e->compute_wait_ns_per_step);
	if (step_frac >= 0)
		finding_metric(fd, "exposed_step_fraction", step_frac);
	for (int i = 1; i < ANALYSIS_CAUSE_MAX; i++) {
		static const char *const names[ANALYSIS_CAUSE_MAX] = {
			NULL, "first_of_phase_ns", "no_prefetch_ns", "bandwidth_bound_ns", "host_late_ns",
		};

		if (names[i])
			finding_metric(fd, names[i], (double)e->cause_ns[i]);
	}
	return 0;
nomem:
	free(message);
	free(evidence);
	for (int i = 0; i < 3; i++)
		free(fix[i]);
	return -ENOMEM;
}

const struct rule rule_exposed_gather = {
	.id = "exposed-gather",
	.title = "AllGather time not hidden behind compute",
	.explanation =
		"FSDP pays about 1.5x DDP's communication (AllGather forward, AllGather backward, "
		"ReduceScatter) and hides it by gathering unit i+1 while unit i computes. An exposed gather is "
		"AllGather time during which no compute runs on the GPU: it adds to the step time one for one. "
		"The cause decides the fix: the first gather of a phase has nothing before it (start it "
		"earlier); a gather issued only when its unit is needed lacks prefetch; a gather longer than "
		"the compute it overlaps is bandwidth-bound (move fewer bytes, keep it inside the node, or do "
		"more compute per gather); a gather issued late because the host was behind needs less host "
		"overhead. Exposed is measured as in PyTorch's trace analysis (HTA): each gather's own time minus "
		"the union of compute. Beside it, compute wait is how long compute stood still waiting for a "
		"gather, the time it queued behind other collectives (reduce-scatters) included: what the step "
		"loses to it. All figures are of one representative step, so that they add up.",
	.max_severity = RULE_WARNING,
	.check = check,
};
