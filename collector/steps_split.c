/*
 * steps_split.c - the events the period rests on, and the steps one period
 * holds (see steps_split.h).
 */
#include <stdlib.h>
#include <string.h>

#include "collector/median.h"
#include "collector/steps_split.h"
#include "common/record.h"

#define KINDS_MIN_MATCH 0.90
/* Shifts tried on a class's own sizes: a class repeats within a step or a
 * few, far below this many of its events. */
#define KINDS_MAX_SHIFT 4096u

/*
 * Does the sequence of sizes v[0..n) repeat? Some shift q makes 90% of its
 * later half (at least one shift's worth of comparisons) equal to the size
 * q later, as the period search itself judges a sequence.
 */
static int sizes_repeat(const uint64_t *v, size_t n)
{
	size_t qmax = n / 2 < KINDS_MAX_SHIFT ? n / 2 : KINDS_MAX_SHIFT;
	for (size_t q = 1; q <= qmax; q++) {
		size_t lo = n / 2;
		if (n - q <= lo + q / 2)
			lo = n >= 2 * q ? n - 2 * q : 0;
		size_t cnt = n - q - lo, eq = 0;
		for (size_t i = lo; i < n - q; i++)
			eq += v[i] == v[i + q];
		if (cnt && (double)eq >= KINDS_MIN_MATCH * (double)cnt)
			return 1;
	}
	return 0;
}

struct class_at {
	uint64_t cls;
	size_t at;
};

static int class_at_cmp(const void *a, const void *b)
{
	const struct class_at *x = a, *y = b;
	if (x->cls != y->cls)
		return x->cls < y->cls ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

size_t steps_varying_classes(const uint64_t *cls, const uint64_t *sig, size_t n, uint64_t *out, size_t max)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		m += cls[i] != 0;
	if (m < STEPS_VARY_MIN_EVENTS)
		return 0;
	struct class_at *v = malloc(m * sizeof *v);
	uint64_t *run = malloc(m * sizeof *run);
	if (!v || !run) { /* no memory to judge: the search reads every event, as it can */
		free(v);
		free(run);
		return 0;
	}
	m = 0;
	for (size_t i = 0; i < n; i++)
		if (cls[i])
			v[m++] = (struct class_at){cls[i], i};
	qsort(v, m, sizeof *v, class_at_cmp);
	size_t nout = 0, left = 0;
	for (size_t a = 0; a < m;) {
		size_t b = a, late = 0;
		while (b < m && v[b].cls == v[a].cls)
			late += v[b++].at >= n / 2;
		if (late >= STEPS_VARY_MIN_EVENTS && nout < max) {
			for (size_t k = a; k < b; k++)
				run[k - a] = sig[v[k].at];
			if (!sizes_repeat(run, b - a)) {
				out[nout++] = v[a].cls;
				left += b - a;
			}
		}
		a = b;
	}
	free(v);
	free(run);
	return 2 * left >= n ? 0 : nout;
}

/* Occurrences of x in the sorted s[0..n). */
static size_t count_in(const uint64_t *s, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t k = 0;
	while (lo + k < n && s[lo + k] == x)
		k++;
	return k;
}

/* The first AllGather after position i of the cyclic ops[0..p), or p. */
static size_t next_gather(const uint8_t *ops, size_t p, size_t i)
{
	for (size_t d = 1; d < p; d++)
		if (ops[(i + d) % p] == FSS_OP_ALLGATHER)
			return (i + d) % p;
	return p;
}

static int size_cmp(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * Is every step of the period the step S (the shortest), some of them with
 * a burst before it that reduces nothing, gathers whole parameters (a
 * quarter of S's gathered bytes at least) and issues nothing S issues (a
 * weight sync gathers each parameter, in the master weights' dtype; S's
 * forward gathers units)? seg[i] is where the i-th starts in the window
 * (seg[k] its end). Returns the index of S's first plain occurrence, or k.
 */
static size_t one_step_and_bursts(const uint64_t *sig, const uint8_t *ops, const uint64_t *bytes, const size_t *seg,
				  size_t k)
{
	size_t si = 0;
	for (size_t i = 1; i < k; i++)
		if (seg[i + 1] - seg[i] < seg[si + 1] - seg[si])
			si = i;
	size_t len = seg[si + 1] - seg[si];
	uint64_t *in_step = malloc(len * sizeof *in_step);
	if (!in_step)
		return k;
	memcpy(in_step, sig + seg[si], len * sizeof *in_step);
	qsort(in_step, len, sizeof *in_step, median_u64_cmp);
	uint64_t gathered = 0;
	for (size_t j = seg[si]; j < seg[si + 1]; j++)
		gathered += ops[j] == FSS_OP_ALLGATHER ? bytes[j] : 0;
	size_t found = k; /* S once a burst is seen, k again on any misfit */
	for (size_t i = 0; i < k; i++) {
		size_t z = seg[i + 1] - seg[i] - len;
		if (memcmp(sig + seg[i] + z, sig + seg[si], len * sizeof *sig) != 0)
			goto none;
		if (z == 0)
			continue;
		uint64_t burst = 0;
		for (size_t j = seg[i]; j < seg[i] + z; j++) {
			if (ops[j] == FSS_OP_REDUCESCATTER || ops[j] == FSS_OP_ALLREDUCE ||
			    count_in(in_step, len, sig[j]) > 0)
				goto none;
			burst += ops[j] == FSS_OP_ALLGATHER ? bytes[j] : 0;
		}
		if (gathered == 0 || 4 * burst < gathered)
			goto none;
		found = si;
	}
	free(in_step);
	return found;
none:
	free(in_step);
	return k;
}

/* Kinds of the steps seg[0..k]: equal steps share one; the kind with the
 * most events is 0 (the earlier on ties). */
static void name_kinds(const uint64_t *sig, const size_t *seg, size_t k, struct steps_split *out)
{
	size_t rep[STEPS_VARIANTS_MAX], nk = 0;
	uint32_t raw[STEPS_VARIANTS_MAX];
	for (size_t i = 0; i < k; i++) {
		size_t len = seg[i + 1] - seg[i], j = 0;
		for (; j < nk; j++)
			if (seg[rep[j] + 1] - seg[rep[j]] == len &&
			    memcmp(sig + seg[rep[j]], sig + seg[i], len * sizeof *sig) == 0)
				break;
		if (j == nk)
			rep[nk++] = i;
		raw[i] = (uint32_t)j;
	}
	uint32_t rank[STEPS_VARIANTS_MAX];
	for (size_t j = 0; j < nk; j++) {
		size_t len = seg[rep[j] + 1] - seg[rep[j]];
		rank[j] = 0;
		for (size_t o = 0; o < nk; o++) {
			size_t lo = seg[rep[o] + 1] - seg[rep[o]];
			rank[j] += lo > len || (lo == len && o < j);
		}
	}
	for (size_t i = 0; i < k; i++)
		out->kind[i] = rank[raw[i]];
	out->nkinds = nk;
}

void steps_split_period(const uint64_t *sig, const uint8_t *ops, const uint64_t *bytes, size_t n, size_t p,
			size_t first, struct steps_split *out)
{
	memset(out, 0, sizeof *out);
	out->period = p;
	out->first = first;
	out->nsub = 1;
	out->off[1] = p;
	out->nkinds = 1;
	if (p < 2 || first + p > n)
		return;
	const uint64_t *t = sig + first;
	const uint8_t *to = ops + first;
	uint64_t *sorted = malloc(p * sizeof *sorted);
	if (!sorted)
		return; /* one step per period, as without the split */
	memcpy(sorted, t, p * sizeof *sorted);
	qsort(sorted, p, sizeof *sorted, median_u64_cmp);
	size_t rarest = p;
	for (size_t i = 0; i < p;) {
		size_t k = count_in(sorted, p, sorted[i]);
		rarest = k < rarest ? k : rarest;
		i += k;
	}
	/* the rarest ReduceScatter, the last of them on ties */
	size_t r = p, rk = p + 1;
	for (size_t i = 0; i < p; i++) {
		if (to[i] != FSS_OP_REDUCESCATTER)
			continue;
		size_t k = count_in(sorted, p, t[i]);
		if (k <= rk) {
			rk = k;
			r = i;
		}
	}
	free(sorted);
	if (r == p || rk < 2 || rk > STEPS_VARIANTS_MAX)
		return;
	size_t start[STEPS_VARIANTS_MAX], k = 0;
	for (size_t i = 0; i < p; i++) {
		if (t[i] != t[r])
			continue;
		size_t s = next_gather(to, p, i);
		if (s == p)
			return;
		start[k++] = s;
	}
	qsort(start, k, sizeof start[0], size_cmp);
	for (size_t i = 1; i < k; i++)
		if (start[i] == start[i - 1])
			return;
	/* the period read from its first step's start, where the window has it */
	size_t at = first + start[0];
	if (at + p > n) {
		if (at < p)
			return;
		at -= p;
	}
	for (size_t i = 0; i < p; i++)
		if (sig[at + i] != t[(start[0] + i) % p])
			return;
	size_t seg[STEPS_VARIANTS_MAX + 1] = {0};
	for (size_t i = 0; i < k; i++)
		seg[i] = at + start[i] - start[0];
	seg[k] = at + p;
	size_t si = one_step_and_bursts(sig, ops, bytes, seg, k);
	if (si < k) {
		size_t len = seg[si + 1] - seg[si];
		size_t s = 0;
		while (memcmp(sig + s, sig + seg[si], len * sizeof *sig) != 0)
			s++; /* ends at seg[si] at the latest */
		out->period = len;
		out->first = s;
		out->off[1] = len;
		out->outside = 1;
		return;
	}
	if (rk != rarest)
		return; /* something happens once a period: the period is one step */
	out->first = at;
	out->nsub = k;
	for (size_t i = 0; i <= k; i++)
		out->off[i] = seg[i] - at;
	name_kinds(sig, seg, k, out);
}
