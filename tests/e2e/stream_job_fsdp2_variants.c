/*
 * tests/e2e/stream_job_fsdp2_variants.c - FSDP2 setups whose units do not
 * move every parameter as one bf16 gather and one fp32 reduction each:
 * float8 (torchao's float8 all-gather), lora (torchtune's LoRA), frozen
 * (frozen blocks, embeddings or root), deferred (gradient sync and the
 * reshard after backward off but in the last micro-batch), simplefsdp
 * (SimpleFSDP's gathers bucketed by the compiler). What each issues, and
 * from which sources, is in stream_job.md.
 */
#include "stream_job.h"

void sj_variant_options_check(const struct sj_options *o)
{
	enum sj_setup s = o->setup;
	int variant = s >= SETUP_FLOAT8 && s <= SETUP_SIMPLEFSDP;
	if ((o->nccl_fp8 || o->float8_dynamic) && s != SETUP_FLOAT8)
		sj_die("--nccl-fp8 / --float8-dynamic apply to float8");
	if (o->lora_rank && s != SETUP_LORA)
		sj_die("--lora-rank applies to lora");
	if ((o->frozen_blocks >= 0 || o->frozen_embeddings) && s != SETUP_FROZEN)
		sj_die("--frozen / --frozen-embeddings / --frozen-root apply to frozen");
	if ((o->keep_after_forward || o->nschedule) && s != SETUP_DEFERRED)
		sj_die("--reshard-after-forward / --accum-schedule apply to deferred");
	if (o->bucket_blocks && s != SETUP_SIMPLEFSDP)
		sj_die("--bucket-blocks applies to simplefsdp");
	if (!variant)
		return;
	if (o->no_sync)
		sj_die("--no-sync applies to fsdp2 and tp (deferred always defers the reductions)");
	if (o->accum > 1 && s != SETUP_LORA && s != SETUP_DEFERRED)
		sj_die("--accum applies to lora and deferred among the FSDP2 variants");
	if (s == SETUP_FROZEN && o->frozen_blocks > o->layers)
		sj_die("--frozen %d: the model has %d blocks", o->frozen_blocks, o->layers);
	if (s == SETUP_FROZEN && o->frozen_root && o->frozen_blocks >= o->layers)
		sj_die("--frozen-root with every block frozen: nothing trains");
	if (s == SETUP_LORA && o->lora_rank > SJ_HIDDEN)
		sj_die("--lora-rank %d: at most d_model (%d)", o->lora_rank, SJ_HIDDEN);
	if (s == SETUP_DEFERRED && o->nschedule && o->accum > 1)
		sj_die("--accum and --accum-schedule: one or the other");
	if (s == SETUP_DEFERRED && !o->nschedule && o->accum < 2)
		sj_die("deferred needs --accum K (K >= 2) or --accum-schedule");
	if (s == SETUP_SIMPLEFSDP && o->layers % (o->bucket_blocks ? o->bucket_blocks : 2))
		sj_die("--bucket-blocks %d must divide --layers %d", o->bucket_blocks ? o->bucket_blocks : 2,
		       o->layers);
}

/* ---- shared bookkeeping ------------------------------------------------------ */

/* Padded dim-0 shard of one parameter on the FSDP group (no TP here). */
static size_t shard_elems(const struct sj_fsdp2 *f, const struct sj_param *p)
{
	return sj_ceil_div(p->rows, (size_t)f->dp) * p->cols;
}

/* The units' reductions of the current step, in the order issued. */
struct fv_order {
	int units[64];
	int n;
};

static void fv_post_backward(struct sj_fsdp2 *f, struct fv_order *ord, int ui)
{
	int before = f->units[ui].reduce_scatters;
	fsdp2_post_backward(f, ui);
	if (f->units[ui].reduce_scatters > before && ord->n < 64)
		ord->units[ord->n++] = ui;
}

/* Record names: how fsdpscope (common/record.c) names the dtypes. */
static const char *record_dtype(ncclDataType_t dt)
{
	switch (dt) {
	case ncclUint8:
		return "uint8";
	case ncclFloat8e4m3:
		return "float8e4m3";
	case ncclFloat32:
		return "float32";
	case ncclInt64:
		return "int64";
	default:
		return "bfloat16";
	}
}

/* Truth keys common to the variants: the units reduced in the last step
 * and their order, those gathered but not reduced, the parameters that get
 * gradients. */
static void fv_truth_reductions(const struct sj_fsdp2 *f, const struct fv_order *ord, uint64_t trainable,
				struct sj_truth *t)
{
	int reduced = 0, unreduced = 0;
	for (int i = 0; i < f->nunits; i++) {
		const struct sj_unit *u = &f->units[i];
		reduced += u->reduce_scatters > 0;
		unreduced += u->forward_gathers + u->backward_gathers > 0 && u->reduce_scatters == 0;
	}
	sj_truth_extra(t, "  \"reduced_units\": %d", reduced);
	sj_truth_extra(t, "  \"unreduced_units\": %d", unreduced);
	sj_truth_extra(t, "  \"trainable_params\": %" PRIu64, trainable);
	char list[1024] = "";
	for (int k = 0; k < ord->n; k++) {
		size_t len = strlen(list);
		snprintf(list + len, sizeof list - len, "%s\"%s\"", k ? ", " : "", f->units[ord->units[k]].name);
	}
	sj_truth_extra(t, "  \"reduce_order\": [%s]", list);
}

/* The reshard policy the blocks were given: frozen blocks that run no
 * backward are not gathered again, whatever their policy. */
static void fv_truth_policy(struct sj_truth *t, int reshard)
{
	snprintf(t->reshard, sizeof t->reshard, "%s", reshard ? "true" : "false");
	t->note[0] = '\0';
}

/* ---- plain units: the root (embeddings, final norm, output) and the blocks -- */

/* Which blocks run backward and which get their post-backward from autograd:
 * a block runs backward when its output needs a gradient (something at or
 * before it trains); its post-backward hook exists only when its input needs
 * one (something before it trains), otherwise the root's final callback runs
 * it, after the root's (FSDPState._root_post_backward_final_callback walks
 * _state_ctx.all_states: the root first, then the blocks in module order). */
struct fv_plain {
	struct sj_fsdp2 f;
	int root;
	int *block_trains; /* [layers] */
	int embeddings_train, head_trains;
	struct fv_order order;
};

static void fv_plain_forward(struct fv_plain *p)
{
	struct sj_fsdp2 *f = &p->f;
	f->job->phase = "forward";
	fsdp2_pre_forward(f, p->root);
	for (int b = 0; b < f->job->opt->layers; b++)
		fsdp2_block_forward(f, b);
	sj_compute(f->job, 1); /* output head */
	fsdp2_post_forward(f, p->root);
}

static void fv_plain_backward(struct fv_plain *p)
{
	struct sj_fsdp2 *f = &p->f;
	int L = f->job->opt->layers;
	int *done = calloc((size_t)f->nunits, sizeof *done);
	if (!done)
		sj_die("out of memory");
	f->job->phase = "backward";
	int any = p->embeddings_train || p->head_trains;
	for (int b = 0; b < L; b++)
		any |= p->block_trains[b];
	if (any) { /* the logits need a gradient: the root's pre-backward */
		fsdp2_pre_backward(f, p->root);
		sj_compute(f->job, 2);
	}
	for (int b = L - 1; b >= 0; b--) {
		int output_grad = p->embeddings_train, input_grad = p->embeddings_train;
		for (int k = 0; k <= b; k++)
			output_grad |= p->block_trains[k];
		for (int k = 0; k < b; k++)
			input_grad |= p->block_trains[k];
		if (!output_grad)
			break; /* nor any block before it */
		int ui = f->block_first[b];
		fsdp2_pre_backward(f, ui);
		sj_compute(f->job, p->block_trains[b] ? 14 : 7); /* weight gradients only where it trains */
		if (input_grad) {
			fv_post_backward(f, &p->order, ui);
			done[ui] = 1;
		}
	}
	/* the final callback: every unit whose post-backward did not run, the
	 * root first */
	for (int i = 0; i < f->nunits; i++)
		if (!done[i])
			fv_post_backward(f, &p->order, i);
	fsdp2_end_backward(f);
	free(done);
}

static void fv_plain_init(struct fv_plain *p, struct sj_job *j, struct sj_comm *comm, int block_reshard)
{
	const struct sj_options *o = j->opt;
	fsdp2_init(&p->f, j, comm, NULL, 4 + o->layers, 1);
	const struct sj_param *rootp[] = {&sj_tok_embeddings, &sj_final_norm, &sj_output};
	p->root = fsdp2_add_unit(&p->f, "root", -1, rootp, 3, 0);
	p->f.units[p->root].root = 1;
	p->block_trains = calloc((size_t)o->layers, sizeof *p->block_trains);
	if (!p->block_trains)
		sj_die("out of memory");
	for (int b = 0; b < o->layers; b++) {
		fsdp2_add_block(&p->f, b, block_reshard);
		p->block_trains[b] = 1;
	}
	p->embeddings_train = p->head_trains = 1;
	p->order.n = 0;
}

static void fv_plain_free(struct fv_plain *p)
{
	free(p->block_trains);
	fsdp2_free(&p->f);
}

/* ---- setup float8: torchao float8 training with the float8 all-gather -------- */

/* Per optimizer step: the FSDP2 stream of torchtitan's units, a block's
 * float8 Linear weights and bf16 norms gathered as one ncclUint8 AllGather
 * of bytes (foreach_all_gather: mixed all-gather input dtypes), its
 * ReduceScatter in fp32 elements; after the optimizer step one AllReduce
 * (max, fp32) of every float8 weight's amax
 * (precompute_float8_dynamic_scale_for_fsdp). Without a precomputed scale
 * (step 0, or --float8-dynamic) each float8 weight's amax is all-reduced
 * before each gather instead. */
static void float8_units(struct sj_fsdp2 *f, int b, int nccl_fp8)
{
	int base = f->block_first[b];
	struct sj_unit *u = &f->units[base];
	if (!f->wrap_linear) {
		size_t bytes = 0;
		for (int i = 0; i < BP_COUNT; i++)
			bytes += shard_elems(f, &sj_block_params[i]) * (i <= BP_W3 ? 1 : 2);
		u->gather_dtype = ncclUint8;
		u->gather_send = bytes;
		u->float8_weights = BP_W3 + 1;
		return;
	}
	/* --wrap linear: the rest-of-block unit holds the bf16 norms; each
	 * Linear unit one float8 weight: a float8-only gather, ncclFloat8e4m3
	 * from PyTorch built with NCCL >= 2.24, ncclUint8 before */
	static const int order[] = {BP_WQ, BP_WK, BP_WV, BP_WO, BP_W1, BP_W3, BP_W2};
	for (int k = 0; k < 7; k++) {
		struct sj_unit *lu = &f->units[base + 1 + k];
		lu->gather_dtype = nccl_fp8 ? ncclFloat8e4m3 : ncclUint8;
		lu->gather_send = shard_elems(f, &sj_block_params[order[k]]);
		lu->float8_weights = 1;
	}
}

static void float8_truth_dtypes(const struct sj_fsdp2 *f, int amax, struct sj_truth *t)
{
	const char *names[4];
	int n = 0;
	for (int i = 0; i < f->nunits; i++) {
		const struct sj_unit *u = &f->units[i];
		if (!u->forward_gathers && !u->backward_gathers)
			continue;
		const char *name = record_dtype(u->gather_dtype);
		int seen = 0;
		for (int k = 0; k < n; k++)
			seen |= !strcmp(names[k], name);
		if (!seen && n < 4)
			names[n++] = name;
	}
	for (int a = 0; a < n; a++) /* sorted, as a set */
		for (int b = a + 1; b < n; b++)
			if (strcmp(names[b], names[a]) < 0) {
				const char *x = names[a];
				names[a] = names[b];
				names[b] = x;
			}
	char list[128] = "";
	for (int k = 0; k < n; k++) {
		size_t len = strlen(list);
		snprintf(list + len, sizeof list - len, "%s\"%s\"", k ? ", " : "", names[k]);
	}
	sj_truth_extra(t, "  \"fsdp_gather_dtypes\": [%s]", list);
	sj_truth_extra(t, "  \"fsdp_reduce_dtypes\": [\"%s\"]", record_dtype(f->reduce_dtype));
	sj_truth_extra(t, "  \"amax_allreduces_per_step\": %d", amax);
}

void run_float8(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct sj_fsdp2 f;
	fsdp2_init(&f, j, world, NULL, 4 + 8 * o->layers, 1);
	const struct sj_param *emb[] = {&sj_tok_embeddings};
	int tok = fsdp2_add_unit(&f, "tok_embeddings", -1, emb, 1, 1);
	for (int b = 0; b < o->layers; b++) {
		fsdp2_add_block(&f, b, b < o->layers - 1 || o->reshard_last_block);
		float8_units(&f, b, o->nccl_fp8);
	}
	const struct sj_param *normout[] = {&sj_final_norm, &sj_output};
	int head = fsdp2_add_unit(&f, "norm,output", -1, normout, 2, 0);
	int float8_weights = 0;
	for (int i = 0; i < f.nunits; i++)
		float8_weights += f.units[i].float8_weights;
	int amax = 0;
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		fsdp2_step_reset(&f);
		/* no precomputed scale before the first optimizer step */
		f.float8_dynamic_amax = o->float8_dynamic || s == 0;
		j->phase = "forward";
		fsdp2_pre_forward(&f, tok);
		fsdp2_post_forward(&f, tok);
		for (int b = 0; b < o->layers; b++)
			fsdp2_block_forward(&f, b);
		fsdp2_pre_forward(&f, head);
		sj_compute(j, 1);
		fsdp2_post_forward(&f, head);
		j->phase = "backward";
		fsdp2_pre_backward(&f, head);
		sj_compute(j, 2);
		fsdp2_post_backward(&f, head);
		for (int b = o->layers - 1; b >= 0; b--)
			fsdp2_block_backward(&f, b);
		fsdp2_pre_backward(&f, tok);
		fsdp2_post_backward(&f, tok);
		fsdp2_end_backward(&f);
		j->phase = "optimizer";
		if (o->clip)
			sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		amax = 0;
		for (int i = 0; f.float8_dynamic_amax && i < f.nunits; i++)
			amax += (f.units[i].forward_gathers + f.units[i].backward_gathers) * f.units[i].float8_weights;
		if (!o->float8_dynamic) { /* the optimizer's post hook: one all-reduce of every amax */
			sj_allreduce(j, world, (size_t)float8_weights, ncclFloat32, ncclMax, 1);
			amax++;
		}
		sj_step_end(j);
	}
	fsdp2_truth(&f, t, 1);
	t->microbatches = 1;
	t->microbatches_told = o->nvtx || j->last.step_marks > 0;
	float8_truth_dtypes(&f, amax, t);
	sj_note(t, "%d float8 weights (every Linear of the blocks; output filtered out); %s", float8_weights,
		o->float8_dynamic
		    ? "dynamic scaling: one amax AllReduce per float8 weight before each gather"
		    : "scales precomputed after each optimizer step (one amax AllReduce), dynamic in step 0");
	fsdp2_free(&f);
}

/* ---- setup lora: torchtune's LoRA recipe on FSDP2 ----------------------------- */

/* torchtune lora_finetune_distributed: the model in bf16 (no
 * MixedPrecisionPolicy: gathers and reductions in bf16), fully_shard on each
 * layer and then on the model (reshard_after_forward=False for it); LoRA on
 * q, v, output_proj and the three MLP projections (the 8B_lora configs);
 * set_trainable_params: only lora_a / lora_b train. So a block's gather
 * moves the frozen base weights with the adapters, its ReduceScatter the
 * adapters' gradients only; the root (embeddings, norm, output) is frozen
 * and never reduced. Per step, after the backward(s): all_reduce of the
 * token count (int64) and of the running loss (fp32). */
void run_lora(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int rank = o->lora_rank ? o->lora_rank : 8, L = o->layers;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct fv_plain p;
	memset(&p, 0, sizeof p);
	fsdp2_init(&p.f, j, world, NULL, 4 + L, 1);
	struct sj_fsdp2 *f = &p.f;
	f->reduce_dtype = ncclBfloat16;
	const struct sj_param *rootp[] = {&sj_tok_embeddings, &sj_final_norm, &sj_output};
	p.root = fsdp2_add_unit(f, "root", -1, rootp, 3, 0);
	f->units[p.root].root = 1;
	f->units[p.root].reduce_count = 0;
	static const int lora_on[] = {BP_WQ, BP_WV, BP_WO, BP_W1, BP_W2, BP_W3};
	enum { NLORA = sizeof lora_on / sizeof lora_on[0] };
	struct sj_param adapters[2 * NLORA];
	char names[2 * NLORA][40];
	size_t adapter_shards = 0;
	uint64_t trainable = 0;
	for (int k = 0; k < NLORA; k++) {
		const struct sj_param *w = &sj_block_params[lora_on[k]];
		snprintf(names[2 * k], sizeof names[0], "%s.lora_a", w->name);
		snprintf(names[2 * k + 1], sizeof names[0], "%s.lora_b", w->name);
		adapters[2 * k] = (struct sj_param){names[2 * k], (size_t)rank, w->cols, TP_REPLICATE, 0};
		adapters[2 * k + 1] = (struct sj_param){names[2 * k + 1], w->rows, (size_t)rank, TP_REPLICATE, 0};
		for (int h = 0; h < 2; h++) {
			adapter_shards += shard_elems(f, &adapters[2 * k + h]);
			trainable += (uint64_t)adapters[2 * k + h].rows * adapters[2 * k + h].cols * (uint64_t)L;
		}
	}
	p.block_trains = calloc((size_t)L, sizeof *p.block_trains);
	if (!p.block_trains)
		sj_die("out of memory");
	for (int b = 0; b < L; b++) {
		const struct sj_param *all[BP_COUNT + 2 * NLORA];
		for (int i = 0; i < BP_COUNT; i++)
			all[i] = &sj_block_params[i];
		for (int i = 0; i < 2 * NLORA; i++)
			all[BP_COUNT + i] = &adapters[i];
		char name[48];
		snprintf(name, sizeof name, "layers.%d", b);
		int ui = fsdp2_add_unit(f, name, b, all, BP_COUNT + 2 * NLORA, 1);
		f->units[ui].reduce_count = adapter_shards;
		p.block_trains[b] = 1;
	}
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		fsdp2_step_reset(f);
		p.order.n = 0;
		for (int mb = 0; mb < o->accum; mb++) {
			fv_plain_forward(&p);
			fv_plain_backward(&p);
		}
		j->phase = "optimizer";
		sj_allreduce(j, world, 1, ncclInt64, ncclSum, 1);   /* num_tokens */
		sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1); /* running_loss */
		if (o->clip)
			sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(f, t, o->accum);
	t->microbatches = o->accum;
	/* the token count and loss all-reduces: once a step */
	t->microbatches_told = o->nvtx || j->last.step_marks > 0;
	fv_truth_reductions(f, &p.order, trainable, t);
	sj_note(t,
		"LoRA rank %d on q, v, o and the MLP: a block gathers %zu elements per rank and reduce-scatters "
		"%zu (the adapters); the root is frozen: gathered, never reduced",
		rank, f->units[f->block_first[0]].gather_count, adapter_shards);
	fv_plain_free(&p);
}

/* ---- setup frozen: FSDP2 with frozen parameters -------------------------------- */

/* Full fine-tuning (MixedPrecisionPolicy bf16 / fp32) with requires_grad
 * off for the first K blocks, the embeddings, or the whole root. A unit
 * without gradients issues no ReduceScatter (FSDPParamGroup.post_backward:
 * no parameter with a gradient, nothing to reduce); the root's holds only
 * the parameters that train. Frozen embeddings make the first trainable
 * block's input need no gradient: the blocks before it run no backward
 * (no pre-backward hook, no gather), its post-backward runs in the root's
 * final callback, after the root's; and its pre-backward still prefetches
 * the block before it in post-forward order (a mistargeted prefetch, never
 * used, FSDPParamGroup._backward_prefetch). */
void run_frozen(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int L = o->layers, K = o->frozen_blocks > 0 ? o->frozen_blocks : 0;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct fv_plain p;
	fv_plain_init(&p, j, world, 1);
	struct sj_fsdp2 *f = &p.f;
	uint64_t trainable = 0;
	for (int b = 0; b < L; b++) {
		p.block_trains[b] = b >= K;
		int ui = f->block_first[b];
		if (b < K)
			f->units[ui].reduce_count = 0;
		else
			for (int i = 0; i < BP_COUNT; i++)
				trainable += sj_block_params[i].rows * sj_block_params[i].cols;
	}
	p.embeddings_train = !o->frozen_embeddings;
	p.head_trains = !o->frozen_root;
	struct sj_unit *root = &f->units[p.root];
	root->reduce_count = 0;
	if (p.embeddings_train) {
		root->reduce_count += shard_elems(f, &sj_tok_embeddings);
		trainable += sj_tok_embeddings.rows * sj_tok_embeddings.cols;
	}
	if (p.head_trains) {
		root->reduce_count += shard_elems(f, &sj_final_norm) + shard_elems(f, &sj_output);
		trainable += sj_final_norm.rows * sj_final_norm.cols + sj_output.rows * sj_output.cols;
	}
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		fsdp2_step_reset(f);
		p.order.n = 0;
		fv_plain_forward(&p);
		fv_plain_backward(&p);
		j->phase = "optimizer";
		if (o->clip)
			sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(f, t, 1);
	fv_truth_policy(t, 1);
	t->microbatches = 1;
	t->microbatches_told = o->nvtx || j->last.step_marks > 0;
	fv_truth_reductions(f, &p.order, trainable, t);
	const char *what = o->frozen_root ? ", the root frozen" : o->frozen_embeddings ? ", embeddings frozen" : "";
	if (K == 0)
		sj_note(t, "no block frozen%s; %s", what,
			o->frozen_embeddings ? "block 0's input needs no gradient: it is reduced in the root's final "
					       "callback, after the root"
					     : "every unit reduced");
	else
		sj_note(t, "blocks 0..%d frozen%s; %s", K - 1, what,
			o->frozen_embeddings
			    ? "the frozen blocks run no backward; the first trainable block is reduced "
			      "in the root's final callback, after the root"
			    : "the frozen blocks are gathered in backward for the input gradients, never "
			      "reduced");
	fv_plain_free(&p);
}

/* ---- setup deferred: reductions and resharding deferred to the last micro-batch */

/* for i, mb: set_requires_gradient_sync(is_last); set_reshard_after_backward(
 * is_last); loss(mb).backward(). The units stay unsharded from one
 * micro-batch's backward to the next's forward, so later micro-batches
 * gather nothing in forward; with reshard_after_forward=False nothing at
 * all: the FSDP group then sees one cycle per step whatever the
 * micro-batch count. */
void run_deferred(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct fv_plain p;
	fv_plain_init(&p, j, world, !o->keep_after_forward);
	struct sj_fsdp2 *f = &p.f;
	char schedule[256] = "";
	int last_k = 1;
	for (int s = 0; s < o->steps; s++) {
		int k = o->nschedule ? o->schedule[s % o->nschedule] : o->accum;
		size_t len = strlen(schedule);
		snprintf(schedule + len, sizeof schedule - len, "%s%d", s ? ", " : "", k);
		last_k = k;
		sj_step_begin(j, s);
		fsdp2_step_reset(f);
		p.order.n = 0;
		for (int mb = 0; mb < k; mb++) {
			int last = mb == k - 1;
			f->reduce_grads = last;
			f->reshard_after_backward = last;
			fv_plain_forward(&p);
			fv_plain_backward(&p);
		}
		j->phase = "optimizer";
		if (o->clip)
			sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(f, t, 1);
	int countable = !o->keep_after_forward;
	t->microbatches = countable ? last_k : 1;
	t->microbatches_told =
	    countable ? last_k > 1 || o->nvtx || j->last.step_marks > 0 : o->nvtx || j->last.step_marks > 0;
	sj_truth_extra(t, "  \"microbatches_countable\": %s", countable ? "true" : "false");
	sj_truth_extra(t, "  \"microbatches_per_step\": [%s]", schedule);
	if (countable)
		sj_note(t,
			"%d micro-batches in the last step; the units stay unsharded between them: only the first "
			"gathers in forward, each re-gathers the blocks for backward, the last reduce-scatters",
			last_k);
	else
		sj_note(t,
			"%d micro-batches in the last step, invisible to the FSDP group: nothing is resharded until "
			"the last backward, so it gathers each unit once and reduce-scatters once per step",
			last_k);
	fv_plain_free(&p);
}

/* ---- setup simplefsdp: SimpleFSDP under torch.compile, gathers bucketed ----- */

/* torchtitan's SimpleFSDP gathers each parameter with its own
 * all_gather_into_tensor in the traced graph; inductor's FSDP bucketing
 * (torch/_inductor/fx_passes/fsdp.py bucket_fsdp_all_gather ->
 * bucketing.py merge_all_gather; torchtitan's auto_bucketing or a manual
 * plan) merges adjacent gathers of one group and dtype into one AllGather,
 * and the gradient reduce-scatters likewise. Here a bucket is
 * tok_embeddings, K consecutive blocks, or [norm, output]; every bucket is
 * resharded after forward (the gathers are recomputed in backward), but
 * the embedding's backward needs no weight and is not gathered again. */
void run_simplefsdp(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int K = o->bucket_blocks ? o->bucket_blocks : 2, L = o->layers, nb = L / K;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct sj_fsdp2 f;
	fsdp2_init(&f, j, world, NULL, 3 + nb, 1);
	const struct sj_param *emb[] = {&sj_tok_embeddings};
	int tok = fsdp2_add_unit(&f, "tok_embeddings", -1, emb, 1, 1);
	const struct sj_param **all = malloc((size_t)K * BP_COUNT * sizeof *all);
	if (!all)
		sj_die("out of memory");
	for (int g = 0; g < nb; g++) {
		for (int k = 0; k < K; k++)
			for (int i = 0; i < BP_COUNT; i++)
				all[k * BP_COUNT + i] = &sj_block_params[i];
		char name[48];
		snprintf(name, sizeof name, K > 1 ? "layers.%d-%d" : "layers.%d", g * K, g * K + K - 1);
		fsdp2_add_unit(&f, name, g * K, all, K * BP_COUNT, 1);
	}
	free(all);
	const struct sj_param *normout[] = {&sj_final_norm, &sj_output};
	int head = fsdp2_add_unit(&f, "norm,output", -1, normout, 2, 1);
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		fsdp2_step_reset(&f);
		j->phase = "forward";
		for (int ui = tok; ui <= head; ui++) { /* each bucket's gather prefetches the next */
			fsdp2_pre_forward(&f, ui);
			sj_compute(j, ui == tok || ui == head ? 1 : 8 * K);
			fsdp2_post_forward(&f, ui);
		}
		j->phase = "backward";
		for (int ui = head; ui > tok; ui--) {
			struct sj_unit *u = &f.units[ui], *prev = &f.units[ui - 1];
			if (!u->unsharded)
				fsdp2_gather(&f, u, 1);
			/* the next bucket of the backward, before this reduction */
			if (ui - 1 > tok && !prev->unsharded)
				fsdp2_gather(&f, prev, 1);
			sj_compute(j, ui == head ? 2 : 14 * K);
			fsdp2_post_backward(&f, ui);
		}
		sj_compute(j, 1); /* the embedding's gradient: no weight needed */
		fsdp2_post_backward(&f, tok);
		fsdp2_end_backward(&f);
		j->phase = "optimizer";
		if (o->clip)
			sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(&f, t, 1);
	fv_truth_policy(t, 1);
	t->microbatches = 1;
	t->microbatches_told = o->nvtx || j->last.step_marks > 0;
	sj_truth_extra(t, "  \"blocks_per_bucket\": %d", K);
	sj_note(t,
		"compiler buckets: tok_embeddings, %d buckets of %d blocks, [norm, output]: %d gathers in forward "
		"for %d blocks, the user's choice, not a wrap error; the embedding is not gathered again for backward",
		nb, K, nb + 2, L);
	fsdp2_free(&f);
}
