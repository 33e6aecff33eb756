/*
 * lifecycle.h - the agent's life in a process (lifecycle.c): constructor,
 * fork, exit and _exit. The agent's code calls none of this; tests do.
 */
#ifndef FSS_AGENT_LIFECYCLE_H
#define FSS_AGENT_LIFECYCLE_H

/* How long the exit paths (exit, _exit) wait for the sender to write what
 * is left (docs/agent.md, "Exit"). */
#define AGENT_EXIT_WAIT_MS 2000

/*
 * agent_reset_source - become a new source: forget the sender thread (a
 * fork child has none), then agent_state_reset(). Called in a fork child
 * (by the atfork handler) and by tests after sender_stop(); no other thread
 * may be using the agent meanwhile.
 */
void agent_reset_source(void);

/*
 * agent_exit_flush - what exit() and _exit() do before the process ends:
 * CUPTI's last buffers into the ring, then sender_stop with a bounded wait
 * (AGENT_EXIT_WAIT_MS), state OFF. Only in a process that activated the
 * agent itself (agent_active_here), once; status (0..255) becomes
 * process_end.exit_code, -1 for none.
 */
void agent_exit_flush(int status);

#endif
