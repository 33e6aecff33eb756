/*
 * arith.h - integer arithmetic on counts that come from outside.
 *
 * Counters read from a trace (drops, records) are the traced process's word:
 * summing them must not wrap a damaged or hostile value to a small number
 * that reads as "nothing lost".
 */
#ifndef FSS_COMMON_ARITH_H
#define FSS_COMMON_ARITH_H

#include <stdint.h>

/* u64_add_sat - a + b, or UINT64_MAX when that does not fit. */
static inline uint64_t u64_add_sat(uint64_t a, uint64_t b)
{
	return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

#endif
