/*
 * job.c - the job a session launches (cli/job.h).
 */
#include "cli/job.h"

#include "cli/run_folder.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* In the child, before exec: the job's environment, its stdio. */
static void spawn_child(session_t *s, const struct session_job *j, const char *ld_preload, int keep_nvtx)
{
	setpgid(0, 0);
	setenv("LD_PRELOAD", ld_preload, 1);
	if (!keep_nvtx)
		setenv("NVTX_INJECTION64_PATH", j->agent, 1);
	setenv("FSDPSCOPE_SINK", session_private_sink(s), 1);
	setenv("FSDPSCOPE_OUT", run_folder_path(session_run_folder(s)), 1);
	if (j->dormant)
		setenv("FSDPSCOPE_DORMANT", "1", 1);
	if (j->no_cupti)
		setenv("FSDPSCOPE_CUPTI", "0", 1);
	if (j->stdin_null) {
		int fd = open("/dev/null", O_RDONLY);

		if (fd >= 0 && fd != STDIN_FILENO) {
			dup2(fd, STDIN_FILENO);
			close(fd);
		} else if (fd < 0) {
			close(STDIN_FILENO);
		}
	}
	if (j->output_fd >= 0) {
		dup2(j->output_fd, STDOUT_FILENO);
		dup2(j->output_fd, STDERR_FILENO);
	}
}

int session_spawn(session_t *s, const struct session_job *j, pid_t *pid)
{
	const char *old = getenv("LD_PRELOAD"), *nvtx = getenv("NVTX_INJECTION64_PATH");
	char *ld_preload = NULL;
	int errpipe[2], e = 0, keep_nvtx = nvtx && *nvtx && strcmp(nvtx, j->agent) != 0;
	ssize_t n;
	pid_t p;

	*pid = -1;
	/* The agent first, unless an ASan runtime is listed, which insists on being first. */
	if (!old || !*old)
		n = asprintf(&ld_preload, "%s", j->agent);
	else if (strstr(old, "libasan") || strstr(old, "clang_rt.asan"))
		n = asprintf(&ld_preload, "%s:%s", old, j->agent);
	else
		n = asprintf(&ld_preload, "%s:%s", j->agent, old);
	if (n < 0) {
		fprintf(stderr, "%s: out of memory\n", j->prog);
		return -ENOMEM;
	}
	if (keep_nvtx)
		fprintf(
		    stderr,
		    "%s: warning: NVTX_INJECTION64_PATH is already set (%s): keeping it, so NVTX ranges will not be "
		    "recorded\n",
		    j->prog, nvtx);
	if (pipe2(errpipe, O_CLOEXEC) < 0) {
		e = -errno;
		fprintf(stderr, "%s: pipe: %s\n", j->prog, strerror(errno));
		free(ld_preload);
		return e;
	}
	fflush(NULL);
	p = fork();
	if (p == 0) {
		spawn_child(s, j, ld_preload, keep_nvtx);
		execvp(j->argv[0], j->argv);
		e = errno;
		if (write(errpipe[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
	}
	free(ld_preload);
	close(errpipe[1]);
	if (p < 0) {
		e = -errno;
		fprintf(stderr, "%s: fork: %s\n", j->prog, strerror(errno));
		close(errpipe[0]);
		return e;
	}
	setpgid(p, p); /* also in the child: whichever runs first */
	/* exec closes the pipe (O_CLOEXEC): EOF means the job is running. */
	do
		n = read(errpipe[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(errpipe[0]);
	if (n == (ssize_t)sizeof(e)) {
		int status;

		while (waitpid(p, &status, 0) < 0 && errno == EINTR)
			;
		if (e == ENOENT && !strchr(j->argv[0], '/'))
			fprintf(stderr, "%s: %s: command not found\n", j->prog, j->argv[0]);
		else
			fprintf(stderr, "%s: cannot run %s: %s\n", j->prog, j->argv[0], strerror(e));
		return -e;
	}
	if (run_folder_set_job(session_run_folder(s), p) < 0)
		fprintf(
		    stderr,
		    "%s: warning: cannot note the job in %s/run.info: a run that finds this one's folder later cannot "
		    "tell whether its job still runs\n",
		    j->prog, run_folder_path(session_run_folder(s)));
	*pid = p;
	return 0;
}
