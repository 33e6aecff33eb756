/*
 * agent.c - the agent's state (agent.h): init, environment, activation on
 * the first NCCL call, the process hello, resetting to a new source, and
 * turning itself off.
 *
 *   init          read FSDPSCOPE_DISABLE / DEBUG / DORMANT / RING_SLOTS;
 *                 state ON or DORMANT. Nothing allocated, no thread, no
 *                 file: `true` or a shell script pays a few getenv.
 *   activation    read the rest of the environment, create the ring, then
 *                 agent_hooks.activated (lifecycle.c) starts CUPTI and the
 *                 sender thread.
 * What happens at fork and exit is lifecycle.c's.
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
#include "agent/lifecycle.h"
#include "agent/comms.h"
#include "agent/emit.h"
#include "agent/strings.h"
#include "common/clock.h"
#include "common/ring.h"

#ifndef FSS_AGENT_VERSION_MAJOR
#define FSS_AGENT_VERSION_MAJOR 0
#endif
#ifndef FSS_AGENT_VERSION_MINOR
#define FSS_AGENT_VERSION_MINOR 1
#endif

_Atomic int agent_state_now = AGENT_OFF;
_Atomic int agent_activated;
struct agent_config agent_config;

static pthread_once_t agent_once = PTHREAD_ONCE_INIT;
static _Atomic int agent_inited;       /* agent_init has run (any outcome) */
static _Atomic int agent_off_for_good; /* FSDPSCOPE_DISABLE, or agent_disable */
static int agent_debug_on;
static int agent_dormant; /* FSDPSCOPE_DORMANT=1 */
_Atomic int agent_cupti_started;
static _Atomic pid_t agent_pid; /* the process that activated */

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
	env_copy("XDG_RUNTIME_DIR", c->runtime_dir, sizeof(c->runtime_dir));
	if (c->runtime_dir[0] != '/')
		c->runtime_dir[0] = '\0';
	env_copy("TMPDIR", c->tmp_dir, sizeof(c->tmp_dir));
	if (c->tmp_dir[0] != '/')
		c->tmp_dir[0] = '\0';
	c->sink_timeout_ms = (int)env_long(AGENT_ENV_SINK_TIMEOUT, 1000, 10, 600000);
	c->retry_ms = (int)env_long(AGENT_ENV_RETRY, 1000, 0, 3600000);
	c->retain_bytes = (uint64_t)env_long(AGENT_ENV_RETAIN, 16l << 20, 0, 1l << 30);
	c->exit_wait_ms = (int)env_long(AGENT_ENV_EXIT_WAIT, AGENT_EXIT_WAIT_MS, 1, 600000);
	c->dormant = agent_dormant;
	c->cupti = !(cupti && strcmp(cupti, "0") == 0);
	c->rank = (int)env_long("RANK", FSS_RANK_UNKNOWN, 0, INT32_MAX);
	c->local_rank = (int)env_long("LOCAL_RANK", FSS_RANK_UNKNOWN, 0, INT32_MAX);
	c->world_size = (int)env_long("WORLD_SIZE", FSS_RANK_UNKNOWN, 0, INT32_MAX);
	c->slurm_procid = (int)env_long("SLURM_PROCID", FSS_RANK_UNKNOWN, 0, INT32_MAX);
	c->ompi_rank = (int)env_long("OMPI_COMM_WORLD_RANK", FSS_RANK_UNKNOWN, 0, INT32_MAX);
}

/* ---- messages ------------------------------------------------------------ */

static void agent_say(const char *fmt, va_list ap)
{
	char buf[512];
	int n, saved = errno;

	n = snprintf(buf, sizeof(buf), "fsdpscope-agent[%d]: ", (int)getpid());
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	/* One write(2) to stderr: never the job's stdout, never stdio's locks. */
	ssize_t w = write(2, buf, (size_t)n);
	(void)w;
	errno = saved;
}

void agent_debug(const char *fmt, ...)
{
	va_list ap;

	if (!agent_debug_on)
		return;
	va_start(ap, fmt);
	agent_say(fmt, ap);
	va_end(ap);
}

void agent_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	agent_say(fmt, ap);
	va_end(ap);
}

/* ---- state ---------------------------------------------------------------- */

static void agent_init_once(void)
{
	agent_read_early_env();
	if (env_flag(AGENT_ENV_DISABLE)) {
		atomic_store(&agent_off_for_good, 1);
		agent_debug("FSDPSCOPE_DISABLE=1: loaded, doing nothing");
		atomic_store(&agent_inited, 1);
		return;
	}
	if (agent_hooks.initialised() != 0) {
		atomic_store(&agent_inited, 1);
		agent_disable("cannot register the fork handler: not safe across fork");
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

int agent_disabled_for_good(void)
{
	return atomic_load(&agent_off_for_good);
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
	agent_hooks.gpu_start();
}

_Atomic int agent_exit_status = -1;

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
	atomic_store(&agent_pid, getpid());
	agent_read_config();
	agent_debug("active: sink %s, out %s, %s", agent_config.sink[0] ? agent_config.sink : "(none)",
		    agent_config.out_dir[0] ? agent_config.out_dir : "(default)",
		    agent_config.dormant ? "dormant" : "recording");
	/* The ring exists before the sender does: the sender never allocates
	 * (a fork while it did would leave the allocation to a child that has
	 * no thread to finish it). */
	if (!agent_ring())
		return; /* off: agent_ring said why */
	if (atomic_load(&agent_state_now) == AGENT_ON)
		agent_cupti_maybe_start();
	if (agent_hooks.activated() < 0)
		agent_disable("cannot start the sender thread");
}

int agent_active_here(void)
{
	/* getpid is a system call (glibc caches no pid): a vfork child sees
	 * its own pid while agent_pid is its parent's. */
	return atomic_load(&agent_activated) && atomic_load(&agent_pid) == getpid();
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
	/* Every collective the wrappers record has its enter record; the
	 * synchronizes come with CUPTI's callbacks (cupti.c), when it is on. */
	h->features = FSS_FEATURE_NCCL | FSS_FEATURE_ENTER;
	h->features |= agent_hooks.gpu_features();
#ifdef FSS_AGENT_HAVE_NVTX
	h->features |= FSS_FEATURE_NVTX;
#endif
}

/* ---- a new source ------------------------------------------------------------ */

void agent_state_reset(void)
{
	if (atomic_load(&agent_off_for_good))
		return;
	agent_ring_replace();
	agent_strings_after_fork();
	agent_comms_reset();
	atomic_store(&agent_counters.collectives, 0);
	atomic_store(&agent_counters.sink_dropped, 0);
	atomic_store(&agent_counters.cupti_dropped, 0);
	atomic_store(&agent_counters.nvtx_dropped, 0);
	atomic_store(&agent_counters.unconfirmed, 0);
	agent_read_early_env();
	atomic_store(&agent_activated, 0);
	atomic_store(&agent_state_now, agent_dormant ? AGENT_DORMANT : AGENT_ON);
}
