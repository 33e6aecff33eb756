/*
 * agent.c - process state of libfsdpscope-agent.so: init (constructor),
 * environment, activation on the first NCCL call, the process hello, fork,
 * exit, and turning itself off.
 *
 * Life of a process with the agent preloaded (docs/agent.md):
 *   constructor   agent_init: read FSDPSCOPE_DISABLE / DEBUG / DORMANT /
 *                 RING_SLOTS; state ON or DORMANT. Nothing allocated, no
 *                 thread, no file: `true` or a shell script pays a few getenv.
 *   first NCCL    agent_activate: read the rest of the environment, start
 *                 CUPTI (state ON) and the sender thread, register the exit
 *                 flush.
 *   fork          the child has no sender thread: it becomes a new source
 *                 (empty ring, no communicators) and activates again on its
 *                 own first NCCL call, or stays quiet.
 *   exit          CUPTI flush, then sender_stop with a bounded wait; the
 *                 state goes OFF so that NCCL calls from later destructors
 *                 are only forwarded.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/clock.h"

#ifndef FSS_AGENT_VERSION_MAJOR
#define FSS_AGENT_VERSION_MAJOR 0
#endif
#ifndef FSS_AGENT_VERSION_MINOR
#define FSS_AGENT_VERSION_MINOR 1
#endif

/* How long the exit path waits for the sender to write what is left. */
#define AGENT_EXIT_WAIT_MS 2000

_Atomic int agent_state_now = AGENT_OFF;
_Atomic int agent_activated;
struct agent_config agent_config;

static pthread_once_t agent_once = PTHREAD_ONCE_INIT;
static _Atomic int agent_inited;       /* agent_init has run (any outcome) */
static _Atomic int agent_off_for_good; /* FSDPSCOPE_DISABLE, or agent_disable */
static int agent_debug_on;
static int agent_dormant;		/* FSDPSCOPE_DORMANT=1 */
static _Atomic int agent_cupti_started; /* cupti_start was called in this process */
static _Atomic int agent_exit_registered;
static _Atomic int agent_stopped; /* the exit flush ran */
static pid_t agent_pid;		  /* the process that activated */

/* ---- environment -------------------------------------------------------- */

static int env_flag(const char *name)
{
	const char *v = getenv(name);

	return v && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0 || strcmp(v, "on") == 0);
}

/* An integer variable, or fallback when unset or not a number in range. */
static long env_long(const char *name, long fallback, long min, long max)
{
	const char *v = getenv(name);
	char *end;
	long n;

	if (!v || !*v)
		return fallback;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || *end || n < min || n > max) {
		agent_debug("%s=%s is not a number in [%ld, %ld]: using %ld", name, v, min, max, fallback);
		return fallback;
	}
	return n;
}

static void env_copy(const char *name, char *out, size_t cap)
{
	const char *v = getenv(name);

	out[0] = '\0';
	if (!v)
		return;
	if (strlen(v) >= cap) {
		agent_debug("%s is too long (%zu bytes): ignored", name, strlen(v));
		return;
	}
	memcpy(out, v, strlen(v) + 1);
}

/* The variables the constructor needs; the rest is read at activation, in
 * the thread of the first NCCL call, so that a fork child that set RANK
 * before calling NCCL is seen as it is. */
static void agent_read_early_env(void)
{
	agent_debug_on = env_flag(AGENT_ENV_DEBUG);
	agent_dormant = env_flag(AGENT_ENV_DORMANT);
	agent_ring_slots = (size_t)env_long(AGENT_ENV_RING, 65536, 2, (long)FSS_RING_MAX_SLOTS);
}

static void agent_read_config(void)
{
	struct agent_config *c = &agent_config;
	const char *cupti = getenv(AGENT_ENV_CUPTI);

	env_copy(AGENT_ENV_SINK, c->sink, sizeof(c->sink));
	env_copy(AGENT_ENV_OUT, c->out_dir, sizeof(c->out_dir));
	c->sink_timeout_ms = (int)env_long(AGENT_ENV_SINK_TIMEOUT, 1000, 10, 600000);
	c->dormant = agent_dormant;
	c->cupti = !(cupti && strcmp(cupti, "0") == 0);
	c->rank = (int)env_long("RANK", FSS_RANK_UNKNOWN, 0, INT32_MAX);
	c->local_rank = (int)env_long("LOCAL_RANK", FSS_RANK_UNKNOWN, 0, INT32_MAX);
	c->world_size = (int)env_long("WORLD_SIZE", FSS_RANK_UNKNOWN, 0, INT32_MAX);
	c->slurm_procid = (int)env_long("SLURM_PROCID", FSS_RANK_UNKNOWN, 0, INT32_MAX);
	c->ompi_rank = (int)env_long("OMPI_COMM_WORLD_RANK", FSS_RANK_UNKNOWN, 0, INT32_MAX);
}

/* ---- messages ------------------------------------------------------------ */

void agent_debug(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n, saved = errno;

	if (!agent_debug_on)
		return;
	n = snprintf(buf, sizeof(buf), "fsdpscope-agent[%d]: ", (int)getpid());
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	/* One write(2) to stderr: never the job's stdout, never stdio's locks. */
	ssize_t w = write(2, buf, (size_t)n);
	(void)w;
	errno = saved;
}

/* ---- state ---------------------------------------------------------------- */

static void agent_fork_child(void);

static void agent_init_once(void)
{
	agent_read_early_env();
	if (env_flag(AGENT_ENV_DISABLE)) {
		atomic_store(&agent_off_for_good, 1);
		agent_debug("FSDPSCOPE_DISABLE=1: loaded, doing nothing");
		atomic_store(&agent_inited, 1);
		return;
	}
	if (pthread_atfork(NULL, NULL, agent_fork_child) != 0) {
		atomic_store(&agent_inited, 1);
		agent_disable("pthread_atfork failed: not safe across fork");
		return;
	}
	atomic_store(&agent_state_now, agent_dormant ? AGENT_DORMANT : AGENT_ON);
	atomic_store(&agent_inited, 1);
}

void agent_init(void)
{
	if (!atomic_load_explicit(&agent_inited, memory_order_acquire))
		pthread_once(&agent_once, agent_init_once);
}

void agent_disable(const char *why)
{
	atomic_store(&agent_off_for_good, 1);
	if (atomic_exchange(&agent_state_now, AGENT_OFF) != AGENT_OFF)
		agent_debug("turned off: %s (the job goes on; calls are only forwarded)", why);
}

/* cupti_start is idempotent and cheap once decided, and waits for
 * libcuda to be loaded before it does anything: it is called at activation
 * and again after every communicator init (CUDA is up by then). */
void agent_cupti_maybe_start(void)
{
	if (!agent_config.cupti)
		return;
	atomic_store(&agent_cupti_started, 1);
	cupti_start();
}

_Atomic int agent_exit_status = -1;

static void agent_at_exit(void)
{
	if (!atomic_load(&agent_activated) || agent_pid != getpid())
		return;
	if (atomic_exchange(&agent_stopped, 1))
		return;
	if (atomic_load(&agent_cupti_started))
		cupti_flush(); /* CUPTI's last buffers go into the ring before the final drain */
	sender_stop(AGENT_EXIT_WAIT_MS);
	atomic_store(&agent_state_now, AGENT_OFF);
}

static void agent_on_exit(int status, void *arg)
{
	(void)arg;
	atomic_store(&agent_exit_status, status & 0xff); /* what the parent's wait sees */
	agent_at_exit();
}

void agent_activate(void)
{
	int expected = 0;

	if (atomic_load_explicit(&agent_activated, memory_order_relaxed))
		return;
	agent_init();
	if (atomic_load(&agent_state_now) == AGENT_OFF)
		return;
	if (!atomic_compare_exchange_strong(&agent_activated, &expected, 1))
		return; /* another thread is doing it */
	agent_pid = getpid();
	agent_read_config();
	agent_debug("active: sink %s, out %s, %s", agent_config.sink[0] ? agent_config.sink : "(none)",
		    agent_config.out_dir[0] ? agent_config.out_dir : "(default)",
		    agent_config.dormant ? "dormant" : "recording");
	/* An exit handler rather than only a destructor: it runs before the
	 * libraries' destructors (libcudart's among them), while CUPTI still
	 * works; on_exit (glibc) also hands it the exit status for
	 * process_end. The registration is inherited by fork children, hence
	 * once. */
	if (!atomic_exchange(&agent_exit_registered, 1) && on_exit(agent_on_exit, NULL) != 0)
		agent_debug("on_exit failed: the destructor will flush");
	/* The ring exists before the sender does: the sender never allocates
	 * (a fork while it did would leave the allocation to a child that has
	 * no thread to finish it). */
	if (!agent_ring())
		return; /* off: agent_ring said why */
	if (atomic_load(&agent_state_now) == AGENT_ON)
		agent_cupti_maybe_start();
	if (sender_start() < 0)
		agent_disable("cannot start the sender thread");
}

/* ---- hello ------------------------------------------------------------------ */

/* argv[0] as the kernel has it: the first string of /proc/self/cmdline. */
static uint32_t agent_intern_command(void)
{
	char buf[512];
	ssize_t n = -1;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		do
			n = read(fd, buf, sizeof(buf) - 1);
		while (n < 0 && errno == EINTR);
		close(fd);
	}
	if (n <= 0)
		return FSS_STRING_NONE;
	buf[n] = '\0';
	return agent_intern(buf, -1);
}

void agent_hello_build(struct fss_rec_process_hello *h)
{
	char host[256];

	memset(h, 0, sizeof(*h));
	h->head.type = FSS_REC_PROCESS_HELLO;
	h->head.size = sizeof(*h);
	h->pid = (uint32_t)getpid();
	h->ppid = (uint32_t)getppid();
	h->rank = agent_config.rank;
	h->local_rank = agent_config.local_rank;
	h->world_size = agent_config.world_size;
	h->slurm_procid = agent_config.slurm_procid;
	h->ompi_rank = agent_config.ompi_rank;
	if (gethostname(host, sizeof(host)) == 0) {
		host[sizeof(host) - 1] = '\0';
		h->host = agent_intern(host, -1);
	}
	h->command = agent_intern_command();
	h->path = FSS_PATH_INTERPOSE;
	h->agent_version = (uint16_t)(FSS_AGENT_VERSION_MAJOR << 8 | FSS_AGENT_VERSION_MINOR);
	clock_anchor(&h->mono_ns, &h->realtime_ns);
	h->features = FSS_FEATURE_NCCL;
	int cupti = cupti_status();
	if (cupti == AGENT_CUPTI_ON)
		h->features |= FSS_FEATURE_CUPTI;
	else if (cupti == AGENT_CUPTI_BUSY)
		h->features |= FSS_FEATURE_CUPTI_BUSY; /* another subscriber holds CUPTI */
#ifdef FSS_AGENT_HAVE_NVTX
	h->features |= FSS_FEATURE_NVTX;
#endif
}

/* ---- fork and reset ---------------------------------------------------------- */

void agent_reset_source(void)
{
	agent_thread_id_forget();
	if (atomic_load(&agent_off_for_good))
		return;
	sender_after_fork_child();
	agent_ring_replace();
	agent_strings_after_fork();
	agent_comms_reset();
	atomic_store(&agent_counters.collectives, 0);
	atomic_store(&agent_counters.sink_dropped, 0);
	atomic_store(&agent_counters.cupti_dropped, 0);
	agent_read_early_env();
	atomic_store(&agent_stopped, 0);
	atomic_store(&agent_activated, 0);
	atomic_store(&agent_state_now, agent_dormant ? AGENT_DORMANT : AGENT_ON);
}

/* pthread_atfork child handler: runs in the child's one thread. A process
 * that never recorded anything has nothing to forget but its thread id (a
 * shell forks a lot: keep this cheap). */
static void agent_fork_child(void)
{
#ifdef FSS_AGENT_HAVE_NVTX
	/* Another thread of the parent may have held nvtx.c's registration lock
	 * or owned NVTX stacks at the fork: the child must not inherit them. */
	nvtx_after_fork_child();
#endif
	if (!atomic_load(&agent_activated) && !agent_ring_exists()) {
		agent_thread_id_forget();
		return;
	}
	/* CUDA (hence CUPTI) does not work in a fork child of a CUDA process. */
	if (atomic_load(&agent_cupti_started))
		cupti_after_fork_child();
	agent_reset_source();
}

/* ---- constructor and destructor ------------------------------------------------ */

__attribute__((constructor)) static void agent_constructor(void)
{
	agent_init();
}

/* If atexit could not be used (or the process left through a path that
 * skips atexit handlers but not destructors), flush here. */
__attribute__((destructor)) static void agent_destructor(void)
{
	agent_at_exit();
}
