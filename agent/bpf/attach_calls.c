/*
 * attach_calls.c - the calls of an attached process become its records
 * (attach_calls.h): a collective's enter record at its entry and its
 * collective record at its exit (the same seq), group records for
 * outermost groups, comm records for communicators seen made (init, split:
 * exact where the call says it) or first seen in use (OBSERVED, held for
 * attach_infer.c), destroy and abort records.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/bpf/attach_calls.h"
#include "agent/bpf/attach_infer.h"
#include "agent/bpf/attach_records_state.h"
#include "common/record.h"

#define NCCL_SUCCESS 0
#define NCCL_IN_PROGRESS 7

#define SIGS_MAX 1024u		/* distinct call signatures kept per undecided communicator */
#define INPLACE_RANK_MAX 65536u /* a larger offset is a separate send buffer, not a rank's slice */

/* ---- collectives -------------------------------------------------------------- */

/* What a collective's arguments say, by position (x86-64 SysV: the
 * registers, then [rsp + 8], [rsp + 16]). */
struct call {
	uint8_t op;
	int32_t dtype, redop, peer;
	uint64_t count, send, recv, comm, stream;
};

static int is_collective(unsigned fn)
{
	return fn >= ATTACH_FN_ALLGATHER && fn <= ATTACH_FN_SCATTER;
}

static struct call call_of(const struct attach_event *ev)
{
	const uint64_t *x = ev->arg;
	struct call c = {.redop = -1, .peer = -1};
#define I32(v) ((int32_t)(uint32_t)(v))
	switch (ev->fn) {
	case ATTACH_FN_ALLGATHER:
		c = (struct call){FSS_OP_ALLGATHER, I32(x[3]), -1, -1, x[2], x[0], x[1], x[4], x[5]};
		break;
	case ATTACH_FN_REDUCESCATTER:
		c = (struct call){FSS_OP_REDUCESCATTER, I32(x[3]), I32(x[4]), -1, x[2], x[0], x[1], x[5], x[6]};
		break;
	case ATTACH_FN_ALLREDUCE:
		c = (struct call){FSS_OP_ALLREDUCE, I32(x[3]), I32(x[4]), -1, x[2], x[0], x[1], x[5], x[6]};
		break;
	case ATTACH_FN_BROADCAST:
		c = (struct call){FSS_OP_BROADCAST, I32(x[3]), -1, I32(x[4]), x[2], x[0], x[1], x[5], x[6]};
		break;
	case ATTACH_FN_BCAST: /* the agent records both buffers as buff */
		c = (struct call){FSS_OP_BROADCAST, I32(x[2]), -1, I32(x[3]), x[1], x[0], x[0], x[4], x[5]};
		break;
	case ATTACH_FN_REDUCE:
		c = (struct call){FSS_OP_REDUCE, I32(x[3]), I32(x[4]), I32(x[5]), x[2], x[0], x[1], x[6], x[7]};
		break;
	case ATTACH_FN_SEND:
		c = (struct call){FSS_OP_SEND, I32(x[2]), -1, I32(x[3]), x[1], x[0], 0, x[4], x[5]};
		break;
	case ATTACH_FN_RECV:
		c = (struct call){FSS_OP_RECV, I32(x[2]), -1, I32(x[3]), x[1], 0, x[0], x[4], x[5]};
		break;
	case ATTACH_FN_ALLTOALL:
		c = (struct call){FSS_OP_ALLTOALL, I32(x[3]), -1, -1, x[2], x[0], x[1], x[4], x[5]};
		break;
	case ATTACH_FN_GATHER:
		c = (struct call){FSS_OP_GATHER, I32(x[3]), -1, I32(x[4]), x[2], x[0], x[1], x[5], x[6]};
		break;
	case ATTACH_FN_SCATTER:
		c = (struct call){FSS_OP_SCATTER, I32(x[3]), -1, I32(x[4]), x[2], x[0], x[1], x[5], x[6]};
		break;
	default:
		break;
	}
#undef I32
	return c;
}

/* As the agent keeps them (agent/nccl_wrap.c): out-of-range values truncated, not lost. */
static uint8_t call_dtype(const struct call *c)
{
	return (unsigned)c->dtype < 255 ? (uint8_t)c->dtype : 254;
}

static uint8_t call_redop(const struct call *c)
{
	return c->redop < 0 ? FSS_REDOP_NONE : (c->redop < 255 ? (uint8_t)c->redop : 254);
}

static uint64_t call_bytes(const struct call *c)
{
	size_t size = (unsigned)c->dtype < FSS_DTYPE_MAX ? record_dtype_bytes((uint8_t)c->dtype) : 0;
	return c->count * size; /* 0: unknown size */
}

/* record_init, then the fields a collective's enter record and its
 * collective record share: a macro, the two being different structs. */
#define CALL_RECORD_INIT(r, type, f, c)                                                                                \
	do {                                                                                                           \
		record_init((r), (type), sizeof(*(r)), 0);                                                             \
		(r)->seq = (f)->seq;                                                                                   \
		(r)->comm = (c)->comm;                                                                                 \
		(r)->stream = (c)->stream;                                                                             \
		(r)->count = (c)->count;                                                                               \
		(r)->op = (c)->op;                                                                                     \
		(r)->dtype = call_dtype(c);                                                                            \
		(r)->redop = call_redop(c);                                                                            \
		(r)->path = FSS_PATH_UPROBE;                                                                           \
	} while (0)

static void comm_note_call(struct comm *m, const struct call *c, uint64_t ts_ns)
{
	uint8_t dtype = call_dtype(c), redop = call_redop(c);
	size_t i;

	m->calls++;
	for (i = 0; i < m->nsigs; i++) {
		const struct sig *s = &m->sigs[i];
		if (s->op == c->op && s->count == c->count && s->dtype == dtype && s->redop == redop &&
		    s->root == c->peer)
			break;
	}
	if (i == m->nsigs && m->nsigs < SIGS_MAX &&
	    attach_records_grow((void **)&m->sigs, &m->sigs_cap, m->nsigs + 1, sizeof(*m->sigs)) == 0)
		m->sigs[m->nsigs++] =
		    (struct sig){.count = c->count, .root = c->peer, .op = c->op, .dtype = dtype, .redop = redop};
	if (i < m->nsigs)
		m->sigs[i].n++;
	if (m->norder < ORDER_MAX && !m->order) {
		m->order = malloc(ORDER_MAX * sizeof(*m->order));
		m->order_ns = malloc(ORDER_MAX * sizeof(*m->order_ns));
		if (!m->order || !m->order_ns) {
			free(m->order);
			free(m->order_ns);
			m->order = m->order_ns = NULL;
		}
	}
	if (m->norder < ORDER_MAX && m->order) {
		uint64_t h =
		    (uint64_t)c->op | (uint64_t)dtype << 8 | (uint64_t)redop << 16 | (uint64_t)(uint32_t)c->peer << 24;

		h ^= c->count * 0x9e3779b97f4a7c15ull;
		m->order_ns[m->norder] = ts_ns;
		m->order[m->norder++] = h ^ (h >> 29);
	}
	if (c->op == FSS_OP_ALLGATHER) {
		/* FSDP2 gathers in place: its shard lies in the output at rank x bytes */
		uint64_t bytes = call_bytes(c);
		m->gathers++;
		if (bytes && c->send >= c->recv && (c->send - c->recv) % bytes == 0 &&
		    (c->send - c->recv) / bytes < INPLACE_RANK_MAX) {
			int64_t r = (int64_t)((c->send - c->recv) / bytes);
			m->gathers_inplace++;
			if (m->inplace_rank == -1)
				m->inplace_rank = r;
			else if (m->inplace_rank != r)
				m->inplace_rank = -2;
		}
	}
}

/* Counted ready when it has a window of calls, or its process has made
 * two windows of calls since it was first seen (a communicator used once
 * a step has what it will have). */
static int comm_ready(const struct proc *p, const struct comm *m)
{
	return m->calls >= ATTACH_RECORDS_WINDOW || p->calls - m->first_proc_call >= 2ull * ATTACH_RECORDS_WINDOW;
}

static struct comm *comm_add(struct proc *p, uint64_t handle)
{
	if (attach_records_grow((void **)&p->comms, &p->comms_cap, p->ncomms + 1, sizeof(*p->comms)))
		return NULL;
	struct comm *m = &p->comms[p->ncomms++];
	memset(m, 0, sizeof(*m));
	m->handle = handle;
	m->alive = 1;
	m->inplace_rank = -1;
	m->cls = -1;
	m->parent = SIZE_MAX;
	m->first_proc_call = p->calls;
	return m;
}

static void comm_rec_base(struct fss_rec_comm *r, uint16_t event, uint64_t handle, const struct frame *f,
			  const struct attach_event *exit_ev)
{
	record_init(r, FSS_REC_COMM, sizeof(*r), 0);
	r->comm = handle;
	r->enter_ns = f ? f->ev.ts_ns : exit_ev->ts_ns;
	r->exit_ns = exit_ev->ts_ns;
	r->nranks = -1;
	r->rank = -1;
	r->device = -1;
	r->color = -1;
	r->key = -1;
	r->result = exit_ev->ret;
	r->event = event;
	r->path = FSS_PATH_UPROBE;
	r->thread = exit_ev->tid;
}

/* A handle first seen in use (made before the probes): its record is
 * decided later, and every record of the process waits behind it. */
static int comm_observe(struct proc *p, uint64_t handle, const struct attach_event *ev, struct comm **out_)
{
	struct comm *m = comm_add(p, handle);
	if (!m)
		return -ENOMEM;
	m->state = COMM_OBSERVED;
	comm_rec_base(&m->rec, FSS_COMM_OBSERVED, handle, NULL, ev);
	m->rec.result = 0;
	m->rec.thread = ev->tid;
	*out_ = m;
	return attach_records_out_patched(p, m, &m->rec);
}

int attach_calls_enter(attach_records_t *a, struct proc *p, struct thread *t, struct frame *f)
{
	if (!is_collective(f->ev.fn))
		return 0;
	struct call c = call_of(&f->ev);
	int err = 0;

	f->seq = ++p->seq;
	p->calls++;
	f->group_depth = (uint16_t)(t->group_depth > 0 ? t->group_depth : 0);
	f->group_id = t->group_depth > 0 ? t->group_id : 0;
	if (t->group_depth > 0)
		t->group_calls++;
	struct comm *m = c.comm ? attach_records_comm_find(p, c.comm) : NULL;
	if (c.comm && !m && (err = comm_observe(p, c.comm, &f->ev, &m)) != 0)
		return err;
	if (m && m->state != COMM_DECIDED)
		comm_note_call(m, &c, f->ev.ts_ns);

	struct fss_rec_enter r;
	CALL_RECORD_INIT(&r, FSS_REC_ENTER, f, &c);
	r.enter_ns = f->ev.ts_ns;
	r.thread = f->ev.tid;
	r.peer = c.peer;
	r.group_id = f->group_id;
	r.kind = FSS_ENTER_COLLECTIVE;
	err = attach_records_out(a, p, &r);
	if (err)
		return err;

	/* a communicator of p just became ready to decide: are they all? */
	int flipped = 0;
	for (size_t i = 0; i < p->ncomms; i++) {
		struct comm *k = &p->comms[i];
		if (k->state != COMM_DECIDED && !k->ready && comm_ready(p, k))
			k->ready = flipped = 1;
	}
	if (flipped && attach_infer_all_ready(a))
		err = attach_infer_pass(a, 0);
	return err;
}

static int on_collective_exit(attach_records_t *a, struct proc *p, const struct frame *f, const struct attach_event *ev)
{
	struct call c = call_of(&f->ev);
	struct fss_rec_collective r;

	CALL_RECORD_INIT(&r, FSS_REC_COLLECTIVE, f, &c);
	r.bytes = call_bytes(&c);
	r.sendbuff = c.send;
	r.recvbuff = c.recv;
	r.enter_ns = f->ev.ts_ns;
	r.exit_ns = ev->ts_ns;
	r.group_id = f->group_id;
	r.thread = ev->tid;
	r.peer = c.peer;
	r.result = ev->ret;
	r.group_depth = f->group_depth;
	return attach_records_out(a, p, &r);
}

/* ---- groups --------------------------------------------------------------------- */

static int on_group_exit(attach_records_t *a, struct proc *p, struct thread *t, const struct frame *f,
			 const struct attach_event *ev)
{
	if (ev->fn == ATTACH_FN_GROUP_START) {
		if (ev->ret == NCCL_SUCCESS && t->group_depth++ == 0) {
			t->group_id = ++p->group_ids;
			t->group_calls = 0;
			t->group_start_ns = f->ev.ts_ns;
		}
		return 0;
	}
	/* GroupEnd: a group begun before the attach (depth 0) has no record */
	int outermost = t->group_depth == 1;
	if (t->group_depth > 0)
		t->group_depth--; /* NCCL leaves the group even when the launch fails */
	if (!outermost)
		return 0;
	struct fss_rec_group g;
	record_init(&g, FSS_REC_GROUP, sizeof(g), 0);
	g.group_id = t->group_id;
	g.calls = t->group_calls;
	g.start_ns = t->group_start_ns;
	g.end_enter_ns = f->ev.ts_ns;
	g.end_exit_ns = ev->ts_ns;
	g.result = ev->ret;
	g.thread = ev->tid;
	t->group_id = 0;
	t->group_calls = 0;
	return attach_records_out(a, p, &g);
}

/* ---- communicators made, and ended --------------------------------------------- */

/* A communicator seen made, exact: its record goes out in order. */
static int comm_made(attach_records_t *a, struct proc *p, const struct fss_rec_comm *r)
{
	int ok = r->comm && (r->result == NCCL_SUCCESS || r->result == NCCL_IN_PROGRESS);
	if (ok) {
		struct comm *old = attach_records_comm_find(p, r->comm);
		if (old)
			old->alive = 0; /* freed without ncclCommDestroy: the handle came back */
		struct comm *m = comm_add(p, r->comm);
		if (!m)
			return -ENOMEM;
		m->rec = *r;
		a->st.comms_made++;
	}
	return attach_records_out(a, p, r);
}

static int on_init_exit(attach_records_t *a, struct proc *p, const struct frame *f, const struct attach_event *ev)
{
	const struct attach_event *in = &f->ev;
	struct fss_rec_comm r;
	uint64_t made = ev->nout > 0 ? ev->out[0] : 0;

	comm_rec_base(&r, FSS_COMM_INIT, 0, f, ev);
	if (ev->fn == ATTACH_FN_COMM_INIT_ALL) {
		/* the agent's key: no unique id, all ndev communicators live in this process */
		struct {
			uint64_t pid;
			uint64_t call;
		} key = {p->info.pid, p->init_all_calls++};
		int32_t ndev = (int32_t)(uint32_t)in->arg[1];
		uint64_t id_hash = record_hash_bytes(&key, sizeof(key));
		if (ev->ret != NCCL_SUCCESS || ndev < 1 || !in->arg[0] || ev->nout == 0) {
			r.nranks = ndev;
			return attach_records_out(a, p, &r);
		}
		for (uint32_t i = 0; i < ev->nout && i < ATTACH_OUT_MAX; i++) {
			r.comm = ev->out[i];
			r.id_hash = r.comm ? id_hash : 0;
			r.nranks = ndev;
			r.rank = (int32_t)i;
			int err = comm_made(a, p, &r);
			if (err)
				return err;
		}
		return 0;
	}
	/* Arguments by their C position (attach.bpf.c): InitRank / Config
	 * (comm *, nranks, the id (in uid[], its slot 0), rank, config *);
	 * Scalable (comm *, nranks, myrank, nId, commIds *, config *). */
	r.nranks = (int32_t)(uint32_t)in->arg[1];
	r.rank = (int32_t)(uint32_t)in->arg[ev->fn == ATTACH_FN_COMM_INIT_RANK_SCALABLE ? 2 : 3];
	if (made && (ev->ret == NCCL_SUCCESS || ev->ret == NCCL_IN_PROGRESS)) {
		r.comm = made;
		r.id_hash = in->uid_ok ? record_hash_bytes(in->uid, ATTACH_UNIQUE_ID_BYTES) : 0;
	}
	return comm_made(a, p, &r);
}

static int on_split_exit(attach_records_t *a, struct proc *p, const struct frame *f, const struct attach_event *ev)
{
	const struct attach_event *in = &f->ev;
	uint64_t parent_handle = in->arg[0];
	struct comm *parent = parent_handle ? attach_records_comm_find(p, parent_handle) : NULL;
	uint64_t made = ev->nout > 0 ? ev->out[0] : 0;
	struct fss_rec_comm r;
	int shrink = ev->fn == ATTACH_FN_COMM_SHRINK;

	if (parent_handle && !parent) {
		/* made before the probes: the split is a use of it (a kind of call
		 * of its own, the same on every rank that splits it) */
		const struct call split_call = {.dtype = FSS_DTYPE_UNKNOWN, .redop = FSS_REDOP_NONE, .peer = -1};
		int err = comm_observe(p, parent_handle, in, &parent);
		if (err)
			return err;
		comm_note_call(parent, &split_call, in->ts_ns);
	}
	comm_rec_base(&r, FSS_COMM_SPLIT, 0, f, ev);
	r.parent_comm = parent_handle;
	if (!shrink) {
		r.color = (int32_t)(uint32_t)in->arg[1];
		r.key = (int32_t)(uint32_t)in->arg[2];
	}
	/* every rank of the parent counts the split, with or without a child */
	uint64_t split_no = parent ? parent->splits++ : 0;
	int ok = made && (ev->ret == NCCL_SUCCESS || ev->ret == NCCL_IN_PROGRESS);
	if (!ok || !parent) {
		/* no child, or a parent never seen: the agent's id_hash 0 */
		r.comm = ok ? made : 0;
		return comm_made(a, p, &r);
	}
	size_t parent_index = (size_t)(parent - p->comms);
	struct comm *old = attach_records_comm_find(p, made);
	if (old)
		old->alive = 0;
	struct comm *m = comm_add(p, made);
	if (!m)
		return -ENOMEM;
	parent = &p->comms[parent_index];
	r.comm = made;
	m->state = COMM_SPLIT;
	m->rec = r;
	m->parent = parent_index;
	m->split_no = split_no;
	a->st.comms_made++;
	int err = attach_records_out_patched(p, m, &m->rec);
	return err ? err : attach_infer_splits(a);
}

static int on_end_exit(attach_records_t *a, struct proc *p, const struct frame *f, const struct attach_event *ev)
{
	uint64_t handle = f->ev.arg[0];
	struct comm *m = handle ? attach_records_comm_find(p, handle) : NULL;
	struct fss_rec_comm r;

	comm_rec_base(&r, ev->fn == ATTACH_FN_COMM_ABORT ? FSS_COMM_ABORT : FSS_COMM_DESTROY, handle, f, ev);
	if (m && m->state == COMM_DECIDED) {
		r.id_hash = m->rec.id_hash;
		r.parent_comm = m->rec.parent_comm;
		r.nranks = m->rec.nranks;
		r.rank = m->rec.rank;
		r.device = m->rec.device;
		r.inferred = m->rec.inferred;
	}
	if (m && (ev->ret == NCCL_SUCCESS || ev->ret == NCCL_IN_PROGRESS))
		m->alive = 0;
	if (m && m->state != COMM_DECIDED)
		return attach_records_out_patched(p, m, &r); /* what it was is decided with it */
	return attach_records_out(a, p, &r);
}

int attach_calls_exit(attach_records_t *a, struct proc *p, struct thread *t, const struct frame *f,
		      const struct attach_event *ev)
{
	if (is_collective(ev->fn))
		return on_collective_exit(a, p, f, ev);
	switch (ev->fn) {
	case ATTACH_FN_GROUP_START:
	case ATTACH_FN_GROUP_END:
		return on_group_exit(a, p, t, f, ev);
	case ATTACH_FN_COMM_INIT_RANK:
	case ATTACH_FN_COMM_INIT_RANK_CONFIG:
	case ATTACH_FN_COMM_INIT_ALL:
	case ATTACH_FN_COMM_INIT_RANK_SCALABLE:
		return on_init_exit(a, p, f, ev);
	case ATTACH_FN_COMM_SPLIT:
	case ATTACH_FN_COMM_SHRINK:
		return on_split_exit(a, p, f, ev);
	case ATTACH_FN_COMM_DESTROY:
	case ATTACH_FN_COMM_ABORT:
		return on_end_exit(a, p, f, ev);
	default: /* Finalize: the agent records one end per communicator, its destroy */
		return 0;
	}
}
