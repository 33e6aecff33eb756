/* fsdp_ref/zero3.c: DeepSpeed ZeRO-3's parameter lifecycle (see zero3.h; the
 * rules are in docs/fsdp_ref.md, "--style zero3").
 *
 * Each tensor t of numel n is padded to N * part (part = ceil(n / N)); this
 * rank stores elements [r part, (r + 1) part) of every tensor, one tensor
 * after another (its offset), in five buffers: the parameter dtype, the fp32
 * master, the fp32 gradient partition and Adam's m and v, so that Adam is one
 * call over all of them. A gathered tensor is one buffer of N * part in the
 * parameter dtype: the N partitions in rank order, which is the tensor
 * followed by its padding.
 *
 * The hooks (model_params) act on the tensors used next: a need is the hook
 * right before a use (for tensors with no module of their own, the norms and
 * the root's, the hook before them), a release the first hook after it.
 * Needs count uses; with a recorded trace they are checked against it, so
 * the fetch and release decisions, which look ahead in the trace, see what
 * will really happen.
 *
 * Every fetch is waited for by the hook that issued it, outside every NVTX
 * leaf range (the waiting a profiler sees); the hooks' own work runs inside
 * leaf ranges "zero3.*". No module ranges: ZeRO-3 has no units. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_ref/markers.h"
#include "fsdp_ref/zero3.h"

enum z3_state { Z3_ABSENT = 0, Z3_INFLIGHT, Z3_AVAILABLE };

struct z3_fetch;

struct z3_tensor {
	size_t numel;
	size_t part;	/* ceil(numel / N): every rank's partition */
	size_t offset;	/* of its partition in this rank's partition buffers */
	int persistent; /* numel <= --persistence-threshold */
	enum z3_state state;
	void *full;		/* [N part] param dtype (MEM_GATHERED) while in flight or available */
	struct z3_fetch *fetch; /* the fetch it arrives with, while in flight */
	float *grad_full;	/* [numel] fp32, from its backward need to its gradient's bucket copy
				   (MEM_GRADIENT) */
	size_t bucket_offset;	/* of its gradient in the reduce bucket being filled */
};

/* One fetch event: a need's fetch, or one post-step gather. */
struct z3_fetch {
	struct comm_request req;
	struct comm_gather *calls; /* [ntensors] the coalesced form's AllGathers */
	struct fsdp_event *ready, *done;
	int *ids; /* [ntensors] its tensors in tensor-id order (DeepSpeed sorts by ds_id) */
	int nids;
	size_t part_sum; /* S: this rank's elements in the fetch */
	void *flat;	 /* the flat form of 2+ tensors: the [N][S] receive buffer (MEM_GATHERED) */
	int pending;	 /* submitted, not yet waited for */
};

/* One reduce bucket's ReduceScatter. */
struct z3_reduce {
	struct comm_request req;
	struct fsdp_event *ready, *done;
	int *ids; /* [ntensors] its tensors in tensor-id order */
	int nids;
	size_t part_sum; /* S */
	void *send;	 /* [N][S] reduce dtype (MEM_GRADIENT); this rank's S are the in-place output */
	size_t send_bytes;
	int pending; /* submitted, not yet added into the gradient partitions */
};

/* The zero3 keys of one step's log line. */
struct z3_counts {
	int optimizer_allgathers, calls;
	uint64_t gathered, forward, backward; /* elements */
	int fetches;
	uint64_t *fetch_elements; /* [cap] */
	size_t cap;
};

enum z3_phase { Z3_FORWARD = 0, Z3_BACKWARD, Z3_OPTIMIZER };

struct zero3_runtime {
	const struct fsdp_backend *be;
	struct mem_ledger *mem;
	struct comm_thread *ct;
	ncclComm_t world;
	struct zero3_config cfg;
	struct model_params params;
	size_t pbytes, rbytes; /* bytes per element: param dtype, reduce dtype */
	int layers, ntensors;
	struct z3_tensor *t;
	size_t total_part; /* T: this rank's elements, all partitions */
	size_t largest;	   /* elements of the largest tensor */
	int persistent_params;
	uint64_t persistent_elements;
	/* this rank's partitions (MEM_PERSISTENT), [T] each */
	void *param; /* param dtype; == master when that is fp32 */
	float *master, *grad, *adam_m, *adam_v;
	/* the trace: the tensor of each use of a training pass, forward then backward */
	int *trace; /* [2 ntensors] */
	int trace_len, fwd_len;
	int complete; /* the trace is recorded */
	/* the pass running */
	int recording; /* the first training pass: records, fetches each use alone, keeps nothing */
	int end;       /* trace positions the pass looks at: the trace, its forward part, 0 (no trace) */
	int pos;       /* uses so far (the trace position of the next use) */
	enum z3_phase phase;
	uint64_t live; /* elements of tensors in flight or available */
	/* the reduce bucket being filled (DeepSpeed's ipg bucket): full fp32 gradients, one after
	 * another */
	float *ipg;
	size_t ipg_cap, ipg_elems;
	int *ipg_ids; /* [ntensors] */
	int ipg_n;
	/* each record allocated on its own: a queued request must not move */
	struct z3_fetch **fetches;
	int nfetches;
	struct z3_reduce **reduces;
	int nreduces;
	struct fsdp_step_stats stats;
	struct z3_counts cur, last; /* the step running; the last training step (zero3_post_step) */
	struct comm_waits waits;    /* this step's fetch waits */
};

static ncclDataType_t nccl_dtype(enum fsdp_dtype t)
{
	return t == FSDP_DTYPE_BF16 ? ncclBfloat16 : ncclFloat32;
}

static size_t full_bytes(const struct zero3_runtime *z, const struct z3_tensor *t)
{
	return t->part * (size_t)z->cfg.world_size * z->pbytes;
}

static char *partition(const struct zero3_runtime *z, const struct z3_tensor *t)
{
	return (char *)z->param + t->offset * z->pbytes;
}

/* Insert id into ids[0 .. *n) keeping tensor-id order. */
static void ids_insert(int *ids, int *n, int id)
{
	int k = (*n)++;
	for (; k > 0 && ids[k - 1] > id; k--)
		ids[k] = ids[k - 1];
	ids[k] = id;
}

/* ---- records -------------------------------------------------------------- */

static void fetch_record_free(struct zero3_runtime *z, struct z3_fetch *f)
{
	if (!f)
		return;
	if (f->ready)
		z->be->event_free(f->ready);
	if (f->done)
		z->be->event_free(f->done);
	free(f->calls);
	free(f->ids);
	free(f);
}

/* A fetch record not in use; NULL on out-of-memory. */
static struct z3_fetch *fetch_record(struct zero3_runtime *z)
{
	for (int i = 0; i < z->nfetches; i++)
		if (!z->fetches[i]->pending)
			return z->fetches[i];
	struct z3_fetch **grown = realloc(z->fetches, (size_t)(z->nfetches + 1) * sizeof *grown);
	if (!grown)
		return NULL;
	z->fetches = grown;
	struct z3_fetch *f = calloc(1, sizeof *f);
	if (f) {
		f->calls = calloc((size_t)z->ntensors, sizeof *f->calls);
		f->ids = calloc((size_t)z->ntensors, sizeof *f->ids);
		f->ready = z->be->event_new();
		f->done = z->be->event_new();
	}
	if (!f || !f->calls || !f->ids || !f->ready || !f->done) {
		fetch_record_free(z, f);
		return NULL;
	}
	return z->fetches[z->nfetches++] = f;
}

static void reduce_record_free(struct zero3_runtime *z, struct z3_reduce *b)
{
	if (!b)
		return;
	if (b->ready)
		z->be->event_free(b->ready);
	if (b->done)
		z->be->event_free(b->done);
	free(b->ids);
	free(b);
}

/* A reduce record not in use; NULL on out-of-memory. */
static struct z3_reduce *reduce_record(struct zero3_runtime *z)
{
	for (int i = 0; i < z->nreduces; i++)
		if (!z->reduces[i]->pending)
			return z->reduces[i];
	struct z3_reduce **grown = realloc(z->reduces, (size_t)(z->nreduces + 1) * sizeof *grown);
	if (!grown)
		return NULL;
	z->reduces = grown;
	struct z3_reduce *b = calloc(1, sizeof *b);
	if (b) {
		b->ids = calloc((size_t)z->ntensors, sizeof *b->ids);
		b->ready = z->be->event_new();
		b->done = z->be->event_new();
	}
	if (!b || !b->ids || !b->ready || !b->done) {
		reduce_record_free(z, b);
		return NULL;
	}
	return z->reduces[z->nreduces++] = b;
}

/* ---- fetches ------------------------------------------------------------- */

static void fetch_add(struct zero3_runtime *z, struct z3_fetch *f, int id)
{
	z->t[id].state = Z3_INFLIGHT;
	z->t[id].fetch = f;
	ids_insert(f->ids, &f->nids, id);
}

/* Count fetch f, of `elems` elements, issued in the current phase. */
static int fetch_count(struct zero3_runtime *z, const struct z3_fetch *f, uint64_t elems)
{
	struct z3_counts *c = &z->cur;
	if (c->fetches == (int)c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 256;
		uint64_t *v = realloc(c->fetch_elements, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		c->fetch_elements = v;
		c->cap = cap;
	}
	c->fetch_elements[c->fetches++] = elems;
	c->gathered += elems;
	c->calls += f->req.op == COMM_ALLGATHER_COALESCED ? f->nids : 1;
	if (z->phase == Z3_FORWARD) {
		z->stats.forward_allgathers++;
		c->forward += elems;
	} else if (z->phase == Z3_BACKWARD) {
		z->stats.backward_allgathers++;
		c->backward += elems;
	} else {
		c->optimizer_allgathers++;
	}
	if (f->nids > 1)
		z->stats.prefetched_allgathers++;
	z->stats.gathered_bytes += (uint64_t)z->cfg.world_size * f->part_sum * z->pbytes;
	return 0;
}

/* Issue fetch f, its tensors listed and marked in flight: one flat AllGather
 * (the partitions packed side by side, gathered in place), one AllGather per
 * tensor in one group (coalesced), or, for a single tensor in the flat form
 * and for every post-step gather (`single`), a plain AllGather into the
 * tensor's buffer. */
static int fetch_submit(struct zero3_runtime *z, struct z3_fetch *f, int single)
{
	const struct fsdp_backend *be = z->be;
	size_t n = (size_t)z->cfg.world_size, pb = z->pbytes;
	uint64_t elems = 0;
	f->part_sum = 0;
	for (int k = 0; k < f->nids; k++) {
		elems += z->t[f->ids[k]].numel;
		f->part_sum += z->t[f->ids[k]].part;
	}
	struct comm_request *r = &f->req;
	*r = (struct comm_request){.op = COMM_ALLGATHER,
				   .comm = z->world,
				   .dtype = nccl_dtype(z->cfg.param_dtype),
				   .ready = f->ready,
				   .done = f->done};
	int rc = 0;
	if (!z->cfg.coalesced && f->nids > 1 && !single) {
		f->flat = mem_alloc(z->mem, MEM_GATHERED, n * f->part_sum * pb);
		if (!f->flat)
			return -ENOMEM;
		char *mine = (char *)f->flat + (size_t)z->cfg.rank * f->part_sum * pb;
		size_t off = 0;
		for (int k = 0; rc == 0 && k < f->nids; k++) {
			const struct z3_tensor *t = &z->t[f->ids[k]];
			rc = be->memcpy_d2d(mine + off * pb, partition(z, t), t->part * pb);
			off += t->part;
		}
		r->send = mine;
		r->recv = f->flat;
		r->count = f->part_sum;
	} else {
		for (int k = 0; k < f->nids; k++) {
			struct z3_tensor *t = &z->t[f->ids[k]];
			if (!t->full && !(t->full = mem_alloc(z->mem, MEM_GATHERED, full_bytes(z, t))))
				return -ENOMEM;
			f->calls[k] = (struct comm_gather){partition(z, t), t->full, t->part};
		}
		if (z->cfg.coalesced && !single) {
			r->op = COMM_ALLGATHER_COALESCED;
			r->group = f->calls;
			r->group_size = f->nids;
		} else {
			r->send = f->calls[0].send;
			r->recv = f->calls[0].recv;
			r->count = f->calls[0].count;
		}
	}
	if (rc == 0)
		rc = be->event_record_compute(f->ready);
	if (rc == 0)
		rc = comm_submit(z->ct, r);
	if (rc < 0)
		return rc;
	f->pending = 1;
	z->live += elems;
	return fetch_count(z, f, elems);
}

/* Block until fetch f has landed (the exposed part of its time), unpack the
 * flat form into each tensor's buffer, mark its tensors available. */
static int fetch_wait(struct zero3_runtime *z, struct z3_fetch *f)
{
	const struct fsdp_backend *be = z->be;
	int64_t waited;
	int rc = comm_wait_compute(z->ct, &f->req, f->done, &waited);
	comm_waits_add(&z->waits, waited);
	size_t n = (size_t)z->cfg.world_size, pb = z->pbytes;
	if (f->flat) {
		/* tensor k's partition from rank q sits at q S + (its offset in the fetch) */
		markers_push("zero3.unpack");
		size_t off = 0;
		for (int k = 0; rc == 0 && k < f->nids; k++) {
			struct z3_tensor *t = &z->t[f->ids[k]];
			if (!(t->full = mem_alloc(z->mem, MEM_GATHERED, full_bytes(z, t))))
				rc = -ENOMEM;
			for (size_t q = 0; rc == 0 && q < n; q++)
				rc = be->memcpy_d2d((char *)t->full + q * t->part * pb,
						    (char *)f->flat + (q * f->part_sum + off) * pb, t->part * pb);
			off += t->part;
		}
		mem_free(z->mem, MEM_GATHERED, f->flat, n * f->part_sum * pb);
		f->flat = NULL;
		markers_pop();
	}
	for (int k = 0; k < f->nids; k++) {
		z->t[f->ids[k]].state = Z3_AVAILABLE;
		z->t[f->ids[k]].fetch = NULL;
	}
	f->pending = 0;
	return rc;
}

/* Fetch tensor id, and with a trace the next absent tensors of the pass's
 * trace while the fetch stays within --bucket and the live elements within
 * --max-live (tensors available or in flight are passed over; the first that
 * does not fit ends the fetch). */
static int fetch_issue(struct zero3_runtime *z, int id)
{
	struct z3_fetch *f = fetch_record(z);
	if (!f)
		return -ENOMEM;
	f->nids = 0;
	fetch_add(z, f, id);
	uint64_t elems = z->t[id].numel;
	for (int j = z->pos; j < z->end; j++) {
		const struct z3_tensor *u = &z->t[z->trace[j]];
		if (u->state != Z3_ABSENT)
			continue;
		if (elems + u->numel > z->cfg.bucket || z->live + elems + u->numel > z->cfg.max_live)
			break;
		fetch_add(z, f, z->trace[j]);
		elems += u->numel;
	}
	return fetch_submit(z, f, 0);
}

/* ---- uses -------------------------------------------------------------------- */

/* The hook before a use of tensor id: record or check the trace, fetch the
 * tensor unless available, wait for it; in backward, its gradient buffer. */
static int need(struct zero3_runtime *z, int id)
{
	if (z->recording) {
		if (z->trace_len == 2 * z->ntensors)
			return -EPROTO;
		z->trace[z->trace_len++] = id;
	} else if (z->end && (z->pos >= z->end || z->trace[z->pos] != id)) {
		return -EPROTO; /* the model did not run the recorded order */
	}
	z->pos++;
	struct z3_tensor *t = &z->t[id];
	int rc = 0;
	if (t->state == Z3_ABSENT) {
		markers_push("zero3.fetch");
		rc = fetch_issue(z, id);
		markers_pop();
	}
	if (rc == 0 && t->state == Z3_INFLIGHT)
		rc = fetch_wait(z, t->fetch); /* in no leaf range: the waiting a profiler sees */
	if (rc == 0 && z->phase == Z3_BACKWARD) {
		markers_push("zero3.grad_alloc");
		if (!(t->grad_full = mem_alloc(z->mem, MEM_GRADIENT, t->numel * sizeof(float))))
			rc = -ENOMEM;
		markers_pop();
	}
	return rc;
}

static void tensor_free(struct zero3_runtime *z, struct z3_tensor *t)
{
	mem_free(z->mem, MEM_GATHERED, t->full, full_bytes(z, t));
	t->full = NULL;
	t->state = Z3_ABSENT;
	z->live -= t->numel;
}

/* With a trace: tensor id is used again before --max-reuse-distance elements
 * of uses (every use counts, whether fetched or not) have passed. */
static int reused_soon(const struct zero3_runtime *z, int id)
{
	uint64_t seen = 0;
	for (int j = z->pos; j < z->end && seen < z->cfg.max_reuse_distance; j++) {
		if (z->trace[j] == id)
			return 1;
		seen += z->t[z->trace[j]].numel;
	}
	return 0;
}

/* The first hook after a use of tensor id: free it, unless a trace guides the
 * pass and it is persistent or reused soon. */
static void release(struct zero3_runtime *z, int id)
{
	struct z3_tensor *t = &z->t[id];
	if (t->state != Z3_AVAILABLE || (z->end && (t->persistent || reused_soon(z, id))))
		return;
	markers_push("zero3.release");
	tensor_free(z, t);
	markers_pop();
}

/* ---- gradients ---------------------------------------------------------------- */

/* Add a completed ReduceScatter's output, this rank's partitions of the
 * bucket's tensors, into their gradient partitions (compute stream, after
 * the reduction). */
static int reduce_accumulate(struct zero3_runtime *z, const struct z3_reduce *b)
{
	const struct fsdp_backend *be = z->be;
	const char *recv = (const char *)b->send + (size_t)z->cfg.rank * b->part_sum * z->rbytes;
	const float *src = (const float *)recv;
	float *wide = NULL;
	if (z->cfg.reduce_dtype != FSDP_DTYPE_FP32) {
		if (!(wide = mem_alloc(z->mem, MEM_GRADIENT, b->part_sum * sizeof(float))))
			return -ENOMEM;
		be->cast(wide, FSDP_DTYPE_FP32, recv, z->cfg.reduce_dtype, b->part_sum);
		src = wide;
	}
	size_t off = 0;
	for (int k = 0; k < b->nids; k++) {
		const struct z3_tensor *t = &z->t[b->ids[k]];
		be->residual_add(z->grad + t->offset, src + off, t->part);
		off += t->part;
	}
	mem_free(z->mem, MEM_GRADIENT, wide, b->part_sum * sizeof(float));
	return 0;
}

/* Reap the buckets whose ReduceScatter has completed (wait: all of them). */
static int reduce_reap(struct zero3_runtime *z, int wait)
{
	const struct fsdp_backend *be = z->be;
	int rc = 0;
	for (int i = 0; i < z->nreduces; i++) {
		struct z3_reduce *b = z->reduces[i];
		if (!b->pending)
			continue;
		int r1 = 0, r2 = 0, r3 = 0;
		if (wait) {
			r1 = comm_wait(z->ct, &b->req);
			r2 = be->compute_wait_event(b->done); /* the additions read the output next */
			r3 = be->event_synchronize(b->done);  /* before the send buffer is freed */
		} else if (!comm_test(z->ct, &b->req) || be->event_query(b->done) != 1) {
			continue;
		} else {
			r1 = b->req.result;
			r2 = be->compute_wait_event(b->done);
		}
		int r4 = r1 || r2 || r3 ? 0 : reduce_accumulate(z, b);
		if (!rc)
			rc = r1 ? r1 : r2 ? r2 : r3 ? r3 : r4;
		mem_free(z->mem, MEM_GRADIENT, b->send, b->send_bytes);
		b->send = NULL;
		b->pending = 0;
	}
	return rc;
}

/* One ReduceScatter of the bucket being filled, laid out as DeepSpeed's
 * reduce_scatter_coalesced: for each rank q, partition q of every tensor of
 * the bucket (tensor-id order), zero-padded, side by side; reduced in place,
 * so rank r's output is its S elements of the send buffer. */
static int reduce_flush(struct zero3_runtime *z)
{
	if (!z->ipg_n)
		return 0;
	const struct fsdp_backend *be = z->be;
	struct z3_reduce *b = reduce_record(z);
	if (!b)
		return -ENOMEM;
	size_t n = (size_t)z->cfg.world_size, rb = z->rbytes;
	b->nids = 0;
	b->part_sum = 0;
	for (int k = 0; k < z->ipg_n; k++) {
		ids_insert(b->ids, &b->nids, z->ipg_ids[k]);
		b->part_sum += z->t[z->ipg_ids[k]].part;
	}
	size_t S = b->part_sum;
	b->send_bytes = n * S * rb;
	if (!(b->send = mem_alloc(z->mem, MEM_GRADIENT, b->send_bytes)))
		return -ENOMEM;
	int rc = be->memset_zero(b->send, b->send_bytes);
	size_t off = 0;
	for (int k = 0; rc == 0 && k < b->nids; k++) {
		const struct z3_tensor *t = &z->t[b->ids[k]];
		for (size_t q = 0; q < n; q++) {
			size_t lo = q * t->part, hi = lo + t->part < t->numel ? lo + t->part : t->numel;
			if (hi > lo)
				be->cast((char *)b->send + (q * S + off) * rb, z->cfg.reduce_dtype,
					 z->ipg + t->bucket_offset + lo, FSDP_DTYPE_FP32, hi - lo);
		}
		off += t->part;
	}
	z->ipg_n = 0;
	z->ipg_elems = 0;
	b->req = (struct comm_request){.op = COMM_REDUCE_SCATTER,
				       .comm = z->world,
				       .send = b->send,
				       .recv = (char *)b->send + (size_t)z->cfg.rank * S * rb,
				       .count = S,
				       .dtype = nccl_dtype(z->cfg.reduce_dtype),
				       .ready = b->ready,
				       .done = b->done};
	if (rc == 0)
		rc = be->event_record_compute(b->ready);
	if (rc == 0)
		rc = comm_submit(z->ct, &b->req);
	if (rc < 0) {
		mem_free(z->mem, MEM_GRADIENT, b->send, b->send_bytes);
		b->send = NULL;
		return rc;
	}
	b->pending = 1;
	z->stats.reduce_scatters++;
	z->stats.reduce_scattered_bytes += b->send_bytes;
	return reduce_reap(z, 0);
}

/* Tensor id's gradient is complete: copy it into the reduce bucket, after
 * flushing the bucket when it holds something and would pass
 * --reduce-bucket elements (DeepSpeed's rule: a larger tensor goes alone). */
static int grad_done(struct zero3_runtime *z, int id)
{
	struct z3_tensor *t = &z->t[id];
	int rc = 0;
	markers_push("zero3.reduce");
	if (z->ipg_n > 0 && z->ipg_elems + t->numel > z->cfg.reduce_bucket)
		rc = reduce_flush(z);
	if (rc == 0)
		rc = z->be->memcpy_d2d(z->ipg + z->ipg_elems, t->grad_full, t->numel * sizeof(float));
	if (rc == 0) {
		t->bucket_offset = z->ipg_elems;
		z->ipg_ids[z->ipg_n++] = id;
		z->ipg_elems += t->numel;
	}
	mem_free(z->mem, MEM_GRADIENT, t->grad_full, t->numel * sizeof(float));
	t->grad_full = NULL;
	markers_pop();
	return rc;
}

/* ---- the hooks (struct model_params) ------------------------------------------- */

#define TRY(call)                                                                                                      \
	do {                                                                                                           \
		int try_rc_ = (call);                                                                                  \
		if (try_rc_ < 0)                                                                                       \
			return try_rc_;                                                                                \
	} while (0)

static const void *z3_param(void *ctx, int id)
{
	const struct zero3_runtime *z = ctx;
	return z->t[id].full;
}

static float *z3_grad(void *ctx, int id)
{
	const struct zero3_runtime *z = ctx;
	return z->t[id].grad_full;
}

/* Forward uses: tok_embeddings; per block attn_norm, q, k, v, o, mlp_norm,
 * gate, up, down; norm, output. */
static int z3_pre_forward(void *ctx, struct model_module m)
{
	struct zero3_runtime *z = ctx;
	if (m.layer < 0)
		return need(z, MODEL_TOK_EMBEDDINGS);
	if (m.part < 0) {
		if (m.layer == 0)
			release(z, MODEL_TOK_EMBEDDINGS);
		return need(z, model_tensor_id(m.layer, MODEL_PART_ATTN_NORM));
	}
	if (m.part == MODEL_PART_Q)
		release(z, model_tensor_id(m.layer, MODEL_PART_ATTN_NORM));
	if (m.part == MODEL_PART_GATE)
		release(z, model_tensor_id(m.layer, MODEL_PART_MLP_NORM));
	return need(z, model_tensor_id(m.layer, m.part));
}

static int z3_post_forward(void *ctx, struct model_module m)
{
	struct zero3_runtime *z = ctx;
	if (m.layer < 0) {
		release(z, MODEL_FINAL_NORM);
		release(z, MODEL_OUTPUT);
		return 0;
	}
	if (m.part < 0) {
		/* the final norm and the head run between the last block and the root's end */
		if (m.layer == z->layers - 1) {
			TRY(need(z, MODEL_FINAL_NORM));
			TRY(need(z, MODEL_OUTPUT));
		}
		return 0;
	}
	release(z, model_tensor_id(m.layer, m.part));
	return m.part == MODEL_PART_O ? need(z, model_tensor_id(m.layer, MODEL_PART_MLP_NORM)) : 0;
}

/* Backward uses, the reverse; each gradient is complete at its tensor's
 * release. */
static int z3_pre_backward(void *ctx, struct model_module m)
{
	struct zero3_runtime *z = ctx;
	if (m.layer < 0) {
		z->phase = Z3_BACKWARD;
		if (z->recording)
			z->fwd_len = z->trace_len;
		TRY(need(z, MODEL_OUTPUT));
		return need(z, MODEL_FINAL_NORM);
	}
	if (m.part < 0) {
		if (m.layer == z->layers - 1) {
			TRY(grad_done(z, MODEL_OUTPUT));
			release(z, MODEL_OUTPUT);
			TRY(grad_done(z, MODEL_FINAL_NORM));
			release(z, MODEL_FINAL_NORM);
		}
		return 0;
	}
	if (m.part == MODEL_PART_O) {
		int id = model_tensor_id(m.layer, MODEL_PART_MLP_NORM);
		TRY(grad_done(z, id));
		release(z, id);
	}
	return need(z, model_tensor_id(m.layer, m.part));
}

static int z3_post_backward(void *ctx, struct model_module m)
{
	struct zero3_runtime *z = ctx;
	if (m.layer < 0) {
		TRY(grad_done(z, MODEL_TOK_EMBEDDINGS));
		release(z, MODEL_TOK_EMBEDDINGS);
		markers_push("zero3.reduce");
		int rc = reduce_flush(z); /* the end of backward */
		markers_pop();
		if (rc == 0 && z->recording) {
			z->recording = 0;
			if (z->trace_len != 2 * z->ntensors || z->fwd_len != z->ntensors)
				return -EPROTO;
			z->complete = 1;
		}
		return rc;
	}
	if (m.part < 0) {
		int id = model_tensor_id(m.layer, MODEL_PART_ATTN_NORM);
		TRY(grad_done(z, id));
		release(z, id);
		return m.layer == 0 ? need(z, MODEL_TOK_EMBEDDINGS) : 0;
	}
	int id = model_tensor_id(m.layer, m.part);
	TRY(grad_done(z, id));
	release(z, id);
	if (m.part == MODEL_PART_GATE)
		return need(z, model_tensor_id(m.layer, MODEL_PART_MLP_NORM));
	if (m.part == MODEL_PART_Q)
		return need(z, model_tensor_id(m.layer, MODEL_PART_ATTN_NORM));
	return 0;
}

/* The model's ops: NVTX leaf ranges. */
static void z3_op_begin(void *ctx, const char *name)
{
	(void)ctx;
	markers_push(name);
}

static void z3_op_end(void *ctx)
{
	(void)ctx;
	markers_pop();
}

/* ---- lifecycle ------------------------------------------------------------------ */

/* This rank's partitions' initial values: element r part + i of each tensor,
 * model_init_value as FSDP's units hold it, 0 past the tensor's end. */
static int partitions_init(struct zero3_runtime *z, const struct model_config *mcfg)
{
	const struct fsdp_backend *be = z->be;
	size_t T = z->total_part;
	struct model_tensor *tensors = calloc((size_t)z->ntensors, sizeof *tensors);
	float *host = malloc(T * sizeof *host);
	int rc = -ENOMEM;
	if (!tensors || !host)
		goto out;
	model_tensors(mcfg, tensors);
	for (int id = 0; id < z->ntensors; id++) {
		const struct z3_tensor *t = &z->t[id];
		size_t first = (size_t)z->cfg.rank * t->part;
		for (size_t i = 0; i < t->part; i++)
			host[t->offset + i] = first + i < t->numel
						  ? model_init_value(mcfg, &tensors[id], id, first + i, z->cfg.seed)
						  : 0.0f;
	}
	rc = be->memcpy_h2d(z->master, host, T * sizeof(float));
	if (rc == 0 && z->param != (void *)z->master)
		be->cast(z->param, z->cfg.param_dtype, z->master, FSDP_DTYPE_FP32, T);
	if (rc == 0)
		rc = be->memset_zero(z->grad, T * sizeof(float));
	if (rc == 0)
		rc = be->memset_zero(z->adam_m, T * sizeof(float));
	if (rc == 0)
		rc = be->memset_zero(z->adam_v, T * sizeof(float));
out:
	free(tensors);
	free(host);
	return rc;
}

struct zero3_runtime *zero3_new(const struct fsdp_backend *be, struct mem_ledger *mem, struct comm_thread *ct,
				const struct model_config *mcfg, const struct zero3_config *cfg, ncclComm_t world)
{
	struct zero3_runtime *z = calloc(1, sizeof *z);
	if (!z)
		return NULL;
	z->be = be;
	z->mem = mem;
	z->ct = ct;
	z->world = world;
	z->cfg = *cfg;
	z->pbytes = fsdp_dtype_size(cfg->param_dtype);
	z->rbytes = fsdp_dtype_size(cfg->reduce_dtype);
	z->layers = mcfg->layers;
	z->ntensors = model_tensor_count(mcfg);
	z->t = calloc((size_t)z->ntensors, sizeof *z->t);
	z->trace = calloc(2 * (size_t)z->ntensors, sizeof *z->trace);
	z->ipg_ids = calloc((size_t)z->ntensors, sizeof *z->ipg_ids);
	struct model_tensor *tensors = calloc((size_t)z->ntensors, sizeof *tensors);
	if (!z->t || !z->trace || !z->ipg_ids || !tensors) {
		free(tensors);
		zero3_free(z);
		return NULL;
	}
	model_tensors(mcfg, tensors);
	size_t n = (size_t)cfg->world_size, all = 0;
	for (int id = 0; id < z->ntensors; id++) {
		struct z3_tensor *t = &z->t[id];
		t->numel = tensors[id].numel;
		t->part = (t->numel + n - 1) / n;
		t->offset = z->total_part;
		z->total_part += t->part;
		t->persistent = t->numel <= cfg->persistence_threshold;
		z->persistent_params += t->persistent;
		z->persistent_elements += t->persistent ? t->numel : 0;
		z->largest = t->numel > z->largest ? t->numel : z->largest;
		all += t->numel;
	}
	free(tensors);
	/* a bucket never holds more than --reduce-bucket elements, unless one tensor alone, nor
	 * more than the model */
	z->ipg_cap = cfg->reduce_bucket < all ? (size_t)cfg->reduce_bucket : all;
	z->ipg_cap = z->ipg_cap > z->largest ? z->ipg_cap : z->largest;
	size_t T = z->total_part;
	z->ipg = mem_alloc(mem, MEM_GRADIENT, z->ipg_cap * sizeof(float));
	z->master = mem_alloc(mem, MEM_PERSISTENT, T * sizeof(float));
	z->param =
	    cfg->param_dtype == FSDP_DTYPE_FP32 ? (void *)z->master : mem_alloc(mem, MEM_PERSISTENT, T * z->pbytes);
	z->grad = mem_alloc(mem, MEM_PERSISTENT, T * sizeof(float));
	z->adam_m = mem_alloc(mem, MEM_PERSISTENT, T * sizeof(float));
	z->adam_v = mem_alloc(mem, MEM_PERSISTENT, T * sizeof(float));
	if (!z->ipg || !z->master || !z->param || !z->grad || !z->adam_m || !z->adam_v ||
	    partitions_init(z, mcfg) < 0 || be->synchronize() < 0) {
		zero3_free(z);
		return NULL;
	}
	z->params = (struct model_params){
	    .ctx = z,
	    .dtype = cfg->param_dtype,
	    .param = z3_param,
	    .grad = z3_grad,
	    .pre_forward = z3_pre_forward,
	    .post_forward = z3_post_forward,
	    .pre_backward = z3_pre_backward,
	    .post_backward = z3_post_backward,
	    .op_begin = z3_op_begin,
	    .op_end = z3_op_end,
	};
	return z;
}

void zero3_free(struct zero3_runtime *z)
{
	if (!z)
		return;
	/* Requests still queued reference these buffers: let them finish. */
	for (int i = 0; i < z->nfetches; i++)
		comm_wait(z->ct, &z->fetches[i]->req);
	for (int i = 0; i < z->nreduces; i++)
		comm_wait(z->ct, &z->reduces[i]->req);
	z->be->synchronize();
	size_t n = (size_t)z->cfg.world_size, T = z->total_part;
	for (int i = 0; i < z->nfetches; i++) {
		struct z3_fetch *f = z->fetches[i];
		mem_free(z->mem, MEM_GATHERED, f->flat, n * f->part_sum * z->pbytes);
		fetch_record_free(z, f);
	}
	for (int i = 0; i < z->nreduces; i++) {
		mem_free(z->mem, MEM_GRADIENT, z->reduces[i]->send, z->reduces[i]->send_bytes);
		reduce_record_free(z, z->reduces[i]);
	}
	for (int id = 0; z->t && id < z->ntensors; id++) {
		mem_free(z->mem, MEM_GATHERED, z->t[id].full, full_bytes(z, &z->t[id]));
		mem_free(z->mem, MEM_GRADIENT, z->t[id].grad_full, z->t[id].numel * sizeof(float));
	}
	mem_free(z->mem, MEM_GRADIENT, z->ipg, z->ipg_cap * sizeof(float));
	if (z->param != (void *)z->master)
		mem_free(z->mem, MEM_PERSISTENT, z->param, T * z->pbytes);
	mem_free(z->mem, MEM_PERSISTENT, z->master, T * sizeof(float));
	mem_free(z->mem, MEM_PERSISTENT, z->grad, T * sizeof(float));
	mem_free(z->mem, MEM_PERSISTENT, z->adam_m, T * sizeof(float));
	mem_free(z->mem, MEM_PERSISTENT, z->adam_v, T * sizeof(float));
	free(z->fetches);
	free(z->reduces);
	free(z->t);
	free(z->trace);
	free(z->ipg_ids);
	free(z->cur.fetch_elements);
	free(z->last.fetch_elements);
	comm_waits_free(&z->waits);
	free(z);
}

const struct model_params *zero3_model_params(struct zero3_runtime *z)
{
	return &z->params;
}

void zero3_step_begin(struct zero3_runtime *z)
{
	memset(&z->stats, 0, sizeof z->stats);
	comm_waits_reset(&z->waits);
	uint64_t *keep = z->cur.fetch_elements;
	size_t cap = z->cur.cap;
	z->cur = (struct z3_counts){.fetch_elements = keep, .cap = cap};
	z->be->memset_zero(z->grad, z->total_part * sizeof(float));
	z->recording = 0;
	z->end = z->complete ? z->fwd_len : 0;
	z->pos = 0;
	z->phase = Z3_FORWARD;
}

void zero3_microbatch_begin(struct zero3_runtime *z)
{
	z->recording = !z->complete;
	if (z->recording)
		z->trace_len = 0;
	z->end = z->complete ? z->trace_len : 0;
	z->pos = 0;
	z->phase = Z3_FORWARD;
}

int zero3_finish_backward(struct zero3_runtime *z)
{
	int64_t t0 = comm_now_ns();
	int rc = reduce_reap(z, 1);
	z->stats.reduce_wait_ns += comm_now_ns() - t0;
	return rc;
}

int zero3_grad_norm_sq(struct zero3_runtime *z, double *out)
{
	*out = 0.0;
	float *host = malloc(z->total_part * sizeof *host);
	if (!host)
		return -ENOMEM;
	int rc = z->be->memcpy_d2h(host, z->grad, z->total_part * sizeof *host);
	for (size_t i = 0; rc == 0 && i < z->total_part; i++)
		*out += (double)host[i] * host[i];
	free(host);
	return rc;
}

void zero3_release_all(struct zero3_runtime *z)
{
	for (int id = 0; id < z->ntensors; id++)
		if (z->t[id].state == Z3_AVAILABLE && !z->t[id].persistent)
			tensor_free(z, &z->t[id]);
}

int zero3_optimizer_step(struct zero3_runtime *z, const struct fsdp_adam_params *hp)
{
	zero3_release_all(z); /* DeepSpeed partitions every parameter before its step */
	z->be->adam_update(z->param, z->cfg.param_dtype, z->master, z->grad, FSDP_DTYPE_FP32, z->adam_m, z->adam_v,
			   z->total_part, hp);
	return 0;
}

int zero3_post_step(struct zero3_runtime *z)
{
	z->phase = Z3_OPTIMIZER;
	int rc = 0;
	/* all issued, then all waited for, as DeepSpeed's _allgather_params_coalesced does:
	 * one plain AllGather per tensor, no group */
	markers_push("zero3.fetch");
	for (int id = 0; rc == 0 && id < z->ntensors; id++) {
		struct z3_tensor *t = &z->t[id];
		if (!t->persistent)
			continue;
		if (t->state == Z3_AVAILABLE) { /* stale: gathered again into its buffer */
			t->state = Z3_ABSENT;
			z->live -= t->numel;
		}
		struct z3_fetch *f = fetch_record(z);
		if (!f) {
			rc = -ENOMEM;
			break;
		}
		f->nids = 0;
		fetch_add(z, f, id);
		rc = fetch_submit(z, f, 1);
	}
	markers_pop();
	for (int i = 0; i < z->nfetches; i++)
		if (z->fetches[i]->pending) {
			int r = fetch_wait(z, z->fetches[i]);
			rc = rc ? rc : r;
		}
	if (rc < 0)
		return rc;
	/* the step's keys, kept for its log line */
	struct z3_counts *c = &z->cur, *l = &z->last;
	if (l->cap < (size_t)c->fetches) {
		uint64_t *v = realloc(l->fetch_elements, (size_t)c->fetches * sizeof *v);
		if (!v)
			return -ENOMEM;
		l->fetch_elements = v;
		l->cap = (size_t)c->fetches;
	}
	uint64_t *keep = l->fetch_elements;
	size_t cap = l->cap;
	*l = *c;
	l->fetch_elements = keep;
	l->cap = cap;
	if (c->fetches)
		memcpy(keep, c->fetch_elements, (size_t)c->fetches * sizeof *keep);
	return 0;
}

void zero3_step_stats(const struct zero3_runtime *z, struct fsdp_step_stats *out)
{
	*out = z->stats;
	out->gather_wait_ns = z->waits.total_ns;
	out->gather_waits = z->waits.count;
	out->gather_wait_each = z->waits.each;
}

void zero3_log_fill(const struct zero3_runtime *z, struct log_record *r)
{
	const struct z3_counts *c = &z->last;
	r->allgathers += c->optimizer_allgathers;
	r->units = z->ntensors;
	r->largest_unit_params = z->largest;
	r->zero3_gather = z->cfg.coalesced ? "coalesced" : "flat";
	r->allgather_calls = c->calls;
	r->optimizer_allgathers = c->optimizer_allgathers;
	r->gathered_elements = c->gathered;
	r->forward_gathered_elements = c->forward;
	r->backward_gathered_elements = c->backward;
	r->fetches = c->fetches;
	r->fetch_elements = c->fetch_elements;
	r->bucket = z->cfg.bucket;
	r->persistence_threshold = z->cfg.persistence_threshold;
	r->max_reuse_distance = z->cfg.max_reuse_distance;
	r->max_live = z->cfg.max_live;
	r->reduce_bucket = z->cfg.reduce_bucket;
	r->persistent_params = z->persistent_params;
	r->persistent_elements = z->persistent_elements;
}
