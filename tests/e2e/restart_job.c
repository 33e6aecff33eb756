/*
 * restart_job.c - an elastic restart, as torchelastic's agent makes one
 * (docs/patterns.md "Restarts"), around any launcher of ranks (stream_job).
 *
 *   restart_job --dir DIR --kill-rank R --kill-at-step K -- JOB ARGS... --then JOB ARGS...
 *   restart_job --dir DIR --together -- JOB ARGS... --then JOB ARGS...
 *
 * Generation 0 runs the first command (with --log DIR/gen0.log added: rank
 * 0's calls, one a line, "STEP PHASE ..."). Once that log shows step K, a
 * worker dies: the R-th child of the job (its ranks, as stream_job forks
 * them, in creation order) is killed with SIGKILL. The others go on into a
 * collective it never enters and fail there (the NCCL stand-in sees the
 * dead peer, as NCCL reports a remote error or PyTorch's watchdog times
 * out) until, RJ_MONITOR_MS later, the job's supervisor (held stopped
 * meanwhile, as torchelastic's agent sleeps between monitor passes) stops
 * whatever is left (stream_job kills them with SIGKILL; torchelastic's
 * _stop_workers sends SIGTERM, then SIGKILL after its timeout). Then the
 * restart: generation 1, the second command, new
 * processes with new communicators (a fresh ncclGetUniqueId), possibly
 * another world size. Every generation gets TORCHELASTIC_RESTART_COUNT and
 * WORLD_SIZE in its environment, as torchelastic's workers do.
 *
 * --together starts both commands at once instead (no kill, no restart):
 * two jobs recorded into one trace, as when two launchers send to one
 * collector.
 *
 * DIR/restart_truth.json says what happened: per generation its ranks'
 * pids (by rank), the rank and pid killed, how the job ended. Exit status:
 * the last generation's.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RJ_MAX_RANKS 64
#define RJ_MAX_ARGS 64
/* How long the agent takes to see the death (torchrun --monitor-interval:
 * 0.1 s by default in recent releases, 5 s in older ones). */
#define RJ_MONITOR_MS 300

/* One generation: the command and what became of it. */
struct generation {
	char *argv[RJ_MAX_ARGS + 8];
	int argc;
	int nranks; /* its --nranks */
	pid_t job;  /* the launcher of its ranks */
	pid_t ranks[RJ_MAX_RANKS];
	int nseen;  /* ranks whose pid was seen */
	int status; /* the job's wait status */
};

static void rj_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void rj_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "restart_job: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

static void sleep_ms(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&t, NULL);
}

/* The children of pid, in creation order (/proc/PID/task/PID/children
 * lists them as the kernel linked them: oldest first). */
static int children_of(pid_t pid, pid_t *out, int max)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
	FILE *f = fopen(path, "r");
	int n = 0, v;
	if (!f)
		return 0;
	while (n < max && fscanf(f, "%d", &v) == 1)
		out[n++] = v;
	fclose(f);
	return n;
}

static void start(struct generation *g, int index)
{
	char count[16], size[16];
	snprintf(count, sizeof count, "%d", index);
	snprintf(size, sizeof size, "%d", g->nranks);
	fflush(NULL);
	g->job = fork();
	if (g->job < 0)
		rj_die("fork: %s", strerror(errno));
	if (g->job == 0) {
		setenv("TORCHELASTIC_RESTART_COUNT", count, 1);
		setenv("WORLD_SIZE", size, 1);
		execv(g->argv[0], g->argv);
		fprintf(stderr, "restart_job: %s: %s\n", g->argv[0], strerror(errno));
		_exit(127);
	}
}

/* Record the ranks' pids while they run (they live until their job ends). */
static void see_ranks(struct generation *g)
{
	pid_t kids[RJ_MAX_RANKS];
	int n = children_of(g->job, kids, RJ_MAX_RANKS);
	if (n > g->nseen) {
		memcpy(g->ranks, kids, (size_t)n * sizeof *kids);
		g->nseen = n;
	}
}

/* The highest step of the complete lines of rank 0's log, -1 none. */
static int log_step(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int step = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		int s;
		if (strchr(line, '\n') && sscanf(line, "%d", &s) == 1 && s > step)
			step = s;
	}
	fclose(f);
	return step;
}

/* Wait for the job of g, seeing its ranks meanwhile; kill rank kill_rank
 * once log shows kill_step (kill_rank < 0: never). Returns the pid killed,
 * 0 none. */
static pid_t run(struct generation *g, const char *log, int kill_rank, int kill_step)
{
	pid_t killed = 0;
	for (int waited = 0;; waited++) {
		int st;
		pid_t w = waitpid(g->job, &st, WNOHANG);
		if (w == g->job) {
			g->status = st;
			return killed;
		}
		if (w < 0 && errno != EINTR)
			rj_die("waitpid: %s", strerror(errno));
		see_ranks(g);
		if (kill_rank >= 0 && !killed && g->nseen == g->nranks && log_step(log) >= kill_step) {
			/* The job's supervisor would stop the others at once; torchelastic's
			 * agent notices a dead worker only at its next monitor pass
			 * (monitor_interval), meanwhile the others run into a collective
			 * the dead rank never enters, and fail there or wait. */
			killed = g->ranks[kill_rank];
			kill(g->job, SIGSTOP);
			kill(killed, SIGKILL);
			sleep_ms(RJ_MONITOR_MS);
			kill(g->job, SIGCONT);
		}
		if (waited > 120000) { /* two minutes: a job that never got there */
			kill(g->job, SIGKILL);
			rj_die("generation did not reach step %d", kill_step);
		}
		sleep_ms(1);
	}
}

static void write_truth(const char *dir, struct generation *g, int ngen, int kill_rank, pid_t killed)
{
	char path[4096], tmp[4200];
	snprintf(path, sizeof path, "%s/restart_truth.json", dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		rj_die("cannot write %s: %s", tmp, strerror(errno));
	fprintf(f, "{\n  \"schema\": \"restart_job.truth/1\",\n  \"worlds\": [\n");
	for (int k = 0; k < ngen; k++) {
		fprintf(f, "    {\"index\": %d, \"nranks\": %d, \"pids_complete\": %s, \"pids\": [", k, g[k].nranks,
			g[k].nseen == g[k].nranks ? "true" : "false");
		for (int r = 0; r < g[k].nseen; r++)
			fprintf(f, "%s%d", r ? ", " : "", (int)g[k].ranks[r]);
		fprintf(f, "], \"killed_rank\": %d, \"killed_pid\": %d, \"exit\": %d}%s\n",
			k == 0 && killed ? kill_rank : -1, k == 0 ? (int)killed : 0,
			WIFEXITED(g[k].status) ? WEXITSTATUS(g[k].status) : 128 + WTERMSIG(g[k].status),
			k + 1 < ngen ? "," : "");
	}
	fprintf(f, "  ]\n}\n");
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		rj_die("cannot write %s: %s", path, strerror(errno));
}

/* Split "JOB ARGS... --then JOB ARGS..." into generations. */
static int parse_generations(int argc, char **argv, int first, struct generation *g, int max)
{
	int n = 0;
	for (int i = first; i < argc && n < max; n++) {
		struct generation *x = &g[n];
		memset(x, 0, sizeof *x);
		while (i < argc && strcmp(argv[i], "--then") != 0) {
			if (x->argc >= RJ_MAX_ARGS)
				rj_die("too many arguments");
			if (strcmp(argv[i], "--nranks") == 0 && i + 1 < argc)
				x->nranks = atoi(argv[i + 1]);
			x->argv[x->argc++] = argv[i++];
		}
		if (!x->argc || x->nranks <= 0 || x->nranks > RJ_MAX_RANKS)
			rj_die("each generation needs JOB ... --nranks N (1..%d)", RJ_MAX_RANKS);
		i++; /* --then */
	}
	return n;
}

int main(int argc, char **argv)
{
	const char *dir = NULL;
	int kill_rank = -1, kill_step = 3, together = 0, i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--together") == 0) {
			together = 1;
			continue;
		}
		if (i + 1 >= argc)
			rj_die("%s needs a value", argv[i]);
		if (strcmp(argv[i], "--dir") == 0)
			dir = argv[++i];
		else if (strcmp(argv[i], "--kill-rank") == 0)
			kill_rank = atoi(argv[++i]);
		else if (strcmp(argv[i], "--kill-at-step") == 0)
			kill_step = atoi(argv[++i]);
		else
			rj_die("unknown option %s", argv[i]);
	}
	if (!dir || i >= argc)
		rj_die("usage: restart_job --dir DIR [--kill-rank R] [--kill-at-step K] -- JOB ARGS... --then JOB "
		       "ARGS...");
	struct generation g[2];
	int ngen = parse_generations(argc, argv, i + 1, g, 2);
	if (ngen != 2)
		rj_die("two generations expected (JOB ARGS... --then JOB ARGS...)");
	if (kill_rank >= g[0].nranks)
		rj_die("--kill-rank %d: generation 0 has %d ranks", kill_rank, g[0].nranks);
	char log0[4096], log1[4096];
	snprintf(log0, sizeof log0, "%s/gen0.log", dir);
	snprintf(log1, sizeof log1, "%s/gen1.log", dir);
	char *extra0[] = {"--log", log0}, *extra1[] = {"--log", log1};
	memcpy(&g[0].argv[g[0].argc], extra0, sizeof extra0);
	g[0].argc += 2;
	memcpy(&g[1].argv[g[1].argc], extra1, sizeof extra1);
	g[1].argc += 2;
	if (together) {
		start(&g[0], 0);
		start(&g[1], 0);
		for (int k = 0; k < 2; k++)
			while (waitpid(g[k].job, &g[k].status, 0) < 0)
				if (errno != EINTR)
					rj_die("waitpid: %s", strerror(errno));
		write_truth(dir, g, ngen, -1, 0);
		return g[0].status || g[1].status ? 1 : 0;
	}
	start(&g[0], 0);
	pid_t killed = run(&g[0], log0, kill_rank, kill_step);
	/* torchelastic: _restart_workers = _stop_workers (done: the job's
	 * supervisor stopped its ranks), rendezvous, _start_workers */
	start(&g[1], 1);
	run(&g[1], log1, -1, 0);
	write_truth(dir, g, ngen, kill_rank, killed);
	return WIFEXITED(g[1].status) ? WEXITSTATUS(g[1].status) : 128 + WTERMSIG(g[1].status);
}
