/*
 * tests/e2e/stream_job_moe.c - the moe setup: torchtitan's MoE decoder with
 * expert parallelism, the routed experts a nested fully_shard on their own
 * data-parallel mesh (efsdp, dp_shard_mod_ep before 2026); what it issues,
 * and its sources, in stream_job.md.
 */
#include "stream_job.h"

#define MOE_INTER (SJ_HIDDEN / 2) /* moe_inter_dim of the routed and the shared experts */
#define MOE_TOP_K 2               /* experts per token */
#define MOE_MAX_EP 64

struct sj_moe {
	struct sj_job *job;
	struct sj_fsdp2 dense;   /* the blocks without their routed experts, on the world */
	struct sj_fsdp2 experts; /* each block's routed experts, on efsdp */
	struct sj_comm *world, *efsdp, *ep;
	int nexperts, ep_size, ep_rank, ep_first; /* ep_first: world rank of EP rank 0 of this group */
	int tok, head;           /* units of dense */
	size_t to[MOE_MAX_EP];   /* routed rows this rank sends to each EP rank, this block and step */
	size_t from[MOE_MAX_EP]; /* and receives from each */
	/* parameters whose shapes follow the options */
	struct sj_param gate, shared[3], routed[3];
	uint64_t params; /* P of the whole model, every expert included */
};

/* Deterministic routing, known to every rank: how many of the routed rows
 * (tokens x top_k) of world rank src go to expert e in block b of step s.
 * The split changes with every step and block, as real routing does. */
static size_t moe_rows(const struct sj_moe *m, int s, int b, int src, int e)
{
	size_t total = (size_t)SJ_BATCH * SJ_SEQ * MOE_TOP_K;
	unsigned weight[256], sum = 0;
	for (int k = 0; k < m->nexperts; k++) {
		uint64_t h = ((uint64_t)s * 1000003u + (uint64_t)b * 10007u + (uint64_t)src * 101u + (uint64_t)k) *
			     0x9e3779b97f4a7c15ull;
		h ^= h >> 31;
		weight[k] = 1 + (unsigned)(h % 8);
		sum += weight[k];
	}
	size_t given = 0;
	for (int k = 0; k < m->nexperts; k++)
		given += total * weight[k] / sum;
	size_t rows = total * weight[e] / sum;
	if (e == 0)
		rows += total - given; /* the rounding rest */
	return rows;
}

/* The splits of block b: ExpertParallel._token_dispatch's input_splits
 * (rows to each EP rank's experts) and output_splits (rows of each EP rank
 * for this rank's experts). */
static void moe_splits(struct sj_moe *m, int b)
{
	int s = m->job->step, local = m->nexperts / m->ep_size;
	for (int p = 0; p < m->ep_size; p++) {
		m->to[p] = m->from[p] = 0;
		for (int e = p * local; e < (p + 1) * local; e++)
			m->to[p] += moe_rows(m, s, b, m->job->rank, e);
		for (int e = m->ep_rank * local; e < (m->ep_rank + 1) * local; e++)
			m->from[p] += moe_rows(m, s, b, m->ep_first + p, e);
	}
}

/* all_to_all_single_autograd of routed rows (bf16, H each): send[p] rows
 * to EP rank p, recv[p] from it. */
static void moe_rows_a2a(struct sj_moe *m, const size_t *send, const size_t *recv)
{
	size_t sc[MOE_MAX_EP], rc[MOE_MAX_EP];
	for (int p = 0; p < m->ep_size; p++) {
		sc[p] = send[p] * SJ_HIDDEN;
		rc[p] = recv[p] * SJ_HIDDEN;
	}
	sj_alltoall(m->job, m->ep, sc, rc, ncclBfloat16);
}

/* _token_dispatch: the tokens-per-expert counts (int64, an equal split:
 * num_experts / ep to each EP rank), then the routed rows. */
static void moe_dispatch(struct sj_moe *m)
{
	size_t per[MOE_MAX_EP];
	for (int p = 0; p < m->ep_size; p++)
		per[p] = (size_t)(m->nexperts / m->ep_size);
	sj_alltoall(m->job, m->ep, per, per, ncclInt64);
	moe_rows_a2a(m, m->to, m->from);
}

/* Gather a unit if it is sharded (FSDPParamGroup.unshard is a no-op when
 * unsharded or prefetched); the explicit prefetches use it too. */
static void moe_unshard(struct sj_fsdp2 *f, int ui, int backward)
{
	if (ui >= 0 && !f->units[ui].unsharded)
		fsdp2_gather(f, &f->units[ui], backward);
}

static void moe_block_forward(struct sj_moe *m, int b)
{
	struct sj_job *j = m->job;
	int L = j->opt->layers, u = m->dense.block_first[b], eu = m->experts.block_first[b];
	moe_unshard(&m->dense, u, 0);
	/* set_modules_to_forward_prefetch: the next block and its experts;
	 * the last block, [norm, output]. */
	if (b + 1 < L) {
		moe_unshard(&m->dense, m->dense.block_first[b + 1], 0);
		moe_unshard(&m->experts, m->experts.block_first[b + 1], 0);
	} else {
		moe_unshard(&m->dense, m->head, 0);
	}
	sj_compute(j, 5); /* attention */
	sj_compute(j, 1); /* router */
	moe_splits(m, b);
	/* The experts' FSDP pre-forward hook is prepended: unshard, then
	 * ExpertParallel's input_fn (dispatch), the experts, its output_fn
	 * (combine), then FSDP's post-forward. */
	moe_unshard(&m->experts, eu, 0);
	moe_dispatch(m);
	sj_compute(j, 3);
	moe_rows_a2a(m, m->from, m->to);
	fsdp2_post_forward(&m->experts, eu);
	sj_compute(j, 3); /* shared expert */
	fsdp2_post_forward(&m->dense, u);
}

/* Backward: the experts' pre-backward hook sits on the combined output,
 * their post-backward on the inputs before dispatch; the all-to-alls'
 * gradients run the other way. */
static void moe_block_backward(struct sj_moe *m, int b)
{
	struct sj_job *j = m->job;
	int u = m->dense.block_first[b], eu = m->experts.block_first[b];
	moe_unshard(&m->dense, u, 1);
	/* set_modules_to_backward_prefetch: the block before and its
	 * experts; block 0, tok_embeddings. */
	if (b > 0) {
		moe_unshard(&m->dense, m->dense.block_first[b - 1], 1);
		moe_unshard(&m->experts, m->experts.block_first[b - 1], 1);
	} else {
		moe_unshard(&m->dense, m->tok, 1);
	}
	moe_splits(m, b);
	sj_compute(j, 6); /* shared expert */
	moe_unshard(&m->experts, eu, 1);
	moe_rows_a2a(m, m->to, m->from); /* the combine's gradient */
	sj_compute(j, 6);
	moe_rows_a2a(m, m->from, m->to); /* the dispatch's gradient */
	fsdp2_post_backward(&m->experts, eu);
	sj_compute(j, 12); /* router, attention */
	fsdp2_post_backward(&m->dense, u);
}

static void moe_step(struct sj_moe *m)
{
	struct sj_job *j = m->job;
	int L = j->opt->layers;
	j->phase = "forward";
	moe_unshard(&m->dense, m->tok, 0);
	moe_unshard(&m->dense, m->dense.block_first[0], 0); /* tok_embeddings prefetches block 0 only */
	fsdp2_post_forward(&m->dense, m->tok);
	for (int b = 0; b < L; b++)
		moe_block_forward(m, b);
	moe_unshard(&m->dense, m->head, 0);
	sj_compute(j, 1);
	fsdp2_post_forward(&m->dense, m->head);
	j->phase = "backward";
	moe_unshard(&m->dense, m->head, 1);
	moe_unshard(&m->dense, m->dense.block_first[L - 1], 1); /* output prefetches the last block only */
	sj_compute(j, 2);
	fsdp2_post_backward(&m->dense, m->head);
	for (int b = L - 1; b >= 0; b--)
		moe_block_backward(m, b);
	moe_unshard(&m->dense, m->tok, 1);
	fsdp2_post_backward(&m->dense, m->tok); /* in the root's final callback */
	fsdp2_end_backward(&m->dense);
	fsdp2_end_backward(&m->experts);
	j->phase = "optimizer";
	/* _clip_grad_norm_with_ep: the experts' norm is Partial on (efsdp,
	 * ep), the others' on the fsdp mesh (the world); a mesh dimension of
	 * one rank needs no collective. */
	if (m->efsdp->nranks > 1)
		sj_allreduce(j, m->efsdp, 1, ncclFloat32, ncclSum, 1);
	sj_allreduce(j, m->ep, 1, ncclFloat32, ncclSum, 1);
	sj_allreduce(j, m->world, 1, ncclFloat32, ncclSum, 1);
	/* _update_expert_bias (an optimizer step pre-hook): tokens_per_expert
	 * of every MoE block, summed over the loss mesh (the world). */
	sj_allreduce(j, m->world, (size_t)L * (size_t)m->nexperts, ncclFloat32, ncclSum, 1);
	sj_compute(j, 1);
}

static void moe_units(struct sj_moe *m)
{
	const struct sj_options *o = m->job->opt;
	int E = m->nexperts, local = E / m->ep_size, dpm = m->efsdp->nranks;
	m->gate = (struct sj_param){"moe.router.gate", (size_t)E, SJ_HIDDEN, TP_REPLICATE, 0};
	m->shared[0] = (struct sj_param){"moe.shared_experts.w1", MOE_INTER, SJ_HIDDEN, TP_REPLICATE, 0};
	m->shared[1] = (struct sj_param){"moe.shared_experts.w2", SJ_HIDDEN, MOE_INTER, TP_REPLICATE, 0};
	m->shared[2] = (struct sj_param){"moe.shared_experts.w3", MOE_INTER, SJ_HIDDEN, TP_REPLICATE, 0};
	/* GroupedExperts w1 (E, inter, H), w2 (E, H, inter), w3: this EP
	 * rank's E / ep experts (Shard(0) on ep). FSDP shards them on dim 0,
	 * or on dim 1 when efsdp x ep > E (_experts_shard_placement_fn): the
	 * rows of a dim-1 shard are the experts times their second dimension. */
	static const char *const names[3] = {"moe.experts.w1", "moe.experts.w2", "moe.experts.w3"};
	size_t d1[3] = {MOE_INTER, SJ_HIDDEN, MOE_INTER}, d2[3] = {SJ_HIDDEN, MOE_INTER, SJ_HIDDEN};
	int dim1 = dpm * m->ep_size > E;
	for (int k = 0; k < 3; k++) {
		if (dim1)
			m->routed[k] = (struct sj_param){names[k], d1[k], (size_t)local * d2[k], TP_REPLICATE, 0};
		else
			m->routed[k] = (struct sj_param){names[k], (size_t)local, d1[k] * d2[k], TP_REPLICATE, 0};
	}
	const struct sj_param *emb[] = {&sj_tok_embeddings};
	m->tok = fsdp2_add_unit(&m->dense, "tok_embeddings", -1, emb, 1, 1);
	const struct sj_param *blk[] = {&sj_block_params[BP_WQ],	 &sj_block_params[BP_WK],
					&sj_block_params[BP_WV],	 &sj_block_params[BP_WO],
					&m->gate,			 &m->shared[0],
					&m->shared[1],			 &m->shared[2],
					&sj_block_params[BP_ATTN_NORM], &sj_block_params[BP_FFN_NORM]};
	const struct sj_param *ex[] = {&m->routed[0], &m->routed[1], &m->routed[2]};
	char name[48];
	for (int b = 0; b < o->layers; b++) {
		snprintf(name, sizeof name, "layers.%d", b);
		fsdp2_add_unit(&m->dense, name, b, blk, (int)(sizeof blk / sizeof blk[0]), 1);
		snprintf(name, sizeof name, "layers.%d.moe.experts", b);
		fsdp2_add_unit(&m->experts, name, b, ex, 3, 1);
	}
	const struct sj_param *normout[] = {&sj_final_norm, &sj_output};
	m->head = fsdp2_add_unit(&m->dense, "norm,output", -1, normout, 2, 0);
	m->params = m->dense.model_params + (uint64_t)o->layers * 3u * (uint64_t)E * MOE_INTER * SJ_HIDDEN;
}

/* Parameter bytes a group's gathers of the last step brought to this rank. */
static uint64_t moe_gathered_bytes(const struct sj_fsdp2 *f)
{
	uint64_t bytes = 0;
	for (int i = 0; i < f->nunits; i++) {
		const struct sj_unit *u = &f->units[i];
		bytes += (uint64_t)(u->forward_gathers + u->backward_gathers) * u->gather_count * (uint64_t)f->dp * 2u;
	}
	return bytes;
}

static int moe_units_gathered(const struct sj_fsdp2 *f)
{
	int n = 0;
	for (int i = 0; i < f->nunits; i++)
		n += f->units[i].forward_gathers > 0;
	return n;
}

/* fsdp_groups: each FSDP group's events of the last step, the primary
 * (most parameter bytes gathered) first. */
static void moe_truth(struct sj_moe *m, struct sj_truth *t)
{
	struct sj_job *j = m->job;
	uint64_t dense = moe_gathered_bytes(&m->dense), experts = moe_gathered_bytes(&m->experts);
	if (experts >= dense)
		sj_die("--experts %d / --ep %d: the experts' group gathers %" PRIu64 " bytes a step, the dense one %" PRIu64
		       "; this program emulates the dense group as the primary one",
		       m->nexperts, m->ep_size, experts, dense);
	fsdp2_truth(&m->dense, t, 1);
	t->params = m->params;
	t->microbatches = 1;
	t->microbatches_told = j->opt->nvtx || j->last.step_marks > 0;
	/* Counted on each group's own communicator; on the world only the
	 * dense group's parameters are gathered and reduced. */
	int shared = m->ep == m->world;
	sj_truth_extra(t,
		       "  \"fsdp_groups\": [{\"name\": \"%s\", \"nranks\": %d, \"allgathers\": %d, \"reduce_scatters\": %d, "
		       "\"units\": %d}, {\"name\": \"%s\", \"nranks\": %d, \"allgathers\": %d, \"reduce_scatters\": %d, "
		       "\"units\": %d}]",
		       m->world->name, m->world->nranks, m->world->last[EV_ALLGATHER], m->world->last[EV_REDUCE_SCATTER],
		       moe_units_gathered(&m->dense), m->efsdp->name, m->efsdp->nranks, m->efsdp->last[EV_ALLGATHER],
		       m->efsdp->last[EV_REDUCE_SCATTER], moe_units_gathered(&m->experts));
	sj_truth_extra(t, "  \"step_allgathers\": %d", m->world->last[EV_ALLGATHER] - j->last.param_gathers);
	sj_note(t,
		"dense units on the world (%d ranks), each block's %d routed experts a nested unit on efsdp (%d ranks), "
		"%d per EP rank; token dispatch and combine as grouped Send/Recv on ep (%d ranks%s)",
		m->world->nranks, m->nexperts, m->efsdp->nranks, m->nexperts / m->ep_size, m->ep_size,
		shared ? ": the world" : "");
}

void run_moe(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	struct sj_moe m = {.job = j, .nexperts = o->experts, .ep_size = o->ep};
	m.ep_rank = j->rank % o->ep;
	m.ep_first = j->rank - m.ep_rank;
	/* ParallelDims.build_mesh: the world; fsdp (dp_shard) spans it, the
	 * default group; the sparse mesh _unflatten (pp, dp_replicate, efsdp,
	 * ep, etp) makes efsdp (strided: kept even at one rank when ep > 1)
	 * then ep (consecutive), unless a dimension spans the world. */
	m.world = sj_comm_world(j, ROLE_FSDP, "world");
	m.efsdp = sj_comm_split(j, m.world, m.ep_rank, ROLE_FSDP, "efsdp");
	m.ep = o->ep == j->world ? m.world : sj_comm_split(j, m.world, j->rank / o->ep, ROLE_EXPERT_PARALLEL, "ep");
	fsdp2_init(&m.dense, j, m.world, NULL, 4 + o->layers, 1);
	fsdp2_init(&m.experts, j, m.efsdp, NULL, o->layers, 1);
	m.dense.forward_prefetch = m.experts.forward_prefetch = 0;
	m.experts.not_primary = 1;
	moe_units(&m);
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		fsdp2_step_reset(&m.dense);
		fsdp2_step_reset(&m.experts);
		moe_step(&m);
		sj_step_end(j);
	}
	moe_truth(&m, t);
	fsdp2_free(&m.dense);
	fsdp2_free(&m.experts);
}
