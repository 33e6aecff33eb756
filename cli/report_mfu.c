/*
 * report_mfu.c - MFU in report --json and the text report (report_mfu.h).
 */
#include "cli/report_mfu.h"

#include <inttypes.h>
#include <math.h>

#include "common/record.h"

/* A figure the analysis may not know (0 or less): null then. */
static void num_or_null(struct jw *w, const char *key, double v)
{
	jw_sep(w, key);
	if (v > 0 && isfinite(v))
		jw_rawf(w, "%.10g", v);
	else
		jw_raw(w, "null", 4);
}

void report_mfu_json(struct jw *w, const struct analysis_mfu *m)
{
	char missing[512];

	jw_open(w, "mfu", '{');
	/* known: achieved FLOP/s > 0 over a peak > 0, so > 0 */
	num_or_null(w, "mfu", m->missing ? 0 : m->mfu);
	num_or_null(w, "model_flops", m->model_flops);
	jw_str(w, "model_flops_from", analysis_flops_from_name((int)m->flops_from));
	num_or_null(w, "achieved_flops", m->achieved_flops);
	num_or_null(w, "peak_flops", m->peak_flops);
	jw_str(w, "peak_from", analysis_peak_from_name((int)m->peak_from));
	jw_str(w, "peak_source", m->peak_source[0] ? m->peak_source : NULL);
	jw_u64(w, "step_ns", m->step_ns);
	jw_u64(w, "ranks", m->ranks);
	if (m->device_name[0]) {
		jw_open(w, "device", '{');
		jw_str(w, "name", m->device_name);
		jw_u64_or_null(w, "memory_bytes", m->device_memory_bytes, m->device_memory_bytes != 0);
		jw_u64_or_null(w, "sm_count", m->device_sm_count, m->device_sm_count != 0);
		jw_str(w, "origin", record_device_origin_name((uint16_t)m->device_origin));
		jw_close(w, '}');
	} else {
		jw_null(w, "device");
	}
	jw_u64(w, "devices_differ", m->devices_differ);
	jw_open(w, "missing", '[');
	for (int bit = 0; bit < 32; bit++)
		if (m->missing & (1u << bit) && analysis_mfu_missing_name(bit))
			jw_str(w, NULL, analysis_mfu_missing_name(bit));
	jw_close(w, ']');
	analysis_mfu_missing_text(m, missing, sizeof missing);
	jw_str(w, "missing_text", missing[0] ? missing : NULL);
	jw_close(w, '}');
}

void report_source_device_json(struct jw *w, const struct source_summary *s)
{
	char cc[16];

	if (!s->device_origin) {
		jw_null(w, "device");
		return;
	}
	jw_open(w, "device", '{');
	jw_i64(w, "device", s->device);
	jw_str(w, "name", s->device_name[0] ? s->device_name : NULL);
	jw_u64_or_null(w, "memory_bytes", s->device_memory_bytes, s->device_memory_bytes != 0);
	jw_u64_or_null(w, "sm_count", s->device_sm_count, s->device_sm_count != 0);
	snprintf(cc, sizeof cc, "%u.%u", s->device_compute_major, s->device_compute_minor);
	jw_str(w, "compute_capability", s->device_compute_major ? cc : NULL);
	jw_str(w, "origin", record_device_origin_name(s->device_origin));
	jw_close(w, '}');
}

void report_mfu_text(FILE *out, const struct analysis_mfu *m)
{
	char missing[512];

	if (!m->missing && m->mfu >= 0) {
		fprintf(out, "; MFU %.1f%% (%.3g FLOP/s achieved; peak %.4g FLOP/s x %" PRIu32 " GPUs, %s)\n",
			100 * m->mfu, m->achieved_flops, m->peak_flops, m->ranks, m->peak_source);
		return;
	}
	fprintf(out, "; MFU unknown: %s\n", analysis_mfu_missing_text(m, missing, sizeof missing));
}
