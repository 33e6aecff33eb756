/* fsdp_ref/units.h: FSDP units and their flat layout.
 *
 * Given the model's tensors and a wrap spec, decide which tensors form each
 * unit, where each tensor sits in its unit's flat buffer, and which module's
 * hooks gather, reshard and reduce each unit. Units are numbered in forward
 * order: unit 0 is the root (embeddings, final norm, head; everything with
 * --wrap model). Pure bookkeeping: no memory beyond the table, no backend.
 *
 * Units hold the TP-local tensors (model_tensors with cfg->tp). With
 * cfg->tp > 1, inside a unit the tensors TP splits come first and the
 * replicated ones (norms, the root's) last, so that the replicated ones form
 * one span whose gradient one AllReduce on the tp communicator can sum.
 * Sizes do not depend on that order (each tensor is padded on its own). */
#ifndef FSDP_REF_UNITS_H
#define FSDP_REF_UNITS_H

#include <stddef.h>

#include "fsdp_ref/model.h"
#include "fsdp_ref/wrap.h"

/* Offsets of tensors inside a unit are multiples of this many elements (so a
 * GPU backend gets aligned tensors), and a unit's flat size is a multiple of
 * this times the shard group size (so shards are aligned too). Padding is
 * zero and stays zero (its gradient is zero). */
#define UNITS_ALIGN 64

struct unit_info {
	char name[32]; /* module name: "root", "layers.3", "layers.3.attn.q", "layers.2-3" */
	int is_root;
	size_t numel;  /* parameters in the unit */
	size_t padded; /* flat buffer elements: numel + alignment and shard padding */
	size_t shard;  /* padded / shard group size: what each rank stores */
	/* [replicated_begin, replicated_end): with cfg->tp > 1, the elements of
	 * the flat layout that hold tensors every tp rank holds whole (padding
	 * between them included); empty (begin == end) when the unit has none,
	 * and without TP. */
	size_t replicated_begin, replicated_end;
	/* The modules whose hooks act on this unit: pre-forward of fwd_open
	 * gathers it, post-forward of fwd_close reshards it, pre-backward of
	 * bwd_open gathers it again, post-backward of bwd_close reduce-scatters
	 * its gradient. */
	struct model_module fwd_open, fwd_close, bwd_open, bwd_close;
};

struct unit_table {
	int nunits;
	struct unit_info *units; /* forward order, root first */
	int ntensors;
	int *tensor_unit;				  /* [ntensors] unit of each tensor */
	size_t *tensor_offset;				  /* [ntensors] element offset in the unit's flat buffer */
	int nmodules;					  /* model_modules(cfg) */
	int *fwd_open, *fwd_close, *bwd_open, *bwd_close; /* [nmodules] unit or -1 */
	int *bwd_order;					  /* [nunits] units in backward order (root first) */
	int *bwd_pos;					  /* [nunits] position of each unit in bwd_order */
	size_t largest_unit;				  /* max numel over units */
};

/* Build the table for `cfg` wrapped by `spec`, shards over `shard_ranks`
 * ranks. NULL on out-of-memory. Free with units_free. */
struct unit_table *units_build(const struct model_config *cfg, const struct wrap_spec *spec, int shard_ranks);
void units_free(struct unit_table *t);

#endif /* FSDP_REF_UNITS_H */
