/*
 * analyze_summary.h - one step of one rank summarised: what each of its
 * collective events did (phase, unit, exposure of a gather) and the step's
 * figures, from the source's pending events, ranges and GPU intervals.
 */
#ifndef FSS_COLLECTOR_ANALYZE_SUMMARY_H
#define FSS_COLLECTOR_ANALYZE_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analysis.h"
#include "collector/phases.h"
#include "collector/timeline.h"

/* What one step's event did (per event of the step). */
struct ev_info {
	uint64_t duration, exposed, hidden, queued; /* FSDP gathers: as struct analysis_gather's */
	uint64_t compute_wait, call;		    /* duration_ns, exposed_ns, hide_ns, queued_ns, ... */
	uint32_t name;				    /* forward gathers: the unit's NVTX range name (source name id) */
	uint8_t phase;				    /* FSDP gathers: enum analysis_phase, else 0 */
	uint8_t cause;				    /* FSDP gathers: enum analysis_cause */
	uint8_t timed;				    /* has an interval (GPU or host) */
	uint8_t reserved;
	int32_t cycle;	   /* FSDP gathers: the step's micro-batch, -1 */
	int32_t unit;	   /* FSDP gathers: the forward unit gathered; FSDP ReduceScatters: the unit it was
			      matched to (phases_match_reductions); -1 */
	uint8_t fsdp;	   /* an event of the FSDP group (shard or re-gather communicator); 0 for a gather of
			      that group that gathers no unit (step_gather) */
	uint8_t recompute; /* FSDP gathers: a unit's second backward gather in its cycle */
	uint8_t in_steps;  /* an event of the data-parallel side (comm_roles_in_steps) */
	uint8_t fsdp_group; /* an event of an FSDP group other than the primary: its index (1..), whose
			       gathers get their phase, unit and figures but stay out of fsdp's and the step
			       figures; 0 otherwise */
	uint8_t step_gather; /* an AllGather of the FSDP group whose size is no unit's: a per-step collective
				(metrics, weight sync), counted apart (phases.h) */
	uint64_t start_off, issue_off; /* FSDP gathers: its interval's start and its host call's enter, from the
					  step's start (the what-if replay's queue order) */
	uint64_t compute_after;	       /* primary FSDP gathers: compute from its end to the next such gather's end
					  (the step's end for the last): the work it makes ready */
};

/* Per-step figures that get medians. */
enum step_figure {
	FIG_STEP,
	FIG_AG,
	FIG_AG_EXPOSED,
	FIG_FWD_EXPOSED,
	FIG_BWD_EXPOSED,
	FIG_RS,
	FIG_RS_EXPOSED,
	FIG_AR,
	FIG_AR_EXPOSED,
	FIG_COMPUTE,
	FIG_COMM_EXPOSED,
	FIG_EXPOSED_GATHERS,
	FIG_CAUSE_N,					    /* + cause */
	FIG_CAUSE_NS = FIG_CAUSE_N + ANALYSIS_CAUSE_MAX,    /* + cause: exposed */
	FIG_CAUSE_WAIT = FIG_CAUSE_NS + ANALYSIS_CAUSE_MAX, /* + cause: compute wait */
	FIG_AG_WAIT = FIG_CAUSE_WAIT + ANALYSIS_CAUSE_MAX,
	FIG_FWD_WAIT,
	FIG_BWD_WAIT,
	FIG_OTHER_WAIT, /* compute waits that belong to collectives other than the gathers */
	FIG_MAX
};

/* One step of one rank. */
struct step_summary {
	struct phases_result phases; /* the FSDP group's cycles */
	uint64_t hash;		     /* of the event signatures: equal steps, equal hashes */
	size_t nev;
	struct tl_event *ev;  /* [nev] copies */
	struct ev_info *info; /* [nev] */
	uint64_t fig[FIG_MAX];
	int exposure_source; /* enum analysis_exposure_source */
	int has_names;	     /* forward gathers were named from module ranges */
	uint32_t ordinal;    /* as analysis_step_info's */
	uint32_t reserved;
};

/*
 * analyze_summary_new - summarise the events ev[0..n) (ev NULL when n is 0)
 * of one step of src spanning [t0, t1): counts, exposure per gather and step
 * figures, from the source's pending ranges and GPU intervals as they are.
 * names_known: the rank's steady state has its unit names already (with GPU
 * timing they are not looked for again). Only o's force_host_timing and
 * exposed_min_ns are read. *out is the caller's (analyze_summary_free).
 * Returns 0 or -ENOMEM.
 */
int analyze_summary_new(const struct analysis_options *o, const struct tl_source *src, int names_known,
			const struct tl_event *ev, size_t n, uint64_t t0, uint64_t t1, struct step_summary **out);

/* analyze_summary_free - release a summary (NULL ok). */
void analyze_summary_free(struct step_summary *s);

#endif
