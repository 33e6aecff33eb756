/*
 * ledger.h - the FSDP memory ledger and wire bytes.
 *
 *   persistent per rank = (param + grad + master + optimizer bytes) P / N   (16 P / N)
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

struct ledger_input {
	double params;              /* P */
	uint32_t ranks;             /* N */
	uint32_t units;             /* units, when U is not given: U = P / units */
	double largest_unit_params; /* U; 0: P / units (or P with units 0) */
	int prefetch;
	double param_bytes, grad_bytes, master_bytes, optimizer_bytes;
	uint64_t gpu_mem_bytes;     /* 0: unknown */
};

/*
 * ledger_input_defaults - bf16 params and grads, fp32 master, Adam,
 * prefetch 1; P, N, U left 0.
 */
void ledger_input_defaults(struct ledger_input *in);

/*
 * ledger_compute - fill *out from *in (wire_bytes_per_step is the model's
 * 3 P figure; an analysis replaces it with the observed one). N = 0 is
 * taken as 1.
 */
void ledger_compute(const struct ledger_input *in, struct analysis_ledger *out);

#endif
