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
};

struct index_stats {
	struct median skew;
	uint64_t matched;
	int32_t vote; /* Boyer-Moore majority candidate */
	uint32_t votes;
};

struct ranks {
	struct pending *slot;
	size_t cap, used;
	struct ranks_rank_stats *rank; /* [nrank] by rank */
	size_t nrank;
	struct index_stats *index; /* [nindex] */
	size_t nindex;
	struct ranks_totals totals;
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
	free(r->slot);
	free(r->rank);
	free(r->index);
	free(r);
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

static struct ranks_rank_stats *rank_stats(ranks_t *r, int32_t rank)
{
	if (rank < 0 || rank >= RANKS_MAX_RANK)
		return NULL;
	void *v = r->rank;
	if (grow_to(&v, &r->nrank, (size_t)rank, sizeof *r->rank) < 0)
		return NULL;
	r->rank = v;
	return &r->rank[rank];
}

static struct index_stats *index_stats(ranks_t *r, int32_t index)
{
	if (index < 0)
		return NULL;
	void *v = r->index;
	if (grow_to(&v, &r->nindex, (size_t)index, sizeof *r->index) < 0)
		return NULL;
	r->index = v;
	return &r->index[index];
}

static int complete(ranks_t *r, const struct pending *p)
{
	uint64_t skew = p->last_ns - p->first_ns;
	r->totals.matched++;
	r->totals.skew_ns += skew;
	if (skew > r->totals.max_skew_ns)
		r->totals.max_skew_ns = skew;
	if (p->last_rank >= 0 && p->last_rank < RANKS_MAX_RANK) { /* unknown ranks have no row */
		struct ranks_rank_stats *rs = rank_stats(r, p->last_rank);
		if (!rs)
			return -ENOMEM;
		rs->last_arrivals++;
		rs->late_ns += p->last_ns - p->second_ns;
	}
	struct index_stats *is = index_stats(r, p->gather_index);
	if (p->gather_index >= 0 && !is)
		return -ENOMEM;
	if (is) {
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
	}
	return 0;
}

int ranks_add(ranks_t *r, uint64_t comm_hash, uint32_t comm_index, int32_t nranks, int32_t rank, uint64_t enter_ns,
	      int32_t gather_index)
{
	struct ranks_rank_stats *rs = rank_stats(r, rank);
	if (rank >= 0 && rank < RANKS_MAX_RANK && !rs)
		return -ENOMEM;
	if (nranks <= 1 || comm_hash == 0)
		return 0;
	if (rs)
		rs->matched++;
	if ((r->used + 1) * 2 > r->cap) {
		if (r->cap >= 2 * RANKS_PENDING_MAX) {
			r->totals.unmatched++;
			return 0;
		}
		if (grow(r) < 0)
			return -ENOMEM;
	}
	size_t mask = r->cap - 1;
	size_t h = key_hash(comm_hash, comm_index) & mask;
	while (r->slot[h].used && (r->slot[h].comm_hash != comm_hash || r->slot[h].comm_index != comm_index))
		h = (h + 1) & mask;
	struct pending *p = &r->slot[h];
	if (!p->used) {
		*p = (struct pending){comm_hash, comm_index, 1, nranks, 0, enter_ns, enter_ns, 0, rank, -1};
		r->used++;
		p->got = 1;
		p->gather_index = gather_index;
		p->second_ns = enter_ns;
	} else {
		p->got++;
		if (gather_index >= 0)
			p->gather_index = gather_index;
		if (enter_ns < p->first_ns)
			p->first_ns = enter_ns;
		if (enter_ns >= p->last_ns) {
			p->second_ns = p->last_ns;
			p->last_ns = enter_ns;
			p->last_rank = rank;
		} else if (enter_ns > p->second_ns || p->got == 2) {
			p->second_ns = enter_ns;
		}
	}
	if (p->got < p->nranks)
		return 0;
	struct pending done = *p;
	slot_delete(r, h);
	return complete(r, &done);
}

struct ranks_rank_stats ranks_rank(const ranks_t *r, int32_t rank)
{
	struct ranks_rank_stats z = {0};
	if (rank < 0 || (size_t)rank >= r->nrank)
		return z;
	return r->rank[rank];
}

struct ranks_index_stats ranks_index(const ranks_t *r, int32_t gather_index)
{
	struct ranks_index_stats s = {0, 0, -1};
	if (gather_index < 0 || (size_t)gather_index >= r->nindex)
		return s;
	const struct index_stats *is = &r->index[gather_index];
	s.matched = is->matched;
	s.skew_median_ns = median_get(&is->skew);
	s.slowest_rank = is->matched ? is->vote : -1;
	return s;
}

void ranks_totals(const ranks_t *r, struct ranks_totals *out)
{
	*out = r->totals;
	out->unmatched += r->used;
}
