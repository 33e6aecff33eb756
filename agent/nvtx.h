/*
 * nvtx.h - NVTX ranges through NVTX injection (nvtx.c). A producer: its
 * entry point is the exported InitializeInjectionNvtx2 (NVTX_INJECTION64_PATH,
 * or the InitializeInjectionNvtx2_fnptr symbol NVTX looks up in the
 * process). Ranges that could not be recorded are counted in
 * agent_counters.nvtx_dropped (emit.h).
 */
#ifndef FSS_AGENT_NVTX_H
#define FSS_AGENT_NVTX_H

/* nvtx_after_fork_child - re-initialise the registration lock and the
 * stack pool, which threads of the parent may have held at the fork. */
void nvtx_after_fork_child(void);

#endif
