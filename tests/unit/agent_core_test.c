/*
 * agent_core_test.c - the agent's core in-process: string interning, the
 * ring-to-sink path (socket, file, fallback, a collector that closes or
 * stalls), dormant mode and reconnects, and the NCCL wrappers over the CPU
 * stand-in (libnccl.so.2).
 *
 * The agent's sources are compiled into this program (with the project's
 * flags, sanitizers included): its NCCL wrappers interpose the stand-in for
 * the calls made here and forward with dlsym(RTLD_NEXT), exactly as in a
 * preloaded process. Each case starts a fresh source: sender_stop() then
 * agent_reset_source(), which re-reads the environment it set.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <nccl.h>

#include "agent/agent.h"
#include "agent/emit.h"
#include "agent/lifecycle.h"
#include "agent/sender.h"
#include "agent/strings.h"
#include "common/record.h"
#include "common/strtab.h"
#include "common/trace_parser.h"
#include "tests/unit/agent_core_trace.h"

static char tmpdir[64];

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Wait (bounded) until the agent's state is `want`. */
static int wait_state(int want, int timeout_ms)
{
	uint64_t deadline = ms_now() + (uint64_t)timeout_ms;

	while (atomic_load(&agent_state_now) != want) {
		if (ms_now() > deadline)
			return -1;
		sleep_ms(5);
	}
	return 0;
}

/* A fresh source with exactly these variables set (NULL: unset). */
static void fresh_source(const char *sink, const char *out, const char *dormant, const char *timeout_ms)
{
	sender_stop(5000);
	if (sink)
		setenv("FSDPSCOPE_SINK", sink, 1);
	else
		unsetenv("FSDPSCOPE_SINK");
	if (out)
		setenv("FSDPSCOPE_OUT", out, 1);
	else
		unsetenv("FSDPSCOPE_OUT");
	if (dormant)
		setenv("FSDPSCOPE_DORMANT", dormant, 1);
	else
		unsetenv("FSDPSCOPE_DORMANT");
	if (timeout_ms)
		setenv("FSDPSCOPE_SINK_TIMEOUT_MS", timeout_ms, 1);
	else
		unsetenv("FSDPSCOPE_SINK_TIMEOUT_MS");
	agent_reset_source();
}

static void subdir(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", tmpdir, name);
}

/* The file sink's name for this process in dir. */
static void trace_path(char *out, size_t cap, const char *dir, int pid)
{
	char host[256];

	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(out, cap, "%s/fsdpscope-%s-%d.fss", dir, host, pid);
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

/* Seqs strictly rising from first, no gap. */
static void assert_seqs(const struct trace_summary *s, uint64_t first)
{
	for (size_t i = 0; i < s->ncolls; i++)
		assert_int_equal(s->colls[i].seq, first + i);
}

/* A stand-in collector reading one connection on its own thread, as a real
 * one does (a test that read only after a flush would stall the sender on a
 * full socket buffer). */
struct reader {
	pthread_t thread;
	int fd;
	pthread_mutex_t mu;
	struct trace_summary s; /* under mu */
	int done;		/* under mu: EOF or error */
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	char buf[65536];

	for (;;) {
		ssize_t n = recv(r->fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		pthread_mutex_lock(&r->mu);
		if (n > 0)
			(void)summary_feed(&r->s, buf, (size_t)n);
		else
			r->done = 1;
		pthread_mutex_unlock(&r->mu);
		if (n <= 0)
			return NULL;
	}
}

static void reader_start(struct reader *r, int fd)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	pthread_mutex_init(&r->mu, NULL);
	assert_int_equal(summary_init(&r->s), 0);
	assert_int_equal(pthread_create(&r->thread, NULL, reader_main, r), 0);
}

/* Wait (bounded) until the reader has n collectives; returns how many. */
static size_t reader_wait_colls(struct reader *r, size_t n, int timeout_ms)
{
	uint64_t deadline = ms_now() + (uint64_t)timeout_ms;
	size_t have;

	for (;;) {
		pthread_mutex_lock(&r->mu);
		have = r->s.ncolls;
		pthread_mutex_unlock(&r->mu);
		if (have >= n || ms_now() > deadline)
			return have;
		sleep_ms(2);
	}
}

/* The collector hangs up: the agent's next write fails. */
static void reader_hang_up(struct reader *r)
{
	shutdown(r->fd, SHUT_RDWR);
	pthread_join(r->thread, NULL);
	close(r->fd);
}

/* Wait for the agent to close the stream (sender_stop), then join. */
static void reader_join(struct reader *r)
{
	pthread_join(r->thread, NULL);
	close(r->fd);
}

static void reader_free(struct reader *r)
{
	summary_free(&r->s);
	pthread_mutex_destroy(&r->mu);
}

/* ---- strings ---------------------------------------------------------------- */

static void test_intern_same_id(void **state)
{
	(void)state;
	char long_name[300];
	uint32_t a = agent_intern("layers.0.attn", -1);

	assert_int_not_equal(a, FSS_STRING_NONE);
	assert_int_equal(agent_intern("layers.0.attn", -1), a);
	assert_int_equal(agent_intern("layers.0.attn.extra", 13), a);
	uint32_t b = agent_intern("layers.1.attn", -1);
	assert_int_not_equal(b, FSS_STRING_NONE);
	assert_int_not_equal(b, a);
	assert_int_equal(agent_intern(NULL, -1), FSS_STRING_NONE);
	uint32_t empty = agent_intern("", 0);
	assert_int_not_equal(empty, FSS_STRING_NONE);
	assert_int_equal(agent_intern("", -1), empty);
	memset(long_name, 'k', sizeof(long_name));
	uint32_t l = agent_intern(long_name, sizeof(long_name));
	assert_int_not_equal(l, FSS_STRING_NONE);
	assert_int_equal(agent_intern(long_name, sizeof(long_name)), l);
	assert_int_not_equal(agent_intern(long_name, sizeof(long_name) - 1), l);
}

static void replay_into_strtab(void *ctx, const void *record)
{
	assert_int_equal(strtab_add_part(ctx, record), 0);
}

static void test_intern_replay(void **state)
{
	(void)state;
	char names[50][160];
	uint32_t ids[50];
	strtab_t *t = strtab_new();

	assert_non_null(t);
	for (int i = 0; i < 50; i++) {
		/* some longer than one string record (104 bytes) */
		int n = snprintf(names[i], sizeof(names[i]), "replay.%d.", i);
		for (int k = 0; k < (i % 3) * 60; k++)
			names[i][n++] = (char)('a' + k % 26);
		names[i][n] = '\0';
		ids[i] = agent_intern(names[i], -1);
		assert_int_not_equal(ids[i], FSS_STRING_NONE);
	}
	agent_strings_replay(replay_into_strtab, t);
	for (int i = 0; i < 50; i++) {
		const char *got = strtab_get(t, 0, ids[i]);
		assert_non_null(got);
		assert_string_equal(got, names[i]);
	}
	strtab_free(t);
}

#define INTERN_THREADS 4
#define INTERN_NAMES 2000

static void *intern_worker(void *arg)
{
	uint32_t *ids = arg;
	char name[64];

	for (int i = 0; i < INTERN_NAMES; i++) {
		snprintf(name, sizeof(name), "threaded.name.%d", i);
		ids[i] = agent_intern(name, -1);
	}
	return NULL;
}

static void test_intern_threads(void **state)
{
	(void)state;
	static uint32_t ids[INTERN_THREADS][INTERN_NAMES];
	pthread_t t[INTERN_THREADS];

	for (int i = 0; i < INTERN_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, intern_worker, ids[i]), 0);
	for (int i = 0; i < INTERN_THREADS; i++)
		pthread_join(t[i], NULL);
	/* The thread that claims a name's slot always gets its id; one that
	 * looks it up meanwhile waits a bounded number of spins and may give up
	 * with FSS_STRING_NONE when the definer is descheduled (the agent never
	 * blocks). So: every name has one id, every thread saw it or NONE, and
	 * a lookup once all are defined finds exactly that id. */
	uint32_t prev = FSS_STRING_NONE;
	for (int n = 0; n < INTERN_NAMES; n++) {
		char name[64];
		uint32_t id = FSS_STRING_NONE;

		for (int i = 0; i < INTERN_THREADS; i++) {
			if (ids[i][n] == FSS_STRING_NONE)
				continue;
			if (id == FSS_STRING_NONE)
				id = ids[i][n];
			assert_int_equal(ids[i][n], id);
		}
		assert_int_not_equal(id, FSS_STRING_NONE);
		snprintf(name, sizeof(name), "threaded.name.%d", n);
		assert_int_equal(agent_intern(name, -1), id);
		assert_int_not_equal(id, prev);
		prev = id;
	}
}

/* ---- sinks -------------------------------------------------------------------- */

static void test_socket_sink(void **state)
{
	(void)state;
	char addr[256], out[256];
	struct reader r;
	int lfd, cfd;

	subdir(out, sizeof(out), "socket-out");
	assert_int_equal(listener_open(tmpdir, "socket.sock", addr, sizeof(addr), &lfd), 0);
	fresh_source(addr, out, NULL, NULL);
	assert_int_equal(atomic_load(&agent_state_now), AGENT_ON);
	agent_activate();
	cfd = listener_accept(lfd, 5000);
	assert_true(cfd >= 0);
	reader_start(&r, cfd);
	emit_collectives(1, 1000);
	sender_flush(5000);
	assert_int_equal(reader_wait_colls(&r, 1000, 5000), 1000);
	uint64_t t0 = ms_now();
	sender_stop(5000);
	assert_true(ms_now() - t0 < 5000);
	reader_join(&r);
	struct trace_summary *s = &r.s;
	assert_int_equal(summary_finish(s), 0);
	assert_true(s->header_seen);
	assert_true(s->first_is_hello);
	assert_int_equal(s->hello.pid, (uint32_t)getpid());
	assert_int_equal(s->hello.path, FSS_PATH_INTERPOSE);
	assert_true(s->hello.features & FSS_FEATURE_NCCL);
	assert_non_null(summary_string(s, s->hello.host));
	assert_non_null(summary_string(s, s->hello.command));
	assert_int_equal(s->ncolls, 1000);
	assert_seqs(s, 1);
	assert_true(s->have_drops);
	assert_int_equal(s->drops.ring_dropped, 0);
	assert_int_equal(s->drops.sink_dropped, 0);
	assert_true(s->have_end);
	assert_true(s->end_is_last);
	assert_int_equal(s->max_sources, 1); /* the agent always writes source 0 */
	reader_free(&r);
	close(lfd);
	struct stat st;
	assert_int_not_equal(stat(out, &st), 0); /* no file when the collector answered */
}

static void test_file_sink_when_no_collector(void **state)
{
	(void)state;
	char addr[256], out[256], path[600];
	struct trace_summary s;

	subdir(out, sizeof(out), "fallback");
	snprintf(addr, sizeof(addr), "unix:%s/nobody.sock", tmpdir);
	fresh_source(addr, out, NULL, NULL);
	agent_activate();
	emit_collectives(1, 10);
	sender_stop(5000);
	trace_path(path, sizeof(path), out, (int)getpid());
	assert_int_equal(summary_read_file(&s, path), 0);
	assert_true(s.first_is_hello);
	assert_int_equal(s.ncolls, 10);
	assert_seqs(&s, 1);
	assert_true(s.have_end);
	assert_true(s.end_is_last);
	assert_int_equal(s.drops.sink_dropped, 0);
	summary_free(&s);
}

static void test_sink_closed_mid_run(void **state)
{
	(void)state;
	char addr[256], out[256], path[600];
	struct trace_summary file;
	struct reader r;
	int lfd, cfd;

	subdir(out, sizeof(out), "closed");
	assert_int_equal(listener_open(tmpdir, "closed.sock", addr, sizeof(addr), &lfd), 0);
	fresh_source(addr, out, NULL, NULL);
	agent_activate();
	cfd = listener_accept(lfd, 5000);
	assert_true(cfd >= 0);
	reader_start(&r, cfd);
	emit_collectives(1, 100);
	sender_flush(5000);
	assert_int_equal(reader_wait_colls(&r, 100, 5000), 100);
	reader_hang_up(&r); /* the collector goes away */
	close(lfd);
	emit_collectives(101, 100);
	sender_flush(5000); /* the write fails (EPIPE, and no SIGPIPE): the rest goes to a file */
	emit_collectives(201, 100);
	sender_stop(5000);
	trace_path(path, sizeof(path), out, (int)getpid());
	assert_int_equal(summary_read_file(&file, path), 0);
	assert_true(file.first_is_hello);
	assert_true(file.have_end);
	assert_true(file.have_drops);
	/* Every record is in the socket, in the file, or counted lost; none twice. */
	uint64_t lost = file.drops.sink_dropped;
	assert_int_equal(r.s.ncolls, 100);
	assert_true(r.s.ncolls + file.ncolls <= 300);
	assert_true(r.s.ncolls + file.ncolls + lost >= 300);
	for (size_t i = 0; i < file.ncolls; i++)
		assert_true(file.colls[i].seq > 100);
	assert_true(file.ncolls >= 100); /* at least the last batch */
	reader_free(&r);
	summary_free(&file);
}

static void test_sink_that_never_reads(void **state)
{
	(void)state;
	char addr[256], out[256], path[600];
	struct trace_summary sock, file;
	int lfd, cfd;
	const int n = 30000; /* ~3 MB: far more than a socket buffer holds */

	subdir(out, sizeof(out), "stalled");
	assert_int_equal(listener_open(tmpdir, "stalled.sock", addr, sizeof(addr), &lfd), 0);
	fresh_source(addr, out, NULL, "200");
	agent_activate();
	cfd = listener_accept(lfd, 5000);
	assert_true(cfd >= 0);
	emit_collectives(1, n); /* never waits: the ring takes them or drops them */
	uint64_t t0 = ms_now();
	sender_stop(10000);
	assert_true(ms_now() - t0 < 10000);
	/* What reached the socket before it stalled (the stream may end in a
	 * cut chunk: only complete chunks count). */
	assert_int_equal(summary_init(&sock), 0);
	assert_int_equal(listener_read_to_eof(cfd, &sock, 5000), 0);
	trace_path(path, sizeof(path), out, (int)getpid());
	assert_int_equal(summary_read_file(&file, path), 0);
	assert_true(file.first_is_hello);
	assert_true(file.have_end);
	assert_true(file.drops.sink_dropped > 0);
	assert_true(sock.ncolls + file.ncolls <= (size_t)n);
	assert_true(sock.ncolls + file.ncolls + file.drops.sink_dropped + file.drops.ring_dropped >= (uint64_t)n);
	summary_free(&sock);
	summary_free(&file);
	close(cfd);
	close(lfd);
}

/* ---- dormant mode ------------------------------------------------------------------ */

static void test_dormant_connects_and_reconnects(void **state)
{
	(void)state;
	char addr[256], out[256];
	struct trace_summary *s;
	struct reader r;
	ncclUniqueId id;
	ncclComm_t comm;
	float x = 1, y = 0;
	int lfd, cfd;

	subdir(out, sizeof(out), "dormant-out");
	snprintf(addr, sizeof(addr), "unix:%s/dormant.sock", tmpdir);
	fresh_source(addr, out, "1", NULL);
	assert_int_equal(atomic_load(&agent_state_now), AGENT_DORMANT);
	uint32_t early = agent_intern("defined.while.dormant", -1);
	assert_int_equal(pncclGetUniqueId(&id), ncclSuccess);
	assert_int_equal(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess); /* activates */
	for (int i = 0; i < 5; i++)
		assert_int_equal(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
	assert_int_equal(atomic_load(&agent_counters.collectives), 5); /* counted, not recorded */
	assert_int_equal(atomic_load(&agent_state_now), AGENT_DORMANT);

	/* A collector appears: the agent connects within its retry period. */
	assert_int_equal(listener_open(tmpdir, "dormant.sock", addr, sizeof(addr), &lfd), 0);
	cfd = listener_accept(lfd, 5000);
	assert_true(cfd >= 0);
	reader_start(&r, cfd);
	assert_int_equal(wait_state(AGENT_ON, 5000), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
	sender_flush(5000);
	assert_int_equal(reader_wait_colls(&r, 3, 5000), 3);
	/* It goes away: back to dormant (noticed at the next write, at the
	 * latest the drops record of the next second). */
	reader_hang_up(&r);
	s = &r.s;
	assert_true(s->first_is_hello);
	assert_non_null(summary_string(s, early));
	assert_string_equal(summary_string(s, early), "defined.while.dormant");
	assert_int_equal(s->ncomms, 1); /* the communicator made while dormant, replayed */
	assert_int_equal(s->comms[0].comm, (uint64_t)(uintptr_t)comm);
	assert_int_equal(s->comms[0].nranks, 1);
	assert_int_equal(s->ncolls, 3);
	/* the dormant calls wrote none; call numbers go on counting them */
	assert_int_equal(s->by_type[FSS_REC_ENTER], 3);
	assert_seqs(s, 6);
	reader_free(&r);
	assert_int_equal(wait_state(AGENT_DORMANT, 5000), 0);
	assert_int_equal(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);

	/* And comes back: a new stream, hello first, the communicator again. */
	cfd = listener_accept(lfd, 5000);
	assert_true(cfd >= 0);
	reader_start(&r, cfd);
	assert_int_equal(wait_state(AGENT_ON, 5000), 0);
	assert_int_equal(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
	sender_flush(5000);
	assert_int_equal(reader_wait_colls(&r, 1, 5000), 1);
	assert_int_equal(ncclCommDestroy(comm), ncclSuccess);
	sender_stop(5000);
	reader_join(&r);
	s = &r.s;
	assert_true(s->first_is_hello);
	assert_int_equal(s->ncomms, 2); /* replayed init, then the destroy */
	assert_int_equal(s->comms[0].event, FSS_COMM_INIT);
	assert_int_equal(s->comms[1].event, FSS_COMM_DESTROY);
	assert_int_equal(s->ncolls, 1);
	assert_int_equal(s->by_type[FSS_REC_ENTER], 1);
	assert_int_equal(s->colls[0].seq, 10);
	assert_true(s->have_end);
	reader_free(&r);
	close(lfd);
	struct stat st;
	assert_int_not_equal(stat(out, &st), 0); /* dormant never writes a file */
}

/* ---- the wrappers ------------------------------------------------------------------- */

/* The enter and collective records of a trace, in file order. */
struct in_flight {
	struct fss_rec_enter enters[64];
	size_t nenters;
	size_t enter_at[64]; /* index among the file's records */
	uint64_t coll_seq[64];
	size_t coll_at[64];
	size_t ncolls;
	size_t records;
	uint64_t features;
};

static int in_flight_record(void *ctx, const struct fss_record_head *rec)
{
	struct in_flight *f = ctx;

	if (rec->type == FSS_REC_PROCESS_HELLO && f->records == 0)
		f->features = ((const struct fss_rec_process_hello *)rec)->features;
	if (rec->type == FSS_REC_ENTER && f->nenters < 64) {
		f->enter_at[f->nenters] = f->records;
		memcpy(&f->enters[f->nenters++], rec, sizeof(struct fss_rec_enter));
	}
	if (rec->type == FSS_REC_COLLECTIVE && f->ncolls < 64) {
		f->coll_at[f->ncolls] = f->records;
		f->coll_seq[f->ncolls++] = ((const struct fss_rec_collective *)rec)->seq;
	}
	f->records++;
	return 0;
}

static void in_flight_read(struct in_flight *f, const char *path)
{
	struct trace_parser_ops ops = {.on_record = in_flight_record};

	memset(f, 0, sizeof(*f));
	assert_int_equal(trace_read(path, &ops, f, NULL), 0);
}

static uint64_t split_hash(uint64_t parent, uint64_t split_no, int32_t color)
{
	unsigned char k[20];

	memcpy(k, &parent, 8);
	memcpy(k + 8, &split_no, 8);
	memcpy(k + 16, &color, 4);
	return record_hash_bytes(k, sizeof(k));
}

static void test_wrappers(void **state)
{
	(void)state;
	char out[256], path[600];
	struct trace_summary s;
	ncclUniqueId id;
	ncclComm_t comm, sub;
	float a[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, b[16], c[16];

	subdir(out, sizeof(out), "wrappers");
	fresh_source(NULL, out, NULL, NULL);
	assert_int_equal(pncclGetUniqueId(&id), ncclSuccess);
	assert_int_equal(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
	/* Results as the real library gives them, errors included. */
	assert_int_equal(ncclAllGather(a, b, 16, ncclFloat32, comm, NULL), ncclSuccess);
	assert_memory_equal(a, b, sizeof(a));
	assert_int_equal(ncclReduceScatter(a, b, 8, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
	assert_int_equal(ncclAllReduce(a, c, 16, ncclFloat32, ncclMax, comm, NULL), ncclSuccess);
	assert_memory_equal(a, c, sizeof(a));
	assert_int_equal(ncclBroadcast(a, b, 4, ncclInt32, 0, comm, NULL), ncclSuccess);
	assert_int_equal(ncclBcast(b, 8, ncclInt8, 0, comm, NULL), ncclSuccess);
	assert_int_equal(ncclReduce(a, b, 2, ncclFloat64, ncclMin, 0, comm, NULL), ncclSuccess);
	ncclResult_t want = pncclAllReduce(a, b, 4, (ncclDataType_t)77, ncclSum, comm, NULL);
	assert_int_not_equal(want, ncclSuccess);
	assert_int_equal(ncclAllReduce(a, b, 4, (ncclDataType_t)77, ncclSum, comm, NULL), want);
	/* a group of 3 (one inside a nested group) */
	assert_int_equal(ncclGroupStart(), ncclSuccess);
	assert_int_equal(ncclGroupStart(), ncclSuccess);
	assert_int_equal(ncclAllGather(a, b, 4, ncclBfloat16, comm, NULL), ncclSuccess);
	assert_int_equal(ncclGroupEnd(), ncclSuccess);
	assert_int_equal(ncclAllReduce(a, b, 4, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
	assert_int_equal(ncclReduceScatter(a, b, 2, ncclFloat16, ncclAvg, comm, NULL), ncclSuccess);
	assert_int_equal(ncclGroupEnd(), ncclSuccess);
	assert_int_equal(ncclCommSplit(comm, 3, 0, &sub, NULL), ncclSuccess);
	assert_non_null(sub);
	assert_int_equal(ncclAllReduce(a, b, 1, ncclFloat32, ncclSum, sub, NULL), ncclSuccess);
	assert_int_equal(ncclCommDestroy(sub), ncclSuccess);
	assert_int_equal(ncclCommFinalize(comm), ncclSuccess);
	assert_int_equal(ncclCommDestroy(comm), ncclSuccess);
	sender_stop(5000);

	trace_path(path, sizeof(path), out, (int)getpid());
	assert_int_equal(summary_read_file(&s, path), 0);
	static const struct {
		uint8_t op, dtype;
		uint64_t count, bytes;
		int redop, peer;
		ncclResult_t result;
		uint16_t depth;
	} want_colls[] = {
	    {FSS_OP_ALLGATHER, FSS_DTYPE_FLOAT32, 16, 64, FSS_REDOP_NONE, -1, ncclSuccess, 0},
	    {FSS_OP_REDUCESCATTER, FSS_DTYPE_FLOAT32, 8, 32, FSS_REDOP_SUM, -1, ncclSuccess, 0},
	    {FSS_OP_ALLREDUCE, FSS_DTYPE_FLOAT32, 16, 64, FSS_REDOP_MAX, -1, ncclSuccess, 0},
	    {FSS_OP_BROADCAST, FSS_DTYPE_INT32, 4, 16, FSS_REDOP_NONE, 0, ncclSuccess, 0},
	    {FSS_OP_BROADCAST, FSS_DTYPE_INT8, 8, 8, FSS_REDOP_NONE, 0, ncclSuccess, 0},
	    {FSS_OP_REDUCE, FSS_DTYPE_FLOAT64, 2, 16, FSS_REDOP_MIN, 0, ncclSuccess, 0},
	    {FSS_OP_ALLREDUCE, 77, 4, 0, FSS_REDOP_SUM, -1, ncclInvalidArgument, 0},
	    {FSS_OP_ALLGATHER, FSS_DTYPE_BFLOAT16, 4, 8, FSS_REDOP_NONE, -1, ncclSuccess, 2},
	    {FSS_OP_ALLREDUCE, FSS_DTYPE_FLOAT32, 4, 16, FSS_REDOP_SUM, -1, ncclSuccess, 1},
	    {FSS_OP_REDUCESCATTER, FSS_DTYPE_FLOAT16, 2, 4, FSS_REDOP_AVG, -1, ncclSuccess, 1},
	    {FSS_OP_ALLREDUCE, FSS_DTYPE_FLOAT32, 1, 4, FSS_REDOP_SUM, -1, ncclSuccess, 0},
	};
	size_t nwant = sizeof(want_colls) / sizeof(want_colls[0]);
	assert_int_equal(want, ncclInvalidArgument);
	assert_int_equal(s.ncolls, nwant);
	assert_seqs(&s, 1);
	for (size_t i = 0; i < nwant; i++) {
		const struct fss_rec_collective *r = &s.colls[i];
		assert_int_equal(r->op, want_colls[i].op);
		assert_int_equal(r->dtype, want_colls[i].dtype);
		assert_int_equal(r->count, want_colls[i].count);
		assert_int_equal(r->bytes, want_colls[i].bytes);
		assert_int_equal(r->redop, want_colls[i].redop);
		assert_int_equal(r->peer, want_colls[i].peer);
		assert_int_equal(r->result, want_colls[i].result);
		assert_int_equal(r->group_depth, want_colls[i].depth);
		assert_int_equal(r->thread, (uint32_t)agent_thread_id());
		assert_int_equal(r->path, FSS_PATH_INTERPOSE);
		assert_true(r->exit_ns >= r->enter_ns);
		assert_int_equal(r->comm, (uint64_t)(uintptr_t)(i == nwant - 1 ? sub : comm));
		assert_int_equal(r->group_id != 0, want_colls[i].depth > 0);
	}
	assert_int_equal(s.colls[0].sendbuff, (uint64_t)(uintptr_t)a);
	assert_int_equal(s.colls[0].recvbuff, (uint64_t)(uintptr_t)b);
	assert_int_equal(s.colls[4].sendbuff, s.colls[4].recvbuff); /* Bcast: in place */
	/* one group: its three calls share the id; nested starts are not groups */
	assert_int_equal(s.colls[7].group_id, s.colls[8].group_id);
	assert_int_equal(s.colls[8].group_id, s.colls[9].group_id);
	assert_int_equal(s.ngroups, 1);
	assert_int_equal(s.groups[0].group_id, s.colls[7].group_id);
	assert_int_equal(s.groups[0].calls, 3);
	assert_int_equal(s.groups[0].result, ncclSuccess);
	assert_true(s.groups[0].start_ns <= s.colls[7].enter_ns);
	assert_true(s.groups[0].end_enter_ns >= s.colls[9].exit_ns);
	/* communicators: init, split, destroy x2 (finalize is not recorded) */
	assert_int_equal(s.ncomms, 4);
	assert_int_equal(s.comms[0].event, FSS_COMM_INIT);
	assert_int_equal(s.comms[0].comm, (uint64_t)(uintptr_t)comm);
	assert_int_equal(s.comms[0].id_hash, record_hash_bytes(&id, sizeof(id)));
	assert_int_equal(s.comms[0].nranks, 1);
	assert_int_equal(s.comms[0].rank, 0);
	assert_int_equal(s.comms[0].device, -1); /* what the stand-in says */
	assert_int_equal(s.comms[1].event, FSS_COMM_SPLIT);
	assert_int_equal(s.comms[1].comm, (uint64_t)(uintptr_t)sub);
	assert_int_equal(s.comms[1].parent_comm, (uint64_t)(uintptr_t)comm);
	assert_int_equal(s.comms[1].id_hash, split_hash(s.comms[0].id_hash, 0, 3));
	assert_int_equal(s.comms[1].color, 3);
	assert_int_equal(s.comms[1].key, 0);
	assert_int_equal(s.comms[2].event, FSS_COMM_DESTROY);
	assert_int_equal(s.comms[2].comm, (uint64_t)(uintptr_t)sub);
	assert_int_equal(s.comms[2].id_hash, s.comms[1].id_hash);
	assert_int_equal(s.comms[3].event, FSS_COMM_DESTROY);
	assert_int_equal(s.comms[3].id_hash, s.comms[0].id_hash);
	assert_true(s.have_end);
	assert_int_equal(s.drops.ring_dropped, 0);

	/* Calls in flight: one enter record per collective, before it, with
	 * the collective's own arguments and enter time. */
	struct in_flight f;
	in_flight_read(&f, path);
	assert_true(f.features & FSS_FEATURE_ENTER);
	assert_true(f.features & FSS_FEATURE_NCCL);
	assert_int_equal(f.nenters, nwant);
	assert_int_equal(f.ncolls, nwant);
	for (size_t i = 0; i < nwant; i++) {
		const struct fss_rec_enter *e = &f.enters[i];
		const struct fss_rec_collective *r = &s.colls[i];
		assert_int_equal(e->head.size, sizeof(*e));
		assert_int_equal(e->kind, FSS_ENTER_COLLECTIVE);
		assert_int_equal(e->seq, r->seq);
		assert_int_equal(f.coll_seq[i], r->seq);
		assert_true(f.enter_at[i] < f.coll_at[i]);
		assert_int_equal(e->comm, r->comm);
		assert_int_equal(e->stream, r->stream);
		assert_int_equal(e->count, r->count);
		assert_int_equal(e->op, r->op);
		assert_int_equal(e->dtype, r->dtype);
		assert_int_equal(e->redop, r->redop);
		assert_int_equal(e->peer, r->peer);
		assert_int_equal(e->group_id, r->group_id);
		assert_int_equal(e->thread, r->thread);
		assert_int_equal(e->enter_ns, r->enter_ns);
		assert_int_equal(e->sync_id, 0);
		assert_int_equal(e->path, FSS_PATH_INTERPOSE);
		assert_int_equal(e->reserved, 0);
	}
	/* outside a group the call runs between its enter and its record; inside
	 * one it is only queued, and every enter of the group comes before the
	 * group's launch */
	assert_true(f.enter_at[1] > f.coll_at[0]);
	assert_true(f.enter_at[9] < f.coll_at[9]);
	assert_true(s.groups[0].end_enter_ns >= f.enters[9].enter_ns);
	summary_free(&s);
}

/* The byte-sized datatypes of float8 training (torchao's float8 all-gather:
 * a unit of float8 weights beside bf16 norms goes as ncclUint8 counted in
 * bytes; NCCL 2.24+ names float8-only gathers ncclFloat8e4m3): the agent
 * records NCCL's numbering and one byte per element. */
static void test_byte_dtypes(void **state)
{
	(void)state;
	char out[256], path[600];
	ncclUniqueId id;
	ncclComm_t comm;
	uint8_t a[32], b[32];
	memset(a, 0x38, sizeof(a)); /* 1.0 in e4m3 */

	subdir(out, sizeof(out), "bytes");
	fresh_source(NULL, out, NULL, NULL);
	assert_int_equal(pncclGetUniqueId(&id), ncclSuccess);
	assert_int_equal(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
	assert_int_equal(ncclAllGather(a, b, 32, ncclUint8, comm, NULL), ncclSuccess);
	assert_int_equal(ncclAllGather(a, b, 16, ncclFloat8e4m3, comm, NULL), ncclSuccess);
	assert_memory_equal(a, b, 16);
	assert_int_equal(ncclAllReduce(a, b, 8, ncclFloat8e5m2, ncclMax, comm, NULL), ncclSuccess);
	assert_int_equal(ncclReduceScatter(a, b, 4, ncclFloat8e4m3, ncclSum, comm, NULL), ncclSuccess);
	assert_int_equal(ncclCommDestroy(comm), ncclSuccess);
	sender_stop(5000);

	trace_path(path, sizeof(path), out, (int)getpid());
	struct trace_summary s;
	assert_int_equal(summary_read_file(&s, path), 0);
	static const struct {
		uint8_t op, dtype;
		uint64_t count;
	} want[] = {
	    {FSS_OP_ALLGATHER, FSS_DTYPE_UINT8, 32},
	    {FSS_OP_ALLGATHER, FSS_DTYPE_FLOAT8E4M3, 16},
	    {FSS_OP_ALLREDUCE, FSS_DTYPE_FLOAT8E5M2, 8},
	    {FSS_OP_REDUCESCATTER, FSS_DTYPE_FLOAT8E4M3, 4},
	};
	assert_int_equal(s.ncolls, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		assert_int_equal(s.colls[i].op, want[i].op);
		assert_int_equal(s.colls[i].dtype, want[i].dtype);
		assert_int_equal(s.colls[i].count, want[i].count);
		assert_int_equal(s.colls[i].bytes, want[i].count);
		assert_int_equal(s.colls[i].result, ncclSuccess);
	}
	assert_string_equal(record_dtype_name(FSS_DTYPE_FLOAT8E4M3), "float8e4m3");
	assert_int_equal(record_dtype_bytes(FSS_DTYPE_FLOAT8E5M2), 1);
	summary_free(&s);
}

/* State OFF (as after the exit flush, or after a failure): calls are
 * forwarded, with their results, and neither counted nor recorded. */
static void test_off_forwards_only(void **state)
{
	(void)state;
	char out[256], path[600];
	ncclUniqueId id;
	ncclComm_t comm;
	float x = 2, y = 0;

	subdir(out, sizeof(out), "off");
	fresh_source(NULL, out, NULL, NULL);
	assert_int_equal(pncclGetUniqueId(&id), ncclSuccess);
	assert_int_equal(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
	sender_stop(5000);
	atomic_store(&agent_state_now, AGENT_OFF); /* as after a stop at exit */
	uint64_t before = atomic_load(&agent_counters.collectives);
	assert_int_equal(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
	assert_true(y == 2);
	assert_int_equal(atomic_load(&agent_counters.collectives), before);
	assert_int_equal(ncclCommDestroy(comm), ncclSuccess);
	trace_path(path, sizeof(path), out, (int)getpid());
	struct trace_summary s;
	assert_int_equal(summary_read_file(&s, path), 0);
	assert_int_equal(s.ncolls, 0);
	assert_int_equal(s.by_type[FSS_REC_ENTER], 0);
	assert_int_equal(s.ncomms, 1);
	summary_free(&s);
}

/* Every drop counter reaches the final drops record through the same
 * counters, whichever producer counted it: NVTX's too, even in an agent
 * built without nvtx.c. */
static void test_drops_record_counters(void **state)
{
	(void)state;
	char out[256], path[600];
	struct trace_summary s;

	subdir(out, sizeof(out), "drops");
	fresh_source(NULL, out, NULL, NULL);
	agent_activate();
	emit_collectives(1, 3);
	atomic_fetch_add(&agent_counters.nvtx_dropped, 7);
	atomic_fetch_add(&agent_counters.cupti_dropped, 5);
	sender_stop(5000);
	trace_path(path, sizeof(path), out, (int)getpid());
	assert_int_equal(summary_read_file(&s, path), 0);
	assert_true(s.have_drops);
	assert_int_equal(s.drops.nvtx_dropped, 7);
	assert_int_equal(s.drops.cupti_dropped, 5);
	assert_int_equal(s.drops.ring_dropped, 0);
	assert_int_equal(s.ncolls, 3);
	summary_free(&s);
	/* a new source counts from 0 */
	fresh_source(NULL, out, NULL, NULL);
	assert_int_equal(atomic_load(&agent_counters.nvtx_dropped), 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/fss-agent-core-XXXXXX");
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
	    cmocka_unit_test(test_intern_same_id),
	    cmocka_unit_test(test_intern_replay),
	    cmocka_unit_test(test_intern_threads),
	    cmocka_unit_test(test_socket_sink),
	    cmocka_unit_test(test_file_sink_when_no_collector),
	    cmocka_unit_test(test_sink_closed_mid_run),
	    cmocka_unit_test(test_sink_that_never_reads),
	    cmocka_unit_test(test_dormant_connects_and_reconnects),
	    cmocka_unit_test(test_wrappers),
	    cmocka_unit_test(test_byte_dtypes),
	    cmocka_unit_test(test_off_forwards_only),
	    cmocka_unit_test(test_drops_record_counters),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
