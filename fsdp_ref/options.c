/* fsdp_ref/options.c: flag parsing (see options.h). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_ref/options.h"

enum {
	OPT_BACKEND = 256,
	OPT_NRANKS,
	OPT_UID_FILE,
	OPT_VOCAB,
	OPT_LAYERS,
	OPT_DMODEL,
	OPT_FFN,
	OPT_HEADS,
	OPT_KV_HEADS,
	OPT_SEQ,
	OPT_BATCH,
	OPT_STEPS,
	OPT_SEED,
	OPT_LR,
	OPT_WRAP,
	OPT_RESHARD,
	OPT_PREFETCH,
	OPT_PARAM_DTYPE,
	OPT_REDUCE_DTYPE,
	OPT_SHARD_GROUP,
	OPT_LOG,
	OPT_QUIET,
	OPT_HOLD_AT,
	OPT_STALL_AT,
	OPT_MISMATCH_AT,
	OPT_STYLE,
	OPT_GRAD_ACCUM,
	OPT_GRAD_SYNC,
	OPT_CLIP_GRAD,
	OPT_SYNC_MODULE_STATES,
	OPT_EVAL_EVERY,
	OPT_CHECKPOINT_EVERY,
	OPT_FORWARD_PREFETCH,
	OPT_ACTIVATION_CHECKPOINT,
	OPT_NO_NVTX,
	OPT_TP,
	OPT_COMM_NAMES,
	OPT_NAME_PREFIX,
	OPT_COMM_NAME_PREFIX,
	OPT_ZERO3_GATHER, /* OPT_ZERO3_GATHER .. OPT_REDUCE_BUCKET: the zero3-only flags */
	OPT_BUCKET,
	OPT_PERSISTENCE_THRESHOLD,
	OPT_MAX_REUSE_DISTANCE,
	OPT_MAX_LIVE,
	OPT_REDUCE_BUCKET,
	OPT_HELP,
};

static const struct option long_options[] = {
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"nranks", required_argument, NULL, OPT_NRANKS},
    {"unique-id-file", required_argument, NULL, OPT_UID_FILE},
    {"vocab", required_argument, NULL, OPT_VOCAB},
    {"layers", required_argument, NULL, OPT_LAYERS},
    {"d-model", required_argument, NULL, OPT_DMODEL},
    {"ffn", required_argument, NULL, OPT_FFN},
    {"heads", required_argument, NULL, OPT_HEADS},
    {"kv-heads", required_argument, NULL, OPT_KV_HEADS},
    {"seq", required_argument, NULL, OPT_SEQ},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"lr", required_argument, NULL, OPT_LR},
    {"wrap", required_argument, NULL, OPT_WRAP},
    {"reshard-after-forward", required_argument, NULL, OPT_RESHARD},
    {"prefetch", required_argument, NULL, OPT_PREFETCH},
    {"param-dtype", required_argument, NULL, OPT_PARAM_DTYPE},
    {"reduce-dtype", required_argument, NULL, OPT_REDUCE_DTYPE},
    {"shard-group", required_argument, NULL, OPT_SHARD_GROUP},
    {"log", required_argument, NULL, OPT_LOG},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"hold-at", required_argument, NULL, OPT_HOLD_AT},
    {"stall-at", required_argument, NULL, OPT_STALL_AT},
    {"mismatch-at", required_argument, NULL, OPT_MISMATCH_AT},
    {"style", required_argument, NULL, OPT_STYLE},
    {"grad-accum", required_argument, NULL, OPT_GRAD_ACCUM},
    {"grad-sync", required_argument, NULL, OPT_GRAD_SYNC},
    {"clip-grad", required_argument, NULL, OPT_CLIP_GRAD},
    {"sync-module-states", no_argument, NULL, OPT_SYNC_MODULE_STATES},
    {"eval-every", required_argument, NULL, OPT_EVAL_EVERY},
    {"checkpoint-every", required_argument, NULL, OPT_CHECKPOINT_EVERY},
    {"forward-prefetch", no_argument, NULL, OPT_FORWARD_PREFETCH},
    {"activation-checkpoint", no_argument, NULL, OPT_ACTIVATION_CHECKPOINT},
    {"no-nvtx", no_argument, NULL, OPT_NO_NVTX},
    {"comm-names", no_argument, NULL, OPT_COMM_NAMES},
    {"name-prefix", required_argument, NULL, OPT_NAME_PREFIX},
    {"comm-name-prefix", required_argument, NULL, OPT_COMM_NAME_PREFIX},
    {"tp", required_argument, NULL, OPT_TP},
    {"zero3-gather", required_argument, NULL, OPT_ZERO3_GATHER},
    {"bucket", required_argument, NULL, OPT_BUCKET},
    {"persistence-threshold", required_argument, NULL, OPT_PERSISTENCE_THRESHOLD},
    {"max-reuse-distance", required_argument, NULL, OPT_MAX_REUSE_DISTANCE},
    {"max-live", required_argument, NULL, OPT_MAX_LIVE},
    {"reduce-bucket", required_argument, NULL, OPT_REDUCE_BUCKET},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

void options_usage(FILE *out)
{
	fputs("NAME\n"
	      "    fsdp_ref - reference FSDP trainer: a Llama-shaped decoder trained with\n"
	      "    sharded data parallelism, the ground truth for fsdpscope\n"
	      "\n"
	      "SYNOPSIS\n"
	      "    fsdp_ref [--backend cpu|cuda] [--nranks N] [model flags] [FSDP flags] [--log FILE]\n"
	      "    RANK=r WORLD_SIZE=n fsdp_ref --unique-id-file PATH ...   (under a launcher)\n"
	      "\n"
	      "LAUNCH\n"
	      "    --backend cpu|cuda     cpu: plain C, NCCL stand-in; cuda: fsdp_ref_cuda (default cpu)\n"
	      "    --nranks N             fork N ranks (default 1)\n"
	      "    --unique-id-file PATH  with RANK and WORLD_SIZE set: rank 0 writes the NCCL\n"
	      "                           unique id there, the others wait for it (120 s)\n"
	      "\n"
	      "MODEL (defaults in brackets)\n"
	      "    --vocab V [64]  --layers L [4]  --d-model D [64]  --ffn F [192]\n"
	      "    --heads H [4]  --kv-heads K [2]  --seq T [32]\n"
	      "    --batch B [8]   global sequences per step, split evenly over the ranks\n"
	      "    --steps N [20]  --seed X [1]  --lr R [0.003]\n"
	      "\n"
	      "FSDP\n"
	      "    --wrap SPEC     block | linear | model | group:K | per-range policies such as\n"
	      "                    linear:0-3,block:4-11 or group:2:0-5,block:6-7 [block]\n"
	      "    --reshard-after-forward true|false|G\n"
	      "                    free gathered parameters after forward, keep them, or keep\n"
	      "                    them sharded over groups of G ranks [true]\n"
	      "    --prefetch P    units gathered ahead, forward and backward [1]\n"
	      "    --param-dtype bf16|fp32    gathered parameter dtype [bf16]\n"
	      "    --reduce-dtype fp32|bf16   gradient reduction dtype [fp32]\n"
	      "    --shard-group S shard within groups of S ranks and all-reduce gradients\n"
	      "                    across the N/S replicas (HSDP); with --tp T, groups of the\n"
	      "                    N/T data-parallel ranks and (N/T)/S replicas [N/T]\n"
	      "    --style fsdp2|fsdp1|zero3\n"
	      "                    fsdp2: fully_shard, forward and backward prefetch of --prefetch\n"
	      "                    units; fsdp1: FullyShardedDataParallel, backward prefetch\n"
	      "                    (BACKWARD_PRE) of --prefetch units, forward prefetch only with\n"
	      "                    --forward-prefetch; zero3: DeepSpeed ZeRO-3, see ZERO-3 [fsdp2]\n"
	      "    --activation-checkpoint\n"
	      "                    recompute each non-root unit's forward in backward: fsdp1\n"
	      "                    gathers a resharded unit again for the recomputation (3\n"
	      "                    gathers per unit per step); fsdp2 recomputes inside the unit's\n"
	      "                    backward gather (no extra gather). The recomputation itself is\n"
	      "                    emulated (activations are kept), the gathers are real\n"
	      "\n"
	      "TENSOR PARALLEL\n"
	      "    --tp T          tensor parallelism with sequence parallelism over groups of T\n"
	      "                    consecutive ranks (Megatron-style, as torchtitan's FSDP2 + TP):\n"
	      "                    q, k, v, gate, up column-parallel, o, down row-parallel, norms\n"
	      "                    and the root replicated on 1/T of the tokens; per block an\n"
	      "                    AllGather and a ReduceScatter on the tp communicator around\n"
	      "                    attention and around the MLP, mirrored in backward, and an\n"
	      "                    AllReduce of the replicated tensors' gradients per unit that\n"
	      "                    holds them. FSDP shards over the N/T data-parallel ranks of\n"
	      "                    the same tp rank (--shard-group divides N/T). T must divide\n"
	      "                    N, --heads, --kv-heads, --ffn and the tokens per\n"
	      "                    data-parallel rank [1]\n"
	      "\n"
	      "ZERO-3 (--style zero3; element counts accept 5e7; DeepSpeed's key in brackets)\n"
	      "    Every parameter tensor is split into N equal padded partitions, one per rank\n"
	      "    (--wrap, --reshard-after-forward, --prefetch and --forward-prefetch are\n"
	      "    ignored). Step 0 records the order the model uses its tensors in and fetches\n"
	      "    each use alone; later steps fetch a needed tensor together with the next\n"
	      "    tensors of that trace, released after use unless reused soon. No HSDP,\n"
	      "    --tp, --grad-sync last, --activation-checkpoint or --sync-module-states.\n"
	      "    --zero3-gather flat|coalesced\n"
	      "                    flat: one AllGather of one flat buffer per fetch; coalesced: one\n"
	      "                    AllGather per tensor inside one ncclGroupStart/End [flat]\n"
	      "    --bucket E      a fetch's elements [stage3_prefetch_bucket_size] [5e7]\n"
	      "    --persistence-threshold N\n"
	      "                    tensors of at most N elements stay gathered, re-gathered only\n"
	      "                    after each optimizer step [stage3_param_persistence_threshold] [1e5]\n"
	      "    --max-reuse-distance E\n"
	      "                    keep a used tensor that is used again within E elements of uses\n"
	      "                    [stage3_max_reuse_distance] [1e9]\n"
	      "    --max-live E    a fetch takes later tensors only while the gathered elements stay\n"
	      "                    within E [stage3_max_live_parameters] [1e9]\n"
	      "    --reduce-bucket E\n"
	      "                    gradient elements per ReduceScatter [reduce_bucket_size] [5e8]\n"
	      "\n"
	      "TRAINING LOOP\n"
	      "    --grad-accum K  K micro-batches of --batch sequences per optimizer step [1]\n"
	      "    --grad-sync every|last\n"
	      "                    reduce-scatter gradients after every micro-batch (FSDP2's\n"
	      "                    default), or only after the last one (set_requires_gradient_sync\n"
	      "                    (False) / no_sync() on the others: unsharded gradients kept) [every]\n"
	      "    --clip-grad NORM  clip the gradient norm: one AllReduce of the squared norm per\n"
	      "                    optimizer step on the shard group (clip_grad_norm_) [off]\n"
	      "    --sync-module-states\n"
	      "                    before the first step, one Broadcast from rank 0 per unit on the\n"
	      "                    shard group, and on the replica group with HSDP (FSDP1's\n"
	      "                    sync_module_states=True)\n"
	      "    --eval-every N  after every N steps, a forward-only pass (gathers, no\n"
	      "                    ReduceScatter) and its loss AllReduce [never]\n"
	      "    --checkpoint-every N\n"
	      "                    after every N steps, a checkpoint save's planning collectives on\n"
	      "                    the world: all_gather_object, broadcast_object_list, barrier [never]\n"
	      "\n"
	      "OUTPUT\n"
	      "    --log FILE      JSON lines, one per rank per step, all ranks in FILE\n"
	      "    --quiet         no 'step N loss X' lines on stdout\n"
	      "    --hold-at S:FIFO\n"
	      "                    before step S, rank 0 waits until a byte can be read from FIFO (the\n"
	      "                    other ranks then wait in their collectives): a test looks at a live\n"
	      "                    session while the job stands still at a known step\n"
	      "    --no-nvtx       no NVTX ranges (a job that marks nothing)\n"
	      "    --comm-names    name the communicators in ncclConfig_t.commName: world, dp_shard,\n"
	      "                    dp_replicate, dp_regather, tp\n"
	      "    --name-prefix TEXT\n"
	      "                    put TEXT before every unit's NVTX range name (\"TEXTlayers.3\")\n"
	      "    --comm-name-prefix TEXT\n"
	      "                    --comm-names, with TEXT before every name: the hostile names\n"
	      "                    fsdpscope's report tests record (any bytes, any length)\n"
	      "\n"
	      "FAULTS (a real hang or desync at a known collective, for fsdpscope's tests)\n"
	      "    --stall-at R:S  rank R, at step S, stops just before its first collective of the\n"
	      "                    step and waits for a signal (SIGTERM, SIGINT end it): the other\n"
	      "                    ranks of its communicator wait inside that collective, a hang.\n"
	      "                    It first writes one line to stderr and, with --log, a \"fault\"\n"
	      "                    line: the step, the communicator, the collective's number on\n"
	      "                    it (comm_seq, from 1) and its op\n"
	      "    --mismatch-at R:S\n"
	      "                    rank R issues its first AllGather of step S with count - 1: a\n"
	      "                    desync (the stand-in fails it on every rank with\n"
	      "                    ncclInvalidUsage, and the job ends with that error); the same\n"
	      "                    lines first, with both counts\n"
	      "\n"
	      "ENVIRONMENT\n"
	      "    FSDP_REF_LINK_LATENCY_US, FSDP_REF_LINK_GBPS   link model of the NCCL stand-in\n"
	      "    FSDP_REF_NCCL_TIMEOUT_S   the stand-in's wait for a peer before it fails a\n"
	      "                    collective (60 s; above a hang detector's threshold with --stall-at)\n"
	      "\n"
	      "EXAMPLES\n"
	      "    fsdp_ref --nranks 4 --layers 8 --wrap linear --steps 5 --log l.jsonl\n"
	      "    fsdp_ref --nranks 4 --shard-group 2 --reshard-after-forward false\n"
	      "    fsdp_ref --nranks 2 --grad-accum 4 --grad-sync last --clip-grad 1.0 --no-nvtx\n"
	      "    fsdp_ref --nranks 4 --shard-group 2 --style fsdp1 --sync-module-states\n"
	      "    fsdp_ref --nranks 4 --tp 2 --wrap linear --log tp.jsonl    (2 x 2 mesh)\n"
	      "    fsdp_ref --nranks 4 --style zero3 --bucket 3000 --persistence-threshold 64\n"
	      "    FSDP_REF_NCCL_TIMEOUT_S=600 fsdp_ref --nranks 3 --stall-at 1:3 --log hang.jsonl\n"
	      "    torchrun-like: RANK=1 WORLD_SIZE=2 fsdp_ref --unique-id-file /tmp/id\n",
	      out);
}

__attribute__((format(printf, 3, 4))) static int options_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* A decimal integer in [lo, hi] that is all of `s`. */
/* The range of the last parse_int, for the message of a value out of it
 * (options_parse is the process's one parser, run once). */
static long int_lo, int_hi;
static int int_parsed;

static int parse_int(const char *s, long lo, long hi, int *out)
{
	char *end = NULL;
	int_lo = lo, int_hi = hi, int_parsed = 1;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

/* "R:S": a rank and a step, both >= 0. */
static int parse_rank_step(const char *s, int *rank, int *step)
{
	char r[16];
	const char *colon = strchr(s, ':');
	size_t len = colon ? (size_t)(colon - s) : 0;

	if (!colon || len == 0 || len >= sizeof r)
		return -1;
	memcpy(r, s, len);
	r[len] = '\0';
	return parse_int(r, 0, 1 << 20, rank) < 0 || parse_int(colon + 1, 0, 1 << 30, step) < 0 ? -1 : 0;
}

/* An element count: a decimal integer, or an integral number in e-notation
 * as DeepSpeed's configs write them (5e7), in [lo, 2^53]. */
static int parse_count(const char *s, uint64_t lo, uint64_t *out)
{
	char *end = NULL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= (double)lo && v <= 9007199254740992.0) || v != (double)(uint64_t)v)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

const char *fsdp_style_name(enum fsdp_style s)
{
	return s == FSDP_STYLE_FSDP1 ? "fsdp1" : s == FSDP_STYLE_ZERO3 ? "zero3" : "fsdp2";
}

static int parse_dtype(const char *s, enum fsdp_dtype *out)
{
	if (strcmp(s, "bf16") == 0)
		*out = FSDP_DTYPE_BF16;
	else if (strcmp(s, "fp32") == 0)
		*out = FSDP_DTYPE_FP32;
	else
		return -1;
	return 0;
}

int options_parse(int argc, char **argv, struct fsdp_options *o, char *err, size_t errlen)
{
	*o = (struct fsdp_options){
	    .nranks = 1,
	    .model = {.vocab = 64,
		      .layers = 4,
		      .d_model = 64,
		      .ffn = 192,
		      .heads = 4,
		      .kv_heads = 2,
		      .seq = 32,
		      .rope_theta = 10000.0f,
		      .norm_eps = 1e-5f,
		      .tp = 1},
	    .batch = 8,
	    .steps = 20,
	    .seed = 1,
	    .lr = 3e-3f,
	    .wrap = "block",
	    .reshard = "true",
	    .prefetch = 1,
	    .param_dtype = FSDP_DTYPE_BF16,
	    .reduce_dtype = FSDP_DTYPE_FP32,
	    .style = FSDP_STYLE_FSDP2,
	    .grad_accum = 1,
	    .nvtx = 1,
	    .bucket = 50000000,
	    .persistence_threshold = 100000,
	    .max_reuse_distance = 1000000000,
	    .max_live = 1000000000,
	    .reduce_bucket = 500000000,
	    .stall_rank = -1,
	    .stall_step = -1,
	    .mismatch_rank = -1,
	    .mismatch_step = -1,
	};
	char zero3_flag[64] = ""; /* the first zero3-only flag given */
	optind = 1;
	opterr = 0;
	int c, li = -1;
	while ((c = getopt_long(argc, argv, ":h", long_options, &li)) != -1) {
		char name[64];
		snprintf(name, sizeof name, "--%s", li >= 0 ? long_options[li].name : "?");
		li = -1;
		int bad = 0, count_min = -1; /* count_min: the flag takes an element count >= it */
		int_parsed = 0;
		switch (c) {
		case OPT_BACKEND:
			if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda"))
				return options_fail(err, errlen, "bad --backend '%s': use cpu or cuda", optarg);
			o->backend = optarg;
			break;
		case OPT_NRANKS:
			bad = parse_int(optarg, 1, 1024, &o->nranks);
			break;
		case OPT_UID_FILE:
			o->unique_id_file = optarg;
			break;
		case OPT_VOCAB:
			bad = parse_int(optarg, 2, 1 << 20, &o->model.vocab);
			break;
		case OPT_LAYERS:
			bad = parse_int(optarg, 1, 4096, &o->model.layers);
			break;
		case OPT_DMODEL:
			bad = parse_int(optarg, 2, 1 << 16, &o->model.d_model);
			break;
		case OPT_FFN:
			bad = parse_int(optarg, 1, 1 << 18, &o->model.ffn);
			break;
		case OPT_HEADS:
			bad = parse_int(optarg, 1, 1 << 12, &o->model.heads);
			break;
		case OPT_KV_HEADS:
			bad = parse_int(optarg, 1, 1 << 12, &o->model.kv_heads);
			break;
		case OPT_SEQ:
			bad = parse_int(optarg, 1, 1 << 16, &o->model.seq);
			break;
		case OPT_BATCH:
			bad = parse_int(optarg, 1, 1 << 20, &o->batch);
			break;
		case OPT_STEPS:
			bad = parse_int(optarg, 0, 1 << 30, &o->steps);
			break;
		case OPT_SEED: {
			char *end = NULL;
			errno = 0;
			unsigned long long v = strtoull(optarg, &end, 10);
			bad = errno || end == optarg || *end;
			o->seed = (uint64_t)v;
			break;
		}
		case OPT_LR: {
			char *end = NULL;
			double v = strtod(optarg, &end);
			bad = end == optarg || *end || !(v > 0.0 && v < 10.0);
			o->lr = (float)v;
			break;
		}
		case OPT_WRAP:
			o->wrap = optarg;
			break;
		case OPT_RESHARD:
			o->reshard = optarg;
			break; /* checked against S by the caller */
		case OPT_PREFETCH:
			bad = parse_int(optarg, 0, 1024, &o->prefetch);
			break;
		case OPT_PARAM_DTYPE:
			bad = parse_dtype(optarg, &o->param_dtype);
			break;
		case OPT_REDUCE_DTYPE:
			bad = parse_dtype(optarg, &o->reduce_dtype);
			break;
		case OPT_SHARD_GROUP:
			bad = parse_int(optarg, 1, 1024, &o->shard_group);
			break;
		case OPT_LOG:
			o->log_path = optarg;
			break;
		case OPT_HOLD_AT: {
			char step[16];
			const char *colon = strchr(optarg, ':');
			size_t len = colon ? (size_t)(colon - optarg) : 0;

			bad = !colon || len == 0 || len >= sizeof step || !colon[1];
			if (!bad) {
				memcpy(step, optarg, len);
				step[len] = '\0';
				bad = parse_int(step, 0, 1 << 30, &o->hold_step);
				o->hold_path = colon + 1;
			}
			break;
		}
		case OPT_STALL_AT:
		case OPT_MISMATCH_AT:
			if (parse_rank_step(optarg, c == OPT_STALL_AT ? &o->stall_rank : &o->mismatch_rank,
					    c == OPT_STALL_AT ? &o->stall_step : &o->mismatch_step) < 0)
				return options_fail(err, errlen, "bad %s '%s': use RANK:STEP, both >= 0 (such as 1:3)",
						    name, optarg);
			break;
		case OPT_QUIET:
			o->quiet = 1;
			break;
		case OPT_STYLE:
			if (strcmp(optarg, "fsdp2") == 0)
				o->style = FSDP_STYLE_FSDP2;
			else if (strcmp(optarg, "fsdp1") == 0)
				o->style = FSDP_STYLE_FSDP1;
			else if (strcmp(optarg, "zero3") == 0)
				o->style = FSDP_STYLE_ZERO3;
			else
				return options_fail(err, errlen, "bad --style '%s': use fsdp2, fsdp1 or zero3", optarg);
			break;
		case OPT_GRAD_ACCUM:
			bad = parse_int(optarg, 1, 1 << 16, &o->grad_accum);
			break;
		case OPT_GRAD_SYNC:
			if (strcmp(optarg, "every") == 0)
				o->grad_sync_last = 0;
			else if (strcmp(optarg, "last") == 0)
				o->grad_sync_last = 1;
			else
				return options_fail(err, errlen, "bad --grad-sync '%s': use every or last", optarg);
			break;
		case OPT_CLIP_GRAD: {
			char *end = NULL;
			double v = strtod(optarg, &end);
			bad = end == optarg || *end || !(v > 0.0 && v < 1e30);
			o->clip_grad = v;
			break;
		}
		case OPT_SYNC_MODULE_STATES:
			o->sync_module_states = 1;
			break;
		case OPT_EVAL_EVERY:
			bad = parse_int(optarg, 0, 1 << 30, &o->eval_every);
			break;
		case OPT_CHECKPOINT_EVERY:
			bad = parse_int(optarg, 0, 1 << 30, &o->checkpoint_every);
			break;
		case OPT_FORWARD_PREFETCH:
			o->forward_prefetch = 1;
			break;
		case OPT_ACTIVATION_CHECKPOINT:
			o->activation_checkpoint = 1;
			break;
		case OPT_NO_NVTX:
			o->nvtx = 0;
			break;
		case OPT_COMM_NAMES:
			o->comm_names = 1;
			break;
		case OPT_NAME_PREFIX:
			o->name_prefix = optarg;
			break;
		case OPT_COMM_NAME_PREFIX:
			o->comm_names = 1;
			o->comm_name_prefix = optarg;
			break;
		case OPT_TP:
			bad = parse_int(optarg, 1, 1024, &o->model.tp);
			break;
		case OPT_ZERO3_GATHER:
			if (strcmp(optarg, "flat") == 0)
				o->zero3_coalesced = 0;
			else if (strcmp(optarg, "coalesced") == 0)
				o->zero3_coalesced = 1;
			else
				return options_fail(err, errlen, "bad --zero3-gather '%s': use flat or coalesced",
						    optarg);
			break;
		/* thresholds may be 0 (nothing persists, nothing is kept for reuse); sizes
		 * hold at least one element */
		case OPT_BUCKET:
			count_min = 1;
			bad = parse_count(optarg, (uint64_t)count_min, &o->bucket);
			break;
		case OPT_PERSISTENCE_THRESHOLD:
			count_min = 0;
			bad = parse_count(optarg, (uint64_t)count_min, &o->persistence_threshold);
			break;
		case OPT_MAX_REUSE_DISTANCE:
			count_min = 0;
			bad = parse_count(optarg, (uint64_t)count_min, &o->max_reuse_distance);
			break;
		case OPT_MAX_LIVE:
			count_min = 1;
			bad = parse_count(optarg, (uint64_t)count_min, &o->max_live);
			break;
		case OPT_REDUCE_BUCKET:
			count_min = 1;
			bad = parse_count(optarg, (uint64_t)count_min, &o->reduce_bucket);
			break;
		case OPT_HELP:
		case 'h':
			return 1;
		case ':':
			return options_fail(err, errlen, "%s needs a value", argv[optind - 1]);
		default:
			return options_fail(err, errlen, "unknown option '%s' (see --help)", argv[optind - 1]);
		}
		if (bad && count_min >= 0)
			return options_fail(err, errlen, "bad %s '%s': an element count >= %d (such as 5e7)", name,
					    optarg, count_min);
		if (bad && int_parsed)
			return options_fail(err, errlen, "bad value '%s' for %s: a whole number from %ld to %ld", optarg,
					    name, int_lo, int_hi);
		if (bad && c == OPT_CLIP_GRAD)
			return options_fail(err, errlen, "bad value '%s' for %s: a number above 0 (such as 1.0)", optarg,
					    name);
		if (bad && c == OPT_LR)
			return options_fail(err, errlen, "bad value '%s' for %s: a number above 0 and below 10", optarg,
					    name);
		if (bad && c == OPT_SEED)
			return options_fail(err, errlen, "bad value '%s' for %s: a whole number from 0 to %llu", optarg,
					    name, (unsigned long long)UINT64_MAX);
		if (bad && (c == OPT_PARAM_DTYPE || c == OPT_REDUCE_DTYPE))
			return options_fail(err, errlen, "bad value '%s' for %s: bf16 or fp32", optarg, name);
		if (bad)
			return options_fail(err, errlen, "bad value '%s' for %s (see --help)", optarg, name);
		if (c >= OPT_ZERO3_GATHER && c <= OPT_REDUCE_BUCKET && !zero3_flag[0])
			snprintf(zero3_flag, sizeof zero3_flag, "%s", name);
	}
	if (optind < argc)
		return options_fail(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
	if (zero3_flag[0] && o->style != FSDP_STYLE_ZERO3)
		return options_fail(err, errlen, "%s applies only to --style zero3", zero3_flag);
	if (o->style == FSDP_STYLE_ZERO3) {
		const char *no = o->grad_sync_last
				     ? "--grad-sync last (DeepSpeed ZeRO-3 reduce-scatters every micro-batch)"
				 : o->shard_group ? "--shard-group (every tensor is partitioned over all ranks)"
				 : o->activation_checkpoint ? "--activation-checkpoint"
				 : o->sync_module_states    ? "--sync-module-states"
				 : o->model.tp > 1	    ? "--tp (every tensor is partitioned over all ranks)"
							    : NULL;
		if (no)
			return options_fail(err, errlen, "--style zero3 does not support %s", no);
	}
	return model_config_check(&o->model, err, errlen);
}
