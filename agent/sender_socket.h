/*
 * sender_socket.h - connecting the socket sink (sender_socket.c). Sender
 * thread only.
 */
#ifndef FSS_AGENT_SENDER_SOCKET_H
#define FSS_AGENT_SENDER_SOCKET_H

#include "common/trace_format.h"

/*
 * sender_connect_fd - connect a socket to FSDPSCOPE_SINK: bounded writes,
 * the key hello first on a tcp address with a key. 0 with *out, or -errno;
 * a key that cannot be loaded turns the socket sink off for the process
 * (sender.socket_disabled).
 */
int sender_connect_fd(int timeout_ms, int *out);

/* sender_open_socket - the socket sink's writer on a connected fd (owned
 * from here on, closed on failure); *hello built for it. 0 or -errno. */
int sender_open_socket(int fd, struct fss_rec_process_hello *hello);

/* sender_connect - sender_connect_fd then sender_open_socket. */
int sender_connect(int timeout_ms, struct fss_rec_process_hello *hello);

/* sender_try_dormant - a dormant agent's one connection attempt; on
 * success the agent goes ON and the new sink begins. */
void sender_try_dormant(void);

#endif
