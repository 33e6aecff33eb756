/* fsdp_ref/train.c: the training loop and the run's set-up (see train.h).
 *
 * Per rank: bind the backend, create the world communicator and its splits
 * (shard groups, replica groups for HSDP, re-gather groups for
 * --reshard-after-forward G, TP groups for --tp), build units and shards
 * (broadcast from rank 0 with --sync-module-states), then per step: per
 * micro-batch forward, backward and the wait for its reductions; the
 * gradient norm's AllReduce with --clip-grad; Adam on the shards; the loss
 * AllReduce. After a step, outside it: an eval pass every --eval-every
 * steps, a checkpoint save every --checkpoint-every steps; then the step's
 * log line.
 *
 * The mesh with --tp T: N = dp x T ranks, rank = dp_rank x T + tp_rank, so
 * that a TP group is T consecutive ranks (one node, on real machines) and
 * the data-parallel groups are strided. FSDP's groups (shard, replica,
 * re-gather) are those of T = 1 drawn inside the dp dimension: the ranks of
 * one tp_rank, which hold the same part of every split tensor. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsdp_ref/checkpoint.h"
#include "fsdp_ref/comm.h"
#include "fsdp_ref/counts.h"
#include "fsdp_ref/data.h"
#include "fsdp_ref/fsdp.h"
#include "fsdp_ref/launch.h"
#include "fsdp_ref/log.h"
#include "fsdp_ref/markers.h"
#include "fsdp_ref/mem.h"
#include "fsdp_ref/model.h"
#include "fsdp_ref/optim.h"
#include "fsdp_ref/options.h"
#include "fsdp_ref/tp.h"
#include "fsdp_ref/train.h"
#include "fsdp_ref/units.h"
#include "fsdp_ref/wrap.h"
#include "fsdp_ref/zero3.h"

/* A validated run: options plus what follows from them and the world size. */
struct run_plan {
	struct fsdp_options opt;
	struct wrap_spec wrap;
	int world_size;
	int tp;		  /* T */
	int dp;		  /* N / T: data-parallel ranks */
	int shard_size;	  /* S, divides dp */
	int replicas;	  /* R = dp / S */
	int reshard_size; /* G */
};

static const char *dtype_name(enum fsdp_dtype t)
{
	return t == FSDP_DTYPE_BF16 ? "bf16" : "fp32";
}

/* Every check that can be made before any rank starts, so that a bad flag
 * is one clear message and exit status 2, not N failing ranks. */
static int plan_run(struct run_plan *p, char *err, size_t errlen)
{
	struct fsdp_options *o = &p->opt;
	int rc = launch_world_size(o->nranks, o->unique_id_file, &p->world_size, err, errlen);
	if (rc < 0)
		return rc;
	p->tp = model_tp_size(&o->model);
	if (p->world_size % p->tp != 0) {
		snprintf(err, errlen, "bad --tp %d: it must divide the number of ranks %d (N = data-parallel x tp)",
			 p->tp, p->world_size);
		return -EINVAL;
	}
	/* FSDP lives in the data-parallel dimension */
	int n = p->dp = p->world_size / p->tp;
	const char *dp_word = p->tp > 1 ? "data-parallel " : "";
	p->shard_size = o->shard_group ? o->shard_group : n;
	if (p->shard_size > n || n % p->shard_size != 0) {
		snprintf(err, errlen, "bad --shard-group %d: it must divide the number of %sranks %d", p->shard_size,
			 dp_word, n);
		return -EINVAL;
	}
	p->replicas = n / p->shard_size;
	if (o->batch % n != 0) {
		snprintf(err, errlen, "--batch %d is the global batch: it must be a multiple of the %d %sranks",
			 o->batch, n, dp_word);
		return -EINVAL;
	}
	int tokens = o->batch / n * o->model.seq;
	if (tokens % p->tp != 0) {
		snprintf(err, errlen,
			 "--tp %d must divide the %d tokens of a data-parallel rank (--batch / %d x --seq): each tp "
			 "rank holds 1/%d of them between blocks",
			 p->tp, tokens, n, p->tp);
		return -EINVAL;
	}
	const struct {
		const char *flag;
		int rank, step;
	} faults[] = {{"--stall-at", o->stall_rank, o->stall_step},
		      {"--mismatch-at", o->mismatch_rank, o->mismatch_step}};
	for (int i = 0; i < 2; i++) {
		if (faults[i].rank < 0)
			continue;
		if (faults[i].rank >= p->world_size || faults[i].step >= o->steps) {
			snprintf(err, errlen, "bad %s %d:%d: the job has ranks 0..%d and steps 0..%d", faults[i].flag,
				 faults[i].rank, faults[i].step, p->world_size - 1, o->steps - 1);
			return -EINVAL;
		}
	}
	if (o->stall_rank >= 0 && o->stall_rank == o->mismatch_rank && o->stall_step == o->mismatch_step) {
		snprintf(err, errlen,
			 "--stall-at and --mismatch-at name the same rank and step: the stall would come "
			 "first and the mismatch never");
		return -EINVAL;
	}
	if ((rc = wrap_parse(o->wrap, o->model.layers, &p->wrap, err, errlen)) < 0)
		return rc;
	if ((rc = fsdp_reshard_parse(o->reshard, p->shard_size, &p->reshard_size, err, errlen)) < 0)
		return rc;
	if (o->activation_checkpoint && o->style == FSDP_STYLE_FSDP1 && p->reshard_size > 0 &&
	    p->reshard_size < p->shard_size) {
		snprintf(err, errlen,
			 "--activation-checkpoint with --style fsdp1 needs --reshard-after-forward true or false, "
			 "not a group size (FSDP1 has no partial reshard)");
		return -EINVAL;
	}
	return 0;
}

static int nccl_check(ncclResult_t r, const char *what, int rank)
{
	if (r == ncclSuccess)
		return 0;
	fprintf(stderr, "fsdp_ref: rank %d: %s: %s\n", rank, what, ncclGetErrorString(r));
	return -EIO;
}

/* Everything one rank owns, for one cleanup path. */
struct rank_state {
	const struct fsdp_backend *be;
	int backend_up;
	ncclComm_t world, shard, replica, regather, tp_comm;
	struct comm_thread *ct;
	struct tp_group *tp; /* NULL without --tp */
	struct mem_ledger *mem;
	struct unit_table *units;
	struct fsdp_runtime *rt;
	struct zero3_runtime *z3; /* --style zero3: the parameter runtime instead of rt */
	struct model *model;
	struct run_log *log;
	int32_t *inputs, *targets;
	/* --comm-name-prefix's names: read by the communicators, freed after them */
	char *comm_names[5];
	double *loss_dev; /* one double on the device: the loss all-reduce buffer */
	struct fsdp_event *loss_ready, *loss_done;
};

static void rank_cleanup(struct rank_state *s)
{
	/* The runtime first: it waits for requests that reference its buffers. */
	fsdp_free(s->rt);
	zero3_free(s->z3);
	tp_free(s->tp);
	comm_thread_free(s->ct);
	model_free(s->model);
	if (s->mem)
		mem_free(s->mem, MEM_OTHER, s->loss_dev, sizeof(double));
	if (s->loss_ready)
		s->be->event_free(s->loss_ready);
	if (s->loss_done)
		s->be->event_free(s->loss_done);
	units_free(s->units);
	mem_free_ledger(s->mem);
	ncclComm_t comms[] = {s->tp_comm, s->regather, s->replica, s->shard, s->world};
	for (size_t i = 0; i < sizeof comms / sizeof comms[0]; i++)
		if (comms[i] && (i == 4 || comms[i] != s->world))
			ncclCommDestroy(comms[i]);
	if (s->backend_up)
		s->be->shutdown();
	log_close(s->log);
	free(s->inputs);
	free(s->targets);
	for (int c = 0; c < 5; c++)
		free(s->comm_names[c]);
}

/* All-reduce one scalar (a double sent as `dtype`, ncclFloat64 or
 * ncclFloat32) on `comm` through the communication thread, so that every
 * collective of the rank comes from one thread. *wait_ns: how long compute
 * waited for it. */
static int scalar_allreduce(struct rank_state *s, ncclComm_t comm, ncclDataType_t dtype, double local, double *global,
			    int64_t *wait_ns)
{
	const struct fsdp_backend *be = s->be;
	struct comm_request req = {
	    .op = COMM_ALLREDUCE,
	    .comm = comm,
	    .send = s->loss_dev,
	    .recv = s->loss_dev,
	    .count = 1,
	    .dtype = dtype,
	    .ready = s->loss_ready,
	    .done = s->loss_done,
	};
	float f = (float)local;
	int rc = dtype == ncclFloat32 ? be->memcpy_h2d(s->loss_dev, &f, sizeof f)
				      : be->memcpy_h2d(s->loss_dev, &local, sizeof local);
	if (rc == 0)
		rc = be->event_record_compute(s->loss_ready);
	if (rc == 0)
		rc = comm_submit(s->ct, &req);
	if (rc < 0)
		return rc;
	int64_t t0 = comm_now_ns();
	rc = comm_wait(s->ct, &req);
	if (rc == 0)
		rc = be->compute_wait_event(s->loss_done);
	if (rc == 0 && dtype == ncclFloat32) {
		rc = be->memcpy_d2h(&f, s->loss_dev, sizeof f);
		*global = f;
	} else if (rc == 0) {
		rc = be->memcpy_d2h(global, s->loss_dev, sizeof *global);
	}
	if (wait_ns)
		*wait_ns = comm_now_ns() - t0;
	return rc;
}

/* The parameter runtime (FSDP or ZeRO-3) and the TP group start a step's
 * counters. */
static void runtime_step_begin(struct rank_state *s)
{
	if (s->z3)
		zero3_step_begin(s->z3);
	else
		fsdp_step_begin(s->rt);
	if (s->tp)
		tp_step_begin(s->tp);
}

/* The parameter runtime's counters of the step. */
static void runtime_step_stats(const struct rank_state *s, struct fsdp_step_stats *st)
{
	if (s->z3)
		zero3_step_stats(s->z3, st);
	else
		fsdp_step_stats(s->rt, st);
}

/* --hold-at: wait for one byte from the FIFO at path (a test releases the
 * job by writing it). A FIFO that cannot be read is said and not waited for. */
static void train_hold(const char *path)
{
	char c;
	ssize_t n;
	int fd;

	do
		fd = open(path, O_RDONLY | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		fprintf(stderr, "fsdp_ref: --hold-at %s: %s; not holding\n", path, strerror(errno));
		return;
	}
	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	close(fd);
}

/* What the fault report needs to name the communicator and write the line. */
struct fault_context {
	const struct rank_state *s;
	int rank, world_size;
};

static const char *comm_op_name(enum comm_op op)
{
	switch (op) {
	case COMM_REDUCE_SCATTER:
		return "ReduceScatter";
	case COMM_ALLREDUCE:
		return "AllReduce";
	case COMM_BROADCAST:
		return "Broadcast";
	case COMM_ALLGATHER:
	case COMM_ALLGATHER_COALESCED:
		break;
	}
	return "AllGather";
}

/* --stall-at / --mismatch-at (comm_fault_fn, on the communication thread):
 * the ground truth, on stderr and as a fault line of --log, before the
 * collective it concerns. */
static void train_fault_report(void *arg, const struct comm_fault_report *r)
{
	const struct fault_context *fc = arg;
	const struct rank_state *s = fc->s;
	const char *role = r->comm == s->world	    ? "world"
			   : r->comm == s->shard    ? "dp_shard"
			   : r->comm == s->replica  ? "dp_replicate"
			   : r->comm == s->regather ? "dp_regather"
			   : r->comm == s->tp_comm  ? "tp"
						    : "unknown";
	int comm_rank = -1, comm_nranks = -1;
	ncclCommUserRank(r->comm, &comm_rank);
	ncclCommCount(r->comm, &comm_nranks);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	const char *op = comm_op_name(r->op);
	int stall = r->kind == COMM_FAULT_STALL;
	struct log_fault f = {
	    .fault = stall ? "stall" : "mismatch",
	    .step = r->step,
	    .rank = fc->rank,
	    .world_size = fc->world_size,
	    .comm = role,
	    .comm_handle = (uint64_t)(uintptr_t)r->comm,
	    .comm_rank = comm_rank,
	    .comm_nranks = comm_nranks,
	    .comm_seq = r->comm_seq,
	    .op = op,
	    .count = r->count,
	    .issued_count = r->issued_count,
	    .realtime_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec,
	};
	if (stall)
		fprintf(stderr,
			"fsdp_ref: rank %d: --stall-at %d:%d: stopped before collective %llu on communicator %s (%s of "
			"%zu elements; rank %d of %d in it); waiting for a signal\n",
			fc->rank, fc->rank, r->step, (unsigned long long)r->comm_seq, role, op, r->count, comm_rank,
			comm_nranks);
	else
		fprintf(stderr,
			"fsdp_ref: rank %d: --mismatch-at %d:%d: collective %llu on communicator %s (%s; rank %d of %d "
			"in it) issued with count %zu instead of %zu\n",
			fc->rank, fc->rank, r->step, (unsigned long long)r->comm_seq, role, op, comm_rank, comm_nranks,
			r->issued_count, r->count);
	fflush(stderr);
	int rc = s->log ? log_write_fault(s->log, &f) : 0;
	if (rc < 0)
		fprintf(stderr, "fsdp_ref: rank %d: writing the fault line to the log: %s\n", fc->rank, strerror(-rc));
}

static int run_rank(const struct run_plan *p, const struct fsdp_backend *be, const struct launch_info *li)
{
	const struct fsdp_options *o = &p->opt;
	struct rank_state s = {.be = be};
	int rank = li->rank, n = li->world_size, S = p->shard_size, G = p->reshard_size;
	int T = p->tp, tp_rank = rank % T, dp_rank = rank / T;
	int rc = -EIO;
	char err[256];

	if (o->log_path) { /* before the communicator: see log.h */
		s.log = log_open(o->log_path, rank == 0);
		if (!s.log) {
			fprintf(stderr, "fsdp_ref: rank %d: cannot open --log %s: %s\n", rank, o->log_path,
				strerror(errno));
			goto out;
		}
	}
	if (be->init(rank, li->local_rank, n) < 0) {
		fprintf(stderr, "fsdp_ref: rank %d: the %s backend failed to start\n", rank, be->name);
		goto out;
	}
	s.backend_up = 1;
	/* --comm-names: the names a job may give in ncclConfig_t.commName (as
	 * DeviceMesh dimensions are named); without it, no config, as before */
	ncclConfig_t cfg_world = NCCL_CONFIG_INITIALIZER, cfg_shard = NCCL_CONFIG_INITIALIZER,
		     cfg_replica = NCCL_CONFIG_INITIALIZER, cfg_regather = NCCL_CONFIG_INITIALIZER,
		     cfg_tp = NCCL_CONFIG_INITIALIZER;
	char **comm_names = s.comm_names;
	ncclConfig_t *cfgs[5] = {&cfg_world, &cfg_shard, &cfg_replica, &cfg_regather, &cfg_tp};
	static const char *const comm_base[5] = {"world", "dp_shard", "dp_replicate", "dp_regather", "tp"};
	for (int c = 0; c < 5; c++) {
		/* --comm-name-prefix: any bytes before the name (fsdpscope's escaping tests) */
		size_t len = (o->comm_name_prefix ? strlen(o->comm_name_prefix) : 0) + strlen(comm_base[c]) + 1;
		comm_names[c] = o->comm_name_prefix ? malloc(len) : NULL;
		if (comm_names[c])
			snprintf(comm_names[c], len, "%s%s", o->comm_name_prefix, comm_base[c]);
		cfgs[c]->commName = comm_names[c] ? comm_names[c] : comm_base[c];
	}
	int named = o->comm_names;
	if (nccl_check(named ? ncclCommInitRankConfig(&s.world, n, li->id, rank, &cfg_world)
			     : ncclCommInitRank(&s.world, n, li->id, rank),
		       "ncclCommInitRank", rank) < 0)
		goto out;
	/* Splits: every rank makes the same calls in the same order. The FSDP
	 * groups are the dp-dimension groups of one tp rank: color (group index
	 * in dp) x T + tp_rank, which is the group index itself when T = 1. */
	s.shard = s.world;
	if (S < n && nccl_check(ncclCommSplit(s.world, dp_rank / S * T + tp_rank, rank, &s.shard,
					      named ? &cfg_shard : NULL),
				"ncclCommSplit (shard groups)", rank) < 0)
		goto out;
	if (p->replicas > 1 && nccl_check(ncclCommSplit(s.world, dp_rank % S * T + tp_rank, rank, &s.replica,
							named ? &cfg_replica : NULL),
					  "ncclCommSplit (replica groups)", rank) < 0)
		goto out;
	if (G > 1 && G < S &&
	    nccl_check(ncclCommSplit(s.world, dp_rank / G * T + tp_rank, rank, &s.regather, named ? &cfg_regather : NULL),
		       "ncclCommSplit (re-gather groups)", rank) < 0)
		goto out;
	if (T > 1 && nccl_check(ncclCommSplit(s.world, dp_rank, rank, &s.tp_comm, named ? &cfg_tp : NULL),
				"ncclCommSplit (tp groups)", rank) < 0)
		goto out;

	rc = -ENOMEM;
	s.mem = mem_new(be);
	s.units = units_build(&o->model, &p->wrap, S);
	s.ct = comm_thread_new(be);
	if (!s.mem || !s.units || !s.ct)
		goto out;
	if (T > 1 && !(s.tp = tp_new(be, s.ct, s.tp_comm)))
		goto out;
	int k = o->grad_accum;
	struct fsdp_config fcfg = {
	    .param_dtype = o->param_dtype,
	    .reduce_dtype = o->reduce_dtype,
	    .prefetch = o->prefetch,
	    .forward_prefetch = o->style == FSDP_STYLE_FSDP1 && !o->forward_prefetch ? 0 : o->prefetch,
	    .accumulate = k > 1,
	    .recompute_regather = o->activation_checkpoint && o->style == FSDP_STYLE_FSDP1,
	    .reshard_size = G,
	    .shard_size = S,
	    .shard_rank = dp_rank % S,
	    .replicas = p->replicas,
	    .tp_size = T,
	    .tp_rank = tp_rank,
	    .seed = o->seed,
	    .gather_in_place = o->style == FSDP_STYLE_FSDP2,
	};
	struct fsdp_comms comms = {
	    .shard = s.shard,
	    .replica = s.replica,
	    .regather = s.regather,
	    .regather_rank = G > 0 ? dp_rank % G : 0,
	    .tp = s.tp,
	};
	struct zero3_config zcfg = {
	    .param_dtype = o->param_dtype,
	    .reduce_dtype = o->reduce_dtype,
	    .coalesced = o->zero3_coalesced,
	    .bucket = o->bucket,
	    .persistence_threshold = o->persistence_threshold,
	    .max_reuse_distance = o->max_reuse_distance,
	    .max_live = o->max_live,
	    .reduce_bucket = o->reduce_bucket,
	    .rank = rank,
	    .world_size = n,
	    .seed = o->seed,
	};
	if (o->style == FSDP_STYLE_ZERO3)
		s.z3 = zero3_new(be, s.mem, s.ct, &o->model, &zcfg, s.world);
	else
		s.rt = fsdp_new(be, s.mem, s.ct, &o->model, s.units, &fcfg, &comms);
	/* every tp rank of a dp rank reads the dp rank's batch and feeds the
	 * model its contiguous 1/T of the tokens */
	int local_batch = o->batch / p->dp;
	s.model = model_new(&o->model, be, local_batch, s.mem, s.tp ? tp_model_ops(s.tp) : NULL);
	size_t ntok = (size_t)local_batch * (size_t)o->model.seq, tp_first = ntok / (size_t)T * (size_t)tp_rank;
	s.inputs = malloc(ntok * sizeof *s.inputs);
	s.targets = malloc(ntok * sizeof *s.targets);
	s.loss_dev = mem_alloc(s.mem, MEM_OTHER, sizeof(double));
	s.loss_ready = be->event_new();
	s.loss_done = be->event_new();
	if (!(s.rt || s.z3) || !s.model || !s.inputs || !s.targets || !s.loss_dev || !s.loss_ready || !s.loss_done)
		goto out;

	struct fsdp_counts expect;
	struct fsdp_count_config ccfg = {
	    .wrap = o->wrap,
	    .layers = o->model.layers,
	    .reshard_after_forward = o->reshard,
	    .world_size = n,
	    .shard_group = S,
	    .style = (int)o->style,
	    .grad_accum = k,
	    .grad_sync_last = o->grad_sync_last,
	    .clip_grad = o->clip_grad > 0,
	    .activation_checkpoint = o->activation_checkpoint,
	    .tp = T,
	};
	if (fsdp_expected_counts(&ccfg, &expect, err, sizeof err) < 0 || expect.units != s.units->nunits) {
		fprintf(stderr, "fsdp_ref: internal error: unit count disagrees with counts.c\n");
		rc = -EINVAL;
		goto out;
	}
	if (rank == 0 && T > 1)
		fprintf(stderr,
			"fsdp_ref: mesh %d data-parallel x %d tensor-parallel ranks (units hold 1/%d of each "
			"block's linears)\n",
			p->dp, T, T);
	if (rank == 0)
		fprintf(stderr,
			"fsdp_ref: backend %s, %d ranks (shard groups of %d), %zu params in %d units "
			"(largest %zu), style %s, wrap %s, reshard-after-forward %s, prefetch %d, %s params, %s "
			"reduce, %d micro-batch%s per step\n",
			be->name, n, S, model_param_count(&o->model), s.units->nunits, s.units->largest_unit,
			fsdp_style_name(o->style), o->wrap, o->reshard, o->prefetch, dtype_name(o->param_dtype),
			dtype_name(o->reduce_dtype), k, k == 1 ? "" : "es");
	if (rank == 0 && s.z3)
		fprintf(stderr,
			"fsdp_ref: zero3: %d tensors partitioned over %d ranks, %s gathers, bucket %llu, persistence "
			"threshold %llu, max reuse distance %llu, max live %llu, reduce bucket %llu (the wrap, reshard "
			"and prefetch above do not apply)\n",
			model_tensor_count(&o->model), n, o->zero3_coalesced ? "coalesced" : "flat",
			(unsigned long long)o->bucket, (unsigned long long)o->persistence_threshold,
			(unsigned long long)o->max_reuse_distance, (unsigned long long)o->max_live,
			(unsigned long long)o->reduce_bucket);

	int init_broadcasts = 0;
	if (o->sync_module_states) {
		fsdp_step_begin(s.rt);
		if ((rc = fsdp_sync_module_states(s.rt, &o->model)) < 0) {
			fprintf(stderr, "fsdp_ref: rank %d: sync_module_states failed: %s\n", rank, strerror(-rc));
			goto out;
		}
		struct fsdp_step_stats st;
		fsdp_step_stats(s.rt, &st);
		init_broadcasts = st.broadcasts;
	}

	struct fault_context fault_ctx = {.s = &s, .rank = rank, .world_size = n};
	struct optim_config ocfg = {.lr = o->lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f};
	const struct model_params *params = s.z3 ? zero3_model_params(s.z3) : fsdp_model_params(s.rt);
	double tokens = (double)o->batch * o->model.seq * k;
	float loss_scale = 1.0f / (float)tokens;
	int64_t *waits = NULL;
	for (int step = 0; step < o->steps; step++) {
		char name[32];
		if (o->hold_path && step == o->hold_step && rank == 0)
			train_hold(o->hold_path);
		/* armed before the step submits anything: the fault lands on its first
		 * collective (first AllGather) */
		if (rank == o->stall_rank && step == o->stall_step)
			comm_arm_fault(s.ct, COMM_FAULT_STALL, step, train_fault_report, &fault_ctx);
		if (rank == o->mismatch_rank && step == o->mismatch_step)
			comm_arm_fault(s.ct, COMM_FAULT_MISMATCH, step, train_fault_report, &fault_ctx);
		snprintf(name, sizeof name, "step %d", step);
		markers_push(name);
		runtime_step_begin(&s);
		mem_reset_peaks(s.mem);
		int64_t t0 = comm_now_ns();
		double local_sum = 0.0, loss = 0.0;
		int64_t loss_wait_ns = 0, clip_wait_ns = 0;
		int clip_allreduces = 0, tp_clip_allreduces = 0;
		rc = 0;
		for (int mb = 0; rc == 0 && mb < k; mb++) {
			double mb_sum = 0.0;
			data_batch(o->seed, step * k + mb, dp_rank * local_batch, local_batch, o->model.seq,
				   o->model.vocab, s.inputs, s.targets);
			if (s.z3)
				zero3_microbatch_begin(s.z3);
			else
				fsdp_microbatch_begin(s.rt, !o->grad_sync_last || mb == k - 1);
			markers_push("forward");
			rc = model_forward(s.model, params, s.inputs + tp_first, s.targets + tp_first, loss_scale,
					   &mb_sum);
			markers_pop();
			if (rc == 0) {
				markers_push("backward");
				rc = model_backward(s.model, params);
				if (rc == 0)
					rc = s.z3 ? zero3_finish_backward(s.z3) : fsdp_finish_backward(s.rt);
				markers_pop();
			}
			local_sum += mb_sum;
		}
		struct fsdp_adam_params hp = optim_adam_params(&ocfg, step + 1);
		if (rc == 0 && o->clip_grad > 0) {
			/* clip_grad_norm_: the squared norm of the shards, summed over the
			 * shard group (replicas hold the same shard), in fp32; with TP
			 * then over the tp group (one AllReduce per mesh dimension), the
			 * replicated tensors counted 1/T on each tp rank */
			double local_sq = 0.0, total_sq = 0.0;
			markers_push("clip_grad_norm");
			rc = s.z3 ? zero3_grad_norm_sq(s.z3, &local_sq) : fsdp_grad_norm_sq(s.rt, &local_sq);
			if (rc == 0)
				rc = scalar_allreduce(&s, s.shard, ncclFloat32, local_sq, &total_sq, &clip_wait_ns);
			if (rc == 0 && s.tp) {
				int64_t tp_wait_ns = 0;
				rc = scalar_allreduce(&s, s.tp_comm, ncclFloat32, total_sq, &total_sq, &tp_wait_ns);
				clip_wait_ns += tp_wait_ns;
				tp_clip_allreduces = 1;
			}
			markers_pop();
			double norm = sqrt(total_sq > 0 ? total_sq : 0.0);
			if (norm > o->clip_grad)
				hp.grad_scale = (float)(o->clip_grad / (norm + 1e-6));
			clip_allreduces = 1;
		}
		if (rc == 0) {
			markers_push("optimizer");
			rc = s.z3 ? zero3_optimizer_step(s.z3, &hp) : fsdp_optimizer_step(s.rt, &hp);
			markers_pop();
		}
		if (rc == 0 && s.z3)
			rc = zero3_post_step(s.z3); /* outside "optimizer": it gathers and waits */
		if (rc == 0)
			rc = scalar_allreduce(&s, s.world, ncclFloat64, local_sum / tokens, &loss, &loss_wait_ns);
		if (rc == 0)
			rc = be->synchronize();
		int64_t step_ns = comm_now_ns() - t0;
		markers_pop();

		struct fsdp_step_stats st;
		runtime_step_stats(&s, &st);
		struct tp_stats tst = {0}, etst = {0};
		if (s.tp)
			tp_step_stats(s.tp, &tst);
		if (be->take_exposed_ns)
			st.gather_wait_ns = be->take_exposed_ns();
		if (rc == 0 && st.gather_waits > 0) {
			/* the runtime reuses its array for the eval pass below */
			int64_t *w = realloc(waits, (size_t)st.gather_waits * sizeof *w);
			if (!w)
				rc = -ENOMEM;
			else
				memcpy(waits = w, st.gather_wait_each, (size_t)st.gather_waits * sizeof *w);
		}

		/* after the step, outside it: eval, checkpoint */
		int eval_allgathers = 0, eval_allreduces = 0;
		struct checkpoint_counts ck = {0};
		if (rc == 0 && o->eval_every > 0 && (step + 1) % o->eval_every == 0) {
			double eval_sum = 0.0, eval_loss = 0.0;
			snprintf(name, sizeof name, "eval %d", step);
			markers_push(name);
			runtime_step_begin(&s);
			data_batch(o->seed ^ 0x5eedull, step, dp_rank * local_batch, local_batch, o->model.seq,
				   o->model.vocab, s.inputs, s.targets);
			markers_push("forward");
			rc = model_forward(s.model, params, s.inputs + tp_first, s.targets + tp_first, loss_scale,
					   &eval_sum);
			markers_pop();
			if (s.z3)
				zero3_release_all(s.z3);
			else
				fsdp_reshard_all(s.rt);
			if (rc == 0)
				rc = scalar_allreduce(&s, s.world, ncclFloat64, eval_sum, &eval_loss, NULL);
			if (rc == 0)
				rc = be->synchronize();
			markers_pop();
			struct fsdp_step_stats es;
			runtime_step_stats(&s, &es);
			eval_allgathers = es.forward_allgathers + es.backward_allgathers;
			eval_allreduces = 1;
			if (s.tp)
				tp_step_stats(s.tp, &etst);
		}
		if (rc == 0 && o->checkpoint_every > 0 && (step + 1) % o->checkpoint_every == 0) {
			snprintf(name, sizeof name, "checkpoint %d", step);
			markers_push(name);
			rc = checkpoint_save(be, s.ct, s.mem, s.world, rank, n, step, &ck);
			markers_pop();
		}
		if (rc < 0) {
			/* Peers may be blocked in collectives this rank will never issue, and
			 * its own comm thread may be blocked in one: no orderly cleanup is
			 * possible. A forking parent stops the other ranks. This one is
			 * ending already: a SIGTERM from the parent (another rank failed
			 * first) would only cut short what _exit's handlers still do (an
			 * interposer's last flush); SIGKILL still ends it. */
			signal(SIGTERM, SIG_IGN);
			fprintf(stderr, "fsdp_ref: rank %d: step %d failed: %s\n", rank, step, strerror(-rc));
			fflush(NULL);
			_exit(1);
		}

		struct log_record r = {
		    .step = step,
		    .rank = rank,
		    .world_size = n,
		    .loss = loss,
		    .allgathers = st.forward_allgathers + st.backward_allgathers,
		    .forward_allgathers = st.forward_allgathers,
		    .backward_allgathers = st.backward_allgathers,
		    .reduce_scatters = st.reduce_scatters,
		    .allreduces = st.allreduces + clip_allreduces + 1 /* the loss */,
		    .gathered_bytes = st.gathered_bytes,
		    .reduce_scattered_bytes = st.reduce_scattered_bytes,
		    .gather_wait_ns = st.gather_wait_ns,
		    .reduce_wait_ns = st.reduce_wait_ns,
		    .loss_wait_ns = loss_wait_ns + clip_wait_ns,
		    .step_ns = step_ns,
		    .compute_ns =
			step_ns - st.gather_wait_ns - st.reduce_wait_ns - loss_wait_ns - clip_wait_ns - tst.wait_ns,
		    .peak_persistent_bytes = mem_peak(s.mem, MEM_PERSISTENT),
		    .peak_transient_bytes = mem_peak(s.mem, MEM_GATHERED),
		    .peak_gradient_bytes = mem_peak(s.mem, MEM_GRADIENT),
		    .peak_activation_bytes = mem_peak(s.mem, MEM_ACTIVATION),
		    .peak_total_bytes = mem_peak_total(s.mem),
		    .units = s.units->nunits,
		    .layers = o->model.layers,
		    .prefetch = o->prefetch,
		    .shard_group = S,
		    .reshard_size = G,
		    .params = model_param_count(&o->model),
		    .largest_unit_params = s.units->largest_unit,
		    .wrap = o->wrap,
		    .reshard = o->reshard,
		    .param_dtype = dtype_name(o->param_dtype),
		    .reduce_dtype = dtype_name(o->reduce_dtype),
		    .backend = be->name,
		    .microbatches = k,
		    .sync_microbatches = o->grad_sync_last ? 1 : k,
		    .forward_allgathers_per_microbatch = st.forward_allgathers / k,
		    .backward_allgathers_per_microbatch = st.backward_allgathers / k,
		    .recompute_allgathers = st.recompute_allgathers,
		    .prefetched_allgathers = st.prefetched_allgathers,
		    .clip_allreduces = clip_allreduces,
		    .gather_waits = st.gather_waits,
		    .gather_wait_each = waits,
		    .eval_allgathers = eval_allgathers,
		    .eval_allreduces = eval_allreduces,
		    .checkpoint_allgathers = ck.allgathers,
		    .checkpoint_broadcasts = ck.broadcasts,
		    .checkpoint_allreduces = ck.allreduces,
		    .init_broadcasts = init_broadcasts,
		    .style = fsdp_style_name(o->style),
		    .grad_sync = o->grad_sync_last ? "last" : "every",
		    .grad_accum = k,
		    .eval_every = o->eval_every,
		    .checkpoint_every = o->checkpoint_every,
		    .forward_prefetch = fcfg.forward_prefetch,
		    .activation_checkpoint = o->activation_checkpoint,
		    .nvtx = o->nvtx,
		    .clip_grad = o->clip_grad,
		    .tp = T,
		    .dp = p->dp,
		    .tp_allgathers = tst.allgathers,
		    .tp_reduce_scatters = tst.reduce_scatters,
		    .tp_allreduces = tst.allreduces + tp_clip_allreduces,
		    .tp_wait_ns = tst.wait_ns,
		    .eval_tp_allgathers = etst.allgathers,
		    .eval_tp_reduce_scatters = etst.reduce_scatters,
		};
		if (s.z3)
			zero3_log_fill(s.z3, &r);
		if (s.log && (rc = log_write(s.log, &r)) < 0) {
			fprintf(stderr, "fsdp_ref: rank %d: writing the log: %s\n", rank, strerror(-rc));
			free(waits);
			goto out;
		}
		if (rank == 0 && !o->quiet) {
			printf("step %d loss %.17g\n", step, loss);
			fflush(stdout);
		}
	}
	free(waits);
	rc = 0;
out:
	rank_cleanup(&s);
	return rc;
}

int fsdp_main(int argc, char **argv, const struct fsdp_backend *be)
{
	struct run_plan plan;
	char err[512];
	int rc = options_parse(argc, argv, &plan.opt, err, sizeof err);
	if (rc == 1) {
		options_usage(stdout);
		return 0;
	}
	if (rc == 0 && plan.opt.backend && strcmp(plan.opt.backend, be->name) != 0) {
		snprintf(err, sizeof err, "this executable runs the %s backend, not --backend %s", be->name,
			 plan.opt.backend);
		rc = -EINVAL;
	}
	if (rc == 0 && be->version < FSDP_BACKEND_VERSION) {
		snprintf(err, sizeof err, "the %s backend is version %d, the core needs %d", be->name, be->version,
			 FSDP_BACKEND_VERSION);
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = plan_run(&plan, err, sizeof err);
	if (rc == 0) {
		markers_set_enabled(plan.opt.nvtx);
		markers_set_unit_prefix(plan.opt.name_prefix);
	}
	if (rc < 0) {
		fprintf(stderr, "fsdp_ref: %s\n", err);
		return 2;
	}
	struct launch_info li;
	int status = 0;
	rc = launch_ranks(plan.opt.nranks, plan.opt.unique_id_file, &li, &status, err, sizeof err);
	if (rc == 1)
		return status; /* the supervising parent */
	if (rc < 0) {
		fprintf(stderr, "fsdp_ref: %s\n", err);
		return 1;
	}
	return run_rank(&plan, be, &li) == 0 ? 0 : 1;
}
