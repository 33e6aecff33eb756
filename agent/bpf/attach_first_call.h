/*
 * attach_first_call.h - first_call of the communicators the attach decides
 * (attach_first_call.c).
 */
#ifndef FSS_AGENT_BPF_ATTACH_FIRST_CALL_H
#define FSS_AGENT_BPF_ATTACH_FIRST_CALL_H

#include "agent/bpf/attach_records_state.h"

/*
 * attach_first_call_number - first_call of the OBSERVED members of class c
 * this decision gives it: numbered against each instance's first member,
 * so that one call has one number on every rank (flight's and the
 * analysis's per-communicator call numbers). 0 or -ENOMEM.
 */
int attach_first_call_number(attach_records_t *a, struct cls *c);

#endif
