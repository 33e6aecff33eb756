/*
 * mfu.c - model FLOPs utilisation (see mfu.h).
 */
#include "collector/mfu.h"

#include <stdio.h>
#include <string.h>

#include "collector/analyze_note.h"
#include "collector/device_peak.h"
#include "collector/source.h"
#include "common/record.h"

/* The source whose GPU stands for the job: the headline rank's, else the
 * first with a device record; NULL when no source names one. */
static const struct source_summary *device_source(const struct analysis_result *r)
{
	const struct source_summary *first = NULL;

	for (uint32_t i = 0; i < r->nsources; i++) {
		const struct source_summary *s = &r->sources[i];

		if (!s->device_origin || !s->device_name[0])
			continue;
		if (s->rank == r->headline_rank && r->headline_rank >= 0)
			return s;
		if (!first)
			first = s;
	}
	return first;
}

static void fill_device(struct analysis_mfu *m, const struct analysis_result *r)
{
	const struct source_summary *d = device_source(r);

	if (!d)
		return;
	snprintf(m->device_name, sizeof m->device_name, "%s", d->device_name);
	m->device_memory_bytes = d->device_memory_bytes;
	m->device_sm_count = d->device_sm_count;
	m->device_origin = d->device_origin;
	for (uint32_t i = 0; i < r->nsources; i++)
		if (r->sources[i].device_origin && strcmp(r->sources[i].device_name, d->device_name) != 0)
			m->devices_differ++;
}

/* The peak: --peak-flops, else the table on the device's name. */
static void fill_peak(const struct analysis_options *opt, struct analysis_mfu *m)
{
	const struct device_peak *p;
	int kineto = m->device_origin == FSS_DEVICE_KINETO;

	if (opt->peak_flops > 0) {
		m->peak_flops = opt->peak_flops;
		m->peak_from = ANALYSIS_PEAK_OPTION;
		snprintf(m->peak_source, sizeof m->peak_source, "--peak-flops");
		return;
	}
	if (!m->device_name[0]) {
		m->missing |= ANALYSIS_MFU_NO_DEVICE;
		return;
	}
	p = device_peak_find(m->device_name, kineto);
	if (!p) {
		m->missing |= ANALYSIS_MFU_DEVICE_UNKNOWN;
		return;
	}
	m->peak_flops = p->bf16_flops;
	m->peak_from = kineto ? ANALYSIS_PEAK_KINETO : ANALYSIS_PEAK_TABLE;
	snprintf(m->peak_source, sizeof m->peak_source, "%s: %s dense BF16, %s",
		 kineto ? "Kineto deviceProperties" : "device table", p->model, p->source);
}

void mfu_fill(const struct analysis_options *opt, struct analysis_result *r)
{
	struct analysis_mfu *m = &r->mfu;

	memset(m, 0, sizeof *m);
	m->mfu = ANALYSIS_UNKNOWN;
	m->step_ns = r->breakdown.step_ns;
	m->ranks = r->world_size > 0 ? (uint32_t)r->world_size : r->ranks;
	if (!m->ranks)
		m->ranks = 1;
	if (opt->flops_per_step > 0) {
		m->model_flops = opt->flops_per_step;
		m->flops_from = ANALYSIS_FLOPS_OPTION;
	} else if (opt->tokens_per_step > 0 && r->ledger.params > 0) {
		m->model_flops = 6.0 * (double)r->ledger.params * opt->tokens_per_step;
		m->flops_from = ANALYSIS_FLOPS_TOKENS;
	} else {
		m->missing |= opt->tokens_per_step > 0 ? ANALYSIS_MFU_NO_PARAMS : ANALYSIS_MFU_NO_FLOPS;
	}
	fill_device(m, r);
	fill_peak(opt, m);
	if (!m->step_ns)
		m->missing |= ANALYSIS_MFU_NO_STEP;
	if (m->model_flops > 0 && m->step_ns)
		m->achieved_flops = m->model_flops / ((double)m->step_ns * 1e-9);
	if (!m->missing)
		m->mfu = m->achieved_flops / (m->peak_flops * m->ranks);
	r->breakdown.mfu = m->mfu;
	/* kept as computed: which input is wrong is the user's to say */
	if (m->mfu > 1)
		analyze_note(r, "MFU %.0f%% is above 100%%: the FLOPs per step (%s) or the peak (%.4g FLOP/s, from %s) do not fit "
				"this job", 100 * m->mfu, analysis_flops_from_name((int)m->flops_from), m->peak_flops,
			     analysis_peak_from_name((int)m->peak_from));
}

const char *analysis_mfu_missing_name(int bit)
{
	static const char *const names[] = {"model_flops", "params", "device", "device_unknown", "step"};

	return bit >= 0 && bit < (int)(sizeof(names) / sizeof(names[0])) ? names[bit] : NULL;
}

const char *analysis_peak_from_name(int from)
{
	switch (from) {
	case ANALYSIS_PEAK_OPTION: return "--peak-flops";
	case ANALYSIS_PEAK_TABLE: return "device table";
	case ANALYSIS_PEAK_KINETO: return "kineto";
	default: return NULL;
	}
}

const char *analysis_flops_from_name(int from)
{
	switch (from) {
	case ANALYSIS_FLOPS_OPTION: return "--model-flops";
	case ANALYSIS_FLOPS_TOKENS: return "6PT";
	default: return NULL;
	}
}

char *analysis_mfu_missing_text(const struct analysis_mfu *m, char *buf, size_t len)
{
	size_t at = 0;

	if (!len)
		return buf;
	buf[0] = 0;
	for (int bit = 0; bit < 5; bit++) {
		char part[160];
		int n;

		if (!(m->missing & (1u << bit)))
			continue;
		switch (1u << bit) {
		case ANALYSIS_MFU_NO_FLOPS:
			snprintf(part, sizeof part, "the model's FLOPs per step: give --model-flops or --tokens-per-step");
			break;
		case ANALYSIS_MFU_NO_PARAMS:
			snprintf(part, sizeof part,
				 "the parameter count for 6 P T (the trace does not show P): give --model-flops");
			break;
		case ANALYSIS_MFU_NO_DEVICE:
			snprintf(part, sizeof part, "the GPU's peak: no device record names the GPU; give --peak-flops");
			break;
		case ANALYSIS_MFU_DEVICE_UNKNOWN:
			snprintf(part, sizeof part, "the GPU's peak: \"%.64s\" is not in the device table; give --peak-flops",
				 m->device_name);
			break;
		default:
			snprintf(part, sizeof part, "a step time: no step was analysed");
			break;
		}
		n = snprintf(buf + at, len - at, "%s%s", at ? "; " : "", part);
		if (n < 0 || (size_t)n >= len - at)
			break;
		at += (size_t)n;
	}
	return buf;
}
