/*
 * sender_socket.c - the socket sink (sender_socket.h): a connection to
 * FSDPSCOPE_SINK (common/wire.h address) with bounded writes
 * (FSDPSCOPE_SINK_TIMEOUT_MS, SO_SNDTIMEO: a collector that stops reading
 * costs the job nothing but the records that pile up in the ring), the key
 * hello on a keyed tcp address, and the dormant agent's attempts
 * (FSDPSCOPE_DORMANT=1: no file; on connect the state goes ON).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/sender_begin.h"
#include "agent/sender_retention.h"
#include "agent/sender_socket.h"
#include "agent/sender_state.h"
#include "common/clock.h"
#include "common/trace_writer.h"
#include "common/wire.h"

#define SENDER_DORMANT_CONNECT_TIMEOUT_MS 250

/*
 * Connect a socket to FSDPSCOPE_SINK: bounded writes, the key hello first
 * on a tcp address with a key. 0 with *fd, or -errno; a key that cannot be
 * loaded turns the socket sink off for the process.
 */
int sender_connect_fd(int timeout_ms, int *out)
{
	struct wire_address addr;
	struct timeval tv = {.tv_sec = agent_config.sink_timeout_ms / 1000,
			     .tv_usec = (agent_config.sink_timeout_ms % 1000) * 1000};
	unsigned char key[WIRE_KEY_BYTES], hello[WIRE_KEY_HELLO_BYTES];
	int fd, err, keyed = 0;

	*out = -1;
	if (sender.socket_disabled)
		return -EPERM;
	err = wire_address_parse(agent_config.sink, &addr);
	if (err)
		return err;
	if (addr.key_path[0]) {
		err = wire_key_load(addr.key_path, key);
		if (err) {
			sender.socket_disabled = 1;
			agent_debug("the key %s of %s cannot be used (%s): no socket sink for this process",
				    addr.key_path, agent_config.sink, strerror(-err));
			return err;
		}
		keyed = 1;
	}
	err = wire_connect(&addr, timeout_ms, &fd);
	if (err)
		return err;
	/* Bounded writes: a stalled collector fails the write, never the job. */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		err = -errno;
		goto fail;
	}
	if (keyed) {
		size_t at = 0;

		wire_key_hello(key, hello);
		while (at < sizeof(hello)) {
			ssize_t n = send(fd, hello + at, sizeof(hello) - at, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				err = n < 0 ? -errno : -EPIPE;
				goto fail;
			}
			at += (size_t)n;
		}
	}
	*out = fd;
	return 0;
fail:
	close(fd);
	return err;
}

/* The socket sink's writer on a connected fd (owned from here on). */
int sender_open_socket(int fd, struct fss_rec_process_hello *hello)
{
	struct trace_writer_options opts = {0};
	int err;

	agent_hello_build(hello);
	opts.features = hello->features;
	opts.on_chunk = sender_on_chunk;
	sender_acks_reset();
	err = trace_writer_open_fd(&sender.w, fd, &opts);
	if (err) {
		close(fd);
		return err;
	}
	sender.fd = fd;
	sender.kind = SINK_SOCKET;
	return 0;
}

int sender_connect(int timeout_ms, struct fss_rec_process_hello *hello)
{
	int fd, err = sender_connect_fd(timeout_ms, &fd);

	return err ? err : sender_open_socket(fd, hello);
}

/* Dormant: one connection attempt; on success the agent starts recording. */
void sender_try_dormant(void)
{
	struct fss_rec_process_hello hello;
	struct sender_repeat rep = {.prev_serial = sender.serial, .prev_kind = (uint16_t)sender.serial_kind};
	int expected = AGENT_DORMANT;

	sender.last_connect_ns = clock_mono_ns();
	if (!agent_config.sink[0])
		return;
	if (sender_connect(SENDER_DORMANT_CONNECT_TIMEOUT_MS, &hello) != 0)
		return;
	/* ON before the replay: a string or communicator defined from here on
	 * goes into the ring, one defined before is in the replay. */
	if (!atomic_compare_exchange_strong(&agent_state_now, &expected, AGENT_ON)) {
		sender_close();
		return;
	}
	agent_debug("collector at %s: recording", agent_config.sink);
	agent_cupti_maybe_start();
	agent_hello_build(&hello); /* after ON: host and command strings are emitted */
	sender_begin(&hello, &rep);
}
