/*
 * ingest_test.c - collector/ingest: several fake agents at once (one dies
 * mid-chunk, one sends a corrupt chunk, one sends garbage, one sends
 * nothing), a reconnecting process, a connection still open at the end,
 * and fallback trace files; the merged trace must hold every complete
 * record of each input, byte for byte, under a source of its own, with its
 * strings resolving per source, and the damage reported.
 *
 * The fake agents are forked processes writing streams made with
 * trace_writer_open_fd(). They connect, send a first part and wait on a
 * pipe, so the test knows every connection is open at the same time
 * without relying on timing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/ingest.h"
#include "common/record.h"
#include "common/strtab.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "common/wire.h"
#include "tests/support/sample_records.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SOURCES 16
#define AGENT_PID_BASE 7000u
#define SMALL_CHUNK 1024u

/* A trace stream as an agent would send it, with where its chunks end. */
struct stream {
	unsigned char *bytes;
	size_t len;
	size_t chunk_end[256];      /* byte offset just past chunk i */
	size_t chunk_records[256];  /* records in chunks 0..i */
	size_t nchunks;
	unsigned char *recs;        /* every record's bytes, source zeroed, in order */
	size_t rec_off[4096];
	size_t nrecs;
	size_t recs_len;
};

/* The merged trace, records split by source. */
struct merged {
	unsigned char *recs[MAX_SOURCES];
	size_t len[MAX_SOURCES];
	size_t n[MAX_SOURCES];
	uint32_t pid[MAX_SOURCES];
	uint32_t nsources;
	strtab_t *strings;
};

static char tmpdir[64];

static int setup_dir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/fss_ingest_test.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	signal(SIGPIPE, SIG_IGN); /* fake agents write to closed sockets */
	return 0;
}

static int teardown_dir(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void append_rec(unsigned char **buf, size_t *len, const struct fss_record_head *rec)
{
	*buf = realloc(*buf, *len + rec->size);
	assert_non_null(*buf);
	memcpy(*buf + *len, rec, rec->size);
	((struct fss_record_head *)(*buf + *len))->source = 0;
	*len += rec->size;
}

static int stream_on_record(void *ctx, const struct fss_record_head *rec)
{
	struct stream *s = ctx;

	if (rec->source == FSS_SOURCE_NONE)
		return 0; /* the writer's own, not the stream's content */
	assert_true(s->nrecs < 4096);
	s->rec_off[s->nrecs++] = s->recs_len;
	append_rec(&s->recs, &s->recs_len, rec);
	return 0;
}

static int stream_on_chunk(void *ctx, uint64_t seq, uint32_t records, uint64_t file_offset)
{
	struct stream *s = ctx;

	(void)records;
	assert_true(seq < 256);
	s->chunk_end[seq] = (size_t)file_offset;
	s->chunk_records[seq] = s->nrecs;
	s->nchunks = (size_t)seq + 1;
	return 0;
}

/*
 * The stream of fake agent `id` (source 0, like the agent's): a hello with
 * pid AGENT_PID_BASE + id and rank id, its own strings (ids 1..3, which the
 * sample records name), `rounds` records of every other type, a final drops
 * record (ring 5, sink 7, CUPTI 11, NVTX 13) and a process_end.
 */
static void stream_make(struct stream *s, uint32_t id, uint32_t rounds)
{
	_Alignas(8) unsigned char buf[FSS_RECORD_MAX_BYTES];
	struct trace_writer_options opts = {.chunk_payload = SMALL_CHUNK};
	struct trace_parser_ops ops = {.on_record = stream_on_record, .on_chunk = stream_on_chunk};
	trace_parser_t *p;
	trace_writer_t *w;
	char name[64], longname[300];
	FILE *f = tmpfile();
	struct stat st;

	memset(s, 0, sizeof(*s));
	assert_non_null(f);
	assert_int_equal(trace_writer_open_fd(&w, fileno(f), &opts), 0);
	sample_record(FSS_REC_PROCESS_HELLO, 0, id, buf);
	((struct fss_rec_process_hello *)buf)->pid = AGENT_PID_BASE + id;
	((struct fss_rec_process_hello *)buf)->rank = (int32_t)id;
	((struct fss_rec_process_hello *)buf)->slurm_procid = -1;
	((struct fss_rec_process_hello *)buf)->ompi_rank = -1;
	assert_int_equal(trace_writer_append(w, buf), 0);
	snprintf(name, sizeof(name), "agent-%u-module", id);
	assert_int_equal(trace_writer_string(w, 0, 1, name, strlen(name)), 0);
	snprintf(name, sizeof(name), "domain-%u", id);
	assert_int_equal(trace_writer_string(w, 0, 2, name, strlen(name)), 0);
	for (size_t i = 0; i < sizeof(longname); i++)
		longname[i] = (char)('a' + (i + id) % 26);
	assert_int_equal(trace_writer_string(w, 0, 3, longname, sizeof(longname)), 0);
	for (uint32_t r = 0; r < rounds; r++)
		for (uint16_t t = FSS_REC_COMM; t < FSS_REC_PROCESS_END; t++) {
			if (t == FSS_REC_STRING || !sample_record(t, 0, r * 31 + t + id, buf))
				continue;
			assert_int_equal(trace_writer_append(w, buf), 0);
		}
	sample_record(FSS_REC_DROPS, 0, 1, buf);
	((struct fss_rec_drops *)buf)->ring_dropped = 5;
	((struct fss_rec_drops *)buf)->sink_dropped = 7;
	((struct fss_rec_drops *)buf)->cupti_dropped = 11;
	((struct fss_rec_drops *)buf)->nvtx_dropped = 13;
	assert_int_equal(trace_writer_append(w, buf), 0);
	sample_record(FSS_REC_PROCESS_END, 0, 1, buf);
	assert_int_equal(trace_writer_append(w, buf), 0);
	assert_int_equal(trace_writer_close(w), 0);
	assert_int_equal(fflush(f), 0);
	assert_int_equal(fstat(fileno(f), &st), 0);
	s->len = (size_t)st.st_size;
	s->bytes = malloc(s->len);
	assert_non_null(s->bytes);
	assert_int_equal(pread(fileno(f), s->bytes, s->len, 0), (ssize_t)s->len);
	fclose(f);
	p = trace_parser_new(&ops, s);
	assert_non_null(p);
	assert_int_equal(trace_parser_feed(p, s->bytes, s->len), 0);
	assert_int_equal(trace_parser_finish(p), 0);
	trace_parser_free(p);
	assert_true(s->nchunks >= 6); /* the cuts below need several chunks */
}

static void stream_free(struct stream *s)
{
	free(s->bytes);
	free(s->recs);
}

static int merged_on_record(void *ctx, const struct fss_record_head *rec)
{
	struct merged *m = ctx;

	if (rec->source == FSS_SOURCE_NONE)
		return 0; /* the ingest's own writer's */
	assert_true(rec->source < MAX_SOURCES);
	if (rec->source >= m->nsources)
		m->nsources = rec->source + 1;
	if (rec->type == FSS_REC_PROCESS_HELLO)
		m->pid[rec->source] = ((const struct fss_rec_process_hello *)rec)->pid;
	if (rec->type == FSS_REC_STRING)
		assert_int_equal(strtab_add_part(m->strings, (const void *)rec), 0);
	append_rec(&m->recs[rec->source], &m->len[rec->source], rec);
	m->n[rec->source]++;
	return 0;
}

static void merged_read(struct merged *m, const char *path)
{
	struct trace_parser_ops ops = {.on_record = merged_on_record};
	char err[256];

	memset(m, 0, sizeof(*m));
	m->strings = strtab_new();
	assert_non_null(m->strings);
	assert_int_equal(trace_read_file(path, &ops, m, err, sizeof(err)), 0);
}

static void merged_free(struct merged *m)
{
	for (int i = 0; i < MAX_SOURCES; i++)
		free(m->recs[i]);
	strtab_free(m->strings);
}

/* The source of the merged trace whose hello names agent `id`, or -1. */
static int merged_source_of(const struct merged *m, uint32_t id)
{
	int found = -1;

	for (uint32_t s = 0; s < m->nsources; s++) {
		if (m->pid[s] == AGENT_PID_BASE + id) {
			assert_int_equal(found, -1); /* one source per agent */
			found = (int)s;
		}
	}
	return found;
}

/* Source `src` holds exactly the first `nrecs` records of the stream, in
 * order and byte for byte (source aside), and its strings resolve. */
static void assert_source_is(const struct merged *m, int src, const struct stream *s, size_t nrecs, uint32_t id)
{
	char name[64];
	size_t bytes = nrecs == s->nrecs ? s->recs_len : s->rec_off[nrecs];

	assert_true(src >= 0);
	assert_int_equal(m->n[src], nrecs);
	assert_int_equal(m->len[src], bytes);
	assert_memory_equal(m->recs[src], s->recs, bytes);
	snprintf(name, sizeof(name), "agent-%u-module", id);
	assert_non_null(strtab_get(m->strings, (uint32_t)src, 1));
	assert_string_equal(strtab_get(m->strings, (uint32_t)src, 1), name);
	snprintf(name, sizeof(name), "domain-%u", id);
	assert_string_equal(strtab_get(m->strings, (uint32_t)src, 2), name);
	assert_int_equal(strlen(strtab_get(m->strings, (uint32_t)src, 3)), 300);
	assert_int_equal(strtab_get(m->strings, (uint32_t)src, 3)[0], 'a' + id % 26);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void write_all(int fd, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(3);
		p += n;
		len -= (size_t)n;
	}
}

enum agent_kind {
	AGENT_WHOLE,       /* sends its whole stream, closes */
	AGENT_DIES,        /* sends up to the middle of chunk 4, then SIGKILLs itself */
	AGENT_CORRUPT,     /* chunk 2 has a flipped payload byte; sends everything */
	AGENT_GARBAGE,     /* bytes that are not a trace */
	AGENT_EMPTY,       /* connects, sends nothing, closes */
};

struct agent {
	enum agent_kind kind;
	uint32_t id;
	struct stream stream;
	pid_t pid;
	int go[2];         /* parent writes a byte: send the rest */
};

/* The fake agent process: connect, send a first part, wait, send the rest. */
static void agent_main(struct agent *a, const char *address)
{
	struct wire_address addr;
	unsigned char *data = a->stream.bytes;
	size_t len = a->stream.len, first;
	unsigned char garbage[2000];
	char c;
	int fd;

	close(a->go[1]);
	if (wire_address_parse(address, &addr) || wire_connect(&addr, 5000, &fd))
		_exit(2);
	switch (a->kind) {
	case AGENT_DIES:
		len = a->stream.chunk_end[3] + 40; /* 40 bytes into chunk 4 */
		break;
	case AGENT_CORRUPT:
		data[a->stream.chunk_end[1] + sizeof(struct fss_chunk_header) + 9] ^= 0x40;
		break;
	case AGENT_GARBAGE:
		signal(SIGPIPE, SIG_IGN); /* the collector cuts it: a write then fails, exit 3 */
		for (size_t i = 0; i < sizeof(garbage); i++)
			garbage[i] = (unsigned char)(i * 7 + 3);
		data = garbage;
		len = sizeof(garbage);
		break;
	case AGENT_EMPTY:
		len = 0;
		break;
	case AGENT_WHOLE:
		break;
	}
	first = len < a->stream.chunk_end[1] ? len : a->stream.chunk_end[1];
	if (a->kind == AGENT_GARBAGE)
		first = 100;
	write_all(fd, data, first);
	if (read(a->go[0], &c, 1) != 1)
		_exit(4);
	write_all(fd, data + first, len - first);
	if (a->kind == AGENT_DIES)
		kill(getpid(), SIGKILL);
	close(fd);
	_exit(0);
}

static void agent_start(struct agent *a, const char *address)
{
	assert_int_equal(pipe(a->go), 0);
	a->pid = fork();
	assert_true(a->pid >= 0);
	if (a->pid == 0)
		agent_main(a, address);
	close(a->go[0]);
}

/* Poll the ingest until cond(ing) holds; fail after 10 s. */
static void poll_until(ingest_t *ing, int (*cond)(ingest_t *, void *), void *arg)
{
	int64_t deadline = now_ms() + 10000;

	while (!cond(ing, arg)) {
		assert_true(now_ms() < deadline);
		assert_true(ingest_poll(ing, 50) >= 0);
	}
}

static int open_at_least(ingest_t *ing, void *arg)
{
	return ingest_open_connections(ing) >= *(size_t *)arg;
}

/* All agents exited (reaped) and every connection closed. */
struct reap {
	struct agent *agents;
	size_t n;
	int status[8];
	int done[8];
};

static int all_gone(ingest_t *ing, void *arg)
{
	struct reap *r = arg;
	int left = 0;

	for (size_t i = 0; i < r->n; i++) {
		if (!r->done[i] && waitpid(r->agents[i].pid, &r->status[i], WNOHANG) == r->agents[i].pid)
			r->done[i] = 1;
		left += !r->done[i];
	}
	return left == 0 && ingest_open_connections(ing) == 0;
}

static const char *find_damage(const struct ingest_stats *st, pid_t pid)
{
	char needle[48];

	snprintf(needle, sizeof(needle), "peer pid %d)", (int)pid);
	for (size_t i = 0; i < st->ndamaged; i++)
		if (strstr(st->damage[i], needle))
			return st->damage[i];
	return NULL;
}

static void test_merge_connections(void **state)
{
	struct agent agents[6] = {
		{.kind = AGENT_WHOLE, .id = 0},   {.kind = AGENT_WHOLE, .id = 1},
		{.kind = AGENT_DIES, .id = 2},    {.kind = AGENT_CORRUPT, .id = 3},
		{.kind = AGENT_GARBAGE, .id = 4}, {.kind = AGENT_EMPTY, .id = 5},
	};
	const size_t n = sizeof(agents) / sizeof(agents[0]);
	struct reap reap = {.agents = agents, .n = n};
	const struct ingest_stats *st;
	struct merged m;
	char address[128], out[128];
	const char *msg;
	ingest_t *ing;
	size_t want = n;

	(void)state;
	snprintf(address, sizeof(address), "unix:%s/ingest.sock", tmpdir);
	snprintf(out, sizeof(out), "%s/merged.fss", tmpdir);
	for (size_t i = 0; i < n; i++)
		stream_make(&agents[i].stream, agents[i].id, 20 + 3 * agents[i].id);
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	assert_int_equal(ingest_listen(ing, address), 0);
	for (size_t i = 0; i < n; i++)
		agent_start(&agents[i], address);
	/* Every agent connected and sent its first part: all open at once,
	 * but for the garbage one, which may have been cut already. */
	want = n - 1;
	poll_until(ing, open_at_least, &want);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(write(agents[i].go[1], "g", 1), 1);
		close(agents[i].go[1]);
	}
	poll_until(ing, all_gone, &reap);
	for (size_t i = 0; i < n; i++) {
		if (agents[i].kind == AGENT_DIES) {
			assert_true(WIFSIGNALED(reap.status[i]));
		} else if (agents[i].kind == AGENT_GARBAGE) {
			/* 3: cut before its second part went out; 0: cut after */
			assert_true(WIFEXITED(reap.status[i]));
			assert_true(WEXITSTATUS(reap.status[i]) == 0 || WEXITSTATUS(reap.status[i]) == 3);
		} else {
			assert_true(WIFEXITED(reap.status[i]));
			assert_int_equal(WEXITSTATUS(reap.status[i]), 0);
		}
	}
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(ingest_finish(ing, NULL), -EALREADY);

	/* Sources: the four agents that sent at least one complete chunk. */
	assert_int_equal(st->connections, n);
	assert_int_equal(st->sources, 4);
	assert_int_equal(st->by_type[FSS_REC_PROCESS_HELLO], 4);
	assert_int_equal(st->ndamaged, 3);
	merged_read(&m, out);
	assert_int_equal(m.nsources, 4);

	/* Whole streams: every record; the drops total and the clean end. */
	for (uint32_t id = 0; id < 2; id++) {
		int src = merged_source_of(&m, id);

		assert_source_is(&m, src, &agents[id].stream, agents[id].stream.nrecs, id);
		assert_int_equal(st->per_source[src].pid, AGENT_PID_BASE + id);
		assert_int_equal(st->per_source[src].rank, (int)id);
		assert_int_equal(st->per_source[src].dropped, 5 + 7 + 11 + 13); /* the NVTX drops count too */
		assert_true(st->per_source[src].ended);
		assert_int_equal(st->per_source[src].records, agents[id].stream.nrecs);
		assert_null(find_damage(st, agents[id].pid));
	}
	/* Died 40 bytes into chunk 4: chunks 0..3 kept, no clean end. */
	{
		int src = merged_source_of(&m, 2);

		assert_source_is(&m, src, &agents[2].stream, agents[2].stream.chunk_records[3], 2);
		assert_false(st->per_source[src].ended);
		msg = find_damage(st, agents[2].pid);
		assert_non_null(msg);
		assert_non_null(strstr(msg, "truncated"));
		assert_non_null(strstr(msg, "pid 7002, rank 2"));
		assert_non_null(strstr(msg, "4 complete chunks"));
	}
	/* Corrupt chunk 2: skipped as a gap, every other chunk kept. */
	{
		const struct stream *s3 = &agents[3].stream;
		int src = merged_source_of(&m, 3);
		size_t before = s3->chunk_records[1], lost = s3->chunk_records[2] - before;

		assert_true(src >= 0);
		assert_int_equal(m.n[src], s3->nrecs - lost);
		assert_memory_equal(m.recs[src], s3->recs, s3->rec_off[before]);
		assert_memory_equal(m.recs[src] + s3->rec_off[before], s3->recs + s3->rec_off[before + lost],
				    s3->recs_len - s3->rec_off[before + lost]);
		assert_true(st->per_source[src].ended);
		msg = find_damage(st, agents[3].pid);
		assert_non_null(msg);
		assert_non_null(strstr(msg, "checksum"));
		assert_non_null(strstr(msg, "chunk 2 lost"));
		assert_non_null(strstr(msg, "kept all the other chunks"));
	}
	/* Garbage: nothing kept, said why. Empty: nothing to say. */
	msg = find_damage(st, agents[4].pid);
	assert_non_null(msg);
	assert_non_null(strstr(msg, "not an fsdpscope trace"));
	assert_non_null(strstr(msg, "no process_hello"));
	assert_null(find_damage(st, agents[5].pid));
	{
		uint64_t total = 0;

		for (uint32_t s = 0; s < m.nsources; s++)
			total += m.n[s];
		assert_int_equal(st->records, total);
	}
	merged_free(&m);
	ingest_free(ing);
	/* The socket file is gone with the ingest. */
	assert_int_equal(access(address + 5, F_OK), -1);
	for (size_t i = 0; i < n; i++)
		stream_free(&agents[i].stream);
}

/* A process that reconnects (a collector restart, a re-forked agent) gets
 * a new source for its new connection; a connection still open when the
 * ingest finishes keeps what it sent and is reported. */
static void test_reconnect_and_cut(void **state)
{
	struct stream s;
	struct wire_address addr;
	const struct ingest_stats *st;
	struct merged m;
	char address[128], out[128], c;
	int sent[2], go[2];
	ingest_t *ing;
	pid_t pid;
	int status;

	(void)state;
	snprintf(address, sizeof(address), "unix:%s/reconnect.sock", tmpdir);
	snprintf(out, sizeof(out), "%s/reconnect.fss", tmpdir);
	stream_make(&s, 9, 20);
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	assert_int_equal(ingest_listen(ing, address), 0);
	assert_int_equal(pipe(sent), 0);
	assert_int_equal(pipe(go), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd;

		close(sent[0]);
		close(go[1]);
		if (wire_address_parse(address, &addr))
			_exit(2);
		/* First connection: everything, then closed. */
		if (wire_connect(&addr, 5000, &fd))
			_exit(2);
		write_all(fd, s.bytes, s.len);
		close(fd);
		/* Second: three chunks, then it stays connected. */
		if (wire_connect(&addr, 5000, &fd))
			_exit(2);
		write_all(fd, s.bytes, s.chunk_end[2]);
		write_all(sent[1], "s", 1);
		if (read(go[0], &c, 1) < 0)
			_exit(4);
		_exit(0);
	}
	close(sent[1]);
	close(go[0]);
	/* Until the child says both are sent, keep the ingest reading. */
	{
		int64_t deadline = now_ms() + 10000;
		int flags = fcntl(sent[0], F_GETFL);

		fcntl(sent[0], F_SETFL, flags | O_NONBLOCK);
		while (read(sent[0], &c, 1) != 1) {
			assert_true(now_ms() < deadline);
			assert_true(ingest_poll(ing, 20) >= 0);
		}
	}
	/* The bytes are in the socket buffers now: finish reads them. */
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(write(go[1], "g", 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(st->sources, 2);
	assert_int_equal(st->ndamaged, 1);
	assert_non_null(strstr(st->damage[0], "still connected"));
	assert_non_null(strstr(st->damage[0], "pid 7009"));
	merged_read(&m, out);
	assert_int_equal(m.nsources, 2);
	/* Which source is which connection depends on arrival order: the
	 * complete one has the process_end. */
	{
		int whole = st->per_source[0].ended ? 0 : 1;

		assert_true(st->per_source[whole].ended);
		assert_false(st->per_source[1 - whole].ended);
		assert_int_equal(m.pid[0], AGENT_PID_BASE + 9);
		assert_int_equal(m.pid[1], AGENT_PID_BASE + 9);
		assert_int_equal(m.n[whole], s.nrecs);
		assert_memory_equal(m.recs[whole], s.recs, s.recs_len);
		assert_int_equal(m.n[1 - whole], s.chunk_records[2]);
		assert_memory_equal(m.recs[1 - whole], s.recs, s.rec_off[s.chunk_records[2]]);
	}
	merged_free(&m);
	ingest_free(ing);
	close(sent[0]);
	close(go[1]);
	stream_free(&s);
}

/* Per-rank fallback files: a whole one with two sources (an older merged
 * trace), a .partial cut mid-chunk, a file that is not a trace, a missing
 * one. */
static void test_merge_files(void **state)
{
	struct trace_writer_options opts = {.chunk_payload = SMALL_CHUNK};
	const struct ingest_stats *st;
	struct stream cut;
	struct merged m;
	trace_writer_t *w;
	uint64_t two_source_records;
	char whole[128], partial[128], junk[128], missing[128], out[128];
	ingest_t *ing;
	FILE *f;

	(void)state;
	snprintf(whole, sizeof(whole), "%s/rank0.fss", tmpdir);
	snprintf(partial, sizeof(partial), "%s/rank1.fss.partial", tmpdir);
	snprintf(junk, sizeof(junk), "%s/junk.fss", tmpdir);
	snprintf(missing, sizeof(missing), "%s/missing.fss", tmpdir);
	snprintf(out, sizeof(out), "%s/files.fss", tmpdir);

	assert_int_equal(trace_writer_open(&w, whole, &opts), 0);
	assert_int_equal(sample_trace_write(w, 2, 4, &two_source_records), 0);
	assert_int_equal(trace_writer_close(w), 0);
	stream_make(&cut, 6, 20);
	f = fopen(partial, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(cut.bytes, 1, cut.chunk_end[2] + 17, f), cut.chunk_end[2] + 17);
	fclose(f);
	f = fopen(junk, "wb");
	assert_non_null(f);
	fputs("this is not a trace, just text that happens to end in .fss\n", f);
	fclose(f);

	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	assert_int_equal(ingest_add_file(ing, whole), 0);
	assert_int_equal(ingest_add_file(ing, partial), 0);
	assert_int_equal(ingest_add_file(ing, junk), 0);
	assert_int_equal(ingest_add_file(ing, missing), -ENOENT);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->files, 3);
	assert_int_equal(st->sources, 3);
	assert_int_equal(st->ndamaged, 2);
	assert_non_null(strstr(st->damage[0], partial));
	assert_non_null(strstr(st->damage[0], "truncated"));
	assert_non_null(strstr(st->damage[0], "pid 7006, rank 6"));
	assert_non_null(strstr(st->damage[1], junk));
	assert_non_null(strstr(st->damage[1], "not an fsdpscope trace"));
	assert_int_equal(st->records, two_source_records + cut.chunk_records[2]);

	merged_read(&m, out);
	assert_int_equal(m.nsources, 3);
	/* The two-source file keeps its two sources apart, in file order. */
	assert_string_equal(strtab_get(m.strings, 0, 2), "fsdp_ref");
	assert_string_equal(strtab_get(m.strings, 1, 2), "fsdp_ref");
	assert_int_equal(m.n[0] + m.n[1], two_source_records);
	assert_source_is(&m, merged_source_of(&m, 6), &cut, cut.chunk_records[2], 6);
	merged_free(&m);
	ingest_free(ing);
	stream_free(&cut);
}

static void test_bad_inputs(void **state)
{
	char out[128];
	ingest_t *ing;

	(void)state;
	snprintf(out, sizeof(out), "%s/bad.fss", tmpdir);
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	assert_int_equal(ingest_listen(ing, "not-an-address"), -EINVAL);
	/* No input at all: a valid, empty trace. */
	assert_int_equal(ingest_poll(ing, 0), 0);
	ingest_free(ing);
	{
		struct merged m;

		merged_read(&m, out);
		assert_int_equal(m.nsources, 0);
		merged_free(&m);
	}
	assert_int_equal(ingest_new(&ing, "/nonexistent-dir/x.fss", NULL), -ENOENT);
	assert_null(ing);
}

/* The last record of source `src`, which must be a process_exit. */
static const struct fss_rec_process_exit *last_exit(const struct merged *m, int src)
{
	const struct fss_rec_process_exit *e;

	assert_true(src >= 0);
	assert_true(m->len[src] >= sizeof(*e));
	e = (const void *)(m->recs[src] + m->len[src] - sizeof(*e));
	assert_int_equal(e->head.type, FSS_REC_PROCESS_EXIT);
	assert_int_equal(e->head.size, sizeof(*e));
	return e;
}

/* ingest_note_exit: an exit noted while the process's connection is still
 * open, one noted after it ended (a real SIGKILL status), one noted before
 * its fallback file is merged, and one for a pid no source names. Each that
 * has a source lands after every record of that source, once. */
static void test_note_exit(void **state)
{
	struct agent agents[2] = {
		{.kind = AGENT_WHOLE, .id = 8},
		{.kind = AGENT_DIES, .id = 9},
	};
	struct reap reap = {.agents = agents, .n = 2};
	const struct ingest_stats *st;
	struct stream file_stream;
	struct merged m;
	char address[128], out[128], file[128];
	size_t two = 2;
	ingest_t *ing;
	FILE *f;
	int src;

	(void)state;
	snprintf(address, sizeof(address), "unix:%s/exit.sock", tmpdir);
	snprintf(out, sizeof(out), "%s/exit.fss", tmpdir);
	snprintf(file, sizeof(file), "%s/rank6-exit.fss", tmpdir);
	for (size_t i = 0; i < 2; i++)
		stream_make(&agents[i].stream, agents[i].id, 20);
	stream_make(&file_stream, 6, 20);
	f = fopen(file, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(file_stream.bytes, 1, file_stream.len, f), file_stream.len);
	fclose(f);

	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	assert_int_equal(ingest_listen(ing, address), 0);
	for (size_t i = 0; i < 2; i++)
		agent_start(&agents[i], address);
	poll_until(ing, open_at_least, &two);
	/* Agent 8 has sent at most its first chunks: the exit must wait. */
	assert_int_equal(ingest_note_exit(ing, (pid_t)(AGENT_PID_BASE + 8), 1 << 8), 0);
	for (size_t i = 0; i < 2; i++)
		assert_int_equal(write(agents[i].go[1], "g", 1), 1);
	poll_until(ing, all_gone, &reap);
	assert_true(WIFSIGNALED(reap.status[1]) && WTERMSIG(reap.status[1]) == SIGKILL);
	assert_int_equal(ingest_note_exit(ing, (pid_t)(AGENT_PID_BASE + 9), reap.status[1]), 0);
	assert_int_equal(ingest_note_exit(ing, (pid_t)(AGENT_PID_BASE + 6), 0), 0);
	assert_int_equal(ingest_note_exit(ing, 4242, 9), 0);
	assert_int_equal(ingest_add_file(ing, file), 0);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(ingest_note_exit(ing, 4243, 9), -EALREADY);
	assert_int_equal(st->exits_written, 3);
	assert_int_equal(st->exits_unmatched, 1);
	assert_int_equal(st->by_type[FSS_REC_PROCESS_EXIT], 3);
	/* each source's end, as the per-source layer read it */
	{
		uint64_t missing = 0;

		for (uint32_t i = 0; i < st->sources; i++) {
			assert_non_null(st->per_source[i].view);
			missing += source_collectives_missing(st->per_source[i].view);
		}
		assert_int_equal(st->collectives_missing, missing);
	}

	merged_read(&m, out);
	assert_int_equal(m.nsources, 3);
	src = merged_source_of(&m, 8);
	assert_int_equal(m.n[src], agents[0].stream.nrecs + 1);
	assert_memory_equal(m.recs[src], agents[0].stream.recs, agents[0].stream.recs_len);
	assert_int_equal(last_exit(&m, src)->pid, AGENT_PID_BASE + 8);
	assert_int_equal(last_exit(&m, src)->wait_status, 1 << 8);
	assert_int_equal(source_end_of(st->per_source[src].view), SOURCE_END_EXITED);
	assert_int_equal(source_exit_code(st->per_source[src].view), 1);
	src = merged_source_of(&m, 9);
	assert_int_equal(m.n[src], agents[1].stream.chunk_records[3] + 1);
	assert_int_equal(last_exit(&m, src)->wait_status, reap.status[1]);
	assert_int_equal(source_end_of(st->per_source[src].view), SOURCE_END_SIGNALED);
	assert_int_equal(source_signal(st->per_source[src].view), SIGKILL);
	src = merged_source_of(&m, 6);
	assert_int_equal(m.n[src], file_stream.nrecs + 1);
	assert_int_equal(last_exit(&m, src)->pid, AGENT_PID_BASE + 6);
	assert_int_equal(last_exit(&m, src)->wait_status, 0);
	merged_free(&m);
	ingest_free(ing);
	for (size_t i = 0; i < 2; i++) {
		close(agents[i].go[1]);
		stream_free(&agents[i].stream);
	}
	stream_free(&file_stream);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge_connections),
		cmocka_unit_test(test_reconnect_and_cut),
		cmocka_unit_test(test_merge_files),
		cmocka_unit_test(test_bad_inputs),
		cmocka_unit_test(test_note_exit),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
