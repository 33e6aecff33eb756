/*
 * flight_state.h - the state behind a flight_t, shared by the files that
 * feed it and read it (flight.c, flight_calls.c, flight_gpu.c,
 * flight_mismatch.c, flight_hang.c); nothing outside collector/flight*
 * includes it.
 *
 * State, all of it bounded:
 *   per source:  its clock (CLOCK_MONOTONIC -> CLOCK_REALTIME offset, from
 *                the hello and the latest FSS_CLOCK_REALTIME anchor), how it
 *                ended, a window of recent seq numbers (seq -> communicator,
 *                comm_seq), the synchronizes it is inside, what CUPTI has
 *                reported (latest activity, kernels not yet tied);
 *   per source and communicator (struct fl_rank_comm): entered, left, the
 *                last completed call, the open group, the highest comm_seq
 *                whose NCCL kernel completed, a ring of its recent calls;
 *   per communicator (struct fl_comm, by id hash): its members, a window of
 *                comm_seq slots with the distinct signatures issued there,
 *                its first mismatch once one slot left the window.
 * Filling the result reads this state only.
 */
#ifndef FSS_COLLECTOR_FLIGHT_STATE_H
#define FSS_COLLECTOR_FLIGHT_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analysis.h"
#include "collector/flight.h"
#include "collector/source.h"

/* Recent seq numbers per source: an enter record meets its collective
 * record, and a kernel its call, through this window. */
#define FL_SEQ_WINDOW 1024u
/* Recent calls per source and communicator, by comm_seq. */
#define FL_CALL_RING 64u
/* comm_seq numbers per communicator whose signatures are being compared: a
 * rank more than this far ahead of the slowest one retires the slot. */
#define FL_SIG_WINDOW 64u
/* Distinct signatures kept per comm_seq; more count as `others`. */
#define FL_SIG_GROUPS 4u
/* Synchronizes one source may be inside at once (one per thread). */
#define FL_SYNCS_MAX 8u
/* NCCL kernels (and correlations) waiting to be tied, per source. */
#define FL_UNTIED_MAX 64u
/* Source ids below this are found through a direct index. */
#define FL_DIRECT_MAX (1u << 20)

/* fl_seq.flags */
#define FL_SEQ_SIGNED 1u    /* its signature went to the communicator's window */
#define FL_SEQ_UNCERTAIN 2u /* placed while calls numbered before it were missing: its comm_seq may be off */

struct fl_seq {
	uint64_t seq; /* 0: empty */
	uint64_t comm_seq;
	uint32_t rc; /* index into the source's rank_comms */
	uint32_t group_id;
	uint32_t flags;
	uint32_t reserved;
};

/* One call of a rank on a communicator. */
struct fl_call {
	uint64_t comm_seq; /* 0: empty slot */
	uint64_t seq;
	uint64_t enter_ns; /* host CLOCK_MONOTONIC */
	uint64_t count;
	uint32_t group_id;
	uint8_t op, dtype;
	uint8_t returned;  /* its collective record came */
	uint8_t no_kernel; /* launches no NCCL kernel: count 0, or it failed */
};

struct fl_rank_comm {
	uint64_t handle, id_hash;
	uint32_t comm; /* index into flight.comms */
	int32_t rank, nranks;
	uint32_t open_group;   /* group whose calls returned at enqueue, its ncclGroupEnd not yet */
	uint64_t issued;       /* comm_seq of the latest call counted */
	uint64_t entered;      /* highest comm_seq entered */
	uint64_t left;	       /* highest comm_seq returned (a group's calls: at its group record) */
	uint64_t done_exit_ns; /* host time `left` returned */
	uint8_t done_op;       /* its op */
	uint8_t reserved[3];
	int32_t failed_result; /* ncclResult_t of call `failed` */
	uint64_t failed;       /* the call that returned an NCCL error after the longest wait (its enter to its
				  return), 0 none: a wait that the job's own timeout (the stand-in's, NCCL's, the
				  watchdog's abort) ended; a communicator that failed stays failed, so later calls
				  fail at once and do not replace it */
	uint64_t failed_enter_ns, failed_exit_ns; /* its host times */
	uint64_t group_hi;		    /* highest comm_seq of the open group */
	uint64_t gpu_done;		    /* highest comm_seq whose NCCL kernel CUPTI reported */
	uint64_t sync_n;		    /* `left` when the oldest open synchronize was entered */
	struct fl_call calls[FL_CALL_RING]; /* by comm_seq % FL_CALL_RING */
};

struct fl_sync {
	uint32_t sync_id;
	uint32_t reserved;
	uint64_t enter_ns;
};

struct fl_untied {
	uint32_t corr; /* CUPTI correlation id, 0 empty */
	uint32_t reserved;
	uint64_t seq; /* correlations: the collective; kernels: 0 */
};

struct fl_source {
	const struct source *src;
	uint32_t id;
	int has_hello;
	int64_t rt_offset;	 /* CLOCK_REALTIME - CLOCK_MONOTONIC */
	int ended;		 /* process_end or process_exit */
	uint64_t end_ns;	 /* host time it ended */
	int has_enter, has_gpu;	 /* enter records; GPU intervals */
	int cupti_tied;		 /* an NCCL kernel was tied to one of its calls */
	uint64_t seen_seqs;	 /* calls with a seq placed */
	int numbers_off;	 /* --keep summary left calls out: its comm_seq numbers count what the trace
				    holds, and are not compared */
	uint64_t gpu_latest_end; /* latest end of any GPU activity, host base */
	uint64_t untied_start;	 /* latest start of an NCCL kernel not tied to a call, host base */
	struct fl_rank_comm *rcs;
	size_t nrcs, caprcs;
	size_t last_rc;
	struct fl_seq seqs[FL_SEQ_WINDOW];
	struct fl_sync syncs[FL_SYNCS_MAX];
	uint32_t nsyncs;
	uint32_t untied_at, corr_at;
	struct fl_untied untied[FL_UNTIED_MAX]; /* kernels with no seq yet */
	struct fl_untied corrs[FL_UNTIED_MAX];	/* correlation records no kernel used yet */
	uint64_t stopped_rt; /* CLOCK_REALTIME by which it had stopped without saying so (a later world
				started, flight_set_stopped), 0 not known */
};

/* One rank's place in the signature of a comm_seq. */
struct fl_sig_group {
	struct analysis_signature sig;
	uint32_t n;
	uint32_t kept; /* ranks[] used */
	int32_t ranks[ANALYSIS_FLIGHT_RANKS_MAX];
	int32_t min_rank;
	uint32_t min_rank_source; /* trace source of min_rank */
};

struct fl_slot {
	uint64_t comm_seq; /* 0: empty */
	uint64_t first_rt; /* CLOCK_REALTIME of its first report */
	uint32_t ngroups, others;
	struct fl_sig_group g[FL_SIG_GROUPS];
};

struct fl_member {
	uint32_t source; /* index into flight.srcs */
	uint32_t rc;
};

struct fl_comm {
	uint64_t id_hash;
	int32_t nranks;
	uint32_t reserved;
	struct fl_member *members;
	size_t nmembers, capmembers;
	uint64_t p2p_from;     /* lowest comm_seq of a Send / Recv on it, 0 none: later numbers are not compared */
	struct fl_slot *slots; /* [FL_SIG_WINDOW], made at its first report */
	uint64_t mismatched;   /* slots retired with a mismatch */
	int has_first;
	uint64_t first_rt;
	struct analysis_mismatch first; /* the earliest retired mismatch */
};

struct flight {
	struct fl_source **srcs;
	size_t nsrcs, capsrcs;
	struct fl_source **direct;
	size_t ndirect;
	struct fl_source *last;
	struct fl_comm *comms;
	size_t ncomms, capcomms;
	size_t last_comm;
};

/* fl_to_rt - host CLOCK_MONOTONIC mono of source fs on CLOCK_REALTIME (0 stays 0). */
static inline uint64_t fl_to_rt(const struct fl_source *fs, uint64_t mono)
{
	return mono ? mono + (uint64_t)fs->rt_offset : 0; /* wraps: two's complement */
}

/* fl_call_at - call n of rc while its ring still holds it, else NULL. */
static inline const struct fl_call *fl_call_at(const struct fl_rank_comm *rc, uint64_t n)
{
	const struct fl_call *c = &rc->calls[n % FL_CALL_RING];

	return c->comm_seq == n ? c : NULL;
}

#endif
