/* fsdp_ref/model.c: the Llama-shaped decoder (see model.h).
 *
 * Like llm.c, all activations live in one buffer with named pointers into
 * it; forward and backward are straight-line sequences of backend ops. The
 * hooks around modules are where the FSDP runtime gathers and reshards.
 *
 * Every op runs between op_begin and op_end (when the provider has them):
 * as with PyTorch's per-op NVTX ranges, a profiler then sees each stretch of
 * compute as a leaf range, and the time inside a module's range but outside
 * its ops is the hooks' own (waiting for a gather, mostly). The op names are
 * built once, in model_new. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_ref/mem.h"
#include "fsdp_ref/model.h"

/* ---- tensors -------------------------------------------------------------- */

static const char *const part_names[MODEL_PARTS] = {
    [MODEL_PART_Q] = "attn.q",		[MODEL_PART_K] = "attn.k",
    [MODEL_PART_V] = "attn.v",		[MODEL_PART_O] = "attn.o",
    [MODEL_PART_GATE] = "mlp.gate",	[MODEL_PART_UP] = "mlp.up",
    [MODEL_PART_DOWN] = "mlp.down",	[MODEL_PART_ATTN_NORM] = "attn_norm",
    [MODEL_PART_MLP_NORM] = "mlp_norm",
};

int model_tensor_count(const struct model_config *cfg)
{
	return MODEL_ROOT_TENSORS + MODEL_PARTS * cfg->layers;
}

void model_tensors(const struct model_config *cfg, struct model_tensor *out)
{
	size_t C = (size_t)cfg->d_model, F = (size_t)cfg->ffn, V = (size_t)cfg->vocab;
	size_t hd = C / (size_t)cfg->heads, kvdim = hd * (size_t)cfg->kv_heads;
	size_t T = (size_t)model_tp_size(cfg);
	out[MODEL_TOK_EMBEDDINGS] =
	    (struct model_tensor){"tok_embeddings", V * C, -1, MODEL_TOK_EMBEDDINGS, 0, MODEL_TP_REPLICATED, V, C};
	out[MODEL_FINAL_NORM] = (struct model_tensor){"norm", C, -1, MODEL_FINAL_NORM, 0, MODEL_TP_REPLICATED, 1, C};
	out[MODEL_OUTPUT] = (struct model_tensor){"output", V * C, -1, MODEL_OUTPUT, (int)C, MODEL_TP_REPLICATED, V, C};
	for (int l = 0; l < cfg->layers; l++) {
		/* [out, in] of each part: Megatron's split puts q, k, v, gate and up
		 * column-parallel (their outputs, whole heads and hidden units, split),
		 * o and down row-parallel (their inputs split the same way), so that a
		 * block needs one gather before and one reduction after each half. */
		static const struct {
			int rows, cols; /* 0 C, 1 F, 2 kv dim, 3 one */
			enum model_tp_split split;
		} shape[MODEL_PARTS] = {
		    [MODEL_PART_Q] = {0, 0, MODEL_TP_ROWS},
		    [MODEL_PART_K] = {2, 0, MODEL_TP_ROWS},
		    [MODEL_PART_V] = {2, 0, MODEL_TP_ROWS},
		    [MODEL_PART_O] = {0, 0, MODEL_TP_COLS},
		    [MODEL_PART_GATE] = {1, 0, MODEL_TP_ROWS},
		    [MODEL_PART_UP] = {1, 0, MODEL_TP_ROWS},
		    [MODEL_PART_DOWN] = {0, 1, MODEL_TP_COLS},
		    [MODEL_PART_ATTN_NORM] = {3, 0, MODEL_TP_REPLICATED},
		    [MODEL_PART_MLP_NORM] = {3, 0, MODEL_TP_REPLICATED},
		};
		const size_t dim[4] = {C, F, kvdim, 1};
		for (int p = 0; p < MODEL_PARTS; p++) {
			struct model_tensor *t = &out[model_tensor_id(l, p)];
			snprintf(t->name, sizeof t->name, "layers.%d.%s", l, part_names[p]);
			t->rows = dim[shape[p].rows];
			t->cols = dim[shape[p].cols];
			t->split = shape[p].split;
			t->numel = t->rows * t->cols / (t->split == MODEL_TP_REPLICATED ? 1 : T);
			t->layer = l;
			t->part = p;
			t->fan_in = p < MODEL_LINEARS ? (int)t->cols : 0;
		}
	}
}

size_t model_tensor_global_index(const struct model_config *cfg, const struct model_tensor *t, int tp_rank,
				 size_t local_index)
{
	size_t T = (size_t)model_tp_size(cfg), r = (size_t)tp_rank;
	switch (t->split) {
	case MODEL_TP_ROWS: /* whole rows: this rank's block of them is contiguous */
		return r * (t->rows / T) * t->cols + local_index;
	case MODEL_TP_COLS: { /* a slice of every row */
		size_t local_cols = t->cols / T;
		return local_index / local_cols * t->cols + r * local_cols + local_index % local_cols;
	}
	case MODEL_TP_REPLICATED:
		break;
	}
	return local_index;
}

size_t model_param_count(const struct model_config *cfg)
{
	size_t C = (size_t)cfg->d_model, F = (size_t)cfg->ffn, V = (size_t)cfg->vocab;
	size_t kvdim = C / (size_t)cfg->heads * (size_t)cfg->kv_heads;
	size_t block = 2 * C * C + 2 * kvdim * C + 3 * C * F + 2 * C;
	return 2 * V * C + C + (size_t)cfg->layers * block;
}

int model_config_check(const struct model_config *cfg, char *err, size_t errlen)
{
	const char *why = NULL;
	int T = model_tp_size(cfg);
	if (cfg->vocab < 2 || cfg->layers < 1 || cfg->d_model < 2 || cfg->ffn < 1 || cfg->seq < 1)
		why = "--vocab >= 2, --layers >= 1, --d-model >= 2, --ffn >= 1 and --seq >= 1 are required";
	else if (cfg->heads < 1 || cfg->d_model % cfg->heads != 0)
		why = "--heads must divide --d-model";
	else if ((cfg->d_model / cfg->heads) % 2 != 0)
		why = "the head dimension (--d-model / --heads) must be even (rotary embedding)";
	else if (cfg->kv_heads < 1 || cfg->heads % cfg->kv_heads != 0)
		why = "--kv-heads must divide --heads";
	if (why) {
		snprintf(err, errlen, "%s", why);
		return -EINVAL;
	}
	/* tensor parallelism splits whole heads and hidden units */
	const struct {
		const char *flag;
		int value;
	} split[] = {{"--heads", cfg->heads}, {"--kv-heads", cfg->kv_heads}, {"--ffn", cfg->ffn}};
	for (size_t i = 0; i < sizeof split / sizeof split[0]; i++) {
		if (split[i].value % T != 0) {
			snprintf(err, errlen,
				 "--tp %d must divide %s %d: tensor parallelism gives each tp rank 1/%d of the "
				 "query heads, kv heads and MLP hidden units",
				 T, split[i].flag, split[i].value, T);
			return -EINVAL;
		}
	}
	return 0;
}

/* splitmix64: a counter-based generator, so that any element's initial value
 * can be computed on its own. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

float model_init_value(const struct model_config *cfg, const struct model_tensor *t, int tensor_id, size_t index,
		       uint64_t seed)
{
	if (t->layer >= 0 ? t->part >= MODEL_LINEARS : t->part == MODEL_FINAL_NORM)
		return 1.0f; /* RMSNorm gains */
	uint64_t h = mix64(seed ^ mix64(((uint64_t)tensor_id << 40) ^ (uint64_t)index));
	float u = (float)(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f; /* [-1, 1), 24 bits */
	if (t->layer < 0 && t->part == MODEL_TOK_EMBEDDINGS)
		return u; /* embeddings ~ U(-1, 1): RMSNorm follows */
	float bound = 1.0f / sqrtf((float)t->fan_in);
	if (t->layer >= 0 && (t->part == MODEL_PART_O || t->part == MODEL_PART_DOWN))
		bound /= sqrtf(2.0f * (float)cfg->layers); /* residual branches start small */
	return u * bound;
}

/* ---- op names --------------------------------------------------------------- */

/* The ops of a block, each one leaf range: a linear's matmul (forward, or
 * both matmuls of its backward) is "<linear>.matmul"; the rest are named
 * after the block's module they belong to. With tensor parallelism the
 * attention's and the MLP's TP collectives are issued in "attn.tp_allgather",
 * "attn.tp_reduce_scatter", "mlp.tp_allgather" and "mlp.tp_reduce_scatter"
 * (the gather of the half's input, or in backward of its output's gradient;
 * the reduction of its output, or in backward of its input's gradient). */
enum block_op {
	OP_LINEAR0 = 0, /* + MODEL_PART_Q .. MODEL_PART_DOWN */
	OP_ATTN_NORM = MODEL_LINEARS,
	OP_ATTN_CORE, /* rotary, QK^T, softmax, x V (and their backward) */
	OP_ATTN_RESIDUAL,
	OP_MLP_NORM,
	OP_MLP_ACT, /* SwiGLU */
	OP_MLP_RESIDUAL,
	OP_ATTN_TP_ALLGATHER,
	OP_ATTN_TP_REDUCE_SCATTER,
	OP_MLP_TP_ALLGATHER,
	OP_MLP_TP_REDUCE_SCATTER,
	BLOCK_OPS,
};

#define OP_NAME_MAX 48
typedef char op_name[OP_NAME_MAX];

/* ---- activations ---------------------------------------------------------- */

/* Sizes below: M tokens of the data-parallel group's batch (B x T), Ml =
 * M / tp of them on this rank between blocks (sequence parallel), and the
 * local widths qdim = C / tp, kvdim, F / tp of the column-parallel outputs.
 * Without TP, Ml = M and the widths are the whole ones. */
struct layer_acts {
	float *resid_mid;	/* [Ml, C] residual after attention */
	float *ln1, *ln2;	/* [M, C] normalised inputs of attention / MLP (gathered over tp) */
	float *rstd1, *rstd2;	/* [Ml] */
	float *q, *k, *v;	/* [M, qdim], [M, kvdim] x2, after rotary (q, k) */
	float *probs;		/* [B, H / tp, T, T] */
	float *att;		/* [M, qdim] attention output before o */
	float *gate, *up, *act; /* [M, F / tp] */
};

struct model {
	struct model_config cfg;
	const struct fsdp_backend *be;
	struct mem_ledger *mem;
	const struct model_tp_ops *tp; /* NULL when tp_size == 1 */
	int tp_size;
	int B, M, Ml, hd;
	int heads, kv_heads, qdim, kvdim, ffn; /* this rank's: whole / tp_size */
	float *acts; /* everything below points into it */
	size_t acts_bytes;
	int32_t *ids;  /* [2 Ml]: tokens then targets (device) */
	float **resid; /* resid[l] [Ml, C], input of block l; resid[L] input of the final norm */
	struct layer_acts *layer;
	float *lnf, *rstdf, *logits, *losses; /* [Ml, C], [Ml], [Ml, V], [Ml] */
	float *tmp;			      /* [M, C] o's or down's output (a partial sum over tp) */
	/* gradients of activations, reused by every layer */
	float *dresid, *dln, *datt, *dq, *dk, *dv, *dgate, *dup, *dact;
	/* The sequence-parallel sides of the TP collectives; with tp_size == 1
	 * they alias the buffers they would be gathered into or reduced from,
	 * so that the ops are exactly those of a model without TP. */
	float *ln_local;		/* [Ml, C] a norm's output before its gather (unused without TP) */
	float *tmp_local;		/* [Ml, C] tmp reduce-scattered (tmp without TP) */
	float *dfull;			/* [M, C] dresid gathered (dresid without TP) */
	float *dln_local;		/* [Ml, C] dln reduce-scattered (dln without TP) */
	float *host_losses;		/* [Ml] host copy for the loss sum */
	op_name (*op_names)[BLOCK_OPS]; /* [L]: the block ops' names */
};

static void *model_dev_alloc(struct model *m, enum mem_kind kind, size_t bytes)
{
	return m->mem ? mem_alloc(m->mem, kind, bytes) : m->be->alloc(bytes);
}

static void model_dev_free(struct model *m, enum mem_kind kind, void *p, size_t bytes)
{
	if (m->mem)
		mem_free(m->mem, kind, p, bytes);
	else
		m->be->free(p);
}

/* Lay the activations out from `base` (NULL: only count); returns the
 * number of floats. */
static size_t model_layout(struct model *m, float *base)
{
	size_t M = (size_t)m->M, Ml = (size_t)m->Ml, C = (size_t)m->cfg.d_model, V = (size_t)m->cfg.vocab;
	size_t Q = (size_t)m->qdim, KV = (size_t)m->kvdim, F = (size_t)m->ffn;
	size_t probs = (size_t)m->B * (size_t)m->heads * (size_t)m->cfg.seq * (size_t)m->cfg.seq;
	size_t off = 0;
#define TAKE(n) (off += (n), base ? base + (off - (n)) : NULL)
	for (int l = 0; l <= m->cfg.layers; l++)
		m->resid[l] = TAKE(Ml * C);
	for (int l = 0; l < m->cfg.layers; l++) {
		struct layer_acts *a = &m->layer[l];
		a->resid_mid = TAKE(Ml * C);
		a->ln1 = TAKE(M * C);
		a->ln2 = TAKE(M * C);
		a->rstd1 = TAKE(Ml);
		a->rstd2 = TAKE(Ml);
		a->q = TAKE(M * Q);
		a->k = TAKE(M * KV);
		a->v = TAKE(M * KV);
		a->probs = TAKE(probs);
		a->att = TAKE(M * Q);
		a->gate = TAKE(M * F);
		a->up = TAKE(M * F);
		a->act = TAKE(M * F);
	}
	m->lnf = TAKE(Ml * C);
	m->rstdf = TAKE(Ml);
	m->logits = TAKE(Ml * V);
	m->losses = TAKE(Ml);
	m->tmp = TAKE(M * C);
	m->dresid = TAKE(Ml * C);
	m->dln = TAKE(M * C);
	m->datt = TAKE(M * Q);
	m->dq = TAKE(M * Q);
	m->dk = TAKE(M * KV);
	m->dv = TAKE(M * KV);
	m->dgate = TAKE(M * F);
	m->dup = TAKE(M * F);
	m->dact = TAKE(M * F);
	if (m->tp_size > 1) {
		m->ln_local = TAKE(Ml * C);
		m->tmp_local = TAKE(Ml * C);
		m->dfull = TAKE(M * C);
		m->dln_local = TAKE(Ml * C);
	} else {
		m->ln_local = NULL;
		m->tmp_local = m->tmp;
		m->dfull = m->dresid;
		m->dln_local = m->dln;
	}
#undef TAKE
	return off;
}

struct model *model_new(const struct model_config *cfg, const struct fsdp_backend *be, int batch,
			struct mem_ledger *mem, const struct model_tp_ops *tp)
{
	int T = model_tp_size(cfg);
	if (T > 1 && (!tp || (batch * cfg->seq) % T != 0))
		return NULL;
	struct model *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	m->cfg = *cfg;
	m->be = be;
	m->mem = mem;
	m->tp = T > 1 ? tp : NULL;
	m->tp_size = T;
	m->B = batch;
	m->M = batch * cfg->seq;
	m->Ml = m->M / T;
	m->hd = cfg->d_model / cfg->heads;
	m->heads = cfg->heads / T;
	m->kv_heads = cfg->kv_heads / T;
	m->qdim = m->hd * m->heads;
	m->kvdim = m->hd * m->kv_heads;
	m->ffn = cfg->ffn / T;
	int L = cfg->layers;
	m->resid = calloc((size_t)L + 1, sizeof *m->resid);
	m->layer = calloc((size_t)L, sizeof *m->layer);
	m->host_losses = calloc((size_t)m->Ml, sizeof *m->host_losses);
	m->op_names = calloc((size_t)L, sizeof *m->op_names);
	if (!m->resid || !m->layer || !m->host_losses || !m->op_names) {
		model_free(m);
		return NULL;
	}
	m->acts_bytes = model_layout(m, NULL) * sizeof(float);
	m->acts = model_dev_alloc(m, MEM_ACTIVATION, m->acts_bytes);
	m->ids = model_dev_alloc(m, MEM_OTHER, 2 * (size_t)m->Ml * sizeof(int32_t));
	if (!m->acts || !m->ids) {
		model_free(m);
		return NULL;
	}
	model_layout(m, m->acts);
	static const char *const block_ops[BLOCK_OPS - MODEL_LINEARS] = {
	    [OP_ATTN_NORM - MODEL_LINEARS] = "attn_norm",
	    [OP_ATTN_CORE - MODEL_LINEARS] = "attn.core",
	    [OP_ATTN_RESIDUAL - MODEL_LINEARS] = "attn.residual",
	    [OP_MLP_NORM - MODEL_LINEARS] = "mlp_norm",
	    [OP_MLP_ACT - MODEL_LINEARS] = "mlp.act",
	    [OP_MLP_RESIDUAL - MODEL_LINEARS] = "mlp.residual",
	    [OP_ATTN_TP_ALLGATHER - MODEL_LINEARS] = "attn.tp_allgather",
	    [OP_ATTN_TP_REDUCE_SCATTER - MODEL_LINEARS] = "attn.tp_reduce_scatter",
	    [OP_MLP_TP_ALLGATHER - MODEL_LINEARS] = "mlp.tp_allgather",
	    [OP_MLP_TP_REDUCE_SCATTER - MODEL_LINEARS] = "mlp.tp_reduce_scatter",
	};
	for (int l = 0; l < L; l++) {
		for (int j = 0; j < MODEL_LINEARS; j++)
			snprintf(m->op_names[l][OP_LINEAR0 + j], OP_NAME_MAX, "layers.%d.%s.matmul", l, part_names[j]);
		for (int k = MODEL_LINEARS; k < BLOCK_OPS; k++)
			snprintf(m->op_names[l][k], OP_NAME_MAX, "layers.%d.%s", l, block_ops[k - MODEL_LINEARS]);
	}
	return m;
}

void model_free(struct model *m)
{
	if (!m)
		return;
	model_dev_free(m, MEM_ACTIVATION, m->acts, m->acts_bytes);
	model_dev_free(m, MEM_OTHER, m->ids, 2 * (size_t)m->Ml * sizeof(int32_t));
	free(m->resid);
	free(m->layer);
	free(m->host_losses);
	free(m->op_names);
	free(m);
}

size_t model_activation_bytes(const struct model *m)
{
	return m->acts_bytes;
}

/* ---- forward / backward --------------------------------------------------- */

#define HOOK(call)                                                                                                     \
	do {                                                                                                           \
		int hook_rc_ = (call);                                                                                 \
		if (hook_rc_ < 0)                                                                                      \
			return hook_rc_;                                                                               \
	} while (0)

static const struct model_module model_root = {-1, -1};

/* Bracket one op (see the file comment). */
static inline void op_begin(const struct model_params *p, const char *name)
{
	if (p->op_begin)
		p->op_begin(p->ctx, name);
}
static inline void op_end(const struct model_params *p)
{
	if (p->op_end)
		p->op_end(p->ctx);
}

static inline struct model_module block_module(int l)
{
	return (struct model_module){l, -1};
}
static inline struct model_module linear_module(int l, int part)
{
	return (struct model_module){l, part};
}

/* Sequence parallel to tensor parallel: every tp rank's rows local [Ml, C]
 * into full [M, C]. Nothing without TP (local is full). */
static int tp_allgather(struct model *m, const char *op, float *full, const float *local)
{
	if (m->tp_size == 1)
		return 0;
	return m->tp->allgather(m->tp->ctx, op, full, local, (size_t)m->Ml * (size_t)m->cfg.d_model);
}

/* Tensor parallel to sequence parallel: the partial sums full [M, C] of
 * every tp rank, summed, this rank's rows into local [Ml, C]. Nothing
 * without TP (full is local). */
static int tp_reduce_scatter(struct model *m, const char *op, float *local, const float *full)
{
	if (m->tp_size == 1)
		return 0;
	return m->tp->reduce_scatter(m->tp->ctx, op, local, full, (size_t)m->Ml * (size_t)m->cfg.d_model);
}

/* One linear layer's forward inside its own hooks: out = in @ W^T, over all
 * M tokens (the linears run tensor parallel). */
static int linear_forward(struct model *m, const struct model_params *p, int l, int part, float *out, const float *in,
			  int K, int N)
{
	HOOK(p->pre_forward(p->ctx, linear_module(l, part)));
	op_begin(p, m->op_names[l][OP_LINEAR0 + part]);
	m->be->matmul_forward(out, in, p->param(p->ctx, model_tensor_id(l, part)), p->dtype, m->M, K, N);
	op_end(p);
	return p->post_forward(p->ctx, linear_module(l, part));
}

static int linear_backward(struct model *m, const struct model_params *p, int l, int part, float *din,
			   const float *dout, const float *in, int K, int N, int accumulate)
{
	int id = model_tensor_id(l, part);
	HOOK(p->pre_backward(p->ctx, linear_module(l, part)));
	op_begin(p, m->op_names[l][OP_LINEAR0 + part]);
	m->be->matmul_backward(din, p->grad(p->ctx, id), dout, in, p->param(p->ctx, id), p->dtype, m->M, K, N,
			       accumulate);
	op_end(p);
	return p->post_backward(p->ctx, linear_module(l, part));
}

int model_forward(struct model *m, const struct model_params *p, const int32_t *tokens, const int32_t *targets,
		  float loss_scale, double *loss_sum)
{
	const struct fsdp_backend *be = m->be;
	const struct model_config *c = &m->cfg;
	int Ml = m->Ml, C = c->d_model, V = c->vocab, Q = m->qdim, KV = m->kvdim, F = m->ffn;
	size_t MlC = (size_t)Ml * C;
	op_begin(p, "input");
	int rc = be->memcpy_h2d(m->ids, tokens, (size_t)Ml * sizeof *tokens);
	if (rc == 0)
		rc = be->memcpy_h2d(m->ids + Ml, targets, (size_t)Ml * sizeof *targets);
	op_end(p);
	if (rc < 0)
		return rc;

	HOOK(p->pre_forward(p->ctx, model_root));
	op_begin(p, "embedding");
	be->embedding_forward(m->resid[0], m->ids, p->param(p->ctx, MODEL_TOK_EMBEDDINGS), p->dtype, Ml, C);
	op_end(p);
	for (int l = 0; l < c->layers; l++) {
		struct layer_acts *a = &m->layer[l];
		const op_name *op = m->op_names[l];
		/* the norms run on this rank's tokens, the linears on all of them */
		float *ln1_local = m->tp_size > 1 ? m->ln_local : a->ln1;
		float *ln2_local = m->tp_size > 1 ? m->ln_local : a->ln2;
		HOOK(p->pre_forward(p->ctx, block_module(l)));
		op_begin(p, op[OP_ATTN_NORM]);
		be->rmsnorm_forward(ln1_local, a->rstd1, m->resid[l],
				    p->param(p->ctx, model_tensor_id(l, MODEL_PART_ATTN_NORM)), p->dtype, Ml, C,
				    c->norm_eps);
		op_end(p);
		HOOK(tp_allgather(m, op[OP_ATTN_TP_ALLGATHER], a->ln1, ln1_local));
		HOOK(linear_forward(m, p, l, MODEL_PART_Q, a->q, a->ln1, C, Q));
		HOOK(linear_forward(m, p, l, MODEL_PART_K, a->k, a->ln1, C, KV));
		HOOK(linear_forward(m, p, l, MODEL_PART_V, a->v, a->ln1, C, KV));
		op_begin(p, op[OP_ATTN_CORE]);
		be->rope_forward(a->q, m->B, c->seq, m->heads, m->hd, c->rope_theta);
		be->rope_forward(a->k, m->B, c->seq, m->kv_heads, m->hd, c->rope_theta);
		be->attention_forward(a->att, a->probs, a->q, a->k, a->v, m->B, c->seq, m->heads, m->kv_heads, m->hd);
		op_end(p);
		HOOK(linear_forward(m, p, l, MODEL_PART_O, m->tmp, a->att, Q, C));
		HOOK(tp_reduce_scatter(m, op[OP_ATTN_TP_REDUCE_SCATTER], m->tmp_local, m->tmp));
		op_begin(p, op[OP_ATTN_RESIDUAL]);
		rc = be->memcpy_d2d(a->resid_mid, m->resid[l], MlC * sizeof(float));
		if (rc == 0)
			be->residual_add(a->resid_mid, m->tmp_local, MlC);
		op_end(p);
		if (rc < 0)
			return rc;
		op_begin(p, op[OP_MLP_NORM]);
		be->rmsnorm_forward(ln2_local, a->rstd2, a->resid_mid,
				    p->param(p->ctx, model_tensor_id(l, MODEL_PART_MLP_NORM)), p->dtype, Ml, C,
				    c->norm_eps);
		op_end(p);
		HOOK(tp_allgather(m, op[OP_MLP_TP_ALLGATHER], a->ln2, ln2_local));
		HOOK(linear_forward(m, p, l, MODEL_PART_GATE, a->gate, a->ln2, C, F));
		HOOK(linear_forward(m, p, l, MODEL_PART_UP, a->up, a->ln2, C, F));
		op_begin(p, op[OP_MLP_ACT]);
		be->swiglu_forward(a->act, a->gate, a->up, (size_t)m->M * F);
		op_end(p);
		HOOK(linear_forward(m, p, l, MODEL_PART_DOWN, m->tmp, a->act, F, C));
		HOOK(tp_reduce_scatter(m, op[OP_MLP_TP_REDUCE_SCATTER], m->tmp_local, m->tmp));
		op_begin(p, op[OP_MLP_RESIDUAL]);
		rc = be->memcpy_d2d(m->resid[l + 1], a->resid_mid, MlC * sizeof(float));
		if (rc == 0)
			be->residual_add(m->resid[l + 1], m->tmp_local, MlC);
		op_end(p);
		if (rc < 0)
			return rc;
		HOOK(p->post_forward(p->ctx, block_module(l)));
	}
	op_begin(p, "final_norm");
	be->rmsnorm_forward(m->lnf, m->rstdf, m->resid[c->layers], p->param(p->ctx, MODEL_FINAL_NORM), p->dtype, Ml, C,
			    c->norm_eps);
	op_end(p);
	op_begin(p, "head");
	be->matmul_forward(m->logits, m->lnf, p->param(p->ctx, MODEL_OUTPUT), p->dtype, Ml, C, V);
	op_end(p);
	/* dlogits replace the logits in place: the backward needs only them. */
	op_begin(p, "loss");
	be->crossentropy(m->losses, m->logits, m->logits, m->ids + Ml, Ml, V, loss_scale);
	op_end(p);
	HOOK(p->post_forward(p->ctx, model_root));
	if (loss_sum) {
		op_begin(p, "loss_sum");
		rc = be->memcpy_d2h(m->host_losses, m->losses, (size_t)Ml * sizeof(float));
		double s = 0.0;
		for (int i = 0; rc == 0 && i < Ml; i++)
			s += m->host_losses[i];
		op_end(p);
		if (rc < 0)
			return rc;
		*loss_sum = s;
	}
	return 0;
}

int model_backward(struct model *m, const struct model_params *p)
{
	const struct fsdp_backend *be = m->be;
	const struct model_config *c = &m->cfg;
	int Ml = m->Ml, C = c->d_model, V = c->vocab, Q = m->qdim, KV = m->kvdim, F = m->ffn;

	HOOK(p->pre_backward(p->ctx, model_root));
	op_begin(p, "head");
	be->matmul_backward(m->dln_local, p->grad(p->ctx, MODEL_OUTPUT), m->logits, m->lnf,
			    p->param(p->ctx, MODEL_OUTPUT), p->dtype, Ml, C, V, 0);
	op_end(p);
	op_begin(p, "final_norm");
	int rc = be->memset_zero(m->dresid, (size_t)Ml * C * sizeof(float));
	if (rc == 0)
		be->rmsnorm_backward(m->dresid, p->grad(p->ctx, MODEL_FINAL_NORM), m->dln_local, m->resid[c->layers],
				     p->param(p->ctx, MODEL_FINAL_NORM), p->dtype, m->rstdf, Ml, C);
	op_end(p);
	if (rc < 0)
		return rc;
	for (int l = c->layers - 1; l >= 0; l--) {
		struct layer_acts *a = &m->layer[l];
		const op_name *op = m->op_names[l];
		HOOK(p->pre_backward(p->ctx, block_module(l)));
		/* MLP: dresid holds d(resid[l+1]), which is also d(down output). The
		 * residual adds have no backward op of their own: the norms'
		 * backward accumulates into dresid. With TP the backward of a
		 * reduce-scatter is a gather (dfull) and that of a gather a
		 * reduce-scatter (dln_local). */
		HOOK(tp_allgather(m, op[OP_MLP_TP_ALLGATHER], m->dfull, m->dresid));
		HOOK(linear_backward(m, p, l, MODEL_PART_DOWN, m->dact, m->dfull, a->act, F, C, 0));
		op_begin(p, op[OP_MLP_ACT]);
		be->swiglu_backward(m->dgate, m->dup, m->dact, a->gate, a->up, (size_t)m->M * F);
		op_end(p);
		HOOK(linear_backward(m, p, l, MODEL_PART_UP, m->dln, m->dup, a->ln2, C, F, 0));
		HOOK(linear_backward(m, p, l, MODEL_PART_GATE, m->dln, m->dgate, a->ln2, C, F, 1));
		HOOK(tp_reduce_scatter(m, op[OP_MLP_TP_REDUCE_SCATTER], m->dln_local, m->dln));
		int id = model_tensor_id(l, MODEL_PART_MLP_NORM);
		op_begin(p, op[OP_MLP_NORM]);
		be->rmsnorm_backward(m->dresid, p->grad(p->ctx, id), m->dln_local, a->resid_mid, p->param(p->ctx, id),
				     p->dtype, a->rstd2, Ml, C);
		op_end(p);
		/* attention: dresid now holds d(resid_mid) = d(o output). */
		HOOK(tp_allgather(m, op[OP_ATTN_TP_ALLGATHER], m->dfull, m->dresid));
		HOOK(linear_backward(m, p, l, MODEL_PART_O, m->datt, m->dfull, a->att, Q, C, 0));
		op_begin(p, op[OP_ATTN_CORE]);
		be->attention_backward(m->dq, m->dk, m->dv, m->datt, a->q, a->k, a->v, a->probs, m->B, c->seq, m->heads,
				       m->kv_heads, m->hd);
		be->rope_backward(m->dq, m->B, c->seq, m->heads, m->hd, c->rope_theta);
		be->rope_backward(m->dk, m->B, c->seq, m->kv_heads, m->hd, c->rope_theta);
		op_end(p);
		HOOK(linear_backward(m, p, l, MODEL_PART_V, m->dln, m->dv, a->ln1, C, KV, 0));
		HOOK(linear_backward(m, p, l, MODEL_PART_K, m->dln, m->dk, a->ln1, C, KV, 1));
		HOOK(linear_backward(m, p, l, MODEL_PART_Q, m->dln, m->dq, a->ln1, C, Q, 1));
		HOOK(tp_reduce_scatter(m, op[OP_ATTN_TP_REDUCE_SCATTER], m->dln_local, m->dln));
		id = model_tensor_id(l, MODEL_PART_ATTN_NORM);
		op_begin(p, op[OP_ATTN_NORM]);
		be->rmsnorm_backward(m->dresid, p->grad(p->ctx, id), m->dln_local, m->resid[l], p->param(p->ctx, id),
				     p->dtype, a->rstd1, Ml, C);
		op_end(p);
		HOOK(p->post_backward(p->ctx, block_module(l)));
	}
	op_begin(p, "embedding");
	be->embedding_backward(p->grad(p->ctx, MODEL_TOK_EMBEDDINGS), m->dresid, m->ids, Ml, C, V);
	op_end(p);
	return p->post_backward(p->ctx, model_root);
}
