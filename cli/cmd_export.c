/*
 * cmd_export.c - fsdpscope export TRACE... --perfetto OUT.json | --kineto
 * DIR: the job in other tools' formats, written as the trace is read (a
 * session's consumer, export/), with the findings of the same analysis.
 */
#include "cli/commands.h"
#include "cli/diagnosis.h"
#include "cli/options.h"

#include "collector/session.h"
#include "common/error.h"
#include "export/job_events.h"
#include "export/kineto_out.h"
#include "export/perfetto.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const char export_help_head[] =
    "NAME\n"
    "    fsdpscope export - write a trace as a Perfetto timeline or as PyTorch profiler files\n\n"
    "SYNOPSIS\n"
    "    fsdpscope export TRACE... --perfetto OUT.json [OPTIONS]\n"
    "    fsdpscope export TRACE... --kineto DIR [OPTIONS]\n\n"
    "DESCRIPTION\n"
    "    Reads TRACE (several TRACEs or folders are one job, as for 'fsdpscope lint')\n"
    "    once, through the same analysis as lint, and writes it for other tools while\n"
    "    it reads: the output streams, so a job of hundreds of ranks is never held in\n"
    "    memory whole.\n\n"
    "    --perfetto OUT.json writes one Chrome-trace JSON file for the whole job, for\n"
    "    Perfetto's UI (ui.perfetto.dev) and chrome://tracing: one process per rank,\n"
    "    named \"rank R\" (host and pid in its args); a thread per host thread; a track\n"
    "    per GPU stream. Every collective is two slices: its host call (cat\n"
    "    \"nccl_call\") and exactly one kernel (cat \"kernel\", named as NCCL names its\n"
    "    kernels: ncclDevKernel_AllGather_RING_LL(...), ncclDevKernel_ReduceScatter_...),\n"
    "    joined by a flow arrow. The kernel spans the GPU interval CUPTI recorded, or\n"
    "    the host call's interval where the trace has no GPU data (the CPU stand-in,\n"
    "    attach); its args say which. NVTX ranges are slices (cat \"nvtx\"). Each step\n"
    "    adds counters on its rank: step time, exposed AllGather time, AllGathers.\n"
    "    The findings are instant events at the start of the step their figures are\n"
    "    from (the headline rank's representative step).\n\n"
    "    --kineto DIR creates DIR (an existing one must be empty) and writes one\n"
    "    PyTorch profiler (Kineto) trace per rank, DIR/rank-R.json, that Holistic\n"
    "    Trace Analysis loads as a trace set and 'fsdpscope lint DIR' reads back:\n"
    "    distributedInfo (backend, rank, world_size, pg_config), baseTimeNanoseconds,\n"
    "    per collective a record_param_comms op with c10d's args (Collective name,\n"
    "    In / Out msg nelems, dtype, Group size, Process Group Name and Ranks), its\n"
    "    cudaLaunchKernel and its NCCL kernel (stream, correlation), the compute\n"
    "    kernels with their launches, and a ProfilerStep#N span per step.\n\n"
    "    On a trace without GPU intervals the compute kernels are the leaves of the\n"
    "    compute NVTX ranges (--compute-ranges; a leaf holds no other compute range\n"
    "    of its thread), on a track named \"compute (NVTX leaves)\" (stream 7 in the\n"
    "    Kineto files): the rule the analysis measures overlap by, so that a tool's\n"
    "    overlap on the export has both sides.\n\n"
    "    Times are each rank's host CLOCK_MONOTONIC in microseconds, the nanoseconds\n"
    "    kept as three decimals (GPU times moved onto it by CUPTI's clock anchors).\n"
    "    Names from the job (NVTX ranges, communicator names) are escaped.\n\n"
    "OPTIONS\n";

static const char export_help_tail[] =
    "\n"
    "EXIT STATUS\n"
    "    0  written (a TRACE damaged or cut short is exported up to there, and said so)\n"
    "    2  bad usage; TRACE is not a trace or cannot be read; OUT.json or DIR cannot be\n"
    "       made (DIR exists and is not empty, or is not a folder); a write failed.\n"
    "       Nothing is left behind: a file or folder export made is removed.\n\n"
    "EXAMPLES\n"
    "    fsdpscope export run.fss --perfetto run.json       # open run.json in ui.perfetto.dev\n"
    "    fsdpscope export nodeA/ nodeB/ --perfetto job.json  # one job, one collector per node\n"
    "    fsdpscope export run.fss --kineto run-kineto/\n"
    "    fsdpscope lint run-kineto/                          # the same verdict, read back\n"
    "    fsdpscope export --salvage damaged-header.fss --perfetto run.json   # its intact chunks\n"
    "    python3 -c 'from hta.trace_analysis import TraceAnalysis; "
    "print(TraceAnalysis(trace_dir=\"run-kineto\").get_comm_comp_overlap())'\n";

struct export_args {
	const char *perfetto, *kineto;
	struct diagnosis_flags flags;
};

enum { OPT_PERFETTO, OPT_KINETO, OPT_SALVAGE };

static int export_apply(void *ctx, int id, const char *arg, const char *prog)
{
	struct export_args *a = ctx;
	const char **slot = id == OPT_PERFETTO ? &a->perfetto : &a->kineto;

	if (id == OPT_SALVAGE) {
		a->flags.analysis.read_flags |= TRACE_READ_SALVAGE;
		return 0;
	}

	if (*slot) {
		fprintf(stderr, "%s: --%s given twice\n", prog, id == OPT_PERFETTO ? "perfetto" : "kineto");
		return -1;
	}
	*slot = arg;
	return 0;
}

static const struct options_entry export_entries[] = {
    {"perfetto", 0, "OUT.json", "write the job's timeline to OUT.json (Chrome-trace JSON; replaced if it exists)",
     OPT_PERFETTO},
    {"kineto", 0, "DIR", "write one PyTorch profiler trace per rank into DIR/rank-R.json (DIR is created)", OPT_KINETO},
    {"salvage", 0, NULL, DIAGNOSIS_SALVAGE_HELP, OPT_SALVAGE},
    {NULL, 0, NULL, NULL, 0},
};

static const struct options_set export_sets[] = {
    {.entries = export_entries, .apply = export_apply},
    OPTIONS_DIAGNOSIS_SET(offsetof(struct export_args, flags)),
};

const struct options_help cmd_export_help = OPTIONS_HELP(export_help_head, export_sets, 27, export_help_tail);

/* The exporter chosen, one of the two. */
struct exporter {
	perfetto_export_t *perfetto;
	kineto_export_t *kineto;
};

static int exporter_open(const struct export_args *a, struct exporter *e, struct job_events_sink *sink)
{
	int rc;

	memset(e, 0, sizeof(*e));
	if (a->perfetto) {
		char why[PATH_MAX + 300];

		rc = perfetto_export_new(&e->perfetto, a->perfetto, why, sizeof why);
		if (rc) {
			fprintf(stderr, "fsdpscope export: --perfetto %s\n", why);
			return -1;
		}
		perfetto_export_sink(e->perfetto, sink);
		return 0;
	}
	rc = kineto_export_new(&e->kineto, a->kineto);
	if (rc == -ENOTEMPTY)
		fprintf(stderr, "fsdpscope export: --kineto %s: the folder exists and is not empty: give a new one\n",
			a->kineto);
	else if (rc == -ELOOP || rc == -ENOTDIR)
		fprintf(stderr, "fsdpscope export: --kineto %s: not a folder (or a symbolic link): give a new folder\n",
			a->kineto);
	else if (rc)
		fprintf(stderr, "fsdpscope export: --kineto %s: %s\n", a->kineto, fss_strerror(rc));
	if (rc)
		return -1;
	kineto_export_sink(e->kineto, sink);
	return 0;
}

/* The closing part: names, findings, files closed. Says what was written. */
static int exporter_finish(const struct export_args *a, struct exporter *e, const struct diagnosis *d)
{
	int rc;

	if (e->perfetto) {
		char why[PATH_MAX + 300];

		rc = perfetto_export_finish(e->perfetto, d->result, d->findings, why, sizeof why);
		if (rc) {
			fprintf(stderr, "fsdpscope export: writing %s\n", why);
			return -1;
		}
		fprintf(stderr, "fsdpscope export: %s: %llu events, %u processes\n", a->perfetto,
			(unsigned long long)perfetto_export_events(e->perfetto), d->result->nsources);
		return 0;
	}
	rc = kineto_export_finish(e->kineto, d->result);
	if (rc && rc != -EEXIST) {
		fprintf(stderr, "fsdpscope export: writing into %s: %s\n", a->kineto, fss_strerror(rc));
		return -1;
	}
	if (rc == -EEXIST)
		fprintf(stderr,
			"fsdpscope export: %s: two processes claim one rank: the second's file is named "
			"rank-R-pidP.json\n",
			a->kineto);
	fprintf(stderr, "fsdpscope export: %s: %zu rank files\n", a->kineto, kineto_export_files(e->kineto));
	return 0;
}

static void exporter_free(struct exporter *e)
{
	perfetto_export_free(e->perfetto);
	kineto_export_free(e->kineto);
}

int cmd_export(int argc, char **argv)
{
	struct export_args a = {0};
	struct fss_session_tool tool;
	struct job_events_sink sink;
	struct exporter e;
	struct diagnosis d;
	job_events_t *j = NULL;
	int first, rc = EXIT_USAGE, err;

	diagnosis_flags_init(&a.flags);
	first = options_parse(&cmd_export_help, "export", argc, argv, OPTIONS_ANYWHERE, &a);
	if (first < 0) /* or the help, which options_parse printed */
		return first == OPTIONS_HELP_SHOWN ? EXIT_OK : EXIT_USAGE;
	if (!a.perfetto == !a.kineto) {
		fprintf(stderr,
			"fsdpscope export: give one of --perfetto OUT.json or --kineto DIR (see 'fsdpscope help "
			"export')\n");
		return EXIT_USAGE;
	}
	if (first >= argc) {
		fprintf(stderr, "fsdpscope export: expected a TRACE (or several, or a folder of them)\n");
		return EXIT_USAGE;
	}
	if (exporter_open(&a, &e, &sink))
		return EXIT_USAGE;
	j = job_events_new(&sink, a.flags.analysis.compute_ranges);
	if (!j) {
		fprintf(stderr, "fsdpscope export: out of memory\n");
		goto out;
	}
	job_events_tool(j, &tool);
	a.flags.tool = &tool;
	if (diagnosis_run_args(argc, argv, first, "export", &a.flags, &d))
		goto out;
	err = job_events_finish(j);
	if (err) {
		fprintf(stderr, "fsdpscope export: writing: %s\n", fss_strerror(err));
		diagnosis_free(&d);
		goto out;
	}
	if (!exporter_finish(&a, &e, &d))
		rc = EXIT_OK;
	if (rc == EXIT_OK && d.damage[0])
		fprintf(stderr, "fsdpscope export: %s: damaged or cut short, exported what could be read: %s\n",
			d.trace_path, d.damage);
	diagnosis_free(&d);
out:
	job_events_free(j);
	exporter_free(&e);
	return rc;
}
