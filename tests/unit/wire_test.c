/*
 * wire_test.c - addresses, and a trace sent over a real socket: the wire
 * framing is the file format, read incrementally as it arrives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "common/wire.h"
#include "tests/support/sample_records.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_address_forms(void **state)
{
	struct wire_address a;

	(void)state;
	assert_int_equal(wire_address_parse("unix:/tmp/x.sock", &a), 0);
	assert_int_equal(a.family, AF_UNIX);
	assert_int_equal(wire_address_parse("/tmp/x.sock", &a), 0);
	assert_int_equal(a.family, AF_UNIX);
	assert_int_equal(wire_address_parse("unix:@fsdpscope-1", &a), 0);
	assert_int_equal(a.family, AF_UNIX);
	assert_int_equal(wire_address_parse("tcp:127.0.0.1:7070", &a), 0);
	assert_int_equal(a.family, AF_INET);
	assert_int_equal(ntohs(((struct sockaddr_in *)&a.addr)->sin_port), 7070);
	assert_int_equal(wire_address_parse("tcp:[::1]:7070", &a), 0);
	assert_int_equal(a.family, AF_INET6);
	assert_int_equal(wire_address_parse("tcp:localhost:1", &a), 0);
	assert_int_equal(wire_address_parse("tcp:127.0.0.1:0", &a), -EINVAL);
	assert_int_equal(wire_address_parse("tcp:127.0.0.1:70000", &a), -EINVAL);
	assert_int_equal(wire_address_parse("tcp:127.0.0.1", &a), -EINVAL);
	assert_int_equal(wire_address_parse("tcp:example.com:80", &a), -EINVAL);
	assert_int_equal(wire_address_parse("udp:1.2.3.4:5", &a), -EINVAL);
	assert_int_equal(wire_address_parse("unix:", &a), -EINVAL);
	char longpath[150];
	memset(longpath, 'a', sizeof(longpath));
	memcpy(longpath, "unix:/", 6);
	longpath[sizeof(longpath) - 1] = '\0';
	assert_int_equal(wire_address_parse(longpath, &a), -ENAMETOOLONG);
}

struct sender {
	struct wire_address addr;
	uint64_t records;
	int err;
};

static void *send_trace(void *arg)
{
	struct sender *s = arg;
	struct trace_writer_options opts = {.chunk_payload = 1024};
	trace_writer_t *w;
	int fd;

	s->err = wire_connect(&s->addr, 5000, &fd);
	if (s->err)
		return NULL;
	s->err = trace_writer_open_fd(&w, fd, &opts);
	if (!s->err) {
		s->err = sample_trace_write(w, 2, 50, &s->records);
		int cerr = trace_writer_close(w);
		if (!s->err)
			s->err = cerr;
	}
	close(fd);
	return NULL;
}

static int count(void *ctx, const struct fss_record_head *rec)
{
	if (rec->source != FSS_SOURCE_NONE)
		(*(uint64_t *)ctx)++;
	return 0;
}

static void run_over(const char *text)
{
	struct sender s = {0};
	struct trace_parser_ops ops = {.on_record = count};
	uint64_t got = 0;
	trace_parser_t *p = trace_parser_new(&ops, &got);
	pthread_t th;
	int lfd, cfd;
	unsigned char buf[333]; /* odd size: records arrive split across reads */
	ssize_t n;

	assert_int_equal(wire_address_parse(text, &s.addr), 0);
	assert_int_equal(wire_listen(&s.addr, &lfd), 0);
	assert_int_equal(pthread_create(&th, NULL, send_trace, &s), 0);
	cfd = accept(lfd, NULL, NULL);
	assert_true(cfd >= 0);
	while ((n = read(cfd, buf, sizeof(buf))) > 0)
		assert_int_equal(trace_parser_feed(p, buf, (size_t)n), 0);
	assert_int_equal(trace_parser_finish(p), 0);
	pthread_join(th, NULL);
	assert_int_equal(s.err, 0);
	assert_true(s.records > 500);
	assert_int_equal(got, s.records);
	assert_true(trace_parser_header(p)->flags & FSS_FILE_STREAM);
	trace_parser_free(p);
	close(cfd);
	close(lfd);
}

static void test_trace_over_unix_socket(void **state)
{
	char path[64];

	(void)state;
	snprintf(path, sizeof(path), "unix:/tmp/fss_wire_test_%d.sock", (int)getpid());
	run_over(path);
	/* A stale socket file is replaced by the next listener. */
	run_over(path);
	unlink(path + 5);
}

static void test_trace_over_loopback_tcp(void **state)
{
	char text[64];

	(void)state;
	/* A port from the pid keeps parallel runs apart; loopback only. */
	snprintf(text, sizeof(text), "tcp:127.0.0.1:%d", 20000 + (int)(getpid() % 20000));
	run_over(text);
}

static void test_connect_to_nobody(void **state)
{
	struct wire_address a;
	int fd;

	(void)state;
	assert_int_equal(wire_address_parse("unix:/tmp/fss_wire_test_nobody.sock", &a), 0);
	assert_int_equal(wire_connect(&a, 100, &fd), -ENOENT);
	assert_int_equal(fd, -1);
}

static void test_key_address_and_file(void **state)
{
	char dir[] = "/tmp/fss_wire_key_XXXXXX", path[128], link_path[160];
	unsigned char key[WIRE_KEY_BYTES], again[WIRE_KEY_BYTES], hello[WIRE_KEY_HELLO_BYTES];
	struct wire_address a;

	(void)state;
	assert_int_equal(wire_address_parse("tcp:127.0.0.1:7070,key=/run/k", &a), 0);
	assert_string_equal(a.key_path, "/run/k");
	assert_int_equal(a.family, AF_INET);
	assert_int_equal(wire_address_parse("tcp:127.0.0.1:7070,key=relative", &a), -EINVAL);
	assert_int_equal(wire_address_parse("tcp:127.0.0.1:7070", &a), 0);
	assert_string_equal(a.key_path, "");

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/key", dir);
	assert_int_equal(wire_key_create(path, key), 0);
	assert_int_equal(wire_key_create(path, again), -EEXIST); /* never replaces */
	assert_int_equal(wire_key_load(path, again), 0);
	assert_memory_equal(key, again, sizeof(key));
	wire_key_hello(key, hello);
	assert_int_equal(wire_key_check(key, hello), 1);
	hello[WIRE_KEY_HELLO_BYTES - 1] ^= 1;
	assert_int_equal(wire_key_check(key, hello), 0);

	/* a key others can read, or a link to one, is refused */
	snprintf(link_path, sizeof(link_path), "%s/link", dir);
	assert_int_equal(symlink(path, link_path), 0);
	assert_int_equal(wire_key_load(link_path, again), -EPERM);
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(wire_key_load(path, again), -EPERM);
	unlink(link_path);
	unlink(path);
	rmdir(dir);
}

/* A unix listener whose backlog is full: a connect must not report a
 * socket that is not connected as connected. */
static void test_unix_backlog_full(void **state)
{
	char path[64];
	struct wire_address a;
	int l, fds[8], connected = 0, timed_out = 0;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/fss_wire_backlog_%d.sock", (int)getpid());
	assert_int_equal(wire_address_parse(path, &a), 0);
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	unlink(path);
	assert_int_equal(bind(l, (const struct sockaddr *)&a.addr, a.len), 0);
	assert_int_equal(listen(l, 0), 0); /* nobody accepts: the backlog fills at once */
	for (int i = 0; i < 8; i++) {
		int err = wire_connect(&a, 50, &fds[i]);

		if (err == 0) {
			struct sockaddr_un peer;
			socklen_t len = sizeof(peer);

			/* what wire_connect calls connected is connected */
			assert_int_equal(getpeername(fds[i], (struct sockaddr *)&peer, &len), 0);
			connected++;
		} else {
			assert_int_equal(err, -ETIMEDOUT);
			assert_int_equal(fds[i], -1);
			timed_out++;
		}
	}
	assert_true(connected >= 1);
	assert_true(timed_out >= 1);
	for (int i = 0; i < 8; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	close(l);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_address_forms),
		cmocka_unit_test(test_trace_over_unix_socket),
		cmocka_unit_test(test_trace_over_loopback_tcp),
		cmocka_unit_test(test_connect_to_nobody),
		cmocka_unit_test(test_key_address_and_file),
		cmocka_unit_test(test_unix_backlog_full),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
