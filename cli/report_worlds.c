/*
 * report_worlds.c - the worlds of a restarted job, in the report and in
 * lint (see report_worlds.h; docs/report-schema.md, "worlds").
 */
#include "cli/report_worlds.h"

#include "cli/report_sources.h"
#include "common/json_writer.h"
#include "rules/rules.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

/* The findings of world i: the report's own for the headline world. */
static const findings_t *world_findings(const struct diagnosis *d, uint32_t i)
{
	if (d->world_findings && d->world_findings[i])
		return d->world_findings[i];
	return (int32_t)i == d->result->headline_world ? d->findings : NULL;
}

static void json_processes(struct jw *w, const struct analysis_world *x)
{
	jw_open(w, "processes", '[');
	for (uint32_t i = 0; i < x->nprocesses; i++) {
		const struct analysis_world_process *p = &x->processes[i];
		jw_open(w, NULL, '{');
		jw_u64(w, "source", p->source);
		jw_u64(w, "pid", p->pid);
		jw_i64(w, "rank", p->rank);
		jw_str(w, "end", source_end_name((enum source_end)p->end));
		if (p->signal)
			jw_i64(w, "signal", p->signal);
		else
			jw_null(w, "signal");
		if (p->exit_code >= 0)
			jw_i64(w, "exit_code", p->exit_code);
		else
			jw_null(w, "exit_code");
		jw_u64_or_null(w, "last_realtime_ns", p->last_realtime_ns, p->last_realtime_ns != 0);
		jw_u64(w, "collectives", p->collectives);
		jw_close(w, '}');
	}
	jw_close(w, ']');
}

/* What a world's diagnosis says, in brief (the headline world's in full at
 * the top of the report). */
static void json_diagnosis(struct jw *w, const struct analysis_result *r)
{
	char policy[32];
	int phases = r->microbatches.phase_source != ANALYSIS_PHASES_NONE;

	jw_str(w, "verdict", analysis_verdict_name(r->verdict));
	if (r->verdict == ANALYSIS_UNDECIDED) {
		jw_open(w, "undecided", '{');
		jw_str(w, "reason", analysis_undecided_name(r->undecided_reason));
		jw_str(w, "why", r->undecided_why);
		jw_close(w, '}');
	} else {
		jw_null(w, "undecided");
	}
	jw_i64(w, "world_size", r->world_size);
	jw_i64(w, "headline_rank", r->headline_rank);
	jw_u64(w, "steps_analyzed", r->steps_analyzed);
	jw_u64(w, "steps_seen", r->steps_seen);
	jw_u64(w, "step_ns", r->step_ns);
	jw_open(w, "per_step", '{');
	jw_u64(w, "allgathers", r->per_step.allgathers);
	jw_u64_or_null(w, "forward_allgathers", r->per_step.forward_allgathers, phases);
	jw_u64_or_null(w, "backward_allgathers", r->per_step.backward_allgathers, phases);
	jw_u64(w, "reduce_scatters", r->per_step.reduce_scatters);
	jw_u64(w, "allreduces", r->per_step.allreduces);
	jw_close(w, '}');
	jw_open(w, "units", '{');
	jw_u64(w, "repeating_units", r->units.repeating_units);
	jw_u64(w, "gathers_per_unit", r->units.gathers_per_unit);
	jw_u64(w, "root_gathers", r->units.root_gathers);
	jw_close(w, '}');
	jw_str(w, "reshard_after_forward", analysis_reshard_format(&r->reshard, policy, sizeof(policy)));
	jw_open(w, "notes", '[');
	for (uint32_t i = 0; i < r->nnotes && i < ANALYSIS_NOTES_MAX; i++)
		jw_str(w, NULL, r->notes[i]);
	jw_close(w, ']');
}

static void json_findings(struct jw *w, const findings_t *list)
{
	jw_open(w, "findings", '[');
	for (size_t i = 0; list && i < findings_count(list); i++) {
		const struct finding *f = findings_get(list, i);
		jw_open(w, NULL, '{');
		jw_str(w, "rule", f->rule->id);
		jw_str(w, "severity", rule_severity_name(f->severity));
		jw_str(w, "message", f->message);
		jw_close(w, '}');
	}
	jw_close(w, ']');
}

void report_worlds_json(struct jw *w, const struct diagnosis *d)
{
	const struct analysis_result *a = d->result;

	if (a->nworlds) {
		jw_open(w, "worlds", '[');
		for (uint32_t i = 0; i < a->nworlds; i++) {
			const struct analysis_world *x = &a->worlds[i];
			jw_open(w, NULL, '{');
			jw_u64(w, "index", x->index);
			jw_bool(w, "headline", (int32_t)i == a->headline_world);
			jw_hex(w, "id", x->id);
			jw_i64(w, "size", x->size);
			jw_u64(w, "ranks", x->ranks);
			jw_u64(w, "components", x->components);
			jw_u64(w, "first_realtime_ns", x->first_realtime_ns);
			jw_u64(w, "last_realtime_ns", x->last_realtime_ns);
			jw_u64(w, "died", x->died);
			if (x->first_stop >= 0) {
				const struct analysis_world_process *p = &x->processes[x->first_stop];
				jw_open(w, "first_stop", '{');
				jw_i64(w, "rank", p->rank);
				jw_u64(w, "pid", p->pid);
				jw_u64_or_null(w, "last_realtime_ns", p->last_realtime_ns, p->last_realtime_ns != 0);
				jw_close(w, '}');
			} else {
				jw_null(w, "first_stop");
			}
			jw_u64(w, "duplicate_ranks", x->duplicate_ranks);
			json_processes(w, x);
			json_diagnosis(w, analysis_world_result(a, i));
			json_findings(w, world_findings(d, i));
			jw_close(w, '}');
		}
		jw_close(w, ']');
	}
	if (a->duplicate_ranks) {
		jw_open(w, "duplicate_ranks", '{');
		jw_u64(w, "count", a->duplicate_ranks);
		jw_i64(w, "rank", a->duplicate_rank);
		jw_open(w, "pids", '[');
		jw_u64(w, NULL, a->duplicate_pids[0]);
		jw_u64(w, NULL, a->duplicate_pids[1]);
		jw_close(w, ']');
		jw_close(w, '}');
	}
}

/* A CLOCK_REALTIME instant as "HH:MM:SS.mmm" UTC, "?" unknown. */
static const char *clock_words(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000u);
	struct tm tm;

	if (!ns || !gmtime_r(&t, &tm)) {
		snprintf(buf, len, "?");
		return buf;
	}
	snprintf(buf, len, "%02d:%02d:%02d.%03u", tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (unsigned)(ns % 1000000000u / 1000000u));
	return buf;
}

/* "diagnosed, 6 steps analysed, 3 repeating units x 1" or why not. */
static void world_verdict(FILE *out, const struct analysis_result *r)
{
	if (r->verdict == ANALYSIS_UNDECIDED)
		fprintf(out, "not diagnosed (%s)", analysis_undecided_name(r->undecided_reason));
	else
		diagnosis_print_summary(out, r);
}

void report_worlds_text(FILE *out, const struct diagnosis *d)
{
	const struct analysis_result *a = d->result;
	char t1[32], t2[32];

	if (a->duplicate_ranks)
		fprintf(out, "ranks       rank %d is claimed by two processes that ran at the same time (pids %u, %u): "
			     "not a restart, listed apart (%u rank%s claimed twice)\n",
			(int)a->duplicate_rank, a->duplicate_pids[0], a->duplicate_pids[1], a->duplicate_ranks,
			a->duplicate_ranks == 1 ? "" : "s");
	if (!a->nworlds)
		return;
	fprintf(out, "\nWorlds (%u: a restart with new processes on new communicators; figures above are world %d's)\n",
		a->nworlds, (int)a->headline_world);
	for (uint32_t i = 0; i < a->nworlds; i++) {
		const struct analysis_world *x = &a->worlds[i];
		fprintf(out, "  world %u%s: %d ranks, %u processes, %s .. %s UTC, ", i,
			(int32_t)i == a->headline_world ? " (headline)" : "", (int)x->size, x->nprocesses,
			clock_words(x->first_realtime_ns, t1, sizeof(t1)), clock_words(x->last_realtime_ns, t2, sizeof(t2)));
		world_verdict(out, analysis_world_result(a, i));
		fputc('\n', out);
		for (uint32_t k = 0; k < x->nprocesses; k++) {
			const struct analysis_world_process *p = &x->processes[k];
			if (source_end_whole(p->end))
				continue;
			fprintf(out, "    rank %d (pid %u): %s, last record %s UTC%s\n", (int)p->rank, p->pid,
				source_end_name((enum source_end)p->end), clock_words(p->last_realtime_ns, t1, sizeof(t1)),
				(int32_t)k == x->first_stop ? " (stopped first)" : "");
		}
	}
}

void report_worlds_lint(FILE *out, const struct diagnosis *d, int explain, int fsdp2_only)
{
	const struct analysis_result *a = d->result;

	for (uint32_t i = 0; i < a->nworlds; i++) {
		const findings_t *list = world_findings(d, i);
		if ((int32_t)i == a->headline_world || !list)
			continue;
		fprintf(out, "\nworld %u (%d ranks, %s the restart): ", i, (int)a->worlds[i].size,
			(int32_t)i < a->headline_world ? "before" : "after");
		diagnosis_print_tally(out, list);
		fprintf(out, "; ");
		world_verdict(out, analysis_world_result(a, i));
		fputc('\n', out);
		if (findings_count(list)) {
			fputc('\n', out);
			diagnosis_print_findings(out, list, explain, fsdp2_only);
		}
	}
}

/* Is source one of a world's but the headline one's? */
static int in_other_world(const struct analysis_result *a, uint32_t source)
{
	for (uint32_t i = 0; i < a->nworlds; i++) {
		if ((int32_t)i == a->headline_world)
			continue;
		for (uint32_t k = 0; k < a->worlds[i].nprocesses; k++)
			if (a->worlds[i].processes[k].source == source)
				return 1;
	}
	return 0;
}

uint32_t report_worlds_troubled_headline(const struct analysis_result *a)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < a->nsources; i++)
		n += report_source_troubled(&a->sources[i]) && !in_other_world(a, a->sources[i].source);
	return n;
}
