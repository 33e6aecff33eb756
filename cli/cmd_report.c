/*
 * cmd_report.c - fsdpscope report TRACE: the whole diagnosis of a trace.
 */
#include "cli/commands.h"
#include "cli/diagnosis.h"
#include "cli/lint.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/report_html.h"
#include "cli/report_html_timeline.h"
#include "collector/session.h"

#include <stddef.h>
#include <stdio.h>

static const char report_help_head[] =
    "NAME\n"
    "    fsdpscope report - the whole diagnosis of a trace: counts, units, reshard policy,\n"
    "    exposure, memory ledger, breakdown, ranks and findings\n\n"
    "SYNOPSIS\n"
    "    fsdpscope report [--text | --json] [--html OUT.html] [--layers L] [OPTIONS] TRACE...\n\n"
    "DESCRIPTION\n"
    "    Reads TRACE and prints what the FSDP parameter lifecycle did, per step (medians\n"
    "    over the analysed steps of the headline rank, warm-up steps left out):\n"
    "      - steps: how they were found (NVTX step ranges, else the period of the\n"
    "        collective sequence), how many, how long;\n"
    "      - collectives per step: AllGathers (forward, backward), ReduceScatters,\n"
    "        AllReduces; a grouped (coalesced) set of calls counts once;\n"
    "      - repeating units: root gathers plus k gathers repeated L times, with the\n"
    "        NVTX module names when the job marks them;\n"
    "      - reshard_after_forward of the non-root units, read from the backward gathers;\n"
    "      - exposure: per AllGather, exposed (its own time with no compute under it,\n"
    "        as PyTorch's trace analysis counts it) and compute wait (how long compute\n"
    "        waited for it, queueing behind other collectives included), with its\n"
    "        cause; every figure of one representative step, so that they add up;\n"
    "        from GPU kernel intervals (CUPTI) or else host timing;\n"
    "      - the memory ledger (persistent 16 P / N, transient param bytes x U x\n"
    "        (1 + prefetch), wire bytes per step against DDP);\n"
    "      - the same step's breakdown (compute, exposed communication, idle) and MFU:\n"
    "        the model's FLOPs (--model-flops, or 6 P T with --tokens-per-step) over\n"
    "        the peak (--peak-flops, else the dense BF16 peak of the GPU the trace\n"
    "        names, with its source); without one of them MFU is unknown and the\n"
    "        report says which input is missing;\n"
    "      - per-rank figures and the spread across ranks;\n"
    "      - every process: its rank, how it ended (cleanly, exit code, killed by a\n"
    "        signal, cut off), its drops and collectives missing from its sequence;\n"
    "      - the findings of every rule (as 'fsdpscope lint' prints them).\n\n"
    "    Several TRACEs (or folders of them) are one job, one trace per node: merged\n"
    "    with each node's clock aligned on the first trace's, and the 'nodes' section\n"
    "    gives per node its trace, hosts, ranks, the offset applied (from the clock\n"
    "    anchors, and from the collectives the nodes share), the residual and how many\n"
    "    collectives it rests on (docs/collect.md, \"More than one node\"). Traces of\n"
    "    more than one job (two runs into one DIR) are refused, as by 'fsdpscope lint'.\n\n"
    "    No figure comes from a step the trace cannot vouch for: a step in which (or at\n"
    "    whose edge) a rank lost collectives, seen as gaps in its collective seq numbers,\n"
    "    and the step in progress where a process's records stop without its\n"
    "    process_end (a trace cut short, even on a chunk boundary; a process that died)\n"
    "    are left out, counted on the 'left out' lines and in the ranks table, and\n"
    "    noted (docs/report-schema.md, \"excluded\").\n\n"
    "    --html OUT.html writes the same diagnosis as one self-contained page as well\n"
    "    (docs/report-html.md; the text report is then not printed unless --text or\n"
    "    --json is given): the verdict and the top finding, the step-time\n"
    "    waterfall with MFU, AllGathers per step against what the units need, each\n"
    "    gather's exposure, one step of every rank, the memory ledger, the findings with\n"
    "    their fixes and the what-if table, how the trace ended. CSS and SVG are inline,\n"
    "    no script runs and nothing points outside the file; every name from the job\n"
    "    is escaped. It is written to a temporary file beside OUT.html and renamed\n"
    "    into place: one file, never through a link. Its MFU is the one above: without\n"
    "    the model's FLOPs or a peak the page says MFU is unknown, and which is missing.\n\n"
    "OPTIONS\n";

static const char report_help_tail[] =
    "\n"
    "    The rule thresholds are listed in 'fsdpscope lint --help'.\n\n"
    "EXIT STATUS\n"
    "    0 the report was printed; 2 bad usage, an option that cannot apply to TRACE (the\n"
    "    message gives the valid range), a trace that cannot be read, a damaged trace (the\n"
    "    report of the readable part is printed, then where it stopped), or a report that\n"
    "    could not be written (a full disk: 'fsdpscope: writing standard output: ...').\n\n"
    "EXAMPLES\n"
    "    fsdpscope report run.fss\n"
    "    fsdpscope report --layers 32 --gpu-mem 80G run.fss\n"
    "    fsdpscope report --json run.fss | jq '.per_step, .units, .exposure.exposed_fraction'\n"
    "    fsdpscope report --model-flops 3.2e15 run.fss   # MFU, the peak from the GPU the trace names\n"
    "    fsdpscope report --peak-flops 989e12 --tokens-per-step 524288 run.fss   # with MFU\n"
    "    fsdpscope report --json --model-flops 3.2e15 run.fss | jq .mfu\n"
    "    fsdpscope report --html run.html --peak-flops 989e12 --model-flops 3.2e15 run.fss\n"
    "    fsdpscope report --json nodeA/collect.fss nodeB/collect.fss | jq .nodes\n"
    "    fsdpscope report --json profiler/ | jq '.per_rank[] | {rank, comm_comp_overlap}'   # Kineto traces\n"
    "    fsdpscope report --salvage damaged-header.fss   # its intact chunks, without the file header\n";

struct report_args {
	int json;
	int format_given; /* --text or --json: printed on stdout also with --html */
	const char *html; /* --html OUT.html, NULL */
	struct diagnosis_flags flags;
};

enum { OPT_JSON, OPT_TEXT, OPT_THRESHOLD, OPT_HTML, OPT_SALVAGE };

static int report_apply(void *ctx, int id, const char *arg, const char *prog)
{
	struct report_args *a = ctx;

	if (id == OPT_THRESHOLD) /* -t */
		return options_diagnosis_apply(&a->flags, DIAG_OPT_THRESHOLD, arg, prog);
	if (id == OPT_HTML) {
		a->html = arg;
		return 0;
	}
	if (id == OPT_SALVAGE) {
		a->flags.analysis.read_flags |= TRACE_READ_SALVAGE;
		return 0;
	}
	a->json = id == OPT_JSON;
	a->format_given = 1;
	return 0;
}

static const struct options_entry report_entries[] = {
    {"text", 0, NULL, "text (default)", OPT_TEXT},
    {"json", 0, NULL, "one JSON document, schema fsdpscope.report/2 (docs/report-schema.md)", OPT_JSON},
    {"html", 0, "OUT.html", "also write the report as one self-contained HTML page (see above)", OPT_HTML},
    {"salvage", 0, NULL, DIAGNOSIS_SALVAGE_HELP, OPT_SALVAGE},
    {NULL, 't', "NAME=VALUE", NULL, OPT_THRESHOLD},
    {NULL, 0, NULL, NULL, 0},
};

static const struct options_set report_sets[] = {
    {.entries = report_entries, .apply = report_apply},
    OPTIONS_DIAGNOSIS_SET(offsetof(struct report_args, flags)),
};

const struct options_help cmd_report_help = OPTIONS_HELP(report_help_head, report_sets, 27, report_help_tail);

int cmd_report(int argc, char **argv)
{
	struct report_args a = {0};
	struct fss_session_tool steps;
	html_timeline_t *timeline = NULL;
	struct diagnosis d;
	int first, rc;

	diagnosis_flags_init(&a.flags);
	first = options_parse(&cmd_report_help, "report", argc, argv, OPTIONS_ANYWHERE, &a);
	if (first < 0) /* or the help, which options_parse printed */
		return first == OPTIONS_HELP_SHOWN ? EXIT_OK : EXIT_USAGE;
	if (a.html) { /* the timeline's step windows, seen as the diagnosis reads */
		timeline = html_timeline_new();
		if (!timeline) {
			fprintf(stderr, "fsdpscope report: out of memory\n");
			return EXIT_USAGE;
		}
		html_timeline_steps_tool(timeline, &steps);
		a.flags.tool = &steps;
	}
	if (lint_read_traces(argc, argv, first, "report", &a.flags, &d)) {
		html_timeline_free(timeline);
		return EXIT_USAGE;
	}
	if (a.json)
		diagnosis_print_json(stdout, &d, &a.flags.rules);
	else if (!a.html || a.format_given)
		diagnosis_print_report(stdout, &d);
	output_flush();
	rc = EXIT_OK;
	if (a.html) {
		char err[512] = "";
		const html_timeline_t *kernels = timeline;

		if (html_timeline_read(timeline, &d, &a.flags, err, sizeof err) < 0) {
			/* the page still has the rest, and lanes drawn from the per-rank figures */
			fprintf(stderr, "fsdpscope report: --html: the timeline's kernels could not be read (%s): its lanes "
					"show the per-rank figures\n",
				err);
			kernels = NULL;
		}
		err[0] = 0;
		if (report_html_write(a.html, &d, kernels, err, sizeof err) < 0) {
			fprintf(stderr, "fsdpscope report: --html: %s\n", err);
			rc = EXIT_USAGE;
		} else {
			fprintf(stderr, "fsdpscope report: wrote %s\n", a.html);
		}
	}
	if (d.damage[0]) {
		fprintf(stderr,
			"fsdpscope report: %s: incomplete trace (damaged, cut short or not closed by its writer), "
			"analysed what could be read: %s\n",
			d.trace_path, d.damage);
		rc = EXIT_USAGE;
	}
	diagnosis_free(&d);
	html_timeline_free(timeline);
	return rc;
}
