/*
 * comm_roles_work.h - what the role decision works from (comm_roles.c and
 * comm_roles_fsdp.c): each communicator's figures over the window of a
 * rank's first events. Internal to those two files.
 */
#ifndef FSS_COLLECTOR_COMM_ROLES_WORK_H
#define FSS_COLLECTOR_COMM_ROLES_WORK_H

#include <stddef.h>
#include <stdint.h>

#include "collector/comm_roles.h"
#include "common/record.h"

/* AllReduces of at most this many elements are scalars (loss, norm). */
#define ROLES_SCALAR_ELEMENTS 16u
/* An all-to-all of at most this many elements per peer exchanges counts
 * (a MoE router's tokens per expert), not tokens. */
#define ROLES_COUNTS_ELEMENTS 1024u

/* What one communicator carried in the window. */
struct comm_stat {
	uint32_t ops[FSS_OP_MAX];
	uint32_t events;
	uint32_t run, max_run;	    /* AllGathers since this communicator's last ReduceScatter */
	uint32_t scalar_allreduces; /* AllReduces of at most ROLES_SCALAR_ELEMENTS */
	size_t first, last;	    /* window positions of its first and last event */
	uint64_t *ag_elements;	    /* gathered elements of each AllGather event */
	uint64_t *ag_bytes;	    /* per-rank bytes of each (count x dtype size): what a unit is keyed by */
	uint64_t *rs_counts;	    /* per-rank count of each ReduceScatter (what it leaves on a rank) */
	uint64_t *ar_counts;
	uint32_t nag, nrs, nar;
	uint64_t gathered_bytes; /* wire bytes of its AllGathers: what its gathers move */
	uint32_t ag_dtypes;	 /* bit d: an AllGather in fss_dtype d */
	uint32_t p2p;		 /* Send / Recv events (a group counts once), all-to-alls among them */
	uint32_t a2a;		 /* all-to-all events: AllToAll, or Send / Recv to every peer in one group */
	uint32_t a2a_counts;	 /* all-to-alls of at most ROLES_COUNTS_ELEMENTS per peer right before a
				    larger one: a router's counts, then the tokens */
	/* its runs of gathers between two of its ReduceScatters (gather_runs) */
	uint32_t short_runs;	   /* shorter than half the longest: backward re-gathers */
	uint32_t long_runs;	   /* at least half the longest: forwards */
	uint32_t long_runs_differ; /* of the long runs after the first, those whose sizes differ from the
				      run before: sizes that follow the sequence */
};

/* The decision's state. */
struct roles_work {
	const struct tl_source *src;
	const struct tl_event *ev; /* [n] the window */
	size_t n;
	struct comm_stat *st; /* [src->ncomms] */
	uint64_t *pool;	      /* the size lists of every st[] */
	int fsdp;	      /* the primary FSDP group's slot, -1 none */
	int given;	      /* it was named by --fsdp-comm */
	uint8_t *activation;  /* [ncomms] 1: a gather group found to carry activations (tensor or context
				 parallel), not parameters */
	uint8_t *group;	      /* [ncomms] the FSDP group of a slot, COMM_ROLES_NO_GROUP (out->group) */
	int groups[COMM_ROLES_GROUPS_MAX];
	uint32_t ngroups;
	int ambiguous;	  /* a nested group taken as parameters that could be activations, -1 none */
	int ambiguous_in; /* the group whose units it sits in */
	uint64_t *rsset;  /* the sorted per-rank reduced counts of every FSDP group */
	uint32_t nrsset;
};

/* roles_alternating - AllGathers and ReduceScatters in about equal numbers,
 * at most two gathers in a row: a tensor-parallel group's pattern. */
static inline int roles_alternating(const struct comm_stat *s)
{
	uint32_t ag = s->ops[FSS_OP_ALLGATHER], rs = s->ops[FSS_OP_REDUCESCATTER];
	return ag && rs && rs * 2 >= ag && ag * 2 >= rs && s->max_run <= 2;
}

/* roles_subgroup - can b's ranks be a subset of a's (b no larger, dividing
 * it)? One rank sees only sizes: a context- or tensor-parallel group, and
 * an expert group, pass; so does an equal group. */
static inline int roles_subgroup(const struct tl_comm *b, const struct tl_comm *a)
{
	return b->nranks > 0 && a->nranks > 0 && b->nranks <= a->nranks && a->nranks % b->nranks == 0;
}

/*
 * roles_neighbour_ops - for every window position, the op of slot's latest
 * event before it (prev) and of its next event after it (next), 0 none.
 * prev and next are [w->n]. Used to tell where another group's events sit
 * among this one's.
 */
void roles_neighbour_ops(const struct roles_work *w, int slot, uint8_t *prev, uint8_t *next);

/*
 * roles_choose_groups - the FSDP groups among the communicators with
 * gathers and reduce-scatters (comm_roles_fsdp.c): the user's --fsdp-comm,
 * else those whose gathers move parameters, the primary the one that
 * gathers the most bytes; the activation groups marked in w->activation
 * with their evidence in out->evidence. Fills w->fsdp, w->groups and
 * out's override fields and ambiguity. Returns 0 or -ENOMEM.
 */
int roles_choose_groups(const timeline_t *t, struct roles_work *w, const char *override, struct comm_roles *out);

#endif
