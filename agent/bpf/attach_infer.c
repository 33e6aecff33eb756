/*
 * attach_infer.c - communicators made before the attach, decided
 * (attach_infer.h): the undecided communicators of every process are
 * grouped into classes by the distribution of the signatures of their calls
 * (op, count, dtype, redop, root); a class is split into instances when the
 * in-place ranks of its members repeat; ranks come from in-place
 * AllGathers, else the environment (a class every attached process is in),
 * else pid order; nranks from the processes that share it. Classes outlive
 * the pass: a communicator decided later joins the class it matches. A
 * split's child is decided once its parent is and every process of the
 * parent made the split.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/bpf/attach_first_call.h"
#include "agent/bpf/attach_infer.h"
#include "agent/bpf/attach_records_state.h"
#include "common/record.h"

#define MATCH_MIN 0.5 /* signature overlap two communicators need to be one */

int attach_infer_all_ready(const attach_records_t *a)
{
	int any = 0;
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct proc *p = &a->procs[i];
		for (size_t j = 0; j < p->ncomms; j++) {
			if (p->comms[j].state == COMM_DECIDED)
				continue;
			if (!p->comms[j].ready)
				return 0;
			any = 1;
		}
	}
	return any;
}

/* The split key of the agent (agent/nccl_wrap.c): (parent id_hash, split number, color). */
static uint64_t split_hash(uint64_t parent_hash, uint64_t split_no, int32_t color)
{
	unsigned char k[20];
	memcpy(k, &parent_hash, 8);
	memcpy(k + 8, &split_no, 8);
	memcpy(k + 16, &color, 4);
	return record_hash_bytes(k, sizeof(k));
}

static double sig_overlap(const struct sig *x, size_t nx, uint64_t cx, const struct sig *y, size_t ny, uint64_t cy)
{
	double sum = 0;
	if (!cx || !cy)
		return 0;
	for (size_t i = 0; i < nx; i++)
		for (size_t j = 0; j < ny; j++)
			if (x[i].op == y[j].op && x[i].count == y[j].count && x[i].dtype == y[j].dtype &&
			    x[i].redop == y[j].redop && x[i].root == y[j].root) {
				double fx = (double)x[i].n / (double)cx, fy = (double)y[j].n / (double)cy;
				sum += fx < fy ? fx : fy;
				break;
			}
	return sum;
}

static uint64_t sig_total(const struct sig *s, size_t n)
{
	uint64_t t = 0;
	for (size_t i = 0; i < n; i++)
		t += s[i].n;
	return t;
}

static int cls_has_proc(const struct cls *k, size_t proc)
{
	for (size_t i = 0; i < k->nmembers; i++)
		if (k->members[i].proc == proc)
			return 1;
	return 0;
}

static int sig_cmp(const void *x, const void *y)
{
	const struct sig *a = x, *b = y;
	if (a->op != b->op)
		return a->op < b->op ? -1 : 1;
	if (a->count != b->count)
		return a->count < b->count ? -1 : 1;
	if (a->dtype != b->dtype)
		return a->dtype < b->dtype ? -1 : 1;
	if (a->redop != b->redop)
		return a->redop < b->redop ? -1 : 1;
	return a->root < b->root ? -1 : a->root > b->root;
}

/* The id_hash of an instance of a class: its signatures, its ordinal and
 * the instance, after a tag no unique id begins with. Never 0. */
static uint64_t cls_hash(const struct cls *k, uint32_t instance)
{
	unsigned char buf[40 + 16 * 64];
	size_t n = 0;
	memcpy(buf, "fsdpscope attach observed comm", 30);
	n = 30;
	memcpy(buf + n, &k->ordinal, 4);
	n += 4;
	memcpy(buf + n, &instance, 4);
	n += 4;
	for (size_t i = 0; i < k->nsigs && i < 64; i++) {
		const struct sig *s = &k->sigs[i];
		memcpy(buf + n, &s->count, 8);
		memcpy(buf + n + 8, &s->root, 4);
		buf[n + 12] = s->op;
		buf[n + 13] = s->dtype;
		buf[n + 14] = s->redop;
		buf[n + 15] = 0;
		n += 16;
	}
	uint64_t h = record_hash_bytes(buf, n);
	return h ? h : 1;
}

static int cls_new(attach_records_t *a, const struct comm *first, size_t *index)
{
	if (attach_records_grow((void **)&a->classes, &a->classes_cap, a->nclasses + 1, sizeof(*a->classes)))
		return -ENOMEM;
	struct cls *k = &a->classes[a->nclasses];
	memset(k, 0, sizeof(*k));
	k->ordinal = (uint32_t)a->nclasses;
	if (first->nsigs) {
		k->sigs = malloc(first->nsigs * sizeof(*k->sigs));
		if (!k->sigs)
			return -ENOMEM;
		memcpy(k->sigs, first->sigs, first->nsigs * sizeof(*k->sigs));
		k->nsigs = first->nsigs;
		qsort(k->sigs, k->nsigs, sizeof(*k->sigs), sig_cmp);
		k->sig_calls = sig_total(k->sigs, k->nsigs);
	}
	*index = a->nclasses++;
	return 0;
}

static int cls_add(struct cls *k, size_t proc, size_t comm)
{
	if (attach_records_grow((void **)&k->members, &k->members_cap, k->nmembers + 1, sizeof(*k->members)))
		return -ENOMEM;
	k->members[k->nmembers++] = (struct member){proc, comm};
	return 0;
}

/* *v resized to n elements of size bytes: 0, or -ENOMEM with *v untouched. */
static int resize(void **v, size_t n, size_t size)
{
	void *p = realloc(*v, n * size);

	if (!p)
		return -ENOMEM;
	*v = p;
	return 0;
}

static int cls_instances(struct cls *k, uint32_t n)
{
	if (n <= k->ninstances)
		return 0;
	if (resize((void **)&k->inst_nranks, n, sizeof(*k->inst_nranks)) ||
	    resize((void **)&k->inst_hash, n, sizeof(*k->inst_hash)) ||
	    resize((void **)&k->inst_order, n, sizeof(*k->inst_order)) ||
	    resize((void **)&k->inst_norder, n, sizeof(*k->inst_norder)) ||
	    resize((void **)&k->inst_first, n, sizeof(*k->inst_first)))
		return -ENOMEM;
	for (uint32_t i = k->ninstances; i < n; i++) {
		k->inst_nranks[i] = 0;
		k->inst_hash[i] = cls_hash(k, i);
		k->inst_order[i] = NULL;
		k->inst_norder[i] = 0;
		k->inst_first[i] = 0;
	}
	k->ninstances = n;
	return 0;
}

static int32_t env_rank(const struct proc *p, int kind)
{
	return kind == 0 ? p->info.rank : kind == 1 ? p->info.slurm_procid : p->info.ompi_rank;
}

/* Ranks for the new members of class k (those with cls set and rec.rank
 * -1), first decision of the class: in place, else environment, else order. */
static int cls_rank_new(attach_records_t *a, struct cls *k)
{
	size_t n = k->nmembers;
	int inplace = n > 0, env = -1;

	for (size_t i = 1; i < n; i++) /* pid order: what a guess of members or ranks goes by */
		for (size_t j = i;
		     j > 0 && a->procs[k->members[j - 1].proc].info.pid > a->procs[k->members[j].proc].info.pid; j--) {
			struct member t = k->members[j];
			k->members[j] = k->members[j - 1];
			k->members[j - 1] = t;
		}

	for (size_t i = 0; i < n; i++) {
		const struct comm *m = &a->procs[k->members[i].proc].comms[k->members[i].comm];
		if (m->inplace_rank < 0 || m->gathers_inplace * 2 < m->gathers)
			inplace = 0;
	}
	if (inplace) {
		/* a rank held twice: several communicators with the same calls */
		uint32_t inst = 1;
		for (size_t i = 0; i < n; i++) {
			struct comm *m = &a->procs[k->members[i].proc].comms[k->members[i].comm];
			uint32_t before = 0;
			for (size_t j = 0; j < i; j++) /* members are in pid order */
				if (a->procs[k->members[j].proc].comms[k->members[j].comm].inplace_rank ==
				    m->inplace_rank)
					before++;
			m->instance = before;
			m->rec.rank = (int32_t)m->inplace_rank;
			if (before + 1 > inst)
				inst = before + 1;
		}
		k->rank_bit = FSS_COMM_INFER_RANK_INPLACE;
		return cls_instances(k, inst);
	}
	/* a communicator of every attached process: its rank is the job's */
	if (n == a->nprocs) {
		for (int kind = 0; kind < 3 && env < 0; kind++) {
			int ok = 1;
			for (size_t i = 0; i < n && ok; i++) {
				int32_t r = env_rank(&a->procs[k->members[i].proc], kind);
				if (r < 0)
					ok = 0;
				for (size_t j = 0; j < i && ok; j++)
					if (env_rank(&a->procs[k->members[j].proc], kind) == r)
						ok = 0;
			}
			if (ok)
				env = kind;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct comm *m = &a->procs[k->members[i].proc].comms[k->members[i].comm];
		m->instance = 0;
		m->rec.rank = env >= 0 ? env_rank(&a->procs[k->members[i].proc], env) : (int32_t)i;
	}
	k->rank_bit = env >= 0 ? FSS_COMM_INFER_RANK_ENV : FSS_COMM_INFER_RANK_ORDER;
	k->env_kind = env;
	return cls_instances(k, 1);
}

/* The rank of a member joining a class decided before. */
static int cls_rank_join(attach_records_t *a, struct cls *k, struct comm *m, size_t proc)
{
	uint32_t inst = 0;
	int32_t rank;
	uint32_t bit = k->rank_bit;

	if (m->inplace_rank >= 0 && m->gathers_inplace * 2 >= m->gathers) {
		rank = (int32_t)m->inplace_rank;
		bit = FSS_COMM_INFER_RANK_INPLACE;
		for (;; inst++) { /* the first instance with that rank free */
			int taken = 0;
			for (size_t i = 0; i + 1 < k->nmembers && !taken; i++) {
				const struct comm *o = &a->procs[k->members[i].proc].comms[k->members[i].comm];
				taken = o->instance == inst && o->rec.rank == rank;
			}
			if (!taken)
				break;
		}
	} else if (k->rank_bit == FSS_COMM_INFER_RANK_ENV && env_rank(&a->procs[proc], k->env_kind) >= 0) {
		rank = env_rank(&a->procs[proc], k->env_kind);
	} else {
		rank = (int32_t)(k->nmembers - 1);
		bit = FSS_COMM_INFER_RANK_ORDER;
	}
	m->instance = inst;
	m->rec.rank = rank;
	m->rec.inferred = bit;
	return cls_instances(k, inst + 1);
}

/* Fill the records of a decided communicator in its process's queue. */
static void comm_patch(attach_records_t *a, struct proc *p, struct comm *m)
{
	for (size_t i = 0; i < m->npatch; i++) {
		struct fss_rec_comm *r = (void *)(p->q + m->patch[i]);
		r->id_hash = m->rec.id_hash;
		r->nranks = m->rec.nranks;
		r->rank = m->rec.rank;
		r->inferred = m->rec.inferred;
		if (i == 0) {
			*r = m->rec;
			if (m->rec.event == FSS_COMM_OBSERVED) {
				uint32_t bits = m->rec.inferred;
				a->st.rank_inplace += !!(bits & FSS_COMM_INFER_RANK_INPLACE);
				a->st.rank_env += !!(bits & FSS_COMM_INFER_RANK_ENV);
				a->st.rank_order += !!(bits & FSS_COMM_INFER_RANK_ORDER);
				a->st.members_guessed += !!(bits & FSS_COMM_INFER_MEMBERS);
			}
		}
	}
	free(m->patch);
	m->patch = NULL;
	m->npatch = m->patch_cap = 0;
	free(m->sigs);
	m->sigs = NULL;
	m->nsigs = m->sigs_cap = 0;
	free(m->order);
	free(m->order_ns);
	m->order = m->order_ns = NULL;
	m->norder = 0;
	m->state = COMM_DECIDED;
}

static struct comm *member_comm(attach_records_t *a, const struct member *m)
{
	return &a->procs[m->proc].comms[m->comm];
}

/* Does c (guessed ranks, one instance) look like the other dimension of
 * the device mesh whose shard dimension s was split into instances (HSDP:
 * replicas all-reduce what the shard groups reduce-scattered)? The same
 * processes, m instances of equal size in s, and most of c's calls
 * AllReduces of the sizes s reduce-scatters. */
static int mesh_of(attach_records_t *a, const struct cls *c, const struct cls *sh)
{
	if (sh == c || sh->ninstances < 2 || sh->rank_bit != FSS_COMM_INFER_RANK_INPLACE || sh->nmembers != c->nmembers)
		return 0;
	for (size_t i = 0; i < c->nmembers; i++)
		if (!cls_has_proc(sh, c->members[i].proc))
			return 0;
	for (uint32_t i = 0; i < sh->ninstances; i++) {
		size_t n = 0;
		for (size_t k = 0; k < sh->nmembers; k++)
			n += member_comm(a, &sh->members[k])->instance == i;
		if (n * sh->ninstances != sh->nmembers)
			return 0;
	}
	uint64_t matched = 0;
	for (size_t i = 0; i < c->nsigs; i++) {
		const struct sig *x = &c->sigs[i];
		if (x->op != FSS_OP_ALLREDUCE)
			continue;
		for (size_t k = 0; k < sh->nsigs; k++)
			if (sh->sigs[k].op == FSS_OP_REDUCESCATTER && sh->sigs[k].count == x->count &&
			    sh->sigs[k].dtype == x->dtype) {
				matched += x->n;
				break;
			}
	}
	return matched * 2 > c->sig_calls;
}

/* A class of guessed ranks that is the mesh's other dimension: one
 * instance per rank of the shard groups, its rank the shard group's place
 * (instances are in pid order): still a guess, said by both bits. */
static int cls_mesh(attach_records_t *a, struct cls *c)
{
	if (c->ninstances != 1 || c->rank_bit == FSS_COMM_INFER_RANK_INPLACE)
		return 0;
	for (size_t k = 0; k < a->nclasses; k++) {
		const struct cls *sh = &a->classes[k];
		if (!mesh_of(a, c, sh))
			continue;
		uint32_t per = (uint32_t)(sh->nmembers / sh->ninstances);
		for (size_t i = 0; i < c->nmembers; i++) {
			struct comm *m = member_comm(a, &c->members[i]);
			for (size_t j = 0; j < sh->nmembers; j++) {
				const struct comm *o = member_comm(a, &sh->members[j]);
				if (sh->members[j].proc != c->members[i].proc)
					continue;
				m->instance = (uint32_t)o->rec.rank;
				m->rec.rank = (int32_t)o->instance;
			}
		}
		c->rank_bit = FSS_COMM_INFER_RANK_ORDER;
		return cls_instances(c, per);
	}
	return 0;
}

/* Every undecided OBSERVED communicator: into a class, with its rank. */
static int decide_observed(attach_records_t *a)
{
	size_t first_new = a->nclasses;
	int err = 0;

	for (size_t pi = 0; pi < a->nprocs && !err; pi++) {
		struct proc *p = &a->procs[pi];
		for (size_t ci = 0; ci < p->ncomms && !err; ci++) {
			struct comm *m = &p->comms[ci];
			if (m->state != COMM_OBSERVED)
				continue;
			/* the best class this process is not in yet */
			double best = MATCH_MIN;
			size_t pick = SIZE_MAX;
			uint64_t mc = sig_total(m->sigs, m->nsigs);
			for (size_t k = 0; k < a->nclasses; k++) {
				if (cls_has_proc(&a->classes[k], pi))
					continue;
				double s = sig_overlap(m->sigs, m->nsigs, mc, a->classes[k].sigs, a->classes[k].nsigs,
						       a->classes[k].sig_calls);
				if (s >= best) {
					best = s;
					pick = k;
				}
			}
			if (pick == SIZE_MAX)
				err = cls_new(a, m, &pick);
			if (!err)
				err = cls_add(&a->classes[pick], pi, ci);
			if (!err) {
				m->cls = (int)pick;
				m->rec.rank = -1;
				if (pick < first_new)
					err = cls_rank_join(a, &a->classes[pick], m, pi);
			}
		}
	}
	for (size_t k = first_new; k < a->nclasses && !err; k++)
		err = cls_rank_new(a, &a->classes[k]);
	for (size_t k = first_new; k < a->nclasses && !err; k++)
		err = cls_mesh(a, &a->classes[k]);
	if (err)
		return err;

	/* nranks per instance: its members, raised to its highest rank + 1 */
	for (size_t k = 0; k < a->nclasses; k++) {
		struct cls *c = &a->classes[k];
		for (uint32_t i = 0; i < c->ninstances; i++) {
			int32_t members = 0, top = -1;
			for (size_t j = 0; j < c->nmembers; j++) {
				const struct comm *m = &a->procs[c->members[j].proc].comms[c->members[j].comm];
				if (m->instance != i)
					continue;
				members++;
				if (m->rec.rank > top)
					top = m->rec.rank;
			}
			if (top + 1 > members)
				members = top + 1;
			if (members > c->inst_nranks[i])
				c->inst_nranks[i] = members;
		}
	}
	for (size_t k = 0; k < a->nclasses; k++)
		if ((err = attach_first_call_number(a, &a->classes[k])))
			return err;
	for (size_t pi = 0; pi < a->nprocs; pi++) {
		struct proc *p = &a->procs[pi];
		for (size_t ci = 0; ci < p->ncomms; ci++) {
			struct comm *m = &p->comms[ci];
			if (m->state != COMM_OBSERVED)
				continue;
			struct cls *c = &a->classes[m->cls];
			uint32_t bits = FSS_COMM_INFER_ID | FSS_COMM_INFER_NRANKS_ATTACHED;
			bits |= (size_t)m->cls >= first_new ? c->rank_bit : m->rec.inferred;
			if (c->ninstances > 1)
				bits |= FSS_COMM_INFER_MEMBERS;
			m->rec.id_hash = c->inst_hash[m->instance];
			m->rec.nranks = c->inst_nranks[m->instance];
			m->rec.inferred = bits;
			comm_patch(a, p, m);
		}
	}
	return 0;
}

/* Split children whose parent is decided: the id_hash from the parent's
 * (the agent's key), nranks from the attached processes that made the same
 * child, the rank from the keys (NCCL orders a split's ranks by key, then
 * by parent rank). force: decide now even if a parent member has not made
 * the split yet. */
static int decide_splits(attach_records_t *a, int force)
{
	int changed = 1;

	while (changed) {
		changed = 0;
		for (size_t pi = 0; pi < a->nprocs; pi++) {
			struct proc *p = &a->procs[pi];
			for (size_t ci = 0; ci < p->ncomms; ci++) {
				struct comm *m = &p->comms[ci];
				if (m->state != COMM_SPLIT || p->comms[m->parent].state != COMM_DECIDED)
					continue;
				struct comm *parent = &p->comms[m->parent];
				uint64_t ph = parent->rec.id_hash;
				/* every process with the parent must have made this split */
				int complete = 1;
				for (size_t qi = 0; qi < a->nprocs && complete; qi++)
					for (size_t k = 0; k < a->procs[qi].ncomms; k++) {
						const struct comm *o = &a->procs[qi].comms[k];
						if (o->state == COMM_DECIDED && o->rec.id_hash == ph &&
						    (o->rec.event == FSS_COMM_INIT || o->rec.event == FSS_COMM_SPLIT ||
						     o->rec.event == FSS_COMM_OBSERVED) &&
						    o->splits <= m->split_no && !a->procs[qi].exited)
							complete = 0;
					}
				if (!complete && !force)
					continue;
				uint64_t h = split_hash(ph, m->split_no, m->rec.color);
				/* the children of the same split, in every process */
				int32_t nranks = 0, rank = 0;
				for (size_t qi = 0; qi < a->nprocs; qi++)
					for (size_t k = 0; k < a->procs[qi].ncomms; k++) {
						const struct comm *o = &a->procs[qi].comms[k];
						if (o->parent == SIZE_MAX || o->rec.comm == 0 ||
						    a->procs[qi].comms[o->parent].state != COMM_DECIDED ||
						    a->procs[qi].comms[o->parent].rec.id_hash != ph ||
						    o->split_no != m->split_no || o->rec.color != m->rec.color)
							continue;
						nranks++;
						int32_t ok = o->rec.key, mk = m->rec.key;
						int32_t opr = a->procs[qi].comms[o->parent].rec.rank,
							mpr = parent->rec.rank;
						if (ok < mk || (ok == mk && opr < mpr))
							rank++;
					}
				m->rec.id_hash = h;
				m->rec.nranks = nranks;
				m->rec.rank = rank;
				m->rec.inferred = FSS_COMM_INFER_NRANKS_ATTACHED |
						  (parent->rec.inferred & ~FSS_COMM_INFER_NRANKS_ATTACHED);
				comm_patch(a, p, m);
				changed = 1;
			}
		}
	}
	return 0;
}

static int flush_all(attach_records_t *a)
{
	for (size_t i = 0; i < a->nprocs; i++) {
		int err = attach_records_queue_flush(a, &a->procs[i]);
		if (err)
			return err;
	}
	return 0;
}

int attach_infer_splits(attach_records_t *a)
{
	int err = decide_splits(a, 0);
	return err ? err : flush_all(a);
}

int attach_infer_pass(attach_records_t *a, int force)
{
	a->deciding = 1;
	int err = decide_observed(a);
	if (!err)
		err = decide_splits(a, force);
	if (!err)
		err = flush_all(a);
	a->deciding = 0;
	return err;
}

int attach_records_decide(attach_records_t *a, int final)
{
	if (final || attach_infer_all_ready(a))
		return attach_infer_pass(a, final);
	return 0;
}
