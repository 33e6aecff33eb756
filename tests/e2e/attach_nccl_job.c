/*
 * attach_nccl_job - a process that calls a real libnccl without a GPU, for
 * attach_e2e.py's real_nccl scenario.
 *
 *   attach_nccl_job LIB
 *
 * dlopens LIB (the toolkit's libnccl.so.2), stops itself (SIGSTOP: the test
 * attaches, then sends SIGCONT), then makes a few collectives on a zeroed
 * communicator buffer: a real NCCL rejects it as corrupted without touching
 * a GPU, so every call fails, and each is printed as "call OP result R" (R
 * the ncclResult_t it returned) for the test to compare with the trace.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <nccl.h>

static void *lib;

static void *need(const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "attach_nccl_job: %s missing: %s\n", name, dlerror());
		exit(3);
	}
	return p;
}

int main(int argc, char **argv)
{
	/* zeroed, and as large as NCCL may read of a communicator before it
	 * finds no valid magic there */
	ncclComm_t comm = calloc(1, 64u << 20);
	cudaStream_t stream = (cudaStream_t)(uintptr_t)0x7000;
	void *s = (void *)(uintptr_t)0x10000, *r = (void *)(uintptr_t)0x20000;

	if (!comm)
		return 4;
	if (argc != 2) {
		fprintf(stderr, "usage: attach_nccl_job LIB\n");
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "attach_nccl_job: %s\n", dlerror());
		return 3;
	}
	__typeof__(ncclAllGather) *all_gather = need("ncclAllGather");
	__typeof__(ncclAllReduce) *all_reduce = need("ncclAllReduce");
	__typeof__(ncclReduceScatter) *reduce_scatter = need("ncclReduceScatter");
	__typeof__(ncclBroadcast) *broadcast = need("ncclBroadcast");
	__typeof__(ncclReduce) *reduce = need("ncclReduce");
	raise(SIGSTOP);
	printf("call AllGather result %d\n", (int)all_gather(s, r, 1024, ncclBfloat16, comm, stream));
	printf("call AllReduce result %d\n", (int)all_reduce(s, r, 4096, ncclFloat32, ncclSum, comm, stream));
	printf("call ReduceScatter result %d\n",
	       (int)reduce_scatter(s, r, 512, ncclFloat32, ncclAvg, comm, stream));
	printf("call Broadcast result %d\n", (int)broadcast(s, r, 256, ncclInt8, 0, comm, stream));
	printf("call Reduce result %d\n", (int)reduce(s, r, 128, ncclFloat64, ncclMax, 0, comm, stream));
	return 0;
}
