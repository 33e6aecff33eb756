/*
 * flight_calls.c - calls numbered on their communicators (flight_calls.h).
 */
#include "collector/flight_calls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/flight_mismatch.h"

/* ---- lookups -------------------------------------------------------------- */

/* v (n of *cap elements of size bytes used) with room for one more: its
 * capacity doubled (from first) when full. NULL on ENOMEM, v left as it was. */
static void *room_for_one(void *v, size_t n, size_t *cap, size_t size, size_t first)
{
	size_t want;
	void *grown;

	if (n < *cap)
		return v;
	want = *cap ? 2 * *cap : first;
	grown = realloc(v, want * size);
	if (grown)
		*cap = want;
	return grown;
}

struct fl_source *flight_source_get(flight_t *f, const struct source *src)
{
	uint32_t id = src->id;
	struct fl_source *fs = NULL, **srcs;

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
	srcs = room_for_one(f->srcs, f->nsrcs, &f->capsrcs, sizeof(*srcs), 16);
	if (!srcs)
		return NULL;
	f->srcs = srcs;
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
	struct fl_comm *comms;

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
	comms = room_for_one(f->comms, f->ncomms, &f->capcomms, sizeof(*comms), 16);
	if (!comms)
		return NULL;
	f->comms = comms;
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
	struct fl_member *members;
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
	members = room_for_one(c->members, c->nmembers, &c->capmembers, sizeof(*members), 8);
	if (!members)
		goto oom;
	c->members = members;
	rc = room_for_one(fs->rcs, fs->nrcs, &fs->caprcs, sizeof(*rc), 4);
	if (!rc)
		goto oom;
	fs->rcs = rc;
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

/* ---- records ---------------------------------------------------------------- */

/* ncclResult_t values read here (nccl.h): a non-blocking communicator's
 * ncclInProgress is not a failure. */
#define FL_NCCL_SUCCESS 0
#define FL_NCCL_IN_PROGRESS 7

/* Call n of rc returned result after waiting from enter_ns to exit_ns: kept
 * as rc's failed call when it is an error that waited longer than the one
 * kept (the first of equal waits stays). */
static void call_failed(struct fl_rank_comm *rc, uint64_t n, int32_t result, uint64_t enter_ns, uint64_t exit_ns)
{
	if (result == FL_NCCL_SUCCESS || result == FL_NCCL_IN_PROGRESS || !n || exit_ns < enter_ns)
		return;
	if (rc->failed && exit_ns - enter_ns <= rc->failed_exit_ns - rc->failed_enter_ns)
		return;
	rc->failed = n;
	rc->failed_result = result;
	rc->failed_enter_ns = enter_ns;
	rc->failed_exit_ns = exit_ns;
}

/* What a call's first record says of it. */
struct fl_args {
	uint64_t seq, comm, count, enter_ns;
	uint32_t group_id;
	int32_t peer;
	uint8_t op, dtype, redop;
};

/* The fl_args of an enter or a collective record (they name these fields alike). */
#define FL_ARGS_OF(r)                                                                                                  \
	((struct fl_args){.seq = (r)->seq,                                                                             \
			  .comm = (r)->comm,                                                                           \
			  .count = (r)->count,                                                                         \
			  .enter_ns = (r)->enter_ns,                                                                   \
			  .group_id = (r)->group_id,                                                                   \
			  .peer = (r)->peer,                                                                           \
			  .op = (r)->op,                                                                               \
			  .dtype = (r)->dtype,                                                                         \
			  .redop = (r)->redop})

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
		c = fl_call_at(rc, rc->group_hi);
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
					 .root = flight_op_has_root(a->op) ? a->peer : -1,
					 .op = a->op,
					 .dtype = a->dtype,
					 .redop = a->redop};

	if (!c || (e && (e->flags & (FL_SEQ_SIGNED | FL_SEQ_UNCERTAIN))) || fs->numbers_off)
		return 0;
	if (e)
		e->flags |= FL_SEQ_SIGNED;
	return flight_sig_report(&f->comms[rc->comm], c->comm_seq, rc->rank, fs->id, &sig, fl_to_rt(fs, a->enter_ns));
}

/* A call's first record, or the later one of a call an enter placed: the
 * call placed and its signature reported. 0 with *rcp (NULL: its
 * communicator is not known) and *cp (NULL: the ring moved past it) set, or
 * -ENOMEM. */
static int call_record(flight_t *f, struct fl_source *fs, const struct fl_args *a, struct fl_rank_comm **rcp,
		       struct fl_call **cp)
{
	struct fl_seq *e = NULL;
	int oom = 0;

	*rcp = NULL;
	*cp = call_place(f, fs, a, rcp, &e, &oom);
	if (oom)
		return -ENOMEM;
	return *rcp ? call_sign(f, fs, *rcp, e, *cp, a) : 0;
}

int flight_calls_enter(flight_t *f, struct fl_source *fs, const struct fss_rec_enter *r)
{
	struct fl_rank_comm *rc;
	struct fl_call *c;

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
	struct fl_args a = FL_ARGS_OF(r);

	return call_record(f, fs, &a, &rc, &c);
}

void flight_calls_sync_exit(struct fl_source *fs, const struct fss_rec_sync_exit *x)
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

int flight_calls_collective(flight_t *f, struct fl_source *fs, const struct fss_rec_collective *r)
{
	struct fl_rank_comm *rc;
	struct fl_call *c;
	struct fl_args a = FL_ARGS_OF(r);
	int rc_sign = call_record(f, fs, &a, &rc, &c);

	if (rc_sign < 0)
		return rc_sign;
	if (!rc)
		return 0;
	if (!c)
		return 0; /* the ring moved past it: too old to change what is in flight */
	c->returned = 1;
	c->no_kernel = r->count == 0 || r->result != 0;
	call_failed(rc, c->comm_seq, r->result, c->enter_ns ? c->enter_ns : r->enter_ns, r->exit_ns);
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

void flight_calls_group(struct fl_source *fs, const struct fss_rec_group *g)
{
	for (size_t i = 0; i < fs->nrcs; i++) {
		struct fl_rank_comm *rc = &fs->rcs[i];
		const struct fl_call *c;

		if (rc->open_group != g->group_id)
			continue;
		/* the group waits in ncclGroupEnd: a failure there is its first
		 * call's, waited from that call's enter */
		if (rc->group_hi > rc->left && (c = fl_call_at(rc, rc->left + 1)))
			call_failed(rc, rc->left + 1, g->result, c->enter_ns, g->end_exit_ns);
		group_close(rc, g->end_exit_ns);
	}
}
