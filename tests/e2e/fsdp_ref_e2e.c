/* fsdp_ref_e2e: end-to-end checks of the reference trainer, run as real
 * multi-process jobs (fsdp_ref forks its ranks over the NCCL stand-in).
 *
 *   fsdp_ref_e2e SCENARIO FSDP_REF WORKDIR
 *
 * Scenarios (one ctest test each):
 *   bitwise   loss trajectories bit-identical across --wrap block|linear|model|group:2
 *             (and a mixed spec) and --reshard-after-forward true|false, for N = 1, 2, 4;
 *             N ranks vs 1 within tolerance; the loss falls; counts = closed form
 *   counts    per-step collective counts = fsdp_expected_counts() for wrap /
 *             reshard / HSDP / prefetch / dtype combinations; gathered and
 *             reduce-scattered bytes against the parameter count
 *   memory    peak persistent memory within 5% of the ledger for each dtype
 *             pair; peak transient (gathered parameters) within 10% of
 *             param bytes x U x (1 + prefetch)
 *   prefetch  --prefetch 1 issues every gather but the first of each phase
 *             ahead; --prefetch 0 none, and its gathers wait for the link
 *   launcher  RANK / WORLD_SIZE / --unique-id-file: two processes started
 *             here train exactly like a forked --nranks 2 job
 *   failure   a killed rank stops the job with its status; bad flags exit 2
 *             with a message
 *   loop      training-loop setups (gradient accumulation with and without sync,
 *             clip-norm AllReduce, FSDP1 style, activation checkpointing, init
 *             broadcasts, eval passes, checkpoint saves): counts against the
 *             closed form, and the losses they must not change
 *   nvtx      the NVTX ranges of each rank (recorded by an injection library,
 *             fsdp_ref_nvtx_inject.c) are exactly the documented names and nesting
 *   tp        --tp 2 (N = 2 and 4): counts against the closed form, FSDP's on the
 *             dp dimension and the tp communicator's; losses equal to the same
 *             data-parallel run without TP within fp32 rounding, also with
 *             clipping and gradient accumulation; bad --tp values exit 2
 *   tp_nvtx   the NVTX ranges with --tp 2: the TP collectives' leaves in place
 *   zero3     --style zero3 (N = 2, 4; flat and coalesced gathers; buckets below and
 *             above a block; persistence and reuse distance on and off): the losses of
 *             --style fsdp2; every line's counts and fetch sizes = a simulator of the
 *             documented rules; what the rules imply, read off the log; bad zero3
 *             flags exit 2
 * Every log line of every rank is checked, not just rank 0's. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fsdp_ref/counts.h"
#include "tests/support/log_line.h"

static const char *trainer, *workdir;
static int failures;

#define CHECK(cond, ...)                                                                                               \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			failures++;                                                                                    \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                \
			fprintf(stderr, __VA_ARGS__);                                                                  \
			fputc('\n', stderr);                                                                           \
		}                                                                                                      \
	} while (0)

/* ---- running the trainer -------------------------------------------------- */

#define MAX_ARGS 64

struct run {
	char args[512]; /* extra flags, space separated */
	char log[512];	/* log path */
	char err[512];	/* stderr capture path */
	int status;	/* exit status (128 + signal when killed) */
};

static void split_args(char *buf, char **argv, int *argc)
{
	for (char *tok = strtok(buf, " "); tok && *argc < MAX_ARGS - 1; tok = strtok(NULL, " "))
		argv[(*argc)++] = tok;
	argv[*argc] = NULL;
}

static pid_t spawn(const char *args, const char *log, const char *errpath, char *const *env_extra)
{
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", args);
	char *argv[MAX_ARGS + 4];
	int argc = 0;
	argv[argc++] = (char *)trainer;
	if (log) {
		argv[argc++] = "--log";
		argv[argc++] = (char *)log;
	}
	split_args(buf, argv, &argc);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int out = open("/dev/null", O_WRONLY);
		int err = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(out, 1);
		dup2(err, 2);
		for (int i = 0; env_extra && env_extra[i]; i++)
			putenv(env_extra[i]);
		execv(trainer, argv);
		_exit(127);
	}
	return pid;
}

static int wait_status(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void run_trainer(struct run *r, const char *tag, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->args, sizeof r->args, fmt, ap);
	va_end(ap);
	snprintf(r->log, sizeof r->log, "%s/%s.jsonl", workdir, tag);
	snprintf(r->err, sizeof r->err, "%s/%s.stderr", workdir, tag);
	r->status = wait_status(spawn(r->args, r->log, r->err, NULL));
	if (r->status != 0) {
		char cmd[1100];
		snprintf(cmd, sizeof cmd, "cat %s >&2", r->err);
		if (system(cmd) != 0)
			fprintf(stderr, "(no stderr)\n");
	}
	CHECK(r->status == 0, "fsdp_ref %s exited with %d", r->args, r->status);
}

/* ---- the log ------------------------------------------------------------ */

#define MAX_RANKS 8
#define MAX_STEPS 32

struct step_line {
	int present;
	double loss;
	double forward_allgathers, backward_allgathers, allgathers, reduce_scatters, allreduces;
	double gathered_bytes, reduce_scattered_bytes, gather_wait_ns, compute_ns, step_ns;
	double peak_persistent_bytes, peak_transient_bytes, units, params, largest_unit_params;
	double prefetched_allgathers, gather_waits, waits_over_half_latency;
	double microbatches, sync_microbatches, forward_per_microbatch, backward_per_microbatch;
	double recompute_allgathers, clip_allreduces, init_broadcasts;
	double eval_allgathers, eval_allreduces, checkpoint_allgathers, checkpoint_broadcasts, checkpoint_allreduces;
	double tp, dp, tp_allgathers, tp_reduce_scatters, tp_allreduces, eval_tp_allgathers, eval_tp_reduce_scatters;
};

struct run_log {
	int world_size, steps;
	struct step_line line[MAX_RANKS][MAX_STEPS];
};

/* Parse every line; every rank must have every step. */
static int load_log(const char *path, int world_size, int steps, struct run_log *lg)
{
	memset(lg, 0, sizeof *lg);
	lg->world_size = world_size;
	lg->steps = steps;
	FILE *f = fopen(path, "r");
	CHECK(f != NULL, "cannot open %s", path);
	if (!f)
		return -1;
	static char buf[1 << 17];
	int lines = 0, bad = 0;
	while (fgets(buf, sizeof buf, f)) {
		double step, rank, ws;
		if (log_line_number(buf, "step", &step) || log_line_number(buf, "rank", &rank) || log_line_number(buf, "world_size", &ws) ||
		    rank < 0 || rank >= MAX_RANKS || step < 0 || step >= MAX_STEPS) {
			bad++;
			continue;
		}
		struct step_line *l = &lg->line[(int)rank][(int)step];
		CHECK(!l->present, "%s: rank %d step %d logged twice", path, (int)rank, (int)step);
		l->present = 1;
		lines++;
		CHECK((int)ws == world_size, "%s: world_size %d", path, (int)ws);
		struct {
			const char *key;
			double *dst;
		} keys[] = {
		    {"loss", &l->loss},
		    {"forward_allgathers", &l->forward_allgathers},
		    {"backward_allgathers", &l->backward_allgathers},
		    {"allgathers", &l->allgathers},
		    {"reduce_scatters", &l->reduce_scatters},
		    {"allreduces", &l->allreduces},
		    {"gathered_bytes", &l->gathered_bytes},
		    {"reduce_scattered_bytes", &l->reduce_scattered_bytes},
		    {"gather_wait_ns", &l->gather_wait_ns},
		    {"compute_ns", &l->compute_ns},
		    {"step_ns", &l->step_ns},
		    {"peak_persistent_bytes", &l->peak_persistent_bytes},
		    {"peak_transient_bytes", &l->peak_transient_bytes},
		    {"units", &l->units},
		    {"params", &l->params},
		    {"largest_unit_params", &l->largest_unit_params},
		    {"prefetched_allgathers", &l->prefetched_allgathers},
		    {"microbatches", &l->microbatches},
		    {"sync_microbatches", &l->sync_microbatches},
		    {"forward_allgathers_per_microbatch", &l->forward_per_microbatch},
		    {"backward_allgathers_per_microbatch", &l->backward_per_microbatch},
		    {"recompute_allgathers", &l->recompute_allgathers},
		    {"clip_allreduces", &l->clip_allreduces},
		    {"init_broadcasts", &l->init_broadcasts},
		    {"eval_allgathers", &l->eval_allgathers},
		    {"eval_allreduces", &l->eval_allreduces},
		    {"checkpoint_allgathers", &l->checkpoint_allgathers},
		    {"checkpoint_broadcasts", &l->checkpoint_broadcasts},
		    {"checkpoint_allreduces", &l->checkpoint_allreduces},
		    {"tp", &l->tp},
		    {"dp", &l->dp},
		    {"tp_allgathers", &l->tp_allgathers},
		    {"tp_reduce_scatters", &l->tp_reduce_scatters},
		    {"tp_allreduces", &l->tp_allreduces},
		    {"eval_tp_allgathers", &l->eval_tp_allgathers},
		    {"eval_tp_reduce_scatters", &l->eval_tp_reduce_scatters},
		};
		for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
			if (log_line_number(buf, keys[k].key, keys[k].dst) != 0) {
				bad++;
				CHECK(0, "%s: key %s missing", path, keys[k].key);
			}
		const char *w = strstr(buf, "\"gather_waits_ns\":[");
		CHECK(w != NULL, "%s: key gather_waits_ns missing", path);
		for (w = w ? w + strlen("\"gather_waits_ns\":[") : ""; *w && *w != ']';) {
			char *end;
			double v = strtod(w, &end);
			if (end == w)
				break;
			l->gather_waits++;
			l->waits_over_half_latency += v >= 1e6; /* the prefetch scenario's 2 ms link */
			w = *end == ',' ? end + 1 : end;
		}
	}
	fclose(f);
	CHECK(bad == 0, "%s: %d malformed lines", path, bad);
	CHECK(lines == world_size * steps, "%s: %d lines, expected %d", path, lines, world_size * steps);
	for (int r = 0; r < world_size; r++)
		for (int s = 0; s < steps; s++)
			CHECK(lg->line[r][s].present, "%s: rank %d step %d missing", path, r, s);
	return lines == world_size * steps && bad == 0 ? 0 : -1;
}

/* Every rank reports the same global loss; returns rank 0's trajectory. */
static void losses_of(const struct run_log *lg, double *out)
{
	for (int s = 0; s < lg->steps; s++) {
		out[s] = lg->line[0][s].loss;
		for (int r = 1; r < lg->world_size; r++)
			CHECK(memcmp(&lg->line[r][s].loss, &out[s], sizeof out[s]) == 0,
			      "rank %d step %d loss %.17g != rank 0's %.17g", r, s, lg->line[r][s].loss, out[s]);
	}
}

/* What a run did besides the per-step counts, for check_counts_cfg. */
struct loop_plan {
	int sync_module_states; /* init broadcasts expected on every line */
	int eval_every, checkpoint_every;
};

/* Every line's counts equal the closed form of configuration c. */
static void check_counts_cfg(const struct run_log *lg, const struct fsdp_count_config *c, const struct loop_plan *lp,
			     const char *what)
{
	struct fsdp_counts k;
	char err[256];
	int rc = fsdp_expected_counts(c, &k, err, sizeof err);
	CHECK(rc == 0, "%s: %s", what, err);
	if (rc)
		return;
	for (int r = 0; r < lg->world_size; r++)
		for (int s = 0; s < lg->steps; s++) {
			const struct step_line *l = &lg->line[r][s];
			CHECK(l->units == k.units && l->forward_allgathers == k.forward_allgathers &&
				  l->backward_allgathers == k.backward_allgathers && l->allgathers == k.allgathers &&
				  l->reduce_scatters == k.reduce_scatters && l->allreduces == k.allreduces,
			      "%s rank %d step %d: units %g AG %g+%g=%g RS %g AR %g, closed form units %d AG "
			      "%d+%d=%d RS %d AR %d",
			      what, r, s, l->units, l->forward_allgathers, l->backward_allgathers, l->allgathers,
			      l->reduce_scatters, l->allreduces, k.units, k.forward_allgathers, k.backward_allgathers,
			      k.allgathers, k.reduce_scatters, k.allreduces);
			CHECK(l->microbatches == k.microbatches && l->sync_microbatches == k.sync_microbatches &&
				  l->forward_per_microbatch == k.forward_allgathers_per_microbatch &&
				  l->backward_per_microbatch == k.backward_allgathers_per_microbatch &&
				  l->recompute_allgathers == k.recompute_allgathers &&
				  l->clip_allreduces == k.clip_allreduces,
			      "%s rank %d step %d: micro-batches %g (sync %g), per micro-batch AG %g+%g, recompute %g, "
			      "clip %g; closed form %d (%d), %d+%d, %d, %d",
			      what, r, s, l->microbatches, l->sync_microbatches, l->forward_per_microbatch,
			      l->backward_per_microbatch, l->recompute_allgathers, l->clip_allreduces, k.microbatches,
			      k.sync_microbatches, k.forward_allgathers_per_microbatch,
			      k.backward_allgathers_per_microbatch, k.recompute_allgathers, k.clip_allreduces);
			int init = lp && lp->sync_module_states ? k.init_broadcasts : 0;
			int eval = lp && lp->eval_every && (s + 1) % lp->eval_every == 0;
			int ckpt = lp && lp->checkpoint_every && (s + 1) % lp->checkpoint_every == 0;
			CHECK(l->init_broadcasts == init && l->eval_allgathers == (eval ? k.eval_allgathers : 0) &&
				  l->eval_allreduces == (eval ? k.eval_allreduces : 0) &&
				  l->checkpoint_allgathers == (ckpt ? k.checkpoint_allgathers : 0) &&
				  l->checkpoint_broadcasts == (ckpt ? k.checkpoint_broadcasts : 0) &&
				  l->checkpoint_allreduces == (ckpt ? k.checkpoint_allreduces : 0),
			      "%s rank %d step %d: init BC %g, eval AG %g AR %g, checkpoint AG %g BC %g AR %g", what, r,
			      s, l->init_broadcasts, l->eval_allgathers, l->eval_allreduces, l->checkpoint_allgathers,
			      l->checkpoint_broadcasts, l->checkpoint_allreduces);
		}
}

/* Every line's counts equal the closed form (the default training loop). */
static void check_counts(const struct run_log *lg, const char *wrap, int layers, const char *reshard, int shard_group,
			 const char *what)
{
	struct fsdp_count_config c = {.wrap = wrap, .layers = layers, .reshard_after_forward = reshard,
				      .world_size = lg->world_size, .shard_group = shard_group};
	check_counts_cfg(lg, &c, NULL, what);
}

/* ---- scenarios -------------------------------------------------------------- */

/* A model small enough for ASan builds on two cores. */
#define SMALL "--layers 4 --d-model 32 --ffn 64 --heads 4 --kv-heads 2 --seq 8 --vocab 32 --batch 4"
#define SMALL_LAYERS 4

static void scenario_bitwise(void)
{
	/* wrap, reshard, extra flags, minimum N */
	static const struct {
		const char *wrap, *reshard, *extra;
		int min_n;
	} cfgs[] = {
	    {"block", "true", "", 1},
	    {"linear", "true", "", 1},
	    {"model", "true", "", 1},
	    {"group:2", "true", "", 1},
	    {"block", "false", "", 1},
	    {"linear", "false", "", 1},
	    {"group:2", "false", "", 1},
	    {"linear:0-1,block:2-3", "true", "", 1},
	    {"block", "true", "--prefetch 0", 1},
	    {"linear", "true", "--prefetch 3", 1},
	    {"block", "2", "", 4},
	};
	const int ncfg = sizeof cfgs / sizeof cfgs[0], steps = 4;
	static const int ranks[] = {1, 2, 4};
	double ref[3][MAX_STEPS];
	for (int ni = 0; ni < 3; ni++) {
		int n = ranks[ni], ran = 0;
		for (int c = 0; c < ncfg; c++) {
			if (n < cfgs[c].min_n)
				continue;
			struct run r;
			char tag[64];
			snprintf(tag, sizeof tag, "bitwise_n%d_c%d", n, c);
			run_trainer(&r, tag, "--nranks %d " SMALL " --steps %d --wrap %s --reshard-after-forward %s %s",
				    n, steps, cfgs[c].wrap, cfgs[c].reshard, cfgs[c].extra);
			struct run_log lg;
			if (r.status != 0 || load_log(r.log, n, steps, &lg) < 0)
				continue;
			ran++;
			check_counts(&lg, cfgs[c].wrap, SMALL_LAYERS, cfgs[c].reshard, 0, r.args);
			double loss[MAX_STEPS];
			losses_of(&lg, loss);
			if (c == 0) {
				memcpy(ref[ni], loss, sizeof loss);
				continue;
			}
			for (int s = 0; s < steps; s++)
				CHECK(memcmp(&loss[s], &ref[ni][s], sizeof loss[s]) == 0,
				      "N=%d: --wrap %s --reshard-after-forward %s %s step %d loss %.17g differs from "
				      "block/true %.17g",
				      n, cfgs[c].wrap, cfgs[c].reshard, cfgs[c].extra, s, loss[s], ref[ni][s]);
		}
		printf("N=%d: %d configurations bit-identical, losses %.9f ... %.9f\n", n, ran, ref[ni][0],
		       ref[ni][steps - 1]);
		/* N ranks vs one: only the fp32 summation order of gradients (per-rank
		 * partial sums, added in rank order by the reduce-scatter) and of the
		 * loss differs; with bf16 parameters an ulp of the fp32 master can
		 * round a weight to the neighbouring bf16 value, so allow 1e-4
		 * relative over these few steps. */
		double worst = 0;
		for (int s = 0; ni > 0 && s < steps; s++) {
			double rel = fabs(ref[ni][s] - ref[0][s]) / fabs(ref[0][s]);
			worst = rel > worst ? rel : worst;
			CHECK(rel <= 1e-4, "N=%d step %d loss %.17g vs N=1 %.17g", n, s, ref[ni][s], ref[0][s]);
		}
		if (ni > 0)
			printf("N=%d vs N=1 (bf16 params): worst relative loss difference %.2g\n", n, worst);
	}
	/* HSDP sums gradients in another order (within shard groups, then across
	 * replicas): close to N = 4 without it, not identical. */
	{
		struct run r;
		run_trainer(&r, "bitwise_hsdp", "--nranks 4 " SMALL " --steps %d --shard-group 2", steps);
		struct run_log lg;
		if (r.status == 0 && load_log(r.log, 4, steps, &lg) == 0) {
			double loss[MAX_STEPS];
			losses_of(&lg, loss);
			for (int s = 0; s < steps; s++)
				CHECK(fabs(loss[s] - ref[2][s]) <= 1e-4 * fabs(ref[2][s]),
				      "HSDP step %d loss %.17g vs %.17g", s, loss[s], ref[2][s]);
		}
	}
	/* fp32 parameters: agreement with N = 1 is tighter. */
	double fl[2][MAX_STEPS];
	for (int i = 0; i < 2; i++) {
		struct run r;
		char tag[32];
		snprintf(tag, sizeof tag, "bitwise_fp32_%d", i);
		run_trainer(&r, tag, "--nranks %d " SMALL " --steps %d --param-dtype fp32", i ? 4 : 1, steps);
		struct run_log lg;
		if (r.status == 0 && load_log(r.log, i ? 4 : 1, steps, &lg) == 0)
			losses_of(&lg, fl[i]);
	}
	double worst = 0;
	for (int s = 0; s < steps; s++) {
		double rel = fabs(fl[1][s] - fl[0][s]) / fabs(fl[0][s]);
		worst = rel > worst ? rel : worst;
		CHECK(rel <= 1e-5, "fp32 params: N=4 step %d loss %.17g vs N=1 %.17g", s, fl[1][s], fl[0][s]);
	}
	printf("N=4 vs N=1 (fp32 params): worst relative loss difference %.2g\n", worst);

	/* The loss falls: 15 steps at a higher learning rate. */
	struct run r;
	run_trainer(&r, "bitwise_falls", "--nranks 2 " SMALL " --batch 8 --steps 15 --lr 0.01");
	struct run_log lg;
	if (r.status == 0 && load_log(r.log, 2, 15, &lg) == 0) {
		double first = lg.line[0][0].loss, last = lg.line[0][14].loss;
		printf("loss falls: %.4f -> %.4f in 15 steps (ln V = %.4f)\n", first, last, log(32.0));
		CHECK(fabs(first - log(32.0)) < 0.5, "initial loss %.4f not near ln 32", first);
		CHECK(last < 0.7 * first, "loss %.4f -> %.4f did not fall by 30%%", first, last);
	}
}

static void scenario_counts(void)
{
	static const struct {
		int n, s;
		const char *wrap, *reshard, *extra;
	} cfgs[] = {
	    {4, 2, "block", "true", ""},
	    {4, 2, "block", "false", ""},
	    {4, 2, "linear", "true", ""},
	    {4, 2, "linear", "2", ""},
	    {4, 0, "block", "2", ""},
	    {4, 0, "linear", "2", "--prefetch 2"},
	    {4, 1, "block", "true", ""},
	    {2, 0, "model", "false", "--prefetch 0"},
	    {4, 0, "linear:0-1,group:2:2-3", "true", "--reduce-dtype bf16"},
	    {2, 0, "group:3", "true", "--prefetch 3 --param-dtype fp32"},
	    {1, 0, "linear", "true", ""},
	};
	const int steps = 2;
	for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
		struct run r;
		char tag[32], sg[32] = "";
		if (cfgs[c].s)
			snprintf(sg, sizeof sg, "--shard-group %d", cfgs[c].s);
		snprintf(tag, sizeof tag, "counts_%zu", c);
		run_trainer(&r, tag, "--nranks %d " SMALL " --steps %d --wrap %s --reshard-after-forward %s %s %s",
			    cfgs[c].n, steps, cfgs[c].wrap, cfgs[c].reshard, sg, cfgs[c].extra);
		struct run_log lg;
		if (r.status != 0 || load_log(r.log, cfgs[c].n, steps, &lg) < 0)
			continue;
		check_counts(&lg, cfgs[c].wrap, SMALL_LAYERS, cfgs[c].reshard, cfgs[c].s, r.args);
		printf("%-90s AG %g+%g RS %g AR %g\n", r.args, lg.line[0][0].forward_allgathers,
		       lg.line[0][0].backward_allgathers, lg.line[0][0].reduce_scatters, lg.line[0][0].allreduces);
	}
	/* Bytes: with --wrap block every unit is gathered once in forward and the
	 * non-root ones once more in backward (reshard true): 2 P - root
	 * parameters, in bf16; the reduce-scatters send P fp32 gradients. Padding
	 * adds a little. */
	struct run r;
	run_trainer(&r, "counts_bytes", "--nranks 4 " SMALL " --steps 1 --wrap block");
	struct run_log lg;
	if (r.status == 0 && load_log(r.log, 4, 1, &lg) == 0) {
		double p = lg.line[0][0].params, root = 2.0 * 32 * 32 + 32;
		double gathered = lg.line[0][0].gathered_bytes, want = 2.0 * (2 * p - root);
		double rs = lg.line[0][0].reduce_scattered_bytes;
		printf("gathered %g bytes (2 x (2P - root) = %g), reduce-scattered %g (4P = %g)\n", gathered, want, rs,
		       4 * p);
		CHECK(gathered >= want && gathered <= 1.05 * want, "gathered_bytes %g vs %g", gathered, want);
		CHECK(rs >= 4 * p && rs <= 1.05 * 4 * p, "reduce_scattered_bytes %g vs %g", rs, 4 * p);
	}
}

/* Memory: sizes where the root (2 V D) is small next to a block. */
#define MEM_MODEL "--layers 4 --d-model 64 --ffn 256 --heads 4 --kv-heads 2 --seq 8 --vocab 16 --batch 4"

static void scenario_memory(void)
{
	/* persistent ledger bytes per parameter per shard-group rank */
	static const struct {
		const char *pd, *rd;
		double per_param;
	} dt[] = {
	    {"bf16", "bf16", 16}, /* 2 param + 2 grad + 4 master + 4 m + 4 v */
	    {"bf16", "fp32", 18}, /* fp32 gradient shard */
	    {"fp32", "fp32", 16}, /* the fp32 parameter shard is the master */
	    {"fp32", "bf16", 14},
	};
	for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++) {
		for (int hsdp = 0; hsdp < 2; hsdp++) {
			struct run r;
			char tag[32];
			snprintf(tag, sizeof tag, "memory_dt%zu_%d", i, hsdp);
			run_trainer(&r, tag, "--nranks 4 " MEM_MODEL " --steps 1 --param-dtype %s --reduce-dtype %s %s",
				    dt[i].pd, dt[i].rd, hsdp ? "--shard-group 2" : "");
			struct run_log lg;
			if (r.status != 0 || load_log(r.log, 4, 1, &lg) < 0)
				continue;
			int s = hsdp ? 2 : 4;
			double ledger = dt[i].per_param * lg.line[0][0].params / s;
			for (int rk = 0; rk < 4; rk++) {
				double got = lg.line[rk][0].peak_persistent_bytes;
				CHECK(fabs(got - ledger) <= 0.05 * ledger, "%s: rank %d persistent %g vs ledger %g",
				      r.args, rk, got, ledger);
			}
			printf("persistent %s/%s S=%d: %g bytes, ledger %g P/S = %g (%+.2f%%)\n", dt[i].pd, dt[i].rd, s,
			       lg.line[0][0].peak_persistent_bytes, dt[i].per_param, ledger,
			       100.0 * (lg.line[0][0].peak_persistent_bytes - ledger) / ledger);
		}
	}
	/* transient: gathered parameters, reshard true, prefetch 0..2 */
	double peak_true = 0;
	for (int pf = 0; pf <= 2; pf++) {
		struct run r;
		char tag[32];
		snprintf(tag, sizeof tag, "memory_prefetch%d", pf);
		run_trainer(&r, tag, "--nranks 2 " MEM_MODEL " --steps 2 --wrap block --prefetch %d", pf);
		struct run_log lg;
		if (r.status != 0 || load_log(r.log, 2, 2, &lg) < 0)
			continue;
		double u = lg.line[0][0].largest_unit_params, want = 2.0 * u * (1 + pf);
		for (int rk = 0; rk < 2; rk++)
			for (int st = 0; st < 2; st++) {
				double got = lg.line[rk][st].peak_transient_bytes;
				CHECK(fabs(got - want) <= 0.10 * want,
				      "prefetch %d rank %d step %d: transient %g vs %g", pf, rk, st, got, want);
			}
		printf("transient, prefetch %d: %g bytes, 2 x U x (1 + %d) = %g (%+.2f%%)\n", pf,
		       lg.line[0][0].peak_transient_bytes, pf, want,
		       100.0 * (lg.line[0][0].peak_transient_bytes - want) / want);
		if (pf == 1)
			peak_true = lg.line[0][0].peak_transient_bytes;
	}
	/* Without prefetch: reshard false keeps every unit, the whole model is
	 * gathered at the end of forward; reshard 2 (of 4) keeps halves: in
	 * between. */
	double peak_false = 0, peak_two = 0, peak_true4 = 0;
	const char *modes[] = {"false", "2", "true"};
	double *dst[] = {&peak_false, &peak_two, &peak_true4};
	for (int m = 0; m < 3; m++) {
		struct run r;
		char tag[32];
		snprintf(tag, sizeof tag, "memory_reshard_%s", modes[m]);
		run_trainer(&r, tag,
			    "--nranks 4 " MEM_MODEL " --steps 1 --wrap block --prefetch 0 --reshard-after-forward %s",
			    modes[m]);
		struct run_log lg;
		if (r.status == 0 && load_log(r.log, 4, 1, &lg) == 0) {
			*dst[m] = lg.line[0][0].peak_transient_bytes;
			if (m == 0) {
				double want = 2.0 * lg.line[0][0].params;
				CHECK(fabs(*dst[m] - want) <= 0.05 * want, "reshard false: transient %g vs 2P %g",
				      *dst[m], want);
			}
		}
	}
	printf("transient by reshard: false %g, 2 %g, true %g (N=4)\n", peak_false, peak_two, peak_true4);
	CHECK(peak_true4 < peak_two && peak_two < peak_false, "reshard 2 not between true and false");
	(void)peak_true;
}

#define PREFETCH_MODEL                                                                                                 \
	"--nranks 2 --layers 6 --d-model 64 --ffn 256 --heads 4 --kv-heads 2 --vocab 32 --batch 8 "                    \
	"--wrap block"

static void scenario_prefetch(void)
{
	/* What the runtime decides, not how long it took: with --prefetch 1
	 * every gather but the first of each phase is issued ahead of the hook
	 * that needs it (2 (U - 1) per step: forward U - 1, and in backward every
	 * re-gather, the first one prefetched by the root's pre-backward); with
	 * --prefetch 0 none is, so every gather is issued when needed and its
	 * wait covers the link latency: the stand-in completes a collective no
	 * earlier than the link latency after the last rank entered it. Waits
	 * are checked against half the latency, on at least half of the
	 * gathers, so that a rank descheduled for a moment cannot fail the
	 * check. How much exposure prefetch saves is a figure for
	 * bench/prefetch_bench, not a test. */
	const int steps = 3, layers = 6, units = layers + 1;
	const double latency_ns = 2e6;
	struct run r;
	struct run_log lg;
	setenv("FSDP_REF_LINK_LATENCY_US", "2000", 1);
	setenv("FSDP_REF_LINK_GBPS", "10", 1);
	for (int pf = 0; pf < 2; pf++) {
		char tag[32];
		snprintf(tag, sizeof tag, "prefetch%d", pf);
		run_trainer(&r, tag, PREFETCH_MODEL " --seq 8 --steps %d --prefetch %d", steps, pf);
		if (r.status != 0 || load_log(r.log, 2, steps, &lg) < 0)
			continue;
		for (int rk = 0; rk < 2; rk++)
			for (int st = 0; st < steps; st++) {
				const struct step_line *l = &lg.line[rk][st];
				int want = pf ? 2 * (units - 1) : 0;
				CHECK(l->prefetched_allgathers == want,
				      "prefetch %d rank %d step %d: %g gathers issued ahead, expected %d", pf, rk, st,
				      l->prefetched_allgathers, want);
				CHECK(l->gather_waits == l->allgathers, "prefetch %d rank %d step %d: %g waits for %g gathers",
				      pf, rk, st, l->gather_waits, l->allgathers);
				if (pf == 0)
					CHECK(2 * l->waits_over_half_latency >= l->gather_waits,
					      "prefetch 0 rank %d step %d: only %g of %g gathers waited >= %.1f ms", rk, st,
					      l->waits_over_half_latency, l->gather_waits, latency_ns / 2e6);
			}
	}
	unsetenv("FSDP_REF_LINK_LATENCY_US");
	unsetenv("FSDP_REF_LINK_GBPS");
}

/* The pids of `parent`'s children. */
static int children_of(pid_t parent, pid_t *out, int max)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)parent, (int)parent);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	int n = 0;
	if (fgets(buf, sizeof buf, f))
		for (char *t = strtok(buf, " \n"); t && n < max; t = strtok(NULL, " \n"))
			out[n++] = (pid_t)atoi(t);
	fclose(f);
	return n;
}

static int expect_usage_error(const char *tag, const char *args, const char *needle)
{
	char errpath[600], buf[2048] = "";
	snprintf(errpath, sizeof errpath, "%s/%s.stderr", workdir, tag);
	int st = wait_status(spawn(args, NULL, errpath, NULL));
	FILE *f = fopen(errpath, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		fclose(f);
	CHECK(st == 2, "'%s' exited %d, expected 2", args, st);
	CHECK(strstr(buf, needle) != NULL, "'%s': stderr '%s' lacks '%s'", args, buf, needle);
	return st;
}

static void scenario_launcher(void)
{
	const int steps = 3;
	struct run fork_run;
	run_trainer(&fork_run, "launcher_fork", "--nranks 2 " SMALL " --steps %d --wrap linear", steps);
	char idfile[512], log[600], err0[600], err1[600];
	snprintf(idfile, sizeof idfile, "%s/launcher.id", workdir);
	snprintf(log, sizeof log, "%s/launcher_ext.jsonl", workdir);
	snprintf(err0, sizeof err0, "%s/launcher_ext0.stderr", workdir);
	snprintf(err1, sizeof err1, "%s/launcher_ext1.stderr", workdir);
	unlink(idfile);
	char args[1024];
	snprintf(args, sizeof args, SMALL " --steps %d --wrap linear --unique-id-file %s", steps, idfile);
	/* rank 1 first: it must wait for rank 0's file */
	char *env1[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", NULL};
	char *env0[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", NULL};
	pid_t p1 = spawn(args, log, err1, env1);
	struct timespec ts = {0, 200 * 1000000L};
	nanosleep(&ts, NULL);
	pid_t p0 = spawn(args, log, err0, env0);
	int s0 = wait_status(p0), s1 = wait_status(p1);
	CHECK(s0 == 0 && s1 == 0, "launcher ranks exited %d and %d", s0, s1);
	struct run_log a, b;
	if (fork_run.status == 0 && s0 == 0 && s1 == 0 && load_log(fork_run.log, 2, steps, &a) == 0 &&
	    load_log(log, 2, steps, &b) == 0) {
		double la[MAX_STEPS], lb[MAX_STEPS];
		losses_of(&a, la);
		losses_of(&b, lb);
		for (int s = 0; s < steps; s++)
			CHECK(memcmp(&la[s], &lb[s], sizeof la[s]) == 0, "step %d: launcher %.17g vs fork %.17g", s,
			      lb[s], la[s]);
		check_counts(&b, "linear", SMALL_LAYERS, "true", 0, "launcher");
		printf("launcher: 2 ranks via RANK/WORLD_SIZE match --nranks 2 bit for bit over %d steps\n", steps);
	}
	/* --unique-id-file without the environment, and the reverse */
	expect_usage_error("launcher_noenv", "--unique-id-file /nonexistent/id --steps 1", "RANK");
}

static void scenario_failure(void)
{
	expect_usage_error("bad_wrap", "--wrap linear:0-2", "bad --wrap");
	expect_usage_error("bad_batch", "--nranks 3 --batch 8", "multiple of the 3 ranks");
	expect_usage_error("bad_shard", "--nranks 4 --shard-group 3", "--shard-group");
	expect_usage_error("bad_reshard", "--nranks 4 --reshard-after-forward 3", "--reshard-after-forward");
	expect_usage_error("bad_dtype", "--param-dtype fp16", "--param-dtype");
	expect_usage_error("bad_flag", "--no-such-flag", "unknown option");
	expect_usage_error("bad_heads", "--heads 3", "--heads");

	/* Kill one rank of a running job: the parent must stop the others and
	 * exit with the killed rank's status (128 + SIGKILL). */
	char errpath[600];
	snprintf(errpath, sizeof errpath, "%s/kill.stderr", workdir);
	pid_t parent = spawn("--nranks 3 --batch 6 --layers 4 --d-model 32 --ffn 64 --seq 16 --vocab 32 --steps 100000",
			     NULL, errpath, NULL);
	pid_t kids[8];
	int n = 0;
	for (int i = 0; i < 500 && n < 3; i++) { /* up to 5 s for the forks */
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
		n = children_of(parent, kids, 8);
	}
	CHECK(n == 3, "found %d rank processes", n);
	if (n == 3) {
		struct timespec ts = {0, 300 * 1000000L}; /* let them start training */
		nanosleep(&ts, NULL);
		kill(kids[1], SIGKILL);
	} else {
		kill(parent, SIGKILL);
	}
	int st = wait_status(parent);
	CHECK(st == 128 + SIGKILL, "job status %d after a rank was killed, expected %d", st, 128 + SIGKILL);
	for (int i = 0; i < n; i++)
		CHECK(kill(kids[i], 0) != 0, "rank process %d still alive", (int)kids[i]);
	printf("failure: bad flags exit 2 with a message; a killed rank ends the job with status %d\n", st);
}

/* Expected NVTX stream of one rank for --wrap linear, --reshard-after-forward
 * true, with `layers` blocks (docs/fsdp_ref.md, "NVTX ranges"): unit ranges
 * holding op leaves, the hooks' own work in "fsdp.*" leaves beside them.
 * tp: with --tp > 1, the leaves that issue the TP collectives (their waits
 * are outside every leaf) and the replicated gradients' all-reduce of the
 * units that hold norms or are the root. */
static int nvtx_expected(char lines[][48], int max, int layers, int steps, int tp)
{
	static const char *const fwd[] = {"attn.q", "attn.k", "attn.v", "attn.o", "mlp.gate", "mlp.up", "mlp.down"};
	int n = 0;
#define EMIT(...) (n < max ? snprintf(lines[n++], 48, __VA_ARGS__) : 0)
#define LEAF(...) (EMIT("push " __VA_ARGS__), EMIT("pop"))
	for (int s = 0; s < steps; s++) {
		EMIT("push step %d", s);
		EMIT("push forward");
		LEAF("input");
		LEAF("fsdp.unshard");
		EMIT("push root");
		LEAF("embedding");
		for (int l = 0; l < layers; l++) {
			LEAF("fsdp.unshard");
			EMIT("push layers.%d", l);
			LEAF("layers.%d.attn_norm", l);
			if (tp)
				LEAF("layers.%d.attn.tp_allgather", l);
			for (int j = 0; j < 7; j++) {
				LEAF("fsdp.unshard");
				EMIT("push layers.%d.%s", l, fwd[j]);
				LEAF("layers.%d.%s.matmul", l, fwd[j]);
				EMIT("pop");
				LEAF("fsdp.reshard");
				if (j == 2)
					LEAF("layers.%d.attn.core", l);
				if (j == 3) {
					if (tp)
						LEAF("layers.%d.attn.tp_reduce_scatter", l);
					LEAF("layers.%d.attn.residual", l);
					LEAF("layers.%d.mlp_norm", l);
					if (tp)
						LEAF("layers.%d.mlp.tp_allgather", l);
				}
				if (j == 5)
					LEAF("layers.%d.mlp.act", l);
				if (j == 6) {
					if (tp)
						LEAF("layers.%d.mlp.tp_reduce_scatter", l);
					LEAF("layers.%d.mlp.residual", l);
				}
			}
			EMIT("pop");
			LEAF("fsdp.reshard");
		}
		LEAF("final_norm");
		LEAF("head");
		LEAF("loss");
		EMIT("pop"); /* root: kept gathered for backward, no reshard */
		LEAF("loss_sum");
		EMIT("pop");
		EMIT("push backward");
		LEAF("fsdp.unshard");
		LEAF("fsdp.grad_alloc");
		EMIT("push root");
		LEAF("head");
		LEAF("final_norm");
		for (int l = layers - 1; l >= 0; l--) {
			LEAF("fsdp.unshard");
			LEAF("fsdp.grad_alloc");
			EMIT("push layers.%d", l);
			if (tp)
				LEAF("layers.%d.mlp.tp_allgather", l);
			for (int j = 6; j >= 0; j--) {
				LEAF("fsdp.unshard");
				LEAF("fsdp.grad_alloc");
				EMIT("push layers.%d.%s", l, fwd[j]);
				LEAF("layers.%d.%s.matmul", l, fwd[j]);
				EMIT("pop");
				LEAF("fsdp.reduce_scatter");
				if (j == 6)
					LEAF("layers.%d.mlp.act", l);
				if (j == 4) {
					if (tp)
						LEAF("layers.%d.mlp.tp_reduce_scatter", l);
					LEAF("layers.%d.mlp_norm", l);
					if (tp)
						LEAF("layers.%d.attn.tp_allgather", l);
				}
				if (j == 3)
					LEAF("layers.%d.attn.core", l);
				if (j == 0) {
					if (tp)
						LEAF("layers.%d.attn.tp_reduce_scatter", l);
					LEAF("layers.%d.attn_norm", l);
				}
			}
			EMIT("pop");
			if (tp)
				LEAF("fsdp.tp_allreduce"); /* the norms' gradients */
			LEAF("fsdp.reduce_scatter");
		}
		LEAF("embedding");
		EMIT("pop");
		if (tp)
			LEAF("fsdp.tp_allreduce"); /* the root's */
		LEAF("fsdp.reduce_scatter");
		EMIT("pop");
		LEAF("optimizer");
		EMIT("pop");
	}
#undef LEAF
#undef EMIT
	return n;
}

static const char *inject_lib;

/* One training-loop configuration of fsdp_ref: its flags, and what the
 * closed form (fsdp_ref/counts.h) needs to know of them. */
struct loop_cfg {
	const char *tag;
	int n, s, style, k, sync_last, clip, ac, sms, eval, ckpt; /* ranks, shard group, ..., the loop plan */
	const char *wrap, *reshard, *flags;
};

static void check_tp_counts(const struct run_log *lg, const struct fsdp_count_config *c, const struct loop_plan *lp,
			    const char *what);

/* Run c on `tp`-way tensor parallelism (1: none) for `steps` steps and check
 * every line's counts against the closed form. 0 with *r and *lg filled, or
 * -1 when the run failed (already reported). */
static int run_loop_cfg(const struct loop_cfg *c, int tp, int steps, const char *tag, struct run *r,
			struct run_log *lg)
{
	char sg[32] = "", tpf[16] = "";
	if (c->s)
		snprintf(sg, sizeof sg, "--shard-group %d", c->s);
	if (tp > 1)
		snprintf(tpf, sizeof tpf, "--tp %d", tp);
	run_trainer(r, tag, "--nranks %d %s " SMALL " --steps %d --wrap %s --reshard-after-forward %s %s %s", c->n, tpf,
		    steps, c->wrap, c->reshard, sg, c->flags);
	if (r->status != 0 || load_log(r->log, c->n, steps, lg) < 0)
		return -1;
	struct fsdp_count_config cc = {.wrap = c->wrap,
				       .layers = SMALL_LAYERS,
				       .reshard_after_forward = c->reshard,
				       .world_size = c->n,
				       .shard_group = c->s,
				       .style = c->style,
				       .grad_accum = c->k,
				       .grad_sync_last = c->sync_last,
				       .clip_grad = c->clip,
				       .activation_checkpoint = c->ac,
				       .tp = tp > 1 ? tp : 0};
	struct loop_plan lp = {c->sms, c->eval, c->ckpt};
	if (tp > 1)
		check_tp_counts(lg, &cc, &lp, r->args);
	else
		check_counts_cfg(lg, &cc, &lp, r->args);
	return 0;
}


static void scenario_loop(void)
{
	/* The training-loop setups: counts against the closed form on every
	 * line, and what must not change the math does not. */
	static const struct loop_cfg cfgs[] = {
	    {"accum4", 2, 0, 0, 4, 0, 0, 0, 0, 0, 0, "block", "true", "--grad-accum 4"},
	    {"accum4_last", 2, 0, 0, 4, 1, 0, 0, 0, 0, 0, "block", "true", "--grad-accum 4 --grad-sync last"},
	    {"accum3_clip_hsdp", 4, 2, 0, 3, 0, 1, 0, 0, 0, 0, "linear", "false",
	     "--grad-accum 3 --clip-grad 1e20"},
	    {"fsdp1_ac_hsdp", 4, 2, 1, 1, 0, 0, 1, 1, 0, 0, "block", "true",
	     "--style fsdp1 --activation-checkpoint --sync-module-states"},
	    {"fsdp1_keep_ac", 2, 0, 1, 2, 1, 0, 1, 0, 0, 0, "block", "false",
	     "--style fsdp1 --activation-checkpoint --grad-accum 2 --grad-sync last"},
	    {"eval_ckpt", 2, 0, 0, 1, 0, 0, 0, 0, 2, 3, "block", "true", "--eval-every 2 --checkpoint-every 3"},
	    {"fsdp2_ac_nonvtx", 2, 0, 0, 1, 0, 0, 1, 0, 0, 0, "block", "true", "--activation-checkpoint --no-nvtx"},
	    {"plain", 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, "block", "true", ""},
	    {"accum3_hsdp", 4, 2, 0, 3, 0, 0, 0, 0, 0, 0, "linear", "false", "--grad-accum 3"},
	};
	const int steps = 6;
	double losses[sizeof cfgs / sizeof cfgs[0]][MAX_STEPS];
	for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
		char tag[48];
		struct run r;
		struct run_log lg;
		snprintf(tag, sizeof tag, "loop_%s", cfgs[c].tag);
		memset(losses[c], 0, sizeof losses[c]);
		if (run_loop_cfg(&cfgs[c], 1, steps, tag, &r, &lg) < 0)
			continue;
		losses_of(&lg, losses[c]);
		printf("%-16s AG %g+%g RS %g AR %g, per micro-batch %g+%g x %g, loss %.6f -> %.6f\n", cfgs[c].tag,
		       lg.line[0][0].forward_allgathers, lg.line[0][0].backward_allgathers, lg.line[0][0].reduce_scatters,
		       lg.line[0][0].allreduces, lg.line[0][0].forward_per_microbatch,
		       lg.line[0][0].backward_per_microbatch, lg.line[0][0].microbatches, losses[c][0],
		       losses[c][steps - 1]);
	}
	/* bit for bit: eval and checkpoints read nothing they change; FSDP1's
	 * schedule, activation checkpointing and NVTX change no arithmetic; a clip
	 * norm never reached scales by exactly 1 */
	static const struct {
		const char *a, *b;
	} same[] = {{"eval_ckpt", "plain"}, {"fsdp2_ac_nonvtx", "plain"}, {"accum3_clip_hsdp", "accum3_hsdp"}};
	for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
		size_t x = 0, y = 0;
		for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
			x = strcmp(cfgs[c].tag, same[i].a) ? x : c;
			y = strcmp(cfgs[c].tag, same[i].b) ? y : c;
		}
		CHECK(memcmp(losses[x], losses[y], sizeof(double) * steps) == 0, "%s and %s: losses differ (%.17g vs %.17g)",
		      same[i].a, same[i].b, losses[x][steps - 1], losses[y][steps - 1]);
	}
	/* Accumulating unreduced gradients and reducing once (--grad-sync last)
	 * sums in another order than reducing every micro-batch: equal within
	 * fp32 rounding, and equal at step 0 (before any update). */
	double worst = 0;
	for (int st = 0; st < steps; st++) {
		double rel = fabs(losses[1][st] - losses[0][st]) / fabs(losses[0][st]);
		worst = rel > worst ? rel : worst;
		CHECK(rel <= 1e-5, "grad-sync last vs every: step %d loss %.17g vs %.17g", st, losses[1][st],
		      losses[0][st]);
	}
	CHECK(losses[1][0] == losses[0][0], "grad-sync last vs every: step 0 loss differs");
	printf("grad-sync last vs every: worst relative loss difference %.2g\n", worst);

	/* FSDP1 with HSDP and sync_module_states against FSDP2 with HSDP: the same
	 * losses, bit for bit */
	struct run r;
	run_trainer(&r, "loop_fsdp2_hsdp", "--nranks 4 " SMALL " --steps %d --wrap block --shard-group 2", steps);
	struct run_log lg;
	double ref[MAX_STEPS];
	if (r.status == 0 && load_log(r.log, 4, steps, &lg) == 0) {
		losses_of(&lg, ref);
		CHECK(memcmp(ref, losses[3], sizeof(double) * steps) == 0,
		      "fsdp1 + activation checkpoint + sync_module_states (HSDP) differs from fsdp2 (HSDP): %.17g vs %.17g",
		      losses[3][steps - 1], ref[steps - 1]);
	}
}

/* Run `args` with the injection library recording into WORKDIR/prefix.PID
 * and compare every rank's stream with nvtx_expected(layers, steps, tp). */
static void nvtx_check(const char *prefix, const char *args, int layers, int steps, int tp, int n)
{
	char out[600], lib[600];
	snprintf(out, sizeof out, "FSDP_REF_NVTX_OUT=%s/%s", workdir, prefix);
	snprintf(lib, sizeof lib, "NVTX_INJECTION64_PATH=%s", inject_lib ? inject_lib : "");
	char *env[] = {out, lib, NULL};
	char errpath[600], cmd[700];
	snprintf(errpath, sizeof errpath, "%s/%s.stderr", workdir, prefix);
	snprintf(cmd, sizeof cmd, "rm -f %s/%s.*[0-9]", workdir, prefix);
	CHECK(system(cmd) == 0, "%s", cmd);
	int st = wait_status(spawn(args, NULL, errpath, env));
	CHECK(st == 0, "fsdp_ref %s exited %d", args, st);
	static char want[4096][48];
	int nwant = nvtx_expected(want, 4096, layers, steps, tp);
	/* one file per rank process (the supervising parent makes no NVTX calls) */
	snprintf(cmd, sizeof cmd, "ls %s/%s.*[0-9]", workdir, prefix);
	FILE *ls = popen(cmd, "r");
	char path[700];
	int files = 0;
	while (ls && fgets(path, sizeof path, ls)) {
		path[strcspn(path, "\n")] = '\0';
		FILE *f = fopen(path, "r");
		char line[128];
		int i = 0, bad = 0;
		while (f && fgets(line, sizeof line, f)) {
			line[strcspn(line, "\n")] = '\0';
			if (i >= nwant || strcmp(line, want[i]) != 0) {
				if (!bad++)
					CHECK(0, "%s line %d: '%s', expected '%s'", path, i + 1, line,
					      i < nwant ? want[i] : "(end)");
			}
			i++;
		}
		if (f)
			fclose(f);
		CHECK(i == nwant, "%s: %d ranges lines, expected %d", path, i, nwant);
		files++;
	}
	if (ls)
		pclose(ls);
	CHECK(files == n, "%d NVTX streams, expected one per rank (%d)", files, n);
	printf("%s: %d ranks, each %d push/pop records exactly as expected (domain fsdp_ref)\n", prefix, files, nwant);
}

static void scenario_nvtx(void)
{
	nvtx_check("nvtx",
		   "--nranks 2 --layers 2 --d-model 32 --ffn 64 --seq 8 --vocab 32 --batch 4 --steps 2 --wrap linear",
		   2, 2, 0, 2);

	/* --no-nvtx: no range at all (NVTX is never even initialised) */
	char out[600], lib[600], errpath[600], cmd[700];
	snprintf(out, sizeof out, "FSDP_REF_NVTX_OUT=%s/nonvtx", workdir);
	snprintf(lib, sizeof lib, "NVTX_INJECTION64_PATH=%s", inject_lib ? inject_lib : "");
	char *env[] = {out, lib, NULL};
	snprintf(errpath, sizeof errpath, "%s/nvtx.stderr", workdir);
	snprintf(cmd, sizeof cmd, "rm -f %s/nonvtx.*[0-9]", workdir);
	CHECK(system(cmd) == 0, "%s", cmd);
	int st = wait_status(spawn("--nranks 2 --layers 2 --d-model 32 --ffn 64 --seq 8 --vocab 32 "
				   "--batch 4 --steps 2 --wrap linear --no-nvtx",
				   NULL, errpath, env));
	CHECK(st == 0, "fsdp_ref --no-nvtx exited %d", st);
	snprintf(cmd, sizeof cmd, "cat %s/nonvtx.*[0-9] 2>/dev/null | wc -l", workdir);
	FILE *ls = popen(cmd, "r");
	long lines = -1;
	if (ls && fscanf(ls, "%ld", &lines) != 1)
		lines = -1;
	if (ls)
		pclose(ls);
	CHECK(lines == 0, "--no-nvtx: %ld NVTX records, expected none", lines);
}

/* Every line's counts equal the closed form of configuration c (c->tp set):
 * FSDP's on the data-parallel dimension, and the tp communicator's. */
static void check_tp_counts(const struct run_log *lg, const struct fsdp_count_config *c, const struct loop_plan *lp,
			    const char *what)
{
	check_counts_cfg(lg, c, lp, what);
	struct fsdp_counts k;
	if (fsdp_expected_counts(c, &k, NULL, 0) != 0)
		return;
	for (int r = 0; r < lg->world_size; r++)
		for (int s = 0; s < lg->steps; s++) {
			const struct step_line *l = &lg->line[r][s];
			int eval = lp && lp->eval_every && (s + 1) % lp->eval_every == 0;
			CHECK(l->tp == k.tp && l->dp == k.dp && l->tp_allgathers == k.tp_allgathers &&
				  l->tp_reduce_scatters == k.tp_reduce_scatters &&
				  l->tp_allreduces == k.tp_allreduces &&
				  l->eval_tp_allgathers == (eval ? k.eval_tp_allgathers : 0) &&
				  l->eval_tp_reduce_scatters == (eval ? k.eval_tp_reduce_scatters : 0),
			      "%s rank %d step %d: tp %g dp %g, tp AG %g RS %g AR %g, eval tp AG %g RS %g; closed form "
			      "tp %d dp %d, AG %d RS %d AR %d, eval %d %d",
			      what, r, s, l->tp, l->dp, l->tp_allgathers, l->tp_reduce_scatters, l->tp_allreduces,
			      l->eval_tp_allgathers, l->eval_tp_reduce_scatters, k.tp, k.dp, k.tp_allgathers,
			      k.tp_reduce_scatters, k.tp_allreduces, eval ? k.eval_tp_allgathers : 0,
			      eval ? k.eval_tp_reduce_scatters : 0);
		}
}

/* The worst relative difference of two loss trajectories, checked <= tol. */
static double compare_losses(const double *a, const double *b, int steps, double tol, const char *what)
{
	double worst = 0;
	for (int s = 0; s < steps; s++) {
		double rel = fabs(a[s] - b[s]) / fabs(b[s]);
		worst = rel > worst ? rel : worst;
		CHECK(rel <= tol, "%s: step %d loss %.17g vs %.17g (relative %.2g > %.2g)", what, s, a[s], b[s], rel,
		      tol);
	}
	return worst;
}

/* One run's loss trajectory (every rank's the same, bit for bit). 0 or -1. */
static int run_losses(const char *tag, int n, int steps, const char *flags, double *out)
{
	struct run r;
	run_trainer(&r, tag, "--nranks %d " SMALL " --steps %d %s", n, steps, flags);
	struct run_log lg;
	if (r.status != 0 || load_log(r.log, n, steps, &lg) < 0)
		return -1;
	losses_of(&lg, out);
	return 0;
}

static void scenario_tp(void)
{
	/* counts: N = 2 (one dp rank) and 4 (dp 2), wrap block and linear,
	 * reshard true and false; then HSDP inside dp, gradient accumulation,
	 * the training loop's one-off collectives, FSDP1 */
	static const struct loop_cfg cfgs[] = {
	    {NULL, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, "block", "true", ""},
	    {NULL, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, "linear", "true", ""},
	    {NULL, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, "block", "false", ""},
	    {NULL, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, "linear", "false", ""},
	    {NULL, 4, 0, 0, 1, 0, 0, 0, 0, 0, 0, "block", "true", ""},
	    {NULL, 4, 0, 0, 1, 0, 0, 0, 0, 0, 0, "linear", "true", ""},
	    {NULL, 4, 0, 0, 1, 0, 0, 0, 0, 0, 0, "block", "false", ""},
	    {NULL, 4, 0, 0, 1, 0, 0, 0, 0, 0, 0, "linear", "false", ""},
	    {NULL, 4, 1, 0, 1, 0, 0, 0, 0, 0, 0, "linear", "true", ""},
	    {NULL, 4, 0, 0, 2, 0, 0, 0, 0, 0, 0, "block", "true", "--grad-accum 2"},
	    {NULL, 4, 0, 0, 2, 1, 1, 0, 1, 2, 3, "model", "true",
	     "--grad-accum 2 --grad-sync last --clip-grad 1e20 --sync-module-states --eval-every 2 --checkpoint-every "
	     "3"},
	    {NULL, 4, 1, 1, 1, 0, 0, 1, 0, 0, 0, "group:2", "true", "--style fsdp1 --activation-checkpoint"},
	};
	const int steps = 4, ncfg = sizeof cfgs / sizeof cfgs[0];
	double first[2][MAX_STEPS];
	int have_first[2] = {0, 0};
	for (int c = 0; c < ncfg; c++) {
		char tag[32];
		struct run r;
		struct run_log lg;
		snprintf(tag, sizeof tag, "tp_counts_%d", c);
		if (run_loop_cfg(&cfgs[c], 2, steps, tag, &r, &lg) < 0)
			continue;
		double loss[MAX_STEPS];
		losses_of(&lg, loss);
		printf("%-100s FSDP AG %g+%g RS %g AR %g; tp AG %g RS %g AR %g\n", r.args,
		       lg.line[0][0].forward_allgathers, lg.line[0][0].backward_allgathers,
		       lg.line[0][0].reduce_scatters, lg.line[0][0].allreduces, lg.line[0][0].tp_allgathers,
		       lg.line[0][0].tp_reduce_scatters, lg.line[0][0].tp_allreduces);
		/* as without TP, the wrap policy and resharding change no bit */
		if (c < 8) {
			int ni = cfgs[c].n == 4;
			if (!have_first[ni]) {
				memcpy(first[ni], loss, sizeof loss);
				have_first[ni] = 1;
			} else {
				CHECK(
				    memcmp(first[ni], loss, sizeof(double) * steps) == 0,
				    "%s: losses differ from --wrap block --reshard-after-forward true (%.17g vs %.17g)",
				    r.args, loss[steps - 1], first[ni][steps - 1]);
			}
		}
	}

	/* losses: TP computes the same model as the data-parallel run with the
	 * same dp; only fp32 summation orders differ (the o and down partial sums,
	 * the replicated gradients summed per token shard then over tp). With
	 * fp32 parameters that is a few 1e-8 over these steps, held to 1e-6: a
	 * clip norm counting the replicated tensors T times moves the clipped
	 * run by 5e-5, which 1e-4 would let pass. With bf16 parameters an fp32
	 * ulp can round a weight to the next bf16 value: 1e-4. */
	static const struct {
		int n_tp, n_ref;
		const char *flags;
		double tol;
	} pairs[] = {
	    {2, 1, "--param-dtype fp32", 1e-6},
	    {4, 2, "--param-dtype fp32", 1e-6},
	    {2, 1, "", 1e-4},					/* bf16 parameters */
	    {4, 2, "--param-dtype fp32 --clip-grad 0.5", 1e-6}, /* a clip that scales every step */
	    {4, 2, "--param-dtype fp32 --grad-accum 2 --grad-sync last --wrap linear", 1e-6},
	    {4, 2, "--param-dtype fp32 --shard-group 1 --reshard-after-forward false", 1e-6},
	};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		double a[MAX_STEPS], b[MAX_STEPS];
		char tag[32], flags[256], what[320];
		snprintf(tag, sizeof tag, "tp_loss_%zu", i);
		snprintf(flags, sizeof flags, "--tp 2 %s", pairs[i].flags);
		if (run_losses(tag, pairs[i].n_tp, steps, flags, a) < 0)
			continue;
		snprintf(tag, sizeof tag, "tp_loss_ref_%zu", i);
		if (run_losses(tag, pairs[i].n_ref, steps, pairs[i].flags, b) < 0)
			continue;
		snprintf(what, sizeof what, "--tp 2 --nranks %d vs --nranks %d %s", pairs[i].n_tp, pairs[i].n_ref,
			 pairs[i].flags);
		double worst = compare_losses(a, b, steps, pairs[i].tol, what);
		printf("%-90s worst relative loss difference %.2g over %d steps (%.9f ... %.9f)\n", what, worst, steps,
		       a[0], a[steps - 1]);
	}

	/* bad --tp values: exit 2 with what is wrong */
	expect_usage_error("tp_bad_n", "--nranks 4 --tp 3 --heads 3 --d-model 48 --kv-heads 3 --ffn 63", "--tp 3");
	expect_usage_error("tp_bad_heads", "--nranks 2 --tp 2 --heads 2 --kv-heads 1", "--kv-heads 1");
	expect_usage_error("tp_bad_ffn", "--nranks 2 --tp 2 --ffn 63", "--ffn 63");
	expect_usage_error("tp_bad_heads_q", "--nranks 4 --tp 4 --heads 2 --kv-heads 2 --d-model 32", "--heads 2");
	expect_usage_error("tp_bad_tokens", "--nranks 4 --tp 4 --heads 4 --kv-heads 4 --batch 1 --seq 2", "tokens");
	expect_usage_error("tp_bad_shard", "--nranks 4 --tp 2 --shard-group 4", "--shard-group");
	expect_usage_error("tp_bad_batch", "--nranks 4 --tp 2 --batch 3", "data-parallel");
}

static void scenario_tp_nvtx(void)
{
	nvtx_check("tp_nvtx",
		   "--nranks 2 --tp 2 --layers 2 --d-model 32 --ffn 64 --seq 8 --vocab 32 --batch 4 --steps 2 "
		   "--wrap linear",
		   2, 2, 1, 2);
}

/* ---- zero3 ------------------------------------------------------------------ */

/* The SMALL model's tensors, in the model's tensor order (model.h): the root's
 * tok_embeddings, norm, output, then per block q, k, v, o, gate, up, down,
 * attn_norm, mlp_norm. C = 32, F = 64, V = 32, kv dim = 32 / 4 heads * 2. */
#define Z3_TENSORS (3 + 9 * SMALL_LAYERS)
enum { Z3_TOK = 0, Z3_NORM, Z3_OUTPUT };
enum { Z3_Q = 0, Z3_K, Z3_V, Z3_O, Z3_GATE, Z3_UP, Z3_DOWN, Z3_ATTN_NORM, Z3_MLP_NORM };

static int z3_id(int layer, int part)
{
	return 3 + 9 * layer + part;
}

static void z3_numels(double *numel)
{
	const double C = 32, F = 64, V = 32, KV = 16;
	numel[Z3_TOK] = V * C;
	numel[Z3_NORM] = C;
	numel[Z3_OUTPUT] = V * C;
	for (int l = 0; l < SMALL_LAYERS; l++) {
		const double part[9] = {C * C, KV * C, KV * C, C * C, F * C, F * C, C * F, C, C};
		for (int p = 0; p < 9; p++)
			numel[z3_id(l, p)] = part[p];
	}
}

#define Z3_MAX_FETCHES 256

struct z3_cfg {
	const char *tag;
	int n, coalesced, k, clip, eval_every, rbytes;
	double bucket, threshold, reuse, max_live, rbucket;
	const char *flags;  /* the trainer's flags for the above */
	const char *common; /* flags the fsdp2 reference shares */
};

/* What one step's log line should say. */
struct z3_expect {
	int fwd, bwd, opt, calls, rs, eval;
	double fe, be, gathered_bytes, rs_bytes;
	double ahead; /* elements a forward fetch carried for their backward use */
	int nfetch;
	double fetch[Z3_MAX_FETCHES];
};

/* A simulator of the rules in docs/fsdp_ref.md ("--style zero3"), written
 * from them, not from zero3.c. */
struct z3_sim {
	const struct z3_cfg *c;
	double numel[Z3_TENSORS];
	int persistent[Z3_TENSORS], avail[Z3_TENSORS];
	int trace[2 * Z3_TENSORS]; /* forward uses, then the reverse */
	int traced;		   /* a recorded trace guides the pass */
	int pos, end;
	double live;
	enum { SIM_FWD, SIM_BWD, SIM_OPT, SIM_EVAL } phase;
	double ipg, ipg_parts;
	int ipg_n;
	struct z3_expect *e;
};

static double z3_part(const struct z3_sim *s, int id)
{
	return ceil(s->numel[id] / s->c->n);
}

static void sim_fetch_record(struct z3_sim *s, double elems, int tensors, double parts)
{
	struct z3_expect *e = s->e;
	if (s->phase == SIM_EVAL) {
		e->eval++;
		return;
	}
	if (s->phase == SIM_FWD) {
		e->fwd++;
		e->fe += elems;
	} else if (s->phase == SIM_BWD) {
		e->bwd++;
		e->be += elems;
	} else {
		e->opt++;
	}
	e->calls += s->c->coalesced ? tensors : 1;
	e->gathered_bytes += s->c->n * parts * 2; /* bf16 */
	if (e->nfetch < Z3_MAX_FETCHES)
		e->fetch[e->nfetch++] = elems;
}

static void sim_need(struct z3_sim *s, int id)
{
	s->pos++;
	if (s->avail[id])
		return;
	int in[Z3_TENSORS] = {0}, count = 1;
	double elems = s->numel[id], parts = z3_part(s, id);
	in[id] = 1;
	for (int j = s->pos; s->traced && j < s->end; j++) {
		int u = s->trace[j];
		if (s->avail[u] || in[u])
			continue;
		if (elems + s->numel[u] > s->c->bucket || s->live + elems + s->numel[u] > s->c->max_live)
			break;
		in[u] = 1;
		count++;
		elems += s->numel[u];
		if (s->phase == SIM_FWD && j >= Z3_TENSORS)
			s->e->ahead += s->numel[u];
		parts += z3_part(s, u);
	}
	for (int t = 0; t < Z3_TENSORS; t++)
		s->avail[t] |= in[t];
	s->live += elems;
	sim_fetch_record(s, elems, count, parts);
}

static void sim_release(struct z3_sim *s, int id)
{
	if (!s->avail[id])
		return;
	if (s->traced) {
		if (s->persistent[id])
			return;
		double seen = 0;
		for (int j = s->pos; j < s->end && seen < s->c->reuse; j++) {
			if (s->trace[j] == id)
				return;
			seen += s->numel[s->trace[j]];
		}
	}
	s->avail[id] = 0;
	s->live -= s->numel[id];
}

static void sim_flush(struct z3_sim *s)
{
	if (!s->ipg_n)
		return;
	s->e->rs++;
	s->e->rs_bytes += s->c->n * s->ipg_parts * s->c->rbytes;
	s->ipg = s->ipg_parts = 0;
	s->ipg_n = 0;
}

static void sim_grad(struct z3_sim *s, int id)
{
	if (s->ipg_n && s->ipg + s->numel[id] > s->c->rbucket)
		sim_flush(s);
	s->ipg += s->numel[id];
	s->ipg_parts += z3_part(s, id);
	s->ipg_n++;
}

/* One pass. A use's release (and in backward its gradient) comes before the
 * next use's need, but the final norm and the head are needed together and
 * released together. */
static void sim_pass(struct z3_sim *s, int backward)
{
	s->pos = 0;
	s->end = s->traced ? (backward ? 2 : 1) * Z3_TENSORS : 0;
	s->phase = backward ? SIM_FWD : SIM_EVAL;
	for (int i = 0; i < Z3_TENSORS; i++) {
		int u = s->trace[i];
		sim_need(s, u);
		if (u == Z3_NORM)
			continue;
		if (u == Z3_OUTPUT)
			sim_release(s, Z3_NORM);
		sim_release(s, u);
	}
	if (!backward)
		return;
	s->phase = SIM_BWD;
	for (int i = Z3_TENSORS; i < 2 * Z3_TENSORS; i++) {
		int u = s->trace[i];
		sim_need(s, u);
		if (u == Z3_OUTPUT)
			continue;
		if (u == Z3_NORM) {
			sim_grad(s, Z3_OUTPUT);
			sim_release(s, Z3_OUTPUT);
		}
		sim_grad(s, u);
		sim_release(s, u);
	}
	sim_flush(s);
}

static void sim_release_all(struct z3_sim *s)
{
	for (int t = 0; t < Z3_TENSORS; t++)
		if (s->avail[t] && !s->persistent[t]) {
			s->avail[t] = 0;
			s->live -= s->numel[t];
		}
}

/* Expected lines for `steps` steps of configuration c. */
static void z3_simulate(const struct z3_cfg *c, int steps, struct z3_expect *out)
{
	struct z3_sim s = {.c = c};
	z3_numels(s.numel);
	for (int t = 0; t < Z3_TENSORS; t++)
		s.persistent[t] = s.numel[t] <= c->threshold;
	int n = 0;
	s.trace[n++] = Z3_TOK;
	for (int l = 0; l < SMALL_LAYERS; l++) {
		static const int order[9] = {Z3_ATTN_NORM, Z3_Q,    Z3_K,  Z3_V,   Z3_O,
					     Z3_MLP_NORM,  Z3_GATE, Z3_UP, Z3_DOWN};
		for (int p = 0; p < 9; p++)
			s.trace[n++] = z3_id(l, order[p]);
	}
	s.trace[n++] = Z3_NORM;
	s.trace[n++] = Z3_OUTPUT;
	for (int i = 0; i < Z3_TENSORS; i++)
		s.trace[Z3_TENSORS + i] = s.trace[Z3_TENSORS - 1 - i];
	int recorded = 0;
	for (int st = 0; st < steps; st++) {
		s.e = &out[st];
		memset(s.e, 0, sizeof *s.e);
		for (int mb = 0; mb < c->k; mb++) {
			s.traced = recorded;
			sim_pass(&s, 1);
			recorded = 1;
		}
		sim_release_all(&s);
		s.phase = SIM_OPT;
		for (int t = 0; t < Z3_TENSORS; t++) {
			if (!s.persistent[t])
				continue;
			if (s.avail[t])
				s.live -= s.numel[t];
			s.avail[t] = 1;
			s.live += s.numel[t];
			sim_fetch_record(&s, s.numel[t], 1, z3_part(&s, t));
		}
		if (c->eval_every && (st + 1) % c->eval_every == 0) {
			s.traced = 1;
			sim_pass(&s, 0);
			sim_release_all(&s);
		}
	}
}

/* The zero3 keys of a log (load_log reads the common ones). */
struct z3_line {
	double calls, opt, gathered, fe, be, persistent_params, persistent_elements;
	int nfetch, flat, coalesced;
	double fetch[Z3_MAX_FETCHES];
};
static struct z3_line z3_lines[MAX_RANKS][MAX_STEPS];

static int load_zero3(const char *path)
{
	memset(z3_lines, 0, sizeof z3_lines);
	FILE *f = fopen(path, "r");
	CHECK(f != NULL, "cannot open %s", path);
	if (!f)
		return -1;
	static char buf[1 << 17];
	int bad = 0;
	while (fgets(buf, sizeof buf, f)) {
		double step, rank;
		if (log_line_number(buf, "step", &step) || log_line_number(buf, "rank", &rank) || rank < 0 || rank >= MAX_RANKS ||
		    step < 0 || step >= MAX_STEPS) {
			bad++;
			continue;
		}
		struct z3_line *l = &z3_lines[(int)rank][(int)step];
		struct {
			const char *key;
			double *dst;
		} keys[] = {
		    {"allgather_calls", &l->calls},
		    {"optimizer_allgathers", &l->opt},
		    {"gathered_elements", &l->gathered},
		    {"forward_gathered_elements", &l->fe},
		    {"backward_gathered_elements", &l->be},
		    {"persistent_params", &l->persistent_params},
		    {"persistent_elements", &l->persistent_elements},
		};
		for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
			if (log_line_number(buf, keys[k].key, keys[k].dst) != 0) {
				bad++;
				CHECK(0, "%s: key %s missing", path, keys[k].key);
			}
		l->flat = strstr(buf, "\"zero3_gather\":\"flat\"") != NULL;
		l->coalesced = strstr(buf, "\"zero3_gather\":\"coalesced\"") != NULL;
		const char *w = strstr(buf, "\"fetch_elements\":[");
		CHECK(w != NULL, "%s: key fetch_elements missing", path);
		for (w = w ? w + strlen("\"fetch_elements\":[") : ""; *w && *w != ']' && l->nfetch < Z3_MAX_FETCHES;) {
			char *end;
			double v = strtod(w, &end);
			if (end == w)
				break;
			l->fetch[l->nfetch++] = v;
			w = *end == ',' ? end + 1 : end;
		}
	}
	fclose(f);
	CHECK(bad == 0, "%s: %d malformed lines", path, bad);
	return bad ? -1 : 0;
}

/* A block of the SMALL model: 2 C^2 + 2 KV C + 3 C F + 2 C elements. */
#define Z3_BLOCK 9280.0
#define Z3_LARGEST 2048.0

static void scenario_zero3(void)
{
	/* tag, N, coalesced, K, clip, eval, reduce bytes, bucket, persistence threshold, reuse
	 * distance, max live, reduce bucket; the flags; the fsdp2 reference's shared flags */
	static const struct z3_cfg cfgs[] = {
	    {"flat_b3000_keep_all", 2, 0, 1, 0, 0, 4, 3000, 0, 1e9, 1e9, 5e8, "--bucket 3000 --persistence-threshold 0",
	     ""},
	    /* 4096 = gate + up: a fetch that fits exactly */
	    {"coal_b4096_p32_r3000", 2, 1, 1, 0, 0, 4, 4096, 32, 3000, 1e9, 5e8,
	     "--zero3-gather coalesced --bucket 4096 --persistence-threshold 32 --max-reuse-distance 3000", ""},
	    {"flat_b20000_p32_r3000", 4, 0, 1, 0, 0, 4, 20000, 32, 3000, 1e9, 5e8,
	     "--bucket 2e4 --persistence-threshold 32 --max-reuse-distance 3000", ""},
	    {"flat_b20000_live6000", 4, 0, 1, 0, 0, 4, 20000, 32, 3000, 6000, 5e8,
	     "--bucket 2e4 --persistence-threshold 32 --max-reuse-distance 3000 --max-live 6000", ""},
	    /* reduce bucket 4096 = down + up: a bucket that fills exactly */
	    {"coal_b20000_r0_rb4096", 4, 1, 1, 0, 0, 4, 20000, 0, 0, 1e9, 4096,
	     "--zero3-gather coalesced --bucket 20000 --persistence-threshold 0 --max-reuse-distance 0 "
	     "--reduce-bucket 4096",
	     ""},
	    /* 1500 < the largest tensors (2048): those go alone */
	    {"flat_b1500_p32_r3000", 4, 0, 1, 0, 0, 4, 1500, 32, 3000, 1e9, 5e8,
	     "--bucket 1500 --persistence-threshold 32 --max-reuse-distance 3000", ""},
	    {"coal_accum_clip_eval_bf16", 2, 1, 2, 1, 2, 2, 3000, 32, 3000, 1e9, 3000,
	     "--zero3-gather coalesced --bucket 3000 --persistence-threshold 32 --max-reuse-distance 3000 "
	     "--reduce-bucket 3000 --eval-every 2",
	     "--grad-accum 2 --clip-grad 0.5 --reduce-dtype bf16"},
	    {"flat_defaults", 4, 0, 1, 0, 0, 4, 5e7, 1e5, 1e9, 1e9, 5e8, "", ""},
	};
	const int steps = 4;
	double numel[Z3_TENSORS], P = 0;
	z3_numels(numel);
	for (int t = 0; t < Z3_TENSORS; t++)
		P += numel[t];
	static struct z3_expect want[MAX_STEPS];
	for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
		const struct z3_cfg *cf = &cfgs[c];
		struct run ref, r;
		char tag[64];
		snprintf(tag, sizeof tag, "zero3_ref_%s", cf->tag);
		run_trainer(&ref, tag, "--nranks %d " SMALL " --steps %d %s", cf->n, steps, cf->common);
		snprintf(tag, sizeof tag, "zero3_%s", cf->tag);
		run_trainer(&r, tag, "--nranks %d " SMALL " --steps %d --style zero3 %s %s", cf->n, steps, cf->common,
			    cf->flags);
		struct run_log lref, lg;
		if (ref.status != 0 || r.status != 0 || load_log(ref.log, cf->n, steps, &lref) < 0 ||
		    load_log(r.log, cf->n, steps, &lg) < 0 || load_zero3(r.log) < 0)
			continue;

		/* (1) the losses: fsdp2's, within fp32 rounding, the same on every rank */
		double lz[MAX_STEPS], lf[MAX_STEPS], worst = 0;
		losses_of(&lref, lf);
		losses_of(&lg, lz);
		for (int s = 0; s < steps; s++) {
			double rel = fabs(lz[s] - lf[s]) / fabs(lf[s]);
			worst = rel > worst ? rel : worst;
			CHECK(rel <= 1e-5, "%s step %d: zero3 loss %.17g vs fsdp2 %.17g", cf->tag, s, lz[s], lf[s]);
		}

		/* (2) the counts the rules imply, line by line; (3) the same on every rank */
		z3_simulate(cf, steps, want);
		double persistent = 0;
		int npersistent = 0;
		for (int t = 0; t < Z3_TENSORS; t++)
			if (numel[t] <= cf->threshold) {
				persistent += numel[t];
				npersistent++;
			}
		for (int rk = 0; rk < cf->n; rk++)
			for (int s = 0; s < steps; s++) {
				const struct step_line *l = &lg.line[rk][s];
				const struct z3_line *z = &z3_lines[rk][s];
				const struct z3_expect *e = &want[s];
				CHECK(l->forward_allgathers == e->fwd && l->backward_allgathers == e->bwd &&
					  z->opt == e->opt && l->allgathers == e->fwd + e->bwd + e->opt &&
					  z->calls == e->calls && l->reduce_scatters == e->rs &&
					  l->allreduces == 1 + cf->clip && l->eval_allgathers == e->eval,
				      "%s rank %d step %d: AG %g+%g+%g=%g calls %g RS %g AR %g eval AG %g; rules: "
				      "%d+%d+%d calls %d RS %d AR %d eval AG %d",
				      cf->tag, rk, s, l->forward_allgathers, l->backward_allgathers, z->opt,
				      l->allgathers, z->calls, l->reduce_scatters, l->allreduces, l->eval_allgathers,
				      e->fwd, e->bwd, e->opt, e->calls, e->rs, 1 + cf->clip, e->eval);
				CHECK(z->fe == e->fe && z->be == e->be &&
					  z->gathered == e->fe + e->be + (e->opt ? persistent : 0) &&
					  l->gathered_bytes == e->gathered_bytes &&
					  l->reduce_scattered_bytes == e->rs_bytes,
				      "%s rank %d step %d: elements %g+%g (all %g), bytes gathered %g reduce-scattered "
				      "%g; "
				      "rules: %g+%g, %g, %g",
				      cf->tag, rk, s, z->fe, z->be, z->gathered, l->gathered_bytes,
				      l->reduce_scattered_bytes, e->fe, e->be, e->gathered_bytes, e->rs_bytes);
				int first = 0;
				while (first < z->nfetch && first < e->nfetch && z->fetch[first] == e->fetch[first])
					first++;
				CHECK(z->nfetch == e->nfetch && first == e->nfetch,
				      "%s rank %d step %d: %d fetches, rules %d; fetch %d has %g elements, rules %g",
				      cf->tag, rk, s, z->nfetch, e->nfetch, first,
				      first < z->nfetch ? z->fetch[first] : -1,
				      first < e->nfetch ? e->fetch[first] : -1);
				CHECK(z->persistent_params == npersistent && z->persistent_elements == persistent &&
					  l->params == P && z->flat == !cf->coalesced && z->coalesced == cf->coalesced,
				      "%s rank %d: persistent %g (%g elements), params %g; want %d (%g), %g", cf->tag,
				      rk, z->persistent_params, z->persistent_elements, l->params, npersistent,
				      persistent, P);
				const struct step_line *l0 = &lg.line[0][s];
				const struct z3_line *z0 = &z3_lines[0][s];
				CHECK(l->allgathers == l0->allgathers && l->reduce_scatters == l0->reduce_scatters &&
					  l->allreduces == l0->allreduces && z->calls == z0->calls &&
					  z->nfetch == z0->nfetch &&
					  !memcmp(z->fetch, z0->fetch, sizeof z->fetch[0] * (size_t)z->nfetch),
				      "%s step %d: rank %d's collectives differ from rank 0's", cf->tag, s, rk);
			}

		/* the rules' consequences, read off the log alone */
		const struct z3_line *z0 = z3_lines[0];
		const struct step_line *l0 = lg.line[0];
		if (cf->k == 1) /* the module-trace step: one fetch per use, nothing kept */
			CHECK(l0[0].forward_allgathers == Z3_TENSORS && l0[0].backward_allgathers == Z3_TENSORS &&
				  z0[0].fe == P && z0[0].be == P,
			      "%s: step 0 fetched %g+%g times (%g+%g elements), not once per use (%d, %g)", cf->tag,
			      l0[0].forward_allgathers, l0[0].backward_allgathers, z0[0].fe, z0[0].be, Z3_TENSORS, P);
		for (int s = 1; s < steps; s++) {
			for (int i = 0; i < z0[s].nfetch; i++) {
				int single = 0;
				for (int t = 0; t < Z3_TENSORS; t++)
					single |= z0[s].fetch[i] == numel[t] && numel[t] > cf->bucket;
				CHECK(z0[s].fetch[i] <= cf->bucket || single,
				      "%s step %d fetch %d: %g elements > --bucket %g", cf->tag, s, i, z0[s].fetch[i],
				      cf->bucket);
			}
			/* every tensor but the persistent ones once per micro-batch in forward, plus what a
			 * forward fetch's look-ahead carried past the end of forward for backward */
			CHECK(z0[s].fe == cf->k * (P - persistent) + want[s].ahead &&
				  z0[s].fe + z0[s].be <= 2 * cf->k * (P - persistent),
			      "%s step %d: gathered forward %g, backward %g; P - persistent = %g, carried ahead %g",
			      cf->tag, s, z0[s].fe, z0[s].be, cf->k * (P - persistent), want[s].ahead);
			CHECK(z0[s].opt == npersistent, "%s step %d: %g post-step gathers, %d persistent tensors",
			      cf->tag, s, z0[s].opt, npersistent);
			CHECK(cf->coalesced || z0[s].calls == l0[s].allgathers,
			      "%s step %d: flat: %g calls for %g fetches", cf->tag, s, z0[s].calls, l0[s].allgathers);
			if (cf->reuse > 0 && z0[s].fe > 0)
				CHECK(z0[s].be < z0[s].fe,
				      "%s step %d: backward gathered %g, not less than forward's %g", cf->tag, s,
				      z0[s].be, z0[s].fe);
		}
		/* persistent: 2 param + 4 master + 4 gradient + 4 m + 4 v bytes per partition element */
		double ledger = 18.0 * P / cf->n, got = lg.line[0][0].peak_persistent_bytes;
		CHECK(fabs(got - ledger) <= 0.05 * ledger, "%s: persistent %g bytes, ledger 18 P / N = %g", cf->tag,
		      got, ledger);
		printf("%-26s N=%d: step 0 AG %g+%g+%g; step 1 AG %g+%g+%g (%g calls), elements %g+%g (%g for "
		       "backward), RS %g, AR %g; loss vs fsdp2 worst %.2g\n",
		       cf->tag, cf->n, l0[0].forward_allgathers, l0[0].backward_allgathers, z0[0].opt,
		       l0[1].forward_allgathers, l0[1].backward_allgathers, z0[1].opt, z0[1].calls, z0[1].fe, z0[1].be,
		       want[1].ahead, l0[1].reduce_scatters, l0[1].allreduces, worst);
	}

	expect_usage_error("zero3_bucket0", "--style zero3 --bucket 0", "--bucket");
	expect_usage_error("zero3_bucket_frac", "--style zero3 --bucket 2.5", "--bucket");
	expect_usage_error("zero3_threshold", "--style zero3 --persistence-threshold -1", "--persistence-threshold");
	expect_usage_error("zero3_gather", "--style zero3 --zero3-gather ring", "--zero3-gather");
	expect_usage_error("zero3_not_zero3", "--bucket 5e7", "applies only to --style zero3");
	expect_usage_error("zero3_sync_last", "--style zero3 --grad-accum 2 --grad-sync last", "--grad-sync last");
	expect_usage_error("zero3_hsdp", "--nranks 4 --style zero3 --shard-group 2", "--shard-group");
	expect_usage_error("zero3_tp", "--nranks 4 --style zero3 --tp 2", "--tp");
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5) {
		fprintf(stderr,
			"usage: fsdp_ref_e2e bitwise|counts|memory|prefetch|launcher|failure|loop|tp|zero3 FSDP_REF "
			"WORKDIR\n       fsdp_ref_e2e nvtx|tp_nvtx FSDP_REF WORKDIR INJECTION_LIBRARY\n");
		return 2;
	}
	trainer = argv[2];
	workdir = argv[3];
	inject_lib = argc == 5 ? argv[4] : NULL;
	mkdir(workdir, 0755);
	unsetenv("RANK");
	unsetenv("WORLD_SIZE");
	unsetenv("LOCAL_RANK");
	struct {
		const char *name;
		void (*fn)(void);
	} scenarios[] = {
	    {"bitwise", scenario_bitwise},   {"counts", scenario_counts},     {"memory", scenario_memory},
	    {"prefetch", scenario_prefetch}, {"launcher", scenario_launcher}, {"failure", scenario_failure},
	    {"nvtx", scenario_nvtx},	     {"loop", scenario_loop},	      {"tp", scenario_tp},
	    {"tp_nvtx", scenario_tp_nvtx},   {"zero3", scenario_zero3},
	};
	for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
		if (strcmp(argv[1], scenarios[i].name) == 0) {
			scenarios[i].fn();
			if (failures)
				fprintf(stderr, "%s: %d check(s) failed\n", argv[1], failures);
			else
				printf("%s: all checks passed\n", argv[1]);
			return failures ? 1 : 0;
		}
	}
	fprintf(stderr, "unknown scenario %s\n", argv[1]);
	return 2;
}
