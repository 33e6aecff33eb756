/*
 * sender.h - the agent's one thread (sender.c): drains the ring into the
 * sink (a collector socket or a per-process trace file), writes the hello,
 * the replays, the drops records and the process_end.
 */
#ifndef FSS_AGENT_SENDER_H
#define FSS_AGENT_SENDER_H

#include <stdint.h>

/* sender_start - start the thread if it is not running; 0 or -errno. */
int sender_start(void);

/* sender_flush - drain the ring to the sink and flush it; waits at most
 * timeout_ms for the sender to say it did. */
void sender_flush(int timeout_ms);

/*
 * sender_stop - final drain, drops record and process_end, sink closed (a
 * file renamed from .partial); waits at most timeout_ms, then returns
 * whether or not the thread finished (the process exits around it).
 */
void sender_stop(int timeout_ms);

/* sender_after_fork_child - the child has no sender thread: forget it, and
 * close the child's copy of the parent's socket. */
void sender_after_fork_child(void);

/* sender_retained_bytes - bytes of sent chunks the socket sink keeps until
 * the collector acknowledges them (tests and debug output). */
uint64_t sender_retained_bytes(void);

/* sender_bad_acks - messages on the return channel that were ignored (not
 * an ack, or an ack that does not fit the stream), since the process began. */
uint64_t sender_bad_acks(void);

#endif
