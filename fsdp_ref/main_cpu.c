/* fsdp_ref/main_cpu.c: the fsdp_ref executable: the trainer on the CPU
 * backend. `--backend cuda` hands over to fsdp_ref_cuda, built beside it
 * when nvcc is available, with the same arguments. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fsdp_ref/backend.h"
#include "fsdp_ref/train.h"

/* The value of --backend in argv, or NULL. */
static const char *backend_arg(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
			return argv[i + 1];
		if (strncmp(argv[i], "--backend=", 10) == 0)
			return argv[i] + 10;
	}
	return NULL;
}

static int exec_cuda(char **argv)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n < 0) {
		fprintf(stderr, "fsdp_ref: cannot find my own executable: %s\n", strerror(errno));
		return 1;
	}
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	snprintf(path, sizeof path, "%s/cuda/fsdp_ref_cuda", self);
	if (access(path, X_OK) != 0)
		snprintf(path, sizeof path, "%s/fsdp_ref_cuda", self);
	argv[0] = path;
	execv(path, argv);
	fprintf(stderr,
		"fsdp_ref: --backend cuda needs fsdp_ref_cuda beside this executable (%s): %s; it is "
		"built when CMake finds nvcc, the CUDA toolkit and libnccl.so.2\n",
		path, strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	const char *backend = backend_arg(argc, argv);
	if (backend && strcmp(backend, "cuda") == 0)
		return exec_cuda(argv);
	return fsdp_main(argc, argv, &fsdp_backend_cpu);
}
