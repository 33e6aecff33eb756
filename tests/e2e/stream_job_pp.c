/*
 * tests/e2e/stream_job_pp.c - the pp setup: pipeline stages x FSDP2 on dp
 * (stream_job.md).
 */
#include "stream_job.h"

/* ---- setup pp: pipeline stages x FSDP2 on dp (torchtitan 3-D-lite) ---------- */

struct sj_pp {
	struct sj_job *job;
	struct sj_fsdp2 *f;
	struct sj_comm *pp;
	int stage, stages, first_block, nblocks;
	int tok, head;           /* unit indices, -1 when not on this stage */
	size_t activation_count; /* one micro-batch's hidden states */
};

static void pp_stage_forward(struct sj_pp *p)
{
	struct sj_fsdp2 *f = p->f;
	p->job->phase = "forward";
	if (p->tok >= 0) {
		fsdp2_pre_forward(f, p->tok);
		fsdp2_post_forward(f, p->tok);
	}
	for (int b = p->first_block; b < p->first_block + p->nblocks; b++)
		fsdp2_block_forward(f, b);
	if (p->head >= 0) {
		fsdp2_pre_forward(f, p->head);
		sj_compute(p->job, 1);
		fsdp2_post_forward(f, p->head);
	}
}

/* _PipelineStageBase.backward_maybe_with_nosync: every micro-batch's
 * backward runs without gradient sync and without reshard; after the last
 * one, post_backward of every FSDP state in _state_ctx.all_states order
 * (module pre-order: the forward order) reduce-scatters. */
static void pp_stage_backward(struct sj_pp *p, int last)
{
	struct sj_fsdp2 *f = p->f;
	p->job->phase = "backward";
	f->reduce_grads = 0;
	f->reshard_after_backward = 0;
	if (p->head >= 0) {
		fsdp2_pre_backward(f, p->head);
		sj_compute(p->job, 2);
		fsdp2_post_backward(f, p->head);
	}
	for (int b = p->first_block + p->nblocks - 1; b >= p->first_block; b--)
		fsdp2_block_backward(f, b);
	if (p->tok >= 0) {
		fsdp2_pre_backward(f, p->tok);
		fsdp2_post_backward(f, p->tok);
	}
	fsdp2_end_backward(f);
	if (!last)
		return;
	f->reduce_grads = 1;
	f->reshard_after_backward = 1;
	for (int i = 0; i < f->nunits; i++)
		fsdp2_post_backward(f, i);
}

/* torch.distributed.pipelining's _batch_p2p: batch_isend_irecv of the
 * step's sends and receives, one ncclGroupStart/End; nothing when empty. */
static void pp_batch(struct sj_pp *p, int send_peer, int recv_peer)
{
	if (send_peer < 0 && recv_peer < 0)
		return;
	p->job->phase = "pipeline";
	sj_group_start(p->job);
	if (send_peer >= 0)
		sj_send(p->job, p->pp, p->activation_count, ncclBfloat16, send_peer);
	if (recv_peer >= 0)
		sj_recv(p->job, p->pp, p->activation_count, ncclBfloat16, recv_peer);
	sj_group_end(p->job);
}

/* Schedule1F1B._step_microbatches, one stage per rank: warm-up forwards,
 * then 1B1F with each forward's send fused with the next backward's
 * receive and each backward's send fused with the next forward's receive,
 * then the cool-down backwards. */
static void pp_step(struct sj_pp *p, int microbatches)
{
	int s = p->stage, S = p->stages;
	int prev = s > 0 ? s - 1 : -1, next = s < S - 1 ? s + 1 : -1;
	int warmup = microbatches < S - s ? microbatches : S - s;
	int fwd = 0, bwd = 0;
	int pending_fwd_send = 0; /* a forward's send left to fuse with the next backward's receive */
	for (int i = 0; i < warmup; i++) {
		pp_batch(p, -1, prev); /* receive the activations */
		pp_stage_forward(p);
		if (next >= 0) {
			if (fwd != warmup - 1)
				pp_batch(p, next, -1);
			else
				pending_fwd_send = 1;
		}
		fwd++;
	}
	int pending_bwd_send = 0;
	for (;;) {
		pp_batch(p, pending_fwd_send ? next : -1, next);
		pending_fwd_send = 0;
		pp_stage_backward(p, bwd == microbatches - 1);
		pending_bwd_send = prev >= 0;
		bwd++;
		if (fwd == microbatches)
			break;
		pp_batch(p, pending_bwd_send ? prev : -1, prev);
		pending_bwd_send = 0;
		pp_stage_forward(p);
		pending_fwd_send = next >= 0;
		fwd++;
	}
	pp_batch(p, pending_bwd_send ? prev : -1, -1);
	while (bwd < microbatches) {
		pp_batch(p, -1, next);
		pp_stage_backward(p, bwd == microbatches - 1);
		pp_batch(p, prev, -1);
		bwd++;
	}
}

void run_pp(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int P = o->pp, dpn = j->world / P;
	int stage = j->rank / dpn, dp_rank = j->rank % dpn;
	/* init_device_mesh(("pp", "dp_shard")): pp outermost, dp groups of
	 * consecutive ranks; the pp dimension is split first. */
	struct sj_comm *world = sj_comm_world(j, ROLE_ONE_OFF, "world");
	struct sj_comm *pp = sj_comm_split(j, world, dp_rank, ROLE_PIPELINE, "pp");
	struct sj_comm *dp = sj_comm_split(j, world, stage, ROLE_FSDP, "dp");
	struct sj_fsdp2 f;
	fsdp2_init(&f, j, dp, NULL, 4 + 8 * o->layers, o->microbatches);
	struct sj_pp p = {.job = j, .f = &f, .pp = pp, .stage = stage, .stages = P, .tok = -1, .head = -1};
	p.nblocks = o->layers / P;
	p.first_block = stage * p.nblocks;
	p.activation_count = (size_t)SJ_SEQ * SJ_HIDDEN; /* one sequence per micro-batch */
	/* apply_fsdp with pp_enabled: reshard_after_forward=False for every unit. */
	if (stage == 0) {
		const struct sj_param *emb[] = {&sj_tok_embeddings};
		p.tok = fsdp2_add_unit(&f, "tok_embeddings", -1, emb, 1, 0);
	}
	for (int b = p.first_block; b < p.first_block + p.nblocks; b++)
		fsdp2_add_block(&f, b, 0);
	if (stage == P - 1) {
		const struct sj_param *normout[] = {&sj_final_norm, &sj_output};
		p.head = fsdp2_add_unit(&f, "norm,output", -1, normout, 2, 0);
	}
	/* P of the whole model, all stages together (f counts this stage's). */
	uint64_t block = 0;
	for (int i = 0; i < BP_COUNT; i++)
		block += (uint64_t)sj_block_params[i].rows * sj_block_params[i].cols;
	uint64_t model = block * (uint64_t)o->layers + sj_tok_embeddings.rows * sj_tok_embeddings.cols +
			 sj_final_norm.rows * sj_final_norm.cols + sj_output.rows * sj_output.cols;
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		fsdp2_step_reset(&f);
		pp_step(&p, o->microbatches);
		j->phase = "optimizer";
		if (o->clip) {
			/* torchtitan's clip_grad_norm_: full_tensor() on dp, then an
			 * explicit all_reduce on the pp group. */
			sj_allreduce(j, dp, 1, ncclFloat32, ncclSum, 1);
			sj_allreduce(j, pp, 1, ncclFloat32, ncclSum, 1);
		}
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(&f, t, 1);
	t->params = model;
	t->microbatches = 1;
	t->microbatches_told = o->nvtx || j->last.step_marks > 0;
	sj_note(t,
		"rank 0 is stage 0 of %d (tok_embeddings + blocks %d..%d on a dp group of %d); %d pipeline "
		"micro-batches (1F1B), but FSDP keeps parameters (reshard_after_forward=False): it gathers each "
		"unit once, in the first micro-batch's forward, and reduce-scatters once, after the last backward, "
		"so the FSDP group shows 1 forward/backward cycle per step",
		P, p.first_block, p.first_block + p.nblocks - 1, dpn, o->microbatches);
	fsdp2_free(&f);
}

