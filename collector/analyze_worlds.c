/*
 * analyze_worlds.c - a result per world of a restarted job (see
 * analyze_finish.h, collector/worlds.h, docs/patterns.md "Restarts").
 *
 * The rank states stay per process (per trace source) all along, so a
 * world's result is the one-world result of its processes' states, with
 * the cross-rank matcher seen through that world's keys. The headline
 * world, whose result the caller gets, is the last one that has an
 * analysed step: the job as it runs now (or ran last), the one a fix is
 * for; a world that died before its first step (a crash loop) cannot say
 * anything of the wrap. The other worlds' results hang from it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analyze_finish.h"
#include "collector/analyze_note.h"
#include "collector/analyze_worlds.h"
#include "collector/worlds.h"

/* The key the gathers' per-index figures of a world are kept under: its
 * headline rank's (the one asked for, else its lowest with collectives). */
static uint64_t index_key(const struct analyze_input *in, rank_state_t *const *rs, size_t n)
{
	const struct tl_source *best = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct tl_source *src = rank_state_source(rs[i]);
		if (!src->collectives || !src->view)
			continue;
		if (in->opt->rank >= 0 && src->rank == in->opt->rank)
			return worlds_source_key(src->view);
		if (!best || (src->rank >= 0 && (best->rank < 0 || src->rank < best->rank)))
			best = src;
	}
	return best ? worlds_source_key(best->view) : 0;
}

/* World k's result: its processes' rank states alone. Returns 0 or -ENOMEM. */
static int world_result(const struct analyze_input *in, const struct worlds *w, size_t k, struct analysis_result **out)
{
	*out = NULL;
	rank_state_t **rs = calloc(in->nrs ? in->nrs : 1, sizeof *rs);
	if (!rs)
		return -ENOMEM;
	size_t n = 0;
	for (size_t i = 0; i < in->nrs; i++)
		if (worlds_of(w, rank_state_source(in->rs[i])->id) == (int)k)
			rs[n++] = in->rs[i];
	ranks_t *view = ranks_view_new(in->ranks, w->w[k].keys, w->w[k].nkeys, index_key(in, rs, n));
	int rc = -ENOMEM;
	if (view) {
		struct analyze_input sub = *in;
		sub.rs = rs;
		sub.nrs = n;
		sub.ranks = view;
		rc = analyze_finish_one(&sub, out);
	}
	ranks_free(view);
	free(rs);
	return rc;
}

/* A note put before the others (the last one gives way when they are full):
 * that the figures are one world's is the first thing to read. */
static void note_first(struct analysis_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_first(struct analysis_result *r, const char *fmt, ...)
{
	uint32_t n = r->nnotes < ANALYSIS_NOTES_MAX ? r->nnotes : ANALYSIS_NOTES_MAX - 1;
	memmove(r->notes[1], r->notes[0], (size_t)n * sizeof r->notes[0]);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->notes[0], sizeof r->notes[0], fmt, ap);
	va_end(ap);
	r->nnotes = n + 1;
}

/* A rank two processes of one world claim: in the result and its notes. */
static void duplicates_fill(const sources_t *layer, const struct world *x, struct analysis_result *r)
{
	if (!x->duplicate_ranks)
		return;
	const struct source *a = sources_find(layer, x->duplicate_sources[0]);
	const struct source *b = sources_find(layer, x->duplicate_sources[1]);
	r->duplicate_ranks = x->duplicate_ranks;
	r->duplicate_rank = x->duplicate_rank;
	r->duplicate_pids[0] = a ? a->pid : 0;
	r->duplicate_pids[1] = b ? b->pid : 0;
	analyze_note(r,
		     "rank %d is claimed by two processes (pids %u, %u) that ran at the same time: not a restart, "
		     "not merged; each is listed apart (%u rank%s claimed twice)",
		     x->duplicate_rank, r->duplicate_pids[0], r->duplicate_pids[1], x->duplicate_ranks,
		     x->duplicate_ranks == 1 ? "" : "s");
}

static int process_cmp(const void *x, const void *y)
{
	const struct analysis_world_process *p = x, *q = y;
	if (p->rank != q->rank)
		return p->rank < q->rank ? -1 : 1;
	return p->source < q->source ? -1 : p->source > q->source;
}

/* World k's summary: its processes (with collectives), how they ended, the
 * one that stopped first among those that died. Returns 0 or -ENOMEM. */
static int world_summary(const sources_t *layer, const struct world *x, uint32_t k, struct analysis_world *out)
{
	out->index = k;
	out->size = x->size;
	out->id = x->id;
	out->components = x->components;
	out->first_realtime_ns = x->first_realtime_ns;
	out->last_realtime_ns = x->last_realtime_ns;
	out->duplicate_ranks = x->duplicate_ranks;
	out->duplicate_rank = x->duplicate_rank;
	out->first_stop = -1;
	out->processes = calloc(x->nsources ? x->nsources : 1, sizeof *out->processes);
	if (!out->processes)
		return -ENOMEM;
	for (size_t i = 0; i < x->nsources; i++) {
		const struct source *src = sources_find(layer, x->sources[i]);
		if (!src || !src->collectives)
			continue;
		out->processes[out->nprocesses++] = (struct analysis_world_process){
		    .source = src->id,
		    .pid = src->pid,
		    .rank = src->rank,
		    .end = (int32_t)source_end_of(src),
		    .signal = source_signal(src),
		    .exit_code = source_exit_code(src),
		    .last_realtime_ns =
			src->has_hello && src->last_ns ? src->last_ns + (uint64_t)src->realtime_offset : 0,
		    .collectives = src->collectives,
		};
	}
	out->ranks = out->nprocesses;
	if (out->nprocesses)
		qsort(out->processes, out->nprocesses, sizeof *out->processes, process_cmp);
	for (uint32_t i = 0; i < out->nprocesses; i++) {
		const struct analysis_world_process *p = &out->processes[i];
		if (source_end_whole(p->end))
			continue;
		out->died++;
		if (out->first_stop < 0 || p->last_realtime_ns < out->processes[out->first_stop].last_realtime_ns)
			out->first_stop = (int32_t)i;
	}
	return 0;
}

/* The headline world: the last with an analysed step, else the last. */
static size_t headline_world(struct analysis_result *const *results, size_t n)
{
	for (size_t k = n; k-- > 0;)
		if (results[k]->steps_analyzed)
			return k;
	return n - 1;
}

/* The sizes of the worlds in words: "4, then 2" or "4, 4, then 2". */
static void sizes_words(const struct analysis_world *w, uint32_t n, char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = 0;
	for (uint32_t i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%d",
					i == 0	     ? ""
					: i + 1 == n ? ", then "
						     : ", ",
					(int)w[i].size);
}

/* Several worlds: a result each, the headline one's returned with the
 * others hanging from it. Returns 0 or -ENOMEM. */
static int build_worlds(const struct analyze_input *in, const struct worlds *w, struct analysis_result **out)
{
	const sources_t *layer = timeline_layer(in->tl);
	struct analysis_result **results = calloc(w->n, sizeof *results);
	struct analysis_world *summary = calloc(w->n, sizeof *summary);
	int rc = results && summary ? 0 : -ENOMEM;
	for (size_t k = 0; rc == 0 && k < w->n; k++)
		if ((rc = world_result(in, w, k, &results[k])) == 0)
			rc = world_summary(layer, &w->w[k], (uint32_t)k, &summary[k]);
	if (rc < 0) {
		for (size_t k = 0; results && k < w->n; k++) {
			analysis_result_free(results[k]);
			if (summary)
				free(summary[k].processes);
		}
		free(results);
		free(summary);
		return rc;
	}
	size_t h = headline_world(results, w->n);
	struct analysis_result *top = results[h];
	for (size_t k = 0; k < w->n; k++) {
		duplicates_fill(layer, &w->w[k], results[k]);
		if (k != h)
			summary[k].result = results[k];
	}
	top->nworlds = (uint32_t)w->n;
	top->headline_world = (int32_t)h;
	top->worlds = summary;
	char sizes[96];
	sizes_words(summary, top->nworlds, sizes, sizeof sizes);
	note_first(top,
		   "a restart: %u worlds of %s ranks (new processes, new communicators), each diagnosed apart; these "
		   "figures are world %zu's, the %s",
		   top->nworlds, sizes, h, h + 1 == w->n ? "last" : "last with an analysed step");
	free(results);
	*out = top;
	return 0;
}

int analyze_finish_build(const struct analyze_input *in, struct analysis_result **out)
{
	*out = NULL;
	struct worlds w;
	int rc = worlds_find(timeline_layer(in->tl), &w);
	if (rc < 0)
		return rc;
	if (w.n <= 1) {
		rc = analyze_finish_one(in, out);
		if (rc == 0 && w.n == 1)
			duplicates_fill(timeline_layer(in->tl), &w.w[0], *out);
	} else {
		rc = build_worlds(in, &w, out);
	}
	worlds_release(&w);
	return rc;
}

int analyze_worlds_stopped(flight_t *f, const sources_t *layer)
{
	struct worlds w;
	int rc = worlds_find(layer, &w);
	if (rc < 0)
		return rc;
	for (size_t k = 0; k + 1 < w.n; k++)
		for (size_t i = 0; i < w.w[k].nsources; i++)
			flight_set_stopped(f, w.w[k].sources[i], w.w[k + 1].first_realtime_ns);
	worlds_release(&w);
	return 0;
}
