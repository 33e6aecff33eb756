/* fsdp_ref/flat_param.c: a unit's sharded storage and initial values (see
 * flat_param.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_ref/flat_param.h"

size_t flat_param_persistent_bytes(size_t shard, enum fsdp_dtype param_dtype, enum fsdp_dtype reduce_dtype)
{
	size_t per = fsdp_dtype_size(param_dtype) + fsdp_dtype_size(reduce_dtype) + 8; /* + Adam m, v */
	if (param_dtype != FSDP_DTYPE_FP32)
		per += 4; /* separate fp32 master */
	return shard * per;
}

int flat_param_init(struct flat_param *fp, const struct fsdp_backend *be, struct mem_ledger *mem,
		    const struct unit_table *table, int unit, const struct model_config *cfg,
		    const struct model_tensor *tensors, enum fsdp_dtype param_dtype, enum fsdp_dtype reduce_dtype,
		    int shard_rank, int tp_rank, uint64_t seed)
{
	const struct unit_info *u = &table->units[unit];
	size_t n = u->shard;
	memset(fp, 0, sizeof *fp);
	fp->info = u;
	fp->unit = unit;
	fp->param_dtype = param_dtype;
	fp->reduce_dtype = reduce_dtype;
	fp->master = mem_alloc(mem, MEM_PERSISTENT, n * 4);
	fp->param = param_dtype == FSDP_DTYPE_FP32 ? (void *)fp->master
						   : mem_alloc(mem, MEM_PERSISTENT, n * fsdp_dtype_size(param_dtype));
	fp->grad = mem_alloc(mem, MEM_PERSISTENT, n * fsdp_dtype_size(reduce_dtype));
	fp->adam_m = mem_alloc(mem, MEM_PERSISTENT, n * 4);
	fp->adam_v = mem_alloc(mem, MEM_PERSISTENT, n * 4);
	fp->gather_ready = be->event_new();
	fp->gather_done = be->event_new();
	fp->reduce_ready = be->event_new();
	fp->reduce_done = be->event_new();
	fp->allreduce_done = be->event_new();
	float *host = calloc(n ? n : 1, sizeof *host);
	if (!fp->master || !fp->param || !fp->grad || !fp->adam_m || !fp->adam_v || !fp->gather_ready ||
	    !fp->gather_done || !fp->reduce_ready || !fp->reduce_done || !fp->allreduce_done || !host) {
		free(host);
		return -ENOMEM;
	}
	size_t lo = (size_t)shard_rank * n;
	flat_param_init_values(table, unit, cfg, tensors, seed, tp_rank, lo, lo + n, host);
	int rc = be->memcpy_h2d(fp->master, host, n * 4);
	free(host);
	if (rc < 0)
		return rc;
	if (fp->param != (void *)fp->master)
		be->cast(fp->param, param_dtype, fp->master, FSDP_DTYPE_FP32, n);
	if ((rc = be->memset_zero(fp->grad, n * fsdp_dtype_size(reduce_dtype))) < 0 ||
	    (rc = be->memset_zero(fp->adam_m, n * 4)) < 0 || (rc = be->memset_zero(fp->adam_v, n * 4)) < 0)
		return rc;
	return 0;
}

void flat_param_init_values(const struct unit_table *table, int unit, const struct model_config *cfg,
			    const struct model_tensor *tensors, uint64_t seed, int tp_rank, size_t lo, size_t hi,
			    float *out)
{
	/* element by element from each tensor that overlaps [lo, hi) */
	memset(out, 0, (hi - lo) * sizeof *out);
	for (int id = 0; id < table->ntensors; id++) {
		if (table->tensor_unit[id] != unit)
			continue;
		size_t off = table->tensor_offset[id], end = off + tensors[id].numel;
		size_t a = off > lo ? off : lo, b = end < hi ? end : hi;
		for (size_t i = a; i < b; i++)
			out[i - lo] =
			    model_init_value(cfg, &tensors[id], id,
					     model_tensor_global_index(cfg, &tensors[id], tp_rank, i - off), seed);
	}
}

void flat_param_release(struct flat_param *fp, const struct fsdp_backend *be, struct mem_ledger *mem)
{
	if (!fp->info)
		return;
	size_t n = fp->info->shard, padded = fp->info->padded;
	mem_free(mem, MEM_GATHERED, fp->full, padded * fsdp_dtype_size(fp->param_dtype));
	mem_free(mem, MEM_GATHERED, fp->regathered, fp->regathered_bytes);
	mem_free(mem, MEM_GRADIENT, fp->grad_full, padded * 4);
	mem_free(mem, MEM_GRADIENT, fp->rs_send, fp->rs_send_bytes);
	mem_free(mem, MEM_GRADIENT, fp->grad_unsharded, padded * 4);
	mem_free(mem, MEM_PERSISTENT, fp->grad_acc, n * 4);
	if (fp->param != (void *)fp->master)
		mem_free(mem, MEM_PERSISTENT, fp->param, n * fsdp_dtype_size(fp->param_dtype));
	mem_free(mem, MEM_PERSISTENT, fp->master, n * 4);
	mem_free(mem, MEM_PERSISTENT, fp->grad, n * fsdp_dtype_size(fp->reduce_dtype));
	mem_free(mem, MEM_PERSISTENT, fp->adam_m, n * 4);
	mem_free(mem, MEM_PERSISTENT, fp->adam_v, n * 4);
	struct fsdp_event *evs[] = {fp->gather_ready, fp->gather_done, fp->reduce_ready, fp->reduce_done,
				    fp->allreduce_done};
	for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
		if (evs[i])
			be->event_free(evs[i]);
	memset(fp, 0, sizeof *fp);
}
