/*
 * sender_failover.h - replacing a sink that failed, and going back to the
 * collector from a file (sender_failover.c). Sender thread only.
 */
#ifndef FSS_AGENT_SENDER_FAILOVER_H
#define FSS_AGENT_SENDER_FAILOVER_H

#include <stdint.h>

/* sender_retry_ns - FSDPSCOPE_RETRY_MS in ns: the wait between two
 * attempts at the collector from a file sink, before any backoff. */
uint64_t sender_retry_ns(void);

/*
 * sender_sink_failed - the sink failed with err (record: the one whose
 * append failed, or NULL). A socket (not dormant) is replaced by a file
 * that repeats what the collector may not have; a dormant socket sends the
 * agent back to DORMANT; a file that fails turns the agent off. What
 * cannot be repeated is counted in agent_counters.sink_dropped.
 */
void sender_sink_failed(int err, const void *record);

/* sender_try_reconnect - one short connection attempt from a file sink; a
 * connection made is probed (sender_probe) before it is used. */
void sender_try_reconnect(void);

/* sender_probe - look at the probed connection, never waiting: it becomes
 * the sink when it acknowledges or stays silent long enough, and is dropped
 * when the collector hangs up. */
void sender_probe(void);

/* sender_probe_close - drop the probed connection, if any. */
void sender_probe_close(void);

#endif
