/*
 * ingest_net_test.c - what a tcp peer without the key can do to the ingest:
 * hold a connection only until the key timeout, keep at most
 * INGEST_PENDING_PER_HOST connections waiting, never count as an agent.
 *
 * Every peer here writes what it sends before the ingest polls, so what the
 * ingest decides does not depend on when it reads; waits are for counts,
 * with a generous limit, never for a time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/ingest.h"
#include "common/wire.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 20000

static char tmpdir[64];
static unsigned char key[WIRE_KEY_BYTES];

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An ingest with the key listening on a free loopback port. */
static ingest_t *tcp_ingest(const char *name, uint32_t key_timeout_ms, int *port)
{
	struct ingest_options opts = {.key = key, .key_timeout_ms = key_timeout_ms};
	char out[128], text[64];
	ingest_t *ing;
	int rc = -1;

	snprintf(out, sizeof(out), "%s/%s", tmpdir, name);
	assert_int_equal(ingest_new(&ing, out, &opts), 0);
	for (int i = 0; i < 200 && rc; i++) {
		*port = 20000 + (int)((getpid() * 11 + i * 131) % 30000);
		snprintf(text, sizeof(text), "tcp:127.0.0.1:%d", *port);
		rc = ingest_listen(ing, text);
	}
	assert_int_equal(rc, 0);
	return ing;
}

/* A peer connected to the ingest's port that has sent `len` bytes of `first`. */
static int peer(int port, const void *first, size_t len)
{
	struct wire_address addr;
	char text[64];
	int fd;

	snprintf(text, sizeof(text), "tcp:127.0.0.1:%d", port);
	assert_int_equal(wire_address_parse(text, &addr), 0);
	assert_int_equal(wire_connect(&addr, 5000, &fd), 0);
	if (len)
		assert_int_equal(write(fd, first, len), (ssize_t)len);
	return fd;
}

/* Whether the ingest has closed our end fd (EOF or a reset), without waiting. */
static int closed(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char buf[256];

	while (poll(&p, 1, 0) == 1) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n <= 0)
			return 1;
		/* an ack to an agent: read and set aside */
	}
	return 0;
}

/* Poll until `open` connections are open, `agents` of them agents'. */
static void poll_until(ingest_t *ing, size_t open, size_t agents)
{
	int64_t deadline = now_ms() + WAIT_MS;

	while (ingest_open_connections(ing) != open || ingest_open_agents(ing) != agents) {
		assert_true(ingest_poll(ing, 10) >= 0);
		assert_true(now_ms() < deadline);
	}
}

/* A peer that sends 18 of the key hello's bytes and waits is cut at the key
 * timeout; the agent whose key came in as long after its accept is not. */
static void test_key_timeout(void **state)
{
	unsigned char hello[WIRE_KEY_HELLO_BYTES];
	const struct ingest_stats *st;
	int port, holder, agent;
	ingest_t *ing;

	(void)state;
	wire_key_hello(key, hello);
	ing = tcp_ingest("timeout.fss", 1, &port);
	holder = peer(port, hello, 18);
	agent = peer(port, hello, sizeof(hello));
	poll_until(ing, 1, 1);
	assert_true(closed(holder));
	assert_false(closed(agent));
	assert_int_equal(ingest_agents_seen(ing), 1);
	close(agent);
	poll_until(ing, 0, 0);
	close(holder);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->key_timeouts, 1);
	assert_int_equal(st->refused_keys, 0);
	assert_int_equal(st->agents, 1);
	assert_int_equal(st->ndamaged, 1);
	assert_non_null(strstr(st->damage[0], "cut: it sent 18 of the 40 bytes of the connection key in the 1 ms "
					      "allowed (the key timeout)"));
	ingest_free(ing);
}

/* A peer waiting for its key is no agent: it leaves ingest_open_agents at
 * 0; one that ends after part of the key is refused and said, one that
 * sends nothing (a port probe) is not. */
static void test_pending_is_no_agent(void **state)
{
	unsigned char hello[WIRE_KEY_HELLO_BYTES];
	const struct ingest_stats *st;
	int port, part, probe;
	ingest_t *ing;

	(void)state;
	wire_key_hello(key, hello);
	ing = tcp_ingest("pending.fss", 600000, &port);
	part = peer(port, hello, 18);
	probe = peer(port, NULL, 0);
	poll_until(ing, 2, 0);
	assert_int_equal(ingest_agents_seen(ing), 0);
	close(part);
	close(probe);
	poll_until(ing, 0, 0);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->agents, 0);
	assert_int_equal(st->refused_keys, 1);
	assert_int_equal(st->key_timeouts, 0);
	assert_int_equal(st->ndamaged, 1);
	assert_non_null(strstr(st->damage[0], "refused: ended after 18 of the 40 bytes of the connection key"));
	ingest_free(ing);
}

/* INGEST_PENDING_PER_HOST connections of a host wait for their key; the
 * next ones are closed as they are accepted, and counted; a peer whose key
 * checked out makes room. */
static void test_pending_capped_per_host(void **state)
{
	unsigned char hello[WIRE_KEY_HELLO_BYTES];
	int fds[INGEST_PENDING_PER_HOST + 2], port, agent;
	const struct ingest_stats *st;
	int64_t deadline;
	ingest_t *ing;

	(void)state;
	wire_key_hello(key, hello);
	ing = tcp_ingest("capped.fss", 600000, &port);
	for (int i = 0; i < INGEST_PENDING_PER_HOST + 2; i++)
		fds[i] = peer(port, hello, 18);
	deadline = now_ms() + WAIT_MS;
	while (!closed(fds[INGEST_PENDING_PER_HOST]) || !closed(fds[INGEST_PENDING_PER_HOST + 1])) {
		assert_true(ingest_poll(ing, 10) >= 0);
		assert_true(now_ms() < deadline);
	}
	for (int i = 0; i < INGEST_PENDING_PER_HOST; i++)
		assert_false(closed(fds[i]));
	assert_int_equal(ingest_open_connections(ing), INGEST_PENDING_PER_HOST);
	/* One of them sends the rest of its key: an agent now, no longer waiting. */
	assert_int_equal(write(fds[0], hello + 18, sizeof(hello) - 18), (ssize_t)(sizeof(hello) - 18));
	poll_until(ing, INGEST_PENDING_PER_HOST, 1);
	agent = peer(port, hello, sizeof(hello));
	poll_until(ing, INGEST_PENDING_PER_HOST + 1, 2);
	assert_false(closed(agent));
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->pending_over_cap, 2);
	assert_int_equal(st->agents, 2);
	assert_int_equal(st->connections, INGEST_PENDING_PER_HOST + 1);
	ingest_free(ing);
	for (int i = 0; i < INGEST_PENDING_PER_HOST + 2; i++)
		close(fds[i]);
	close(agent);
}

/* The first INGEST_REFUSED_NAMED peers refused without the key are said one
 * by one; the rest are only counted (a port scanner costs no message each). */
static void test_keyless_named_then_counted(void **state)
{
	unsigned char bad[WIRE_KEY_HELLO_BYTES];
	const struct ingest_stats *st;
	int port, fd;
	ingest_t *ing;

	(void)state;
	memset(bad, 'x', sizeof(bad));
	ing = tcp_ingest("keyless.fss", 600000, &port);
	for (int i = 0; i < INGEST_REFUSED_NAMED + 2; i++) {
		int64_t deadline = now_ms() + WAIT_MS;

		fd = peer(port, bad, sizeof(bad));
		while (!closed(fd)) {
			assert_true(ingest_poll(ing, 10) >= 0);
			assert_true(now_ms() < deadline);
		}
		close(fd);
	}
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->refused_keys, INGEST_REFUSED_NAMED + 2);
	assert_int_equal(st->ndamaged, INGEST_REFUSED_NAMED);
	assert_int_equal(st->keyless_unnamed, 2);
	ingest_free(ing);
}

static int setup_dir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/fss_ingest_net.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	for (int i = 0; i < WIRE_KEY_BYTES; i++)
		key[i] = (unsigned char)(i * 29 + 3);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static int teardown_dir(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_timeout),
		cmocka_unit_test(test_pending_is_no_agent),
		cmocka_unit_test(test_pending_capped_per_host),
		cmocka_unit_test(test_keyless_named_then_counted),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
