/* fsdp_ref/counts.h: the closed-form count of collectives per training step.
 *
 * The single place the formula is written. fsdp_ref's own per-step counts
 * are tested against it, and the profiler's tests use it as ground truth for
 * any run of fsdp_ref. With U units (root included, wrap_unit_count), N
 * ranks, shard groups of S ranks (R = N / S replicas) and reshard-after-
 * forward size G (0 = false, S = true, or a divisor of S):
 *   forward AllGathers   = U              (every unit once, root included)
 *   backward AllGathers  = G > 0 ? U - 1 : 0   (the root is never resharded)
 *   ReduceScatters       = U
 *   AllReduces           = (R > 1 ? U : 0) + 1  (HSDP gradient shards across
 *                          replicas, plus one 8-byte loss AllReduce per step)
 * The same counts hold at N = 1: fsdp_ref issues every collective on a
 * one-rank communicator too.
 *
 * The training loop multiplies them: with K micro-batches per step (K
 * forward / backward cycles) every gather count is per micro-batch times K;
 * the ReduceScatters and HSDP AllReduces happen once per micro-batch that
 * synchronises gradients (K, or 1 with --grad-sync last). FSDP1 with
 * activation checkpointing gathers every resharded unit once more for its
 * recomputation: backward gathers = 2 (U - 1) per micro-batch. --clip-grad
 * adds one AllReduce per step. Outside the steps: U init Broadcasts per
 * communicator with --sync-module-states (S group, R group); U AllGathers
 * and one AllReduce per eval pass; 2 AllGathers, 2 Broadcasts and 1
 * AllReduce per checkpoint save.
 *
 * Tensor parallelism (--tp T; N = dp x T, the FSDP groups inside dp): N
 * above is then the data-parallel size dp = N / T (S divides dp, R = dp / S)
 * and the counts above are the FSDP ones, on the shard / replica / regather
 * communicators of each tp rank, unchanged. The tp communicator carries,
 * with L blocks and U_rep units that hold replicated tensors (the root, and
 * every unit holding a block's norms: U for block / group / model wraps, L + 1
 * for linear):
 *   per micro-batch, forward   2 L AllGathers + 2 L ReduceScatters
 *                    backward  2 L AllGathers + 2 L ReduceScatters + U_rep AllReduces
 *   per step, with --clip-grad 1 AllReduce (the norm's second mesh dimension)
 *   per eval pass              2 L AllGathers + 2 L ReduceScatters
 * so per step tp AllGathers = tp ReduceScatters = 4 L K and tp AllReduces =
 * U_rep K (+ 1 with --clip-grad), whatever --grad-sync (the replicated
 * gradients are summed every micro-batch). --activation-checkpoint adds none:
 * the recomputation is emulated. */
#ifndef FSDP_REF_COUNTS_H
#define FSDP_REF_COUNTS_H

#include <stddef.h>

/* A run's configuration, in the trainer's own flag syntax. */
struct fsdp_count_config {
	const char *wrap;		   /* --wrap spec (wrap.h); NULL = "block" */
	int layers;			   /* --layers */
	const char *reshard_after_forward; /* "true", "false" or an integer G; NULL = "true" */
	int world_size;			   /* N ranks */
	int shard_group;		   /* --shard-group S; 0 = N (no HSDP) */
	int style;			   /* enum fsdp_style (options.h); 0 = fsdp2 */
	int grad_accum;			   /* --grad-accum K; 0 = 1 */
	int grad_sync_last;		   /* --grad-sync last */
	int clip_grad;			   /* 1 with --clip-grad */
	int activation_checkpoint;	   /* --activation-checkpoint */
	int tp;				   /* --tp T; 0 = 1 (world_size = dp x T) */
};

/* Collectives per step. */
struct fsdp_counts {
	int units;		 /* FSDP units, the root included */
	int forward_allgathers;	 /* issued in forward (prefetched ones included) */
	int backward_allgathers; /* re-gathers of resharded units for backward */
	int allgathers;		 /* forward + backward */
	int reduce_scatters;	 /* one per unit */
	int hsdp_allreduces;	 /* gradient shards across replicas (R > 1) */
	int loss_allreduces;	 /* the loss, always 1 */
	int allreduces;		 /* hsdp + loss + clip */
	/* per step, with the training loop (counts above are per step too) */
	int microbatches;			/* K */
	int sync_microbatches;			/* micro-batches that reduce-scatter */
	int forward_allgathers_per_microbatch;	/* U */
	int backward_allgathers_per_microbatch; /* re-gathers, recomputation included */
	int recompute_allgathers;		/* of the backward gathers, the recomputation's */
	int clip_allreduces;			/* 1 with --clip-grad */
	/* outside the steps */
	int init_broadcasts;			  /* with --sync-module-states, before step 0 */
	int eval_allgathers, eval_allreduces;	  /* per eval pass */
	int checkpoint_allgathers, checkpoint_broadcasts, checkpoint_allreduces; /* per save */
	/* tensor parallelism: the mesh, and per step the collectives on the tp
	 * communicator (all 0 when tp == 1) */
	int tp, dp;					 /* T, N / T */
	int tp_replicated_units;			 /* U_rep: units that hold replicated tensors */
	int tp_allgathers, tp_reduce_scatters;		 /* 4 L K each */
	int tp_allreduces;				 /* U_rep K + tp_clip_allreduces */
	int tp_clip_allreduces;				 /* 1 with --clip-grad */
	int eval_tp_allgathers, eval_tp_reduce_scatters; /* per eval pass: 2 L each */
};

/* The counts for `cfg` into *out. 0, or -EINVAL when the configuration is
 * invalid (bad wrap spec, T not dividing N, S not dividing N / T, G not
 * dividing S) with the reason in err (err may be NULL). */
int fsdp_expected_counts(const struct fsdp_count_config *cfg, struct fsdp_counts *out, char *err, size_t errlen);

/* Parse --reshard-after-forward for shard groups of `shard_group` ranks into
 * *size, the number of ranks a unit stays sharded over between its forward
 * and backward, 0 meaning not resharded: "true" -> shard_group (also when
 * that is 1: the unit is freed and gathered again, on one rank),
 * "false" -> 0, "G" -> G where G divides shard_group (G = 1 -> 0).
 * 0 or -EINVAL with a message in err (may be NULL). */
int fsdp_reshard_parse(const char *text, int shard_group, int *size, char *err, size_t errlen);

#endif /* FSDP_REF_COUNTS_H */
