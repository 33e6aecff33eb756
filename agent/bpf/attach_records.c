/*
 * attach_records.c - probe events become the agent's records (attach_records.h).
 *
 * Per process: a table of threads (each with the stack of NCCL calls it is
 * inside: NCCL calls its own API, ncclBcast -> ncclBroadcast, ncclCommInitAll
 * -> ncclGroupStart, and a uprobe fires on those too; only the outermost call
 * is recorded, as the agent's reentrancy flag does), a table of
 * communicators, and a queue of held records.
 *
 * Holding: the first call on a handle with no comm record puts a comm record
 * (event OBSERVED, its inferred fields still blank) into the process's queue
 * and from then on every record of the process goes into the queue behind
 * it, so that the order a reader sees is the order the process made them.
 * Deciding a communicator patches its records in the queue (the OBSERVED
 * record, and a destroy of it) and the queue goes out up to the next record
 * of a communicator still undecided. A split's child is held the same way
 * until its nranks is known (the agent asks ncclCommCount: a probe cannot).
 *
 * Deciding (one pass over every process): the undecided communicators are
 * grouped into classes by the distribution of the signatures of their calls
 * (op, count, dtype, redop, root); a class is split into instances when the
 * in-place ranks of its members repeat; ranks come from in-place AllGathers,
 * else the environment (a class every attached process is in), else pid
 * order. Classes outlive the pass: a communicator decided later joins the
 * class it matches.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "agent/bpf/attach_records.h"
#include "common/record.h"

#ifndef FSS_VERSION_MAJOR
#define FSS_VERSION_MAJOR 0
#endif
#ifndef FSS_VERSION_MINOR
#define FSS_VERSION_MINOR 1
#endif

#define NCCL_SUCCESS 0
#define NCCL_IN_PROGRESS 7

#define STACK_MAX 8u		/* NCCL calls one thread is inside at once (its own nested calls) */
#define SIGS_MAX 1024u		/* distinct call signatures kept per undecided communicator */
#define MATCH_MIN 0.5		/* signature overlap two communicators need to be one */
#define INPLACE_RANK_MAX 65536u /* a larger offset is a separate send buffer, not a rank's slice */
/* Calls of an undecided communicator kept in order, to number them alike on
 * every rank (fss_rec_comm.first_call): two windows, so that ranks that came
 * in a window apart still overlap. */
#define ORDER_MAX (2u * ATTACH_RECORDS_WINDOW)

/* One kind of call on a communicator: what is the same on every rank. */
struct sig {
	uint64_t count;
	int32_t root;
	uint8_t op, dtype, redop, pad;
	uint32_t n; /* calls of this kind */
};

enum comm_state {
	COMM_DECIDED = 0, /* its record went out, or waits only for the records before it */
	COMM_OBSERVED,	  /* first seen in use: identity undecided */
	COMM_SPLIT,	  /* made by a split or shrink: nranks / rank (and id_hash if the parent is undecided) */
};

struct comm {
	uint64_t handle;
	int state;		 /* enum comm_state */
	int alive;		 /* not destroyed: found by its handle */
	int ready;		 /* OBSERVED / SPLIT with enough calls to decide */
	struct fss_rec_comm rec; /* what it is (OBSERVED / SPLIT: filled at the decision) */
	uint32_t splits;	 /* splits and shrinks made from it */
	/* undecided: */
	size_t *patch; /* queue offsets of its records still to fill (the first is its own) */
	size_t npatch, patch_cap;
	uint64_t calls;		  /* calls on it */
	uint64_t first_proc_call; /* the process's calls before its first */
	struct sig *sigs;
	size_t nsigs, sigs_cap;
	uint64_t *order; /* its first ORDER_MAX calls' signatures, in call order */
	uint64_t *order_ns; /* and when each was entered */
	size_t norder;
	uint32_t gathers, gathers_inplace;
	int64_t inplace_rank; /* -1 none yet, -2 in-place offsets disagree */
	/* split / shrink: */
	size_t parent; /* index of the parent in the process's comms */
	uint64_t split_no;
	int32_t parent_rank_key; /* the parent rank, for the order of equal keys */
	/* decided: */
	int cls; /* class index, -1 */
	uint32_t instance;
};

struct frame {
	struct attach_event ev; /* the entry */
	uint64_t seq;		/* collectives: its seq */
	int nested;		/* an NCCL call inside an NCCL call: not recorded */
	uint32_t group_id;	/* at the entry */
	uint16_t group_depth;
};

struct thread {
	uint32_t tid;
	uint32_t depth; /* frames */
	struct frame stack[STACK_MAX];
	int group_depth;
	uint32_t group_id, group_calls;
	uint64_t group_start_ns;
};

struct proc {
	struct attach_process info;
	char *command, *host;
	int exited;
	uint64_t seq;
	uint64_t calls;
	uint32_t group_ids;
	struct thread *threads;
	size_t nthreads, threads_cap;
	struct comm *comms;
	size_t ncomms, comms_cap;
	unsigned char *q; /* held records, [qhead, qlen) */
	size_t qhead, qlen, qcap;
	uint64_t held;
	uint64_t init_all_calls;
};

struct member {
	size_t proc, comm;
};

struct cls {
	uint32_t ordinal;
	uint32_t rank_bit; /* FSS_COMM_INFER_RANK_* its members' ranks came from */
	int env_kind;	   /* rank from the environment: 0 RANK, 1 SLURM_PROCID, 2 OMPI */
	struct sig *sigs;  /* its first member's calls */
	size_t nsigs;
	uint64_t sig_calls;
	struct member *members;
	size_t nmembers, members_cap;
	uint32_t ninstances;
	int32_t *inst_nranks; /* per instance */
	uint64_t *inst_hash;
	/* per instance: the calls of its first member in order (then their
	 * times), and the number its first call got: what a later member is
	 * numbered against */
	uint64_t **inst_order;
	size_t *inst_norder;
	uint64_t *inst_first;
};

struct attach_records {
	attach_record_fn fn;
	void *ctx;
	struct proc *procs;
	size_t nprocs, procs_cap;
	struct cls *classes;
	size_t nclasses, classes_cap;
	struct attach_records_stats st;
	int deciding;
};

/* ---- small helpers -------------------------------------------------------- */

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap * 2 : 8;
	while (n < need)
		n *= 2;
	void *p = realloc(*v, n * size);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = n;
	return 0;
}

static char *dup_text(const char *s)
{
	if (!s)
		return NULL;
	size_t n = strlen(s);
	char *p = malloc(n + 1);
	if (p)
		memcpy(p, s, n + 1);
	return p;
}

static struct proc *proc_find(attach_records_t *a, uint32_t pid)
{
	for (size_t i = a->nprocs; i-- > 0;)
		if (a->procs[i].info.pid == pid && !a->procs[i].exited)
			return &a->procs[i];
	return NULL;
}

static struct comm *comm_find(struct proc *p, uint64_t handle)
{
	for (size_t i = p->ncomms; i-- > 0;)
		if (p->comms[i].alive && p->comms[i].handle == handle)
			return &p->comms[i];
	return NULL;
}

static struct thread *thread_get(struct proc *p, uint32_t tid)
{
	for (size_t i = 0; i < p->nthreads; i++)
		if (p->threads[i].tid == tid)
			return &p->threads[i];
	if (grow((void **)&p->threads, &p->threads_cap, p->nthreads + 1, sizeof(*p->threads)))
		return NULL;
	struct thread *t = &p->threads[p->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	return t;
}

/* ---- output: straight out, or into the queue behind held records ---------- */

static int send_record(attach_records_t *a, struct proc *p, const void *rec)
{
	const struct fss_record_head *h = rec;
	int err = a->fn(a->ctx, p->info.pid, rec);
	if (err)
		return err;
	if (h->type == FSS_REC_COLLECTIVE)
		a->st.collectives++;
	else if (h->type == FSS_REC_COMM && ((const struct fss_rec_comm *)rec)->event == FSS_COMM_OBSERVED)
		a->st.comms_observed++;
	return 0;
}

static int queue_put(struct proc *p, const void *rec, size_t *at)
{
	const struct fss_record_head *h = rec;
	if (grow((void **)&p->q, &p->qcap, p->qlen + h->size, 1))
		return -ENOMEM;
	if (at)
		*at = p->qlen;
	memcpy(p->q + p->qlen, rec, h->size);
	p->qlen += h->size;
	p->held++;
	return 0;
}

static int decide_pass(attach_records_t *a, int force);

/* A record of p, in p's order. Holding more than the cap forces a decision. */
static int out(attach_records_t *a, struct proc *p, const void *rec)
{
	if (p->qhead == p->qlen)
		return send_record(a, p, rec);
	int err = queue_put(p, rec, NULL);
	if (!err && p->held > ATTACH_RECORDS_HOLD_MAX && !a->deciding)
		err = decide_pass(a, 1);
	return err;
}

/* A record of c that the decision fills in: held, its offset remembered. */
static int out_patched(struct proc *p, struct comm *c, const void *rec)
{
	size_t at;
	if (grow((void **)&c->patch, &c->patch_cap, c->npatch + 1, sizeof(*c->patch)))
		return -ENOMEM;
	int err = queue_put(p, rec, &at);
	if (!err)
		c->patch[c->npatch++] = at;
	return err;
}

/* Is the record at queue offset `at` the own record of an undecided communicator? */
static int queue_blocked_at(const struct proc *p, size_t at)
{
	for (size_t i = 0; i < p->ncomms; i++)
		if (p->comms[i].state != COMM_DECIDED && p->comms[i].npatch && p->comms[i].patch[0] == at)
			return 1;
	return 0;
}

/* Send the held records of p up to the first undecided communicator's. */
static int queue_flush(attach_records_t *a, struct proc *p)
{
	while (p->qhead < p->qlen) {
		const struct fss_record_head *h = (const void *)(p->q + p->qhead);
		if (h->type == FSS_REC_COMM && queue_blocked_at(p, p->qhead))
			return 0;
		int err = send_record(a, p, h);
		if (err)
			return err;
		p->qhead += h->size;
		p->held--;
	}
	p->qhead = p->qlen = 0;
	return 0;
}

/* ---- strings and hello ------------------------------------------------------ */

#define STRING_HOST 1u
#define STRING_COMMAND 2u

static int send_string(attach_records_t *a, struct proc *p, uint32_t id, const char *s)
{
	size_t len = strlen(s), offset = 0;
	if (len > FSS_STRING_MAX_BYTES)
		len = FSS_STRING_MAX_BYTES;
	do {
		struct fss_rec_string r;
		size_t part = len - offset < FSS_STRING_PART_BYTES ? len - offset : FSS_STRING_PART_BYTES;
		record_init(&r, FSS_REC_STRING, sizeof(r), 0);
		r.id = id;
		r.total_len = (uint16_t)len;
		r.offset = (uint16_t)offset;
		memcpy(r.text, s + offset, part);
		int err = out(a, p, &r);
		if (err)
			return err;
		offset += part;
	} while (offset < len);
	return 0;
}

int attach_records_new(attach_records_t **out_, attach_record_fn fn, void *ctx)
{
	attach_records_t *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->fn = fn;
	a->ctx = ctx;
	*out_ = a;
	return 0;
}

int attach_records_add(attach_records_t *a, const struct attach_process *info)
{
	if (proc_find(a, info->pid))
		return -EEXIST;
	if (grow((void **)&a->procs, &a->procs_cap, a->nprocs + 1, sizeof(*a->procs)))
		return -ENOMEM;
	struct proc *p = &a->procs[a->nprocs];
	memset(p, 0, sizeof(*p));
	p->info = *info;
	p->command = dup_text(info->command);
	p->host = dup_text(info->host);
	if ((info->command && !p->command) || (info->host && !p->host)) {
		free(p->command);
		free(p->host);
		return -ENOMEM;
	}
	p->info.command = p->command;
	p->info.host = p->host;
	a->nprocs++;
	a->st.processes++;

	/* The agent's order: the hello, then the strings it names (a reader
	 * resolves a hello's strings when they come: collector/source.c). */
	struct fss_rec_process_hello h;
	record_init(&h, FSS_REC_PROCESS_HELLO, sizeof(h), 0);
	h.pid = info->pid;
	h.ppid = info->ppid;
	h.rank = info->rank;
	h.local_rank = info->local_rank;
	h.world_size = info->world_size;
	h.slurm_procid = info->slurm_procid;
	h.ompi_rank = info->ompi_rank;
	h.host = p->host && p->host[0] ? STRING_HOST : FSS_STRING_NONE;
	h.command = p->command && p->command[0] ? STRING_COMMAND : FSS_STRING_NONE;
	h.path = FSS_PATH_UPROBE;
	h.agent_version = (uint16_t)(FSS_VERSION_MAJOR << 8 | FSS_VERSION_MINOR);
	h.mono_ns = info->mono_ns;
	h.realtime_ns = info->realtime_ns;
	h.features = FSS_FEATURE_UPROBE | FSS_FEATURE_ENTER;
	int err = out(a, p, &h);
	if (!err && h.host)
		err = send_string(a, p, STRING_HOST, p->host);
	if (!err && h.command)
		err = send_string(a, p, STRING_COMMAND, p->command);
	return err;
}

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
	    grow((void **)&m->sigs, &m->sigs_cap, m->nsigs + 1, sizeof(*m->sigs)) == 0)
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
		uint64_t h = (uint64_t)c->op | (uint64_t)dtype << 8 | (uint64_t)redop << 16 | (uint64_t)(uint32_t)c->peer << 24;

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

static int all_ready(const attach_records_t *a)
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

static struct comm *comm_add(struct proc *p, uint64_t handle)
{
	if (grow((void **)&p->comms, &p->comms_cap, p->ncomms + 1, sizeof(*p->comms)))
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
	return out_patched(p, m, &m->rec);
}

static int on_collective_enter(attach_records_t *a, struct proc *p, struct thread *t, struct frame *f)
{
	struct call c = call_of(&f->ev);
	int err = 0;

	f->seq = ++p->seq;
	p->calls++;
	f->group_depth = (uint16_t)(t->group_depth > 0 ? t->group_depth : 0);
	f->group_id = t->group_depth > 0 ? t->group_id : 0;
	if (t->group_depth > 0)
		t->group_calls++;
	struct comm *m = c.comm ? comm_find(p, c.comm) : NULL;
	if (c.comm && !m && (err = comm_observe(p, c.comm, &f->ev, &m)) != 0)
		return err;
	if (m && m->state != COMM_DECIDED)
		comm_note_call(m, &c, f->ev.ts_ns);

	struct fss_rec_enter r;
	record_init(&r, FSS_REC_ENTER, sizeof(r), 0);
	r.seq = f->seq;
	r.comm = c.comm;
	r.stream = c.stream;
	r.count = c.count;
	r.enter_ns = f->ev.ts_ns;
	r.thread = f->ev.tid;
	r.peer = c.peer;
	r.group_id = f->group_id;
	r.kind = FSS_ENTER_COLLECTIVE;
	r.op = c.op;
	r.dtype = call_dtype(&c);
	r.redop = call_redop(&c);
	r.path = FSS_PATH_UPROBE;
	err = out(a, p, &r);
	if (err)
		return err;

	/* a communicator of p just became ready to decide: are they all? */
	int flipped = 0;
	for (size_t i = 0; i < p->ncomms; i++) {
		struct comm *k = &p->comms[i];
		if (k->state != COMM_DECIDED && !k->ready && comm_ready(p, k))
			k->ready = flipped = 1;
	}
	if (flipped && all_ready(a))
		err = decide_pass(a, 0);
	return err;
}

static int on_collective_exit(attach_records_t *a, struct proc *p, const struct frame *f, const struct attach_event *ev)
{
	struct call c = call_of(&f->ev);
	struct fss_rec_collective r;

	record_init(&r, FSS_REC_COLLECTIVE, sizeof(r), 0);
	r.seq = f->seq;
	r.comm = c.comm;
	r.stream = c.stream;
	r.count = c.count;
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
	r.op = c.op;
	r.dtype = call_dtype(&c);
	r.redop = call_redop(&c);
	r.path = FSS_PATH_UPROBE;
	return out(a, p, &r);
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
	return out(a, p, &g);
}

/* ---- communicators made, and ended --------------------------------------------- */

/* A communicator seen made, exact: its record goes out in order. */
static int comm_made(attach_records_t *a, struct proc *p, const struct fss_rec_comm *r)
{
	int ok = r->comm && (r->result == NCCL_SUCCESS || r->result == NCCL_IN_PROGRESS);
	if (ok) {
		struct comm *old = comm_find(p, r->comm);
		if (old)
			old->alive = 0; /* freed without ncclCommDestroy: the handle came back */
		struct comm *m = comm_add(p, r->comm);
		if (!m)
			return -ENOMEM;
		m->rec = *r;
		a->st.comms_made++;
	}
	return out(a, p, r);
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
			return out(a, p, &r);
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

/* The split key of the agent (agent/nccl_wrap.c): (parent id_hash, split number, color). */
static uint64_t split_hash(uint64_t parent_hash, uint64_t split_no, int32_t color)
{
	unsigned char k[20];
	memcpy(k, &parent_hash, 8);
	memcpy(k + 8, &split_no, 8);
	memcpy(k + 16, &color, 4);
	return record_hash_bytes(k, sizeof(k));
}

static int try_decide_splits(attach_records_t *a);

static int on_split_exit(attach_records_t *a, struct proc *p, const struct frame *f, const struct attach_event *ev)
{
	const struct attach_event *in = &f->ev;
	uint64_t parent_handle = in->arg[0];
	struct comm *parent = parent_handle ? comm_find(p, parent_handle) : NULL;
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
	struct comm *old = comm_find(p, made);
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
	int err = out_patched(p, m, &m->rec);
	return err ? err : try_decide_splits(a);
}

static int on_end_exit(attach_records_t *a, struct proc *p, const struct frame *f, const struct attach_event *ev)
{
	uint64_t handle = f->ev.arg[0];
	struct comm *m = handle ? comm_find(p, handle) : NULL;
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
		return out_patched(p, m, &r); /* what it was is decided with it */
	return out(a, p, &r);
}

/* ---- the decision ------------------------------------------------------------------- */

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
	if (grow((void **)&a->classes, &a->classes_cap, a->nclasses + 1, sizeof(*a->classes)))
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
	if (grow((void **)&k->members, &k->members_cap, k->nmembers + 1, sizeof(*k->members)))
		return -ENOMEM;
	k->members[k->nmembers++] = (struct member){proc, comm};
	return 0;
}

static int cls_instances(struct cls *k, uint32_t n)
{
	if (n <= k->ninstances)
		return 0;
	int32_t *nr = realloc(k->inst_nranks, n * sizeof(*nr));
	if (!nr)
		return -ENOMEM;
	k->inst_nranks = nr;
	uint64_t *h = realloc(k->inst_hash, n * sizeof(*h));
	if (!h)
		return -ENOMEM;
	k->inst_hash = h;
	uint64_t **o = realloc(k->inst_order, n * sizeof(*o));
	if (!o)
		return -ENOMEM;
	k->inst_order = o;
	size_t *no = realloc(k->inst_norder, n * sizeof(*no));
	if (!no)
		return -ENOMEM;
	k->inst_norder = no;
	uint64_t *f = realloc(k->inst_first, n * sizeof(*f));
	if (!f)
		return -ENOMEM;
	k->inst_first = f;
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
/*
 * How far x's calls are from y's: the d for which x[j] is y[j + d] for the
 * most j (as a share of the calls both hold, at least half of the shorter
 * list), the smallest |d| of equals. The ranks of one communicator make
 * the same calls in the same order; the attach only came in at a different
 * call on each, and near one another (a collective holds its ranks
 * together), so the nearest best shift is the true one even where a step
 * repeats itself (per-Linear units: the same 8 sizes, layer after layer).
 */
static uint64_t ns_apart(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

static int64_t order_shift(const uint64_t *x, const uint64_t *xt, size_t nx, const uint64_t *y, const uint64_t *yt,
			   size_t ny)
{
	size_t shorter = nx < ny ? nx : ny, need = shorter / 2 ? shorter / 2 : 1;
	int64_t best_d = 0;
	uint64_t best_m = 0, best_o = 1, best_apart = UINT64_MAX;

	for (int64_t d = -(int64_t)nx + 1; d < (int64_t)ny; d++) {
		uint64_t m = 0, o = 0, apart = 0;

		for (size_t j = 0; j < nx; j++) {
			int64_t k = (int64_t)j + d;

			if (k < 0)
				continue;
			if (k >= (int64_t)ny)
				break;
			o++;
			m += x[j] == y[k];
			if (xt && yt)
				apart += ns_apart(xt[j], yt[k]) / 1024; /* us-ish: a sum of 256 never overflows */
		}
		if (o < need)
			continue;
		apart /= o;
		/* m / o > best_m / best_o; or equal (a step that repeats itself matches at
		 * several shifts), and the calls paired lie closer in time (one collective
		 * is entered at about the same time on every rank), then nearer */
		if (m * best_o > best_m * o ||
		    (m * best_o == best_m * o &&
		     (apart < best_apart ||
		      (apart == best_apart && (d < 0 ? -d : d) < (best_d < 0 ? -best_d : best_d))))) {
			best_d = d;
			best_m = m;
			best_o = o;
			best_apart = apart;
		}
	}
	return best_d;
}

/* first_call of the communicators this decision gives class c: numbered
 * against the instance's first member, so that one call has one number on
 * every rank (flight's and the analysis's per-communicator call numbers). */
static int cls_number(attach_records_t *a, struct cls *c)
{
	for (uint32_t i = 0; i < c->ninstances; i++) {
		struct comm *ref = NULL;
		int64_t lo = 0;

		if (!c->inst_order[i]) {
			/* the instance's first decision: its reference is its first member now */
			for (size_t j = 0; j < c->nmembers && !ref; j++) {
				struct comm *m = &a->procs[c->members[j].proc].comms[c->members[j].comm];

				if (m->state == COMM_OBSERVED && m->instance == i && m->norder)
					ref = m;
			}
			if (!ref)
				continue;
			for (size_t j = 0; j < c->nmembers; j++) {
				struct comm *m = &a->procs[c->members[j].proc].comms[c->members[j].comm];
				int64_t d;

				if (m->state != COMM_OBSERVED || m->instance != i)
					continue;
				d = m == ref ? 0
					     : order_shift(m->order, m->order_ns, m->norder, ref->order, ref->order_ns,
							   ref->norder);
				m->rec.first_call = (uint64_t)d; /* relative for now: signed, read back below */
				if (d < lo)
					lo = d;
			}
			for (size_t j = 0; j < c->nmembers; j++) {
				struct comm *m = &a->procs[c->members[j].proc].comms[c->members[j].comm];

				if (m->state == COMM_OBSERVED && m->instance == i)
					m->rec.first_call = (uint64_t)((int64_t)m->rec.first_call - lo + 1);
			}
			c->inst_order[i] = malloc(2 * ref->norder * sizeof(uint64_t));
			if (!c->inst_order[i])
				return -ENOMEM;
			memcpy(c->inst_order[i], ref->order, ref->norder * sizeof(uint64_t));
			memcpy(c->inst_order[i] + ref->norder, ref->order_ns, ref->norder * sizeof(uint64_t));
			c->inst_norder[i] = ref->norder;
			c->inst_first[i] = ref->rec.first_call;
			continue;
		}
		/* a member that joins a numbered instance: numbered against its reference;
		 * one that came in earlier than the reference cannot be (the numbers out
		 * already start at 1): from 1 */
		for (size_t j = 0; j < c->nmembers; j++) {
			struct comm *m = &a->procs[c->members[j].proc].comms[c->members[j].comm];
			int64_t n;

			if (m->state != COMM_OBSERVED || m->instance != i)
				continue;
			n = (int64_t)c->inst_first[i] +
			    (m->norder ? order_shift(m->order, m->order_ns, m->norder, c->inst_order[i],
						     c->inst_order[i] + c->inst_norder[i], c->inst_norder[i])
				       : 0);
			m->rec.first_call = n >= 1 ? (uint64_t)n : 1;
		}
	}
	return 0;
}

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
		if ((err = cls_number(a, &a->classes[k])))
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
		int err = queue_flush(a, &a->procs[i]);
		if (err)
			return err;
	}
	return 0;
}

static int try_decide_splits(attach_records_t *a)
{
	int err = decide_splits(a, 0);
	return err ? err : flush_all(a);
}

static int decide_pass(attach_records_t *a, int force)
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
	if (final || all_ready(a))
		return decide_pass(a, final);
	return 0;
}

/* ---- events ------------------------------------------------------------------------------- */

static int on_exit_event(attach_records_t *a, struct proc *p, struct thread *t, const struct attach_event *ev)
{
	/* its entry: the top frame, else a deeper one whose exit the inner frames lost */
	uint32_t d = t->depth;
	while (d > 0 && t->stack[d - 1].ev.fn != ev->fn)
		d--;
	if (d == 0) {
		a->st.events_unknown++;
		return 0;
	}
	struct frame f = t->stack[d - 1];
	t->depth = d - 1;
	if (f.nested)
		return 0;
	if (is_collective(ev->fn))
		return on_collective_exit(a, p, &f, ev);
	switch (ev->fn) {
	case ATTACH_FN_GROUP_START:
	case ATTACH_FN_GROUP_END:
		return on_group_exit(a, p, t, &f, ev);
	case ATTACH_FN_COMM_INIT_RANK:
	case ATTACH_FN_COMM_INIT_RANK_CONFIG:
	case ATTACH_FN_COMM_INIT_ALL:
	case ATTACH_FN_COMM_INIT_RANK_SCALABLE:
		return on_init_exit(a, p, &f, ev);
	case ATTACH_FN_COMM_SPLIT:
	case ATTACH_FN_COMM_SHRINK:
		return on_split_exit(a, p, &f, ev);
	case ATTACH_FN_COMM_DESTROY:
	case ATTACH_FN_COMM_ABORT:
		return on_end_exit(a, p, &f, ev);
	default: /* Finalize: the agent records one end per communicator, its destroy */
		return 0;
	}
}

static int on_process_exit(attach_records_t *a, struct proc *p, const struct attach_event *ev)
{
	int err = decide_pass(a, 1);
	if (err)
		return err;
	if (WIFEXITED(ev->ret)) {
		/* It left through exit(): where the agent would write its
		 * process_end (a source that ended whole), and every call the
		 * probes saw was delivered before it. */
		struct fss_rec_process_end e;
		record_init(&e, FSS_REC_PROCESS_END, sizeof(e), 0);
		e.at_ns = ev->ts_ns;
		e.collectives = p->seq;
		e.exit_code = WEXITSTATUS(ev->ret);
		err = out(a, p, &e);
		if (err)
			return err;
	}
	struct fss_rec_process_exit r;
	record_init(&r, FSS_REC_PROCESS_EXIT, sizeof(r), 0);
	r.at_ns = ev->ts_ns;
	r.pid = p->info.pid;
	r.wait_status = ev->ret;
	err = out(a, p, &r);
	p->exited = 1;
	return err;
}

static int is_life(unsigned fn)
{
	return fn >= ATTACH_FN_COMM_INIT_RANK && fn <= ATTACH_FN_COMM_FINALIZE;
}

/* Does NCCL's `outer` call the API function `inner` itself? ncclBcast is
 * ncclBroadcast; the communicator functions run groups and each other
 * (ncclCommInitAll). Anything else entered inside an open call means that
 * call's exit was lost (a full ring): a stale frame must not make every
 * later call of the thread look nested. */
static int nests(unsigned outer, unsigned inner)
{
	if (outer == ATTACH_FN_BCAST && inner == ATTACH_FN_BROADCAST)
		return 1;
	return is_life(outer) && (inner == ATTACH_FN_GROUP_START || inner == ATTACH_FN_GROUP_END || is_life(inner));
}

int attach_records_event(attach_records_t *a, const struct attach_event *ev)
{
	struct proc *p = proc_find(a, ev->pid);

	if (!p || ev->fn == 0 || ev->fn >= ATTACH_FN_MAX) {
		a->st.events_unknown++;
		return 0;
	}
	a->st.events++;
	if (ev->fn == ATTACH_FN_PROCESS_EXIT)
		return on_process_exit(a, p, ev);
	struct thread *t = thread_get(p, ev->tid);
	if (!t)
		return -ENOMEM;
	if (ev->kind == ATTACH_EV_EXIT)
		return on_exit_event(a, p, t, ev);
	if (ev->kind != ATTACH_EV_ENTER) {
		a->st.events_unknown++;
		return 0;
	}
	int nested = t->depth > 0 && nests(t->stack[t->depth - 1].ev.fn, ev->fn);
	if (t->depth > 0 && !nested) {
		/* no NCCL call makes this one: the calls still open lost their exits */
		a->st.events_unknown += t->depth;
		t->depth = 0;
	}
	if (t->depth == STACK_MAX) {
		a->st.events_unknown++;
		return 0;
	}
	struct frame *f = &t->stack[t->depth++];
	memset(f, 0, sizeof(*f));
	f->ev = *ev;
	f->nested = nested;
	if (!f->nested && is_collective(ev->fn))
		return on_collective_enter(a, p, t, f);
	return 0;
}

void attach_records_stats(const attach_records_t *a, struct attach_records_stats *st)
{
	*st = a->st;
	st->held = 0;
	for (size_t i = 0; i < a->nprocs; i++)
		st->held += a->procs[i].held;
}

void attach_records_free(attach_records_t *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nprocs; i++) {
		struct proc *p = &a->procs[i];
		for (size_t j = 0; j < p->ncomms; j++) {
			free(p->comms[j].patch);
			free(p->comms[j].sigs);
			free(p->comms[j].order);
			free(p->comms[j].order_ns);
		}
		free(p->comms);
		free(p->threads);
		free(p->q);
		free(p->command);
		free(p->host);
	}
	for (size_t k = 0; k < a->nclasses; k++) {
		free(a->classes[k].sigs);
		free(a->classes[k].members);
		free(a->classes[k].inst_nranks);
		free(a->classes[k].inst_hash);
		for (uint32_t i = 0; i < a->classes[k].ninstances; i++)
			free(a->classes[k].inst_order[i]);
		free(a->classes[k].inst_order);
		free(a->classes[k].inst_norder);
		free(a->classes[k].inst_first);
	}
	free(a->procs);
	free(a->classes);
	free(a);
}
