/*
 * analysis_accuracy.c - check the analysis of a real fsdp_ref run against
 * fsdp_ref's own per-step log (fsdp_ref --log FILE, docs/fsdp_ref.md).
 *
 *   analysis_accuracy TRACE LOG [--tolerance F] [--quiet] [--period]
 *
 * For the headline rank (rank 0) it checks, exactly: AllGathers (forward,
 * backward), ReduceScatters and AllReduces per step, the repeating units
 * and gathers per unit the wrap implies, reshard_after_forward; and, per
 * analysed step, the exposed AllGather time against fsdp_ref's measured
 * gather_wait_ns: the median over the steps of |exposed - waited| must be
 * within F (default 0.05) of that step's time. Prints one line per check
 * that fails and a summary line; exits 0 when all hold, 1 when one does not,
 * 2 on bad input. --period ignores the NVTX step ranges (steps from the
 * period of the collectives). This is the function the accuracy matrix
 * calls for each labelled run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analyze.h"

#define MAX_STEPS 4096

struct log_step {
	int seen;
	long long allgathers, forward_allgathers, backward_allgathers, reduce_scatters, allreduces;
	long long gather_wait_ns, step_ns, units, layers, reshard_size, shard_group;
	char wrap[64], reshard[32];
};

static struct log_step steps[MAX_STEPS];
static long long exposed[MAX_STEPS], analysed_step_ns[MAX_STEPS];
static int have_exposed[MAX_STEPS];

static long long num(const char *line, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *p = strstr(line, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

static void str(const char *line, const char *key, char *out, size_t len)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":\"", key);
	const char *p = strstr(line, pat);
	out[0] = '\0';
	if (!p)
		return;
	p += strlen(pat);
	size_t n = 0;
	while (p[n] && p[n] != '"' && n + 1 < len)
		n++;
	memcpy(out, p, n);
	out[n] = '\0';
}

static void on_step(void *ctx, const struct analysis_step_info *s)
{
	int rank = *(int *)ctx;
	if (s->rank != rank || s->ordinal >= MAX_STEPS)
		return;
	exposed[s->ordinal] = (long long)s->exposed_allgather_ns;
	analysed_step_ns[s->ordinal] = (long long)s->step_ns;
	have_exposed[s->ordinal] = 1;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

static int failures;

static void expect(const char *what, long long got, long long want)
{
	if (got == want)
		return;
	printf("MISMATCH %s: analysis %lld, fsdp_ref %lld\n", what, got, want);
	failures++;
}

int main(int argc, char **argv)
{
	double tol = 0.05;
	int quiet = 0, period = 0;
	const char *trace = NULL, *log = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--tolerance") == 0 && i + 1 < argc)
			tol = atof(argv[++i]);
		else if (strcmp(argv[i], "--quiet") == 0)
			quiet = 1;
		else if (strcmp(argv[i], "--period") == 0)
			period = 1;
		else if (!trace)
			trace = argv[i];
		else if (!log)
			log = argv[i];
	}
	if (!trace || !log) {
		fprintf(stderr, "usage: analysis_accuracy TRACE LOG [--tolerance F] [--quiet] [--period]\n");
		return 2;
	}
	int rank = 0;
	FILE *f = fopen(log, "r");
	if (!f) {
		perror(log);
		return 2;
	}
	char line[4096];
	int nsteps = 0;
	while (fgets(line, sizeof line, f)) {
		long long step = num(line, "step"), r = num(line, "rank");
		if (r != rank || step < 0 || step >= MAX_STEPS)
			continue;
		struct log_step *s = &steps[step];
		s->seen = 1;
		s->allgathers = num(line, "allgathers");
		s->forward_allgathers = num(line, "forward_allgathers");
		s->backward_allgathers = num(line, "backward_allgathers");
		s->reduce_scatters = num(line, "reduce_scatters");
		s->allreduces = num(line, "allreduces");
		s->gather_wait_ns = num(line, "gather_wait_ns");
		s->step_ns = num(line, "step_ns");
		s->units = num(line, "units");
		s->layers = num(line, "layers");
		s->reshard_size = num(line, "reshard_size");
		s->shard_group = num(line, "shard_group");
		str(line, "wrap", s->wrap, sizeof s->wrap);
		str(line, "reshard_after_forward", s->reshard, sizeof s->reshard);
		if (step + 1 > nsteps)
			nsteps = (int)step + 1;
	}
	fclose(f);
	if (nsteps == 0 || !steps[nsteps - 1].seen) {
		fprintf(stderr, "%s: no step of rank %d\n", log, rank);
		return 2;
	}
	const struct log_step *ref = &steps[nsteps - 1];

	struct analysis_options o;
	analysis_options_init(&o);
	if (period)
		o.step_ranges = "";
	struct analysis_result *r;
	char err[512];
	int rc = analyze_trace_steps(trace, &o, on_step, &rank, &r, err, sizeof err);
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", trace, err);
		return 2;
	}

	expect("allgathers per step", r->per_step.allgathers, ref->allgathers);
	expect("forward allgathers per step", r->per_step.forward_allgathers, ref->forward_allgathers);
	expect("backward allgathers per step", r->per_step.backward_allgathers, ref->backward_allgathers);
	expect("reduce-scatters per step", r->per_step.reduce_scatters, ref->reduce_scatters);
	expect("all-reduces per step", r->per_step.allreduces, ref->allreduces);
	expect("FSDP units", r->units.forward_units, ref->units);

	/* what the wrap implies: per Linear 8 gathers a block; group:K, K
	 * blocks a unit (a shorter last group trails); model: one unit */
	long long want_units = ref->layers, want_k = 1;
	int K = 0;
	if (strcmp(ref->wrap, "linear") == 0) {
		want_k = 8;
	} else if (strcmp(ref->wrap, "model") == 0) {
		want_units = 1;
	} else if (sscanf(ref->wrap, "group:%d", &K) == 1 && K > 0) {
		want_units = ref->layers / K;
		if (want_units == 1 && ref->layers % K) {
			want_k = 2;
		}
	}
	if (strcmp(ref->wrap, "block") == 0 || strcmp(ref->wrap, "linear") == 0 || strcmp(ref->wrap, "model") == 0 ||
	    K > 0) {
		expect("repeating units", r->units.repeating_units, want_units);
		expect("gathers per repeating unit", r->units.gathers_per_unit, want_k);
	}

	char policy[32], want[32];
	analysis_reshard_format(&r->reshard, policy, sizeof policy);
	if (ref->units == 1)
		snprintf(want, sizeof want, "unknown");
	else if (ref->reshard_size == 0)
		snprintf(want, sizeof want, "false");
	else if (ref->reshard_size < ref->shard_group)
		snprintf(want, sizeof want, "group:%lld", ref->reshard_size);
	else
		snprintf(want, sizeof want, "true");
	if (strcmp(policy, want) != 0) {
		printf("MISMATCH reshard_after_forward: analysis %s, fsdp_ref %s (%s)\n", policy, want, ref->reshard);
		failures++;
	}

	/* exposure, step by step */
	long long err_frac[MAX_STEPS];
	int n = 0;
	long long worst = 0;
	for (int s = 0; s < nsteps; s++) {
		if (!steps[s].seen || !have_exposed[s] || steps[s].step_ns <= 0)
			continue;
		long long d = exposed[s] - steps[s].gather_wait_ns;
		if (d < 0)
			d = -d;
		/* in parts per million of the step */
		err_frac[n] = d * 1000000 / steps[s].step_ns;
		if (err_frac[n] > worst)
			worst = err_frac[n];
		if (!quiet)
			printf("step %d: exposed %.3f ms, waited %.3f ms, step %.3f ms (analysis %.3f ms): %.1f%%\n", s,
			       exposed[s] / 1e6, steps[s].gather_wait_ns / 1e6, steps[s].step_ns / 1e6,
			       analysed_step_ns[s] / 1e6, err_frac[n] / 1e4);
		n++;
	}
	long long median = 0;
	if (n) {
		qsort(err_frac, (size_t)n, sizeof err_frac[0], cmp_ll);
		median = err_frac[(n - 1) / 2];
	}
	if (n == 0) {
		printf("MISMATCH exposure: no step to compare\n");
		failures++;
	} else if ((double)median > tol * 1e6) {
		printf("MISMATCH exposure: median error %.1f%% of the step (tolerance %.1f%%)\n", median / 1e4,
		       tol * 100);
		failures++;
	}
	printf("%s: %s; steps by %s, %u AllGathers per step, %u x %u + %u, reshard %s, exposure error median %.1f%% worst %.1f%% "
	       "of step over %d steps\n",
	       trace, failures ? "FAIL" : "ok", analysis_step_detection_name(r->step_detection), r->per_step.allgathers, r->units.repeating_units,
	       r->units.gathers_per_unit, r->units.root_gathers, policy, median / 1e4, worst / 1e4, n);
	analysis_result_free(r);
	return failures ? 1 : 0;
}
