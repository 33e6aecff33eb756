/*
 * analysis_bench.c - time and records/s of the analysis on a large trace.
 *
 * usage: analysis_bench [RECORDS_MILLIONS] [TRACE_PATH]
 * Writes a synthetic fsdp_ref-like trace (8 ranks, per-block wrap, NVTX,
 * CUPTI-like GPU intervals; tests/unit/analysis_synth.c) with about the
 * given number of records, then runs analyze_trace() on it once and prints
 * the records, the bytes, the wall and CPU time, records/s and the peak RSS
 * of the analysis alone (it runs in a child process: the generator's memory
 * is not counted).
 */
#include "collector/analysis.h"
#include "collector/analyze.h"
#include "collector/analyze_traces.h"
#include "common/clock.h"
#include "tests/unit/analysis_synth.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double millions = argc > 1 ? atof(argv[1]) : 10.0;
	const char *path = argc > 2 ? argv[2] : "/tmp/fsdpscope_analysis_bench.fss";
	struct synth_config c;
	struct synth_truth *truth = calloc(1, sizeof(*truth));
	struct analysis_options opts;
	struct analysis_result *res = NULL;
	struct rusage ru;
	struct stat st;
	char err[256];
	uint64_t t0, t1;
	double c0, c1;
	int rc;

	if (!truth || millions <= 0)
		return 2;
	/* Size one step, then scale the step count to the wanted records. */
	synth_defaults(&c);
	c.ranks = 8;
	c.layers = 12;
	c.wrap = "linear"; /* 8 gathers per block: many records per step */
	c.steps = 4;
	c.cupti = 1;
	if ((rc = synth_write(path, &c, truth)) != 0) {
		fprintf(stderr, "analysis_bench: cannot write %s: %d\n", path, rc);
		return 1;
	}
	c.steps = (int)(millions * 1e6 / ((double)truth->records / 4.0));
	if (c.steps > SYNTH_MAX_STEPS)
		c.steps = SYNTH_MAX_STEPS;
	if ((rc = synth_write(path, &c, truth)) != 0 || stat(path, &st) != 0) {
		fprintf(stderr, "analysis_bench: cannot write %s: %d\n", path, rc);
		return 1;
	}
	analysis_options_init(&opts);
	fflush(stdout);
	t0 = clock_mono_ns();
	pid_t pid = fork();
	if (pid == 0) {
		c0 = cpu_seconds();
		rc = analyze_trace(path, &opts, &res, err, sizeof(err));
		c1 = cpu_seconds();
		if (rc) {
			fprintf(stderr, "analysis_bench: analysis failed: %s\n", err);
			_exit(1);
		}
		printf("analysis CPU time: %.3f s\n", c1 - c0);
		fflush(stdout);
		analysis_result_free(res);
		_exit(0);
	}
	int status = 0;
	if (pid < 0 || wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 1;
	t1 = clock_mono_ns();
	printf("trace: %" PRIu64 " records, %.1f MB, %d ranks, %d layers, %d steps, CUPTI intervals and NVTX\n",
	       truth->records, (double)st.st_size / 1e6, c.ranks, c.layers, c.steps);
	printf("analysis: %.3f s wall, %.2f M records/s (wall), %.1f MB/s\n", (double)(t1 - t0) / 1e9,
	       (double)truth->records / ((double)(t1 - t0) / 1e9) / 1e6,
	       (double)st.st_size / ((double)(t1 - t0) / 1e9) / 1e6);
	printf("peak RSS of the analysis: %.1f MB\n", (double)ru.ru_maxrss / 1024.0);
	unlink(path);
	free(truth);
	return 0;
}
