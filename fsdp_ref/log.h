/* fsdp_ref/log.h: the per-step JSON lines log (--log FILE).
 *
 * One line per rank per step, every rank appending to the same file
 * (O_APPEND, one write(2) per line, so lines never interleave). Rank 0
 * truncates the file before the communicator exists, and no rank writes
 * before that, so a run's file holds exactly that run. Keys are listed in
 * docs/fsdp_ref.md. */
#ifndef FSDP_REF_LOG_H
#define FSDP_REF_LOG_H

#include <stddef.h>
#include <stdint.h>

/* Everything one line reports. Counts are collectives issued during the step. */
struct log_record {
	int step, rank, world_size;
	double loss; /* global mean token loss of this step */
	int allgathers, forward_allgathers, backward_allgathers;
	int reduce_scatters, allreduces;
	uint64_t gathered_bytes, reduce_scattered_bytes;
	int64_t compute_ns, gather_wait_ns, reduce_wait_ns, loss_wait_ns, step_ns;
	uint64_t peak_persistent_bytes, peak_transient_bytes, peak_gradient_bytes;
	uint64_t peak_activation_bytes, peak_total_bytes;
	/* the run's configuration, repeated on each line so a line stands alone */
	int units, layers, prefetch, shard_group, reshard_size;
	uint64_t params, largest_unit_params;
	const char *wrap, *reshard, *param_dtype, *reduce_dtype, *backend;
	/* the training loop (docs/fsdp_ref.md, "The log") */
	int microbatches, sync_microbatches;
	int forward_allgathers_per_microbatch, backward_allgathers_per_microbatch;
	int recompute_allgathers, prefetched_allgathers, clip_allreduces;
	int gather_waits;		 /* entries of gather_wait_each */
	const int64_t *gather_wait_each; /* each gather wait of the step (ns), in the order waited for */
	/* what ran after the step, outside it */
	int eval_allgathers, eval_allreduces;
	int checkpoint_allgathers, checkpoint_broadcasts, checkpoint_allreduces;
	/* once per run, repeated */
	int init_broadcasts;
	const char *style, *grad_sync;
	int grad_accum, eval_every, checkpoint_every, forward_prefetch, activation_checkpoint, nvtx;
	double clip_grad;
	/* tensor parallelism: the mesh, then the step's collectives on the tp
	 * communicator (0 without TP) and the time compute waited for them */
	int tp, dp;
	int tp_allgathers, tp_reduce_scatters, tp_allreduces;
	int64_t tp_wait_ns;
	int eval_tp_allgathers, eval_tp_reduce_scatters; /* the eval pass after the step */
	/* --style zero3 only (zero3_gather NULL: none of these keys is written); elements are
	 * parameter elements, without the partitions' padding */
	const char *zero3_gather;	     /* "flat" or "coalesced" */
	int allgather_calls;		     /* ncclAllGather calls (a group's calls each count) */
	int optimizer_allgathers;	     /* the persistent tensors' re-gathers after the optimizer */
	uint64_t gathered_elements;	     /* sum of fetch_elements */
	uint64_t forward_gathered_elements;  /* of the fetches issued in forward */
	uint64_t backward_gathered_elements; /* of the fetches issued in backward */
	int fetches;			     /* entries of fetch_elements (= allgathers) */
	const uint64_t *fetch_elements;	     /* elements of each fetch event, in issue order */
	uint64_t bucket, persistence_threshold, max_reuse_distance, max_live, reduce_bucket; /* the flags */
	int persistent_params;	      /* tensors of at most persistence_threshold elements */
	uint64_t persistent_elements; /* their elements */
};

/* A fault line (--stall-at, --mismatch-at): what the trainer did to make
 * its job hang or desync, written once, before the collective it concerns.
 * It has a "fault" key and no "loss": readers of step lines skip it. */
struct log_fault {
	const char *fault; /* "stall" or "mismatch" */
	int step, rank, world_size;
	const char *comm;	    /* the communicator's role: world, dp_shard, dp_replicate, dp_regather, tp */
	uint64_t comm_handle;	    /* its ncclComm_t (fsdpscope's collective records carry the same) */
	int comm_rank, comm_nranks; /* this rank in it, and its size */
	uint64_t comm_seq;	    /* the collective's number on it, from 1 in issue order */
	const char *op;		    /* "AllGather", "ReduceScatter", "AllReduce", "Broadcast" */
	uint64_t count;		    /* the count the trainer meant */
	uint64_t issued_count;	    /* the count passed to NCCL (count - 1 for a mismatch) */
	int64_t realtime_ns;	    /* CLOCK_REALTIME when written (a benchmark's start) */
};

struct run_log;

/* Open `path` for appending; `truncate` empties it first (rank 0). NULL with
 * errno set on failure. */
struct run_log *log_open(const char *path, int truncate);
/* Append one line. 0 or -errno. */
int log_write(struct run_log *log, const struct log_record *r);
/* Append one fault line. Safe from any thread (one write(2)). 0 or -errno. */
int log_write_fault(struct run_log *log, const struct log_fault *f);
void log_close(struct run_log *log);

#endif /* FSDP_REF_LOG_H */
