/*
 * tests/e2e/stream_job_zero3.c - the zero3 setup: DeepSpeed ZeRO-3's parameter
 * coordinator (stream_job.md).
 */
#include "stream_job.h"

/* ---- setup zero3: DeepSpeed ZeRO-3 -----------------------------------------
 * deepspeed/runtime/zero/partitioned_param_coordinator.py (fetch_sub_module,
 * release_sub_module, __params_to_release, reset_step),
 * partition_parameters.py (all_gather_coalesced, _all_gather), stage3.py
 * (reduce_independent_p_g_buckets_and_remove_grads, get_grad_norm_direct,
 * _post_step), parameter_offload.py (the module hooks). Parameters are
 * partitioned per tensor over the world. */

enum z3_status { Z3_NOT_AVAILABLE = 0, Z3_AVAILABLE = 1 };
enum z3_mode { Z3_INVALID, Z3_RECORD, Z3_COMPLETE };

struct z3_param {
	size_t numel; /* ds_numel */
	size_t rows, cols; /* ds_shape: [out, in] of a Linear or an embedding; cols = 0 for a vector */
	int persist;  /* ds_persist: numel <= stage3_param_persistence_threshold */
	enum z3_status status;
	int active;   /* in ds_active_sub_modules of a running module */
	int64_t most_recent_fetched_for; /* __most_recent_step_id_param_fetched_for */
	int secondary; /* hpZ: ds_secondary_tensor is set (partitioned since the last optimizer step) */
};

struct z3_module {
	int param; /* its one direct parameter, -1 for a container */
};

enum z3_event_kind { Z3_PRE, Z3_POST, Z3_GRAD };
struct z3_event {
	enum z3_event_kind kind;
	int module;
};

struct z3_trace_entry {
	int param;
	int64_t step_id;
};

/* ZeRO++ fetches of one step beyond what the job's tally counts (the job
 * counts the world's parameter gathers, one per value AllGather). */
struct z3_extra_tally {
	int hpz_fetches;     /* fetch events on the hpZ group (a value + scale pair once) */
	int hpz_backward;    /* of them, issued by backward hooks */
	int quantized;       /* fetch events sent as int8 values + fp32 scales, both groups */
	int calls;           /* their ncclAllGather calls the job does not count: scales, hpZ values */
	int qgz_tensors;     /* gradient tensors reduced by qgZ's all-to-alls */
};

struct sj_zero3 {
	struct sj_job *job;
	struct sj_comm *comm;
	struct sj_comm *hpz;   /* zero_hpz_partition_size > 1: the intra-node group of the secondary partition */
	struct sj_comm *a2a_local, *a2a_global; /* qgZ across nodes: this node's ranks; one rank per node */
	struct z3_extra_tally cur, last;
	struct z3_param *params;
	int nparams;
	struct z3_module *modules;
	int nmodules;
	struct z3_event *fwd, *bwd;
	int nfwd, nbwd;
	enum z3_mode mode;
	int *trace;            /* __submodule_order */
	int ntrace, trace_cap;
	struct z3_trace_entry *param_order; /* __param_order */
	int nparam_order;
	int queue;             /* __param_queue: index of its head in param_order */
	int64_t step_id;
	long n_available;
	int *bucket;           /* the IPG gradient bucket */
	int nbucket;
	long bucket_elements;
	int *scratch;
};

static int z3_add_param(struct sj_zero3 *z, size_t rows, size_t cols)
{
	struct z3_param *p = &z->params[z->nparams];
	memset(p, 0, sizeof *p);
	size_t numel = cols ? rows * cols : rows;
	p->numel = numel;
	p->rows = rows;
	p->cols = cols;
	p->persist = (long)numel <= z->job->opt->persistence;
	return z->nparams++;
}

static int z3_add_module(struct sj_zero3 *z, int param)
{
	z->modules[z->nmodules].param = param;
	return z->nmodules++;
}

static void z3_event(struct z3_event *list, int *n, enum z3_event_kind kind, int module)
{
	list[*n].kind = kind;
	list[*n].module = module;
	(*n)++;
}

/* A Hugging Face LlamaForCausalLM: every nn.Module gets ZeRO-3's hooks.
 * Forward: pre / post of each module as it runs. Backward: a module's
 * pre-backward fires when its output's gradient arrives (outer modules
 * wrap the output last, so they come first), its post-backward when its
 * inputs' gradients are done (never for modules whose inputs need no
 * gradient: the root, the model, the embedding; rotary_emb has no
 * backward at all). */
static void z3_build(struct sj_zero3 *z)
{
	const struct sj_options *o = z->job->opt;
	int L = o->layers;
	int max_modules = 6 + 14 * L, max_params = 3 + 9 * L;
	z->params = calloc((size_t)max_params, sizeof *z->params);
	z->modules = calloc((size_t)max_modules, sizeof *z->modules);
	z->fwd = calloc((size_t)max_modules * 2, sizeof *z->fwd);
	z->bwd = calloc((size_t)max_modules * 3, sizeof *z->bwd);
	z->trace_cap = max_modules * 2;
	z->trace = calloc((size_t)z->trace_cap, sizeof *z->trace);
	z->param_order = calloc((size_t)z->trace_cap, sizeof *z->param_order);
	z->bucket = calloc((size_t)max_params, sizeof *z->bucket);
	z->scratch = calloc((size_t)max_params, sizeof *z->scratch);
	if (!z->params || !z->modules || !z->fwd || !z->bwd || !z->trace || !z->param_order || !z->bucket ||
	    !z->scratch)
		sj_die("out of memory");
	/* Parameters in creation order (ds_id). */
	size_t H = SJ_HIDDEN, F = SJ_FFN, V = SJ_VOCAB;
	int p_embed = z3_add_param(z, V, H);
	int *lp = malloc((size_t)L * 9 * sizeof *lp);
	if (!lp)
		sj_die("out of memory");
	for (int l = 0; l < L; l++) {
		int *q = &lp[l * 9];
		q[0] = z3_add_param(z, H, H); /* q_proj */
		q[1] = z3_add_param(z, H, H); /* k_proj */
		q[2] = z3_add_param(z, H, H); /* v_proj */
		q[3] = z3_add_param(z, H, H); /* o_proj */
		q[4] = z3_add_param(z, F, H); /* gate_proj */
		q[5] = z3_add_param(z, F, H); /* up_proj */
		q[6] = z3_add_param(z, H, F); /* down_proj */
		q[7] = z3_add_param(z, H, 0); /* input_layernorm */
		q[8] = z3_add_param(z, H, 0); /* post_attention_layernorm */
	}
	int p_norm = z3_add_param(z, H, 0);
	int p_head = z3_add_param(z, V, H);

	int root = z3_add_module(z, -1), model = z3_add_module(z, -1);
	int embed = z3_add_module(z, p_embed), rotary = z3_add_module(z, -1);
	struct z3_event *fw = z->fwd, *bw = z->bwd;
	int nf = 0, nb = 0;
	z3_event(fw, &nf, Z3_PRE, root);
	z3_event(fw, &nf, Z3_PRE, model);
	z3_event(fw, &nf, Z3_PRE, embed);
	z3_event(fw, &nf, Z3_POST, embed);
	z3_event(fw, &nf, Z3_PRE, rotary);
	z3_event(fw, &nf, Z3_POST, rotary);
	int(*lm)[13] = malloc((size_t)L * sizeof *lm);
	if (!lm)
		sj_die("out of memory");
	enum { M_LAYER, M_IN_NORM, M_ATTN, M_Q, M_K, M_V, M_O, M_POST_NORM, M_MLP, M_GATE, M_ACT, M_UP, M_DOWN };
	for (int l = 0; l < L; l++) {
		int *m = lm[l], *q = &lp[l * 9];
		m[M_LAYER] = z3_add_module(z, -1);
		m[M_IN_NORM] = z3_add_module(z, q[7]);
		m[M_ATTN] = z3_add_module(z, -1);
		m[M_Q] = z3_add_module(z, q[0]);
		m[M_K] = z3_add_module(z, q[1]);
		m[M_V] = z3_add_module(z, q[2]);
		m[M_O] = z3_add_module(z, q[3]);
		m[M_POST_NORM] = z3_add_module(z, q[8]);
		m[M_MLP] = z3_add_module(z, -1);
		m[M_GATE] = z3_add_module(z, q[4]);
		m[M_ACT] = z3_add_module(z, -1);
		m[M_UP] = z3_add_module(z, q[5]);
		m[M_DOWN] = z3_add_module(z, q[6]);
		/* LlamaDecoderLayer.forward: input_layernorm, self_attn (q, k, v,
		 * o), post_attention_layernorm, mlp: down(act(gate(x)) * up(x)). */
		static const int leaf_fwd[] = {M_Q, M_K, M_V, M_O};
		z3_event(fw, &nf, Z3_PRE, m[M_LAYER]);
		z3_event(fw, &nf, Z3_PRE, m[M_IN_NORM]);
		z3_event(fw, &nf, Z3_POST, m[M_IN_NORM]);
		z3_event(fw, &nf, Z3_PRE, m[M_ATTN]);
		for (int i = 0; i < 4; i++) {
			z3_event(fw, &nf, Z3_PRE, m[leaf_fwd[i]]);
			z3_event(fw, &nf, Z3_POST, m[leaf_fwd[i]]);
		}
		z3_event(fw, &nf, Z3_POST, m[M_ATTN]);
		z3_event(fw, &nf, Z3_PRE, m[M_POST_NORM]);
		z3_event(fw, &nf, Z3_POST, m[M_POST_NORM]);
		z3_event(fw, &nf, Z3_PRE, m[M_MLP]);
		static const int mlp_fwd[] = {M_GATE, M_ACT, M_UP, M_DOWN};
		for (int i = 0; i < 4; i++) {
			z3_event(fw, &nf, Z3_PRE, m[mlp_fwd[i]]);
			z3_event(fw, &nf, Z3_POST, m[mlp_fwd[i]]);
		}
		z3_event(fw, &nf, Z3_POST, m[M_MLP]);
		z3_event(fw, &nf, Z3_POST, m[M_LAYER]);
	}
	int norm = z3_add_module(z, p_norm), head = z3_add_module(z, p_head);
	z3_event(fw, &nf, Z3_PRE, norm);
	z3_event(fw, &nf, Z3_POST, norm);
	z3_event(fw, &nf, Z3_POST, model);
	z3_event(fw, &nf, Z3_PRE, head);
	z3_event(fw, &nf, Z3_POST, head);
	z3_event(fw, &nf, Z3_POST, root);

	/* A leaf's backward: pre-backward (fetch), its gradient (the
	 * AccumulateGrad hook feeds the reduce bucket), post-backward (release). */
#define Z3_LEAF_BACKWARD(mod)                        \
	do {                                         \
		z3_event(bw, &nb, Z3_PRE, (mod));    \
		if (z->modules[(mod)].param >= 0)    \
			z3_event(bw, &nb, Z3_GRAD, (mod)); \
		z3_event(bw, &nb, Z3_POST, (mod));   \
	} while (0)
	z3_event(bw, &nb, Z3_PRE, root);
	Z3_LEAF_BACKWARD(head);
	z3_event(bw, &nb, Z3_PRE, model);
	Z3_LEAF_BACKWARD(norm);
	for (int l = L - 1; l >= 0; l--) {
		int *m = lm[l];
		z3_event(bw, &nb, Z3_PRE, m[M_LAYER]);
		z3_event(bw, &nb, Z3_PRE, m[M_MLP]);
		Z3_LEAF_BACKWARD(m[M_DOWN]);
		Z3_LEAF_BACKWARD(m[M_UP]);
		Z3_LEAF_BACKWARD(m[M_ACT]);
		Z3_LEAF_BACKWARD(m[M_GATE]);
		z3_event(bw, &nb, Z3_POST, m[M_MLP]);
		Z3_LEAF_BACKWARD(m[M_POST_NORM]);
		z3_event(bw, &nb, Z3_PRE, m[M_ATTN]);
		Z3_LEAF_BACKWARD(m[M_O]);
		Z3_LEAF_BACKWARD(m[M_V]);
		Z3_LEAF_BACKWARD(m[M_K]);
		Z3_LEAF_BACKWARD(m[M_Q]);
		z3_event(bw, &nb, Z3_POST, m[M_ATTN]);
		Z3_LEAF_BACKWARD(m[M_IN_NORM]);
		z3_event(bw, &nb, Z3_POST, m[M_LAYER]);
	}
#undef Z3_LEAF_BACKWARD
	z3_event(bw, &nb, Z3_PRE, embed);
	z3_event(bw, &nb, Z3_GRAD, embed);
	z->nfwd = nf;
	z->nbwd = nb;
	free(lm);
	free(lp);
}

static void z3_free(struct sj_zero3 *z)
{
	free(z->params);
	free(z->modules);
	free(z->fwd);
	free(z->bwd);
	free(z->trace);
	free(z->param_order);
	free(z->bucket);
	free(z->scratch);
}

/* CUDAQuantizer.quantize's group count for a tensor of numel elements
 * (partition_parameters.py): one fp32 scale per group, groups of at most
 * 16k elements, numel a multiple of 8 x groups (DeepSpeed asserts it). */
static size_t z3_quant_groups(size_t numel)
{
	const size_t target = 8000;
	size_t groups = sj_ceil_div(numel, target);
	while (groups < numel && numel % (8 * groups))
		groups++;
	while (numel % (16 * groups) == 0 && numel / groups > target)
		groups *= 2;
	if (numel % (8 * groups) || numel / groups >= 16000 || numel <= groups)
		sj_die("--qwz: a partition of %zu elements cannot be quantized (DeepSpeed asserts a multiple of 8 "
		       "per group): choose --nranks and --hpz that divide the model's sizes",
		       numel);
	return groups;
}

/* Elements of p this rank sends: its primary partition ceil(numel / N)
 * (ds_tensor), or, from the secondary partition, the world-aligned tensor
 * split over the hpZ group (ds_secondary_tensor, _partition_param_sec). */
static size_t z3_partition(const struct sj_zero3 *z, int p, int secondary)
{
	size_t N = (size_t)z->comm->nranks, part = sj_ceil_div(z->params[p].numel, N);
	return secondary ? part * N / (size_t)z->hpz->nranks : part;
}

/* all_gather_coalesced of parameters of one partition (sorted by ds_id) on
 * comm. Flat: one ncclAllGather of the concatenated partitions (one
 * parameter: its own, _all_gather_sequential); quantized (qwZ), the int8
 * values and then their fp32 scales, two ungrouped AllGathers; coalesced,
 * one ncclAllGather per parameter inside one group (PyTorch's coalescing
 * manager). Only the world's value gathers carry kind: the hpZ group's and
 * the scales are counted here. */
static void z3_gather_on(struct sj_zero3 *z, struct sj_comm *comm, const int *list, int n, enum sj_kind kind)
{
	int secondary = comm == z->hpz;
	enum sj_kind k = secondary ? KIND_OTHER : kind;
	size_t count = 0;
	for (int i = 0; i < n; i++)
		count += z3_partition(z, list[i], secondary);
	if (z->job->opt->gather_coalesced) {
		sj_group_start(z->job);
		for (int i = 0; i < n; i++)
			sj_allgather(z->job, comm, z3_partition(z, list[i], secondary), ncclBfloat16, k);
		sj_group_end(z->job);
		z->cur.calls += secondary ? n : 0;
	} else if (z->job->opt->qwz) {
		sj_allgather(z->job, comm, count, ncclInt8, k);
		sj_allgather(z->job, comm, z3_quant_groups(count), ncclFloat32, KIND_OTHER);
		z->cur.calls += secondary ? 2 : 1;
		z->cur.quantized++;
	} else {
		sj_allgather(z->job, comm, count, ncclBfloat16, k);
		z->cur.calls += secondary;
	}
	z->cur.hpz_fetches += secondary;
	z->cur.hpz_backward += secondary && kind == KIND_PARAM_BACKWARD;
}

/* The coordinator's __all_gather_params_: with hpZ, the parameters that
 * hold a secondary partition are gathered from it on the intra-node group,
 * the others from their primary partition on the world, in that order. */
static void z3_gather(struct sj_zero3 *z, const int *list, int n, enum sj_kind kind)
{
	if (n == 0)
		return;
	if (z->hpz) {
		int *from_secondary = malloc((size_t)n * sizeof *from_secondary), ns = 0;
		int *from_primary = malloc((size_t)n * sizeof *from_primary), np = 0;
		if (!from_secondary || !from_primary)
			sj_die("out of memory");
		for (int i = 0; i < n; i++) {
			if (z->params[list[i]].secondary)
				from_secondary[ns++] = list[i];
			else
				from_primary[np++] = list[i];
		}
		if (ns)
			z3_gather_on(z, z->hpz, from_secondary, ns, kind);
		if (np)
			z3_gather_on(z, z->comm, from_primary, np, kind);
		free(from_secondary);
		free(from_primary);
	} else {
		z3_gather_on(z, z->comm, list, n, kind);
	}
	for (int i = 0; i < n; i++) {
		z->params[list[i]].status = Z3_AVAILABLE;
		z->n_available += (long)z->params[list[i]].numel;
	}
}

/* Partitioning a gathered parameter: with hpZ, _partition_param_sec copies
 * the gathered tensor's slice into the secondary partition, a local copy
 * (no collective). */
static void z3_partition_param(struct sj_zero3 *z, struct z3_param *q)
{
	q->status = Z3_NOT_AVAILABLE;
	z->n_available -= (long)q->numel;
	if (z->hpz)
		q->secondary = 1;
}

/* PartitionedParameterCoordinator.fetch_sub_module */
static void z3_fetch(struct sj_zero3 *z, int module, int forward)
{
	const struct sj_options *o = z->job->opt;
	enum sj_kind kind = forward ? KIND_PARAM_FORWARD : KIND_PARAM_BACKWARD;
	if (z->mode == Z3_RECORD) {
		if (z->ntrace == z->trace_cap)
			sj_die("module trace overflow");
		z->trace[z->ntrace++] = module;
	}
	int p = z->modules[module].param;
	/* 1. the parameters the module needs now */
	if (p >= 0 && z->params[p].status == Z3_NOT_AVAILABLE)
		z3_gather(z, &p, 1, kind);
	if (p >= 0)
		z->params[p].active = 1;
	/* 2. prefetch, only with a complete trace */
	if (z->mode == Z3_COMPLETE) {
		/* pop the module's own parameters off the fetch queue */
		if (p >= 0 && z->params[p].most_recent_fetched_for < z->step_id && z->queue < z->nparam_order) {
			struct z3_trace_entry *e = &z->param_order[z->queue++];
			z->params[e->param].most_recent_fetched_for = e->step_id;
		}
		if (o->bucket > 0) {
			long room = o->max_live - z->n_available;
			long limit = room < o->bucket ? room : o->bucket;
			long numel = 0;
			int n = 0;
			while (z->queue < z->nparam_order && numel < limit) {
				struct z3_trace_entry *e = &z->param_order[z->queue++];
				struct z3_param *q = &z->params[e->param];
				int dup = 0;
				for (int i = 0; i < n; i++)
					dup |= z->scratch[i] == e->param;
				int take = q->status == Z3_NOT_AVAILABLE && !dup;
				if (e->step_id > q->most_recent_fetched_for)
					q->most_recent_fetched_for = e->step_id;
				if (take) {
					z->scratch[n++] = e->param;
					numel += (long)q->numel;
				}
			}
			/* a set, handed to all_gather_coalesced, which sorts by ds_id */
			for (int a = 1; a < n; a++)
				for (int b = a; b > 0 && z->scratch[b - 1] > z->scratch[b]; b--) {
					int tmp = z->scratch[b];
					z->scratch[b] = z->scratch[b - 1];
					z->scratch[b - 1] = tmp;
				}
			z3_gather(z, z->scratch, n, kind);
		}
	}
	z->step_id++;
}

/* release_sub_module with __params_to_release: nothing persistent, nothing
 * prefetched for a later use, nothing used again within
 * stage3_max_reuse_distance elements of the trace. Without a complete
 * trace, everything. */
static void z3_release(struct sj_zero3 *z, int module)
{
	int p = z->modules[module].param;
	if (p < 0)
		return;
	struct z3_param *q = &z->params[p];
	q->active = 0;
	int release = 1;
	if (z->mode == Z3_COMPLETE) {
		release = !q->persist && q->most_recent_fetched_for <= z->step_id;
		long traversed = 0;
		for (int k = (int)z->step_id; k < z->ntrace && release; k++) {
			if (traversed >= z->job->opt->max_reuse)
				break;
			int r = z->modules[z->trace[k]].param;
			if (r < 0)
				continue;
			if (r == p)
				release = 0;
			traversed += (long)z->params[r].numel;
		}
	}
	if (release && q->status == Z3_AVAILABLE && !q->active)
		z3_partition_param(z, q);
}

/* dist.all_to_all_single of total elements, equal splits: PyTorch's
 * all2all_single_equal_split, one group of a Send and a Recv to every peer,
 * itself included (ncclAllToAll where NCCL has it). */
static void z3_all_to_all(struct sj_zero3 *z, struct sj_comm *c, size_t total, ncclDataType_t dt)
{
	size_t per_peer = total / (size_t)c->nranks;
	if (total % (size_t)c->nranks)
		sj_die("--qgz: %zu elements do not split over %d ranks", total, c->nranks);
	sj_group_start(z->job);
	for (int r = 0; r < c->nranks && per_peer; r++) {
		sj_send(z->job, c, per_peer, dt, r);
		sj_recv(z->job, c, per_peer, dt, r);
	}
	sj_group_end(z->job);
}

/* qgZ (coalesced_collectives.py all_to_all_quant_reduce), tensor by
 * tensor of the bucket: a vector, or a tensor that 2 x world does not
 * divide, is reduce-scattered alone on the world; any other is quantized
 * to int4 (two values a byte) with one fp32 scale per group of
 * max(rows, cols, world) groups, exchanged inside the node (values, then
 * scales), reduced and requantized (groups / ranks per node), then
 * exchanged across nodes. */
static void z3_quant_reduce(struct sj_zero3 *z)
{
	size_t N = (size_t)z->comm->nranks, local = (size_t)z->a2a_local->nranks;
	for (int i = 0; i < z->nbucket; i++) {
		const struct z3_param *q = &z->params[z->bucket[i]];
		if (!q->cols || q->numel % (2 * N)) {
			sj_reduce_scatter(z->job, z->comm, sj_ceil_div(q->numel, N), ncclBfloat16, KIND_GRAD);
			continue;
		}
		size_t groups = q->rows > q->cols ? q->rows : q->cols;
		groups = groups > N ? groups : N;
		z3_all_to_all(z, z->a2a_local, q->numel / 2, ncclInt8);
		z3_all_to_all(z, z->a2a_local, groups, ncclFloat32);
		z3_all_to_all(z, z->a2a_global, q->numel / 2 / local, ncclInt8);
		z3_all_to_all(z, z->a2a_global, groups / local, ncclFloat32);
		z->cur.qgz_tensors++;
	}
}

/* reduce_scatter_coalesced of the IPG bucket: one ncclReduceScatter of the
 * interleaved padded partitions (qgZ across nodes: z3_quant_reduce). */
static void z3_flush_bucket(struct sj_zero3 *z)
{
	if (!z->nbucket)
		return;
	if (z->a2a_local) {
		z3_quant_reduce(z);
		z->nbucket = 0;
		z->bucket_elements = 0;
		return;
	}
	size_t N = (size_t)z->comm->nranks, count = 0;
	for (int i = 0; i < z->nbucket; i++)
		count += sj_ceil_div(z->params[z->bucket[i]].numel, N);
	sj_reduce_scatter(z->job, z->comm, count, ncclBfloat16, KIND_GRAD);
	z->nbucket = 0;
	z->bucket_elements = 0;
}

/* reduce_independent_p_g_buckets_and_remove_grads */
static void z3_gradient(struct sj_zero3 *z, int p)
{
	long numel = (long)z->params[p].numel;
	if (z->bucket_elements + numel > z->job->opt->reduce_bucket && z->bucket_elements > 0)
		z3_flush_bucket(z);
	z->bucket[z->nbucket++] = p;
	z->bucket_elements += numel;
}

/* reset_step, from the root's forward pre-hook: without a complete trace,
 * assert_ints_same_as_other_ranks broadcasts the recorded module ids (and,
 * once recorded, the parameter ids and their step ids) from rank 0. */
static void z3_reset_step(struct sj_zero3 *z)
{
	if (z->mode != Z3_COMPLETE) {
		sj_broadcast(z->job, z->comm, (size_t)z->ntrace, ncclInt64, 0);
		if (z->mode == Z3_RECORD) {
			z->nparam_order = 0;
			for (int k = 0; k < z->ntrace; k++) {
				int p = z->modules[z->trace[k]].param;
				if (p < 0)
					continue;
				z->param_order[z->nparam_order].param = p;
				z->param_order[z->nparam_order].step_id = k;
				z->nparam_order++;
			}
			sj_broadcast(z->job, z->comm, (size_t)z->nparam_order, ncclInt64, 0);
			sj_broadcast(z->job, z->comm, (size_t)z->nparam_order, ncclInt64, 0);
			z->mode = Z3_COMPLETE;
		} else {
			z->mode = Z3_RECORD;
		}
	}
	z->queue = 0;
	for (int i = 0; i < z->nparams; i++)
		z->params[i].most_recent_fetched_for = INT64_MIN / 2;
	z->step_id = 0;
	z->n_available = 0;
}

static void z3_run_events(struct sj_zero3 *z, const struct z3_event *ev, int n, int forward)
{
	for (int i = 0; i < n; i++) {
		int m = ev[i].module;
		switch (ev[i].kind) {
		case Z3_PRE:
			z3_fetch(z, m, forward);
			if (z->modules[m].param >= 0)
				sj_compute(z->job, forward ? 1 : 0);
			break;
		case Z3_GRAD:
			sj_compute(z->job, 2);
			z3_gradient(z, z->modules[m].param);
			break;
		case Z3_POST:
			z3_release(z, m);
			break;
		}
	}
}

/* ZeRO++'s keys of the truth (stream_job.md, zero3 with --qwz / --hpz). */
static void z3_zeropp_truth(const struct sj_zero3 *z, struct sj_truth *t)
{
	const struct sj_tally *l = &z->job->last;
	sj_truth_extra(t, "\"hpz_partition_size\": %d", z->hpz ? z->hpz->nranks : 1);
	sj_truth_extra(t, "\"hpz_fetches\": %d", z->last.hpz_fetches);
	sj_truth_extra(t, "\"quantized_fetches\": %d", z->last.quantized);
	if (z->job->opt->qgz)
		sj_truth_extra(t, "\"qgz_tensors\": %d", z->last.qgz_tensors);
	sj_note(t,
		"ZeRO++: %d fetch events on the world (%d forward, %d backward, the rest persistent) and %d on the "
		"%d-rank hpZ group (%d backward)%s",
		l->param_gathers, l->forward_gathers, l->backward_gathers, z->last.hpz_fetches,
		z->hpz ? z->hpz->nranks : 0, z->last.hpz_backward,
		z->job->opt->qwz ? "; a quantized fetch is two AllGathers, int8 values then fp32 scales, one fetch"
				 : "");
	if (z->a2a_local)
		sj_note(t,
			"qgZ: %d gradient tensors reduced by 4 all-to-alls each (values and scales inside the node of %d "
			"ranks, then across the nodes), the %d others (vectors) by a ReduceScatter each on the world",
			z->last.qgz_tensors, z->a2a_local->nranks, l->grad_reduce_scatters);
}

void run_zero3(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct sj_zero3 z = {.job = j, .comm = world, .mode = Z3_INVALID};
	if (o->hpz) /* groups._create_zero_param_parallel_group: consecutive ranks */
		z.hpz = sj_comm_split(j, world, j->rank / o->hpz, ROLE_FSDP_REGATHER, "hpz");
	if (o->qgz && o->hpz < o->nranks) {
		/* groups._get_local_all_to_all_group, nodes of --hpz ranks: local_i
		 * (a node), global_i (rank i of every node); one node: no groups,
		 * the buckets are reduce-scattered as without qgZ. */
		z.a2a_local = sj_comm_split(j, world, j->rank / o->hpz, ROLE_ALL_TO_ALL, "a2a-local");
		z.a2a_global = sj_comm_split(j, world, j->rank % o->hpz, ROLE_ALL_TO_ALL, "a2a-global");
	}
	z3_build(&z);
	for (int i = 0; i < z.nparams; i++) /* zero.Init partitions both copies of every parameter */
		z.params[i].secondary = z.hpz != NULL;
	for (int i = 0; i < z.nparams; i++)
		t->params += z.params[i].numel;
	j->phase = "init";
	if (o->init_broadcast) /* zero.Init's _zero_init_param: each parameter from rank 0 */
		for (int i = 0; i < z.nparams; i++)
			sj_broadcast(j, world, z.params[i].numel, ncclBfloat16, 0);
	int persistent = 0;
	for (int i = 0; i < z.nparams; i++)
		persistent += z.params[i].persist;
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		memset(&z.cur, 0, sizeof z.cur);
		z3_reset_step(&z);
		z3_run_events(&z, z.fwd, z.nfwd, 1);
		j->phase = "backward";
		z3_run_events(&z, z.bwd, z.nbwd, 0);
		z3_flush_bucket(&z); /* independent_gradient_partition_epilogue */
		j->phase = "optimizer";
		/* step(): _partition_all_parameters releases everything; bf16 skips
		 * the overflow check; get_grad_norm_direct all-reduces the squared
		 * norm (fp64, one element) on the dp group. */
		for (int i = 0; i < z.nparams; i++)
			if (z.params[i].status == Z3_AVAILABLE)
				z3_partition_param(&z, &z.params[i]);
		sj_allreduce(j, world, 1, ncclFloat64, ncclSum, 1);
		sj_compute(j, 1);
		/* _post_step: persistent_parameters[0].all_gather(...): one
		 * parameter alone, else _allgather_params_coalesced, one
		 * all_gather_into_tensor per parameter, not grouped (grouped with
		 * --gather coalesced). */
		if (persistent) {
			int *list = z.scratch, n = 0;
			for (int i = 0; i < z.nparams; i++)
				if (z.params[i].persist)
					list[n++] = i;
			if (o->gather_coalesced)
				sj_group_start(j);
			for (int i = 0; i < n; i++)
				sj_allgather(j, world, sj_ceil_div(z.params[list[i]].numel, (size_t)world->nranks),
					     ncclBfloat16, KIND_PARAM_STEP);
			if (o->gather_coalesced)
				sj_group_end(j);
			for (int i = 0; i < n; i++)
				z.params[list[i]].status = Z3_AVAILABLE;
		}
		/* _post_step: invalidate_secondary_tensor, after the persistent
		 * gather (which reads the primary partition): the next forward
		 * fetches from the world. */
		for (int i = 0; i < z.nparams; i++)
			z.params[i].secondary = 0;
		sj_step_end(j);
		z.last = z.cur;
	}
	const struct sj_tally *l = &j->last;
	t->bucketed = 1;
	t->fsdp_allgathers = l->param_gathers;
	t->fetches = l->param_gathers + z.last.hpz_fetches;
	t->calls = l->param_gather_calls + z.last.calls;
	t->reduce_scatters = l->grad_reduce_scatters;
	t->microbatches = 1;
	t->microbatches_told = o->nvtx || l->step_marks > 0;
	sj_note(t,
		"steady step (the last): %d forward and %d backward fetch events; %d persistent parameters "
		"re-gathered after each optimizer step (%s); steps 0 and later differ: step 0 records the module "
		"trace and fetches on demand, step 1 starts with 3 trace Broadcasts",
		l->forward_gathers, l->backward_gathers, persistent,
		o->gather_coalesced ? "one group" : "one ungrouped AllGather each");
	if (o->hpz || o->qwz || o->qgz)
		z3_zeropp_truth(&z, t);
	z3_free(&z);
}

