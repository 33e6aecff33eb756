/*
 * agent_fault_job.c - a small NCCL job for the agent's end-to-end tests,
 * linked against the CPU stand-in (libnccl.so.2) like a CUDA program links
 * NCCL. agent_fault_test.c runs it with and without the agent preloaded and
 * compares what it prints and how it exits; the agent must change neither.
 *
 *   sequence N       fork N ranks; each: AllGather, ReduceScatter, AllReduce,
 *                    a group of 3, a Send/Recv ring in a group, Broadcast,
 *                    a split by rank parity with an AllReduce on it; the
 *                    parent prints every rank's checksum
 *   many N           one rank, N AllReduce of one float
 *   gated K FILE     K AllReduce, wait for FILE to exist, K more
 *   fork             10 AllReduce; a child with its own communicator (5
 *                    AllReduce) that ends with _exit(0), as Python's
 *                    multiprocessing ends its forked children, and a child
 *                    without NCCL; 10 more
 *   threads T K      T threads, each with its own communicator: K AllReduce
 *                    and a group of two
 *   exit CODE        3 AllReduce, then exit(CODE) with the communicator alive
 *   kill K           K AllReduce, then SIGKILL itself
 *   quick K HOW      K AllReduce, then HOW(0) with the communicator alive,
 *                    HOW being _exit or _Exit (what os._exit() does), or
 *                    quick_exit
 *   vfork K          K AllReduce; a vfork child whose exec fails and that
 *                    calls _exit(127) with the parent's memory; K more
 * Results are checked; a wrong one exits 1. All output is deterministic.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

static void one_rank(ncclComm_t *comm)
{
	ncclUniqueId id;

	CHECK(ncclGetUniqueId(&id));
	CHECK(ncclCommInitRank(comm, 1, id, 0));
}

static double allreduce_n(ncclComm_t comm, long n)
{
	double sum = 0;

	for (long i = 0; i < n; i++) {
		float x = (float)(i % 7), y = -1;
		CHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL));
		if (y != x)
			exit(1);
		sum += y;
	}
	return sum;
}

/* ---- sequence ------------------------------------------------------------- */

static double rank_sequence(int n, int r, ncclUniqueId id)
{
	ncclComm_t comm, sub;
	float send[64], recv[64 * 8];
	int32_t isend[16], irecv[16 * 8];
	double dsend[4], drecv[4];
	double sum = 0;

	CHECK(ncclCommInitRank(&comm, n, id, r));
	for (int i = 0; i < 64; i++)
		send[i] = (float)(r * 100 + i);
	for (int i = 0; i < 16; i++)
		isend[i] = r * 1000 + i;
	for (int i = 0; i < 4; i++)
		dsend[i] = r + i * 0.5;

	CHECK(ncclAllGather(send, recv, 16, ncclFloat32, comm, NULL));
	for (int i = 0; i < 16 * n; i++)
		sum += recv[i];
	CHECK(ncclReduceScatter(send, recv, 8, ncclFloat32, ncclSum, comm, NULL));
	for (int i = 0; i < 8; i++)
		sum += recv[i];
	CHECK(ncclAllReduce(send, recv, 4, ncclFloat32, ncclSum, comm, NULL));
	for (int i = 0; i < 4; i++)
		sum += recv[i];

	CHECK(ncclGroupStart());
	CHECK(ncclAllGather(isend, irecv, 4, ncclInt32, comm, NULL));
	CHECK(ncclAllReduce(dsend, drecv, 2, ncclFloat64, ncclMax, comm, NULL));
	CHECK(ncclReduceScatter(send, recv + 256, 2, ncclFloat32, ncclSum, comm, NULL));
	CHECK(ncclGroupEnd());
	for (int i = 0; i < 4 * n; i++)
		sum += irecv[i];
	sum += drecv[0] + drecv[1] + recv[256] + recv[257];

	CHECK(ncclGroupStart());
	CHECK(ncclSend(send, 4, ncclFloat32, (r + 1) % n, comm, NULL));
	CHECK(ncclRecv(recv, 4, ncclFloat32, (r + n - 1) % n, comm, NULL));
	CHECK(ncclGroupEnd());
	for (int i = 0; i < 4; i++)
		sum += recv[i];

	CHECK(ncclBroadcast(isend, irecv, 4, ncclInt32, 0, comm, NULL));
	for (int i = 0; i < 4; i++)
		sum += irecv[i];

	CHECK(ncclCommSplit(comm, r % 2, r, &sub, NULL));
	float one = (float)r, got = 0;
	CHECK(ncclAllReduce(&one, &got, 1, ncclFloat32, ncclSum, sub, NULL));
	sum += got;
	CHECK(ncclCommDestroy(sub));
	CHECK(ncclCommDestroy(comm));
	return sum;
}

static int job_sequence(int n)
{
	ncclUniqueId id;
	double *sums =
	    mmap(NULL, sizeof(double) * (size_t)n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int failed = 0;

	if (n < 1 || n > 8 || sums == MAP_FAILED)
		return 2;
	CHECK(ncclGetUniqueId(&id));
	fflush(stdout);
	for (int r = 0; r < n; r++) {
		pid_t pid = fork();
		if (pid < 0)
			return 2;
		if (pid == 0) {
			sums[r] = rank_sequence(n, r, id);
			exit(0);
		}
	}
	for (int r = 0; r < n; r++) {
		int status;
		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed = 1;
	}
	for (int r = 0; r < n; r++)
		printf("rank %d checksum %.1f\n", r, sums[r]);
	printf("sequence %s\n", failed ? "FAILED" : "ok");
	return failed;
}

/* ---- the others ------------------------------------------------------------ */

static int job_many(long n)
{
	ncclComm_t comm;

	one_rank(&comm);
	double sum = allreduce_n(comm, n);
	CHECK(ncclCommDestroy(comm));
	printf("many %ld sum %.1f\n", n, sum);
	return 0;
}

static int job_gated(long k, const char *gate)
{
	ncclComm_t comm;
	struct timespec ms = {0, 1000000};

	one_rank(&comm);
	double sum = allreduce_n(comm, k);
	for (int i = 0; i < 30000 && access(gate, F_OK) != 0; i++)
		nanosleep(&ms, NULL);
	if (access(gate, F_OK) != 0)
		return 3;
	sum += allreduce_n(comm, k);
	CHECK(ncclCommDestroy(comm));
	printf("gated %ld sum %.1f\n", k, sum);
	return 0;
}

static int job_fork(void)
{
	ncclComm_t comm;
	int status, failed = 0;

	one_rank(&comm);
	double sum = allreduce_n(comm, 10);
	fflush(stdout);
	pid_t with_nccl = fork();
	if (with_nccl == 0) {
		ncclComm_t mine;
		one_rank(&mine);
		allreduce_n(mine, 5);
		CHECK(ncclCommDestroy(mine));
		_exit(0);
	}
	pid_t without = fork();
	if (without == 0)
		exit(0);
	if (with_nccl < 0 || without < 0)
		return 2;
	if (waitpid(with_nccl, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		failed = 1;
	if (waitpid(without, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		failed = 1;
	sum += allreduce_n(comm, 10);
	CHECK(ncclCommDestroy(comm));
	printf("fork sum %.1f children %s\n", sum, failed ? "FAILED" : "ok");
	return failed;
}

struct thread_arg {
	long k;
	double sum;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	ncclComm_t comm;
	float x = 1, y[2];

	one_rank(&comm);
	a->sum = allreduce_n(comm, a->k);
	CHECK(ncclGroupStart());
	CHECK(ncclAllReduce(&x, &y[0], 1, ncclFloat32, ncclSum, comm, NULL));
	CHECK(ncclAllReduce(&x, &y[1], 1, ncclFloat32, ncclSum, comm, NULL));
	CHECK(ncclGroupEnd());
	a->sum += y[0] + y[1];
	CHECK(ncclCommDestroy(comm));
	return NULL;
}

static int job_threads(int t, long k)
{
	pthread_t th[64];
	struct thread_arg args[64];
	double sum = 0;

	if (t < 1 || t > 64)
		return 2;
	for (int i = 0; i < t; i++) {
		args[i].k = k;
		if (pthread_create(&th[i], NULL, thread_main, &args[i]))
			return 2;
	}
	for (int i = 0; i < t; i++) {
		pthread_join(th[i], NULL);
		sum += args[i].sum;
	}
	printf("threads %d sum %.1f\n", t, sum);
	return 0;
}

static int job_exit(int code)
{
	ncclComm_t comm;

	one_rank(&comm);
	allreduce_n(comm, 3);
	printf("exit %d\n", code);
	exit(code);
}

static int job_kill(long k)
{
	ncclComm_t comm;

	one_rank(&comm);
	allreduce_n(comm, k);
	printf("kill\n");
	fflush(stdout);
	raise(SIGKILL);
	return 0;
}

static int job_quick(long k, const char *how)
{
	ncclComm_t comm;

	one_rank(&comm);
	allreduce_n(comm, k);
	printf("quick %ld %s\n", k, how);
	fflush(stdout); /* _exit does not flush stdio */
	if (!strcmp(how, "_Exit"))
		_Exit(0);
	if (!strcmp(how, "quick_exit"))
		quick_exit(0);
	_exit(0);
}

static int job_vfork(long k)
{
	ncclComm_t comm;
	int status;

	one_rank(&comm);
	double sum = allreduce_n(comm, k);
	fflush(stdout);
	pid_t child = vfork();
	if (child == 0) {
		/* Only exec and _exit are allowed here: the memory is the parent's. */
		execl("/nonexistent/fsdpscope-no-such-program", "fsdpscope-no-such-program", (char *)NULL);
		_exit(127);
	}
	if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 127)
		return 2;
	sum += allreduce_n(comm, k);
	CHECK(ncclCommDestroy(comm));
	printf("vfork %ld sum %.1f child 127\n", k, sum);
	return 0;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";

	if (!strcmp(what, "sequence") && argc == 3)
		return job_sequence(atoi(argv[2]));
	if (!strcmp(what, "many") && argc == 3)
		return job_many(atol(argv[2]));
	if (!strcmp(what, "gated") && argc == 4)
		return job_gated(atol(argv[2]), argv[3]);
	if (!strcmp(what, "fork") && argc == 2)
		return job_fork();
	if (!strcmp(what, "threads") && argc == 4)
		return job_threads(atoi(argv[2]), atol(argv[3]));
	if (!strcmp(what, "exit") && argc == 3)
		return job_exit(atoi(argv[2]));
	if (!strcmp(what, "kill") && argc == 3)
		return job_kill(atol(argv[2]));
	if (!strcmp(what, "quick") && argc == 4)
		return job_quick(atol(argv[2]), argv[3]);
	if (!strcmp(what, "vfork") && argc == 3)
		return job_vfork(atol(argv[2]));
	fprintf(stderr,
		"usage: agent_fault_job sequence N | many N | gated K FILE | fork | threads T K | exit CODE | kill K | "
		"quick K _exit|_Exit|quick_exit | vfork K\n");
	return 2;
}
