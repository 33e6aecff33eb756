/*
 * attach_calls.h - the records of one process's outermost NCCL calls
 * (attach_calls.c), sent with attach_records_out in the process's order.
 */
#ifndef FSS_AGENT_BPF_ATTACH_CALLS_H
#define FSS_AGENT_BPF_ATTACH_CALLS_H

#include "agent/bpf/attach.h"
#include "agent/bpf/attach_records_state.h"

/*
 * attach_calls_enter - an outermost call was entered (f on t's stack): a
 * collective gets its seq and its enter record, its communicator is noted
 * (first seen: an OBSERVED record held for the decision), and a decision
 * runs once every undecided communicator is ready. Other calls: nothing
 * until their exit. 0, -ENOMEM or fn's error.
 */
int attach_calls_enter(attach_records_t *a, struct proc *p, struct thread *t, struct frame *f);

/*
 * attach_calls_exit - the exit ev of the outermost call f (popped from t's
 * stack): its record (collective, group, comm made, destroy / abort;
 * Finalize none, as the agent). 0, -ENOMEM or fn's error.
 */
int attach_calls_exit(attach_records_t *a, struct proc *p, struct thread *t, const struct frame *f,
		      const struct attach_event *ev);

#endif
