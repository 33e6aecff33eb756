/* fsdp_ref/wrap.h: wrap policy specs (--wrap).
 *
 * A spec says how the blocks of an L-layer model are grouped into FSDP units
 * (the root unit, with the embeddings, final norm and head, always exists):
 *   block            one unit per block
 *   linear           per block: one unit per linear (q k v o gate up down)
 *                    and one for the rest of the block (its two norms)
 *   group:K          one unit per K consecutive blocks (the last may be shorter)
 *   model            a single unit, the root, holding every parameter
 *   P:A-B,P:C-D,...  per-range policies, P one of block, linear, group:K;
 *                    A-B inclusive block ranges (or a single block A) that
 *                    together cover 0..L-1 exactly once, in any order.
 * Example: linear:0-3,block:4-11 or group:2:0-7,block:8-11. */
#ifndef FSDP_REF_WRAP_H
#define FSDP_REF_WRAP_H

#include <stddef.h>

enum wrap_policy {
	WRAP_BLOCK = 0,
	WRAP_LINEAR,
	WRAP_GROUP,
};

#define WRAP_MAX_RANGES 64

/* One range of blocks under one policy. */
struct wrap_range {
	enum wrap_policy policy;
	int group; /* K for WRAP_GROUP, 1 otherwise */
	int first; /* first block, inclusive */
	int last;  /* last block, inclusive */
};

struct wrap_spec {
	int model;   /* 1: the whole model is one unit (ranges unused) */
	int nranges; /* ranges sorted by first block, covering 0..layers-1 */
	struct wrap_range ranges[WRAP_MAX_RANGES];
};

/* Parse `text` for a model of `layers` blocks. Returns 0, or -EINVAL with a
 * message for the user in err (what is wrong and what is accepted). */
int wrap_parse(const char *text, int layers, struct wrap_spec *out, char *err, size_t errlen);

/* FSDP units the spec makes, the root included. */
int wrap_unit_count(const struct wrap_spec *spec);

/* Units that range `r` makes. */
int wrap_range_units(const struct wrap_range *r);

#endif /* FSDP_REF_WRAP_H */
