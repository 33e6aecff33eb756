/*
 * ingest_net.h - the epoll loop: listeners, connections accepted and read, peer checks.
 *
 * Internal to the ingest (collector/ingest.h is its API).
 */
#ifndef FSS_COLLECTOR_INGEST_NET_H
#define FSS_COLLECTOR_INGEST_NET_H

#include "collector/ingest_internal.h"

/* The connection has ended: say how, free what it held. */
int ingest_connection_end(ingest_t *ing, struct input *in, int cut);

/* Read what a connection has; returns 1 if it made progress, 0 if not, or
 * the output's write error. */
int ingest_connection_read(ingest_t *ing, struct input *in);

/*
 * ingest_accept_all - accept every pending connection of listener l (peer
 * checks, origins). Returns the connections taken in.
 */
int ingest_accept_all(ingest_t *ing, struct listener *l);

/*
 * ingest_listeners_close - stop listening; remove the unix socket files made
 * (only if still ours: a socket).
 */
void ingest_listeners_close(ingest_t *ing);

#endif
