/*
 * phases.h - forward, backward and micro-batches of a step, from the
 * structure of the FSDP group's gathers and reduce-scatters.
 *
 * What FSDP does, whatever the framework (docs/patterns.md, "Phases"): a
 * micro-batch's forward gathers every unit once, in unit order; its backward
 * re-gathers the resharded units in mirrored order (a unit that holds others
 * may come before them) and, when it synchronises gradients, reduce-scatters
 * every unit once after its backward, in exactly the mirrored order. So the
 * reduce-scatters of one synchronising backward, reversed, are the units in
 * forward order (FSDP gathers and reduces the same padded flat buffer: equal
 * element counts), and the step's gathers parse into cycles that each begin
 * with that forward sequence. Counting never decides: a step whose
 * reduce-scatters do not mirror its gathers (bucketed fetching, DeepSpeed
 * ZeRO-3) or that has none is left undecided.
 */
#ifndef FSS_COLLECTOR_PHASES_H
#define FSS_COLLECTOR_PHASES_H

#include <stddef.h>
#include <stdint.h>

/* One event of the FSDP group in a step (AllGather or ReduceScatter; the
 * caller leaves out the rest). */
struct phases_event {
	uint64_t elements; /* gathered / reduced elements (count x ranks), summed over a group's calls */
	uint64_t bytes;    /* count x dtype size, summed over the calls (per rank) */
	int32_t nranks;
	uint8_t op;        /* FSS_OP_ALLGATHER or FSS_OP_REDUCESCATTER */
	uint8_t dtype;     /* enum fss_dtype of its (first) call */
	uint8_t reserved[2];
};

/* Why a step could not be parsed. */
enum phases_status {
	PHASES_OK = 0,
	PHASES_NO_GATHERS = 1,    /* nothing to parse */
	PHASES_NO_REDUCTION = 2,  /* no ReduceScatter: forward and backward cannot be told */
	PHASES_NO_MIRROR = 3,     /* the reduce-scatters mirror no run of gathers (bucketed fetching) */
};

/* Per AllGather of the step (in order): where it belongs. */
struct phases_gather {
	int32_t cycle;     /* micro-batch (from 0) */
	int32_t unit;      /* forward unit it gathers (0 = first forward gather of the cycle), -1 none */
	uint8_t phase;     /* enum analysis_phase */
	uint8_t recompute; /* a second backward gather of its unit in the cycle */
	uint8_t reserved[2];
};

struct phases_result {
	enum phases_status status;
	uint32_t units;               /* U: forward gathers of a cycle */
	uint32_t cycles;              /* forward / backward cycles, forward-only ones included */
	uint32_t sync_cycles;         /* cycles with reduce-scatters */
	uint32_t forward_only;        /* cycles with neither backward gathers nor reductions while the
	                                 synchronising cycles have backward gathers (an eval forward) */
	uint32_t forward_allgathers;  /* per training cycle (= units) */
	uint32_t backward_allgathers; /* per training cycle, the first one's */
	uint32_t recompute_allgathers;/* per training cycle, the first one's */
	uint32_t reductions_per_sync; /* ReduceScatters per synchronising cycle (= units) */
};

/*
 * phases_parse - parse ev[0..n) (one step of the FSDP group, issue order).
 * g[0..number of AllGathers in ev) receives each gather's place. Fills
 * *out; its status says whether the parse holds. Returns 0 or -ENOMEM.
 */
int phases_parse(const struct phases_event *ev, size_t n, struct phases_gather *g, struct phases_result *out);

#endif
