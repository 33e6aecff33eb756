/* fsdp_ref/backend.h: the compute and memory backend the trainer core calls.
 *
 * The trainer core (model, FSDP runtime, communication thread, log) is the
 * same for every backend; it never touches parameter, gradient or activation
 * memory except through these functions, so the same core runs on the CPU
 * (backend_cpu.c: plain C, host memory, the NCCL stand-in) and on a GPU
 * (cuda/backend_cuda.cu: cuBLAS, kernels, device memory, real NCCL).
 *
 * A backend is a versioned struct of function pointers, chosen at start
 * (like NCCL's plugin tables). New members are only ever appended; a core
 * built against version V uses members up to V and checks `version`.
 *
 * Conventions, for every function below:
 *  - "device pointer": memory from alloc(). The core does arithmetic on it
 *    (base + offset) but never dereferences it.
 *  - Activations, gradients of activations, full (unsharded) gradients, fp32
 *    master weights and Adam moments are fp32. Parameters (the gathered flat
 *    buffers the model reads) are in the parameter dtype given with each call
 *    (FSDP_DTYPE_BF16 or FSDP_DTYPE_FP32). Token ids are int32.
 *  - All matrices are dense row-major. A linear layer's weight W has shape
 *    [out, in] (like torch.nn.Linear): y[M, out] = x[M, in] @ W^T.
 *  - Compute ops are enqueued on the backend's compute stream, in call order;
 *    on the CPU they run synchronously. They return nothing: a CUDA backend
 *    reports launch errors at the next synchronize().
 *  - Every reduction is deterministic (same inputs, same bits, every run),
 *    and reductions over the batch run in increasing row order. Loss
 *    trajectories are compared bit for bit across wrap policies, which only
 *    holds if no op's result depends on anything but its inputs.
 *  - Accumulation inside ops is fp32.
 *  - Only the compute thread calls compute ops and memory functions; the
 *    communication thread calls thread_init, comm_stream, comm_wait_event and
 *    event_record_comm (and the NCCL API itself).
 *
 * Synchronisation between the communication thread and compute (the FSDP
 * runtime's only cross-stream dependencies):
 *  - before a collective reads data produced by compute (a parameter shard
 *    after Adam, a gradient buffer after backward), the core records an event
 *    on the compute stream (event_record_compute) and the communication
 *    thread makes the comm stream wait on it (comm_wait_event);
 *  - after issuing a collective the communication thread records an event on
 *    the comm stream (event_record_comm) and signals the compute thread (a
 *    host condition variable owned by the core); the compute thread then
 *    makes the compute stream wait on that event (compute_wait_event) before
 *    it uses the result, and event_query / event_synchronize tell the host
 *    when a buffer a collective reads may be freed.
 * On the CPU every collective blocks until it is complete, compute is
 * synchronous, and all event functions are no-ops that report completion.
 */
#ifndef FSDP_REF_BACKEND_H
#define FSDP_REF_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#define FSDP_BACKEND_VERSION 1

/* Element types of parameter and gradient-reduction buffers. */
enum fsdp_dtype {
	FSDP_DTYPE_FP32 = 0,
	FSDP_DTYPE_BF16 = 1,
};

/* Bytes per element of `t`. */
static inline size_t fsdp_dtype_size(enum fsdp_dtype t)
{
	return t == FSDP_DTYPE_BF16 ? 2 : 4;
}

/* Opaque, backend-defined event (a cudaEvent_t on CUDA, a dummy on the CPU). */
struct fsdp_event;

/* Adam hyperparameters for one optimizer step, computed by the core on the
 * host so that every backend uses the same scalars. */
struct fsdp_adam_params {
	float lr;		/* learning rate */
	float beta1, beta2;	/* moment decay rates */
	float eps;		/* denominator epsilon */
	float weight_decay;	/* decoupled (AdamW) weight decay */
	float bias_correction1; /* 1 - beta1^t, t = 1-based step */
	float bias_correction2; /* 1 - beta2^t */
	float grad_scale;	/* gradients are multiplied by this first (clipping; 1 otherwise) */
};

struct fsdp_backend {
	int version;	  /* FSDP_BACKEND_VERSION the backend was built against */
	const char *name; /* "cpu" or "cuda": what --backend selects */

	/* ---- lifecycle ------------------------------------------------------- */

	/* Bind this process to its device (CUDA: cudaSetDevice(local_rank), create
	 * the compute and comm streams and the cuBLAS handle). Called once, after
	 * the process knows its rank, before any other member except name/version.
	 * Returns 0 or a negative errno. */
	int (*init)(int rank, int local_rank, int world_size);

	/* Release everything init created. All device memory must have been freed. */
	void (*shutdown)(void);

	/* Called once at the start of the communication thread, before it calls
	 * any NCCL function (CUDA: cudaSetDevice on that thread). 0 or -errno. */
	int (*thread_init)(void);

	/* The stream to pass to NCCL collectives (a cudaStream_t cast to void *);
	 * NULL on the CPU, where the stand-in ignores it. */
	void *(*comm_stream)(void);

	/* ---- device memory ----------------------------------------------------
	 * Device memory is allocated and freed only by the core, through these.
	 * Copies are ordered with compute ops; memcpy_d2h returns once the data is
	 * on the host (it synchronises the compute stream). */

	/* `bytes` of device memory, uninitialised, aligned to at least 256 bytes;
	 * NULL on failure. alloc(0) may return NULL. */
	void *(*alloc)(size_t bytes);
	/* Free memory from alloc (NULL is ignored). The memory may still be in use
	 * by enqueued compute work, or by comm-stream work (a collective's input)
	 * that the compute stream has been made to wait for: the backend defers
	 * reuse until the compute stream has passed this point. The core records
	 * an event on the compute stream after allocating a collective's output
	 * and before the collective is issued, so reused memory is never written
	 * by the comm stream while compute still reads it. */
	void (*free)(void *ptr);
	int (*memcpy_h2d)(void *dst_device, const void *src_host, size_t bytes);
	int (*memcpy_d2h)(void *dst_host, const void *src_device, size_t bytes);
	int (*memcpy_d2d)(void *dst_device, const void *src_device, size_t bytes);
	int (*memset_zero)(void *dst_device, size_t bytes);

	/* ---- events (see the synchronisation note above) --------------------- */

	struct fsdp_event *(*event_new)(void); /* NULL on failure */
	void (*event_free)(struct fsdp_event *ev);
	/* Record on the compute stream (compute thread). */
	int (*event_record_compute)(struct fsdp_event *ev);
	/* Record on the comm stream (communication thread, after a collective). */
	int (*event_record_comm)(struct fsdp_event *ev);
	/* Comm stream waits for ev (communication thread, before a collective). */
	int (*comm_wait_event)(struct fsdp_event *ev);
	/* Compute stream waits for ev (compute thread, before using a result). */
	int (*compute_wait_event)(struct fsdp_event *ev);
	/* 1 if all work before ev has completed, 0 if not yet, negative errno. */
	int (*event_query)(struct fsdp_event *ev);
	/* Block the host until ev has completed. 0 or -errno. */
	int (*event_synchronize)(struct fsdp_event *ev);
	/* Block the host until the compute and comm streams are idle; reports any
	 * asynchronous error of earlier ops. 0 or -errno. */
	int (*synchronize)(void);

	/* Optional (may be NULL): nanoseconds the compute stream spent waiting in
	 * compute_wait_event since the previous call (device-side exposed gather
	 * time, e.g. from event pairs around cudaStreamWaitEvent). Called by the
	 * compute thread after synchronize() at the end of a step. When NULL, the
	 * core measures the host time its compute thread waited, which is exact on
	 * the CPU where compute is synchronous. */
	int64_t (*take_exposed_ns)(void);

	/* ---- model ops (compute stream) --------------------------------------
	 * M = rows (tokens of the local batch, B * T). */

	/* out[M, C] = wte[tokens[m], :] (wte [V, C] in wdt). */
	void (*embedding_forward)(float *out, const int32_t *tokens, const void *wte, enum fsdp_dtype wdt, int M,
				  int C);
	/* dwte[V, C] = sum over rows m with tokens[m] == v of dout[m, :]; dwte is
	 * overwritten (rows of unused tokens become 0); rows added in increasing m. */
	void (*embedding_backward)(float *dwte, const float *dout, const int32_t *tokens, int M, int C, int V);

	/* out[m, :] = in[m, :] * rstd[m] * w, rstd[m] = 1 / sqrt(mean(in[m,:]^2) + eps);
	 * rstd [M] is saved for backward. w [C] in wdt. */
	void (*rmsnorm_forward)(float *out, float *rstd, const float *in, const void *w, enum fsdp_dtype wdt, int M,
				int C, float eps);
	/* din += d(loss)/d(in) (accumulates: `in` is the residual stream);
	 * dw[C] = d(loss)/d(w), overwritten. */
	void (*rmsnorm_backward)(float *din, float *dw, const float *dout, const float *in, const void *w,
				 enum fsdp_dtype wdt, const float *rstd, int M, int C);

	/* out[M, N] = in[M, K] @ w^T, w [N, K] in wdt. out is overwritten. */
	void (*matmul_forward)(float *out, const float *in, const void *w, enum fsdp_dtype wdt, int M, int K, int N);
	/* din[M, K] = dout[M, N] @ w (accumulate_din: din += instead of =);
	 * dw[N, K] = dout^T @ in, overwritten, summed over rows m in increasing order. */
	void (*matmul_backward)(float *din, float *dw, const float *dout, const float *in, const void *w,
				enum fsdp_dtype wdt, int M, int K, int N, int accumulate_din);

	/* Rotary position embedding, in place, on x [B, T, nh, hd] (hd even): the
	 * pair (x[2i], x[2i+1]) of each head at position t is rotated by angle
	 * t * theta^(-2i/hd). */
	void (*rope_forward)(float *x, int B, int T, int nh, int hd, float theta);
	/* The transpose (rotation by the negative angle), in place on dx. */
	void (*rope_backward)(float *dx, int B, int T, int nh, int hd, float theta);

	/* Causal attention with grouped kv heads: q [B, T, H, hd], k and v
	 * [B, T, KH, hd] (H % KH == 0; query head h reads kv head h / (H / KH)),
	 * scores scaled by 1/sqrt(hd). out [B, T, H, hd] overwritten; probs
	 * [B, H, T, T] receives the softmax (zero above the diagonal), saved for
	 * backward. */
	void (*attention_forward)(float *out, float *probs, const float *q, const float *k, const float *v, int B,
				  int T, int H, int KH, int hd);
	/* dq, dk, dv overwritten (dk, dv summed over the query heads of a group,
	 * in increasing head order). */
	void (*attention_backward)(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
				   const float *v, const float *probs, int B, int T, int H, int KH, int hd);

	/* out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)). */
	void (*swiglu_forward)(float *out, const float *gate, const float *up, size_t n);
	/* dgate, dup overwritten. */
	void (*swiglu_backward)(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
				size_t n);

	/* x[i] += y[i]. */
	void (*residual_add)(float *x, const float *y, size_t n);

	/* Softmax cross-entropy over logits [M, V] with targets [M]:
	 * losses[m] = -log softmax(logits[m])[targets[m]] (device [M], fp32);
	 * dlogits[m, :] = (softmax(logits[m]) - onehot(targets[m])) * dscale.
	 * dlogits may alias logits (in place). */
	void (*crossentropy)(float *losses, float *dlogits, const float *logits, const int32_t *targets, int M, int V,
			     float dscale);

	/* dst[i] = (dst_dtype) src[i]; fp32 -> bf16 rounds to nearest even. Same
	 * dtype copies. dst and src do not overlap. */
	void (*cast)(void *dst, enum fsdp_dtype dst_dtype, const void *src, enum fsdp_dtype src_dtype, size_t n);

	/* AdamW on one shard of n elements: g = grad[i] (in gdt) as fp32, times
	 * hp->grad_scale;
	 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
	 * master -= lr * ((m/bc1) / (sqrt(v/bc2) + eps) + wd * master);
	 * param[i] = (pdt) master[i]. When pdt is FP32, param may alias master. */
	void (*adam_update)(void *param, enum fsdp_dtype pdt, float *master, const void *grad, enum fsdp_dtype gdt,
			    float *m, float *v, size_t n, const struct fsdp_adam_params *hp);
};

/* The CPU backend (backend_cpu.c). */
extern const struct fsdp_backend fsdp_backend_cpu;

#endif /* FSDP_REF_BACKEND_H */
