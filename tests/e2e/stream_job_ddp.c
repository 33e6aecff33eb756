/*
 * tests/e2e/stream_job_ddp.c - the ddp-fsdp setup: DDP's replicate() beside
 * FSDP2's fully_shard on one communicator (stream_job.md).
 *
 * fully_shard on each block, replicate(model) on the root
 * (torch/distributed/_composable/replicate.py): the root's DDP holds every
 * parameter no fully_shard manages (embedding, final norm, output) and
 * all-reduces their gradients in buckets; each block, with no fully_shard
 * above it, is an FSDP root of its own.
 */
#include "stream_job.h"

/* DDP of the replicated parameters, in _collect_params order (the root's
 * children in order, fully_shard modules skipped). */
struct sj_ddp {
	const struct sj_param *params[3];
	int nparams;
	size_t numel; /* all of them */
	int buckets_rebuilt;
};

/* _ReplicateState.lazy_init at the root's first forward pre-hook builds
 * DistributedDataParallel: _verify_param_shape_across_processes (an
 * all-gather of every parameter's sizes and strides), then
 * _sync_module_states (broadcast_coalesced of the parameters from rank 0:
 * one bucket under 250 MB). */
static void ddp_construct(struct sj_job *j, struct sj_comm *c, const struct sj_ddp *d)
{
	size_t meta = 0;
	for (int i = 0; i < d->nparams; i++)
		meta += 2 * (d->params[i]->cols > 1 ? 2 : 1);
	sj_allgather(j, c, meta, ncclInt64, KIND_OTHER);
	sj_broadcast(j, c, d->numel, ncclFloat32, 0);
}

/* DDP._pre_forward of the second iteration: Reducer::rebuild_buckets from
 * the order gradients became ready, then sync_bucket_indices broadcasts the
 * new bucket layout from rank 0 (indices with the bucket count, then the
 * bucket sizes). */
static void ddp_rebuild(struct sj_job *j, struct sj_comm *c, struct sj_ddp *d, int nbuckets)
{
	sj_broadcast(j, c, (size_t)d->nparams + 1, ncclInt64, 0);
	sj_broadcast(j, c, (size_t)nbuckets, ncclInt64, 0);
	d->buckets_rebuilt = 1;
}

void run_ddp_fsdp(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int L = o->layers;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	/* One FSDP2 root per block: its own post-forward order, no explicit
	 * prefetch across blocks. reshard_after_forward=None makes a root keep
	 * its parameters from forward to backward; --block-reshard gives True. */
	struct sj_fsdp2 *blocks = calloc((size_t)L, sizeof *blocks);
	if (!blocks)
		sj_die("out of memory");
	for (int b = 0; b < L; b++) {
		fsdp2_init(&blocks[b], j, world, NULL, 1, 1);
		blocks[b].wrap_linear = 0;
		blocks[b].forward_prefetch = 0;
		fsdp2_add_block(&blocks[b], b, o->block_reshard);
		blocks[b].units[0].root = !o->block_reshard;
	}
	struct sj_ddp d = {.params = {&sj_tok_embeddings, &sj_final_norm, &sj_output}, .nparams = 3};
	for (int i = 0; i < d.nparams; i++)
		d.numel += d.params[i]->rows * d.params[i]->cols;
	/* After the first iteration the buckets follow the order gradients
	 * were ready (output, norm, embedding) under the size limits of the
	 * rebuild, 1 MiB for the first (dist._DEFAULT_FIRST_BUCKET_BYTES) and
	 * bucket_cap_mb = 25 for the others: [output] (2 MiB of fp32) closes the
	 * first, [norm, embedding] make the second. The first iteration has one
	 * bucket of everything (find_unused_parameters=False). */
	size_t first_bucket = sj_output.rows * sj_output.cols;
	int buckets = 0;
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		for (int b = 0; b < L; b++)
			fsdp2_step_reset(&blocks[b]);
		j->phase = "forward";
		if (s == 0)
			ddp_construct(j, world, &d);
		else if (!d.buckets_rebuilt)
			ddp_rebuild(j, world, &d, 2);
		sj_compute(j, 1); /* embedding */
		for (int b = 0; b < L; b++)
			fsdp2_block_forward(&blocks[b], b);
		sj_compute(j, 1); /* norm, output */
		j->phase = "backward";
		sj_compute(j, 2);
		int n = 0;
		/* DDP's autograd hooks: a bucket is all-reduced once all its
		 * gradients are ready, buckets in order */
		if (d.buckets_rebuilt) {
			sj_allreduce(j, world, first_bucket, ncclFloat32, ncclSum, 1);
			n++;
		}
		for (int b = L - 1; b >= 0; b--)
			fsdp2_block_backward(&blocks[b], b);
		sj_allreduce(j, world, d.buckets_rebuilt ? d.numel - first_bucket : d.numel, ncclFloat32, ncclSum, 1);
		n++;
		for (int b = 0; b < L; b++)
			fsdp2_end_backward(&blocks[b]); /* each root's final callback */
		j->phase = "optimizer";
		sj_compute(j, 1);
		sj_step_end(j);
		buckets = n;
	}
	const struct sj_tally *last = &j->last;
	t->fsdp_allgathers = last->param_gathers;
	t->forward_allgathers = last->forward_gathers;
	t->backward_allgathers = last->backward_gathers;
	t->reduce_scatters = last->grad_reduce_scatters;
	t->microbatches = 1;
	t->microbatches_told = o->nvtx || last->step_marks > 0;
	t->repeating_units = L;
	t->gathers_per_unit = blocks[0].units[0].forward_gathers;
	snprintf(t->reshard, sizeof t->reshard, "%s", blocks[0].units[0].backward_gathers > 0 ? "true" : "false");
	uint64_t sharded = 0;
	for (int b = 0; b < L; b++)
		sharded += blocks[b].model_params;
	t->params = sharded;
	sj_truth_extra(t, "\"models\": %d", 1);
	sj_truth_extra(t, "\"ddp_buckets\": %d", buckets);
	sj_truth_extra(t, "\"replicated_params\": %zu", d.numel);
	sj_note(t,
		"blocks under fully_shard (each its own FSDP root%s), embedding, norm and output under replicate "
		"(DDP): %d gradient-bucket AllReduce%s per step on the FSDP communicator; params counts the sharded "
		"blocks, the %zu replicated parameters are whole on every rank",
		o->block_reshard ? ", reshard_after_forward=True" : ": kept from forward to backward", buckets,
		buckets == 1 ? "" : "s", d.numel);
	for (int b = 0; b < L; b++)
		fsdp2_free(&blocks[b]);
	free(blocks);
}
