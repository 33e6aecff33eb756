/* agent_bench: what libfsdpscope-agent.so adds to an NCCL call, and to a
 * training step.
 *
 *   agent_bench --agent LIB [--agent-before LIB] [--ring-slots N] [--fsdp-ref BIN] [--rounds R]
 *               [--calls N] [--grouped-calls N]
 *
 * --agent-before names a second build of the agent (an earlier commit) that
 * is run as one more mode, recording, interleaved with the others: what the
 * change between the two costs per call is then measured in the same run,
 * under the same load (bench/results/enter.txt: the enter record).
 * --ring-slots sets FSDPSCOPE_RING_SLOTS of the recording modes (default
 * the agent's 65536): a ring that holds a whole run drops nothing.
 *
 * 1. ns per ncclAllReduce (count 1, float, one-rank communicator of the CPU
 *    stand-in, FSDP_REF_LINK_LATENCY_US=0 so that the call itself is as
 *    short as it gets), timed two ways (see child_loop): calls queued
 *    inside a group, where the stand-in's own cost is small enough for the
 *    agent's to show, and whole calls, whose floor on this machine is a
 *    timer wake-up. This program re-runs itself as a child in four
 *    modes, interleaved R times: without the agent, with it recording (file
 *    sink in a temporary directory), dormant, and disabled. Each child times
 *    batches of 1000 calls after a warm-up; its figure is the median batch's
 *    ns/call. Reported: per mode the median over the rounds, and the added
 *    ns = mode - without. The recording runs' traces are read back for the
 *    drop counters (a ring that overflowed would make the figure look
 *    cheaper than recording really is).
 * 2. fsdp_ref step time with and without the agent (file sink), R rounds
 *    interleaved: median step_ns of rank 0 from fsdp_ref's log (first two
 *    steps skipped), and the ratio with / without.
 *
 * The machine's other load moves every figure: read them with the loadavg
 * printed next to them. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "common/record.h"
#include "common/trace_parser.h"

extern char **environ;

#define BATCH 1000
#define MAX_ROUNDS 64

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- child: the timed loop ------------------------------------------------- */

/* grouped = 0: each call runs (and sleeps until the link model's deadline:
 * its floor is a timer wake-up, tens of microseconds). grouped = 1: the
 * timed calls are made inside ncclGroupStart, where the stand-in only
 * queues them (tens of ns), so that what the agent adds can be told from
 * noise; the group is executed untimed after each batch. The agent's path
 * is the same either way but for the CUPTI correlation push/pop around
 * ungrouped calls (one load each while CUPTI is off). */
static int child_loop(long calls, int grouped)
{
	ncclUniqueId id;
	ncclComm_t comm;
	float x = 1, y = 0;
	long batches = calls / BATCH;
	double *per_call = calloc((size_t)batches, sizeof(double));

	if (!per_call || ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
		return 1;
	for (long b = -batches / 10 - 1; b < batches; b++) { /* the first tenth warms up */
		if (grouped)
			ncclGroupStart();
		uint64_t t0 = now_ns();
		for (int i = 0; i < BATCH; i++)
			ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL);
		uint64_t t1 = now_ns();
		if (grouped)
			ncclGroupEnd();
		if (b >= 0)
			per_call[b] = (double)(t1 - t0) / BATCH;
	}
	ncclCommDestroy(comm);
	printf("%.2f\n", median(per_call, (size_t)batches));
	free(per_call);
	return 0;
}

/* ---- driver ---------------------------------------------------------------- */

/* Run argv with the extra environment, stdout into out (cap bytes). */
static int run(char *const argv[], const char *const *extra, char *out, size_t cap)
{
	char path[] = "/tmp/agent_bench_out_XXXXXX";
	int fd = mkstemp(path);
	size_t n = 0, k = 0;
	pid_t pid;
	int status;
	posix_spawn_file_actions_t fa;

	if (fd < 0)
		return -1;
	while (environ[n])
		n++;
	char **env = calloc(n + 16, sizeof(*env));
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) && strncmp(environ[i], "FSDPSCOPE_", 10) &&
		    strncmp(environ[i], "FSDP_REF_LINK_LATENCY_US=", 25))
			env[k++] = environ[i];
	for (size_t i = 0; extra && extra[i]; i++)
		env[k++] = (char *)extra[i];
	env[k] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0); /* fsdp_ref's banner */
	if (posix_spawn(&pid, argv[0], &fa, NULL, argv, env) != 0 || waitpid(pid, &status, 0) < 0) {
		close(fd);
		unlink(path);
		free(env);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	ssize_t got = pread(fd, out, cap - 1, 0);
	out[got > 0 ? got : 0] = '\0';
	close(fd);
	unlink(path);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct drops_ctx {
	struct fss_rec_drops last;
	uint64_t collectives;
	uint64_t enters;
};

static int on_record(void *ctx, const struct fss_record_head *rec)
{
	struct drops_ctx *d = ctx;
	if (rec->type == FSS_REC_DROPS)
		memcpy(&d->last, rec, sizeof(d->last));
	if (rec->type == FSS_REC_COLLECTIVE)
		d->collectives++;
	if (rec->type == FSS_REC_ENTER)
		d->enters++;
	return 0;
}

/* The drops of the one trace file in dir (then removed). */
static int read_drops(const char *dir, struct drops_ctx *d)
{
	char cmd[PATH_MAX + 64], path[PATH_MAX];
	struct trace_parser_ops ops = {.on_record = on_record};
	int err;

	snprintf(cmd, sizeof(cmd), "ls %s/fsdpscope-*.fss 2>/dev/null | head -1", dir);
	FILE *p = popen(cmd, "r");
	if (!p || !fgets(path, sizeof(path), p)) {
		if (p)
			pclose(p);
		return -1;
	}
	pclose(p);
	path[strcspn(path, "\n")] = '\0';
	memset(d, 0, sizeof(*d));
	err = trace_read_file(path, &ops, d, NULL, 0);
	unlink(path);
	return err;
}

static void print_loadavg(const char *when)
{
	char buf[128] = "";
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
	printf("# loadavg %s: %s\n", when, buf);
}

static void bench_calls(const char *self, const char *agent, const char *before, const char *ring_slots, int rounds,
			long calls, int grouped)
{
	enum { PLAIN, ON, DORMANT, DISABLED, BEFORE, MODES };
	static const char *names[MODES] = {"without agent", "agent recording", "agent dormant", "agent disabled",
					   "before, recording"};
	int modes = before ? MODES : BEFORE;
	double v[MODES][MAX_ROUNDS];
	char preload[PATH_MAX + 16], preload_before[PATH_MAX + 16], outdir[] = "/tmp/agent_bench_XXXXXX";
	char outenv[64], calls_s[32], buf[256], ringenv[64];
	uint64_t ring_dropped = 0, recorded = 0, entered = 0, ring_dropped_before = 0, recorded_before = 0,
		 entered_before = 0;

	if (!mkdtemp(outdir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent);
	snprintf(preload_before, sizeof(preload_before), "LD_PRELOAD=%s", before ? before : "");
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", outdir);
	snprintf(calls_s, sizeof(calls_s), "%ld", calls);
	/* the recording modes' ring (FSDPSCOPE_RING_SLOTS), when asked: large
	 * enough, no record is dropped however the sender keeps up, and a
	 * failed reservation (cheaper than a record) cannot flatter a figure */
	snprintf(ringenv, sizeof(ringenv), "FSDPSCOPE_RING_SLOTS=%s", ring_slots ? ring_slots : "65536");
	char *argv[] = {(char *)self, grouped ? "--child-grouped" : "--child", calls_s, NULL};
	const char *fast = "FSDP_REF_LINK_LATENCY_US=0";
	const char *env[MODES][5] = {
	    {fast, NULL},
	    {fast, preload, outenv, ringenv, NULL},
	    {fast, preload, "FSDPSCOPE_DORMANT=1", NULL},
	    {fast, preload, "FSDPSCOPE_DISABLE=1", NULL},
	    {fast, preload_before, outenv, ringenv, NULL},
	};

	print_loadavg("before the call loop");
	for (int r = 0; r < rounds; r++) {
		for (int m = 0; m < modes; m++) {
			if (run(argv, env[m], buf, sizeof(buf)) != 0) {
				fprintf(stderr, "agent_bench: child (%s) failed\n", names[m]);
				exit(1);
			}
			v[m][r] = atof(buf);
			if (m == ON || m == BEFORE) {
				struct drops_ctx d;
				if (read_drops(outdir, &d) == 0) {
					*(m == ON ? &ring_dropped : &ring_dropped_before) += d.last.ring_dropped;
					*(m == ON ? &recorded : &recorded_before) += d.collectives;
					*(m == ON ? &entered : &entered_before) += d.enters;
				}
			}
		}
	}
	print_loadavg("after the call loop");
	rmdir(outdir);
	printf("\nncclAllReduce(count 1, float) on a one-rank stand-in communicator, latency model 0, %s\n",
	       grouped ? "inside a group (timed: the enqueue)" : "one by one (timed: the whole call)");
	printf("%d rounds x %ld calls per mode (batches of %d, median batch per run)\n", rounds, calls, BATCH);
	printf("%-18s %12s %12s %12s %14s\n", "mode", "ns/call", "min", "max", "added ns/call");
	double base = median(v[PLAIN], (size_t)rounds), meds[MODES] = {0};
	for (int m = 0; m < modes; m++) {
		meds[m] = median(v[m], (size_t)rounds); /* sorts v[m] */
		printf("%-18s %12.1f %12.1f %12.1f %14.1f\n", names[m], meds[m], v[m][0], v[m][rounds - 1],
		       m == PLAIN ? 0.0 : meds[m] - base);
	}
	printf("recording runs: %llu collectives and %llu enter records in the traces, %llu dropped by the ring\n",
	       (unsigned long long)recorded, (unsigned long long)entered, (unsigned long long)ring_dropped);
	if (before) {
		printf("before runs: %llu collectives and %llu enter records in the traces, %llu dropped by the ring\n",
		       (unsigned long long)recorded_before, (unsigned long long)entered_before,
		       (unsigned long long)ring_dropped_before);
		printf("agent / before (recording): %.1f ns per call (ratio %.3f); added over the bare call: %.1f "
		       "against %.1f ns (ratio %.3f)\n",
		       meds[ON] - meds[BEFORE], meds[BEFORE] > 0 ? meds[ON] / meds[BEFORE] : 0.0, meds[ON] - base,
		       meds[BEFORE] - base, meds[BEFORE] - base > 0 ? (meds[ON] - base) / (meds[BEFORE] - base) : 0.0);
	}
}

/* Median step_ns of rank 0 in an fsdp_ref log, the first two steps skipped. */
static double log_step_median(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[8192];
	double v[4096];
	size_t n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f) && n < 4096) {
		const char *st = strstr(line, "\"step\":"), *rk = strstr(line, "\"rank\":"),
			   *ns = strstr(line, "\"step_ns\":");
		if (!st || !rk || !ns || atoi(rk + 7) != 0 || atoi(st + 7) < 2)
			continue;
		v[n++] = atof(ns + 10);
	}
	fclose(f);
	return median(v, n);
}

static void bench_steps(const char *agent, const char *fsdp_ref, int rounds)
{
	char preload[PATH_MAX + 16], outdir[] = "/tmp/agent_bench_ref_XXXXXX", outenv[64], log[PATH_MAX], buf[65536];
	double plain[MAX_ROUNDS], with[MAX_ROUNDS], ratio[MAX_ROUNDS];

	if (!mkdtemp(outdir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent);
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", outdir);
	snprintf(log, sizeof(log), "%s/log.jsonl", outdir);
	char *argv[] = {(char *)fsdp_ref, "--backend", "cpu",	  "--nranks", "2",     "--layers", "8",
			"--wrap",	  "linear",    "--steps", "22",	      "--log", log,	   NULL};
	const char *env_plain[] = {NULL};
	const char *env_with[] = {preload, outenv, NULL};

	print_loadavg("before fsdp_ref");
	for (int r = 0; r < rounds; r++) {
		if (run(argv, env_plain, buf, sizeof(buf)) != 0)
			goto fail;
		plain[r] = log_step_median(log);
		if (run(argv, env_with, buf, sizeof(buf)) != 0)
			goto fail;
		with[r] = log_step_median(log);
		ratio[r] = with[r] / plain[r];
		char cmd[PATH_MAX + 32];
		snprintf(cmd, sizeof(cmd), "rm -f %s/fsdpscope-*", outdir);
		if (system(cmd) != 0)
			goto fail;
	}
	print_loadavg("after fsdp_ref");
	unlink(log);
	rmdir(outdir);
	printf("\nfsdp_ref --backend cpu --nranks 2 --layers 8 --wrap linear --steps 22 (default link model)\n");
	printf("median step_ns of rank 0, steps 2..21, %d rounds interleaved\n", rounds);
	printf("%-6s %14s %14s %10s\n", "round", "without (ms)", "with (ms)", "ratio");
	for (int r = 0; r < rounds; r++)
		printf("%-6d %14.3f %14.3f %10.4f\n", r, plain[r] / 1e6, with[r] / 1e6, ratio[r]);
	printf("median ratio with/without: %.4f\n", median(ratio, (size_t)rounds));
	return;
fail:
	fprintf(stderr, "agent_bench: fsdp_ref failed\n");
	exit(1);
}

int main(int argc, char **argv)
{
	const char *agent = NULL, *before = NULL, *fsdp_ref = NULL, *ring_slots = NULL;
	int rounds = 7;
	long calls = 20000, grouped_calls = 500000;
	char self[PATH_MAX];
	struct utsname u;

	if (argc == 3 && !strcmp(argv[1], "--child"))
		return child_loop(atol(argv[2]), 0);
	if (argc == 3 && !strcmp(argv[1], "--child-grouped"))
		return child_loop(atol(argv[2]), 1);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--agent") && i + 1 < argc)
			agent = argv[++i];
		else if (!strcmp(argv[i], "--agent-before") && i + 1 < argc)
			before = argv[++i];
		else if (!strcmp(argv[i], "--ring-slots") && i + 1 < argc)
			ring_slots = argv[++i];
		else if (!strcmp(argv[i], "--fsdp-ref") && i + 1 < argc)
			fsdp_ref = argv[++i];
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
			calls = atol(argv[++i]);
		else if (!strcmp(argv[i], "--grouped-calls") && i + 1 < argc)
			grouped_calls = atol(argv[++i]);
		else {
			fprintf(stderr, "usage: agent_bench --agent LIB [--agent-before LIB] [--ring-slots N] "
					"[--fsdp-ref BIN] [--rounds R] [--calls N] [--grouped-calls N]\n");
			return 2;
		}
	}
	if (!agent || rounds < 1 || rounds > MAX_ROUNDS || calls < BATCH || grouped_calls < BATCH) {
		fprintf(stderr, "usage: agent_bench --agent LIB [--agent-before LIB] [--ring-slots N] [--fsdp-ref BIN] "
				"[--rounds R (1..64)] [--calls N] [--grouped-calls N]\n");
		return 2;
	}
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return 1;
	self[n] = '\0';
	uname(&u);
	time_t t = time(NULL);
	char date[64];
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
	printf("agent_bench  %s  %s %s  nproc=%ld\n", date, u.sysname, u.machine, sysconf(_SC_NPROCESSORS_ONLN));
	/* The floor under any timestamped record: two of these per call. */
	uint64_t sum = 0, t0 = now_ns();
	for (int i = 0; i < 1000000; i++)
		sum += now_ns();
	printf("clock_gettime(CLOCK_MONOTONIC): %.1f ns per read on this machine%s\n", (double)(now_ns() - t0) / 1e6,
	       sum ? "" : " ");
	bench_calls(self, agent, before, ring_slots, rounds, grouped_calls, 1);
	bench_calls(self, agent, before, ring_slots, rounds, calls, 0);
	if (fsdp_ref)
		bench_steps(agent, fsdp_ref, rounds);
	return 0;
}
