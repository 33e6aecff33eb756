/*
 * exposed_gather.c - rule exposed-gather: AllGather time with no compute
 * under it (HTA's exposed figure), above a threshold, with the causes the
 * analysis assigned and, beside it, how long compute waited on the gathers.
 * Every figure is of the analysis' representative step (analysis.h).
 *
 * The fix depends on the cause, so the fix texts list one remedy per cause
 * present, the cause that cost the most first, and only the remedies that
 * apply to this job: the analysis' bandwidth-bound gathers split by what
 * bounds each (analysis_gather_bound, the same judgement small-collectives
 * reads), node-level remedies (HSDP, an integer reshard_after_forward,
 * ZeRO++'s hierarchical partition) only for a job on more than one node.
 */
#include "rules/rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The causes as the advice tells them apart: the analysis' causes, its
 * bandwidth-bound ones split by what bounds each gather. */
#define CAUSE_LATENCY ANALYSIS_CAUSE_MAX
#define CAUSES (ANALYSIS_CAUSE_MAX + 1)

/* The remedies, per cause and per framework (bandwidth-bound: bandwidth_fix,
 * from the job's nodes). */
struct remedy {
	const char *fsdp2, *fsdp1, *deepspeed;
};

static const struct remedy remedies[CAUSES] = {
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
	[ANALYSIS_CAUSE_FIRST_OF_PHASE] = {
		"# first-of-phase: nothing of the phase runs before the first gather. Start it early\n"
		"# and keep the last block gathered into backward (torchtitan does):\n"
		"model.unshard(async_op=True)          # before the batch is loaded / moved\n"
		"fully_shard(model.layers[-1], mp_policy=mp, reshard_after_forward=False)\n",
		"# first-of-phase: the root's gather starts each forward and nothing runs before it to\n"
		"# hide it. Keep the root small (wrap embeddings and head separately).\n",
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
	[CAUSE_LATENCY] = {
		"# latency-bound: the gather's time is its fixed cost, not its bytes: fewer, larger gathers\n"
		"blocks = list(model.layers)\n"
		"for i in range(0, len(blocks), 2):\n"
		"    fully_shard(blocks[i:i + 2], mp_policy=mp)  # a list: one unit (PyTorch 2.6+)\n",
		"# latency-bound: fewer, larger units\n"
		"model = FSDP(model, auto_wrap_policy=functools.partial(size_based_auto_wrap_policy,\n"
		"                                                       min_num_params=int(1e8)))\n",
		"// latency-bound: fewer, larger fetches\n"
		"\"zero_optimization\": { \"stage\": 3, \"stage3_prefetch_bucket_size\": 5e8 }\n",
	},
};

/* The bandwidth-bound remedy: fewer bytes per gather, more compute behind
 * it; keeping gathers inside a node only where the job spans nodes. */
static void bandwidth_fix(FILE *f, int which, uint32_t nodes, uint32_t ranks)
{
	uint32_t per_node = nodes > 1 && ranks >= nodes ? ranks / nodes : 0;

	if (which == 0) {
		fputs("# bandwidth-bound: the gather outlasts the compute it hides behind; move fewer bytes\n"
		      "# or do more compute per gather\n"
		      "mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)\n", f);
		if (per_node) {
			fprintf(f, "fully_shard(block, mp_policy=mp, reshard_after_forward=%u)  # backward gathers inside "
				   "the node\n", per_node);
			fprintf(f, "# or HSDP: shard inside the node, replicate across nodes\n"
				   "mesh = init_device_mesh(\"cuda\", (%u, %u), mesh_dim_names=(\"replicate\", \"shard\"))\n"
				   "fully_shard(block, mesh=mesh, mp_policy=mp)\n", nodes, per_node);
		} else {
			fputs("fully_shard(block, mp_policy=mp)\n", f);
		}
		fputs("# and a larger micro-batch gives each gather more compute to hide behind\n", f);
	} else if (which == 1) {
		fprintf(f, "# bandwidth-bound: gather in bf16%s\n"
			   "model = FSDP(model, mixed_precision=MixedPrecision(param_dtype=torch.bfloat16,\n"
			   "                                                  reduce_dtype=torch.float32)%s)\n",
			per_node ? " and keep the gathers inside the node" : "",
			per_node ? ",\n             sharding_strategy=ShardingStrategy.HYBRID_SHARD" : "");
	} else {
		fprintf(f, "// bandwidth-bound: bf16 parameters%s\n\"bf16\": { \"enabled\": true }%s\n",
			per_node ? "; hierarchical partitioning (ZeRO++) keeps gathers in the node" : "",
			per_node ? "," : "");
		if (per_node)
			fprintf(f, "\"zero_optimization\": { \"stage\": 3, \"zero_hpz_partition_size\": %u }\n",
				per_node);
	}
}

/* The exposure by advice cause: the analysis' figures, with the
 * latency-bound part of its bandwidth-bound gathers moved to CAUSE_LATENCY. */
struct split {
	uint32_t gathers[CAUSES];
	uint64_t ns[CAUSES], wait_ns[CAUSES];
};

/* gather_cause - a gather's advice cause: bandwidth-bound ones by what
 * bounds them. */
static int gather_cause(const struct analysis_result *a, const struct analysis_gather *g, double small)
{
	if (g->cause == ANALYSIS_CAUSE_BANDWIDTH_BOUND && analysis_gather_bound(a, g, small) == ANALYSIS_BOUND_LATENCY)
		return CAUSE_LATENCY;
	return g->cause;
}

static const char *cause_name(int c)
{
	return c == CAUSE_LATENCY ? "latency-bound" : analysis_cause_name(c);
}

static void split_causes(const struct analysis_result *a, double small, struct split *s)
{
	const struct analysis_exposure *e = &a->exposure;
	uint32_t n = 0;
	uint64_t ns = 0, wait = 0;

	memset(s, 0, sizeof(*s));
	for (int c = 0; c < ANALYSIS_CAUSE_MAX; c++) {
		s->gathers[c] = e->cause_gathers[c];
		s->ns[c] = e->cause_ns[c];
		s->wait_ns[c] = e->cause_compute_wait_ns[c];
	}
	for (uint32_t i = 0; i < a->ngathers; i++) {
		if (gather_cause(a, &a->gathers[i], small) != CAUSE_LATENCY)
			continue;
		n++;
		ns += a->gathers[i].exposed_ns;
		wait += a->gathers[i].compute_wait_ns;
	}
	/* the per-gather figures are the step's as the cause figures: clamp
	 * only against rounding between the two */
	n = n < s->gathers[ANALYSIS_CAUSE_BANDWIDTH_BOUND] ? n : s->gathers[ANALYSIS_CAUSE_BANDWIDTH_BOUND];
	ns = ns < s->ns[ANALYSIS_CAUSE_BANDWIDTH_BOUND] ? ns : s->ns[ANALYSIS_CAUSE_BANDWIDTH_BOUND];
	wait = wait < s->wait_ns[ANALYSIS_CAUSE_BANDWIDTH_BOUND] ? wait : s->wait_ns[ANALYSIS_CAUSE_BANDWIDTH_BOUND];
	s->gathers[CAUSE_LATENCY] = n;
	s->ns[CAUSE_LATENCY] = ns;
	s->wait_ns[CAUSE_LATENCY] = wait;
	s->gathers[ANALYSIS_CAUSE_BANDWIDTH_BOUND] -= n;
	s->ns[ANALYSIS_CAUSE_BANDWIDTH_BOUND] -= ns;
	s->wait_ns[ANALYSIS_CAUSE_BANDWIDTH_BOUND] -= wait;
}

/* causes_by_ns - the causes ordered by exposed ns, most first; returns how
 * many causes (other than hidden) have exposure. */
static int causes_by_ns(const struct split *s, int order[CAUSES])
{
	int n = 0;

	for (int c = 1; c < CAUSES; c++)
		if (s->ns[c] > 0 || s->gathers[c] > 0)
			order[n++] = c;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && s->ns[order[j]] > s->ns[order[j - 1]]; j--) {
			int t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	return n;
}

/* top_gathers - up to 3 gathers with the most exposed ns, as text lines,
 * each with its figures of the representative step. */
static void top_gathers(const struct analysis_result *a, double small, FILE *f)
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
			rule_format_ns((double)g->queued_ns, q, sizeof(q)), cause_name(gather_cause(a, g, small)));
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

/* write_fixes - one remedy per cause present, the costliest first, into
 * fix[0..2] (FSDP2, FSDP1, DeepSpeed); a framework with no remedy of its
 * own for any cause present gets none. Returns 0 or -ENOMEM. */
static int write_fixes(const struct analysis_result *a, const int *order, int ncauses, char *fix[3])
{
	uint32_t nodes = analysis_nodes(a);
	uint32_t ranks = a->world_size > 0 ? (uint32_t)a->world_size : a->ranks;
	size_t len;

	for (int which = 0; which < 3; which++) {
		int any = 0;
		FILE *f = open_memstream(&fix[which], &len);

		if (!f)
			return -ENOMEM;
		if (!ncauses)
			fputs("# the analysis assigned no cause to the exposed gathers: see each gather's timing in\n"
			      "# fsdpscope report\n", f);
		for (int i = 0; i < ncauses; i++) {
			const struct remedy *r = &remedies[order[i]];
			const char *text = which == 0 ? r->fsdp2 : which == 1 ? r->fsdp1 : r->deepspeed;

			if (order[i] == ANALYSIS_CAUSE_BANDWIDTH_BOUND) {
				bandwidth_fix(f, which, nodes, ranks);
				any = 1;
				continue;
			}
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
			return -ENOMEM;
		if (which > 0 && !any) {
			free(fix[which]);
			fix[which] = NULL;
		}
	}
	return 0;
}

static int check(const struct rule *self, const struct analysis_result *a, const struct rule_config *c,
		 findings_t *out)
{
	const struct analysis_exposure *e = &a->exposure;
	double frac = e->exposed_fraction, step_frac;
	uint64_t step_ns;
	int order[CAUSES], ncauses;
	double small = rule_threshold(c, RULE_T_SMALL_GATHER_BYTES);
	struct split sp;
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
	split_causes(a, small, &sp);
	ncauses = causes_by_ns(&sp, order);

	if (step_frac >= 0)
		snprintf(b2, sizeof(b2), ", %.0f%% of the step", 100 * step_frac);
	else
		b2[0] = 0;
	message = finding_printf("%.0f%% of AllGather time is exposed (%s in a typical step%s): no compute runs under "
				 "it%s%s",
				 100 * frac, rule_format_ns((double)e->exposed_allgather_ns_per_step, b1, sizeof(b1)), b2,
				 ncauses ? "; mostly " : "", ncauses ? cause_name(order[0]) : "");

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
			fprintf(f, "%s %s %u gather(s) %s, %s", i ? ";" : "", cause_name(order[i]), sp.gathers[order[i]],
				rule_format_ns((double)sp.ns[order[i]], b1, sizeof(b1)),
				rule_format_ns((double)sp.wait_ns[order[i]], b2, sizeof(b2)));
	}
	top_gathers(a, small, f);
	if (fclose(f))
		goto nomem;

	if (write_fixes(a, order, ncauses, fix) < 0)
		goto nomem;
	fd = findings_take(out, self, RULE_WARNING, message, evidence, fix[0], fix[1], fix[2]);
	if (!fd)
		return -ENOMEM;
	finding_metric(fd, "exposed_fraction", frac);
	finding_metric(fd, "exposed_allgather_ns_per_step", (double)e->exposed_allgather_ns_per_step);
	finding_metric(fd, "allgather_ns_per_step", (double)e->allgather_ns_per_step);
	finding_metric(fd, "compute_wait_ns_per_step", (double)e->compute_wait_ns_per_step);
	if (step_frac >= 0)
		finding_metric(fd, "exposed_step_fraction", step_frac);
	for (int i = 1; i < CAUSES; i++) {
		static const char *const names[CAUSES] = {
			NULL, "first_of_phase_ns", "no_prefetch_ns", "bandwidth_bound_ns", "host_late_ns", "latency_bound_ns",
		};

		if (names[i])
			finding_metric(fd, names[i], (double)sp.ns[i]);
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
		"earlier); a gather issued only when its unit is needed, in a step that issues its gathers so, "
		"lacks prefetch; a gather longer than the compute it overlaps is latency-bound when the "
		"latency fitted on the step's gathers outweighs its bytes (fewer, larger gathers) and "
		"bandwidth-bound otherwise (move fewer bytes or do more compute per gather; on more than one "
		"node, keep it inside the node); a gather issued late because the host was behind needs less "
		"host overhead. Each fix carries its predicted gain (the what-if replay, or at most the exposed "
		"time of the gathers it is about); when every one is under fix_gain_fraction of the step the "
		"finding is info, since no fix offered would pay. Exposed is measured as in PyTorch's trace "
		"analysis (HTA): each gather's own time minus "
		"the union of compute. Beside it, compute wait is how long compute stood still waiting for a "
		"gather, the time it queued behind other collectives (reduce-scatters) included: what the step "
		"loses to it. All figures are of one representative step, so that they add up.",
	.max_severity = RULE_WARNING,
	.check = check,
};
