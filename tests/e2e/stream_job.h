/*
 * tests/e2e/stream_job.h - what the setups of stream_job share: the model,
 * the options, the job (communicators, buffers, issuing, bookkeeping) and
 * the truth (stream_job.c says what the program is; stream_job.md what each
 * setup issues and from which sources).
 */
#ifndef FSS_TESTS_STREAM_JOB_H
#define FSS_TESTS_STREAM_JOB_H

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#ifdef STREAM_JOB_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

/* ---- the model -------------------------------------------------------------
 * A Llama-like decoder, small but in proportion: a block is two RMSNorms and
 * seven Linears (q, k, v, o; gate = w1, down = w2, up = w3 in torchtitan's
 * names); the embedding and the output head are each bigger than a block's
 * largest Linear and together bigger than a block. */
#define SJ_HIDDEN 256  /* d_model */
#define SJ_FFN 768     /* Llama's 8/3 d_model, rounded up to a multiple of 256 */
#define SJ_VOCAB 2048
#define SJ_SEQ 256     /* tokens per sequence */
#define SJ_BATCH 2     /* sequences per micro-batch and data-parallel rank */

enum sj_tp_style {
	TP_REPLICATE = 0, /* the whole tensor on every TP rank (norm weights) */
	TP_COLWISE = 1,   /* dim 0 split over TP (ColwiseParallel; RowwiseParallel on an embedding) */
	TP_ROWWISE = 2,   /* dim 1 split over TP (RowwiseParallel) */
};

struct sj_param {
	const char *name;
	size_t rows, cols;      /* cols = 1 for a vector */
	enum sj_tp_style style;
	int norm;               /* a SequenceParallel norm weight: its gradient is Partial on tp */
};

/* One block, in module.parameters() order of torchtitan's TransformerBlock. */
extern const struct sj_param sj_block_params[];
enum { BP_WQ, BP_WK, BP_WV, BP_WO, BP_W1, BP_W2, BP_W3, BP_ATTN_NORM, BP_FFN_NORM, BP_COUNT };
extern const struct sj_param sj_tok_embeddings, sj_final_norm, sj_output;

static inline size_t sj_ceil_div(size_t a, size_t b)
{
	return (a + b - 1) / b;
}

/* ---- options ---------------------------------------------------------------- */

enum sj_setup {
	SETUP_FSDP2, SETUP_TP, SETUP_FSDP1_HSDP, SETUP_ZERO3, SETUP_PP,
	SETUP_DPO, SETUP_DISTILL, SETUP_RL, SETUP_DDP_FSDP, /* stream_job_models.c, stream_job_ddp.c */
	SETUP_CP, SETUP_ULYSSES, SETUP_MOE,                 /* stream_job_cp.c, stream_job_moe.c */
	/* FSDP2 variants (stream_job_fsdp2_variants.c) */
	SETUP_FLOAT8, SETUP_LORA, SETUP_FROZEN, SETUP_DEFERRED, SETUP_SIMPLEFSDP,
};

enum sj_checkpoint { CKPT_NONE = 0, CKPT_REENTRANT = 1, CKPT_NO_REENTRANT = 2 };

struct sj_options {
	enum sj_setup setup;
	const char *setup_name;
	int nranks, steps, layers;
	int wrap_linear;
	int nvtx;
	const char *truth_path, *log_path;
	long compute_us; /* busy wait per emulated matmul */
	/* fsdp2 (and tp) */
	int accum, no_sync, clip, torchtitan, reshard_last_block;
	/* tp */
	int tp, loss_parallel;
	/* fsdp1-hsdp */
	int shard, sync_module_states;
	enum sj_checkpoint checkpoint;
	/* zero3 (DeepSpeed config names in stream_job.md) */
	long bucket, persistence, max_reuse, max_live, reduce_bucket;
	int gather_coalesced, init_broadcast;
	/* pp */
	int pp, microbatches;
	/* FSDP2 variants (stream_job_fsdp2_variants.c, stream_job.md) */
	int nccl_fp8, float8_dynamic;              /* float8 */
	int lora_rank;                             /* lora */
	int frozen_blocks, frozen_embeddings, frozen_root; /* frozen */
	int keep_after_forward;                    /* deferred: reshard_after_forward=False */
	int schedule[16], nschedule;               /* deferred: micro-batches of step s: schedule[s % n] */
	int bucket_blocks;                         /* simplefsdp */
	/* zero3: ZeRO++ (zero_quantized_weights, zero_hpz_partition_size,
	 * zero_quantized_gradients; 0: off) */
	int qwz, hpz, qgz;
	/* two models in a step, weight sync, DDP beside FSDP, TP with a changing
	 * sequence, interleaved pipeline stages (stream_job_models.c,
	 * stream_job_ddp.c, stream_job_fsdp2.c, stream_job_pp.c) */
	int ref_wrap_model;      /* dpo: the reference model is one unit (TRL's prepare_fsdp under FSDP2) */
	int sync_every;          /* rl: weight sync to the rollout engine before every N-th step */
	int log_probs;           /* rl: a forward-only log-prob pass in each step */
	int block_reshard;       /* ddp-fsdp: fully_shard(block, reshard_after_forward=True) */
	int seq_lens[8], nseq;   /* tp: tokens per sequence, step by step (cycled) */
	int virtual_stages;      /* pp: model chunks per rank (ScheduleInterleaved1F1B) */
	/* cp (stream_job_cp.c): --cp C, --attention flex|sdpa, --rotate allgather|alltoall */
	int cp, attention_sdpa, rotate_alltoall;
	/* ulysses (stream_job_cp.c): --sp S */
	int sp;
	/* moe (stream_job_moe.c): --ep E, --experts X */
	int ep, experts;
};


/* ---- the job ----------------------------------------------------------------- */

enum sj_role {
	ROLE_FSDP,
	ROLE_FSDP_REGATHER,
	ROLE_REPLICATE,
	ROLE_TENSOR_PARALLEL,
	ROLE_PIPELINE,
	ROLE_STEP,
	ROLE_ALLREDUCE,
	ROLE_ONE_OFF,
	ROLE_CONTEXT_PARALLEL,
	ROLE_ALL_TO_ALL,
	ROLE_EXPERT_PARALLEL,
	ROLE_COUNT
};
extern const char *const sj_role_names[ROLE_COUNT];

/* Classes of events, as report --json counts a communicator's per step
 * (a ncclGroupStart/End group counts once per class on a communicator). */
enum sj_event_class { EV_ALLGATHER, EV_REDUCE_SCATTER, EV_ALLREDUCE, EV_BROADCAST, EV_P2P, EV_ALLTOALL, EV_CLASSES };

struct sj_comm {
	ncclComm_t nccl;
	int nranks, rank;
	enum sj_role role; /* what the setup uses it for */
	const char *name;  /* for the log: "world", "dp", "tp", ... */
	uint64_t calls;    /* calls issued on it, set-up included */
	int cur[EV_CLASSES], last[EV_CLASSES]; /* events of this step, of the previous step */
	unsigned group_seen;                   /* classes already counted in the open group */
};

/* What a call is, for the truth. */
enum sj_kind {
	KIND_OTHER = 0,
	KIND_PARAM_FORWARD,  /* parameter gather of the forward (FSDP group) */
	KIND_PARAM_BACKWARD, /* parameter gather of the backward */
	KIND_PARAM_STEP,     /* parameter gather outside forward / backward (ZeRO-3's persistent params) */
	KIND_GRAD,           /* gradient ReduceScatter on the FSDP group */
};

/* Counts of one optimizer step (set-up excluded). */
struct sj_tally {
	int param_gathers;      /* parameter-gather events (a group counts once) */
	int param_gather_calls; /* their ncclAllGather calls */
	int forward_gathers, backward_gathers;
	int grad_reduce_scatters;
	int step_marks;         /* collectives issued once per optimizer step (clip norm) */
};

#define SJ_MAX_COMMS 8
/* Virtual size of each buffer arena; pages are touched only as used. */
#define SJ_ARENA_BYTES ((size_t)512 << 20)

struct sj_job {
	const struct sj_options *opt;
	int rank, world;
	ncclUniqueId id;
	struct sj_comm comms[SJ_MAX_COMMS];
	int ncomms;
	char *send_arena, *recv_arena;
	size_t send_used, recv_used;
	int in_group;
	int group_param_calls;    /* parameter AllGathers queued in the open group */
	enum sj_kind group_kind;
	int step;                 /* optimizer step being issued; -1 during set-up */
	const char *phase;        /* for the log */
	struct sj_tally cur, last; /* this step, the previous step */
	FILE *log;
};

#define SJ_NULL (-1)

struct sj_truth {
	int bucketed;
	int fsdp_allgathers, forward_allgathers, backward_allgathers; /* SJ_NULL: null */
	int reduce_scatters;
	int microbatches, microbatches_told;
	int repeating_units, gathers_per_unit;
	char reshard[32]; /* "" = null */
	int wrap_too_fine;
	int tp_degree;
	int fetches, calls;
	uint64_t params;
	char note[768];
	char extra[2048]; /* more keys of a setup ("key": value lines, sj_truth_extra) */
};

/* ---- the job's calls (stream_job_core.c) --------------------------------------- */

extern int sj_rank_for_messages;
void sj_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void sj_note(struct sj_truth *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* sj_truth_extra - one more key of the truth: fmt makes `"key": value`
 * (value already JSON). */
void sj_truth_extra(struct sj_truth *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* sj_count_event - an event of class cls on c, in this step's per-communicator
 * counts (every call function counts its own; a setup issuing NCCL itself
 * calls it). */
void sj_count_event(struct sj_job *j, struct sj_comm *c, enum sj_event_class cls);
void sj_nccl(ncclResult_t res, const char *what);
uint64_t sj_now_ns(void);
const char *sj_dtype_name(ncclDataType_t dt);
size_t sj_dtype_size(ncclDataType_t dt);
void *sj_take(struct sj_job *j, int recv, size_t bytes);
void sj_before_call(struct sj_job *j, struct sj_comm *c);
void sj_log(struct sj_job *j, const struct sj_comm *c, const char *op, size_t count, ncclDataType_t dt,
		   const char *extra);
void sj_count_gather(struct sj_job *j, enum sj_kind kind);
void sj_allgather(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, enum sj_kind kind);
void sj_reduce_scatter(struct sj_job *j, struct sj_comm *c, size_t recvcount, ncclDataType_t dt,
			      enum sj_kind kind);
void sj_allreduce(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, ncclRedOp_t op,
			 int step_mark);
void sj_broadcast(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, int root);
void sj_send(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, int peer);
void sj_recv(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, int peer);
void sj_group_start(struct sj_job *j);
void sj_group_end(struct sj_job *j);
void sj_compute(const struct sj_job *j, int matmuls);
struct sj_comm *sj_comm_slot(struct sj_job *j, enum sj_role role, const char *name);
void sj_comm_describe(struct sj_comm *c);
struct sj_comm *sj_comm_world(struct sj_job *j, enum sj_role role, const char *name);
struct sj_comm *sj_comm_split(struct sj_job *j, struct sj_comm *parent, int color, enum sj_role role,
				     const char *name);
void sj_step_begin(struct sj_job *j, int step);
void sj_step_end(struct sj_job *j);
void sj_truth_init(struct sj_truth *t);
void sj_json_int(FILE *f, const char *key, int v, int last);
void sj_json_string(FILE *f, const char *key, const char *v, int last);
void sj_truth_write(const struct sj_job *j, const struct sj_truth *t);
/* sj_alltoall - one all_to_all as PyTorch issues it over NCCL without
 * ncclAlltoAll (torch/csrc/cuda/nccl.cpp all2all*, NCCL < 2.28): one
 * ncclGroupStart/End holding, for every rank r of c in order (itself
 * included), a Send of send[r] and a Recv of recv[r] elements, zero
 * counts included. Not inside an open group. */
void sj_alltoall(struct sj_job *j, struct sj_comm *c, const size_t *send, const size_t *recv, ncclDataType_t dt);

/* ---- FSDP2 (stream_job_fsdp2.c), which tp and pp build on ---------------------- */

/* ---- FSDP2 (torch/distributed/fsdp/_fully_shard) ---------------------------
 * One unit = one fully_shard call = one FSDPParamGroup: one AllGather of the
 * concatenated padded dim-0 shards, one ReduceScatter of the gradients. The
 * hooks below follow FSDPParamGroup.pre_forward / post_forward /
 * pre_backward (+ _backward_prefetch) / post_backward. */

struct sj_unit {
	char name[48];
	int block;           /* block index, -1 outside the repeating blocks */
	size_t gather_count; /* AllGather send count per rank: sum of ceil(dim0 / dp) x rest */
	size_t local_params; /* parameters this TP rank holds of the unit */
	int norm_params;     /* SequenceParallel norm weights: one tp AllReduce each in post-backward */
	int has_params;      /* 0: fully_shard of a module whose parameters all went to other units */
	int root;            /* the root unit (reshard_after_forward=None: kept) */
	int reshard;         /* reshard_after_forward */
	/* runtime */
	int unsharded;
	int post_forward_index;
	/* bookkeeping of the current step */
	int forward_gathers, backward_gathers;
	/* what the unit moves: the gather's dtype and send count (bytes as
	 * ncclUint8 when its parameters' gather dtypes differ), and the
	 * ReduceScatter's count: the padded shards of the parameters that get
	 * a gradient (0: none, no ReduceScatter) */
	ncclDataType_t gather_dtype;
	size_t gather_send, reduce_count;
	int float8_weights; /* float8 weights: one amax AllReduce each before a gather with dynamic scaling */
	int reduce_scatters; /* of the current step */
};

struct sj_fsdp2 {
	struct sj_job *job;
	struct sj_comm *comm; /* the FSDP shard group */
	struct sj_comm *tp;   /* the tensor-parallel group, NULL without TP */
	int dp, tp_degree;
	int wrap_linear;
	struct sj_unit *units;
	int nunits, cap;
	int *block_first;     /* [layers]: index of the block's first unit, -1 when not on this rank */
	int *post_forward_order;
	int npost, post_cap;
	int forward_prefetch;      /* set_modules_to_forward_prefetch([next unit]) */
	int reduce_grads;          /* set_requires_gradient_sync */
	int reshard_after_backward;/* set_reshard_after_backward */
	size_t activation_count;   /* TP: sequence-parallel activation elements per rank, B x S/T x H */
	uint64_t model_params;     /* P: every unit's parameters, all TP shards together */
	int not_primary;           /* a second FSDP group (MoE experts): its calls are KIND_OTHER */
	int float8_dynamic_amax;   /* torchao's dynamic scaling: amax AllReduces before each gather */
	ncclDataType_t reduce_dtype; /* MixedPrecisionPolicy.reduce_dtype (fp32), or the parameters' dtype */
};
void fsdp2_init(struct sj_fsdp2 *f, struct sj_job *j, struct sj_comm *comm, struct sj_comm *tp, int max_units,
		       int forwards_per_backward);
void fsdp2_free(struct sj_fsdp2 *f);
int fsdp2_add_unit(struct sj_fsdp2 *f, const char *name, int block, const struct sj_param *const *params,
			  int nparams, int reshard);
void fsdp2_add_block(struct sj_fsdp2 *f, int b, int reshard);
void fsdp2_gather(struct sj_fsdp2 *f, struct sj_unit *u, int backward);
void fsdp2_pre_forward(struct sj_fsdp2 *f, int ui);
void fsdp2_post_forward(struct sj_fsdp2 *f, int ui);
void fsdp2_pre_backward(struct sj_fsdp2 *f, int ui);
void fsdp2_post_backward(struct sj_fsdp2 *f, int ui);
void fsdp2_end_backward(struct sj_fsdp2 *f);
void tp_gather(struct sj_fsdp2 *f);
void tp_reduce_scatter(struct sj_fsdp2 *f);
void fsdp2_linear_forward(struct sj_fsdp2 *f, int ui);
void fsdp2_linear_backward(struct sj_fsdp2 *f, int ui);
void fsdp2_block_forward(struct sj_fsdp2 *f, int b);
void fsdp2_block_backward(struct sj_fsdp2 *f, int b);
void fsdp2_step_reset(struct sj_fsdp2 *f);
void fsdp2_truth(const struct sj_fsdp2 *f, struct sj_truth *t, int cycles);

/* ---- the setups ---------------------------------------------------------------- */

void run_fsdp2(struct sj_job *j, struct sj_truth *t);
void run_tp(struct sj_job *j, struct sj_truth *t);
void run_pp(struct sj_job *j, struct sj_truth *t);
void run_fsdp1_hsdp(struct sj_job *j, struct sj_truth *t);
void run_zero3(struct sj_job *j, struct sj_truth *t);
void run_dpo(struct sj_job *j, struct sj_truth *t);
void run_distill(struct sj_job *j, struct sj_truth *t);
void run_rl(struct sj_job *j, struct sj_truth *t);
void run_ddp_fsdp(struct sj_job *j, struct sj_truth *t);
void run_cp(struct sj_job *j, struct sj_truth *t);
void run_ulysses(struct sj_job *j, struct sj_truth *t);
void run_moe(struct sj_job *j, struct sj_truth *t);
void run_float8(struct sj_job *j, struct sj_truth *t);
void run_lora(struct sj_job *j, struct sj_truth *t);
void run_frozen(struct sj_job *j, struct sj_truth *t);
void run_deferred(struct sj_job *j, struct sj_truth *t);
void run_simplefsdp(struct sj_job *j, struct sj_truth *t);
/* sj_variant_options_check - dies when an option of the FSDP2 variants
 * does not apply to the setup (stream_job_fsdp2_variants.c). */
void sj_variant_options_check(const struct sj_options *o);

#endif
