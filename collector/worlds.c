/*
 * worlds.c - the worlds of a trace (see worlds.h).
 */
#include "collector/worlds.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A communicator of a source, for grouping by id_hash. */
struct comm_pair {
	uint64_t id_hash;
	size_t source; /* index in the layer */
};

/* One component of processes that share communicators. */
struct component {
	size_t root;	      /* union-find root (a source index) */
	uint64_t first, last; /* CLOCK_REALTIME of its first and last timed record */
	int has_collectives;
	int world; /* the world it joined, -1 */
};

static int pair_cmp(const void *a, const void *b)
{
	const struct comm_pair *p = a, *q = b;
	if (p->id_hash != q->id_hash)
		return p->id_hash < q->id_hash ? -1 : 1;
	return p->source < q->source ? -1 : p->source > q->source;
}

static size_t uf_find(size_t *parent, size_t i)
{
	while (parent[i] != i) {
		parent[i] = parent[parent[i]];
		i = parent[i];
	}
	return i;
}

static void uf_union(size_t *parent, size_t a, size_t b)
{
	a = uf_find(parent, a);
	b = uf_find(parent, b);
	if (a != b) /* the lower index stays the root: components keep arrival order */
		parent[a > b ? a : b] = a < b ? a : b;
}

uint64_t worlds_source_key(const struct source *src)
{
	int32_t best = 0;
	uint64_t key = 0;
	for (size_t c = 0; c < src->ncomms; c++)
		if (src->comms[c].nranks > best) {
			best = src->comms[c].nranks;
			key = src->comms[c].id_hash;
		}
	return key;
}

/* A timed record of src on CLOCK_REALTIME (the hello's offset), 0 none. */
static uint64_t realtime_of(const struct source *src, uint64_t mono)
{
	if (!mono)
		return 0;
	return src->has_hello ? mono + (uint64_t)src->realtime_offset : mono;
}

/* Union the sources that share an id_hash. Returns 0 or -ENOMEM. */
static int join_by_comms(const sources_t *layer, size_t *parent)
{
	size_t n = sources_count(layer), npairs = 0;
	for (size_t i = 0; i < n; i++)
		npairs += sources_at(layer, i)->ncomms;
	struct comm_pair *pairs = npairs ? malloc(npairs * sizeof *pairs) : NULL;
	if (npairs && !pairs)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct source *src = sources_at(layer, i);
		for (size_t c = 0; c < src->ncomms; c++)
			if (src->comms[c].id_hash)
				pairs[k++] = (struct comm_pair){src->comms[c].id_hash, i};
	}
	if (k)
		qsort(pairs, k, sizeof *pairs, pair_cmp);
	for (size_t i = 1; i < k; i++)
		if (pairs[i].id_hash == pairs[i - 1].id_hash)
			uf_union(parent, pairs[i - 1].source, pairs[i].source);
	free(pairs);
	return 0;
}

static int component_cmp(const void *a, const void *b)
{
	const struct component *p = a, *q = b;
	if (p->first != q->first)
		return p->first < q->first ? -1 : 1;
	return p->root < q->root ? -1 : p->root > q->root;
}

/* The world a record at realtime t falls in: the one whose span holds it,
 * else the latest that started before it, else the first. */
static int world_at(const struct worlds *w, uint64_t t)
{
	int best = 0;
	for (size_t i = 0; i < w->n; i++) {
		if (t >= w->w[i].first_realtime_ns && t <= w->w[i].last_realtime_ns)
			return (int)i;
		if (t >= w->w[i].first_realtime_ns)
			best = (int)i;
	}
	return best;
}

/* The components, ordered by start (in place), made into worlds (see
 * worlds.h): each component's world, the worlds' spans. Returns 0 or
 * -ENOMEM. */
static int make_worlds(struct worlds *w, struct component *comps, size_t ncomps)
{
	if (ncomps)
		qsort(comps, ncomps, sizeof *comps, component_cmp);
	size_t nworlds = 0;
	uint64_t end = 0;
	for (size_t i = 0; i < ncomps; i++) {
		if (!comps[i].has_collectives)
			continue;
		if (!nworlds || comps[i].first > end) {
			nworlds++;
			end = 0;
		}
		comps[i].world = (int)nworlds - 1;
		if (comps[i].last > end)
			end = comps[i].last;
	}
	w->w = nworlds ? calloc(nworlds, sizeof *w->w) : NULL;
	if (nworlds && !w->w)
		return -ENOMEM;
	w->n = nworlds;
	for (size_t i = 0; i < nworlds; i++)
		w->w[i].duplicate_rank = -1;
	for (size_t i = 0; i < ncomps; i++) {
		if (comps[i].world < 0)
			continue;
		struct world *x = &w->w[comps[i].world];
		if (!x->components++ || comps[i].first < x->first_realtime_ns)
			x->first_realtime_ns = comps[i].first;
		if (comps[i].last > x->last_realtime_ns)
			x->last_realtime_ns = comps[i].last;
	}
	for (size_t i = 0; nworlds && i < ncomps; i++)
		if (comps[i].world < 0 && comps[i].first)
			comps[i].world = world_at(w, comps[i].first);
	return 0;
}

/* A rank as one process claims it. */
struct claim {
	int32_t rank;
	uint32_t source;
};

static int claim_cmp(const void *a, const void *b)
{
	const struct claim *p = a, *q = b;
	if (p->rank != q->rank)
		return p->rank < q->rank ? -1 : 1;
	return p->source < q->source ? -1 : p->source > q->source;
}

static int source_cmp(const void *a, const void *b)
{
	const struct claim *p = a, *q = b;
	return p->source < q->source ? -1 : p->source > q->source;
}

/* Ranks claimed twice among a world's processes with collectives. Returns
 * 0 or -ENOMEM. */
static int find_duplicates(const sources_t *layer, struct world *x)
{
	struct claim *c = calloc(x->nsources ? x->nsources : 1, sizeof *c);
	size_t n = 0;
	if (!c)
		return -ENOMEM;
	for (size_t i = 0; i < x->nsources; i++) {
		const struct source *src = sources_find(layer, x->sources[i]);
		if (src && src->collectives && src->rank >= 0)
			c[n++] = (struct claim){src->rank, src->id};
	}
	qsort(c, n, sizeof *c, claim_cmp);
	for (size_t i = 1; i < n; i++) {
		if (c[i].rank != c[i - 1].rank || (i > 1 && c[i - 2].rank == c[i].rank))
			continue;
		if (!x->duplicate_ranks++) { /* the lowest: claims are in rank order */
			x->duplicate_rank = c[i].rank;
			x->duplicate_sources[0] = c[i - 1].source;
			x->duplicate_sources[1] = c[i].source;
		}
	}
	free(c);
	return 0;
}

/* Each world's members, keys, world communicator and duplicates, from the
 * sources' worlds in w->world_of. Returns 0 or -ENOMEM. */
static int fill_members(const sources_t *layer, struct worlds *w, const int32_t *world_of_index)
{
	size_t n = sources_count(layer);
	for (size_t k = 0; k < w->n; k++) {
		struct world *x = &w->w[k];
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			m += world_of_index[i] == (int32_t)k;
		x->sources = calloc(m ? m : 1, sizeof *x->sources);
		x->keys = calloc(m ? m : 1, sizeof *x->keys);
		if (!x->sources || !x->keys)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++) {
			const struct source *src = sources_at(layer, i);
			if (world_of_index[i] != (int32_t)k)
				continue;
			x->sources[x->nsources++] = src->id;
			for (size_t c = 0; src->collectives && c < src->ncomms; c++)
				if (src->comms[c].nranks > x->size) {
					x->size = src->comms[c].nranks;
					x->id = src->comms[c].id_hash;
				}
			uint64_t key = src->collectives ? worlds_source_key(src) : 0;
			size_t j = 0;
			while (j < x->nkeys && x->keys[j] != key)
				j++;
			if (key && j == x->nkeys)
				x->keys[x->nkeys++] = key;
		}
		if (find_duplicates(layer, x) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* The source ids ascending, with their worlds, for worlds_of. */
static int fill_lookup(const sources_t *layer, struct worlds *w, const int32_t *world_of_index)
{
	size_t n = sources_count(layer);
	struct claim *c = calloc(n ? n : 1, sizeof *c);
	w->source_id = calloc(n ? n : 1, sizeof *w->source_id);
	w->world_of = calloc(n ? n : 1, sizeof *w->world_of);
	if (!c || !w->source_id || !w->world_of) {
		free(c);
		return -ENOMEM;
	}
	/* (world, source id) pairs sorted by id: a claim's rank field holds the world */
	for (size_t i = 0; i < n; i++)
		c[i] = (struct claim){world_of_index[i], sources_at(layer, i)->id};
	qsort(c, n, sizeof *c, source_cmp);
	for (size_t i = 0; i < n; i++) {
		w->source_id[i] = c[i].source;
		w->world_of[i] = c[i].rank;
	}
	w->nsources = n;
	free(c);
	return 0;
}

/* Components of the sources with communicators; comp_of[i] their index. */
static int find_components(const sources_t *layer, const size_t *parent, struct component **out, size_t *nout,
			   int32_t *comp_of)
{
	size_t n = sources_count(layer), ncomps = 0;
	struct component *comps = calloc(n ? n : 1, sizeof *comps);
	if (!comps)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct source *src = sources_at(layer, i);
		comp_of[i] = -1;
		if (!src->ncomms)
			continue;
		size_t root = uf_find((size_t *)parent, i), c = 0;
		while (c < ncomps && comps[c].root != root)
			c++;
		if (c == ncomps)
			comps[ncomps++] = (struct component){.root = root, .world = -1};
		comp_of[i] = (int32_t)c;
		uint64_t first = realtime_of(src, src->first_ns), last = realtime_of(src, src->last_ns);
		if (first && (!comps[c].first || first < comps[c].first))
			comps[c].first = first;
		if (last > comps[c].last)
			comps[c].last = last;
		comps[c].has_collectives |= src->collectives > 0;
	}
	*out = comps;
	*nout = ncomps;
	return 0;
}

int worlds_find(const sources_t *layer, struct worlds *out)
{
	memset(out, 0, sizeof *out);
	size_t n = sources_count(layer), ncomps = 0;
	size_t *parent = calloc(n ? n : 1, sizeof *parent);
	int32_t *comp_of = calloc(n ? n : 1, sizeof *comp_of);
	int32_t *world_of = calloc(n ? n : 1, sizeof *world_of);
	struct component *comps = NULL;
	int rc = -ENOMEM;
	if (!parent || !comp_of || !world_of)
		goto out;
	for (size_t i = 0; i < n; i++)
		parent[i] = i;
	if ((rc = join_by_comms(layer, parent)) < 0 ||
	    (rc = find_components(layer, parent, &comps, &ncomps, comp_of)) < 0)
		goto out;
	/* make_worlds sorts the components: remember each source's by root */
	for (size_t i = 0; i < n; i++)
		if (comp_of[i] >= 0)
			comp_of[i] = (int32_t)comps[comp_of[i]].root;
	if ((rc = make_worlds(out, comps, ncomps)) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct source *src = sources_at(layer, i);
		world_of[i] = -1;
		if (comp_of[i] >= 0) {
			for (size_t c = 0; c < ncomps; c++)
				if (comps[c].root == (size_t)comp_of[i])
					world_of[i] = comps[c].world;
		} else if (out->n && src->first_ns) {
			world_of[i] = world_at(out, realtime_of(src, src->first_ns));
		}
	}
	if ((rc = fill_members(layer, out, world_of)) < 0 || (rc = fill_lookup(layer, out, world_of)) < 0)
		goto out;
	rc = 0;
out:
	free(parent);
	free(comp_of);
	free(world_of);
	free(comps);
	if (rc < 0)
		worlds_release(out);
	return rc;
}

int worlds_of(const struct worlds *w, uint32_t source)
{
	size_t lo = 0, hi = w->nsources;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (w->source_id[mid] == source)
			return w->world_of[mid];
		if (w->source_id[mid] < source)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

void worlds_release(struct worlds *w)
{
	for (size_t i = 0; i < w->n; i++) {
		free(w->w[i].sources);
		free(w->w[i].keys);
	}
	free(w->w);
	free(w->source_id);
	free(w->world_of);
	memset(w, 0, sizeof *w);
}
