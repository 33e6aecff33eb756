/* fsdp_ref/comm.c: the communication thread (see comm.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "fsdp_ref/comm.h"

enum { REQ_IDLE = 0, REQ_QUEUED, REQ_DONE };

struct comm_thread {
	const struct fsdp_backend *be;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* work queued or stop requested */
	pthread_cond_t done; /* a request completed */
	struct comm_request *head, *tail;
	int stop;
};

int64_t comm_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int comm_issue(const struct fsdp_backend *be, struct comm_request *r)
{
	cudaStream_t stream = (cudaStream_t)be->comm_stream();
	ncclResult_t nr = ncclSuccess;
	if (r->ready && be->comm_wait_event(r->ready) < 0)
		return -EIO;
	switch (r->op) {
	case COMM_ALLGATHER:
		nr = ncclAllGather(r->send, r->recv, r->count, r->dtype, r->comm, stream);
		break;
	case COMM_REDUCE_SCATTER:
		nr = ncclReduceScatter(r->send, r->recv, r->count, r->dtype, ncclSum, r->comm, stream);
		break;
	case COMM_ALLREDUCE:
		nr = ncclAllReduce(r->send, r->recv, r->count, r->dtype, ncclSum, r->comm, stream);
		break;
	case COMM_BROADCAST:
		nr = ncclBroadcast(r->send, r->recv, r->count, r->dtype, r->root, r->comm, stream);
		break;
	case COMM_ALLGATHER_COALESCED:
		if ((nr = ncclGroupStart()) != ncclSuccess)
			break;
		for (int i = 0; nr == ncclSuccess && i < r->group_size; i++)
			nr = ncclAllGather(r->group[i].send, r->group[i].recv, r->group[i].count, r->dtype, r->comm,
					   stream);
		/* closed even after a failed call: this thread's group depth must return to 0 */
		ncclResult_t end = ncclGroupEnd();
		if (nr == ncclSuccess)
			nr = end;
		break;
	}
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
		r->result = failed ? failed : comm_issue(ct->be, r);
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
