/*
 * whatif_print.c - the what-if model in the report (see whatif_print.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>

#include "collector/whatif.h"
#include "collector/whatif_print.h"
#include "common/json_writer.h"

const char *whatif_bound_name(int bound)
{
	return bound == WHATIF_BOUND_LATENCY ? "latency" : bound == WHATIF_BOUND_BANDWIDTH ? "bandwidth" : NULL;
}

static void json_num(struct jw *w, const char *key, double v)
{
	jw_sep(w, key);
	if (isfinite(v))
		jw_rawf(w, "%.10g", v);
	else
		jw_raw(w, "null", 4);
}

static void json_fits(struct jw *w, const whatif_model_t *m)
{
	jw_open(w, "fits", '[');
	for (uint32_t i = 0; i < whatif_fit_count(m); i++) {
		const struct whatif_fit *f = whatif_fit_get(m, i);
		jw_open(w, NULL, '{');
		jw_i64(w, "nranks", f->nranks);
		jw_u64(w, "points", f->points);
		jw_u64(w, "sizes", f->sizes);
		jw_bool(w, "fitted", f->fitted);
		if (f->fitted) {
			json_num(w, "latency_ns", f->latency_ns);
			if (f->bytes_per_ns > 0)
				json_num(w, "bytes_per_ns", f->bytes_per_ns);
			else
				jw_null(w, "bytes_per_ns");
			json_num(w, "residual_ns", f->residual_ns);
			if (f->why[0])
				jw_str(w, "why", f->why);
			else
				jw_null(w, "why");
		} else {
			jw_null(w, "latency_ns");
			jw_null(w, "bytes_per_ns");
			jw_null(w, "residual_ns");
			jw_str(w, "why", f->why);
		}
		jw_close(w, '}');
	}
	jw_close(w, ']');
}

void whatif_json(struct jw *w, const struct analysis_result *r)
{
	whatif_model_t *m;
	jw_open(w, "whatif", '[');
	if (whatif_new(r, &m) < 0) {
		jw_close(w, ']');
		jw_open(w, "whatif_model", '{');
		jw_str(w, "note", "out of memory: no model");
		jw_null(w, "prefetch_seen");
		jw_open(w, "fits", '[');
		jw_close(w, ']');
		jw_open(w, "left_out", '[');
		jw_close(w, ']');
		jw_open(w, "gather_bounds", '[');
		jw_close(w, ']');
		jw_close(w, '}');
		return;
	}
	for (uint32_t i = 0; i < whatif_count(m); i++) {
		const struct whatif_prediction *p = whatif_get(m, i);
		jw_open(w, NULL, '{');
		jw_str(w, "change", whatif_change_name(p->change));
		jw_u64(w, "predicted_step_ns", p->step_ns);
		jw_u64(w, "predicted_exposed_allgather_ns", p->exposed_allgather_ns);
		jw_u64_or_null(w, "predicted_peak_bytes", p->peak_bytes, p->peak_known);
		jw_str(w, "basis", p->basis);
		jw_close(w, '}');
	}
	jw_close(w, ']');
	jw_open(w, "whatif_model", '{');
	const char *note = whatif_note(m);
	jw_str(w, "note", note[0] ? note : NULL);
	int seen = whatif_prefetch_seen(m);
	if (seen >= 0)
		jw_i64(w, "prefetch_seen", seen);
	else
		jw_null(w, "prefetch_seen");
	json_fits(w, m);
	jw_open(w, "left_out", '[');
	for (uint32_t i = 0; i < whatif_left_out_count(m); i++) {
		const struct whatif_left_out *l = whatif_left_out_get(m, i);
		jw_open(w, NULL, '{');
		jw_str(w, "change", whatif_change_name(l->change));
		jw_str(w, "why", l->why);
		jw_close(w, '}');
	}
	jw_close(w, ']');
	jw_open(w, "gather_bounds", '[');
	for (uint32_t i = 0; i < r->ngathers; i++) {
		const char *b = whatif_bound_name(whatif_model_bound(m, r, i));
		if (b)
			jw_str(w, NULL, b);
		else
			jw_null(w, NULL);
	}
	jw_close(w, ']');
	jw_close(w, '}');
	whatif_free(m);
}

int whatif_text(FILE *out, const struct analysis_result *r)
{
	whatif_model_t *m;
	if (whatif_new(r, &m) < 0)
		return -ENOMEM;
	fprintf(out, "\nWhat-if (predicted from this trace)\n");
	const char *note = whatif_note(m);
	if (note[0]) {
		fprintf(out, "  nothing predicted: %s\n", note);
		whatif_free(m);
		return 0;
	}
	fprintf(out, "  %-28s %12s %14s %14s\n", "change", "step ms", "exposed AG ms", "peak MiB");
	fprintf(out, "  %-28s %12.3f %14.3f %14s\n", "(as recorded)", r->step_ns / 1e6,
		r->exposure.exposed_allgather_ns_per_step / 1e6, "");
	for (uint32_t i = 0; i < whatif_count(m); i++) {
		const struct whatif_prediction *p = whatif_get(m, i);
		char peak[32] = "not known";
		if (p->peak_known)
			snprintf(peak, sizeof peak, "%.1f", p->peak_bytes / 1048576.0);
		fprintf(out, "  %-28s %12.3f %14.3f %14s\n", whatif_change_name(p->change), p->step_ns / 1e6,
			p->exposed_allgather_ns / 1e6, peak);
	}
	for (uint32_t i = 0; i < whatif_left_out_count(m); i++) {
		const struct whatif_left_out *l = whatif_left_out_get(m, i);
		fprintf(out, "  %-28s left out: %s\n", whatif_change_name(l->change), l->why);
	}
	if (whatif_count(m))
		fprintf(out, "  model: %s\n", whatif_get(m, 0)->basis);
	whatif_free(m);
	return 0;
}
