/*
 * median.c - bounded reservoir for medians (see median.h).
 */
#include <stdlib.h>
#include <string.h>

#include "collector/median.h"

int median_reservoir_slot(uint64_t *seen, uint64_t *rng)
{
	if (*seen == 0)
		*rng = 0x9e3779b97f4a7c15ull;
	if (*seen < MEDIAN_SLOTS)
		return (int)(*seen)++;
	(*seen)++;
	uint64_t x = *rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*rng = x;
	uint64_t j = x % *seen;
	return j < MEDIAN_SLOTS ? (int)j : -1;
}

void median_add(struct median *m, uint64_t value)
{
	int slot = median_reservoir_slot(&m->seen, &m->rng);
	if (slot >= 0)
		m->v[slot] = value;
}

int median_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

uint64_t median_get(const struct median *m)
{
	unsigned n = m->seen < MEDIAN_SLOTS ? (unsigned)m->seen : MEDIAN_SLOTS;
	if (n == 0)
		return 0;
	uint64_t tmp[MEDIAN_SLOTS];
	memcpy(tmp, m->v, n * sizeof tmp[0]);
	qsort(tmp, n, sizeof tmp[0], median_u64_cmp);
	return tmp[(n - 1) / 2];
}
