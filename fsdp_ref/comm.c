/* fsdp_ref/comm.c: the communication thread (see comm.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "fsdp_ref/comm.h"

enum { REQ_IDLE = 0, REQ_QUEUED, REQ_DONE };

#define COMM_SEQ_COMMS 16 /* communicators numbered; a rank of fsdp_ref has at most five */

/* An armed fault (comm_arm_fault), waiting for the request it lands on. */
struct comm_fault_arm {
	int armed;
	int step;
	comm_fault_fn report;
	void *arg;
};

struct comm_thread {
	const struct fsdp_backend *be;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* work queued or stop requested */
	pthread_cond_t done; /* a request completed */
	struct comm_request *head, *tail;
	int stop;
	struct comm_fault_arm arm[COMM_FAULT_MISMATCH + 1]; /* under lock, by enum comm_fault_kind */
	/* the communication thread's own: collectives issued per communicator */
	struct {
		ncclComm_t comm;
		uint64_t issued;
	} seq[COMM_SEQ_COMMS];
	uint64_t seq_unknown; /* the counter of communicators past the table: reported as 0 */
};

int64_t comm_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The per-communicator counter of comm (0 when the table is full). */
static uint64_t *comm_seq_slot(struct comm_thread *ct, ncclComm_t comm)
{
	for (int i = 0; i < COMM_SEQ_COMMS; i++) {
		if (ct->seq[i].comm == comm)
			return &ct->seq[i].issued;
		if (!ct->seq[i].comm) {
			ct->seq[i].comm = comm;
			return &ct->seq[i].issued;
		}
	}
	ct->seq_unknown = (uint64_t)-1; /* + 1 = 0 */
	return &ct->seq_unknown;
}

/* A fault of request r lands on its next NCCL call (op, count): tell the
 * caller, then stall for ever or shrink the count. Returns the count to
 * issue. */
static size_t comm_fault_apply(struct comm_thread *ct, struct comm_request *r, enum comm_op op, size_t count)
{
	struct comm_fault_report rep = {
	    .kind = (enum comm_fault_kind)r->fault,
	    .step = r->fault_step,
	    .comm = r->comm,
	    .comm_seq = *comm_seq_slot(ct, r->comm) + 1,
	    .op = op,
	    .count = count,
	    .issued_count = r->fault == COMM_FAULT_MISMATCH && count > 0 ? count - 1 : count,
	};
	int kind = r->fault;
	r->fault = 0;
	if (r->fault_report)
		r->fault_report(r->fault_arg, &rep);
	if (kind == COMM_FAULT_STALL)
		for (;;)
			pause(); /* a hung rank: only a signal ends it (SIGTERM, SIGINT, SIGKILL) */
	return rep.issued_count;
}

static int comm_issue(struct comm_thread *ct, struct comm_request *r)
{
	const struct fsdp_backend *be = ct->be;
	cudaStream_t stream = (cudaStream_t)be->comm_stream();
	ncclResult_t nr = ncclSuccess;
	uint64_t *issued = comm_seq_slot(ct, r->comm);
	size_t count = r->count;
	if (r->ready && be->comm_wait_event(r->ready) < 0)
		return -EIO;
	/* a coalesced group: the stall before its first call; the mismatch in it, below */
	if (r->fault == COMM_FAULT_STALL && r->op == COMM_ALLGATHER_COALESCED)
		comm_fault_apply(ct, r, COMM_ALLGATHER, r->group_size > 0 ? r->group[0].count : 0);
	else if (r->fault == COMM_FAULT_STALL || (r->fault == COMM_FAULT_MISMATCH && r->op == COMM_ALLGATHER))
		count = comm_fault_apply(ct, r, r->op, count);
	switch (r->op) {
	case COMM_ALLGATHER:
		nr = ncclAllGather(r->send, r->recv, count, r->dtype, r->comm, stream);
		break;
	case COMM_REDUCE_SCATTER:
		nr = ncclReduceScatter(r->send, r->recv, count, r->dtype, ncclSum, r->comm, stream);
		break;
	case COMM_ALLREDUCE:
		nr = ncclAllReduce(r->send, r->recv, count, r->dtype, ncclSum, r->comm, stream);
		break;
	case COMM_BROADCAST:
		nr = ncclBroadcast(r->send, r->recv, count, r->dtype, r->root, r->comm, stream);
		break;
	case COMM_ALLGATHER_COALESCED:
		if ((nr = ncclGroupStart()) != ncclSuccess)
			break;
		for (int i = 0; nr == ncclSuccess && i < r->group_size; i++) {
			size_t n = r->group[i].count;
			if (r->fault == COMM_FAULT_MISMATCH)
				n = comm_fault_apply(ct, r, COMM_ALLGATHER, n);
			nr = ncclAllGather(r->group[i].send, r->group[i].recv, n, r->dtype, r->comm, stream);
			(*issued)++;
		}
		/* closed even after a failed call: this thread's group depth must return to 0 */
		ncclResult_t end = ncclGroupEnd();
		if (nr == ncclSuccess)
			nr = end;
		break;
	}
	if (r->op != COMM_ALLGATHER_COALESCED)
		(*issued)++;
	if (nr != ncclSuccess)
		return -EIO;
	if (r->done && be->event_record_comm(r->done) < 0)
		return -EIO;
	return 0;
}

static void *comm_main(void *arg)
{
	struct comm_thread *ct = arg;
	/* A thread that cannot bind to the device fails every request. */
	int failed = ct->be->thread_init() < 0 ? -EIO : 0;
	pthread_mutex_lock(&ct->lock);
	for (;;) {
		while (!ct->head && !ct->stop)
			pthread_cond_wait(&ct->wake, &ct->lock);
		if (!ct->head)
			break;
		struct comm_request *r = ct->head;
		pthread_mutex_unlock(&ct->lock);
		r->start_ns = comm_now_ns();
		/* After a failure nothing more is issued: the peers would not match. */
		r->result = failed ? failed : comm_issue(ct, r);
		r->end_ns = comm_now_ns();
		if (r->result < 0)
			failed = r->result;
		pthread_mutex_lock(&ct->lock);
		ct->head = r->next;
		if (!ct->head)
			ct->tail = NULL;
		r->next = NULL;
		r->state = REQ_DONE;
		pthread_cond_broadcast(&ct->done);
	}
	pthread_mutex_unlock(&ct->lock);
	return NULL;
}

struct comm_thread *comm_thread_new(const struct fsdp_backend *be)
{
	struct comm_thread *ct = calloc(1, sizeof *ct);
	if (!ct)
		return NULL;
	ct->be = be;
	pthread_mutex_init(&ct->lock, NULL);
	pthread_cond_init(&ct->wake, NULL);
	pthread_cond_init(&ct->done, NULL);
	if (pthread_create(&ct->thread, NULL, comm_main, ct) != 0) {
		pthread_mutex_destroy(&ct->lock);
		pthread_cond_destroy(&ct->wake);
		pthread_cond_destroy(&ct->done);
		free(ct);
		return NULL;
	}
	return ct;
}

void comm_thread_free(struct comm_thread *ct)
{
	if (!ct)
		return;
	pthread_mutex_lock(&ct->lock);
	ct->stop = 1;
	pthread_cond_broadcast(&ct->wake);
	pthread_mutex_unlock(&ct->lock);
	pthread_join(ct->thread, NULL);
	pthread_mutex_destroy(&ct->lock);
	pthread_cond_destroy(&ct->wake);
	pthread_cond_destroy(&ct->done);
	free(ct);
}

int comm_submit(struct comm_thread *ct, struct comm_request *req)
{
	pthread_mutex_lock(&ct->lock);
	if (req->state == REQ_QUEUED) {
		pthread_mutex_unlock(&ct->lock);
		return -EBUSY;
	}
	req->state = REQ_QUEUED;
	req->result = 0;
	req->fault = 0;
	/* a stall lands on the first request after arming, a mismatch on the first AllGather */
	enum comm_fault_kind kinds[] = {COMM_FAULT_STALL, COMM_FAULT_MISMATCH};
	for (int i = 0; i < 2 && !req->fault; i++) {
		struct comm_fault_arm *a = &ct->arm[kinds[i]];
		if (a->armed && (kinds[i] == COMM_FAULT_STALL || req->op == COMM_ALLGATHER ||
				 req->op == COMM_ALLGATHER_COALESCED)) {
			req->fault = (int)kinds[i];
			req->fault_step = a->step;
			req->fault_report = a->report;
			req->fault_arg = a->arg;
			a->armed = 0;
		}
	}
	req->next = NULL;
	if (ct->tail)
		ct->tail->next = req;
	else
		ct->head = req;
	ct->tail = req;
	pthread_cond_signal(&ct->wake);
	pthread_mutex_unlock(&ct->lock);
	return 0;
}

void comm_arm_fault(struct comm_thread *ct, enum comm_fault_kind kind, int step, comm_fault_fn report, void *arg)
{
	pthread_mutex_lock(&ct->lock);
	ct->arm[kind] = (struct comm_fault_arm){.armed = 1, .step = step, .report = report, .arg = arg};
	pthread_mutex_unlock(&ct->lock);
}

int comm_wait(struct comm_thread *ct, struct comm_request *req)
{
	pthread_mutex_lock(&ct->lock);
	while (req->state == REQ_QUEUED)
		pthread_cond_wait(&ct->done, &ct->lock);
	int rc = req->result;
	pthread_mutex_unlock(&ct->lock);
	return rc;
}

int comm_test(struct comm_thread *ct, struct comm_request *req)
{
	pthread_mutex_lock(&ct->lock);
	int done = req->state != REQ_QUEUED;
	pthread_mutex_unlock(&ct->lock);
	return done;
}

int comm_wait_compute(struct comm_thread *ct, struct comm_request *req, struct fsdp_event *done, int64_t *waited_ns)
{
	int64_t t0 = comm_now_ns();
	int rc = comm_wait(ct, req);
	if (rc == 0 && done)
		rc = ct->be->compute_wait_event(done);
	*waited_ns = comm_now_ns() - t0;
	return rc;
}

void comm_waits_add(struct comm_waits *w, int64_t ns)
{
	w->total_ns += ns;
	if ((size_t)w->count == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		int64_t *v = realloc(w->each, cap * sizeof *v);
		if (!v)
			return;
		w->each = v;
		w->cap = cap;
	}
	w->each[w->count++] = ns;
}

void comm_waits_reset(struct comm_waits *w)
{
	w->total_ns = 0;
	w->count = 0;
}

void comm_waits_free(struct comm_waits *w)
{
	free(w->each);
	*w = (struct comm_waits){0};
}
