/*
 * analyze_comms.c - a rank's communicators and the result's communicators
 * table (see analyze_comms.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analyze_comms.h"
#include "collector/median.h"
#include "common/record.h"

int analyze_comms_decide(struct rank_comms *c, const timeline_t *t, const struct tl_source *src, const char *fsdp_comm)
{
	size_t len = tl_array_len(&src->events);
	int rc = comm_roles_decide(t, src, len ? tl_array_at(&src->events, 0) : NULL, len, fsdp_comm, &c->roles);
	if (rc < 0)
		return rc;
	c->decided = 1;
	return 0;
}

int analyze_comms_assign(struct rank_comms *c, struct tl_source *src)
{
	uint64_t have = src->events_base + tl_array_len(&src->events);
	if (c->nevents < src->ncomms) {
		uint64_t *v = realloc(c->events, src->ncomms * sizeof *v);
		if (!v)
			return -ENOMEM;
		memset(v + c->nevents, 0, (src->ncomms - c->nevents) * sizeof *v);
		c->events = v;
		c->nevents = src->ncomms;
	}
	for (uint64_t i = c->roled; i < have; i++) {
		struct tl_event *e = tl_array_at(&src->events, (size_t)(i - src->events_base));
		e->role = comm_roles_event_role(&c->roles, e);
		uint8_t g = comm_roles_group_of(&c->roles, e->comm_slot);
		e->fsdp_group = g == COMM_ROLES_NO_GROUP || !comm_roles_is_fsdp(e->role) ? 0 : g;
		if (e->comm_slot < c->nevents)
			c->events[e->comm_slot]++;
	}
	c->roled = have;
	return 0;
}

void analyze_comms_release(struct rank_comms *c)
{
	comm_roles_release(&c->roles);
	free(c->events);
	c->events = NULL;
	c->nevents = 0;
}

/* Role order in the table: the FSDP group and its companions first. */
static int role_rank(uint8_t role)
{
	static const int order[ANALYSIS_ROLE_MAX] = {
	    [ANALYSIS_ROLE_FSDP] = 0,		   [ANALYSIS_ROLE_FSDP_REGATHER] = 1,
	    [ANALYSIS_ROLE_REPLICATE] = 2,	   [ANALYSIS_ROLE_TENSOR_PARALLEL] = 3,
	    [ANALYSIS_ROLE_CONTEXT_PARALLEL] = 4, [ANALYSIS_ROLE_PIPELINE] = 5,
	    [ANALYSIS_ROLE_EXPERT] = 6,	   [ANALYSIS_ROLE_ALL_TO_ALL] = 7,
	    [ANALYSIS_ROLE_ALLREDUCE] = 8,	   [ANALYSIS_ROLE_STEP] = 9,
	    [ANALYSIS_ROLE_ONE_OFF] = 10,	   [ANALYSIS_ROLE_UNKNOWN] = 11,
	    [ANALYSIS_ROLE_IDLE] = 12,
	};
	return role < ANALYSIS_ROLE_MAX ? order[role] : 12;
}

/* One event of a communicator in the steady step, counted by its op. */
static void count_op(struct analysis_comm *e, uint8_t op)
{
	switch (op) {
	case FSS_OP_ALLGATHER:
		e->allgathers++;
		break;
	case FSS_OP_REDUCESCATTER:
		e->reduce_scatters++;
		break;
	case FSS_OP_ALLREDUCE:
		e->allreduces++;
		break;
	case FSS_OP_BROADCAST:
		e->broadcasts++;
		break;
	case FSS_OP_SEND:
	case FSS_OP_RECV:
		e->point_to_point++;
		break;
	case FSS_OP_ALLTOALL:
		e->alltoalls++;
		break;
	default:
		e->other++;
		break;
	}
}

/* Communicator slot `pick`'s traffic: in the steady step (per step, its
 * median elements) and outside it. */
static void comm_traffic(const struct rank_comms *c, size_t pick, const struct tl_event *step, size_t nstep,
			 uint32_t analyzed, struct analysis_comm *e)
{
	uint64_t in_step = 0, el[64];
	size_t nel = 0;
	for (size_t i = 0; i < nstep; i++) {
		const struct tl_event *x = &step[i];
		if (x->comm_slot != pick)
			continue;
		in_step++;
		e->bytes_per_step += x->wire_bytes;
		if (nel < sizeof el / sizeof el[0])
			el[nel++] = x->elements;
		count_op(e, x->op);
	}
	if (nel) {
		qsort(el, nel, sizeof el[0], median_u64_cmp);
		e->elements_median = el[(nel - 1) / 2];
	}
	uint64_t total = c->events && pick < c->nevents ? c->events[pick] : 0;
	uint64_t steady = in_step * analyzed;
	e->outside = total > steady ? (uint32_t)(total - steady) : 0;
}

void analyze_comms_fill(const timeline_t *t, const struct tl_source *src, const struct rank_comms *c,
			const struct tl_event *step, size_t nstep, uint32_t analyzed, struct analysis_result *r)
{
	size_t nc = src->ncomms;
	uint8_t done[ANALYSIS_COMMS_MAX * 4] = {0};
	if (nc > sizeof done)
		nc = sizeof done;
	for (uint32_t k = 0; k < nc && r->ncomms < ANALYSIS_COMMS_MAX; k++) {
		/* next: the lowest role rank, then the lowest slot */
		size_t pick = nc;
		for (size_t s = 0; s < nc; s++) {
			if (done[s])
				continue;
			uint8_t role = c->decided ? comm_roles_of(&c->roles, (uint32_t)s) : ANALYSIS_ROLE_UNKNOWN;
			if (pick == nc || role_rank(role) < role_rank(comm_roles_of(&c->roles, (uint32_t)pick)))
				pick = s;
		}
		if (pick == nc)
			break;
		done[pick] = 1;
		const struct tl_comm *m = &src->comms[pick];
		struct analysis_comm *e = &r->comms[r->ncomms];
		e->id = m->id_hash;
		e->dimension = m->dimension;
		snprintf(e->name, sizeof e->name, "%s", timeline_string(t, src->id, m->name));
		e->nranks = m->nranks;
		e->rank = m->rank;
		e->role = c->decided ? comm_roles_of(&c->roles, (uint32_t)pick) : ANALYSIS_ROLE_UNKNOWN;
		e->role_given = c->roles.given && (int)pick == c->roles.fsdp;
		if (c->decided && pick < c->roles.ncomms)
			snprintf(e->evidence, sizeof e->evidence, "%s", c->roles.evidence[pick]);
		comm_traffic(c, pick, step, nstep, analyzed, e);
		if ((int)pick == c->roles.fsdp)
			r->fsdp_comm = (int32_t)r->ncomms;
		if (e->role == ANALYSIS_ROLE_TENSOR_PARALLEL && m->nranks > 1)
			r->tp_degree *= (uint32_t)m->nranks;
		r->ncomms++;
	}
}
