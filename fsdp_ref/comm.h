/* fsdp_ref/comm.h: the communication thread.
 *
 * Every collective of a rank is issued from this one thread, in the order
 * the compute thread submits them. The FSDP schedule is deterministic and
 * the same on every rank, so every rank issues the same sequence and
 * blocking collectives cannot deadlock. While the thread is inside a
 * collective (on the CPU: for its whole duration), the compute thread keeps
 * computing; it waits for a result only when it needs it (comm_wait).
 *
 * A request is owned by the caller (typically one per unit per phase,
 * reused every step once complete) and must stay alive until it completes. */
#ifndef FSDP_REF_COMM_H
#define FSDP_REF_COMM_H

#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

#include "fsdp_ref/backend.h"

enum comm_op {
	COMM_ALLGATHER = 0,
	COMM_REDUCE_SCATTER,
	COMM_ALLREDUCE,
	COMM_BROADCAST,
	COMM_ALLGATHER_COALESCED, /* group_size AllGathers inside one ncclGroupStart / ncclGroupEnd */
};

/* Faults a test injects (fsdp_ref --stall-at, --mismatch-at), to make a
 * real job hang or desync at a known collective. */
enum comm_fault_kind {
	COMM_FAULT_STALL = 1, /* stop just before the request's NCCL call and wait for a signal, forever */
	COMM_FAULT_MISMATCH,  /* issue the request's (first) AllGather with count - 1: a smaller
				 collective than the peers', never past the buffers */
};

/* What a fault did, told to the caller just before the NCCL call it
 * concerns: the ground truth a test compares with fsdpscope's diagnosis. */
struct comm_fault_report {
	enum comm_fault_kind kind;
	int step;	     /* the step given to comm_arm_fault */
	ncclComm_t comm;     /* the collective's communicator */
	uint64_t comm_seq;   /* its number on comm: collectives this thread issued on comm, from 1, in issue
				order (each call of a coalesced group counts), the collective's own included */
	enum comm_op op;     /* COMM_ALLGATHER for a call of a COMM_ALLGATHER_COALESCED group */
	size_t count;	     /* the count the request asked for */
	size_t issued_count; /* the count passed to NCCL: count - 1 for a mismatch; count for a stall */
};

/* Called on the communication thread; may write the log and stderr. */
typedef void (*comm_fault_fn)(void *arg, const struct comm_fault_report *r);

/* One AllGather of a COMM_ALLGATHER_COALESCED request. */
struct comm_gather {
	const void *send;
	void *recv;
	size_t count; /* send count */
};

struct comm_request {
	/* set by the submitter */
	enum comm_op op;
	ncclComm_t comm;
	const void *send;
	void *recv;
	size_t count; /* AllGather: send count; ReduceScatter: receive count; AllReduce, Broadcast: count */
	ncclDataType_t dtype;
	int root;     /* Broadcast: the rank that sends */
	const struct comm_gather *group; /* COMM_ALLGATHER_COALESCED: the calls, in order, all in
					    `dtype` on `comm`; they must stay alive until it completes */
	int group_size;
	struct fsdp_event *ready; /* recorded on compute before submit (may be NULL) */
	struct fsdp_event *done;  /* recorded on the comm stream after the call (may be NULL) */
	/* set by the communication thread */
	int result;		  /* 0 or negative errno (an NCCL failure is -EIO) */
	int64_t start_ns, end_ns; /* host time around the NCCL call (CLOCK_MONOTONIC) */
	/* private */
	int state;
	int fault;	/* enum comm_fault_kind given at submit, 0 none */
	int fault_step; /* its step, and whom to tell (comm_arm_fault) */
	comm_fault_fn fault_report;
	void *fault_arg;
	struct comm_request *next;
};

struct comm_thread;

/* Arm one fault: the first request submitted after this call (a stall), or
 * the first AllGather request (a mismatch), is given the fault, and
 * `report` is called with `arg` just before the NCCL call. The trainer arms
 * at the start of `step`, before the step submits anything, so the fault
 * lands on that step's first collective (first AllGather). One fault of
 * each kind may be armed at a time; arming a kind again replaces it. */
void comm_arm_fault(struct comm_thread *ct, enum comm_fault_kind kind, int step, comm_fault_fn report, void *arg);

/* Start the thread for backend `be` (it calls be->thread_init first).
 * NULL on failure. */
struct comm_thread *comm_thread_new(const struct fsdp_backend *be);

/* Finish the queued requests, stop and join the thread, free it. */
void comm_thread_free(struct comm_thread *ct);

/* Queue `req` (FIFO). 0, or -EBUSY if req is still pending. */
int comm_submit(struct comm_thread *ct, struct comm_request *req);

/* Block until `req` has been issued (and, on the CPU, completed); returns
 * req->result. A request never submitted returns 0 at once. */
int comm_wait(struct comm_thread *ct, struct comm_request *req);

/* 1 if `req` has been issued (or was never submitted), 0 if still queued or
 * in the NCCL call. Does not block. */
int comm_test(struct comm_thread *ct, struct comm_request *req);

/* Monotonic clock in nanoseconds. */
int64_t comm_now_ns(void);

/* Block until `req` has been issued, then make compute wait for `done`
 * (recorded on the comm stream after the call; NULL: no device wait).
 * Returns req's result, or the backend's error; *waited_ns receives how long
 * the caller was blocked (the exposed part of the collective). */
int comm_wait_compute(struct comm_thread *ct, struct comm_request *req, struct fsdp_event *done, int64_t *waited_ns);

/* The waits of one step: their sum, and each one in the order waited for
 * (the log's gather_wait_ns and gather_waits_ns). */
struct comm_waits {
	int64_t total_ns;
	int count;     /* entries of each */
	int64_t *each; /* [count] (NULL when none) */
	size_t cap;
};

/* Add one wait. Without memory for the entry the sum still counts it. */
void comm_waits_add(struct comm_waits *w, int64_t ns);
/* Forget the waits (keeps the storage). */
void comm_waits_reset(struct comm_waits *w);
/* Free the storage. */
void comm_waits_free(struct comm_waits *w);

#endif /* FSDP_REF_COMM_H */
