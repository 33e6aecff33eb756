/*
 * agent_sink_test.c - the agent's sinks as a chain (docs/format.md, "Sinks
 * and resumption"): the sink record, the return channel's acks and the
 * retention they shrink, the failover file that repeats what the collector
 * did not acknowledge, the reconnect that sends the file and removes it,
 * garbage on the return channel, TCP connection keys, and an enter record
 * that reaches the collector while its caller is still blocked.
 *
 * The agent's sources are compiled into this program, as in
 * agent_core_test.c, and the real sender thread runs; the collector is a
 * fake one in this file: a thread reading one connection through
 * trace_parser that keeps every record as received, and acks sent when a
 * test says so. Nothing waits on time: every wait is for a condition, with
 * a 10 s limit.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <nccl.h>

#include "agent/agent.h"
#include "agent/emit.h"
#include "agent/lifecycle.h"
#include "agent/sender.h"
#include "common/error.h"
#include "common/record.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"
#include "common/wire.h"
#include "tests/unit/agent_core_trace.h"

#define WAIT_MS 10000

static char tmpdir[64];

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void pause_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* ---- records as received ----------------------------------------------------------- */

/* Every record of one stream or file, as bytes, in order (index 0 is the
 * hello), and where its chunks end. */
#define RECS_CHUNKS 4096

struct recs {
	unsigned char *bytes;
	size_t len, cap;
	size_t *at; /* offset of record i in bytes */
	size_t n, at_cap;
	uint64_t chunks;		/* complete chunks delivered */
	uint64_t chunk_records;		/* records in them */
	uint64_t rec_end[RECS_CHUNKS];	/* records through chunk i */
	uint64_t byte_end[RECS_CHUNKS]; /* record bytes through chunk i */
};

static int recs_record(void *ctx, const struct fss_record_head *rec)
{
	struct recs *r = ctx;

	if (rec->type == FSS_REC_TRACE_END)
		return 0;
	if (r->len + rec->size > r->cap) {
		r->cap = r->cap ? r->cap * 2 : 65536;
		while (r->cap < r->len + rec->size)
			r->cap *= 2;
		r->bytes = realloc(r->bytes, r->cap);
		assert_non_null(r->bytes);
	}
	if (r->n == r->at_cap) {
		r->at_cap = r->at_cap ? r->at_cap * 2 : 1024;
		r->at = realloc(r->at, r->at_cap * sizeof(*r->at));
		assert_non_null(r->at);
	}
	r->at[r->n++] = r->len;
	memcpy(r->bytes + r->len, rec, rec->size);
	r->len += rec->size;
	return 0;
}

static int recs_chunk(void *ctx, uint64_t seq, uint32_t records, uint64_t file_offset)
{
	struct recs *r = ctx;

	(void)records;
	(void)file_offset;
	assert_true(seq < RECS_CHUNKS);
	r->rec_end[seq] = r->n;
	r->byte_end[seq] = r->len;
	r->chunks = seq + 1;
	r->chunk_records = r->n;
	return 0;
}

/* Bytes on the wire of chunks [from, chunks): what the agent retains when
 * the first `from` are acked (under the fake's lock). */
static uint64_t recs_chunk_bytes(const struct recs *r, uint64_t from)
{
	uint64_t b = 0;

	for (uint64_t i = from; i < r->chunks; i++)
		b += sizeof(struct fss_chunk_header) + r->byte_end[i] - (i ? r->byte_end[i - 1] : 0);
	return b;
}

static const struct trace_parser_ops recs_ops = {.on_record = recs_record, .on_chunk = recs_chunk};

static const struct fss_record_head *recs_get(const struct recs *r, size_t i)
{
	return (const void *)(r->bytes + r->at[i]);
}

static const struct fss_rec_sink *recs_sink(const struct recs *r)
{
	assert_true(r->n >= 2);
	assert_int_equal(recs_get(r, 0)->type, FSS_REC_PROCESS_HELLO);
	assert_int_equal(recs_get(r, 1)->type, FSS_REC_SINK);
	return (const void *)recs_get(r, 1);
}

static void recs_free(struct recs *r)
{
	free(r->bytes);
	free(r->at);
	memset(r, 0, sizeof(*r));
}

static void recs_read_file(struct recs *r, const char *path)
{
	memset(r, 0, sizeof(*r));
	int err = trace_read(path, &recs_ops, r, NULL);
	assert_true(err == 0 || err == FSS_E_TRUNCATED); /* a .partial one has no end yet */
}

/* Collective seqs of records [from, to), appended to seqs. */
static size_t recs_seqs(const struct recs *r, size_t from, size_t to, uint64_t *seqs, size_t n)
{
	for (size_t i = from; i < to; i++) {
		const struct fss_record_head *h = recs_get(r, i);
		if (h->type == FSS_REC_COLLECTIVE)
			seqs[n++] = ((const struct fss_rec_collective *)h)->seq;
	}
	return n;
}

/* ---- the fake collector ----------------------------------------------------------- */

struct fake {
	pthread_t thread;
	int fd;
	int keyed; /* read WIRE_KEY_HELLO_BYTES before the stream */
	unsigned char key_hello[WIRE_KEY_HELLO_BYTES];
	size_t key_have;
	trace_parser_t *parser;
	pthread_mutex_t mu;
	struct recs r; /* under mu */
	int done;      /* under mu */
};

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	unsigned char buf[65536];

	for (;;) {
		ssize_t n = recv(f->fd, buf, sizeof(buf), 0);
		size_t at = 0;

		if (n < 0 && errno == EINTR)
			continue;
		pthread_mutex_lock(&f->mu);
		if (n <= 0) {
			f->done = 1;
			pthread_mutex_unlock(&f->mu);
			return NULL;
		}
		while (f->keyed && f->key_have < sizeof(f->key_hello) && at < (size_t)n)
			f->key_hello[f->key_have++] = buf[at++];
		(void)trace_parser_feed(f->parser, buf + at, (size_t)n - at);
		pthread_mutex_unlock(&f->mu);
	}
}

static void fake_start(struct fake *f, int fd, int keyed)
{
	memset(f, 0, sizeof(*f));
	f->fd = fd;
	f->keyed = keyed;
	pthread_mutex_init(&f->mu, NULL);
	f->parser = trace_parser_new(&recs_ops, &f->r);
	assert_non_null(f->parser);
	assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

/* Wait until the fake holds at least n collectives; their count. */
static size_t fake_wait_colls(struct fake *f, size_t n)
{
	uint64_t deadline = ms_now() + WAIT_MS;
	size_t have;

	for (;;) {
		have = 0;
		pthread_mutex_lock(&f->mu);
		for (size_t i = 0; i < f->r.chunk_records; i++)
			have += recs_get(&f->r, i)->type == FSS_REC_COLLECTIVE;
		pthread_mutex_unlock(&f->mu);
		if (have >= n || ms_now() > deadline)
			return have;
		pause_ms(2);
	}
}

/* Ack everything complete the fake has; returns the records acked. */
static uint64_t fake_ack_all(struct fake *f, struct wire_ack *sent)
{
	struct wire_ack a = {.magic = WIRE_ACK_MAGIC};

	pthread_mutex_lock(&f->mu);
	a.chunks = f->r.chunks;
	a.records = f->r.chunk_records;
	pthread_mutex_unlock(&f->mu);
	assert_int_equal(send(f->fd, &a, sizeof(a), MSG_NOSIGNAL), (ssize_t)sizeof(a));
	if (sent)
		*sent = a;
	return a.records;
}

/* The collector goes away: the agent's next write fails. */
static void fake_hang_up(struct fake *f)
{
	shutdown(f->fd, SHUT_RDWR);
	pthread_join(f->thread, NULL);
	close(f->fd);
}

static void fake_join(struct fake *f)
{
	pthread_join(f->thread, NULL);
	close(f->fd);
}

static void fake_free(struct fake *f)
{
	trace_parser_free(f->parser);
	recs_free(&f->r);
	pthread_mutex_destroy(&f->mu);
}

/* Wait until cond(arg) holds. */
static int wait_for(int (*cond)(void *), void *arg)
{
	uint64_t deadline = ms_now() + WAIT_MS;

	while (!cond(arg)) {
		if (ms_now() > deadline)
			return 0;
		pause_ms(2);
	}
	return 1;
}

/* ---- the agent ------------------------------------------------------------------------ */

static void set_or_unset(const char *name, const char *value)
{
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

/* A fresh source with these variables (NULL: unset). */
static void fresh_source(const char *sink, const char *out, const char *retry_ms, const char *retain)
{
	sender_stop(5000);
	set_or_unset("FSDPSCOPE_SINK", sink);
	set_or_unset("FSDPSCOPE_OUT", out);
	set_or_unset("FSDPSCOPE_RETRY_MS", retry_ms);
	set_or_unset("FSDPSCOPE_RETAIN_BYTES", retain);
	unsetenv("FSDPSCOPE_DORMANT");
	unsetenv("FSDPSCOPE_SINK_TIMEOUT_MS");
	agent_reset_source();
}

static void emit_collectives(uint64_t first_seq, int n)
{
	for (int i = 0; i < n; i++) {
		struct fss_rec_collective r;

		memset(&r, 0, sizeof(r));
		r.head.type = FSS_REC_COLLECTIVE;
		r.head.size = sizeof(r);
		r.seq = first_seq + (uint64_t)i;
		r.op = FSS_OP_ALLREDUCE;
		r.dtype = FSS_DTYPE_FLOAT32;
		r.count = 1;
		r.bytes = 4;
		r.path = FSS_PATH_SYNTHETIC;
		agent_emit(&r);
	}
}

static void subdir(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", tmpdir, name);
	mkdir(out, 0700);
}

static void trace_path(char *out, size_t cap, const char *dir)
{
	char host[256];

	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = '\0';
	for (char *p = host; *p; p++)
		if (*p == '/')
			*p = '_';
	snprintf(out, cap, "%s/fsdpscope-%s-%d.fss", dir, host, (int)getpid());
}

/* Records [2, 2 + preamble) re-state the process: strings, communicators,
 * and a clock anchor last. */
static void assert_preamble(const struct recs *r)
{
	const struct fss_rec_sink *s = recs_sink(r);

	assert_true(s->preamble >= 1);
	assert_true(r->n >= 2u + s->preamble);
	for (size_t i = 2; i < 2u + s->preamble; i++) {
		uint16_t t = recs_get(r, i)->type;
		assert_true(t == FSS_REC_STRING || t == FSS_REC_COMM || t == FSS_REC_CLOCK_ANCHOR);
	}
	assert_int_equal(recs_get(r, 1u + s->preamble)->type, FSS_REC_CLOCK_ANCHOR);
}

/* ---- the sink record --------------------------------------------------------------------- */

static void test_sink_record_fields(void **state)
{
	(void)state;
	char addr[256], out[256], path[600];
	struct fake f;
	struct recs file;
	int lfd, cfd;

	subdir(out, sizeof(out), "fields");
	assert_int_equal(listener_open(tmpdir, "fields.sock", addr, sizeof(addr), &lfd), 0);
	fresh_source(addr, out, "0", NULL);
	agent_activate();
	cfd = listener_accept(lfd, WAIT_MS);
	assert_true(cfd >= 0);
	fake_start(&f, cfd, 0);
	emit_collectives(1, 10);
	sender_flush(5000);
	assert_int_equal(fake_wait_colls(&f, 10), 10);
	pthread_mutex_lock(&f.mu);
	const struct fss_rec_sink *s = recs_sink(&f.r);
	uint64_t id = s->process_id;
	assert_int_not_equal(id, 0);
	assert_int_equal(s->serial, 1);
	assert_int_equal(s->kind, FSS_SINK_SOCKET);
	assert_int_equal(s->prev_serial, 0);
	assert_int_equal(s->prev_kind, 0);
	assert_int_equal(s->repeat_first, 0);
	assert_int_equal(s->repeat_count, 0);
	assert_int_equal(s->reserved, 0);
	assert_int_equal(s->head.source, 0);
	assert_preamble(&f.r);
	pthread_mutex_unlock(&f.mu);
	sender_stop(5000);
	fake_join(&f);
	fake_free(&f);
	close(lfd);

	/* A new process (source) draws a new id; a file sink says FILE. */
	fresh_source(NULL, out, "0", NULL);
	agent_activate();
	emit_collectives(1, 5);
	sender_stop(5000);
	trace_path(path, sizeof(path), out);
	recs_read_file(&file, path);
	s = recs_sink(&file);
	assert_int_not_equal(s->process_id, 0);
	assert_int_not_equal(s->process_id, id);
	assert_int_equal(s->serial, 1);
	assert_int_equal(s->kind, FSS_SINK_FILE);
	assert_int_equal(s->prev_serial, 0);
	assert_int_equal(s->repeat_count, 0);
	assert_preamble(&file);
	recs_free(&file);
	unlink(path);
}

/* A fork child is a new process: a new id, its sinks from serial 1; the
 * parent's go on unchanged. */
static void test_fork_child_draws_its_own_id(void **state)
{
	(void)state;
	char out[256], path[600], child_path[700];
	struct recs parent, child;
	int status;

	subdir(out, sizeof(out), "fork");
	fresh_source(NULL, out, "0", NULL);
	agent_activate();
	emit_collectives(1, 3);
	sender_flush(5000);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		agent_activate(); /* the child's own sender, as on its first NCCL call */
		emit_collectives(1, 2);
		sender_stop(5000);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	emit_collectives(4, 3);
	sender_stop(5000);
	trace_path(path, sizeof(path), out);
	recs_read_file(&parent, path);
	char *dash = strrchr(path, '-');
	snprintf(child_path, sizeof(child_path), "%.*s-%d.fss", (int)(dash - path), path, (int)pid);
	recs_read_file(&child, child_path);
	const struct fss_rec_sink *ps = recs_sink(&parent), *cs = recs_sink(&child);
	assert_int_not_equal(cs->process_id, 0);
	assert_int_not_equal(cs->process_id, ps->process_id);
	assert_int_equal(cs->serial, 1);
	assert_int_equal(ps->serial, 1);
	size_t sinks = 0;
	for (size_t i = 0; i < parent.n; i++)
		sinks += recs_get(&parent, i)->type == FSS_REC_SINK;
	assert_int_equal(sinks, 1); /* the parent kept its one sink */
	assert_int_equal(recs_seqs(&parent, 0, parent.n, (uint64_t[16]){0}, 0), 6);
	assert_int_equal(recs_seqs(&child, 0, child.n, (uint64_t[16]){0}, 0), 2);
	recs_free(&parent);
	recs_free(&child);
	unlink(path);
	unlink(child_path);
}

/* ---- acks and retention ------------------------------------------------------------------ */

/* The agent retains exactly the chunks the fake has after the first
 * `from` (once what is in flight has arrived). */
struct retained_is {
	struct fake *f;
	uint64_t from;
};

static int retained_matches(void *arg)
{
	struct retained_is *c = arg;

	pthread_mutex_lock(&c->f->mu);
	uint64_t want = recs_chunk_bytes(&c->f->r, c->from);
	pthread_mutex_unlock(&c->f->mu);
	return sender_retained_bytes() == want;
}

static void send_ack(int fd, uint64_t chunks, uint64_t records, uint32_t reserved)
{
	struct wire_ack a = {.magic = WIRE_ACK_MAGIC, .reserved = reserved, .chunks = chunks, .records = records};

	assert_int_equal(send(fd, &a, sizeof(a), MSG_NOSIGNAL), (ssize_t)sizeof(a));
}

static void test_acks_shrink_retention(void **state)
{
	(void)state;
	char addr[256], out[256];
	struct fake f;
	int lfd, cfd;

	subdir(out, sizeof(out), "acks");
	assert_int_equal(listener_open(tmpdir, "acks.sock", addr, sizeof(addr), &lfd), 0);
	fresh_source(addr, out, "0", NULL);
	agent_activate();
	cfd = listener_accept(lfd, WAIT_MS);
	assert_true(cfd >= 0);
	fake_start(&f, cfd, 0);
	emit_collectives(1, 2000); /* several chunks */
	sender_flush(5000);
	assert_int_equal(fake_wait_colls(&f, 2000), 2000);
	struct retained_is c = {.f = &f, .from = 0};
	assert_true(wait_for(retained_matches, &c)); /* every chunk sent is kept */
	assert_true(sender_retained_bytes() > 0);

	/* Ack the first chunk: exactly that chunk is let go. */
	pthread_mutex_lock(&f.mu);
	assert_true(f.r.chunks >= 3);
	uint64_t rec0 = f.r.rec_end[0];
	pthread_mutex_unlock(&f.mu);
	send_ack(cfd, 1, rec0, 0);
	c.from = 1;
	assert_true(wait_for(retained_matches, &c));

	/* Ack all: nothing retained but what came after. */
	struct wire_ack all;
	(void)fake_ack_all(&f, &all);
	c.from = all.chunks;
	assert_true(wait_for(retained_matches, &c));
	assert_int_equal(sender_bad_acks(), 0);
	assert_int_equal(atomic_load(&agent_counters.unconfirmed), 0);
	sender_stop(5000);
	fake_join(&f);
	fake_free(&f);

	/* A small retention keeps the newest chunks that fit and counts the
	 * records of those it let go unconfirmed. */
	fresh_source(addr, out, "0", "70000");
	agent_activate();
	cfd = listener_accept(lfd, WAIT_MS);
	assert_true(cfd >= 0);
	fake_start(&f, cfd, 0);
	emit_collectives(1, 3000);
	sender_flush(5000);
	assert_int_equal(fake_wait_colls(&f, 3000), 3000);
	uint64_t deadline = ms_now() + WAIT_MS, want_bytes, want_unconfirmed;
	for (;;) {
		pthread_mutex_lock(&f.mu);
		uint64_t k = f.r.chunks;
		assert_true(k >= 3);
		while (k > 0 && recs_chunk_bytes(&f.r, k - 1) <= 70000)
			k--;
		want_bytes = recs_chunk_bytes(&f.r, k);
		want_unconfirmed = k ? f.r.rec_end[k - 1] : 0;
		pthread_mutex_unlock(&f.mu);
		if ((sender_retained_bytes() == want_bytes &&
		     atomic_load(&agent_counters.unconfirmed) == want_unconfirmed) ||
		    ms_now() > deadline)
			break;
		pause_ms(2);
	}
	assert_int_equal(sender_retained_bytes(), want_bytes);
	assert_true(want_bytes <= 70000);
	assert_true(want_unconfirmed > 0);
	assert_int_equal(atomic_load(&agent_counters.unconfirmed), want_unconfirmed);
	sender_stop(5000);
	fake_join(&f);
	fake_free(&f);
	close(lfd);
}

/* Garbage on the return channel, and acks that do not fit the stream, are
 * counted and change nothing: the connection goes on, nothing is let go. */
static void test_garbage_on_return_channel(void **state)
{
	(void)state;
	char addr[256], out[256], junk[100];
	struct fake f;
	int lfd, cfd;

	subdir(out, sizeof(out), "garbage");
	assert_int_equal(listener_open(tmpdir, "garbage.sock", addr, sizeof(addr), &lfd), 0);
	fresh_source(addr, out, "0", NULL);
	agent_activate();
	cfd = listener_accept(lfd, WAIT_MS);
	assert_true(cfd >= 0);
	fake_start(&f, cfd, 0);
	emit_collectives(1, 1000);
	sender_flush(5000);
	assert_int_equal(fake_wait_colls(&f, 1000), 1000);
	struct retained_is c = {.f = &f, .from = 0};
	assert_true(wait_for(retained_matches, &c));
	uint64_t kept = sender_retained_bytes();
	uint64_t bad0 = sender_bad_acks();

	pthread_mutex_lock(&f.mu);
	uint64_t chunks = f.r.chunks, rec0 = f.r.rec_end[0];
	pthread_mutex_unlock(&f.mu);
	memset(junk, 0x5a, sizeof(junk));
	assert_int_equal(send(cfd, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
	send_ack(cfd, chunks + 5, rec0 * 100, 0); /* more than was sent */
	send_ack(cfd, 1, rec0, 7);		  /* reserved not 0 */
	send_ack(cfd, 1, rec0 + 1, 0);		  /* not a chunk boundary */
	uint64_t deadline = ms_now() + WAIT_MS;
	while (sender_bad_acks() < bad0 + 4 && ms_now() < deadline)
		pause_ms(2);
	assert_true(sender_bad_acks() >= bad0 + 4);
	assert_true(sender_retained_bytes() >= kept); /* nothing let go */

	/* The same connection goes on, and a good ack still works. */
	emit_collectives(1001, 100);
	sender_flush(5000);
	assert_int_equal(fake_wait_colls(&f, 1100), 1100);
	struct wire_ack all;
	(void)fake_ack_all(&f, &all);
	c.from = all.chunks;
	assert_true(wait_for(retained_matches, &c));
	pthread_mutex_lock(&f.mu);
	size_t sinks = 0;
	for (size_t i = 0; i < f.r.n; i++)
		sinks += recs_get(&f.r, i)->type == FSS_REC_SINK;
	assert_int_equal(sinks, 1);
	assert_false(f.done);
	pthread_mutex_unlock(&f.mu);
	sender_stop(5000);
	fake_join(&f);
	fake_free(&f);
	close(lfd);
}

/* ---- failover and reconnect --------------------------------------------------------------- */

static int cmp_seq(const uint64_t *seqs, size_t n, uint64_t first)
{
	for (size_t i = 0; i < n; i++)
		if (seqs[i] != first + i)
			return 0;
	return 1;
}

/* The socket dies after some chunks were acked: the file repeats exactly
 * the records sent after the ack, then what could not be sent, then the
 * rest; with the collector's acked records that is every collective once. */
static void test_failover_repeats_unacked(void **state)
{
	(void)state;
	char addr[256], out[256], path[600];
	struct fake f;
	struct recs file;
	static uint64_t seqs[1000];
	int lfd, cfd;

	subdir(out, sizeof(out), "failover");
	assert_int_equal(listener_open(tmpdir, "failover.sock", addr, sizeof(addr), &lfd), 0);
	fresh_source(addr, out, "0", NULL);
	agent_activate();
	cfd = listener_accept(lfd, WAIT_MS);
	assert_true(cfd >= 0);
	fake_start(&f, cfd, 0);
	emit_collectives(1, 100);
	sender_flush(5000);
	assert_int_equal(fake_wait_colls(&f, 100), 100);
	struct wire_ack ack;
	uint64_t acked = fake_ack_all(&f, &ack);
	struct retained_is c = {.f = &f, .from = ack.chunks};
	assert_true(wait_for(retained_matches, &c));
	emit_collectives(101, 100);
	sender_flush(5000);
	assert_int_equal(fake_wait_colls(&f, 200), 200);

	/* What the collector got after its ack: the agent must repeat it. */
	pthread_mutex_lock(&f.mu);
	size_t unacked = f.r.chunk_records - acked;
	size_t unacked_len =
	    f.r.at[f.r.chunk_records - 1] + recs_get(&f.r, f.r.chunk_records - 1)->size - f.r.at[acked];
	unsigned char *copy = malloc(unacked_len);
	assert_non_null(copy);
	memcpy(copy, f.r.bytes + f.r.at[acked], unacked_len);
	pthread_mutex_unlock(&f.mu);
	assert_true(unacked > 0);

	fake_hang_up(&f);
	close(lfd);
	emit_collectives(201, 50);
	sender_flush(5000); /* the write fails: a file from here on */
	sender_stop(5000);

	trace_path(path, sizeof(path), out);
	recs_read_file(&file, path);
	const struct fss_rec_sink *s = recs_sink(&file);
	assert_int_equal(s->serial, 2);
	assert_int_equal(s->kind, FSS_SINK_FILE);
	assert_int_equal(s->prev_serial, 1);
	assert_int_equal(s->prev_kind, FSS_SINK_SOCKET);
	assert_int_equal(s->repeat_first, acked);
	assert_true(s->repeat_count >= unacked);
	assert_preamble(&file);
	size_t rep = 2u + s->preamble;
	assert_true(file.n >= rep + s->repeat_count);
	assert_memory_equal(file.bytes + file.at[rep], copy, unacked_len); /* byte for byte */

	/* The collector's acked records, then the file's from its repeat on:
	 * 1..250, each once, in order. */
	size_t n = recs_seqs(&f.r, 0, acked, seqs, 0);
	n = recs_seqs(&file, rep, file.n, seqs, n);
	assert_int_equal(n, 250);
	assert_true(cmp_seq(seqs, n, 1));
	const struct fss_rec_drops *d = NULL;
	for (size_t i = 0; i < file.n; i++)
		if (recs_get(&file, i)->type == FSS_REC_DROPS)
			d = (const void *)recs_get(&file, i);
	assert_non_null(d);
	assert_int_equal(d->sink_dropped, 0);
	free(copy);
	recs_free(&file);
	fake_free(&f);
	unlink(path);
}

struct gone {
	const char *path;
};

static int file_gone(void *arg)
{
	char partial[700];
	const char *path = ((struct gone *)arg)->path;
	struct stat st;

	snprintf(partial, sizeof(partial), "%s.partial", path);
	return lstat(path, &st) != 0 && lstat(partial, &st) != 0;
}

/* No collector at start: a file. The collector comes: the file goes to it
 * whole as the socket sink's repeat, and is removed at its first ack. */
static void test_reconnect_sends_file(void **state)
{
	(void)state;
	char addr[300], out[256], path[600], partial[700];
	struct fake f;
	struct recs before;
	static uint64_t seqs[1000];
	int lfd, cfd;

	subdir(out, sizeof(out), "reconnect");
	snprintf(addr, sizeof(addr), "unix:%s/back.sock", tmpdir);
	fresh_source(addr, out, "20", NULL);
	agent_activate();
	emit_collectives(1, 100);
	sender_flush(5000);
	trace_path(path, sizeof(path), out);
	snprintf(partial, sizeof(partial), "%s.partial", path);
	recs_read_file(&before, partial);
	const struct fss_rec_sink *s0 = recs_sink(&before);
	assert_int_equal(s0->serial, 1);
	assert_int_equal(s0->kind, FSS_SINK_FILE);
	uint64_t id = s0->process_id;
	size_t seen = recs_seqs(&before, 0, before.n, seqs, 0);
	assert_int_equal(seen, 100);

	assert_int_equal(listener_open(tmpdir, "back.sock", addr, sizeof(addr), &lfd), 0);
	cfd = listener_accept(lfd, WAIT_MS);
	assert_true(cfd >= 0);
	fake_start(&f, cfd, 0);
	assert_int_equal(fake_wait_colls(&f, 100), 100);
	/* Until the collector acknowledges, the file is the only safe copy. */
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	(void)fake_ack_all(&f, NULL);
	struct gone g = {.path = path};
	assert_true(wait_for(file_gone, &g));

	pthread_mutex_lock(&f.mu);
	const struct fss_rec_sink *s = recs_sink(&f.r);
	assert_int_equal(s->process_id, id);
	assert_int_equal(s->serial, 2);
	assert_int_equal(s->kind, FSS_SINK_SOCKET);
	assert_int_equal(s->prev_serial, 1);
	assert_int_equal(s->prev_kind, FSS_SINK_FILE);
	assert_int_equal(s->repeat_first, 0);
	assert_true(s->repeat_count >= before.n);
	assert_preamble(&f.r);
	size_t rep = 2u + s->preamble;
	uint64_t count = s->repeat_count;
	assert_true(f.r.chunk_records >= rep + count);
	/* The file's records, exactly as they were: its hello, its sink... */
	assert_memory_equal(f.r.bytes + f.r.at[rep], before.bytes, before.len);
	const struct fss_rec_sink *inner = (const void *)recs_get(&f.r, rep + 1);
	assert_int_equal(inner->head.type, FSS_REC_SINK);
	assert_int_equal(inner->serial, 1);
	assert_int_equal(inner->process_id, id);
	pthread_mutex_unlock(&f.mu);

	emit_collectives(101, 50);
	sender_flush(5000);
	assert_int_equal(fake_wait_colls(&f, 150), 150);
	pthread_mutex_lock(&f.mu);
	size_t n = recs_seqs(&f.r, rep, f.r.chunk_records, seqs, 0);
	pthread_mutex_unlock(&f.mu);
	assert_int_equal(n, 150);
	assert_true(cmp_seq(seqs, n, 1));
	sender_stop(5000);
	fake_join(&f);
	assert_true(file_gone(&g)); /* the socket was the last sink: no file */
	fake_free(&f);
	recs_free(&before);
	close(lfd);
}

/* The collector is killed after acking part of the stream and a new one
 * comes at the same address: socket 1 -> file 2 (repeating socket 1 after
 * the ack) -> socket 3 (repeating file 2 whole). Merged level by level, as
 * docs/format.md says, that is every collective once. */
static void test_collector_restart_chain(void **state)
{
	(void)state;
	char addr[300], out[256], path[600], sock[300];
	struct fake f1, f3;
	static uint64_t seqs[2000];
	int lfd, cfd;

	subdir(out, sizeof(out), "restart");
	snprintf(sock, sizeof(sock), "%s/restart.sock", tmpdir);
	assert_int_equal(listener_open(tmpdir, "restart.sock", addr, sizeof(addr), &lfd), 0);
	fresh_source(addr, out, "20", NULL);
	agent_activate();
	cfd = listener_accept(lfd, WAIT_MS);
	assert_true(cfd >= 0);
	fake_start(&f1, cfd, 0);
	emit_collectives(1, 300);
	sender_flush(5000);
	assert_int_equal(fake_wait_colls(&f1, 300), 300);
	struct wire_ack ack;
	uint64_t acked = fake_ack_all(&f1, &ack);
	struct retained_is c = {.f = &f1, .from = ack.chunks};
	assert_true(wait_for(retained_matches, &c));
	emit_collectives(301, 300);
	sender_flush(5000);
	assert_int_equal(fake_wait_colls(&f1, 600), 600);
	close(lfd); /* the collector is killed: its listener goes first */
	unlink(sock);
	fake_hang_up(&f1);
	emit_collectives(601, 300);
	sender_flush(5000); /* fails: file 2 */
	trace_path(path, sizeof(path), out);

	assert_int_equal(listener_open(tmpdir, "restart.sock", addr, sizeof(addr), &lfd), 0);
	cfd = listener_accept(lfd, WAIT_MS);
	assert_true(cfd >= 0);
	fake_start(&f3, cfd, 0);
	send_ack(cfd, 0, 0, 0); /* a collector that acknowledges says so at once */
	struct gone g = {.path = path};
	assert_true(wait_for(file_gone, &g));
	emit_collectives(901, 100);
	sender_flush(5000);
	size_t n1 = recs_seqs(&f1.r, 0, acked, seqs, 0); /* those are not repeated */
	assert_int_equal(fake_wait_colls(&f3, 1000 - n1), 1000 - n1);
	sender_stop(5000);
	fake_join(&f3);

	const struct fss_rec_sink *s3 = recs_sink(&f3.r);
	assert_int_equal(s3->serial, 3);
	assert_int_equal(s3->prev_serial, 2);
	assert_int_equal(s3->prev_kind, FSS_SINK_FILE);
	assert_int_equal(s3->repeat_first, 0);
	size_t rep3 = 2u + s3->preamble; /* file 2 from its hello */
	const struct fss_rec_sink *s2 = (const void *)recs_get(&f3.r, rep3 + 1);
	assert_int_equal(s2->head.type, FSS_REC_SINK);
	assert_int_equal(s2->serial, 2);
	assert_int_equal(s2->prev_serial, 1);
	assert_int_equal(s2->prev_kind, FSS_SINK_SOCKET);
	assert_int_equal(s2->repeat_first, acked); /* f1 holds exactly that many of socket 1 */
	/* Socket 1 as f1 acked it, then file 2 past its hello, sink and
	 * preamble (its repeat of socket 1 starts where f1's ack ends), then
	 * socket 3's own records. */
	size_t n = recs_seqs(&f1.r, 0, acked, seqs, 0);
	n = recs_seqs(&f3.r, rep3 + 2u + s2->preamble, f3.r.chunk_records, seqs, n);
	assert_int_equal(n, 1000);
	assert_true(cmp_seq(seqs, n, 1));
	fake_free(&f1);
	fake_free(&f3);
	close(lfd);
}

/* Trace files in dir; returns how many (names in last). */
static int count_traces(const char *dir, char *last, size_t cap)
{
	char cmd[600];
	int n = 0;

	snprintf(cmd, sizeof(cmd), "ls '%s'", dir);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char line[400];
	while (fgets(line, sizeof(line), p)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "fsdpscope-", 10) == 0) {
			snprintf(last, cap, "%s/%s", dir, line);
			n++;
		}
	}
	pclose(p);
	return n;
}

/* A collector that takes each connection and hangs up before acking (it
 * refuses the agent, or dies at once), three times: each failed socket's
 * file repeats it whole, the file before is removed, and one file holds
 * every collective once, nested level by level. */
static void test_collector_that_keeps_hanging_up(void **state)
{
	(void)state;
	char addr[300], out[256], last[700];
	static uint64_t seqs[1000];
	struct recs file;
	struct fake f;
	int lfd, cfd;

	subdir(out, sizeof(out), "hangups");
	snprintf(addr, sizeof(addr), "unix:%s/hangups.sock", tmpdir);
	fresh_source(addr, out, "20", NULL);
	agent_activate();
	emit_collectives(1, 50);
	sender_flush(5000);
	assert_int_equal(listener_open(tmpdir, "hangups.sock", addr, sizeof(addr), &lfd), 0);
	uint64_t next = 51;
	for (int round = 0; round < 3; round++) {
		cfd = listener_accept(lfd, WAIT_MS);
		assert_true(cfd >= 0);
		fake_start(&f, cfd, 0);
		assert_true(fake_wait_colls(&f, next - 1) >= next - 1); /* the file came whole */
		fake_hang_up(&f);
		fake_free(&f);
		emit_collectives(next, 50);
		next += 50;
		sender_flush(5000); /* the write fails: a new file */
	}
	close(lfd);
	emit_collectives(next, 50);
	next += 50;
	sender_stop(5000);
	assert_int_equal(count_traces(out, last, sizeof(last)), 1);
	recs_read_file(&file, last);
	const struct fss_rec_sink *s = recs_sink(&file);
	assert_int_equal(s->serial, 7); /* file, socket, file, socket, file, socket, file */
	assert_int_equal(s->prev_serial, 6);
	assert_int_equal(s->repeat_first, 0);
	size_t sinks = 0;
	for (size_t i = 0; i < file.n; i++)
		sinks += recs_get(&file, i)->type == FSS_REC_SINK;
	assert_int_equal(sinks, 7); /* each level inside the next */
	size_t n = recs_seqs(&file, 0, file.n, seqs, 0);
	assert_int_equal(n, next - 1);
	assert_true(cmp_seq(seqs, n, 1));
	recs_free(&file);
	unlink(last);
}

/* A collector that closes each connection at once (it refuses the agent):
 * the file goes on, and every collective is in the files in out. Whether
 * the agent saw the hang-up before it used the connection depends on the
 * scheduler, so only what holds either way is asserted: nothing lost. */
static void test_collector_that_refuses(void **state)
{
	(void)state;
	char addr[300], out[256], cmd[400], line[600];
	static uint64_t seqs[4000];
	static unsigned char seen[201];
	int lfd, cfd;

	subdir(out, sizeof(out), "refused");
	snprintf(addr, sizeof(addr), "unix:%s/refused.sock", tmpdir);
	fresh_source(addr, out, "300", NULL);
	agent_activate();
	emit_collectives(1, 50);
	sender_flush(5000);
	assert_int_equal(listener_open(tmpdir, "refused.sock", addr, sizeof(addr), &lfd), 0);
	for (int round = 0; round < 3; round++) {
		cfd = listener_accept(lfd, WAIT_MS);
		assert_true(cfd >= 0);
		close(cfd);
		emit_collectives(51 + 50 * (uint64_t)round, 50);
		sender_flush(5000);
	}
	close(lfd);
	sender_stop(5000);
	snprintf(cmd, sizeof(cmd), "ls '%s'", out);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	memset(seen, 0, sizeof(seen));
	while (fgets(line, sizeof(line), p)) {
		char path[900];
		struct recs r;

		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "fsdpscope-", 10) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", out, line);
		recs_read_file(&r, path);
		size_t n = recs_seqs(&r, 0, r.n, seqs, 0);
		for (size_t i = 0; i < n; i++)
			if (seqs[i] >= 1 && seqs[i] <= 200)
				seen[seqs[i]] = 1;
		recs_free(&r);
		unlink(path);
	}
	pclose(p);
	for (int i = 1; i <= 200; i++)
		assert_true(seen[i]);
}

/* ---- TCP keys ---------------------------------------------------------------------------- */

static int tcp_listen(int *port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = 0};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

static void test_tcp_key(void **state)
{
	(void)state;
	char out[256], keyfile[300], sink[700], path[600];
	unsigned char key[WIRE_KEY_BYTES];
	struct fake f;
	struct recs file;
	int lfd, cfd, port;

	subdir(out, sizeof(out), "tcp");
	snprintf(keyfile, sizeof(keyfile), "%s/tcp.key", tmpdir);
	assert_int_equal(wire_key_create(keyfile, key), 0);
	lfd = tcp_listen(&port);

	/* With a key: its 40 bytes first, then the trace. */
	snprintf(sink, sizeof(sink), "tcp:127.0.0.1:%d,key=%s", port, keyfile);
	fresh_source(sink, out, "0", NULL);
	agent_activate();
	cfd = listener_accept(lfd, WAIT_MS);
	assert_true(cfd >= 0);
	fake_start(&f, cfd, 1);
	emit_collectives(1, 5);
	sender_flush(5000);
	assert_int_equal(fake_wait_colls(&f, 5), 5);
	pthread_mutex_lock(&f.mu);
	assert_int_equal(f.key_have, WIRE_KEY_HELLO_BYTES);
	assert_int_equal(wire_key_check(key, f.key_hello), 1);
	assert_int_equal(recs_sink(&f.r)->kind, FSS_SINK_SOCKET);
	pthread_mutex_unlock(&f.mu);
	sender_stop(5000);
	fake_join(&f);
	fake_free(&f);

	/* Without a key: nothing before the trace. */
	snprintf(sink, sizeof(sink), "tcp:127.0.0.1:%d", port);
	fresh_source(sink, out, "0", NULL);
	agent_activate();
	cfd = listener_accept(lfd, WAIT_MS);
	assert_true(cfd >= 0);
	fake_start(&f, cfd, 0);
	emit_collectives(1, 5);
	sender_flush(5000);
	assert_int_equal(fake_wait_colls(&f, 5), 5);
	pthread_mutex_lock(&f.mu);
	assert_int_equal(recs_get(&f.r, 0)->type, FSS_REC_PROCESS_HELLO);
	pthread_mutex_unlock(&f.mu);
	sender_stop(5000);
	fake_join(&f);
	fake_free(&f);

	/* A key that cannot be used (missing; readable by others): no
	 * connection at all, a file instead, and no retry (retry on). */
	char missing[400];
	snprintf(missing, sizeof(missing), "%s/none.key", tmpdir);
	for (int k = 0; k < 2; k++) {
		if (k == 1)
			assert_int_equal(chmod(keyfile, 0644), 0);
		snprintf(sink, sizeof(sink), "tcp:127.0.0.1:%d,key=%s", port, k == 0 ? missing : keyfile);
		fresh_source(sink, out, "20", NULL);
		agent_activate();
		emit_collectives(1, 5);
		sender_flush(5000);
		sender_stop(5000);
		struct pollfd p = {.fd = lfd, .events = POLLIN};
		assert_int_equal(poll(&p, 1, 0), 0); /* the sender is gone: nothing pending means none came */
		trace_path(path, sizeof(path), out);
		recs_read_file(&file, path);
		assert_int_equal(recs_sink(&file)->kind, FSS_SINK_FILE);
		assert_int_equal(recs_seqs(&file, 0, file.n, (uint64_t[8]){0}, 0), 5);
		recs_free(&file);
		unlink(path);
	}
	close(lfd);
}

/* ---- calls in flight ------------------------------------------------------------------ */

/* Two ranks of one stand-in communicator, each on its own thread: rank 0
 * enters an AllReduce at once and stays inside it until rank 1 is released
 * into the same AllReduce by the test. */
struct blocked_rank {
	pthread_t thread;
	int rank;
	ncclUniqueId id;
	_Atomic(ncclComm_t) comm; /* published before the AllReduce */
	_Atomic int go;		  /* rank 1: enter the AllReduce */
	_Atomic int returned;	  /* the AllReduce returned */
	ncclResult_t init_res, res, destroy_res;
	float x, y;
};

static void *blocked_rank_main(void *arg)
{
	struct blocked_rank *b = arg;
	ncclComm_t comm = NULL;

	b->init_res = ncclCommInitRank(&comm, 2, b->id, b->rank);
	if (b->init_res != ncclSuccess) {
		atomic_store(&b->returned, 1);
		return NULL;
	}
	atomic_store(&b->comm, comm);
	while (b->rank == 1 && !atomic_load(&b->go))
		pause_ms(1);
	b->res = ncclAllReduce(&b->x, &b->y, 1, ncclFloat32, ncclSum, comm, NULL);
	atomic_store(&b->returned, 1);
	b->destroy_res = ncclCommDestroy(comm);
	return NULL;
}

/* Index in the fake's records of the first enter of a collective on comm
 * (and its seq), or -1. Under the fake's lock. */
static long find_enter(const struct recs *r, uint64_t comm, uint64_t *seq)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct fss_rec_enter *e = (const void *)recs_get(r, i);
		if (e->head.type == FSS_REC_ENTER && e->kind == FSS_ENTER_COLLECTIVE && e->comm == comm) {
			*seq = e->seq;
			return (long)i;
		}
	}
	return -1;
}

static long find_collective(const struct recs *r, uint64_t seq)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct fss_rec_collective *c = (const void *)recs_get(r, i);
		if (c->head.type == FSS_REC_COLLECTIVE && c->seq == seq)
			return (long)i;
	}
	return -1;
}

struct enter_wait {
	struct fake *f;
	uint64_t comm, seq;
	long at;
};

static int enter_seen(void *arg)
{
	struct enter_wait *w = arg;

	pthread_mutex_lock(&w->f->mu);
	w->at = find_enter(&w->f->r, w->comm, &w->seq);
	pthread_mutex_unlock(&w->f->mu);
	return w->at >= 0;
}

static int comm_published(void *arg)
{
	return atomic_load(&((struct blocked_rank *)arg)->comm) != NULL ||
	       atomic_load(&((struct blocked_rank *)arg)->returned);
}

struct coll_wait {
	struct fake *f;
	uint64_t seq;
	long at;
};

static int collective_seen(void *arg)
{
	struct coll_wait *w = arg;

	pthread_mutex_lock(&w->f->mu);
	w->at = find_collective(&w->f->r, w->seq);
	pthread_mutex_unlock(&w->f->mu);
	return w->at >= 0;
}

/* A rank blocked inside a collective has told the collector which one: its
 * enter record arrives while the call is still blocked (its peer has not
 * even been let in), with no flush asked for; the collective record of the
 * same seq follows once the call returns. Only order is asserted. */
static void test_enter_reaches_collector_while_blocked(void **state)
{
	(void)state;
	char addr[256], out[256];
	struct fake f;
	struct blocked_rank ranks[2];
	int lfd, cfd;

	/* the stand-in's dead-peer timeout far above the test's own waits */
	setenv("FSDP_REF_NCCL_TIMEOUT_S", "120", 1);
	setenv("FSDP_REF_LINK_LATENCY_US", "0", 1);
	subdir(out, sizeof(out), "blocked");
	assert_int_equal(listener_open(tmpdir, "blocked.sock", addr, sizeof(addr), &lfd), 0);
	fresh_source(addr, out, "0", NULL);
	agent_activate();
	cfd = listener_accept(lfd, WAIT_MS);
	assert_true(cfd >= 0);
	fake_start(&f, cfd, 0);

	memset(ranks, 0, sizeof(ranks));
	assert_int_equal(pncclGetUniqueId(&ranks[0].id), ncclSuccess);
	ranks[1].id = ranks[0].id;
	for (int i = 0; i < 2; i++) {
		ranks[i].rank = i;
		ranks[i].x = (float)(i + 1);
		assert_int_equal(pthread_create(&ranks[i].thread, NULL, blocked_rank_main, &ranks[i]), 0);
	}
	assert_true(wait_for(comm_published, &ranks[0]));
	assert_int_equal(ranks[0].init_res, ncclSuccess);
	ncclComm_t comm0 = atomic_load(&ranks[0].comm);

	/* rank 0 is inside its AllReduce, waiting for rank 1, which has not
	 * been let in: its enter record must reach the collector now */
	struct enter_wait ew = {.f = &f, .comm = (uint64_t)(uintptr_t)comm0};
	int seen = wait_for(enter_seen, &ew);
	int returned_then = atomic_load(&ranks[0].returned);
	pthread_mutex_lock(&f.mu);
	long coll_then = seen ? find_collective(&f.r, ew.seq) : -1;
	pthread_mutex_unlock(&f.mu);

	atomic_store(&ranks[1].go, 1); /* release, whatever the outcome: no thread is left behind */
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(ranks[i].thread, NULL), 0);
	assert_true(seen);
	assert_int_equal(returned_then, 0);
	assert_int_equal(coll_then, -1);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(ranks[i].init_res, ncclSuccess);
		assert_int_equal(ranks[i].res, ncclSuccess);
		assert_int_equal(ranks[i].destroy_res, ncclSuccess);
		assert_true(ranks[i].y == 3.0f);
	}

	/* the exit: the collective record of the same seq, after the enter */
	struct coll_wait cw = {.f = &f, .seq = ew.seq};
	assert_true(wait_for(collective_seen, &cw));
	assert_true(cw.at > ew.at);
	pthread_mutex_lock(&f.mu);
	const struct fss_rec_enter *e = (const void *)recs_get(&f.r, (size_t)ew.at);
	const struct fss_rec_collective *c = (const void *)recs_get(&f.r, (size_t)cw.at);
	assert_int_equal(e->op, FSS_OP_ALLREDUCE);
	assert_int_equal(e->count, 1);
	assert_int_equal(e->enter_ns, c->enter_ns);
	assert_int_equal(e->thread, c->thread);
	assert_int_equal(c->comm, (uint64_t)(uintptr_t)comm0);
	pthread_mutex_unlock(&f.mu);

	sender_stop(5000);
	fake_join(&f);
	fake_free(&f);
	close(lfd);
	unsetenv("FSDP_REF_NCCL_TIMEOUT_S");
	unsetenv("FSDP_REF_LINK_LATENCY_US");
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/fss-agent-sink-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	sender_stop(5000);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sink_record_fields),
	    cmocka_unit_test(test_fork_child_draws_its_own_id),
	    cmocka_unit_test(test_acks_shrink_retention),
	    cmocka_unit_test(test_garbage_on_return_channel),
	    cmocka_unit_test(test_failover_repeats_unacked),
	    cmocka_unit_test(test_reconnect_sends_file),
	    cmocka_unit_test(test_collector_restart_chain),
	    cmocka_unit_test(test_collector_that_keeps_hanging_up),
	    cmocka_unit_test(test_collector_that_refuses),
	    cmocka_unit_test(test_tcp_key),
	    cmocka_unit_test(test_enter_reaches_collector_while_blocked),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
