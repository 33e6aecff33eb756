/*
 * job.c - the job a session launches, and its loop (cli/job.h).
 *
 * Why fsdpscope reaps with waitpid(-1): as the job's subreaper, every
 * process the job starts stays its descendant however early its parent
 * exits, so the job has ended when the last of them is reaped, not when
 * CMD has; each end is noted in the trace as the process's process_exit.
 */
#include "cli/job.h"

#include "cli/run_folder.h"
#include "collector/ingest.h"
#include "common/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* The loop's wait: how late a reaped process or a stop is noticed. */
#define JOB_POLL_MS 100

/* A process reaped after CMD had exited. */
struct job_exit {
	pid_t pid;
	int status;
};

struct job {
	session_t *session;
	struct job_options o;
	pid_t leader;
	int leader_done;
	int status;	       /* CMD's wait status, once leader_done */
	struct job_exit *late; /* reaped after CMD exited, in order */
	size_t nlate;
	size_t left_running; /* descendants still alive when the wait gave up */
	pid_t left_pids[JOB_NAMED_PIDS];
};

/* In the child, before exec: the terminal, the signals, the job's environment, its stdio. */
static void spawn_child(session_t *s, const struct job_spec *j, const char *ld_preload, int keep_nvtx,
			const struct sigaction *old_ttou)
{
	setpgid(0, 0);
	if (j->tty >= 0) {
		tcsetpgrp(j->tty, getpid()); /* SIGTTOU is ignored until exec */
		sigaction(SIGTTOU, old_ttou, NULL);
	}
	if (j->child_mask)
		sigprocmask(SIG_SETMASK, j->child_mask, NULL);
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

/* LD_PRELOAD for the job: the agent first, unless an ASan runtime is
 * listed, which insists on being first. NULL when out of memory. */
static char *job_ld_preload(const char *agent)
{
	const char *old = getenv("LD_PRELOAD");
	char *value = NULL;
	int n;

	if (!old || !*old)
		n = asprintf(&value, "%s", agent);
	else if (strstr(old, "libasan") || strstr(old, "clang_rt.asan"))
		n = asprintf(&value, "%s:%s", old, agent);
	else
		n = asprintf(&value, "%s:%s", agent, old);
	return n < 0 ? NULL : value;
}

/* exec failed in the child (errno e): reap it, say why, a shell's code for it. */
static int spawn_failed(const struct job_spec *j, pid_t p, int e, int *exec_code)
{
	int status;

	while (waitpid(p, &status, 0) < 0 && errno == EINTR)
		;
	if (j->tty >= 0)
		tcsetpgrp(j->tty, getpgrp());
	if (e == ENOENT && !strchr(j->argv[0], '/'))
		fprintf(stderr, "%s: %s: command not found\n", j->prog, j->argv[0]);
	else
		fprintf(stderr, "%s: cannot run %s: %s\n", j->prog, j->argv[0], strerror(e));
	if (exec_code)
		*exec_code = e == ENOENT || e == ENOTDIR ? 127 : 126;
	return -e;
}

int job_spawn(session_t *s, const struct job_spec *j, pid_t *pid, int *exec_code)
{
	const char *nvtx = getenv("NVTX_INJECTION64_PATH");
	char *ld_preload = job_ld_preload(j->agent);
	int errpipe[2], e = 0, keep_nvtx = nvtx && *nvtx && strcmp(nvtx, j->agent) != 0;
	struct sigaction ignore, old_ttou;
	ssize_t n;
	pid_t p;

	*pid = -1;
	if (exec_code)
		*exec_code = 0;
	if (!ld_preload) {
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
	/* tcsetpgrp from a background group would stop fsdpscope: SIGTTOU ignored. */
	if (j->tty >= 0) {
		memset(&ignore, 0, sizeof(ignore));
		sigemptyset(&ignore.sa_mask);
		ignore.sa_handler = SIG_IGN;
		sigaction(SIGTTOU, &ignore, &old_ttou);
	}
	fflush(NULL);
	p = fork();
	if (p == 0) {
		spawn_child(s, j, ld_preload, keep_nvtx, &old_ttou);
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
	if (j->tty >= 0)
		tcsetpgrp(j->tty, p);
	/* exec closes the pipe (O_CLOEXEC): EOF means the job is running. */
	do
		n = read(errpipe[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(errpipe[0]);
	if (n == (ssize_t)sizeof(e))
		return spawn_failed(j, p, e, exec_code);
	if (run_folder_set_job(session_run_folder(s), p) < 0)
		fprintf(
		    stderr,
		    "%s: warning: cannot note the job in %s/run.info: a run that finds this one's folder later cannot "
		    "tell whether its job still runs\n",
		    j->prog, run_folder_path(session_run_folder(s)));
	*pid = p;
	return 0;
}

void job_become_subreaper(const char *prog, const char *command)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		fprintf(stderr,
			"%s: warning: cannot become the job's subreaper (%s): processes that outlive %s will not be "
			"waited for\n",
			prog, strerror(errno), command);
}

void job_catch_signals(void (*handler)(int), int ignore_pipe)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = handler;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	if (ignore_pipe) {
		sa.sa_handler = SIG_IGN;
		sigaction(SIGPIPE, &sa, NULL);
	}
}

void job_status_words(int status, char *buf, size_t len)
{
	const char *sig = WIFSIGNALED(status) ? sigabbrev_np(WTERMSIG(status)) : NULL;

	if (WIFEXITED(status))
		snprintf(buf, len, "exited %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status) && sig)
		snprintf(buf, len, "killed by signal %d (SIG%s)", WTERMSIG(status), sig);
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "status 0x%x", (unsigned)status);
}

int job_exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

int job_new(job_t **out, session_t *s, const struct job_options *o)
{
	job_t *j = calloc(1, sizeof(*j));

	*out = NULL;
	if (!j)
		return -ENOMEM;
	j->session = s;
	j->o = *o;
	*out = j;
	return 0;
}

void job_free(job_t *j)
{
	if (!j)
		return;
	free(j->late);
	free(j);
}

size_t job_left_running(const job_t *j)
{
	return j->left_running;
}

/* The job was stopped (^Z): stop with it, as a shell job, then resume it. */
static void follow_stop(job_t *j)
{
	tcsetpgrp(j->o.tty, getpgrp());
	raise(SIGTSTP);
	/* Continued (fg): give the terminal back and continue the job. */
	tcsetpgrp(j->o.tty, j->leader);
	kill(-j->leader, SIGCONT);
}

/* One process reaped: its end in the trace, and in the job. */
static void note_exit(job_t *j, pid_t w, int status)
{
	session_t *s = j->session;

	if (!session_failed(s) && ingest_note_exit(session_ingest(s), w, status) < 0)
		fprintf(stderr, "%s: out of memory noting how pid %d ended\n", j->o.prog, (int)w);
	if (w == j->leader) {
		j->status = status;
		j->leader_done = 1;
	} else if (j->leader_done) {
		struct job_exit *l = realloc(j->late, (j->nlate + 1) * sizeof(*l));

		if (l) {
			j->late = l;
			l[j->nlate].pid = w;
			l[j->nlate].status = status;
			j->nlate++;
		}
	}
}

/* Reap every child that has ended. Returns whether children remain. */
static int reap(job_t *j)
{
	for (;;) {
		int status;
		pid_t w = waitpid(-1, &status, WNOHANG | (j->o.tty >= 0 ? WUNTRACED : 0));

		if (w == 0)
			return 1;
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return 0; /* ECHILD: none left */
		}
		if (WIFSTOPPED(status)) {
			if (w == j->leader && !j->leader_done)
				follow_stop(j);
			continue;
		}
		note_exit(j, w, status);
	}
}

/* fsdpscope's children now: the processes of the job still alive. */
static size_t list_children(pid_t *pids, size_t max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = 0;
	pid_t self = getpid();

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[300], buf[512], *paren;
		long ppid;
		int fd;
		ssize_t len;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		/* "pid (comm) state ppid ...": comm may hold anything, even ")". */
		paren = strrchr(buf, ')');
		if (!paren || sscanf(paren + 1, " %*c %ld", &ppid) != 1 || ppid != self)
			continue;
		if (n < max)
			pids[n] = (pid_t)strtol(e->d_name, NULL, 10);
		n++;
	}
	closedir(d);
	return n;
}

static void print_pids(const pid_t *pids, size_t n, size_t named)
{
	for (size_t i = 0; i < n && i < named; i++)
		fprintf(stderr, "%s%d", i ? ", " : "", (int)pids[i]);
	if (n > named)
		fprintf(stderr, " and %zu more", n - named);
}

/* CMD has just been reaped; children: whether processes of the job remain. */
static void leader_ended(job_t *j, int children, const struct job_hooks *h)
{
	pid_t pids[JOB_NAMED_PIDS];
	size_t n = children && j->o.announce ? list_children(pids, JOB_NAMED_PIDS) : 0;

	if (h && h->leader_ended)
		h->leader_ended(h->ctx, j->status);
	/* The terminal stays with the job's group while some of it lives (^C
	 * still reaches what CMD left), else comes back. */
	if (j->o.tty >= 0 && kill(-j->leader, 0) < 0)
		tcsetpgrp(j->o.tty, getpgrp());
	if (n && j->o.wait_descendants_s) {
		fprintf(stderr, "%s: %s exited; waiting for the %zu process%s it left running (", j->o.prog,
			j->o.command, n, n == 1 ? "" : "es");
		print_pids(pids, n, JOB_NAMED_PIDS);
		fprintf(stderr, "), at most %d s (--wait-descendants)\n", j->o.wait_descendants_s);
	}
}

int job_wait(job_t *j, pid_t leader, const struct job_hooks *h)
{
	int64_t deadline = 0;
	int said = 0;

	j->leader = leader;

	for (;;) {
		int children;

		session_poll(j->session, JOB_POLL_MS);
		children = reap(j);
		if (h && h->round)
			h->round(h->ctx);
		if (!j->leader_done)
			continue;
		if (!said) {
			said = 1;
			deadline = clock_mono_ms() + (int64_t)j->o.wait_descendants_s * 1000;
			leader_ended(j, children, h);
		}
		if (!children)
			break;
		if (clock_mono_ms() >= deadline || (h && h->stop_waiting && h->stop_waiting(h->ctx))) {
			/* what CMD left goes on in per-process files */
			j->left_running = list_children(j->left_pids, JOB_NAMED_PIDS);
			break;
		}
	}
	if (j->o.tty >= 0)
		tcsetpgrp(j->o.tty, getpgrp());
	return j->status;
}

static int pid_is_late(const job_t *j, uint32_t pid)
{
	for (size_t i = 0; i < j->nlate; i++)
		if ((uint32_t)j->late[i].pid == pid)
			return 1;
	return 0;
}

void job_say_notes(void *ctx, const struct ingest_stats *s)
{
	const job_t *j = ctx;

	if (j->nlate) {
		uint32_t reported = 0;

		for (uint32_t i = 0; i < s->sources; i++)
			reported += s->per_source[i].has_hello && pid_is_late(j, s->per_source[i].pid);
		fprintf(stderr, "%s: %zu process%s outlived %s and %s waited for: ", j->o.prog, j->nlate,
			j->nlate == 1 ? "" : "es", j->o.command, j->nlate == 1 ? "was" : "were");
		for (size_t i = 0; i < j->nlate && i < JOB_NAMED_PIDS; i++) {
			char how[48];

			job_status_words(j->late[i].status, how, sizeof(how));
			fprintf(stderr, "%spid %d (%s)", i ? ", " : "", (int)j->late[i].pid, how);
		}
		if (j->nlate > JOB_NAMED_PIDS)
			fprintf(stderr, " and %zu more", j->nlate - JOB_NAMED_PIDS);
		fprintf(stderr, "; %" PRIu32 " of them reported to the trace\n", reported);
	}
	if (j->left_running) {
		fprintf(stderr, "%s: warning: %zu process%s still running %d s after %s exited (", j->o.prog,
			j->left_running, j->left_running == 1 ? "" : "es", j->o.wait_descendants_s, j->o.command);
		print_pids(j->left_pids, j->left_running, JOB_NAMED_PIDS);
		fprintf(
		    stderr,
		    "): not waited for (see --wait-descendants); what they record from now on goes to %s, which the "
		    "next 'fsdpscope run --out %s' merges\n",
		    run_folder_path(session_run_folder(j->session)), j->o.dir);
	}
}

size_t job_drain(session_t *s, int timeout_ms, const volatile sig_atomic_t *stop)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;

	session_poll(s, 0); /* accept what is waiting in the backlog */
	while (!(stop && *stop) && session_open_connections(s) > 0) {
		int64_t left = deadline - clock_mono_ms();

		if (left <= 0)
			return session_open_connections(s);
		session_poll(s, left < JOB_POLL_MS ? (int)left : JOB_POLL_MS);
	}
	return 0;
}
