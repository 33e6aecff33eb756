/*
 * attach_records.h - the records of attached processes, from their probe
 * events (agent/bpf/attach.h): the same records as the agent's, path
 * uprobe (docs/format.md), one stream per process.
 *
 * Per process: a process_hello (path uprobe, features UPROBE | ENTER, the
 * rank hints its environment gives), its strings (after the hello, as the
 * agent sends them), then for every call an enter record at the call's
 * entry and its collective record at its exit (the same seq), group
 * records for outermost groups, comm records for communicators seen made
 * (init, split: exact where the call says it) or first seen in use (event
 * OBSERVED, fields inferred: format 1.4, fss_comm_inferred), destroy and
 * abort records (Finalize: none, as the agent), and when the kernel saw it
 * go a process_end (only when it left through exit(), where the agent
 * writes one) and a process_exit. No sink record: that is the sender's.
 *
 * A communicator made before the attach is known only by its handle. Its
 * calls (and every later record of that process) are held back until its
 * identity is decided, so that its comm record comes before its first
 * collective as a reader expects. Decided when every undecided
 * communicator of every process has ATTACH_RECORDS_WINDOW calls (or its
 * process twice that many calls since it was first seen), when one process
 * holds more than ATTACH_RECORDS_HOLD_MAX records, when a process exits,
 * or at attach_records_decide(final). Then the communicators of all
 * processes are grouped by the distribution of the signatures (op, count,
 * datatype, redop, root) of their calls (a communicator's calls have the
 * same kinds and sizes on every rank; the windows of two ranks need not
 * begin at the same call), at most one communicator of a process per
 * class; the rank in each comes from in-place AllGathers (a rank held
 * twice: several communicators with the same calls, HSDP's shard groups,
 * told apart by pid order), else the environment (a communicator every
 * attached process shares), else pid order (a guess, and flagged so);
 * nranks from the processes that share it. A class decided later is
 * joined by the communicators that match it. A split's child is held too
 * until every process of its parent has made that split: its nranks is
 * the processes that made the same child (the agent asks ncclCommCount).
 * Everything inferred is said in the record's `inferred` bits, never
 * presented as read.
 *
 * A job that stops calling (a hang, an idle job) leaves held records
 * held: the caller decides when to stop waiting (attach_records_decide
 * with final 1 after a while without events), not this module, which
 * knows no time but the events'.
 *
 * No libbpf here: the module is fed events, so tests feed it the events
 * of a known job (tests/unit/attach_records_test.c).
 */
#ifndef FSS_AGENT_BPF_ATTACH_RECORDS_H
#define FSS_AGENT_BPF_ATTACH_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "agent/bpf/attach.h"

/* Calls on one communicator of one process before its identity is decided
 * (or twice as many calls of the process since the communicator was first
 * seen, for one used a few times a step): a step of the largest per-Linear
 * fsdp_ref model is about 100 calls, and the sizes of a whole step must be
 * seen for the ranks' windows to match wherever in the step they began. */
#define ATTACH_RECORDS_WINDOW 128u

/* Records one process may hold; one more forces the decision with what is
 * known (memory stays bounded: about 100 bytes a record). */
#define ATTACH_RECORDS_HOLD_MAX 8192u

typedef struct attach_records attach_records_t;

/* What the attaching side read of a process before its first event. */
struct attach_process {
	uint32_t pid, ppid;
	int32_t rank, local_rank, world_size, slurm_procid, ompi_rank; /* from /proc/PID/environ, -1 when absent */
	const char *command; /* argv[0] (/proc/PID/cmdline), copied */
	const char *host;    /* the host name, copied */
	uint64_t mono_ns, realtime_ns; /* read together, for the hello */
};

/* Where the records go: one call per record, in the process's order, head.source 0
 * (the session's ingest numbers sources). */
typedef int (*attach_record_fn)(void *ctx, uint32_t pid, const void *record);

/*
 * attach_records_new - the records of processes yet to be added, handed to
 * fn. 0 with *out (attach_records_free), or -ENOMEM.
 */
int attach_records_new(attach_records_t **out, attach_record_fn fn, void *ctx);

/*
 * attach_records_add - a process just attached: its hello and strings go
 * out now. -EEXIST when pid is already there (a pid whose process_exit
 * went out may come again: a new process); -ENOMEM; fn's error.
 */
int attach_records_add(attach_records_t *a, const struct attach_process *p);

/*
 * attach_records_event - one event of an added process (others are
 * counted and dropped). Records of decided communicators and of calls on
 * no communicator go out at once, the others are held (see above).
 * ATTACH_FN_PROCESS_EXIT ends the process: what it held is decided with
 * what is known, then its process_exit record. 0, or fn's error.
 */
int attach_records_event(attach_records_t *a, const struct attach_event *ev);

/*
 * attach_records_decide - decide every communicator whose classes are
 * complete (final: every communicator, with what is known: at the end of
 * the attach) and send what was held for them. 0, or fn's error.
 */
int attach_records_decide(attach_records_t *a, int final);

/* What was inferred, and counts, for the attach's own summary. */
struct attach_records_stats {
	uint32_t processes;
	uint64_t events;            /* events taken */
	uint64_t events_unknown;    /* events of no added process, or unpaired (an exit without its enter) */
	uint64_t collectives;       /* collective records sent */
	uint64_t held;              /* records held now */
	uint32_t comms_made;        /* communicators seen made (init / split) */
	uint32_t comms_observed;    /* communicators first seen in use (OBSERVED records sent) */
	uint32_t rank_inplace, rank_env, rank_order; /* OBSERVED records whose rank came from each */
	uint32_t members_guessed;   /* OBSERVED records with FSS_COMM_INFER_MEMBERS */
};
void attach_records_stats(const attach_records_t *a, struct attach_records_stats *out);

void attach_records_free(attach_records_t *a);

#endif
