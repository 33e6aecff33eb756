/*
 * analyze_callback.h - the step callback (analyzer_on_step): what it is
 * told of every step the analysis summarises or leaves out.
 */
#ifndef FSS_COLLECTOR_ANALYZE_CALLBACK_H
#define FSS_COLLECTOR_ANALYZE_CALLBACK_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analyze.h"
#include "collector/analyze_summary.h"
#include "collector/timeline.h"

/* The callback and the buffer of step events it is handed (reused). */
struct analyze_callback {
	analysis_step_fn fn; /* NULL: none */
	void *ctx;
	struct analysis_step_event *events;
	size_t cap;
};

/*
 * analyze_callback_step - tell the callback (if any) of a summarised step
 * of src: its summary s of the events ev[0..n) from t0, its ordinal.
 */
void analyze_callback_step(struct analyze_callback *cb, const struct tl_source *src, uint32_t ordinal,
			   const struct step_summary *s, const struct tl_event *ev, size_t n, uint64_t t0);

/*
 * analyze_callback_excluded - tell the callback (if any) of a step of src
 * left out (why: enum step_exclusion), its events ev[0..n) over [t0, t1):
 * counts and span, no timing figures.
 */
void analyze_callback_excluded(struct analyze_callback *cb, const struct tl_source *src, uint32_t ordinal, int why,
			       const struct tl_event *ev, size_t n, uint64_t t0, uint64_t t1);

/* analyze_callback_release - free the events buffer (cb is the caller's). */
void analyze_callback_release(struct analyze_callback *cb);

#endif
