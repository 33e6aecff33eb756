/*
 * session_options.c - the options a live session is started with
 * (cli/session_options.h).
 */
#include "cli/session_options.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SESSION_AGENT_NAME "libfsdpscope-agent.so"

int session_metrics_option(const char *prog, const char *arg, char **hostport, int *remote)
{
	const char *colon = strrchr(arg, ':');
	const char *port = colon ? colon + 1 : arg;
	char *end;
	long p = strtol(port, &end, 10);
	size_t hl = colon ? (size_t)(colon - arg) : 0;

	*hostport = NULL;
	*remote = 0;
	if (!*port || *end || p < 0 || p > 65535 || (colon && !hl)) {
		fprintf(stderr, "%s: --metrics %s: expected PORT or HOST:PORT (127.0.0.1:9464)\n", prog, arg);
		return -EINVAL;
	}
	if (!colon) {
		if (asprintf(hostport, "127.0.0.1:%ld", p) < 0)
			*hostport = NULL;
		return *hostport ? 0 : -ENOMEM;
	}
	if (!((hl == 9 && !strncmp(arg, "localhost", 9)) || !strncmp(arg, "127.", 4) ||
	      (hl == 5 && !strncmp(arg, "[::1]", 5)))) {
		*remote = 1;
		fprintf(
		    stderr,
		    "%s: warning: --metrics %s is not a loopback address: anyone who can reach it can read the job's "
		    "metrics (no authentication)\n",
		    prog, arg);
	}
	*hostport = strdup(arg);
	return *hostport ? 0 : -ENOMEM;
}

int session_find_agent(const char *prog, char **path)
{
	const char *env = getenv("FSDPSCOPE_AGENT");
	char exe[PATH_MAX], cand[2][PATH_MAX + 64];
	char *agent = NULL;
	ssize_t n;
	int ncand = 0;

	*path = NULL;
	if (env && *env) {
		agent = realpath(env, NULL);
		if (!agent || access(agent, R_OK) < 0) {
			fprintf(stderr, "%s: FSDPSCOPE_AGENT=%s: %s\n", prog, env, strerror(errno));
			free(agent);
			return -ENOENT;
		}
	} else {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n > 0) {
			char *slash;

			exe[n] = '\0';
			slash = strrchr(exe, '/');
			if (slash)
				*slash = '\0';
			snprintf(cand[ncand++], sizeof(cand[0]), "%s/../agent/%s", exe, SESSION_AGENT_NAME);
			snprintf(cand[ncand++], sizeof(cand[0]), "%s/../lib/fsdpscope/%s", exe, SESSION_AGENT_NAME);
		}
		for (int i = 0; i < ncand && !agent; i++) {
			if (access(cand[i], R_OK) == 0)
				agent = realpath(cand[i], NULL);
		}
		if (!agent) {
			fprintf(stderr, "%s: cannot find the agent, %s; looked for:\n", prog, SESSION_AGENT_NAME);
			fprintf(stderr, "    $FSDPSCOPE_AGENT (not set)\n");
			for (int i = 0; i < ncand; i++)
				fprintf(stderr, "    %s\n", cand[i]);
			fprintf(stderr, "  build it (target fsdpscope_agent) or set FSDPSCOPE_AGENT to its path\n");
			return -ENOENT;
		}
	}
	/* ld.so splits LD_PRELOAD at spaces and colons. */
	if (strpbrk(agent, " :")) {
		fprintf(stderr,
			"%s: the agent's path has a space or a colon, which LD_PRELOAD cannot carry: %s\n"
			"  copy it elsewhere and set FSDPSCOPE_AGENT\n",
			prog, agent);
		free(agent);
		return -EINVAL;
	}
	*path = agent;
	return 0;
}

/* ---- what `run` and `top -- CMD` share ------------------------------------------ */

#define SESSION_DEFAULT_FLUSH_S 5
#define SESSION_DEFAULT_WAIT_DESCENDANTS_S 3600
#define SESSION_MAX_WAIT_S (30 * 86400)

void session_run_options_init(struct session_run_options *o)
{
	memset(o, 0, sizeof(*o));
	o->dir = SESSION_DEFAULT_DIR;
	o->name = SESSION_DEFAULT_NAME;
	o->flush_timeout_s = SESSION_DEFAULT_FLUSH_S;
	o->wait_descendants_s = SESSION_DEFAULT_WAIT_DESCENDANTS_S;
	keep_policy_default(&o->keep);
	diagnosis_flags_init(&o->flags);
}

static int parse_seconds(const char *prog, const char *opt, const char *arg, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (!*arg || *end || errno || v < 0 || v > SESSION_MAX_WAIT_S) {
		fprintf(stderr, "%s: %s: '%s' is not a number of seconds (0..%d)\n", prog, opt, arg,
			SESSION_MAX_WAIT_S);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int keep_option(const char *prog, const char *arg, struct keep_policy *keep);

int session_run_apply(void *ctx, int opt, const char *arg, const char *prog)
{
	struct session_run_options *o = ctx;

	switch (opt) {
	case SESSION_OPT_OUT:
		o->dir = arg;
		return 0;
	case SESSION_OPT_NAME:
		o->name = arg;
		return 0;
	case SESSION_OPT_DORMANT:
		o->dormant = 1;
		return 0;
	case SESSION_OPT_NO_CUPTI:
		o->no_cupti = 1;
		return 0;
	case SESSION_OPT_JSON_SUMMARY:
		o->json_summary = arg;
		return 0;
	case SESSION_OPT_METRICS:
		o->metrics = arg;
		return 0;
	case SESSION_OPT_KEEP:
		return keep_option(prog, arg, &o->keep);
	case SESSION_OPT_FLUSH_TIMEOUT:
		return parse_seconds(prog, "--flush-timeout", arg, &o->flush_timeout_s);
	case SESSION_OPT_WAIT_DESCENDANTS:
		return parse_seconds(prog, "--wait-descendants", arg, &o->wait_descendants_s);
	default: /* DIAG_OPT_HANG_TIMEOUT */
		return options_diagnosis_apply(&o->flags, opt, arg, prog);
	}
}

static int keep_option(const char *prog, const char *arg, struct keep_policy *keep)
{
	if (keep_policy_parse(arg, keep)) {
		fprintf(stderr, "%s: --keep %s: expected full, summary, summary:N or last:N (N from 1 to 10000000)\n",
			prog, arg);
		return -1;
	}
	return 0;
}

int session_output_check(const char *prog, const char *dir, const char *name)
{
	if (!*dir) {
		fprintf(stderr, "%s: --out: empty directory name\n", prog);
		return -1;
	}
	if (!*name || strchr(name, '/') || name[0] == '.') {
		fprintf(stderr, "%s: --name: '%s' must be a plain file name (no '/', not starting with '.')\n", prog,
			name);
		return -1;
	}
	return 0;
}

int session_run_options_check(const struct session_run_options *o, const char *prog)
{
	return session_output_check(prog, o->dir, o->name);
}

const struct options_entry session_run_entries[] = {
    {"out", 0, "DIR", "directory for the trace (created; default ./" SESSION_DEFAULT_DIR ")", SESSION_OPT_OUT},
    {"name", 0, "NAME",
     "trace file name, DIR/NAME.fss (default " SESSION_DEFAULT_NAME "); a\n"
     "file of that name is never replaced (see above)",
     SESSION_OPT_NAME},
    {"dormant", 0, NULL,
     "start the agents dormant: they count calls but record\n"
     "nothing until a collector asks for data",
     SESSION_OPT_DORMANT},
    {"no-cupti", 0, NULL, "do not load CUPTI in the job (no GPU intervals)", SESSION_OPT_NO_CUPTI},
    {"wait-descendants", 0, "SEC",
     "\n"
     "after CMD exits, wait at most SEC seconds for the\n"
     "processes it left running (forked ranks, daemons);\n"
     "0: do not wait (default 3600). Those still running\n"
     "then are named, and go on in per-process files that\n"
     "the next run in DIR merges",
     SESSION_OPT_WAIT_DESCENDANTS},
    {"flush-timeout", 0, "SEC",
     "then wait at most SEC seconds for processes still\n"
     "connected to send their last records (default 5)",
     SESSION_OPT_FLUSH_TIMEOUT},
    {"json-summary", 0, "FILE",
     "write the final diagnosis to FILE as 'fsdpscope lint --json'\n"
     "prints it (schema fsdpscope.report/2)",
     SESSION_OPT_JSON_SUMMARY},
    {"metrics", 0, "[HOST:]PORT",
     "serve Prometheus /metrics there while the job runs\n"
     "(docs/metrics.md); a bare PORT is 127.0.0.1:PORT; a host\n"
     "that is not loopback is served with a warning",
     SESSION_OPT_METRICS},
    {"keep", 0, "POLICY",
     "what the trace keeps of a long job: full (default; it\n"
     "switches to last:1000 before the disk runs short, and says\n"
     "so), last:N, summary[:N] ('fsdpscope help collect',\n"
     "docs/keep.md)",
     SESSION_OPT_KEEP},
    {"hang-timeout", 0, "SEC",
     "ranks waiting in a collective longer than SEC seconds while\n"
     "others have not entered it are a hang (collective-hang;\n"
     "default 60; > 0, fractions allowed): said on standard error\n"
     "while the job runs ('fsdpscope: collective-hang: ...'), once\n"
     "when its waits end ('... ended': the waiting ranks gave up on\n"
     "an NCCL error or died; the verdict keeps it), once when it\n"
     "clears (the missing ranks arrived), and on /metrics\n"
     "(fsdpscope_collective_hang); keep it below the job's own NCCL /\n"
     "PyTorch timeout",
     DIAG_OPT_HANG_TIMEOUT},
    {NULL, 0, NULL, NULL, 0},
};
