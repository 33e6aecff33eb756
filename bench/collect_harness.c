/*
 * collect_harness.c - what a collect session runs, alone in a process, for
 * the load and memory benchmarks: an ingest listening on a socket, writing
 * the merged trace, and (--analyze) the streaming analysis fed by the
 * ingest's record callback, so that what is analysed is what the trace
 * holds, as in `fsdpscope collect`. No live state, /metrics or viewer.
 *
 * usage: collect_harness --listen ADDR --out TRACE [--analyze] [--until-idle SEC]
 *        collect_harness --analyze-trace TRACE
 *
 * Runs until SIGTERM / SIGINT, or with --until-idle until SEC seconds
 * passed with no connection open after the first one. Then it finishes the
 * ingest (and the analysis) and prints what it took: records and records/s
 * over the busy time (the first connection opened .. the last one closed),
 * CPU (user + sys) per second of that wall time, the peak resident memory
 * (VmHWM), and the ingest's own count of damaged inputs, missing
 * collectives and drops; with --analyze the analysis' pending maximum and
 * what it found.
 */
#include "collector/analysis.h"
#include "collector/analyze.h"
#include "collector/ingest.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/trace_parser.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec / 1e6;
}

/* A "VmXXX:" line of /proc/self/status in kB, or -1. */
static long proc_status_kb(const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			kb = strtol(line + klen + 1, NULL, 10);
			break;
		}
	fclose(f);
	return kb;
}

struct feed {
	analyzer_t *a;
	uint64_t records;
};

static void print_analysis(const struct feed *feed, const struct analysis_result *res)
{
	printf("analysis: %" PRIu64 " records fed, pending max %zu", feed->records, analyzer_pending_max(feed->a));
	if (res)
		printf(", %u ranks, %u steps seen, %u analysed, %u gathers per step, %u repeating units, verdict %s",
		       res->ranks, res->steps_seen, res->steps_analyzed, res->per_step.allgathers,
		       res->units.repeating_units, analysis_verdict_name(res->verdict));
	printf("\n");
}

static int feed_parsed(void *ctx, const struct fss_record_head *rec)
{
	struct feed *f = ctx;
	int rc;

	f->records++;
	rc = analyzer_feed(f->a, rec);
	return rc < 0 ? rc : 0;
}

static int feed_record(void *ctx, const struct fss_record_head *rec, const struct source *src)
{
	(void)src;
	return feed_parsed(ctx, rec);
}

/*
 * --analyze-trace: the same analysis fed from a trace file instead of the
 * ingest, for its memory alone (not the load: a session analyses as it
 * ingests).
 */
static int analyze_file(const char *path)
{
	struct trace_parser_ops ops = {.on_record = feed_parsed};
	struct feed feed = {0};
	struct analysis_result *res = NULL;
	struct trace_read_info info;
	uint64_t t0 = clock_mono_ns();
	double c0 = cpu_seconds();
	int rc;

	if (analyzer_new(&feed.a, NULL) != 0)
		return 1;
	rc = trace_read(path, &ops, &feed, &info);
	if (rc != 0 && rc != FSS_E_TRUNCATED && rc != FSS_E_CORRUPT) {
		fprintf(stderr, "collect_harness: cannot read %s: %s\n", path, info.message);
		analyzer_free(feed.a);
		return 1;
	}
	if (analyzer_finish(feed.a, &res) != 0)
		fprintf(stderr, "collect_harness: the analysis failed\n");
	double wall = (double)(clock_mono_ns() - t0) / 1e9;

	printf("analysis of %s: %" PRIu64 " records, %.3f s wall, %.0f records/s, CPU %.3f s\n", path, feed.records,
	       wall, (double)feed.records / wall, cpu_seconds() - c0);
	printf("memory: VmHWM %ld kB, VmRSS %ld kB at the end\n", proc_status_kb("VmHWM"), proc_status_kb("VmRSS"));
	print_analysis(&feed, res);
	analysis_result_free(res);
	analyzer_free(feed.a);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"listen", required_argument, NULL, 'l'},
						 {"out", required_argument, NULL, 'o'},
						 {"analyze", no_argument, NULL, 'a'},
						 {"until-idle", required_argument, NULL, 'i'},
						 {"analyze-trace", required_argument, NULL, 't'},
						 {"help", no_argument, NULL, 'h'},
						 {NULL, 0, NULL, 0}};
	const char *listen = NULL, *out = NULL;
	double until_idle = 0;
	int analyze = 0, c, rc;
	ingest_t *ing = NULL;
	const struct ingest_stats *st = NULL;
	struct feed feed = {0};
	struct analysis_result *res = NULL;
	struct sigaction sa;
	uint64_t busy_start = 0, idle_since = 0;
	double cpu_start = 0, cpu_end = 0;
	size_t open_max = 0;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			listen = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'a':
			analyze = 1;
			break;
		case 'i':
			until_idle = atof(optarg);
			break;
		case 't':
			return analyze_file(optarg);
		default:
			fprintf(stderr,
				"usage: collect_harness --listen ADDR --out TRACE [--analyze] [--until-idle SEC]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!listen || !out) {
		fprintf(stderr, "usage: collect_harness --listen ADDR --out TRACE [--analyze] [--until-idle SEC]\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if ((rc = ingest_new(&ing, out, NULL)) != 0) {
		fprintf(stderr, "collect_harness: cannot create %s: %s\n", out, strerror(-rc));
		return 1;
	}
	if ((rc = ingest_listen(ing, listen)) != 0) {
		fprintf(stderr, "collect_harness: cannot listen on %s: %s\n", listen, strerror(-rc));
		ingest_free(ing);
		return 1;
	}
	if (analyze) {
		if ((rc = analyzer_new(&feed.a, NULL)) != 0) {
			ingest_free(ing);
			return 1;
		}
		ingest_on_record(ing, feed_record, &feed);
	}
	fprintf(stderr, "collect_harness: listening on %s (pid %d)\n", listen, (int)getpid());
	while (!stop_requested) {
		if ((rc = ingest_poll(ing, 100)) < 0) {
			fprintf(stderr, "collect_harness: ingest failed: %s\n", strerror(-rc));
			break;
		}
		size_t open = ingest_open_connections(ing);
		uint64_t now = clock_mono_ns();

		if (open > open_max)
			open_max = open;
		if (open && !busy_start) {
			busy_start = now;
			cpu_start = cpu_seconds();
		}
		if (open) {
			idle_since = 0;
		} else if (busy_start && !idle_since) {
			idle_since = now;
			cpu_end = cpu_seconds();
		}
		if (until_idle > 0 && idle_since && (double)(now - idle_since) / 1e9 >= until_idle)
			break;
	}
	if (busy_start && !idle_since) { /* stopped with connections open */
		idle_since = clock_mono_ns();
		cpu_end = cpu_seconds();
	}
	rc = ingest_finish(ing, &st);
	if (rc)
		fprintf(stderr, "collect_harness: finishing the trace failed: %s\n", strerror(-rc));
	if (feed.a && analyzer_finish(feed.a, &res) != 0)
		fprintf(stderr, "collect_harness: the analysis failed\n");

	double busy = busy_start ? (double)(idle_since - busy_start) / 1e9 : 0;

	printf("ingest: %" PRIu64 " records, %.1f MB, %u sources, %u connections (%zu open at once), "
	       "%zu damaged, %" PRIu64 " collectives missing, %" PRIu64 " dropped by the sources\n",
	       st ? st->records : 0, st ? (double)st->bytes / 1e6 : 0, st ? st->sources : 0, st ? st->connections : 0,
	       open_max, st ? st->ndamaged : 0, st ? st->collectives_missing : 0, st ? st->dropped : 0);
	for (size_t i = 0; st && i < st->ndamaged && i < 8; i++)
		printf("damaged: %s\n", st->damage[i]);
	if (busy > 0)
		printf("busy: %.3f s wall, %.0f records/s, CPU %.3f s (%.2f CPU-s per s of wall)\n", busy,
		       (double)(st ? st->records : 0) / busy, cpu_end - cpu_start, (cpu_end - cpu_start) / busy);
	printf("memory: VmHWM %ld kB, VmRSS %ld kB at the end\n", proc_status_kb("VmHWM"), proc_status_kb("VmRSS"));
	if (feed.a)
		print_analysis(&feed, res);
	analysis_result_free(res);
	analyzer_free(feed.a);
	ingest_free(ing);
	return rc == 0 ? 0 : 1;
}
