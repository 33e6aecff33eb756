/*
 * lifecycle.c - the agent's life in a process (docs/agent.md, "States and
 * life cycle"): the constructor, activation's thread and exit handler,
 * fork, exit() and _exit(). The one file that knows every module: the core
 * reaches the sender and CUPTI through the agent_hooks defined here.
 *
 *   constructor   agent_init; the real _exit and _Exit are looked up (here,
 *                 in a normal process, never later in a vfork child)
 *   activation    on_exit handler registered, CUPTI started, sender thread
 *   fork          the child has no sender thread: it becomes a new source
 *                 (empty ring, no communicators) and activates again on its
 *                 own first NCCL call, or stays quiet
 *   exit, quick_exit, _exit, _Exit
 *                 CUPTI flush, then sender_stop with a bounded wait; the
 *                 state goes OFF so that NCCL calls from later destructors
 *                 are only forwarded
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/cupti.h"
#include "agent/emit.h"
#include "agent/lifecycle.h"
#include "agent/nvtx.h"
#include "agent/sender.h"

#define LIFECYCLE_API __attribute__((visibility("default")))

static _Atomic int lifecycle_exit_registered; /* on_exit handler registered (inherited by fork children) */
static _Atomic int lifecycle_stopped;	      /* the exit flush ran in this process */

typedef void (*lifecycle_exit_fn)(int);
static lifecycle_exit_fn lifecycle_real_exit; /* the next _exit, resolved by the constructor */
static lifecycle_exit_fn lifecycle_real_Exit; /* the next _Exit */

/* ---- hooks: what the core asks for ----------------------------------------- */

static void lifecycle_fork_child(void);
static void lifecycle_on_exit(int status, void *arg);
static void lifecycle_on_quick_exit(void);

static int lifecycle_initialised(void)
{
	return pthread_atfork(NULL, NULL, lifecycle_fork_child) != 0 ? -1 : 0;
}

static int lifecycle_activated(void)
{
	/* An exit handler rather than only a destructor: it runs before the
	 * libraries' destructors (libcudart's among them), while CUPTI still
	 * works; on_exit (glibc) also hands it the exit status for
	 * process_end. The registration is inherited by fork children, hence
	 * once. */
	if (!atomic_exchange(&lifecycle_exit_registered, 1)) {
		if (on_exit(lifecycle_on_exit, NULL) != 0)
			agent_debug("on_exit failed: the destructor will flush");
		/* quick_exit runs only these handlers, then _exit inside libc
		 * (not through the interposed one). */
		if (at_quick_exit(lifecycle_on_quick_exit) != 0)
			agent_debug("at_quick_exit failed: quick_exit will not flush");
	}
	return sender_start();
}

static uint64_t lifecycle_gpu_features(void)
{
	int cupti = cupti_status();

	if (cupti == AGENT_CUPTI_ON)
		return FSS_FEATURE_CUPTI;
	if (cupti == AGENT_CUPTI_BUSY)
		return FSS_FEATURE_CUPTI_BUSY; /* another subscriber holds CUPTI */
	return 0;
}

const struct agent_hooks agent_hooks = {
    .initialised = lifecycle_initialised,
    .activated = lifecycle_activated,
    .gpu_start = cupti_start,
    .gpu_features = lifecycle_gpu_features,
};

/* ---- exit --------------------------------------------------------------------- */

/*
 * What exit() and _exit() do before the process ends: CUPTI's last buffers
 * into the ring, then sender_stop with a bounded wait (AGENT_EXIT_WAIT_MS),
 * state OFF. Only in a process that activated the agent itself
 * (agent_active_here), once; status (0..255) becomes process_end.exit_code,
 * -1 for none.
 */
static void agent_exit_flush(int status)
{
	/* A vfork child shares its parent's memory (ring, sender, flags): it
	 * must not touch any of it; a fork child that never activated has no
	 * sender to wait for. Both read as "not active here". */
	if (!agent_active_here())
		return;
	if (atomic_exchange(&lifecycle_stopped, 1))
		return;
	if (status >= 0)
		atomic_store(&agent_exit_status, status & 0xff); /* what the parent's wait sees */
	if (atomic_load(&agent_cupti_started))
		cupti_flush(); /* CUPTI's last buffers go into the ring before the final drain */
	/* 0: the configuration was never read (an exit before the agent began) */
	sender_stop(agent_config.exit_wait_ms > 0 ? agent_config.exit_wait_ms : AGENT_EXIT_WAIT_MS);
	atomic_store(&agent_state_now, AGENT_OFF);
}

static void lifecycle_on_exit(int status, void *arg)
{
	(void)arg;
	agent_exit_flush(status);
}

/* quick_exit's handlers are not told the status: exit_code stays -1. */
static void lifecycle_on_quick_exit(void)
{
	agent_exit_flush(-1);
}

/* The real _exit / _Exit, or the system call they make when the lookup
 * found nothing (a call that came before the constructor). */
static __attribute__((noreturn)) void lifecycle_leave(lifecycle_exit_fn real, int status)
{
	if (real)
		real(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

/*
 * _exit and _Exit skip the exit handlers: without these wrappers a process
 * that ends with os._exit() loses what its sender had not written yet and
 * its process_end. The flush is agent_exit_flush's: bounded by
 * AGENT_EXIT_WAIT_MS, and nothing at all in a vfork child (after a failed
 * exec it calls _exit with its parent's memory) or a process that did not
 * activate the agent itself.
 */
LIFECYCLE_API void _exit(int status)
{
	agent_exit_flush(status);
	lifecycle_leave(lifecycle_real_exit, status);
}

LIFECYCLE_API void _Exit(int status)
{
	agent_exit_flush(status);
	lifecycle_leave(lifecycle_real_Exit, status);
}

/* ---- fork and reset ------------------------------------------------------------ */

void agent_reset_source(void)
{
	agent_thread_id_forget();
	if (agent_disabled_for_good())
		return;
	sender_after_fork_child();
	atomic_store(&lifecycle_stopped, 0);
	agent_state_reset();
}

/* pthread_atfork child handler: runs in the child's one thread. A process
 * that never recorded anything has nothing to forget but its thread id (a
 * shell forks a lot: keep this cheap). */
static void lifecycle_fork_child(void)
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

__attribute__((constructor)) static void lifecycle_constructor(void)
{
	lifecycle_real_exit = (lifecycle_exit_fn)dlsym(RTLD_NEXT, "_exit");
	lifecycle_real_Exit = (lifecycle_exit_fn)dlsym(RTLD_NEXT, "_Exit");
	agent_init();
}

/* If on_exit could not be used (or the process left through a path that
 * skips exit handlers but not destructors), flush here. */
__attribute__((destructor)) static void lifecycle_destructor(void)
{
	agent_exit_flush(-1);
}
