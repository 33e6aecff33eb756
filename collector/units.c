/*
 * units.c - tandem repeats in the forward gathers (see units.h).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "collector/units.h"

/* Is candidate c better than best? More coverage, then a smaller motif,
 * then an earlier start. */
static int repeat_better(const struct units_repeat *c, const struct units_repeat *best)
{
	if (c->covered != best->covered)
		return c->covered > best->covered;
	if (c->motif != best->motif)
		return c->motif < best->motif;
	return c->start < best->start;
}

/* Offer the repeat that a maximal run keys[s..s+m) with keys[i] == keys[i+k]
 * makes: the region [s, s + m + k) holds (m + k) / k copies of the motif. */
static void offer(struct units_repeat *best, int *found, uint32_t s, uint32_t m, uint32_t k, int layers)
{
	uint32_t copies = (m + k) / k;
	if (copies < 2)
		return;
	if (layers > 0) {
		if (copies < (uint32_t)layers)
			return;
		copies = (uint32_t)layers; /* a longer run holds exactly L copies too */
	}
	struct units_repeat c = {s, k, copies, k * copies};
	if (!*found || repeat_better(&c, best)) {
		*best = c;
		*found = 1;
	}
}

static int search(const uint64_t *keys, size_t n, int layers, struct units_repeat *best)
{
	int found = 0;
	for (size_t k = 1; k <= n / 2; k++) {
		size_t run = 0;
		for (size_t i = 0; i + k < n; i++) {
			if (keys[i] == keys[i + k]) {
				run++;
				continue;
			}
			if (run)
				offer(best, &found, (uint32_t)(i - run), (uint32_t)run, (uint32_t)k, layers);
			run = 0;
		}
		if (run)
			offer(best, &found, (uint32_t)(n - k - run), (uint32_t)run, (uint32_t)k, layers);
	}
	return found;
}

int units_find_repeat(const uint64_t *keys, size_t n, int layers, struct units_repeat *out)
{
	memset(out, 0, sizeof *out);
	if (n == 0)
		return layers > 0 ? -ENOENT : 0;
	if (layers == 1) {
		/* one copy: everything after the root */
		uint32_t lead = n > 1 ? 1 : 0;
		*out = (struct units_repeat){lead, (uint32_t)n - lead, 1, (uint32_t)n - lead};
		return 0;
	}
	if (layers > 1 && search(keys, n, layers, out))
		return 0;
	if (!search(keys, n, 0, out)) {
		uint32_t lead = n > 1 ? 1 : 0;
		*out = (struct units_repeat){lead, (uint32_t)n - lead, 1, (uint32_t)n - lead};
	}
	return layers > 0 ? -ENOENT : 0;
}

void units_generalize_name(const char *a, const char *b, char *out, size_t len)
{
	if (len == 0)
		return;
	out[0] = '\0';
	if (!a)
		return;
	if (!b || !*b) {
		snprintf(out, len, "%s", a);
		return;
	}
	size_t o = 0;
	const char *p = a, *q = b;
	while (*p || *q) {
		if (isdigit((unsigned char)*p) && isdigit((unsigned char)*q)) {
			const char *p0 = p, *q0 = q;
			while (isdigit((unsigned char)*p))
				p++;
			while (isdigit((unsigned char)*q))
				q++;
			size_t lp = (size_t)(p - p0), lq = (size_t)(q - q0);
			if (lp == lq && memcmp(p0, q0, lp) == 0) {
				for (size_t i = 0; i < lp && o + 1 < len; i++)
					out[o++] = p0[i];
			} else if (o + 1 < len) {
				out[o++] = '*';
			}
			continue;
		}
		if (*p != *q) {
			snprintf(out, len, "%s", a);
			return;
		}
		if (o + 1 < len)
			out[o++] = *p;
		p++;
		q++;
	}
	out[o] = '\0';
}
