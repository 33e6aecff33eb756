/*
 * live.h - the one live state of a session (docs/architecture.md, "The data
 * flow"; docs/collect.md, "While it runs").
 *
 * A session (cli/session.c) feeds its live state with every record it
 * writes to its trace (live_on_record), with every step the streaming
 * analysis completes (live_on_step, the analyzer's step callback), and now
 * and then with a diagnosis of what it has so far (live_set_diagnosis: the
 * analysis result and the rules' findings). The dashboard, /metrics and the
 * viewer endpoint never read the live state itself: the session publishes
 * copies of its view on a board (live_publish), and readers on other
 * threads take the latest copy (live_board_acquire). A reader holds a copy
 * as long as it likes; it never blocks the session for longer than a
 * pointer swap.
 *
 * Memory is bounded: per rank the last step and a window of recent steps,
 * per job a window of recent steps and whole-run figures that do not grow
 * with the job's length.
 */
#ifndef FSS_COLLECTOR_LIVE_H
#define FSS_COLLECTOR_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analysis.h"
#include "collector/analyze.h"
#include "common/record.h"

/* Steps kept per rank for the window of recent steps. */
#define LIVE_WINDOW 64
/* Events of a rank's last step kept for the time strip. */
#define LIVE_STRIP_MAX 512
/* Communicators kept per rank for collective sequence numbers. */
#define LIVE_COMMS_MAX 16
/* Findings kept, and the bytes of their texts: room for every rule's
 * message, evidence and three fixes on today's jobs (the longest fix about
 * 1.3 kB, evidence 1 kB); a longer one is cut with a mark (text_fit). */
#define LIVE_FINDINGS_MAX 16
#define LIVE_TEXT_BYTES 512
#define LIVE_EVIDENCE_BYTES 2048
#define LIVE_FIX_BYTES 4096
/* Forward gathers kept for the gather sequence. */
#define LIVE_GATHERS_MAX 512
/* Bytes of a rank's host and command names. */
#define LIVE_NAME_BYTES 64

/* One step of one rank, as the window keeps it. */
struct live_step {
	uint32_t ordinal;              /* steps of the rank before it, warm-up included */
	int excluded;                  /* as analysis_step_info.excluded: 0 analysed */
	uint64_t start_ns;             /* host CLOCK_MONOTONIC of the rank */
	uint64_t step_ns;
	uint32_t allgathers;           /* AllGather events of the step */
	uint32_t microbatches;         /* 0 when not known yet */
	uint64_t allgather_ns;
	uint64_t exposed_allgather_ns;
	uint64_t compute_wait_ns;
	uint64_t compute_ns;
	uint64_t exposed_comm_ns;
};

/* Whole-run figures of one rank: running sums and extremes over every analysed step. */
struct live_totals {
	uint64_t steps;                /* analysed steps */
	uint64_t steps_excluded;       /* steps left out (lost collectives, cut) */
	uint64_t step_ns_sum, step_ns_min, step_ns_max;
	uint64_t allgathers_sum;
	uint64_t exposed_allgather_ns_sum;
	uint64_t compute_wait_ns_sum;
	uint64_t compute_ns_sum;
};

/* One event of a rank's last completed step, for a time strip. */
struct live_event {
	uint64_t start_ns, end_ns;     /* host clock of the rank */
	uint8_t op;                    /* enum fss_coll_op */
	uint8_t phase;                 /* enum analysis_phase, 0 when not known */
	uint16_t calls;                /* calls of a group, 1 for a single call */
	uint32_t unit;                 /* forward unit index, UINT32_MAX when none */
	uint64_t bytes;
	uint64_t exposed_ns;           /* with no compute under it */
};

/* A communicator of one rank and how far it got. */
struct live_comm {
	uint64_t id_hash;              /* fss_rec_comm.id_hash: the same on every rank of the communicator */
	uint32_t nranks;
	int32_t rank;                  /* this process's rank in it */
	uint8_t role;                  /* enum analysis_comm_role, 0 until diagnosed */
	uint8_t reserved[7];
	uint64_t collectives;          /* collective calls recorded on it */
	uint64_t last_seq;             /* fss_rec_collective.seq of the latest (per source) */
	uint64_t entered;              /* comm_seq of the latest collective the rank entered on it (its enter
	                                  record; its collective record for a source without enter records):
	                                  the collectives it issued there, from 1 in issue order */
	uint64_t left;                 /* comm_seq of the latest it returned from (its collective record) */
};

/* One rank (one source of the trace). */
struct live_rank {
	int32_t rank;                  /* the per-source layer's rank, -1 while unknown */
	uint32_t source;               /* source number in the session's trace */
	uint32_t pid;
	int ended;                     /* process_end or process_exit seen */
	uint64_t records;              /* records of this source */
	uint64_t dropped;              /* records it lost (ring + sink + CUPTI + NVTX) */
	uint64_t collectives_missing;  /* calls made and not recorded (sequence gaps) */
	uint64_t collectives;          /* collective records */
	uint64_t last_ns;              /* latest host time in any of its records */
	int64_t lateness_ns;           /* how late it enters collectives, per step: the last diagnosis'
	                                  analysis_rank.late_ns_per_step (what the other ranks waited
	                                  for it), 0 when not known */
	struct live_step last;         /* last completed step (ordinal 0, step_ns 0: none yet) */
	struct live_totals totals;
	size_t nwindow;                /* steps in window[], oldest first */
	struct live_step window[LIVE_WINDOW];
	size_t ncomms;
	struct live_comm comms[LIVE_COMMS_MAX];
	size_t nstrip;                 /* events of the last step, issue order */
	struct live_event strip[LIVE_STRIP_MAX];
	char host[LIVE_NAME_BYTES];    /* its hello's host name, "" until known */
	char command[LIVE_NAME_BYTES]; /* its hello's command (argv[0]), "" until known */
	int attached;                  /* observed by fsdpscope attach (hello path uprobe) without CUPTI: its
	                                  exposure, compute wait and compute are not measured (0 in its steps):
	                                  readers show n/a, /metrics leaves them out */
	int32_t rank_from;             /* enum source_rank_from of rank (a guess: source_rank_is_guess) */
};

/* A finding so far, as the rules gave it on the latest diagnosis. */
struct live_finding {
	char rule[32];                 /* rule id: "wrap-too-fine" */
	int severity;                  /* enum rule_severity */
	char title[128];               /* the rule's title; "" from a session that did not send one */
	char message[LIVE_TEXT_BYTES];
	char evidence[LIVE_EVIDENCE_BYTES];
	char fix[LIVE_FIX_BYTES];      /* the fix as the rule words it (FSDP2 first), "" none; what does not
	                                  fit is cut with a mark (text_fit) */
};

/* One forward gather of the headline rank's representative step. */
struct live_gather {
	uint32_t unit;                 /* repeating-unit copy it belongs to, UINT32_MAX for a root gather */
	uint32_t nranks;               /* ranks of its communicator: bytes x nranks are gathered */
	uint64_t bytes;                /* per rank (the send size) */
	uint64_t exposed_ns;
	char name[ANALYSIS_NAME_MAX];  /* NVTX module name, "" when unknown */
};

/* The job: what the latest diagnosis says, plus the session's counters. */
struct live_job {
	uint64_t records_total;        /* records the session wrote */
	uint64_t records_dropped_total; /* sum of the ranks' dropped */
	uint64_t diagnoses;            /* live_set_diagnosis calls so far (0: none yet) */
	int diagnosed;                 /* a diagnosis is there */
	int verdict;                   /* enum analysis_verdict of the latest diagnosis */
	int undecided_reason;          /* enum analysis_undecided */
	uint32_t repeating_units;      /* L */
	uint32_t gathers_per_unit;     /* k */
	uint32_t allgathers_per_step;  /* headline rank, per step */
	uint32_t microbatches;
	int reshard;                   /* enum analysis_reshard */
	uint64_t exposed_allgather_ns_per_step;
	uint64_t compute_wait_ns_per_step;
	size_t nfindings;
	struct live_finding findings[LIVE_FINDINGS_MAX];
	size_t ngathers;
	struct live_gather gathers[LIVE_GATHERS_MAX];
	struct analysis_flight flight; /* the latest diagnosis' calls in flight: hangs (waits past the timeout)
	                                  and mismatches; all 0 before the first diagnosis */
	uint32_t sources_attached;     /* the latest diagnosis' sources observed by fsdpscope attach */
	int exposure_source;           /* enum analysis_exposure_source of the latest diagnosis: with attached
	                                  sources and none, exposed_allgather_ns_per_step and
	                                  compute_wait_ns_per_step are not measured (n/a, left out of /metrics) */
};

/* What readers see: one consistent copy. */
struct live_view {
	uint64_t generation;           /* rises with every publish */
	uint64_t at_ns;                /* CLOCK_MONOTONIC of the collector when published */
	uint64_t at_realtime_ns;
	struct live_job job;
	size_t nranks;                 /* ranks[], by rank (unknown ranks last, by source) */
	struct live_rank *ranks;
};

typedef struct live live_t;

/* live_new - an empty live state. 0 or -ENOMEM. */
int live_new(live_t **out);
void live_free(live_t *l);

/* live_on_record - a record as written to the session's trace (head.source
 * is the trace's source number); `src` is the per-source layer's view of
 * that source (rank, drops, ends), or NULL when the record belongs to no
 * source. 0 or -ENOMEM. */
int live_on_record(live_t *l, const struct fss_record_head *rec, const struct source *src);

/* live_on_step - the analyzer's step callback (analyzer_on_step(a,
 * live_step_cb, l) passes it straight through). */
void live_on_step(live_t *l, const struct analysis_step_info *step);
void live_step_cb(void *live, const struct analysis_step_info *step);

/* live_set_diagnosis - the latest diagnosis of the session: a result the
 * analyzer built of what it had (analyzer_snapshot) and the rules' findings
 * on it, copied as plain data. findings[] holds nfindings entries. */
void live_set_diagnosis(live_t *l, const struct analysis_result *r, const struct live_finding *findings,
			size_t nfindings);

/* live_in_flight - some rank is inside a collective now: it entered one on
 * a communicator it has not returned from (entered > left). A session keeps
 * diagnosing while this holds, steps or not: a hang completes no step. */
int live_in_flight(const live_t *l);

/* live_memory - the bytes the live state holds: it grows with the sources
 * (processes) it has seen, never with steps or records. */
size_t live_memory(const live_t *l);

/* ---- the board: copies of the view for readers on other threads ---------- */

typedef struct live_board live_board_t;

int live_board_new(live_board_t **out);
/* live_board_free - free the board; every copy acquired must have been released. */
void live_board_free(live_board_t *b);

/* live_publish - put a copy of l's view on the board (the session's thread).
 * 0 or -ENOMEM (the previous copy stays). */
int live_publish(live_t *l, live_board_t *b);

/* live_board_put - put `v` on the board, taking it: v and v->ranks were
 * malloc'd and are freed (live_view_free) once no reader holds them. Its
 * generation is set to the board's next. live_publish uses it; a test
 * builds a view by hand. 0 always. */
int live_board_put(live_board_t *b, struct live_view *v);
void live_view_free(struct live_view *v);

/* live_board_acquire - the latest copy (NULL before the first publish),
 * held until live_board_release; any thread. */
const struct live_view *live_board_acquire(live_board_t *b);
void live_board_release(live_board_t *b, const struct live_view *v);

/* live_board_wait - wait up to timeout_ms (-1: until a publish or close)
 * for a generation newer than `seen`; returns the newest generation (==
 * seen on timeout). */
uint64_t live_board_wait(live_board_t *b, uint64_t seen, int timeout_ms);

/* live_board_close - wake every waiter for good (the session ends). */
void live_board_close(live_board_t *b);
int live_board_closed(live_board_t *b);

#endif
