/*
 * analysis_flight.h - the calls in flight of an analysis result
 * (analysis_result.flight, filled by collector/flight.c; docs/hangs.md):
 * hangs, how their waits stand, and mismatches. Included by
 * collector/analysis.h.
 */
#ifndef FSS_COLLECTOR_ANALYSIS_FLIGHT_H
#define FSS_COLLECTOR_ANALYSIS_FLIGHT_H

#include <stdint.h>

/* Calls in flight (collector/flight.c, docs/hangs.md): what a trace, or a
 * live session now, says of the collectives each rank is inside. A
 * collective is named by its communicator (id hash, the same on every
 * rank) and its number on that communicator: comm_seq, from 1, in each
 * rank's issue order (PyTorch Flight Recorder's sequence id per process
 * group, NCCL RAS's per-communicator collective count). */
#define ANALYSIS_DEFAULT_HANG_TIMEOUT_NS (60ull * 1000000000ull) /* --hang-timeout 60 */
#define ANALYSIS_HANGS_MAX 4
#define ANALYSIS_MISMATCHES_MAX 4
#define ANALYSIS_FLIGHT_RANKS_MAX 32 /* ranks listed per list; the counts beside them say how many */

/* How a rank is known to wait in a collective. */
enum analysis_wait_evidence {
	ANALYSIS_WAIT_NONE = 0,
	ANALYSIS_WAIT_HOST = 1, /* entered (enter record), not returned: a host that blocks in the call (the
	                           CPU stand-in; NCCL's blocking mode; a full launch queue) */
	ANALYSIS_WAIT_GPU = 2,  /* returned at enqueue, and its NCCL kernel not completed while CUPTI reported
	                           later activity of the source (CUPTI delivers a kernel when it ends) */
	ANALYSIS_WAIT_SYNC = 3, /* returned at enqueue, not known complete on the GPU, and the host entered a
	                           stream / event / device synchronize after it and has not returned */
};

/* How a waiting rank's wait stands (docs/hangs.md, "How a hang ends"). A
 * wait that ended after the timeout stays a hang: the job's own timeout, or
 * its death, ended it, not the missing rank's arrival. */
enum analysis_wait_end {
	ANALYSIS_WAIT_ON = 0,      /* still waiting (as of now) */
	ANALYSIS_WAIT_GAVE_UP = 1, /* the call returned an NCCL error (result): NCCL's, the stand-in's or the
	                              watchdog's timeout ended the wait */
	ANALYSIS_WAIT_DIED = 2,    /* its process ended inside the call (process_end, process_exit, or stopped
	                              when a later world started) */
};

/* A rank in a hang: one that waits, or one that has not entered. */
struct analysis_flight_rank {
	int32_t rank;        /* its rank in the communicator */
	int32_t global_rank; /* the source's rank (analysis_rank.rank) */
	uint32_t source;     /* trace source id: host, pid and command in result->sources */
	uint32_t pid;
	uint64_t since_ns;   /* waiting: how long it has waited (now - its enter / launch); missing: how
	                        long ago its last completed collective on the communicator returned */
	uint64_t last_seq;   /* missing: comm_seq of the last collective it completed on the communicator
	                        (0: none); waiting: comm_seq (N) */
	uint8_t last_op;     /* enum fss_coll_op of that collective, 0 */
	uint8_t evidence;    /* waiting: enum analysis_wait_evidence; missing: how it is itself waiting in a
	                        collective of another communicator (it is blocked there, not the cause), 0 */
	uint8_t end;         /* waiting: enum analysis_wait_end (since_ns is then the wait to that end); 0 */
	uint8_t late;	     /* missing: 1 when it entered the collective only after the waiting ranks' waits
				had ended (they gave up or died): too late, the collective never ran; its
				last_seq is then N - 1 and since_ns 0 */
	int32_t result;      /* waiting, end ANALYSIS_WAIT_GAVE_UP: the call's ncclResult_t; 0 */
};

/* collective-hang: ranks waiting in collective comm_seq of a communicator
 * for longer than the timeout while others have not entered it (or, with
 * nmissing 0, every rank entered and none has come out: ndied of them
 * because their process ended inside it). */
struct analysis_hang {
	uint64_t comm_id;     /* the communicator's id hash */
	uint64_t comm_seq;    /* N */
	uint64_t count;       /* the waiting ranks' count argument */
	uint64_t waited_ns;   /* the longest wait among the waiting ranks */
	int32_t nranks;       /* ranks in the communicator */
	uint8_t op, dtype;    /* the waiting ranks' collective */
	uint8_t cascade;      /* 1: every missing rank is itself waiting in another communicator's collective:
	                         this hang follows from another (hangs[] lists the others first) */
	uint8_t ended;        /* enum analysis_wait_end: ANALYSIS_WAIT_ON while a listed rank still waits; once
	                         every one's wait ended, GAVE_UP when one of them gave up, else DIED. An ended
	                         hang is still a hang: the job's timeout or death ended it, no rank arrived */
	uint32_t nwaiting, nmissing; /* ranks in each list; the arrays hold the first ANALYSIS_FLIGHT_RANKS_MAX */
	uint32_t ndied;              /* ranks that entered it and whose process ended inside it sooner than the
	                                timeout (a crash in the call): the waiting ranks wait for them */
	uint32_t reserved2;
	struct analysis_flight_rank waiting[ANALYSIS_FLIGHT_RANKS_MAX];
	struct analysis_flight_rank missing[ANALYSIS_FLIGHT_RANKS_MAX];
	struct analysis_flight_rank died[ANALYSIS_FLIGHT_RANKS_MAX]; /* since_ns: how long it was inside until its
	                                                                end; last_seq N; end ANALYSIS_WAIT_DIED */
};

/* What a rank issued as one collective: what must agree across ranks. */
struct analysis_signature {
	uint64_t count;  /* count argument (per rank for AllGather / ReduceScatter) */
	int32_t root;    /* root of Broadcast / Reduce / Gather / Scatter, -1 */
	uint8_t op;      /* enum fss_coll_op */
	uint8_t dtype;   /* enum fss_dtype */
	uint8_t redop;   /* enum fss_redop */
	uint8_t reserved;
};

/* collective-mismatch: ranks of one communicator issued different
 * collectives as its comm_seq-th: signature a (the one most ranks issued,
 * ties to the lowest rank's) and b (the first other one), with the ranks of
 * each. */
struct analysis_mismatch {
	uint64_t comm_id;
	uint64_t comm_seq;
	int32_t nranks;
	uint32_t na, nb;    /* ranks that issued a, b */
	uint32_t others;    /* ranks that issued a third (or further) signature */
	struct analysis_signature a, b;
	int32_t a_ranks[ANALYSIS_FLIGHT_RANKS_MAX]; /* their ranks in the communicator, the first ones */
	int32_t b_ranks[ANALYSIS_FLIGHT_RANKS_MAX];
	uint32_t b_source;  /* trace source of the first rank of b */
	uint32_t reserved;
};

struct analysis_flight {
	uint64_t timeout_ns;     /* as used (options.hang_timeout_ns) */
	uint64_t now_realtime_ns;/* the instant waits are measured to (CLOCK_REALTIME): the session's clock
	                            live; the trace's last record (result->sources' last_realtime_ns, or a
	                            process_exit) post mortem */
	uint32_t sources_enter;  /* sources with enter records (FSS_FEATURE_ENTER) */
	uint32_t sources_cupti;  /* sources with GPU intervals (the GPU evidence) */
	uint32_t in_flight;      /* collectives some rank is inside now (entered, not known complete) */
	uint32_t nhangs;         /* hangs[] used */
	uint32_t hangs_total;    /* hangs found, also beyond hangs[] */
	uint32_t nmismatches;    /* mismatches[] used */
	uint32_t mismatches_total;
	uint32_t reserved;
	uint64_t mismatched_collectives; /* (communicator, comm_seq) pairs whose ranks disagree, all of them */
	struct analysis_hang hangs[ANALYSIS_HANGS_MAX];          /* hangs with a rank that is not itself waiting
	                                                            first (the cause), then cascades; longest
	                                                            wait first within each */
	struct analysis_mismatch mismatches[ANALYSIS_MISMATCHES_MAX]; /* earliest first */
};

#endif
