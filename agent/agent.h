/*
 * agent.h - the inside of libfsdpscope-agent.so, shared by its files.
 *
 * The agent is a guest in someone else's training job (docs/agent.md):
 * it never changes an argument or a result of a call it wraps, never aborts,
 * exits or prints to the job's stdout, and turns itself off on any internal
 * failure. Producers (the NCCL wrappers, NVTX callbacks, the CUPTI buffer
 * handler) only build a record on the stack and push it into one lock-free
 * ring; the sender thread (sender.c) drains the ring to the sink.
 *
 * Files:
 *   agent.c      process state: init (constructor), env, hello, fork, exit, self-disable
 *   emit.c       agent_emit() and the per-process counters (hot path)
 *   strings.c    string interning (ids for host names, NVTX names, kernel names)
 *   sender.c     the sender thread: socket sink, file sink, dormant mode, reconnect
 *   nccl_wrap.c  the interposed NCCL API
 *   cupti.c      CUPTI activity (dlopen'd), buffer handler, external correlation
 *   nvtx.c       NVTX injection (InitializeInjectionNvtx2)
 */
#ifndef FSS_AGENT_AGENT_H
#define FSS_AGENT_AGENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/record.h"

/* Environment the agent reads (set by `fsdpscope run`, or by hand). */
#define AGENT_ENV_SINK "FSDPSCOPE_SINK"       /* collector address (common/wire.h syntax) */
#define AGENT_ENV_OUT "FSDPSCOPE_OUT"         /* directory for per-rank trace files when no collector answers */
#define AGENT_ENV_DORMANT "FSDPSCOPE_DORMANT" /* "1": count only until a collector connects */
#define AGENT_ENV_RING "FSDPSCOPE_RING_SLOTS" /* ring capacity in records (default 65536) */
#define AGENT_ENV_DISABLE "FSDPSCOPE_DISABLE" /* "1": load but do nothing at all */
#define AGENT_ENV_CUPTI "FSDPSCOPE_CUPTI"     /* "0": do not load CUPTI */
#define AGENT_ENV_DEBUG "FSDPSCOPE_DEBUG"     /* "1": say what the agent does on stderr */

/* Agent states. Producers check one relaxed atomic load. */
enum agent_state {
	AGENT_OFF = 0,      /* not initialised, disabled, or turned off after a failure */
	AGENT_DORMANT = 1,  /* count calls only; no records */
	AGENT_ON = 2,       /* record everything */
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
 * dlopen'd load skipped it). Never fails visibly: on failure the state is
 * AGENT_OFF.
 */
void agent_init(void);

/*
 * agent_disable - turn the agent off for good after an internal failure; the
 * reason is said once on stderr only when FSDPSCOPE_DEBUG=1, and recorded in
 * the trace if the sink still works.
 */
void agent_disable(const char *why);

/*
 * agent_emit - hot path: push one record (head filled by the caller with
 * record_init(); source is always 0 inside the agent: the collector
 * renumbers) into the ring. No lock, no allocation, no syscall. A full ring
 * drops the record and counts it (ring_drops). Safe from any thread.
 */
void agent_emit(const void *record);

/* agent_thread_id - the caller's kernel thread id, cached per thread. */
uint32_t agent_thread_id(void);

/*
 * agent_intern - the string id of s[0..len) (len < 0: strlen), defining it
 * with FSS_REC_STRING records the first time. Lock-free; returns
 * FSS_STRING_NONE when the table is full. The agent keeps every string it
 * defined so that a new collector connection can be sent all of them again.
 */
uint32_t agent_intern(const char *s, long len);

/* agent_strings_replay - emit the string records of every string defined
 * so far (sender.c calls this first on each new connection). */
void agent_strings_replay(void (*emit)(void *ctx, const void *record), void *ctx);

/* The status the process passed to exit() (from an on_exit handler), -1
 * until then or when it left another way; process_end.exit_code. */
extern _Atomic int agent_exit_status;

/* Counters the sender reports in FSS_REC_DROPS records. */
struct agent_counters {
	_Atomic uint64_t collectives;   /* collective calls seen (all states but OFF) */
	_Atomic uint64_t sink_dropped;  /* records popped but not written (sink failed) */
	_Atomic uint64_t cupti_dropped; /* CUPTI's own dropped-record count */
};
extern struct agent_counters agent_counters;

/* Sender thread (sender.c). */
int sender_start(void);     /* start the thread if not running; 0 or -errno */
void sender_flush(int timeout_ms); /* drain the ring to the sink, bounded wait */
void sender_stop(int timeout_ms);  /* final flush, drops and process_end; bounded */
void sender_after_fork_child(void);/* the child has no sender thread: reset */

/* CUPTI (cupti.c): all no-ops when CUPTI is absent or refused. */
void cupti_start(void);                    /* dlopen, subscribe, enable activity */
void cupti_flush(void);                    /* cuptiActivityFlushAll(FORCED) */
void cupti_push_correlation(uint64_t seq); /* around a wrapped launch */
void cupti_pop_correlation(void);
/*
 * cupti_start() (added by the CUPTI helper): idempotent and cheap once
 * decided. It loads CUPTI only when libcuda.so.1 is already in the process
 * and otherwise stays AGENT_CUPTI_IDLE, so the agent costs nothing in a
 * process without CUDA: call it at init AND at each communicator init
 * (CUDA is loaded by then; late enable works in-process).
 *
 * cupti_push_correlation / cupti_pop_correlation (NCCL wrappers): push the
 * collective's seq right before calling the real function and pop right
 * after it returns, on the same thread, for every collective called outside
 * a group. Inside a group nothing is launched until the outermost
 * ncclGroupEnd: push the seq of the group's FIRST collective around that
 * real ncclGroupEnd instead (the kernels of the group's other collectives
 * are then tied to that first seq; the collector spreads them over the
 * group via group_id). A pop without its push is ignored.
 *
 * cupti_flush (exit / on demand): forced flush; intervals still waiting
 * for their correlation are emitted. Periodic delivery needs no caller:
 * CUPTI's own thread flushes completed buffers every second.
 */
enum agent_cupti_status {
	AGENT_CUPTI_IDLE = 0,     /* not started yet, or libcuda not loaded yet */
	AGENT_CUPTI_ON = 1,       /* activity enabled: GPU intervals flow */
	AGENT_CUPTI_DISABLED = 2, /* FSDPSCOPE_CUPTI=0 */
	AGENT_CUPTI_ABSENT = 3,   /* no usable libcupti */
	AGENT_CUPTI_FAILED = 4,   /* CUPTI refused (no device, old driver, error), or a forked child */
	AGENT_CUPTI_BUSY = 5,     /* another CUPTI subscriber (nsys, PyTorch profiler) holds CUPTI */
};
int cupti_status(void);            /* enum agent_cupti_status, for the hello's features */
void cupti_after_fork_child(void); /* the child records no GPU activity */

/* cupti_handle_buffer - the completed-buffer handler the agent registers
 * with CUPTI; tests feed it buffers of real CUpti_Activity* structs. */
void cupti_handle_buffer(uint8_t *buffer, size_t valid_size);

/* NVTX (nvtx.c): the exported InitializeInjectionNvtx2 is the entry point
 * (NVTX_INJECTION64_PATH). Ranges that could not be recorded (push/pop
 * deeper than 64 on a thread, start/end table full): */
uint64_t nvtx_dropped(void);
void nvtx_after_fork_child(void); /* re-initialise nvtx.c's registration lock */

/*
 * agent_in_nccl_call - non-zero while the calling thread is inside one of
 * the agent's interposed NCCL calls (nccl_wrap.c), which records that call
 * itself: nvtx.c then does not turn NCCL's own range of it into a second
 * collective record. Hot path: one thread-local load.
 */
int agent_in_nccl_call(void);

/* ---- Additions (issue 4, agent core). ------------------------------------ */

#include "common/ring.h"

/* More environment (docs/agent.md). */
#define AGENT_ENV_SINK_TIMEOUT "FSDPSCOPE_SINK_TIMEOUT_MS" /* a socket write blocked this long = sink stalled (default 1000) */

/*
 * agent_activate - the first NCCL call (or comm init) of a process calls
 * this: it starts CUPTI (state ON, FSDPSCOPE_CUPTI != 0) and the sender
 * thread, once per process (again in a fork child). Other producers may call
 * it to ask for the same; a process that never does starts no thread and
 * writes no trace. Cheap after the first call (one relaxed load).
 */
void agent_activate(void);
extern _Atomic int agent_activated; /* non-zero once agent_activate ran in this process */

/*
 * agent_ring - the ring producers push into (created on first use, so a
 * process that records nothing never allocates it). NULL when it could not
 * be created (the agent is then off). The sender is its only consumer.
 */
ring_t *agent_ring(void);

/* agent_debug - printf-like, to stderr, only when FSDPSCOPE_DEBUG=1. */
void agent_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * agent_hello_build - the process_hello of this process as it is now (pid,
 * ppid, rank hints, host and command as interned strings, clock pair,
 * features). The sender writes it first on every new sink.
 */
void agent_hello_build(struct fss_rec_process_hello *hello);

/* agent_strings_after_fork - in a fork child (one thread): forget entries
 * another thread of the parent was still defining. */
void agent_strings_after_fork(void);

/*
 * agent_comms_replay - emit the fss_rec_comm (init / split) of every live
 * communicator, so that a new sink knows the handles later records name.
 * agent_comms_reset forgets them all (fork child: the parent's
 * communicators are not usable there).
 */
void agent_comms_replay(void (*emit)(void *ctx, const void *record), void *ctx);
void agent_comms_reset(void);

/*
 * agent_reset_source - become a new source: drop the ring and counters,
 * forget the sender, re-read the environment, state back to ON or DORMANT.
 * Called in a fork child (by the atfork handler) and by tests after
 * sender_stop(); no other thread may be using the agent meanwhile.
 */
void agent_reset_source(void);

/* sender_running - non-zero while the sender thread of this process runs. */
int sender_running(void);

/* What agent_activate read from the environment (stable once the sender
 * thread runs; the sender reads it without locks). */
struct agent_config {
	char sink[256];      /* FSDPSCOPE_SINK, "" when unset */
	char out_dir[1024];  /* FSDPSCOPE_OUT, "" when unset */
	int sink_timeout_ms; /* FSDPSCOPE_SINK_TIMEOUT_MS */
	int dormant;         /* FSDPSCOPE_DORMANT=1 */
	int cupti;           /* FSDPSCOPE_CUPTI is not "0" */
	int rank, local_rank, world_size, slurm_procid, ompi_rank; /* hints for the hello, -1 unset */
};
extern struct agent_config agent_config;

/* agent_cupti_maybe_start - cupti_start() unless FSDPSCOPE_CUPTI=0: at
 * activation (state ON), on DORMANT -> ON, and after each communicator
 * init (cupti_start is idempotent; a fork child is refused there). */
void agent_cupti_maybe_start(void);

/* emit.c internals for agent.c. */
extern size_t agent_ring_slots;      /* capacity asked for (FSDPSCOPE_RING_SLOTS) */
int agent_ring_exists(void);         /* the ring was created */
void agent_ring_replace(void);       /* free the ring; the next record makes a new one */
void agent_thread_id_forget(void);   /* the calling thread's cached id is stale (fork) */

#endif
