/*
 * analyze_note.h - the notes of a result: what the analysis says beside its
 * figures, in the order it says them (struct analysis_result.notes).
 */
#ifndef FSS_COLLECTOR_ANALYZE_NOTE_H
#define FSS_COLLECTOR_ANALYZE_NOTE_H

#include "collector/analysis.h"

/*
 * analyze_note - add a note to r, printf-style; past ANALYSIS_NOTES_MAX
 * notes the rest are left out (a note longer than ANALYSIS_NOTE_BYTES is
 * cut there).
 */
void analyze_note(struct analysis_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * analyze_note_undecided - say why the trace could not be diagnosed: the words go
 * to r->undecided_why (once: a second call replaces them) and into a note.
 */
void analyze_note_undecided(struct analysis_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
