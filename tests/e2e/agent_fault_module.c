/*
 * agent_fault_module.c - a plugin that links NCCL, as a Python extension
 * (libtorch_cuda.so) does. agent_fault_dlopen loads it with RTLD_LOCAL, so
 * libnccl.so.2 is not in the global scope: the module's NCCL calls still
 * bind to the preloaded agent, which must find the real library by its
 * soname (dlsym(RTLD_NEXT) cannot see it).
 */
#include <stdio.h>

#include <nccl.h>

__attribute__((visibility("default"))) int agent_fault_module_run(void);

int agent_fault_module_run(void)
{
	ncclUniqueId id;
	ncclComm_t comm;
	float x = 3, y = 0;
	double sum = 0;

	if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
		return 1;
	for (int i = 0; i < 3; i++) {
		if (ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
			return 1;
		sum += y;
	}
	if (ncclCommDestroy(comm) != ncclSuccess)
		return 1;
	printf("module sum %.1f\n", sum);
	return 0;
}
