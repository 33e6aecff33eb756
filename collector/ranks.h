/*
 * ranks.h - the same collective on every rank: skew and the slowest rank.
 *
 * Every rank of a communicator issues its collectives in the same order, so
 * the i-th call on a communicator (known across ranks by its id hash) is the
 * same collective everywhere. For each one the ranks' host enter times (on
 * one clock) give the skew (last - first) and the rank the others waited for
 * (the last to enter). A collective is matched once every rank of its
 * communicator has reported it; the table of collectives waiting for ranks
 * is bounded (RANKS_PENDING_MAX): beyond it, new ones are not matched.
 * Per-rank rows are per process, and totals per key (a world's), so that
 * a result can be built for each world of a restarted job (ranks_view_new).
 */
#ifndef FSS_COLLECTOR_RANKS_H
#define FSS_COLLECTOR_RANKS_H

#include <stddef.h>
#include <stdint.h>

#define RANKS_PENDING_MAX (1u << 18)
/* Ranks at or above this get no per-rank row (a damaged record). */
#define RANKS_MAX_RANK (1 << 20)

typedef struct ranks ranks_t;

/* Per-rank totals. */
struct ranks_rank_stats {
	uint64_t matched;       /* collectives of this rank that were matched */
	uint64_t last_arrivals; /* of them, entered last */
	uint64_t late_ns;       /* sum of its lead over the second-to-last rank when last */
};

/* Per gather index totals. */
struct ranks_index_stats {
	uint64_t matched;
	uint64_t skew_median_ns; /* median skew */
	int32_t slowest_rank;    /* majority vote of the last rank; -1 none */
};

/* ranks_new - an empty matcher. NULL on ENOMEM. */
ranks_t *ranks_new(void);
void ranks_free(ranks_t *r);

/* One call of a rank, as the matcher takes it. */
struct ranks_call {
	uint64_t key;         /* worlds_source_key of the caller (collector/worlds.h): totals and gather
	                         indices are kept apart per key, so that two worlds never mix */
	uint64_t comm_hash;   /* the communicator's id hash (the same on its every rank) */
	uint32_t comm_index;  /* the call's number on it */
	int32_t nranks;       /* ranks of the communicator */
	int32_t rank;         /* the caller's rank (-1 unknown: no per-rank row) */
	uint32_t source;      /* the caller's trace source: per-rank rows are per process */
	uint64_t enter_ns;    /* when it entered, on a clock shared by the ranks */
	int32_t gather_index; /* >= 0: that index of the headline step's gathers (from the headline rank only) */
};

/*
 * ranks_add - a rank entered a collective. Returns 0 or -ENOMEM.
 */
int ranks_add(ranks_t *r, const struct ranks_call *call);

/* ranks_rank - totals of the process with trace source `source` (zeros for
 * one never matched, or without a rank): two processes that claim the same
 * rank (of two worlds) never share a row. */
struct ranks_rank_stats ranks_rank(const ranks_t *r, uint32_t source);

/* ranks_index - totals of a gather index. */
struct ranks_index_stats ranks_index(const ranks_t *r, int32_t gather_index);

/* Totals over all matched collectives. */
struct ranks_totals {
	uint64_t matched;
	uint64_t skew_ns;     /* sum of skews */
	uint64_t max_skew_ns;
	uint64_t unmatched;   /* dropped for want of room, or never completed (so far) */
};
void ranks_totals(const ranks_t *r, struct ranks_totals *out);

/* Keys kept apart (beyond: counted in the whole only). */
#define RANKS_KEYS_MAX 64

/*
 * ranks_view_new - a read-only matcher over r (borrowed: it must outlive the
 * view) that answers for one world: ranks_totals over the collectives of
 * the nkeys keys (keys copied), ranks_index for those the headline rank of
 * key index_key registered, ranks_rank as r. Released with ranks_free;
 * ranks_add on it is -EINVAL. NULL on ENOMEM.
 */
ranks_t *ranks_view_new(const ranks_t *r, const uint64_t *keys, size_t nkeys, uint64_t index_key);

#endif
