/*
 * sender_failover.c - one sink replaced by another (sender_failover.h).
 * A socket that fails is replaced by a file that repeats what the
 * collector did not confirm; with FSDPSCOPE_SINK set a file sink tries the
 * collector again every FSDPSCOPE_RETRY_MS, probes the connection it makes,
 * and sends the file whole to it (then removes it) once it is used.
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/emit.h"
#include "agent/sender_begin.h"
#include "agent/sender_failover.h"
#include "agent/sender_file.h"
#include "agent/sender_retention.h"
#include "agent/sender_socket.h"
#include "agent/sender_state.h"
#include "common/clock.h"
#include "common/trace_writer.h"
#include "common/wire.h"

#define SENDER_RETRY_CONNECT_TIMEOUT_MS 100 /* short: the ring fills while the sender waits */
#define SENDER_STALL_RETRY_FACTOR 30	    /* a collector that stalled is retried 30 times less often */
#define SENDER_PROBE_NS 1000000000ull /* a retried connection with no ack is used after 1 s (or FSDPSCOPE_RETRY_MS) */
#define SENDER_BACKOFF_MAX 64	      /* a collector that keeps hanging up is tried at most 64 times less often */
#define SENDER_COPY_MAX_BYTES (256ull << 20) /* a larger file is left for the collector to merge */

uint64_t sender_retry_ns(void)
{
	return (uint64_t)agent_config.retry_ms * 1000000ull;
}

/* A collector that hung up before it acknowledged anything: tried half as
 * often as before, down to once every SENDER_BACKOFF_MAX retries. */
static void sender_backoff(void)
{
	sender.retry_backoff =
	    sender.retry_backoff * 2 > SENDER_BACKOFF_MAX ? SENDER_BACKOFF_MAX : sender.retry_backoff * 2;
}

/*
 * The sink failed. A socket (not dormant) is replaced by a file that
 * repeats what the collector may not have: the retained chunks after the
 * last ack, the chunk whose write failed and the record that could not be
 * appended. A collector that never acknowledged anything on this
 * connection is taken for one without a return channel (format 1.1):
 * nothing is repeated, and the failed chunk is lost, as before acks. What
 * cannot be repeated is counted in sink_dropped.
 */
void sender_sink_failed(int err, const void *record)
{
	struct fss_rec_process_hello hello;
	struct sender_repeat rep = {0};
	trace_writer_t *w = sender.w;
	struct retained *chunks;
	int kind = sender.kind;
	uint32_t unsent_records = 0;
	uint64_t lost = 0;

	if (w)
		(void)trace_writer_unsent(w, &rep.unsent, &rep.unsent_len, &unsent_records);
	uint64_t failed = unsent_records + (record ? 1u : 0u);
	sender.w = NULL; /* no recursion into a dead writer */
	if (sender.fd >= 0)
		close(sender.fd);
	sender.fd = -1;
	sender.kind = SINK_NONE;
	sender.pending = 0;
	if (kind != SINK_SOCKET || agent_config.dormant) {
		atomic_fetch_add(&agent_counters.sink_dropped, failed);
		agent_debug("%s sink failed: %s (%llu records lost)", kind == SINK_SOCKET ? "socket" : "file",
			    strerror(-err), (unsigned long long)failed);
		if (w)
			(void)trace_writer_close(w);
		sender_acks_reset();
		if (kind != SINK_SOCKET) {
			agent_disable("the trace file failed");
			return;
		}
		int expected = AGENT_ON;
		atomic_compare_exchange_strong(&agent_state_now, &expected, AGENT_DORMANT);
		return;
	}
	rep.prev_serial = sender.serial;
	rep.prev_kind = FSS_SINK_SOCKET;
	/* A connection that began by sending a file still wholly retained
	 * repeats it even before any ack: the file it came from then goes, and
	 * a collector that keeps hanging up leaves one file, not one per try. */
	int copy_retained =
	    sender.copied_path[0] && atomic_load(&agent_counters.unconfirmed) == sender.copied_unconfirmed;
	char copied[PATH_MAX];
	memcpy(copied, sender.copied_path, sizeof(copied));
	if (sender.acks_seen || copy_retained) {
		rep.first = sender.ret_head ? sender.ret_head->first : sender.records_chunked;
		lost = rep.first - sender.acked_records; /* let go from a full retention: gone now */
		rep.chunks = sender.ret_head;
		rep.record = record;
		rep.count = sender.records_chunked - rep.first + failed;
	} else {
		/* As before the return channel: the failed chunk is lost, counted. */
		rep.unsent = NULL;
		lost = failed;
	}
	chunks = sender.ret_head; /* the new sink must not touch them while they are repeated */
	sender.ret_head = sender.ret_tail = NULL;
	sender.ret_bytes = 0;
	atomic_store(&sender.retained_bytes, 0);
	sender.copied_path[0] = '\0';
	sender.last_connect_ns = clock_mono_ns();
	/* A collector that stalled is alive but stuck: retrying it every second
	 * would cost the send timeout each time. One that hangs up before it
	 * acknowledges anything (it refuses us, or dies at once) is tried less
	 * and less often. */
	if (!sender.acks_seen)
		sender_backoff();
	unsigned factor = sender.retry_backoff;
	if ((err == -EAGAIN || err == -EWOULDBLOCK || err == -ETIMEDOUT) && factor < SENDER_STALL_RETRY_FACTOR)
		factor = SENDER_STALL_RETRY_FACTOR;
	sender.retry_wait_ns = sender_retry_ns() * factor;
	agent_debug("socket sink %u failed: %s (acked %llu records; repeating %llu from %llu)", sender.serial,
		    strerror(-err), (unsigned long long)sender.acked_records, (unsigned long long)rep.count,
		    (unsigned long long)rep.first);
	if (sender_open_file(&hello) == 0) {
		uint32_t serial = sender.serial + 1;
		sender_begin(&hello, &rep);
		lost += rep.count - rep.written;
		if (copied[0] && copy_retained && rep.written == rep.count && sender.serial == serial &&
		    unlink(copied) == 0)
			agent_debug("removed %s: its records are repeated in %s", copied, sender.path);
	} else {
		lost += rep.count;
	}
	if (copied[0] && access(copied, F_OK) == 0)
		agent_debug("%s stays for the collector to merge", copied);
	sender_retained_free(chunks);
	(void)trace_writer_close(w); /* frees the dead writer and the unsent bytes */
	sender.chunks_sent = sender.records_chunked = sender.acked_chunks = sender.acked_records = 0;
	sender.acks_seen = 0;
	if (lost) {
		atomic_fetch_add(&agent_counters.sink_dropped, lost);
		agent_debug("%llu records of socket sink %u lost", (unsigned long long)lost, rep.prev_serial);
	}
}

/*
 * The probed connection becomes the sink: the file is closed, sent whole
 * as the new socket sink's repeat (read back through the trace reader),
 * and removed once the collector acknowledged anything (at once when
 * `acked`, else at its first ack, sender_take_ack); a file
 * over SENDER_COPY_MAX_BYTES, or one that cannot be closed cleanly, stays
 * where it is for the collector to merge, and the socket starts afresh.
 */
static void sender_switch_to_socket(int fd, int acked)
{
	struct fss_rec_process_hello hello;
	struct sender_repeat rep = {0};
	char path[PATH_MAX];
	int err, copy = 0;
	uint64_t unconfirmed;

	sender.retry_wait_ns = sender_retry_ns();
	agent_debug("collector at %s again%s", agent_config.sink, acked ? " (it acknowledges)" : "");
	if (sender.kind == SINK_FILE) {
		const void *unsent;
		size_t unsent_len;
		uint32_t unsent_records;
		trace_writer_t *w = sender.w;

		(void)trace_writer_unsent(w, &unsent, &unsent_len, &unsent_records);
		uint64_t bytes = trace_writer_bytes(w) + unsent_len;
		rep.prev_serial = sender.serial;
		rep.prev_kind = FSS_SINK_FILE;
		rep.count = trace_writer_records(w);
		memcpy(path, sender.path, sizeof(path));
		sender.w = NULL;
		sender.kind = SINK_NONE;
		sender.pending = 0;
		err = trace_writer_close(w);
		copy = !err && bytes <= SENDER_COPY_MAX_BYTES;
		if (!copy)
			agent_debug("%s stays for the collector to merge (%s)", path,
				    err ? strerror(-err) : "too large to send");
		else
			rep.path = path;
	}
	if (sender_open_socket(fd, &hello) != 0) {
		/* No writer for the socket (no memory): a new file continues the
		 * old one, which stays. */
		rep.path = NULL;
		rep.count = 0;
		if (sender_open_file(&hello) == 0)
			sender_begin(&hello, &rep);
		return;
	}
	sender.acks_seen = acked; /* its ack of nothing, read while probing */
	if (!copy) {
		sender_begin(&hello, NULL);
		return;
	}
	unconfirmed = atomic_load(&agent_counters.unconfirmed);
	uint32_t serial = sender.serial + 1;
	sender_begin(&hello, &rep);
	if (sender.kind != SINK_SOCKET || sender.serial != serial || rep.written != rep.count) {
		agent_debug("%s stays: sent %llu of its %llu records", path, (unsigned long long)rep.written,
			    (unsigned long long)rep.count);
		return;
	}
	if (sender.acks_seen && atomic_load(&agent_counters.unconfirmed) == unconfirmed) {
		/* All of it retained, and a failure repeats it. */
		if (unlink(path) == 0)
			agent_debug("sent and removed %s (%llu records)", path, (unsigned long long)rep.count);
		return;
	}
	/* Removed at the first ack (sender_take_ack), or once an ack covers
	 * it when the retention could not hold it all. */
	agent_debug("sent %s (%llu records): removed once the collector acknowledges", path,
		    (unsigned long long)rep.count);
	memcpy(sender.copied_path, path, sizeof(sender.copied_path));
	sender.copied_until = trace_writer_records(sender.w);
	sender.copied_unconfirmed = unconfirmed;
}

void sender_probe_close(void)
{
	if (sender.probe_fd >= 0)
		close(sender.probe_fd);
	sender.probe_fd = -1;
	sender.probe_have = 0;
}

/* One short connection attempt; a connection made is probed first. */
void sender_try_reconnect(void)
{
	int fd;

	sender.last_connect_ns = clock_mono_ns();
	if (sender_connect_fd(SENDER_RETRY_CONNECT_TIMEOUT_MS, &fd) != 0)
		return;
	sender.probe_fd = fd;
	sender.probe_since_ns = sender.last_connect_ns;
	sender.probe_have = 0;
}

/*
 * A retried connection before it is used: an ack of nothing (a collector
 * that acknowledges sends one when it accepts) makes it the sink at once;
 * a connection still open and silent after SENDER_PROBE_NS (or
 * FSDPSCOPE_RETRY_MS, if shorter) is used too (a collector without a
 * return channel); one that the collector closes (it refused the agent) is
 * dropped, the file goes on, and the next try waits twice as long.
 */
void sender_probe(void)
{
	uint64_t wait = sender_retry_ns() < SENDER_PROBE_NS ? sender_retry_ns() : SENDER_PROBE_NS;

	for (;;) {
		ssize_t n = recv(sender.probe_fd, sender.probe_buf + sender.probe_have,
				 sizeof(sender.probe_buf) - sender.probe_have, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			agent_debug("the collector at %s hung up before acknowledging: the file goes on",
				    agent_config.sink);
			sender_probe_close();
			sender.last_connect_ns = clock_mono_ns();
			sender_backoff();
			sender.retry_wait_ns = sender_retry_ns() * sender.retry_backoff;
			return;
		}
		if (n < 0)
			break;
		sender.probe_have += (size_t)n;
		if (sender.probe_have < sizeof(sender.probe_buf))
			continue;
		struct wire_ack a;
		memcpy(&a, sender.probe_buf, sizeof(a));
		sender.probe_have = 0;
		if (a.magic == WIRE_ACK_MAGIC && a.reserved == 0 && a.chunks == 0 && a.records == 0) {
			int fd = sender.probe_fd;
			sender.probe_fd = -1;
			sender.retry_backoff = 1;
			sender_switch_to_socket(fd, 1);
			return;
		}
		atomic_fetch_add(&sender.bad_acks, 1);
		agent_debug("ignored %zu bytes from the collector before its stream began", sizeof(a));
	}
	if (clock_mono_ns() - sender.probe_since_ns >= wait) {
		int fd = sender.probe_fd;
		sender.probe_fd = -1;
		sender.probe_have = 0;
		sender_switch_to_socket(fd, 0);
	}
}
