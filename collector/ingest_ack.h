/*
 * ingest_ack.h - the return channel: acks back to the agents for what is on disk.
 *
 * Internal to the ingest (collector/ingest.h is its API).
 */
#ifndef FSS_COLLECTOR_INGEST_ACK_H
#define FSS_COLLECTOR_INGEST_ACK_H

#include "collector/ingest_internal.h"

/*
 * ingest_ack_blocked_set - mark (or clear) that an ack is owed to `in` and its
 * socket was full, keeping the ingest's count of such connections.
 */
void ingest_ack_blocked_set(ingest_t *ing, struct input *in, int blocked);

/* Send what is owed to one connection, without blocking: the rest of a
 * short send, then an ack up to in->acked. A full socket leaves it for a
 * later round; a peer that is gone ends the acks, never the ingest. */
void ingest_ack_send(ingest_t *ing, struct input *in);

/* The output's records up to ing->on_disk are in the file: ack every
 * connection's chunks that are wholly there. */
void ingest_acks_after_write(ingest_t *ing);

#endif
