/* fsdp_ref/tp.c: the collectives of a tensor-parallel group (see tp.h). */
#include <errno.h>
#include <stdlib.h>

#include "fsdp_ref/markers.h"
#include "fsdp_ref/tp.h"

struct tp_group {
	const struct fsdp_backend *be;
	struct comm_thread *ct;
	ncclComm_t comm;
	/* one request: each collective is waited for before the next is issued */
	struct comm_request req;
	struct fsdp_event *ready, *done;
	struct model_tp_ops ops;
	struct tp_stats stats;
};

/* Issue one collective inside the leaf range `op`, then wait for it outside
 * every leaf, and order compute after it. 0 or -errno; *counter counts it
 * once it is issued. */
static int tp_run(struct tp_group *tp, const char *op, enum comm_op kind, const void *send, void *recv, size_t count,
		  int *counter)
{
	markers_push(op);
	tp->req = (struct comm_request){
	    .op = kind,
	    .comm = tp->comm,
	    .send = send,
	    .recv = recv,
	    .count = count,
	    .dtype = ncclFloat32,
	    .ready = tp->ready,
	    .done = tp->done,
	};
	int rc = tp->be->event_record_compute(tp->ready); /* the input is compute's */
	if (rc == 0)
		rc = comm_submit(tp->ct, &tp->req);
	markers_pop();
	if (rc < 0)
		return rc;
	(*counter)++;
	int64_t waited;
	rc = comm_wait_compute(tp->ct, &tp->req, tp->done, &waited);
	tp->stats.wait_ns += waited;
	return rc;
}

static int tp_op_allgather(void *ctx, const char *op, float *out, const float *in, size_t n)
{
	struct tp_group *tp = ctx;
	return tp_run(tp, op, COMM_ALLGATHER, in, out, n, &tp->stats.allgathers);
}

static int tp_op_reduce_scatter(void *ctx, const char *op, float *out, const float *in, size_t n)
{
	struct tp_group *tp = ctx;
	return tp_run(tp, op, COMM_REDUCE_SCATTER, in, out, n, &tp->stats.reduce_scatters);
}

int tp_allreduce(struct tp_group *tp, const char *op, float *x, size_t n)
{
	return tp_run(tp, op, COMM_ALLREDUCE, x, x, n, &tp->stats.allreduces);
}

struct tp_group *tp_new(const struct fsdp_backend *be, struct comm_thread *ct, ncclComm_t comm)
{
	struct tp_group *tp = calloc(1, sizeof *tp);
	if (!tp)
		return NULL;
	tp->be = be;
	tp->ct = ct;
	tp->comm = comm;
	tp->ready = be->event_new();
	tp->done = be->event_new();
	if (!tp->ready || !tp->done) {
		tp_free(tp);
		return NULL;
	}
	tp->ops = (struct model_tp_ops){
	    .ctx = tp,
	    .allgather = tp_op_allgather,
	    .reduce_scatter = tp_op_reduce_scatter,
	};
	return tp;
}

void tp_free(struct tp_group *tp)
{
	if (!tp)
		return;
	comm_wait(tp->ct, &tp->req); /* a request still queued references tp */
	if (tp->ready)
		tp->be->event_free(tp->ready);
	if (tp->done)
		tp->be->event_free(tp->done);
	free(tp);
}

const struct model_tp_ops *tp_model_ops(struct tp_group *tp)
{
	return &tp->ops;
}

void tp_step_begin(struct tp_group *tp)
{
	tp->stats = (struct tp_stats){0};
}

void tp_step_stats(const struct tp_group *tp, struct tp_stats *out)
{
	*out = tp->stats;
}
