/*
 * lint_notes.c - what a verdict rests on, one line each: lint's standard
 * error after its report and the collector's closing summary after its
 * brief one print these same lines (lint.h).
 */
#include "cli/lint.h"
#include "cli/diagnosis.h"
#include "cli/report_sources.h"
#include "cli/report_worlds.h"

#include "rules/flight_text.h"

#include <stdio.h>

/* lint_flight_finding - a collective-hang or collective-mismatch finding at
 * fail_on or above is in the list. */
int lint_flight_finding(const findings_t *list, enum rule_severity fail_on)
{
	return (findings_find(list, "collective-hang") &&
		findings_find(list, "collective-hang")->severity >= fail_on) ||
	       (findings_find(list, "collective-mismatch") &&
		findings_find(list, "collective-mismatch")->severity >= fail_on);
}

/* What attach inferred, in one line (the report's attach section has the rest). */
static void lint_print_attach(FILE *out, const char *trace_path, const struct analysis_result *a)
{
	const struct analysis_attach *x = &a->attach;

	fprintf(out,
		"fsdpscope lint: %s: %u of %u processes observed by fsdpscope attach (uprobes), "
		"%u " SOURCE_END_DETACHED_WORDS
		" when it let go; %u communicators first seen in use, their fields inferred; %u rank%s inferred, %u "
		"guessed from pid order (the report's attach section says how)\n",
		trace_path, x->sources, a->nsources, x->detached, x->comms_observed, x->ranks_inferred,
		x->ranks_inferred == 1 ? "" : "s", x->ranks_guessed);
	if (x->calls_in_flight)
		fprintf(
		    out,
		    "fsdpscope lint: %s: %llu call%s in flight at attach on %u rank%s (entered before the probes, "
		    "seen neither at entry nor at return; the other ranks were seen to make %s): not in the trace\n",
		    trace_path, (unsigned long long)x->calls_in_flight, x->calls_in_flight == 1 ? " was" : "s were",
		    x->ranks_in_flight, x->ranks_in_flight == 1 ? "" : "s", x->calls_in_flight == 1 ? "it" : "them");
}

void lint_print_left_out(FILE *out, const char *trace_path, const struct analysis_result *a)
{
	const struct analysis_trust *t = &a->trust;

	if (t->collectives_lost)
		fprintf(out,
			"fsdpscope lint: %s: %llu collective%s lost (gaps in the seq numbers) on %u rank%s: %u step%s "
			"left out of the verdict\n",
			trace_path, (unsigned long long)t->collectives_lost, t->collectives_lost == 1 ? "" : "s",
			t->ranks_lost, t->ranks_lost == 1 ? "" : "s", t->steps_lost_all,
			t->steps_lost_all == 1 ? "" : "s");
	if (a->trace.sources_cut && a->trace.sources_attached)
		/* attach writes no process_end: a process_exit said these died */
		fprintf(out,
			"fsdpscope lint: %s: %u process%s died while attached (killed, or exited non-zero): %u "
			"step%s in progress there left out of the verdict\n",
			trace_path, a->trace.sources_cut, a->trace.sources_cut == 1 ? "" : "es", t->steps_cut_all,
			t->steps_cut_all == 1 ? "" : "s");
	else if (a->trace.sources_cut && t->steps_cut_all)
		fprintf(out,
			"fsdpscope lint: %s: the records of %u process%s stop without a process_end (the trace was "
			"cut short, or the process died): %u step%s in progress there left out of the verdict\n",
			trace_path, a->trace.sources_cut, a->trace.sources_cut == 1 ? "" : "es", t->steps_cut_all,
			t->steps_cut_all == 1 ? "" : "s");
	else if (a->trace.sources_cut)
		fprintf(out,
			"fsdpscope lint: %s: the records of %u process%s stop without a process_end (the trace was "
			"cut short, or the process died) before their first step ended: no step of theirs was "
			"analysed, so none is left out\n",
			trace_path, a->trace.sources_cut, a->trace.sources_cut == 1 ? "" : "es");
	if (t->records_unplaced)
		fprintf(out,
			"fsdpscope lint: %s: %llu dropped records were not collectives (NVTX ranges, GPU intervals): "
			"where they were is not known; exposure, NVTX steps and unit names may be off\n",
			trace_path, (unsigned long long)t->records_unplaced);
}


void lint_print_notes(FILE *out, const struct diagnosis *d, const char *sources_where, int say_undiagnosed)
{
	const struct analysis_result *r = d->result;
	const char *path = d->trace_path;

	if (d->damage[0])
		fprintf(out, "fsdpscope lint: %s: damaged or cut short, analysed what could be read: %s\n", path,
			d->damage);
	if (r->trace.dropped_records)
		fprintf(out,
			"fsdpscope lint: %s: the agents dropped %llu records: the verdict is drawn from an "
			"incomplete trace\n",
			path, (unsigned long long)r->trace.dropped_records);
	if (report_sources_troubled(r))
		fprintf(out, "fsdpscope lint: %s: %u of %u processes did not end cleanly or lost collectives (%s): %s\n",
			path, report_sources_troubled(r), r->nsources, sources_where,
			report_worlds_troubled_headline(r)
			    ? "the verdict is drawn from an incomplete trace"
			    : "all in the worlds before the restart; the headline world's verdict rests on complete records");
	lint_print_left_out(out, path, r);
	if (r->trace.sources_attached)
		lint_print_attach(out, path, r);
	if (r->steps_analyzed && r->exposure.source == ANALYSIS_EXPOSURE_NONE && r->trace.sources_attached)
		fprintf(out, "fsdpscope lint: %s: %s: exposed-gather was not checked\n", path,
			analysis_attach_exposure_why());
	else if (r->steps_analyzed && r->exposure.source == ANALYSIS_EXPOSURE_NONE)
		fprintf(out,
			"fsdpscope lint: %s: exposure not measured (no GPU intervals and no compute ranges): "
			"exposed-gather was not checked; record on a GPU with CUPTI, or mark compute with NVTX "
			"ranges\n",
			path);
	if (!flight_shows_waits(r) && r->trace.collectives)
		fprintf(out,
			"fsdpscope lint: %s: no source recorded calls in flight (enter records or GPU "
			"intervals): a hang cannot be seen in this trace, so none is ruled out\n",
			path);
	if (say_undiagnosed)
		fprintf(out, "fsdpscope lint: %s: not diagnosed: %s%s\n", path, r->undecided_why,
			r->trace.collectives ? "" : " (was the job run under 'fsdpscope run'?)");
}
