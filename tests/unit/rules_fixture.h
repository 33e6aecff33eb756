/*
 * rules_fixture.h - hand-built analysis results for the rule tests: a
 * transformer of `layers` blocks plus a root unit, wrapped with `k` gathers
 * per block, on `ranks` ranks, with every figure the rules read filled in
 * consistently (the numbers a real analysis of such a job would give).
 */
#ifndef FSS_TESTS_RULES_FIXTURE_H
#define FSS_TESTS_RULES_FIXTURE_H

#include <stdint.h>

#include "collector/analysis.h"

struct fixture_model {
	uint32_t layers;        /* repeating blocks */
	uint32_t k;             /* gathers per block (1: per block, 8: per Linear) */
	uint32_t ranks;         /* shard ranks */
	uint64_t block_params;  /* parameters of one block */
	uint64_t root_params;   /* parameters of the root unit (gathered first) */
	int reshard;            /* 1: reshard_after_forward=True, 0: False */
	uint8_t dtype;          /* enum fss_dtype of every gather */
};

/* fixture_default - 8 blocks of 50M parameters, root 10M, per-block wrap,
 * 8 ranks, resharded, bf16: a well-wrapped job. */
struct fixture_model fixture_default(void);

/* fixture_new - a result for the model: 10 analysed steps of 100 ms, 1 %
 * of AllGather time exposed, no rank skew. Free with fixture_free(). */
struct analysis_result *fixture_new(const struct fixture_model *m);

/* fixture_nodes - the result's sources: one per rank, the ranks spread
 * evenly over `nodes` hosts ("node0", "node1", ...); 0 nodes: hosts
 * unknown. */
void fixture_nodes(struct analysis_result *a, uint32_t nodes);

/* fixture_link - every gather's time as latency_ns plus its gathered bytes
 * (bytes x ranks) over gathered_bytes_per_ns, the step's AllGather total
 * with it (fixture_new gives every gather 100 us, whatever its size). */
void fixture_link(struct analysis_result *a, double latency_ns, double gathered_bytes_per_ns);

/* fixture_free - release a fixture_new result. */
void fixture_free(struct analysis_result *a);

struct rule;
struct finding;
typedef struct findings findings_t;

/* fixture_run - one rule over a, with default thresholds plus `setting`
 * ("name=value", or NULL); fails the test if the rule or the setting does.
 * The caller frees the list with findings_free. */
findings_t *fixture_run(const struct rule *r, const struct analysis_result *a, const char *setting);

/* fixture_run_gains - fixture_run, then rules_run's gains pass
 * (rules_predict_gains) over the rule's findings. */
findings_t *fixture_run_gains(const struct rule *r, const struct analysis_result *a, const char *setting);

/* fixture_metric - the value of the finding's metric `name`; fails the test
 * when it has none. */
double fixture_metric(const struct finding *f, const char *name);

#endif
