/*
 * agent.h - the core of libfsdpscope-agent.so: its state, its configuration,
 * activation and the process hello.
 *
 * The agent is a guest in someone else's training job (docs/agent.md):
 * it never changes an argument or a result of a call it wraps, never aborts,
 * exits or prints to the job's stdout, and turns itself off on any internal
 * failure. Producers (the NCCL wrappers, NVTX callbacks, the CUPTI buffer
 * handler) only build a record on the stack and push it into one lock-free
 * ring; the sender thread drains the ring to the sink.
 *
 * Layers (each file includes only the headers of its own layer and below):
 *   lifecycle.c  the library in a process: constructor, fork, exit, _exit;
 *                the only file that knows every module
 *   producers    nccl_wrap.c (NCCL API), nvtx.c (NVTX injection),
 *                cupti.c / cupti_none.c (GPU activity)
 *   sender       sender.c (the thread), sender_socket.c (socket sink,
 *                dormant mode), sender_file.c (file sink), sender_begin.c
 *                (a new sink's first records), sender_retention.c (kept
 *                until acked), sender_failover.c (one sink for another)
 *   core         agent.c (state, environment, activation, hello), emit.c
 *                (ring, counters), strings.c (interning), comms.c
 *                (communicator table)
 * The core reaches the layers above it only through agent_hooks, which
 * lifecycle.c defines.
 */
#ifndef FSS_AGENT_AGENT_H
#define FSS_AGENT_AGENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/record.h"

/* Environment the agent reads (set by `fsdpscope run`, or by hand). */
#define AGENT_ENV_SINK "FSDPSCOPE_SINK"	      /* collector address (common/wire.h syntax) */
#define AGENT_ENV_OUT "FSDPSCOPE_OUT"	      /* directory for per-process trace files */
#define AGENT_ENV_DORMANT "FSDPSCOPE_DORMANT" /* "1": count only until a collector connects */
#define AGENT_ENV_RING "FSDPSCOPE_RING_SLOTS" /* ring capacity in records (default 65536) */
#define AGENT_ENV_DISABLE "FSDPSCOPE_DISABLE" /* "1": load but do nothing at all */
#define AGENT_ENV_CUPTI "FSDPSCOPE_CUPTI"     /* "0": do not load CUPTI */
#define AGENT_ENV_DEBUG "FSDPSCOPE_DEBUG"     /* "1": say what the agent does on stderr */
/* a socket write blocked this long = sink stalled (default 1000) */
#define AGENT_ENV_SINK_TIMEOUT "FSDPSCOPE_SINK_TIMEOUT_MS"
/* on a file sink, try FSDPSCOPE_SINK again this often (default 1000, 0: never) */
#define AGENT_ENV_RETRY "FSDPSCOPE_RETRY_MS"
/* bytes of sent chunks kept until the collector acknowledges them (default 16 MiB) */
#define AGENT_ENV_RETAIN "FSDPSCOPE_RETAIN_BYTES"
/* the longest a process's exit waits for the sender's last drain (default AGENT_EXIT_WAIT_MS) */
#define AGENT_ENV_EXIT_WAIT "FSDPSCOPE_EXIT_WAIT_MS"

/* Agent states. Producers check one relaxed atomic load. */
enum agent_state {
	AGENT_OFF = 0,	   /* not initialised, disabled, or turned off after a failure */
	AGENT_DORMANT = 1, /* count calls only; no records */
	AGENT_ON = 2,	   /* record everything */
};

extern _Atomic int agent_state_now;

/* agent_recording - true when producers should build and emit records. */
static inline int agent_recording(void)
{
	return atomic_load_explicit(&agent_state_now, memory_order_relaxed) == AGENT_ON;
}

/*
 * agent_init - idempotent, thread-safe process initialisation (called by the
 * constructor, and by every entry point in case a constructor ordering or a
 * dlopen'd load skipped it): reads FSDPSCOPE_DISABLE / DEBUG / DORMANT /
 * RING_SLOTS and asks agent_hooks.initialised to register what the layers
 * above need. Never fails visibly: on failure the state is AGENT_OFF.
 */
void agent_init(void);

/*
 * agent_disable - turn the agent off for good after an internal failure; the
 * reason is said once on stderr only when FSDPSCOPE_DEBUG=1, and recorded in
 * the trace if the sink still works.
 */
void agent_disable(const char *why);

/* agent_disabled_for_good - FSDPSCOPE_DISABLE=1, or agent_disable ran. */
int agent_disabled_for_good(void);

/*
 * agent_activate - the first NCCL call (or comm init) of a process calls
 * this: it reads the rest of the environment, creates the ring and asks
 * agent_hooks.activated to start CUPTI (state ON) and the sender thread,
 * once per process (again in a fork child). Other producers may call it to
 * ask for the same; a process that never does starts no thread and writes
 * no trace. Cheap after the first call (one relaxed load).
 */
void agent_activate(void);
extern _Atomic int agent_activated; /* non-zero once agent_activate ran in this process */

/*
 * agent_active_here - non-zero when the agent was activated by the calling
 * process itself: false in a vfork child (or a child made by a raw clone),
 * which shares or copies the parent's memory without the fork handler
 * having run, and must not touch the parent's ring or sender.
 */
int agent_active_here(void);

/* agent_debug - printf-like, to stderr, only when FSDPSCOPE_DEBUG=1. */
void agent_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* agent_warn - printf-like, one line to stderr whatever FSDPSCOPE_DEBUG
 * says: only for what the user must know (records that will be lost). */
void agent_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * agent_hello_build - the process_hello of this process as it is now (pid,
 * ppid, rank hints, host and command as interned strings, clock pair,
 * features: NCCL and ENTER always, CUPTI's as agent_hooks.gpu_features
 * says, NVTX when built with it). The sender writes it first on every new
 * sink.
 */
void agent_hello_build(struct fss_rec_process_hello *hello);

/*
 * agent_cupti_maybe_start - start GPU activity unless FSDPSCOPE_CUPTI=0: at
 * activation (state ON), on DORMANT -> ON, and after each communicator init
 * (the start is idempotent; a fork child is refused there).
 */
void agent_cupti_maybe_start(void);
extern _Atomic int agent_cupti_started; /* agent_cupti_maybe_start asked for CUPTI in this process */

/* The status the process passed to exit() or _exit() (from an on_exit
 * handler or the _exit wrapper), -1 until then or when it left another way;
 * process_end.exit_code. */
extern _Atomic int agent_exit_status;

/*
 * agent_state_reset - become a new source: drop the ring, strings being
 * defined, communicators and counters, re-read the environment, state back
 * to ON or DORMANT, not activated. Does nothing when the agent is off for
 * good. Only the core: lifecycle.c's agent_reset_source also forgets the
 * sender. No other thread may be using the agent meanwhile.
 */
void agent_state_reset(void);

/* What agent_activate read from the environment (stable once the sender
 * thread runs; the sender reads it without locks). */
struct agent_config {
	char sink[256];		/* FSDPSCOPE_SINK, "" when unset */
	char out_dir[1024];	/* FSDPSCOPE_OUT, "" when unset */
	char runtime_dir[1024]; /* XDG_RUNTIME_DIR when absolute, else "" (the default file directory) */
	char tmp_dir[1024];	/* TMPDIR when absolute, else "" */
	int sink_timeout_ms;	/* FSDPSCOPE_SINK_TIMEOUT_MS */
	int retry_ms;		/* FSDPSCOPE_RETRY_MS, 0: never retry the socket */
	uint64_t retain_bytes;	/* FSDPSCOPE_RETAIN_BYTES */
	int exit_wait_ms;	/* FSDPSCOPE_EXIT_WAIT_MS */
	int dormant;		/* FSDPSCOPE_DORMANT=1 */
	int cupti;		/* FSDPSCOPE_CUPTI is not "0" */
	int rank, local_rank, world_size, slurm_procid, ompi_rank; /* hints for the hello, -1 unset */
};
extern struct agent_config agent_config;

/*
 * agent_hooks - what the core asks of the layers above it, defined by
 * lifecycle.c (a constant table: valid before any constructor ran).
 */
struct agent_hooks {
	int (*initialised)(void);	/* agent_init, once: 0, or -errno to turn the agent off */
	int (*activated)(void);		/* agent_activate, once per process: start the sender; 0 or -errno */
	void (*gpu_start)(void);	/* start GPU activity (cupti_start) */
	uint64_t (*gpu_features)(void); /* FSS_FEATURE_CUPTI or _CUPTI_BUSY as CUPTI is now, else 0 */
};
extern const struct agent_hooks agent_hooks;

#endif
