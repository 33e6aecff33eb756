/*
 * ranks.c - cross-rank matching of collectives (see ranks.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/median.h"
#include "collector/ranks.h"

struct pending {
	uint64_t comm_hash;
	uint32_t comm_index;
	uint32_t used; /* slot in use */
	int32_t nranks;
	int32_t got;
	uint64_t first_ns;  /* earliest enter */
	uint64_t last_ns;   /* latest enter */
	uint64_t second_ns; /* second latest */
	int32_t last_rank;
	int32_t gather_index;
	uint32_t last_source; /* the process of last_rank */
	int32_t last_has_row; /* last_rank is a rank with a row (>= 0) */
	uint64_t key;         /* the first caller's key */
	uint64_t index_key;   /* the key of the caller that gave gather_index */
};

struct index_stats {
	struct median skew;
	uint64_t matched;
	int32_t vote; /* Boyer-Moore majority candidate */
	uint32_t votes;
};

/* What is kept apart for one key (one world). */
struct part {
	uint64_t key;
	struct ranks_totals totals;
	struct index_stats *index; /* [nindex] */
	size_t nindex;
};

struct ranks {
	struct pending *slot;
	size_t cap, used;
	struct ranks_rank_stats *rank; /* [nrank] by trace source id */
	size_t nrank;
	struct index_stats *index; /* [nindex] */
	size_t nindex;
	struct ranks_totals totals;
	struct part *parts; /* [nparts] */
	size_t nparts;
	/* a view (ranks_view_new): the matcher it reads, and what it answers for */
	const struct ranks *base;
	uint64_t *view_keys;
	size_t nview_keys;
	uint64_t view_index_key;
};

ranks_t *ranks_new(void)
{
	ranks_t *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->cap = 1024;
	r->slot = calloc(r->cap, sizeof *r->slot);
	if (!r->slot) {
		free(r);
		return NULL;
	}
	return r;
}

void ranks_free(ranks_t *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nparts; i++)
		free(r->parts[i].index);
	free(r->parts);
	free(r->view_keys);
	free(r->slot);
	free(r->rank);
	free(r->index);
	free(r);
}

ranks_t *ranks_view_new(const ranks_t *base, const uint64_t *keys, size_t nkeys, uint64_t index_key)
{
	ranks_t *v = calloc(1, sizeof *v);
	if (!v)
		return NULL;
	v->view_keys = calloc(nkeys ? nkeys : 1, sizeof *v->view_keys);
	if (!v->view_keys) {
		free(v);
		return NULL;
	}
	memcpy(v->view_keys, keys, nkeys * sizeof *keys);
	v->nview_keys = nkeys;
	v->view_index_key = index_key;
	v->base = base;
	return v;
}

static size_t key_hash(uint64_t h, uint32_t i)
{
	uint64_t k = h ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (size_t)k;
}

static int grow(ranks_t *r)
{
	size_t cap = r->cap * 2;
	struct pending *s = calloc(cap, sizeof *s);
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < r->cap; i++) {
		if (!r->slot[i].used)
			continue;
		size_t h = key_hash(r->slot[i].comm_hash, r->slot[i].comm_index) & (cap - 1);
		while (s[h].used)
			h = (h + 1) & (cap - 1);
		s[h] = r->slot[i];
	}
	free(r->slot);
	r->slot = s;
	r->cap = cap;
	return 0;
}

/* Linear probing delete: shift later entries of the cluster back. */
static void slot_delete(ranks_t *r, size_t i)
{
	size_t mask = r->cap - 1;
	size_t j = i;
	r->slot[i].used = 0;
	for (;;) {
		j = (j + 1) & mask;
		if (!r->slot[j].used)
			break;
		size_t home = key_hash(r->slot[j].comm_hash, r->slot[j].comm_index) & mask;
		/* can the entry at j move to i? (home not in (i, j]) */
		int move = i <= j ? (home <= i || home > j) : (home <= i && home > j);
		if (move) {
			r->slot[i] = r->slot[j];
			r->slot[j].used = 0;
			i = j;
		}
	}
	r->used--;
}

/* Grow the zero-filled array *v of *n elements of elem bytes to hold index
 * i. Returns 0 or -ENOMEM (the array as it was). */
static int grow_to(void **v, size_t *n, size_t i, size_t elem)
{
	if (i < *n)
		return 0;
	size_t want = i + 1;
	char *p = realloc(*v, want * elem);
	if (!p)
		return -ENOMEM;
	memset(p + *n * elem, 0, (want - *n) * elem);
	*v = p;
	*n = want;
	return 0;
}

/* The row of the process with trace source `source`; NULL past the bound
 * or on ENOMEM. */
static struct ranks_rank_stats *rank_stats(ranks_t *r, uint32_t source)
{
	if (source >= (uint32_t)RANKS_MAX_RANK)
		return NULL;
	void *v = r->rank;
	if (grow_to(&v, &r->nrank, source, sizeof *r->rank) < 0)
		return NULL;
	r->rank = v;
	return &r->rank[source];
}

static struct index_stats *index_stats(struct index_stats **v, size_t *n, int32_t index)
{
	if (index < 0)
		return NULL;
	void *p = *v;
	if (grow_to(&p, n, (size_t)index, sizeof **v) < 0)
		return NULL;
	*v = p;
	return &(*v)[index];
}

/* The part of key (made on first sight); NULL for key 0, past
 * RANKS_KEYS_MAX, or on ENOMEM (then *nomem is set). */
static struct part *part_of(ranks_t *r, uint64_t key, int *nomem)
{
	if (!key)
		return NULL;
	for (size_t i = 0; i < r->nparts; i++)
		if (r->parts[i].key == key)
			return &r->parts[i];
	if (r->nparts >= RANKS_KEYS_MAX)
		return NULL;
	struct part *p = realloc(r->parts, (r->nparts + 1) * sizeof *p);
	if (!p) {
		*nomem = 1;
		return NULL;
	}
	r->parts = p;
	p = &r->parts[r->nparts++];
	memset(p, 0, sizeof *p);
	p->key = key;
	return p;
}

static const struct part *part_find(const ranks_t *r, uint64_t key)
{
	for (size_t i = 0; key && i < r->nparts; i++)
		if (r->parts[i].key == key)
			return &r->parts[i];
	return NULL;
}

static void totals_add(struct ranks_totals *t, uint64_t skew)
{
	t->matched++;
	t->skew_ns += skew;
	if (skew > t->max_skew_ns)
		t->max_skew_ns = skew;
}

static int index_add(struct index_stats *is, int want, const struct pending *p, uint64_t skew)
{
	if (want && !is)
		return -ENOMEM;
	if (!is)
		return 0;
	median_add(&is->skew, skew);
	is->matched++;
	if (is->votes == 0) {
		is->vote = p->last_rank;
		is->votes = 1;
	} else if (is->vote == p->last_rank) {
		is->votes++;
	} else {
		is->votes--;
	}
	return 0;
}

static int complete(ranks_t *r, const struct pending *p)
{
	uint64_t skew = p->last_ns - p->first_ns;
	int nomem = 0;
	totals_add(&r->totals, skew);
	struct part *pt = part_of(r, p->key, &nomem);
	if (pt)
		totals_add(&pt->totals, skew);
	if (p->last_has_row) { /* unknown ranks have no row */
		struct ranks_rank_stats *rs = rank_stats(r, p->last_source);
		if (rs) {
			rs->last_arrivals++;
			rs->late_ns += p->last_ns - p->second_ns;
		} else if (p->last_source < (uint32_t)RANKS_MAX_RANK) {
			return -ENOMEM;
		}
	}
	int want = p->gather_index >= 0;
	if (index_add(index_stats(&r->index, &r->nindex, p->gather_index), want, p, skew) < 0)
		return -ENOMEM;
	struct part *ix = want ? part_of(r, p->index_key, &nomem) : NULL;
	if (ix && index_add(index_stats(&ix->index, &ix->nindex, p->gather_index), 1, p, skew) < 0)
		return -ENOMEM;
	return nomem ? -ENOMEM : 0;
}

int ranks_add(ranks_t *r, const struct ranks_call *c)
{
	if (r->base)
		return -EINVAL;
	int has_row = c->rank >= 0 && c->rank < RANKS_MAX_RANK;
	struct ranks_rank_stats *rs = has_row ? rank_stats(r, c->source) : NULL;
	if (has_row && !rs && c->source < (uint32_t)RANKS_MAX_RANK)
		return -ENOMEM;
	if (c->nranks <= 1 || c->comm_hash == 0)
		return 0;
	if (rs)
		rs->matched++;
	if ((r->used + 1) * 2 > r->cap) {
		if (r->cap >= 2 * RANKS_PENDING_MAX) {
			r->totals.unmatched++;
			int nomem = 0;
			struct part *pt = part_of(r, c->key, &nomem);
			if (pt)
				pt->totals.unmatched++;
			return nomem ? -ENOMEM : 0;
		}
		if (grow(r) < 0)
			return -ENOMEM;
	}
	size_t mask = r->cap - 1;
	size_t h = key_hash(c->comm_hash, c->comm_index) & mask;
	while (r->slot[h].used && (r->slot[h].comm_hash != c->comm_hash || r->slot[h].comm_index != c->comm_index))
		h = (h + 1) & mask;
	struct pending *p = &r->slot[h];
	if (!p->used) {
		*p = (struct pending){
		    .comm_hash = c->comm_hash,
		    .comm_index = c->comm_index,
		    .used = 1,
		    .nranks = c->nranks,
		    .got = 1,
		    .first_ns = c->enter_ns,
		    .last_ns = c->enter_ns,
		    .second_ns = c->enter_ns,
		    .last_rank = c->rank,
		    .gather_index = c->gather_index,
		    .last_source = c->source,
		    .last_has_row = has_row,
		    .key = c->key,
		    .index_key = c->key,
		};
		r->used++;
	} else {
		p->got++;
		if (c->gather_index >= 0) {
			p->gather_index = c->gather_index;
			p->index_key = c->key;
		}
		if (c->enter_ns < p->first_ns)
			p->first_ns = c->enter_ns;
		if (c->enter_ns >= p->last_ns) {
			p->second_ns = p->last_ns;
			p->last_ns = c->enter_ns;
			p->last_rank = c->rank;
			p->last_source = c->source;
			p->last_has_row = has_row;
		} else if (c->enter_ns > p->second_ns || p->got == 2) {
			p->second_ns = c->enter_ns;
		}
	}
	if (p->got < p->nranks)
		return 0;
	struct pending done = *p;
	slot_delete(r, h);
	return complete(r, &done);
}

struct ranks_rank_stats ranks_rank(const ranks_t *r, uint32_t source)
{
	struct ranks_rank_stats z = {0};
	if (r->base)
		r = r->base;
	if (source >= r->nrank)
		return z;
	return r->rank[source];
}

static struct ranks_index_stats index_get(const struct index_stats *v, size_t n, int32_t gather_index)
{
	struct ranks_index_stats s = {0, 0, -1};
	if (gather_index < 0 || (size_t)gather_index >= n)
		return s;
	const struct index_stats *is = &v[gather_index];
	s.matched = is->matched;
	s.skew_median_ns = median_get(&is->skew);
	s.slowest_rank = is->matched ? is->vote : -1;
	return s;
}

struct ranks_index_stats ranks_index(const ranks_t *r, int32_t gather_index)
{
	if (!r->base)
		return index_get(r->index, r->nindex, gather_index);
	const struct part *p = part_find(r->base, r->view_index_key);
	return p ? index_get(p->index, p->nindex, gather_index) : index_get(NULL, 0, -1);
}

/* Is key one of the view's? */
static int view_has(const ranks_t *v, uint64_t key)
{
	for (size_t i = 0; i < v->nview_keys; i++)
		if (v->view_keys[i] == key)
			return 1;
	return 0;
}

void ranks_totals(const ranks_t *r, struct ranks_totals *out)
{
	if (!r->base) {
		*out = r->totals;
		out->unmatched += r->used;
		return;
	}
	memset(out, 0, sizeof *out);
	const ranks_t *b = r->base;
	for (size_t i = 0; i < b->nparts; i++) {
		const struct ranks_totals *t = &b->parts[i].totals;
		if (!view_has(r, b->parts[i].key))
			continue;
		out->matched += t->matched;
		out->skew_ns += t->skew_ns;
		out->unmatched += t->unmatched;
		if (t->max_skew_ns > out->max_skew_ns)
			out->max_skew_ns = t->max_skew_ns;
	}
	for (size_t i = 0; i < b->cap; i++)
		out->unmatched += b->slot[i].used && view_has(r, b->slot[i].key);
}
