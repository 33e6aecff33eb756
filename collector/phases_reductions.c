/*
 * phases_reductions.c - the reductions as evidence of a parse: which unit a
 * ReduceScatter reduces, by bytes per parameter, and whether they fit the
 * units at all (see phases.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/analysis.h"
#include "collector/phases.h"
#include "common/record.h"

/* The gathered bytes of an AllGather event (what every rank receives). */
static uint64_t gathered_bytes(const struct phases_event *e)
{
	return e->bytes * (uint64_t)(e->nranks > 0 ? e->nranks : 1);
}

int phases_reduces(const struct phases_event *ag, const struct phases_event *rs)
{
	uint64_t gb = gathered_bytes(ag), e = rs->elements;
	size_t d = record_dtype_bytes(ag->dtype);
	if (e == 0)
		return 0;
	if (d == 0)
		return ag->elements == e;
	if (ag->dtype == FSS_DTYPE_UINT8 || ag->dtype == FSS_DTYPE_INT8)
		return gb >= e && gb <= 2 * e;
	return gb == e * d;
}

uint64_t phases_unit_capacity(const struct phases_event *ag)
{
	size_t d = record_dtype_bytes(ag->dtype);
	if (d == 0)
		return ag->elements;
	return gathered_bytes(ag) / d;
}

static int u64_desc(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a > b ? -1 : a < b;
}

int phases_reductions_fit(const struct phases_event *ev, size_t n, const struct phases_gather *g,
			  const struct phases_result *res)
{
	uint32_t u = res->units;
	uint64_t *cap = malloc((u ? u : 1) * sizeof *cap), *red = malloc((n ? n : 1) * sizeof *red);
	if (!cap || !red) {
		free(cap);
		free(red);
		return -ENOMEM;
	}
	int fit = 1;
	for (int32_t c = 0; c < (int32_t)res->cycles && fit; c++) {
		size_t nu = 0, nr = 0, k = 0;
		int32_t cur = -1;
		for (size_t i = 0; i < n; i++) {
			if (ev[i].op == FSS_OP_ALLGATHER) {
				const struct phases_gather *p = &g[k++];
				if (p->cycle >= 0)
					cur = p->cycle;
				if (p->cycle >= 0 && p->cycle <= c && p->phase == ANALYSIS_PHASE_FORWARD && p->unit >= 0 &&
				    (uint32_t)p->unit < u) {
					cap[p->unit] = phases_unit_capacity(&ev[i]);
					nu = nu > (size_t)p->unit + 1 ? nu : (size_t)p->unit + 1;
				}
			} else if (ev[i].op == FSS_OP_REDUCESCATTER && cur == c) {
				red[nr++] = ev[i].elements;
			}
		}
		qsort(cap, nu, sizeof *cap, u64_desc);
		qsort(red, nr, sizeof *red, u64_desc);
		for (size_t j = 0; j < nr && fit; j++)
			fit = j < nu && red[j] <= cap[j];
	}
	free(cap);
	free(red);
	return fit;
}

int phases_match_reductions(const struct phases_event *ev, size_t n, const struct phases_gather *g, int32_t cycle,
			    uint32_t units, int32_t *rs_unit, int *mirrored)
{
	size_t *unit_ev = malloc((units ? units : 1) * sizeof *unit_ev);
	uint8_t *taken = calloc(units ? units : 1, 1);
	if (!unit_ev || !taken) {
		free(unit_ev);
		free(taken);
		return -ENOMEM;
	}
	for (uint32_t j = 0; j < units; j++)
		unit_ev[j] = SIZE_MAX;
	int32_t cur = -1;
	size_t k = 0;
	int matched = 0, in_order = 1;
	int64_t next = (int64_t)units - 1, last = (int64_t)units;
	for (size_t i = 0; i < n; i++) {
		rs_unit[i] = -1;
		if (ev[i].op == FSS_OP_ALLGATHER) {
			const struct phases_gather *p = &g[k++];
			if (p->cycle >= 0)
				cur = p->cycle;
			/* the units as the latest forward at or before the cycle gathered
			 * them (a cycle may gather nothing in forward) */
			if (p->cycle >= 0 && p->cycle <= cycle && p->phase == ANALYSIS_PHASE_FORWARD && p->unit >= 0 &&
			    (uint32_t)p->unit < units)
				unit_ev[p->unit] = i;
			continue;
		}
		if (ev[i].op != FSS_OP_REDUCESCATTER || cur != cycle)
			continue;
		int64_t hit = -1;
		for (int64_t j = next; j >= 0 && hit < 0; j--)
			if (!taken[j] && unit_ev[j] != SIZE_MAX && phases_reduces(&ev[unit_ev[j]], &ev[i]))
				hit = j;
		for (int64_t j = (int64_t)units - 1; j > next && hit < 0; j--)
			if (!taken[j] && unit_ev[j] != SIZE_MAX && phases_reduces(&ev[unit_ev[j]], &ev[i]))
				hit = j;
		if (hit < 0)
			continue;
		taken[hit] = 1;
		rs_unit[i] = (int32_t)hit;
		matched++;
		in_order &= hit < last;
		last = hit;
		next = hit - 1;
	}
	if (mirrored)
		*mirrored = matched > 0 && in_order;
	free(unit_ev);
	free(taken);
	return matched;
}

