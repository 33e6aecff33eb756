/*
 * attach_cut.h - the common cut of `fsdpscope attach` at detach
 * (docs/attach.md, "Detaching"): the probes of the attached processes go
 * one process after another (tens of milliseconds each), so without a cut
 * the ranks removed last would record calls that the ranks removed first
 * made unseen, and per-rank counts would differ by hundreds of calls that
 * no rank lost.
 *
 * Each process's collective (and enter) records on a communicator shared
 * with other attached processes are held until every other attached
 * process has recorded that call too (the same call has the same number on
 * the communicator on every rank: fss_rec_comm.first_call); the records
 * behind a held one wait with it, so a stream keeps its order. At detach
 * the number of the last call every process still attached completed
 * before the probes began to go is the cut of that communicator: held
 * records past it are left out and counted. In a synchronous job a few calls are held at a time; a job that
 * stops calling (a hang) has its held records let go by the caller
 * (attach_cut_release with all), so a hang's evidence is never cut.
 *
 * Records of communicators only one process uses, of calls on no
 * communicator, and every other kind of record go out in order at once.
 */
#ifndef FSS_CLI_ATTACH_CUT_H
#define FSS_CLI_ATTACH_CUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct attach_cut attach_cut_t;

/* Where records go: the process's slot (the caller's index) and the record, in the
 * process's order; a failure to send is the caller's to say. */
typedef void (*attach_cut_emit_fn)(void *ctx, size_t slot, const void *record);

/* attach_cut_new - an empty cut whose records go to emit. 0 with *out, or -ENOMEM. */
int attach_cut_new(attach_cut_t **out, attach_cut_emit_fn emit, void *ctx);

/*
 * attach_cut_record - one record of the process in slot (its order), held
 * or sent, and whatever it lets go of other processes. A slot is any small
 * number the caller keeps for one process. 0, or -ENOMEM (the record is
 * then sent at once, uncut).
 */
int attach_cut_record(attach_cut_t *c, size_t slot, const void *record);

/* attach_cut_release - send what may go now; all: everything held (a job that stopped calling). */
void attach_cut_release(attach_cut_t *c, int all);

/* attach_cut_end - the process of slot ended: everything it holds goes, and it holds no other back. */
void attach_cut_end(attach_cut_t *c, size_t slot);

/* One communicator's cut at detach, for the attach's closing lines. */
struct attach_cut_comm {
	uint64_t id_hash;   /* fss_rec_comm.id_hash */
	uint64_t number;    /* the last call on it every process still attached completed before the probes went */
	uint32_t nslots;    /* processes still attached that use it */
	uint32_t cut_slots; /* of them, with records past it */
};

/* One process's share of the cut. */
struct attach_cut_slot {
	size_t slot;
	uint64_t collectives; /* collective records past the cut, left out */
	uint64_t comm;	      /* fss_rec_comm.id_hash of the communicator most were cut of */
	int32_t rank;	      /* its rank in that communicator (the comm record's), -1 unknown */
};

/* One process's calls in flight at attach: on a communicator it shares, the calls
 * before its first one seen that another process was seen to make (numbered
 * alike on every rank: fss_rec_comm.first_call). A call entered before the
 * probes were placed is seen neither at its entry nor at its return (the
 * kernel arms a return probe at the entry), so these are in no trace. */
struct attach_cut_unseen {
	size_t slot;
	uint64_t calls;
	int32_t rank; /* its rank in that communicator, -1 unknown */
};

struct attach_cut_result {
	struct attach_cut_comm *comms; /* the communicators shared by more than one process, malloc'd */
	size_t ncomms;
	struct attach_cut_slot *slots; /* the processes with records left out, by slot, malloc'd */
	size_t nslots;
	uint64_t collectives;		  /* collective records left out in all */
	struct attach_cut_unseen *unseen; /* the processes that missed calls in flight at attach, malloc'd */
	size_t nunseen;
	uint64_t unseen_calls; /* calls in flight at attach in all */
};

/*
 * attach_cut_freeze - the probes begin to go (mono_ns: CLOCK_MONOTONIC,
 * the probes' clock, read just before): from here on nothing is sent
 * until attach_cut_detach. While probes are removed the kernel updates the
 * breakpoints that every process mapping the library shares, and the
 * probes of the processes still attached can miss calls meanwhile (seen:
 * a rank's AllGathers missed for a whole step while its ReduceScatters
 * were seen), so the cut is the last call completed before this moment.
 */
void attach_cut_freeze(attach_cut_t *c, uint64_t mono_ns);

/*
 * attach_cut_detach - at detach, once the probes are gone and their last
 * events taken: cut every shared communicator at the last call every
 * process still attached completed before attach_cut_freeze (without a
 * freeze: the last each recorded), send what is left before the cut,
 * leave out what is past it. *out says
 * what was done (free with attach_cut_result_free). 0, or -ENOMEM (then
 * nothing is left out: everything held is sent).
 */
int attach_cut_detach(attach_cut_t *c, struct attach_cut_result *out);

void attach_cut_result_free(struct attach_cut_result *r);

void attach_cut_free(attach_cut_t *c);

#endif
