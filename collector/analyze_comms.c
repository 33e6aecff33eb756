/*
 * analyze_comms.c - the result's communicators: their roles and per-step
 * traffic, from the headline rank's view.
 */
#include "collector/analyze_internal.h"

/* Say why the trace could not be diagnosed (once), and note it. */
void analyze_undecided(struct analysis_result *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->undecided_why, sizeof r->undecided_why, fmt, ap);
	va_end(ap);
	analyze_note(r, "not diagnosed: %s", r->undecided_why);
}

/* Role order in the table: the FSDP group and its companions first. */
static int role_rank(uint8_t role)
{
	static const int order[ANALYSIS_ROLE_MAX] = {
	    [ANALYSIS_ROLE_FSDP] = 0,	   [ANALYSIS_ROLE_FSDP_REGATHER] = 1,	[ANALYSIS_ROLE_REPLICATE] = 2,
	    [ANALYSIS_ROLE_TENSOR_PARALLEL] = 3, [ANALYSIS_ROLE_PIPELINE] = 4,	[ANALYSIS_ROLE_EXPERT] = 5,
	    [ANALYSIS_ROLE_ALLREDUCE] = 6, [ANALYSIS_ROLE_STEP] = 7,		[ANALYSIS_ROLE_ONE_OFF] = 8,
	    [ANALYSIS_ROLE_UNKNOWN] = 9,   [ANALYSIS_ROLE_IDLE] = 10,
	};
	return role < ANALYSIS_ROLE_MAX ? order[role] : 10;
}

/* The communicators table of rank state v. */
void analyze_fill_comms(const analyzer_t *a, const struct rank_state *v, struct analysis_result *r)
{
	const struct tl_source *src = v->src;
	size_t nc = src->ncomms;
	uint8_t done[ANALYSIS_COMMS_MAX * 4] = {0};
	if (nc > sizeof done)
		nc = sizeof done;
	for (uint32_t k = 0; k < nc && r->ncomms < ANALYSIS_COMMS_MAX; k++) {
		/* next: the lowest role rank, then the lowest slot */
		size_t pick = nc;
		for (size_t c = 0; c < nc; c++) {
			if (done[c])
				continue;
			uint8_t role = v->roles_decided ? comm_roles_of(&v->roles, (uint32_t)c) : ANALYSIS_ROLE_UNKNOWN;
			if (pick == nc || role_rank(role) < role_rank(comm_roles_of(&v->roles, (uint32_t)pick)))
				pick = c;
		}
		if (pick == nc)
			break;
		done[pick] = 1;
		const struct tl_comm *m = &src->comms[pick];
		struct analysis_comm *e = &r->comms[r->ncomms];
		e->id = m->id_hash;
		e->dimension = m->dimension;
		snprintf(e->name, sizeof e->name, "%s", timeline_string(a->tl, src->id, m->name));
		e->nranks = m->nranks;
		e->rank = m->rank;
		e->role = v->roles_decided ? comm_roles_of(&v->roles, (uint32_t)pick) : ANALYSIS_ROLE_UNKNOWN;
		e->role_given = v->roles.given && (int)pick == v->roles.fsdp;
		if (v->roles_decided && pick < v->roles.ncomms)
			snprintf(e->evidence, sizeof e->evidence, "%s", v->roles.evidence[pick]);
		uint64_t in_step = 0, el[64];
		size_t nel = 0;
		for (size_t i = 0; i < v->nev; i++) {
			const struct tl_event *x = &v->tev[i];
			if (x->comm_slot != pick)
				continue;
			in_step++;
			e->bytes_per_step += x->wire_bytes;
			if (nel < sizeof el / sizeof el[0])
				el[nel++] = x->elements;
			switch (x->op) {
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
		if (nel) {
			qsort(el, nel, sizeof el[0], analyze_u64_cmp);
			e->elements_median = el[(nel - 1) / 2];
		}
		uint64_t total = v->comm_events && pick < v->ncomm_events ? v->comm_events[pick] : 0;
		uint64_t steady = in_step * v->analyzed;
		e->outside = total > steady ? (uint32_t)(total - steady) : 0;
		if ((int)pick == v->roles.fsdp)
			r->fsdp_comm = (int32_t)r->ncomms;
		if (e->role == ANALYSIS_ROLE_TENSOR_PARALLEL && m->nranks > 1)
			r->tp_degree *= (uint32_t)m->nranks;
		r->ncomms++;
	}
}

