/*
 * attach.h - `fsdpscope attach`: NCCL calls of running processes seen
 * through eBPF uprobes (docs/attach.md).
 *
 * Shared by the BPF program (attach.bpf.c) and user space (attach.c), as
 * libbpf-tools does: the event the probes put in the ring buffer and the
 * numbers that name the probed functions. The user-space API below it is
 * hidden from the BPF compile.
 *
 * One entry program and one return program serve every function: the
 * probe's BPF cookie is its enum attach_fn. The kernel filters by process
 * (each uprobe is placed for one pid), so a probe of another process never
 * runs the program.
 */
#ifndef FSS_AGENT_BPF_ATTACH_H
#define FSS_AGENT_BPF_ATTACH_H

#ifndef __bpf__
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#endif

/* The functions probed, in the agent's list (agent/nccl_wrap.c). Values
 * are stable within one build only: they never reach a trace. */
enum attach_fn {
	ATTACH_FN_ALLGATHER = 1,     /* (sendbuff, recvbuff, sendcount, datatype, comm, stream) */
	ATTACH_FN_REDUCESCATTER,     /* (sendbuff, recvbuff, recvcount, datatype, op, comm, stream) */
	ATTACH_FN_ALLREDUCE,         /* (sendbuff, recvbuff, count, datatype, op, comm, stream) */
	ATTACH_FN_BROADCAST,         /* (sendbuff, recvbuff, count, datatype, root, comm, stream) */
	ATTACH_FN_BCAST,             /* (buff, count, datatype, root, comm, stream) */
	ATTACH_FN_REDUCE,            /* (sendbuff, recvbuff, count, datatype, op, root, comm, stream) */
	ATTACH_FN_SEND,              /* (sendbuff, count, datatype, peer, comm, stream) */
	ATTACH_FN_RECV,              /* (recvbuff, count, datatype, peer, comm, stream) */
	ATTACH_FN_ALLTOALL,          /* (sendbuff, recvbuff, count, datatype, comm, stream) */
	ATTACH_FN_GATHER,            /* (sendbuff, recvbuff, count, datatype, root, comm, stream) */
	ATTACH_FN_SCATTER,           /* (sendbuff, recvbuff, count, datatype, root, comm, stream) */
	ATTACH_FN_GROUP_START,       /* () */
	ATTACH_FN_GROUP_END,         /* () */
	ATTACH_FN_COMM_INIT_RANK,    /* (ncclComm_t *comm, nranks, ncclUniqueId commId (by value), rank) */
	ATTACH_FN_COMM_INIT_RANK_CONFIG, /* (ncclComm_t *comm, nranks, ncclUniqueId commId, rank, config *) */
	ATTACH_FN_COMM_INIT_ALL,     /* (ncclComm_t *comms, ndev, const int *devlist) */
	ATTACH_FN_COMM_INIT_RANK_SCALABLE, /* (ncclComm_t *comm, nranks, myrank, nId, ncclUniqueId *commIds, config *) */
	ATTACH_FN_COMM_SPLIT,        /* (comm, color, key, ncclComm_t *newcomm, config *) */
	ATTACH_FN_COMM_SHRINK,       /* (comm, int *excludeRanksList, excludeRanksCount, ncclComm_t *newcomm, config *,
	                                shrinkFlags) */
	ATTACH_FN_COMM_DESTROY,      /* (comm) */
	ATTACH_FN_COMM_ABORT,        /* (comm) */
	ATTACH_FN_COMM_FINALIZE,     /* (comm) */
	ATTACH_FN_PROCESS_EXIT,      /* not a probe of libnccl: the process's last thread left (kernel), ret is
	                                its exit status as waitpid() reports it */
	ATTACH_FN_MAX
};

enum attach_event_kind {
	ATTACH_EV_ENTER = 1, /* a call was entered: arg[] holds its arguments */
	ATTACH_EV_EXIT = 2,  /* it returned: ret, and out[] for the calls that make communicators */
};

/* Bytes of an ncclUniqueId (nccl.h NCCL_UNIQUE_ID_BYTES). */
#define ATTACH_UNIQUE_ID_BYTES 128
/* Communicators one exit event reports (ncclCommInitAll's ndev beyond it: only these). */
#define ATTACH_OUT_MAX 8

/*
 * One event of the ring buffer. The events of one thread arrive in the
 * order it made them (its enter before its exit); threads interleave.
 */
struct attach_event {
	uint64_t ts_ns;   /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	uint32_t pid;     /* the process (tgid) as the attaching side's pid namespace sees it */
	uint32_t tid;     /* the kernel thread id of the caller */
	uint16_t fn;      /* enum attach_fn */
	uint16_t kind;    /* enum attach_event_kind */
	int32_t ret;      /* exit: the return value (ncclResult_t); PROCESS_EXIT: the wait status */
	uint64_t arg[8];  /* enter: the arguments in order, integers zero-extended; those past the sixth
	                     read from the user stack (x86-64 SysV: [rsp + 8], [rsp + 16] at entry) */
	uint64_t out[ATTACH_OUT_MAX]; /* exit of an init / split / shrink: the ncclComm_t values the call
	                                 wrote through its out pointer (saved at entry), 0 when unread */
	uint32_t nout;    /* entries of out[] filled */
	uint32_t uid_ok;  /* uid[] was read */
	uint8_t uid[ATTACH_UNIQUE_ID_BYTES]; /* enter of CommInitRank / Config: the ncclUniqueId passed by value
	                                        (the stack, [rsp + 8]); Scalable: commIds[0] */
};

#ifndef __bpf__

/*
 * ---- user space: the probes (attach.c; built only with libbpf) ----
 */

typedef struct attach attach_t;

/* Called for every event, in ring-buffer order. Return 0, or a negative
 * errno to stop attach_poll with it. */
typedef int (*attach_event_fn)(void *ctx, const struct attach_event *ev);

/* What attach_pid found and placed for one process. */
struct attach_target {
	pid_t pid;
	char mapped[4096];     /* the libnccl path as /proc/PID/maps names it (inside the process's root) */
	char opened[4096];     /* the file the probes were placed on: /proc/PID/root/<mapped> */
	uint32_t functions;    /* functions found and probed (entry and return each) */
	uint32_t probes;       /* uprobes and uretprobes placed */
	char missing[512];     /* functions this libnccl lacks, comma-separated ("" for none): older NCCL */
};

/*
 * attach_available - can this process load BPF and place uprobes here:
 * privilege (root, or CAP_BPF + CAP_PERFMON), a kernel with uprobes and
 * BTF. 0, or a negative errno with what is missing and what to do in err
 * (-EPERM no privilege, -ENOTSUP no uprobes or BTF).
 */
int attach_available(char *err, size_t errlen);

/*
 * attach_new - load the BPF program (the skeleton), make the ring buffer
 * (ring_bytes, 0: 8 MiB) whose events go to fn. Places no probe yet.
 * 0 with *out (free with attach_free), or a negative errno, said in err.
 */
int attach_new(attach_t **out, size_t ring_bytes, attach_event_fn fn, void *ctx, char *err, size_t errlen);

/*
 * attach_pid - find the libnccl process pid maps (/proc/PID/maps, the ELF
 * opened through /proc/PID/root), resolve every function of enum
 * attach_fn it has (ncclX, else pncclX: the same address in a real
 * libnccl), and place an entry and a return probe on each, for pid only;
 * watch the process's exit (ATTACH_FN_PROCESS_EXIT). *t says what was
 * done. Errors, each said in err: -ESRCH no such process; -ENOENT no
 * libnccl mapped (err names what is mapped instead and the way on:
 * a statically linked NCCL cannot be attached by symbol, run the job
 * under `fsdpscope run`); -EEXIST already attached by this attach_t;
 * -ENOEXEC the library has none of the functions; the errno of placing
 * a probe (every probe of the pid placed so far removed again).
 */
int attach_pid(attach_t *a, pid_t pid, struct attach_target *t, char *err, size_t errlen);

/* attach_drop_pid - remove every probe of pid (it exited, or is let go). 0, -ENOENT not attached. */
int attach_drop_pid(attach_t *a, pid_t pid);

/* attach_fd - a file descriptor that polls readable when events wait (for the caller's epoll / poll). */
int attach_fd(const attach_t *a);

/*
 * attach_poll - wait up to timeout_ms for events and hand each to fn.
 * Returns the number of events handled (>= 0), fn's negative return, or
 * a negative errno. A signal interrupting the wait returns 0.
 */
int attach_poll(attach_t *a, int timeout_ms);

/* attach_lost - events the probes could not put in the ring buffer (it was full), so far. */
uint64_t attach_lost(const attach_t *a);

/* attach_free - remove every probe, unload the program. NULL allowed. */
void attach_free(attach_t *a);

/*
 * ---- user space, without libbpf (attach_elf.c): finding and resolving libnccl ----
 */

/*
 * attach_find_nccl - the libnccl that /proc/PID/maps lists (a mapping
 * whose file name starts "libnccl.so"), in mapped (as the process names
 * it) and opened (through /proc/PID/root). 0; -ESRCH no such process;
 * -EACCES its maps cannot be read; -ENOENT none mapped, and then what[]
 * lists the first mapped objects, comma-separated.
 */
int attach_find_nccl(pid_t pid, char *mapped, size_t mappedlen, char *opened, size_t openedlen, char *what,
		     size_t whatlen);

/* One resolved function. */
struct attach_symbol {
	uint16_t fn;          /* enum attach_fn */
	const char *name;     /* the symbol found: "ncclAllGather", or "pncclAllGather" */
	uint64_t address;     /* its st_value */
	uint64_t file_offset; /* where its code lies in the file: what a uprobe is placed at */
};

/*
 * attach_resolve - the functions of enum attach_fn (PROCESS_EXIT aside)
 * that the ELF shared object at path defines, from .dynsym (else
 * .symtab): ncclX, else pncclX. out[] gets one entry per function found,
 * *n how many. 0; -ENOEXEC not an ELF (or not x86-64 ELF64); -errno of
 * open / read.
 */
int attach_resolve(const char *path, struct attach_symbol out[ATTACH_FN_MAX], size_t *n);

/* attach_fn_name - "AllGather", ... for enum attach_fn; "?" otherwise. */
const char *attach_fn_name(unsigned fn);

#endif /* !__bpf__ */

#endif
