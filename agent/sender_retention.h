/*
 * sender_retention.h - the socket sink's retained chunks and the acks that
 * let them go (sender_retention.c). Sender thread only.
 */
#ifndef FSS_AGENT_SENDER_RETENTION_H
#define FSS_AGENT_SENDER_RETENTION_H

#include <stddef.h>
#include <stdint.h>

struct retained;

/* sender_retained_free - free a list of retained chunks (NULL: nothing). */
void sender_retained_free(struct retained *r);

/* sender_acks_reset - forget the return channel's state and free the
 * retention: a new connection (or none). */
void sender_acks_reset(void);

/*
 * sender_on_chunk - trace_writer's on_chunk for the socket sink: keep a
 * copy of the chunk (a full retention lets the oldest go, counted in
 * agent_counters.unconfirmed) and count it for the acks.
 */
void sender_on_chunk(void *ctx, uint64_t seq, uint32_t records, const void *bytes, size_t len);

/* sender_read_acks - take whatever acks the collector sent, never waiting;
 * bytes that are not an ack are counted in sender_bad_acks(). */
void sender_read_acks(void);

#endif
