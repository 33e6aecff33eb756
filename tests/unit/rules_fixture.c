/*
 * rules_fixture.c - hand-built analysis results (see rules_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/rules_fixture.h"

#include "rules/rules.h"

#include "collector/ledger.h"
#include "common/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fixture_model fixture_default(void)
{
	return (struct fixture_model){
		.layers = 8,
		.k = 1,
		.ranks = 8,
		.block_params = 50000000,
		.root_params = 10000000,
		.reshard = 1,
		.dtype = FSS_DTYPE_BFLOAT16,
	};
}

static void add_gather(struct analysis_result *a, const struct fixture_model *m, uint8_t phase, int32_t unit,
		       int32_t repeat, int32_t pos, uint64_t elements, const char *name)
{
	struct analysis_gather *g = &a->gathers[a->ngathers];
	size_t dsize = record_dtype_bytes(m->dtype);

	memset(g, 0, sizeof(*g));
	g->index = a->ngathers++;
	g->phase = phase;
	g->dtype = m->dtype;
	g->cause = ANALYSIS_CAUSE_HIDDEN;
	g->unit = unit;
	g->repeat = repeat;
	g->motif_pos = pos;
	g->nranks = (int32_t)m->ranks;
	g->calls = 1;
	g->elements = elements;
	g->bytes = elements * dsize / m->ranks;
	g->duration_ns = 100000;
	g->hide_ns = 100000;
	g->slowest_rank = -1;
	snprintf(g->name, sizeof(g->name), "%s", name);
}

struct analysis_result *fixture_new(const struct fixture_model *m)
{
	struct analysis_result *a = calloc(1, sizeof(*a));
	uint32_t L = m->layers, k = m->k, forward = 1 + L * k, backward = m->reshard ? L * k : 0;
	uint64_t piece = m->block_params / k, total = m->root_params + L * m->block_params;
	size_t dsize = record_dtype_bytes(m->dtype);
	struct ledger_input in;
	char name[64];

	a->gathers = calloc(forward + backward, sizeof(*a->gathers));
	a->per_rank = calloc(m->ranks, sizeof(*a->per_rank));
	analysis_options_init(&a->options);

	a->schema = ANALYSIS_SCHEMA;
	a->ranks = m->ranks;
	a->world_size = (int32_t)m->ranks;
	a->headline_rank = 0;
	a->step_detection = ANALYSIS_STEPS_NVTX;
	a->steps_seen = 12;
	a->steps_analyzed = 10;
	a->warmup_steps = 2;
	a->step_period = forward + backward + forward;
	a->step_ns = 100000000;
	snprintf(a->step_range_name, sizeof(a->step_range_name), "step 3");

	a->per_step.allgathers = forward + backward;
	a->per_step.forward_allgathers = forward;
	a->per_step.backward_allgathers = backward;
	a->per_step.allgather_calls = forward + backward;
	a->per_step.reduce_scatters = forward;
	a->per_step.reduce_scatter_calls = forward;
	a->verdict = ANALYSIS_DIAGNOSED;
	a->fsdp_comm = -1;
	a->tp_degree = 1;
	a->microbatches = (struct analysis_microbatches){.per_step = 1,
							 .sync = 1,
							 .forward_allgathers = forward,
							 .backward_allgathers = backward,
							 .told = 1,
							 .phase_source = ANALYSIS_PHASES_STRUCTURE};

	a->units.repeating_units = L;
	a->units.gathers_per_unit = k;
	a->units.root_gathers = 1;
	a->units.leading_gathers = 1;
	a->units.motif_start = 1;
	a->units.forward_units = forward;
	a->units.largest_unit_params = piece > m->root_params ? piece : m->root_params;
	a->units.total_params = total;
	a->units.repeating_unit_params = m->block_params;
	a->units.root_params = m->root_params;
	a->units.shard_ranks = m->ranks;
	snprintf(a->units.repeating_unit_name, sizeof(a->units.repeating_unit_name), "layers.*");

	add_gather(a, m, ANALYSIS_PHASE_FORWARD, 0, -1, -1, m->root_params, "model");
	for (uint32_t l = 0; l < L; l++)
		for (uint32_t j = 0; j < k; j++) {
			snprintf(name, sizeof(name), k == 1 ? "layers.%u" : "layers.%u.linear%u", l, j);
			add_gather(a, m, ANALYSIS_PHASE_FORWARD, (int32_t)(1 + l * k + j), (int32_t)l, (int32_t)j, piece,
				   name);
		}
	for (uint32_t l = L; m->reshard && l-- > 0;)
		for (uint32_t j = k; j-- > 0;) {
			snprintf(name, sizeof(name), k == 1 ? "layers.%u" : "layers.%u.linear%u", l, j);
			add_gather(a, m, ANALYSIS_PHASE_BACKWARD, (int32_t)(1 + l * k + j), (int32_t)l, (int32_t)j, piece,
				   name);
		}

	a->reshard.policy = m->reshard ? ANALYSIS_RESHARD_TRUE : ANALYSIS_RESHARD_FALSE;
	a->reshard.units = L * k;
	a->reshard.resharded_units = m->reshard ? L * k : 0;
	a->reshard.retained_units = m->reshard ? 0 : L * k;
	a->reshard.regather_bytes_per_step = m->reshard ? L * m->block_params * dsize : 0;
	a->reshard.retain_extra_bytes = m->reshard ? L * m->block_params * dsize : 0;
	a->reshard.reshard_extra_gathers = m->reshard ? 0 : L * k;
	a->reshard.reshard_extra_wire_bytes = m->reshard ? 0 : L * m->block_params * dsize;

	a->exposure.source = ANALYSIS_EXPOSURE_HOST;
	a->exposure.allgather_ns_per_step = (uint64_t)(forward + backward) * 100000;
	a->exposure.exposed_allgather_ns_per_step = a->exposure.allgather_ns_per_step / 100;
	a->exposure.exposed_fraction = 0.01;
	a->exposure.forward_exposed_ns_per_step = a->exposure.exposed_allgather_ns_per_step;
	a->exposure.exposed_gathers = 1;
	a->exposure.cause_gathers[ANALYSIS_CAUSE_FIRST_OF_PHASE] = 1;
	a->exposure.cause_ns[ANALYSIS_CAUSE_FIRST_OF_PHASE] = a->exposure.exposed_allgather_ns_per_step;
	a->exposure.cause_gathers[ANALYSIS_CAUSE_HIDDEN] = forward + backward - 1;

	ledger_input_defaults(&in);
	in.params = (double)total;
	in.ranks = m->ranks;
	in.largest_unit_params = (double)a->units.largest_unit_params;
	in.units = forward;
	ledger_compute(&in, &a->ledger);

	a->breakdown.step_ns = a->step_ns;
	a->breakdown.compute_ns = 90000000;
	a->breakdown.exposed_comm_ns = a->exposure.exposed_allgather_ns_per_step;
	a->breakdown.idle_ns = a->step_ns - a->breakdown.compute_ns - a->breakdown.exposed_comm_ns;
	a->breakdown.mfu = ANALYSIS_UNKNOWN;

	a->spread.ranks = m->ranks;
	a->spread.slowest_rank = m->ranks > 1 ? 1 : -1;
	a->spread.slowest_rank_fraction = m->ranks > 1 ? 1.0 / m->ranks : ANALYSIS_UNKNOWN;
	a->spread.skew_ns_per_step = 10000;
	a->spread.max_skew_ns = 5000;
	a->spread.step_ns_min = a->step_ns;
	a->spread.step_ns_max = a->step_ns;

	a->sizes.allgather_dtypes = 1u << m->dtype;
	a->sizes.reduce_scatter_dtypes = 1u << FSS_DTYPE_FLOAT32;
	a->sizes.allgather_bytes_min = piece * dsize / m->ranks;
	a->sizes.allgather_bytes_median = piece * dsize / m->ranks;
	a->sizes.allgather_bytes_max = a->units.largest_unit_params * dsize / m->ranks;
	a->sizes.reduce_scatter_bytes_median = piece * 4 / m->ranks;

	a->nper_rank = m->ranks;
	for (uint32_t r = 0; r < m->ranks; r++) {
		struct analysis_rank *pr = &a->per_rank[r];

		pr->rank = (int32_t)r;
		pr->source = r;
		pr->pid = 1000 + r;
		pr->steps_analyzed = a->steps_analyzed;
		pr->per_step = a->per_step;
		pr->step_ns = a->step_ns;
		pr->allgather_ns = a->exposure.allgather_ns_per_step;
		pr->exposed_allgather_ns = a->exposure.exposed_allgather_ns_per_step;
		pr->compute_ns = a->breakdown.compute_ns;
		pr->matched_collectives = 10 * (forward + backward + forward);
		pr->last_arrivals = pr->matched_collectives / m->ranks;
	}
	a->trace.records = 1000;
	a->trace.collectives = 800;
	a->trace.sources = m->ranks;
	a->trace.has_nvtx = 1;
	return a;
}

void fixture_nodes(struct analysis_result *a, uint32_t nodes)
{
	uint32_t ranks = a->world_size > 0 ? (uint32_t)a->world_size : 1;

	free(a->sources);
	a->sources = calloc(ranks, sizeof(*a->sources));
	assert_non_null(a->sources);
	a->nsources = ranks;
	for (uint32_t r = 0; r < ranks; r++) {
		a->sources[r].source = r;
		a->sources[r].rank = (int32_t)r;
		if (nodes)
			snprintf(a->sources[r].host, sizeof(a->sources[r].host), "node%u", r * nodes / ranks);
	}
}

void fixture_link(struct analysis_result *a, double latency_ns, double gathered_bytes_per_ns)
{
	a->exposure.allgather_ns_per_step = 0;
	for (uint32_t i = 0; i < a->ngathers; i++) {
		struct analysis_gather *g = &a->gathers[i];

		g->duration_ns = (uint64_t)(latency_ns + (double)g->bytes * (double)g->nranks / gathered_bytes_per_ns);
		g->hide_ns = g->duration_ns - (g->exposed_ns < g->duration_ns ? g->exposed_ns : g->duration_ns);
		a->exposure.allgather_ns_per_step += g->duration_ns;
	}
	if (a->exposure.allgather_ns_per_step)
		a->exposure.exposed_fraction =
			(double)a->exposure.exposed_allgather_ns_per_step / (double)a->exposure.allgather_ns_per_step;
}

void fixture_free(struct analysis_result *a)
{
	if (!a)
		return;
	free(a->sources);
	free(a->gathers);
	free(a->per_rank);
	free(a);
}

static findings_t *run_rule(const struct rule *r, const struct analysis_result *a, const char *setting, int gains)
{
	struct rule_config c;
	findings_t *list = findings_new();

	assert_non_null(list);
	rule_config_init(&c);
	if (setting)
		assert_int_equal(rule_config_set(&c, setting), 0);
	assert_int_equal(r->check(r, a, &c, list), 0);
	if (gains)
		assert_int_equal(rules_predict_gains(a, &c, list), 0);
	return list;
}

findings_t *fixture_run(const struct rule *r, const struct analysis_result *a, const char *setting)
{
	return run_rule(r, a, setting, 0);
}

findings_t *fixture_run_gains(const struct rule *r, const struct analysis_result *a, const char *setting)
{
	return run_rule(r, a, setting, 1);
}

double fixture_metric(const struct finding *f, const char *name)
{
	for (size_t i = 0; i < f->nmetrics; i++)
		if (strcmp(f->metrics[i].name, name) == 0)
			return f->metrics[i].value;
	fail_msg("metric %s missing", name);
	return 0;
}
