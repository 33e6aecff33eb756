/*
 * analyze_note.c - the notes of a result (analyze_note.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "collector/analyze_note.h"

void analyze_note(struct analysis_result *r, const char *fmt, ...)
{
	if (r->nnotes >= ANALYSIS_NOTES_MAX)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->notes[r->nnotes++], ANALYSIS_NOTE_BYTES, fmt, ap);
	va_end(ap);
}

void analyze_note_undecided(struct analysis_result *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->undecided_why, sizeof r->undecided_why, fmt, ap);
	va_end(ap);
	analyze_note(r, "not diagnosed: %s", r->undecided_why);
}
