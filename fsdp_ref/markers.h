/* fsdp_ref/markers.h: NVTX ranges in the domain "fsdp_ref".
 *
 * Ranges (names and nesting documented in docs/fsdp_ref.md, "NVTX ranges"):
 * "step N" around each training step; "forward", "backward", "optimizer"
 * inside it; one range per unit's forward and per unit's backward compute
 * named after the unit's module ("root", "layers.3", "layers.3.attn.q",
 * "layers.2-3"); and leaf ranges around every op of the model
 * ("layers.3.attn.core", "layers.3.attn.q.matmul", "head", ...) and around
 * the FSDP hooks' own work ("fsdp.unshard", ...), so that the compute thread
 * is outside every leaf only while it waits. Built without NVTX headers
 * these are no-ops. Compute thread only. */
#ifndef FSDP_REF_MARKERS_H
#define FSDP_REF_MARKERS_H

/* Turn every range on or off (on at start; --no-nvtx turns them off before
 * the first one, so that NVTX is never initialised). */
void markers_set_enabled(int on);

/* Put `prefix` (kept, not copied; NULL: none) before the name of every
 * unit's range that markers_push_unit opens (--name-prefix). */
void markers_set_unit_prefix(const char *prefix);

/* Open the range of a unit's forward or backward compute, named `name`
 * after the prefix. */
void markers_push_unit(const char *name);

/* Open a range named `name` (copied by NVTX). */
void markers_push(const char *name);
/* Close the innermost open range. */
void markers_pop(void);

#endif /* FSDP_REF_MARKERS_H */
