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
#include "stream_job.h"

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
		"              --reduce-bucket E (1700000), --init-broadcast; ZeRO++: --qwz (quantized\n"
		"              weights), --hpz G (secondary partition on nodes of G ranks), --qgz\n"
		"              (quantized gradients, with --hpz: all-to-alls across the nodes)\n"
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
		O_INIT_BCAST, O_PP, O_MICROBATCHES, O_HELP,
		O_QWZ, O_HPZ, O_QGZ
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
	    {"qwz", no_argument, NULL, O_QWZ},
	    {"hpz", required_argument, NULL, O_HPZ},
	    {"qgz", no_argument, NULL, O_QGZ},
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
		case O_QWZ:
			o->qwz = 1;
			zero3_opts = 1;
			break;
		case O_HPZ:
			o->hpz = (int)sj_parse_long(optarg, "--hpz", 1);
			o->hpz = o->hpz == 1 ? 0 : o->hpz; /* zero_hpz_partition_size 1: off */
			zero3_opts = 1;
			break;
		case O_QGZ:
			o->qgz = 1;
			zero3_opts = 1;
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
	if (o->hpz > o->nranks) /* _create_zero_param_parallel_group: min(size, world) */
		o->hpz = o->nranks;
	if (o->hpz && o->nranks % o->hpz)
		sj_die("--hpz %d must divide --nranks %d", o->hpz, o->nranks);
	if (o->qgz && !o->hpz)
		sj_die("--qgz needs --hpz G: its nodes are groups of G ranks (GPUs per node)");
	if (o->qwz && o->gather_coalesced)
		sj_die("--qwz gathers flat (int8 values, then scales): not with --gather coalesced");
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
