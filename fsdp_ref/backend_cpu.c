/* fsdp_ref/backend_cpu.c: the CPU backend. "Device" memory is host memory,
 * compute is plain C run synchronously on the calling thread, and the NCCL
 * calls go to the stand-in (nccl_cpu/), whose collectives block until done,
 * so every event is complete as soon as it is recorded.
 *
 * Each op is a forward / backward pair over flat float arrays, in the manner
 * of llm.c's train_gpt2.c. Reductions are written with a fixed order (eight
 * interleaved partial sums for dot products, rows in increasing order
 * otherwise) so that results are bit-reproducible and independent of how the
 * parameters were split into FSDP units. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_ref/backend.h"
#include "fsdp_ref/bf16.h"

/* ---- scratch ------------------------------------------------------------
 * Only the compute thread calls ops, so one growing buffer per purpose is
 * enough. It is the backend's private working memory (a GPU kernel would use
 * registers and shared memory); the core's memory accounting does not see it. */
struct scratch {
	float *data;
	size_t capacity; /* floats */
};

static struct scratch scratch_row, scratch_tmp;

static float *scratch_get(struct scratch *s, size_t n)
{
	if (n > s->capacity) {
		float *p = realloc(s->data, n * sizeof *p);
		if (!p)
			abort(); /* ops cannot fail by contract; a CPU run out of memory is fatal */
		s->data = p;
		s->capacity = n;
	}
	return s->data;
}

/* Row `n` of a [N, K] weight in `dt` as fp32 (a view when already fp32). */
static const float *weight_row(const void *w, enum fsdp_dtype dt, size_t n, int K, float *buf)
{
	if (dt == FSDP_DTYPE_FP32)
		return (const float *)w + n * (size_t)K;
	const uint16_t *src = (const uint16_t *)w + n * (size_t)K;
	for (int k = 0; k < K; k++)
		buf[k] = bf16_to_float(src[k]);
	return buf;
}

static inline float load_param(const void *w, enum fsdp_dtype dt, size_t i)
{
	return dt == FSDP_DTYPE_FP32 ? ((const float *)w)[i] : bf16_to_float(((const uint16_t *)w)[i]);
}

/* Dot product with eight interleaved partial sums combined in a fixed tree:
 * deterministic, and lets the compiler keep the sums in one vector register. */
static float dot(const float *a, const float *b, int n)
{
	float acc[8] = {0};
	int i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] += a[i + j] * b[i + j];
	for (int j = 0; i < n; i++, j++)
		acc[j] += a[i] * b[i];
	return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* y += a * x */
static void axpy(float *y, float a, const float *x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] += a * x[i];
}

/* ---- lifecycle, memory, events ---------------------------------------- */

static int cpu_init(int rank, int local_rank, int world_size)
{
	return 0;
}

static void cpu_shutdown(void)
{
	free(scratch_row.data);
	free(scratch_tmp.data);
	scratch_row = (struct scratch){0};
	scratch_tmp = (struct scratch){0};
}

static int cpu_thread_init(void)
{
	return 0;
}
static void *cpu_comm_stream(void)
{
	return NULL;
}

static void *cpu_alloc(size_t bytes)
{
	void *p = NULL;
	if (bytes == 0)
		return NULL;
	if (posix_memalign(&p, 256, bytes) != 0)
		return NULL;
	return p;
}

static void cpu_free(void *ptr)
{
	free(ptr);
}

static int cpu_memcpy(void *dst, const void *src, size_t bytes)
{
	if (bytes)
		memmove(dst, src, bytes);
	return 0;
}

static int cpu_memset_zero(void *dst, size_t bytes)
{
	if (bytes)
		memset(dst, 0, bytes);
	return 0;
}

/* Events carry no state on the CPU: one static object stands for all. */
static char cpu_event_token;

static struct fsdp_event *cpu_event_new(void)
{
	return (struct fsdp_event *)&cpu_event_token;
}
static void cpu_event_free(struct fsdp_event *ev) {}
static int cpu_event_noop(struct fsdp_event *ev)
{
	return 0;
}
static int cpu_event_query(struct fsdp_event *ev)
{
	return 1;
}
static int cpu_synchronize(void)
{
	return 0;
}

/* ---- embedding -------------------------------------------------------- */

static void cpu_embedding_forward(float *out, const int32_t *tokens, const void *wte, enum fsdp_dtype wdt, int M, int C)
{
	for (int m = 0; m < M; m++)
		for (int c = 0; c < C; c++)
			out[(size_t)m * C + c] = load_param(wte, wdt, (size_t)tokens[m] * C + c);
}

static void cpu_embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int M, int C, int V)
{
	memset(dwte, 0, (size_t)V * C * sizeof *dwte);
	for (int m = 0; m < M; m++)
		axpy(dwte + (size_t)tokens[m] * C, 1.0f, dout + (size_t)m * C, C);
}

/* ---- RMSNorm ---------------------------------------------------------- */

static void cpu_rmsnorm_forward(float *out, float *rstd, const float *in, const void *w, enum fsdp_dtype wdt, int M,
				int C, float eps)
{
	float *wf = scratch_get(&scratch_row, (size_t)C);
	const float *wr = weight_row(w, wdt, 0, C, wf);
	for (int m = 0; m < M; m++) {
		const float *x = in + (size_t)m * C;
		float r = 1.0f / sqrtf(dot(x, x, C) / (float)C + eps);
		rstd[m] = r;
		for (int c = 0; c < C; c++)
			out[(size_t)m * C + c] = x[c] * r * wr[c];
	}
}

/* y_c = x_c r w_c with r = (mean(x^2) + eps)^-1/2, so
 * dx_j = r w_j g_j - x_j r^3 / C * sum_c g_c w_c x_c and dw_c = sum_m g_c x_c r. */
static void cpu_rmsnorm_backward(float *din, float *dw, const float *dout, const float *in, const void *w,
				 enum fsdp_dtype wdt, const float *rstd, int M, int C)
{
	float *wf = scratch_get(&scratch_row, (size_t)C);
	const float *wr = weight_row(w, wdt, 0, C, wf);
	memset(dw, 0, (size_t)C * sizeof *dw);
	for (int m = 0; m < M; m++) {
		const float *x = in + (size_t)m * C, *g = dout + (size_t)m * C;
		float *dx = din + (size_t)m * C;
		float r = rstd[m];
		float gwx = 0.0f;
		for (int c = 0; c < C; c++)
			gwx += g[c] * wr[c] * x[c];
		float k = r * r * r / (float)C * gwx;
		for (int c = 0; c < C; c++) {
			dx[c] += r * wr[c] * g[c] - x[c] * k;
			dw[c] += g[c] * x[c] * r;
		}
	}
}

/* ---- matmul ------------------------------------------------------------ */

static void cpu_matmul_forward(float *out, const float *in, const void *w, enum fsdp_dtype wdt, int M, int K, int N)
{
	float *wf = scratch_get(&scratch_row, (size_t)K);
	for (int n = 0; n < N; n++) {
		const float *wr = weight_row(w, wdt, (size_t)n, K, wf);
		for (int m = 0; m < M; m++)
			out[(size_t)m * N + n] = dot(in + (size_t)m * K, wr, K);
	}
}

static void cpu_matmul_backward(float *din, float *dw, const float *dout, const float *in, const void *w,
				enum fsdp_dtype wdt, int M, int K, int N, int accumulate_din)
{
	/* din = dout @ w: rows of w added in increasing n into a temporary, which
	 * is then stored or added, so that accumulate only changes the last add. */
	float *wf = scratch_get(&scratch_row, (size_t)K);
	float *tmp = scratch_get(&scratch_tmp, (size_t)M * K);
	memset(tmp, 0, (size_t)M * K * sizeof *tmp);
	for (int n = 0; n < N; n++) {
		const float *wr = weight_row(w, wdt, (size_t)n, K, wf);
		for (int m = 0; m < M; m++)
			axpy(tmp + (size_t)m * K, dout[(size_t)m * N + n], wr, K);
	}
	if (accumulate_din) {
		for (size_t i = 0; i < (size_t)M * K; i++)
			din[i] += tmp[i];
	} else {
		memcpy(din, tmp, (size_t)M * K * sizeof *din);
	}
	/* dw = dout^T @ in, rows m in increasing order. */
	memset(dw, 0, (size_t)N * K * sizeof *dw);
	for (int m = 0; m < M; m++)
		for (int n = 0; n < N; n++)
			axpy(dw + (size_t)n * K, dout[(size_t)m * N + n], in + (size_t)m * K, K);
}

/* ---- rotary position embedding ----------------------------------------- */

static void rope_rotate(float *x, int B, int T, int nh, int hd, float theta, float sign)
{
	int half = hd / 2;
	float *cs = scratch_get(&scratch_row, (size_t)hd);
	for (int t = 0; t < T; t++) {
		for (int i = 0; i < half; i++) {
			double angle = (double)t * pow((double)theta, -2.0 * i / hd);
			cs[2 * i] = (float)cos(angle);
			cs[2 * i + 1] = sign * (float)sin(angle);
		}
		for (int b = 0; b < B; b++)
			for (int h = 0; h < nh; h++) {
				float *v = x + (((size_t)b * T + t) * nh + h) * hd;
				for (int i = 0; i < half; i++) {
					float c = cs[2 * i], s = cs[2 * i + 1];
					float x0 = v[2 * i], x1 = v[2 * i + 1];
					v[2 * i] = x0 * c - x1 * s;
					v[2 * i + 1] = x0 * s + x1 * c;
				}
			}
	}
}

static void cpu_rope_forward(float *x, int B, int T, int nh, int hd, float theta)
{
	rope_rotate(x, B, T, nh, hd, theta, 1.0f);
}

static void cpu_rope_backward(float *dx, int B, int T, int nh, int hd, float theta)
{
	rope_rotate(dx, B, T, nh, hd, theta, -1.0f);
}

/* ---- causal grouped-kv attention --------------------------------------- */

static void cpu_attention_forward(float *out, float *probs, const float *q, const float *k, const float *v, int B,
				  int T, int H, int KH, int hd)
{
	float scale = 1.0f / sqrtf((float)hd);
	int group = H / KH;
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++) {
			int kh = h / group;
			for (int t = 0; t < T; t++) {
				const float *qt = q + (((size_t)b * T + t) * H + h) * hd;
				float *p = probs + (((size_t)b * H + h) * T + t) * T;
				float maxv = -INFINITY;
				for (int u = 0; u <= t; u++) {
					p[u] = dot(qt, k + (((size_t)b * T + u) * KH + kh) * hd, hd) * scale;
					if (p[u] > maxv)
						maxv = p[u];
				}
				float sum = 0.0f;
				for (int u = 0; u <= t; u++) {
					p[u] = expf(p[u] - maxv);
					sum += p[u];
				}
				float inv = 1.0f / sum;
				for (int u = 0; u <= t; u++)
					p[u] *= inv;
				for (int u = t + 1; u < T; u++)
					p[u] = 0.0f;
				float *o = out + (((size_t)b * T + t) * H + h) * hd;
				memset(o, 0, (size_t)hd * sizeof *o);
				for (int u = 0; u <= t; u++)
					axpy(o, p[u], v + (((size_t)b * T + u) * KH + kh) * hd, hd);
			}
		}
}

static void cpu_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
				   const float *v, const float *probs, int B, int T, int H, int KH, int hd)
{
	float scale = 1.0f / sqrtf((float)hd);
	int group = H / KH;
	float *dp = scratch_get(&scratch_row, (size_t)T);
	memset(dk, 0, (size_t)B * T * KH * hd * sizeof *dk);
	memset(dv, 0, (size_t)B * T * KH * hd * sizeof *dv);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++) {
			int kh = h / group;
			for (int t = 0; t < T; t++) {
				const float *p = probs + (((size_t)b * H + h) * T + t) * T;
				const float *go = dout + (((size_t)b * T + t) * H + h) * hd;
				const float *qt = q + (((size_t)b * T + t) * H + h) * hd;
				float *dqt = dq + (((size_t)b * T + t) * H + h) * hd;
				float pdp = 0.0f;
				for (int u = 0; u <= t; u++) {
					size_t kv = (((size_t)b * T + u) * KH + kh) * hd;
					dp[u] = dot(go, v + kv, hd);
					axpy(dv + kv, p[u], go, hd);
					pdp += p[u] * dp[u];
				}
				memset(dqt, 0, (size_t)hd * sizeof *dqt);
				for (int u = 0; u <= t; u++) {
					size_t kv = (((size_t)b * T + u) * KH + kh) * hd;
					float ds = p[u] * (dp[u] - pdp) * scale;
					axpy(dqt, ds, k + kv, hd);
					axpy(dk + kv, ds, qt, hd);
				}
			}
		}
}

/* ---- SwiGLU, residual --------------------------------------------------- */

static void cpu_swiglu_forward(float *out, const float *gate, const float *up, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float g = gate[i];
		out[i] = g / (1.0f + expf(-g)) * up[i];
	}
}

static void cpu_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
				size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float g = gate[i], s = 1.0f / (1.0f + expf(-g));
		dup[i] = dout[i] * g * s;
		dgate[i] = dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
	}
}

static void cpu_residual_add(float *x, const float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] += y[i];
}

/* ---- loss --------------------------------------------------------------- */

static void cpu_crossentropy(float *losses, float *dlogits, const float *logits, const int32_t *targets, int M, int V,
			     float dscale)
{
	for (int m = 0; m < M; m++) {
		const float *z = logits + (size_t)m * V;
		float *d = dlogits + (size_t)m * V;
		float maxv = -INFINITY;
		for (int i = 0; i < V; i++)
			if (z[i] > maxv)
				maxv = z[i];
		float sum = 0.0f;
		for (int i = 0; i < V; i++)
			sum += expf(z[i] - maxv);
		int t = targets[m];
		losses[m] = logf(sum) - (z[t] - maxv);
		float inv = 1.0f / sum;
		for (int i = 0; i < V; i++) /* reads z[i] before writing d[i]: safe in place */
			d[i] = (expf(z[i] - maxv) * inv - (i == t ? 1.0f : 0.0f)) * dscale;
	}
}

/* ---- dtype conversion, optimizer ---------------------------------------- */

static void cpu_cast(void *dst, enum fsdp_dtype dst_dtype, const void *src, enum fsdp_dtype src_dtype, size_t n)
{
	if (dst_dtype == src_dtype) {
		memcpy(dst, src, n * fsdp_dtype_size(dst_dtype));
	} else if (dst_dtype == FSDP_DTYPE_BF16) {
		for (size_t i = 0; i < n; i++)
			((uint16_t *)dst)[i] = bf16_from_float(((const float *)src)[i]);
	} else {
		for (size_t i = 0; i < n; i++)
			((float *)dst)[i] = bf16_to_float(((const uint16_t *)src)[i]);
	}
}

static void cpu_adam_update(void *param, enum fsdp_dtype pdt, float *master, const void *grad, enum fsdp_dtype gdt,
			    float *m, float *v, size_t n, const struct fsdp_adam_params *hp)
{
	for (size_t i = 0; i < n; i++) {
		float g = load_param(grad, gdt, i) * hp->grad_scale;
		m[i] = hp->beta1 * m[i] + (1.0f - hp->beta1) * g;
		v[i] = hp->beta2 * v[i] + (1.0f - hp->beta2) * g * g;
		float mhat = m[i] / hp->bias_correction1, vhat = v[i] / hp->bias_correction2;
		master[i] -= hp->lr * (mhat / (sqrtf(vhat) + hp->eps) + hp->weight_decay * master[i]);
		if (pdt == FSDP_DTYPE_BF16)
			((uint16_t *)param)[i] = bf16_from_float(master[i]);
		else
			((float *)param)[i] = master[i];
	}
}

const struct fsdp_backend fsdp_backend_cpu = {
    .version = FSDP_BACKEND_VERSION,
    .name = "cpu",
    .init = cpu_init,
    .shutdown = cpu_shutdown,
    .thread_init = cpu_thread_init,
    .comm_stream = cpu_comm_stream,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memcpy_h2d = cpu_memcpy,
    .memcpy_d2h = cpu_memcpy,
    .memcpy_d2d = cpu_memcpy,
    .memset_zero = cpu_memset_zero,
    .event_new = cpu_event_new,
    .event_free = cpu_event_free,
    .event_record_compute = cpu_event_noop,
    .event_record_comm = cpu_event_noop,
    .comm_wait_event = cpu_event_noop,
    .compute_wait_event = cpu_event_noop,
    .event_query = cpu_event_query,
    .event_synchronize = cpu_event_noop,
    .synchronize = cpu_synchronize,
    .take_exposed_ns = NULL,
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .rmsnorm_forward = cpu_rmsnorm_forward,
    .rmsnorm_backward = cpu_rmsnorm_backward,
    .matmul_forward = cpu_matmul_forward,
    .matmul_backward = cpu_matmul_backward,
    .rope_forward = cpu_rope_forward,
    .rope_backward = cpu_rope_backward,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .swiglu_forward = cpu_swiglu_forward,
    .swiglu_backward = cpu_swiglu_backward,
    .residual_add = cpu_residual_add,
    .crossentropy = cpu_crossentropy,
    .cast = cpu_cast,
    .adam_update = cpu_adam_update,
};
