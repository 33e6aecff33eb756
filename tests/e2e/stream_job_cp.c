/*
 * tests/e2e/stream_job_cp.c - the setups that shard the sequence beside
 * FSDP2: cp (torchtitan context parallelism, FlexAttention or SDPA ring
 * attention) and ulysses (verl's FSDP2 actor with DeepSpeed-Ulysses
 * all-to-alls); what each issues, and its sources, in stream_job.md.
 */
#include "stream_job.h"

/* A setup's FSDP2 units and its sequence group. */
struct sj_seq {
	struct sj_job *job;
	struct sj_fsdp2 *f;
	struct sj_comm *seq; /* cp or sp: the group the sequence is sharded over */
	size_t kv;           /* elements of one of k, v (or q, the output) on this rank */
	size_t tokens;       /* tokens of a micro-batch on this rank */
};

/* A mesh dimension as DeviceMesh (torch >= 2.9, layouts) makes it: the
 * default group when the dimension spans the world
 * (_init_one_process_group's early return), else one ncclCommSplit of the
 * world with the index of the rank's group as the color. */
static struct sj_comm *sj_mesh_dim(struct sj_job *j, struct sj_comm *world, int size, int color, enum sj_role role,
				   const char *name)
{
	if (size == j->world)
		return world;
	return sj_comm_split(j, world, color, role, name);
}

/* ---- setup cp: torchtitan context parallelism ------------------------------ */

/* ft_c.permute_tensor(buf, [1, 2, .., 0], cp): all_to_all_single with
 * split sizes, so all2all_single_unequal_split: the whole buffer to the
 * next rank of the ring, from the previous one, zero to the others. */
static void cp_permute(struct sj_seq *s, size_t count, ncclDataType_t dt)
{
	int n = s->seq->nranks, me = s->seq->rank;
	size_t send[64] = {0}, recv[64] = {0};
	send[(me + 1) % n] = count;
	recv[(me + n - 1) % n] = count;
	sj_alltoall(s->job, s->seq, send, recv, dt);
}

/* One rotation of cat(k, v) by _cp_options.rotate_method: the
 * _AllGatherRotater gathers once (its first exchange) and serves every
 * later round from that buffer; the _AllToAllRotater permutes every round. */
static void cp_rotate_kv(struct sj_seq *s, int round)
{
	if (s->job->opt->rotate_alltoall)
		cp_permute(s, 2 * s->kv, ncclBfloat16);
	else if (round == 0)
		sj_allgather(s->job, s->seq, 2 * s->kv, ncclBfloat16, KIND_OTHER);
}

/* The attention core of a block, forward. FlexAttention:
 * _ContextParallel.flex_input_fn -> flex_cp_allgather, k then v.
 * SDPA: _templated_ring_attention, one round per CP rank, cat(k, v) sent
 * on before each round but the last. */
static void cp_attention_forward(struct sj_seq *s)
{
	struct sj_job *j = s->job;
	if (!j->opt->attention_sdpa) {
		sj_allgather(j, s->seq, s->kv, ncclBfloat16, KIND_OTHER);
		sj_allgather(j, s->seq, s->kv, ncclBfloat16, KIND_OTHER);
		sj_compute(j, 1);
		return;
	}
	int n = s->seq->nranks;
	for (int i = 0; i < n; i++) {
		if (i < n - 1)
			cp_rotate_kv(s, i);
		sj_compute(j, 1);
	}
}

/* Backward. FlexAttention: flex_cp_allgather_backward reduce-scatters the
 * gradients of the gathered k, then v. SDPA:
 * _templated_ring_attention_backward rotates k, v again (the forward's
 * buffer is not kept) and, every round, sends the accumulated dK, dV (fp32:
 * convert_to_f32) on with an _AllToAllRotater whatever rotate_method says. */
static void cp_attention_backward(struct sj_seq *s)
{
	struct sj_job *j = s->job;
	if (!j->opt->attention_sdpa) {
		sj_compute(j, 2);
		sj_reduce_scatter(j, s->seq, s->kv, ncclBfloat16, KIND_OTHER);
		sj_reduce_scatter(j, s->seq, s->kv, ncclBfloat16, KIND_OTHER);
		return;
	}
	int n = s->seq->nranks;
	for (int i = 0; i < n; i++) {
		if (i != n - 1)
			cp_rotate_kv(s, i);
		sj_compute(j, 2);
		cp_permute(s, 2 * s->kv, ncclFloat32);
	}
}

static void cp_block_forward(struct sj_seq *s, int b)
{
	struct sj_fsdp2 *f = s->f;
	int u = f->block_first[b];
	fsdp2_pre_forward(f, u);
	sj_compute(s->job, 3); /* wq wk wv */
	cp_attention_forward(s);
	sj_compute(s->job, 4); /* wo; w1 w3 w2 */
	fsdp2_post_forward(f, u);
}

static void cp_block_backward(struct sj_seq *s, int b)
{
	struct sj_fsdp2 *f = s->f;
	int u = f->block_first[b];
	fsdp2_pre_backward(f, u);
	sj_compute(s->job, 8); /* w2 w3 w1 wo: input and weight gradients */
	cp_attention_backward(s);
	sj_compute(s->job, 6); /* wq wk wv */
	fsdp2_post_backward(f, u);
}

/* AllGathers per step on the FSDP communicator that gather no parameter. */
static int sj_other_gathers(const struct sj_job *j, const struct sj_comm *fsdp)
{
	return fsdp->last[EV_ALLGATHER] - j->last.param_gathers;
}

void run_cp(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int C = o->cp, batch = j->rank / C;
	/* ParallelDims.build_mesh: the world mesh, then _unflatten into
	 * (pp, batch, cp, tp) (batch and size-1 dimensions fake-backed: cp is
	 * the only group made) and (pp, dp_replicate, fsdp, tp), where fsdp =
	 * dp_shard x cp is the whole world: the default group. */
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct sj_comm *cp = sj_mesh_dim(j, world, C, batch, ROLE_CONTEXT_PARALLEL, "cp");
	struct sj_fsdp2 f;
	fsdp2_init(&f, j, world, NULL, 4 + o->layers, 1);
	/* No explicit forward prefetch without EP: each unit is gathered at
	 * its own pre-forward (FSDP2's implicit prefetch is the GPU streams'). */
	f.forward_prefetch = 0;
	const struct sj_param *emb[] = {&sj_tok_embeddings};
	int tok = fsdp2_add_unit(&f, "tok_embeddings", -1, emb, 1, 1);
	for (int b = 0; b < o->layers; b++)
		fsdp2_add_block(&f, b, 1);
	const struct sj_param *normout[] = {&sj_final_norm, &sj_output};
	int head = fsdp2_add_unit(&f, "norm,output", -1, normout, 2, 0);
	struct sj_seq s = {.job = j, .f = &f, .seq = cp};
	s.tokens = (size_t)SJ_BATCH * SJ_SEQ / (size_t)C;
	s.kv = s.tokens * SJ_HIDDEN; /* [B, heads, S / C, head_dim], n_kv_heads = n_heads */
	for (int st = 0; st < o->steps; st++) {
		sj_step_begin(j, st);
		fsdp2_step_reset(&f);
		j->phase = "forward";
		fsdp2_pre_forward(&f, tok);
		fsdp2_post_forward(&f, tok);
		for (int b = 0; b < o->layers; b++)
			cp_block_forward(&s, b);
		fsdp2_pre_forward(&f, head);
		sj_compute(j, 1);
		fsdp2_post_forward(&f, head);
		j->phase = "backward";
		fsdp2_pre_backward(&f, head);
		sj_compute(j, 2);
		fsdp2_post_backward(&f, head);
		for (int b = o->layers - 1; b >= 0; b--)
			cp_block_backward(&s, b);
		/* tok_embeddings' inputs need no gradient: its post-backward runs
		 * in the root's final callback. */
		fsdp2_pre_backward(&f, tok);
		fsdp2_post_backward(&f, tok);
		fsdp2_end_backward(&f);
		j->phase = "optimizer";
		/* clip_grad_norm_: the norm is Partial on the fsdp mesh only */
		sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(&f, t, 1);
	t->microbatches = 1;
	t->microbatches_told = o->nvtx || j->last.step_marks > 0;
	sj_truth_extra(t, "  \"step_allgathers\": %d", sj_other_gathers(j, world));
	sj_note(t, "FSDP over dp_shard %d x cp %d (the world); %s on cp%s", j->world / C, C,
		!o->attention_sdpa	? "FlexAttention: k and v gathered in forward, reduce-scattered in backward"
		: o->rotate_alltoall	? "SDPA ring attention, k and v rotated by all-to-all"
					: "SDPA ring attention, k and v gathered, dK and dV rotated by all-to-all",
		cp == world ? " (cp spans the world: the same communicator)" : "");
	fsdp2_free(&f);
}

/* ---- setup ulysses: verl's FSDP2 actor with Ulysses sequence parallelism ---- */

/* verl.utils.ulysses.all_to_all_tensor: dist.all_to_all of equal chunks,
 * torch::cuda::nccl::all2all. */
static void ulysses_a2a(struct sj_seq *s)
{
	size_t per[64];
	for (int r = 0; r < s->seq->nranks; r++)
		per[r] = s->kv / (size_t)s->seq->nranks;
	sj_alltoall(s->job, s->seq, per, per, ncclBfloat16);
}

/* _ulysses_flash_attention_forward: gather the sequence and scatter the
 * heads of q, k and v; all_gather the position ids; attention on S tokens
 * and H / sp heads; scatter the sequence back. */
static void ulysses_block_forward(struct sj_seq *s, int b)
{
	struct sj_fsdp2 *f = s->f;
	int u = f->block_first[b];
	fsdp2_pre_forward(f, u);
	sj_compute(s->job, 3);
	for (int k = 0; k < 3; k++)
		ulysses_a2a(s);
	sj_allgather(s->job, s->seq, s->tokens, ncclInt64, KIND_OTHER);
	sj_compute(s->job, 1);
	ulysses_a2a(s);
	sj_compute(s->job, 4);
	fsdp2_post_forward(f, u);
}

/* SeqAllToAll.backward: the reverse all-to-all; the output's first, then
 * v, k, q (autograd runs the later-made node first). */
static void ulysses_block_backward(struct sj_seq *s, int b)
{
	struct sj_fsdp2 *f = s->f;
	int u = f->block_first[b];
	fsdp2_pre_backward(f, u);
	sj_compute(s->job, 8);
	ulysses_a2a(s);
	sj_compute(s->job, 2);
	for (int k = 0; k < 3; k++)
		ulysses_a2a(s);
	sj_compute(s->job, 6);
	fsdp2_post_backward(f, u);
}

void run_ulysses(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int S = o->sp;
	/* create_device_mesh: ("fsdp",) over the world, the default group;
	 * then init_device_mesh((dp, sp)). verl initialises the process group
	 * without a device, so DeviceMesh makes its groups with new_group,
	 * whose communicators come at their first collective: dp (strided)
	 * carries none and never has one; sp (consecutive) does. */
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct sj_comm *sp = sj_mesh_dim(j, world, S, j->rank / S, ROLE_ALL_TO_ALL, "sp");
	struct sj_fsdp2 f;
	fsdp2_init(&f, j, world, NULL, 4 + o->layers, 1);
	f.forward_prefetch = 0;
	/* apply_fsdp2: embed_tokens and each decoder layer, then the model
	 * (norm, lm_head), all with reshard_after_forward=True as fsdp_config
	 * gives it (explicit, so the root reshards too). Pre-forward order:
	 * the model first. */
	const struct sj_param *rootp[] = {&sj_final_norm, &sj_output};
	int root = fsdp2_add_unit(&f, "model", -1, rootp, 2, 1);
	f.units[root].root = 1;
	const struct sj_param *emb[] = {&sj_tok_embeddings};
	int tok = fsdp2_add_unit(&f, "model.embed_tokens", -1, emb, 1, 1);
	for (int b = 0; b < o->layers; b++)
		fsdp2_add_block(&f, b, 1);
	struct sj_seq s = {.job = j, .f = &f, .seq = sp};
	s.tokens = (size_t)SJ_BATCH * SJ_SEQ / (size_t)S; /* remove-padding: one packed row */
	s.kv = s.tokens * SJ_HIDDEN;
	for (int st = 0; st < o->steps; st++) {
		sj_step_begin(j, st);
		fsdp2_step_reset(&f);
		j->phase = "forward";
		fsdp2_pre_forward(&f, root);
		fsdp2_pre_forward(&f, tok);
		fsdp2_post_forward(&f, tok);
		for (int b = 0; b < o->layers; b++)
			ulysses_block_forward(&s, b);
		sj_compute(j, 1); /* lm_head */
		fsdp2_post_forward(&f, root);
		/* dp_actor._forward_micro_batch: gather_outputs_and_unpad of the
		 * log-probs (fp32) over sp; Gather.backward takes the local slice. */
		sj_allgather(j, sp, s.tokens, ncclFloat32, KIND_OTHER);
		j->phase = "backward";
		fsdp2_pre_backward(&f, root);
		sj_compute(j, 2);
		for (int b = o->layers - 1; b >= 0; b--)
			ulysses_block_backward(&s, b);
		fsdp2_pre_backward(&f, tok);
		/* The final callback: post-backward of the states autograd did not
		 * reach (their inputs need no gradient), in all_states order. */
		fsdp2_post_backward(&f, root);
		fsdp2_post_backward(&f, tok);
		fsdp2_end_backward(&f);
		j->phase = "optimizer";
		sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1); /* fsdp2_clip_grad_norm_ */
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(&f, t, 1);
	t->microbatches = 1;
	t->microbatches_told = o->nvtx || j->last.step_marks > 0;
	sj_truth_extra(t, "  \"step_allgathers\": %d", sj_other_gathers(j, world));
	sj_note(t, "FSDP2 on the world (%d ranks), Ulysses all-to-alls on sp %d%s; the root (norm, lm_head) is "
		   "resharded after forward and reduce-scattered first in the final callback",
		j->world, S, sp == world ? " (sp spans the world: the same communicator)" : "");
	fsdp2_free(&f);
}
