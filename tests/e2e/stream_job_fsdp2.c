/*
 * tests/e2e/stream_job_fsdp2.c - FSDP2 units and hooks, and the setups that run on
 * them alone: fsdp2 and tp (torchtitan 2-D); see stream_job.md.
 */
#include "stream_job.h"


void fsdp2_init(struct sj_fsdp2 *f, struct sj_job *j, struct sj_comm *comm, struct sj_comm *tp, int max_units,
		       int forwards_per_backward)
{
	memset(f, 0, sizeof *f);
	f->job = j;
	f->comm = comm;
	f->tp = tp;
	f->dp = comm->nranks;
	f->tp_degree = tp ? tp->nranks : 1;
	f->wrap_linear = j->opt->wrap_linear;
	f->cap = max_units;
	f->units = calloc((size_t)max_units, sizeof *f->units);
	f->block_first = malloc((size_t)j->opt->layers * sizeof *f->block_first);
	f->post_cap = max_units * (forwards_per_backward + 1);
	f->post_forward_order = calloc((size_t)f->post_cap, sizeof *f->post_forward_order);
	if (!f->units || !f->block_first || !f->post_forward_order)
		sj_die("out of memory");
	for (int b = 0; b < j->opt->layers; b++)
		f->block_first[b] = -1;
	f->forward_prefetch = 1;
	f->reduce_grads = 1;
	f->reduce_dtype = ncclFloat32;
	f->reshard_after_backward = 1;
	f->activation_count = (size_t)SJ_BATCH * SJ_SEQ / (size_t)f->tp_degree * SJ_HIDDEN;
}

void fsdp2_free(struct sj_fsdp2 *f)
{
	free(f->units);
	free(f->block_first);
	free(f->post_forward_order);
}

/* Units are added in forward (pre-forward) order. */
int fsdp2_add_unit(struct sj_fsdp2 *f, const char *name, int block, const struct sj_param *const *params,
			  int nparams, int reshard)
{
	if (f->nunits == f->cap)
		sj_die("too many units");
	struct sj_unit *u = &f->units[f->nunits];
	memset(u, 0, sizeof *u);
	snprintf(u->name, sizeof u->name, "%s", name);
	u->block = block;
	u->reshard = reshard;
	u->has_params = nparams > 0;
	u->gather_dtype = ncclBfloat16;
	for (int i = 0; i < nparams; i++) {
		const struct sj_param *p = params[i];
		size_t rows = p->rows, cols = p->cols;
		if (p->style == TP_COLWISE)
			rows /= (size_t)f->tp_degree;
		else if (p->style == TP_ROWWISE)
			cols /= (size_t)f->tp_degree;
		/* FSDP2 shards each parameter on dim 0, padding it to a multiple
		 * of the group size (_chunk_with_empty). */
		u->gather_count += sj_ceil_div(rows, (size_t)f->dp) * cols;
		u->local_params += rows * cols;
		if (p->norm && f->tp_degree > 1)
			u->norm_params++;
		f->model_params += p->rows * p->cols;
	}
	u->gather_send = u->reduce_count = u->gather_count;
	if (block >= 0 && f->block_first[block] < 0)
		f->block_first[block] = f->nunits;
	return f->nunits++;
}

/* The units of one block: the whole block, or (--wrap linear) the
 * rest-of-block unit (the norms) first, then q k v o gate up down, each
 * Linear its own fully_shard call before the block's. */
void fsdp2_add_block(struct sj_fsdp2 *f, int b, int reshard)
{
	char name[48];
	if (!f->wrap_linear) {
		const struct sj_param *all[BP_COUNT];
		for (int i = 0; i < BP_COUNT; i++)
			all[i] = &sj_block_params[i];
		snprintf(name, sizeof name, "layers.%d", b);
		fsdp2_add_unit(f, name, b, all, BP_COUNT, reshard);
		return;
	}
	const struct sj_param *rest[] = {&sj_block_params[BP_ATTN_NORM], &sj_block_params[BP_FFN_NORM]};
	snprintf(name, sizeof name, "layers.%d", b);
	fsdp2_add_unit(f, name, b, rest, 2, reshard);
	static const int order[] = {BP_WQ, BP_WK, BP_WV, BP_WO, BP_W1, BP_W3, BP_W2};
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		const struct sj_param *one[] = {&sj_block_params[order[i]]};
		snprintf(name, sizeof name, "layers.%d.%s", b, sj_block_params[order[i]].name);
		fsdp2_add_unit(f, name, b, one, 1, reshard);
	}
}

/* With torchao's dynamic float8 scaling each float8 weight's amax is
 * all-reduced (max, fp32) in fsdp_pre_all_gather, before the gather. */
void fsdp2_gather(struct sj_fsdp2 *f, struct sj_unit *u, int backward)
{
	for (int k = 0; f->float8_dynamic_amax && k < u->float8_weights; k++)
		sj_allreduce(f->job, f->comm, 1, ncclFloat32, ncclMax, 0);
	enum sj_kind kind = f->not_primary ? KIND_OTHER : backward ? KIND_PARAM_BACKWARD : KIND_PARAM_FORWARD;
	sj_allgather(f->job, f->comm, u->gather_send, u->gather_dtype, kind);
	u->unsharded = 1;
	if (backward)
		u->backward_gathers++;
	else
		u->forward_gathers++;
}

/* FSDPParamGroup.pre_forward: unshard (a no-op when already unsharded or
 * prefetched), then FSDPState._pre_forward's explicit forward prefetch of
 * the next unit. */
void fsdp2_pre_forward(struct sj_fsdp2 *f, int ui)
{
	struct sj_unit *u = &f->units[ui];
	if (!u->has_params)
		return;
	if (!u->unsharded)
		fsdp2_gather(f, u, 0);
	if (!f->forward_prefetch)
		return;
	for (int k = ui + 1; k < f->nunits; k++) {
		struct sj_unit *next = &f->units[k];
		if (!next->has_params)
			continue;
		if (!next->unsharded)
			fsdp2_gather(f, next, 0);
		break;
	}
}

/* post_forward: reshard unless reshard_after_forward is False; record the
 * post-forward order the backward prefetch follows. */
void fsdp2_post_forward(struct sj_fsdp2 *f, int ui)
{
	struct sj_unit *u = &f->units[ui];
	if (!u->has_params)
		return;
	if (u->reshard)
		u->unsharded = 0;
	if (f->npost < f->post_cap) {
		u->post_forward_index = f->npost;
		f->post_forward_order[f->npost++] = ui;
	}
}

/* pre_backward: unshard, then _backward_prefetch: the unit before it in
 * post-forward order. */
void fsdp2_pre_backward(struct sj_fsdp2 *f, int ui)
{
	struct sj_unit *u = &f->units[ui];
	if (!u->has_params)
		return;
	if (!u->unsharded)
		fsdp2_gather(f, u, 1);
	int target = u->post_forward_index - 1;
	if (target >= 0 && target < f->npost) {
		struct sj_unit *t = &f->units[f->post_forward_order[target]];
		if (!t->unsharded)
			fsdp2_gather(f, t, 1);
	}
}

/* post_backward: gradients of SequenceParallel norm weights are Partial on
 * tp and are redistributed to Replicate (FSDPParam._get_grad_inner_tensor:
 * one tp AllReduce each), then one ReduceScatter (foreach_reduce, in
 * reduce_dtype fp32); without gradient sync only the reshard. */
void fsdp2_post_backward(struct sj_fsdp2 *f, int ui)
{
	struct sj_unit *u = &f->units[ui];
	if (!u->has_params)
		return;
	if (f->reduce_grads && u->reduce_count) {
		for (int k = 0; k < u->norm_params; k++)
			sj_allreduce(f->job, f->tp, SJ_HIDDEN, ncclBfloat16, ncclSum, 0);
		sj_reduce_scatter(f->job, f->comm, u->reduce_count, f->reduce_dtype, f->not_primary ? KIND_OTHER : KIND_GRAD);
		u->reduce_scatters++;
	}
	if (f->reshard_after_backward)
		u->unsharded = 0;
}

/* The root's post-backward final callback clears the post-forward order. */
void fsdp2_end_backward(struct sj_fsdp2 *f)
{
	f->npost = 0;
}

/* Sequence parallelism on tp (PrepareModuleInput, RowwiseParallel output
 * layouts): activation gathers and reduce-scatters. No-ops without TP. */
void tp_gather(struct sj_fsdp2 *f)
{
	if (f->tp)
		sj_allgather(f->job, f->tp, f->activation_count, ncclBfloat16, KIND_OTHER);
}

void tp_reduce_scatter(struct sj_fsdp2 *f)
{
	if (f->tp)
		sj_reduce_scatter(f->job, f->tp, f->activation_count, ncclBfloat16, KIND_OTHER);
}

/* A Linear of a block: its own unit with --wrap linear, else only compute. */
void fsdp2_linear_forward(struct sj_fsdp2 *f, int ui)
{
	if (f->wrap_linear)
		fsdp2_pre_forward(f, ui);
	sj_compute(f->job, 1);
	if (f->wrap_linear)
		fsdp2_post_forward(f, ui);
}

void fsdp2_linear_backward(struct sj_fsdp2 *f, int ui)
{
	if (f->wrap_linear)
		fsdp2_pre_backward(f, ui);
	sj_compute(f->job, 2); /* input and weight gradients */
	if (f->wrap_linear)
		fsdp2_post_backward(f, ui);
}

/* Unit indices inside a block with --wrap linear: rest, q, k, v, o, gate, up, down. */
enum { LU_REST, LU_Q, LU_K, LU_V, LU_O, LU_GATE, LU_UP, LU_DOWN };

void fsdp2_block_forward(struct sj_fsdp2 *f, int b)
{
	int base = f->block_first[b];
	fsdp2_pre_forward(f, base);
	tp_gather(f); /* attention input: Shard(1) -> Replicate */
	fsdp2_linear_forward(f, base + LU_Q);
	fsdp2_linear_forward(f, base + LU_K);
	fsdp2_linear_forward(f, base + LU_V);
	sj_compute(f->job, 1); /* attention core */
	fsdp2_linear_forward(f, base + LU_O);
	tp_reduce_scatter(f); /* wo output: Partial -> Shard(1) */
	tp_gather(f);         /* feed-forward input */
	fsdp2_linear_forward(f, base + LU_GATE);
	fsdp2_linear_forward(f, base + LU_UP);
	fsdp2_linear_forward(f, base + LU_DOWN);
	tp_reduce_scatter(f); /* w2 output */
	fsdp2_post_forward(f, base);
}

/* The backward mirrors the forward: the gradient of a gather is a
 * reduce-scatter and the other way round. The FSDP pre-backward hook of a
 * Linear sits on its (redistributed) output, so it fires before the
 * gradient's tp gather. */
void fsdp2_block_backward(struct sj_fsdp2 *f, int b)
{
	int base = f->block_first[b];
	int lin = f->wrap_linear;
	fsdp2_pre_backward(f, base);
	if (lin)
		fsdp2_pre_backward(f, base + LU_DOWN);
	tp_gather(f); /* gradient of the w2 reduce-scatter */
	sj_compute(f->job, 2);
	if (lin)
		fsdp2_post_backward(f, base + LU_DOWN);
	fsdp2_linear_backward(f, base + LU_UP);
	fsdp2_linear_backward(f, base + LU_GATE);
	tp_reduce_scatter(f); /* gradient of the feed-forward input gather */
	if (lin)
		fsdp2_pre_backward(f, base + LU_O);
	tp_gather(f); /* gradient of the wo reduce-scatter */
	sj_compute(f->job, 2);
	if (lin)
		fsdp2_post_backward(f, base + LU_O);
	sj_compute(f->job, 2); /* attention core */
	fsdp2_linear_backward(f, base + LU_V);
	fsdp2_linear_backward(f, base + LU_K);
	fsdp2_linear_backward(f, base + LU_Q);
	tp_reduce_scatter(f); /* gradient of the attention input gather */
	fsdp2_post_backward(f, base);
}

void fsdp2_step_reset(struct sj_fsdp2 *f)
{
	for (int i = 0; i < f->nunits; i++)
		f->units[i].forward_gathers = f->units[i].backward_gathers = f->units[i].reduce_scatters = 0;
}

/* Truth common to the FSDP2 setups, from the units' own counts of the last
 * step. cycles: forward / backward cycles FSDP sees per step. */
void fsdp2_truth(const struct sj_fsdp2 *f, struct sj_truth *t, int cycles)
{
	const struct sj_tally *s = &f->job->last;
	t->fsdp_allgathers = s->param_gathers;
	t->forward_allgathers = s->forward_gathers;
	t->backward_allgathers = s->backward_gathers;
	t->reduce_scatters = s->grad_reduce_scatters;
	t->params = f->model_params;
	t->tp_degree = f->tp_degree;
	t->wrap_too_fine = f->wrap_linear;
	int blocks = 0, first_block = -1, resharded = 0, kept = 0, first_policy = -1;
	for (int b = 0; b < f->job->opt->layers; b++) {
		int base = f->block_first[b];
		if (base < 0)
			continue;
		blocks++;
		if (first_block < 0)
			first_block = b;
		/* A block is resharded after forward when its first unit is
		 * gathered again for backward. */
		int again = f->units[base].backward_gathers > 0;
		resharded += again;
		kept += !again;
		if (first_policy < 0)
			first_policy = again;
	}
	t->repeating_units = blocks;
	int block_gathers = 0;
	for (int i = 0; i < f->nunits; i++)
		if (f->units[i].block == first_block && first_block >= 0)
			block_gathers += f->units[i].forward_gathers;
	t->gathers_per_unit = cycles > 0 ? block_gathers / cycles : block_gathers;
	int policy = resharded > kept ? 1 : kept > resharded ? 0 : first_policy;
	snprintf(t->reshard, sizeof t->reshard, "%s", policy ? "true" : "false");
	int exceptions = 0;
	for (int i = 0; i < f->nunits; i++) {
		const struct sj_unit *u = &f->units[i];
		if (u->has_params && !u->root && u->forward_gathers && (u->backward_gathers > 0) != policy)
			exceptions++;
	}
	if (exceptions) {
		char list[384] = "";
		for (int i = 0; i < f->nunits; i++) {
			const struct sj_unit *u = &f->units[i];
			if (!u->has_params || u->root || !u->forward_gathers || (u->backward_gathers > 0) == policy)
				continue;
			size_t len = strlen(list);
			snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", u->name);
		}
		sj_note(t, "reshard is the blocks' policy; %s differ (%s after forward)", list,
			policy ? "kept" : "resharded");
	}
}

/* ---- setup fsdp2 ----------------------------------------------------------- */

void run_fsdp2(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct sj_fsdp2 f;
	fsdp2_init(&f, j, world, NULL, 4 + 8 * o->layers, 1);
	int tok = -1, root = -1, head = -1;
	if (o->torchtitan) {
		/* apply_fsdp: tok_embeddings, each block, [norm, output], then the
		 * model, whose parameters all belong to those units. */
		const struct sj_param *emb[] = {&sj_tok_embeddings};
		tok = fsdp2_add_unit(&f, "tok_embeddings", -1, emb, 1, 1);
		for (int b = 0; b < o->layers; b++)
			fsdp2_add_block(&f, b, b < o->layers - 1 || o->reshard_last_block);
		const struct sj_param *normout[] = {&sj_final_norm, &sj_output};
		head = fsdp2_add_unit(&f, "norm,output", -1, normout, 2, 0);
	} else {
		/* The root holds what no block holds; reshard_after_forward=None is
		 * False for the root, True for the others. */
		const struct sj_param *rootp[] = {&sj_tok_embeddings, &sj_final_norm, &sj_output};
		root = fsdp2_add_unit(&f, "root", -1, rootp, 3, 0);
		f.units[root].root = 1;
		for (int b = 0; b < o->layers; b++)
			fsdp2_add_block(&f, b, 1);
	}
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		fsdp2_step_reset(&f);
		for (int mb = 0; mb < o->accum; mb++) {
			/* set_requires_gradient_sync(False) on all but the last micro-batch */
			f.reduce_grads = !(o->no_sync && mb < o->accum - 1);
			j->phase = "forward";
			if (o->torchtitan) {
				fsdp2_pre_forward(&f, tok);
				fsdp2_post_forward(&f, tok);
			} else {
				fsdp2_pre_forward(&f, root);
			}
			for (int b = 0; b < o->layers; b++)
				fsdp2_block_forward(&f, b);
			if (o->torchtitan)
				fsdp2_pre_forward(&f, head);
			sj_compute(j, 1); /* output head */
			fsdp2_post_forward(&f, o->torchtitan ? head : root);
			j->phase = "backward";
			if (o->torchtitan) {
				fsdp2_pre_backward(&f, head);
				sj_compute(j, 2);
				fsdp2_post_backward(&f, head);
			} else {
				fsdp2_pre_backward(&f, root);
				sj_compute(j, 2);
			}
			for (int b = o->layers - 1; b >= 0; b--)
				fsdp2_block_backward(&f, b);
			/* The embedding's (or the root's) inputs need no gradient: its
			 * post-backward runs in the root's final callback. */
			if (o->torchtitan) {
				fsdp2_pre_backward(&f, tok);
				fsdp2_post_backward(&f, tok);
			} else {
				fsdp2_post_backward(&f, root);
			}
			fsdp2_end_backward(&f);
		}
		j->phase = "optimizer";
		if (o->clip) /* clip_grad_norm_: the total norm's full_tensor() */
			sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(&f, t, o->accum);
	t->microbatches = o->accum;
	/* Steps and micro-batches are told apart by NVTX steps, a per-step
	 * collective, or micro-batches that differ (no ReduceScatter but in
	 * the last); otherwise K micro-batches look like K steps. */
	t->microbatches_told = o->nvtx || j->last.step_marks > 0 || (o->no_sync && o->accum > 1);
	if (o->accum > 1)
		sj_note(t, "%d micro-batches per optimizer step%s", o->accum,
			o->no_sync ? ", ReduceScatter only in the last" : ", each reduce-scattering");
	fsdp2_free(&f);
}

/* ---- setup tp: torchtitan 2-D (FSDP2 on dp, sequence parallel on tp) -------- */

/* --seq-lens: the sequence lengths, and whether the tp collectives' sizes
 * changed with them (tp_min, tp_max: their sequence-parallel elements). */
static void tp_seq_truth(const struct sj_options *o, struct sj_truth *t, size_t tp_min, size_t tp_max)
{
	char lens[96] = "";
	for (int i = 0; i < o->nseq; i++) {
		size_t len = strlen(lens);
		snprintf(lens + len, sizeof lens - len, "%s%d", i ? ", " : "", o->seq_lens[i]);
	}
	sj_truth_extra(t, "\"sequence_lengths\": [%s]", lens);
	sj_truth_extra(t, "\"tp_sizes_vary\": %s", tp_min != tp_max ? "true" : "false");
	sj_note(t, "the sequence changes step by step (%s tokens): the tp collectives move %zu to %zu elements per rank, "
		   "the dp gathers do not change",
		lens, tp_min, tp_max);
}

void run_tp(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int T = o->tp, dp_rank = j->rank / T, tp_rank = j->rank % T;
	/* init_device_mesh(("dp_shard", "tp")): rank = dp_rank * T + tp_rank;
	 * one split per dimension, dimension 0 first. */
	struct sj_comm *world = sj_comm_world(j, ROLE_ONE_OFF, "world");
	struct sj_comm *dp = sj_comm_split(j, world, tp_rank, ROLE_FSDP, "dp");
	struct sj_comm *tp = sj_comm_split(j, world, dp_rank, ROLE_TENSOR_PARALLEL, "tp");
	struct sj_fsdp2 f;
	fsdp2_init(&f, j, dp, tp, 4 + 8 * o->layers, 1);
	const struct sj_param *emb[] = {&sj_tok_embeddings};
	int tok = fsdp2_add_unit(&f, "tok_embeddings", -1, emb, 1, 1);
	for (int b = 0; b < o->layers; b++)
		fsdp2_add_block(&f, b, b < o->layers - 1 || o->reshard_last_block);
	const struct sj_param *normout[] = {&sj_final_norm, &sj_output};
	int head = fsdp2_add_unit(&f, "norm,output", -1, normout, 2, 0);
	size_t tp_min = (size_t)-1, tp_max = 0;
	for (int s = 0; s < o->steps; s++) {
		/* --seq-lens: the step's sequence (a dataloader that pads each batch
		 * to its longest sample): the tp collectives follow it, B x S/T x H
		 * for sequence parallel, B x S for loss parallel, B x S x V/T for
		 * the logits; the dp gathers move parameters and do not change */
		size_t tokens = (size_t)SJ_BATCH * (o->nseq ? (size_t)o->seq_lens[s % o->nseq] : SJ_SEQ);
		f.activation_count = tokens / (size_t)T * SJ_HIDDEN;
		tp_min = f.activation_count < tp_min ? f.activation_count : tp_min;
		tp_max = f.activation_count > tp_max ? f.activation_count : tp_max;
		sj_step_begin(j, s);
		fsdp2_step_reset(&f);
		for (int mb = 0; mb < o->accum; mb++) {
			f.reduce_grads = !(o->no_sync && mb < o->accum - 1);
			j->phase = "forward";
			fsdp2_pre_forward(&f, tok);
			tp_reduce_scatter(&f); /* RowwiseParallel embedding: Partial -> Shard(1) */
			fsdp2_post_forward(&f, tok);
			for (int b = 0; b < o->layers; b++)
				fsdp2_block_forward(&f, b);
			fsdp2_pre_forward(&f, head);
			tp_gather(&f); /* ColwiseParallel output: input Shard(1) -> Replicate */
			sj_compute(j, 1);
			fsdp2_post_forward(&f, head);
			if (o->loss_parallel) {
				/* loss_parallel cross-entropy on vocab-sharded logits:
				 * _log_softmax's max and sum-exp, _nll_loss_forward's
				 * target logit. */
				sj_allreduce(j, tp, tokens, ncclFloat32, ncclMax, 0);
				sj_allreduce(j, tp, tokens, ncclFloat32, ncclSum, 0);
				sj_allreduce(j, tp, tokens, ncclFloat32, ncclSum, 0);
			} else {
				/* output_layouts=Replicate: gather the logits */
				sj_allgather(j, tp, tokens * (SJ_VOCAB / (size_t)T), ncclBfloat16, KIND_OTHER);
			}
			j->phase = "backward";
			fsdp2_pre_backward(&f, head);
			sj_compute(j, 2);
			tp_reduce_scatter(&f);
			fsdp2_post_backward(&f, head);
			for (int b = o->layers - 1; b >= 0; b--)
				fsdp2_block_backward(&f, b);
			fsdp2_pre_backward(&f, tok);
			tp_gather(&f); /* gradient of the embedding's reduce-scatter */
			fsdp2_post_backward(&f, tok);
			fsdp2_end_backward(&f);
		}
		j->phase = "optimizer";
		/* clip_grad_norm_: the norm is Partial on both mesh dimensions;
		 * full_tensor() all-reduces it on each. */
		sj_allreduce(j, dp, 1, ncclFloat32, ncclSum, 1);
		sj_allreduce(j, tp, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(&f, t, o->accum);
	t->microbatches = o->accum;
	t->microbatches_told = o->nvtx || j->last.step_marks > 0 || (o->no_sync && o->accum > 1);
	sj_note(t, "dp %d x tp %d; FSDP units hold 1/%d of each Linear plus the replicated norms", dp->nranks, T, T);
	if (o->nseq)
		tp_seq_truth(o, t, tp_min, tp_max);
	fsdp2_free(&f);
}

