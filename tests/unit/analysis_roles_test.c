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
	/* bf16, as FSDP gathers and reduces by default */
	j->ev[j->n++] = (struct tl_event){.op = kind, .count = count, .elements = el, .bytes = 2 * count,
					   .wire_bytes = kind == FSS_OP_ALLREDUCE ? 4 * count : 2 * el,
					   .dtype = FSS_DTYPE_BFLOAT16, .comm_slot = (uint32_t)c,
					   .nranks = j->comms[c].nranks, .calls = 1, .moving_calls = count > 0};
}

/* One event of several calls in one ncclGroupStart/End (Send / Recv to
 * peers: an all-to-all or a ring exchange), count per call. */
static void group_op(struct job *j, int c, uint8_t kind, uint32_t calls, uint64_t count)
{
	op(j, c, kind, count);
	j->ev[j->n - 1].calls = calls;
	j->ev[j->n - 1].moving_calls = calls;
}

/* A ring rotation as PyTorch issues permute_tensor with NCCL >= 2.14: a
 * Send and a Recv to every peer, all but two of zero count. */
static void ring_op(struct job *j, int c, uint64_t count)
{
	group_op(j, c, FSS_OP_SEND, 2u * (uint32_t)j->comms[c].nranks, count);
	j->ev[j->n - 1].moving_calls = 2;
}

/* An AllGather of `bytes` per rank in dtype bytes-per-element `size`. */
static void gather_bytes(struct job *j, int c, uint64_t count, uint8_t dtype, uint32_t size)
{
	op(j, c, FSS_OP_ALLGATHER, count);
	j->ev[j->n - 1].dtype = dtype;
	j->ev[j->n - 1].bytes = count * size;
	j->ev[j->n - 1].wire_bytes = count * size * (uint64_t)j->comms[c].nranks;
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

/* torchtitan with FlexAttention context parallelism: FSDP shards over
 * dp_shard x cp (comm dp), attention gathers k and v on cp in forward and
 * reduce-scatters their gradients in backward, all of one size (seq: the
 * k / v elements per rank, per step; 0 keeps them fixed). Units:
 * tok_embeddings, L blocks, [norm, output]; blocks resharded (but the
 * last), the others kept as torchtitan keeps them. */
static void step_cp(struct job *j, int dp, int cp, int L, int reshard, uint64_t seq)
{
	op(j, dp, FSS_OP_ALLGATHER, 3000);
	for (int l = 0; l < L; l++) {
		op(j, dp, FSS_OP_ALLGATHER, 700);
		op(j, cp, FSS_OP_ALLGATHER, seq);
		op(j, cp, FSS_OP_ALLGATHER, seq);
	}
	op(j, dp, FSS_OP_ALLGATHER, 2000);
	op(j, dp, FSS_OP_REDUCESCATTER, 2000);
	for (int l = L; l-- > 0;) {
		if (reshard && l < L - 1)
			op(j, dp, FSS_OP_ALLGATHER, 700);
		op(j, cp, FSS_OP_REDUCESCATTER, seq);
		op(j, cp, FSS_OP_REDUCESCATTER, seq);
		op(j, dp, FSS_OP_REDUCESCATTER, 700);
	}
	if (reshard)
		op(j, dp, FSS_OP_ALLGATHER, 3000);
	op(j, dp, FSS_OP_REDUCESCATTER, 3000);
}

/* The CP group gathers more than the FSDP group and, alone, looks like FSDP
 * that keeps its units; it is told by its place inside the units (two
 * gathers of one size per unit), whatever the policy, the sizes of the
 * groups (dp_shard 1 makes them equal) and whether the sequence changes. */
static void test_context_parallel_flex(void **state)
{
	(void)state;
	static const struct {
		int dp_ranks, cp_ranks, layers, reshard, vary;
	} cases[] = {{4, 2, 6, 1, 0}, {2, 2, 6, 1, 0}, {4, 2, 12, 0, 0}, {2, 2, 12, 0, 0}, {4, 2, 6, 1, 1},
		     {8, 4, 4, 0, 1}};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		struct job *j = job_new();
		int world = comm(j, cases[k].dp_ranks, 0x1111u), dp = comm(j, cases[k].dp_ranks, 0x2222u),
		    cp = comm(j, cases[k].cp_ranks, 0x3333u);
		for (int s = 0; s < 5; s++) {
			step_cp(j, dp, cp, cases[k].layers, cases[k].reshard,
				cases[k].vary ? 4096 + 1024 * (uint64_t)(s % 3) : 4096);
			op(j, world, FSS_OP_ALLREDUCE, 1);
		}
		struct comm_roles r;
		decide(j, NULL, &r);
		assert_int_equal(r.fsdp, dp);
		assert_int_equal(r.ngroups, 1);
		assert_int_equal(r.role[dp], ANALYSIS_ROLE_FSDP);
		assert_int_equal(r.role[cp], ANALYSIS_ROLE_CONTEXT_PARALLEL);
		assert_int_equal(r.role[world], ANALYSIS_ROLE_STEP);
		assert_int_equal(comm_roles_group_of(&r, (uint32_t)cp), COMM_ROLES_NO_GROUP);
		assert_false(comm_roles_in_steps(r.role[cp]));
		assert_string_equal(r.ambiguity, "");
		comm_roles_release(&r);
		job_free(j);
	}
}

/* Context parallelism over the whole job (cp = N: DeviceMesh gives the cp
 * dimension the world, the FSDP group's own communicator): k and v come in
 * pairs inside the units, never re-gathered while the blocks are, and are
 * reduce-scattered; their sizes are told apart as activations. Pairs of
 * equal units that are re-gathered (k and v wrapped per Linear under GQA),
 * a policy that re-gathers nothing, and pairs nothing reduce-scatters (a
 * trainer's metric gathers) are not. */
static void test_context_parallel_on_the_fsdp_world(void **state)
{
	(void)state;
	for (int k = 0; k < 4; k++) {
		struct job *j = job_new();
		int world = comm(j, 2, 0x1111u);
		for (int s = 0; s < 5; s++) {
			if (k == 0 || k == 2)
				step_cp(j, world, world, 4, k == 0, 4096);
			if (k == 1) { /* per Linear: q, k, v (k and v of one size), o; resharded */
				for (int l = 0; l < 4; l++)
					for (int u = 0; u < 4; u++)
						op(j, world, FSS_OP_ALLGATHER, u == 1 || u == 2 ? 256 : 1024);
				for (int l = 4; l-- > 0;)
					for (int u = 4; u-- > 0;) {
						op(j, world, FSS_OP_ALLGATHER, u == 1 || u == 2 ? 256 : 1024);
						op(j, world, FSS_OP_REDUCESCATTER, u == 1 || u == 2 ? 256 : 1024);
					}
			}
			if (k == 3) { /* metric gathers between forward and backward */
				for (int l = 0; l < 4; l++)
					op(j, world, FSS_OP_ALLGATHER, 700);
				op(j, world, FSS_OP_ALLGATHER, 4);
				op(j, world, FSS_OP_ALLGATHER, 4);
				for (int l = 4; l-- > 0;) {
					op(j, world, FSS_OP_ALLGATHER, 700);
					op(j, world, FSS_OP_REDUCESCATTER, 700);
				}
			}
		}
		struct comm_roles r;
		decide(j, NULL, &r);
		assert_int_equal(r.fsdp, world);
		assert_int_equal(r.role[world], ANALYSIS_ROLE_FSDP);
		assert_int_equal(r.nshared_keys, k == 0 ? 1 : 0);
		if (k == 0) {
			assert_true(r.shared_keys[0] == 2 * 4096);
			struct tl_event kv = {.op = FSS_OP_ALLGATHER, .bytes = 2 * 4096, .comm_slot = (uint32_t)world};
			struct tl_event unit = {.op = FSS_OP_ALLGATHER, .bytes = 2 * 700, .comm_slot = (uint32_t)world};
			assert_int_equal(comm_roles_event_role(&r, &kv), ANALYSIS_ROLE_CONTEXT_PARALLEL);
			assert_int_equal(comm_roles_event_role(&r, &unit), ANALYSIS_ROLE_FSDP);
			assert_true(strstr(r.shared, "activations") != NULL);
		} else {
			assert_string_equal(r.shared, "");
		}
		comm_roles_release(&r);
		job_free(j);
	}
}

/* SDPA context parallelism over the whole world (cp = N): FSDP's gathers
 * and reductions, and on the same communicator each attention's cat(k, v)
 * gather, in forward and again in backward, where each is followed at once
 * by the dK / dV ring rotation. The k / v size is no unit: context
 * parallel. A frozen unit of the same shape, never reduced but followed by
 * no rotation (k == 1), stays a unit. */
static void test_context_parallel_ring_on_the_fsdp_world(void **state)
{
	(void)state;
	for (int k = 0; k < 2; k++) {
		struct job *j = job_new();
		int world = comm(j, 2, 0x2222u);
		for (int s = 0; s < 5; s++) {
			op(j, world, FSS_OP_ALLGATHER, 5000); /* the root */
			for (int l = 0; l < 4; l++) {
				op(j, world, FSS_OP_ALLGATHER, 700);
				op(j, world, FSS_OP_ALLGATHER, 300);
			}
			for (int l = 4; l-- > 0;) {
				op(j, world, FSS_OP_ALLGATHER, 700);
				op(j, world, FSS_OP_ALLGATHER, 300);
				if (k == 0) {
					ring_op(j, world, 300);
					ring_op(j, world, 300);
				}
				op(j, world, FSS_OP_REDUCESCATTER, 700);
			}
			op(j, world, FSS_OP_REDUCESCATTER, 5000);
		}
		struct comm_roles r;
		decide(j, NULL, &r);
		assert_int_equal(r.fsdp, world);
		assert_int_equal(r.role[world], ANALYSIS_ROLE_FSDP);
		assert_int_equal(r.nshared_keys, k == 0 ? 1 : 0);
		struct tl_event kv = {.op = FSS_OP_ALLGATHER, .bytes = 2 * 300, .comm_slot = (uint32_t)world};
		struct tl_event unit = {.op = FSS_OP_ALLGATHER, .bytes = 2 * 700, .comm_slot = (uint32_t)world};
		assert_int_equal(comm_roles_event_role(&r, &kv),
				 k == 0 ? ANALYSIS_ROLE_CONTEXT_PARALLEL : ANALYSIS_ROLE_FSDP);
		assert_int_equal(comm_roles_event_role(&r, &unit), ANALYSIS_ROLE_FSDP);
		if (k == 0)
			assert_true(strstr(r.shared, "ring rotation") != NULL);
		comm_roles_release(&r);
		job_free(j);
	}
}

/* SDPA context parallelism (torch's _templated_ring_attention): one
 * all-gather of cat(k, v) per attention in forward and again in backward,
 * and the dK / dV ring rotation (permute_tensor: a Send to the next rank
 * and a Recv from the previous, grouped) cp times in each backward. Not a
 * pipeline: the group also gathers, and its exchanges sit inside the
 * units; with the all-to-all rotater the forward's k / v rotate the same
 * way, and only the place tells. */
static void test_context_parallel_ring(void **state)
{
	(void)state;
	for (int k = 0; k < 4; k++) {
		int gather = k & 1, cp_ranks = k < 2 ? 2 : 4;
		struct job *j = job_new();
		int dp = comm(j, 4, 0x2222u), cp = comm(j, cp_ranks, 0x3333u);
		for (int s = 0; s < 5; s++) {
			op(j, dp, FSS_OP_ALLGATHER, 3000);
			for (int l = 0; l < 6; l++) {
				op(j, dp, FSS_OP_ALLGATHER, 700);
				if (gather)
					op(j, cp, FSS_OP_ALLGATHER, 8192);
				else
					ring_op(j, cp, 8192);
			}
			for (int l = 6; l-- > 0;) {
				op(j, dp, FSS_OP_ALLGATHER, 700);
				if (gather)
					op(j, cp, FSS_OP_ALLGATHER, 8192);
				else
					ring_op(j, cp, 8192);
				for (int i = 0; i < cp_ranks; i++)
					ring_op(j, cp, 8192);
				op(j, dp, FSS_OP_REDUCESCATTER, 700);
			}
			op(j, dp, FSS_OP_REDUCESCATTER, 3000);
		}
		struct comm_roles r;
		decide(j, NULL, &r);
		assert_int_equal(r.fsdp, dp);
		assert_int_equal(r.role[cp], ANALYSIS_ROLE_CONTEXT_PARALLEL);
		assert_false(comm_roles_in_steps(r.role[cp]));
		comm_roles_release(&r);
		job_free(j);
	}
}

/* torchtitan's MoE with experts fully sharded on their own mesh (efsdp):
 * per block the dense part gathered on dp, the routed experts on efsdp
 * (explicit prefetch: [next block, its experts]), the experts' tokens
 * dispatched and combined by all_to_all_single on ep (a group of Send and
 * Recv to every peer, itself included); backward mirrors it, the experts'
 * reduce-scatter before the block's. */
static void step_moe(struct job *j, int dp, int efsdp, int ep, int L, int reshard, uint64_t experts)
{
	uint32_t a2a = 2u * (uint32_t)j->comms[ep].nranks;
	op(j, dp, FSS_OP_ALLGATHER, 3000);
	for (int l = 0; l < L; l++) {
		op(j, dp, FSS_OP_ALLGATHER, 900);
		op(j, efsdp, FSS_OP_ALLGATHER, experts);
		group_op(j, ep, FSS_OP_SEND, a2a, 2048);
		group_op(j, ep, FSS_OP_SEND, a2a, 2048);
	}
	for (int l = L; l-- > 0;) {
		if (reshard) {
			op(j, dp, FSS_OP_ALLGATHER, 900);
			op(j, efsdp, FSS_OP_ALLGATHER, experts);
		}
		group_op(j, ep, FSS_OP_SEND, a2a, 2048);
		group_op(j, ep, FSS_OP_SEND, a2a, 2048);
		op(j, efsdp, FSS_OP_REDUCESCATTER, experts);
		op(j, dp, FSS_OP_REDUCESCATTER, 900);
	}
	op(j, dp, FSS_OP_REDUCESCATTER, 3000);
}

/* Two FSDP groups: the experts' group is no activation group though it
 * sits inside the dense units and on fewer ranks; the primary is the one
 * whose gathers move the most bytes; the all-to-all beside an expert FSDP
 * group is expert parallel. Neither re-gathering, one gather per unit of
 * fixed size: the reading is said to be open. */
static void test_moe_expert_groups(void **state)
{
	(void)state;
	for (int reshard = 0; reshard <= 1; reshard++)
		for (int big = 0; big <= 1; big++) {
			struct job *j = job_new();
			int world = comm(j, 4, 0x1111u), dp = comm(j, 4, 0x2222u), efsdp = comm(j, 2, 0x3333u),
			    ep = comm(j, 2, 0x4444u);
			for (int s = 0; s < 5; s++) {
				step_moe(j, dp, efsdp, ep, 4, reshard, big ? 20000 : 1600);
				op(j, world, FSS_OP_ALLREDUCE, 1);
			}
			struct comm_roles r;
			decide(j, NULL, &r);
			int primary = big ? efsdp : dp, other = big ? dp : efsdp;
			assert_int_equal(r.fsdp, primary);
			assert_int_equal(r.ngroups, 2);
			assert_int_equal(r.groups[0], primary);
			assert_int_equal(r.groups[1], other);
			assert_int_equal(r.role[dp], ANALYSIS_ROLE_FSDP);
			assert_int_equal(r.role[efsdp], ANALYSIS_ROLE_FSDP);
			assert_int_equal(comm_roles_group_of(&r, (uint32_t)primary), 0);
			assert_int_equal(comm_roles_group_of(&r, (uint32_t)other), 1);
			assert_int_equal(r.role[ep], ANALYSIS_ROLE_EXPERT);
			assert_int_equal(r.role[world], ANALYSIS_ROLE_STEP);
			assert_true(comm_roles_in_steps(r.role[efsdp]));
			assert_false(comm_roles_in_steps(r.role[ep]));
			if (reshard)
				assert_string_equal(r.ambiguity, "");
			else
				assert_true(strstr(r.ambiguity, "nested FSDP") != NULL);
			comm_roles_release(&r);
			job_free(j);
		}
}

/* All-to-alls without an expert group: Ulysses-style sequence parallel
 * (q, k, v and the output per attention) is all-to-all; after a router's
 * count exchange (tokens per expert, a few elements per peer, then the
 * tokens), expert parallel. A pipeline's grouped Send / Recv to one
 * neighbour stays a pipeline. */
static void test_all_to_all_and_pipeline(void **state)
{
	(void)state;
	for (int kind = 0; kind < 3; kind++) {
		struct job *j = job_new();
		int dp = comm(j, 4, 0x2222u), x = comm(j, 4, 0x3333u);
		for (int s = 0; s < 5; s++) {
			if (kind == 2)
				group_op(j, x, FSS_OP_RECV, 1, 4096);
			op(j, dp, FSS_OP_ALLGATHER, 3000);
			for (int l = 0; l < 4; l++) {
				op(j, dp, FSS_OP_ALLGATHER, 700);
				if (kind == 0)
					for (int q = 0; q < 4; q++)
						group_op(j, x, FSS_OP_SEND, 8, 1024 * 16);
				if (kind == 1) {
					group_op(j, x, FSS_OP_SEND, 8, 4);
					group_op(j, x, FSS_OP_SEND, 8, 4096);
					group_op(j, x, FSS_OP_SEND, 8, 4096);
				}
			}
			if (kind == 2) {
				group_op(j, x, FSS_OP_SEND, 2, 4096); /* 1F1B: send activations, receive a gradient */
				group_op(j, x, FSS_OP_SEND, 1, 4096);
			}
			for (int l = 4; l-- > 0;) {
				op(j, dp, FSS_OP_ALLGATHER, 700);
				if (kind == 0)
					for (int q = 0; q < 4; q++)
						group_op(j, x, FSS_OP_SEND, 8, 1024 * 16);
				if (kind == 1) {
					group_op(j, x, FSS_OP_SEND, 8, 4096);
					group_op(j, x, FSS_OP_SEND, 8, 4096);
				}
				op(j, dp, FSS_OP_REDUCESCATTER, 700);
			}
			op(j, dp, FSS_OP_REDUCESCATTER, 3000);
		}
		struct comm_roles r;
		decide(j, NULL, &r);
		static const uint8_t want[] = {ANALYSIS_ROLE_ALL_TO_ALL, ANALYSIS_ROLE_EXPERT, ANALYSIS_ROLE_PIPELINE};
		assert_int_equal(r.fsdp, dp);
		assert_int_equal(r.ngroups, 1);
		assert_int_equal(r.role[x], want[kind]);
		assert_false(comm_roles_in_steps(r.role[x]));
		comm_roles_release(&r);
		job_free(j);
	}
}

/* DeepSpeed ZeRO++ (zero_quantized_weights + zero_hpz_partition_size 2):
 * forward fetches from the primary partition on the world, each an int8
 * AllGather of the values and an fp32 one of their scales; backward
 * fetches from the secondary partition on the intra-node group, in other
 * buckets than the forward's, between the world's reduce buckets. The
 * intra-node group re-gathers for the world's group. */
static void test_zero_hpz(void **state)
{
	(void)state;
	struct job *j = job_new();
	int world = comm(j, 4, 0x1111u), node = comm(j, 2, 0x2222u);
	for (int s = 0; s < 5; s++) {
		for (int b = 0; b < 6; b++) {
			gather_bytes(j, world, 40000 + 8000 * (uint64_t)b, FSS_DTYPE_INT8, 1);
			gather_bytes(j, world, 5 + (uint64_t)b, FSS_DTYPE_FLOAT32, 4);
		}
		for (int b = 0; b < 4; b++) {
			gather_bytes(j, node, 90000 + 4000 * (uint64_t)b, FSS_DTYPE_INT8, 1);
			gather_bytes(j, node, 11 + (uint64_t)b, FSS_DTYPE_FLOAT32, 4);
			if (b % 2)
				op(j, world, FSS_OP_REDUCESCATTER, 50000);
		}
		op(j, world, FSS_OP_ALLREDUCE, 1);
	}
	struct comm_roles r;
	decide(j, NULL, &r);
	assert_int_equal(r.fsdp, world);
	assert_int_equal(r.role[node], ANALYSIS_ROLE_FSDP_REGATHER);
	assert_int_equal(comm_roles_group_of(&r, (uint32_t)node), 0);
	assert_true(comm_roles_is_fsdp(r.role[node]));
	comm_roles_release(&r);
	job_free(j);
}

/* TP whose sequence changes every step: its activation sizes follow it,
 * the FSDP group's do not. */
static void test_tensor_parallel_sequence(void **state)
{
	(void)state;
	struct job *j = job_new();
	int world = comm(j, 4, 0xaaaa0000u), tp = comm(j, 2, 0xbbbb0000u), dp = comm(j, 2, 0xcccc0000u);
	static const uint64_t seq[] = {4096, 3072, 4096, 2048, 1024};
	for (int s = 0; s < 5; s++) {
		op(j, dp, FSS_OP_ALLGATHER, 5000);
		for (int l = 0; l < 6; l++) {
			op(j, dp, FSS_OP_ALLGATHER, 700);
			op(j, tp, FSS_OP_ALLGATHER, seq[s]);
			op(j, tp, FSS_OP_REDUCESCATTER, seq[s]);
			op(j, tp, FSS_OP_ALLGATHER, seq[s]);
			op(j, tp, FSS_OP_REDUCESCATTER, seq[s]);
		}
		for (int l = 6; l-- > 0;) {
			op(j, dp, FSS_OP_ALLGATHER, 700);
			op(j, tp, FSS_OP_ALLGATHER, seq[s]);
			op(j, tp, FSS_OP_REDUCESCATTER, seq[s]);
			op(j, dp, FSS_OP_REDUCESCATTER, 700);
		}
		op(j, dp, FSS_OP_REDUCESCATTER, 5000);
		op(j, world, FSS_OP_ALLREDUCE, 1);
	}
	struct comm_roles r;
	decide(j, NULL, &r);
	assert_int_equal(r.fsdp, dp);
	assert_int_equal(r.ngroups, 1);
	assert_int_equal(r.role[tp], ANALYSIS_ROLE_TENSOR_PARALLEL);
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
		cmocka_unit_test(test_context_parallel_flex),
		cmocka_unit_test(test_context_parallel_ring),
		cmocka_unit_test(test_context_parallel_on_the_fsdp_world),
		cmocka_unit_test(test_context_parallel_ring_on_the_fsdp_world),
		cmocka_unit_test(test_moe_expert_groups),
		cmocka_unit_test(test_all_to_all_and_pipeline),
		cmocka_unit_test(test_zero_hpz),
		cmocka_unit_test(test_tensor_parallel_sequence),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
