/*
 * flight_report.c - the report of a hand-built result with calls in
 * flight, for tests/e2e/flight_report_test.sh: the JSON (against
 * docs/report-schema.json) and the text's "Calls in flight" block, without
 * needing a trace the analysis of calls in flight has read.
 *
 *   flight_report json|text hang|mismatch|both|blind
 *
 * hang: a 4-rank job, rank 2 (host node-b) never entered AllGather #17 of
 * the FSDP group, the others wait 75 s; mismatch: rank 2 issued AllGather
 * #5 with count 999 against the others' 1000; both: the two; blind: no
 * source can show a wait (no enter records, no CUPTI). The rules run on it
 * as lint runs them.
 */
#include "cli/diagnosis.h"

#include "common/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S 1000000000ull
#define COMM 0x00c0ffee12345678ull

static void add_hang(struct analysis_result *a)
{
	struct analysis_hang *h = &a->flight.hangs[a->flight.nhangs++];

	a->flight.hangs_total++;
	a->flight.in_flight++;
	h->comm_id = COMM;
	h->comm_seq = 17;
	h->count = 1048576;
	h->waited_ns = 75 * S;
	h->nranks = 4;
	h->op = FSS_OP_ALLGATHER;
	h->dtype = FSS_DTYPE_BFLOAT16;
	for (uint32_t r = 0; r < 4; r++) {
		struct analysis_flight_rank fr = {
		    .rank = (int32_t)r, .global_rank = (int32_t)r, .source = r, .pid = 1000 + r};

		if (r == 2) {
			fr.since_ns = 77 * S;
			fr.last_seq = 16;
			fr.last_op = FSS_OP_REDUCESCATTER;
			h->missing[h->nmissing++] = fr;
		} else {
			fr.since_ns = 75 * S - r * S;
			fr.last_seq = 17;
			fr.last_op = FSS_OP_ALLGATHER;
			fr.evidence = ANALYSIS_WAIT_HOST;
			h->waiting[h->nwaiting++] = fr;
		}
	}
}

static void add_mismatch(struct analysis_result *a)
{
	struct analysis_mismatch *m = &a->flight.mismatches[a->flight.nmismatches++];

	a->flight.mismatches_total++;
	a->flight.mismatched_collectives++;
	m->comm_id = COMM;
	m->comm_seq = 5;
	m->nranks = 4;
	m->a = (struct analysis_signature){
	    .count = 1000, .root = -1, .op = FSS_OP_ALLGATHER, .dtype = FSS_DTYPE_BFLOAT16, .redop = FSS_REDOP_NONE};
	m->b = m->a;
	m->b.count = 999;
	m->a_ranks[m->na++] = 0;
	m->a_ranks[m->na++] = 1;
	m->a_ranks[m->na++] = 3;
	m->b_ranks[m->nb++] = 2;
	m->b_source = 2;
}

int main(int argc, char **argv)
{
	struct analysis_result *a = calloc(1, sizeof(*a));
	struct rule_config rules;
	struct diagnosis d = {.trace_path = "hand-built.fss"};

	if (argc != 3 || !a) {
		fprintf(stderr, "usage: flight_report json|text hang|mismatch|both|blind\n");
		return 2;
	}
	analysis_options_init(&a->options);
	a->schema = ANALYSIS_SCHEMA;
	a->ranks = 4;
	a->world_size = 4;
	a->fsdp_comm = 0;
	a->ncomms = 1;
	a->comms[0].id = COMM;
	a->comms[0].nranks = 4;
	a->comms[0].role = ANALYSIS_ROLE_FSDP;
	snprintf(a->comms[0].name, sizeof(a->comms[0].name), "dp_shard");
	snprintf(a->comms[0].evidence, sizeof(a->comms[0].evidence), "hand-built");
	a->tp_degree = 1;
	a->spread.slowest_rank = -1;
	a->spread.slowest_rank_fraction = ANALYSIS_UNKNOWN;
	a->exposure.exposed_fraction = ANALYSIS_UNKNOWN;
	a->breakdown.mfu = ANALYSIS_UNKNOWN;
	a->trace.collectives = 100;
	a->trace.sources = 4;
	a->nsources = 4;
	a->sources = calloc(4, sizeof(*a->sources));
	if (!a->sources)
		return 1;
	for (uint32_t i = 0; i < 4; i++) {
		a->sources[i].source = i;
		a->sources[i].pid = 1000 + i;
		a->sources[i].rank = (int32_t)i;
		a->sources[i].exit_code = -1;
		snprintf(a->sources[i].host, sizeof(a->sources[i].host), "%s", i < 2 ? "node-a" : "node-b");
	}
	a->flight.timeout_ns = a->options.hang_timeout_ns;
	a->flight.now_realtime_ns = 1700000000 * S;
	a->flight.sources_enter = 4;
	if (!strcmp(argv[2], "hang") || !strcmp(argv[2], "both"))
		add_hang(a);
	if (!strcmp(argv[2], "mismatch") || !strcmp(argv[2], "both"))
		add_mismatch(a);
	if (!strcmp(argv[2], "blind"))
		a->flight.sources_enter = 0;
	d.result = a;
	d.findings = findings_new();
	rule_config_init(&rules);
	if (!d.findings || rules_run(a, &rules, d.findings))
		return 1;
	if (!strcmp(argv[1], "json"))
		diagnosis_print_json(stdout, &d, &rules);
	else
		diagnosis_print_report(stdout, &d);
	findings_free(d.findings);
	free(a->sources);
	free(a);
	return 0;
}
