/*
 * tests/e2e/stream_job_pp.c - the pp setup: pipeline stages x FSDP2 on dp,
 * one stage per rank (Schedule1F1B) or --virtual-stages V chunks per rank
 * (ScheduleInterleaved1F1B); stream_job.md.
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

static void run_pp_interleaved(struct sj_job *j, struct sj_truth *t);

void run_pp(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	if (o->virtual_stages > 1) {
		run_pp_interleaved(j, t);
		return;
	}
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


/* ---- pp --virtual-stages V: ScheduleInterleaved1F1B ------------------------
 * P pipeline ranks, V chunks each: stage k (of P x V) sits on pp rank k % P
 * as its chunk k / P. Each chunk is a model part of its own, sharded as
 * apply_fsdp does for one (its units, reshard_after_forward=False, and
 * fully_shard of the part: an FSDP root per chunk). The schedule runs in
 * time steps, every rank computing every rank's action list
 * (PipelineScheduleMulti._step_microbatches); a chunk's gradients are
 * reduce-scattered right after its last micro-batch's backward, so the
 * reductions come chunk by chunk, the later chunk first. */

enum pp_action_type { PP_NONE, PP_FORWARD, PP_BACKWARD };

struct pp_action {
	enum pp_action_type type;
	int stage, microbatch;
};

struct pp_order {
	struct pp_action *ops;
	int n, cap;
};

static void pp_order_push(struct pp_order *o, enum pp_action_type type, int stage, int mb)
{
	if (o->n == o->cap) {
		o->cap = o->cap ? 2 * o->cap : 64;
		o->ops = realloc(o->ops, (size_t)o->cap * sizeof *o->ops);
		if (!o->ops)
			sj_die("out of memory");
	}
	o->ops[o->n++] = (struct pp_action){type, stage, mb};
}

/* ScheduleInterleaved1F1B._calculate_single_rank_operations and
 * _get_1f1b_rank_ops (without zero bubble), for one pp rank. */
static void pp_interleaved_order(struct pp_order *out, int rank, int P, int V, int M)
{
	int rounds = M / P > 1 ? M / P : 1;
	int per_round = M / rounds;
	int warmup = (V - 1) * per_round + 2 * (P - 1 - rank);
	if (warmup > M * V)
		warmup = M * V;
	int fwd_bwd = V * M - warmup, cooldown = V * M - fwd_bwd;
	int post_warmup = (V * P + 2 * (P - 1 - rank)) - (warmup + rank);
	int fwd_mb[64] = {0}, bwd_mb[64] = {0}; /* per stage */
	for (int i = 0; i < rank; i++)
		pp_order_push(out, PP_NONE, -1, -1);
	for (int op = 0; op < warmup + fwd_bwd + cooldown; op++) {
		int fs = ((op / per_round) % V) * P + rank;
		int bs = (V - 1 - ((op - warmup) / per_round) % V) * P + rank;
		if (op < warmup) {
			pp_order_push(out, PP_FORWARD, fs, fwd_mb[fs]++);
			if (op == warmup - 1)
				for (int k = 0; k < post_warmup; k++)
					pp_order_push(out, PP_NONE, -1, -1);
		} else if (op < warmup + fwd_bwd) {
			pp_order_push(out, PP_FORWARD, fs, fwd_mb[fs]++);
			pp_order_push(out, PP_BACKWARD, bs, bwd_mb[bs]++);
		} else {
			pp_order_push(out, PP_NONE, -1, -1);
			pp_order_push(out, PP_BACKWARD, bs, bwd_mb[bs]++);
		}
	}
}

struct pp_interleaved {
	struct sj_job *job;
	struct sj_comm *pp;
	int P, V, M, rank;
	struct sj_pp *chunks;           /* [V]: this rank's stages rank, rank + P, ... */
	struct sj_fsdp2 *fsdp;          /* [V] */
	struct pp_order *orders;        /* [P]: every pp rank's actions */
	int *backwards;                 /* [V]: backwards of this step so far */
	int reductions[64], nreductions; /* stages in the order their gradients were reduced */
};

/* The chunk of this rank that holds stage, or NULL. */
static struct sj_pp *pp_chunk_of(struct pp_interleaved *pi, int stage)
{
	if (stage < 0 || stage >= pi->P * pi->V || stage % pi->P != pi->rank)
		return NULL;
	return &pi->chunks[stage / pi->P];
}

/* One time step: the rank's own action and its sends, then the receives its
 * neighbours' actions of the same time step call for, all in one batch
 * (batch_isend_irecv: one ncclGroupStart/End). */
static void pp_interleaved_time_step(struct pp_interleaved *pi, int ts)
{
	struct sj_job *j = pi->job;
	const struct pp_action *a = &pi->orders[pi->rank].ops[ts];
	int S = pi->P * pi->V;
	int send_peer = -1, recv_from[2] = {-1, -1};
	if (a->type == PP_FORWARD) {
		pp_stage_forward(pp_chunk_of(pi, a->stage));
		if (a->stage < S - 1)
			send_peer = (a->stage + 1) % pi->P;
	} else if (a->type == PP_BACKWARD) {
		int c = a->stage / pi->P;
		int last = ++pi->backwards[c] == pi->M;
		pp_stage_backward(pp_chunk_of(pi, a->stage), last);
		if (last && pi->nreductions < 64)
			pi->reductions[pi->nreductions++] = a->stage;
		if (a->stage > 0)
			send_peer = (a->stage - 1) % pi->P;
	}
	int prev = (pi->rank - 1 + pi->P) % pi->P, next = (pi->rank + 1) % pi->P;
	if (ts < pi->orders[prev].n) {
		const struct pp_action *pa = &pi->orders[prev].ops[ts];
		if (pa->type == PP_FORWARD && pp_chunk_of(pi, pa->stage + 1))
			recv_from[0] = prev;
	}
	if (ts < pi->orders[next].n) {
		const struct pp_action *na = &pi->orders[next].ops[ts];
		if (na->type == PP_BACKWARD && pp_chunk_of(pi, na->stage - 1))
			recv_from[1] = next;
	}
	if (send_peer < 0 && recv_from[0] < 0 && recv_from[1] < 0)
		return;
	j->phase = "pipeline";
	size_t count = pi->chunks[0].activation_count;
	sj_group_start(j);
	if (send_peer >= 0)
		sj_send(j, pi->pp, count, ncclBfloat16, send_peer);
	for (int k = 0; k < 2; k++)
		if (recv_from[k] >= 0)
			sj_recv(j, pi->pp, count, ncclBfloat16, recv_from[k]);
	sj_group_end(j);
}

/* The units of one chunk: torchtitan's apply_fsdp on its model part. */
static void pp_chunk_init(struct pp_interleaved *pi, int c, struct sj_comm *dp)
{
	const struct sj_options *o = pi->job->opt;
	int stage = c * pi->P + pi->rank, S = pi->P * pi->V;
	struct sj_fsdp2 *f = &pi->fsdp[c];
	fsdp2_init(f, pi->job, dp, NULL, 4 + 8 * o->layers, o->microbatches);
	struct sj_pp *p = &pi->chunks[c];
	*p = (struct sj_pp){.job = pi->job, .f = f, .pp = pi->pp, .stage = stage, .stages = S, .tok = -1, .head = -1};
	p->nblocks = o->layers / S;
	p->first_block = stage * p->nblocks;
	p->activation_count = (size_t)SJ_SEQ * SJ_HIDDEN;
	if (stage == 0) {
		const struct sj_param *emb[] = {&sj_tok_embeddings};
		p->tok = fsdp2_add_unit(f, "tok_embeddings", -1, emb, 1, 0);
	}
	for (int b = p->first_block; b < p->first_block + p->nblocks; b++)
		fsdp2_add_block(f, b, 0);
	if (stage == S - 1) {
		const struct sj_param *normout[] = {&sj_final_norm, &sj_output};
		p->head = fsdp2_add_unit(f, "norm,output", -1, normout, 2, 0);
	}
}

static void pp_interleaved_truth(const struct pp_interleaved *pi, struct sj_truth *t, uint64_t model)
{
	const struct sj_job *j = pi->job;
	const struct sj_tally *s = &j->last;
	t->fsdp_allgathers = s->param_gathers;
	t->forward_allgathers = s->forward_gathers;
	t->backward_allgathers = s->backward_gathers;
	t->reduce_scatters = s->grad_reduce_scatters;
	t->params = model;
	t->microbatches = 1;
	t->microbatches_told = j->opt->nvtx || s->step_marks > 0;
	int blocks = 0;
	for (int c = 0; c < pi->V; c++)
		blocks += pi->chunks[c].nblocks;
	t->repeating_units = blocks;
	const struct sj_fsdp2 *f0 = &pi->fsdp[0];
	const struct sj_unit *first = &f0->units[f0->block_first[pi->chunks[0].first_block]];
	t->gathers_per_unit = first->forward_gathers;
	snprintf(t->reshard, sizeof t->reshard, "%s", first->backward_gathers > 0 ? "true" : "false");
	char order[160] = "";
	for (int i = 0; i < pi->nreductions; i++) {
		size_t len = strlen(order);
		snprintf(order + len, sizeof order - len, "%s%d", i ? ", " : "", pi->reductions[i]);
	}
	sj_truth_extra(t, "\"virtual_stages\": %d", pi->V);
	sj_truth_extra(t, "\"reduction_stages\": [%s]", order);
	char stages[160] = "";
	for (int c = 0; c < pi->V; c++) {
		size_t len = strlen(stages);
		snprintf(stages + len, sizeof stages - len, "%s%d", c ? ", " : "", pi->chunks[c].stage);
	}
	sj_note(t,
		"rank 0 holds stages %s of %d (%d blocks each, an FSDP root per chunk, on a dp group of %d); %d "
		"pipeline micro-batches (Interleaved1F1B); FSDP keeps parameters (reshard_after_forward=False): each "
		"chunk gathers its units in its first forward and reduce-scatters them after its last backward, chunk "
		"by chunk (stages %s), so the FSDP group shows 1 forward/backward cycle per step",
		stages, pi->P * pi->V, pi->chunks[0].nblocks, pi->fsdp[0].dp, pi->M, order);
}

static void run_pp_interleaved(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int P = o->pp, V = o->virtual_stages, dpn = j->world / P;
	int rank = j->rank / dpn, dp_rank = j->rank % dpn;
	struct sj_comm *world = sj_comm_world(j, ROLE_ONE_OFF, "world");
	struct sj_comm *pp = sj_comm_split(j, world, dp_rank, ROLE_PIPELINE, "pp");
	struct sj_comm *dp = sj_comm_split(j, world, rank, ROLE_FSDP, "dp");
	struct pp_interleaved pi = {.job = j, .pp = pp, .P = P, .V = V, .M = o->microbatches, .rank = rank};
	pi.chunks = calloc((size_t)V, sizeof *pi.chunks);
	pi.fsdp = calloc((size_t)V, sizeof *pi.fsdp);
	pi.orders = calloc((size_t)P, sizeof *pi.orders);
	pi.backwards = calloc((size_t)V, sizeof *pi.backwards);
	if (!pi.chunks || !pi.fsdp || !pi.orders || !pi.backwards)
		sj_die("out of memory");
	for (int c = 0; c < V; c++)
		pp_chunk_init(&pi, c, dp);
	for (int r = 0; r < P; r++)
		pp_interleaved_order(&pi.orders[r], r, P, V, o->microbatches);
	uint64_t block = 0;
	for (int i = 0; i < BP_COUNT; i++)
		block += (uint64_t)sj_block_params[i].rows * sj_block_params[i].cols;
	uint64_t model = block * (uint64_t)o->layers + sj_tok_embeddings.rows * sj_tok_embeddings.cols +
			 sj_final_norm.rows * sj_final_norm.cols + sj_output.rows * sj_output.cols;
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		for (int c = 0; c < V; c++) {
			fsdp2_step_reset(&pi.fsdp[c]);
			pi.backwards[c] = 0;
		}
		pi.nreductions = 0;
		for (int ts = 0; ts < pi.orders[rank].n; ts++)
			pp_interleaved_time_step(&pi, ts);
		j->phase = "optimizer";
		if (o->clip) {
			sj_allreduce(j, dp, 1, ncclFloat32, ncclSum, 1);
			sj_allreduce(j, pp, 1, ncclFloat32, ncclSum, 1);
		}
		sj_compute(j, 1);
		sj_step_end(j);
	}
	pp_interleaved_truth(&pi, t, model);
	for (int c = 0; c < V; c++)
		fsdp2_free(&pi.fsdp[c]);
	for (int r = 0; r < P; r++)
		free(pi.orders[r].ops);
	free(pi.chunks);
	free(pi.fsdp);
	free(pi.orders);
	free(pi.backwards);
}
