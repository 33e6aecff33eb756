/*
 * run_job.c - small NCCL jobs for `fsdpscope run`'s end-to-end tests
 * (tests/e2e/run_e2e.py), linked against the CPU stand-in (libnccl.so.2)
 * as a CUDA program links NCCL. Every rank has a one-rank communicator of
 * its own and issues AllReduce calls of one float; a rank's collectives are
 * numbered 1..K by the agent (seq), which is what the tests check.
 *
 *   orphans N K          fork N ranks and exit at once, before any NCCL
 *                        call; each rank waits until its parent is gone,
 *                        then issues K AllReduce
 *   early-exit N K1 K2   fork N ranks; each issues K1 AllReduce and says so
 *                        on a pipe; the parent exits once all have, and each
 *                        rank, once its parent is gone, issues K2 more
 *   ranks N K            fork N ranks, each K AllReduce; the parent waits
 *   gated N K GATE       as ranks, but each rank issues K, then waits for
 *                        the file GATE to exist, then issues K more
 * With RUN_JOB_PIDS=FILE in the environment, each rank appends its pid there
 * once its first K calls are done: the tests wait for that file, never for a
 * time. With RUN_JOB_GATE=FILE, an orphan waits for FILE before it exits;
 * with RUN_JOB_ON_TERM=FILE, it survives SIGTERM, appending a line to FILE
 * for each one it gets. A wrong result exits 1.
 */
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

#include <nccl.h>

#define CHECK(call)                                                                                                    \
	do {                                                                                                           \
		ncclResult_t res_ = (call);                                                                            \
		if (res_ != ncclSuccess) {                                                                             \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(res_));       \
			exit(1);                                                                                       \
		}                                                                                                      \
	} while (0)

static void pause_a_little(void)
{
	struct timespec ts = {0, 2 * 1000 * 1000};

	nanosleep(&ts, NULL);
}

/* Until the parent `was` has exited (the rank is then someone else's). */
static void wait_orphaned(pid_t was)
{
	while (getppid() == was)
		pause_a_little();
}

static void wait_file(const char *path)
{
	struct stat st;

	while (stat(path, &st) < 0)
		pause_a_little();
}

static void note_pid(void)
{
	const char *path = getenv("RUN_JOB_PIDS");
	char line[32];
	int fd, n;

	if (!path)
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		exit(1);
	n = snprintf(line, sizeof(line), "%d\n", (int)getpid());
	if (write(fd, line, (size_t)n) != n)
		exit(1);
	close(fd);
}

static const char *on_term_path;

/* SIGTERM noted, not obeyed: open/write/close are async-signal-safe. */
static void on_term(int sig)
{
	int fd = open(on_term_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	(void)sig;
	if (fd >= 0) {
		if (write(fd, "term\n", 5) < 0) {
			/* nothing to do: the test then sees no line */
		}
		close(fd);
	}
}

static ncclComm_t comm_open(void)
{
	ncclComm_t comm;
	ncclUniqueId id;

	CHECK(ncclGetUniqueId(&id));
	CHECK(ncclCommInitRank(&comm, 1, id, 0));
	return comm;
}

static void allreduce_n(ncclComm_t comm, long n)
{
	for (long i = 0; i < n; i++) {
		float x = (float)(i % 7), y = -1;

		CHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL));
		if (y != x)
			exit(1);
	}
}

static long arg(char **argv, int i)
{
	char *end;
	long v = strtol(argv[i], &end, 10);

	if (*end || v < 0) {
		fprintf(stderr, "run_job: '%s' is not a count\n", argv[i]);
		exit(2);
	}
	return v;
}

static int wait_all(int n)
{
	int bad = 0;

	for (int i = 0; i < n; i++) {
		int status;

		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			bad = 1;
	}
	return bad;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	pid_t parent = getpid();
	int fds[2];

	if (!strcmp(mode, "orphans") && argc == 4) {
		long n = arg(argv, 2), k = arg(argv, 3);

		for (long r = 0; r < n; r++) {
			if (fork() == 0) {
				ncclComm_t comm;

				wait_orphaned(parent);
				on_term_path = getenv("RUN_JOB_ON_TERM");
				if (on_term_path)
					signal(SIGTERM, on_term);
				comm = comm_open();
				allreduce_n(comm, k);
				note_pid();
				if (getenv("RUN_JOB_GATE"))
					wait_file(getenv("RUN_JOB_GATE"));
				CHECK(ncclCommDestroy(comm));
				return 0;
			}
		}
		return 0;
	}
	if (!strcmp(mode, "early-exit") && argc == 5) {
		long n = arg(argv, 2), k1 = arg(argv, 3), k2 = arg(argv, 4);
		char c;

		if (pipe(fds) < 0)
			return 1;
		for (long r = 0; r < n; r++) {
			if (fork() == 0) {
				ncclComm_t comm = comm_open();

				close(fds[0]);
				allreduce_n(comm, k1);
				note_pid();
				if (write(fds[1], "x", 1) != 1)
					return 1;
				close(fds[1]);
				wait_orphaned(parent);
				allreduce_n(comm, k2);
				CHECK(ncclCommDestroy(comm));
				return 0;
			}
		}
		close(fds[1]);
		for (long r = 0; r < n; r++)
			if (read(fds[0], &c, 1) != 1)
				return 1;
		return 0;
	}
	if ((!strcmp(mode, "ranks") && argc == 4) || (!strcmp(mode, "gated") && argc == 5)) {
		long n = arg(argv, 2), k = arg(argv, 3);
		const char *gate = argc == 5 ? argv[4] : NULL;

		for (long r = 0; r < n; r++) {
			if (fork() == 0) {
				ncclComm_t comm = comm_open();

				allreduce_n(comm, k);
				note_pid();
				if (gate) {
					wait_file(gate);
					allreduce_n(comm, k);
				}
				CHECK(ncclCommDestroy(comm));
				return 0;
			}
		}
		return wait_all((int)n);
	}
	fprintf(stderr, "usage: run_job orphans N K | early-exit N K1 K2 | ranks N K | gated N K GATE\n");
	return 2;
}
