/*
 * nccl_wrap.h - what the interposed NCCL API (nccl_wrap.c) offers the other
 * producers. The wrappers themselves are the NCCL API (nccl.h), exported by
 * the version script.
 */
#ifndef FSS_AGENT_NCCL_WRAP_H
#define FSS_AGENT_NCCL_WRAP_H

/*
 * agent_in_nccl_call - non-zero while the calling thread is inside one of
 * the agent's interposed NCCL calls, which records that call itself: nvtx.c
 * then does not turn NCCL's own range of it into a second collective
 * record. Hot path: one thread-local load.
 */
int agent_in_nccl_call(void);

#endif
