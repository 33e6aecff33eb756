/*
 * attach_probe_target - the process attach_probe_test attaches to.
 *
 *   attach_probe_target LIB|none null|fake|pair CMD_FD OUT_FD
 *
 * dlopens LIB (a libnccl.so.2; "none": no NCCL at all), writes 'R' to
 * OUT_FD, then obeys one byte at a time from CMD_FD, so that the test
 * decides when each call happens relative to the attach:
 *   'c' the calls of attach_probe_calls.h, then struct probe_results to OUT_FD;
 *       the collectives get a NULL comm ("null") or a zeroed buffer ("fake":
 *       a distinct pointer that a real libnccl rejects as corrupted without
 *       touching a GPU)
 *   'g' one ncclGroupStart / ncclGroupEnd pair, then 'k'
 *   'p' ("pair" only, on the stand-in): the calls of enum probe_pair_call on
 *       a 2-rank communicator whose other rank is a helper child forked
 *       at start (it joins, reduces, splits and destroys on its own), then
 *       struct probe_pair_results
 *   'x' followed by one byte N: exit(N)
 *   'T' followed by one byte N: exit(N) from a second thread, the main
 *       thread blocked in pause() (the kernel kills it with the group's code)
 * EOF on CMD_FD: exit(0).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nccl.h>

#include "tests/unit/attach_probe_calls.h"

static void *lib;

static void *need(const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "attach_probe_target: %s missing: %s\n", name, dlerror());
		exit(3);
	}
	return p;
}

static void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n <= 0)
			exit(4);
		p += n;
		len -= (size_t)n;
	}
}

static void calls(int out, void *comm)
{
	__typeof__(ncclGroupStart) *group_start = need("ncclGroupStart");
	__typeof__(ncclGroupEnd) *group_end = need("ncclGroupEnd");
	__typeof__(ncclAllGather) *all_gather = need("ncclAllGather");
	__typeof__(ncclAllReduce) *all_reduce = need("ncclAllReduce");
	__typeof__(ncclReduceScatter) *reduce_scatter = need("ncclReduceScatter");
	__typeof__(ncclBroadcast) *broadcast = need("ncclBroadcast");
	__typeof__(ncclBcast) *bcast = need("ncclBcast");
	__typeof__(ncclReduce) *reduce = need("ncclReduce");
	__typeof__(ncclSend) *send = need("ncclSend");
	__typeof__(ncclRecv) *recv = need("ncclRecv");
	__typeof__(ncclCommInitRank) *init_rank = need("ncclCommInitRank");
	__typeof__(ncclCommDestroy) *destroy = need("ncclCommDestroy");
	void *s = (void *)(uintptr_t)PROBE_SEND, *r = (void *)(uintptr_t)PROBE_RECV;
	cudaStream_t stream = (cudaStream_t)(uintptr_t)PROBE_STREAM;
	ncclComm_t c = comm, made = (ncclComm_t)(uintptr_t)PROBE_COMM_BEFORE;
	ncclDataType_t dt = (ncclDataType_t)PROBE_DTYPE;
	ncclRedOp_t op = (ncclRedOp_t)PROBE_OP;
	struct probe_results res;
	ncclUniqueId id;

	memset(&res, 0, sizeof(res));
	for (unsigned i = 0; i < sizeof(id.internal); i++)
		id.internal[i] = (char)probe_uid_byte(i);
	res.ret[PROBE_GROUP_START] = group_start();
	res.ret[PROBE_ALLGATHER] = all_gather(s, r, PROBE_COUNT, dt, c, stream);
	res.ret[PROBE_ALLREDUCE] = all_reduce(s, r, PROBE_COUNT, dt, op, c, stream);
	res.ret[PROBE_REDUCESCATTER] = reduce_scatter(s, r, PROBE_COUNT, dt, op, c, stream);
	res.ret[PROBE_BROADCAST] = broadcast(s, r, PROBE_COUNT, dt, (int)PROBE_ROOT, c, stream);
	res.ret[PROBE_BCAST] = bcast(s, PROBE_COUNT, dt, (int)PROBE_ROOT, c, stream);
	res.ret[PROBE_REDUCE] = reduce(s, r, PROBE_COUNT, dt, op, (int)PROBE_ROOT, c, stream);
	res.ret[PROBE_SEND_CALL] = send(s, PROBE_COUNT, dt, (int)PROBE_PEER, c, stream);
	res.ret[PROBE_RECV_CALL] = recv(r, PROBE_COUNT, dt, (int)PROBE_PEER, c, stream);
	res.ret[PROBE_GROUP_END] = group_end();
	res.ret[PROBE_COMM_INIT_RANK] = init_rank(&made, (int)PROBE_NRANKS, id, (int)PROBE_RANK);
	res.ret[PROBE_COMM_DESTROY] = destroy(NULL);
	res.fake_comm = (uint64_t)(uintptr_t)comm;
	res.comm_ptr = (uint64_t)(uintptr_t)&made;
	res.comm_after = (uint64_t)(uintptr_t)made;
	res.tid = (uint32_t)syscall(SYS_gettid);
	write_all(out, &res, sizeof(res));
}

static void *exit_thread(void *arg)
{
	exit(*(unsigned char *)arg);
}

static ncclUniqueId pair_uid;
static pid_t pair_helper_pid;

/* Rank 1 of the pair: the same collective calls as rank 0's, unattached. */
static void pair_helper(void)
{
	__typeof__(ncclCommInitRank) *init_rank = need("ncclCommInitRank");
	__typeof__(ncclAllReduce) *all_reduce = need("ncclAllReduce");
	__typeof__(ncclCommSplit) *split = need("ncclCommSplit");
	__typeof__(ncclCommDestroy) *destroy = need("ncclCommDestroy");
	float buf[PAIR_COUNT] = {1, 2, 3, 4};
	ncclComm_t c, sc;

	if (init_rank(&c, 2, pair_uid, 1) != ncclSuccess ||
	    all_reduce(buf, buf, PAIR_COUNT, ncclFloat32, ncclSum, c, NULL) != ncclSuccess ||
	    split(c, 0, 0, &sc, NULL) != ncclSuccess || destroy(sc) != ncclSuccess || destroy(c) != ncclSuccess)
		_exit(1);
	_exit(0);
}

static void pair_calls(int out)
{
	__typeof__(ncclCommInitRank) *init_rank = need("ncclCommInitRank");
	__typeof__(ncclCommInitRankConfig) *init_config = need("ncclCommInitRankConfig");
	__typeof__(ncclCommInitAll) *init_all = need("ncclCommInitAll");
	__typeof__(ncclGetUniqueId) *get_uid = need("ncclGetUniqueId");
	__typeof__(ncclAllReduce) *all_reduce = need("ncclAllReduce");
	__typeof__(ncclCommSplit) *split = need("ncclCommSplit");
	__typeof__(ncclCommDestroy) *destroy = need("ncclCommDestroy");
	static float buf[PAIR_COUNT] = {1, 2, 3, 4};
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	ncclComm_t c = NULL, sc = NULL, all[1] = {NULL}, cc = NULL;
	struct probe_pair_results res;
	ncclUniqueId uid2;

	memset(&res, 0, sizeof(res));
	res.ret[PAIR_INIT_RANK] = init_rank(&c, 2, pair_uid, 0);
	res.ret[PAIR_ALLREDUCE] = all_reduce(buf, buf, PAIR_COUNT, ncclFloat32, ncclSum, c, NULL);
	res.ret[PAIR_SPLIT] = split(c, 0, (int)PAIR_KEY, &sc, NULL);
	res.ret[PAIR_INIT_ALL] = init_all(all, 1, NULL);
	if (get_uid(&uid2) != ncclSuccess)
		exit(6);
	res.ret[PAIR_INIT_CONFIG] = init_config(&cc, 1, uid2, 0, &config);
	res.ret[PAIR_DESTROY] = destroy(sc);
	res.ret[PAIR_DESTROY + 1] = destroy(all[0]);
	res.ret[PAIR_DESTROY + 2] = destroy(cc);
	res.ret[PAIR_DESTROY + 3] = destroy(c);
	res.comm_ptr = (uint64_t)(uintptr_t)&c;
	res.comm = (uint64_t)(uintptr_t)c;
	res.buf = (uint64_t)(uintptr_t)buf;
	res.split_ptr = (uint64_t)(uintptr_t)&sc;
	res.split = (uint64_t)(uintptr_t)sc;
	res.all_ptr = (uint64_t)(uintptr_t)all;
	res.all = (uint64_t)(uintptr_t)all[0];
	res.cfg_ptr = (uint64_t)(uintptr_t)&cc;
	res.cfg = (uint64_t)(uintptr_t)cc;
	res.config_ptr = (uint64_t)(uintptr_t)&config;
	memcpy(res.uid, pair_uid.internal, sizeof(res.uid));
	memcpy(res.uid2, uid2.internal, sizeof(res.uid2));
	res.tid = (uint32_t)syscall(SYS_gettid);
	if (waitpid(pair_helper_pid, &res.helper_status, 0) != pair_helper_pid)
		res.helper_status = -1;
	write_all(out, &res, sizeof(res));
}

int main(int argc, char **argv)
{
	void *comm = NULL;
	int in, out;
	char cmd;

	if (argc != 5) {
		fprintf(stderr, "usage: attach_probe_target LIB|none null|fake|pair CMD_FD OUT_FD\n");
		return 2;
	}
	in = atoi(argv[3]);
	out = atoi(argv[4]);
	if (strcmp(argv[1], "none") != 0) {
		lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
		if (!lib) {
			fprintf(stderr, "attach_probe_target: %s\n", dlerror());
			return 3;
		}
	}
	/* Large and zeroed: a real libnccl reads its magic words and rejects it. */
	if (strcmp(argv[2], "fake") == 0)
		comm = calloc(1, 64u << 20);
	if (strcmp(argv[2], "pair") == 0) {
		__typeof__(ncclGetUniqueId) *get_uid = need("ncclGetUniqueId");
		pid_t helper;

		if (get_uid(&pair_uid) != ncclSuccess)
			return 6;
		helper = pair_helper_pid = fork();
		if (helper < 0)
			return 7;
		if (helper == 0) {
			close(in);
			close(out);
			pair_helper();
		}
	}
	write_all(out, "R", 1);
	while (read(in, &cmd, 1) == 1) {
		if (cmd == 'c') {
			calls(out, comm);
		} else if (cmd == 'p') {
			pair_calls(out);
		} else if (cmd == 'g') {
			__typeof__(ncclGroupStart) *group_start = need("ncclGroupStart");
			__typeof__(ncclGroupEnd) *group_end = need("ncclGroupEnd");

			group_start();
			group_end();
			write_all(out, "k", 1);
		} else if (cmd == 'T') {
			static unsigned char code;
			pthread_t th;

			if (read(in, &code, 1) != 1)
				return 5;
			if (pthread_create(&th, NULL, exit_thread, &code) != 0)
				return 8;
			for (;;)
				pause();
		} else if (cmd == 'x') {
			unsigned char code = 0;

			if (read(in, &code, 1) != 1)
				return 5;
			exit(code);
		}
	}
	return 0;
}
