/* fsdp_ref/mem.h: the trainer's own allocator accounting.
 *
 * Every device allocation the core makes goes through mem_alloc with a kind,
 * so that the log can report measured peaks per kind and the tests can check
 * them against the FSDP memory ledger (docs/fsdp_ref.md):
 *  - persistent: parameter shard, fp32 master shard, gradient shard, Adam m
 *    and v: allocated once, alive all run;
 *  - gathered: full (unsharded) parameters of gathered units, and the
 *    partially resharded copies kept between forward and backward with
 *    --reshard-after-forward G: the "transient" row of the ledger;
 *  - gradient: full (unsharded) gradients of units in backward and the
 *    reduce-scatter send buffers still in flight;
 *  - activation: activations saved for backward and their gradients;
 *  - other: token ids, the loss buffer.
 * Only the compute thread allocates and frees, so no locking. */
#ifndef FSDP_REF_MEM_H
#define FSDP_REF_MEM_H

#include <stddef.h>

#include "fsdp_ref/backend.h"

enum mem_kind {
	MEM_PERSISTENT = 0,
	MEM_GATHERED,
	MEM_GRADIENT,
	MEM_ACTIVATION,
	MEM_OTHER,
	MEM_KINDS,
};

struct mem_ledger;

/* A ledger allocating from backend `be`. NULL on out-of-memory. */
struct mem_ledger *mem_new(const struct fsdp_backend *be);
/* Free the ledger (not the memory it tracks: free that first). */
void mem_free_ledger(struct mem_ledger *m);

/* `bytes` of device memory of kind `kind`; NULL on failure or bytes == 0. */
void *mem_alloc(struct mem_ledger *m, enum mem_kind kind, size_t bytes);
/* Free `ptr` (NULL ignored), allocated with the same kind and size. */
void mem_free(struct mem_ledger *m, enum mem_kind kind, void *ptr, size_t bytes);

/* Bytes currently allocated of `kind`. */
size_t mem_current(const struct mem_ledger *m, enum mem_kind kind);
/* Peak of `kind` since the last mem_reset_peaks. */
size_t mem_peak(const struct mem_ledger *m, enum mem_kind kind);
/* Peak of the sum over all kinds since the last mem_reset_peaks. */
size_t mem_peak_total(const struct mem_ledger *m);
/* Start a new measuring window (a step): peaks restart from current values. */
void mem_reset_peaks(struct mem_ledger *m);

#endif /* FSDP_REF_MEM_H */
