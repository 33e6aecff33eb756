/*
 * ledger.c - the FSDP memory ledger (see ledger.h).
 */
#include <stdint.h>
#include <string.h>

#include "collector/ledger.h"

void ledger_input_defaults(struct ledger_input *in)
{
	memset(in, 0, sizeof *in);
	in->prefetch = ANALYSIS_DEFAULT_PREFETCH;
	in->param_bytes = ANALYSIS_DEFAULT_PARAM_BYTES;
	in->grad_bytes = ANALYSIS_DEFAULT_GRAD_BYTES;
	in->master_bytes = ANALYSIS_DEFAULT_MASTER_BYTES;
	in->optimizer_bytes = ANALYSIS_DEFAULT_OPTIMIZER_BYTES;
}

/* within - lo <= x <= hi, false for NaN. */
static int within(double x, double lo, double hi)
{
	return x >= lo && x <= hi;
}

enum ledger_field ledger_check(const struct ledger_input *in)
{
	if (!within(in->params, 1, LEDGER_PARAMS_MAX))
		return LEDGER_PARAMS;
	if (in->ranks > LEDGER_RANKS_MAX)
		return LEDGER_RANKS;
	if (in->units > in->params)
		return LEDGER_UNITS;
	if (in->largest_unit_params != 0 && !within(in->largest_unit_params, 1, in->params))
		return LEDGER_LARGEST_UNIT;
	if (in->prefetch < 0 || in->prefetch > LEDGER_PREFETCH_MAX)
		return LEDGER_PREFETCH;
	if (!within(in->param_bytes, 0, LEDGER_ELEMENT_BYTES_MAX) || in->param_bytes == 0)
		return LEDGER_PARAM_BYTES;
	if (!within(in->grad_bytes, 0, LEDGER_ELEMENT_BYTES_MAX) || in->grad_bytes == 0)
		return LEDGER_GRAD_BYTES;
	if (!within(in->master_bytes, 0, LEDGER_ELEMENT_BYTES_MAX))
		return LEDGER_MASTER_BYTES;
	if (!within(in->optimizer_bytes, 0, LEDGER_OPTIMIZER_BYTES_MAX))
		return LEDGER_OPTIMIZER_BYTES;
	if (in->gpu_mem_bytes > (uint64_t)LEDGER_GPU_MEM_MAX)
		return LEDGER_GPU_MEM;
	return LEDGER_OK;
}

/* to_bytes - x rounded to a byte count: 0 for x <= 0 or NaN, UINT64_MAX
 * when it does not fit (a cast of such a double would be undefined). */
static uint64_t to_bytes(double x)
{
	if (!(x > 0))
		return 0;
	x += 0.5;
	if (x >= 18446744073709551616.0) /* 2^64 */
		return UINT64_MAX;
	return (uint64_t)x;
}

static uint64_t add_saturated(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* difference - a - b as a signed figure, saturated at INT64_MIN / INT64_MAX. */
static int64_t difference(uint64_t a, uint64_t b)
{
	if (a >= b)
		return a - b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(a - b);
	return b - a > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)(b - a);
}

void ledger_compute(const struct ledger_input *in, struct analysis_ledger *out)
{
	memset(out, 0, sizeof *out);
	double P = in->params;
	double N = in->ranks ? in->ranks : 1;
	double U = in->largest_unit_params;
	if (!(U > 0))
		U = in->units ? P / in->units : P;
	int prefetch = in->prefetch < 0 ? 0 : in->prefetch;
	double per_param = in->param_bytes + in->grad_bytes + in->master_bytes + in->optimizer_bytes;
	double T = in->trainable_params > 0 && in->trainable_params < P ? in->trainable_params : P;
	/* a frozen parameter keeps its sharded copy (param and master) but no
	 * gradient and no optimizer state */
	double state = T < P ? (in->param_bytes + in->master_bytes) * P + (in->grad_bytes + in->optimizer_bytes) * T
			     : per_param * P;

	out->params = to_bytes(P);
	out->ranks = (uint32_t)N;
	out->prefetch = (uint32_t)prefetch;
	out->largest_unit_params = to_bytes(U);
	out->units = in->units;
	out->param_bytes = in->param_bytes;
	out->grad_bytes = in->grad_bytes;
	out->master_bytes = in->master_bytes;
	out->optimizer_bytes = in->optimizer_bytes;
	out->persistent_bytes_per_rank = to_bytes(state / N);
	out->transient_bytes_per_rank = to_bytes(in->param_bytes * U * (1.0 + prefetch));
	out->peak_state_bytes_per_rank = add_saturated(out->persistent_bytes_per_rank, out->transient_bytes_per_rank);
	out->gpu_mem_bytes = in->gpu_mem_bytes;
	if (in->gpu_mem_bytes)
		out->headroom_bytes = difference(in->gpu_mem_bytes, out->peak_state_bytes_per_rank);
	out->model_wire_bytes_per_step = to_bytes(3 * P * in->param_bytes);
	out->wire_bytes_per_step = out->model_wire_bytes_per_step;
	out->ddp_wire_bytes_per_step = to_bytes(2 * P * in->param_bytes);
	out->ddp_persistent_bytes_per_rank = to_bytes(state);
	out->trainable_params = to_bytes(T);
	out->params_with_padding = in->params_with_padding;
	out->whole_model_transient_bytes = to_bytes(in->param_bytes * P);
}
