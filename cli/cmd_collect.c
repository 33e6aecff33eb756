/*
 * cmd_collect.c - fsdpscope collect: a session for ranks that a launcher
 * (torchrun, srun, mpirun, a Kubernetes job) starts itself. The ranks find
 * it through the environment lines it prints; it writes one trace and
 * prints the lint summary when it is told to stop, or when it has been
 * idle for --until-idle seconds after its last connection closed.
 *
 * The session (cli/session.c) is the one `fsdpscope run` uses; what is
 * collect's own: the per-user well-known socket (so that one export line
 * works on every node), the tcp listeners' key, the spool folder the
 * agents fall back to (it stays the same across collector restarts, so a
 * restarted collector merges what its ranks wrote meanwhile), and the
 * stop conditions.
 */
#include "cli/commands.h"
#include "cli/diagnosis.h"
#include "cli/job.h"
#include "cli/options.h"
#include "cli/session.h"
#include "cli/session_options.h"

#include "collector/viewer.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/out_file.h"
#include "common/wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COLLECT_DEFAULT_DIR "fsdpscope-out"
#define COLLECT_DEFAULT_NAME "collect"
#define COLLECT_SOCKET "collect.sock"
#define COLLECT_LOCK "collect.lock"
#define COLLECT_KEY "collect.key"
#define COLLECT_ADDR "collect.addr"
#define COLLECT_SPOOL "spool"
#define COLLECT_LISTEN_MAX 8
#define COLLECT_MAX_IDLE_S (30 * 86400)
/* --key-timeout's range: an agent sends its key as it connects, so even
 * the smallest is ample, and the largest still frees what a peer without
 * the key holds within the hour. */
#define COLLECT_MIN_KEY_TIMEOUT_S 1
#define COLLECT_MAX_KEY_TIMEOUT_S 3600
/* The loop's wait: how late a stop condition is noticed at worst. */
#define COLLECT_POLL_MS 200

static const char collect_help_head[] =
    "NAME\n"
    "    fsdpscope collect - a collector for ranks a launcher starts itself\n\n"
    "SYNOPSIS\n"
    "    fsdpscope collect [--listen ADDR]... [--out DIR] [--name NAME] [--until-idle SEC]\n"
    "                      [--key-timeout SEC] [--metrics [HOST:]PORT]\n"
    "                      [--keep full|summary|last:N] [--json-summary FILE]\n"
    "                      [ANALYSIS OPTIONS]\n\n"
    "DESCRIPTION\n"
    "    For jobs that torchrun, srun, mpirun or a Kubernetes job start: fsdpscope\n"
    "    collect listens for the agents of the job's ranks, writes what they send into\n"
    "    one trace, DIR/NAME.fss (one source per process), and when it stops prints\n"
    "    the lint summary, as 'fsdpscope run' does. The ranks need the agent in\n"
    "    LD_PRELOAD and the collector's address in FSDPSCOPE_SINK: collect prints the\n"
    "    exact lines to paste into the launcher's environment (docs/collect.md has\n"
    "    recipes), and writes the address to DIR/" COLLECT_ADDR ".\n\n"
    "    Without --listen it listens on a per-user well-known unix socket, the same\n"
    "    on every node: $XDG_RUNTIME_DIR/fsdpscope/" COLLECT_SOCKET " when XDG_RUNTIME_DIR\n"
    "    is set and the user's own, else /tmp/fsdpscope-UID/" COLLECT_SOCKET ". Its folder\n"
    "    must be the user's, not a symbolic link, and closed to group and others\n"
    "    (0700); the socket is 0600. A second collector on that socket is refused\n"
    "    (the message names the first one's pid): give it --listen elsewhere.\n\n"
    "    --listen tcp:HOST:PORT needs a key, since TCP carries no peer identity:\n"
    "    collect keeps one in DIR/" COLLECT_KEY " (0600, made on first use) and prints\n"
    "    the FSDPSCOPE_SINK with ,key=PATH; an address that is not loopback is\n"
    "    served with a warning (the key is then the only guard). A tcp peer that has\n"
    "    not sent the whole key within --key-timeout (5 s) is cut; one that connects\n"
    "    while 8 others of its host, or 64 in all, wait for their key is closed at\n"
    "    once; both are counted and said at the end, like the peers with a wrong key.\n\n"
    "    Agents that cannot reach the collector write per-process files into the\n"
    "    spool, DIR/" COLLECT_SPOOL "/ (their FSDPSCOPE_OUT; 0700), and go back to the\n"
    "    socket when it answers again. A collector restarted in the same DIR merges\n"
    "    what the one before it left (its unfinished trace) and the spool's finished\n"
    "    files into its own trace first; the agents that reconnect continue their\n"
    "    processes' sources there.\n\n"
    "    While it runs, the live view (per rank the last step, AllGathers per step,\n"
    "    exposure, drops; the findings so far) is served on a second socket beside\n"
    "    the agents' (protocol " VIEWER_PROTOCOL ", docs/live.md; printed at start),\n"
    "    and with --metrics as Prometheus text; both read the state the end's lint\n"
    "    summary comes from.\n\n"
    "    It stops on SIGINT, SIGTERM or SIGHUP, or with --until-idle SEC once an\n"
    "    agent has connected and no agent's connection has been open for SEC seconds\n"
    "    (an agent: a unix peer of this user, a tcp peer whose key checked out; a\n"
    "    port scanner or a health probe neither starts nor holds the countdown). The\n"
    "    trace is written as it goes (every 100 ms): a collector killed\n"
    "    with SIGKILL leaves a trace whose complete chunks all read back, merged by\n"
    "    the next collector in DIR.\n\n"
    "OPTIONS\n";

static const char collect_help_tail[] =
    "\n"
    "FILES\n"
    "    DIR/NAME.fss          the trace\n"
    "    DIR/" COLLECT_ADDR "        the addresses listened on, one FSDPSCOPE_SINK value a line\n"
    "    DIR/" COLLECT_SPOOL "/             the agents' per-process files (FSDPSCOPE_OUT)\n"
    "    DIR/" COLLECT_KEY "         the tcp listeners' key (0600)\n"
    "    DIR/" RUN_FOLDER_PREFIX "ID/  the session's private folder, as for 'fsdpscope run'\n\n"
    "EXIT STATUS\n"
    "    0 the trace was written (gate on its findings with 'fsdpscope lint TRACE');\n"
    "    1 it could not be written (what was recorded is left for the next collector);\n"
    "    2 collect could not start (bad usage, a collector already there, DIR unusable).\n\n"
    "OVERHEAD\n"
    "    In the ranks, the agent's (bench/results/agent.txt): 57 ns per wrapped NCCL\n"
    "    call while recording, about 24 ns more for its enter record\n"
    "    (bench/results/enter.txt), 5.5 ns dormant; fsdp_ref's step time with and without\n"
    "    the agent within the machine's noise. The collector's ingest and analysis\n"
    "    are one thread in its own process (the viewer endpoint and /metrics have\n"
    "    theirs): it waits in epoll, and the ranks never wait for it (an agent that\n"
    "    cannot send drops records and counts them). An agent keeps the chunks the\n"
    "    collector has not acknowledged, at most 16 MiB (FSDPSCOPE_RETAIN_BYTES).\n"
    "    The collector (bench/results/collect.txt, 2 shared cores): 256 ranks at\n"
    "    2,000 collectives/s each, 0 lost, about 0.7 us of CPU per record (0.35 of a\n"
    "    core), peak RSS 74 MB, 0 lost up to 5,000/s per rank; its memory follows\n"
    "    the ranks, not the job's length (8 ranks: 4.3 MB after 1 M and after 10 M\n"
    "    records).\n\n"
    "EXAMPLES\n"
    "    fsdpscope collect --out runs/exp1 &   # then paste the four export lines it printed:\n"
    "    until [ -s runs/exp1/collect.addr ]; do sleep 0.1; done   # (a script: it listens)\n"
    "    export LD_PRELOAD=$PWD/build/agent/libfsdpscope-agent.so\n"
    "    export NVTX_INJECTION64_PATH=$PWD/build/agent/libfsdpscope-agent.so\n"
    "    export FSDPSCOPE_SINK=$(head -1 runs/exp1/collect.addr)\n"
    "    export FSDPSCOPE_OUT=$PWD/runs/exp1/spool\n"
    "    torchrun --nproc-per-node 8 train.py\n"
    "    kill -TERM %1                          # the trace, then the lint summary\n"
    "    fsdpscope lint runs/exp1/collect.fss\n"
    "    fsdpscope collect --until-idle 30 --out /scratch/$SLURM_JOB_ID/node-$(hostname)\n"
    "    fsdpscope collect --listen tcp:127.0.0.1:7070 --out runs/pod\n";

static volatile sig_atomic_t collect_stop;

static void collect_on_signal(int sig)
{
	(void)sig;
	collect_stop = 1;
}

struct collect_options {
	const char *listen[COLLECT_LISTEN_MAX];
	size_t nlisten;
	int until_idle_s;	      /* -1: not given */
	int key_timeout_s;	      /* 0: the ingest's default */
	struct session_run_options s; /* --out, --name, --json-summary, --metrics, --keep, the analysis */
};

struct collect_state {
	struct collect_options opt;
	char *abs_dir;
	char *agent;
	char *spool;
	char *default_socket; /* unix:... when the default is used */
	int lock_fd;
	char *listen[COLLECT_LISTEN_MAX]; /* what the session listens on */
	size_t nlisten;
	unsigned char key[WIRE_KEY_BYTES]; /* the tcp listeners' */
	char *key_path;			   /* where it is, NULL without a tcp listener */
	char *metrics;			   /* HOST:PORT */
	int metrics_remote;
	session_t *session;
};

enum { OPT_LISTEN = DIAG_OPT_END, OPT_UNTIL_IDLE, OPT_KEY_TIMEOUT };

static int collect_apply(void *ctx, int id, const char *arg, const char *prog)
{
	struct collect_options *o = ctx;
	char *end;
	long v;

	switch (id) {
	case OPT_LISTEN:
		if (o->nlisten == COLLECT_LISTEN_MAX) {
			fprintf(stderr, "%s: --listen: at most %d addresses\n", prog, COLLECT_LISTEN_MAX);
			return -1;
		}
		o->listen[o->nlisten++] = arg;
		return 0;
	case OPT_UNTIL_IDLE:
		v = strtol(arg, &end, 10);
		if (*end || end == arg || v < 0 || v > COLLECT_MAX_IDLE_S) {
			fprintf(stderr, "%s: --until-idle: '%s' is not a number of seconds (0..%d)\n", prog, arg,
				COLLECT_MAX_IDLE_S);
			return -1;
		}
		o->until_idle_s = (int)v;
		return 0;
	case OPT_KEY_TIMEOUT:
		v = strtol(arg, &end, 10);
		if (*end || end == arg || v < COLLECT_MIN_KEY_TIMEOUT_S || v > COLLECT_MAX_KEY_TIMEOUT_S) {
			fprintf(stderr, "%s: --key-timeout: '%s' is not a number of seconds (%d..%d)\n", prog, arg,
				COLLECT_MIN_KEY_TIMEOUT_S, COLLECT_MAX_KEY_TIMEOUT_S);
			return -1;
		}
		o->key_timeout_s = (int)v;
		return 0;
	default: /* --out, --name, --json-summary, --metrics, --keep: as run's */
		return session_run_apply(&o->s, id, arg, prog);
	}
}

static const struct options_entry collect_entries[] = {
    {"listen", 0, "ADDR",
     "listen on ADDR (unix:/path, tcp:127.0.0.1:PORT), repeatable;\n"
     "replaces the default socket",
     OPT_LISTEN},
    {"out", 0, "DIR",
     "directory for the trace, the spool and collect.addr (created;\n"
     "default ./" COLLECT_DEFAULT_DIR ")",
     SESSION_OPT_OUT},
    {"name", 0, "NAME",
     "trace file name, DIR/NAME.fss (default " COLLECT_DEFAULT_NAME "); never\n"
     "replaces a file (NAME-2.fss, ... instead, said)",
     SESSION_OPT_NAME},
    {"until-idle", 0, "SEC",
     "stop SEC seconds after the last agent's connection closed,\n"
     "once one has connected (a tcp peer without the key does\n"
     "not count)",
     OPT_UNTIL_IDLE},
    {"key-timeout", 0, "SEC",
     "cut a tcp peer that has not sent the whole key SEC seconds\n"
     "after it connected (1..3600, default 5)",
     OPT_KEY_TIMEOUT},
    {"json-summary", 0, "FILE",
     "write the final diagnosis to FILE as 'fsdpscope lint --json'\n"
     "prints it (schema fsdpscope.report/2)",
     SESSION_OPT_JSON_SUMMARY},
    {"metrics", 0, "[HOST:]PORT",
     "serve Prometheus /metrics there (docs/metrics.md); a bare\n"
     "PORT is 127.0.0.1:PORT; a host that is not loopback is\n"
     "served with a warning (no authentication); port 0: any",
     SESSION_OPT_METRICS},
    {"keep", 0, "POLICY",
     "what the trace keeps of a long job (docs/keep.md): full\n"
     "(every record; the default, which switches to last:1000\n"
     "before the trace's disk runs short, and says so),\n"
     "last:N (the last N steps in full), summary[:N] (the first\n"
     "16 (N) steps in full, then one summary record per step and\n"
     "rank, and the steps that stand out in full); in the header",
     SESSION_OPT_KEEP},
    {NULL, 0, NULL, "    -h, --help           this text\n", 0},
    {NULL, 0, NULL, NULL, 0},
};

static const struct options_set collect_sets[] = {
    {.entries = collect_entries, .apply = collect_apply},
    OPTIONS_DIAGNOSIS_SET(offsetof(struct collect_options, s.flags)),
};

const struct options_help cmd_collect_help = OPTIONS_HELP(collect_help_head, collect_sets, 25, collect_help_tail);

static int parse_options(int argc, char **argv, struct collect_options *o, int *help)
{
	int first;

	memset(o, 0, sizeof(*o));
	session_run_options_init(&o->s);
	o->s.dir = COLLECT_DEFAULT_DIR;
	o->s.name = COLLECT_DEFAULT_NAME;
	o->until_idle_s = -1;
	first = options_parse(&cmd_collect_help, "collect", argc, argv, OPTIONS_ANYWHERE, o);
	*help = first == OPTIONS_HELP_SHOWN; /* printed */
	if (first < 0)
		return *help ? 0 : -EINVAL;
	if (first < argc) {
		fprintf(stderr, "fsdpscope collect: unexpected argument '%s' (see 'fsdpscope help collect')\n",
			argv[first]);
		return -EINVAL;
	}
	if (session_output_check("fsdpscope collect", o->s.dir, o->s.name))
		return -EINVAL;
	return 0;
}

/*
 * A folder only the user can enter: made 0700 when missing; refused when it
 * is a symbolic link, not a folder, someone else's, or open to group or
 * others (never "fixed": a folder someone else could have prepared is not
 * trusted). Returns 0 or -errno with the reason in why.
 */
static int private_folder(const char *path, const char **why)
{
	struct stat st;

	*why = NULL;
	if (mkdir(path, 0700) == 0) {
		/* mkdir's mode went through the umask, which may take owner bits. */
		if (chmod(path, 0700) < 0)
			return -errno;
	} else if (errno != EEXIST) {
		return -errno;
	}
	if (lstat(path, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		*why = "it is a symbolic link";
	else if (!S_ISDIR(st.st_mode))
		*why = "it is not a folder";
	else if (st.st_uid != geteuid())
		*why = "it belongs to another user";
	else if (st.st_mode & 077)
		*why = "group or others may enter it (it must be 0700)";
	return *why ? -EPERM : 0;
}

/* The per-user well-known socket's folder. */
static char *default_socket_folder(void)
{
	const char *base = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	char *path;

	if (base && base[0] == '/' && stat(base, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	    !(st.st_mode & 077)) {
		if (asprintf(&path, "%s/fsdpscope", base) < 0)
			return NULL;
	} else if (asprintf(&path, "/tmp/fsdpscope-%u", (unsigned)geteuid()) < 0) {
		return NULL;
	}
	return path;
}

/* The pid of the collector answering on unix address `a`, 0 when none
 * answers (a stale socket file is no collector). */
static long live_collector(const char *address)
{
	struct wire_address a;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd;
	long pid = 0;

	if (wire_address_parse(address, &a) || a.family != AF_UNIX)
		return 0;
	if (wire_connect(&a, 1000, &fd))
		return 0;
	pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? (long)cred.pid : -1;
	close(fd);
	return pid;
}

static void refuse_live(const char *address, long pid)
{
	if (pid > 0)
		fprintf(stderr, "fsdpscope collect: a collector (pid %ld) already listens on %s\n", pid, address);
	else
		fprintf(stderr, "fsdpscope collect: a collector already listens on %s\n", address);
	fprintf(stderr,
		"  stop it first (kill -TERM %ld finishes its trace), or give this one another address: "
		"--listen unix:/path/to/socket\n",
		pid > 0 ? pid : 0L);
}

/* Take the default socket: its folder checked, its lock held for the
 * collector's life (the kernel drops it however the collector dies). */
static int take_default_socket(struct collect_state *st)
{
	char *folder = default_socket_folder(), *lock = NULL, pidtext[32];
	const char *why;
	int err, n;

	if (!folder)
		return -ENOMEM;
	err = private_folder(folder, &why);
	if (err) {
		fprintf(stderr, "fsdpscope collect: cannot use %s for the socket: %s\n", folder,
			why ? why : strerror(-err));
		if (why)
			fprintf(stderr, "  remove it, or give an address: --listen unix:/path/in/a/private/folder\n");
		free(folder);
		return err;
	}
	if (asprintf(&lock, "%s/" COLLECT_LOCK, folder) < 0 ||
	    asprintf(&st->default_socket, "unix:%s/" COLLECT_SOCKET, folder) < 0) {
		free(folder);
		free(lock);
		st->default_socket = NULL;
		return -ENOMEM;
	}
	free(folder);
	st->lock_fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (st->lock_fd < 0) {
		err = -errno;
		fprintf(stderr, "fsdpscope collect: %s: %s\n", lock, strerror(errno));
		free(lock);
		return err;
	}
	if (flock(st->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		long pid = 0;

		n = (int)pread(st->lock_fd, pidtext, sizeof(pidtext) - 1, 0);
		if (n > 0) {
			pidtext[n] = '\0';
			pid = strtol(pidtext, NULL, 10);
		}
		refuse_live(st->default_socket, pid);
		free(lock);
		return -EBUSY;
	}
	free(lock);
	n = snprintf(pidtext, sizeof(pidtext), "%ld\n", (long)getpid());
	if (ftruncate(st->lock_fd, 0) < 0 || pwrite(st->lock_fd, pidtext, (size_t)n, 0) != n)
		fprintf(stderr, "fsdpscope collect: warning: cannot note this collector's pid in its lock file\n");
	return 0;
}

static int is_loopback(const struct wire_address *a)
{
	if (a->family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&a->addr;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (a->family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->addr;

		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	}
	return 1;
}

/* The key of the tcp listeners, at `path` (the one in DIR is kept across
 * restarts, since the ranks' FSDPSCOPE_SINK names it; made on first use).
 * One key for every tcp listener: the ingest checks one. */
static int tcp_key(struct collect_state *st, const char *path, int create)
{
	int err;

	if (st->key_path) {
		if (strcmp(st->key_path, path) == 0)
			return 0;
		fprintf(stderr, "fsdpscope collect: the tcp listeners take one key: %s and %s differ\n", st->key_path,
			path);
		return -EINVAL;
	}
	err = wire_key_load(path, st->key);
	if (err == -ENOENT && create)
		err = wire_key_create(path, st->key);
	if (err) {
		fprintf(stderr, "fsdpscope collect: the tcp key %s: %s%s\n", path, fss_strerror(err),
			err == -EPERM ? " (it must be a 0600 file of yours: remove it to have a new one made)" : "");
		return err;
	}
	st->key_path = strdup(path);
	return st->key_path ? 0 : -ENOMEM;
}

/* Every address to listen on, checked: a unix one nobody answers on, a tcp
 * one with its key. */
static int prepare_listeners(struct collect_state *st)
{
	char *key_path = NULL;
	int err = 0;

	if (!st->opt.nlisten) {
		err = take_default_socket(st);
		if (err)
			return err;
		st->listen[st->nlisten] = strdup(st->default_socket);
		if (!st->listen[st->nlisten])
			return -ENOMEM;
		st->nlisten++;
	}
	for (size_t i = 0; i < st->opt.nlisten; i++) {
		const char *text = st->opt.listen[i];
		struct wire_address a;
		char *full;
		long pid;

		err = wire_address_parse(text, &a);
		if (err) {
			fprintf(stderr,
				"fsdpscope collect: --listen %s: not an address (unix:/path, tcp:127.0.0.1:PORT)\n",
				text);
			break;
		}
		if (a.family == AF_UNIX) {
			pid = live_collector(text);
			if (pid) {
				refuse_live(text, pid);
				err = -EBUSY;
				break;
			}
			full = strdup(text);
		} else {
			if (!is_loopback(&a))
				fprintf(stderr,
					"fsdpscope collect: warning: %s is not a loopback address: agents on other "
					"machines can "
					"reach it, and only the key keeps others out\n",
					text);
			if (a.key_path[0]) {
				if ((err = tcp_key(st, a.key_path, 0)))
					break;
				full = strdup(text);
			} else {
				if (!key_path && asprintf(&key_path, "%s/" COLLECT_KEY, st->abs_dir) < 0) {
					key_path = NULL;
					err = -ENOMEM;
					break;
				}
				if ((err = tcp_key(st, key_path, 1)))
					break;
				if (asprintf(&full, "%s,key=%s", text, key_path) < 0)
					full = NULL;
			}
		}
		if (!full) {
			err = -ENOMEM;
			break;
		}
		st->listen[st->nlisten++] = full;
	}
	free(key_path);
	return err;
}

/* DIR/collect.addr, replaced whole (a link planted there is replaced, not
 * written through). */
static int write_addr_file(const struct collect_state *st)
{
	char *path, *text = NULL, why[PATH_MAX + 300];
	size_t len = 0;
	FILE *mem = NULL;
	int err = 0;

	if (asprintf(&path, "%s/" COLLECT_ADDR, st->abs_dir) < 0)
		return -ENOMEM;
	mem = open_memstream(&text, &len);
	if (!mem) {
		free(path);
		return -ENOMEM;
	}
	for (size_t i = 0; i < st->nlisten; i++)
		fprintf(mem, "%s\n", st->listen[i]);
	if (fclose(mem) != 0)
		err = -ENOMEM;
	else
		err = out_file_write_all(path, 0644, text, len, why, sizeof why);
	if (err)
		fprintf(stderr, "fsdpscope collect: warning: cannot write %s\n",
			err == -ENOMEM ? "collect.addr: out of memory" : why);
	free(text);
	free(path);
	return err;
}

static void print_env_lines(const struct collect_state *st)
{
	for (size_t i = 0; i < st->nlisten; i++)
		fprintf(stderr, "fsdpscope collect: listening on %s\n", st->listen[i]);
	fprintf(stderr, "fsdpscope collect: in the environment of the job's ranks (docs/collect.md):\n");
	fprintf(stderr, "    export LD_PRELOAD=%s\n", st->agent);
	fprintf(stderr, "    export NVTX_INJECTION64_PATH=%s\n", st->agent);
	fprintf(stderr, "    export FSDPSCOPE_SINK=%s\n", st->listen[0]);
	fprintf(stderr, "    export FSDPSCOPE_OUT=%s\n", st->spool);
	if (session_viewer_address(st->session))
		fprintf(stderr, "fsdpscope collect: live view (" VIEWER_PROTOCOL ", docs/live.md): %s\n",
			session_viewer_address(st->session));
	if (session_metrics_address(st->session))
		fprintf(stderr, "fsdpscope collect: Prometheus metrics: http://%s/metrics\n",
			session_metrics_address(st->session));
	{
		char kbuf[32];

		fprintf(stderr, "fsdpscope collect: the trace keeps %s%s (--keep, docs/keep.md)\n",
			keep_policy_format(&st->opt.s.keep, kbuf, sizeof(kbuf)),
			st->opt.s.keep.is_default
			    ? " (the default: it switches to last:1000 before the disk runs short)"
			    : "");
	}
	fprintf(stderr, "fsdpscope collect: stop with SIGINT, SIGTERM or SIGHUP%s\n",
		st->opt.until_idle_s >= 0 ? ", or after --until-idle once the ranks are gone" : "");
}

static void collect_state_free(struct collect_state *st)
{
	session_free(st->session);
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	for (size_t i = 0; i < st->nlisten; i++)
		free(st->listen[i]);
	free(st->abs_dir);
	free(st->agent);
	free(st->spool);
	free(st->default_socket);
	free(st->metrics);
	free(st->key_path);
	memset(st->key, 0, sizeof(st->key));
}

static int setup(struct collect_state *st, char **argv)
{
	struct session_options so = {
	    .prog = "fsdpscope collect",
	    .dir = st->opt.s.dir,
	    .name = st->opt.s.name,
	    .argv = argv,
	    .leftovers = SESSION_LEFTOVERS_MERGE,
	    .flags = &st->opt.s.flags,
	    .json_summary = st->opt.s.json_summary,
	    .keep = &st->opt.s.keep,
	};
	const char *why;
	char why_dir[PATH_MAX + 300];
	int err;

	err = session_find_agent("fsdpscope collect", &st->agent);
	if (err)
		return err;
	/* The session makes DIR, its parents too; the spool and the key live
	 * there, so a folder someone else could plant links in is refused. */
	err = out_dir_make(st->opt.s.dir, why_dir, sizeof why_dir);
	if (err) {
		fprintf(stderr, "fsdpscope collect: cannot use --out: %s\n", why_dir);
		return err;
	}
	st->abs_dir = realpath(st->opt.s.dir, NULL);
	if (!st->abs_dir) {
		err = -errno;
		fprintf(stderr, "fsdpscope collect: %s: %s\n", st->opt.s.dir, strerror(errno));
		return err;
	}
	if (asprintf(&st->spool, "%s/" COLLECT_SPOOL, st->abs_dir) < 0) {
		st->spool = NULL;
		return -ENOMEM;
	}
	err = private_folder(st->spool, &why);
	if (err) {
		fprintf(stderr, "fsdpscope collect: cannot use %s as the spool: %s\n", st->spool,
			why ? why : strerror(-err));
		return err;
	}
	if (st->opt.s.metrics) {
		err = session_metrics_option("fsdpscope collect", st->opt.s.metrics, &st->metrics, &st->metrics_remote);
		if (err)
			return err;
	}
	err = prepare_listeners(st);
	if (err)
		return err;
	so.metrics = st->metrics;
	so.metrics_remote = st->metrics_remote;
	so.key = st->key_path ? st->key : NULL;
	so.key_timeout_ms = (uint32_t)st->opt.key_timeout_s * 1000u;
	so.listen = (const char *const *)st->listen;
	so.nlisten = st->nlisten;
	so.spool = st->spool;
	err = session_new(&st->session, &so);
	if (err)
		return err;
	write_addr_file(st);
	print_env_lines(st);
	return 0;
}

/* Until a signal, or --until-idle once an agent has come and gone: only
 * agents count, so that a peer without the key (cut at once, or at the key
 * timeout) neither starts the countdown nor holds it. */
static void collect_loop(struct collect_state *st)
{
	int64_t idle_since = 0;
	int connected = 0;

	while (!collect_stop) {
		size_t open;

		session_poll(st->session, COLLECT_POLL_MS);
		open = session_open_agents(st->session);
		/* An agent that came and went inside one poll was counted. */
		if (open || session_agents_seen(st->session) || session_records_from_agents(st->session))
			connected = 1;
		if (st->opt.until_idle_s < 0 || !connected)
			continue;
		if (open) {
			idle_since = 0;
			continue;
		}
		if (!idle_since)
			idle_since = clock_mono_ms();
		if (clock_mono_ms() - idle_since >= (int64_t)st->opt.until_idle_s * 1000) {
			fprintf(stderr, "fsdpscope collect: no agent connected for %d s (--until-idle): finishing\n",
				st->opt.until_idle_s);
			break;
		}
	}
	if (collect_stop)
		fprintf(stderr, "fsdpscope collect: stopping: finishing the trace\n");
}

int cmd_collect(int argc, char **argv)
{
	struct collect_state st;
	struct session_outcome outcome;
	int help, err;

	memset(&st, 0, sizeof(st));
	st.lock_fd = -1;
	if (parse_options(argc, argv, &st.opt, &help))
		return EXIT_USAGE;
	if (help)
		return EXIT_OK; /* options_parse printed the help */
	/* SIGHUP: the terminal it was started from went away: finish, as for
	 * SIGTERM. SIGPIPE: a rank that goes away while it is being answered
	 * is not our end. */
	job_catch_signals(collect_on_signal, 1);
	if (setup(&st, argv)) {
		collect_state_free(&st);
		return EXIT_USAGE;
	}
	collect_loop(&st);
	err = session_finish(st.session, 0, NULL, NULL, &outcome);
	collect_state_free(&st);
	return err || outcome.write_error ? 1 : EXIT_OK;
}
