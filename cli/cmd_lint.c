/*
 * cmd_lint.c - fsdpscope lint TRACE: the rules' findings, with an exit code
 * that can gate CI. Also the lint summary `fsdpscope run` prints (lint.h).
 */
#include "cli/commands.h"
#include "cli/diagnosis.h"
#include "cli/lint.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/report_sources.h"
#include "cli/report_worlds.h"
#include "cli/run_folder.h"

#include "rules/flight_text.h"

#include "common/error.h"
#include "common/trace_parser.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char lint_help_head[] =
    "NAME\n"
    "    fsdpscope lint - check a trace against the FSDP wrap, overlap and memory rules\n\n"
    "SYNOPSIS\n"
    "    fsdpscope lint [--json] [--fail-on info|warning|error] [--layers L]\n"
    "                   [--threshold NAME=VALUE]... [--disable RULE]... [--brief] [OPTIONS] TRACE...\n\n"
    "DESCRIPTION\n"
    "    Analyses TRACE (written by 'fsdpscope run', the collector, or an agent's file\n"
    "    sink) as 'fsdpscope report' does, runs every rule over the analysis and prints\n"
    "    one block per finding: severity, rule id and title, what is wrong, the\n"
    "    evidence (numbers from the trace), why it matters, and the fix as code for\n"
    "    PyTorch FSDP2, and for FSDP1 and DeepSpeed ZeRO-3 where it differs.\n"
    "    Figures are medians over the analysed steps of the headline rank; steps the\n"
    "    trace cannot vouch for (a rank lost collectives in them, or its records stop\n"
    "    in them without a process_end) are left out, and lint says so on standard\n"
    "    error.\n\n"
    "    Several TRACEs (or folders: their *.fss files, in name order) are one job whose\n"
    "    nodes each had a collector: they are merged, every node's clock moved onto the\n"
    "    first trace's (clock anchors, refined by the collectives the nodes share), and\n"
    "    diagnosed as one; 'fsdpscope report' shows each node's offset and residual\n"
    "    (docs/collect.md, \"More than one node\"). A process found in two traces is an\n"
    "    error, and so are traces of more than one job (two runs into one --out DIR:\n"
    "    trace.fss and trace-2.fss): traces are one job's when they share a communicator\n"
    "    (its NCCL unique id) and no rank of it, and ran at one time; the error lists\n"
    "    each job's files, to read one at a time. A trace that holds only some of its\n"
    "    job's ranks is said to be partial.\n\n"
    "    TRACE may also be a PyTorch profiler (Kineto) trace, .json or .json.gz, told by\n"
    "    its content; several (or a folder of them) are one job when their distributedInfo\n"
    "    worlds agree, their ranks differ and their times overlap. A list that mixes the two kinds is refused. What such a trace\n"
    "    cannot tell (calls in flight, drops, how a process ended) is said, and a job\n"
    "    that is not sharded training is undecided (exit 3) with the reason\n"
    "    (docs/kineto.md).\n\n"
    "    The analysis reads the FSDP communicator alone (tensor-parallel, pipeline and other\n"
    "    groups are told apart by their traffic and listed by 'fsdpscope report'), per\n"
    "    micro-batch and per step (docs/patterns.md).\n\n"
    "    The rules, in the order they report:\n"
    "    collective-hang        ranks wait in collective #N of a communicator longer than\n"
    "                           --hang-timeout while others never entered it (or all are\n"
    "                           in it and none came out): error, naming the missing ranks\n"
    "                           (host, pid, their last collective) and the waiting ones,\n"
    "                           also when the job's own timeout ended the waits (they\n"
    "                           gave up on an NCCL error, or died)\n"
    "    collective-mismatch    ranks of one communicator issued different collectives as\n"
    "                           their N-th (op, count, dtype, root): error, both signatures\n"
    "    restart                the trace holds several worlds (a job restarted with new\n"
    "                           processes on new communicators): info, each world's size,\n"
    "                           who died first; every world is linted apart, in a block of\n"
    "                           its own after the headline world's findings\n"
    "    duplicate-rank         processes that ran at the same time claim one rank (two\n"
    "                           jobs in one trace): warning; listed apart, never merged\n"
    "    not-diagnosed          no verdict: no training step, no FSDP communicator, or a\n"
    "                           pattern the analysis does not cover: error, exit 3\n"
    "    wrap-too-fine          more than one AllGather per repeating unit (per-Linear\n"
    "                           wrap): error\n"
    "    wrap-too-coarse        one AllGather holds most of the model, or a unit holds\n"
    "                           several blocks: warning, error for the whole model\n"
    "    gather-count-mismatch  with --layers L: forward AllGathers per micro-batch against\n"
    "                           L + root; error when more, warning when fewer\n"
    "    bucketed-fetch         DeepSpeed ZeRO-3 style fetch buckets: counts, bucket sizes and\n"
    "                           advice in DeepSpeed's settings: warning when latency-bound\n"
    "    exposed-gather         AllGather time with no compute under it, with causes\n"
    "                           (first-of-phase, no-prefetch, bandwidth-bound,\n"
    "                           host-late): warning\n"
    "    reshard-policy         the reshard_after_forward in use and what the other\n"
    "                           choice would cost in memory and gathers: info\n"
    "    small-collectives      latency-bound AllGathers (median gathered size under a\n"
    "                           threshold): warning, info when already per block\n"
    "    fp32-gather            parameters gathered in fp32 where compute is 16-bit:\n"
    "                           warning\n"
    "    rank-skew              ranks reach collectives at different times: warning\n"
    "                           for a consistent straggler, info for jitter\n\n"
    "    A well-wrapped job (one unit per block, prefetch on) gets no error.\n\n"
    "OPTIONS\n";

static const char lint_help_tail[] =
    "\n"
    "THRESHOLDS (--threshold NAME=VALUE; default in brackets)\n" RULE_THRESHOLDS_HELP "\n"
    "EXIT STATUS (the first that applies)\n"
    "    2  bad usage, an option that cannot apply to TRACE (the message gives the valid\n"
    "       range), TRACE is not a trace or cannot be read, or the output could not be\n"
    "       written (a full disk: 'fsdpscope: writing standard output: ...')\n"
    "    3  not diagnosed: no training step, no FSDP communicator, a pattern the\n"
    "       analysis does not cover, or no step the trace vouches for (every one lost\n"
    "       collectives or was cut off; the not-diagnosed finding says which); whatever\n"
    "       --fail-on says, so that a CI gate never passes on a verdict never reached\n"
    "    1  a finding reached --fail-on (in the steps the trace vouches for); a\n"
    "       collective-hang or collective-mismatch finding gives 1 even without a\n"
    "       verdict on the wrap (a hung job's trace may hold too few steps for one)\n"
    "    4  diagnosed, no finding at --fail-on, but from an incomplete trace: damaged (a\n"
    "       file header read past with --salvage included) or cut short (analysed up to\n"
    "       there: where and why is printed), records the agents dropped, or a process\n"
    "       that did not end cleanly (killed by a signal, exited non-zero, cut off\n"
    "       without its process_end) or whose collectives are missing: lint prints one\n"
    "       line for each such process; the step in progress where a process's records\n"
    "       stop, and the steps that lost collectives, are left out of the verdict\n"
    "    0  diagnosed from a complete trace, no finding at --fail-on\n"
    "    A restarted job is judged on its headline world (the last with an analysed\n"
    "    step); the other worlds' findings are printed, not gated on; their processes\n"
    "    that died still give 4.\n"
    "    A trace without GPU intervals or NVTX compute ranges cannot show exposure:\n"
    "    exposed-gather is then not checked, and lint says so on standard error\n"
    "    (the exit status is unchanged: the wrap verdict stands on the collectives).\n"
    "    Likewise a trace without enter records (format 1.3) and without GPU\n"
    "    intervals cannot show a rank waiting in a call: no hang is ruled out, and\n"
    "    lint says so on standard error (docs/hangs.md).\n\n"
    "EXAMPLES\n"
    "    fsdpscope lint run.fss\n"
    "    fsdpscope lint --layers 32 --fail-on warning run.fss      # gate CI on warnings\n"
    "    fsdpscope lint --threshold exposed_fraction=0.1 --threshold small_gather_bytes=4Mi run.fss\n"
    "    fsdpscope lint --json run.fss | jq '.findings[] | {rule, severity, message}'\n"
    "    fsdpscope lint --param-dtype fp32 --disable rank-skew run.fss\n"
    "    fsdpscope lint nodeA/ nodeB/                   # one job, one collector per node\n"
    "    fsdpscope lint profiler/rank*.json.gz          # a PyTorch profiler trace set\n"
    "    fsdpscope lint --hang-timeout 300 killed-job.fss    # name the collective a killed job hung in\n"
    "    fsdpscope lint --salvage damaged-header.fss     # read its intact chunks without the file header\n";

struct lint_args {
	int json, brief;
	enum rule_severity fail_on;
	struct diagnosis_flags flags;
};

enum { OPT_JSON, OPT_FAIL_ON, OPT_BRIEF, OPT_THRESHOLD, OPT_SALVAGE };

static int lint_apply(void *ctx, int id, const char *arg, const char *prog)
{
	struct lint_args *a = ctx;

	switch (id) {
	case OPT_JSON:
		a->json = 1;
		return 0;
	case OPT_BRIEF:
		a->brief = 1;
		return 0;
	case OPT_SALVAGE:
		a->flags.analysis.read_flags |= TRACE_READ_SALVAGE;
		return 0;
	case OPT_FAIL_ON:
		if (rule_severity_parse(arg, &a->fail_on)) {
			fprintf(stderr, "%s: --fail-on %s: expected info, warning or error\n", prog, arg);
			return -1;
		}
		return 0;
	default: /* -t: --threshold */
		return options_diagnosis_apply(&a->flags, DIAG_OPT_THRESHOLD, arg, prog);
	}
}

static const struct options_entry lint_entries[] = {
    {"json", 0, NULL,
     "print the whole report as JSON (schema fsdpscope.report/2,\ndocs/report-schema.md), findings included", OPT_JSON},
    {"fail-on", 0, "SEVERITY", "exit 1 when a finding is at least SEVERITY (default error)", OPT_FAIL_ON},
    {"brief", 0, NULL, "no explanations, FSDP2 fixes only", OPT_BRIEF},
    {"salvage", 0, NULL, DIAGNOSIS_SALVAGE_HELP "; lint exits 4 at best", OPT_SALVAGE},
    {NULL, 't', "NAME=VALUE", NULL, OPT_THRESHOLD},
    {NULL, 0, NULL, NULL, 0},
};

static const struct options_set lint_sets[] = {
    {.entries = lint_entries, .apply = lint_apply},
    OPTIONS_DIAGNOSIS_SET(offsetof(struct lint_args, flags)),
};

const struct options_help cmd_lint_help = OPTIONS_HELP(lint_help_head, lint_sets, 27, lint_help_tail);

int lint_read_traces(int argc, char **argv, int first, const char *cmd, const struct diagnosis_flags *f,
		     struct diagnosis *d)
{
	char prog[64];

	snprintf(prog, sizeof(prog), "fsdpscope %s", cmd);
	/* A trace (or folder) a killed run left: say so before reading it. */
	for (int i = first; i < argc; i++)
		run_unfinished_note(argv[i], prog, stderr);
	return diagnosis_run_args(argc, argv, first, cmd, f, d);
}

int cmd_lint(int argc, char **argv)
{
	struct lint_args a = {.fail_on = RULE_ERROR};
	struct diagnosis d;
	int first, rc, max;

	diagnosis_flags_init(&a.flags);
	first = options_parse(&cmd_lint_help, "lint", argc, argv, OPTIONS_ANYWHERE, &a);
	if (first < 0) /* or the help, which options_parse printed */
		return first == OPTIONS_HELP_SHOWN ? EXIT_OK : EXIT_USAGE;
	if (lint_read_traces(argc, argv, first, "lint", &a.flags, &d))
		return EXIT_USAGE;
	if (a.json) {
		diagnosis_print_json(stdout, &d, &a.flags.rules);
	} else {
		if (findings_count(d.findings))
			diagnosis_print_findings(stdout, d.findings, !a.brief, a.brief);
		else if (d.result->steps_analyzed) {
			printf("no findings: ");
			diagnosis_print_summary(stdout, d.result);
			printf("\n");
		}
		report_worlds_lint(stdout, &d, !a.brief, a.brief);
		if (report_sources_troubled(d.result)) {
			printf("\n");
			report_sources_troubles(stdout, d.result, "");
		}
		printf("%sfsdpscope lint: ",
		       findings_count(d.findings) || report_sources_troubled(d.result) ? "\n" : "");
		diagnosis_print_tally(stdout, d.findings);
		printf(" (fail-on %s)\n", rule_severity_name(a.fail_on));
	}
	output_flush();
	max = findings_max_severity(d.findings);
	rc = lint_exit_status(d.result, d.damage[0] != 0, max, a.fail_on);
	/* A hang or a desync is a verdict on the job however far the unit
	 * analysis got: a hung job's trace often holds too few steps. */
	if (rc == EXIT_UNDIAGNOSED && lint_flight_finding(d.findings, a.fail_on))
		rc = EXIT_FINDING;
	lint_print_notes(stderr, &d, a.json ? "the report's \"sources\"" : "listed above", rc == EXIT_UNDIAGNOSED);
	diagnosis_free(&d);
	return rc;
}

int lint_exit_status(const struct analysis_result *a, int damaged, int max_severity, enum rule_severity fail_on)
{
	if (a->verdict == ANALYSIS_UNDECIDED)
		return EXIT_UNDIAGNOSED;
	if (max_severity >= (int)fail_on)
		return EXIT_FINDING;
	if (damaged || a->trace.truncated || a->trace.dropped_records || report_sources_troubled(a) ||
	    a->trace.sources_cut || a->trust.collectives_lost || a->trust.nvtx_dropped)
		return EXIT_INCOMPLETE;
	return EXIT_OK;
}

void lint_print_diagnosis(FILE *out, const char *trace_path, const struct diagnosis *d)
{
	fprintf(out, "fsdpscope lint: ");
	diagnosis_print_tally(out, d->findings);
	fprintf(out, " (");
	diagnosis_print_summary(out, d->result);
	fprintf(out, ")\n");
	/* lint --brief's blocks: the FSDP2 fix, and where to read the others */
	if (findings_count(d->findings)) {
		fputc('\n', out);
		diagnosis_print_findings(out, d->findings, 0, 1);
	}
	report_worlds_lint(out, d, 0, 1);
	if (report_sources_troubled(d->result)) {
		fprintf(out, "\n");
		report_sources_troubles(out, d->result, "");
	}
	diagnosis_print_partial_job(out, "lint", trace_path, d->result);
	/* what the verdict rests on, as lint says it after its report */
	{
		char *notes = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&notes, &len);

		if (mem) {
			lint_print_notes(mem, d, "listed above",
					 d->result->verdict == ANALYSIS_UNDECIDED &&
					     !lint_flight_finding(d->findings, RULE_INFO));
			if (fclose(mem) == 0 && len)
				fprintf(out, "\n%s", notes);
			free(notes);
		}
	}
	fprintf(out, "\nFixes for FSDP1 and DeepSpeed: fsdpscope lint %s; the whole diagnosis: fsdpscope report %s\n",
		trace_path, trace_path);
}

int lint_print_summary(const char *trace_path, FILE *out)
{
	struct diagnosis_flags flags;
	struct diagnosis d;
	char err[512];
	int rc, max;

	diagnosis_flags_init(&flags);
	rc = diagnosis_run(trace_path, &flags, &d, err, sizeof(err));
	if (rc) {
		fprintf(out, "fsdpscope lint: %s: %s\n", trace_path, err);
		return rc == -1 ? -EACCES : rc;
	}
	lint_print_diagnosis(out, trace_path, &d);
	max = findings_max_severity(d.findings);
	diagnosis_free(&d);
	return max;
}
