/* fsdp_ref/nccl_cpu/comm.c: join a rendezvous, split, fail, free. */
#include "fsdp_ref/nccl_cpu/comm.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsdp_ref/nccl_cpu/coll.h"
#include "fsdp_ref/nccl_cpu/error.h"
#include "fsdp_ref/nccl_cpu/op.h"
#include "fsdp_ref/nccl_cpu/sync.h"

#define COMM_DEFAULT_TIMEOUT_S 60.0

ncclResult_t comm_fail(struct ncclComm *c, ncclResult_t res, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	error_set("nccl_cpu rank %d/%d: %s", c->rank, c->nranks, msg);
	if (c->async_error == ncclSuccess)
		c->async_error = res;
	if ((res == ncclRemoteError || res == ncclSystemError) && c->header) {
		/* Everyone stuck on this communicator would otherwise wait for
		 * their own timeout: flag it and wake every futex word. */
		atomic_store(&c->header->aborted, 1);
		sync_wake_all(&c->header->barrier_gen);
		sync_wake_all(&c->header->joined);
		for (int r = 0; r < c->nranks; r++)
			sync_wake_all(&c->ranks[r].doorbell);
	}
	return res;
}

ncclResult_t comm_fail_wait(struct ncclComm *c, int rc, const char *what)
{
	switch (rc) {
	case -ETIMEDOUT:
		return comm_fail(c, ncclRemoteError,
				 "%s: timed out after %.1f s waiting for peers (FSDP_REF_NCCL_TIMEOUT_S)", what,
				 (double)c->timeout_ns / 1e9);
	case -ECONNABORTED:
		/* A peer already failed and said why; no need to re-flag. */
		error_set("nccl_cpu rank %d/%d: %s: a peer rank failed or aborted the communicator", c->rank, c->nranks,
			  what);
		if (c->async_error == ncclSuccess)
			c->async_error = ncclRemoteError;
		return ncclRemoteError;
	case -EPIPE:
		return comm_fail(c, ncclRemoteError, "%s: peer rank %d (pid %d) exited", what, c->dead_rank,
				 (int)atomic_load(&c->ranks[c->dead_rank].pid));
	default:
		return comm_fail(c, ncclSystemError, "%s: %s", what, strerror(-rc));
	}
}

static int timeout_from_env(uint64_t *out)
{
	double s = COMM_DEFAULT_TIMEOUT_S;
	const char *env = getenv("FSDP_REF_NCCL_TIMEOUT_S");
	if (env && *env) {
		char *end;
		errno = 0;
		s = strtod(env, &end);
		if (errno || *end || !(s > 0) || s > 1e6)
			return -EINVAL;
	}
	*out = (uint64_t)llround(s * 1e9);
	return 0;
}

void comm_free(struct ncclComm *c)
{
	if (!c)
		return;
	segment_detach(c->base, c->layout.total);
	free(c);
}

/* Block until all nranks joined; the last one to join unlinks the name. */
static ncclResult_t comm_join(struct ncclComm *c)
{
	struct segment_header *h = c->header;
	uint32_t expected = 0;
	if (!atomic_compare_exchange_strong(&h->nranks, &expected, (uint32_t)c->nranks) &&
	    expected != (uint32_t)c->nranks)
		return comm_fail(c, ncclInvalidUsage, "ncclCommInitRank: this rank says nranks=%d, a peer said %u",
				 c->nranks, expected);
	expected = 0;
	if (!atomic_compare_exchange_strong(&c->ranks[c->rank].present, &expected, 1))
		return comm_fail(c, ncclInvalidUsage, "ncclCommInitRank: rank %d joined twice with the same unique id",
				 c->rank);
	atomic_store(&c->ranks[c->rank].pid, (int32_t)getpid());
	uint32_t joined = atomic_fetch_add(&h->joined, 1) + 1;
	if (joined == (uint32_t)c->nranks) {
		/* Everyone has it mapped: the name is no longer needed, and
		 * without it a killed job leaves nothing behind in /dev/shm. */
		segment_unlink(c->name);
		if (c->nranks > 1)
			sync_wake_all(&h->joined);
		return ncclSuccess;
	}
	uint64_t since = sync_now_ns();
	while ((joined = atomic_load(&h->joined)) < (uint32_t)c->nranks) {
		/* Peers that have not joined have no pid yet: liveness is checked
		 * by the collectives, so pass an empty peer list. */
		int rc = sync_wait(c, &h->joined, joined, since, NULL, 0);
		if (rc) {
			segment_unlink(c->name); /* nobody else will */
			if (rc == -ETIMEDOUT)
				return comm_fail(c, ncclRemoteError,
						 "ncclCommInitRank: timed out after %.1f s: %u of %d ranks "
						 "joined (FSDP_REF_NCCL_TIMEOUT_S)",
						 (double)c->timeout_ns / 1e9, joined, c->nranks);
			return comm_fail_wait(c, rc, "ncclCommInitRank");
		}
	}
	if (atomic_load(&h->aborted)) /* a peer gave up on this rendezvous */
		return comm_fail_wait(c, -ECONNABORTED, "ncclCommInitRank");
	return ncclSuccess;
}

ncclResult_t comm_init(struct ncclComm **out, int nranks, const struct unique_id *id, int rank)
{
	*out = NULL;
	struct ncclComm *c = calloc(1, sizeof(*c));
	if (!c) {
		error_set("nccl_cpu: ncclCommInitRank: out of memory");
		return ncclSystemError;
	}
	c->rank = rank;
	c->nranks = nranks;
	c->id = *id;
	unique_id_name(id, c->name);
	const char *bad_var = NULL;
	if (link_model_from_env(&c->link, &bad_var) < 0) {
		comm_fail(c, ncclInvalidArgument, "ncclCommInitRank: %s is not a valid number", bad_var);
		goto fail;
	}
	if (timeout_from_env(&c->timeout_ns) < 0) {
		comm_fail(c, ncclInvalidArgument,
			  "ncclCommInitRank: FSDP_REF_NCCL_TIMEOUT_S must be a number of seconds > 0");
		goto fail;
	}
	segment_layout_compute(nranks, id->chunk_bytes, &c->layout);
	void *base = NULL;
	int rc = segment_attach(c->name, c->layout.total, &base);
	if (rc < 0) {
		comm_fail(c, ncclSystemError, "ncclCommInitRank: shared memory %s (%zu bytes): %s", c->name,
			  c->layout.total, strerror(-rc));
		goto fail;
	}
	c->base = base;
	c->header = (struct segment_header *)c->base;
	c->ranks = (struct segment_rank *)(c->base + c->layout.ranks_off);
	if (comm_join(c) != ncclSuccess)
		goto fail;
	*out = c;
	return ncclSuccess;
fail:;
	ncclResult_t res = c->async_error;
	comm_free(c);
	return res;
}

struct split_entry {
	int32_t color;
	int32_t key;
};

ncclResult_t comm_split(struct ncclComm *parent, int color, int key, struct ncclComm **out)
{
	*out = NULL;
	int n = parent->nranks;
	struct split_entry mine = {color, key};
	struct split_entry *all = calloc((size_t)n, sizeof(*all));
	if (!all)
		return comm_fail(parent, ncclSystemError, "ncclCommSplit: out of memory");
	/* Every parent rank learns every (color, key): an internal AllGather,
	 * outside any group and without the link model. */
	struct op gather = {
	    .kind = OP_ALLGATHER,
	    .comm = parent,
	    .send = &mine,
	    .recv = all,
	    .count = sizeof(mine),
	    .dtype = ncclUint8,
	};
	ncclResult_t res = coll_run(&gather, NULL);
	if (res != ncclSuccess)
		goto out;
	uint64_t split_index = parent->split_count++;
	/* Judge the colors from the gathered table so that every rank agrees
	 * on failure instead of some ranks waiting on the others. */
	for (int r = 0; r < n; r++) {
		if (all[r].color < 0 && all[r].color != NCCL_SPLIT_NOCOLOR) {
			error_set("nccl_cpu rank %d/%d: ncclCommSplit: rank %d passed color %d (colors must "
				  "be >= 0 or NCCL_SPLIT_NOCOLOR)",
				  parent->rank, n, r, (int)all[r].color);
			res = ncclInvalidArgument;
			goto out;
		}
	}
	if (color == NCCL_SPLIT_NOCOLOR)
		goto out;
	/* New rank: position by (key, parent rank) among ranks of my color. */
	int new_rank = 0, new_n = 0;
	for (int r = 0; r < n; r++) {
		if (all[r].color != color)
			continue;
		new_n++;
		if (all[r].key < key || (all[r].key == key && r < parent->rank))
			new_rank++;
	}
	struct unique_id id;
	unique_id_derive(&parent->id, split_index, color, &id);
	res = comm_init(out, new_n, &id, new_rank);
out:
	free(all);
	return res;
}
