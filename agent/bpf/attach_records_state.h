/*
 * attach_records_state.h - the state of attach_records (processes, their
 * threads, communicators and held records; the classes of the decision),
 * shared by its files: attach_records.c (processes, output, events),
 * attach_calls.c (events become records), attach_infer.c (identity, rank
 * and nranks of communicators made before the attach), attach_first_call.c
 * (their calls numbered alike on every rank). Internal: the API is
 * attach_records.h.
 */
#ifndef FSS_AGENT_BPF_ATTACH_RECORDS_STATE_H
#define FSS_AGENT_BPF_ATTACH_RECORDS_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "agent/bpf/attach.h"
#include "agent/bpf/attach_records.h"
#include "common/record.h"

#define STACK_MAX 8u /* NCCL calls one thread is inside at once (its own nested calls) */
/* Calls of an undecided communicator kept in order, to number them alike on
 * every rank (fss_rec_comm.first_call): two windows, so that ranks that came
 * in a window apart still overlap. */
#define ORDER_MAX (2u * ATTACH_RECORDS_WINDOW)

/* One kind of call on a communicator: what is the same on every rank. */
struct sig {
	uint64_t count;
	int32_t root;
	uint8_t op, dtype, redop, pad;
	uint32_t n; /* calls of this kind */
};

enum comm_state {
	COMM_DECIDED = 0, /* its record went out, or waits only for the records before it */
	COMM_OBSERVED,	  /* first seen in use: identity undecided */
	COMM_SPLIT,	  /* made by a split or shrink: nranks / rank (and id_hash if the parent is undecided) */
};

struct comm {
	uint64_t handle;
	int state;		 /* enum comm_state */
	int alive;		 /* not destroyed: found by its handle */
	int ready;		 /* OBSERVED / SPLIT with enough calls to decide */
	struct fss_rec_comm rec; /* what it is (OBSERVED / SPLIT: filled at the decision) */
	uint32_t splits;	 /* splits and shrinks made from it */
	/* undecided: */
	size_t *patch; /* queue offsets of its records still to fill (the first is its own) */
	size_t npatch, patch_cap;
	uint64_t calls;		  /* calls on it */
	uint64_t first_proc_call; /* the process's calls before its first */
	struct sig *sigs;
	size_t nsigs, sigs_cap;
	uint64_t *order;    /* its first ORDER_MAX calls' signatures, in call order */
	uint64_t *order_ns; /* and when each was entered */
	size_t norder;
	uint32_t gathers, gathers_inplace;
	int64_t inplace_rank; /* -1 none yet, -2 in-place offsets disagree */
	/* split / shrink: */
	size_t parent; /* index of the parent in the process's comms */
	uint64_t split_no;
	int32_t parent_rank_key; /* the parent rank, for the order of equal keys */
	/* decided: */
	int cls; /* class index, -1 */
	uint32_t instance;
};

struct frame {
	struct attach_event ev; /* the entry */
	uint64_t seq;		/* collectives: its seq */
	int nested;		/* an NCCL call inside an NCCL call: not recorded */
	uint32_t group_id;	/* at the entry */
	uint16_t group_depth;
};

struct thread {
	uint32_t tid;
	uint32_t depth; /* frames */
	struct frame stack[STACK_MAX];
	int group_depth;
	uint32_t group_id, group_calls;
	uint64_t group_start_ns;
};

struct proc {
	struct attach_process info;
	char *command, *host;
	int exited;
	uint64_t seq;
	uint64_t calls;
	uint32_t group_ids;
	struct thread *threads;
	size_t nthreads, threads_cap;
	struct comm *comms;
	size_t ncomms, comms_cap;
	unsigned char *q; /* held records, [qhead, qlen) */
	size_t qhead, qlen, qcap;
	uint64_t held;
	uint64_t init_all_calls;
};

struct member {
	size_t proc, comm;
};

struct cls {
	uint32_t ordinal;
	uint32_t rank_bit; /* FSS_COMM_INFER_RANK_* its members' ranks came from */
	int env_kind;	   /* rank from the environment: 0 RANK, 1 SLURM_PROCID, 2 OMPI */
	struct sig *sigs;  /* its first member's calls */
	size_t nsigs;
	uint64_t sig_calls;
	struct member *members;
	size_t nmembers, members_cap;
	uint32_t ninstances;
	int32_t *inst_nranks; /* per instance */
	uint64_t *inst_hash;
	/* per instance: the calls of its first member in order (then their
	 * times), and the number its first call got: what a later member is
	 * numbered against */
	uint64_t **inst_order;
	size_t *inst_norder;
	uint64_t *inst_first;
};

struct attach_records {
	attach_record_fn fn;
	void *ctx;
	struct proc *procs;
	size_t nprocs, procs_cap;
	struct cls *classes;
	size_t nclasses, classes_cap;
	struct attach_records_stats st;
	int deciding;
};

/* attach_records_grow - make room for need elements of size bytes in *v
 * (capacity *cap, doubled): 0 or -ENOMEM (*v untouched). */
int attach_records_grow(void **v, size_t *cap, size_t need, size_t size);

/* attach_records_comm_find - p's live communicator of that handle, or NULL. */
struct comm *attach_records_comm_find(struct proc *p, uint64_t handle);

/* attach_records_out - a record of p, in p's order: sent at once, or
 * queued behind p's held records (holding more than
 * ATTACH_RECORDS_HOLD_MAX forces a decision). 0, -ENOMEM or fn's error. */
int attach_records_out(attach_records_t *a, struct proc *p, const void *rec);

/* attach_records_out_patched - a record of undecided c that the decision
 * fills in: queued, its offset remembered in c->patch. 0 or -ENOMEM. */
int attach_records_out_patched(struct proc *p, struct comm *c, const void *rec);

/* attach_records_queue_flush - send p's held records up to the first one
 * of a communicator still undecided. 0 or fn's error. */
int attach_records_queue_flush(attach_records_t *a, struct proc *p);

#endif
