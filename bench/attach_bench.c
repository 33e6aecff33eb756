/*
 * attach_bench - what `fsdpscope attach`'s probes add to an NCCL call
 * (bench/results/attach.txt; run by bench/attach_bench.sh).
 *
 *   attach_bench --lib build/fsdp_ref/nccl_cpu/libnccl.so.2 [--calls N] [--rounds R]
 *
 * A child process dlopens the stand-in, makes a one-rank communicator
 * (latency model 0) and, on each command from the parent, times N calls
 * of one kind:
 *   group      ncclGroupStart / ncclGroupEnd pairs, empty (2 probed calls each)
 *   allreduce  ncclAllReduce(count 1, float) enqueued inside one group per
 *              1000 calls (the enqueue is timed; the group's end is not)
 * The parent runs the rounds, each kind bare and attached (attach_new +
 * attach_pid on the child, every probe of enum attach_fn placed), the
 * order alternating per round so that drift falls on both. While an
 * attached run goes on, the parent drains the ring buffer, as `fsdpscope
 * attach` does, and counts the events: every call must arrive (enter and
 * exit) or be counted lost. Printed: ns per call (median of the rounds,
 * min, max), the ratio attached / bare per round (its median), and the ns
 * attach adds per call.
 *
 *   attach_bench --job PID --ranks N --release FIFO [--bare]
 *
 * The per-step half (attach_bench.sh runs fsdp_ref --hold-at 1:FIFO): waits
 * until process PID (the launcher) has N children, attaches each (unless
 * --bare), writes a byte to FIFO to let the job go, and drains the ring
 * until every rank's exit arrived; prints the calls seen per rank.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "agent/bpf/attach.h"

#define BATCH 1000 /* allreduce calls per group */

enum kind { KIND_GROUP, KIND_ALLREDUCE, KIND_MAX };
static const char *const kind_name[KIND_MAX] = {"group", "allreduce"};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *need(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "attach_bench: %s missing\n", name);
		_exit(3);
	}
	return p;
}

/* The child: one-rank communicator, then timed loops on command. */
static void child_main(const char *path, int in, int out, long calls)
{
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	__typeof__(ncclGroupStart) *group_start;
	__typeof__(ncclGroupEnd) *group_end;
	__typeof__(ncclAllReduce) *all_reduce;
	__typeof__(ncclCommInitAll) *init_all;
	ncclComm_t comm;
	static float buf[1];
	char cmd;

	if (!lib) {
		fprintf(stderr, "attach_bench: %s\n", dlerror());
		_exit(3);
	}
	group_start = need(lib, "ncclGroupStart");
	group_end = need(lib, "ncclGroupEnd");
	all_reduce = need(lib, "ncclAllReduce");
	init_all = need(lib, "ncclCommInitAll");
	if (init_all(&comm, 1, NULL) != ncclSuccess)
		_exit(4);
	while (read(in, &cmd, 1) == 1) {
		uint64_t ns = 0;

		if (cmd == 'g') {
			uint64_t t0 = now_ns();

			for (long i = 0; i < calls / 2; i++) {
				group_start();
				group_end();
			}
			ns = now_ns() - t0;
		} else if (cmd == 'a') {
			for (long done = 0; done < calls; done += BATCH) {
				uint64_t t0;

				group_start();
				t0 = now_ns();
				for (int i = 0; i < BATCH; i++)
					all_reduce(buf, buf, 1, ncclFloat32, ncclSum, comm, NULL);
				ns += now_ns() - t0;
				group_end();
			}
		} else {
			break;
		}
		if (write(out, &ns, sizeof(ns)) != sizeof(ns))
			_exit(5);
	}
	_exit(0);
}

struct counter {
	uint64_t events;
};

static int count_event(void *ctx, const struct attach_event *ev)
{
	(void)ev;
	((struct counter *)ctx)->events++;
	return 0;
}

/* One timed run in the child: its ns per call. Drains a (when attached) meanwhile. */
static double run_once(int cmd_fd, int res_fd, enum kind k, long calls, attach_t *a)
{
	char cmd = k == KIND_GROUP ? 'g' : 'a';
	uint64_t ns;

	if (write(cmd_fd, &cmd, 1) != 1)
		exit(6);
	for (;;) {
		struct pollfd p[2] = {{.fd = res_fd, .events = POLLIN},
				      {.fd = a ? attach_fd(a) : -1, .events = POLLIN}};

		if (poll(p, a ? 2 : 1, -1) < 0 && errno != EINTR)
			exit(7);
		if (a && (p[1].revents & POLLIN))
			attach_poll(a, 0);
		if (p[0].revents & POLLIN)
			break;
	}
	if (read(res_fd, &ns, sizeof(ns)) != sizeof(ns))
		exit(8);
	if (a)
		while (attach_poll(a, 0) > 0)
			;
	return (double)ns / (double)(k == KIND_GROUP ? (calls / 2) * 2 : calls);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The children of pid, from /proc/PID/task/PID/children. */
static int children_of(pid_t pid, pid_t *out, int max)
{
	char path[64];
	FILE *f;
	int n = 0, c;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (n < max && fscanf(f, "%d", &c) == 1)
		out[n++] = c;
	fclose(f);
	return n;
}

struct job_counts {
	pid_t pid[64];
	uint64_t calls[64];
	int n, exited;
};

static int count_job_event(void *ctx, const struct attach_event *ev)
{
	struct job_counts *j = ctx;

	for (int i = 0; i < j->n; i++) {
		if (j->pid[i] != (pid_t)ev->pid)
			continue;
		if (ev->fn == ATTACH_FN_PROCESS_EXIT)
			j->exited++;
		else if (ev->kind == ATTACH_EV_ENTER)
			j->calls[i]++;
	}
	return 0;
}

static int job_main(pid_t launcher, int ranks, const char *fifo, int bare)
{
	struct job_counts j = {0};
	attach_t *a = NULL;
	char err[1024];
	int fd, tries = 0;

	if (ranks < 1 || ranks > 64)
		return 2;
	while ((j.n = children_of(launcher, j.pid, 64)) < ranks) {
		if (j.n < 0 || ++tries > 60000) {
			fprintf(stderr, "attach_bench: process %d has no %d children\n", (int)launcher, ranks);
			return 1;
		}
		usleep(1000);
	}
	if (!bare) {
		if (attach_new(&a, 64u << 20, count_job_event, &j, err, sizeof(err)) != 0) {
			fprintf(stderr, "attach_bench: %s\n", err);
			return 1;
		}
		for (int i = 0; i < j.n; i++) {
			struct attach_target t;

			if (attach_pid(a, j.pid[i], &t, err, sizeof(err)) != 0) {
				fprintf(stderr, "attach_bench: %s\n", err);
				return 1;
			}
		}
	}
	fd = open(fifo, O_WRONLY);
	if (fd < 0 || write(fd, "g", 1) != 1) {
		fprintf(stderr, "attach_bench: cannot release the job through %s\n", fifo);
		return 1;
	}
	close(fd);
	if (bare)
		return 0;
	while (j.exited < j.n)
		if (attach_poll(a, 100) < 0)
			break;
	while (attach_poll(a, 0) > 0)
		;
	for (int i = 0; i < j.n; i++)
		printf("rank process %d: %llu probed calls\n", (int)j.pid[i], (unsigned long long)j.calls[i]);
	printf("lost %llu\n", (unsigned long long)attach_lost(a));
	attach_free(a);
	return 0;
}

int main(int argc, char **argv)
{
	const char *lib = NULL;
	long calls = 200000;
	int rounds = 7, cmd[2], res[2];
	char err[1024];
	pid_t child;

	if (argc >= 7 && strcmp(argv[1], "--job") == 0 && strcmp(argv[3], "--ranks") == 0 &&
	    strcmp(argv[5], "--release") == 0)
		return job_main(atoi(argv[2]), atoi(argv[4]), argv[6], argc > 7 && strcmp(argv[7], "--bare") == 0);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc)
			lib = argv[++i];
		else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
			calls = strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: attach_bench --lib LIBNCCL [--calls N] [--rounds R]\n");
			return 2;
		}
	}
	calls = (calls + BATCH - 1) / BATCH * BATCH;
	if (!lib || rounds < 1 || rounds > 100 || calls < BATCH) {
		fprintf(stderr, "usage: attach_bench --lib LIBNCCL [--calls N >= %d] [--rounds 1..100]\n", BATCH);
		return 2;
	}
	if (attach_available(err, sizeof(err)) != 0) {
		fprintf(stderr, "attach_bench: %s\n", err);
		return 77;
	}
	setenv("FSDP_REF_LINK_LATENCY_US", "0", 1);
	if (pipe(cmd) || pipe(res))
		return 1;
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		close(cmd[1]);
		close(res[0]);
		child_main(lib, cmd[0], res[1], calls);
	}
	close(cmd[0]);
	close(res[1]);

	printf("attach_bench: %ld calls per run, %d rounds, each kind bare and attached in alternating order\n", calls,
	       rounds);
	for (int k = 0; k < KIND_MAX; k++) {
		double bare[100], attached[100], ratio[100], bare_s[100], att_s[100];
		uint64_t expected = 0, got = 0, lost = 0;
		unsigned probes = 0;

		/* One warm-up run: page faults and the first group's set-up out of the figures. */
		run_once(cmd[1], res[0], (enum kind)k, calls, NULL);
		for (int r = 0; r < rounds; r++) {
			for (int o = 0; o < 2; o++) {
				int attach_now = (o + r) % 2;
				struct counter c = {0};
				struct attach_target t;
				attach_t *a = NULL;
				double ns;

				if (attach_now) {
					if (attach_new(&a, 64u << 20, count_event, &c, err, sizeof(err)) != 0 ||
					    attach_pid(a, child, &t, err, sizeof(err)) != 0) {
						fprintf(stderr, "attach_bench: %s\n", err);
						return 1;
					}
					probes = t.probes;
				}
				ns = run_once(cmd[1], res[0], (enum kind)k, calls, a);
				if (attach_now) {
					attached[r] = ns;
					expected += 2ull * (uint64_t)(k == KIND_GROUP ? (calls / 2) * 2
										      : calls + 2 * (calls / BATCH));
					got += c.events;
					lost += attach_lost(a);
					attach_free(a);
				} else {
					bare[r] = ns;
				}
			}
			ratio[r] = attached[r] / bare[r];
		}
		memcpy(bare_s, bare, sizeof(double) * (size_t)rounds);
		memcpy(att_s, attached, sizeof(double) * (size_t)rounds);
		printf("\n%s: %s\n", kind_name[k],
		       k == KIND_GROUP
			   ? "ncclGroupStart + ncclGroupEnd, empty group (per call: half a pair)"
			   : "ncclAllReduce(count 1, float), enqueued inside a group of 1000 (the enqueue timed)");
		printf("  %-10s %10s %10s %10s\n", "mode", "ns/call", "min", "max");
		{
			double mb = median(bare_s, rounds), ma = median(att_s, rounds);

			printf("  %-10s %10.1f %10.1f %10.1f\n", "bare", mb, bare_s[0], bare_s[rounds - 1]);
			printf("  %-10s %10.1f %10.1f %10.1f\n", "attached", ma, att_s[0], att_s[rounds - 1]);
			printf("  attached / bare per round, median: %.1fx; attach adds %.0f ns per call (%u probes "
			       "placed)\n",
			       median(ratio, rounds), ma - mb, probes);
			/* 1% of each second of the rank's time, at ma - mb per call. */
			if (ma > mb)
				printf("  under 1%% of a rank's time below %.0f probed calls per second\n",
				       1e7 / (ma - mb));
		}
		printf("  events: %llu of %llu expected arrived, %llu lost (ring full)\n", (unsigned long long)got,
		       (unsigned long long)expected, (unsigned long long)lost);
	}
	close(cmd[1]);
	waitpid(child, NULL, 0);
	return 0;
}
