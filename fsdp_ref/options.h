/* fsdp_ref/options.h: the trainer's flags (docs/fsdp_ref.md lists them). */
#ifndef FSDP_REF_OPTIONS_H
#define FSDP_REF_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fsdp_ref/backend.h"
#include "fsdp_ref/model.h"

/* --style: whose collective stream the runtime issues. */
enum fsdp_style {
	FSDP_STYLE_FSDP2 = 0, /* torch fully_shard: forward and backward prefetch */
	FSDP_STYLE_FSDP1 = 1, /* FullyShardedDataParallel: FlatParameter per unit, BACKWARD_PRE,
				 forward prefetch only with --forward-prefetch */
	FSDP_STYLE_ZERO3 = 2, /* DeepSpeed ZeRO-3: fetch buckets (--bucket), reduce buckets */
};

/* "fsdp2", "fsdp1", "zero3". */
const char *fsdp_style_name(enum fsdp_style s);

struct fsdp_options {
	const char *backend;	      /* --backend cpu|cuda (NULL: the executable's own) */
	int nranks;		      /* --nranks N: fork N ranks (ignored under a launcher) */
	const char *unique_id_file;   /* --unique-id-file PATH (external launcher) */
	struct model_config model;    /* --vocab --layers --d-model --ffn --heads --kv-heads --seq --tp */
	int batch;		      /* --batch B: global sequences per step */
	int steps;		      /* --steps T */
	uint64_t seed;		      /* --seed X */
	float lr;		      /* --lr */
	const char *wrap;	      /* --wrap SPEC */
	const char *reshard;	      /* --reshard-after-forward true|false|G */
	int prefetch;		      /* --prefetch P */
	enum fsdp_dtype param_dtype;  /* --param-dtype bf16|fp32 */
	enum fsdp_dtype reduce_dtype; /* --reduce-dtype fp32|bf16 */
	int shard_group;	      /* --shard-group S (0: all data-parallel ranks) */
	const char *log_path;	      /* --log FILE */
	int quiet;		      /* --quiet: no per-step line on stdout */
	int hold_step;		      /* --hold-at S:FIFO: rank 0 waits before step S ... */
	const char *hold_path;	      /* ... for a byte from FIFO (NULL: never) */
	int stall_rank, stall_step;   /* --stall-at R:S: rank R stops before step S's first collective (-1: never) */
	int mismatch_rank, mismatch_step; /* --mismatch-at R:S: rank R's first AllGather of step S is one
					     element short (-1: never) */
	enum fsdp_style style;	      /* --style fsdp2|fsdp1|zero3 */
	int grad_accum;		      /* --grad-accum K: micro-batches per optimizer step (1) */
	int grad_sync_last;	      /* --grad-sync last: reduce only on the last micro-batch */
	double clip_grad;	      /* --clip-grad NORM: grad-norm AllReduce per step (0: off) */
	int sync_module_states;	      /* --sync-module-states: init Broadcast per unit and comm */
	int eval_every;		      /* --eval-every N: a forward-only pass after every N steps (0: never) */
	int checkpoint_every;	      /* --checkpoint-every N: a checkpoint save after every N steps (0) */
	int forward_prefetch;	      /* --forward-prefetch (fsdp1; fsdp2 always prefetches) */
	int activation_checkpoint;    /* --activation-checkpoint */
	int nvtx;		      /* 0 with --no-nvtx: no NVTX ranges at all */
	int comm_names;		      /* --comm-names: name the communicators (ncclConfig_t.commName) */
	const char *name_prefix;      /* --name-prefix TEXT: before every unit's NVTX range name, NULL */
	const char *comm_name_prefix; /* --comm-name-prefix TEXT: before every commName (implies --comm-names) */
	/* --style zero3 (element counts; DeepSpeed's config key in brackets) */
	int zero3_coalesced;		/* --zero3-gather coalesced (1) or flat (0) */
	uint64_t bucket;		/* --bucket [stage3_prefetch_bucket_size] 5e7 */
	uint64_t persistence_threshold; /* --persistence-threshold [stage3_param_persistence_threshold] 1e5 */
	uint64_t max_reuse_distance;	/* --max-reuse-distance [stage3_max_reuse_distance] 1e9 */
	uint64_t max_live;		/* --max-live [stage3_max_live_parameters] 1e9 */
	uint64_t reduce_bucket;		/* --reduce-bucket [reduce_bucket_size] 5e8 */
};

/* Parse argv into *o (defaults first). Returns 0, 1 when --help was given,
 * or -EINVAL with a message in err. Checks syntax and ranges only; the
 * checks that need the world size are the caller's. */
int options_parse(int argc, char **argv, struct fsdp_options *o, char *err, size_t errlen);

/* The help text (man-page-like, with EXAMPLES). */
void options_usage(FILE *out);

#endif /* FSDP_REF_OPTIONS_H */
