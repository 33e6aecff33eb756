/*
 * tests/e2e/stream_job.c - the NCCL streams of real training setups.
 *
 *   stream_job --setup fsdp2|tp|fsdp1-hsdp|zero3|pp|dpo|distill|rl|ddp-fsdp|cp|ulysses|moe|
 *              float8|lora|frozen|deferred|simplefsdp --nranks N --steps S
 *              [--layers L] [--wrap block|linear] [options per setup]
 *              [--nvtx] [--log FILE] --truth FILE
 *
 * fsdpscope must diagnose jobs its reference trainer (fsdp_ref) does not
 * run. This program forks N ranks over the NCCL stand-in (or any
 * libnccl.so.2), creates the communicators as PyTorch's DeviceMesh does
 * (ncclCommInitRankConfig, then one ncclCommSplit per mesh dimension), and
 * issues, step by step, the collective stream that PyTorch FSDP2 (plain,
 * torchtitan units, 2-D with tensor parallelism, under pipeline
 * parallelism, beside context parallelism, Ulysses all-to-alls or MoE
 * expert parallelism), FSDP1 HYBRID_SHARD or DeepSpeed ZeRO-3 issues for a small
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
		"  pp          pipeline stages x FSDP2 on dp: --pp P (2), --microbatches M (4), --clip,\n"
		"              --virtual-stages V (1: Schedule1F1B; more: Interleaved1F1B, V chunks per rank)\n"
		"  tp --seq-lens S1,S2,..  the sequence length of each step, cycled (up to 8)\n"
		"  dpo         TRL DPOTrainer: policy, frozen reference, metric gathers: --ref-wrap block|model\n"
		"  distill     torchtune knowledge distillation: student and a frozen, wider teacher\n"
		"  rl          verl FSDP2 actor, weight sync outside the steps: --sync-every N (2), --log-probs\n"
		"  ddp-fsdp    replicate() (DDP) beside fully_shard per block: --block-reshard\n"
		"  cp          torchtitan context parallel x FSDP2 on dp_shard x cp: --cp C (2),\n"
		"              --attention flex|sdpa (flex), --rotate allgather|alltoall (sdpa; allgather)\n"
		"  ulysses     verl's FSDP2 actor x Ulysses all-to-alls: --sp S (2)\n"
		"  moe         torchtitan MoE, experts fully sharded on efsdp, all-to-all on ep:\n"
		"              --ep E (2), --experts X (8)\n"
		"  float8      torchao float8 training, float8 all-gather: --nccl-fp8, --float8-dynamic,\n"
		"              --wrap linear, --reshard-last-block, --clip\n"
		"  lora        torchtune LoRA on FSDP2: --lora-rank R (8), --accum K, --clip\n"
		"  frozen      FSDP2 with frozen parameters: --frozen K (first K blocks), --frozen-embeddings,\n"
		"              --frozen-root, --clip\n"
		"  deferred    gradient sync and reshard after backward off but in the last micro-batch:\n"
		"              --accum K | --accum-schedule K1,K2,..., --reshard-after-forward true|false, --clip\n"
		"  simplefsdp  SimpleFSDP under torch.compile, gathers bucketed: --bucket-blocks K (2), --clip\n"
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

/* --seq-lens A,B,...: tokens per sequence of each step, cycled. */
static void sj_parse_seq_lens(const char *arg, struct sj_options *o)
{
	o->nseq = 0;
	for (const char *p = arg; *p;) {
		char *end = NULL;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (errno || end == p || v < 1 || v > 65536 || (*end && *end != ','))
			sj_die("--seq-lens: a comma-separated list of lengths (1..65536), not '%s'", arg);
		if (o->nseq == (int)(sizeof o->seq_lens / sizeof o->seq_lens[0]))
			sj_die("--seq-lens: at most %zu lengths", sizeof o->seq_lens / sizeof o->seq_lens[0]);
		o->seq_lens[o->nseq++] = (int)v;
		p = *end ? end + 1 : end;
	}
	if (!o->nseq)
		sj_die("--seq-lens: no length given");
}

/* The options of the setups of stream_job_models.c, stream_job_ddp.c,
 * tp --seq-lens and pp --virtual-stages: which setup each applies to, and
 * the sizes they must divide. */
static void sj_check_more(const struct sj_options *o, int dpo_opts, int rl_opts, int ddp_opts)
{
	enum sj_setup s = o->setup;
	if (dpo_opts && s != SETUP_DPO)
		sj_die("--ref-wrap applies to dpo");
	if (rl_opts && s != SETUP_RL)
		sj_die("--sync-every / --log-probs apply to rl");
	if (ddp_opts && s != SETUP_DDP_FSDP)
		sj_die("--block-reshard applies to ddp-fsdp");
	if (o->wrap_linear && (s == SETUP_DPO || s == SETUP_DISTILL || s == SETUP_RL || s == SETUP_DDP_FSDP))
		sj_die("--wrap linear applies to fsdp2 and tp");
	for (int i = 0; i < o->nseq; i++)
		if (o->seq_lens[i] % o->tp)
			sj_die("--seq-lens: %d is not a multiple of --tp %d (sequence parallel splits it)", o->seq_lens[i],
			       o->tp);
	if (s == SETUP_PP && o->virtual_stages > 1) {
		int stages = o->pp * o->virtual_stages, rounds = o->microbatches / o->pp > 1 ? o->microbatches / o->pp : 1;
		if (stages > 64 || o->layers % stages)
			sj_die("--virtual-stages %d: --pp x V (at most 64) must divide --layers %d", o->virtual_stages,
			       o->layers);
		if (o->microbatches % rounds)
			sj_die("--microbatches %d: Interleaved1F1B needs a multiple of its rounds (%d)", o->microbatches,
			       rounds);
	}
}

static void sj_parse(int argc, char **argv, struct sj_options *o)
{
	enum {
		O_SETUP = 256, O_NRANKS, O_STEPS, O_LAYERS, O_WRAP, O_NVTX, O_TRUTH, O_LOG, O_COMPUTE, O_ACCUM,
		O_NO_SYNC, O_CLIP, O_TORCHTITAN, O_RESHARD_LAST, O_TP, O_NO_LOSS_PARALLEL, O_SHARD, O_SYNC_STATES,
		O_CHECKPOINT, O_BUCKET, O_GATHER, O_PERSISTENCE, O_MAX_REUSE, O_MAX_LIVE, O_REDUCE_BUCKET,
		O_INIT_BCAST, O_PP, O_MICROBATCHES, O_HELP,
		O_REF_WRAP, O_SYNC_EVERY, O_LOG_PROBS, O_BLOCK_RESHARD, O_SEQ_LENS, O_VIRTUAL_STAGES,
		O_NCCL_FP8, O_FLOAT8_DYNAMIC, O_LORA_RANK, O_FROZEN, O_FROZEN_EMB, O_FROZEN_ROOT, O_RAF, O_SCHEDULE,
		O_BUCKET_BLOCKS,
		O_QWZ, O_HPZ, O_QGZ, O_CP, O_ATTENTION, O_ROTATE, O_SP, O_EP, O_EXPERTS
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
	    {"nccl-fp8", no_argument, NULL, O_NCCL_FP8},
	    {"float8-dynamic", no_argument, NULL, O_FLOAT8_DYNAMIC},
	    {"lora-rank", required_argument, NULL, O_LORA_RANK},
	    {"frozen", required_argument, NULL, O_FROZEN},
	    {"frozen-embeddings", no_argument, NULL, O_FROZEN_EMB},
	    {"frozen-root", no_argument, NULL, O_FROZEN_ROOT},
	    {"reshard-after-forward", required_argument, NULL, O_RAF},
	    {"accum-schedule", required_argument, NULL, O_SCHEDULE},
	    {"bucket-blocks", required_argument, NULL, O_BUCKET_BLOCKS},
	    {"qwz", no_argument, NULL, O_QWZ},
	    {"hpz", required_argument, NULL, O_HPZ},
	    {"qgz", no_argument, NULL, O_QGZ},
	    {"ref-wrap", required_argument, NULL, O_REF_WRAP},
	    {"sync-every", required_argument, NULL, O_SYNC_EVERY},
	    {"log-probs", no_argument, NULL, O_LOG_PROBS},
	    {"block-reshard", no_argument, NULL, O_BLOCK_RESHARD},
	    {"seq-lens", required_argument, NULL, O_SEQ_LENS},
	    {"virtual-stages", required_argument, NULL, O_VIRTUAL_STAGES},
	    {"cp", required_argument, NULL, O_CP},
	    {"attention", required_argument, NULL, O_ATTENTION},
	    {"rotate", required_argument, NULL, O_ROTATE},
	    {"sp", required_argument, NULL, O_SP},
	    {"ep", required_argument, NULL, O_EP},
	    {"experts", required_argument, NULL, O_EXPERTS},
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
	o->sync_every = 2;
	o->virtual_stages = 1;
	o->cp = o->sp = o->ep = 2;
	o->experts = 8;
	o->frozen_blocks = -1; /* not given; lora_rank and bucket_blocks 0: not given */
	int given_shard = 0, setup_given = 0;
	/* which setup-specific options were given, to refuse those that do not apply */
	int fsdp2_only = 0, accum_opts = 0, tp_opts = 0, fsdp1_opts = 0, zero3_opts = 0, pp_opts = 0, clip = 0;
	int dpo_opts = 0, rl_opts = 0, ddp_opts = 0;
	int cp_opts = 0, sp_opts = 0, moe_opts = 0;
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
			else if (!strcmp(optarg, "dpo"))
				o->setup = SETUP_DPO;
			else if (!strcmp(optarg, "distill"))
				o->setup = SETUP_DISTILL;
			else if (!strcmp(optarg, "rl"))
				o->setup = SETUP_RL;
			else if (!strcmp(optarg, "ddp-fsdp"))
				o->setup = SETUP_DDP_FSDP;
			else if (!strcmp(optarg, "cp"))
				o->setup = SETUP_CP;
			else if (!strcmp(optarg, "ulysses"))
				o->setup = SETUP_ULYSSES;
			else if (!strcmp(optarg, "moe"))
				o->setup = SETUP_MOE;
			else if (!strcmp(optarg, "float8"))
				o->setup = SETUP_FLOAT8;
			else if (!strcmp(optarg, "lora"))
				o->setup = SETUP_LORA;
			else if (!strcmp(optarg, "frozen"))
				o->setup = SETUP_FROZEN;
			else if (!strcmp(optarg, "deferred"))
				o->setup = SETUP_DEFERRED;
			else if (!strcmp(optarg, "simplefsdp"))
				o->setup = SETUP_SIMPLEFSDP;
			else
				sj_die("--setup: unknown setup '%s' (fsdp2, tp, fsdp1-hsdp, zero3, pp, dpo, distill, rl, "
				       "ddp-fsdp, cp, ulysses, moe, float8, lora, frozen, deferred, simplefsdp)",
				       optarg);
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
		case O_REF_WRAP:
			dpo_opts = 1;
			if (!strcmp(optarg, "model"))
				o->ref_wrap_model = 1;
			else if (strcmp(optarg, "block"))
				sj_die("--ref-wrap: block or model, not '%s'", optarg);
			break;
		case O_SYNC_EVERY:
			o->sync_every = (int)sj_parse_long(optarg, "--sync-every", 1);
			rl_opts = 1;
			break;
		case O_LOG_PROBS:
			o->log_probs = 1;
			rl_opts = 1;
			break;
		case O_BLOCK_RESHARD:
			o->block_reshard = 1;
			ddp_opts = 1;
			break;
		case O_SEQ_LENS:
			tp_opts = 1;
			sj_parse_seq_lens(optarg, o);
			break;
		case O_VIRTUAL_STAGES:
			o->virtual_stages = (int)sj_parse_long(optarg, "--virtual-stages", 1);
			pp_opts = 1;
			break;
		case O_CP:
			o->cp = (int)sj_parse_long(optarg, "--cp", 2);
			cp_opts = 1;
			break;
		case O_ATTENTION:
			cp_opts = 1;
			if (!strcmp(optarg, "sdpa"))
				o->attention_sdpa = 1;
			else if (strcmp(optarg, "flex"))
				sj_die("--attention: flex or sdpa, not '%s'", optarg);
			break;
		case O_ROTATE:
			cp_opts = 1;
			if (!strcmp(optarg, "alltoall"))
				o->rotate_alltoall = 1;
			else if (strcmp(optarg, "allgather"))
				sj_die("--rotate: allgather or alltoall, not '%s'", optarg);
			break;
		case O_SP:
			o->sp = (int)sj_parse_long(optarg, "--sp", 2);
			sp_opts = 1;
			break;
		case O_EP:
			o->ep = (int)sj_parse_long(optarg, "--ep", 2);
			moe_opts = 1;
			break;
		case O_EXPERTS:
			o->experts = (int)sj_parse_long(optarg, "--experts", 1);
			moe_opts = 1;
			break;
		case O_NCCL_FP8:
			o->nccl_fp8 = 1;
			break;
		case O_FLOAT8_DYNAMIC:
			o->float8_dynamic = 1;
			break;
		case O_LORA_RANK:
			o->lora_rank = (int)sj_parse_long(optarg, "--lora-rank", 1);
			break;
		case O_FROZEN:
			o->frozen_blocks = (int)sj_parse_long(optarg, "--frozen", 0);
			break;
		case O_FROZEN_EMB:
			o->frozen_embeddings = 1;
			break;
		case O_FROZEN_ROOT:
			o->frozen_root = o->frozen_embeddings = 1;
			break;
		case O_RAF:
			if (!strcmp(optarg, "false"))
				o->keep_after_forward = 1;
			else if (strcmp(optarg, "true"))
				sj_die("--reshard-after-forward: true or false, not '%s'", optarg);
			break;
		case O_SCHEDULE:
			for (char *p = optarg, *end; *p; p = *end ? end + 1 : end) {
				long k = strtol(p, &end, 10);
				if (end == p || k < 1 || k > 64 || (*end && *end != ',') || o->nschedule == 16)
					sj_die("--accum-schedule: up to 16 micro-batch counts 1..64, comma-separated, not "
					       "'%s'",
					       optarg);
				o->schedule[o->nschedule++] = (int)k;
			}
			break;
		case O_BUCKET_BLOCKS:
			o->bucket_blocks = (int)sj_parse_long(optarg, "--bucket-blocks", 1);
			break;
		default:
			sj_usage(stderr);
			sj_die("unknown option or missing value: %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		sj_die("unexpected argument '%s'", argv[optind]);
	if (!setup_given)
		sj_die("--setup is required (fsdp2, tp, fsdp1-hsdp, zero3, pp, dpo, distill, rl, ddp-fsdp, cp, ulysses, "
		       "moe, float8, lora, frozen, deferred, simplefsdp)");
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
	int variant = s >= SETUP_FLOAT8 && s <= SETUP_SIMPLEFSDP;
	if (accum_opts && s != SETUP_FSDP2 && s != SETUP_TP && !variant)
		sj_die("--accum / --no-sync apply to fsdp2, tp and the FSDP2 variants");
	if (o->reshard_last_block && !(s == SETUP_TP || (s == SETUP_FSDP2 && o->torchtitan) || s == SETUP_FLOAT8))
		sj_die("--reshard-last-block applies to tp, float8 and fsdp2 --torchtitan");
	if (clip && s != SETUP_FSDP2 && s != SETUP_PP && !variant)
		sj_die("--clip applies to fsdp2, pp and the FSDP2 variants (tp always clips)");
	if (tp_opts && s != SETUP_TP)
		sj_die("--tp / --no-loss-parallel apply to tp");
	if (fsdp1_opts && s != SETUP_FSDP1_HSDP)
		sj_die("--shard / --sync-module-states / --checkpoint-wrapper apply to fsdp1-hsdp");
	if (zero3_opts && s != SETUP_ZERO3)
		sj_die("the bucket options apply to zero3");
	if (pp_opts && s != SETUP_PP)
		sj_die("--pp / --microbatches / --virtual-stages apply to pp");
	sj_check_more(o, dpo_opts, rl_opts, ddp_opts);
	if (cp_opts && s != SETUP_CP)
		sj_die("--cp / --attention / --rotate apply to cp");
	if (sp_opts && s != SETUP_ULYSSES)
		sj_die("--sp applies to ulysses");
	if (moe_opts && s != SETUP_MOE)
		sj_die("--ep / --experts apply to moe");
	if (o->rotate_alltoall && !o->attention_sdpa)
		sj_die("--rotate applies to --attention sdpa (FlexAttention gathers k and v)");
	if (s == SETUP_CP && (o->nranks % o->cp || SJ_SEQ % (2 * o->cp) || o->cp > 64))
		sj_die("--cp %d must divide --nranks %d, and 2 x cp the sequence (%d)", o->cp, o->nranks, SJ_SEQ);
	if (s == SETUP_ULYSSES && (o->nranks % o->sp || SJ_SEQ % o->sp || SJ_HIDDEN % o->sp || o->sp > 64))
		sj_die("--sp %d must divide --nranks %d and the model's sizes", o->sp, o->nranks);
	if (s == SETUP_MOE && (o->nranks % o->ep || o->experts % o->ep || o->experts > 256 || o->ep > 64))
		sj_die("--ep %d must divide --nranks %d and --experts %d (at most 256)", o->ep, o->nranks, o->experts);
	if (o->wrap_linear && s != SETUP_FSDP2 && s != SETUP_TP && s != SETUP_FLOAT8)
		sj_die("--wrap linear applies to fsdp2, tp and float8");
	sj_variant_options_check(o);
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
	case SETUP_DPO:
		run_dpo(&j, &t);
		break;
	case SETUP_DISTILL:
		run_distill(&j, &t);
		break;
	case SETUP_RL:
		run_rl(&j, &t);
		break;
	case SETUP_DDP_FSDP:
		run_ddp_fsdp(&j, &t);
		break;
	case SETUP_CP:
		run_cp(&j, &t);
		break;
	case SETUP_ULYSSES:
		run_ulysses(&j, &t);
		break;
	case SETUP_MOE:
		run_moe(&j, &t);
		break;
	case SETUP_FLOAT8:
		run_float8(&j, &t);
		break;
	case SETUP_LORA:
		run_lora(&j, &t);
		break;
	case SETUP_FROZEN:
		run_frozen(&j, &t);
		break;
	case SETUP_DEFERRED:
		run_deferred(&j, &t);
		break;
	case SETUP_SIMPLEFSDP:
		run_simplefsdp(&j, &t);
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
