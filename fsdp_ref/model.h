/* fsdp_ref/model.h: a Llama-shaped decoder, forward and backward, over any
 * backend.
 *
 * token embedding -> L x [RMSNorm -> attention (q, k, v, o; grouped kv heads,
 * rotary positions, causal) -> residual -> RMSNorm -> gated MLP (gate, up,
 * down; SwiGLU) -> residual] -> RMSNorm -> output head -> softmax cross-entropy.
 *
 * The model does not own its parameters. It asks a provider (struct
 * model_params) for the pointer to each tensor and its gradient, and tells
 * it when each module's forward and backward begin and end; the FSDP runtime
 * is one provider (it gathers units in those hooks), the gradient-check test
 * is another (one fp32 buffer, no hooks). The sequence of ops is the same
 * whatever the provider does, which is what makes loss trajectories
 * independent of the wrap policy.
 *
 * Tensor parallelism (cfg->tp = T > 1, Megatron-style with sequence
 * parallelism): the model holds the TP-local tensors (model_tensors), keeps
 * 1/T of the tokens between blocks (embedding, norms, residuals, head and
 * loss run on them), and around each block's attention and MLP gathers the
 * normalised tokens before the column-parallel linears and reduce-scatters
 * the row-parallel output after them (mirrored in backward), through the
 * collectives of struct model_tp_ops. The replicated tensors' gradients are
 * then partial sums over the token shards: the provider sums them. */
#ifndef FSDP_REF_MODEL_H
#define FSDP_REF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "fsdp_ref/backend.h"

struct mem_ledger;

struct model_config {
	int vocab;	  /* V */
	int layers;	  /* L */
	int d_model;	  /* C */
	int ffn;	  /* F, hidden size of the gated MLP */
	int heads;	  /* H query heads; head dim = C / H (even) */
	int kv_heads;	  /* KH, divides H */
	int seq;	  /* T, tokens per sequence */
	float rope_theta; /* rotary base, 10000 */
	float norm_eps;	  /* RMSNorm epsilon, 1e-5 */
	int tp;		  /* tensor-parallel degree T (0 or 1: none): this rank holds 1/T of
			     every block's heads, kv heads and MLP hidden units, and 1/T of
			     the tokens between blocks (sequence parallel) */
};

/* T of `cfg`, at least 1. */
static inline int model_tp_size(const struct model_config *cfg)
{
	return cfg->tp > 1 ? cfg->tp : 1;
}

/* Parts of a block; the first seven are the linears, in forward order. */
enum model_part {
	MODEL_PART_Q = 0,
	MODEL_PART_K,
	MODEL_PART_V,
	MODEL_PART_O,
	MODEL_PART_GATE,
	MODEL_PART_UP,
	MODEL_PART_DOWN,
	MODEL_PART_ATTN_NORM,
	MODEL_PART_MLP_NORM,
	MODEL_PARTS,
};
#define MODEL_LINEARS 7

/* Root tensors (ids 0..2); block tensors follow, MODEL_PARTS per layer. */
enum model_root_tensor { MODEL_TOK_EMBEDDINGS = 0, MODEL_FINAL_NORM, MODEL_OUTPUT, MODEL_ROOT_TENSORS };

/* A module the hooks name: the model itself (layer -1), a block (part -1) or
 * one linear of a block (part < MODEL_LINEARS). */
struct model_module {
	int layer;
	int part;
};

/* Module index used by tables: model 0, block l at 1 + 8 l, linear j of
 * block l at 2 + 8 l + j. model_modules(cfg) of them. */
static inline int model_module_index(struct model_module m)
{
	if (m.layer < 0)
		return 0;
	return 1 + m.layer * (MODEL_LINEARS + 1) + (m.part < 0 ? 0 : 1 + m.part);
}
static inline int model_modules(const struct model_config *cfg)
{
	return 1 + cfg->layers * (MODEL_LINEARS + 1);
}

/* How tensor parallelism cuts a tensor over the T ranks of a TP group
 * (Megatron's column- and row-parallel linears). */
enum model_tp_split {
	MODEL_TP_REPLICATED = 0, /* every tp rank holds all of it: norms, the root's tensors */
	MODEL_TP_ROWS,		 /* column-parallel linear [out, in]: rank r holds output rows
				    [r out/T, (r+1) out/T), contiguous (q, k, v by heads; gate, up) */
	MODEL_TP_COLS,		 /* row-parallel linear [out, in]: rank r holds input columns
				    [r in/T, (r+1) in/T) of every row (o, down) */
};

/* One parameter tensor, as one rank of its TP group holds it. */
struct model_tensor {
	char name[48]; /* "tok_embeddings", "layers.3.attn.q", "layers.3.mlp_norm", ... */
	size_t numel;  /* elements this rank holds: rows x cols / T when split, else rows x cols */
	int layer;     /* -1 for root tensors */
	int part;      /* enum model_part, or enum model_root_tensor for root */
	int fan_in;    /* input features of the whole tensor (for initialisation); 0 for norms */
	enum model_tp_split split;
	size_t rows, cols; /* the whole tensor's shape ([out, in]; norms [1, C]) */
};

/* Number of tensors: 3 + MODEL_PARTS * L. */
int model_tensor_count(const struct model_config *cfg);
/* Tensor id of part `part` of block `layer`. */
static inline int model_tensor_id(int layer, int part)
{
	return MODEL_ROOT_TENSORS + layer * MODEL_PARTS + part;
}
/* Fill out[0 .. model_tensor_count-1] (TP-local sizes when cfg->tp > 1). */
void model_tensors(const struct model_config *cfg, struct model_tensor *out);
/* Total parameter count of the whole model (whatever cfg->tp). */
size_t model_param_count(const struct model_config *cfg);
/* Check the shape constraints (T dividing the heads, kv heads and ffn
 * included); 0 or -EINVAL with a message in err. */
int model_config_check(const struct model_config *cfg, char *err, size_t errlen);

/* The index in the whole tensor (row-major [rows, cols]) of element
 * `local_index` of tp rank `tp_rank`'s part of `t` (tp size
 * model_tp_size(cfg)); the identity for replicated tensors and T = 1. */
size_t model_tensor_global_index(const struct model_config *cfg, const struct model_tensor *t, int tp_rank,
				 size_t local_index);

/* Deterministic initial value of element `index` of the whole tensor `t`:
 * depends only on (seed, tensor id, index), never on how tensors are laid
 * out in units or cut over tp ranks (pass model_tensor_global_index), so
 * every wrap policy, rank count and --tp starts from the same weights. */
float model_init_value(const struct model_config *cfg, const struct model_tensor *t, int tensor_id, size_t index,
		       uint64_t seed);

/* Where parameters come from (see the file comment). Hooks return 0 or a
 * negative errno, which aborts the pass. */
struct model_params {
	void *ctx;
	enum fsdp_dtype dtype; /* dtype of the tensors param() returns */
	/* Device pointer to tensor `id`'s values; valid between the owning
	 * module's pre and post hooks. */
	const void *(*param)(void *ctx, int id);
	/* Device fp32 pointer where the backward writes tensor `id`'s gradient
	 * (overwritten, not accumulated); valid inside the backward hooks. */
	float *(*grad)(void *ctx, int id);
	int (*pre_forward)(void *ctx, struct model_module m);
	int (*post_forward)(void *ctx, struct model_module m);
	int (*pre_backward)(void *ctx, struct model_module m);
	int (*post_backward)(void *ctx, struct model_module m);
	/* Optional (NULL: not called): the model brackets every op it runs with
	 * op_begin / op_end (names such as "layers.3.attn.core"); the FSDP runtime turns
	 * them into NVTX leaf ranges (docs/fsdp_ref.md, "NVTX ranges"). They nest
	 * inside the module hooks and never around one. */
	void (*op_begin)(void *ctx, const char *name);
	void (*op_end)(void *ctx);
};

/* The tensor-parallel collectives the model issues when cfg->tp > 1, on
 * fp32 device buffers, over the T ranks of its TP group in tp-rank order
 * (tp.h implements them on the TP communicator). Blocking: when a call
 * returns 0 its output is ready for the next compute op. `op` names the NVTX
 * leaf range around issuing it ("layers.3.attn.tp_allgather"); the wait that
 * follows is outside every leaf range, like a gather wait. 0 or -errno. */
struct model_tp_ops {
	void *ctx;
	/* out[T n]: every tp rank's in[n], concatenated in tp-rank order. */
	int (*allgather)(void *ctx, const char *op, float *out, const float *in, size_t n);
	/* out[n] = sum over the tp ranks of their in[r n .. (r+1) n), r this
	 * rank's index. */
	int (*reduce_scatter)(void *ctx, const char *op, float *out, const float *in, size_t n);
};

struct model;

/* A model for `batch` sequences of this rank's data-parallel group:
 * allocates its activation buffers (through the ledger `mem`, kind
 * MEM_ACTIVATION, when non-NULL, else straight from the backend). With
 * cfg->tp = T > 1 it computes its part of the heads and hidden units for
 * all batch x seq tokens and everything else on its 1/T of the tokens
 * (T must divide batch x seq), through `tp` (kept, not copied: it must
 * outlive the model); `tp` is unused and may be NULL when T = 1. NULL on
 * failure. */
struct model *model_new(const struct model_config *cfg, const struct fsdp_backend *be, int batch,
			struct mem_ledger *mem, const struct model_tp_ops *tp);
void model_free(struct model *m);

/* Forward pass over tokens/targets (host arrays of this rank's tokens:
 * [batch * seq / T], tp rank r's contiguous r-th 1/T of the group's
 * batch x seq), with the loss gradient seeded for backward:
 * dlogits = dL/dlogits with L = sum of token losses * loss_scale. Returns 0
 * or -errno; *loss_sum (may be NULL) receives the sum of this rank's token
 * losses, summed in double in token order. */
int model_forward(struct model *m, const struct model_params *p, const int32_t *tokens, const int32_t *targets,
		  float loss_scale, double *loss_sum);

/* Backward pass after model_forward: writes every tensor's gradient through
 * p->grad. 0 or -errno. */
int model_backward(struct model *m, const struct model_params *p);

/* Bytes of activation memory the model allocated. */
size_t model_activation_bytes(const struct model *m);

#endif /* FSDP_REF_MODEL_H */
