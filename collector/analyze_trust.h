/*
 * analyze_trust.h - what the trace can vouch for, per rank: collectives
 * lost in or at the edges of a step (gaps in the seq numbers), steps cut
 * off where a source's records stop, the drops, process_end and
 * process_exit records that tell of them; and the result's struct
 * analysis_trust with the notes that say what it cannot vouch for.
 */
#ifndef FSS_COLLECTOR_ANALYZE_TRUST_H
#define FSS_COLLECTOR_ANALYZE_TRUST_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analysis.h"
#include "collector/rank_state.h"
#include "collector/timeline.h"
#include "common/record.h"

/* Calls may reach the trace a little out of seq order (one thread's call
 * entered before another's that was recorded ahead of it): a stretch is
 * checked for lost calls against this many events on either side of it. */
#define ANALYZE_SEQ_LOOK 64

/* Seq numbers of a collective event's calls. */
struct seq_range {
	uint64_t lo, hi;
};

/* What a step left out for lost collectives misses. */
struct lost_example {
	uint32_t ordinal;
	uint64_t count, seq_lo, seq_hi;
};

/* Why a step is left out (analysis_step_info.excluded). */
enum step_exclusion {
	STEP_CLEAN = 0,
	STEP_LOST = 1, /* its source lost collectives in it or at its edges */
	STEP_CUT = 2,  /* in progress where its source's records stop */
};

/* How far a step can be trusted. */
struct step_trust {
	enum step_exclusion why;
	struct lost_example lost; /* STEP_LOST: what is missing */
};

/* What one rank's records vouch for so far. */
struct rank_trust {
	uint64_t seq_max;			   /* highest collective seq among the events taken */
	uint64_t calls_taken;			   /* collective calls among them */
	struct seq_range recent[ANALYZE_SEQ_LOOK]; /* seq numbers of the latest events taken */
	unsigned nrecent, recent_at;
	int unmatched_from_loss; /* a gap was met: later events are not matched across ranks (their
				    per-communicator numbers are shifted by the calls lost) */
	int has_end;		 /* its process_end arrived: its records are whole (a process_exit alone
				    says it was reaped, not that its agent wrote everything) */
	uint64_t seq_end;	 /* calls its process_end counted, 0 before one */
	int reaped;		 /* a process_exit arrived: wait_status says how it ended */
	int32_t wait_status;
	uint32_t steps_lost, steps_cut;
	struct lost_example lost_first; /* the first step left out for lost collectives (count 0: none) */
	uint32_t cut_ordinal;		/* the step left out as cut off (steps_cut > 0) */
	uint64_t ring_dropped, sink_dropped, cupti_dropped, nvtx_dropped; /* its latest drops record */
	struct seq_range summarised[ANALYZE_SEQ_LOOK]; /* seq numbers of summarised steps (--keep summary)
							  not yet passed, in order */
	unsigned nsummarised;
};

/* analyze_trust_take - an event of the rank used (taken from its pending
 * events): its calls are seen, its seq numbers the latest. */
void analyze_trust_take(struct rank_trust *t, const struct tl_event *e);

/*
 * analyze_trust_check - check src's first n pending events (a step, or a
 * stretch outside the steps when out is NULL) for lost collectives; out
 * gets the verdict, the step's ordinal in its example. A rank that lost
 * some is matched across ranks no further: its later calls' numbers on
 * their communicator are shifted by the calls lost. Returns 0 or -ENOMEM.
 */
int analyze_trust_check(struct rank_trust *t, const struct tl_source *src, size_t n, uint32_t ordinal,
			struct step_trust *out);

/* analyze_trust_exclude - count the step `ordinal` left out for why
 * (STEP_LOST or STEP_CUT); the first of each is the one a note names. */
void analyze_trust_exclude(struct rank_trust *t, uint32_t ordinal, const struct step_trust *why);

/* analyze_trust_record - a drops, process_end or process_exit record of
 * src: what it says it lost, how many calls it made, how it ended. */
void analyze_trust_record(struct rank_trust *t, const struct tl_source *src, const struct fss_record_head *rec);

/* analyze_trust_summarised - a --keep summary's step summary record: its
 * calls are seen, left out on purpose (docs/keep.md), not lost. */
void analyze_trust_summarised(struct rank_trust *t, const struct fss_rec_step_summary *r);

/* analyze_trust_keep_last - a collective of a --keep last:N trace: before
 * the first one, the calls are left out on purpose (and the rank's calls are
 * counted from where its trace starts, so not matched across ranks). */
void analyze_trust_keep_last(struct rank_trust *t, uint64_t seq);

/* analyze_trust_lost - collectives src lost: the seq numbers its events
 * (taken, and any still pending) and its process_end account for, less the
 * calls it has. */
uint64_t analyze_trust_lost(const struct rank_trust *t, const struct tl_source *src);

/* analyze_trust_stopped - 1 when src's records stop short of its end: no
 * process_end, or (an attached source, which has none) a process_exit that
 * says it died. A source attach let go while it ran has not stopped. */
int analyze_trust_stopped(const struct rank_trust *t, const struct tl_source *src);

/* analyze_trust_detached - 1 for an attached source still running when
 * attach let it go: the step it was in is no step of the trace (as a live
 * session's step in progress), not one cut off. */
int analyze_trust_detached(const struct rank_trust *t, const struct tl_source *src);

/*
 * analyze_trust_fill - r's trust section over the ranks rs[0..nrs), the
 * headline rank h's own counts (h NULL: none), and the notes that say what
 * the trace cannot vouch for. They come before the other notes: a verdict
 * is read with them.
 */
void analyze_trust_fill(rank_state_t *const *rs, size_t nrs, rank_state_t *h, struct analysis_result *r);

#endif
