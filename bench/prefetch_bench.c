/* prefetch_bench: how much gather wait one unit of prefetch hides in
 * fsdp_ref, as a ratio of two runs interleaved on the same machine.
 *
 *   prefetch_bench --fsdp-ref PATH [--rounds N] [--latency-us US] [--seq T]
 *
 * Each round runs the trainer with --prefetch 0, then --prefetch 1 (2 ranks,
 * 6 blocks, per-block wrap, the stand-in's link latency set), and takes the
 * median gather_wait_ns of its log over ranks and steps 1..; the figure is
 * prefetch 1 / prefetch 0 per round and its median. The ratio moves with
 * the machine's load (a rank descheduled while a prefetched gather lands
 * turns hidden time into waiting), which is why it is a benchmark and not a
 * test: tests/e2e/fsdp_ref_e2e.c checks what the runtime decides (which
 * gathers were issued ahead). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/log_line.h"

#define MAX_VALUES 4096

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	if (n == 0)
		return 0;
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Run the trainer; the median gather wait per step (steps >= 1), or < 0. */
static double run(const char *trainer, int prefetch, const char *latency, const char *seq, const char *log)
{
	char pf[16];
	snprintf(pf, sizeof pf, "%d", prefetch);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		setenv("FSDP_REF_LINK_LATENCY_US", latency, 1);
		setenv("FSDP_REF_LINK_GBPS", "10", 1);
		if (!freopen("/dev/null", "w", stdout))
			_exit(127);
		execl(trainer, trainer, "--nranks", "2", "--layers", "6", "--d-model", "64", "--ffn", "256", "--heads",
		      "4", "--kv-heads", "2", "--vocab", "32", "--batch", "8", "--wrap", "block", "--seq", seq, "--steps",
		      "6", "--prefetch", pf, "--quiet", "--log", log, (char *)NULL);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	FILE *f = fopen(log, "r");
	if (!f)
		return -1;
	static char line[1 << 17];
	double v[MAX_VALUES];
	int n = 0;
	while (fgets(line, sizeof line, f) && n < MAX_VALUES) {
		double step, wait;
		if (log_line_number(line, "step", &step) == 0 && step >= 1 && log_line_number(line, "gather_wait_ns", &wait) == 0)
			v[n++] = wait;
	}
	fclose(f);
	return n ? median(v, n) : -1;
}

int main(int argc, char **argv)
{
	const char *trainer = NULL, *latency = "1500", *seq = "32";
	int rounds = 5;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--fsdp-ref") && i + 1 < argc)
			trainer = argv[++i];
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--latency-us") && i + 1 < argc)
			latency = argv[++i];
		else if (!strcmp(argv[i], "--seq") && i + 1 < argc)
			seq = argv[++i];
		else {
			fprintf(stderr, "usage: prefetch_bench --fsdp-ref PATH [--rounds N] [--latency-us US] [--seq T]\n");
			return 2;
		}
	}
	if (!trainer || rounds < 1 || rounds > 100) {
		fprintf(stderr, "prefetch_bench: --fsdp-ref PATH is required (rounds 1..100)\n");
		return 2;
	}
	char log[64];
	snprintf(log, sizeof log, "/tmp/prefetch_bench.%d.jsonl", (int)getpid());
	printf("fsdp_ref --nranks 2 --layers 6 --wrap block --seq %s --steps 6, link latency %s us\n", seq, latency);
	printf("median gather_wait_ns per step (ranks, steps 1..5), %d rounds interleaved\n", rounds);
	printf("round  prefetch 0 (ms)  prefetch 1 (ms)   ratio\n");
	double ratios[100];
	int nr = 0;
	for (int r = 0; r < rounds; r++) {
		double w0 = run(trainer, 0, latency, seq, log), w1 = run(trainer, 1, latency, seq, log);
		if (w0 <= 0 || w1 < 0) {
			fprintf(stderr, "prefetch_bench: round %d: the trainer failed\n", r);
			unlink(log);
			return 1;
		}
		ratios[nr++] = w1 / w0;
		printf("%5d  %15.3f  %15.3f  %6.3f\n", r, w0 / 1e6, w1 / 1e6, w1 / w0);
	}
	printf("median ratio prefetch 1 / prefetch 0: %.3f\n", median(ratios, nr));
	unlink(log);
	return 0;
}
