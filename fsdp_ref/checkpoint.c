/* fsdp_ref/checkpoint.c: the collectives of a checkpoint save (see
 * checkpoint.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_ref/checkpoint.h"

/* One collective through the communication thread, ordered after the
 * compute stream's work (the copy into buf) and before its next. */
static int run(const struct fsdp_backend *be, struct comm_thread *ct, struct comm_request *r, struct fsdp_event *ready,
	       struct fsdp_event *done)
{
	r->ready = ready;
	r->done = done;
	int rc = be->event_record_compute(ready);
	if (rc == 0)
		rc = comm_submit(ct, r);
	if (rc == 0)
		rc = comm_wait(ct, r);
	if (rc == 0)
		rc = be->compute_wait_event(done);
	return rc;
}

int checkpoint_save(const struct fsdp_backend *be, struct comm_thread *ct, struct mem_ledger *mem, ncclComm_t world,
		    int rank, int nranks, int step, struct checkpoint_counts *out)
{
	memset(out, 0, sizeof *out);
	char plan[96];
	int len = snprintf(plan, sizeof plan, "{\"rank\":%d,\"step\":%d,\"items\":[\"model\",\"optim\"]}", rank, step);
	size_t n = (size_t)nranks;
	int64_t *sizes_host = calloc(n, sizeof *sizes_host);
	char *host = NULL;
	int64_t *sizes_dev = mem_alloc(mem, MEM_OTHER, n * sizeof(int64_t));
	int64_t *mine_dev = mem_alloc(mem, MEM_OTHER, sizeof(int64_t));
	float *barrier_dev = mem_alloc(mem, MEM_OTHER, sizeof(float));
	struct fsdp_event *ready = be->event_new(), *done = be->event_new();
	void *payload_dev = NULL, *all_dev = NULL;
	size_t max = 0, payload_bytes = 0, all_bytes = 0;
	int rc = -ENOMEM;
	if (!sizes_host || !sizes_dev || !mine_dev || !barrier_dev || !ready || !done)
		goto out;

	/* all_gather_object: the sizes, then the payloads padded to the largest */
	int64_t mine = len;
	if ((rc = be->memcpy_h2d(mine_dev, &mine, sizeof mine)) < 0)
		goto out;
	struct comm_request r = {.op = COMM_ALLGATHER, .comm = world, .send = mine_dev, .recv = sizes_dev,
				 .count = 1, .dtype = ncclInt64};
	if ((rc = run(be, ct, &r, ready, done)) < 0)
		goto out;
	out->allgathers++;
	if ((rc = be->memcpy_d2h(sizes_host, sizes_dev, n * sizeof(int64_t))) < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		if ((size_t)sizes_host[i] > max)
			max = (size_t)sizes_host[i];
	payload_bytes = max ? max : 1;
	all_bytes = payload_bytes * n;
	host = calloc(all_bytes, 1);
	payload_dev = mem_alloc(mem, MEM_OTHER, payload_bytes);
	all_dev = mem_alloc(mem, MEM_OTHER, all_bytes);
	rc = -ENOMEM;
	if (!host || !payload_dev || !all_dev)
		goto out;
	memcpy(host, plan, (size_t)len);
	if ((rc = be->memcpy_h2d(payload_dev, host, payload_bytes)) < 0)
		goto out;
	r = (struct comm_request){.op = COMM_ALLGATHER, .comm = world, .send = payload_dev, .recv = all_dev,
				  .count = payload_bytes, .dtype = ncclUint8};
	if ((rc = run(be, ct, &r, ready, done)) < 0)
		goto out;
	out->allgathers++;

	/* broadcast_object_list of rank 0's global plan: its size, then it */
	int64_t global = (int64_t)all_bytes;
	if ((rc = be->memcpy_h2d(mine_dev, &global, sizeof global)) < 0)
		goto out;
	r = (struct comm_request){.op = COMM_BROADCAST, .comm = world, .send = mine_dev, .recv = mine_dev,
				  .count = 1, .dtype = ncclInt64, .root = 0};
	if ((rc = run(be, ct, &r, ready, done)) < 0)
		goto out;
	out->broadcasts++;
	r = (struct comm_request){.op = COMM_BROADCAST, .comm = world, .send = all_dev, .recv = all_dev,
				  .count = all_bytes, .dtype = ncclUint8, .root = 0};
	if ((rc = run(be, ct, &r, ready, done)) < 0)
		goto out;
	out->broadcasts++;

	/* the barrier once every shard is written (c10d: an AllReduce of one element) */
	float one = 1.0f;
	if ((rc = be->memcpy_h2d(barrier_dev, &one, sizeof one)) < 0)
		goto out;
	r = (struct comm_request){.op = COMM_ALLREDUCE, .comm = world, .send = barrier_dev, .recv = barrier_dev,
				  .count = 1, .dtype = ncclFloat32};
	if ((rc = run(be, ct, &r, ready, done)) < 0)
		goto out;
	out->allreduces++;
	rc = be->synchronize();
out:
	mem_free(mem, MEM_OTHER, all_dev, all_bytes);
	mem_free(mem, MEM_OTHER, payload_dev, payload_bytes);
	mem_free(mem, MEM_OTHER, barrier_dev, sizeof(float));
	mem_free(mem, MEM_OTHER, mine_dev, sizeof(int64_t));
	mem_free(mem, MEM_OTHER, sizes_dev, n * sizeof(int64_t));
	if (ready)
		be->event_free(ready);
	if (done)
		be->event_free(done);
	free(host);
	free(sizes_host);
	return rc;
}
