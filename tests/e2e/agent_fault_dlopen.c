/*
 * agent_fault_dlopen.c - a job that does not link NCCL: it dlopen()s a
 * module that does (agent_fault_module.c), RTLD_LOCAL, like a Python
 * interpreter importing torch, and runs it.
 *
 *   agent_fault_dlopen MODULE.so
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: agent_fault_dlopen MODULE.so\n");
		return 2;
	}
	void *m = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!m) {
		fprintf(stderr, "agent_fault_dlopen: %s\n", dlerror());
		return 2;
	}
	int (*run)(void) = (int (*)(void))dlsym(m, "agent_fault_module_run");
	if (!run)
		return 2;
	return run();
}
