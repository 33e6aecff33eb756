/*
 * phases.h - units, forward and backward, micro-batches and forward-only
 * passes of a step, from the FSDP group's forward gather sequence; its
 * reduce-scatters are evidence, never a precondition (docs/patterns.md,
 * section 3, says the same with the setups behind each rule).
 *
 * What holds in every sharded job: the units that hold parameters are
 * gathered in the same order, with the same sizes, once per forward pass.
 * So the forward sequence S (one pass: a prefix of the step's gathers, or of
 * those after a run in another floating dtype that opens the step) is the
 * invariant. Gathers are keyed by gathered bytes and dtype, so that an fp32
 * per-parameter gather (a weight sync) never matches a bf16 unit; a gather
 * in a wide integer dtype is never a unit. The gathers parse against S:
 *
 *  - a full copy of S with no ReduceScatter inside it begins a new cycle (a
 *    forward pass: a micro-batch, an eval forward, a second model of the same
 *    units);
 *  - a gather of a key S holds re-gathers, in the cycle, the last unit of
 *    that key not re-gathered yet; more re-gathers than units are pairs (a
 *    checkpoint wrapper's recomputation) or, when they repeat whole rounds
 *    that reduce only in the last, micro-batches that gathered nothing in
 *    forward; a third gather of every unit rejects S;
 *  - a gather of a key S lacks is a per-step collective on the FSDP
 *    communicator (metrics, weight sync), counted apart, never a unit; a run
 *    of them shaped like parameter gathers is another model's forward pass
 *    (one a cycle), with the gathers of S's keys right after it that the
 *    cycle has beyond one per unit.
 *
 * Each ReduceScatter belongs to the cycle whose forward began before it; a
 * cycle reduces each unit at most once, in any order, some units not at all,
 * some in part. Among the prefixes S that parse (ending before the first
 * ReduceScatter, in one floating dtype, not beginning with a key they hold
 * again unless all keys are equal), the parse chosen has, in this order: the
 * fewest matched reductions a later gather of their unit contradicts; the
 * fewest reductions no unit fits that a gather called no unit does; the
 * fewest recomputations covering some units of a key and not all (and
 * rounds leaving units out); the fewest unexplained gathers plus units no
 * reduction matches plus cycles without a forward; the fewest
 * recomputations; unreduced units; cycles; the shortest S. A parse whose
 * reductions do not fit its units, or whose gathers of no unit move more
 * than twice its units' bytes, is no FSDP structure.
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
	PHASES_NO_REDUCTION = 2,  /* no ReduceScatter: the units (S) are read, forward and backward cannot be told */
	PHASES_NO_PARSE = 3,      /* no forward sequence parses the step (bucketed fetching, an unknown pattern) */
};
#define PHASES_NO_MIRROR PHASES_NO_PARSE /* the older name */

/* Per AllGather of the step (in order): where it belongs. */
struct phases_gather {
	int32_t cycle;     /* cycle (from 0) it falls in; -1 none */
	int32_t unit;      /* unit it gathers (0 = first gather of S), -1 none */
	uint8_t phase;     /* enum analysis_phase; 0 for a per-step collective */
	uint8_t recompute; /* a second backward gather of its unit in the cycle */
	uint8_t step_gather; /* 1: its key is not in S: a per-step collective, not a unit */
	uint8_t other_model; /* 1: a gather of another model's forward pass (phase forward, unit -1) */
};

struct phases_result {
	enum phases_status status;
	uint32_t units;               /* U: the gathers of S */
	uint32_t cycles;              /* forward passes, forward-only ones included */
	uint32_t sync_cycles;         /* cycles with reduce-scatters */
	uint32_t forward_only;        /* cycles with neither backward gathers nor reductions while another cycle has
	                                 backward gathers: an eval forward, log-probs, a second model of the same
	                                 units (a frozen reference or teacher model) */
	uint32_t forward_allgathers;  /* per training cycle (= units) */
	uint32_t backward_allgathers; /* the first training cycle's */
	uint32_t recompute_allgathers;/* the first training cycle's */
	uint32_t reductions_per_sync; /* ReduceScatters of the first synchronising cycle */
	/* Appended (issue 21): */
	uint32_t step_gathers;        /* gathers of keys S does not hold: per-step collectives, counted apart */
	uint32_t training_cycles;     /* cycles with backward gathers or reductions (without reductions in the
	                                 step: with backward gathers) */
	int32_t first_training;       /* the first training cycle, -1 none */
	uint32_t reductions;          /* ReduceScatters of the step */
	uint32_t matched_reductions;  /* of them, matched to a unit by bytes per parameter (phases_reduces) */
	uint32_t unreduced_units;     /* in the first synchronising cycle: units with no reduction matched */
	uint32_t mirrored;            /* 1: in every synchronising cycle the matched reductions run in the mirrored
	                                 order of S (post-backward hooks); 0: another order, or none matched */
	uint32_t reductions_fit;      /* 0: in the parse chosen a reduction is larger than every unit left for it
	                                 (phases_reductions_fit: a reduce bucket across units, DeepSpeed ZeRO-3),
	                                 so it is rejected: status PHASES_NO_PARSE; 1 otherwise */
	uint32_t other_model_gathers; /* gathers of other models' forward passes inside the cycles (counted in
	                                 forward_only, one a run): a frozen reference or teacher model whose units
	                                 are not all S's */
	uint32_t step_gathers_dominate; /* 1: the parse chosen was rejected (status PHASES_NO_PARSE) because its
	                                   gathers of no unit move more than twice the bytes its units' do */
};

/*
 * phases_parse - parse ev[0..n) (one step of the FSDP group, issue order).
 * g[0..number of AllGathers in ev) receives each gather's place. Fills
 * *out; its status says whether the parse holds (with PHASES_NO_REDUCTION
 * the units and cycles are filled as the gathers alone read them). Returns
 * 0 or -ENOMEM.
 */
int phases_parse(const struct phases_event *ev, size_t n, struct phases_gather *g, struct phases_result *out);

/*
 * phases_reduces - 1 when ReduceScatter rs can reduce the gradients of the
 * unit AllGather ag gathers, by bytes per parameter whatever the dtypes: a
 * gather in a float or wide integer dtype gathers the reduced elements; a
 * byte-typed gather (uint8, int8: torchao's float8 all-gather packs float8
 * weights beside bf16 norms) moves one to two bytes per reduced element; a
 * float8 gather one byte per element.
 */
int phases_reduces(const struct phases_event *ag, const struct phases_event *rs);

/*
 * phases_match_reductions - which unit each ReduceScatter of cycle `cycle`
 * reduces, g being phases_parse's places of ev's gathers: rs_unit[i] for
 * every event i of ev (-1: not a ReduceScatter of the cycle, or matched to
 * no unit). Each reduction takes the unit of S that fits it (phases_reduces),
 * not taken yet, nearest below the one the last reduction took (the mirrored
 * order), else the highest one that fits. *mirrored (may be NULL) is 1 when
 * the units taken fall in the mirrored order. Returns the reductions
 * matched, or -ENOMEM.
 */
int phases_match_reductions(const struct phases_event *ev, size_t n, const struct phases_gather *g, int32_t cycle,
			    uint32_t units, int32_t *rs_unit, int *mirrored);

/*
 * phases_reductions_fit - 1 when, in every cycle of the parse g (of
 * phases_parse's *res) that reduces, the reductions can each be given a
 * unit of its own that holds at least as many parameters (the k-th largest
 * reduction no larger than the k-th largest unit): what FSDP's reductions
 * always allow, one unit's gradients (or part of them, frozen parameters
 * aside) per ReduceScatter. 0 when one reduction is larger than every unit
 * left for it: a reduce bucket across units (DeepSpeed ZeRO-3). Returns
 * -ENOMEM when out of memory.
 */
int phases_reductions_fit(const struct phases_event *ev, size_t n, const struct phases_gather *g,
			  const struct phases_result *res);

/*
 * phases_unit_capacity - the parameters a unit's gather can hold at most:
 * its gathered elements, for a byte-typed gather its gathered bytes (one
 * byte per parameter at the least).
 */
uint64_t phases_unit_capacity(const struct phases_event *ag);

#endif
