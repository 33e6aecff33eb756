/*
 * median.c - bounded reservoir for medians (see median.h).
 */
#include <stdlib.h>
#include <string.h>

#include "collector/median.h"

static uint64_t median_rand(struct median *m)
{
	uint64_t x = m->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	m->rng = x;
	return x;
}

void median_add(struct median *m, uint64_t value)
{
	if (m->seen == 0)
		m->rng = 0x9e3779b97f4a7c15ull;
	if (m->seen < MEDIAN_SLOTS) {
		m->v[m->seen++] = value;
		return;
	}
	m->seen++;
	uint64_t j = median_rand(m) % m->seen;
	if (j < MEDIAN_SLOTS)
		m->v[j] = value;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static unsigned median_count(const struct median *m)
{
	return m->seen < MEDIAN_SLOTS ? (unsigned)m->seen : MEDIAN_SLOTS;
}

uint64_t median_get(const struct median *m)
{
	unsigned n = median_count(m);
	if (n == 0)
		return 0;
	uint64_t tmp[MEDIAN_SLOTS];
	memcpy(tmp, m->v, n * sizeof tmp[0]);
	qsort(tmp, n, sizeof tmp[0], u64_cmp);
	return tmp[(n - 1) / 2];
}

uint64_t median_min(const struct median *m)
{
	unsigned n = median_count(m);
	uint64_t r = n ? m->v[0] : 0;
	for (unsigned i = 1; i < n; i++)
		if (m->v[i] < r)
			r = m->v[i];
	return r;
}

uint64_t median_max(const struct median *m)
{
	unsigned n = median_count(m);
	uint64_t r = 0;
	for (unsigned i = 0; i < n; i++)
		if (m->v[i] > r)
			r = m->v[i];
	return r;
}
