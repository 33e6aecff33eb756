/*
 * tests/e2e/stream_job_models.c - setups whose step holds more than one
 * forward pass, or whose parameters are gathered outside the step:
 *
 *   dpo      TRL's DPOTrainer under accelerate FSDP2: the policy's forward,
 *            the frozen reference model's forward under no_grad, the
 *            trainer's metric gathers, the policy's backward;
 *   distill  torchtune's knowledge distillation: the student's forward, the
 *            frozen (wider) teacher's forward under no_grad, the student's
 *            backward, the per-step loss all-reduces;
 *   rl       verl's FSDP2 actor: a weight sync to the rollout engine before
 *            every N-th step (one fp32 AllGather per parameter), optionally
 *            a forward-only log-prob pass in the step.
 *
 * Every model is FSDP2 (stream_job_fsdp2.c's units and hooks) on the world
 * communicator; stream_job.md says what each issues and from which sources.
 */
#include "stream_job.h"

/* ---- a model of FSDP2 units ---------------------------------------------- */

/* Which modules get a fully_shard call. */
enum model_layout {
	LAYOUT_ROOT_BLOCKS, /* each block, then the model: the root holds embedding, norm, output */
	LAYOUT_SPLIT_ENDS,  /* embedding, each block, [norm, output]; the model holds nothing */
	LAYOUT_EMBED_SPLIT, /* embedding, each block, then the model: the root holds norm, output */
	LAYOUT_WHOLE,       /* the model alone: one unit */
};

/* A model's parameter shapes: a block in sj_block_params order, and the
 * parameters around the blocks. */
struct model_shape {
	const struct sj_param *block; /* [BP_COUNT] */
	const struct sj_param *embedding, *norm, *output;
};

struct sj_model {
	struct sj_fsdp2 f;
	enum model_layout layout;
	int root;  /* the unit of fully_shard(model), -1 when it holds nothing */
	int embed; /* the embedding's own unit, -1 when the root holds it */
	int head;  /* [norm, output]'s own unit, -1 when the root holds them */
	int layers;
	uint64_t params;
};

static const struct model_shape student_shape = {sj_block_params, &sj_tok_embeddings, &sj_final_norm, &sj_output};

/* The teacher of distill: twice as wide, the same vocabulary (distillation
 * compares full next-token distributions). */
#define TEACHER_HIDDEN (2 * SJ_HIDDEN)
#define TEACHER_FFN (2 * SJ_FFN)
static const struct sj_param teacher_block[BP_COUNT] = {
	{"attention.wq", TEACHER_HIDDEN, TEACHER_HIDDEN, TP_COLWISE, 0},
	{"attention.wk", TEACHER_HIDDEN, TEACHER_HIDDEN, TP_COLWISE, 0},
	{"attention.wv", TEACHER_HIDDEN, TEACHER_HIDDEN, TP_COLWISE, 0},
	{"attention.wo", TEACHER_HIDDEN, TEACHER_HIDDEN, TP_ROWWISE, 0},
	{"feed_forward.w1", TEACHER_FFN, TEACHER_HIDDEN, TP_COLWISE, 0},
	{"feed_forward.w2", TEACHER_HIDDEN, TEACHER_FFN, TP_ROWWISE, 0},
	{"feed_forward.w3", TEACHER_FFN, TEACHER_HIDDEN, TP_COLWISE, 0},
	{"attention_norm", TEACHER_HIDDEN, 1, TP_REPLICATE, 1},
	{"ffn_norm", TEACHER_HIDDEN, 1, TP_REPLICATE, 1},
};
static const struct sj_param teacher_embedding = {"tok_embeddings", SJ_VOCAB, TEACHER_HIDDEN, TP_COLWISE, 0};
static const struct sj_param teacher_norm = {"norm", TEACHER_HIDDEN, 1, TP_REPLICATE, 1};
static const struct sj_param teacher_output = {"output", SJ_VOCAB, TEACHER_HIDDEN, TP_COLWISE, 0};
static const struct model_shape teacher_shape = {teacher_block, &teacher_embedding, &teacher_norm, &teacher_output};

/* Units in pre-forward order (the root's pre-forward hook fires before its
 * children's). reshard_blocks / reshard_ends: reshard_after_forward of the
 * blocks and of the other units. */
static void model_init(struct sj_model *m, struct sj_job *j, struct sj_comm *comm, enum model_layout layout,
		       const struct model_shape *shape, int reshard_blocks, int reshard_ends)
{
	int L = j->opt->layers;
	memset(m, 0, sizeof *m);
	m->layout = layout;
	m->layers = L;
	m->root = m->embed = m->head = -1;
	fsdp2_init(&m->f, j, comm, NULL, 4 + L, 1);
	m->f.wrap_linear = 0;
	const struct sj_param *block[BP_COUNT];
	for (int i = 0; i < BP_COUNT; i++)
		block[i] = &shape->block[i];
	char name[48];
	if (layout == LAYOUT_WHOLE) {
		const struct sj_param **all = calloc((size_t)(3 + BP_COUNT * L), sizeof *all);
		if (!all)
			sj_die("out of memory");
		int n = 0;
		all[n++] = shape->embedding;
		for (int b = 0; b < L; b++)
			for (int i = 0; i < BP_COUNT; i++)
				all[n++] = block[i];
		all[n++] = shape->norm;
		all[n++] = shape->output;
		m->root = fsdp2_add_unit(&m->f, "model", -1, all, n, reshard_ends);
		free(all);
	} else {
		if (layout == LAYOUT_ROOT_BLOCKS) {
			const struct sj_param *rootp[] = {shape->embedding, shape->norm, shape->output};
			m->root = fsdp2_add_unit(&m->f, "model", -1, rootp, 3, reshard_ends);
		} else if (layout == LAYOUT_EMBED_SPLIT) {
			const struct sj_param *rootp[] = {shape->norm, shape->output};
			m->root = fsdp2_add_unit(&m->f, "model", -1, rootp, 2, reshard_ends);
		}
		if (layout != LAYOUT_ROOT_BLOCKS) {
			const struct sj_param *emb[] = {shape->embedding};
			m->embed = fsdp2_add_unit(&m->f, "tok_embeddings", -1, emb, 1, reshard_ends);
		}
		for (int b = 0; b < L; b++) {
			snprintf(name, sizeof name, "layers.%d", b);
			fsdp2_add_unit(&m->f, name, b, block, BP_COUNT, reshard_blocks);
		}
		if (layout == LAYOUT_SPLIT_ENDS) {
			const struct sj_param *normout[] = {shape->norm, shape->output};
			m->head = fsdp2_add_unit(&m->f, "norm,output", -1, normout, 2, reshard_ends);
		}
	}
	/* fully_shard with reshard_after_forward=None keeps the root (True for
	 * the others); an explicit value applies to the root too. */
	if (m->root >= 0)
		m->f.units[m->root].root = 1;
	m->params = m->f.model_params;
}

/* One forward pass (under no_grad too: FSDP2 gathers and reshards the same
 * way, it only registers no backward hooks). */
static void model_forward(struct sj_model *m)
{
	struct sj_fsdp2 *f = &m->f;
	if (m->root >= 0)
		fsdp2_pre_forward(f, m->root);
	if (m->layout == LAYOUT_WHOLE) {
		for (int b = 0; b < m->layers; b++)
			sj_compute(f->job, 8);
	} else {
		if (m->embed >= 0) {
			fsdp2_pre_forward(f, m->embed);
			fsdp2_post_forward(f, m->embed);
		}
		for (int b = 0; b < m->layers; b++)
			fsdp2_block_forward(f, b);
		if (m->head >= 0)
			fsdp2_pre_forward(f, m->head);
	}
	sj_compute(f->job, 1); /* output head */
	if (m->head >= 0)
		fsdp2_post_forward(f, m->head);
	if (m->root >= 0)
		fsdp2_post_forward(f, m->root);
}

/* A forward under no_grad: no backward follows, so the post-forward order
 * the backward prefetch would read is dropped (FSDP2 keeps appending to it;
 * nothing is issued from it). */
static void model_forward_no_grad(struct sj_model *m)
{
	model_forward(m);
	fsdp2_end_backward(&m->f);
}

/* The backward of a trained model (LAYOUT_WHOLE is never trained here).
 * Units whose inputs need no gradient (the embedding, a root that holds it)
 * reduce in the root's post-backward final callback, in module order: the
 * root before the embedding. */
static void model_backward(struct sj_model *m)
{
	struct sj_fsdp2 *f = &m->f;
	if (m->root >= 0)
		fsdp2_pre_backward(f, m->root);
	if (m->head >= 0)
		fsdp2_pre_backward(f, m->head);
	sj_compute(f->job, 2);
	if (m->head >= 0)
		fsdp2_post_backward(f, m->head);
	for (int b = m->layers - 1; b >= 0; b--)
		fsdp2_block_backward(f, b);
	if (m->embed >= 0)
		fsdp2_pre_backward(f, m->embed);
	if (m->root >= 0)
		fsdp2_post_backward(f, m->root);
	if (m->embed >= 0)
		fsdp2_post_backward(f, m->embed);
	fsdp2_end_backward(f);
}

/* Gathers of the last step that the model's units issued, forward ones. */
static int model_forward_gathers(const struct sj_model *m)
{
	int n = 0;
	for (int i = 0; i < m->f.nunits; i++)
		n += m->f.units[i].forward_gathers;
	return n;
}

/* Units of the model gathered in the last step. */
static int model_units_gathered(const struct sj_model *m)
{
	int n = 0;
	for (int i = 0; i < m->f.nunits; i++)
		n += m->f.units[i].forward_gathers + m->f.units[i].backward_gathers > 0;
	return n;
}

/* Truth common to the setups of this file: the trained model's units and
 * policy (fsdp2_truth; passes: its forward passes per step, forward-only
 * ones included), steps told by a per-step collective or NVTX. */
static void models_truth(const struct sj_job *j, const struct sj_model *trained, int passes, struct sj_truth *t)
{
	fsdp2_truth(&trained->f, t, passes);
	t->microbatches = 1;
	t->microbatches_told = j->opt->nvtx || j->last.step_marks > 0;
}

/* ---- setup dpo: TRL DPOTrainer, policy + frozen reference ----------------- */

/* get_batch_loss_metrics: gather_for_metrics of each logged tensor, one
 * all_gather_into_tensor each (accelerate's _gpu_gather_one; a scalar is
 * gathered as one element). Returns the gathers issued. */
static int dpo_metrics(struct sj_job *j, struct sj_comm *world)
{
	/* rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins,
	 * logps/chosen, logps/rejected: one value per pair of the micro-batch;
	 * logits/chosen, logits/rejected: one mean each */
	static const size_t counts[] = {SJ_BATCH, SJ_BATCH, SJ_BATCH, SJ_BATCH, SJ_BATCH, SJ_BATCH, 1, 1};
	int n = 0;
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++, n++)
		sj_allgather(j, world, counts[i], ncclFloat32, KIND_OTHER);
	return n;
}

void run_dpo(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct sj_model policy, ref;
	/* accelerate's fsdp2_prepare_model (1.14 on): each decoder layer, the
	 * input embedding, [final norm, lm_head] with reshard_after_forward=
	 * False, then the model (no parameter left) */
	model_init(&policy, j, world, LAYOUT_SPLIT_ENDS, &student_shape, 1, 1);
	policy.f.units[policy.head].reshard = 0;
	/* TRL's prepare_fsdp under FSDP2 shards the reference model with one
	 * fully_shard call; --ref-wrap block: the reference wrapped per block
	 * like the policy of older accelerate (fully_shard per layer and on the
	 * model, reshard_after_forward=True given explicitly, root included) */
	model_init(&ref, j, world, o->ref_wrap_model ? LAYOUT_WHOLE : LAYOUT_ROOT_BLOCKS, &student_shape, 1, 1);
	ref.f.units[ref.root].root = 0; /* an explicit True reshards the root too */
	int metric_gathers = 0, ref_passes = 0, ref_gathers = 0;
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		fsdp2_step_reset(&policy.f);
		fsdp2_step_reset(&ref.f);
		j->phase = "forward";
		model_forward(&policy); /* concatenated_forward(model, batch) */
		j->phase = "reference";
		model_forward_no_grad(&ref); /* compute_ref_log_probs: torch.no_grad() */
		int passes = 1;
		j->phase = "metrics";
		int n = dpo_metrics(j, world);
		j->phase = "backward";
		model_backward(&policy); /* Trainer.training_step: accelerator.backward(loss) */
		j->phase = "optimizer";
		/* Trainer's max_grad_norm (1.0): accelerator.clip_grad_norm_ ->
		 * clip_grad_norm_ on DTensor gradients: one all-reduce of the norm */
		sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
		metric_gathers = n;
		ref_passes = passes;
		ref_gathers = model_forward_gathers(&ref);
	}
	models_truth(j, &policy, 1, t);
	sj_truth_extra(t, "\"models\": %d", 2);
	sj_truth_extra(t, "\"forward_only_passes\": %d", ref_passes);
	sj_truth_extra(t, "\"step_allgathers\": %d", metric_gathers);
	sj_truth_extra(t, "\"forward_only_allgathers\": %d", ref_gathers);
	sj_truth_extra(t, "\"frozen_params\": %" PRIu64, ref.params);
	sj_note(t,
		"policy (%d units, %d gathered per step) and frozen reference model (%d unit%s, forward only, under "
		"no_grad) on one FSDP communicator; %d metric AllGathers (gather_for_metrics) between the forwards "
		"and the backward",
		policy.f.nunits, model_units_gathered(&policy), ref.f.nunits, ref.f.nunits == 1 ? "" : "s",
		metric_gathers);
	fsdp2_free(&policy.f);
	fsdp2_free(&ref.f);
}

/* ---- setup distill: torchtune knowledge distillation ----------------------- */

void run_distill(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct sj_model student, teacher;
	/* training.shard_model: each layer with reshard_after_forward=True,
	 * then the model with False (the root holds embedding, norm, output);
	 * the teacher is sharded the same way. Under no_grad nothing reshards
	 * the teacher's root after its forward: it stays gathered, from the
	 * first step on. */
	model_init(&student, j, world, LAYOUT_ROOT_BLOCKS, &student_shape, 1, 0);
	model_init(&teacher, j, world, LAYOUT_ROOT_BLOCKS, &teacher_shape, 1, 0);
	int teacher_gathers = 0, teacher_passes = 0;
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		fsdp2_step_reset(&student.f);
		fsdp2_step_reset(&teacher.f);
		j->phase = "forward";
		model_forward(&student); /* _loss_step: self._model(tokens) */
		j->phase = "teacher";
		model_forward_no_grad(&teacher); /* torch.no_grad(): self._teacher_model(tokens) */
		j->phase = "backward";
		model_backward(&student);
		j->phase = "optimizer";
		/* once per optimizer step: all_reduce(num_tokens), then the two
		 * running losses */
		sj_allreduce(j, world, 1, ncclInt64, ncclSum, 1);
		sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1);
		sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
		teacher_gathers = model_forward_gathers(&teacher);
		teacher_passes = 1;
	}
	models_truth(j, &student, 1, t);
	sj_truth_extra(t, "\"models\": %d", 2);
	sj_truth_extra(t, "\"forward_only_passes\": %d", teacher_passes);
	sj_truth_extra(t, "\"step_allgathers\": %d", 0);
	sj_truth_extra(t, "\"forward_only_allgathers\": %d", teacher_gathers);
	sj_truth_extra(t, "\"frozen_params\": %" PRIu64, teacher.params);
	sj_note(t,
		"student and a frozen teacher twice as wide, forward only under no_grad, on one FSDP communicator; "
		"the teacher's root (reshard_after_forward=False) stays gathered after the first step: %d teacher "
		"gathers per step",
		teacher_gathers);
	fsdp2_free(&student.f);
	fsdp2_free(&teacher.f);
}

/* ---- setup rl: verl FSDP2 actor with weight sync --------------------------- */

/* rollout_mode: state_dict() of the FSDP2 actor holds each parameter as a
 * DTensor sharded on dim 0 (fp32: the actor is loaded in fp32, bf16 is only
 * the compute dtype); full_tensor() of each, in state_dict order, gathers
 * it whole (one all_gather_tensor) before it goes to the inference engine.
 * Returns the gathers issued. */
static int rl_weight_sync(struct sj_job *j, struct sj_comm *world)
{
	/* Hugging Face Llama order: embed_tokens, per layer q k v o, gate up
	 * down, input_layernorm, post_attention_layernorm, then norm, lm_head */
	static const int layer_order[] = {BP_WQ, BP_WK, BP_WV, BP_WO, BP_W1, BP_W3, BP_W2, BP_ATTN_NORM, BP_FFN_NORM};
	size_t n = (size_t)world->nranks;
	int gathers = 0;
	for (int k = -1; k <= j->opt->layers; k++) {
		/* k = -1: the embedding; k = layers: norm and lm_head; else layer k */
		const struct sj_param *ends[] = {&sj_final_norm, &sj_output};
		const struct sj_param *one[9];
		size_t count = 0;
		if (k < 0) {
			one[count++] = &sj_tok_embeddings;
		} else if (k == j->opt->layers) {
			one[count++] = ends[0];
			one[count++] = ends[1];
		} else {
			for (size_t i = 0; i < sizeof layer_order / sizeof layer_order[0]; i++)
				one[count++] = &sj_block_params[layer_order[i]];
		}
		for (size_t i = 0; i < count; i++, gathers++)
			sj_allgather(j, world, sj_ceil_div(one[i]->rows, n) * one[i]->cols, ncclFloat32, KIND_OTHER);
	}
	return gathers;
}

void run_rl(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct sj_model actor;
	/* verl's apply_fsdp2: each decoder layer and the (untied) embedding,
	 * then the model (norm, lm_head), all with the configured
	 * reshard_after_forward (True), given explicitly */
	model_init(&actor, j, world, LAYOUT_EMBED_SPLIT, &student_shape, 1, 1);
	actor.f.units[actor.root].root = 0;
	int sync_gathers = 0, syncs = 0, passes = 0;
	/* a sync before every step, with no NVTX step range to leave it out:
	 * nothing in the stream tells it from the step, so a right diagnosis
	 * counts its gathers as the step's gathers of no unit */
	int in_step = o->sync_every == 1 && !o->nvtx;
	for (int s = 0; s < o->steps; s++) {
		if (in_step)
			sj_step_begin(j, s);
		if (s % o->sync_every == 0) {
			/* outside the training step: rollout_mode, then generation,
			 * which issues nothing on the training communicators */
			j->phase = "weight-sync";
			sync_gathers = rl_weight_sync(j, world);
			syncs++;
		}
		if (!in_step)
			sj_step_begin(j, s);
		fsdp2_step_reset(&actor.f);
		passes = 0;
		if (o->log_probs) {
			/* compute_log_prob: the actor's forward under no_grad */
			j->phase = "log-prob";
			model_forward_no_grad(&actor);
			passes++;
		}
		j->phase = "forward";
		model_forward(&actor);
		j->phase = "backward";
		model_backward(&actor);
		j->phase = "optimizer";
		/* dp_actor's clip_grad_norm_ on the FSDP2 gradients */
		sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
	}
	models_truth(j, &actor, 1 + passes, t);
	sj_truth_extra(t, "\"models\": %d", 1);
	sj_truth_extra(t, "\"forward_only_passes\": %d", passes);
	sj_truth_extra(t, "\"step_allgathers\": %d", in_step ? sync_gathers : 0);
	sj_truth_extra(t, "\"sync_every\": %d", o->sync_every);
	sj_truth_extra(t, "\"syncs\": %d", syncs);
	if (!in_step)
		sj_truth_extra(t, "\"sync_allgathers\": %d", sync_gathers);
	sj_note(t,
		"before each step s with s %% %d = 0, outside the step, a weight sync to the rollout engine: %d fp32 "
		"AllGathers, one per parameter (full_tensor of each DTensor), %d syncs in all%s",
		o->sync_every, sync_gathers, syncs,
		in_step ? "; with a sync before every step and no NVTX the sync is counted in the step" : "");
	if (o->log_probs)
		sj_note(t, "a forward-only log-prob pass before each training forward");
	fsdp2_free(&actor.f);
}
