/*
 * analysis_names.c - the options' defaults, the result's release, and the names
 * the report writes for analysis.h's enums.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analysis.h"

/* ---- options and names ------------------------------------------------- */

void analysis_options_init(struct analysis_options *o)
{
	memset(o, 0, sizeof *o);
	o->rank = 0;
	o->prefetch = ANALYSIS_DEFAULT_PREFETCH;
	o->warmup_steps = -1;
	o->param_bytes = ANALYSIS_DEFAULT_PARAM_BYTES;
	o->grad_bytes = ANALYSIS_DEFAULT_GRAD_BYTES;
	o->master_bytes = ANALYSIS_DEFAULT_MASTER_BYTES;
	o->optimizer_bytes = ANALYSIS_DEFAULT_OPTIMIZER_BYTES;
	o->step_ranges = ANALYSIS_DEFAULT_STEP_RANGES;
	o->compute_ranges = ANALYSIS_DEFAULT_COMPUTE_RANGES;
	o->exposed_min_ns = ANALYSIS_DEFAULT_EXPOSED_MIN_NS;
	o->hang_timeout_ns = ANALYSIS_DEFAULT_HANG_TIMEOUT_NS;
}

void analysis_result_free(struct analysis_result *r)
{
	if (!r)
		return;
	free(r->gathers);
	free(r->per_rank);
	free(r->sources);
	free(r->attach.comms);
	for (uint32_t i = 0; i < r->nworlds; i++) {
		free(r->worlds[i].processes);
		analysis_result_free(r->worlds[i].result);
	}
	free(r->worlds);
	free(r);
}

const struct analysis_result *analysis_world_result(const struct analysis_result *r, uint32_t i)
{
	return i < r->nworlds && r->worlds[i].result ? r->worlds[i].result : r;
}

const char *analysis_step_detection_name(enum analysis_step_detection d)
{
	switch (d) {
	case ANALYSIS_STEPS_NVTX:
		return "nvtx";
	case ANALYSIS_STEPS_PERIOD:
		return "period";
	default:
		return "none";
	}
}

const char *analysis_exposure_source_name(enum analysis_exposure_source s)
{
	switch (s) {
	case ANALYSIS_EXPOSURE_CUPTI:
		return "cupti";
	case ANALYSIS_EXPOSURE_HOST:
		return "host";
	default:
		return "none";
	}
}

const char *analysis_comm_role_name(int role)
{
	static const char *const names[ANALYSIS_ROLE_MAX] = {
	    [ANALYSIS_ROLE_UNKNOWN] = "unknown",
	    [ANALYSIS_ROLE_FSDP] = "fsdp",
	    [ANALYSIS_ROLE_FSDP_REGATHER] = "fsdp-regather",
	    [ANALYSIS_ROLE_REPLICATE] = "replicate",
	    [ANALYSIS_ROLE_TENSOR_PARALLEL] = "tensor-parallel",
	    [ANALYSIS_ROLE_PIPELINE] = "pipeline",
	    [ANALYSIS_ROLE_EXPERT] = "expert-parallel",
	    [ANALYSIS_ROLE_ALLREDUCE] = "allreduce",
	    [ANALYSIS_ROLE_STEP] = "step",
	    [ANALYSIS_ROLE_ONE_OFF] = "one-off",
	    [ANALYSIS_ROLE_IDLE] = "idle",
	    [ANALYSIS_ROLE_CONTEXT_PARALLEL] = "context-parallel",
	    [ANALYSIS_ROLE_ALL_TO_ALL] = "all-to-all",
	};
	return role >= 0 && role < ANALYSIS_ROLE_MAX ? names[role] : "unknown";
}

const char *analysis_verdict_name(int verdict)
{
	return verdict == ANALYSIS_DIAGNOSED ? "diagnosed" : verdict == ANALYSIS_BUCKETED ? "bucketed" : "undecided";
}

const char *analysis_undecided_name(int reason)
{
	static const char *const names[ANALYSIS_UNDECIDED_MAX] = {
	    [ANALYSIS_UNDECIDED_NONE] = "none",
	    [ANALYSIS_UNDECIDED_NO_COLLECTIVES] = "no-collectives",
	    [ANALYSIS_UNDECIDED_NO_FSDP] = "no-fsdp-group",
	    [ANALYSIS_UNDECIDED_NO_STEP] = "no-step",
	    [ANALYSIS_UNDECIDED_NO_REDUCTION] = "no-reduce-scatter",
	    [ANALYSIS_UNDECIDED_PATTERN] = "unknown-pattern",
	    [ANALYSIS_UNDECIDED_INCOMPLETE] = "incomplete",
	};
	return reason >= 0 && reason < ANALYSIS_UNDECIDED_MAX ? names[reason] : "none";
}

const char *analysis_phase_source_name(int source)
{
	return source == ANALYSIS_PHASES_STRUCTURE ? "structure" : "none";
}

const char *analysis_phase_name(int phase)
{
	return phase == ANALYSIS_PHASE_FORWARD ? "forward" : phase == ANALYSIS_PHASE_BACKWARD ? "backward" : "none";
}

const char *analysis_cause_name(int cause)
{
	switch (cause) {
	case ANALYSIS_CAUSE_HIDDEN:
		return "hidden";
	case ANALYSIS_CAUSE_FIRST_OF_PHASE:
		return "first-of-phase";
	case ANALYSIS_CAUSE_NO_PREFETCH:
		return "no-prefetch";
	case ANALYSIS_CAUSE_BANDWIDTH_BOUND:
		return "bandwidth-bound";
	case ANALYSIS_CAUSE_HOST_LATE:
		return "host-late";
	default:
		return "unknown";
	}
}

char *analysis_reshard_format(const struct analysis_reshard_info *r, char *buf, size_t len)
{
	if (len == 0)
		return buf;
	switch (r->policy) {
	case ANALYSIS_RESHARD_TRUE:
		snprintf(buf, len, "true");
		break;
	case ANALYSIS_RESHARD_FALSE:
		snprintf(buf, len, "false");
		break;
	case ANALYSIS_RESHARD_GROUP:
		snprintf(buf, len, "group:%u", r->group_size);
		break;
	case ANALYSIS_RESHARD_MIXED:
		snprintf(buf, len, "mixed");
		break;
	default:
		snprintf(buf, len, "unknown");
		break;
	}
	return buf;
}

const char *analysis_reshard_name(int reshard)
{
	switch (reshard) {
	case ANALYSIS_RESHARD_TRUE:
		return "true";
	case ANALYSIS_RESHARD_FALSE:
		return "false";
	case ANALYSIS_RESHARD_GROUP:
		return "group";
	case ANALYSIS_RESHARD_MIXED:
		return "mixed";
	default:
		return "unknown";
	}
}

const char *analysis_inferred_name(int bit)
{
	static const char *const names[ANALYSIS_INFER_KINDS] = {"id",	    "nranks",	  "rank-inplace",
								"rank-env", "rank-order", "members"};

	return bit >= 0 && bit < ANALYSIS_INFER_KINDS ? names[bit] : "unknown";
}

const char *analysis_inferred_words(int bit)
{
	static const char *const words[ANALYSIS_INFER_KINDS] = {
	    "identity matched across ranks by their calls",
	    "nranks from the attached processes (a lower bound if some rank was not attached)",
	    "rank from in-place AllGathers",
	    "rank from RANK in the environment",
	    "rank guessed from pid order",
	    "membership guessed: several communicators have the same calls",
	};

	return bit >= 0 && bit < ANALYSIS_INFER_KINDS ? words[bit] : "unknown";
}

const char *analysis_attach_exposure_why(void)
{
	return "exposure is not measured in attach mode (uprobes see host calls only); run the job under "
	       "`fsdpscope run` (the agent and CUPTI) to measure it";
}

const char *analysis_attach_steps_why(void)
{
	return "NVTX is not visible to uprobes";
}
