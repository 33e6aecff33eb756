/*
 * agent_fault_test.c - libfsdpscope-agent.so preloaded into real processes.
 *
 *   agent_fault_test AGENT.so JOB interpose   every call of a known NCCL
 *       sequence (agent_fault_job sequence 4) is in the trace with the right
 *       fields, over a socket and, when the collector is absent, in files
 *   agent_fault_test AGENT.so JOB faults      the fault matrix: sink killed
 *       mid-run, a sink that never reads, fork, 8 threads, processes without
 *       NCCL (true, sh, python3), exit codes and a killed job, NCCL linked
 *       only by a module dlopen'd with RTLD_LOCAL (as Python imports torch)
 *
 * Every case runs the job once without the agent and once with it, and
 * requires the same stdout and the same exit status. This program plays the
 * collector: a unix socket listener feeding each connection to a
 * trace_parser (tests/unit/agent_core_trace.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/record.h"
#include "tests/unit/agent_core_trace.h"

extern char **environ;

static const char *agent_path;
static const char *job_path;
static const char *dlopen_path; /* agent_fault_dlopen */
static const char *module_path; /* agent_fault_module.so */
static const char *nccl_path;   /* the CPU NCCL stand-in, libnccl.so.2 */
static char tmpdir[64];

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void subdir(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", tmpdir, name);
}

/* ---- running a job ------------------------------------------------------------- */

struct run {
	pid_t pid;
	int status;
	char out[16384];
	size_t outlen;
	char out_path[256];
	char err_path[256]; /* run_start_held only */
};

/* The environment of a job: ours without anything agent-related (nor
 * TMPDIR and XDG_RUNTIME_DIR, which choose the agent's default directory),
 * the stand-in made fast, then `extra` (NAME=VALUE strings,
 * NULL-terminated). */
static char **job_env(const char *const *extra)
{
	size_t n = 0, k = 0;
	while (environ[n])
		n++;
	size_t nextra = 0;
	while (extra && extra[nextra])
		nextra++;
	char **env = calloc(n + nextra + 4, sizeof(*env));
	assert_non_null(env);
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(environ[i], "FSDPSCOPE_", 10) || !strncmp(environ[i], "LD_PRELOAD=", 11) ||
		    !strncmp(environ[i], "NVTX_INJECTION64_PATH=", 22) || !strncmp(environ[i], "ASAN_OPTIONS=", 13) ||
		    !strncmp(environ[i], "FSDP_REF_LINK_LATENCY_US=", 25) || !strncmp(environ[i], "TMPDIR=", 7) ||
		    !strncmp(environ[i], "XDG_RUNTIME_DIR=", 16))
			continue;
		env[k++] = environ[i];
	}
	env[k++] = "FSDP_REF_LINK_LATENCY_US=0";
	/* An ASan job (sanitizer build, gcc's dynamic runtime) with the
	 * uninstrumented agent preloaded ahead of libasan. No leak check in the
	 * jobs: LeakSanitizer stops the world at exit while holding the
	 * allocator's locks, and deadlocks with any thread that is allocating
	 * at that moment (seen: the agent's sender thread, started by a fork
	 * child's first NCCL call just before the child exits, blocked in
	 * malloc while LSan waited for it). Plain glibc processes exit with
	 * threads running; the harness itself is still leak-checked. */
	env[k++] = "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0";
	for (size_t i = 0; i < nextra; i++)
		env[k++] = (char *)extra[i];
	env[k] = NULL;
	return env;
}

static void run_start(struct run *r, char *const argv[], const char *const *extra)
{
	static int runs;
	posix_spawn_file_actions_t fa;
	char **env = job_env(extra);

	memset(r, 0, sizeof(*r));
	snprintf(r->out_path, sizeof(r->out_path), "%s/stdout.%d", tmpdir, runs++);
	assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
	assert_int_equal(posix_spawn_file_actions_addopen(&fa, 1, r->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), 0);
	assert_int_equal(posix_spawnp(&r->pid, argv[0], &fa, NULL, argv, env), 0);
	posix_spawn_file_actions_destroy(&fa);
	free(env);
}

/*
 * Start the job held before its exec, so that its pid (the pid in the
 * agent's file names) is known before it runs: the caller plants what it
 * wants, then run_release(). stderr goes to r->err_path; cwd, when not
 * NULL, is the job's current directory.
 */
static void run_start_held(struct run *r, char *const argv[], const char *const *extra, const char *cwd,
			   int *release_fd)
{
	static int held;
	char **env = job_env(extra);
	int gate[2];

	memset(r, 0, sizeof(*r));
	snprintf(r->out_path, sizeof(r->out_path), "%s/held-stdout.%d", tmpdir, held);
	snprintf(r->err_path, sizeof(r->err_path), "%s/held-stderr.%d", tmpdir, held++);
	int out = open(r->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int err = open(r->err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(out >= 0 && err >= 0);
	assert_int_equal(pipe2(gate, O_CLOEXEC), 0);
	r->pid = fork();
	assert_true(r->pid >= 0);
	if (r->pid == 0) {
		char c;
		if (read(gate[0], &c, 1) != 1 || dup2(out, 1) < 0 || dup2(err, 2) < 0 || (cwd && chdir(cwd) < 0))
			_exit(126);
		execve(argv[0], argv, env);
		_exit(127);
	}
	close(gate[0]);
	close(out);
	close(err);
	free(env);
	*release_fd = gate[1];
}

static void run_release(int release_fd)
{
	assert_int_equal(write(release_fd, "go", 1), 1);
	close(release_fd);
}

/* What the job wrote on stderr (run_start_held), into buf. */
static void run_read_stderr(const struct run *r, char *buf, size_t cap)
{
	int fd = open(r->err_path, O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, cap - 1);
	assert_true(n >= 0);
	buf[n] = '\0';
	close(fd);
}

static int count_lines(const char *text)
{
	int n = 0;
	for (; *text; text++)
		n += *text == '\n';
	return n;
}

static void run_collect_output(struct run *r)
{
	int fd = open(r->out_path, O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, r->out, sizeof(r->out) - 1);
	assert_true(n >= 0);
	r->outlen = (size_t)n;
	r->out[n] = '\0';
	close(fd);
}

/* Wait for the job (bounded: a hung job fails the test, it does not hang
 * it). Returns 1 when it has exited. */
static int run_poll(struct run *r, int block_ms)
{
	uint64_t deadline = ms_now() + (uint64_t)block_ms;

	for (;;) {
		pid_t got = waitpid(r->pid, &r->status, WNOHANG);
		assert_true(got >= 0);
		if (got == r->pid) {
			run_collect_output(r);
			return 1;
		}
		if (ms_now() >= deadline)
			return 0;
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
}

static void run_wait(struct run *r)
{
	if (!run_poll(r, 60000)) {
		kill(r->pid, SIGKILL);
		fail_msg("job %d did not exit within 60 s", (int)r->pid);
	}
}

/* The job once without the agent: the reference output and status. */
static void run_plain(struct run *r, char *const argv[])
{
	run_start(r, argv, NULL);
	run_wait(r);
}

static void assert_same_run(const struct run *plain, const struct run *with)
{
	assert_int_equal(with->status, plain->status);
	assert_int_equal(with->outlen, plain->outlen);
	assert_memory_equal(with->out, plain->out, plain->outlen);
}

/* ---- the stand-in collector ------------------------------------------------------ */

#define MAX_CONNS 16

struct conn {
	int fd;
	int eof;
	struct trace_summary s;
};

struct collector {
	int lfd;
	char addr[256];
	struct conn conns[MAX_CONNS];
	int n;
};

static void collector_open(struct collector *c, const char *name)
{
	memset(c, 0, sizeof(*c));
	assert_int_equal(listener_open(tmpdir, name, c->addr, sizeof(c->addr), &c->lfd), 0);
}

static void collector_close(struct collector *c)
{
	for (int i = 0; i < c->n; i++) {
		if (c->conns[i].fd >= 0)
			close(c->conns[i].fd);
		summary_free(&c->conns[i].s);
	}
	if (c->lfd >= 0)
		close(c->lfd);
	c->n = 0;
	c->lfd = -1;
}

/* One round: accept what is pending, and read what is readable (when
 * `read`), waiting at most wait_ms for something to happen. */
static void collector_pump(struct collector *c, int wait_ms, int read)
{
	struct pollfd p[MAX_CONNS + 1];
	int np = 0;

	p[np++] = (struct pollfd){.fd = c->lfd, .events = POLLIN};
	for (int i = 0; read && i < c->n; i++)
		if (!c->conns[i].eof)
			p[np++] = (struct pollfd){.fd = c->conns[i].fd, .events = POLLIN};
	int n = poll(p, (nfds_t)np, wait_ms);
	if (n <= 0)
		return;
	if (p[0].revents & POLLIN) {
		int fd = listener_accept(c->lfd, 0);
		if (fd >= 0) {
			assert_true(c->n < MAX_CONNS);
			struct conn *k = &c->conns[c->n++];
			k->fd = fd;
			k->eof = 0;
			assert_int_equal(summary_init(&k->s), 0);
		}
	}
	for (int j = 1; j < np; j++) {
		if (!(p[j].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		for (int i = 0; i < c->n; i++)
			if (c->conns[i].fd == p[j].fd && listener_read_available(p[j].fd, &c->conns[i].s) == -1)
				c->conns[i].eof = 1;
	}
}

static int collector_pending(struct collector *c)
{
	struct pollfd p = {.fd = c->lfd, .events = POLLIN};
	return poll(&p, 1, 0) > 0;
}

/* Run the job against this collector, reading while it runs (or only
 * after it exited: a collector that never reads), until every connection
 * has ended. */
static void run_collected(struct run *r, char *const argv[], const char *const *extra, struct collector *c,
			  int read_while_running)
{
	uint64_t deadline;

	run_start(r, argv, extra);
	while (!run_poll(r, 0))
		collector_pump(c, 5, read_while_running);
	deadline = ms_now() + 10000;
	for (;;) {
		int open = 0;
		for (int i = 0; i < c->n; i++)
			open += !c->conns[i].eof;
		if (!open && !collector_pending(c))
			break;
		assert_true(ms_now() < deadline);
		collector_pump(c, 20, 1);
	}
}

/* ---- trace files -------------------------------------------------------------------- */

/* Names of the trace files (final or .partial) in dir; returns how many. */
static int list_traces(const char *dir, char names[][300], int max)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "fsdpscope-", 10) != 0)
			continue;
		assert_true(n < max);
		snprintf(names[n++], 300, "%s/%s", dir, e->d_name);
	}
	closedir(d);
	return n;
}

static int count_traces(const char *dir)
{
	char names[64][300];
	return list_traces(dir, names, 64);
}

/* ---- the known sequence ------------------------------------------------------------------ */

struct seq_rank {
	const struct trace_summary *s;
	int rank;
};

static size_t dtype_bytes(uint8_t d)
{
	return record_dtype_bytes(d);
}

/* What agent_fault_job's rank_sequence issues, in order. */
static const struct {
	uint8_t op, dtype;
	uint64_t count;
	int group; /* 0 none, 1 the group of 3, 2 the send/recv group */
} seq_want[] = {
    {FSS_OP_ALLGATHER, FSS_DTYPE_FLOAT32, 16, 0}, {FSS_OP_REDUCESCATTER, FSS_DTYPE_FLOAT32, 8, 0},
    {FSS_OP_ALLREDUCE, FSS_DTYPE_FLOAT32, 4, 0},  {FSS_OP_ALLGATHER, FSS_DTYPE_INT32, 4, 1},
    {FSS_OP_ALLREDUCE, FSS_DTYPE_FLOAT64, 2, 1},  {FSS_OP_REDUCESCATTER, FSS_DTYPE_FLOAT32, 2, 1},
    {FSS_OP_SEND, FSS_DTYPE_FLOAT32, 4, 2},	  {FSS_OP_RECV, FSS_DTYPE_FLOAT32, 4, 2},
    {FSS_OP_BROADCAST, FSS_DTYPE_INT32, 4, 0},	  {FSS_OP_ALLREDUCE, FSS_DTYPE_FLOAT32, 1, 0},
};
#define SEQ_CALLS (sizeof(seq_want) / sizeof(seq_want[0]))

static void verify_rank(const struct trace_summary *s, int nranks, int *rank_out)
{
	assert_true(s->first_is_hello);
	assert_true(s->have_end);
	assert_true(s->end_is_last);
	assert_true(s->have_drops);
	assert_int_equal(s->drops.ring_dropped, 0);
	assert_int_equal(s->drops.sink_dropped, 0);
	assert_int_equal(s->max_sources, 1);
	/* communicators: init, split, destroy(split), destroy(world) */
	assert_int_equal(s->ncomms, 4);
	assert_int_equal(s->comms[0].event, FSS_COMM_INIT);
	assert_int_equal(s->comms[0].nranks, nranks);
	assert_int_equal(s->comms[0].result, 0);
	int rank = s->comms[0].rank;
	assert_true(rank >= 0 && rank < nranks);
	*rank_out = rank;
	assert_int_equal(s->comms[1].event, FSS_COMM_SPLIT);
	assert_int_equal(s->comms[1].parent_comm, s->comms[0].comm);
	assert_int_equal(s->comms[1].color, rank % 2);
	assert_int_equal(s->comms[1].key, rank);
	assert_int_equal(s->comms[1].nranks, nranks / 2);
	assert_int_equal(s->comms[1].rank, rank / 2);
	assert_int_equal(s->comms[2].event, FSS_COMM_DESTROY);
	assert_int_equal(s->comms[2].comm, s->comms[1].comm);
	assert_int_equal(s->comms[3].event, FSS_COMM_DESTROY);
	assert_int_equal(s->comms[3].comm, s->comms[0].comm);
	/* collectives: every call, once, in order, with its fields */
	assert_int_equal(s->ncolls, SEQ_CALLS);
	uint32_t gid[3] = {0, 0, 0};
	for (size_t i = 0; i < SEQ_CALLS; i++) {
		const struct fss_rec_collective *c = &s->colls[i];
		assert_int_equal(c->seq, i + 1);
		assert_int_equal(c->op, seq_want[i].op);
		assert_int_equal(c->dtype, seq_want[i].dtype);
		assert_int_equal(c->count, seq_want[i].count);
		assert_int_equal(c->bytes, seq_want[i].count * dtype_bytes(seq_want[i].dtype));
		assert_int_equal(c->result, 0);
		assert_int_equal(c->path, FSS_PATH_INTERPOSE);
		assert_true(c->exit_ns >= c->enter_ns);
		assert_int_equal(c->comm, i == SEQ_CALLS - 1 ? s->comms[1].comm : s->comms[0].comm);
		int g = seq_want[i].group;
		assert_int_equal(c->group_depth, g ? 1 : 0);
		if (!g) {
			assert_int_equal(c->group_id, 0);
		} else {
			assert_int_not_equal(c->group_id, 0);
			if (!gid[g])
				gid[g] = c->group_id;
			assert_int_equal(c->group_id, gid[g]);
		}
	}
	assert_int_not_equal(gid[1], gid[2]);
	assert_int_equal(s->colls[6].peer, (rank + 1) % nranks);
	assert_int_equal(s->colls[7].peer, (rank + nranks - 1) % nranks);
	assert_int_equal(s->colls[8].peer, 0);
	assert_int_equal(s->ngroups, 2);
	assert_int_equal(s->groups[0].group_id, gid[1]);
	assert_int_equal(s->groups[0].calls, 3);
	assert_int_equal(s->groups[1].group_id, gid[2]);
	assert_int_equal(s->groups[1].calls, 2);
}

/* All ranks: one source each, ranks 0..n-1 once, communicators agree. */
static void verify_sequence(const struct trace_summary *const *s, int n, pid_t job)
{
	int seen[8] = {0};
	uint64_t world = 0, split[2] = {0, 0};

	for (int i = 0; i < n; i++) {
		int rank;
		verify_rank(s[i], n, &rank);
		assert_false(seen[rank]);
		seen[rank] = 1;
		assert_int_equal(s[i]->hello.ppid, (uint32_t)job); /* the ranks are the job's children */
		if (i == 0)
			world = s[i]->comms[0].id_hash;
		assert_int_equal(s[i]->comms[0].id_hash, world);
		uint64_t *sp = &split[rank % 2];
		if (!*sp)
			*sp = s[i]->comms[1].id_hash;
		assert_int_equal(s[i]->comms[1].id_hash, *sp);
		assert_int_equal(s[i]->comms[2].id_hash, *sp);
	}
	assert_int_not_equal(split[0], split[1]);
	assert_int_not_equal(split[0], world);
}

static void test_sequence_socket(void **state)
{
	(void)state;
	char out[256], sink[300], preload[600], outenv[300];
	char *argv[] = {(char *)job_path, "sequence", "4", NULL};
	struct collector c;
	struct run plain, with;

	subdir(out, sizeof(out), "seq-socket-out");
	collector_open(&c, "seq.sock");
	snprintf(sink, sizeof(sink), "FSDPSCOPE_SINK=%s", c.addr);
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
	const char *extra[] = {preload, sink, outenv, NULL};
	run_plain(&plain, argv);
	assert_true(WIFEXITED(plain.status) && WEXITSTATUS(plain.status) == 0);
	run_collected(&with, argv, extra, &c, 1);
	assert_same_run(&plain, &with);
	assert_int_equal(c.n, 4); /* the parent never called NCCL: no connection */
	const struct trace_summary *s[4];
	for (int i = 0; i < 4; i++) {
		assert_int_equal(summary_finish(&c.conns[i].s), 0);
		assert_true(c.conns[i].s.header_flags & 1u); /* FSS_FILE_STREAM */
		s[i] = &c.conns[i].s;
	}
	verify_sequence(s, 4, with.pid);
	assert_int_equal(count_traces(out), 0);
	collector_close(&c);
}

static void test_sequence_files_when_sink_absent(void **state)
{
	(void)state;
	char out[256], sink[300], preload[600], outenv[300], names[8][300];
	char *argv[] = {(char *)job_path, "sequence", "4", NULL};
	struct run plain, with;
	struct trace_summary sums[4];

	subdir(out, sizeof(out), "seq-files");
	snprintf(sink, sizeof(sink), "FSDPSCOPE_SINK=unix:%s/nobody-listens.sock", tmpdir);
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
	const char *extra[] = {preload, sink, outenv, NULL};
	int release;
	run_plain(&plain, argv);
	run_start_held(&with, argv, extra, NULL, &release); /* its stderr kept in with.err_path */
	run_release(release);
	run_wait(&with);
	assert_same_run(&plain, &with);
	assert_int_equal(list_traces(out, names, 8), 4);
	const struct trace_summary *s[4];
	for (int i = 0; i < 4; i++) {
		assert_null(strstr(names[i], ".partial")); /* renamed at exit */
		assert_int_equal(summary_read_file(&sums[i], names[i]), 0);
		char want[64];
		snprintf(want, sizeof(want), "-%u.fss", sums[i].hello.pid);
		assert_non_null(strstr(names[i], want));
		s[i] = &sums[i];
	}
	verify_sequence(s, 4, with.pid);
	/* each process says once that the sink it was given is not there, and
	 * which file it records into instead */
	char err[16384];
	run_read_stderr(&with, err, sizeof(err));
	assert_int_equal(count_lines(err), 4);
	for (int i = 0; i < 4; i++) {
		char want[3200];
		snprintf(want, sizeof(want), "cannot reach the collector at %s (", sink);
		assert_non_null(strstr(err, want));
		snprintf(want, sizeof(want), "recording into %s;", names[i]);
		assert_non_null(strstr(err, want));
	}
	for (int i = 0; i < 4; i++)
		summary_free(&sums[i]);
}

/* ---- the fault matrix ------------------------------------------------------------------------ */

static void test_sink_killed_mid_run(void **state)
{
	(void)state;
	char out[256], sink[300], preload[600], outenv[300], gate[300], names[4][300];
	struct collector c;
	struct run plain, with;
	struct trace_summary file;

	subdir(out, sizeof(out), "killed-out");
	snprintf(gate, sizeof(gate), "%s/gate-plain", tmpdir);
	char *argv_plain[] = {(char *)job_path, "gated", "300", gate, NULL};
	int fd = open(gate, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	run_plain(&plain, argv_plain);

	snprintf(gate, sizeof(gate), "%s/gate", tmpdir);
	char *argv[] = {(char *)job_path, "gated", "300", gate, NULL};
	collector_open(&c, "killed.sock");
	snprintf(sink, sizeof(sink), "FSDPSCOPE_SINK=%s", c.addr);
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
	const char *extra[] = {preload, sink, outenv, NULL};
	run_start(&with, argv, extra);
	/* Read until the first 300 calls are in (the job waits at the gate). */
	uint64_t deadline = ms_now() + 20000;
	while (c.n == 0 || c.conns[0].s.ncolls < 300) {
		assert_true(ms_now() < deadline);
		assert_false(run_poll(&with, 0));
		collector_pump(&c, 5, 1);
	}
	size_t before = c.conns[0].s.ncolls;
	collector_close(&c); /* the collector dies */
	fd = open(gate, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	run_wait(&with);
	/* The job did not notice... */
	assert_same_run(&plain, &with);
	/* ...and the rest of the trace is in the fallback file, with what could
	 * not be written counted. */
	assert_int_equal(list_traces(out, names, 4), 1);
	assert_int_equal(summary_read_file(&file, names[0]), 0);
	assert_true(file.first_is_hello);
	assert_int_equal(file.hello.pid, (uint32_t)with.pid);
	assert_true(file.have_end);
	assert_int_equal(before, 300);
	assert_true(before + file.ncolls <= 600);
	assert_true(before + file.ncolls + file.drops.sink_dropped >= 600);
	for (size_t i = 0; i < file.ncolls; i++)
		assert_true(file.colls[i].seq > 300);
	assert_int_equal(file.ncomms, 2); /* the live communicator, replayed; its destroy */
	summary_free(&file);
}

static void test_sink_never_reads(void **state)
{
	(void)state;
	char out[256], sink[300], preload[600], outenv[300], names[4][300];
	char *argv[] = {(char *)job_path, "many", "40000", NULL};
	struct collector c;
	struct run plain, with;
	struct trace_summary file;

	subdir(out, sizeof(out), "stalled-out");
	collector_open(&c, "stalled.sock");
	snprintf(sink, sizeof(sink), "FSDPSCOPE_SINK=%s", c.addr);
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
	const char *extra[] = {preload, sink, outenv, "FSDPSCOPE_SINK_TIMEOUT_MS=300", NULL};
	run_plain(&plain, argv);
	run_collected(&with, argv, extra, &c, 0); /* accepts, reads only after the job is gone */
	assert_same_run(&plain, &with);
	assert_int_equal(c.n, 1);
	assert_int_equal(list_traces(out, names, 4), 1);
	assert_int_equal(summary_read_file(&file, names[0]), 0);
	assert_true(file.first_is_hello);
	assert_true(file.have_end);
	assert_true(file.drops.sink_dropped > 0); /* the trace says what was lost */
	size_t total = c.conns[0].s.ncolls + file.ncolls;
	assert_true(total <= 40000);
	assert_true(total + file.drops.sink_dropped + file.drops.ring_dropped >= 40000);
	summary_free(&file);
	collector_close(&c);
}

static void test_fork(void **state)
{
	(void)state;
	char out[256], preload[600], outenv[300], names[8][300];
	char *argv[] = {(char *)job_path, "fork", NULL};
	struct run plain, with;
	struct trace_summary s[2];

	subdir(out, sizeof(out), "fork-out");
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
	/* two processes end at once on a loaded machine: their last drains may take more than
	 * the default 2 s, after which a trace is cut by design; this test is about fork */
	const char *extra[] = {preload, outenv, "FSDPSCOPE_EXIT_WAIT_MS=60000", NULL};
	run_plain(&plain, argv);
	run_start(&with, argv, extra);
	run_wait(&with);
	assert_same_run(&plain, &with);
	/* the parent and the child that called NCCL; the other child is quiet */
	assert_int_equal(list_traces(out, names, 8), 2);
	for (int i = 0; i < 2; i++)
		assert_int_equal(summary_read_file(&s[i], names[i]), 0);
	struct trace_summary *parent = s[0].hello.pid == (uint32_t)with.pid ? &s[0] : &s[1];
	struct trace_summary *child = parent == &s[0] ? &s[1] : &s[0];
	assert_int_equal(parent->hello.pid, (uint32_t)with.pid);
	assert_int_equal(child->hello.ppid, (uint32_t)with.pid);
	assert_int_equal(parent->ncolls, 20);
	assert_int_equal(child->ncolls, 5);
	for (size_t i = 0; i < child->ncolls; i++)
		assert_int_equal(child->colls[i].seq, i + 1); /* a new source counts from 1 */
	for (size_t i = 0; i < parent->ncolls; i++)
		assert_int_equal(parent->colls[i].seq, i + 1);
	assert_int_equal(child->ncomms, 2); /* its own init and destroy, none of the parent's */
	assert_int_not_equal(child->comms[0].comm, 0);
	assert_int_not_equal(child->comms[0].id_hash, parent->comms[0].id_hash);
	assert_true(parent->have_end && child->have_end);
	assert_int_equal(child->end.exit_code, 0); /* its _exit(0), flushed by its own sender */
	summary_free(&s[0]);
	summary_free(&s[1]);
}

static void test_threads(void **state)
{
	(void)state;
	char out[256], preload[600], outenv[300], names[4][300];
	char *argv[] = {(char *)job_path, "threads", "8", "200", NULL};
	struct run plain, with;
	struct trace_summary s;

	subdir(out, sizeof(out), "threads-out");
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
	const char *extra[] = {preload, outenv, NULL};
	run_plain(&plain, argv);
	run_start(&with, argv, extra);
	run_wait(&with);
	assert_same_run(&plain, &with);
	assert_int_equal(list_traces(out, names, 4), 1);
	assert_int_equal(summary_read_file(&s, names[0]), 0);
	assert_int_equal(s.ncolls, 8 * 202);
	assert_int_equal(s.drops.ring_dropped, 0);
	assert_int_equal(s.ngroups, 8);
	assert_int_equal(s.ncomms, 16); /* 8 inits, 8 destroys */
	/* every call once: seqs are a permutation of 1..N; per communicator,
	 * all from one thread */
	static uint8_t seen[8 * 202 + 1];
	memset(seen, 0, sizeof(seen));
	for (size_t i = 0; i < s.ncolls; i++) {
		assert_true(s.colls[i].seq >= 1 && s.colls[i].seq <= 8 * 202);
		assert_false(seen[s.colls[i].seq]);
		seen[s.colls[i].seq] = 1;
		for (size_t k = 0; k < s.ncomms; k++)
			if (s.comms[k].comm == s.colls[i].comm && s.comms[k].event == FSS_COMM_INIT)
				assert_int_equal(s.comms[k].thread, s.colls[i].thread);
	}
	for (size_t g = 0; g < s.ngroups; g++)
		assert_int_equal(s.groups[g].calls, 2);
	summary_free(&s);
}

/* Processes that never call NCCL: no thread, no connection, no file. */
static void test_no_nccl(void **state)
{
	(void)state;
	char out[256], sink[300], preload[600], outenv[300];
	struct collector c;
	char *true_argv[] = {"true", NULL};
	char *sh_argv[] = {"sh", "-c", "echo out; echo err >&2; exit 7", NULL};
	char *py_argv[] = {"python3", "-c", "import sys; print('py'); sys.exit(3)", NULL};
	char *script_argv[] = {"sh", "-c", "for i in 1 2 3; do echo $i | cat; done; (exit 4)", NULL};
	char **cmds[] = {true_argv, sh_argv, script_argv, py_argv};
	int have_python = system("python3 -c pass >/dev/null 2>&1") == 0;

	subdir(out, sizeof(out), "no-nccl-out");
	collector_open(&c, "no-nccl.sock");
	snprintf(sink, sizeof(sink), "FSDPSCOPE_SINK=%s", c.addr);
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
	const char *extra[] = {preload, sink, outenv, NULL};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		struct run plain, with;
		if (cmds[i] == py_argv && !have_python) {
			print_message("python3 is not installed: the python case is skipped\n");
			continue;
		}
		run_plain(&plain, cmds[i]);
		run_start(&with, cmds[i], extra);
		run_wait(&with);
		assert_same_run(&plain, &with);
		assert_false(collector_pending(&c)); /* it would have connected by now */
		assert_int_equal(count_traces(out), 0);
		assert_int_equal(count_traces("."), 0);
	}
	collector_close(&c);

	/* FSDPSCOPE_DISABLE=1: an NCCL job, and nothing either. */
	char *many[] = {(char *)job_path, "many", "50", NULL};
	const char *disabled[] = {preload, outenv, "FSDPSCOPE_DISABLE=1", NULL};
	struct run plain, with;
	run_plain(&plain, many);
	run_start(&with, many, disabled);
	run_wait(&with);
	assert_same_run(&plain, &with);
	assert_int_equal(count_traces(out), 0);
}

static void test_exit_paths(void **state)
{
	(void)state;
	char out[256], preload[600], outenv[300], names[4][300];
	char *exit_argv[] = {(char *)job_path, "exit", "5", NULL};
	char *kill_argv[] = {(char *)job_path, "kill", "200", NULL};
	struct run plain, with;
	struct trace_summary s;

	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);

	/* exit(5) with a communicator still alive: status kept, trace complete */
	subdir(out, sizeof(out), "exit-out");
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
	const char *extra[] = {preload, outenv, NULL};
	run_plain(&plain, exit_argv);
	assert_true(WIFEXITED(plain.status) && WEXITSTATUS(plain.status) == 5);
	run_start(&with, exit_argv, extra);
	run_wait(&with);
	assert_same_run(&plain, &with);
	assert_int_equal(list_traces(out, names, 4), 1);
	assert_int_equal(summary_read_file(&s, names[0]), 0);
	assert_int_equal(s.ncolls, 3);
	assert_true(s.have_end && s.end_is_last);
	assert_int_equal(s.end.exit_code, 5); /* exit(5), seen through on_exit */
	summary_free(&s);

	/* SIGKILL: same status; what the sender wrote is complete chunks */
	subdir(out, sizeof(out), "kill-out");
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
	const char *extra_kill[] = {preload, outenv, NULL};
	run_plain(&plain, kill_argv);
	assert_true(WIFSIGNALED(plain.status) && WTERMSIG(plain.status) == SIGKILL);
	run_start(&with, kill_argv, extra_kill);
	run_wait(&with);
	assert_same_run(&plain, &with);
	int n = list_traces(out, names, 4);
	assert_true(n <= 1);
	if (n == 1) {
		assert_non_null(strstr(names[0], ".partial"));	      /* never renamed */
		/* Complete chunks, but no trace_end: the reader says it was not closed. */
		assert_int_equal(summary_read_file(&s, names[0]), FSS_E_TRUNCATED);
		assert_false(s.have_end);
		assert_true(s.ncolls <= 200);
		summary_free(&s);
	} else {
		print_message("the job was killed before its sender opened a file\n");
	}
}

/* _exit and _Exit (os._exit) skip the exit handlers, quick_exit runs only
 * its own: the agent flushes anyway, so the trace is as complete as after
 * exit(0) (quick_exit's handlers are not told the status). */
static void test_underscore_exit(void **state)
{
	(void)state;
	static const char *const hows[] = {"_exit", "_Exit", "quick_exit"};

	for (size_t h = 0; h < sizeof(hows) / sizeof(hows[0]); h++) {
		char out[256], preload[600], outenv[300], names[4][300], name[64];
		char *argv[] = {(char *)job_path, "quick", "50", (char *)hows[h], NULL};
		struct run plain, with;
		struct trace_summary s;

		snprintf(name, sizeof(name), "quick%s-out", hows[h]);
		subdir(out, sizeof(out), name);
		snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
		snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
		const char *extra[] = {preload, outenv, NULL};
		run_plain(&plain, argv);
		assert_true(WIFEXITED(plain.status) && WEXITSTATUS(plain.status) == 0);
		run_start(&with, argv, extra);
		run_wait(&with);
		assert_same_run(&plain, &with);
		assert_int_equal(list_traces(out, names, 4), 1);
		assert_null(strstr(names[0], ".partial")); /* closed and renamed */
		assert_int_equal(summary_read_file(&s, names[0]), 0);
		assert_int_equal(s.ncolls, 50);
		for (size_t i = 0; i < s.ncolls; i++)
			assert_int_equal(s.colls[i].seq, i + 1);
		assert_true(s.have_drops);
		assert_int_equal(s.drops.ring_dropped, 0);
		assert_int_equal(s.drops.sink_dropped, 0);
		assert_true(s.have_end && s.end_is_last);
		assert_int_equal(s.end.collectives, 50);
		assert_int_equal(s.end.exit_code, strcmp(hows[h], "quick_exit") ? 0 : -1);
		summary_free(&s);
	}
}

/* A vfork child runs on its parent's memory until it execs or calls _exit:
 * one whose exec failed calls _exit, which must leave the parent's ring,
 * sender and trace alone. */
static void test_vfork_failed_exec(void **state)
{
	(void)state;
	char out[256], preload[600], outenv[300], names[4][300];
	char *argv[] = {(char *)job_path, "vfork", "100", NULL};
	struct run plain, with;
	struct trace_summary s;

	subdir(out, sizeof(out), "vfork-out");
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
	const char *extra[] = {preload, outenv, NULL};
	run_plain(&plain, argv);
	assert_true(WIFEXITED(plain.status) && WEXITSTATUS(plain.status) == 0);
	run_start(&with, argv, extra);
	run_wait(&with);
	assert_same_run(&plain, &with);
	assert_int_equal(list_traces(out, names, 4), 1); /* the child wrote nothing */
	assert_null(strstr(names[0], ".partial"));
	assert_int_equal(summary_read_file(&s, names[0]), 0);
	assert_int_equal(s.hello.pid, (uint32_t)with.pid);
	assert_int_equal(s.ncolls, 200); /* both halves: the sender outlived the child */
	for (size_t i = 0; i < s.ncolls; i++)
		assert_int_equal(s.colls[i].seq, i + 1);
	assert_int_equal(s.ncomms, 2);
	assert_int_equal(s.drops.ring_dropped, 0);
	assert_int_equal(s.drops.sink_dropped, 0);
	assert_true(s.have_end && s.end_is_last);
	assert_int_equal(s.end.collectives, 200);
	assert_int_equal(s.end.exit_code, 0); /* the parent's, not the child's 127 */
	summary_free(&s);
}

/* Python ending with os._exit(0), as training scripts do to skip a slow
 * teardown: NCCL through ctypes from the global scope (the preloaded
 * agent's wrappers, then the stand-in). */
static const char python_os_exit[] =
    "import ctypes, os, sys\n"
    "ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)\n"
    "g = ctypes.CDLL(None)\n"
    "class UID(ctypes.Structure):\n"
    "    _fields_ = [('b', ctypes.c_char * 128)]\n"
    "uid = UID()\n"
    "assert g.ncclGetUniqueId(ctypes.byref(uid)) == 0\n"
    "comm = ctypes.c_void_p()\n"
    "assert g.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0\n"
    "x, y = ctypes.c_float(1.0), ctypes.c_float(0.0)\n"
    "for i in range(25):\n"
    "    assert g.ncclAllReduce(ctypes.byref(x), ctypes.byref(y), ctypes.c_size_t(1), 7, 0, comm, None) == 0\n"
    "print('python done', flush=True)\n"
    "os._exit(0)\n";

static void test_python_os_exit(void **state)
{
	(void)state;
	char out[256], preload[600], outenv[300], names[4][300];
	char *argv[] = {"python3", "-c", (char *)python_os_exit, (char *)nccl_path, NULL};
	struct run plain, with;
	struct trace_summary s;

	if (system("python3 -c pass >/dev/null 2>&1") != 0) {
		print_message("python3 is not installed: the os._exit case is skipped\n");
		skip();
	}
	if (getenv("AGENT_FAULT_SANITIZED")) {
		print_message("sanitizer build: python3 cannot load the instrumented stand-in, the os._exit case is "
			      "skipped\n");
		skip();
	}
	subdir(out, sizeof(out), "python-out");
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
	const char *extra[] = {preload, outenv, NULL};
	run_plain(&plain, argv);
	assert_true(WIFEXITED(plain.status) && WEXITSTATUS(plain.status) == 0);
	run_start(&with, argv, extra);
	run_wait(&with);
	assert_same_run(&plain, &with);
	assert_int_equal(list_traces(out, names, 4), 1);
	assert_null(strstr(names[0], ".partial"));
	assert_int_equal(summary_read_file(&s, names[0]), 0);
	assert_int_equal(s.ncolls, 25);
	assert_true(s.have_end && s.end_is_last);
	assert_int_equal(s.end.exit_code, 0);
	summary_free(&s);
}

/* ---- where files go, and what the agent will not open ------------------------------ */

static void file_host_name(char *host, size_t cap)
{
	assert_int_equal(gethostname(host, cap), 0);
	host[cap - 1] = '\0';
}

static void make_dir(const char *path, mode_t mode)
{
	assert_int_equal(mkdir(path, mode), 0);
	assert_int_equal(chmod(path, mode), 0); /* whatever the umask */
}

static void assert_private_trace(const char *dir, const char *name_suffix, pid_t pid, size_t ncolls)
{
	char names[4][300], want[64];
	struct stat st;
	struct trace_summary s;

	assert_int_equal(lstat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(list_traces(dir, names, 4), 1);
	snprintf(want, sizeof(want), "-%d%s", (int)pid, name_suffix);
	assert_non_null(strstr(names[0], want));
	assert_int_equal(lstat(names[0], &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(summary_read_file(&s, names[0]), 0);
	assert_int_equal(s.ncolls, ncolls);
	assert_true(s.have_end);
	summary_free(&s);
}

/* No FSDPSCOPE_OUT: the file goes to a private per-user directory
 * ($XDG_RUNTIME_DIR/fsdpscope, else $TMPDIR/fsdpscope-<uid>), never into
 * the job's current directory. */
static void test_default_directory(void **state)
{
	(void)state;
	char cwd[256], shared[256], runtime[256], tmpenv[300], xdgenv[300], mine[300], preload[600];
	char *argv[] = {(char *)job_path, "many", "20", NULL};
	struct run plain, with;
	int release;

	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	subdir(cwd, sizeof(cwd), "default-cwd");
	make_dir(cwd, 0755);
	subdir(shared, sizeof(shared), "default-tmp");
	make_dir(shared, 01777);
	snprintf(tmpenv, sizeof(tmpenv), "TMPDIR=%s", shared);
	run_plain(&plain, argv);

	/* TMPDIR, no runtime directory */
	const char *extra[] = {preload, tmpenv, NULL};
	run_start_held(&with, argv, extra, cwd, &release);
	run_release(release);
	run_wait(&with);
	assert_same_run(&plain, &with);
	assert_int_equal(count_traces(cwd), 0);
	snprintf(mine, sizeof(mine), "%s/fsdpscope-%u", shared, (unsigned)geteuid());
	assert_private_trace(mine, ".fss", with.pid, 20);

	/* XDG_RUNTIME_DIR wins when it is the user's own */
	subdir(runtime, sizeof(runtime), "default-run");
	make_dir(runtime, 0700);
	snprintf(xdgenv, sizeof(xdgenv), "XDG_RUNTIME_DIR=%s", runtime);
	const char *extra_xdg[] = {preload, tmpenv, xdgenv, NULL};
	run_start_held(&with, argv, extra_xdg, cwd, &release);
	run_release(release);
	run_wait(&with);
	assert_same_run(&plain, &with);
	assert_int_equal(count_traces(cwd), 0);
	snprintf(mine, sizeof(mine), "%s/fsdpscope", runtime);
	assert_private_trace(mine, ".fss", with.pid, 20);
}

/* FSDPSCOPE_OUT that cannot be a directory: the file goes to the default
 * directory, and one line on stderr says where; when that cannot be made
 * either, no file at all, one line, and the job is unchanged. */
static void test_out_dir_unusable(void **state)
{
	(void)state;
	char afile[256], outenv[300], shared[256], tmpenv[300], mine[300], preload[600], err[4096];
	char *argv[] = {(char *)job_path, "many", "20", NULL};
	struct run plain, with;
	int release;

	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	subdir(afile, sizeof(afile), "not-a-directory");
	int fd = open(afile, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s/out", afile); /* ENOTDIR, even for root */
	subdir(shared, sizeof(shared), "unusable-tmp");
	make_dir(shared, 01777);
	snprintf(tmpenv, sizeof(tmpenv), "TMPDIR=%s", shared);
	run_plain(&plain, argv);

	const char *extra[] = {preload, outenv, tmpenv, NULL};
	run_start_held(&with, argv, extra, tmpdir, &release);
	run_release(release);
	run_wait(&with);
	assert_same_run(&plain, &with);
	snprintf(mine, sizeof(mine), "%s/fsdpscope-%u", shared, (unsigned)geteuid());
	assert_private_trace(mine, ".fss", with.pid, 20);
	run_read_stderr(&with, err, sizeof(err));
	assert_int_equal(count_lines(err), 1);
	assert_non_null(strstr(err, "FSDPSCOPE_OUT"));
	assert_non_null(strstr(err, mine));

	/* nowhere to write: TMPDIR is a file too */
	snprintf(tmpenv, sizeof(tmpenv), "TMPDIR=%s", afile);
	const char *nowhere[] = {preload, outenv, tmpenv, NULL};
	run_start_held(&with, argv, nowhere, tmpdir, &release);
	run_release(release);
	run_wait(&with);
	assert_same_run(&plain, &with);
	assert_int_equal(count_traces(tmpdir), 0);
	run_read_stderr(&with, err, sizeof(err));
	assert_int_equal(count_lines(err), 1);
	assert_non_null(strstr(err, "dropped"));
}

/* Run fn(arg) in a child that has become nobody. */
static void as_nobody(void (*fn)(const char *const *args), const char *const *args)
{
	struct passwd *pw = getpwnam("nobody");
	int status;

	assert_non_null(pw);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
			_exit(3);
		fn(args);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* args: pairs of (target, link), then NULL; a target "dir:" + path makes
 * that directory first (nobody's own). */
static void plant_links(const char *const *args)
{
	for (size_t i = 0; args[i]; i += 2) {
		const char *target = args[i];
		if (!strncmp(target, "dir:", 4)) {
			target += 4;
			if (mkdir(target, 0777) != 0)
				_exit(4);
		}
		if (symlink(target, args[i + 1]) != 0)
			_exit(5);
	}
}

static void assert_file_is(const char *path, const char *text)
{
	char buf[256];
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	assert_string_equal(buf, text);
}

static int dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n == 0;
}

/*
 * The attack: a job run as root whose current directory is not writable,
 * with `nobody` having planted symlinks to a root-owned 0600 file at the
 * agent's old fallback name (/tmp/fsdpscope-<host>-<pid>.fss.partial), at
 * the per-user directory's name in the shared temporary directory, and at
 * the file's name in a shared FSDPSCOPE_OUT. None may be followed: the
 * file keeps its contents, nobody's directory stays empty, the job is
 * unchanged.
 */
static void test_symlink_attack(void **state)
{
	(void)state;
	char host[200], victim[256], shared[256], tmpenv[300], outenv[300], preload[600];
	char old_link[600], dir_link[300], nobody_dir[300], out_link[600], names[4][300];
	char *argv[] = {(char *)job_path, "many", "20", NULL};
	struct run plain, with;
	struct trace_summary s;
	int release;

	if (geteuid() != 0) {
		print_message("not root: the symlink attack (root's file, nobody's links) is skipped\n");
		skip();
	}
	file_host_name(host, sizeof(host));
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	assert_int_equal(chmod(tmpdir, 0711), 0); /* nobody may reach the shared directory below */
	subdir(victim, sizeof(victim), "root-only");
	int fd = open(victim, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "precious\n", 9), 9);
	close(fd);
	subdir(shared, sizeof(shared), "attack-tmp");
	make_dir(shared, 01777);
	snprintf(tmpenv, sizeof(tmpenv), "TMPDIR=%s", shared);
	run_plain(&plain, argv);

	/* 1: no FSDPSCOPE_OUT, current directory not writable */
	const char *extra[] = {preload, tmpenv, NULL};
	run_start_held(&with, argv, extra, "/proc", &release);
	snprintf(old_link, sizeof(old_link), "/tmp/fsdpscope-%s-%d.fss.partial", host, (int)with.pid);
	snprintf(dir_link, sizeof(dir_link), "%s/fsdpscope-%u", shared, (unsigned)geteuid());
	snprintf(nobody_dir, sizeof(nobody_dir), "%s/nobody-owns-this", shared);
	char dir_target[320];
	snprintf(dir_target, sizeof(dir_target), "dir:%s", nobody_dir);
	const char *links[] = {victim, old_link, dir_target, dir_link, NULL};
	as_nobody(plant_links, links);
	run_release(release);
	run_wait(&with);
	assert_same_run(&plain, &with);
	assert_file_is(victim, "precious\n");
	assert_true(dir_is_empty(nobody_dir));
	struct stat st;
	assert_int_equal(lstat(old_link, &st), 0);
	assert_true(S_ISLNK(st.st_mode)); /* still nobody's link, never replaced */
	unlink(old_link);

	/* 2: FSDPSCOPE_OUT is a shared directory with nobody's link at the name */
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", shared);
	const char *extra_out[] = {preload, outenv, NULL};
	run_start_held(&with, argv, extra_out, "/proc", &release);
	snprintf(out_link, sizeof(out_link), "%s/fsdpscope-%s-%d.fss.partial", shared, host, (int)with.pid);
	const char *links_out[] = {victim, out_link, NULL};
	as_nobody(plant_links, links_out);
	run_release(release);
	run_wait(&with);
	assert_same_run(&plain, &with);
	assert_file_is(victim, "precious\n");
	assert_int_equal(lstat(out_link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	unlink(out_link);
	/* the trace went to the next name, complete and private */
	int n = list_traces(shared, names, 4);
	int found = 0;
	for (int i = 0; i < n; i++) {
		char want[64];
		snprintf(want, sizeof(want), "-%d-1.fss", (int)with.pid);
		if (!strstr(names[i], want))
			continue;
		found = 1;
		assert_int_equal(lstat(names[i], &st), 0);
		assert_true(S_ISREG(st.st_mode));
		assert_int_equal(st.st_mode & 0777, 0600);
		assert_int_equal(summary_read_file(&s, names[i]), 0);
		assert_int_equal(s.ncolls, 20);
		assert_true(s.have_end);
		summary_free(&s);
	}
	assert_true(found);
	assert_int_equal(chmod(tmpdir, 0700), 0);
}

/* NCCL linked by a module that was dlopen'd RTLD_LOCAL (as torch is
 * imported by Python): the agent's wrappers still find the real library. */
static void test_nccl_in_local_module(void **state)
{
	(void)state;
	char out[256], preload[600], outenv[300], names[4][300];
	char *argv[] = {(char *)dlopen_path, (char *)module_path, NULL};
	struct run plain, with;
	struct trace_summary s;

	subdir(out, sizeof(out), "module-out");
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", agent_path);
	snprintf(outenv, sizeof(outenv), "FSDPSCOPE_OUT=%s", out);
	const char *extra[] = {preload, outenv, NULL};
	run_plain(&plain, argv);
	assert_true(WIFEXITED(plain.status) && WEXITSTATUS(plain.status) == 0);
	run_start(&with, argv, extra);
	run_wait(&with);
	assert_same_run(&plain, &with);
	assert_int_equal(list_traces(out, names, 4), 1);
	assert_int_equal(summary_read_file(&s, names[0]), 0);
	assert_int_equal(s.ncolls, 3);
	for (size_t i = 0; i < s.ncolls; i++)
		assert_int_equal(s.colls[i].result, 0);
	assert_int_equal(s.ncomms, 2);
	summary_free(&s);
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/fss-agent-fault-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	/* The no-NCCL case also checks that nothing lands in the current
	 * directory: run from the temporary one. */
	return chdir(tmpdir);
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest interpose[] = {
	    cmocka_unit_test(test_sequence_socket),
	    cmocka_unit_test(test_sequence_files_when_sink_absent),
	};
	const struct CMUnitTest faults[] = {
	    cmocka_unit_test(test_sink_killed_mid_run),
	    cmocka_unit_test(test_sink_never_reads),
	    cmocka_unit_test(test_fork),
	    cmocka_unit_test(test_threads),
	    cmocka_unit_test(test_no_nccl),
	    cmocka_unit_test(test_exit_paths),
	    cmocka_unit_test(test_underscore_exit),
	    cmocka_unit_test(test_vfork_failed_exec),
	    cmocka_unit_test(test_python_os_exit),
	    cmocka_unit_test(test_default_directory),
	    cmocka_unit_test(test_out_dir_unusable),
	    cmocka_unit_test(test_symlink_attack),
	    cmocka_unit_test(test_nccl_in_local_module),
	};

	if (argc != 7) {
		fprintf(stderr, "usage: agent_fault_test AGENT.so JOB interpose|faults DLOPEN_JOB MODULE.so NCCL.so\n");
		return 2;
	}
	agent_path = argv[1];
	job_path = argv[2];
	dlopen_path = argv[4];
	module_path = argv[5];
	nccl_path = argv[6];
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(argv[3], "interpose"))
		return cmocka_run_group_tests_name("agent_interpose", interpose, setup, teardown);
	if (!strcmp(argv[3], "faults"))
		return cmocka_run_group_tests_name("agent_fault", faults, setup, teardown);
	fprintf(stderr, "agent_fault_test: unknown group %s\n", argv[3]);
	return 2;
}
