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

#endif
