/*
 * comm_roles.h - what each communicator of a rank carries, from its traffic.
 *
 * Real jobs run several communicators: FSDP's shard group beside an HSDP
 * replicate group, a tensor-parallel group, a pipeline group, the world for
 * the loss. The unit analysis must read the FSDP group alone (a TP group's
 * activation gathers are no parameter gathers), so every communicator of a
 * rank gets a role from what it carries (docs/patterns.md, "Telling
 * communicators apart"):
 *
 *   FSDP shard group   AllGathers and ReduceScatters, the gathers in runs
 *                      (a forward gathers every unit before any gradient is
 *                      reduced); among several such, the longest runs
 *   re-gather group    only AllGathers, of sizes the FSDP group gathers, on
 *                      fewer ranks (reshard_after_forward = G)
 *   replicate group    AllReduces of the sizes the FSDP group's
 *                      ReduceScatters leave on each rank (HSDP)
 *   tensor parallel    AllGathers and ReduceScatters that alternate (an
 *                      activation gather before a block's matmuls, a
 *                      reduce-scatter after them)
 *   pipeline / expert  Send / Recv; AllToAll
 *   step               a few scalar AllReduces (loss, gradient norm)
 *   all-reduce         other AllReduce traffic
 *   one-off            everything before the FSDP group's first gather
 *                      (init broadcasts), or only Broadcasts
 *
 * The decision is made once per rank from a window of its first events.
 */
#ifndef FSS_COLLECTOR_COMM_ROLES_H
#define FSS_COLLECTOR_COMM_ROLES_H

#include <stddef.h>
#include <stdint.h>

#include "collector/analysis.h"
#include "collector/timeline.h"

/* The decision for one rank. */
struct comm_roles {
	size_t ncomms;
	uint8_t *role;			       /* [ncomms] enum analysis_comm_role */
	char (*evidence)[ANALYSIS_NOTE_BYTES]; /* [ncomms] why, with the figures */
	int fsdp;			       /* the FSDP shard group's index, -1 none */
	int given;			       /* 1: chosen by the user's --fsdp-comm */
	int override_unmatched;		       /* 1: --fsdp-comm named no communicator of this rank */
	int override_ambiguous;		       /* 1: it named several (give more digits) */
};

/*
 * comm_roles_decide - roles for the communicators comms[0..ncomms) of source
 * `src` from its events ev[0..n) (issue order). override: --fsdp-comm (an
 * id or dimension as hex, at least 4 digits of its start, or a name), NULL.
 * t resolves the communicators' names. Fills *out (free with
 * comm_roles_release). Returns 0 or -ENOMEM.
 */
int comm_roles_decide(const timeline_t *t, const struct tl_source *src, const struct tl_event *ev, size_t n,
		      const char *override, struct comm_roles *out);

/* comm_roles_release - free what comm_roles_decide allocated. */
void comm_roles_release(struct comm_roles *r);

/* comm_roles_of - the role of communicator slot `slot`; roles of
 * communicators created after the decision are decided on their own
 * (unknown). */
static inline uint8_t comm_roles_of(const struct comm_roles *r, uint32_t slot)
{
	return slot < r->ncomms ? r->role[slot] : (uint8_t)ANALYSIS_ROLE_UNKNOWN;
}

/*
 * comm_roles_in_steps - whether events of this role take part in step
 * detection: the data-parallel side does (FSDP, re-gather, replicate, step,
 * all-reduce, one-off, unknown); tensor-parallel, pipeline and expert
 * traffic repeats inside every block or micro-batch and says nothing about
 * where a step begins.
 */
int comm_roles_in_steps(uint8_t role);

/* comm_roles_is_fsdp - the FSDP shard group or its re-gather group. */
static inline int comm_roles_is_fsdp(uint8_t role)
{
	return role == ANALYSIS_ROLE_FSDP || role == ANALYSIS_ROLE_FSDP_REGATHER;
}

#endif
