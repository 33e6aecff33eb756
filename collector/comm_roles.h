/*
 * comm_roles.h - what each communicator of a rank carries, from its traffic.
 *
 * Real jobs run several communicators: FSDP's shard group beside an HSDP
 * replicate group, a tensor- or context-parallel group, a pipeline group,
 * an expert-parallel all-to-all group, the world for the loss, and
 * sometimes a second FSDP group (MoE experts sharded on their own mesh).
 * The unit analysis must read each FSDP group alone and no activation
 * collective (a TP or CP group's gathers are no parameter gathers), so
 * every communicator of a rank gets a role from what it carries
 * (docs/patterns.md, "Telling communicators apart"):
 *
 *   FSDP group         AllGathers of parameters and ReduceScatters of their
 *                      gradients: the same sizes every forward, gathered
 *                      per unit; several such groups are all FSDP groups,
 *                      the primary the one that gathers the most bytes
 *   activation groups  AllGathers and ReduceScatters on a possible sub-group
 *                      of an FSDP group, issued inside its units: tensor
 *                      parallel (alternating) or context parallel (runs of
 *                      k / v gathers, no backward re-gather, or sizes that
 *                      follow the sequence)
 *   re-gather group    only AllGathers on a sub-group of an FSDP group, of
 *                      its sizes or never inside its forward
 *                      (reshard_after_forward = G, ZeRO++'s hpZ)
 *   replicate group    AllReduces of the sizes the FSDP group's
 *                      ReduceScatters leave on each rank (HSDP)
 *   point to point     neighbour Send / Recv between units: pipeline; on a
 *                      group that also gathers, or inside units: context
 *                      parallel (ring rotation of k / v and dK / dV)
 *   all-to-all         one call to every peer (AllToAll, or grouped Send /
 *                      Recv to every peer): expert parallel beside an
 *                      expert FSDP group or after a router's count
 *                      exchange; all-to-all otherwise
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
#include "common/record.h"

/* FSDP groups a rank can have (MoE: the dense part's and the experts'). */
#define COMM_ROLES_GROUPS_MAX 4
#define COMM_ROLES_NO_GROUP 0xffu
/* Activation sizes told apart on the FSDP group's own communicator. */
#define COMM_ROLES_SHARED_KEYS 4

/* The decision for one rank. */
struct comm_roles {
	size_t ncomms;
	uint8_t *role;			       /* [ncomms] enum analysis_comm_role */
	char (*evidence)[ANALYSIS_NOTE_BYTES]; /* [ncomms] why, with the figures */
	int fsdp;			       /* the FSDP shard group's index, -1 none */
	int given;			       /* 1: chosen by the user's --fsdp-comm */
	int override_unmatched;		       /* 1: --fsdp-comm named no communicator of this rank */
	int override_ambiguous;		       /* 1: it named several (give more digits) */
	/* Every FSDP group, the primary (fsdp) first: groups[g] is a slot;
	 * group[slot] is the group an FSDP or re-gather communicator belongs
	 * to, COMM_ROLES_NO_GROUP for the others. */
	uint32_t ngroups;
	int groups[COMM_ROLES_GROUPS_MAX];
	uint8_t *group; /* [ncomms] */
	/* When the traffic left two readings open (a gather group that could be
	 * parameters or activations), what they were, for a note; "" none. */
	char ambiguity[ANALYSIS_NOTE_BYTES];
	/* Activations on the primary's own communicator (context parallelism
	 * over the whole job: cp = N runs on the world beside FSDP): the
	 * per-rank bytes of its gathers and reduce-scatters that are no
	 * parameters; their events take the role context-parallel. */
	uint32_t nshared_keys;
	uint64_t shared_keys[COMM_ROLES_SHARED_KEYS];
	char shared[ANALYSIS_NOTE_BYTES]; /* what was found, for a note; "" none */
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
 * detection: the data-parallel side does (every FSDP group, re-gather,
 * replicate, step, all-reduce, one-off, unknown); tensor-, context-,
 * expert-parallel, all-to-all and pipeline traffic repeats inside every
 * block or micro-batch, its sizes may follow the sequence, and it says
 * nothing about where a step begins.
 */
int comm_roles_in_steps(uint8_t role);

/*
 * comm_roles_event_in_steps - whether an event takes part in step
 * detection: its role does, and it is no Send / Recv / AllToAll (an
 * expert-parallel dispatch on the FSDP group's own communicator, E = N:
 * its splits change with every step and block).
 */
static inline int comm_roles_event_in_steps(const struct tl_event *e)
{
	return comm_roles_in_steps(e->role) && e->op != FSS_OP_SEND && e->op != FSS_OP_RECV && e->op != FSS_OP_ALLTOALL;
}

/* comm_roles_is_fsdp - an FSDP shard group or a re-gather group. */
static inline int comm_roles_is_fsdp(uint8_t role)
{
	return role == ANALYSIS_ROLE_FSDP || role == ANALYSIS_ROLE_FSDP_REGATHER;
}

/* comm_roles_group_of - the FSDP group (0: the primary) slot `slot`
 * belongs to, COMM_ROLES_NO_GROUP when none. */
static inline uint8_t comm_roles_group_of(const struct comm_roles *r, uint32_t slot)
{
	return r->group && slot < r->ncomms ? r->group[slot] : (uint8_t)COMM_ROLES_NO_GROUP;
}

/* comm_roles_event_role - the role of one event: its communicator's, but
 * context-parallel for the activations found on the primary's own
 * communicator (shared_keys). */
static inline uint8_t comm_roles_event_role(const struct comm_roles *r, const struct tl_event *e)
{
	uint8_t role = comm_roles_of(r, e->comm_slot);
	if ((int)e->comm_slot == r->fsdp && (e->op == FSS_OP_ALLGATHER || e->op == FSS_OP_REDUCESCATTER))
		for (uint32_t k = 0; k < r->nshared_keys; k++)
			if (r->shared_keys[k] == e->bytes)
				return ANALYSIS_ROLE_CONTEXT_PARALLEL;
	return role;
}

/* comm_roles_event_primary - an event of the primary FSDP group (its shard
 * or re-gather communicator): what the unit analysis reads. */
static inline int comm_roles_event_primary(const struct tl_event *e)
{
	return comm_roles_is_fsdp(e->role) && e->fsdp_group == 0;
}

#endif
