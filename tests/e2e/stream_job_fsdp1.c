/*
 * tests/e2e/stream_job_fsdp1.c - the fsdp1-hsdp setup: FSDP1 HYBRID_SHARD
 * (stream_job.md).
 */
#include "stream_job.h"

/* ---- setup fsdp1-hsdp: FSDP1 HYBRID_SHARD ----------------------------------
 * torch/distributed/fsdp/_runtime_utils.py: one FlatParameter per unit;
 * _pre_forward_unshard, _post_forward_reshard (not the root),
 * _pre_backward_hook with BACKWARD_PRE prefetch (_prefetch_handle), and
 * _post_backward_hook -> _reduce_grad: ReduceScatter on the shard group,
 * then AllReduce on the replicate group. */

struct sj_flat_unit {
	int block;          /* -1: the root */
	size_t numel;       /* unsharded FlatParameter, before padding */
	size_t shard;       /* per-rank shard: padded to a multiple of the shard group */
	int unsharded;
	int needs_pre_backward_unshard; /* set when the forward registered pre-backward hooks */
	int post_forward_index;
	int forward_gathers, backward_gathers;
};

struct sj_fsdp1 {
	struct sj_job *job;
	struct sj_comm *shard, *replicate;
	struct sj_flat_unit *units; /* [0] the root, [1 + b] block b */
	int nunits;
	int *post_forward_order;
	int npost;
};

static void fsdp1_gather(struct sj_fsdp1 *f, struct sj_flat_unit *u, int backward)
{
	sj_allgather(f->job, f->shard, u->shard, ncclBfloat16, backward ? KIND_PARAM_BACKWARD : KIND_PARAM_FORWARD);
	u->unsharded = 1;
	if (backward)
		u->backward_gathers++;
	else
		u->forward_gathers++;
}

/* no_grad: the forward of a reentrant activation checkpoint, which
 * registers no pre-backward hooks. */
static void fsdp1_pre_forward(struct sj_fsdp1 *f, int ui, int backward)
{
	struct sj_flat_unit *u = &f->units[ui];
	if (!u->unsharded)
		fsdp1_gather(f, u, backward);
}

static void fsdp1_post_forward(struct sj_fsdp1 *f, int ui, int grad_enabled)
{
	struct sj_flat_unit *u = &f->units[ui];
	if (u->block >= 0) /* HYBRID_SHARD reshards after forward, except the root */
		u->unsharded = 0;
	if (grad_enabled)
		u->needs_pre_backward_unshard = 1;
	/* _ExecOrderData.record_post_forward: the first usage sets the index */
	if (u->post_forward_index < 0) {
		u->post_forward_index = f->npost;
		f->post_forward_order[f->npost++] = ui;
	}
}

static void fsdp1_pre_backward(struct sj_fsdp1 *f, int ui)
{
	struct sj_flat_unit *u = &f->units[ui];
	if (!u->unsharded)
		fsdp1_gather(f, u, 1);
	u->needs_pre_backward_unshard = 0;
	/* BACKWARD_PRE: the unit before it in post-forward order, if its
	 * forward registered hooks and it is not unsharded yet. */
	int target = u->post_forward_index - 1;
	if (target < 0)
		return;
	struct sj_flat_unit *t = &f->units[f->post_forward_order[target]];
	if (t->needs_pre_backward_unshard && !t->unsharded)
		fsdp1_gather(f, t, 1);
}

static void fsdp1_post_backward(struct sj_fsdp1 *f, int ui)
{
	struct sj_flat_unit *u = &f->units[ui];
	sj_reduce_scatter(f->job, f->shard, u->shard, ncclFloat32, KIND_GRAD);
	sj_allreduce(f->job, f->replicate, u->shard, ncclFloat32, ncclSum, 0);
	u->unsharded = 0; /* _should_free_in_backward: the root too */
}

void run_fsdp1_hsdp(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int S = o->shard, shard_index = j->rank / S, rank_in_shard = j->rank % S;
	/* init_device_mesh(("replicate", "shard")), FSDP(device_mesh=...,
	 * HYBRID_SHARD): process_group = mesh dim 1, _inter_node_pg = dim 0. */
	struct sj_comm *world = sj_comm_world(j, ROLE_ONE_OFF, "world");
	struct sj_comm *replicate = sj_comm_split(j, world, rank_in_shard, ROLE_REPLICATE, "replicate");
	struct sj_comm *shard = sj_comm_split(j, world, shard_index, ROLE_FSDP, "shard");
	struct sj_fsdp1 f = {.job = j, .shard = shard, .replicate = replicate, .nunits = 1 + o->layers};
	f.units = calloc((size_t)f.nunits, sizeof *f.units);
	f.post_forward_order = calloc((size_t)f.nunits, sizeof *f.post_forward_order);
	if (!f.units || !f.post_forward_order)
		sj_die("out of memory");
	size_t block_numel = 0;
	for (int i = 0; i < BP_COUNT; i++)
		block_numel += sj_block_params[i].rows * sj_block_params[i].cols;
	size_t root_numel = sj_tok_embeddings.rows * sj_tok_embeddings.cols + sj_final_norm.rows * sj_final_norm.cols +
			    sj_output.rows * sj_output.cols;
	for (int i = 0; i < f.nunits; i++) {
		struct sj_flat_unit *u = &f.units[i];
		u->block = i - 1;
		u->numel = i == 0 ? root_numel : block_numel;
		u->shard = sj_ceil_div(u->numel, (size_t)S); /* padded to a multiple of S, then split */
		t->params += u->numel;
	}
	j->phase = "init";
	if (o->sync_module_states) {
		/* _init_param_handle_from_module: _sync_module_params_and_buffers on
		 * the shard group, then on the replicate group, from group rank 0;
		 * auto-wrap constructs the blocks before the root. One
		 * _broadcast_coalesced bucket (250 MB) per unit, fp32 as built. */
		for (int i = 1; i <= f.nunits; i++) {
			struct sj_flat_unit *u = &f.units[i % f.nunits];
			sj_broadcast(j, shard, u->numel, ncclFloat32, 0);
			sj_broadcast(j, replicate, u->numel, ncclFloat32, 0);
		}
	}
	int reentrant = o->checkpoint == CKPT_REENTRANT;
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		for (int i = 0; i < f.nunits; i++) {
			f.units[i].forward_gathers = f.units[i].backward_gathers = 0;
			f.units[i].post_forward_index = -1;
			f.units[i].needs_pre_backward_unshard = 0;
		}
		f.npost = 0;
		fsdp1_pre_forward(&f, 0, 0);
		for (int b = 0; b < o->layers; b++) {
			fsdp1_pre_forward(&f, 1 + b, 0);
			sj_compute(j, 8);
			fsdp1_post_forward(&f, 1 + b, !reentrant);
		}
		sj_compute(j, 1);
		fsdp1_post_forward(&f, 0, 1);
		j->phase = "backward";
		fsdp1_pre_backward(&f, 0);
		sj_compute(j, 2);
		for (int b = o->layers - 1; b >= 0; b--) {
			if (reentrant) {
				/* CheckpointFunction.backward re-runs the unit's forward
				 * with grad enabled: a full pre-forward (gather), its
				 * reshard, and hooks for the inner backward. */
				fsdp1_pre_forward(&f, 1 + b, 1);
				sj_compute(j, 8);
				fsdp1_post_forward(&f, 1 + b, 1);
			}
			fsdp1_pre_backward(&f, 1 + b);
			sj_compute(j, 16);
			fsdp1_post_backward(&f, 1 + b);
		}
		fsdp1_post_backward(&f, 0);
		j->phase = "optimizer";
		sj_compute(j, 1);
		sj_step_end(j);
	}
	const struct sj_tally *l = &j->last;
	t->fsdp_allgathers = l->param_gathers;
	t->forward_allgathers = l->forward_gathers;
	t->backward_allgathers = l->backward_gathers;
	t->reduce_scatters = l->grad_reduce_scatters;
	t->microbatches = 1;
	t->microbatches_told = o->nvtx;
	t->repeating_units = 0;
	int again = 0;
	for (int b = 0; b < o->layers; b++) {
		t->repeating_units++;
		again += f.units[1 + b].backward_gathers > 0;
	}
	t->gathers_per_unit = f.units[1].forward_gathers;
	snprintf(t->reshard, sizeof t->reshard, "%s", 2 * again >= o->layers ? "true" : "false");
	sj_note(t, "shard groups of %d, replicate groups of %d", S, replicate->nranks);
	if (reentrant)
		sj_note(t,
			"reentrant activation checkpoint around each block unit: %d gathers per block unit per step "
			"(forward, recomputation, backward), a checkpointing choice, not a wrap bug",
			f.units[1].forward_gathers + f.units[1].backward_gathers);
	if (o->sync_module_states)
		sj_note(t, "%d init Broadcasts before step 0 (one per unit on each group)", 2 * f.nunits);
	free(f.units);
	free(f.post_forward_order);
}

