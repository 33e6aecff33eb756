/*
 * ledger.h - the FSDP memory ledger and wire bytes.
 *
 *   persistent per rank = (param + grad + master + optimizer bytes) P / N   (16 P / N)
 *                         (frozen parameters: param + master bytes only)
 *   transient per rank  = param bytes x U x (1 + prefetch)
 *   wire per step       = 3 P param bytes (AG forward, AG backward, RS), DDP: 2 P
 *
 * P parameters, N shard ranks, U parameters of the largest unit. The same
 * function serves the planning calculator (`fsdpscope ledger`) and the
 * analysis of a trace, where P, N and U come from the gathers.
 */
#ifndef FSS_COLLECTOR_LEDGER_H
#define FSS_COLLECTOR_LEDGER_H

#include <stdint.h>

#include "collector/analysis.h"

/*
 * The inputs ledger_check accepts. Within them every figure the ledger
 * derives (at most 88 B x 1e15 for DDP's state, 8 B x 1e15 x 65 for the
 * transient row) fits its uint64_t / int64_t field with room to spare.
 */
#define LEDGER_PARAMS_MAX 1e15          /* parameters: 500 times the largest model trained */
#define LEDGER_RANKS_MAX 10000000u      /* shard ranks */
#define LEDGER_PREFETCH_MAX 64          /* units gathered ahead */
#define LEDGER_ELEMENT_BYTES_MAX 8.0    /* a parameter, gradient or master element: fp64 */
#define LEDGER_OPTIMIZER_BYTES_MAX 64.0 /* optimizer state per parameter (Adam: 8) */
#define LEDGER_GPU_MEM_MAX 1e18         /* bytes of one GPU */

/* An input of struct ledger_input, as ledger_check names it. */
enum ledger_field {
	LEDGER_OK = 0,
	LEDGER_PARAMS,             /* 1 .. LEDGER_PARAMS_MAX */
	LEDGER_RANKS,              /* 0 (taken as 1) .. LEDGER_RANKS_MAX */
	LEDGER_UNITS,              /* 0 (one unit) .. params */
	LEDGER_LARGEST_UNIT,       /* 0 (P / units) or 1 .. params */
	LEDGER_PREFETCH,           /* 0 .. LEDGER_PREFETCH_MAX */
	LEDGER_PARAM_BYTES,        /* (0, LEDGER_ELEMENT_BYTES_MAX] */
	LEDGER_GRAD_BYTES,         /* (0, LEDGER_ELEMENT_BYTES_MAX] */
	LEDGER_MASTER_BYTES,       /* 0 (no master copy) .. LEDGER_ELEMENT_BYTES_MAX */
	LEDGER_OPTIMIZER_BYTES,    /* 0 .. LEDGER_OPTIMIZER_BYTES_MAX */
	LEDGER_GPU_MEM,            /* 0 (unknown) .. LEDGER_GPU_MEM_MAX */
};

struct ledger_input {
	double params;              /* P */
	uint32_t ranks;             /* N */
	uint32_t units;             /* units, when U is not given: U = P / units */
	double largest_unit_params; /* U; 0: P / units (or P with units 0) */
	int prefetch;
	double param_bytes, grad_bytes, master_bytes, optimizer_bytes;
	uint64_t gpu_mem_bytes;     /* 0: unknown */
	double trainable_params;    /* of P, those with gradients and optimizer state; 0: all of P */
	int params_with_padding;    /* 1: P came from gathered / reduced elements (padding included) */
};

/*
 * ledger_input_defaults - bf16 params and grads, fp32 master, Adam,
 * prefetch 1; P, N, U left 0.
 */
void ledger_input_defaults(struct ledger_input *in);

/*
 * ledger_check - the first input of *in outside the range its enum
 * ledger_field entry gives (NaN and infinities are outside every range),
 * LEDGER_OK when there is none. The planning calculator checks what the
 * user typed with it before computing.
 */
enum ledger_field ledger_check(const struct ledger_input *in);

/*
 * ledger_compute - fill *out from *in (wire_bytes_per_step is the model's
 * 3 P figure; an analysis replaces it with the observed one). N = 0 is
 * taken as 1. Defined for any input: a figure too large for its field is
 * saturated (UINT64_MAX, or INT64_MIN / INT64_MAX for the headroom), never
 * converted out of range; ledger_check tells whether that can happen.
 */
void ledger_compute(const struct ledger_input *in, struct analysis_ledger *out);

#endif
