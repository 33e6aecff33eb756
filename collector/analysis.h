/*
 * analysis.h - the diagnosis of one trace, as plain structs.
 *
 * This is the contract between the collector's analysis (the collector/ sources) and
 * everything that reads it: the lint rules (rules/), `fsdpscope report` and
 * `lint` (cli/), the dashboard (tui/). Rules read only these structs.
 *
 * Stability: fields and enum values are only ever appended (or take over a
 * reserved slot); nothing is renamed or renumbered. A reader built against an
 * older analysis.h keeps working.
 *
 * Conventions:
 *  - "per step" figures are medians over the analysed steps of the headline
 *    rank (options.rank, default rank 0) unless the field says otherwise;
 *    per_rank[] holds the same figures for every rank;
 *  - times are nanoseconds, sizes bytes, parameter counts elements;
 *  - an AllGather *event* is one ncclAllGather call, or all the AllGather
 *    calls of one ncclGroupStart/End group (PyTorch's coalesced variants):
 *    counts of gathers are counts of events; `calls` counts the calls;
 *  - 0 means "not known" for a size or a time unless a field says otherwise;
 *    ratios that cannot be computed are negative (ANALYSIS_UNKNOWN).
 *
 * The result is made by analyze_trace() (collector/analyze_traces.h) and released
 * with analysis_result_free(). The JSON schema written from it by
 * `report --json` is docs/report-schema.md ("fsdpscope.report/2").
 */
#ifndef FSS_COLLECTOR_ANALYSIS_H
#define FSS_COLLECTOR_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

#include "collector/source.h"

/* The report schema these structs fill. */
#define ANALYSIS_SCHEMA "fsdpscope.report/2"
/* Module names and range names are cut to this many bytes (NUL included). */
#define ANALYSIS_NAME_MAX 64
/* Free-text notes the analysis leaves for the report (what it could not do). */
#define ANALYSIS_NOTES_MAX 8
#define ANALYSIS_NOTE_BYTES 160
/* A ratio (fraction, MFU) that could not be computed. */
#define ANALYSIS_UNKNOWN (-1.0)

/* How step boundaries were found. */
enum analysis_step_detection {
	ANALYSIS_STEPS_NONE = 0,   /* no step found (too few collectives, no repetition) */
	ANALYSIS_STEPS_NVTX = 1,   /* NVTX step ranges ("step N", "ProfilerStep#N", ...) */
	ANALYSIS_STEPS_PERIOD = 2, /* the period of the collective signature sequence */
};

/* Where exposure intervals came from. */
enum analysis_exposure_source {
	ANALYSIS_EXPOSURE_NONE = 0,  /* nothing to measure with (no compute signal) */
	ANALYSIS_EXPOSURE_CUPTI = 1, /* GPU kernel intervals */
	ANALYSIS_EXPOSURE_HOST = 2,  /* host call intervals and NVTX compute ranges */
};

/* reshard_after_forward of the non-root units, as the gathers show it. */
enum analysis_reshard {
	ANALYSIS_RESHARD_UNKNOWN = 0, /* no step, or no non-root unit */
	ANALYSIS_RESHARD_TRUE = 1,    /* every non-root unit gathered again for backward */
	ANALYSIS_RESHARD_FALSE = 2,   /* none gathered again: kept from forward to backward */
	ANALYSIS_RESHARD_GROUP = 3,   /* gathered again on a smaller communicator (group_size) */
	ANALYSIS_RESHARD_MIXED = 4,   /* units differ */
};

enum analysis_phase {
	ANALYSIS_PHASE_FORWARD = 1,
	ANALYSIS_PHASE_BACKWARD = 2,
};

/* What a communicator carries, as its traffic shows (collector/comm_roles.c,
 * docs/patterns.md). Units, phases and reshard are read on the FSDP group
 * only; the other roles are reported beside it. */
enum analysis_comm_role {
	ANALYSIS_ROLE_UNKNOWN = 0,
	ANALYSIS_ROLE_FSDP = 1,            /* an FSDP shard group: parameter gathers per unit, gradient reduce-scatters
	                                      (several: struct analysis_fsdp_group) */
	ANALYSIS_ROLE_FSDP_REGATHER = 2,   /* the smaller group backward re-gathers run on (reshard_after_forward=G) */
	ANALYSIS_ROLE_REPLICATE = 3,       /* HSDP replicate group: all-reduces of the reduce-scattered shards */
	ANALYSIS_ROLE_TENSOR_PARALLEL = 4, /* activation gathers and reduce-scatters, alternating, several per block */
	ANALYSIS_ROLE_PIPELINE = 5,        /* neighbour send / recv between stages */
	ANALYSIS_ROLE_EXPERT = 6,          /* all-to-all of tokens between a router and the experts */
	ANALYSIS_ROLE_ALLREDUCE = 7,       /* other all-reduce traffic: data-parallel buckets, tensor parallel
	                                      without sequence parallelism */
	ANALYSIS_ROLE_STEP = 8,            /* a few small collectives per step: the loss, the gradient norm */
	ANALYSIS_ROLE_ONE_OFF = 9,         /* only before the first step, or now and then: init broadcasts,
	                                      checkpoint planning */
	ANALYSIS_ROLE_IDLE = 10,           /* no collective (a parent that was only split, say) */
	ANALYSIS_ROLE_CONTEXT_PARALLEL = 11, /* activation collectives on a sub-group of the FSDP group, inside its
	                                      units: k / v gathers and their reduce-scatters, ring rotations of
	                                      k / v and their gradients */
	ANALYSIS_ROLE_ALL_TO_ALL = 12,     /* all-to-all (to every peer of the group in one call) that no router and
	                                      no expert group explain: Ulysses-style sequence parallel, say */
	ANALYSIS_ROLE_MAX
};

/* How the analysis ended (docs/report-schema.md, "verdict"). */
enum analysis_verdict {
	ANALYSIS_DIAGNOSED = 0, /* FSDP units, phases and policy read from the stream */
	ANALYSIS_BUCKETED = 1,  /* bucketed fetching (DeepSpeed ZeRO-3): gathers follow fetch buckets, not
	                           modules; counts and bucket sizes, no unit analysis */
	ANALYSIS_UNDECIDED = 2, /* could not diagnose: see undecided_reason and undecided_why */
};

/* Why a trace could not be diagnosed. */
enum analysis_undecided {
	ANALYSIS_UNDECIDED_NONE = 0,
	ANALYSIS_UNDECIDED_NO_COLLECTIVES = 1, /* no collective in the trace */
	ANALYSIS_UNDECIDED_NO_FSDP = 2,        /* no communicator carries both AllGathers and ReduceScatters */
	ANALYSIS_UNDECIDED_NO_STEP = 3,        /* no repeating training step */
	ANALYSIS_UNDECIDED_NO_REDUCTION = 4,   /* steps without ReduceScatters: forward and backward cannot be told */
	ANALYSIS_UNDECIDED_PATTERN = 5,        /* gathers and reduce-scatters that match no pattern the analysis knows */
	ANALYSIS_UNDECIDED_INCOMPLETE = 6,     /* every step lost collectives or was cut off (struct analysis_trust) */
	ANALYSIS_UNDECIDED_MAX
};

/* Where the forward / backward split of the gathers came from. */
enum analysis_phase_source {
	ANALYSIS_PHASES_NONE = 0,      /* not known: forward / backward counts are not reported */
	ANALYSIS_PHASES_STRUCTURE = 1, /* the stream's structure: each micro-batch's forward gathers every unit in
	                                  order, its reduce-scatters run in the mirrored order */
};

/* Why an AllGather was exposed. Numbered as the report lists them; decided
 * in the order: first-of-phase, host-late, no-prefetch, bandwidth-bound. */
enum analysis_cause {
	ANALYSIS_CAUSE_HIDDEN = 0,          /* not exposed (under options.exposed_min_ns) */
	ANALYSIS_CAUSE_FIRST_OF_PHASE = 1,  /* first gather of the forward or of the backward:
	                                       no compute of the phase before it to hide behind */
	ANALYSIS_CAUSE_NO_PREFETCH = 2,     /* started only after the compute before it had ended:
	                                       issued when it was needed, not ahead, in a step whose
	                                       gathers are mostly issued so (collector/overlap.h) */
	ANALYSIS_CAUSE_BANDWIDTH_BOUND = 3, /* started while compute ran, but lasted longer than the
	                                       compute it could hide behind */
	ANALYSIS_CAUSE_HOST_LATE = 4,       /* (CUPTI) the device was idle waiting for the host: the
	                                       call was entered after the compute before it had ended
	                                       and its kernel started right away; or (either timing) in a
	                                       step that prefetches, a gather that started on an idle
	                                       stream with no compute under it: issued late */
	ANALYSIS_CAUSE_MAX
};

/* Defaults of struct analysis_options (analysis_options_init sets them). */
#define ANALYSIS_DEFAULT_PREFETCH 1
#define ANALYSIS_DEFAULT_PARAM_BYTES 2.0     /* bf16 parameters */
#define ANALYSIS_DEFAULT_GRAD_BYTES 2.0      /* bf16 gradients */
#define ANALYSIS_DEFAULT_MASTER_BYTES 4.0    /* fp32 master weights */
#define ANALYSIS_DEFAULT_OPTIMIZER_BYTES 8.0 /* Adam: fp32 m and v */
/* Ranges that mark a step: domain:name glob patterns, comma separated. */
/* The GPU copies of a PyTorch profiler trace's annotations (domain
 * gpu_user_annotation, collector/kineto_emit.c) would count every
 * ProfilerStep# twice: left out. */
#define ANALYSIS_DEFAULT_STEP_RANGES "fsdp_ref:step *,*:ProfilerStep#*,-gpu_user_annotation:*"
/* Ranges that count as compute in host timing: later patterns win, a
 * leading '-' excludes. fsdp_ref's unit and phase ranges, not its step
 * ranges; PyTorch module ranges (emit_nvtx's "nn.Module: *"). */
#define ANALYSIS_DEFAULT_COMPUTE_RANGES "fsdp_ref:*,-fsdp_ref:step *,*:nn.Module: *"
#define ANALYSIS_DEFAULT_EXPOSED_MIN_NS 1000 /* exposure under 1 us is noise: hidden */

/* What the user tells the analysis. Fill with analysis_options_init() and
 * change what the command line sets. Strings are borrowed, not copied: they
 * must outlive the analysis call. */
struct analysis_options {
	int layers;       /* --layers L: repeating units the model has; 0: infer */
	int rank;         /* rank of the headline figures; -1: the lowest rank seen */
	int prefetch;     /* units gathered ahead, for the transient row (default 1) */
	int warmup_steps; /* steps to leave out at the start (the detected warm-up counts towards
	                     them); -1: only the detected warm-up (default) */
	double param_bytes;     /* bytes per parameter as gathered and computed (bf16: 2) */
	double grad_bytes;      /* bytes per gradient element kept (bf16: 2) */
	double master_bytes;    /* bytes per fp32 master weight (4; 0 without master copy) */
	double optimizer_bytes; /* optimizer state bytes per parameter (Adam: 8, SGD+momentum: 4) */
	int param_bytes_from_trace; /* 1: param_bytes from the gathers' dtype when seen (default 0) */
	const char *step_ranges;    /* NULL: ANALYSIS_DEFAULT_STEP_RANGES; "": none (steps from the period) */
	const char *compute_ranges; /* NULL: ANALYSIS_DEFAULT_COMPUTE_RANGES; "": none */
	int force_host_timing;      /* 1: measure exposure from host timing even with CUPTI */
	uint64_t exposed_min_ns;    /* exposure below this is "hidden" (default 1000) */
	double peak_flops;          /* peak FLOP/s of one GPU (or rank); 0: unknown, no MFU */
	double flops_per_step;      /* model FLOPs of one step, all ranks together; 0: unknown */
	double tokens_per_step;     /* tokens of one step, all ranks: FLOPs = 6 P tokens; 0: unknown */
	uint64_t gpu_mem_bytes;     /* memory of one GPU for the ledger's headroom; 0: unknown */
	const char *fsdp_comm;      /* --fsdp-comm: the FSDP group, by the id, dimension or name the report lists
	                               (analysis_comm); NULL: told from the traffic */
	uint64_t hang_timeout_ns;   /* --hang-timeout: a wait longer than this in a collective others have not
	                               entered is a hang (default ANALYSIS_DEFAULT_HANG_TIMEOUT_NS) */
	unsigned read_flags;        /* how trace files are read: TRACE_READ_* (common/trace_parser.h;
	                               TRACE_READ_SALVAGE: --salvage, past a damaged file header); 0 */
};

/* Collective counts of one step. */
struct analysis_step_counts {
	uint32_t allgathers;          /* AllGather events (a group counts once) */
	uint32_t forward_allgathers;  /* events of the forward */
	uint32_t backward_allgathers; /* events of the backward (re-gathers) */
	uint32_t allgather_calls;     /* individual ncclAllGather calls */
	uint32_t reduce_scatters;     /* ReduceScatter events */
	uint32_t reduce_scatter_calls;
	uint32_t allreduces;          /* AllReduce events (HSDP replica reduction, loss, ...) */
	uint32_t allreduce_calls;
	uint32_t other;               /* broadcast, send/recv, ... events */
	uint32_t step_allgathers;     /* AllGather events on the FSDP group that gather no unit (no unit's size):
	                                 per-step collectives such as metric gathers or weight sync, not in
	                                 allgathers (collector/phases.h) */
};

/* Repeating units: the forward gathers of a step are root gathers plus a
 * motif of gathers_per_unit gathers repeated repeating_units times. */
struct analysis_units {
	uint32_t repeating_units;  /* L: copies of the motif */
	uint32_t gathers_per_unit; /* k: gathers in one copy (1 = wrapped per block; 8 = per Linear in fsdp_ref) */
	uint32_t root_gathers;     /* forward gathers outside the repeat (leading + trailing) */
	uint32_t leading_gathers;  /* of those, before the repeat (the root, embeddings) */
	uint32_t trailing_gathers; /* of those, after the repeat (final norm, head) */
	uint32_t motif_start;      /* index of the repeat's first gather among the forward gathers */
	uint32_t forward_units;    /* FSDP units seen = forward gather events */
	int layers_given;          /* 1: repeating_units is the user's --layers */
	uint64_t largest_unit_params;    /* U: elements of the largest forward gather (one unit) */
	uint64_t total_params;           /* P: elements gathered over the forward (count x nranks, summed) */
	uint64_t repeating_unit_params;  /* elements of one copy of the motif (one block) */
	uint64_t root_params;            /* elements of the root gathers */
	uint32_t shard_ranks;      /* N: ranks of the communicator the forward gathers run on */
	uint32_t reserved;
	char repeating_unit_name[ANALYSIS_NAME_MAX]; /* e.g. "layers.*" from NVTX, "" when unknown */
	char largest_unit_name[ANALYSIS_NAME_MAX];   /* NVTX name of the largest unit, "" when unknown */
	/* What the gathers alone say (equal to the above unless --layers was given): */
	uint32_t inferred_repeating_units;
	uint32_t inferred_gathers_per_unit;
	int layers_match;          /* with --layers: 1 when a repeat of exactly L copies exists; -1 without --layers */
	uint32_t reserved2;
};

/* Reshard policy, read from the backward gathers (they mirror the forward). */
struct analysis_reshard_info {
	enum analysis_reshard policy; /* of the non-root units */
	uint32_t group_size;          /* G for ANALYSIS_RESHARD_GROUP (backward communicator ranks) */
	uint32_t units;               /* non-root units looked at */
	uint32_t resharded_units;     /* gathered twice per step, same communicator */
	uint32_t retained_units;      /* gathered once per step */
	uint32_t group_units;         /* gathered again on a smaller communicator */
	uint32_t root_resharded;      /* 1 when the first forward unit (the root) is gathered again */
	uint32_t unmatched_backward;  /* backward gathers that mirror no forward unit */
	/* What the other choice would cost, for the reshard-policy rule: */
	uint64_t regather_bytes_per_step;  /* wire bytes of the backward gathers now */
	uint64_t retain_extra_bytes;       /* param bytes held from forward to backward if every
	                                      resharded non-root unit were kept instead */
	uint32_t reshard_extra_gathers;    /* gathers per step added if every retained unit were resharded */
	uint32_t reserved;
	uint64_t reshard_extra_wire_bytes; /* and their wire bytes per step */
	uint32_t recompute_regathers;      /* per micro-batch: second backward gathers of a unit (activation
	                                      checkpointing around FSDP1 units re-gathers for the
	                                      recomputation); not a wrap or reshard choice */
	uint32_t exceptions;               /* non-root units whose choice differs from `policy`, which is then
	                                      the repeating units' (blocks'): the last block, embeddings or
	                                      head kept as torchtitan keeps them; 0 otherwise */
};

/* Exposure of the AllGathers: the figures of one representative step (the
 * analysed step whose compute_wait_ns_per_step is the lower median, `step`),
 * so that they add up: every per-step total is the sum of the gathers
 * table's rows (the same step), the causes sum to the totals, and the
 * breakdown is the same step's. Two figures per gather, named apart:
 *  - exposed: its own interval (kernel with CUPTI, call with host timing)
 *    minus the union of compute, each instant counted for one gather: the
 *    comm/compute overlap of PyTorch's trace analysis (HTA);
 *  - compute wait: how long compute stood still waiting for it, the time it
 *    queued behind other collectives included: what fsdp_ref's gather_wait
 *    measures (the ground-truth comparison uses this one). */
struct analysis_exposure {
	enum analysis_exposure_source source;
	uint32_t reserved;
	uint64_t allgather_ns_per_step;         /* the gathers' own time: sum of analysis_gather.duration_ns */
	uint64_t exposed_allgather_ns_per_step; /* of it, with no compute under it: sum of exposed_ns */
	double exposed_fraction;                /* exposed / allgather, ANALYSIS_UNKNOWN when 0 / 0 */
	uint64_t forward_exposed_ns_per_step;   /* exposed, by phase (forward + backward = exposed) */
	uint64_t backward_exposed_ns_per_step;
	uint64_t reduce_scatter_ns_per_step;    /* merged ReduceScatter time */
	uint64_t exposed_reduce_scatter_ns_per_step;
	uint64_t allreduce_ns_per_step;
	uint64_t exposed_allreduce_ns_per_step;
	uint32_t exposed_gathers;               /* gather events of the step with a cause other than hidden */
	uint32_t cause_gathers[ANALYSIS_CAUSE_MAX]; /* gather events of the step by cause */
	uint64_t cause_ns[ANALYSIS_CAUSE_MAX];      /* exposed ns by cause (sum: exposed_allgather_ns_per_step) */
	uint64_t compute_wait_ns_per_step;      /* compute's wait on gathers: sum of analysis_gather.compute_wait_ns */
	uint64_t forward_compute_wait_ns_per_step;  /* by phase */
	uint64_t backward_compute_wait_ns_per_step;
	uint64_t other_compute_wait_ns_per_step;    /* compute's wait on other collectives it waits for at once
	                                               (tensor-parallel activations, the loss): not in the above */
	uint64_t cause_compute_wait_ns[ANALYSIS_CAUSE_MAX]; /* compute wait by cause (sum: compute_wait_ns_per_step) */
	uint32_t step;                          /* ordinal of the representative step (steps of the headline rank
	                                           before it, warm-up included: fsdp_ref's step number) */
	uint32_t reserved2;
};

/* The memory ledger (planning calculator and trace alike). Bytes per rank. */
struct analysis_ledger {
	uint64_t params;              /* P */
	uint32_t ranks;               /* N: shard ranks */
	uint32_t prefetch;            /* units gathered ahead */
	uint64_t largest_unit_params; /* U */
	uint32_t units;               /* FSDP units (forward gathers); 0 when unknown */
	uint32_t reserved;
	double param_bytes, grad_bytes, master_bytes, optimizer_bytes; /* per parameter */
	uint64_t persistent_bytes_per_rank; /* (param + grad + master + optimizer) P / N: 16 P / N */
	uint64_t transient_bytes_per_rank;  /* param_bytes U (1 + prefetch) */
	uint64_t peak_state_bytes_per_rank; /* persistent + transient (activations not included) */
	int64_t headroom_bytes;             /* gpu_mem - peak state; 0 when gpu_mem unknown */
	uint64_t gpu_mem_bytes;             /* as given */
	uint64_t wire_bytes_per_step;       /* observed in the trace when analysed from one (gathered
	                                       outputs + reduce-scatter inputs + 2 x all-reduce bytes),
	                                       else the model 3 P param_bytes */
	uint64_t model_wire_bytes_per_step; /* 3 P param_bytes: AG forward + AG backward + RS */
	uint64_t ddp_wire_bytes_per_step;   /* 2 P param_bytes: DDP's one all-reduce */
	uint64_t ddp_persistent_bytes_per_rank; /* what DDP would hold: (param+grad+master+opt) P */
	uint64_t whole_model_transient_bytes;   /* the transient row if the whole model were one unit */
	uint64_t trainable_params;    /* parameters with gradients and optimizer state (their reductions', frozen
	                                 ones aside); = params when all are trained */
	int32_t params_with_padding;  /* 1: P counts the padding the framework adds to each unit's flat shard (P
	                                 from gathered or reduced elements: every framework pads them); 0: P as given */
	uint32_t reserved2;
};

/* Step time breakdown of the representative step (analysis_exposure.step).
 * compute + exposed_comm + idle = step. */
struct analysis_breakdown {
	uint64_t step_ns;
	uint64_t compute_ns;         /* union of compute intervals */
	uint64_t exposed_comm_ns;    /* communication with no compute under it */
	uint64_t idle_ns;            /* neither */
	double flops_per_step;       /* used for MFU (given, or 6 P tokens); 0 when unknown */
	double achieved_flops;       /* flops_per_step / step time, all ranks; 0 when unknown */
	double mfu;                  /* achieved / (peak x ranks); ANALYSIS_UNKNOWN without peak */
};

/* Where MFU's peak FLOP/s came from (analysis_mfu.peak_from). */
enum analysis_peak_from {
	ANALYSIS_PEAK_NONE = 0,   /* no peak: MFU unknown */
	ANALYSIS_PEAK_OPTION = 1, /* --peak-flops */
	ANALYSIS_PEAK_TABLE = 2,  /* the device table (collector/device_peak.h), on the agent's device record's name */
	ANALYSIS_PEAK_KINETO = 3, /* the device table, on a PyTorch profiler trace's deviceProperties name */
};

/* Where MFU's model FLOPs per step came from (analysis_mfu.flops_from). */
enum analysis_flops_from {
	ANALYSIS_FLOPS_NONE = 0,
	ANALYSIS_FLOPS_OPTION = 1, /* --model-flops (--flops-per-step) */
	ANALYSIS_FLOPS_TOKENS = 2, /* 6 P T: --tokens-per-step and the ledger's P */
};

/* What MFU lacks (analysis_mfu.missing bits): each names the input that
 * would give it. */
enum analysis_mfu_missing {
	ANALYSIS_MFU_NO_FLOPS = 1u << 0,       /* neither --model-flops nor --tokens-per-step */
	ANALYSIS_MFU_NO_PARAMS = 1u << 1,      /* --tokens-per-step given, the parameter count P unknown */
	ANALYSIS_MFU_NO_DEVICE = 1u << 2,      /* no --peak-flops and no device record names the GPU */
	ANALYSIS_MFU_DEVICE_UNKNOWN = 1u << 3, /* no --peak-flops, and the device table lacks the GPU named */
	ANALYSIS_MFU_NO_STEP = 1u << 4,        /* no step time */
};

/*
 * Model FLOPs utilisation of the representative step: achieved FLOP/s
 * (model FLOPs / step time) over the peak of every GPU that shares them.
 * Never invented: without FLOPs or a peak, mfu is ANALYSIS_UNKNOWN and
 * `missing` says which input would give it. The HTML report and report
 * --json read these fields.
 */
struct analysis_mfu {
	double mfu;                /* achieved / (peak_flops x ranks), ANALYSIS_UNKNOWN when missing != 0 */
	double peak_flops;         /* peak FLOP/s of one GPU, 0 unknown */
	double model_flops;        /* model FLOPs of one step, all ranks together, 0 unknown */
	double achieved_flops;     /* model_flops / step time, 0 unknown */
	uint64_t step_ns;          /* the step time used (analysis_breakdown.step_ns) */
	uint32_t ranks;            /* GPUs sharing the step's FLOPs (the world size, else the ranks seen) */
	uint32_t peak_from;        /* enum analysis_peak_from */
	uint32_t flops_from;       /* enum analysis_flops_from */
	uint32_t missing;          /* enum analysis_mfu_missing bits, 0 when mfu is known */
	char peak_source[128];     /* "--peak-flops", "device table: H100 SXM dense BF16, NVIDIA H100 Tensor Core GPU
	                              datasheet", "Kineto deviceProperties: ..."; "" without a peak */
	char device_name[64];      /* the GPU the trace names (the first source with a device record), "" none */
	uint64_t device_memory_bytes; /* its memory, 0 unknown */
	uint32_t device_sm_count;  /* its SMs, 0 unknown */
	uint32_t device_origin;    /* enum fss_device_origin of its record, 0 without one */
	uint32_t devices_differ;   /* sources whose first device has another name than device_name */
	uint32_t reserved;
};

/* One AllGather event of the typical step, in issue order. */
struct analysis_gather {
	uint32_t index;        /* position among the step's AllGather events, from 0 */
	uint8_t phase;         /* enum analysis_phase */
	uint8_t dtype;         /* enum fss_dtype of its (first) call */
	uint8_t cause;         /* enum analysis_cause in the representative step: hidden exactly when
	                          exposed_ns is 0 */
	uint8_t reserved;
	int32_t unit;          /* forward unit it gathers (0 = first forward gather); -1 unmatched */
	int32_t repeat;        /* which copy of the motif (0..L-1); -1 outside the repeat */
	int32_t motif_pos;     /* position within the motif; -1 outside the repeat */
	int32_t nranks;        /* ranks of its communicator */
	uint32_t calls;        /* ncclAllGather calls in the event (> 1: grouped) */
	uint64_t bytes;        /* send bytes per rank (count x dtype size), summed over calls */
	uint64_t elements;     /* gathered elements (count x nranks), summed over calls */
	uint64_t duration_ns;  /* its own interval (kernel with CUPTI, call with host timing); this and the
	                          figures below are of the representative step (analysis_exposure.step) */
	uint64_t exposed_ns;   /* of duration_ns, the part with no compute under it (HTA's definition;
	                          instants two gathers share count for the earlier); 0 under
	                          options.exposed_min_ns; <= duration_ns */
	uint64_t hide_ns;      /* duration_ns - exposed_ns: compute ran under it */
	int32_t slowest_rank;  /* the rank that entered last most often (majority vote); -1 with one rank */
	uint32_t reserved2;
	uint64_t skew_ns;      /* median of (last rank's enter - first rank's enter) */
	char name[ANALYSIS_NAME_MAX]; /* module name from NVTX ("layers.3"), "" when unknown */
	uint64_t queued_ns;    /* how long before its start the collectives ahead of it on its stream (one
	                          communication thread, or one CUDA stream) had been running back to back
	                          (each starting within 20 us of the one before it ending), back to the
	                          previous FSDP gather at most: the queue it waited in */
	int32_t microbatch;    /* forward / backward cycle of the step it belongs to (from 0); -1 unknown */
	uint8_t recompute;     /* 1: a second backward gather of its unit in the cycle (activation
	                          checkpointing re-gathers it for the recomputation) */
	uint8_t reserved3[3];
	uint64_t compute_wait_ns; /* how long compute stood still waiting for it: the stretch with no compute
	                             in which it ended, when it is the collective compute waited for there
	                             (its queueing behind earlier collectives included; may exceed
	                             duration_ns; host timing: not a stretch inside another unit's range
	                             that closes before this one's opens); fsdp_ref's gather_waits_ns
	                             measures the same */
	uint64_t call_ns;      /* host time of its call(s): first enter to last return (ncclGroupEnd's) */
	/* Where it sat in the representative step (the what-if model's input, collector/whatif.h): */
	uint64_t start_offset_ns;  /* its interval's start, from the step's start */
	uint64_t issue_offset_ns;  /* its host call's enter, from the step's start (0: before it) */
	uint64_t compute_after_ns; /* compute from its end to the next gather's end (the step's end for the
	                              last): the work its unit's arrival let run */
};

/* Per-communicator view, one entry per communicator of the headline rank
 * (the other ranks' communicators of the same dimension play the same
 * role). Counts are events per analysed step, from the typical step. */
#define ANALYSIS_COMMS_MAX 16
struct analysis_comm {
	uint64_t id;             /* the communicator's id hash (what --fsdp-comm takes) */
	uint64_t dimension;      /* the same on every rank for communicators made by the same calls (init, or
	                            the n-th split of the same parent): --fsdp-comm takes it too */
	char name[ANALYSIS_NAME_MAX]; /* the name the job gave it (ncclConfig_t.commName), "" */
	int32_t nranks;
	int32_t rank;            /* the headline rank's rank in it */
	uint8_t role;            /* enum analysis_comm_role */
	uint8_t role_given;      /* 1: the role is --fsdp-comm's */
	uint16_t reserved;
	uint32_t allgathers, reduce_scatters, allreduces, broadcasts, point_to_point, alltoalls, other;
	uint32_t outside;        /* events outside the analysed steps (init, checkpoints, eval, warm-up) */
	uint64_t bytes_per_step; /* wire bytes per step */
	uint64_t elements_median;/* median elements per event of the step (gathered / reduced / moved) */
	char evidence[ANALYSIS_NOTE_BYTES]; /* why this role, in words with the figures */
};

/* Forward / backward cycles of a step on the FSDP group. A step is one
 * optimizer step; with gradient accumulation it holds several micro-batches,
 * each a forward (every unit gathered, in unit order) and a backward
 * (re-gathers in mirrored order), reduce-scattering or not. */
struct analysis_microbatches {
	uint32_t per_step;            /* training cycles per step */
	uint32_t sync;                /* of them, cycles that reduce-scatter gradients */
	uint32_t forward_only;        /* cycles inside a step without backward (an eval forward) */
	uint32_t forward_allgathers;  /* gather events per training cycle, forward */
	uint32_t backward_allgathers; /* gather events per training cycle, backward (recompute included) */
	uint32_t recompute_allgathers;/* per cycle: backward gathers beyond one per unit (activation
	                                 checkpointing that re-gathers for the recomputation) */
	int told;                     /* 1: cycles and steps are told apart (a per-step collective, NVTX
	                                 steps, or several cycles per step); 0: each step is one cycle and
	                                 nothing marks an optimizer step: with gradient accumulation the
	                                 steps are micro-batches (see notes) */
	int phase_source;             /* enum analysis_phase_source */
};

/* Bucketed fetching (DeepSpeed ZeRO-3): what the gathers of a step show. */
struct analysis_buckets {
	uint32_t fetches_per_step;        /* AllGather events (a group counts once) */
	uint32_t calls_per_step;          /* ncclAllGather calls */
	uint32_t grouped_fetches;         /* events of several calls: per-parameter gathers coalesced in a group */
	uint32_t max_calls_per_fetch;
	uint64_t fetch_elements_min, fetch_elements_median, fetch_elements_max; /* gathered per event */
	uint64_t gathered_elements_per_step;
	uint32_t reduce_buckets_per_step; /* ReduceScatter events */
	uint32_t reduce_sizes_matching;   /* of them, matched one to one to gathers of their size (FSDP: all) */
	uint64_t reduce_elements_per_step;/* reduced elements: every parameter's gradient once, P */
	uint64_t reduce_elements_max;
	uint32_t regather_fetches_per_step;  /* of the fetches, those on the re-gather communicator (ZeRO++ hpZ:
	                                        backward fetches from the secondary partition) */
	uint32_t quantized_fetches_per_step; /* of the fetches, those sent as 8-bit values and their scales (ZeRO++
	                                        qwZ): two AllGathers, one fetch (the scales' elements and calls
	                                        apart from the elements per fetch, in the calls) */
};

/* One rank's figures (medians over its analysed steps). */
struct analysis_rank {
	int32_t rank;                /* rank in the largest communicator */
	uint32_t source;             /* trace source id */
	uint32_t pid;
	uint32_t steps_analyzed;
	struct analysis_step_counts per_step;
	uint64_t step_ns;
	uint64_t allgather_ns;         /* per step */
	uint64_t exposed_allgather_ns; /* per step */
	uint64_t compute_ns;           /* per step */
	uint32_t last_arrivals;        /* matched collectives this rank entered last */
	uint32_t matched_collectives;  /* collectives matched across ranks */
	uint64_t late_ns_per_step;     /* per step (mean): sum over the collectives it entered last of its
	                                  lead over the second-to-last rank (what the others waited for it) */
	uint64_t dropped_records;      /* records the agent could not deliver */
	uint32_t steps_seen;           /* steps found, warm-up (detected or --warmup-steps) and irregular
	                                  included: what --warmup-steps may skip */
	uint32_t reserved;
	uint64_t compute_wait_ns;      /* compute's wait on gathers per step; this and allgather_ns and
	                                  exposed_allgather_ns are the rank's representative step's */
	uint32_t steps_lost;           /* steps left out: they lost collectives (struct analysis_trust) */
	uint32_t steps_cut;            /* steps left out: in progress when its records stop */
	uint64_t collectives_lost;     /* gaps in its collective seq numbers */
	int32_t cut;                   /* 1: its records stop without its process_end (attached: its process died) */
	uint32_t reserved2;
	/* HTA's figures over the rank's whole trace (docs/report-schema.md "comm_comp_overlap"): a
	 * foreign trace's from its source_figures record, else measured (collector/analyze_figures.h) */
	uint64_t comm_ns;                /* union of its communication in HTA's window; 0: none (overlap null) */
	uint64_t comm_overlap_ns;        /* of which the union of its computation covered */
	uint64_t allgather_kernels;      /* NCCL kernels of the whole trace by type: its collective calls */
	uint64_t reduce_scatter_kernels;
	uint64_t allreduce_kernels;
	uint64_t other_kernels;          /* every other op */
	uint32_t profiler_steps;         /* ProfilerStep# spans of a foreign trace, else steps_seen */
	uint32_t unknown;                /* enum fss_figures_unknown: what its format cannot tell (those
	                                    fields are null in the report) */
};

/* Spread across ranks. */
struct analysis_spread {
	uint32_t ranks;               /* ranks with analysed steps */
	int32_t slowest_rank;         /* rank that entered collectives last most often; -1 with one rank */
	double slowest_rank_fraction; /* of the matched collectives; ANALYSIS_UNKNOWN with one rank */
	uint64_t skew_ns_per_step;    /* per step (mean): sum over collectives of (last - first rank's enter) */
	uint64_t max_skew_ns;         /* largest single-collective skew seen */
	uint64_t step_ns_min, step_ns_max; /* per-rank step medians, lowest and highest */
	uint64_t exposed_ns_min, exposed_ns_max; /* per-rank exposed AllGather per step */
};

/* Sizes and dtypes (small-collectives, fp32-gather). Bit d set = fss_dtype d seen. */
struct analysis_sizes {
	uint32_t allgather_dtypes;
	uint32_t reduce_scatter_dtypes;
	uint32_t allreduce_dtypes;
	uint32_t reserved;
	uint64_t allgather_bytes_min, allgather_bytes_median, allgather_bytes_max; /* per event, send bytes */
	uint64_t reduce_scatter_bytes_min, reduce_scatter_bytes_median, reduce_scatter_bytes_max;
};

/* A stretch of the trace file the reader skipped as damaged (docs/format.md). */
struct analysis_gap {
	uint64_t offset;         /* first byte skipped */
	uint64_t bytes;          /* bytes skipped */
	uint64_t first_missing;  /* sequence number of the first chunk lost */
	uint64_t chunks_missing; /* chunks lost; 0 when to_end (then it cannot be told) */
	int32_t to_end;          /* 1: the damage runs to the end of the file */
	uint32_t reserved;
	char why[120];           /* what was wrong where it starts */
};

#define ANALYSIS_GAPS_MAX 16

/* What the trace held and how it was read. */
struct analysis_trace_info {
	uint64_t records;           /* records read */
	uint64_t collectives;       /* collective records */
	uint64_t gpu_intervals;
	uint64_t nvtx_ranges;
	uint64_t dropped_records;   /* the sources' own drop counters, summed */
	uint32_t sources;           /* processes in the trace */
	int truncated;              /* 1: incomplete: cut, not closed by its writer, or gaps skipped */
	int has_cupti, has_nvtx;
	uint32_t ngaps;             /* gaps[] used */
	const char *end;            /* how the file ended: "clean", "not-marked" (format 1.0),
				     * "not-closed" (no trace_end), "cut"; NULL when not read from a file */
	uint64_t gaps_total;        /* gaps skipped, also those beyond gaps[] */
	struct analysis_gap gaps[ANALYSIS_GAPS_MAX]; /* the first ones, in file order */
	uint32_t sources_cut;       /* sources whose records stop without their process_end (cut short, or
	                               the process died); an attached source only when its process_exit says
	                               it died (one still running when attach let go is not cut) */
	uint32_t sources_attached;  /* sources observed by `fsdpscope attach` (path uprobe): struct
	                               analysis_attach says what was inferred of them */
};

/* What the trace cannot vouch for (docs/report-schema.md, "excluded"). A
 * step is left out of every figure, the unit analysis and the rules when
 * its source lost collectives in it or at its edges (a gap in the source's
 * collective seq numbers), or when it was in progress where its source's
 * records stop. Records lost that are not collectives leave no gap: only
 * the drop counters tell of them, for the whole trace. */
struct analysis_trust {
	uint32_t steps_lost;        /* the headline rank's steps left out for lost collectives */
	uint32_t steps_cut;         /* the headline rank's steps left out: cut off */
	uint32_t ranks_lost;        /* ranks that lost collectives */
	uint32_t ranks_cut;         /* ranks (sources with collectives) whose records stop without process_end
	                               (attached ones: whose process_exit says they died) */
	uint32_t steps_lost_all;    /* steps left out for lost collectives, all ranks */
	uint32_t steps_cut_all;     /* steps left out as cut off, all ranks */
	uint64_t collectives_lost;  /* all ranks: seq numbers missing */
	uint64_t ring_dropped, sink_dropped, cupti_dropped, nvtx_dropped; /* the sources' latest drops records */
	uint64_t records_unplaced;  /* records dropped beyond the collectives lost: NVTX ranges, GPU
	                               intervals, ... whose loss shows nowhere */
};

/* What `fsdpscope attach` inferred (docs/report-schema.md, "attach"): the
 * probes see a communicator made before them only in use, so its identity,
 * size and the rank in it were inferred (fss_comm_inferred). Filled only
 * when the trace has attached sources (trace.sources_attached). */
#define ANALYSIS_INFER_KINDS 6 /* the bits of enum fss_comm_inferred, bit i = 1 << i */

/* One communicator of an attached source. */
struct analysis_attach_comm {
	uint64_t id;          /* its id hash (inferred with FSS_COMM_INFER_ID) */
	uint32_t source;      /* trace source id (result->sources) */
	int32_t rank;         /* the source's rank in it */
	int32_t nranks;       /* its ranks (a lower bound with FSS_COMM_INFER_NRANKS_ATTACHED) */
	uint32_t inferred;    /* enum fss_comm_inferred bits; 0 for one seen made */
	int32_t observed;     /* 1: first seen in use (comm event observed); 0: seen made (init, split) */
	uint32_t in_flight;   /* calls on it the source was inside when the probes came (calls_in_flight) */
};

struct analysis_attach {
	uint32_t sources;         /* attached sources (= trace.sources_attached) */
	uint32_t detached;        /* of them, still running when attach let go (SOURCE_END_DETACHED) */
	uint32_t ranks_inferred;  /* of them, whose rank came from an observed communicator (rank_from
	                             inferred or guessed) */
	uint32_t ranks_guessed;   /* of those, guessed from pid order */
	uint32_t comms_observed;  /* comms[] entries first seen in use */
	uint32_t ncomms;          /* comms[] entries: every communicator of every attached source */
	uint32_t inferred[ANALYSIS_INFER_KINDS]; /* observed comms[] entries with bit i (each <= comms_observed) */
	uint64_t calls_in_flight; /* calls some attached ranks were inside when the probes came (seen neither at
	                             entry nor at return): the calls before a rank's first seen on a shared
	                             observed communicator that another rank was seen to make */
	uint32_t ranks_in_flight; /* ranks with such calls */
	struct analysis_attach_comm *comms; /* [ncomms] by source (arrival order), then as made or seen */
};

#include "collector/analysis_flight.h"

/* One variant of the step found from the period: a period may hold steps
 * that differ (the micro-batch count changes from step to step), each a
 * step. Counts are of the data-parallel side's events. */
#define ANALYSIS_STEP_VARIANTS_MAX 8
struct analysis_step_variant {
	uint32_t steps;           /* steps of this variant seen */
	uint32_t collectives;     /* events of one such step the step search read */
	uint32_t allgathers;      /* of them, AllGathers */
	uint32_t reduce_scatters; /* ReduceScatters */
};

/* One FSDP group of the job (docs/report-schema.md, "fsdp_groups"): a
 * communicator whose gathers move parameters, with the re-gather group that
 * serves it. A job may have several: an MoE's routed experts fully sharded
 * on their own mesh beside the dense part (torchtitan's efsdp). The first
 * is the primary, the one whose gathers move the most bytes: the top-level
 * per_step, units, reshard, gathers table and exposure are its figures, and
 * its entry repeats them. The ledger is the job's: the groups' shares
 * (params ... transient_bytes_per_rank) add up to it. Counts are of the
 * typical step; times of the representative step (exposure.step). */
#define ANALYSIS_FSDP_GROUPS_MAX 4
struct analysis_fsdp_group {
	int32_t comm;                 /* index into comms of its shard communicator */
	int32_t regather_comm;        /* index into comms of its re-gather communicator, -1 */
	int32_t nranks;               /* ranks of its shard communicator */
	uint32_t allgathers;          /* AllGather events per step, its re-gather group's included */
	uint32_t allgather_calls;
	uint32_t forward_allgathers;  /* of them, forward ones (phases: structure) */
	uint32_t backward_allgathers;
	uint32_t reduce_scatters;     /* ReduceScatter events per step */
	int32_t phase_source;         /* enum analysis_phase_source: its gathers parsed into forward / backward */
	uint32_t microbatches;        /* its training cycles per step (0: phases not told) */
	uint32_t forward_units;       /* forward gathers of one training cycle: its units */
	uint32_t repeating_units;     /* L: copies of the repeat among them */
	uint32_t gathers_per_unit;    /* k: gathers per copy (1: wrapped per block) */
	uint32_t reserved;
	struct analysis_reshard_info reshard; /* read from its own backward gathers */
	uint64_t gathered_bytes_per_step;     /* wire bytes its gathers move (what makes the primary) */
	int32_t exposure_measured;    /* 1: the figures below were measured; 0: not (no compute timing, or
	                                 its gathers' figures were kept for another rank) */
	uint32_t exposed_gathers;     /* its gather events of the step with a cause other than hidden */
	uint64_t allgather_ns_per_step;
	uint64_t exposed_allgather_ns_per_step;
	uint64_t compute_wait_ns_per_step;
	/* its share of the ledger */
	uint64_t params;              /* forward gathered elements of a training cycle x degree */
	uint32_t degree;              /* the factor: the tensor-parallel degree for the primary; for another
	                                 group beside an expert-parallel communicator, that one's ranks (each
	                                 holds its share of the experts); else 1 */
	uint32_t ledger_ranks;        /* ranks x degree: what its parameters are sharded over */
	uint64_t largest_unit_params; /* its largest forward gather */
	uint64_t persistent_bytes_per_rank;
	uint64_t transient_bytes_per_rank;
};

struct analysis_result {
	const char *schema;         /* ANALYSIS_SCHEMA */
	uint32_t ranks;             /* ranks (sources with collectives) */
	int32_t world_size;         /* ranks of the largest communicator */
	int32_t headline_rank;      /* the rank whose figures the top-level fields are */
	enum analysis_step_detection step_detection;
	uint32_t steps_seen;        /* steps found, warm-up and irregular included */
	uint32_t steps_analyzed;    /* steps the medians are over */
	uint32_t warmup_steps;      /* steps at the start that differ from the steady state (reported, not mixed in) */
	uint32_t irregular_steps;   /* later steps that differ from the steady state (not mixed in) */
	uint32_t step_period;       /* collective events per step (steady state) */
	uint32_t reserved;
	uint64_t step_ns;           /* median step time */
	char step_range_name[ANALYSIS_NAME_MAX]; /* e.g. "step 3" (one example) with NVTX steps */

	struct analysis_step_counts per_step;
	struct analysis_units units;
	struct analysis_reshard_info reshard;
	struct analysis_exposure exposure;
	struct analysis_ledger ledger;
	struct analysis_breakdown breakdown;
	struct analysis_spread spread;
	struct analysis_sizes sizes;
	struct analysis_trace_info trace;

	uint32_t ngathers;                /* AllGather events of the typical step */
	struct analysis_gather *gathers;  /* [ngathers], issue order */
	uint32_t nper_rank;
	struct analysis_rank *per_rank;   /* [nper_rank], by rank */

	struct analysis_options options;  /* as used (defaults filled in; strings borrowed) */
	uint32_t nnotes;
	char notes[ANALYSIS_NOTES_MAX][ANALYSIS_NOTE_BYTES]; /* what the analysis could not do, and why */

	enum analysis_verdict verdict;
	enum analysis_undecided undecided_reason;
	char undecided_why[ANALYSIS_NOTE_BYTES]; /* with the figures, for the user; "" when decided */
	uint32_t ncomms;
	struct analysis_comm comms[ANALYSIS_COMMS_MAX]; /* the headline rank's communicators, by role */
	int32_t fsdp_comm;                /* index into comms of the FSDP shard group, -1 */
	uint32_t tp_degree;               /* ranks of the tensor-parallel group (1 without): the model's
	                                     parameters are the FSDP group's gathered elements x this */
	struct analysis_microbatches microbatches;
	struct analysis_buckets buckets;  /* filled for ANALYSIS_BUCKETED */
	int32_t fsdp_comm_match;          /* with --fsdp-comm: 1 it named one communicator of the headline rank
	                                     (the FSDP group now), 0 none, -1 several (give more digits) */
	uint32_t reserved4;
	uint32_t nsources;
	uint32_t reserved5;
	struct source_summary *sources;   /* [nsources] every process of the trace, in arrival order: rank,
	                                     how it ended, drops, collectives seen and missing (collector/source.h) */
	struct analysis_trust trust;      /* steps left out, and why */
	struct analysis_flight flight;    /* calls in flight: hangs and mismatches */
	struct analysis_attach attach;    /* what attach inferred; empty without attached sources */
	/* Worlds (docs/patterns.md "Restarts", collector/worlds.h): a restarted job's trace holds several,
	 * each diagnosed apart; the fields above describe the headline world, the last one that has an
	 * analysed step (else the last one), and sources / flight / trace the whole trace. */
	uint32_t nworlds;                 /* worlds when more than one (a restart), 0 otherwise */
	int32_t headline_world;           /* index into worlds of the world the fields above describe, -1 */
	struct analysis_world *worlds;    /* [nworlds], in the order they started */
	uint32_t duplicate_ranks;         /* ranks that more than one process of the headline world claims
	                                     (not a restart: they ran at the same time) */
	int32_t duplicate_rank;           /* the lowest of them, -1 */
	uint32_t duplicate_pids[2];       /* two of the processes that claim it */
	int32_t units_decided;            /* 1: the units were read from the forward gather sequence (also when the
	                                     verdict is undecided because the phases could not be: no reduction) */
	uint32_t reserved6;
	uint32_t nfsdp_groups;            /* fsdp_groups[] used: 0 without an FSDP group */
	uint32_t reserved7;
	struct analysis_fsdp_group fsdp_groups[ANALYSIS_FSDP_GROUPS_MAX]; /* the primary first */
	uint32_t nstep_variants;          /* period steps: variants of the step one period holds (0 with NVTX
	                                     steps or no period; 1 usually; more when the steps differ, as
	                                     when the micro-batch count changes from step to step) */
	uint32_t reserved8;
	struct analysis_step_variant step_variants[ANALYSIS_STEP_VARIANTS_MAX]; /* the steady one (the one
	                                     analysed: the most collectives) first; the others are counted
	                                     as irregular steps */
	uint64_t step_search_left_out;    /* events the step search left out of the period (classes whose
	                                     sizes change from step to step); each is in the step it falls in */
	struct analysis_mfu mfu;          /* MFU with its inputs named (collector/mfu.h) */
	uint32_t merged_nodes;            /* traces read as one job's nodes (collector/merge.h) that hold a
	                                     rank; 0 for one trace (analysis_nodes) */
	uint32_t reserved9;
};

/* A process of a world, as the restart section lists it. */
struct analysis_world_process {
	uint32_t source;           /* trace source id */
	uint32_t pid;
	int32_t rank;              /* its rank in the world */
	int32_t end;               /* enum source_end: how it ended */
	int32_t signal;            /* the signal that killed it, 0 */
	int32_t exit_code;         /* -1 not known */
	uint64_t last_realtime_ns; /* its last record, CLOCK_REALTIME; 0 not known */
	uint64_t collectives;      /* collective records of it */
};

/* One world of a trace with several (a job restarted with new processes
 * and new communicators). */
struct analysis_world {
	uint32_t index;             /* 0: the first to start */
	int32_t size;               /* ranks of its world communicator (its processes' largest) */
	uint64_t id;                /* id_hash of that communicator */
	uint32_t ranks;             /* its processes with collectives */
	uint32_t components;        /* communicator components that ran together in it (1 as a rule) */
	uint64_t first_realtime_ns; /* its first and last record, CLOCK_REALTIME */
	uint64_t last_realtime_ns;
	uint32_t nprocesses;
	uint32_t died;              /* of them, processes that did not end cleanly (killed, exited non-zero,
	                               records cut off) */
	struct analysis_world_process *processes; /* [nprocesses] those with collectives, by rank */
	int32_t first_stop;         /* index into processes of the one that died whose records stop
	                               first (the one the others most likely waited for), -1 none died */
	uint32_t duplicate_ranks;   /* ranks more than one of its processes claims */
	int32_t duplicate_rank;     /* the lowest of them, -1 */
	uint32_t reserved;
	struct analysis_result *result; /* its own diagnosis (nworlds 0 in it); NULL for the headline
	                                   world, whose diagnosis is the enclosing result */
};

/* analysis_world_result - the diagnosis of world i of r: r itself for the
 * headline world. */
const struct analysis_result *analysis_world_result(const struct analysis_result *r, uint32_t i);

/* analysis_options_init - fill opts with the defaults listed above. */
void analysis_options_init(struct analysis_options *opts);

/* analysis_result_free - release a result made by analyze_trace (NULL ok). */
void analysis_result_free(struct analysis_result *r);

/* Names for the report: "nvtx" / "period" / "none"; "cupti" / "host" /
 * "none"; "forward" / "backward"; "hidden", "first-of-phase", "no-prefetch",
 * "bandwidth-bound", "host-late". Never NULL. */
const char *analysis_step_detection_name(enum analysis_step_detection d);
const char *analysis_exposure_source_name(enum analysis_exposure_source s);
const char *analysis_phase_name(int phase);
const char *analysis_cause_name(int cause);
/* "fsdp", "fsdp-regather", "replicate", "tensor-parallel", "pipeline",
 * "expert-parallel", "allreduce", "step", "one-off", "idle", "context-parallel", "all-to-all",
 * "unknown"; "diagnosed",
 * "bucketed", "undecided"; "no-collectives", "no-fsdp-group", "no-step",
 * "no-reduce-scatter", "unknown-pattern", "incomplete", "none"; "structure" / "none". */
const char *analysis_comm_role_name(int role);
const char *analysis_verdict_name(int verdict);
const char *analysis_undecided_name(int reason);
const char *analysis_phase_source_name(int source);

/* analysis_inferred_name - bit i of enum fss_comm_inferred as the JSON
 * names it: "id", "nranks", "rank-inplace", "rank-env", "rank-order",
 * "members"; analysis_inferred_words - the same in the report's words
 * ("identity matched across ranks by their calls", ...). "unknown" past
 * ANALYSIS_INFER_KINDS. Never NULL. */
const char *analysis_inferred_name(int bit);
const char *analysis_inferred_words(int bit);

/* analysis_attach_exposure_why - why exposure is not measured for attached
 * sources, and how to get it: the one place the words live (notes, report,
 * lint). analysis_attach_steps_why - why their steps come from the period. */
const char *analysis_attach_exposure_why(void);
const char *analysis_attach_steps_why(void);

/*
 * analysis_reshard_format - the reshard_after_forward value as the report
 * writes it: "true", "false", "group:G", "mixed" or "unknown". Writes at most
 * len bytes (NUL included) into buf and returns buf.
 */
char *analysis_reshard_format(const struct analysis_reshard_info *r, char *buf, size_t len);

/* analysis_reshard_name - the policy alone, enum analysis_reshard: "true", "false",
 * "group", "mixed", else "unknown" (where the group size G is not at hand). */
const char *analysis_reshard_name(int reshard);

/*
 * analysis_mfu_missing_name - bit i of enum analysis_mfu_missing as the JSON
 * writes it: "model_flops", "params", "device", "device_unknown", "step";
 * NULL for another bit.
 */
const char *analysis_mfu_missing_name(int bit);

/*
 * analysis_mfu_missing_text - what MFU lacks and the flag that would give
 * it, in words ("model FLOPs per step: give --model-flops or
 * --tokens-per-step; ..."), into buf (at most len bytes, NUL included);
 * "" when nothing is missing. Returns buf. The one place the words live
 * (text report, JSON, HTML).
 */
char *analysis_mfu_missing_text(const struct analysis_mfu *m, char *buf, size_t len);

/* analysis_peak_from_name - "--peak-flops", "device table", "kineto", NULL for none. */
const char *analysis_peak_from_name(int from);

/* analysis_flops_from_name - "--model-flops", "6PT" (6 x P x tokens), NULL for none. */
const char *analysis_flops_from_name(int from);

/* The facts the rules' advice is judged by: the job's nodes, what bounds
 * each gather (collector/analysis_advice.h). */
#include "collector/analysis_advice.h"

#endif
