/*
 * ledger.c - the FSDP memory ledger (see ledger.h).
 */
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

static uint64_t to_bytes(double x)
{
	return x <= 0 ? 0 : (uint64_t)(x + 0.5);
}

void ledger_compute(const struct ledger_input *in, struct analysis_ledger *out)
{
	memset(out, 0, sizeof *out);
	double P = in->params;
	double N = in->ranks ? in->ranks : 1;
	double U = in->largest_unit_params;
	if (U <= 0)
		U = in->units ? P / in->units : P;
	int prefetch = in->prefetch < 0 ? 0 : in->prefetch;
	double per_param = in->param_bytes + in->grad_bytes + in->master_bytes + in->optimizer_bytes;

	out->params = to_bytes(P);
	out->ranks = (uint32_t)N;
	out->prefetch = (uint32_t)prefetch;
	out->largest_unit_params = to_bytes(U);
	out->units = in->units;
	out->param_bytes = in->param_bytes;
	out->grad_bytes = in->grad_bytes;
	out->master_bytes = in->master_bytes;
	out->optimizer_bytes = in->optimizer_bytes;
	out->persistent_bytes_per_rank = to_bytes(per_param * P / N);
	out->transient_bytes_per_rank = to_bytes(in->param_bytes * U * (1 + prefetch));
	out->peak_state_bytes_per_rank = out->persistent_bytes_per_rank + out->transient_bytes_per_rank;
	out->gpu_mem_bytes = in->gpu_mem_bytes;
	if (in->gpu_mem_bytes)
		out->headroom_bytes = (int64_t)in->gpu_mem_bytes - (int64_t)out->peak_state_bytes_per_rank;
	out->model_wire_bytes_per_step = to_bytes(3 * P * in->param_bytes);
	out->wire_bytes_per_step = out->model_wire_bytes_per_step;
	out->ddp_wire_bytes_per_step = to_bytes(2 * P * in->param_bytes);
	out->ddp_persistent_bytes_per_rank = to_bytes(per_param * P);
	out->whole_model_transient_bytes = to_bytes(in->param_bytes * P);
}
