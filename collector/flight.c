/*
 * flight.c - collectives in flight: hangs and mismatches (see flight.h and
 * docs/hangs.md for what each kind of source shows).
 *
 * State, all of it bounded:
 *   per source:  its clock (CLOCK_MONOTONIC -> CLOCK_REALTIME offset, from
 *                the hello and the latest FSS_CLOCK_REALTIME anchor), how it
 *                ended, a window of recent seq numbers (seq -> communicator,
 *                comm_seq), the synchronizes it is inside, what CUPTI has
 *                reported (latest activity, kernels not yet tied);
 *   per source and communicator (struct fl_rank_comm): entered, left, the
 *                last completed call, the open group, the highest comm_seq
 *                whose NCCL kernel completed, a ring of its recent calls;
 *   per communicator (struct fl_comm, by id hash): its members, a window of
 *                comm_seq slots with the distinct signatures issued there,
 *                its first mismatch once one slot left the window.
 * Filling the result reads this state only.
 */
#include "collector/flight.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Recent seq numbers per source: an enter record meets its collective
 * record, and a kernel its call, through this window. */
#define FL_SEQ_WINDOW 1024u
/* Recent calls per source and communicator, by comm_seq. */
#define FL_CALL_RING 64u
/* comm_seq numbers per communicator whose signatures are being compared: a
 * rank more than this far ahead of the slowest one retires the slot. */
#define FL_SIG_WINDOW 64u
/* Distinct signatures kept per comm_seq; more count as `others`. */
#define FL_SIG_GROUPS 4u
/* Synchronizes one source may be inside at once (one per thread). */
#define FL_SYNCS_MAX 8u
/* NCCL kernels (and correlations) waiting to be tied, per source. */
#define FL_UNTIED_MAX 64u
/* Source ids below this are found through a direct index. */
#define FL_DIRECT_MAX (1u << 20)

/* fl_seq.flags */
#define FL_SEQ_SIGNED 1u    /* its signature went to the communicator's window */
#define FL_SEQ_UNCERTAIN 2u /* placed while calls numbered before it were missing: its comm_seq may be off */

struct fl_seq {
	uint64_t seq; /* 0: empty */
	uint64_t comm_seq;
	uint32_t rc; /* index into the source's rank_comms */
	uint32_t group_id;
	uint32_t flags;
	uint32_t reserved;
};

/* One call of a rank on a communicator. */
struct fl_call {
	uint64_t comm_seq; /* 0: empty slot */
	uint64_t seq;
	uint64_t enter_ns; /* host CLOCK_MONOTONIC */
	uint64_t count;
	uint32_t group_id;
	uint8_t op, dtype;
	uint8_t returned;  /* its collective record came */
	uint8_t no_kernel; /* launches no NCCL kernel: count 0, or it failed */
};

struct fl_rank_comm {
	uint64_t handle, id_hash;
	uint32_t comm; /* index into flight.comms */
	int32_t rank, nranks;
	uint32_t open_group;   /* group whose calls returned at enqueue, its ncclGroupEnd not yet */
	uint64_t issued;       /* comm_seq of the latest call counted */
	uint64_t entered;      /* highest comm_seq entered */
	uint64_t left;	       /* highest comm_seq returned (a group's calls: at its group record) */
	uint64_t done_exit_ns; /* host time `left` returned */
	uint8_t done_op;       /* its op */
	uint8_t reserved[7];
	uint64_t group_hi;		    /* highest comm_seq of the open group */
	uint64_t gpu_done;		    /* highest comm_seq whose NCCL kernel CUPTI reported */
	uint64_t sync_n;		    /* `left` when the oldest open synchronize was entered */
	struct fl_call calls[FL_CALL_RING]; /* by comm_seq % FL_CALL_RING */
};

struct fl_sync {
	uint32_t sync_id;
	uint32_t reserved;
	uint64_t enter_ns;
};

struct fl_untied {
	uint32_t corr; /* CUPTI correlation id, 0 empty */
	uint32_t reserved;
	uint64_t seq; /* correlations: the collective; kernels: 0 */
};

struct fl_source {
	const struct source *src;
	uint32_t id;
	int has_hello;
	int64_t rt_offset;	 /* CLOCK_REALTIME - CLOCK_MONOTONIC */
	int ended;		 /* process_end or process_exit */
	uint64_t end_ns;	 /* host time it ended */
	int has_enter, has_gpu;	 /* enter records; GPU intervals */
	int cupti_tied;		 /* an NCCL kernel was tied to one of its calls */
	uint64_t seen_seqs;	 /* calls with a seq placed */
	int numbers_off;	 /* --keep summary left calls out: its comm_seq numbers count what the trace
				    holds, and are not compared */
	uint64_t gpu_latest_end; /* latest end of any GPU activity, host base */
	uint64_t untied_start;	 /* latest start of an NCCL kernel not tied to a call, host base */
	struct fl_rank_comm *rcs;
	size_t nrcs, caprcs;
	size_t last_rc;
	struct fl_seq seqs[FL_SEQ_WINDOW];
	struct fl_sync syncs[FL_SYNCS_MAX];
	uint32_t nsyncs;
	uint32_t untied_at, corr_at;
	struct fl_untied untied[FL_UNTIED_MAX]; /* kernels with no seq yet */
	struct fl_untied corrs[FL_UNTIED_MAX];	/* correlation records no kernel used yet */
};

/* One rank's place in the signature of a comm_seq. */
struct fl_sig_group {
	struct analysis_signature sig;
	uint32_t n;
	uint32_t kept; /* ranks[] used */
	int32_t ranks[ANALYSIS_FLIGHT_RANKS_MAX];
	int32_t min_rank;
	uint32_t min_rank_source; /* trace source of min_rank */
};

struct fl_slot {
	uint64_t comm_seq; /* 0: empty */
	uint64_t first_rt; /* CLOCK_REALTIME of its first report */
	uint32_t ngroups, others;
	struct fl_sig_group g[FL_SIG_GROUPS];
};

struct fl_member {
	uint32_t source; /* index into flight.srcs */
	uint32_t rc;
};

struct fl_comm {
	uint64_t id_hash;
	int32_t nranks;
	uint32_t reserved;
	struct fl_member *members;
	size_t nmembers, capmembers;
	uint64_t p2p_from;     /* lowest comm_seq of a Send / Recv on it, 0 none: later numbers are not compared */
	struct fl_slot *slots; /* [FL_SIG_WINDOW], made at its first report */
	uint64_t mismatched;   /* slots retired with a mismatch */
	int has_first;
	uint64_t first_rt;
	struct analysis_mismatch first; /* the earliest retired mismatch */
};

struct flight {
	struct fl_source **srcs;
	size_t nsrcs, capsrcs;
	struct fl_source **direct;
	size_t ndirect;
	struct fl_source *last;
	struct fl_comm *comms;
	size_t ncomms, capcomms;
	size_t last_comm;
};

/* ---- life cycle ----------------------------------------------------------- */

flight_t *flight_new(void)
{
	return calloc(1, sizeof(struct flight));
}

void flight_free(flight_t *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nsrcs; i++) {
		free(f->srcs[i]->rcs);
		free(f->srcs[i]);
	}
	for (size_t i = 0; i < f->ncomms; i++) {
		free(f->comms[i].members);
		free(f->comms[i].slots);
	}
	free(f->srcs);
	free(f->direct);
	free(f->comms);
	free(f);
}

size_t flight_footprint(const flight_t *f)
{
	size_t n = sizeof(*f) + f->capsrcs * sizeof(*f->srcs) + f->ndirect * sizeof(*f->direct) +
		   f->capcomms * sizeof(*f->comms);

	for (size_t i = 0; i < f->nsrcs; i++)
		n += sizeof(*f->srcs[i]) + f->srcs[i]->caprcs * sizeof(*f->srcs[i]->rcs);
	for (size_t i = 0; i < f->ncomms; i++)
		n += f->comms[i].capmembers * sizeof(struct fl_member) +
		     (f->comms[i].slots ? FL_SIG_WINDOW * sizeof(struct fl_slot) : 0);
	return n;
}

/* ---- lookups -------------------------------------------------------------- */

static struct fl_source *source_get(flight_t *f, const struct source *src)
{
	uint32_t id = src->id;
	struct fl_source *fs = NULL;

	if (f->last && f->last->id == id)
		return f->last;
	if (id < FL_DIRECT_MAX) {
		if (id < f->ndirect && f->direct[id])
			return f->last = f->direct[id];
		if (id >= f->ndirect) {
			size_t n = f->ndirect ? f->ndirect : 16;
			struct fl_source **v;

			while (n <= id)
				n *= 2;
			v = realloc(f->direct, n * sizeof(*v));
			if (!v)
				return NULL;
			memset(v + f->ndirect, 0, (n - f->ndirect) * sizeof(*v));
			f->direct = v;
			f->ndirect = n;
		}
	} else {
		for (size_t i = 0; i < f->nsrcs; i++)
			if (f->srcs[i]->id == id)
				return f->last = f->srcs[i];
	}
	if (f->nsrcs == f->capsrcs) {
		size_t cap = f->capsrcs ? 2 * f->capsrcs : 16;
		struct fl_source **v = realloc(f->srcs, cap * sizeof(*v));

		if (!v)
			return NULL;
		f->srcs = v;
		f->capsrcs = cap;
	}
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return NULL;
	fs->id = id;
	fs->src = src;
	f->srcs[f->nsrcs++] = fs;
	if (id < FL_DIRECT_MAX)
		f->direct[id] = fs;
	return f->last = fs;
}

static size_t source_index(const flight_t *f, const struct fl_source *fs)
{
	for (size_t i = 0; i < f->nsrcs; i++)
		if (f->srcs[i] == fs)
			return i;
	return SIZE_MAX;
}

static struct fl_comm *comm_get(flight_t *f, uint64_t id_hash, int32_t nranks, uint32_t *index)
{
	if (f->last_comm < f->ncomms && f->comms[f->last_comm].id_hash == id_hash) {
		*index = (uint32_t)f->last_comm;
		return &f->comms[f->last_comm];
	}
	for (size_t i = 0; i < f->ncomms; i++)
		if (f->comms[i].id_hash == id_hash) {
			f->last_comm = i;
			*index = (uint32_t)i;
			return &f->comms[i];
		}
	if (f->ncomms == f->capcomms) {
		size_t cap = f->capcomms ? 2 * f->capcomms : 16;
		struct fl_comm *v = realloc(f->comms, cap * sizeof(*v));

		if (!v)
			return NULL;
		f->comms = v;
		f->capcomms = cap;
	}
	f->comms[f->ncomms] = (struct fl_comm){.id_hash = id_hash, .nranks = nranks};
	f->last_comm = f->ncomms;
	*index = (uint32_t)f->ncomms;
	return &f->comms[f->ncomms++];
}

/* The source's state for communicator handle `handle` as its latest comm
 * record made it; NULL when the handle is not known (or no memory: *oom). */
static struct fl_rank_comm *rank_comm_get(flight_t *f, struct fl_source *fs, uint64_t handle, int *oom)
{
	const struct source_comm *sc;
	struct fl_comm *c;
	struct fl_rank_comm *rc;
	uint32_t ci;

	if (fs->last_rc < fs->nrcs && fs->rcs[fs->last_rc].handle == handle) {
		rc = &fs->rcs[fs->last_rc];
		sc = source_comm_find(fs->src, handle);
		if (sc && sc->id_hash == rc->id_hash)
			return rc;
	}
	sc = source_comm_find(fs->src, handle);
	if (!sc)
		return NULL;
	for (size_t i = fs->nrcs; i-- > 0;)
		if (fs->rcs[i].handle == handle && fs->rcs[i].id_hash == sc->id_hash) {
			fs->last_rc = i;
			return &fs->rcs[i];
		}
	c = comm_get(f, sc->id_hash, sc->nranks, &ci);
	if (!c)
		goto oom;
	if (c->nmembers == c->capmembers) {
		size_t cap = c->capmembers ? 2 * c->capmembers : 8;
		struct fl_member *v = realloc(c->members, cap * sizeof(*v));

		if (!v)
			goto oom;
		c->members = v;
		c->capmembers = cap;
	}
	if (fs->nrcs == fs->caprcs) {
		size_t cap = fs->caprcs ? 2 * fs->caprcs : 4;
		struct fl_rank_comm *v = realloc(fs->rcs, cap * sizeof(*v));

		if (!v)
			goto oom;
		fs->rcs = v;
		fs->caprcs = cap;
	}
	rc = &fs->rcs[fs->nrcs];
	memset(rc, 0, sizeof(*rc));
	rc->handle = handle;
	rc->id_hash = sc->id_hash;
	rc->comm = ci;
	rc->rank = sc->rank;
	rc->nranks = sc->nranks;
	/* observed (attach): numbered from its first recorded call's number on the communicator */
	rc->issued = sc->first_call > 1 ? sc->first_call - 1 : 0;
	rc->entered = rc->left = rc->issued;
	c->members[c->nmembers++] =
	    (struct fl_member){.source = (uint32_t)source_index(f, fs), .rc = (uint32_t)fs->nrcs};
	fs->last_rc = fs->nrcs;
	return &fs->rcs[fs->nrcs++];
oom:
	*oom = 1;
	return NULL;
}

static uint64_t to_rt(const struct fl_source *fs, uint64_t mono)
{
	return mono ? mono + (uint64_t)fs->rt_offset : 0; /* wraps: two's complement */
}

static const struct fl_call *call_at(const struct fl_rank_comm *rc, uint64_t n)
{
	const struct fl_call *c = &rc->calls[n % FL_CALL_RING];

	return c->comm_seq == n ? c : NULL;
}

/* Call n, or when the ring has moved past it, the oldest call it keeps
 * after n (its enter is later than n's: a wait measured from it is short,
 * never long). NULL when none. */
static const struct fl_call *call_from(const struct fl_rank_comm *rc, uint64_t n)
{
	const struct fl_call *best = call_at(rc, n);

	if (best)
		return best;
	for (unsigned i = 0; i < FL_CALL_RING; i++) {
		const struct fl_call *c = &rc->calls[i];

		if (c->comm_seq > n && (!best || c->comm_seq < best->comm_seq))
			best = c;
	}
	return best;
}

/* ---- signatures ----------------------------------------------------------- */

static int op_has_root(uint8_t op)
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
	if (op_has_root(x->op) && x->root >= 0 && y->root >= 0 && x->root != y->root)
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
static int sig_report(struct fl_comm *c, uint64_t comm_seq, int32_t rank, uint32_t source,
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

/* ---- records ---------------------------------------------------------------- */

/* What a call's first record says of it. */
struct fl_args {
	uint64_t seq, comm, count, enter_ns;
	uint32_t group_id;
	int32_t peer;
	uint8_t op, dtype, redop;
};

/* Close the open group of rc as left (its ncclGroupEnd must have returned:
 * the thread issued something else). */
static void group_close(struct fl_rank_comm *rc, uint64_t exit_ns)
{
	const struct fl_call *c;

	if (!rc->open_group)
		return;
	if (rc->group_hi > rc->left) {
		rc->left = rc->group_hi;
		rc->done_exit_ns = exit_ns;
		c = call_at(rc, rc->group_hi);
		rc->done_op = c ? c->op : 0;
	}
	rc->open_group = 0;
	rc->group_hi = 0;
}

/* The call's entry in the seq window and on its communicator: found when an
 * earlier record of it (its enter) placed it, else placed now. NULL when its
 * communicator is not known. */
static struct fl_call *call_place(flight_t *f, struct fl_source *fs, const struct fl_args *a, struct fl_rank_comm **rcp,
				  struct fl_seq **seqp, int *oom)
{
	struct fl_seq *e = a->seq ? &fs->seqs[a->seq % FL_SEQ_WINDOW] : NULL;
	struct fl_rank_comm *rc;
	struct fl_call *c;
	uint64_t n;

	if (e && e->seq == a->seq && e->rc < fs->nrcs) {
		rc = &fs->rcs[e->rc];
		*rcp = rc;
		*seqp = e;
		c = &rc->calls[e->comm_seq % FL_CALL_RING];
		return c->comm_seq == e->comm_seq ? c : NULL;
	}
	rc = rank_comm_get(f, fs, a->comm, oom);
	if (!rc)
		return NULL;
	if (rc->open_group && a->group_id != rc->open_group)
		group_close(rc, a->enter_ns);
	n = ++rc->issued;
	if (a->seq)
		fs->seen_seqs++;
	if (e) {
		/* seq numbers count every call from 1: fewer placed than this one's
		 * number means calls before it are missing (lost, or before the
		 * trace starts), or still to come (another thread's): either way its
		 * comm_seq may differ from the one its peers give the same call */
		*e = (struct fl_seq){.seq = a->seq,
				     .comm_seq = n,
				     .rc = (uint32_t)(rc - fs->rcs),
				     .group_id = a->group_id,
				     .flags = fs->seen_seqs < a->seq ? FL_SEQ_UNCERTAIN : 0};
		*seqp = e;
	} else {
		*seqp = NULL;
	}
	*rcp = rc;
	c = &rc->calls[n % FL_CALL_RING];
	*c = (struct fl_call){.comm_seq = n,
			      .seq = a->seq,
			      .enter_ns = a->enter_ns,
			      .count = a->count,
			      .group_id = a->group_id,
			      .op = a->op,
			      .dtype = a->dtype};
	if (n > rc->entered)
		rc->entered = n;
	return c;
}

static int call_sign(flight_t *f, struct fl_source *fs, struct fl_rank_comm *rc, struct fl_seq *e,
		     const struct fl_call *c, const struct fl_args *a)
{
	struct analysis_signature sig = {.count = a->count,
					 .root = op_has_root(a->op) ? a->peer : -1,
					 .op = a->op,
					 .dtype = a->dtype,
					 .redop = a->redop};

	if (!c || (e && (e->flags & (FL_SEQ_SIGNED | FL_SEQ_UNCERTAIN))) || fs->numbers_off)
		return 0;
	if (e)
		e->flags |= FL_SEQ_SIGNED;
	return sig_report(&f->comms[rc->comm], c->comm_seq, rc->rank, fs->id, &sig, to_rt(fs, a->enter_ns));
}

static int on_enter(flight_t *f, struct fl_source *fs, const struct fss_rec_enter *r)
{
	struct fl_rank_comm *rc = NULL;
	struct fl_seq *e = NULL;
	struct fl_call *c;
	int oom = 0;

	fs->has_enter = 1;
	if (r->kind != FSS_ENTER_COLLECTIVE) {
		if (fs->nsyncs == FL_SYNCS_MAX)
			return 0;
		if (fs->nsyncs == 0)
			for (size_t i = 0; i < fs->nrcs; i++)
				fs->rcs[i].sync_n = fs->rcs[i].left;
		fs->syncs[fs->nsyncs++] = (struct fl_sync){.sync_id = r->sync_id, .enter_ns = r->enter_ns};
		return 0;
	}
	struct fl_args a = {.seq = r->seq,
			    .comm = r->comm,
			    .count = r->count,
			    .enter_ns = r->enter_ns,
			    .group_id = r->group_id,
			    .peer = r->peer,
			    .op = r->op,
			    .dtype = r->dtype,
			    .redop = r->redop};
	c = call_place(f, fs, &a, &rc, &e, &oom);
	if (oom)
		return -ENOMEM;
	return rc ? call_sign(f, fs, rc, e, c, &a) : 0;
}

static void on_sync_exit(struct fl_source *fs, const struct fss_rec_sync_exit *x)
{
	for (uint32_t i = 0; i < fs->nsyncs; i++) {
		if (fs->syncs[i].sync_id != x->sync_id)
			continue;
		fs->syncs[i] = fs->syncs[--fs->nsyncs];
		break;
	}
	if (fs->nsyncs == 0)
		for (size_t i = 0; i < fs->nrcs; i++)
			fs->rcs[i].sync_n = 0;
}

static int on_collective(flight_t *f, struct fl_source *fs, const struct fss_rec_collective *r)
{
	struct fl_rank_comm *rc = NULL;
	struct fl_seq *e = NULL;
	struct fl_call *c;
	int oom = 0, rc_sign;
	struct fl_args a = {.seq = r->seq,
			    .comm = r->comm,
			    .count = r->count,
			    .enter_ns = r->enter_ns,
			    .group_id = r->group_id,
			    .peer = r->peer,
			    .op = r->op,
			    .dtype = r->dtype,
			    .redop = r->redop};

	c = call_place(f, fs, &a, &rc, &e, &oom);
	if (oom)
		return -ENOMEM;
	if (!rc)
		return 0;
	rc_sign = call_sign(f, fs, rc, e, c, &a);
	if (rc_sign < 0)
		return rc_sign;
	if (!c)
		return 0; /* the ring moved past it: too old to change what is in flight */
	c->returned = 1;
	c->no_kernel = r->count == 0 || r->result != 0;
	if (r->group_id == 0) {
		if (c->comm_seq > rc->left) {
			rc->left = c->comm_seq;
			rc->done_exit_ns = r->exit_ns;
			rc->done_op = r->op;
		}
	} else {
		rc->open_group = r->group_id;
		if (c->comm_seq > rc->group_hi)
			rc->group_hi = c->comm_seq;
	}
	return 0;
}

static void on_group(struct fl_source *fs, const struct fss_rec_group *g)
{
	for (size_t i = 0; i < fs->nrcs; i++)
		if (fs->rcs[i].open_group == g->group_id)
			group_close(&fs->rcs[i], g->end_exit_ns);
}

/* CUPTI reported the kernel of the call seq (or of the group it opens):
 * it completed, and every call before it on its communicator. */
static void kernel_done(struct fl_source *fs, uint64_t seq)
{
	const struct fl_seq *e = &fs->seqs[seq % FL_SEQ_WINDOW];

	if (e->seq != seq || e->rc >= fs->nrcs)
		return;
	fs->cupti_tied = 1;
	if (!e->group_id) {
		if (e->comm_seq > fs->rcs[e->rc].gpu_done)
			fs->rcs[e->rc].gpu_done = e->comm_seq;
		return;
	}
	/* a group launches at ncclGroupEnd, tied to its first seq */
	for (size_t i = 0; i < fs->nrcs; i++) {
		struct fl_rank_comm *rc = &fs->rcs[i];

		for (unsigned j = 0; j < FL_CALL_RING; j++)
			if (rc->calls[j].comm_seq && rc->calls[j].group_id == e->group_id &&
			    rc->calls[j].comm_seq > rc->gpu_done)
				rc->gpu_done = rc->calls[j].comm_seq;
	}
}

static uint64_t untied_take(struct fl_untied *v, uint32_t corr)
{
	for (unsigned i = 0; i < FL_UNTIED_MAX; i++)
		if (v[i].corr == corr) {
			uint64_t seq = v[i].seq;

			v[i].corr = 0;
			return seq ? seq : 1;
		}
	return 0;
}

static void on_gpu(struct fl_source *fs, const struct fss_rec_gpu_interval *g)
{
	uint64_t off = fs->src->have_cupti_anchor ? (uint64_t)fs->src->cupti_offset : 0;
	uint64_t end = fs->src->have_cupti_anchor ? g->end_ns + off : fs->src->last_ns;
	uint64_t seq = g->collective_seq;

	fs->has_gpu = 1;
	if (end > fs->gpu_latest_end)
		fs->gpu_latest_end = end;
	if (g->kind == FSS_GPU_COMPUTE)
		return;
	if (!seq && g->correlation_id) {
		uint64_t s = untied_take(fs->corrs, g->correlation_id);

		seq = s > 1 ? s : 0;
	}
	if (seq) {
		kernel_done(fs, seq);
		return;
	}
	if (g->kind != FSS_GPU_COMM)
		return;
	/* an NCCL kernel CUPTI could not tie (yet): a call launched before it
	 * started may be the one it ran, so no call before it is taken as stuck */
	uint64_t start = fs->src->have_cupti_anchor ? g->start_ns + off : fs->src->last_ns;

	if (start > fs->untied_start)
		fs->untied_start = start;
	if (g->correlation_id) {
		fs->untied[fs->untied_at] = (struct fl_untied){.corr = g->correlation_id};
		fs->untied_at = (fs->untied_at + 1) % FL_UNTIED_MAX;
	}
}

static void on_correlation(struct fl_source *fs, const struct fss_rec_correlation *c)
{
	if (!c->collective_seq || !c->correlation_id)
		return;
	if (untied_take(fs->untied, c->correlation_id)) {
		kernel_done(fs, c->collective_seq);
		return;
	}
	fs->corrs[fs->corr_at] = (struct fl_untied){.corr = c->correlation_id, .seq = c->collective_seq};
	fs->corr_at = (fs->corr_at + 1) % FL_UNTIED_MAX;
}

int flight_feed(flight_t *f, const struct source *src, const struct fss_record_head *rec)
{
	struct fl_source *fs;

	if (!src)
		return 0;
	switch (rec->type) {
	case FSS_REC_PROCESS_HELLO:
	case FSS_REC_CLOCK_ANCHOR:
	case FSS_REC_ENTER:
	case FSS_REC_SYNC_EXIT:
	case FSS_REC_COLLECTIVE:
	case FSS_REC_GROUP:
	case FSS_REC_GPU_INTERVAL:
	case FSS_REC_CORRELATION:
	case FSS_REC_PROCESS_END:
	case FSS_REC_PROCESS_EXIT:
	case FSS_REC_STEP_SUMMARY:
		break;
	default:
		return 0;
	}
	fs = source_get(f, src);
	if (!fs)
		return -ENOMEM;
	switch (rec->type) {
	case FSS_REC_PROCESS_HELLO: {
		const struct fss_rec_process_hello *h = (const void *)rec;

		fs->has_hello = 1;
		fs->rt_offset = (int64_t)(h->realtime_ns - h->mono_ns);
		if (h->features & FSS_FEATURE_ENTER)
			fs->has_enter = 1;
		return 0;
	}
	case FSS_REC_CLOCK_ANCHOR: {
		const struct fss_rec_clock_anchor *a = (const void *)rec;

		if (a->domain == FSS_CLOCK_REALTIME && a->mono_ns)
			fs->rt_offset = (int64_t)(a->other_ns - a->mono_ns);
		return 0;
	}
	case FSS_REC_ENTER:
		return on_enter(f, fs, (const void *)rec);
	case FSS_REC_SYNC_EXIT:
		on_sync_exit(fs, (const void *)rec);
		return 0;
	case FSS_REC_COLLECTIVE:
		return on_collective(f, fs, (const void *)rec);
	case FSS_REC_GROUP:
		on_group(fs, (const void *)rec);
		return 0;
	case FSS_REC_GPU_INTERVAL:
		on_gpu(fs, (const void *)rec);
		return 0;
	case FSS_REC_CORRELATION:
		on_correlation(fs, (const void *)rec);
		return 0;
	case FSS_REC_STEP_SUMMARY:
		/* --keep summary left this step's calls out of the trace */
		if (((const struct fss_rec_step_summary *)rec)->collectives)
			fs->numbers_off = 1;
		return 0;
	case FSS_REC_PROCESS_END:
		if (!fs->ended || !fs->end_ns)
			fs->end_ns = ((const struct fss_rec_process_end *)rec)->at_ns;
		fs->ended = 1;
		return 0;
	case FSS_REC_PROCESS_EXIT:
		/* the session's clock, taken as the process's (the session that
		 * reaps a process runs on its host) */
		if (!fs->ended)
			fs->end_ns = ((const struct fss_rec_process_exit *)rec)->at_ns;
		fs->ended = 1;
		return 0;
	default:
		return 0;
	}
}

/* ---- the result ------------------------------------------------------------- */

/* How one rank waits on one communicator. */
struct fl_wait {
	uint64_t n;	  /* comm_seq it waits in, 0: it does not */
	uint64_t waited;  /* ns, to now, or to its end */
	uint8_t evidence; /* enum analysis_wait_evidence */
	uint8_t ended;	  /* its process ended */
	uint8_t reserved[6];
	const struct fl_source *fs;
	const struct fl_rank_comm *rc;
};

static uint64_t waited_since(const struct fl_source *fs, uint64_t start_mono, uint64_t now)
{
	uint64_t start = to_rt(fs, start_mono);
	uint64_t until = fs->ended && fs->end_ns ? to_rt(fs, fs->end_ns) : now;

	return start && until > start ? until - start : 0;
}

static void rank_wait(const struct fl_source *fs, const struct fl_rank_comm *rc, uint64_t now, struct fl_wait *w)
{
	const struct fl_call *c;
	uint64_t start = 0;

	memset(w, 0, sizeof(*w));
	w->fs = fs;
	w->rc = rc;
	w->ended = (uint8_t)fs->ended;
	/* host: entered, not returned */
	if (rc->entered > rc->left && (c = call_from(rc, rc->left + 1))) {
		w->n = rc->left + 1;
		w->evidence = ANALYSIS_WAIT_HOST;
		start = c->enter_ns;
	}
	/* GPU: returned at enqueue, its kernel not reported while CUPTI reported
	 * activity after its launch (and no kernel it could not tie since) */
	if (fs->cupti_tied) {
		uint64_t p = rc->gpu_done + 1;

		while (p <= rc->left && (c = call_at(rc, p)) && c->no_kernel)
			p++;
		c = p <= rc->left ? call_from(rc, p) : NULL;
		if (c && (!w->n || p < w->n) && fs->gpu_latest_end > c->enter_ns && fs->untied_start < c->enter_ns) {
			w->n = p;
			w->evidence = ANALYSIS_WAIT_GPU;
			start = c->enter_ns;
		}
	}
	/* a synchronize entered after it, not returned, not known complete */
	if (fs->nsyncs && rc->sync_n && rc->sync_n <= rc->left && (!w->n || rc->sync_n < w->n) &&
	    !(fs->cupti_tied && rc->gpu_done >= rc->sync_n)) {
		uint64_t oldest = fs->syncs[0].enter_ns;

		for (uint32_t i = 1; i < fs->nsyncs; i++)
			if (fs->syncs[i].enter_ns < oldest)
				oldest = fs->syncs[i].enter_ns;
		w->n = rc->sync_n;
		w->evidence = ANALYSIS_WAIT_SYNC;
		start = oldest;
	}
	if (w->n)
		w->waited = waited_since(fs, start, now);
}

static uint64_t trace_end(const flight_t *f)
{
	uint64_t end = 0;

	for (size_t i = 0; i < f->nsrcs; i++) {
		const struct fl_source *fs = f->srcs[i];
		uint64_t t = fs->has_hello ? to_rt(fs, fs->src->last_ns) : 0;

		if (t > end)
			end = t;
		if (fs->has_hello && fs->src->has_exit && (t = to_rt(fs, fs->src->exit_at_ns)) > end)
			end = t;
	}
	return end;
}

static void flight_rank_fill(struct analysis_flight_rank *r, const struct fl_wait *w)
{
	memset(r, 0, sizeof(*r));
	r->rank = w->rc->rank;
	r->global_rank = w->fs->src->rank;
	r->source = w->fs->id;
	r->pid = w->fs->src->pid;
}

static int wait_n_cmp(const void *a, const void *b)
{
	const struct fl_wait *x = a, *y = b;

	if (x->n != y->n)
		return (x->n > y->n) - (x->n < y->n);
	return (x->rc->rank > y->rc->rank) - (x->rc->rank < y->rc->rank);
}

static int flight_rank_cmp(const void *a, const void *b)
{
	const struct analysis_flight_rank *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The hang of communicator c, if one: the lowest comm_seq some rank waits
 * in for longer than the timeout while others have not entered it (or every
 * rank waits in it). w[0..n) are its members' waits. */
static int comm_hang(const struct fl_comm *c, struct fl_wait *w, size_t n, uint64_t timeout, uint64_t now,
		     struct analysis_hang *h)
{
	qsort(w, n, sizeof(*w), wait_n_cmp);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		uint64_t longest = 0, N = w[i].n;

		if (!N) {
			i++;
			continue;
		}
		while (j < n && w[j].n == N) {
			if (w[j].waited > longest)
				longest = w[j].waited;
			j++;
		}
		size_t nwait = 0, nmiss = 0, nended = 0;

		for (size_t k = i; k < j; k++) {
			/* a rank that ended inside it waited until its end: still
			 * waiting as far as the trace tells when that was long */
			if (w[k].ended && w[k].waited <= timeout)
				nended++;
			else
				nwait++;
		}
		for (size_t k = 0; k < n; k++)
			if (w[k].n != N && w[k].rc->entered < N)
				nmiss++;
		if (longest > timeout && nwait && (nmiss || nwait + nended == n)) {
			memset(h, 0, sizeof(*h));
			h->comm_id = c->id_hash;
			h->comm_seq = N;
			h->nranks = c->nranks;
			h->waited_ns = longest;
			for (size_t k = i; k < j; k++) {
				const struct fl_call *call;

				if (w[k].ended && w[k].waited <= timeout)
					continue;
				if (!h->op && (call = call_at(w[k].rc, N))) {
					h->op = call->op;
					h->dtype = call->dtype;
					h->count = call->count;
				}
				if (h->nwaiting < ANALYSIS_FLIGHT_RANKS_MAX) {
					struct analysis_flight_rank *r = &h->waiting[h->nwaiting];

					flight_rank_fill(r, &w[k]);
					r->since_ns = w[k].waited;
					r->last_seq = N;
					r->last_op = (call = call_at(w[k].rc, N)) ? call->op : 0;
					r->evidence = w[k].evidence;
				}
				h->nwaiting++;
			}
			for (size_t k = 0; k < n; k++) {
				const struct fl_rank_comm *rc = w[k].rc;

				if (w[k].n == N || rc->entered >= N)
					continue;
				if (h->nmissing < ANALYSIS_FLIGHT_RANKS_MAX) {
					struct analysis_flight_rank *r = &h->missing[h->nmissing];
					uint64_t done = to_rt(w[k].fs, rc->done_exit_ns);

					flight_rank_fill(r, &w[k]);
					r->last_seq = rc->left;
					r->last_op = rc->left ? rc->done_op : 0;
					r->since_ns = rc->left && done && now > done ? now - done : 0;
				}
				h->nmissing++;
			}
			qsort(h->waiting,
			      h->nwaiting < ANALYSIS_FLIGHT_RANKS_MAX ? h->nwaiting : ANALYSIS_FLIGHT_RANKS_MAX,
			      sizeof(h->waiting[0]), flight_rank_cmp);
			qsort(h->missing,
			      h->nmissing < ANALYSIS_FLIGHT_RANKS_MAX ? h->nmissing : ANALYSIS_FLIGHT_RANKS_MAX,
			      sizeof(h->missing[0]), flight_rank_cmp);
			return 1;
		}
		i = j;
	}
	return 0;
}

static void hang_keep(struct analysis_flight *out, const struct analysis_hang *h)
{
	uint32_t at = out->nhangs;

	out->hangs_total++;
	while (at > 0 && out->hangs[at - 1].waited_ns < h->waited_ns)
		at--;
	if (at >= ANALYSIS_HANGS_MAX)
		return;
	uint32_t n = out->nhangs < ANALYSIS_HANGS_MAX ? out->nhangs : ANALYSIS_HANGS_MAX - 1;

	memmove(&out->hangs[at + 1], &out->hangs[at], (n - at) * sizeof(*h));
	out->hangs[at] = *h;
	if (out->nhangs < ANALYSIS_HANGS_MAX)
		out->nhangs++;
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

/* How source fs is itself waiting in a collective of a communicator other
 * than comm_id, 0 when it is not: a rank blocked there cannot enter the
 * hang's collective, so it is not what that hang waits for. */
static uint8_t waits_elsewhere(const struct fl_source *fs, uint64_t comm_id, uint64_t timeout, uint64_t now)
{
	for (size_t i = 0; i < fs->nrcs; i++) {
		struct fl_wait w;

		if (fs->rcs[i].id_hash == comm_id)
			continue;
		rank_wait(fs, &fs->rcs[i], now, &w);
		/* as comm_hang counts waits: a rank that ended inside a call after
		 * waiting past the timeout was still waiting as far as the trace tells */
		if (w.n && (!w.ended || w.waited > timeout))
			return w.evidence;
	}
	return 0;
}

/* Mark the hangs whose missing ranks all wait in other collectives (the
 * cascade of a hang elsewhere: in an HSDP job a shard group's hang leaves
 * the replicate groups' ranks waiting for ranks that are themselves stuck),
 * and list the hangs that have a free missing rank first. */
static void hangs_order(const flight_t *f, struct analysis_flight *out)
{
	for (uint32_t i = 0; i < out->nhangs; i++) {
		struct analysis_hang *h = &out->hangs[i];
		uint32_t listed = h->nmissing < ANALYSIS_FLIGHT_RANKS_MAX ? h->nmissing : ANALYSIS_FLIGHT_RANKS_MAX;
		uint32_t blocked = 0;

		for (uint32_t k = 0; k < listed; k++) {
			struct analysis_flight_rank *r = &h->missing[k];

			r->evidence = 0;
			for (size_t j = 0; j < f->nsrcs; j++)
				if (f->srcs[j]->id == r->source)
					r->evidence = waits_elsewhere(f->srcs[j], h->comm_id, out->timeout_ns,
								     out->now_realtime_ns);
			blocked += r->evidence ? 1u : 0u;
		}
		h->cascade = listed && blocked == listed && listed == h->nmissing;
	}
	/* insertion sort: cause first, then the longest wait (at most ANALYSIS_HANGS_MAX) */
	for (uint32_t i = 1; i < out->nhangs; i++) {
		struct analysis_hang t = out->hangs[i];
		uint32_t j = i;

		while (j > 0 && (out->hangs[j - 1].cascade > t.cascade ||
				 (out->hangs[j - 1].cascade == t.cascade && out->hangs[j - 1].waited_ns < t.waited_ns))) {
			out->hangs[j] = out->hangs[j - 1];
			j--;
		}
		out->hangs[j] = t;
	}
}

int flight_fill(const flight_t *f, uint64_t timeout_ns, uint64_t now_realtime_ns, struct analysis_flight *out)
{
	struct fl_wait *w = NULL;
	size_t capw = 0;
	uint64_t rts[ANALYSIS_MISMATCHES_MAX] = {0};

	memset(out, 0, sizeof(*out));
	out->timeout_ns = timeout_ns ? timeout_ns : ANALYSIS_DEFAULT_HANG_TIMEOUT_NS;
	out->now_realtime_ns = now_realtime_ns ? now_realtime_ns : trace_end(f);
	for (size_t i = 0; i < f->nsrcs; i++) {
		out->sources_enter += f->srcs[i]->has_enter ? 1u : 0u;
		out->sources_cupti += f->srcs[i]->has_gpu ? 1u : 0u;
	}
	for (size_t ci = 0; ci < f->ncomms; ci++) {
		const struct fl_comm *c = &f->comms[ci];
		struct analysis_hang h;
		struct analysis_mismatch m;
		int found = 0;

		/* mismatches: the first of each communicator (after one, its
		 * numbers no longer line up), and every one counted */
		out->mismatched_collectives += c->mismatched;
		if (c->has_first) {
			mismatch_keep(out, rts, &c->first, c->first_rt);
			found = 1;
		}
		/* the earliest live mismatch stands for a communicator whose slots
		 * have not retired one yet */
		const struct fl_slot *bs = NULL;

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

		/* hangs */
		if (c->nranks <= 1 || c->nmembers == 0)
			continue;
		if (c->nmembers > capw) {
			struct fl_wait *v = realloc(w, c->nmembers * sizeof(*v));

			if (!v) {
				free(w);
				memset(out, 0, sizeof(*out));
				out->timeout_ns = timeout_ns ? timeout_ns : ANALYSIS_DEFAULT_HANG_TIMEOUT_NS;
				return -ENOMEM;
			}
			w = v;
			capw = c->nmembers;
		}
		for (size_t k = 0; k < c->nmembers; k++) {
			const struct fl_source *fs = f->srcs[c->members[k].source];

			rank_wait(fs, &fs->rcs[c->members[k].rc], out->now_realtime_ns, &w[k]);
		}
		/* collectives some rank is inside: distinct numbers waited in */
		qsort(w, c->nmembers, sizeof(*w), wait_n_cmp);
		uint64_t counted = 0;

		for (size_t k = 0; k < c->nmembers; k++)
			if (w[k].n && !w[k].ended && w[k].n != counted) {
				counted = w[k].n;
				out->in_flight++;
			}
		if (comm_hang(c, w, c->nmembers, out->timeout_ns, out->now_realtime_ns, &h))
			hang_keep(out, &h);
	}
	free(w);
	hangs_order(f, out);
	return 0;
}
