/* fsdp_ref/fsdp.c: the FSDP runtime (see fsdp.h and docs/fsdp_ref.md).
 *
 * Memory order matters for the measured peaks: a unit's gathered buffer is
 * allocated when its gather is issued (prefetch included) and freed at its
 * reshard, and a reshard always happens before the next unit's gathers are
 * issued, so at most 1 + prefetch units are gathered at once (plus the root,
 * which FSDP2 keeps from forward to the end of backward).
 *
 * NVTX: the hooks' own work (issuing gathers, resharding, zeroing the
 * gradient, issuing reductions) runs inside leaf ranges "fsdp.*", and a
 * unit's range holds only the model's ops (leaf ranges too), so the only
 * time the compute thread spends outside every leaf range is waiting
 * (gather_wait, the TP all-reduce of replicated gradients, the final
 * reduce_reap) and the hooks' few branches: what a profiler reading host
 * timing counts as exposed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_ref/bf16.h"
#include "fsdp_ref/flat_param.h"
#include "fsdp_ref/fsdp.h"
#include "fsdp_ref/markers.h"

struct fsdp_runtime {
	const struct fsdp_backend *be;
	struct mem_ledger *mem;
	struct comm_thread *ct;
	const struct unit_table *units;
	struct fsdp_config cfg;
	struct fsdp_comms comms;
	struct flat_param *fp; /* [nunits] */
	struct model_params params;
	struct fsdp_step_stats stats;
	size_t pbytes; /* bytes per parameter element */
	int sync;      /* the current micro-batch reduce-scatters in its post-backward hooks */
	struct comm_waits waits; /* this step's gather waits */
	float *acc_scratch; /* [largest shard] fp32: a 16-bit reduce output widened before it is summed */
};

static ncclDataType_t nccl_dtype(enum fsdp_dtype t)
{
	return t == FSDP_DTYPE_BF16 ? ncclBfloat16 : ncclFloat32;
}

static size_t full_bytes(const struct fsdp_runtime *rt, int u)
{
	return rt->units->units[u].padded * rt->pbytes;
}

/* ---- gathers ------------------------------------------------------------- */

/* Issue unit u's AllGather unless it is gathered or already in flight.
 * backward: the pre-backward re-gather, from the 1/G copy when resharded to
 * a group, else from the shard. */
static int gather_issue(struct fsdp_runtime *rt, int u, int backward, int ahead)
{
	struct flat_param *fp = &rt->fp[u];
	const struct unit_info *ui = fp->info;
	if (fp->full)
		return 0;
	fp->full = mem_alloc(rt->mem, MEM_GATHERED, full_bytes(rt, u));
	if (!fp->full)
		return -ENOMEM;
	struct comm_request *r = &fp->gather;
	int rank;
	r->op = COMM_ALLGATHER;
	r->recv = fp->full;
	r->dtype = nccl_dtype(rt->cfg.param_dtype);
	r->ready = fp->gather_ready;
	r->done = fp->gather_done;
	if (backward && fp->regathered) {
		r->comm = rt->comms.regather;
		r->send = fp->regathered;
		r->count = ui->padded / (size_t)rt->cfg.reshard_size;
		rank = rt->comms.regather_rank;
	} else {
		r->comm = rt->comms.shard;
		r->send = fp->param;
		r->count = ui->shard;
		rank = rt->cfg.shard_rank;
	}
	int rc;
	if (rt->cfg.gather_in_place) {
		/* FSDP2's foreach_all_gather: the shard is copied into its place in
		 * the gathered buffer (on the compute stream, before the gather's
		 * ready event), and the gather sends from there */
		void *mine = (char *)fp->full + (size_t)rank * r->count * rt->pbytes;
		if ((rc = rt->be->memcpy_d2d(mine, r->send, r->count * rt->pbytes)) < 0)
			return rc;
		r->send = mine;
	}
	if ((rc = rt->be->event_record_compute(fp->gather_ready)) < 0)
		return rc;
	if ((rc = comm_submit(rt->ct, r)) < 0)
		return rc;
	fp->gather_pending = 1;
	if (backward)
		rt->stats.backward_allgathers++;
	else
		rt->stats.forward_allgathers++;
	if (ahead)
		rt->stats.prefetched_allgathers++;
	rt->stats.gathered_bytes += full_bytes(rt, u);
	return 0;
}

/* Block until unit u's gather has landed (the exposed part of its time). */
static int gather_wait(struct fsdp_runtime *rt, int u)
{
	struct flat_param *fp = &rt->fp[u];
	if (!fp->gather_pending)
		return 0;
	int64_t waited;
	int rc = comm_wait_compute(rt->ct, &fp->gather, fp->gather_done, &waited);
	comm_waits_add(&rt->waits, waited);
	fp->gather_pending = 0;
	if (fp->regathered) { /* it was this gather's input */
		mem_free(rt->mem, MEM_GATHERED, fp->regathered, fp->regathered_bytes);
		fp->regathered = NULL;
	}
	return rc;
}

/* ---- reductions ---------------------------------------------------------- */

/* Add a completed reduction's output shard to the step's accumulator (on
 * the compute stream, after the reduction). */
static void grad_accumulate(struct fsdp_runtime *rt, struct flat_param *fp)
{
	size_t n = fp->info->shard;
	const float *src = fp->grad;
	if (rt->cfg.reduce_dtype != FSDP_DTYPE_FP32) {
		rt->be->cast(rt->acc_scratch, FSDP_DTYPE_FP32, fp->grad, rt->cfg.reduce_dtype, n);
		src = rt->acc_scratch;
	}
	rt->be->residual_add(fp->grad_acc, src, n);
}

/* Free the inputs of reduce-scatters that have completed (wait: block for
 * all of them). */
static int reduce_reap(struct fsdp_runtime *rt, int wait)
{
	int rc = 0;
	for (int u = 0; u < rt->units->nunits; u++) {
		struct flat_param *fp = &rt->fp[u];
		if (!fp->reduce_pending)
			continue;
		struct comm_request *last = rt->comms.replica ? &fp->allreduce : &fp->reduce;
		struct fsdp_event *done = rt->comms.replica ? fp->allreduce_done : fp->reduce_done;
		if (wait) {
			int r1 = comm_wait(rt->ct, &fp->reduce);
			int r2 = rt->comms.replica ? comm_wait(rt->ct, &fp->allreduce) : 0;
			int r3 = rt->be->compute_wait_event(done);	     /* Adam reads the shard next */
			int r4 = rt->be->event_synchronize(fp->reduce_done); /* before rs_send is freed */
			if (!rc)
				rc = r1 ? r1 : r2 ? r2 : r3 ? r3 : r4;
		} else if (!comm_test(rt->ct, last) || rt->be->event_query(fp->reduce_done) != 1) {
			continue;
		} else {
			rc = rc ? rc : (fp->reduce.result ? fp->reduce.result : fp->allreduce.result);
			/* completed early: compute must still order its later reads after it */
			int r3 = rt->be->compute_wait_event(done);
			rc = rc ? rc : r3;
		}
		if (rt->cfg.accumulate)
			grad_accumulate(rt, fp);
		mem_free(rt->mem, MEM_GRADIENT, fp->rs_send, fp->rs_send_bytes);
		fp->rs_send = NULL;
		fp->reduce_pending = 0;
	}
	return rc;
}

/* Post-backward of unit u: its full gradient is complete. Reduce-scatter it
 * (in the reduce dtype) into the gradient shard; with HSDP all-reduce that
 * shard across replicas. The input stays allocated until the reduction is
 * done. */
static int reduce_issue(struct fsdp_runtime *rt, int u)
{
	struct flat_param *fp = &rt->fp[u];
	const struct unit_info *ui = fp->info;
	size_t padded = ui->padded;
	int rc;
	if (rt->cfg.reduce_dtype == FSDP_DTYPE_FP32) {
		fp->rs_send = fp->grad_full;
		fp->rs_send_bytes = padded * 4;
	} else {
		fp->rs_send_bytes = padded * fsdp_dtype_size(rt->cfg.reduce_dtype);
		fp->rs_send = mem_alloc(rt->mem, MEM_GRADIENT, fp->rs_send_bytes);
		if (!fp->rs_send)
			return -ENOMEM;
		rt->be->cast(fp->rs_send, rt->cfg.reduce_dtype, fp->grad_full, FSDP_DTYPE_FP32, padded);
		mem_free(rt->mem, MEM_GRADIENT, fp->grad_full, padded * 4);
	}
	fp->grad_full = NULL;
	if ((rc = rt->be->event_record_compute(fp->reduce_ready)) < 0)
		return rc;
	struct comm_request *r = &fp->reduce;
	r->op = COMM_REDUCE_SCATTER;
	r->comm = rt->comms.shard;
	r->send = fp->rs_send;
	r->recv = fp->grad;
	r->count = ui->shard;
	r->dtype = nccl_dtype(rt->cfg.reduce_dtype);
	r->ready = fp->reduce_ready;
	r->done = fp->reduce_done;
	if ((rc = comm_submit(rt->ct, r)) < 0)
		return rc;
	rt->stats.reduce_scatters++;
	rt->stats.reduce_scattered_bytes += fp->rs_send_bytes;
	if (rt->comms.replica) {
		/* Same comm stream, after the reduce-scatter: no extra dependency. */
		struct comm_request *a = &fp->allreduce;
		a->op = COMM_ALLREDUCE;
		a->comm = rt->comms.replica;
		a->send = fp->grad;
		a->recv = fp->grad;
		a->count = ui->shard;
		a->dtype = r->dtype;
		a->ready = NULL;
		a->done = fp->allreduce_done;
		if ((rc = comm_submit(rt->ct, a)) < 0)
			return rc;
		rt->stats.allreduces++;
	}
	fp->reduce_pending = 1;
	return 0;
}

/* ---- the hooks (struct model_params) -------------------------------------- */

static const void *rt_param(void *ctx, int id)
{
	struct fsdp_runtime *rt = ctx;
	const struct flat_param *fp = &rt->fp[rt->units->tensor_unit[id]];
	return (const char *)fp->full + rt->units->tensor_offset[id] * rt->pbytes;
}

static float *rt_grad(void *ctx, int id)
{
	struct fsdp_runtime *rt = ctx;
	const struct flat_param *fp = &rt->fp[rt->units->tensor_unit[id]];
	return fp->grad_full + rt->units->tensor_offset[id];
}

static int rt_pre_forward(void *ctx, struct model_module m)
{
	struct fsdp_runtime *rt = ctx;
	int u = rt->units->fwd_open[model_module_index(m)];
	if (u < 0)
		return 0;
	/* Units are numbered in forward order: prefetch the next P. */
	int rc = 0;
	markers_push("fsdp.unshard");
	for (int k = u; rc == 0 && k <= u + rt->cfg.forward_prefetch && k < rt->units->nunits; k++)
		rc = gather_issue(rt, k, 0, k != u);
	markers_pop();
	if (rc < 0)
		return rc;
	rc = gather_wait(rt, u); /* in no leaf range: the waiting a profiler sees */
	markers_push_unit(rt->units->units[u].name);
	return rc;
}

static int rt_post_forward(void *ctx, struct model_module m)
{
	struct fsdp_runtime *rt = ctx;
	int u = rt->units->fwd_close[model_module_index(m)];
	if (u < 0)
		return 0;
	markers_pop();
	struct flat_param *fp = &rt->fp[u];
	int g = rt->cfg.reshard_size;
	if (fp->info->is_root || g == 0)
		return 0; /* kept for backward */
	markers_push("fsdp.reshard");
	int rc = 0;
	if (g < rt->cfg.shard_size) {
		/* Keep this rank's 1/G of the full unit; backward re-gathers within the
		 * G-rank group. */
		size_t part = fp->info->padded / (size_t)g;
		fp->regathered_bytes = part * rt->pbytes;
		fp->regathered = mem_alloc(rt->mem, MEM_GATHERED, fp->regathered_bytes);
		const char *mine = (const char *)fp->full + (size_t)rt->comms.regather_rank * fp->regathered_bytes;
		if (!fp->regathered)
			rc = -ENOMEM;
		else
			rc = rt->be->memcpy_d2d(fp->regathered, mine, fp->regathered_bytes);
	}
	if (rc == 0) {
		mem_free(rt->mem, MEM_GATHERED, fp->full, full_bytes(rt, u));
		fp->full = NULL;
	}
	markers_pop();
	return rc;
}

static int rt_pre_backward(void *ctx, struct model_module m)
{
	struct fsdp_runtime *rt = ctx;
	const struct unit_table *t = rt->units;
	int u = t->bwd_open[model_module_index(m)];
	if (u < 0)
		return 0;
	struct flat_param *fp = &rt->fp[u];
	int rc = 0;
	if (rt->cfg.recompute_regather && !fp->info->is_root && rt->cfg.reshard_size == rt->cfg.shard_size) {
		/* An activation checkpoint around the unit re-runs its forward
		 * first: FSDP1's pre-forward gathers it (or takes the gather
		 * prefetched for backward), its post-forward reshards it. The
		 * recomputation itself is emulated: the activations were kept. */
		markers_push("fsdp.unshard");
		rc = gather_issue(rt, u, 1, 0);
		markers_pop();
		if (rc == 0)
			rc = gather_wait(rt, u);
		if (rc < 0)
			return rc;
		rt->stats.recompute_allgathers++;
		markers_push("fsdp.recompute");
		markers_pop();
		markers_push("fsdp.reshard");
		mem_free(rt->mem, MEM_GATHERED, fp->full, full_bytes(rt, u));
		fp->full = NULL;
		markers_pop();
	}
	/* Backward order: this unit and the next P (the root, first, is never
	 * resharded, so its pre-backward only prefetches). */
	markers_push("fsdp.unshard");
	for (int k = t->bwd_pos[u]; rc == 0 && k <= t->bwd_pos[u] + rt->cfg.prefetch && k < t->nunits; k++)
		rc = gather_issue(rt, t->bwd_order[k], 1, t->bwd_order[k] != u);
	markers_pop();
	if (rc == 0)
		rc = gather_wait(rt, u); /* in no leaf range: the waiting a profiler sees */
	if (rc < 0)
		return rc;
	markers_push("fsdp.grad_alloc");
	fp->grad_full = mem_alloc(rt->mem, MEM_GRADIENT, fp->info->padded * 4);
	/* padding and unused embedding rows must reduce as zeros */
	rc = fp->grad_full ? rt->be->memset_zero(fp->grad_full, fp->info->padded * 4) : -ENOMEM;
	markers_pop();
	if (rc < 0)
		return rc;
	markers_push_unit(fp->info->name);
	return 0;
}

static int rt_post_backward(void *ctx, struct model_module m)
{
	struct fsdp_runtime *rt = ctx;
	int u = rt->units->bwd_close[model_module_index(m)];
	if (u < 0)
		return 0;
	markers_pop();
	struct flat_param *fp = &rt->fp[u];
	size_t padded = fp->info->padded;
	size_t rep0 = fp->info->replicated_begin, rep1 = fp->info->replicated_end;
	if (rt->comms.tp && rep1 > rep0) {
		/* Every tp rank computed the replicated tensors' gradient from its own
		 * tokens: sum the partial gradients (every micro-batch, as DTensor's
		 * Partial -> Replicate does) before anything is kept or reduced. */
		int rc = tp_allreduce(rt->comms.tp, "fsdp.tp_allreduce", fp->grad_full + rep0, rep1 - rep0);
		if (rc < 0)
			return rc;
	}
	if (fp->grad_unsharded) {
		/* the sum of the micro-batches that did not reduce, plus this one */
		markers_push("fsdp.grad_accumulate");
		rt->be->residual_add(fp->grad_unsharded, fp->grad_full, padded);
		mem_free(rt->mem, MEM_GRADIENT, fp->grad_full, padded * 4);
		fp->grad_full = fp->grad_unsharded;
		fp->grad_unsharded = NULL;
		markers_pop();
	}
	if (!rt->sync) {
		/* no reduction this micro-batch: keep the unsharded gradient */
		markers_push("fsdp.reshard");
		fp->grad_unsharded = fp->grad_full;
		fp->grad_full = NULL;
		mem_free(rt->mem, MEM_GATHERED, fp->full, full_bytes(rt, u));
		fp->full = NULL;
		markers_pop();
		return 0;
	}
	markers_push("fsdp.reduce_scatter");
	int rc = reduce_issue(rt, u);
	if (rc == 0) {
		/* FSDP2 reshards every unit after its backward, the root included. */
		mem_free(rt->mem, MEM_GATHERED, fp->full, full_bytes(rt, u));
		fp->full = NULL;
		rc = reduce_reap(rt, 0);
	}
	markers_pop();
	return rc;
}

/* The model's ops: NVTX leaf ranges (see the file comment). */
static void rt_op_begin(void *ctx, const char *name)
{
	(void)ctx;
	markers_push(name);
}

static void rt_op_end(void *ctx)
{
	(void)ctx;
	markers_pop();
}

/* ---- lifecycle ----------------------------------------------------------- */

struct fsdp_runtime *fsdp_new(const struct fsdp_backend *be, struct mem_ledger *mem, struct comm_thread *ct,
			      const struct model_config *mcfg, const struct unit_table *units,
			      const struct fsdp_config *cfg, const struct fsdp_comms *comms)
{
	struct fsdp_runtime *rt = calloc(1, sizeof *rt);
	if (!rt)
		return NULL;
	rt->be = be;
	rt->mem = mem;
	rt->ct = ct;
	rt->units = units;
	rt->cfg = *cfg;
	rt->comms = *comms;
	rt->pbytes = fsdp_dtype_size(cfg->param_dtype);
	rt->fp = calloc((size_t)units->nunits, sizeof *rt->fp);
	struct model_tensor *tensors = calloc((size_t)units->ntensors, sizeof *tensors);
	if (!rt->fp || !tensors) {
		free(tensors);
		fsdp_free(rt);
		return NULL;
	}
	model_tensors(mcfg, tensors);
	size_t largest_shard = 0;
	for (int u = 0; u < units->nunits; u++) {
		struct flat_param *fp = &rt->fp[u];
		int rc = flat_param_init(fp, be, mem, units, u, mcfg, tensors, cfg->param_dtype, cfg->reduce_dtype,
					 cfg->shard_rank, cfg->tp_rank, cfg->seed);
		if (rc == 0 && cfg->accumulate) {
			fp->grad_acc = mem_alloc(mem, MEM_PERSISTENT, fp->info->shard * 4);
			rc = fp->grad_acc ? be->memset_zero(fp->grad_acc, fp->info->shard * 4) : -ENOMEM;
		}
		if (rc < 0) {
			flat_param_release(fp, be, mem);
			free(tensors);
			fsdp_free(rt);
			return NULL;
		}
		if (fp->info->shard > largest_shard)
			largest_shard = fp->info->shard;
	}
	free(tensors);
	rt->sync = 1;
	if (cfg->accumulate && cfg->reduce_dtype != FSDP_DTYPE_FP32 &&
	    !(rt->acc_scratch = mem_alloc(mem, MEM_OTHER, (largest_shard ? largest_shard : 1) * 4))) {
		fsdp_free(rt);
		return NULL;
	}
	rt->params = (struct model_params){
	    .ctx = rt,
	    .dtype = cfg->param_dtype,
	    .param = rt_param,
	    .grad = rt_grad,
	    .pre_forward = rt_pre_forward,
	    .post_forward = rt_post_forward,
	    .pre_backward = rt_pre_backward,
	    .post_backward = rt_post_backward,
	    .op_begin = rt_op_begin,
	    .op_end = rt_op_end,
	};
	return rt;
}

void fsdp_free(struct fsdp_runtime *rt)
{
	if (!rt)
		return;
	if (rt->fp) {
		/* Requests still queued reference these buffers: let them finish. */
		for (int u = 0; u < rt->units->nunits; u++) {
			comm_wait(rt->ct, &rt->fp[u].gather);
			comm_wait(rt->ct, &rt->fp[u].reduce);
			comm_wait(rt->ct, &rt->fp[u].allreduce);
		}
		rt->be->synchronize();
		for (int u = 0; u < rt->units->nunits; u++)
			flat_param_release(&rt->fp[u], rt->be, rt->mem);
		free(rt->fp);
	}
	if (rt->acc_scratch) {
		size_t largest = 0;
		for (int u = 0; u < rt->units->nunits; u++)
			if (rt->units->units[u].shard > largest)
				largest = rt->units->units[u].shard;
		mem_free(rt->mem, MEM_OTHER, rt->acc_scratch, (largest ? largest : 1) * 4);
	}
	comm_waits_free(&rt->waits);
	free(rt);
}

const struct model_params *fsdp_model_params(struct fsdp_runtime *rt)
{
	return &rt->params;
}

void fsdp_step_begin(struct fsdp_runtime *rt)
{
	memset(&rt->stats, 0, sizeof rt->stats);
	comm_waits_reset(&rt->waits);
	rt->sync = 1;
	for (int u = 0; rt->cfg.accumulate && u < rt->units->nunits; u++)
		rt->be->memset_zero(rt->fp[u].grad_acc, rt->fp[u].info->shard * 4);
}

void fsdp_microbatch_begin(struct fsdp_runtime *rt, int sync)
{
	rt->sync = sync;
}

void fsdp_reshard_all(struct fsdp_runtime *rt)
{
	for (int u = 0; u < rt->units->nunits; u++) {
		struct flat_param *fp = &rt->fp[u];
		if (fp->full && !fp->gather_pending) {
			mem_free(rt->mem, MEM_GATHERED, fp->full, full_bytes(rt, u));
			fp->full = NULL;
		}
	}
}

/* Broadcast buf (count fp32) from rank 0 of comm, through the communication
 * thread, ordered after the compute stream and before its later work. */
static int broadcast_unit(struct fsdp_runtime *rt, struct flat_param *fp, ncclComm_t comm, float *buf, size_t count)
{
	struct comm_request r = {
	    .op = COMM_BROADCAST,
	    .comm = comm,
	    .send = buf,
	    .recv = buf,
	    .count = count,
	    .dtype = ncclFloat32,
	    .root = 0,
	    .ready = fp->gather_ready,
	    .done = fp->gather_done,
	};
	int rc = rt->be->event_record_compute(fp->gather_ready);
	if (rc == 0)
		rc = comm_submit(rt->ct, &r);
	if (rc == 0)
		rc = comm_wait(rt->ct, &r);
	if (rc == 0)
		rc = rt->be->compute_wait_event(fp->gather_done);
	if (rc == 0)
		rt->stats.broadcasts++;
	return rc;
}

int fsdp_sync_module_states(struct fsdp_runtime *rt, const struct model_config *mcfg)
{
	const struct unit_table *t = rt->units;
	struct model_tensor *tensors = calloc((size_t)t->ntensors, sizeof *tensors);
	if (!tensors)
		return -ENOMEM;
	model_tensors(mcfg, tensors);
	int rc = 0;
	markers_push("fsdp.sync_module_states");
	for (int u = 0; rc == 0 && u < t->nunits; u++) {
		struct flat_param *fp = &rt->fp[u];
		size_t padded = fp->info->padded, shard = fp->info->shard;
		float *host = malloc(padded * sizeof *host);
		float *dev = mem_alloc(rt->mem, MEM_OTHER, padded * 4);
		if (!host || !dev) {
			rc = -ENOMEM;
		} else {
			/* every rank computes the values; rank 0's travel */
			flat_param_init_values(t, u, mcfg, tensors, rt->cfg.seed, rt->cfg.tp_rank, 0, padded, host);
			rc = rt->be->memcpy_h2d(dev, host, padded * 4);
			if (rc == 0)
				rc = broadcast_unit(rt, fp, rt->comms.shard, dev, padded);
			if (rc == 0 && rt->comms.replica)
				rc = broadcast_unit(rt, fp, rt->comms.replica, dev, padded);
			if (rc == 0)
				rc = rt->be->memcpy_d2d(fp->master, dev + (size_t)rt->cfg.shard_rank * shard, shard * 4);
			if (rc == 0 && fp->param != (void *)fp->master)
				rt->be->cast(fp->param, rt->cfg.param_dtype, fp->master, FSDP_DTYPE_FP32, shard);
			if (rc == 0)
				rc = rt->be->synchronize();
		}
		free(host);
		mem_free(rt->mem, MEM_OTHER, dev, padded * 4);
	}
	markers_pop();
	free(tensors);
	return rc;
}

int fsdp_grad_norm_sq(struct fsdp_runtime *rt, double *out)
{
	*out = 0.0;
	size_t cap = 0;
	void *host = NULL;
	int rc = 0;
	double replicated_weight = rt->cfg.tp_size > 1 ? 1.0 / (double)rt->cfg.tp_size : 1.0;
	for (int u = 0; rc == 0 && u < rt->units->nunits; u++) {
		const struct flat_param *fp = &rt->fp[u];
		size_t n = fp->info->shard, lo = (size_t)rt->cfg.shard_rank * n;
		size_t rep0 = fp->info->replicated_begin, rep1 = fp->info->replicated_end;
		enum fsdp_dtype dt = rt->cfg.accumulate ? FSDP_DTYPE_FP32 : rt->cfg.reduce_dtype;
		const void *g = rt->cfg.accumulate ? (const void *)fp->grad_acc : fp->grad;
		size_t bytes = n * fsdp_dtype_size(dt);
		if (bytes > cap) {
			void *p = realloc(host, bytes);
			if (!p) {
				rc = -ENOMEM;
				break;
			}
			host = p;
			cap = bytes;
		}
		if ((rc = rt->be->memcpy_d2h(host, g, bytes)) < 0)
			break;
		for (size_t i = 0; i < n; i++) {
			double x = dt == FSDP_DTYPE_FP32 ? ((const float *)host)[i]
							 : bf16_to_float(((const uint16_t *)host)[i]);
			int replicated = lo + i >= rep0 && lo + i < rep1;
			*out += replicated ? x * x * replicated_weight : x * x;
		}
	}
	free(host);
	return rc;
}

int fsdp_finish_backward(struct fsdp_runtime *rt)
{
	int64_t t0 = comm_now_ns();
	int rc = reduce_reap(rt, 1);
	rt->stats.reduce_wait_ns += comm_now_ns() - t0;
	return rc;
}

int fsdp_optimizer_step(struct fsdp_runtime *rt, const struct fsdp_adam_params *hp)
{
	for (int u = 0; u < rt->units->nunits; u++) {
		struct flat_param *fp = &rt->fp[u];
		if (rt->cfg.accumulate)
			rt->be->adam_update(fp->param, rt->cfg.param_dtype, fp->master, fp->grad_acc, FSDP_DTYPE_FP32,
					    fp->adam_m, fp->adam_v, fp->info->shard, hp);
		else
			rt->be->adam_update(fp->param, rt->cfg.param_dtype, fp->master, fp->grad,
					    rt->cfg.reduce_dtype, fp->adam_m, fp->adam_v, fp->info->shard, hp);
	}
	return 0;
}

void fsdp_step_stats(const struct fsdp_runtime *rt, struct fsdp_step_stats *out)
{
	*out = rt->stats;
	out->gather_wait_ns = rt->waits.total_ns;
	out->gather_waits = rt->waits.count;
	out->gather_wait_each = rt->waits.each;
}
