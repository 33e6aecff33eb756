/*
 * analyze_steady.h - a rank's steady state: the step its analysed steps
 * repeat (its events, and what each does), the medians of their figures and
 * a bounded sample of them, among which the representative step is chosen.
 * With NVTX steps the first ANALYZE_EARLY_STEPS wait here until the steady
 * step is chosen among them.
 */
#ifndef FSS_COLLECTOR_ANALYZE_STEADY_H
#define FSS_COLLECTOR_ANALYZE_STEADY_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analyze_summary.h"
#include "collector/median.h"
#include "collector/phases.h"
#include "collector/timeline.h"

/* NVTX steps buffered before the steady-state step is chosen among them. */
#define ANALYZE_EARLY_STEPS 8

/* One gather in one step, as the step sample keeps it. */
struct gather_fig {
	uint64_t duration, exposed, compute_wait, queued, call;
	uint8_t cause, timed;
	uint8_t reserved[6];
	uint64_t start_off, issue_off, compute_after; /* as struct ev_info's */
};

/* A bounded uniform sample of a rank's analysed steps (median.h's
 * reservoir, so a report is reproducible): the step figures of each, and
 * with detail the figures of each of its gathers. */
#define STEP_SAMPLE_SLOTS MEDIAN_SLOTS
struct step_sample {
	uint64_t seen, rng;
	uint32_t ordinal[STEP_SAMPLE_SLOTS];
	uint64_t fig[STEP_SAMPLE_SLOTS][FIG_MAX];
	struct gather_fig *gathers; /* [STEP_SAMPLE_SLOTS][nev] when detail */
};

struct rank_steady {
	/* NVTX steps: the first ones, until the steady state is chosen */
	struct step_summary *early[ANALYZE_EARLY_STEPS];
	unsigned nearly;
	int decided;
	uint64_t tmpl_hash;

	/* the steady-state step and its figures */
	struct phases_result phases;
	size_t nev;
	struct tl_event *tev;  /* [nev] */
	struct ev_info *tinfo; /* [nev]: phase, names */
	int names_known;       /* tinfo's names are a step's that had them */
	int detail;	       /* per-gather figures kept (headline candidate) */
	struct step_sample sample;
	struct median fig[FIG_MAX];
	int exposure_source;

	uint32_t analyzed, warmup, irregular; /* steps */
};

/*
 * analyze_steady_add - a clean step s of the rank, taken over (freed here).
 * Period steps (nvtx 0) are all the steady step; NVTX steps wait until
 * ANALYZE_EARLY_STEPS have come, then those like the steady step are
 * aggregated and the others counted as warm-up or irregular. detail: the
 * rank is one whose per-gather figures may be reported (read when its first
 * step is aggregated). Returns 0 or -ENOMEM.
 */
int analyze_steady_add(struct rank_steady *st, struct step_summary *s, int nvtx, int detail);

/*
 * analyze_steady_decide - choose the steady-state step among the NVTX steps
 * waiting (at the end, or when ANALYZE_EARLY_STEPS have come). Returns 0 or
 * -ENOMEM.
 */
int analyze_steady_decide(struct rank_steady *st, int detail);

/* analyze_steady_names_known - the steady step has its unit names. */
int analyze_steady_names_known(const struct rank_steady *st);

/* analyze_steady_pending - the events of the NVTX steps still waiting. */
size_t analyze_steady_pending(const struct rank_steady *st);

/*
 * analyze_steady_representative - the representative step: among the sampled
 * steps, the one whose compute wait on gathers (the figure fsdp_ref's
 * gather_wait measures) is the lower median, the earliest on ties. Returns
 * its slot, -1 when none.
 */
int analyze_steady_representative(const struct step_sample *m);

/* analyze_steady_release - free what st holds (st itself is the caller's). */
void analyze_steady_release(struct rank_steady *st);

#endif
