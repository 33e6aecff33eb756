/*
 * analyze_steady.c - a rank's steady state: the steady-state step, the
 * medians and sample of its figures, the representative step (see
 * analyze_steady.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analyze_steady.h"

int analyze_steady_representative(const struct step_sample *m)
{
	unsigned n = m->seen < STEP_SAMPLE_SLOTS ? (unsigned)m->seen : STEP_SAMPLE_SLOTS;
	if (n == 0)
		return -1;
	unsigned order[STEP_SAMPLE_SLOTS];
	for (unsigned i = 0; i < n; i++)
		order[i] = i;
	/* insertion sort by (wait, ordinal): at most STEP_SAMPLE_SLOTS slots */
	for (unsigned i = 1; i < n; i++) {
		unsigned v = order[i], j = i;
		for (; j > 0; j--) {
			unsigned u = order[j - 1];
			uint64_t wu = m->fig[u][FIG_AG_WAIT], wv = m->fig[v][FIG_AG_WAIT];
			if (wu < wv || (wu == wv && m->ordinal[u] <= m->ordinal[v]))
				break;
			order[j] = u;
		}
		order[j] = v;
	}
	return (int)order[(n - 1) / 2];
}

/* The steady step from the first step aggregated: its events and what each
 * does, the rank's phases, and room for the per-gather sample. */
static int steady_start(struct rank_steady *st, const struct step_summary *s, int detail)
{
	size_t n = s->nev ? s->nev : 1;
	st->nev = s->nev;
	st->tev = malloc(n * sizeof *st->tev);
	st->tinfo = calloc(n, sizeof *st->tinfo);
	if (!st->tev || !st->tinfo)
		return -ENOMEM;
	memcpy(st->tev, s->ev, s->nev * sizeof *s->ev);
	for (size_t i = 0; i < s->nev; i++)
		st->tinfo[i] = s->info[i];
	st->phases = s->phases;
	st->detail = detail;
	if (st->detail) {
		st->sample.gathers = calloc(STEP_SAMPLE_SLOTS * n, sizeof *st->sample.gathers);
		if (!st->sample.gathers)
			return -ENOMEM;
	}
	return 0;
}

/* A step's figures (and with detail its gathers') into the sample slot. */
static void sample_put(struct rank_steady *st, int slot, const struct step_summary *s)
{
	st->sample.ordinal[slot] = s->ordinal;
	memcpy(st->sample.fig[slot], s->fig, sizeof s->fig);
	for (size_t i = 0; st->detail && i < s->nev; i++) {
		const struct ev_info *in = &s->info[i];
		st->sample.gathers[(size_t)slot * s->nev + i] = (struct gather_fig){
		    .duration = in->duration,
		    .exposed = in->exposed,
		    .compute_wait = in->compute_wait,
		    .queued = in->queued,
		    .call = in->call,
		    .cause = in->cause,
		    .start_off = in->start_off,
		    .issue_off = in->issue_off,
		    .compute_after = in->compute_after,
		    .timed = (uint8_t)(in->timed && s->exposure_source),
		};
	}
}

/* Add a steady-state step to the rank's figures. */
static int aggregate(struct rank_steady *st, const struct step_summary *s, int detail)
{
	if (st->nev == 0 && !st->tev) {
		int rc = steady_start(st, s, detail);
		if (rc < 0)
			return rc;
	}
	if (s->nev != st->nev)
		return 0; /* cannot happen: equal hashes */
	/* names from the first step that has them */
	if (st->nev && !st->names_known && s->has_names) {
		for (size_t i = 0; i < s->nev; i++)
			st->tinfo[i].name = s->info[i].name;
		st->names_known = 1;
	}
	if (s->exposure_source && !st->exposure_source)
		st->exposure_source = s->exposure_source;
	int slot = median_reservoir_slot(&st->sample.seen, &st->sample.rng);
	if (slot >= 0)
		sample_put(st, slot, s);
	for (int f = 0; f < FIG_MAX; f++) {
		if (f != FIG_STEP && !s->exposure_source)
			continue;
		median_add(&st->fig[f], s->fig[f]);
	}
	st->analyzed++;
	return 0;
}

/* Choose the steady-state step among the early NVTX steps: the most common
 * one (the later on ties); earlier steps are warm-up, others irregular. */
int analyze_steady_decide(struct rank_steady *st, int detail)
{
	unsigned n = st->nearly;
	st->decided = 1;
	if (n == 0)
		return 0;
	unsigned best = 0, best_count = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned c = 0;
		for (unsigned j = 0; j < n; j++)
			c += st->early[j]->hash == st->early[i]->hash;
		if (c >= best_count) {
			best_count = c;
			best = i;
		}
	}
	st->tmpl_hash = st->early[best]->hash;
	unsigned first = 0;
	while (st->early[first]->hash != st->tmpl_hash)
		first++;
	int rc = 0;
	for (unsigned i = 0; i < n; i++) {
		if (i < first)
			st->warmup++;
		else if (st->early[i]->hash != st->tmpl_hash)
			st->irregular++;
		else if (rc == 0)
			rc = aggregate(st, st->early[i], detail);
		analyze_summary_free(st->early[i]);
		st->early[i] = NULL;
	}
	st->nearly = 0;
	return rc;
}

int analyze_steady_add(struct rank_steady *st, struct step_summary *s, int nvtx, int detail)
{
	int rc = 0;
	if (!nvtx) {
		rc = aggregate(st, s, detail);
		analyze_summary_free(s);
		return rc;
	}
	if (!st->decided) {
		st->early[st->nearly++] = s;
		if (st->nearly == ANALYZE_EARLY_STEPS)
			return analyze_steady_decide(st, detail);
		return 0;
	}
	if (s->hash == st->tmpl_hash)
		rc = aggregate(st, s, detail);
	else
		st->irregular++;
	analyze_summary_free(s);
	return rc;
}

int analyze_steady_names_known(const struct rank_steady *st)
{
	return st->names_known;
}

size_t analyze_steady_pending(const struct rank_steady *st)
{
	size_t n = 0;
	for (unsigned i = 0; i < st->nearly; i++)
		n += st->early[i]->nev;
	return n;
}

void analyze_steady_release(struct rank_steady *st)
{
	for (unsigned i = 0; i < st->nearly; i++)
		analyze_summary_free(st->early[i]);
	free(st->tev);
	free(st->tinfo);
	free(st->sample.gathers);
}
