/* metrics_bench: what one /metrics scrape costs the server's thread, and
 * how big it is, for a job of N ranks with every figure known (a last
 * step, 16 communicators each, 16 findings): the worst case the live
 * state allows per rank.
 *
 *   metrics_bench [ranks...]      (default 8 256 1024)
 *
 * Prints per rank count the exposition's bytes and lines and the median
 * microseconds of metrics_render over 7 rounds of 50 renders. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/metrics.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static struct live_view *big_view(size_t n)
{
	struct live_view *v = calloc(1, sizeof *v);

	if (!v || !(v->ranks = calloc(n, sizeof *v->ranks))) {
		free(v);
		return NULL;
	}
	v->nranks = n;
	v->generation = 1;
	for (size_t i = 0; i < n; i++) {
		struct live_rank *r = &v->ranks[i];
		r->rank = (int32_t)i;
		r->source = (uint32_t)i;
		r->last =
		    (struct live_step){.ordinal = 100, .step_ns = 1234567890, .allgathers = 144, .microbatches = 2};
		r->nwindow = 1;
		r->window[0] = r->last;
		r->ncomms = LIVE_COMMS_MAX;
		for (size_t c = 0; c < LIVE_COMMS_MAX; c++)
			r->comms[c] =
			    (struct live_comm){.id_hash = 0x9e3779b97f4a7c15ull * (c + 1), .last_seq = 123456 + c};
	}
	v->job.diagnosed = 1;
	v->job.nfindings = LIVE_FINDINGS_MAX;
	for (size_t f = 0; f < LIVE_FINDINGS_MAX; f++)
		snprintf(v->job.findings[f].rule, sizeof v->job.findings[f].rule, "rule-%zu", f);
	return v;
}

static int bench(size_t n)
{
	enum { ROUNDS = 7, RENDERS = 50 };
	struct live_view *v = big_view(n);
	double us[ROUNDS];
	size_t len = 0, lines = 0;
	char *text;

	if (!v)
		return -1;
	for (int k = 0; k < ROUNDS; k++) {
		double t0 = now_us();
		for (int i = 0; i < RENDERS; i++) {
			if (metrics_render(v, &text, &len) < 0)
				return -1;
			free(text);
		}
		us[k] = (now_us() - t0) / RENDERS;
	}
	qsort(us, ROUNDS, sizeof us[0], cmp_double);
	if (metrics_render(v, &text, &len) < 0)
		return -1;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	printf("ranks %5zu  bytes %8zu  lines %6zu  render %8.0f us (median of %d x %d)\n", n, len, lines,
	       us[ROUNDS / 2], ROUNDS, RENDERS);
	free(text);
	live_view_free(v);
	return 0;
}

int main(int argc, char **argv)
{
	static const size_t defaults[] = {8, 256, 1024};

	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			if (bench((size_t)strtoul(argv[i], NULL, 10)) < 0)
				return 1;
		return 0;
	}
	for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
		if (bench(defaults[i]) < 0)
			return 1;
	return 0;
}
