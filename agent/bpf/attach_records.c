/*
 * attach_records.c - probe events become the agent's records (attach_records.h).
 *
 * Per process: a table of threads (each with the stack of NCCL calls it is
 * inside: NCCL calls its own API, ncclBcast -> ncclBroadcast, ncclCommInitAll
 * -> ncclGroupStart, and a uprobe fires on those too; only the outermost call
 * is recorded, as the agent's reentrancy flag does), a table of
 * communicators, and a queue of held records.
 *
 * This file: the processes and their threads, the output (straight out,
 * or into the queue behind held records), the hello and strings, and the
 * events taken apart into calls (attach_calls.c makes their records).
 * attach_infer.c decides the communicators held (one pass over every
 * process; its classes outlive the pass), attach_first_call.c numbers their
 * calls.
 *
 * Holding: the first call on a handle with no comm record puts a comm record
 * (event OBSERVED, its inferred fields still blank) into the process's queue
 * and from then on every record of the process goes into the queue behind
 * it, so that the order a reader sees is the order the process made them.
 * Deciding a communicator patches its records in the queue (the OBSERVED
 * record, and a destroy of it) and the queue goes out up to the next record
 * of a communicator still undecided. A split's child is held the same way
 * until its nranks is known (the agent asks ncclCommCount: a probe cannot).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "agent/bpf/attach_calls.h"
#include "agent/bpf/attach_infer.h"
#include "agent/bpf/attach_records.h"
#include "agent/bpf/attach_records_state.h"
#include "common/record.h"

#ifndef FSS_VERSION_MAJOR
#define FSS_VERSION_MAJOR 0
#endif
#ifndef FSS_VERSION_MINOR
#define FSS_VERSION_MINOR 1
#endif

/* ---- small helpers -------------------------------------------------------- */

int attach_records_grow(void **v, size_t *cap, size_t need, size_t size)
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

struct comm *attach_records_comm_find(struct proc *p, uint64_t handle)
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
	if (attach_records_grow((void **)&p->threads, &p->threads_cap, p->nthreads + 1, sizeof(*p->threads)))
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
	if (attach_records_grow((void **)&p->q, &p->qcap, p->qlen + h->size, 1))
		return -ENOMEM;
	if (at)
		*at = p->qlen;
	memcpy(p->q + p->qlen, rec, h->size);
	p->qlen += h->size;
	p->held++;
	return 0;
}

/* A record of p, in p's order. Holding more than the cap forces a decision. */
int attach_records_out(attach_records_t *a, struct proc *p, const void *rec)
{
	if (p->qhead == p->qlen)
		return send_record(a, p, rec);
	int err = queue_put(p, rec, NULL);
	if (!err && p->held > ATTACH_RECORDS_HOLD_MAX && !a->deciding)
		err = attach_infer_pass(a, 1);
	return err;
}

/* A record of c that the decision fills in: held, its offset remembered. */
int attach_records_out_patched(struct proc *p, struct comm *c, const void *rec)
{
	size_t at;
	if (attach_records_grow((void **)&c->patch, &c->patch_cap, c->npatch + 1, sizeof(*c->patch)))
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
int attach_records_queue_flush(attach_records_t *a, struct proc *p)
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
		int err = attach_records_out(a, p, &r);
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
	if (attach_records_grow((void **)&a->procs, &a->procs_cap, a->nprocs + 1, sizeof(*a->procs)))
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
	int err = attach_records_out(a, p, &h);
	if (!err && h.host)
		err = send_string(a, p, STRING_HOST, p->host);
	if (!err && h.command)
		err = send_string(a, p, STRING_COMMAND, p->command);
	return err;
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
	return attach_calls_exit(a, p, t, &f, ev);
}

static int on_process_exit(attach_records_t *a, struct proc *p, const struct attach_event *ev)
{
	int err = attach_infer_pass(a, 1);
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
		err = attach_records_out(a, p, &e);
		if (err)
			return err;
	}
	struct fss_rec_process_exit r;
	record_init(&r, FSS_REC_PROCESS_EXIT, sizeof(r), 0);
	r.at_ns = ev->ts_ns;
	r.pid = p->info.pid;
	r.wait_status = ev->ret;
	err = attach_records_out(a, p, &r);
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
	if (!f->nested)
		return attach_calls_enter(a, p, t, f);
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
