/*
 * merge_align.h - the median both the first pass and the alignment of a
 * merge take (merge_align itself is in merge.h: the unit tests call it).
 */
#ifndef FSS_COLLECTOR_MERGE_ALIGN_H
#define FSS_COLLECTOR_MERGE_ALIGN_H

#include <stddef.h>
#include <stdint.h>

/* merge_median_i64 - the median of v[0..n) (sorts v); the lower middle for
 * even n, 0 for none. */
int64_t merge_median_i64(int64_t *v, size_t n);

#endif
