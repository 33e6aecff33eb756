/*
 * sender_state.h - the sender thread's state, shared by the files of the
 * sender (sender.c the thread, sender_retention.c, sender_begin.c,
 * sender_socket.c, sender_file.c, sender_failover.c). Internal: nothing
 * outside agent/sender*.c includes it; the agent's API is sender.h.
 *
 * Everything below "The sender thread's own" is touched by the sender
 * thread only (and by a fork child before it has one): no lock.
 */
#ifndef FSS_AGENT_SENDER_STATE_H
#define FSS_AGENT_SENDER_STATE_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/trace_writer.h"
#include "common/wire.h"

#define SENDER_ACK_READ 4096 /* bytes of the return channel read into ack_buf at most */

enum sender_sink { SINK_NONE = 0, SINK_SOCKET, SINK_FILE };

/* One chunk of the socket sink as it went out (header and payload), kept
 * until an ack covers it. */
struct retained {
	struct retained *next;
	uint64_t seq;	  /* its chunk seq in the stream */
	uint64_t first;	  /* index in the sink of its first record (the hello is 0) */
	uint32_t records; /* records in it */
	uint32_t len;	  /* bytes */
	unsigned char bytes[];
};

struct sender {
	/* Shared with other threads. */
	pthread_t thread;
	_Atomic int running;  /* started, not joined */
	_Atomic int finished; /* the thread is done (or about to return) */
	_Atomic int stop_req;
	_Atomic uint64_t flush_req;
	_Atomic uint64_t flush_done;
	_Atomic uint32_t wake;		 /* futex: bumped by a stop or flush request, cuts the thread's sleep short */
	_Atomic uint32_t progress;	 /* futex: bumped by the thread when it answered a request or finished */
	_Atomic uint64_t retained_bytes; /* sender_retained_bytes() */
	_Atomic uint64_t bad_acks;	 /* sender_bad_acks() */

	/* The sender thread's own. */
	int kind;	   /* enum sender_sink */
	int fd;		   /* the socket, -1 otherwise */
	trace_writer_t *w; /* the sink's writer, NULL when there is none */
	uint64_t pending;  /* records appended since the last chunk went out */
	uint64_t last_flush_ns;
	uint64_t last_drops_ns;
	uint64_t last_connect_ns;
	uint64_t last_ack_read_ns;
	uint64_t retry_wait_ns; /* until the next socket attempt from a file sink */
	unsigned retry_backoff; /* doubles each time a connection ends before its first ack */
	/* A connection made by a retry, not used yet: the file sink goes on
	 * until the collector acks it (or keeps it open SENDER_PROBE_NS), so
	 * that one that refuses the agent at once costs the file nothing. */
	int probe_fd;
	uint64_t probe_since_ns;
	size_t probe_have;
	unsigned char probe_buf[sizeof(struct wire_ack)];
	int socket_disabled; /* the key cannot be loaded: no socket for this process */
	char path[PATH_MAX]; /* the file sink's final name */

	/* Sinks of this process (docs/format.md, "Sinks and resumption"). */
	uint64_t process_id; /* drawn once per process, 0 until then */
	uint32_t serial;     /* of the current sink, or of the last one; 0 before the first */
	int serial_kind;     /* enum fss_sink_kind of sink `serial` */

	/* The socket sink's return channel and retention. */
	struct retained *ret_head, *ret_tail; /* oldest first; contiguous up to records_chunked */
	uint64_t ret_bytes;
	uint64_t chunks_sent, records_chunked; /* chunks written whole, and the records in them */
	uint64_t acked_chunks, acked_records;
	int acks_seen; /* a valid ack came: the collector speaks the return channel */
	int ack_eof;   /* nothing more to read from the collector */
	size_t ack_have;
	unsigned char ack_buf[SENDER_ACK_READ];

	/* A file sent whole to the collector and not yet removed: it goes at the
	 * first ack (the collector speaks the return channel, so a failure
	 * repeats the copy from the retention) if the retention still holds all
	 * of it, else once an ack covers it. */
	char copied_path[PATH_MAX];
	uint64_t copied_until;	     /* socket record index just past the copy */
	uint64_t copied_unconfirmed; /* agent_counters.unconfirmed when the copy began */
};

/* The one sender of this process (sender.c). */
extern struct sender sender;

/*
 * sender_append - append one record to the sink: 0, or the write error
 * after the sink was given up and replaced (sender_sink_failed), or
 * -EPIPE when there is no sink.
 */
int sender_append(const void *record);

/* sender_flush_writer - send what the sink's writer holds (the sink fails
 * over on an error). */
void sender_flush_writer(void);

/* sender_close - close the sink (a file: flushed and renamed into place)
 * and forget the socket's return channel. */
void sender_close(void);

#endif
