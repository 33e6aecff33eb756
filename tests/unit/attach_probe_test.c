/*
 * attach_probe_test.c - the probes themselves (agent/bpf/attach.c,
 * attach.bpf.c) on live processes: needs root (or CAP_BPF + CAP_PERFMON),
 * skips with 77 and a message where attach_available says no.
 *
 * Deterministic by construction: attach_probe_target waits on a pipe
 * before each batch of calls, the test attaches, then lets it go and
 * drains until the events it expects have arrived (counts, with a
 * generous deadline that only turns a hang into a failure). What is
 * asserted is what arrived: every argument, the 7th and 8th from the
 * stack, the unique id bytes, the return values as the program saw them,
 * the order per thread, the function from the cookie.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/bpf/attach.h"
#include "tests/unit/attach_probe_calls.h"

#define DRAIN_DEADLINE_S 60 /* only a hang reaches it */

/* ---- collecting events ---- */

struct events {
	struct attach_event *ev;
	size_t n, cap;
};

static int collect(void *ctx, const struct attach_event *ev)
{
	struct events *e = ctx;

	if (e->n == e->cap) {
		size_t cap = e->cap ? 2 * e->cap : 256;
		struct attach_event *p = realloc(e->ev, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		e->ev = p;
		e->cap = cap;
	}
	e->ev[e->n++] = *ev;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Events of pid with fn and kind so far. */
static size_t count_of(const struct events *e, pid_t pid, unsigned fn, unsigned kind)
{
	size_t n = 0;

	for (size_t i = 0; i < e->n; i++)
		n += e->ev[i].pid == (uint32_t)pid && e->ev[i].fn == fn && e->ev[i].kind == kind;
	return n;
}

/* Poll a until pid has at least want events of fn / kind. */
static void drain_until(attach_t *a, const struct events *e, pid_t pid, unsigned fn, unsigned kind, size_t want)
{
	double deadline = now_s() + DRAIN_DEADLINE_S;

	while (count_of(e, pid, fn, kind) < want) {
		assert_true(attach_poll(a, 100) >= 0);
		if (now_s() > deadline)
			fail_msg("waited %d s for %zu %s events of %d, got %zu", DRAIN_DEADLINE_S, want,
				 attach_fn_name(fn), (int)pid, count_of(e, pid, fn, kind));
	}
}

/* ---- the target process ---- */

struct target {
	pid_t pid;
	int cmd, out;
};

static struct target target_start(const char *lib, const char *comm)
{
	int cmd[2], out[2];
	struct target t;
	char b;

	assert_int_equal(pipe(cmd), 0);
	assert_int_equal(pipe(out), 0);
	t.pid = fork();
	assert_true(t.pid >= 0);
	if (t.pid == 0) {
		char in_fd[16], out_fd[16];

		close(cmd[1]);
		close(out[0]);
		snprintf(in_fd, sizeof(in_fd), "%d", cmd[0]);
		snprintf(out_fd, sizeof(out_fd), "%d", out[1]);
		unsetenv("NCCL_DEBUG");
		execl(ATTACH_TEST_TARGET, ATTACH_TEST_TARGET, lib, comm, in_fd, out_fd, (char *)NULL);
		_exit(127);
	}
	close(cmd[0]);
	close(out[1]);
	t.cmd = cmd[1];
	t.out = out[0];
	assert_int_equal(read(t.out, &b, 1), 1);
	assert_int_equal(b, 'R');
	return t;
}

static void read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		assert_true(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

static void target_send(const struct target *t, const char *cmd, size_t len)
{
	assert_int_equal(write(t->cmd, cmd, len), (ssize_t)len);
}

/* Exit with code and reap: the wait status. */
static int target_exit(struct target *t, unsigned char code)
{
	char cmd[2] = {'x', (char)code};
	int status;

	target_send(t, cmd, 2);
	assert_int_equal(waitpid(t->pid, &status, 0), t->pid);
	close(t->cmd);
	close(t->out);
	return status;
}

static void target_group_pair(const struct target *t)
{
	char k;

	target_send(t, "g", 1);
	assert_int_equal(read(t->out, &k, 1), 1);
	assert_int_equal(k, 'k');
}

static attach_t *attach_open(struct events *e)
{
	char err[1024];
	attach_t *a = NULL;
	int rc = attach_new(&a, 0, collect, e, err, sizeof(err));

	if (rc)
		fail_msg("attach_new: %s", err);
	return a;
}

static void attach_ok(attach_t *a, pid_t pid, struct attach_target *t)
{
	char err[1024];
	int rc = attach_pid(a, pid, t, err, sizeof(err));

	if (rc)
		fail_msg("attach_pid(%d): %d %s", (int)pid, rc, err);
}

/* ---- the calls ---- */

struct expect {
	unsigned fn;
	unsigned nargs;
	uint64_t arg[8];
};

static void expected_calls(uint64_t comm, struct expect x[PROBE_NCALLS])
{
	const uint64_t s = PROBE_SEND, r = PROBE_RECV, n = PROBE_COUNT, dt = PROBE_DTYPE, op = PROBE_OP,
		       root = PROBE_ROOT, peer = PROBE_PEER, st = PROBE_STREAM;

	memset(x, 0, PROBE_NCALLS * sizeof(*x));
	x[PROBE_GROUP_START] = (struct expect){ATTACH_FN_GROUP_START, 0, {0}};
	x[PROBE_ALLGATHER] = (struct expect){ATTACH_FN_ALLGATHER, 6, {s, r, n, dt, comm, st}};
	x[PROBE_ALLREDUCE] = (struct expect){ATTACH_FN_ALLREDUCE, 7, {s, r, n, dt, op, comm, st}};
	x[PROBE_REDUCESCATTER] = (struct expect){ATTACH_FN_REDUCESCATTER, 7, {s, r, n, dt, op, comm, st}};
	x[PROBE_BROADCAST] = (struct expect){ATTACH_FN_BROADCAST, 7, {s, r, n, dt, root, comm, st}};
	x[PROBE_BCAST] = (struct expect){ATTACH_FN_BCAST, 6, {s, n, dt, root, comm, st}};
	/* 8 arguments: comm is the 7th, stream the 8th, both on the stack. */
	x[PROBE_REDUCE] = (struct expect){ATTACH_FN_REDUCE, 8, {s, r, n, dt, op, root, comm, st}};
	x[PROBE_SEND_CALL] = (struct expect){ATTACH_FN_SEND, 6, {s, n, dt, peer, comm, st}};
	x[PROBE_RECV_CALL] = (struct expect){ATTACH_FN_RECV, 6, {r, n, dt, peer, comm, st}};
	x[PROBE_GROUP_END] = (struct expect){ATTACH_FN_GROUP_END, 0, {0}};
	/* The unique id by value takes no register: its slot is 0, the id is in uid[]. */
	x[PROBE_COMM_INIT_RANK] = (struct expect){ATTACH_FN_COMM_INIT_RANK, 4, {0, PROBE_NRANKS, 0, PROBE_RANK}};
	x[PROBE_COMM_DESTROY] = (struct expect){ATTACH_FN_COMM_DESTROY, 1, {0}};
}

/*
 * The events of tid, walked in order against the calls x[0..n): each
 * call's enter (its args asserted), then its exit (ret asserted). A
 * library may call probed functions inside others (an init may run
 * groups): those nested pairs are stepped over, each enter still before
 * its exit. enters[] / exits[] get the events matched, for more checks.
 */
static void walk_calls(const struct events *e, pid_t pid, uint32_t tid, const struct expect *x, size_t n,
		       const int32_t *ret, const struct attach_event **enters, const struct attach_event **exits)
{
	uint64_t last_ts = 0;
	size_t i = 0;

	for (size_t c = 0; c < n; c++) {
		const struct attach_event *enter = NULL, *exit = NULL;
		int depth = 0;

		for (; i < e->n && !enter; i++)
			if (e->ev[i].pid == (uint32_t)pid && e->ev[i].tid == tid && e->ev[i].fn == x[c].fn &&
			    e->ev[i].kind == ATTACH_EV_ENTER)
				enter = &e->ev[i];
		if (!enter)
			fail_msg("call %zu (%s): no enter event", c, attach_fn_name(x[c].fn));
		for (; i < e->n && !exit; i++) {
			const struct attach_event *v = &e->ev[i];

			if (v->pid != (uint32_t)pid || v->tid != tid || v->fn != x[c].fn)
				continue;
			if (v->kind == ATTACH_EV_ENTER)
				depth++;
			else if (depth-- == 0)
				exit = v;
		}
		if (!exit)
			fail_msg("call %zu (%s): no exit event", c, attach_fn_name(x[c].fn));
		assert_true(enter->ts_ns >= last_ts);
		assert_true(exit->ts_ns >= enter->ts_ns);
		last_ts = exit->ts_ns;
		for (unsigned k = 0; k < 8; k++)
			if (enter->arg[k] != x[c].arg[k])
				fail_msg("call %zu (%s) arg %u: 0x%llx, want 0x%llx", c, attach_fn_name(x[c].fn), k,
					 (unsigned long long)enter->arg[k], (unsigned long long)x[c].arg[k]);
		if (exit->ret != ret[c])
			fail_msg("call %zu (%s): ret %d, the program saw %d", c, attach_fn_name(x[c].fn), exit->ret,
				 ret[c]);
		enters[c] = enter;
		exits[c] = exit;
	}
}

static void check_calls(const struct events *e, pid_t pid, const struct probe_results *res)
{
	const struct attach_event *enters[PROBE_NCALLS], *exits[PROBE_NCALLS];
	struct expect x[PROBE_NCALLS];

	expected_calls(res->fake_comm, x);
	x[PROBE_COMM_INIT_RANK].arg[0] = res->comm_ptr;
	walk_calls(e, pid, res->tid, x, PROBE_NCALLS, res->ret, enters, exits);
	for (unsigned c = 0; c < PROBE_NCALLS; c++) {
		if (c == PROBE_COMM_INIT_RANK) {
			assert_int_equal(enters[c]->uid_ok, 1);
			for (unsigned b = 0; b < ATTACH_UNIQUE_ID_BYTES; b++)
				assert_int_equal(enters[c]->uid[b], probe_uid_byte(b));
			/* The exit reads *comm through the pointer saved at entry. */
			assert_int_equal(exits[c]->nout, 1);
			assert_int_equal(exits[c]->out[0], res->comm_after);
		} else {
			assert_int_equal(enters[c]->uid_ok, 0);
			assert_int_equal(exits[c]->nout, 0);
		}
	}
}

static void run_calls(const char *lib, const char *comm)
{
	struct events e = {0};
	struct attach_target at;
	struct probe_results res;
	struct target t;
	attach_t *a;
	int status;

	t = target_start(lib, comm);
	a = attach_open(&e);
	attach_ok(a, t.pid, &at);
	assert_int_equal(at.pid, t.pid);
	assert_int_equal(at.probes, 2 * at.functions);
	target_send(&t, "c", 1);
	read_all(t.out, &res, sizeof(res));
	drain_until(a, &e, t.pid, ATTACH_FN_COMM_DESTROY, ATTACH_EV_EXIT, 1);
	check_calls(&e, t.pid, &res);
	assert_int_equal(attach_lost(a), 0);

	/* Its end, with its status as waitpid gives it. */
	status = target_exit(&t, 7);
	drain_until(a, &e, t.pid, ATTACH_FN_PROCESS_EXIT, ATTACH_EV_EXIT, 1);
	for (size_t i = 0; i < e.n; i++)
		if (e.ev[i].fn == ATTACH_FN_PROCESS_EXIT) {
			assert_int_equal(e.ev[i].pid, t.pid);
			assert_int_equal(e.ev[i].tid, t.pid);
			assert_int_equal(e.ev[i].ret, status);
			assert_true(WIFEXITED(e.ev[i].ret) && WEXITSTATUS(e.ev[i].ret) == 7);
		}
	assert_int_equal(count_of(&e, t.pid, ATTACH_FN_PROCESS_EXIT, ATTACH_EV_EXIT), 1);
	assert_int_equal(attach_drop_pid(a, t.pid), 0);
	assert_int_equal(attach_drop_pid(a, t.pid), -ENOENT);
	attach_free(a);
	free(e.ev);
}

static int have_real_nccl(void)
{
	if (access(ATTACH_TEST_REAL_NCCL, R_OK) != 0) {
		print_message("skipped: no real libnccl at %s\n", ATTACH_TEST_REAL_NCCL);
		return 0;
	}
	return 1;
}

/* The toolkit's NCCL 2.28: every call fails without a GPU, and is seen with its arguments. */
static void test_real_nccl_calls(void **state)
{
	(void)state;
	if (!have_real_nccl())
		skip();
	run_calls(ATTACH_TEST_REAL_NCCL, "fake");
}

/* The stand-in, NULL comms: the same calls, its own return values. */
static void test_standin_calls(void **state)
{
	(void)state;
	run_calls(ATTACH_TEST_STANDIN, "null");
}

static void test_real_nccl_resolved_all(void **state)
{
	struct events e = {0};
	struct attach_target at;
	struct target t;
	attach_t *a;

	(void)state;
	if (!have_real_nccl())
		skip();
	t = target_start(ATTACH_TEST_REAL_NCCL, "null");
	a = attach_open(&e);
	attach_ok(a, t.pid, &at);
	assert_int_equal(at.functions, ATTACH_FN_PROCESS_EXIT - 1);
	assert_int_equal(at.probes, 2 * (ATTACH_FN_PROCESS_EXIT - 1));
	assert_string_equal(at.missing, "");
	assert_non_null(strstr(at.mapped, "libnccl.so"));
	assert_int_equal(strncmp(at.opened, "/proc/", 6), 0);
	attach_free(a);
	target_exit(&t, 0);
	free(e.ev);
}

/*
 * The stand-in with a real 2-rank communicator (the other rank a helper
 * the target forked, not attached): the communicators each init, split
 * and CommInitAll wrote are in the exit events, the unique ids in the
 * enter events, and the collective on the new communicator names it.
 */
static void test_standin_pair(void **state)
{
	const struct attach_event *enters[PAIR_NCALLS], *exits[PAIR_NCALLS];
	struct probe_pair_results res;
	struct expect x[PAIR_NCALLS];
	struct events e = {0};
	struct attach_target at;
	struct target t;
	attach_t *a;

	(void)state;
	t = target_start(ATTACH_TEST_STANDIN, "pair");
	a = attach_open(&e);
	attach_ok(a, t.pid, &at);
	assert_string_equal(at.missing, "AlltoAll,Gather,Scatter,CommInitRankScalable,CommShrink");
	target_send(&t, "p", 1);
	read_all(t.out, &res, sizeof(res));
	assert_int_equal(res.helper_status, 0);
	for (unsigned c = 0; c < PAIR_NCALLS; c++)
		assert_int_equal(res.ret[c], 0);
	drain_until(a, &e, t.pid, ATTACH_FN_COMM_DESTROY, ATTACH_EV_EXIT, 4);

	memset(x, 0, sizeof(x));
	x[PAIR_INIT_RANK] = (struct expect){ATTACH_FN_COMM_INIT_RANK, 4, {res.comm_ptr, 2, 0, 0}};
	x[PAIR_ALLREDUCE] = (struct expect){ATTACH_FN_ALLREDUCE, 7, {res.buf, res.buf, PAIR_COUNT, 7, 0, res.comm, 0}};
	x[PAIR_SPLIT] = (struct expect){ATTACH_FN_COMM_SPLIT, 5, {res.comm, 0, PAIR_KEY, res.split_ptr, 0}};
	x[PAIR_INIT_ALL] = (struct expect){ATTACH_FN_COMM_INIT_ALL, 3, {res.all_ptr, 1, 0}};
	x[PAIR_INIT_CONFIG] =
	    (struct expect){ATTACH_FN_COMM_INIT_RANK_CONFIG, 5, {res.cfg_ptr, 1, 0, 0, res.config_ptr}};
	x[PAIR_DESTROY] = (struct expect){ATTACH_FN_COMM_DESTROY, 1, {res.split}};
	x[PAIR_DESTROY + 1] = (struct expect){ATTACH_FN_COMM_DESTROY, 1, {res.all}};
	x[PAIR_DESTROY + 2] = (struct expect){ATTACH_FN_COMM_DESTROY, 1, {res.cfg}};
	x[PAIR_DESTROY + 3] = (struct expect){ATTACH_FN_COMM_DESTROY, 1, {res.comm}};
	walk_calls(&e, t.pid, res.tid, x, PAIR_NCALLS, res.ret, enters, exits);

	assert_true(res.comm != 0 && res.split != 0 && res.all != 0 && res.cfg != 0);
	assert_int_equal(exits[PAIR_INIT_RANK]->nout, 1);
	assert_int_equal(exits[PAIR_INIT_RANK]->out[0], res.comm);
	assert_int_equal(exits[PAIR_SPLIT]->nout, 1);
	assert_int_equal(exits[PAIR_SPLIT]->out[0], res.split);
	assert_int_equal(exits[PAIR_INIT_ALL]->nout, 1);
	assert_int_equal(exits[PAIR_INIT_ALL]->out[0], res.all);
	assert_int_equal(exits[PAIR_INIT_CONFIG]->nout, 1);
	assert_int_equal(exits[PAIR_INIT_CONFIG]->out[0], res.cfg);
	assert_int_equal(exits[PAIR_ALLREDUCE]->nout, 0);
	assert_int_equal(enters[PAIR_INIT_RANK]->uid_ok, 1);
	assert_memory_equal(enters[PAIR_INIT_RANK]->uid, res.uid, ATTACH_UNIQUE_ID_BYTES);
	assert_int_equal(enters[PAIR_INIT_CONFIG]->uid_ok, 1);
	assert_memory_equal(enters[PAIR_INIT_CONFIG]->uid, res.uid2, ATTACH_UNIQUE_ID_BYTES);
	assert_int_equal(attach_lost(a), 0);
	attach_free(a);
	target_exit(&t, 0);
	free(e.ev);
}

/*
 * A ring buffer too small for what comes: what does not fit is counted
 * lost, and every event is either delivered or counted (nothing polled
 * while the calls are made).
 */
static void test_ring_full_counts_lost(void **state)
{
	struct events e = {0};
	struct attach_target at;
	struct target t;
	char err[1024];
	attach_t *a = NULL;
	const int pairs = 100;

	(void)state;
	t = target_start(ATTACH_TEST_STANDIN, "null");
	if (attach_new(&a, 1, collect, &e, err, sizeof(err)) != 0)
		fail_msg("attach_new: %s", err);
	attach_ok(a, t.pid, &at);
	for (int i = 0; i < pairs; i++)
		target_group_pair(&t);
	while (attach_poll(a, 0) > 0)
		;
	assert_true(attach_lost(a) > 0);
	assert_int_equal(e.n + attach_lost(a), 4 * pairs);
	/* The first events are the ones kept, in order. */
	assert_true(e.n >= 1);
	assert_int_equal(e.ev[0].fn, ATTACH_FN_GROUP_START);
	assert_int_equal(e.ev[0].kind, ATTACH_EV_ENTER);
	attach_free(a);
	target_exit(&t, 0);
	free(e.ev);
}

/* Processes with nothing to attach: the error and what it says. */
static void test_errors(void **state)
{
	struct events e = {0};
	struct attach_target at;
	struct target t;
	char err[1024];
	attach_t *a;
	pid_t dead;
	int status;

	(void)state;
	a = attach_open(&e);

	t = target_start("none", "null");
	assert_int_equal(attach_pid(a, t.pid, &at, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "libc.so.6"));
	assert_non_null(strstr(err, "fsdpscope run"));
	target_exit(&t, 0);

	dead = fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	assert_int_equal(waitpid(dead, &status, 0), dead);
	assert_int_equal(attach_pid(a, dead, &at, err, sizeof(err)), -ESRCH);
	assert_non_null(strstr(err, "no process"));

	/* Its libnccl deleted since it was loaded: said so. */
	{
		char dir[] = "/tmp/attach_probe_test.XXXXXX", lib[PATH_MAX], cmd[2 * PATH_MAX + 16];

		assert_non_null(mkdtemp(dir));
		snprintf(lib, sizeof(lib), "%s/libnccl.so.2", dir);
		snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", ATTACH_TEST_STANDIN, lib);
		assert_int_equal(system(cmd), 0);
		t = target_start(lib, "null");
		assert_int_equal(unlink(lib), 0);
		assert_int_equal(rmdir(dir), 0);
		assert_int_equal(attach_pid(a, t.pid, &at, err, sizeof(err)), -ENOENT);
		assert_non_null(strstr(err, "deleted or replaced"));
		target_exit(&t, 0);
	}

	/* Attached twice by one attach_t. */
	t = target_start(ATTACH_TEST_STANDIN, "null");
	attach_ok(a, t.pid, &at);
	assert_int_equal(attach_pid(a, t.pid, &at, err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "already attached"));
	target_exit(&t, 0);
	attach_free(a);
	free(e.ev);
}

static void *thread_wait(void *arg)
{
	int fd = *(int *)arg;
	char b;
	pid_t tid = (pid_t)syscall(SYS_gettid);

	if (write(fd, &tid, sizeof(tid)) != sizeof(tid))
		return NULL;
	/* Until the pipe's write end closes. */
	while (read(fd, &b, 1) > 0)
		;
	return NULL;
}

/* A thread id is not a process: said, and nothing placed. */
static void test_thread_not_process(void **state)
{
	struct events e = {0};
	struct attach_target at;
	char err[1024];
	int sv[2];
	pthread_t th;
	pid_t tid;
	attach_t *a;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(pthread_create(&th, NULL, thread_wait, &sv[1]), 0);
	read_all(sv[0], &tid, sizeof(tid));
	a = attach_open(&e);
	assert_int_equal(attach_pid(a, tid, &at, err, sizeof(err)), -ESRCH);
	assert_non_null(strstr(err, "thread"));
	assert_int_equal(at.probes, 0);
	close(sv[0]);
	pthread_join(th, NULL);
	close(sv[1]);
	attach_free(a);
}

/* The probes' file descriptors this process holds: perf events (one per
 * probe, the perf-event way) and BPF links (per probe, or per process and
 * kind with uprobe_multi, and the exit tracepoint). */
static int probe_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		char path[300], link[256];
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		n += strcmp(link, "anon_inode:[perf_event]") == 0 || strcmp(link, "anon_inode:bpf_link") == 0;
	}
	closedir(d);
	return n;
}

/*
 * Two attach_t on one process both see its calls; once one drops it (and
 * once it is freed) its probes are gone: the other, still attached, is the
 * witness that the calls were made, and a probe runs in the calling thread
 * before the call goes on, so what would have come has come.
 */
static void test_two_then_detach(void **state)
{
	struct events ea = {0}, eb = {0};
	struct attach_target ta, tb;
	struct target t;
	attach_t *a, *b;
	int base = probe_fds(), both;

	(void)state;
	t = target_start(ATTACH_TEST_STANDIN, "null");
	a = attach_open(&ea);
	b = attach_open(&eb);
	attach_ok(a, t.pid, &ta);
	attach_ok(b, t.pid, &tb);
	both = probe_fds();
	assert_true(both > base);

	target_group_pair(&t);
	drain_until(a, &ea, t.pid, ATTACH_FN_GROUP_END, ATTACH_EV_EXIT, 1);
	drain_until(b, &eb, t.pid, ATTACH_FN_GROUP_END, ATTACH_EV_EXIT, 1);
	assert_int_equal(ea.n, 4);
	assert_int_equal(eb.n, 4);

	/* The kernel filters by process: another process of the same library, not attached, adds nothing. */
	{
		struct target other = target_start(ATTACH_TEST_STANDIN, "null");

		target_group_pair(&other);
		target_group_pair(&t);
		drain_until(a, &ea, t.pid, ATTACH_FN_GROUP_END, ATTACH_EV_EXIT, 2);
		assert_int_equal(ea.n, 8);
		target_exit(&other, 0);
		ea.n = 4;
		drain_until(b, &eb, t.pid, ATTACH_FN_GROUP_END, ATTACH_EV_EXIT, 2);
		assert_int_equal(eb.n, 8);
		eb.n = 4;
	}

	assert_int_equal(attach_drop_pid(a, t.pid), 0);
	/* a's probes are gone, not its exit tracepoint: fewer, but more than base. */
	assert_true(probe_fds() < both);
	assert_true(probe_fds() > base);
	target_group_pair(&t);
	drain_until(b, &eb, t.pid, ATTACH_FN_GROUP_END, ATTACH_EV_EXIT, 2);
	assert_int_equal(attach_poll(a, 0), 0);
	assert_int_equal(ea.n, 4);

	/* Freed: every probe gone. */
	attach_free(b);
	attach_free(a);
	assert_int_equal(probe_fds(), base);

	/* A fresh attach still sees the process: the probes of the freed ones were removed, not broken. */
	a = attach_open(&ea);
	ea.n = 0;
	attach_ok(a, t.pid, &ta);
	target_group_pair(&t);
	drain_until(a, &ea, t.pid, ATTACH_FN_GROUP_END, ATTACH_EV_EXIT, 1);
	assert_int_equal(ea.n, 4);
	attach_free(a);
	target_exit(&t, 0);
	free(ea.ev);
	free(eb.ev);
}

/* Killed by a signal: PROCESS_EXIT's status says which. */
static void test_exit_by_signal(void **state)
{
	struct events e = {0};
	struct attach_target at;
	struct target t;
	attach_t *a;
	int status;

	(void)state;
	t = target_start(ATTACH_TEST_STANDIN, "null");
	a = attach_open(&e);
	attach_ok(a, t.pid, &at);
	assert_int_equal(kill(t.pid, SIGKILL), 0);
	assert_int_equal(waitpid(t.pid, &status, 0), t.pid);
	drain_until(a, &e, t.pid, ATTACH_FN_PROCESS_EXIT, ATTACH_EV_EXIT, 1);
	assert_int_equal(e.n, 1);
	assert_true(WIFSIGNALED(e.ev[0].ret) && WTERMSIG(e.ev[0].ret) == SIGKILL);
	assert_int_equal(e.ev[0].ret, status);
	/* Dropping a process that is gone works. */
	assert_int_equal(attach_drop_pid(a, t.pid), 0);
	close(t.cmd);
	close(t.out);
	attach_free(a);
	free(e.ev);
}

/* The perf-event way (one perf event per probe: kernels before 6.6), on
 * the real libnccl: its removal takes seconds (attach.c), so one case.
 * It needs CAP_SYS_ADMIN besides CAP_BPF + CAP_PERFMON: root only here. */
static void test_real_nccl_calls_perf_events(void **state)
{
	(void)state;
	if (!have_real_nccl())
		skip();
	if (geteuid() != 0) {
		print_message("skipped: uprobes as perf events need CAP_SYS_ADMIN: run as root\n");
		skip();
	}
	assert_int_equal(setenv("FSDPSCOPE_UPROBE_MULTI", "0", 1), 0);
	run_calls(ATTACH_TEST_REAL_NCCL, "fake");
	assert_int_equal(unsetenv("FSDPSCOPE_UPROBE_MULTI"), 0);
}

/*
 * exit() from a thread that is not the leader: the leader is killed with
 * the group's code, and that is the one exit event (the other thread's
 * end is not one).
 */
static void test_exit_from_thread(void **state)
{
	char cmd[2] = {'T', 42};
	struct events e = {0};
	struct attach_target at;
	struct target t;
	attach_t *a;
	int status;

	(void)state;
	t = target_start(ATTACH_TEST_STANDIN, "null");
	a = attach_open(&e);
	attach_ok(a, t.pid, &at);
	target_send(&t, cmd, 2);
	assert_int_equal(waitpid(t.pid, &status, 0), t.pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 42);
	drain_until(a, &e, t.pid, ATTACH_FN_PROCESS_EXIT, ATTACH_EV_EXIT, 1);
	while (attach_poll(a, 0) > 0)
		;
	assert_int_equal(e.n, 1);
	assert_int_equal(e.ev[0].tid, t.pid);
	assert_int_equal(e.ev[0].ret, status);
	close(t.cmd);
	close(t.out);
	attach_free(a);
	free(e.ev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_real_nccl_resolved_all),
	    cmocka_unit_test(test_real_nccl_calls),
	    cmocka_unit_test(test_standin_calls),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_thread_not_process),
	    cmocka_unit_test(test_two_then_detach),
	    cmocka_unit_test(test_exit_by_signal),
	    cmocka_unit_test(test_standin_pair),
	    cmocka_unit_test(test_ring_full_counts_lost),
	    cmocka_unit_test(test_exit_from_thread),
	    cmocka_unit_test(test_real_nccl_calls_perf_events),
	};
	char err[1024];

	if (attach_available(err, sizeof(err)) != 0) {
		printf("attach_probe_test: skipped: %s\n", err);
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
