/*
 * lint.h - the lint summary other commands print (`fsdpscope run` prints it
 * when the job ends).
 */
#ifndef FSS_CLI_LINT_H
#define FSS_CLI_LINT_H

#include <stdio.h>

#include "collector/analysis.h"
#include "rules/rules.h"

struct diagnosis;	/* cli/diagnosis.h */
struct diagnosis_flags; /* cli/diagnosis.h */

/*
 * lint_exit_status - lint's exit status for analysis a (`fsdpscope lint
 * --help`, EXIT STATUS): EXIT_UNDIAGNOSED without a verdict, EXIT_FINDING
 * when max_severity (findings_max_severity) reaches fail_on, EXIT_INCOMPLETE
 * when the trace was damaged, cut short or lost records, else EXIT_OK.
 */
int lint_exit_status(const struct analysis_result *a, int damaged, int max_severity, enum rule_severity fail_on);

/*
 * lint_print_left_out - say on out, one line each, what the verdict of a
 * left out and why: collectives lost (the steps they were lost in), the
 * processes whose records stop without a process_end (the step each was
 * in), dropped records whose place is not known. Nothing when a is whole.
 */
void lint_print_left_out(FILE *out, const char *trace_path, const struct analysis_result *a);

/*
 * lint_print_notes - what the verdict of d rests on, one line each: damage,
 * dropped records, processes that did not end cleanly (listed where
 * sources_where says), what was left out, attach's inferences, exposure or
 * calls in flight not measured, and, with say_undiagnosed, why no verdict
 * was reached. lint prints them on stderr after its report; the closing
 * summary of a session the same, after its brief one.
 */
void lint_print_notes(FILE *out, const struct diagnosis *d, const char *sources_where, int say_undiagnosed);

/* lint_flight_finding - a collective-hang or collective-mismatch finding
 * at fail_on or above is in the list. */
int lint_flight_finding(const findings_t *list, enum rule_severity fail_on);

/*
 * lint_print_summary - analyse the finished trace at trace_path with the
 * default options and thresholds, and print the findings to out: a tally
 * line, then each finding as `lint --brief` prints it (its evidence and its
 * FSDP2 fix), what the verdict left out (a partial job, lost collectives,
 * processes cut off), then where to see the rest (`fsdpscope lint TRACE`
 * for every framework's fix, `fsdpscope report TRACE` for the whole
 * diagnosis). Returns the highest severity found (0 info, 1 warning,
 * 2 error), -1 when there is no finding, or a negative errno / FSS_E_*
 * below -1 when the trace could not be analysed (a line saying why was
 * printed to out). Never exits, never writes to stdout unless out is it.
 */
int lint_print_summary(const char *trace_path, FILE *out);

/*
 * lint_print_diagnosis - what lint_print_summary prints, for a diagnosis
 * already made (a session's streamed one: cli/session.c) of the trace at
 * trace_path.
 */
void lint_print_diagnosis(FILE *out, const char *trace_path, const struct diagnosis *d);

/*
 * lint_read_traces - what lint and report do with their TRACE operands,
 * argv[first..argc): a trace a killed run left is said first (as
 * run_unfinished_note says it), then diagnosis_run_args runs the
 * diagnosis of them as one job into *d. Returns 0, or EXIT_USAGE (said,
 * as "fsdpscope CMD: ...").
 */
int lint_read_traces(int argc, char **argv, int first, const char *cmd, const struct diagnosis_flags *f,
		     struct diagnosis *d);

#endif
