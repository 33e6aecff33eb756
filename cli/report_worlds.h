/*
 * report_worlds.h - the worlds of a restarted job (collector/worlds.h,
 * docs/patterns.md "Restarts") as report and lint print them: per world its
 * processes, how they ended, its own verdict, steps and units, and its
 * findings; and a rank two processes of one world claim.
 */
#ifndef FSS_CLI_REPORT_WORLDS_H
#define FSS_CLI_REPORT_WORLDS_H

#include <stdio.h>

#include "cli/diagnosis.h"

struct jw;

/*
 * report_worlds_json - the report's "worlds" member (an array, when the
 * trace holds more than one world) and "duplicate_ranks" (an object, when a
 * rank is claimed twice), through the report's writer at its depth;
 * nothing otherwise, so a trace of one world reads as before.
 */
void report_worlds_json(struct jw *w, const struct diagnosis *d);

/* report_worlds_text - the text report's "Worlds" block; nothing for one. */
void report_worlds_text(FILE *out, const struct diagnosis *d);

/*
 * report_worlds_lint - lint's blocks for the worlds other than the headline
 * one (whose findings lint prints first): a heading per world, then its
 * findings as lint prints them (explain: with explanations; fsdp2_only: the
 * FSDP2 fix alone). Nothing for one world.
 */
void report_worlds_lint(FILE *out, const struct diagnosis *d, int explain, int fsdp2_only);

/*
 * report_worlds_troubled_headline - the processes of a that did not end
 * cleanly or lost collectives (report_sources.h) outside the worlds before
 * or after the headline one: what makes the headline verdict rest on an
 * incomplete trace. report_sources_troubled with one world.
 */
uint32_t report_worlds_troubled_headline(const struct analysis_result *a);

#endif
