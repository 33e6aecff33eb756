/*
 * analysis_roles_test.c - communicator roles from their traffic
 * (collector/comm_roles.h), on the communicator layouts of
 * docs/patterns.md.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collector/analysis.h"
#include "collector/comm_roles.h"
#include "collector/timeline.h"
#include "common/record.h"

#define MAXEV 8192

struct job {
	struct tl_source src;
	struct tl_comm comms[8];
	struct tl_event ev[MAXEV];
	size_t n;
	timeline_t *t;
};

static struct job *job_new(void)
{
	struct job *j = calloc(1, sizeof *j);
	j->src.comms = j->comms;
	j->src.id = 1;
	j->t = timeline_new(NULL, NULL);
	return j;
}

static void job_free(struct job *j)
{
	timeline_free(j->t);
	free(j);
}

static int comm(struct job *j, int nranks, uint64_t id)
{
	int c = (int)j->src.ncomms++;
	j->comms[c] = (struct tl_comm){.handle = 0x1000u + (uint64_t)c, .id_hash = id, .nranks = nranks, .dimension = id};
	return c;
}

/* count: the per-rank count argument; elements = count x nranks for AG / RS */
static void op(struct job *j, int c, uint8_t kind, uint64_t count)
{
	assert_true(j->n < MAXEV);
	uint64_t el = kind == FSS_OP_ALLGATHER || kind == FSS_OP_REDUCESCATTER ? count * (uint64_t)j->comms[c].nranks : count;
	j->ev[j->n++] = (struct tl_event){.op = kind, .count = count, .elements = el, .comm_slot = (uint32_t)c,
					   .nranks = j->comms[c].nranks, .calls = 1};
}

static void decide(struct job *j, const char *override, struct comm_roles *r)
{
	assert_int_equal(comm_roles_decide(j->t, &j->src, j->ev, j->n, override, r), 0);
}

/* One FSDP step on comm dp (root + L blocks, shard counts), with TP's
 * sequence-parallel gathers and reduce-scatters per block on comm tp. */
static void step_2d(struct job *j, int dp, int tp, int L, int per_linear)
{
	int units = per_linear ? 8 : 1;
	op(j, dp, FSS_OP_ALLGATHER, 5000);
	if (tp >= 0)
		op(j, tp, FSS_OP_REDUCESCATTER, 4096); /* the embedding's RowwiseParallel */
	for (int l = 0; l < L; l++) {
		for (int u = 0; u < units; u++)
			op(j, dp, FSS_OP_ALLGATHER, 700 + u);
		if (tp >= 0) {
			op(j, tp, FSS_OP_ALLGATHER, 4096);
			op(j, tp, FSS_OP_REDUCESCATTER, 4096);
			op(j, tp, FSS_OP_ALLGATHER, 4096);
			op(j, tp, FSS_OP_REDUCESCATTER, 4096);
		}
	}
	for (int l = L; l-- > 0;) {
		for (int u = units; u-- > 0;)
			op(j, dp, FSS_OP_ALLGATHER, 700 + u);
		if (tp >= 0) {
			op(j, tp, FSS_OP_ALLGATHER, 4096);
			op(j, tp, FSS_OP_REDUCESCATTER, 4096);
			op(j, tp, FSS_OP_ALLGATHER, 4096);
			op(j, tp, FSS_OP_REDUCESCATTER, 4096);
		}
		for (int u = units; u-- > 0;)
			op(j, dp, FSS_OP_REDUCESCATTER, 700 + u);
	}
	op(j, dp, FSS_OP_REDUCESCATTER, 5000);
}

static void test_tensor_parallel(void **state)
{
	(void)state;
	for (int per_linear = 0; per_linear <= 1; per_linear++) {
		struct job *j = job_new();
		int world = comm(j, 4, 0xaaaa0000u), tp = comm(j, 2, 0xbbbb0000u), dp = comm(j, 2, 0xcccc0000u);
		for (int s = 0; s < 4; s++) {
			step_2d(j, dp, tp, 6, per_linear);
			op(j, world, FSS_OP_ALLREDUCE, 1);
		}
		struct comm_roles r;
		decide(j, NULL, &r);
		assert_int_equal(r.fsdp, dp);
		assert_int_equal(r.role[dp], ANALYSIS_ROLE_FSDP);
		assert_int_equal(r.role[tp], ANALYSIS_ROLE_TENSOR_PARALLEL);
		assert_int_equal(r.role[world], ANALYSIS_ROLE_STEP);
		assert_false(comm_roles_in_steps(r.role[tp]));
		comm_roles_release(&r);
		job_free(j);
	}
}

/* The whole model in one unit under TP: one gather and one reduce-scatter
 * per step on dp, as alternating as TP's: the one with fewer events. */
static void test_one_unit_beside_tp(void **state)
{
	(void)state;
	struct job *j = job_new();
	int tp = comm(j, 2, 0xbbbb0000u), dp = comm(j, 2, 0xcccc0000u);
	for (int s = 0; s < 4; s++) {
		op(j, dp, FSS_OP_ALLGATHER, 90000);
		for (int l = 0; l < 6; l++) {
			op(j, tp, FSS_OP_ALLGATHER, 4096);
			op(j, tp, FSS_OP_REDUCESCATTER, 4096);
		}
		op(j, dp, FSS_OP_REDUCESCATTER, 90000);
	}
	struct comm_roles r;
	decide(j, NULL, &r);
	assert_int_equal(r.fsdp, dp);
	assert_int_equal(r.role[tp], ANALYSIS_ROLE_TENSOR_PARALLEL);
	comm_roles_release(&r);
	job_free(j);
}

/* HSDP (FSDP1 HYBRID_SHARD with sync_module_states): broadcasts on both
 * groups before the first step, then the replicas' all-reduces of the
 * reduced shards; the world carries the loss. */
static void test_hsdp(void **state)
{
	(void)state;
	struct job *j = job_new();
	int world = comm(j, 4, 0x1111u), shard = comm(j, 2, 0x2222u), rep = comm(j, 2, 0x3333u);
	for (int u = 0; u < 7; u++) {
		op(j, shard, FSS_OP_BROADCAST, 1400);
		op(j, rep, FSS_OP_BROADCAST, 1400);
	}
	for (int s = 0; s < 4; s++) {
		op(j, shard, FSS_OP_ALLGATHER, 2500);
		for (int l = 0; l < 6; l++)
			op(j, shard, FSS_OP_ALLGATHER, 350);
		for (int l = 6; l-- > 0;) {
			op(j, shard, FSS_OP_ALLGATHER, 350);
			op(j, shard, FSS_OP_REDUCESCATTER, 350);
			op(j, rep, FSS_OP_ALLREDUCE, 350);
		}
		op(j, shard, FSS_OP_REDUCESCATTER, 2500);
		op(j, rep, FSS_OP_ALLREDUCE, 2500);
		op(j, world, FSS_OP_ALLREDUCE, 1);
	}
	struct comm_roles r;
	decide(j, NULL, &r);
	assert_int_equal(r.fsdp, shard);
	assert_int_equal(r.role[rep], ANALYSIS_ROLE_REPLICATE);
	assert_int_equal(r.role[world], ANALYSIS_ROLE_STEP);
	comm_roles_release(&r);
	job_free(j);
}

/* reshard_after_forward = 2 on a 4-rank shard group; a pipeline group's
 * sends and receives; set-up broadcasts on a communicator used for nothing
 * else. */
static void test_regather_pipeline_one_off(void **state)
{
	(void)state;
	struct job *j = job_new();
	int init = comm(j, 8, 0x9999u), dp = comm(j, 4, 0x1111u), regather = comm(j, 2, 0x2222u),
	    pp = comm(j, 2, 0x4444u);
	op(j, init, FSS_OP_BROADCAST, 100000);
	op(j, init, FSS_OP_BROADCAST, 100000);
	for (int s = 0; s < 4; s++) {
		op(j, pp, FSS_OP_RECV, 4096);
		op(j, dp, FSS_OP_ALLGATHER, 1250);
		for (int l = 0; l < 4; l++)
			op(j, dp, FSS_OP_ALLGATHER, 175);
		op(j, pp, FSS_OP_SEND, 4096);
		op(j, pp, FSS_OP_RECV, 4096);
		for (int l = 4; l-- > 0;) {
			op(j, regather, FSS_OP_ALLGATHER, 350); /* 350 x 2 = the unit's 175 x 4 elements */
			op(j, dp, FSS_OP_REDUCESCATTER, 175);
		}
		op(j, dp, FSS_OP_REDUCESCATTER, 1250);
		op(j, pp, FSS_OP_SEND, 4096);
	}
	struct comm_roles r;
	decide(j, NULL, &r);
	assert_int_equal(r.fsdp, dp);
	assert_int_equal(r.role[regather], ANALYSIS_ROLE_FSDP_REGATHER);
	assert_int_equal(r.role[pp], ANALYSIS_ROLE_PIPELINE);
	assert_int_equal(r.role[init], ANALYSIS_ROLE_ONE_OFF);
	assert_true(comm_roles_is_fsdp(r.role[regather]));
	comm_roles_release(&r);
	job_free(j);
}

/* DDP: all-reduce buckets, no gather: no FSDP group. */
static void test_no_fsdp(void **state)
{
	(void)state;
	struct job *j = job_new();
	int world = comm(j, 4, 0x1111u);
	for (int s = 0; s < 6; s++) {
		op(j, world, FSS_OP_ALLREDUCE, 6250000);
		op(j, world, FSS_OP_ALLREDUCE, 6250000);
		op(j, world, FSS_OP_ALLREDUCE, 1200000);
	}
	struct comm_roles r;
	decide(j, NULL, &r);
	assert_int_equal(r.fsdp, -1);
	assert_int_equal(r.role[world], ANALYSIS_ROLE_ALLREDUCE);
	comm_roles_release(&r);
	job_free(j);
}

/* --fsdp-comm: by a name the job gave (a string record of the source), by
 * the start of the id, by the dimension; a name that matches nothing is
 * said, and the traffic decides. */
static void test_override(void **state)
{
	(void)state;
	struct job *j = job_new();
	int tp = comm(j, 2, 0xbbbb000011112222ull), dp = comm(j, 2, 0xcccc000033334444ull);
	j->comms[dp].dimension = 0xdddd000055556666ull;
	struct fss_rec_string str = {.head = {.type = FSS_REC_STRING, .size = sizeof str, .source = 1},
				     .id = 7,
				     .total_len = 8,
				     .offset = 0};
	memcpy(str.text, "dp_shard", 8);
	struct tl_source *touched;
	assert_int_equal(timeline_feed(j->t, &str.head, &touched), 0);
	j->comms[dp].name = 7;
	for (int s = 0; s < 4; s++)
		step_2d(j, dp, tp, 4, 0);
	static const char *const names[] = {"dp_shard", "cccc0000", "0xCCCC", "dddd00005555"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		struct comm_roles r;
		decide(j, names[i], &r);
		assert_int_equal(r.fsdp, dp);
		assert_true(r.given);
		comm_roles_release(&r);
	}
	/* naming TP's group makes it the FSDP group: the user's word */
	struct comm_roles r;
	decide(j, "bbbb", &r);
	assert_int_equal(r.fsdp, tp);
	assert_int_equal(r.role[tp], ANALYSIS_ROLE_FSDP);
	comm_roles_release(&r);
	decide(j, "eeee", &r);
	assert_true(r.override_unmatched);
	assert_false(r.given);
	assert_int_equal(r.fsdp, dp);
	comm_roles_release(&r);
	decide(j, "cc", &r); /* too short to be an id */
	assert_true(r.override_unmatched);
	comm_roles_release(&r);
	job_free(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tensor_parallel),
		cmocka_unit_test(test_one_unit_beside_tp),
		cmocka_unit_test(test_hsdp),
		cmocka_unit_test(test_regather_pipeline_one_off),
		cmocka_unit_test(test_no_fsdp),
		cmocka_unit_test(test_override),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
