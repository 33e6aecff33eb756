/*
 * flight_mismatch.c - do the ranks of a communicator issue the same
 * collective at the same comm_seq (flight_mismatch.h)?
 */
#include "collector/flight_mismatch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int flight_op_has_root(uint8_t op)
{
	return op == FSS_OP_BROADCAST || op == FSS_OP_REDUCE || op == FSS_OP_GATHER || op == FSS_OP_SCATTER;
}

/* Do two ranks' signatures agree? A field one of them does not know is not
 * compared (the NVTX path knows no dtype, so no count either). */
static int sig_agree(const struct analysis_signature *x, const struct analysis_signature *y)
{
	int known = x->dtype != FSS_DTYPE_UNKNOWN && y->dtype != FSS_DTYPE_UNKNOWN;

	if (x->op != y->op)
		return 0;
	if (known && (x->dtype != y->dtype || x->count != y->count))
		return 0;
	if (flight_op_has_root(x->op) && x->root >= 0 && y->root >= 0 && x->root != y->root)
		return 0;
	if (x->redop != FSS_REDOP_NONE && y->redop != FSS_REDOP_NONE && x->redop != y->redop)
		return 0;
	return 1;
}

static int rank_cmp(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* The mismatch a slot shows, if its ranks disagree: a = the signature most
 * ranks issued (ties: the lowest rank's), b = the lowest-ranked other one. */
static int slot_mismatch(const struct fl_comm *c, const struct fl_slot *s, struct analysis_mismatch *m)
{
	uint32_t ia = 0, ib = UINT32_MAX;

	if (!s->comm_seq || (c->p2p_from && s->comm_seq >= c->p2p_from) || s->ngroups + (s->others ? 1 : 0) < 2)
		return 0;
	for (uint32_t i = 1; i < s->ngroups; i++)
		if (s->g[i].n > s->g[ia].n || (s->g[i].n == s->g[ia].n && s->g[i].min_rank < s->g[ia].min_rank))
			ia = i;
	for (uint32_t i = 0; i < s->ngroups; i++)
		if (i != ia && (ib == UINT32_MAX || s->g[i].min_rank < s->g[ib].min_rank))
			ib = i;
	memset(m, 0, sizeof(*m));
	m->comm_id = c->id_hash;
	m->comm_seq = s->comm_seq;
	m->nranks = c->nranks;
	m->a = s->g[ia].sig;
	m->na = s->g[ia].n;
	memcpy(m->a_ranks, s->g[ia].ranks, s->g[ia].kept * sizeof(int32_t));
	qsort(m->a_ranks, s->g[ia].kept, sizeof(int32_t), rank_cmp);
	for (uint32_t i = s->g[ia].kept; i < ANALYSIS_FLIGHT_RANKS_MAX; i++)
		m->a_ranks[i] = -1;
	if (ib != UINT32_MAX) {
		m->b = s->g[ib].sig;
		m->nb = s->g[ib].n;
		m->b_source = s->g[ib].min_rank_source;
		memcpy(m->b_ranks, s->g[ib].ranks, s->g[ib].kept * sizeof(int32_t));
		qsort(m->b_ranks, s->g[ib].kept, sizeof(int32_t), rank_cmp);
	}
	for (uint32_t i = ib != UINT32_MAX ? s->g[ib].kept : 0; i < ANALYSIS_FLIGHT_RANKS_MAX; i++)
		m->b_ranks[i] = -1;
	for (uint32_t i = 0; i < s->ngroups; i++)
		if (i != ia && i != ib)
			m->others += s->g[i].n;
	m->others += s->others;
	return 1;
}

static void slot_retire(struct fl_comm *c, struct fl_slot *s)
{
	struct analysis_mismatch m;

	if (!slot_mismatch(c, s, &m))
		return;
	c->mismatched++;
	if (!c->has_first) {
		c->has_first = 1;
		c->first = m;
		c->first_rt = s->first_rt;
	}
}

/* Rank `rank` of communicator c (trace source `source`) issued sig as its
 * comm_seq-th call there, at realtime rt. */
int flight_sig_report(struct fl_comm *c, uint64_t comm_seq, int32_t rank, uint32_t source,
		      const struct analysis_signature *sig, uint64_t rt)
{
	struct fl_slot *s;
	struct fl_sig_group *g = NULL;

	if (sig->op == FSS_OP_SEND || sig->op == FSS_OP_RECV) {
		/* pairs differ by nature, and each rank's count of them differs:
		 * the numbers after the first are not compared */
		if (!c->p2p_from || comm_seq < c->p2p_from)
			c->p2p_from = comm_seq;
		return 0;
	}
	if (c->p2p_from && comm_seq >= c->p2p_from)
		return 0;
	if (!c->slots && !(c->slots = calloc(FL_SIG_WINDOW, sizeof(*c->slots))))
		return -ENOMEM;
	s = &c->slots[comm_seq % FL_SIG_WINDOW];
	if (s->comm_seq > comm_seq)
		return 0; /* that far behind the others: out of the window */
	if (s->comm_seq < comm_seq) {
		slot_retire(c, s);
		memset(s, 0, sizeof(*s));
		s->comm_seq = comm_seq;
		s->first_rt = rt;
	}
	for (uint32_t i = 0; i < s->ngroups && !g; i++)
		if (sig_agree(&s->g[i].sig, sig))
			g = &s->g[i];
	if (!g) {
		if (s->ngroups == FL_SIG_GROUPS) {
			s->others++;
			return 0;
		}
		g = &s->g[s->ngroups++];
		g->sig = *sig;
		g->min_rank = rank;
		g->min_rank_source = source;
	}
	g->n++;
	if (g->kept < ANALYSIS_FLIGHT_RANKS_MAX)
		g->ranks[g->kept++] = rank;
	if (rank < g->min_rank) {
		g->min_rank = rank;
		g->min_rank_source = source;
	}
	return 0;
}

static void mismatch_keep(struct analysis_flight *out, uint64_t *rts, const struct analysis_mismatch *m, uint64_t rt)
{
	uint32_t at = out->nmismatches;

	out->mismatches_total++;
	while (at > 0 && rts[at - 1] > rt)
		at--;
	if (at >= ANALYSIS_MISMATCHES_MAX)
		return;
	uint32_t n = out->nmismatches < ANALYSIS_MISMATCHES_MAX ? out->nmismatches : ANALYSIS_MISMATCHES_MAX - 1;

	memmove(&out->mismatches[at + 1], &out->mismatches[at], (n - at) * sizeof(*m));
	memmove(&rts[at + 1], &rts[at], (n - at) * sizeof(*rts));
	out->mismatches[at] = *m;
	rts[at] = rt;
	if (out->nmismatches < ANALYSIS_MISMATCHES_MAX)
		out->nmismatches++;
}

void flight_mismatches_fill(const struct fl_comm *c, struct analysis_flight *out, uint64_t *rts)
{
	const struct fl_slot *bs = NULL;
	struct analysis_mismatch m;
	int found = 0;

	/* the first of each communicator (after one, its numbers no longer
	 * line up), and every one counted */
	out->mismatched_collectives += c->mismatched;
	if (c->has_first) {
		mismatch_keep(out, rts, &c->first, c->first_rt);
		found = 1;
	}
	/* the earliest live mismatch stands for a communicator whose slots
	 * have not retired one yet */
	for (unsigned s = 0; c->slots && s < FL_SIG_WINDOW; s++) {
		struct analysis_mismatch cand;

		if (!slot_mismatch(c, &c->slots[s], &cand))
			continue;
		out->mismatched_collectives++;
		if (!found && (!bs || cand.comm_seq < m.comm_seq)) {
			bs = &c->slots[s];
			m = cand;
		}
	}
	if (bs)
		mismatch_keep(out, rts, &m, bs->first_rt);
}
