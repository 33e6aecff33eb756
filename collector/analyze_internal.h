/*
 * analyze_internal.h - what the analyzer's files (analyze*.c) share: the
 * per-rank state, the step summary and the functions one file offers the
 * others. Not part of the analysis' interface (analyze.h, analysis.h).
 */
#ifndef FSS_COLLECTOR_ANALYZE_INTERNAL_H
#define FSS_COLLECTOR_ANALYZE_INTERNAL_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "collector/analyze.h"
#include "collector/breakdown.h"
#include "collector/comm_roles.h"
#include "collector/flight.h"
#include "collector/ledger.h"
#include "collector/median.h"
#include "collector/overlap.h"
#include "collector/phases.h"
#include "collector/ranks.h"
#include "collector/reshard.h"
#include "collector/step_summaries.h"
#include "collector/steps.h"
#include "collector/timeline.h"
#include "collector/units.h"
#include "common/arith.h"
#include "common/error.h"
#include "common/trace_parser.h"


/* Events of a rank looked at before its communicators get their roles:
 * several steps of any job seen so far (a 32-block per-Linear step is about
 * 800 events, with tensor parallelism about 1100). */
#define ANALYZE_ROLE_WINDOW 4096
#define ANALYZE_ROLE_STEPS 3
/* NVTX steps buffered before the steady-state step is chosen among them. */
#define ANALYZE_EARLY_STEPS 8
/* Steps that may wait for late GPU intervals before they are analysed anyway. */
#define ANALYZE_MAX_WAITING_STEPS 16

/* Calls may reach the trace a little out of seq order (one thread's call
 * entered before another's that was recorded ahead of it): a stretch is
 * checked for lost calls against this many events on either side of it. */
#define ANALYZE_SEQ_LOOK 64

enum rank_mode { MODE_UNDECIDED = 0, MODE_NVTX = 1, MODE_PERIOD = 2 };

/* Seq numbers of a collective event's calls. */
struct seq_range {
	uint64_t lo, hi;
};

/* What one step's gathers did (per event of the step). */
struct ev_info {
	uint64_t duration, exposed, hidden, queued; /* FSDP gathers: as struct analysis_gather's */
	uint64_t compute_wait, call;                /* duration_ns, exposed_ns, hide_ns, queued_ns, ... */
	uint32_t name;  /* forward gathers: the unit's NVTX range name (source name id) */
	uint8_t phase;  /* FSDP gathers: enum analysis_phase, else 0 */
	uint8_t cause;
	uint8_t timed;  /* has an interval (GPU or host) */
	uint8_t reserved;
	int32_t cycle;  /* FSDP gathers: the step's micro-batch, -1 */
	int32_t unit;   /* FSDP gathers: the forward unit gathered, -1 */
	uint8_t fsdp;   /* an event of the FSDP group (shard or re-gather communicator) */
	uint8_t recompute; /* FSDP gathers: a unit's second backward gather in its cycle */
	uint8_t in_steps;  /* an event of the data-parallel side (comm_role_in_steps) */
	uint8_t reserved2;
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
	FIG_CAUSE_N,                           /* + cause */
	FIG_CAUSE_NS = FIG_CAUSE_N + ANALYSIS_CAUSE_MAX, /* + cause: exposed */
	FIG_CAUSE_WAIT = FIG_CAUSE_NS + ANALYSIS_CAUSE_MAX, /* + cause: compute wait */
	FIG_AG_WAIT = FIG_CAUSE_WAIT + ANALYSIS_CAUSE_MAX,
	FIG_FWD_WAIT,
	FIG_BWD_WAIT,
	FIG_OTHER_WAIT, /* compute waits that belong to collectives other than the gathers */
	FIG_MAX
};

struct step_summary {
	struct phases_result phases; /* the FSDP group's cycles */
	uint64_t hash;          /* of the event signatures: equal steps, equal hashes */
	size_t nev;
	struct tl_event *ev;    /* [nev] copies */
	struct ev_info *info;   /* [nev] */
	uint64_t fig[FIG_MAX];
	int exposure_source;    /* enum analysis_exposure_source */
	int has_names;
	uint32_t ordinal;       /* as analysis_step_info's */
	uint32_t reserved;
};

/* One gather in one step, as the step sample keeps it. */
struct gather_fig {
	uint64_t duration, exposed, compute_wait, queued, call;
	uint8_t cause, timed;
	uint8_t reserved[6];
};

/* A bounded uniform sample of a rank's analysed steps (algorithm R with a
 * fixed seed, as median.h, so a report is reproducible): the step figures
 * of each, and with detail the figures of each of its gathers. The
 * representative step, whose figures the exposure section and the gathers
 * table report together, is chosen among them. */
#define STEP_SAMPLE_SLOTS MEDIAN_SLOTS
struct step_sample {
	uint64_t seen, rng;
	uint32_t ordinal[STEP_SAMPLE_SLOTS];
	uint64_t fig[STEP_SAMPLE_SLOTS][FIG_MAX];
	struct gather_fig *gathers; /* [STEP_SAMPLE_SLOTS][nev] when detail */
};

struct rank_state {
	struct tl_source *src;
	enum rank_mode mode;
	steps_cutter_t *cutter;
	struct comm_roles roles; /* what each communicator carries, once decided */
	int roles_decided;
	uint64_t roled;          /* source events (absolute) whose role is set */
	uint64_t fed;            /* source events (absolute) looked at for the cutter */
	uint64_t filtered_taken; /* events of the data-parallel side consumed by cuts */
	uint64_t *comm_events;   /* [ncomm_events] events seen per communicator slot */
	size_t ncomm_events;
	uint64_t nvtx_seen;      /* the source's step ranges when they were last looked at */
	uint64_t nvtx_gpu_wait;  /* the oldest step's end the GPU intervals must reach, 0 */
	struct steps_cut held;   /* a cut waiting to be analysed */
	int have_held;
	uint64_t last_t1;        /* end of the last NVTX step analysed */
	uint32_t skip_left;      /* options.warmup_steps still to skip */

	/* NVTX steps: the first ones, until the steady state is chosen */
	struct step_summary *early[ANALYZE_EARLY_STEPS];
	unsigned nearly;
	int decided;
	uint64_t tmpl_hash;

	/* the steady-state step and its figures */
	struct phases_result phases;
	size_t nev;
	struct tl_event *tev;    /* [nev] */
	struct ev_info *tinfo;   /* [nev]: phase, names */
	int detail;              /* per-gather figures kept (headline candidate) */
	struct step_sample sample;
	struct median fig[FIG_MAX];
	int exposure_source;

	uint32_t analyzed, warmup, irregular, trailing;
	uint64_t outside_events;
	uint32_t ordinal; /* steps seen so far */

	/* what the trace can vouch for (struct analysis_trust) */
	uint64_t seq_max;        /* highest collective seq among the events taken */
	uint64_t calls_taken;    /* collective calls among them */
	struct seq_range recent[ANALYZE_SEQ_LOOK]; /* seq numbers of the latest events taken */
	unsigned nrecent, recent_at;
	int unmatched_from_loss; /* a gap was met: later events are not matched across ranks (their
	                            per-communicator numbers are shifted by the calls lost) */
	int has_end;             /* its process_end arrived: its records are whole (a process_exit alone
	                            says it was reaped, not that its agent wrote everything) */
	uint64_t seq_end;        /* calls its process_end counted, 0 before one */
	int reaped;              /* a process_exit arrived: wait_status says how it ended */
	int32_t wait_status;
	uint32_t steps_lost, steps_cut;
	struct lost_example {
		uint32_t ordinal;
		uint64_t count, seq_lo, seq_hi;
	} lost_first;            /* the first step left out for lost collectives (count 0: none) */
	uint32_t cut_ordinal;    /* the step left out as cut off (steps_cut > 0) */
	uint64_t ring_dropped, sink_dropped, cupti_dropped, nvtx_dropped; /* its latest drops record */
	int nvtx_event_wait;     /* the oldest NVTX step waits for the event after it (its edge) */
	uint64_t nvtx_events_seen; /* source events when it began to wait */
	struct seq_range summarised[ANALYZE_SEQ_LOOK]; /* seq numbers of summarised steps (--keep summary)
	                                                  not yet passed, in order */
	unsigned nsummarised;
};

/* Why a step is left out (analysis_step_info.excluded). */
enum step_exclusion {
	STEP_CLEAN = 0,
	STEP_LOST = 1, /* its source lost collectives in it or at its edges */
	STEP_CUT = 2,  /* in progress where its source's records stop */
};

struct analyzer {
	uint64_t now_realtime_ns; /* analyzer_set_now: the instant waits in flight are measured to, 0 the trace's end */
	struct analysis_options opt;
	timeline_t *tl;
	ranks_t *ranks;
	struct rank_state **rs; /* parallel to the timeline's sources */
	size_t nrs;
	struct rank_state *last_rs; /* the latest analyze_state_for answer */
	int truncated;
	int finished;
	int32_t min_rank_seen;
	analysis_step_fn on_step;
	void *on_step_ctx;
	size_t pending_max;
	struct analysis_step_event *step_events; /* the step callback's events, reused */
	size_t step_events_cap;
	struct step_summaries kept; /* what a --keep trace left out (analyze.c, keep_records) */
	flight_t *flight;           /* calls in flight: hangs and mismatches (collector/flight.c) */
};


/* How far a step can be trusted, as candidate_step takes it. */
struct step_trust {
	enum step_exclusion why;
	struct lost_example lost; /* STEP_LOST: what is missing */
};

/* analyze.c */
struct rank_state *analyze_state_for(analyzer_t *a, struct tl_source *src);
void analyze_keep_finish(const analyzer_t *a, struct analysis_result *r);
void analyze_summary_free(struct step_summary *s);

/* analyze_summary.c */
int analyze_aggregate(analyzer_t *a, struct rank_state *rs, struct step_summary *s);
int analyze_decide_template(analyzer_t *a, struct rank_state *rs);
int analyze_representative_slot(const struct step_sample *m);
int analyze_summarise(analyzer_t *a, struct rank_state *rs, const struct tl_event *ev, size_t n, uint64_t t0,
		      uint64_t t1, struct step_summary **out);
int analyze_u64_cmp(const void *x, const void *y);
int analyze_wants_detail(const analyzer_t *a, const struct rank_state *rs);

/* analyze_trust.c */
int analyze_check_lost(struct rank_state *rs, size_t n, struct step_trust *t);
void analyze_fill_trust(const analyzer_t *a, const struct rank_state *h, struct analysis_result *r);
uint64_t analyze_source_lost(const struct rank_state *rs);
void analyze_step_exclude(analyzer_t *a, struct rank_state *rs, uint32_t ordinal, const struct step_trust *t,
			  const struct tl_event *ev, size_t n, uint64_t t0, uint64_t t1);
int analyze_step_events(analyzer_t *a, const struct tl_event *ev, const struct ev_info *info, size_t n,
			struct analysis_step_info *si);
struct analysis_step_info analyze_step_info(const struct rank_state *rs, uint32_t ordinal, const struct tl_event *ev,
					    size_t n, uint64_t t0);
void analyze_trust_record(struct rank_state *rs, const struct fss_record_head *rec);

/* analyze_service.c */
int analyze_service(analyzer_t *a, struct rank_state *rs, int final);

/* analyze_structure.c */
void analyze_count_events(const struct tl_event *ev, const struct ev_info *info, size_t n,
			  struct analysis_step_counts *c);
int analyze_fill_buckets(const struct tl_event *ev, const struct ev_info *ti, size_t n, struct analysis_buckets *b);
int analyze_fill_structure(const analyzer_t *a, const struct rank_state *h, struct analysis_result *r);
/* analyze_rank_stopped - 1 when rs's records stop short of its end: no
 * process_end, or (an attached source, which has none) a process_exit that
 * says it died. A source attach let go while it ran has not stopped. */
int analyze_rank_stopped(const struct rank_state *rs);
/* analyze_rank_detached - 1 for an attached source still running when
 * attach let it go: the step it was in is no step of the trace (as a live
 * session's step in progress), not one cut off. */
int analyze_rank_detached(const struct rank_state *rs);
void analyze_note(struct analysis_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int analyze_rank_entry_cmp(const void *x, const void *y);

/* analyze_exposure.c */
void analyze_fill_exposure(const struct rank_state *h, struct analysis_result *r);

/* analyze_finish.c */
int analyze_fill_flight(const analyzer_t *a, struct analysis_result *r);
void analyze_flight_note(struct analysis_result *r);

/* analyze_comms.c */
void analyze_fill_comms(const analyzer_t *a, const struct rank_state *v, struct analysis_result *r);
void analyze_undecided(struct analysis_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
