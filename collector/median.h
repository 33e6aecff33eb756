/*
 * median.h - bounded sample of a stream of values, for medians.
 *
 * The analysis reports medians over steps, but must not grow with the
 * number of steps: each figure keeps a reservoir of at most MEDIAN_SLOTS
 * values (Vitter's algorithm R with a fixed seed, so a report is
 * reproducible). The median is exact while a figure has seen no more values
 * than that, and a uniform-sample estimate after.
 */
#ifndef FSS_COLLECTOR_MEDIAN_H
#define FSS_COLLECTOR_MEDIAN_H

#include <stdint.h>

#define MEDIAN_SLOTS 64

struct median {
	uint64_t seen;		  /* values offered */
	uint64_t rng;		  /* xorshift state, 0 until the first value */
	uint64_t v[MEDIAN_SLOTS]; /* the sample (first min(seen, MEDIAN_SLOTS) slots) */
};

/* median_add - offer one value. */
void median_add(struct median *m, uint64_t value);

/* median_get - the (lower) median of the sample; 0 when nothing was seen. */
uint64_t median_get(const struct median *m);

/*
 * median_reservoir_slot - where the next value of a stream goes in a
 * reservoir of MEDIAN_SLOTS (the algorithm and seed of median_add, which
 * uses it): its slot, or -1 when the value is left out. *seen and *rng are
 * the stream's, both 0 before its first value.
 */
int median_reservoir_slot(uint64_t *seen, uint64_t *rng);

/* median_u64_cmp - the qsort / bsearch order of uint64_t values. */
int median_u64_cmp(const void *a, const void *b);

#endif
