/*
 * whatif.h - predict the step before changing the job: a model fitted on the
 * job's own representative step, replayed under a changed FSDP policy.
 *
 * The model (docs/report-schema.md, "whatif"):
 *  - each communicator of the FSDP gathers (told apart by their ranks: the
 *    shard group, the re-gather group) gets a latency and a bandwidth, a
 *    least-squares fit of the gathers' own durations against their send
 *    bytes, with its residual; fewer than two sizes: no fit;
 *  - each gather's unit computes what its arrival lets run: the compute
 *    from its end to the next gather's end (analysis_gather.compute_after_ns),
 *    forward and backward, and the compute before the first gather;
 *  - the gathers run one at a time on one stream, in the recorded order;
 *    each run of gathers (one phase of one micro-batch) issues its first on
 *    demand and, with prefetch depth p, gather k when unit k - p starts;
 *  - the depth seen is the p in 0..2 whose replay of the recorded gathers
 *    comes closest to the measured step.
 * A change is replayed where it differs from the recorded job, and the
 * prediction is the measured figure plus the replay's difference (the
 * model's own bias cancels): step, exposed AllGather, and the peak from the
 * ledger (collector/ledger.h) recomputed for the change.
 *
 * Pure functions over a finished struct analysis_result; the model borrows
 * nothing from it once made.
 */
#ifndef FSS_COLLECTOR_WHATIF_H
#define FSS_COLLECTOR_WHATIF_H

#include <stdint.h>

#include "collector/analysis.h"

/* The policy changes the model replays, in the order the report lists them. */
enum whatif_change {
	WHATIF_WRAP_BLOCK = 0,     /* "wrap=block": each repeating unit's gathers merged into one by bytes */
	WHATIF_RESHARD_FALSE = 1,  /* "reshard_after_forward=false": no backward re-gathers */
	WHATIF_RESHARD_TRUE = 2,   /* "reshard_after_forward=true": every non-root unit re-gathered */
	WHATIF_PREFETCH_1 = 3,     /* "prefetch=1" */
	WHATIF_PREFETCH_2 = 4,     /* "prefetch=2" */
	WHATIF_CHANGES
};

/* What bounds a gather, from the fitted model of its communicator. */
enum whatif_bound {
	WHATIF_BOUND_UNKNOWN = 0,   /* no fit for its communicator */
	WHATIF_BOUND_LATENCY = 1,   /* bytes / bandwidth below the latency */
	WHATIF_BOUND_BANDWIDTH = 2, /* bytes / bandwidth at or above the latency */
};

/* A communicator's fit: duration = latency + bytes / bytes_per_ns. */
#define WHATIF_FITS_MAX 4
struct whatif_fit {
	int32_t nranks;      /* ranks of the communicator (the key) */
	uint32_t points;     /* timed gathers of the representative step */
	uint32_t sizes;      /* distinct send sizes among them */
	int fitted;          /* 1: latency and bandwidth below hold */
	double latency_ns;   /* intercept, >= 0 */
	double bytes_per_ns; /* send bytes per ns; 0 (fitted): durations do not grow with size, the
				latency alone is fitted (their mean) and every gather is latency-bound */
	double residual_ns;  /* root-mean-square of the points about the line */
	char why[96];        /* fitted 0: why not; fitted with bytes_per_ns 0: that it is latency only */
};

/* One predicted change. */
struct whatif_prediction {
	enum whatif_change change;
	uint64_t step_ns;              /* predicted step */
	uint64_t exposed_allgather_ns; /* predicted exposed AllGather per step (<= step_ns) */
	int peak_known;                /* 0: the ledger cannot tell (peak_bytes 0) */
	uint64_t peak_bytes;           /* predicted peak state per rank (persistent + transient) */
	char basis[320];               /* the model and its figures, one sentence */
};

/* A change the model does not predict, and why. */
struct whatif_left_out {
	enum whatif_change change;
	char why[160];
};

typedef struct whatif_model whatif_model_t;

/*
 * whatif_new - fit the model on r and replay every change that differs
 * from the recorded job. *out is the caller's (whatif_free), also when
 * nothing can be predicted (then whatif_note says why). Returns 0 or
 * -ENOMEM.
 */
int whatif_new(const struct analysis_result *r, whatif_model_t **out);

/* whatif_free - release a model (NULL ok). */
void whatif_free(whatif_model_t *m);

/* The predictions, in enum order, each change at most once. */
uint32_t whatif_count(const whatif_model_t *m);
const struct whatif_prediction *whatif_get(const whatif_model_t *m, uint32_t i);

/* The changes left out (not offered because the job has them already
 * are not listed), with their reasons. */
uint32_t whatif_left_out_count(const whatif_model_t *m);
const struct whatif_left_out *whatif_left_out_get(const whatif_model_t *m, uint32_t i);

/* whatif_note - why no change at all could be modelled ("" when the model
 * was built). Never NULL. */
const char *whatif_note(const whatif_model_t *m);

/* The fits, one per communicator of the gathers. */
uint32_t whatif_fit_count(const whatif_model_t *m);
const struct whatif_fit *whatif_fit_get(const whatif_model_t *m, uint32_t i);

/* whatif_prefetch_seen - the depth the replay matched (0..2), -1 without a model. */
int whatif_prefetch_seen(const whatif_model_t *m);

/* whatif_change_name - "wrap=block", "reshard_after_forward=false", ...; "unknown". */
const char *whatif_change_name(int change);

/*
 * whatif_gather_bound - what bounds gather `gather` of r->gathers: the one
 * place it is decided (the rules read it here). WHATIF_BOUND_UNKNOWN when
 * its communicator has no fit or the index is out of range, or out of memory.
 */
enum whatif_bound whatif_gather_bound(const struct analysis_result *r, uint32_t gather);

/* whatif_bound_of - as whatif_gather_bound, for any gather g of r's
 * communicators (a median gather the caller made, say): its size on its
 * communicator's fit. */
enum whatif_bound whatif_bound_of(const struct analysis_result *r, const struct analysis_gather *g);

/* whatif_model_bound - as whatif_gather_bound, with m's fits (m made on r). */
enum whatif_bound whatif_model_bound(const whatif_model_t *m, const struct analysis_result *r, uint32_t gather);

#endif
