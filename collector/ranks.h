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

/*
 * ranks_add - rank `rank` entered collective number comm_index of the
 * communicator comm_hash (nranks ranks) at enter_ns (a clock shared by the
 * ranks). gather_index >= 0 attributes it to that index of the headline
 * step's gathers (pass it from the headline rank only). Returns 0 or
 * -ENOMEM.
 */
int ranks_add(ranks_t *r, uint64_t comm_hash, uint32_t comm_index, int32_t nranks, int32_t rank, uint64_t enter_ns,
	      int32_t gather_index);

/* ranks_rank - totals of a rank (zeros for one never matched). */
struct ranks_rank_stats ranks_rank(const ranks_t *r, int32_t rank);

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

#endif
