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
	uint64_t seen;               /* values offered */
	uint64_t rng;                /* xorshift state, 0 until the first value */
	uint64_t v[MEDIAN_SLOTS];    /* the sample (first min(seen, MEDIAN_SLOTS) slots) */
};

/* median_add - offer one value. */
void median_add(struct median *m, uint64_t value);

/* median_get - the (lower) median of the sample; 0 when nothing was seen. */
uint64_t median_get(const struct median *m);

/* median_min, median_max - of the sample; 0 when nothing was seen. */
uint64_t median_min(const struct median *m);
uint64_t median_max(const struct median *m);

#endif
