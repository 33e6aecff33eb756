/*
 * units.h - repeating units: tandem repeats in the forward gathers.
 *
 * FSDP gathers each unit once in forward, in execution order. A transformer
 * wrapped per block gathers [root, block x L]; wrapped per Linear, [root,
 * (8 gathers) x L]. So the forward gather sequence of a step is a few
 * leading and trailing gathers plus a motif of k gathers repeated L times;
 * k and L are what the wrap rules compare. The repeat chosen is the one that
 * covers the most gathers, the smallest motif on ties, the earliest on
 * ties after that.
 */
#ifndef FSS_COLLECTOR_UNITS_H
#define FSS_COLLECTOR_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* A tandem repeat: keys[start .. start + motif * copies) is motif keys
 * repeated copies times. */
struct units_repeat {
	uint32_t start;
	uint32_t motif;   /* k */
	uint32_t copies;  /* L */
	uint32_t covered; /* motif * copies */
};

/*
 * units_find_repeat - the tandem repeat of keys[0..n) (a key per forward
 * gather: equal keys = equal gathers, e.g. gathered elements) covering the
 * most keys. With no repeat of two copies or more the whole sequence after
 * one leading key (the root) is one copy (start 1, or 0 when n == 1).
 * layers > 0 (the user's --layers) looks only at repeats of exactly that
 * many copies and returns 0 with one, -ENOENT without one (*out then holds
 * the inferred repeat). n == 0 gives an all-zero repeat. O(n^2) time, O(1)
 * memory. Returns 0 or -ENOENT.
 */
int units_find_repeat(const uint64_t *keys, size_t n, int layers, struct units_repeat *out);

/*
 * units_generalize_name - a name for the repeating unit from the names of
 * two of its copies: runs of digits that differ become '*' ("layers.0",
 * "layers.1" -> "layers.*"). When the names differ elsewhere, or b is empty,
 * a is copied. Writes at most len bytes, NUL included.
 */
void units_generalize_name(const char *a, const char *b, char *out, size_t len);

#endif
