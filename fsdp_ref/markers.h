/* fsdp_ref/markers.h: NVTX ranges in the domain "fsdp_ref".
 *
 * Ranges (names documented in docs/fsdp_ref.md): "step N" around each
 * training step; "forward", "backward", "optimizer" inside it; and one range
 * per unit's forward and per unit's backward compute named after the unit's
 * module ("root", "layers.3", "layers.3.attn.q", "layers.2-3"). Built
 * without NVTX headers these are no-ops. Compute thread only. */
#ifndef FSDP_REF_MARKERS_H
#define FSDP_REF_MARKERS_H

/* Open a range named `name` (copied by NVTX). */
void markers_push(const char *name);
/* Close the innermost open range. */
void markers_pop(void);

#endif /* FSDP_REF_MARKERS_H */
