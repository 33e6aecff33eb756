/*
 * job.h - the job a session launches (`fsdpscope run`, `fsdpscope top --
 * CMD`): started under the agent, in its own process group.
 */
#ifndef FSS_CLI_JOB_H
#define FSS_CLI_JOB_H

#include <sys/types.h>

#include "cli/session.h"

/* How session_spawn starts the job. */
struct session_job {
	const char *prog;  /* "fsdpscope top": the prefix of every line said */
	char *const *argv; /* CMD ARGS..., NULL-terminated */
	const char *agent; /* the agent's path (session_find_agent) */
	int dormant, no_cupti;
	int output_fd;	/* the job's stdout and stderr, -1: left as they are */
	int stdin_null; /* the job's stdin is /dev/null (closed to it) */
};

/*
 * session_spawn - fork and exec the job in its own process group, with the
 * agent and this session's sink in its environment (as `fsdpscope run`
 * documents: LD_PRELOAD, NVTX_INJECTION64_PATH, FSDPSCOPE_SINK,
 * FSDPSCOPE_OUT, FSDPSCOPE_DORMANT, FSDPSCOPE_CUPTI), noted in run.info.
 * The caller reaps it (ingest_note_exit). Returns 0 with *pid once exec
 * succeeded; -errno of exec (nothing ran, *pid reaped) or of fork, said on
 * stderr prefixed with j->prog.
 */
int session_spawn(session_t *s, const struct session_job *j, pid_t *pid);

#endif
