/* fsdp_ref/flat_param.h: one FSDP unit's storage (a FlatParameter).
 *
 * The unit's tensors, flattened into one buffer of unit_info.padded
 * elements (layout from units.h), split evenly over the S ranks of a shard
 * group; this rank stores elements [shard_rank * shard, (shard_rank + 1) *
 * shard). Persistent per rank: the parameter shard in the parameter dtype,
 * its fp32 master copy (the same buffer when the parameter dtype is fp32),
 * the gradient shard in the reduce dtype, and fp32 Adam m and v. The
 * transient buffers (gathered parameters, the partially resharded copy,
 * the full gradient, the reduce-scatter input) are managed by the FSDP
 * runtime (fsdp.c); they live here so that one struct holds a unit's state.
 * Internal to fsdp_ref's runtime. */
#ifndef FSDP_REF_FLAT_PARAM_H
#define FSDP_REF_FLAT_PARAM_H

#include <stddef.h>
#include <stdint.h>

#include "fsdp_ref/backend.h"
#include "fsdp_ref/comm.h"
#include "fsdp_ref/mem.h"
#include "fsdp_ref/units.h"

struct flat_param {
	const struct unit_info *info;
	int unit;
	enum fsdp_dtype param_dtype, reduce_dtype;
	/* persistent (MEM_PERSISTENT), [info->shard] elements each */
	void *param;   /* parameter shard, param_dtype */
	float *master; /* fp32 master shard; == param when param_dtype is fp32 */
	void *grad;    /* gradient shard, reduce_dtype (reduce-scatter output) */
	float *adam_m, *adam_v;
	/* transient, owned by the runtime */
	void *full;	  /* [padded] gathered parameters (MEM_GATHERED) or NULL */
	void *regathered; /* [padded / G] this rank's part kept after forward (MEM_GATHERED) */
	size_t regathered_bytes;
	float *grad_full; /* [padded] fp32 gradient being written by backward (MEM_GRADIENT) */
	void *rs_send;	  /* reduce-scatter input until it completes (MEM_GRADIENT); with an
			   * fp32 reduce dtype it is the former grad_full, handed over */
	size_t rs_send_bytes;
	float *grad_unsharded; /* [padded] fp32 gradient summed over micro-batches that did not
				* reduce (MEM_GRADIENT), until the next one that does */
	float *grad_acc;       /* [shard] fp32 reduced gradient summed over the micro-batches of a
				* step (MEM_PERSISTENT, only when the runtime accumulates) */
	int gather_pending; /* a gather into full was submitted and not yet waited for */
	int reduce_pending; /* a reduce-scatter (+ all-reduce) was submitted, not yet reaped */
	struct comm_request gather, reduce, allreduce;
	struct fsdp_event *gather_ready, *gather_done, *reduce_ready, *reduce_done, *allreduce_done;
};

/* Allocate unit `unit`'s persistent shards (through `mem`) and its events,
 * and set the initial values: master = model_init_value of each element of
 * this rank's shard (padding 0), param = master in param_dtype, gradient and
 * Adam moments 0. `tensors` is the model's tensor table (TP-local), `seed`
 * the run's, `tp_rank` this rank's index in its TP group (0 without TP).
 * 0 or -ENOMEM (what was allocated is released by flat_param_release). */
int flat_param_init(struct flat_param *fp, const struct fsdp_backend *be, struct mem_ledger *mem,
		    const struct unit_table *table, int unit, const struct model_config *cfg,
		    const struct model_tensor *tensors, enum fsdp_dtype param_dtype, enum fsdp_dtype reduce_dtype,
		    int shard_rank, int tp_rank, uint64_t seed);

/* The initial values of elements [lo, hi) of unit `unit`'s flat layout, as
 * tp rank `tp_rank` holds it, into out[0 .. hi - lo): model_init_value of
 * each element's index in the whole tensor, 0 for padding. The same values
 * on every rank of a tp rank's shard group, and the same weights for any
 * --tp. */
void flat_param_init_values(const struct unit_table *table, int unit, const struct model_config *cfg,
			    const struct model_tensor *tensors, uint64_t seed, int tp_rank, size_t lo, size_t hi,
			    float *out);

/* Free everything, persistent and transient. */
void flat_param_release(struct flat_param *fp, const struct fsdp_backend *be, struct mem_ledger *mem);

/* Bytes of persistent memory one unit of `shard` elements needs per rank:
 * the ledger row (see docs/fsdp_ref.md). */
size_t flat_param_persistent_bytes(size_t shard, enum fsdp_dtype param_dtype, enum fsdp_dtype reduce_dtype);

#endif /* FSDP_REF_FLAT_PARAM_H */
