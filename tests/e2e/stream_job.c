/*
 * tests/e2e/stream_job.c - the NCCL streams of real training setups.
 *
 *   stream_job --setup fsdp2|tp|fsdp1-hsdp|zero3|pp --nranks N --steps S
 *              [--layers L] [--wrap block|linear] [options per setup]
 *              [--nvtx] [--log FILE] --truth FILE
 *
 * fsdpscope must diagnose jobs its reference trainer (fsdp_ref) does not
 * run. This program forks N ranks over the NCCL stand-in (or any
 * libnccl.so.2), creates the communicators as PyTorch's DeviceMesh does
 * (ncclCommInitRankConfig, then one ncclCommSplit per mesh dimension), and
 * issues, step by step, the collective stream that PyTorch FSDP2 (plain,
 * torchtitan units, 2-D with tensor parallelism, under pipeline
 * parallelism), FSDP1 HYBRID_SHARD or DeepSpeed ZeRO-3 issues for a small
 * Llama-like model: the same ops, counts, dtypes, communicators, order and
 * ncclGroupStart/End grouping. Buffers are real and of the right sizes;
 * their contents are arbitrary. Compute is a busy wait per "matmul".
 *
 * Rank 0 writes FILE: the truth of this run, i.e. what a correct diagnosis
 * says, counted from what the program issued (not from constants). Which
 * source each rule of each stream comes from is in stream_job.md.
 *
 * One thread per rank issues everything, as PyTorch issues from the Python
 * thread: what matters is the order. Every rank of a communicator issues
 * the same calls in the same order on it, so the blocking stand-in cannot
 * deadlock.
 */
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
static const struct sj_param sj_block_params[] = {
	{"attention.wq", SJ_HIDDEN, SJ_HIDDEN, TP_COLWISE, 0},
	{"attention.wk", SJ_HIDDEN, SJ_HIDDEN, TP_COLWISE, 0},
	{"attention.wv", SJ_HIDDEN, SJ_HIDDEN, TP_COLWISE, 0},
	{"attention.wo", SJ_HIDDEN, SJ_HIDDEN, TP_ROWWISE, 0},
	{"feed_forward.w1", SJ_FFN, SJ_HIDDEN, TP_COLWISE, 0},
	{"feed_forward.w2", SJ_HIDDEN, SJ_FFN, TP_ROWWISE, 0},
	{"feed_forward.w3", SJ_FFN, SJ_HIDDEN, TP_COLWISE, 0},
	{"attention_norm", SJ_HIDDEN, 1, TP_REPLICATE, 1},
	{"ffn_norm", SJ_HIDDEN, 1, TP_REPLICATE, 1},
};
enum { BP_WQ, BP_WK, BP_WV, BP_WO, BP_W1, BP_W2, BP_W3, BP_ATTN_NORM, BP_FFN_NORM, BP_COUNT };

static const struct sj_param sj_tok_embeddings = {"tok_embeddings", SJ_VOCAB, SJ_HIDDEN, TP_COLWISE, 0};
static const struct sj_param sj_final_norm = {"norm", SJ_HIDDEN, 1, TP_REPLICATE, 1};
static const struct sj_param sj_output = {"output", SJ_VOCAB, SJ_HIDDEN, TP_COLWISE, 0};

static size_t sj_ceil_div(size_t a, size_t b)
{
	return (a + b - 1) / b;
}

/* ---- options ---------------------------------------------------------------- */

enum sj_setup { SETUP_FSDP2, SETUP_TP, SETUP_FSDP1_HSDP, SETUP_ZERO3, SETUP_PP };

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
};

/* ---- failing --------------------------------------------------------------- */

static int sj_rank_for_messages = -1;

static void sj_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void sj_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (sj_rank_for_messages >= 0)
		fprintf(stderr, "stream_job: rank %d: ", sj_rank_for_messages);
	else
		fprintf(stderr, "stream_job: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* A test program: an NCCL failure ends the rank, and the supervisor ends
 * the others (a half-run job has no truth to compare with). */
static void sj_nccl(ncclResult_t res, const char *what)
{
	if (res != ncclSuccess)
		sj_die("%s: %s (%s)", what, ncclGetErrorString(res), ncclGetLastError(NULL));
}

static uint64_t sj_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the job: communicators, buffers, issuing, bookkeeping ------------------ */

enum sj_role {
	ROLE_FSDP,
	ROLE_FSDP_REGATHER,
	ROLE_REPLICATE,
	ROLE_TENSOR_PARALLEL,
	ROLE_PIPELINE,
	ROLE_STEP,
	ROLE_ALLREDUCE,
	ROLE_ONE_OFF,
	ROLE_COUNT
};
static const char *const sj_role_names[ROLE_COUNT] = {
    "fsdp", "fsdp-regather", "replicate", "tensor-parallel", "pipeline", "step", "allreduce", "one-off"};

struct sj_comm {
	ncclComm_t nccl;
	int nranks, rank;
	enum sj_role role; /* what the setup uses it for */
	const char *name;  /* for the log: "world", "dp", "tp", ... */
	uint64_t calls;    /* calls issued on it, set-up included */
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

static const char *sj_dtype_name(ncclDataType_t dt)
{
	switch (dt) {
	case ncclBfloat16:
		return "bf16";
	case ncclFloat32:
		return "fp32";
	case ncclFloat64:
		return "fp64";
	case ncclInt64:
		return "int64";
	default:
		return "?";
	}
}

static size_t sj_dtype_size(ncclDataType_t dt)
{
	switch (dt) {
	case ncclBfloat16:
		return 2;
	case ncclFloat32:
		return 4;
	case ncclFloat64:
	case ncclInt64:
		return 8;
	default:
		return 1;
	}
}

/* Buffers come from two arenas, reset whenever no group is open: a grouped
 * call's buffers must stay valid until ncclGroupEnd runs it. */
static void *sj_take(struct sj_job *j, int recv, size_t bytes)
{
	char *arena = recv ? j->recv_arena : j->send_arena;
	size_t *used = recv ? &j->recv_used : &j->send_used;
	size_t off = (*used + 255) & ~(size_t)255;
	if (bytes > SJ_ARENA_BYTES || off > SJ_ARENA_BYTES - bytes)
		sj_die("a call needs more than the %zu MiB buffer arena", SJ_ARENA_BYTES >> 20);
	*used = off + bytes;
	return arena + off;
}

static void sj_before_call(struct sj_job *j, struct sj_comm *c)
{
	if (!j->in_group)
		j->send_used = j->recv_used = 0;
	c->calls++;
}

static void sj_log(struct sj_job *j, const struct sj_comm *c, const char *op, size_t count, ncclDataType_t dt,
		   const char *extra)
{
	if (!j->log)
		return;
	fprintf(j->log, "%d %s %s %s %zu %s%s%s%s\n", j->step, j->phase, c->name, op, count, sj_dtype_name(dt),
		j->in_group ? " grouped" : "", extra ? " " : "", extra ? extra : "");
}

static void sj_count_gather(struct sj_job *j, enum sj_kind kind)
{
	if (kind == KIND_OTHER || kind == KIND_GRAD)
		return;
	if (j->in_group) {
		if (!j->group_param_calls)
			j->group_kind = kind;
		j->group_param_calls++;
		return;
	}
	j->cur.param_gathers++;
	j->cur.param_gather_calls++;
	if (kind == KIND_PARAM_FORWARD)
		j->cur.forward_gathers++;
	else if (kind == KIND_PARAM_BACKWARD)
		j->cur.backward_gathers++;
}

static void sj_allgather(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, enum sj_kind kind)
{
	sj_before_call(j, c);
	size_t es = sj_dtype_size(dt);
	void *send = sj_take(j, 0, count * es);
	void *recv = sj_take(j, 1, count * es * (size_t)c->nranks);
	sj_log(j, c, "AllGather", count, dt, NULL);
	sj_nccl(ncclAllGather(send, recv, count, dt, c->nccl, NULL), "ncclAllGather");
	sj_count_gather(j, kind);
}

static void sj_reduce_scatter(struct sj_job *j, struct sj_comm *c, size_t recvcount, ncclDataType_t dt,
			      enum sj_kind kind)
{
	sj_before_call(j, c);
	size_t es = sj_dtype_size(dt);
	void *send = sj_take(j, 0, recvcount * es * (size_t)c->nranks);
	void *recv = sj_take(j, 1, recvcount * es);
	sj_log(j, c, "ReduceScatter", recvcount, dt, NULL);
	sj_nccl(ncclReduceScatter(send, recv, recvcount, dt, ncclSum, c->nccl, NULL), "ncclReduceScatter");
	if (kind == KIND_GRAD)
		j->cur.grad_reduce_scatters++;
}

/* step_mark: a collective issued once per optimizer step (it tells steps
 * from micro-batches). */
static void sj_allreduce(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, ncclRedOp_t op,
			 int step_mark)
{
	sj_before_call(j, c);
	void *buf = sj_take(j, 1, count * sj_dtype_size(dt));
	sj_log(j, c, "AllReduce", count, dt, op == ncclMax ? "max" : NULL);
	sj_nccl(ncclAllReduce(buf, buf, count, dt, op, c->nccl, NULL), "ncclAllReduce");
	if (step_mark)
		j->cur.step_marks++;
}

static void sj_broadcast(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, int root)
{
	sj_before_call(j, c);
	void *buf = sj_take(j, 1, count * sj_dtype_size(dt));
	sj_log(j, c, "Broadcast", count, dt, NULL);
	sj_nccl(ncclBroadcast(buf, buf, count, dt, root, c->nccl, NULL), "ncclBroadcast");
}

static void sj_send(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, int peer)
{
	sj_before_call(j, c);
	void *buf = sj_take(j, 0, count * sj_dtype_size(dt));
	char extra[32];
	snprintf(extra, sizeof extra, "to %d", peer);
	sj_log(j, c, "Send", count, dt, extra);
	sj_nccl(ncclSend(buf, count, dt, peer, c->nccl, NULL), "ncclSend");
}

static void sj_recv(struct sj_job *j, struct sj_comm *c, size_t count, ncclDataType_t dt, int peer)
{
	sj_before_call(j, c);
	void *buf = sj_take(j, 1, count * sj_dtype_size(dt));
	char extra[32];
	snprintf(extra, sizeof extra, "from %d", peer);
	sj_log(j, c, "Recv", count, dt, extra);
	sj_nccl(ncclRecv(buf, count, dt, peer, c->nccl, NULL), "ncclRecv");
}

static void sj_group_start(struct sj_job *j)
{
	if (j->in_group)
		sj_die("nested group (a bug of this program)");
	j->send_used = j->recv_used = 0;
	if (j->log)
		fprintf(j->log, "%d %s GroupStart\n", j->step, j->phase);
	sj_nccl(ncclGroupStart(), "ncclGroupStart");
	j->in_group = 1;
	j->group_param_calls = 0;
}

static void sj_group_end(struct sj_job *j)
{
	sj_nccl(ncclGroupEnd(), "ncclGroupEnd");
	if (j->log)
		fprintf(j->log, "%d %s GroupEnd\n", j->step, j->phase);
	j->in_group = 0;
	if (j->group_param_calls) { /* the calls of one group are one gather event */
		j->cur.param_gathers++;
		j->cur.param_gather_calls += j->group_param_calls;
		if (j->group_kind == KIND_PARAM_FORWARD)
			j->cur.forward_gathers++;
		else if (j->group_kind == KIND_PARAM_BACKWARD)
			j->cur.backward_gathers++;
	}
	j->group_param_calls = 0;
}

/* Emulated compute: a busy wait, so that the rank holds its CPU the way a
 * GPU stays busy; no math is done. */
static void sj_compute(const struct sj_job *j, int matmuls)
{
	if (matmuls <= 0 || j->opt->compute_us <= 0)
		return;
	uint64_t end = sj_now_ns() + (uint64_t)matmuls * (uint64_t)j->opt->compute_us * 1000u;
	while (sj_now_ns() < end)
		;
}

static struct sj_comm *sj_comm_slot(struct sj_job *j, enum sj_role role, const char *name)
{
	if (j->ncomms == SJ_MAX_COMMS)
		sj_die("too many communicators");
	struct sj_comm *c = &j->comms[j->ncomms++];
	memset(c, 0, sizeof *c);
	c->role = role;
	c->name = name;
	return c;
}

static void sj_comm_describe(struct sj_comm *c)
{
	sj_nccl(ncclCommCount(c->nccl, &c->nranks), "ncclCommCount");
	sj_nccl(ncclCommUserRank(c->nccl, &c->rank), "ncclCommUserRank");
}

/* The default process group's communicator, as ProcessGroupNCCL makes it. */
static struct sj_comm *sj_comm_world(struct sj_job *j, enum sj_role role, const char *name)
{
	struct sj_comm *c = sj_comm_slot(j, role, name);
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	sj_nccl(ncclCommInitRankConfig(&c->nccl, j->world, j->id, j->rank, &config), "ncclCommInitRankConfig");
	sj_comm_describe(c);
	return c;
}

/* One mesh dimension: every rank of the parent calls ncclCommSplit once,
 * with the index of its group as the color and its rank as the key (so a
 * group's ranks keep the parent's order). */
static struct sj_comm *sj_comm_split(struct sj_job *j, struct sj_comm *parent, int color, enum sj_role role,
				     const char *name)
{
	struct sj_comm *c = sj_comm_slot(j, role, name);
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	sj_nccl(ncclCommSplit(parent->nccl, color, parent->rank, &c->nccl, &config), "ncclCommSplit");
	if (!c->nccl)
		sj_die("ncclCommSplit gave no communicator");
	sj_comm_describe(c);
	return c;
}

static void sj_step_begin(struct sj_job *j, int step)
{
	j->step = step;
	memset(&j->cur, 0, sizeof j->cur);
	j->phase = "forward";
#ifdef STREAM_JOB_HAVE_NVTX
	if (j->opt->nvtx) {
		/* The PyTorch profiler's step range (record_function under emit_nvtx),
		 * in the default domain. */
		char name[32];
		snprintf(name, sizeof name, "ProfilerStep#%d", step);
		nvtxRangePushA(name);
	}
#endif
}

static void sj_step_end(struct sj_job *j)
{
#ifdef STREAM_JOB_HAVE_NVTX
	if (j->opt->nvtx)
		nvtxRangePop();
#endif
	j->last = j->cur;
}

/* ---- the truth ------------------------------------------------------------- */

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
};

static void sj_truth_init(struct sj_truth *t)
{
	memset(t, 0, sizeof *t);
	t->forward_allgathers = t->backward_allgathers = SJ_NULL;
	t->repeating_units = t->gathers_per_unit = SJ_NULL;
	t->fetches = t->calls = SJ_NULL;
	t->tp_degree = 1;
}

static void sj_note(struct sj_truth *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sj_note(struct sj_truth *t, const char *fmt, ...)
{
	size_t len = strlen(t->note);
	if (len && len + 2 < sizeof t->note) {
		strcat(t->note, "; ");
		len += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->note + len, sizeof t->note - len, fmt, ap);
	va_end(ap);
}

static void sj_json_int(FILE *f, const char *key, int v, int last)
{
	if (v == SJ_NULL)
		fprintf(f, "  \"%s\": null%s\n", key, last ? "" : ",");
	else
		fprintf(f, "  \"%s\": %d%s\n", key, v, last ? "" : ",");
}

static void sj_json_string(FILE *f, const char *key, const char *v, int last)
{
	if (!v || !*v) {
		fprintf(f, "  \"%s\": null%s\n", key, last ? "" : ",");
		return;
	}
	fprintf(f, "  \"%s\": \"", key);
	for (const char *p = v; *p; p++) {
		if (*p == '"' || *p == '\\')
			fputc('\\', f);
		if ((unsigned char)*p >= 0x20)
			fputc(*p, f);
	}
	fprintf(f, "\"%s\n", last ? "" : ",");
}

/* Written to a temporary name and renamed into place: a reader never sees
 * half a truth. */
static void sj_truth_write(const struct sj_job *j, const struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", o->truth_path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f)
		sj_die("cannot write %s: %s", tmp, strerror(errno));
	fprintf(f, "{\n");
	sj_json_string(f, "setup", o->setup_name, 0);
	sj_json_int(f, "ranks", o->nranks, 0);
	sj_json_int(f, "steps", o->steps, 0);
	sj_json_int(f, "layers", o->layers, 0);
	sj_json_string(f, "verdict", t->bucketed ? "bucketed" : "diagnosed", 0);
	sj_json_int(f, "fsdp_allgathers_per_step", t->fsdp_allgathers, 0);
	sj_json_int(f, "forward_allgathers", t->forward_allgathers, 0);
	sj_json_int(f, "backward_allgathers", t->backward_allgathers, 0);
	sj_json_int(f, "reduce_scatters", t->reduce_scatters, 0);
	sj_json_int(f, "microbatches", t->microbatches, 0);
	fprintf(f, "  \"microbatches_told\": %s,\n", t->microbatches_told ? "true" : "false");
	sj_json_int(f, "repeating_units", t->repeating_units, 0);
	sj_json_int(f, "gathers_per_unit", t->gathers_per_unit, 0);
	sj_json_string(f, "reshard", t->reshard, 0);
	fprintf(f, "  \"errors\": [%s],\n", t->wrap_too_fine ? "\"wrap-too-fine\"" : "");
	sj_json_int(f, "tp_degree", t->tp_degree, 0);
	/* Roles: communicators of rank 0 that carried any call, by what the
	 * setup uses them for (the world communicator that is only split is
	 * not counted). */
	int roles[ROLE_COUNT] = {0};
	for (int i = 0; i < j->ncomms; i++)
		if (j->comms[i].calls)
			roles[j->comms[i].role]++;
	fprintf(f, "  \"roles\": {");
	int first = 1;
	for (int r = 0; r < ROLE_COUNT; r++) {
		if (!roles[r])
			continue;
		fprintf(f, "%s\"%s\": %d", first ? "" : ", ", sj_role_names[r], roles[r]);
		first = 0;
	}
	fprintf(f, "},\n");
	sj_json_int(f, "fetches_per_step", t->fetches, 0);
	sj_json_int(f, "calls_per_step", t->calls, 0);
	fprintf(f, "  \"params\": %" PRIu64 ",\n", t->params);
	sj_json_string(f, "note", t->note, 1);
	fprintf(f, "}\n");
	if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
		fclose(f);
		sj_die("cannot write %s: %s", tmp, strerror(errno));
	}
	fclose(f);
	if (rename(tmp, o->truth_path) != 0)
		sj_die("cannot rename %s to %s: %s", tmp, o->truth_path, strerror(errno));
}

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
};

static void fsdp2_init(struct sj_fsdp2 *f, struct sj_job *j, struct sj_comm *comm, struct sj_comm *tp, int max_units,
		       int forwards_per_backward)
{
	memset(f, 0, sizeof *f);
	f->job = j;
	f->comm = comm;
	f->tp = tp;
	f->dp = comm->nranks;
	f->tp_degree = tp ? tp->nranks : 1;
	f->wrap_linear = j->opt->wrap_linear;
	f->cap = max_units;
	f->units = calloc((size_t)max_units, sizeof *f->units);
	f->block_first = malloc((size_t)j->opt->layers * sizeof *f->block_first);
	f->post_cap = max_units * (forwards_per_backward + 1);
	f->post_forward_order = calloc((size_t)f->post_cap, sizeof *f->post_forward_order);
	if (!f->units || !f->block_first || !f->post_forward_order)
		sj_die("out of memory");
	for (int b = 0; b < j->opt->layers; b++)
		f->block_first[b] = -1;
	f->forward_prefetch = 1;
	f->reduce_grads = 1;
	f->reshard_after_backward = 1;
	f->activation_count = (size_t)SJ_BATCH * SJ_SEQ / (size_t)f->tp_degree * SJ_HIDDEN;
}

static void fsdp2_free(struct sj_fsdp2 *f)
{
	free(f->units);
	free(f->block_first);
	free(f->post_forward_order);
}

/* Units are added in forward (pre-forward) order. */
static int fsdp2_add_unit(struct sj_fsdp2 *f, const char *name, int block, const struct sj_param *const *params,
			  int nparams, int reshard)
{
	if (f->nunits == f->cap)
		sj_die("too many units");
	struct sj_unit *u = &f->units[f->nunits];
	memset(u, 0, sizeof *u);
	snprintf(u->name, sizeof u->name, "%s", name);
	u->block = block;
	u->reshard = reshard;
	u->has_params = nparams > 0;
	for (int i = 0; i < nparams; i++) {
		const struct sj_param *p = params[i];
		size_t rows = p->rows, cols = p->cols;
		if (p->style == TP_COLWISE)
			rows /= (size_t)f->tp_degree;
		else if (p->style == TP_ROWWISE)
			cols /= (size_t)f->tp_degree;
		/* FSDP2 shards each parameter on dim 0, padding it to a multiple
		 * of the group size (_chunk_with_empty). */
		u->gather_count += sj_ceil_div(rows, (size_t)f->dp) * cols;
		u->local_params += rows * cols;
		if (p->norm && f->tp_degree > 1)
			u->norm_params++;
		f->model_params += p->rows * p->cols;
	}
	if (block >= 0 && f->block_first[block] < 0)
		f->block_first[block] = f->nunits;
	return f->nunits++;
}

/* The units of one block: the whole block, or (--wrap linear) the
 * rest-of-block unit (the norms) first, then q k v o gate up down, each
 * Linear its own fully_shard call before the block's. */
static void fsdp2_add_block(struct sj_fsdp2 *f, int b, int reshard)
{
	char name[48];
	if (!f->wrap_linear) {
		const struct sj_param *all[BP_COUNT];
		for (int i = 0; i < BP_COUNT; i++)
			all[i] = &sj_block_params[i];
		snprintf(name, sizeof name, "layers.%d", b);
		fsdp2_add_unit(f, name, b, all, BP_COUNT, reshard);
		return;
	}
	const struct sj_param *rest[] = {&sj_block_params[BP_ATTN_NORM], &sj_block_params[BP_FFN_NORM]};
	snprintf(name, sizeof name, "layers.%d", b);
	fsdp2_add_unit(f, name, b, rest, 2, reshard);
	static const int order[] = {BP_WQ, BP_WK, BP_WV, BP_WO, BP_W1, BP_W3, BP_W2};
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		const struct sj_param *one[] = {&sj_block_params[order[i]]};
		snprintf(name, sizeof name, "layers.%d.%s", b, sj_block_params[order[i]].name);
		fsdp2_add_unit(f, name, b, one, 1, reshard);
	}
}

static void fsdp2_gather(struct sj_fsdp2 *f, struct sj_unit *u, int backward)
{
	sj_allgather(f->job, f->comm, u->gather_count, ncclBfloat16, backward ? KIND_PARAM_BACKWARD : KIND_PARAM_FORWARD);
	u->unsharded = 1;
	if (backward)
		u->backward_gathers++;
	else
		u->forward_gathers++;
}

/* FSDPParamGroup.pre_forward: unshard (a no-op when already unsharded or
 * prefetched), then FSDPState._pre_forward's explicit forward prefetch of
 * the next unit. */
static void fsdp2_pre_forward(struct sj_fsdp2 *f, int ui)
{
	struct sj_unit *u = &f->units[ui];
	if (!u->has_params)
		return;
	if (!u->unsharded)
		fsdp2_gather(f, u, 0);
	if (!f->forward_prefetch)
		return;
	for (int k = ui + 1; k < f->nunits; k++) {
		struct sj_unit *next = &f->units[k];
		if (!next->has_params)
			continue;
		if (!next->unsharded)
			fsdp2_gather(f, next, 0);
		break;
	}
}

/* post_forward: reshard unless reshard_after_forward is False; record the
 * post-forward order the backward prefetch follows. */
static void fsdp2_post_forward(struct sj_fsdp2 *f, int ui)
{
	struct sj_unit *u = &f->units[ui];
	if (!u->has_params)
		return;
	if (u->reshard)
		u->unsharded = 0;
	if (f->npost < f->post_cap) {
		u->post_forward_index = f->npost;
		f->post_forward_order[f->npost++] = ui;
	}
}

/* pre_backward: unshard, then _backward_prefetch: the unit before it in
 * post-forward order. */
static void fsdp2_pre_backward(struct sj_fsdp2 *f, int ui)
{
	struct sj_unit *u = &f->units[ui];
	if (!u->has_params)
		return;
	if (!u->unsharded)
		fsdp2_gather(f, u, 1);
	int target = u->post_forward_index - 1;
	if (target >= 0 && target < f->npost) {
		struct sj_unit *t = &f->units[f->post_forward_order[target]];
		if (!t->unsharded)
			fsdp2_gather(f, t, 1);
	}
}

/* post_backward: gradients of SequenceParallel norm weights are Partial on
 * tp and are redistributed to Replicate (FSDPParam._get_grad_inner_tensor:
 * one tp AllReduce each), then one ReduceScatter (foreach_reduce, in
 * reduce_dtype fp32); without gradient sync only the reshard. */
static void fsdp2_post_backward(struct sj_fsdp2 *f, int ui)
{
	struct sj_unit *u = &f->units[ui];
	if (!u->has_params)
		return;
	if (f->reduce_grads) {
		for (int k = 0; k < u->norm_params; k++)
			sj_allreduce(f->job, f->tp, SJ_HIDDEN, ncclBfloat16, ncclSum, 0);
		sj_reduce_scatter(f->job, f->comm, u->gather_count, ncclFloat32, KIND_GRAD);
	}
	if (f->reshard_after_backward)
		u->unsharded = 0;
}

/* The root's post-backward final callback clears the post-forward order. */
static void fsdp2_end_backward(struct sj_fsdp2 *f)
{
	f->npost = 0;
}

/* Sequence parallelism on tp (PrepareModuleInput, RowwiseParallel output
 * layouts): activation gathers and reduce-scatters. No-ops without TP. */
static void tp_gather(struct sj_fsdp2 *f)
{
	if (f->tp)
		sj_allgather(f->job, f->tp, f->activation_count, ncclBfloat16, KIND_OTHER);
}

static void tp_reduce_scatter(struct sj_fsdp2 *f)
{
	if (f->tp)
		sj_reduce_scatter(f->job, f->tp, f->activation_count, ncclBfloat16, KIND_OTHER);
}

/* A Linear of a block: its own unit with --wrap linear, else only compute. */
static void fsdp2_linear_forward(struct sj_fsdp2 *f, int ui)
{
	if (f->wrap_linear)
		fsdp2_pre_forward(f, ui);
	sj_compute(f->job, 1);
	if (f->wrap_linear)
		fsdp2_post_forward(f, ui);
}

static void fsdp2_linear_backward(struct sj_fsdp2 *f, int ui)
{
	if (f->wrap_linear)
		fsdp2_pre_backward(f, ui);
	sj_compute(f->job, 2); /* input and weight gradients */
	if (f->wrap_linear)
		fsdp2_post_backward(f, ui);
}

/* Unit indices inside a block with --wrap linear: rest, q, k, v, o, gate, up, down. */
enum { LU_REST, LU_Q, LU_K, LU_V, LU_O, LU_GATE, LU_UP, LU_DOWN };

static void fsdp2_block_forward(struct sj_fsdp2 *f, int b)
{
	int base = f->block_first[b];
	fsdp2_pre_forward(f, base);
	tp_gather(f); /* attention input: Shard(1) -> Replicate */
	fsdp2_linear_forward(f, base + LU_Q);
	fsdp2_linear_forward(f, base + LU_K);
	fsdp2_linear_forward(f, base + LU_V);
	sj_compute(f->job, 1); /* attention core */
	fsdp2_linear_forward(f, base + LU_O);
	tp_reduce_scatter(f); /* wo output: Partial -> Shard(1) */
	tp_gather(f);         /* feed-forward input */
	fsdp2_linear_forward(f, base + LU_GATE);
	fsdp2_linear_forward(f, base + LU_UP);
	fsdp2_linear_forward(f, base + LU_DOWN);
	tp_reduce_scatter(f); /* w2 output */
	fsdp2_post_forward(f, base);
}

/* The backward mirrors the forward: the gradient of a gather is a
 * reduce-scatter and the other way round. The FSDP pre-backward hook of a
 * Linear sits on its (redistributed) output, so it fires before the
 * gradient's tp gather. */
static void fsdp2_block_backward(struct sj_fsdp2 *f, int b)
{
	int base = f->block_first[b];
	int lin = f->wrap_linear;
	fsdp2_pre_backward(f, base);
	if (lin)
		fsdp2_pre_backward(f, base + LU_DOWN);
	tp_gather(f); /* gradient of the w2 reduce-scatter */
	sj_compute(f->job, 2);
	if (lin)
		fsdp2_post_backward(f, base + LU_DOWN);
	fsdp2_linear_backward(f, base + LU_UP);
	fsdp2_linear_backward(f, base + LU_GATE);
	tp_reduce_scatter(f); /* gradient of the feed-forward input gather */
	if (lin)
		fsdp2_pre_backward(f, base + LU_O);
	tp_gather(f); /* gradient of the wo reduce-scatter */
	sj_compute(f->job, 2);
	if (lin)
		fsdp2_post_backward(f, base + LU_O);
	sj_compute(f->job, 2); /* attention core */
	fsdp2_linear_backward(f, base + LU_V);
	fsdp2_linear_backward(f, base + LU_K);
	fsdp2_linear_backward(f, base + LU_Q);
	tp_reduce_scatter(f); /* gradient of the attention input gather */
	fsdp2_post_backward(f, base);
}

static void fsdp2_step_reset(struct sj_fsdp2 *f)
{
	for (int i = 0; i < f->nunits; i++)
		f->units[i].forward_gathers = f->units[i].backward_gathers = 0;
}

/* Truth common to the FSDP2 setups, from the units' own counts of the last
 * step. cycles: forward / backward cycles FSDP sees per step. */
static void fsdp2_truth(const struct sj_fsdp2 *f, struct sj_truth *t, int cycles)
{
	const struct sj_tally *s = &f->job->last;
	t->fsdp_allgathers = s->param_gathers;
	t->forward_allgathers = s->forward_gathers;
	t->backward_allgathers = s->backward_gathers;
	t->reduce_scatters = s->grad_reduce_scatters;
	t->params = f->model_params;
	t->tp_degree = f->tp_degree;
	t->wrap_too_fine = f->wrap_linear;
	int blocks = 0, first_block = -1, resharded = 0, kept = 0, first_policy = -1;
	for (int b = 0; b < f->job->opt->layers; b++) {
		int base = f->block_first[b];
		if (base < 0)
			continue;
		blocks++;
		if (first_block < 0)
			first_block = b;
		/* A block is resharded after forward when its first unit is
		 * gathered again for backward. */
		int again = f->units[base].backward_gathers > 0;
		resharded += again;
		kept += !again;
		if (first_policy < 0)
			first_policy = again;
	}
	t->repeating_units = blocks;
	int block_gathers = 0;
	for (int i = 0; i < f->nunits; i++)
		if (f->units[i].block == first_block && first_block >= 0)
			block_gathers += f->units[i].forward_gathers;
	t->gathers_per_unit = cycles > 0 ? block_gathers / cycles : block_gathers;
	int policy = resharded > kept ? 1 : kept > resharded ? 0 : first_policy;
	snprintf(t->reshard, sizeof t->reshard, "%s", policy ? "true" : "false");
	int exceptions = 0;
	for (int i = 0; i < f->nunits; i++) {
		const struct sj_unit *u = &f->units[i];
		if (u->has_params && !u->root && u->forward_gathers && (u->backward_gathers > 0) != policy)
			exceptions++;
	}
	if (exceptions) {
		char list[384] = "";
		for (int i = 0; i < f->nunits; i++) {
			const struct sj_unit *u = &f->units[i];
			if (!u->has_params || u->root || !u->forward_gathers || (u->backward_gathers > 0) == policy)
				continue;
			size_t len = strlen(list);
			snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", u->name);
		}
		sj_note(t, "reshard is the blocks' policy; %s differ (%s after forward)", list,
			policy ? "kept" : "resharded");
	}
}

/* ---- setup fsdp2 ----------------------------------------------------------- */

static void run_fsdp2(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct sj_fsdp2 f;
	fsdp2_init(&f, j, world, NULL, 4 + 8 * o->layers, 1);
	int tok = -1, root = -1, head = -1;
	if (o->torchtitan) {
		/* apply_fsdp: tok_embeddings, each block, [norm, output], then the
		 * model, whose parameters all belong to those units. */
		const struct sj_param *emb[] = {&sj_tok_embeddings};
		tok = fsdp2_add_unit(&f, "tok_embeddings", -1, emb, 1, 1);
		for (int b = 0; b < o->layers; b++)
			fsdp2_add_block(&f, b, b < o->layers - 1 || o->reshard_last_block);
		const struct sj_param *normout[] = {&sj_final_norm, &sj_output};
		head = fsdp2_add_unit(&f, "norm,output", -1, normout, 2, 0);
	} else {
		/* The root holds what no block holds; reshard_after_forward=None is
		 * False for the root, True for the others. */
		const struct sj_param *rootp[] = {&sj_tok_embeddings, &sj_final_norm, &sj_output};
		root = fsdp2_add_unit(&f, "root", -1, rootp, 3, 0);
		f.units[root].root = 1;
		for (int b = 0; b < o->layers; b++)
			fsdp2_add_block(&f, b, 1);
	}
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		fsdp2_step_reset(&f);
		for (int mb = 0; mb < o->accum; mb++) {
			/* set_requires_gradient_sync(False) on all but the last micro-batch */
			f.reduce_grads = !(o->no_sync && mb < o->accum - 1);
			j->phase = "forward";
			if (o->torchtitan) {
				fsdp2_pre_forward(&f, tok);
				fsdp2_post_forward(&f, tok);
			} else {
				fsdp2_pre_forward(&f, root);
			}
			for (int b = 0; b < o->layers; b++)
				fsdp2_block_forward(&f, b);
			if (o->torchtitan)
				fsdp2_pre_forward(&f, head);
			sj_compute(j, 1); /* output head */
			fsdp2_post_forward(&f, o->torchtitan ? head : root);
			j->phase = "backward";
			if (o->torchtitan) {
				fsdp2_pre_backward(&f, head);
				sj_compute(j, 2);
				fsdp2_post_backward(&f, head);
			} else {
				fsdp2_pre_backward(&f, root);
				sj_compute(j, 2);
			}
			for (int b = o->layers - 1; b >= 0; b--)
				fsdp2_block_backward(&f, b);
			/* The embedding's (or the root's) inputs need no gradient: its
			 * post-backward runs in the root's final callback. */
			if (o->torchtitan) {
				fsdp2_pre_backward(&f, tok);
				fsdp2_post_backward(&f, tok);
			} else {
				fsdp2_post_backward(&f, root);
			}
			fsdp2_end_backward(&f);
		}
		j->phase = "optimizer";
		if (o->clip) /* clip_grad_norm_: the total norm's full_tensor() */
			sj_allreduce(j, world, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(&f, t, o->accum);
	t->microbatches = o->accum;
	/* Steps and micro-batches are told apart by NVTX steps, a per-step
	 * collective, or micro-batches that differ (no ReduceScatter but in
	 * the last); otherwise K micro-batches look like K steps. */
	t->microbatches_told = o->nvtx || j->last.step_marks > 0 || (o->no_sync && o->accum > 1);
	if (o->accum > 1)
		sj_note(t, "%d micro-batches per optimizer step%s", o->accum,
			o->no_sync ? ", ReduceScatter only in the last" : ", each reduce-scattering");
	fsdp2_free(&f);
}

/* ---- setup tp: torchtitan 2-D (FSDP2 on dp, sequence parallel on tp) -------- */

static void run_tp(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int T = o->tp, dp_rank = j->rank / T, tp_rank = j->rank % T;
	/* init_device_mesh(("dp_shard", "tp")): rank = dp_rank * T + tp_rank;
	 * one split per dimension, dimension 0 first. */
	struct sj_comm *world = sj_comm_world(j, ROLE_ONE_OFF, "world");
	struct sj_comm *dp = sj_comm_split(j, world, tp_rank, ROLE_FSDP, "dp");
	struct sj_comm *tp = sj_comm_split(j, world, dp_rank, ROLE_TENSOR_PARALLEL, "tp");
	struct sj_fsdp2 f;
	fsdp2_init(&f, j, dp, tp, 4 + 8 * o->layers, 1);
	const struct sj_param *emb[] = {&sj_tok_embeddings};
	int tok = fsdp2_add_unit(&f, "tok_embeddings", -1, emb, 1, 1);
	for (int b = 0; b < o->layers; b++)
		fsdp2_add_block(&f, b, b < o->layers - 1 || o->reshard_last_block);
	const struct sj_param *normout[] = {&sj_final_norm, &sj_output};
	int head = fsdp2_add_unit(&f, "norm,output", -1, normout, 2, 0);
	size_t tokens = (size_t)SJ_BATCH * SJ_SEQ;
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		fsdp2_step_reset(&f);
		for (int mb = 0; mb < o->accum; mb++) {
			f.reduce_grads = !(o->no_sync && mb < o->accum - 1);
			j->phase = "forward";
			fsdp2_pre_forward(&f, tok);
			tp_reduce_scatter(&f); /* RowwiseParallel embedding: Partial -> Shard(1) */
			fsdp2_post_forward(&f, tok);
			for (int b = 0; b < o->layers; b++)
				fsdp2_block_forward(&f, b);
			fsdp2_pre_forward(&f, head);
			tp_gather(&f); /* ColwiseParallel output: input Shard(1) -> Replicate */
			sj_compute(j, 1);
			fsdp2_post_forward(&f, head);
			if (o->loss_parallel) {
				/* loss_parallel cross-entropy on vocab-sharded logits:
				 * _log_softmax's max and sum-exp, _nll_loss_forward's
				 * target logit. */
				sj_allreduce(j, tp, tokens, ncclFloat32, ncclMax, 0);
				sj_allreduce(j, tp, tokens, ncclFloat32, ncclSum, 0);
				sj_allreduce(j, tp, tokens, ncclFloat32, ncclSum, 0);
			} else {
				/* output_layouts=Replicate: gather the logits */
				sj_allgather(j, tp, tokens * (SJ_VOCAB / (size_t)T), ncclBfloat16, KIND_OTHER);
			}
			j->phase = "backward";
			fsdp2_pre_backward(&f, head);
			sj_compute(j, 2);
			tp_reduce_scatter(&f);
			fsdp2_post_backward(&f, head);
			for (int b = o->layers - 1; b >= 0; b--)
				fsdp2_block_backward(&f, b);
			fsdp2_pre_backward(&f, tok);
			tp_gather(&f); /* gradient of the embedding's reduce-scatter */
			fsdp2_post_backward(&f, tok);
			fsdp2_end_backward(&f);
		}
		j->phase = "optimizer";
		/* clip_grad_norm_: the norm is Partial on both mesh dimensions;
		 * full_tensor() all-reduces it on each. */
		sj_allreduce(j, dp, 1, ncclFloat32, ncclSum, 1);
		sj_allreduce(j, tp, 1, ncclFloat32, ncclSum, 1);
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(&f, t, o->accum);
	t->microbatches = o->accum;
	t->microbatches_told = o->nvtx || j->last.step_marks > 0 || (o->no_sync && o->accum > 1);
	sj_note(t, "dp %d x tp %d; FSDP units hold 1/%d of each Linear plus the replicated norms", dp->nranks, T, T);
	fsdp2_free(&f);
}

/* ---- setup pp: pipeline stages x FSDP2 on dp (torchtitan 3-D-lite) ---------- */

struct sj_pp {
	struct sj_job *job;
	struct sj_fsdp2 *f;
	struct sj_comm *pp;
	int stage, stages, first_block, nblocks;
	int tok, head;           /* unit indices, -1 when not on this stage */
	size_t activation_count; /* one micro-batch's hidden states */
};

static void pp_stage_forward(struct sj_pp *p)
{
	struct sj_fsdp2 *f = p->f;
	p->job->phase = "forward";
	if (p->tok >= 0) {
		fsdp2_pre_forward(f, p->tok);
		fsdp2_post_forward(f, p->tok);
	}
	for (int b = p->first_block; b < p->first_block + p->nblocks; b++)
		fsdp2_block_forward(f, b);
	if (p->head >= 0) {
		fsdp2_pre_forward(f, p->head);
		sj_compute(p->job, 1);
		fsdp2_post_forward(f, p->head);
	}
}

/* _PipelineStageBase.backward_maybe_with_nosync: every micro-batch's
 * backward runs without gradient sync and without reshard; after the last
 * one, post_backward of every FSDP state in _state_ctx.all_states order
 * (module pre-order: the forward order) reduce-scatters. */
static void pp_stage_backward(struct sj_pp *p, int last)
{
	struct sj_fsdp2 *f = p->f;
	p->job->phase = "backward";
	f->reduce_grads = 0;
	f->reshard_after_backward = 0;
	if (p->head >= 0) {
		fsdp2_pre_backward(f, p->head);
		sj_compute(p->job, 2);
		fsdp2_post_backward(f, p->head);
	}
	for (int b = p->first_block + p->nblocks - 1; b >= p->first_block; b--)
		fsdp2_block_backward(f, b);
	if (p->tok >= 0) {
		fsdp2_pre_backward(f, p->tok);
		fsdp2_post_backward(f, p->tok);
	}
	fsdp2_end_backward(f);
	if (!last)
		return;
	f->reduce_grads = 1;
	f->reshard_after_backward = 1;
	for (int i = 0; i < f->nunits; i++)
		fsdp2_post_backward(f, i);
}

/* torch.distributed.pipelining's _batch_p2p: batch_isend_irecv of the
 * step's sends and receives, one ncclGroupStart/End; nothing when empty. */
static void pp_batch(struct sj_pp *p, int send_peer, int recv_peer)
{
	if (send_peer < 0 && recv_peer < 0)
		return;
	p->job->phase = "pipeline";
	sj_group_start(p->job);
	if (send_peer >= 0)
		sj_send(p->job, p->pp, p->activation_count, ncclBfloat16, send_peer);
	if (recv_peer >= 0)
		sj_recv(p->job, p->pp, p->activation_count, ncclBfloat16, recv_peer);
	sj_group_end(p->job);
}

/* Schedule1F1B._step_microbatches, one stage per rank: warm-up forwards,
 * then 1B1F with each forward's send fused with the next backward's
 * receive and each backward's send fused with the next forward's receive,
 * then the cool-down backwards. */
static void pp_step(struct sj_pp *p, int microbatches)
{
	int s = p->stage, S = p->stages;
	int prev = s > 0 ? s - 1 : -1, next = s < S - 1 ? s + 1 : -1;
	int warmup = microbatches < S - s ? microbatches : S - s;
	int fwd = 0, bwd = 0;
	int pending_fwd_send = 0; /* a forward's send left to fuse with the next backward's receive */
	for (int i = 0; i < warmup; i++) {
		pp_batch(p, -1, prev); /* receive the activations */
		pp_stage_forward(p);
		if (next >= 0) {
			if (fwd != warmup - 1)
				pp_batch(p, next, -1);
			else
				pending_fwd_send = 1;
		}
		fwd++;
	}
	int pending_bwd_send = 0;
	for (;;) {
		pp_batch(p, pending_fwd_send ? next : -1, next);
		pending_fwd_send = 0;
		pp_stage_backward(p, bwd == microbatches - 1);
		pending_bwd_send = prev >= 0;
		bwd++;
		if (fwd == microbatches)
			break;
		pp_batch(p, pending_bwd_send ? prev : -1, prev);
		pending_bwd_send = 0;
		pp_stage_forward(p);
		pending_fwd_send = next >= 0;
		fwd++;
	}
	pp_batch(p, pending_bwd_send ? prev : -1, -1);
	while (bwd < microbatches) {
		pp_batch(p, -1, next);
		pp_stage_backward(p, bwd == microbatches - 1);
		pp_batch(p, prev, -1);
		bwd++;
	}
}

static void run_pp(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int P = o->pp, dpn = j->world / P;
	int stage = j->rank / dpn, dp_rank = j->rank % dpn;
	/* init_device_mesh(("pp", "dp_shard")): pp outermost, dp groups of
	 * consecutive ranks; the pp dimension is split first. */
	struct sj_comm *world = sj_comm_world(j, ROLE_ONE_OFF, "world");
	struct sj_comm *pp = sj_comm_split(j, world, dp_rank, ROLE_PIPELINE, "pp");
	struct sj_comm *dp = sj_comm_split(j, world, stage, ROLE_FSDP, "dp");
	struct sj_fsdp2 f;
	fsdp2_init(&f, j, dp, NULL, 4 + 8 * o->layers, o->microbatches);
	struct sj_pp p = {.job = j, .f = &f, .pp = pp, .stage = stage, .stages = P, .tok = -1, .head = -1};
	p.nblocks = o->layers / P;
	p.first_block = stage * p.nblocks;
	p.activation_count = (size_t)SJ_SEQ * SJ_HIDDEN; /* one sequence per micro-batch */
	/* apply_fsdp with pp_enabled: reshard_after_forward=False for every unit. */
	if (stage == 0) {
		const struct sj_param *emb[] = {&sj_tok_embeddings};
		p.tok = fsdp2_add_unit(&f, "tok_embeddings", -1, emb, 1, 0);
	}
	for (int b = p.first_block; b < p.first_block + p.nblocks; b++)
		fsdp2_add_block(&f, b, 0);
	if (stage == P - 1) {
		const struct sj_param *normout[] = {&sj_final_norm, &sj_output};
		p.head = fsdp2_add_unit(&f, "norm,output", -1, normout, 2, 0);
	}
	/* P of the whole model, all stages together (f counts this stage's). */
	uint64_t block = 0;
	for (int i = 0; i < BP_COUNT; i++)
		block += (uint64_t)sj_block_params[i].rows * sj_block_params[i].cols;
	uint64_t model = block * (uint64_t)o->layers + sj_tok_embeddings.rows * sj_tok_embeddings.cols +
			 sj_final_norm.rows * sj_final_norm.cols + sj_output.rows * sj_output.cols;
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		fsdp2_step_reset(&f);
		pp_step(&p, o->microbatches);
		j->phase = "optimizer";
		if (o->clip) {
			/* torchtitan's clip_grad_norm_: full_tensor() on dp, then an
			 * explicit all_reduce on the pp group. */
			sj_allreduce(j, dp, 1, ncclFloat32, ncclSum, 1);
			sj_allreduce(j, pp, 1, ncclFloat32, ncclSum, 1);
		}
		sj_compute(j, 1);
		sj_step_end(j);
	}
	fsdp2_truth(&f, t, 1);
	t->params = model;
	t->microbatches = 1;
	t->microbatches_told = o->nvtx || j->last.step_marks > 0;
	sj_note(t,
		"rank 0 is stage 0 of %d (tok_embeddings + blocks %d..%d on a dp group of %d); %d pipeline "
		"micro-batches (1F1B), but FSDP keeps parameters (reshard_after_forward=False): it gathers each "
		"unit once, in the first micro-batch's forward, and reduce-scatters once, after the last backward, "
		"so the FSDP group shows 1 forward/backward cycle per step",
		P, p.first_block, p.first_block + p.nblocks - 1, dpn, o->microbatches);
	fsdp2_free(&f);
}

/* ---- setup fsdp1-hsdp: FSDP1 HYBRID_SHARD ----------------------------------
 * torch/distributed/fsdp/_runtime_utils.py: one FlatParameter per unit;
 * _pre_forward_unshard, _post_forward_reshard (not the root),
 * _pre_backward_hook with BACKWARD_PRE prefetch (_prefetch_handle), and
 * _post_backward_hook -> _reduce_grad: ReduceScatter on the shard group,
 * then AllReduce on the replicate group. */

struct sj_flat_unit {
	int block;          /* -1: the root */
	size_t numel;       /* unsharded FlatParameter, before padding */
	size_t shard;       /* per-rank shard: padded to a multiple of the shard group */
	int unsharded;
	int needs_pre_backward_unshard; /* set when the forward registered pre-backward hooks */
	int post_forward_index;
	int forward_gathers, backward_gathers;
};

struct sj_fsdp1 {
	struct sj_job *job;
	struct sj_comm *shard, *replicate;
	struct sj_flat_unit *units; /* [0] the root, [1 + b] block b */
	int nunits;
	int *post_forward_order;
	int npost;
};

static void fsdp1_gather(struct sj_fsdp1 *f, struct sj_flat_unit *u, int backward)
{
	sj_allgather(f->job, f->shard, u->shard, ncclBfloat16, backward ? KIND_PARAM_BACKWARD : KIND_PARAM_FORWARD);
	u->unsharded = 1;
	if (backward)
		u->backward_gathers++;
	else
		u->forward_gathers++;
}

/* no_grad: the forward of a reentrant activation checkpoint, which
 * registers no pre-backward hooks. */
static void fsdp1_pre_forward(struct sj_fsdp1 *f, int ui, int backward)
{
	struct sj_flat_unit *u = &f->units[ui];
	if (!u->unsharded)
		fsdp1_gather(f, u, backward);
}

static void fsdp1_post_forward(struct sj_fsdp1 *f, int ui, int grad_enabled)
{
	struct sj_flat_unit *u = &f->units[ui];
	if (u->block >= 0) /* HYBRID_SHARD reshards after forward, except the root */
		u->unsharded = 0;
	if (grad_enabled)
		u->needs_pre_backward_unshard = 1;
	/* _ExecOrderData.record_post_forward: the first usage sets the index */
	if (u->post_forward_index < 0) {
		u->post_forward_index = f->npost;
		f->post_forward_order[f->npost++] = ui;
	}
}

static void fsdp1_pre_backward(struct sj_fsdp1 *f, int ui)
{
	struct sj_flat_unit *u = &f->units[ui];
	if (!u->unsharded)
		fsdp1_gather(f, u, 1);
	u->needs_pre_backward_unshard = 0;
	/* BACKWARD_PRE: the unit before it in post-forward order, if its
	 * forward registered hooks and it is not unsharded yet. */
	int target = u->post_forward_index - 1;
	if (target < 0)
		return;
	struct sj_flat_unit *t = &f->units[f->post_forward_order[target]];
	if (t->needs_pre_backward_unshard && !t->unsharded)
		fsdp1_gather(f, t, 1);
}

static void fsdp1_post_backward(struct sj_fsdp1 *f, int ui)
{
	struct sj_flat_unit *u = &f->units[ui];
	sj_reduce_scatter(f->job, f->shard, u->shard, ncclFloat32, KIND_GRAD);
	sj_allreduce(f->job, f->replicate, u->shard, ncclFloat32, ncclSum, 0);
	u->unsharded = 0; /* _should_free_in_backward: the root too */
}

static void run_fsdp1_hsdp(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	int S = o->shard, shard_index = j->rank / S, rank_in_shard = j->rank % S;
	/* init_device_mesh(("replicate", "shard")), FSDP(device_mesh=...,
	 * HYBRID_SHARD): process_group = mesh dim 1, _inter_node_pg = dim 0. */
	struct sj_comm *world = sj_comm_world(j, ROLE_ONE_OFF, "world");
	struct sj_comm *replicate = sj_comm_split(j, world, rank_in_shard, ROLE_REPLICATE, "replicate");
	struct sj_comm *shard = sj_comm_split(j, world, shard_index, ROLE_FSDP, "shard");
	struct sj_fsdp1 f = {.job = j, .shard = shard, .replicate = replicate, .nunits = 1 + o->layers};
	f.units = calloc((size_t)f.nunits, sizeof *f.units);
	f.post_forward_order = calloc((size_t)f.nunits, sizeof *f.post_forward_order);
	if (!f.units || !f.post_forward_order)
		sj_die("out of memory");
	size_t block_numel = 0;
	for (int i = 0; i < BP_COUNT; i++)
		block_numel += sj_block_params[i].rows * sj_block_params[i].cols;
	size_t root_numel = sj_tok_embeddings.rows * sj_tok_embeddings.cols + sj_final_norm.rows * sj_final_norm.cols +
			    sj_output.rows * sj_output.cols;
	for (int i = 0; i < f.nunits; i++) {
		struct sj_flat_unit *u = &f.units[i];
		u->block = i - 1;
		u->numel = i == 0 ? root_numel : block_numel;
		u->shard = sj_ceil_div(u->numel, (size_t)S); /* padded to a multiple of S, then split */
		t->params += u->numel;
	}
	j->phase = "init";
	if (o->sync_module_states) {
		/* _init_param_handle_from_module: _sync_module_params_and_buffers on
		 * the shard group, then on the replicate group, from group rank 0;
		 * auto-wrap constructs the blocks before the root. One
		 * _broadcast_coalesced bucket (250 MB) per unit, fp32 as built. */
		for (int i = 1; i <= f.nunits; i++) {
			struct sj_flat_unit *u = &f.units[i % f.nunits];
			sj_broadcast(j, shard, u->numel, ncclFloat32, 0);
			sj_broadcast(j, replicate, u->numel, ncclFloat32, 0);
		}
	}
	int reentrant = o->checkpoint == CKPT_REENTRANT;
	for (int s = 0; s < o->steps; s++) {
		sj_step_begin(j, s);
		for (int i = 0; i < f.nunits; i++) {
			f.units[i].forward_gathers = f.units[i].backward_gathers = 0;
			f.units[i].post_forward_index = -1;
			f.units[i].needs_pre_backward_unshard = 0;
		}
		f.npost = 0;
		fsdp1_pre_forward(&f, 0, 0);
		for (int b = 0; b < o->layers; b++) {
			fsdp1_pre_forward(&f, 1 + b, 0);
			sj_compute(j, 8);
			fsdp1_post_forward(&f, 1 + b, !reentrant);
		}
		sj_compute(j, 1);
		fsdp1_post_forward(&f, 0, 1);
		j->phase = "backward";
		fsdp1_pre_backward(&f, 0);
		sj_compute(j, 2);
		for (int b = o->layers - 1; b >= 0; b--) {
			if (reentrant) {
				/* CheckpointFunction.backward re-runs the unit's forward
				 * with grad enabled: a full pre-forward (gather), its
				 * reshard, and hooks for the inner backward. */
				fsdp1_pre_forward(&f, 1 + b, 1);
				sj_compute(j, 8);
				fsdp1_post_forward(&f, 1 + b, 1);
			}
			fsdp1_pre_backward(&f, 1 + b);
			sj_compute(j, 16);
			fsdp1_post_backward(&f, 1 + b);
		}
		fsdp1_post_backward(&f, 0);
		j->phase = "optimizer";
		sj_compute(j, 1);
		sj_step_end(j);
	}
	const struct sj_tally *l = &j->last;
	t->fsdp_allgathers = l->param_gathers;
	t->forward_allgathers = l->forward_gathers;
	t->backward_allgathers = l->backward_gathers;
	t->reduce_scatters = l->grad_reduce_scatters;
	t->microbatches = 1;
	t->microbatches_told = o->nvtx;
	t->repeating_units = 0;
	int again = 0;
	for (int b = 0; b < o->layers; b++) {
		t->repeating_units++;
		again += f.units[1 + b].backward_gathers > 0;
	}
	t->gathers_per_unit = f.units[1].forward_gathers;
	snprintf(t->reshard, sizeof t->reshard, "%s", 2 * again >= o->layers ? "true" : "false");
	sj_note(t, "shard groups of %d, replicate groups of %d", S, replicate->nranks);
	if (reentrant)
		sj_note(t,
			"reentrant activation checkpoint around each block unit: %d gathers per block unit per step "
			"(forward, recomputation, backward), a checkpointing choice, not a wrap bug",
			f.units[1].forward_gathers + f.units[1].backward_gathers);
	if (o->sync_module_states)
		sj_note(t, "%d init Broadcasts before step 0 (one per unit on each group)", 2 * f.nunits);
	free(f.units);
	free(f.post_forward_order);
}

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
	int persist;  /* ds_persist: numel <= stage3_param_persistence_threshold */
	enum z3_status status;
	int active;   /* in ds_active_sub_modules of a running module */
	int64_t most_recent_fetched_for; /* __most_recent_step_id_param_fetched_for */
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

struct sj_zero3 {
	struct sj_job *job;
	struct sj_comm *comm;
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

static int z3_add_param(struct sj_zero3 *z, size_t numel)
{
	struct z3_param *p = &z->params[z->nparams];
	memset(p, 0, sizeof *p);
	p->numel = numel;
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
	int p_embed = z3_add_param(z, V * H);
	int *lp = malloc((size_t)L * 9 * sizeof *lp);
	if (!lp)
		sj_die("out of memory");
	for (int l = 0; l < L; l++) {
		int *q = &lp[l * 9];
		q[0] = z3_add_param(z, H * H); /* q_proj */
		q[1] = z3_add_param(z, H * H); /* k_proj */
		q[2] = z3_add_param(z, H * H); /* v_proj */
		q[3] = z3_add_param(z, H * H); /* o_proj */
		q[4] = z3_add_param(z, F * H); /* gate_proj */
		q[5] = z3_add_param(z, F * H); /* up_proj */
		q[6] = z3_add_param(z, H * F); /* down_proj */
		q[7] = z3_add_param(z, H);     /* input_layernorm */
		q[8] = z3_add_param(z, H);     /* post_attention_layernorm */
	}
	int p_norm = z3_add_param(z, H);
	int p_head = z3_add_param(z, V * H);

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

/* all_gather_coalesced of a set of parameters, sorted by ds_id: flat, one
 * ncclAllGather of the concatenated partitions (one parameter: its own
 * padded partition); coalesced, one ncclAllGather per parameter inside one
 * group (PyTorch's coalescing manager). */
static void z3_gather(struct sj_zero3 *z, const int *list, int n, enum sj_kind kind)
{
	if (n == 0)
		return;
	size_t N = (size_t)z->comm->nranks;
	if (z->job->opt->gather_coalesced) {
		sj_group_start(z->job);
		for (int i = 0; i < n; i++)
			sj_allgather(z->job, z->comm, sj_ceil_div(z->params[list[i]].numel, N), ncclBfloat16, kind);
		sj_group_end(z->job);
	} else {
		size_t count = 0;
		for (int i = 0; i < n; i++)
			count += sj_ceil_div(z->params[list[i]].numel, N);
		sj_allgather(z->job, z->comm, count, ncclBfloat16, kind);
	}
	for (int i = 0; i < n; i++) {
		z->params[list[i]].status = Z3_AVAILABLE;
		z->n_available += (long)z->params[list[i]].numel;
	}
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
	if (release && q->status == Z3_AVAILABLE && !q->active) {
		q->status = Z3_NOT_AVAILABLE;
		z->n_available -= (long)q->numel;
	}
}

/* reduce_scatter_coalesced of the IPG bucket: one ncclReduceScatter of the
 * interleaved padded partitions. */
static void z3_flush_bucket(struct sj_zero3 *z)
{
	if (!z->nbucket)
		return;
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

static void run_zero3(struct sj_job *j, struct sj_truth *t)
{
	const struct sj_options *o = j->opt;
	struct sj_comm *world = sj_comm_world(j, ROLE_FSDP, "world");
	struct sj_zero3 z = {.job = j, .comm = world, .mode = Z3_INVALID};
	z3_build(&z);
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
			if (z.params[i].status == Z3_AVAILABLE) {
				z.params[i].status = Z3_NOT_AVAILABLE;
				z.n_available -= (long)z.params[i].numel;
			}
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
		sj_step_end(j);
	}
	const struct sj_tally *l = &j->last;
	t->bucketed = 1;
	t->fsdp_allgathers = l->param_gathers;
	t->fetches = l->param_gathers;
	t->calls = l->param_gather_calls;
	t->reduce_scatters = l->grad_reduce_scatters;
	t->microbatches = 1;
	t->microbatches_told = o->nvtx || l->step_marks > 0;
	sj_note(t,
		"steady step (the last): %d forward and %d backward fetch events; %d persistent parameters "
		"re-gathered after each optimizer step (%s); steps 0 and later differ: step 0 records the module "
		"trace and fetches on demand, step 1 starts with 3 trace Broadcasts",
		l->forward_gathers, l->backward_gathers, persistent,
		o->gather_coalesced ? "one group" : "one ungrouped AllGather each");
	z3_free(&z);
}

/* ---- launching the ranks ---------------------------------------------------- */

struct sj_id_box {
	atomic_int state; /* 0 waiting, 1 published, -1 rank 0 failed */
	ncclUniqueId id;
};

static int sj_exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

/* Fork nranks ranks as fsdp_ref does: rank 0 makes the unique id and
 * publishes it in shared memory; the parent only supervises (never calls
 * NCCL) and, when a rank fails, kills the others. Returns 0 in a rank with
 * *rank and *id set, or exits in the parent with the job's status. */
static void sj_launch(int nranks, int *rank, ncclUniqueId *id)
{
	struct sj_id_box *box = mmap(NULL, sizeof *box, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t *pids = calloc((size_t)nranks, sizeof *pids);
	if (box == MAP_FAILED || !pids)
		sj_die("out of memory");
	atomic_store(&box->state, 0);
	fflush(NULL);
	for (int r = 0; r < nranks; r++) {
		pid_t pid = fork();
		if (pid < 0) {
			for (int i = 0; i < r; i++)
				kill(pids[i], SIGKILL);
			sj_die("fork: %s", strerror(errno));
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			free(pids);
			*rank = r;
			sj_rank_for_messages = r;
			if (r == 0) {
				if (ncclGetUniqueId(&box->id) != ncclSuccess) {
					atomic_store(&box->state, -1);
					sj_die("ncclGetUniqueId failed");
				}
				atomic_store(&box->state, 1);
			}
			struct timespec ms = {0, 1000000};
			for (int waited = 0; atomic_load(&box->state) == 0; waited++) {
				if (waited > 120000)
					sj_die("no unique id from rank 0");
				nanosleep(&ms, NULL);
			}
			if (atomic_load(&box->state) < 0)
				sj_die("rank 0 could not make the unique id");
			*id = box->id;
			munmap(box, sizeof *box);
			return;
		}
		pids[r] = pid;
	}
	int remaining = nranks, failure = 0;
	while (remaining > 0) {
		int status;
		pid_t pid = waitpid(-1, &status, 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < nranks; i++)
			if (pids[i] == pid) {
				pids[i] = -1;
				remaining--;
				int code = sj_exit_code(status);
				if (code && !failure) {
					failure = code;
					fprintf(stderr, "stream_job: rank %d failed (status %d); stopping the others\n", i,
						code);
					for (int k = 0; k < nranks; k++)
						if (pids[k] > 0)
							kill(pids[k], SIGKILL);
				}
			}
	}
	exit(failure);
}

/* ---- command line ------------------------------------------------------------ */

static void sj_usage(FILE *out)
{
	fprintf(out,
		"usage: stream_job --setup NAME --nranks N --steps S [--layers L] [--wrap block|linear]\n"
		"                  [options per setup] [--nvtx] [--log FILE] [--compute-us US] --truth FILE\n"
		"\n"
		"Issues over NCCL the collective stream of a real training setup and writes\n"
		"what a correct diagnosis says to FILE (rank 0, JSON). See tests/e2e/stream_job.md.\n"
		"\n"
		"setups and their options:\n"
		"  fsdp2       FSDP2 on one communicator: --accum K, --no-sync, --clip, --torchtitan,\n"
		"              --reshard-last-block (torchtitan units, last block resharded too)\n"
		"  tp          torchtitan 2-D, FSDP2 on dp x sequence parallel on tp: --tp T (2),\n"
		"              --no-loss-parallel, --accum K, --no-sync, --reshard-last-block\n"
		"  fsdp1-hsdp  FSDP1 HYBRID_SHARD: --shard S (N/2 from 4 ranks, else N),\n"
		"              --sync-module-states, --checkpoint-wrapper[=reentrant|no-reentrant]\n"
		"  zero3       DeepSpeed ZeRO-3: --bucket E (200000), --gather flat|coalesced,\n"
		"              --persistence E (1024), --max-reuse E (1000000), --max-live E (1000000),\n"
		"              --reduce-bucket E (1700000), --init-broadcast\n"
		"  pp          pipeline stages x FSDP2 on dp: --pp P (2), --microbatches M (4), --clip\n"
		"\n"
		"common: --nranks N (2), --steps S (5), --layers L (4), --wrap block|linear (block),\n"
		"  --nvtx (ProfilerStep#N ranges), --log FILE (rank 0's calls, one a line),\n"
		"  --compute-us US (200: busy wait per emulated matmul)\n");
}

static long sj_parse_long(const char *s, const char *opt, long min)
{
	char *end = NULL;
	errno = 0;
	double d = strtod(s, &end); /* accepts 5e7 as DeepSpeed configs write it */
	if (errno || !end || *end || d < (double)min || d > (double)LONG_MAX / 2)
		sj_die("%s: bad value '%s' (a number >= %ld)", opt, s, min);
	return (long)d;
}

static void sj_parse(int argc, char **argv, struct sj_options *o)
{
	enum {
		O_SETUP = 256, O_NRANKS, O_STEPS, O_LAYERS, O_WRAP, O_NVTX, O_TRUTH, O_LOG, O_COMPUTE, O_ACCUM,
		O_NO_SYNC, O_CLIP, O_TORCHTITAN, O_RESHARD_LAST, O_TP, O_NO_LOSS_PARALLEL, O_SHARD, O_SYNC_STATES,
		O_CHECKPOINT, O_BUCKET, O_GATHER, O_PERSISTENCE, O_MAX_REUSE, O_MAX_LIVE, O_REDUCE_BUCKET,
		O_INIT_BCAST, O_PP, O_MICROBATCHES, O_HELP
	};
	static const struct option longopts[] = {
	    {"setup", required_argument, NULL, O_SETUP},
	    {"nranks", required_argument, NULL, O_NRANKS},
	    {"steps", required_argument, NULL, O_STEPS},
	    {"layers", required_argument, NULL, O_LAYERS},
	    {"wrap", required_argument, NULL, O_WRAP},
	    {"nvtx", no_argument, NULL, O_NVTX},
	    {"truth", required_argument, NULL, O_TRUTH},
	    {"log", required_argument, NULL, O_LOG},
	    {"compute-us", required_argument, NULL, O_COMPUTE},
	    {"accum", required_argument, NULL, O_ACCUM},
	    {"no-sync", no_argument, NULL, O_NO_SYNC},
	    {"clip", no_argument, NULL, O_CLIP},
	    {"torchtitan", no_argument, NULL, O_TORCHTITAN},
	    {"reshard-last-block", no_argument, NULL, O_RESHARD_LAST},
	    {"tp", required_argument, NULL, O_TP},
	    {"no-loss-parallel", no_argument, NULL, O_NO_LOSS_PARALLEL},
	    {"shard", required_argument, NULL, O_SHARD},
	    {"sync-module-states", no_argument, NULL, O_SYNC_STATES},
	    {"checkpoint-wrapper", optional_argument, NULL, O_CHECKPOINT},
	    {"bucket", required_argument, NULL, O_BUCKET},
	    {"gather", required_argument, NULL, O_GATHER},
	    {"persistence", required_argument, NULL, O_PERSISTENCE},
	    {"max-reuse", required_argument, NULL, O_MAX_REUSE},
	    {"max-live", required_argument, NULL, O_MAX_LIVE},
	    {"reduce-bucket", required_argument, NULL, O_REDUCE_BUCKET},
	    {"init-broadcast", no_argument, NULL, O_INIT_BCAST},
	    {"pp", required_argument, NULL, O_PP},
	    {"microbatches", required_argument, NULL, O_MICROBATCHES},
	    {"help", no_argument, NULL, O_HELP},
	    {NULL, 0, NULL, 0},
	};
	memset(o, 0, sizeof *o);
	o->nranks = 2;
	o->steps = 5;
	o->layers = 4;
	o->compute_us = 200;
	o->accum = 1;
	o->tp = 2;
	o->loss_parallel = 1;
	o->bucket = 200000;
	o->persistence = 1024;
	o->max_reuse = 1000000;
	o->max_live = 1000000;
	o->reduce_bucket = 1700000;
	o->pp = 2;
	o->microbatches = 4;
	int given_shard = 0, setup_given = 0;
	/* which setup-specific options were given, to refuse those that do not apply */
	int fsdp2_only = 0, accum_opts = 0, tp_opts = 0, fsdp1_opts = 0, zero3_opts = 0, pp_opts = 0, clip = 0;
	int opt;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case O_SETUP:
			setup_given = 1;
			o->setup_name = optarg;
			if (!strcmp(optarg, "fsdp2"))
				o->setup = SETUP_FSDP2;
			else if (!strcmp(optarg, "tp"))
				o->setup = SETUP_TP;
			else if (!strcmp(optarg, "fsdp1-hsdp"))
				o->setup = SETUP_FSDP1_HSDP;
			else if (!strcmp(optarg, "zero3"))
				o->setup = SETUP_ZERO3;
			else if (!strcmp(optarg, "pp"))
				o->setup = SETUP_PP;
			else
				sj_die("--setup: unknown setup '%s' (fsdp2, tp, fsdp1-hsdp, zero3, pp)", optarg);
			break;
		case O_NRANKS:
			o->nranks = (int)sj_parse_long(optarg, "--nranks", 1);
			break;
		case O_STEPS:
			o->steps = (int)sj_parse_long(optarg, "--steps", 1);
			break;
		case O_LAYERS:
			o->layers = (int)sj_parse_long(optarg, "--layers", 1);
			break;
		case O_WRAP:
			if (!strcmp(optarg, "linear"))
				o->wrap_linear = 1;
			else if (strcmp(optarg, "block"))
				sj_die("--wrap: block or linear, not '%s'", optarg);
			break;
		case O_NVTX:
			o->nvtx = 1;
			break;
		case O_TRUTH:
			o->truth_path = optarg;
			break;
		case O_LOG:
			o->log_path = optarg;
			break;
		case O_COMPUTE:
			o->compute_us = sj_parse_long(optarg, "--compute-us", 0);
			break;
		case O_ACCUM:
			o->accum = (int)sj_parse_long(optarg, "--accum", 1);
			accum_opts = 1;
			break;
		case O_NO_SYNC:
			o->no_sync = 1;
			accum_opts = 1;
			break;
		case O_CLIP:
			o->clip = 1;
			clip = 1;
			break;
		case O_TORCHTITAN:
			o->torchtitan = 1;
			fsdp2_only = 1;
			break;
		case O_RESHARD_LAST:
			o->reshard_last_block = 1;
			break;
		case O_TP:
			o->tp = (int)sj_parse_long(optarg, "--tp", 1);
			tp_opts = 1;
			break;
		case O_NO_LOSS_PARALLEL:
			o->loss_parallel = 0;
			tp_opts = 1;
			break;
		case O_SHARD:
			o->shard = (int)sj_parse_long(optarg, "--shard", 1);
			given_shard = 1;
			fsdp1_opts = 1;
			break;
		case O_SYNC_STATES:
			o->sync_module_states = 1;
			fsdp1_opts = 1;
			break;
		case O_CHECKPOINT:
			fsdp1_opts = 1;
			if (!optarg || !strcmp(optarg, "reentrant"))
				o->checkpoint = CKPT_REENTRANT;
			else if (!strcmp(optarg, "no-reentrant"))
				o->checkpoint = CKPT_NO_REENTRANT;
			else
				sj_die("--checkpoint-wrapper: reentrant or no-reentrant, not '%s'", optarg);
			break;
		case O_BUCKET:
			o->bucket = sj_parse_long(optarg, "--bucket", 0);
			zero3_opts = 1;
			break;
		case O_GATHER:
			zero3_opts = 1;
			if (!strcmp(optarg, "coalesced"))
				o->gather_coalesced = 1;
			else if (strcmp(optarg, "flat"))
				sj_die("--gather: flat or coalesced, not '%s'", optarg);
			break;
		case O_PERSISTENCE:
			o->persistence = sj_parse_long(optarg, "--persistence", 0);
			zero3_opts = 1;
			break;
		case O_MAX_REUSE:
			o->max_reuse = sj_parse_long(optarg, "--max-reuse", 0);
			zero3_opts = 1;
			break;
		case O_MAX_LIVE:
			o->max_live = sj_parse_long(optarg, "--max-live", 0);
			zero3_opts = 1;
			break;
		case O_REDUCE_BUCKET:
			o->reduce_bucket = sj_parse_long(optarg, "--reduce-bucket", 1);
			zero3_opts = 1;
			break;
		case O_INIT_BCAST:
			o->init_broadcast = 1;
			zero3_opts = 1;
			break;
		case O_PP:
			o->pp = (int)sj_parse_long(optarg, "--pp", 2);
			pp_opts = 1;
			break;
		case O_MICROBATCHES:
			o->microbatches = (int)sj_parse_long(optarg, "--microbatches", 1);
			pp_opts = 1;
			break;
		case O_HELP:
			sj_usage(stdout);
			exit(0);
		default:
			sj_usage(stderr);
			sj_die("unknown option or missing value: %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		sj_die("unexpected argument '%s'", argv[optind]);
	if (!setup_given)
		sj_die("--setup is required (fsdp2, tp, fsdp1-hsdp, zero3, pp)");
	if (!o->truth_path)
		sj_die("--truth FILE is required");
	if (o->nranks > 64)
		sj_die("--nranks: at most 64 (the stand-in's limit)");
#ifndef STREAM_JOB_HAVE_NVTX
	if (o->nvtx)
		sj_die("--nvtx: built without the NVTX3 headers");
#endif
	enum sj_setup s = o->setup;
	if (fsdp2_only && s != SETUP_FSDP2)
		sj_die("--torchtitan applies to fsdp2 (tp and pp always use torchtitan's units)");
	if (accum_opts && s != SETUP_FSDP2 && s != SETUP_TP)
		sj_die("--accum / --no-sync apply to fsdp2 and tp");
	if (o->reshard_last_block && !(s == SETUP_TP || (s == SETUP_FSDP2 && o->torchtitan)))
		sj_die("--reshard-last-block applies to tp and to fsdp2 --torchtitan");
	if (clip && s != SETUP_FSDP2 && s != SETUP_PP)
		sj_die("--clip applies to fsdp2 and pp (tp always clips)");
	if (tp_opts && s != SETUP_TP)
		sj_die("--tp / --no-loss-parallel apply to tp");
	if (fsdp1_opts && s != SETUP_FSDP1_HSDP)
		sj_die("--shard / --sync-module-states / --checkpoint-wrapper apply to fsdp1-hsdp");
	if (zero3_opts && s != SETUP_ZERO3)
		sj_die("the bucket options apply to zero3");
	if (pp_opts && s != SETUP_PP)
		sj_die("--pp / --microbatches apply to pp");
	if (o->wrap_linear && (s == SETUP_FSDP1_HSDP || s == SETUP_ZERO3 || s == SETUP_PP))
		sj_die("--wrap linear applies to fsdp2 and tp");
	if (o->no_sync && o->accum < 2)
		sj_die("--no-sync needs --accum K with K >= 2");
	if (s == SETUP_TP && (o->nranks % o->tp || SJ_FFN % o->tp || SJ_HIDDEN % o->tp || SJ_SEQ % o->tp))
		sj_die("--tp %d must divide --nranks %d and the model's sizes", o->tp, o->nranks);
	if (s == SETUP_PP && (o->nranks % o->pp || o->layers % o->pp))
		sj_die("--pp %d must divide --nranks %d and --layers %d", o->pp, o->nranks, o->layers);
	if (s == SETUP_FSDP1_HSDP) {
		if (!given_shard)
			o->shard = o->nranks >= 4 ? o->nranks / 2 : o->nranks;
		if (o->nranks % o->shard)
			sj_die("--shard %d must divide --nranks %d", o->shard, o->nranks);
		if (o->shard < 2)
			sj_die("--shard must be >= 2 (FSDP1 turns a shard group of 1 into NO_SHARD)");
	}
}

int main(int argc, char **argv)
{
	struct sj_options o;
	sj_parse(argc, argv, &o);
	struct sj_job j = {.opt = &o, .world = o.nranks, .step = -1, .phase = "init"};
	sj_launch(o.nranks, &j.rank, &j.id);
	j.send_arena = mmap(NULL, SJ_ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			    -1, 0);
	j.recv_arena = mmap(NULL, SJ_ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			    -1, 0);
	if (j.send_arena == MAP_FAILED || j.recv_arena == MAP_FAILED)
		sj_die("cannot map the buffer arenas");
	if (o.log_path && j.rank == 0) {
		j.log = fopen(o.log_path, "w");
		if (!j.log)
			sj_die("cannot write %s: %s", o.log_path, strerror(errno));
	}
	struct sj_truth t;
	sj_truth_init(&t);
	switch (o.setup) {
	case SETUP_FSDP2:
		run_fsdp2(&j, &t);
		break;
	case SETUP_TP:
		run_tp(&j, &t);
		break;
	case SETUP_FSDP1_HSDP:
		run_fsdp1_hsdp(&j, &t);
		break;
	case SETUP_ZERO3:
		run_zero3(&j, &t);
		break;
	case SETUP_PP:
		run_pp(&j, &t);
		break;
	}
	if (j.rank == 0)
		sj_truth_write(&j, &t);
	if (j.log)
		fclose(j.log);
	/* Children of a split first, as ProcessGroupNCCL's shutdown does. */
	for (int i = j.ncomms - 1; i >= 0; i--)
		ncclCommDestroy(j.comms[i].nccl);
	return 0;
}
