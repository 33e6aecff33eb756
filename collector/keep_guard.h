/*
 * keep_guard.h - the disk guard of a default `full`: it looks at the
 * trace's file system every guard_every bytes and switches to
 * last:KEEP_GUARD_LAST before the free space would fall below max(1 GiB,
 * 5 %); a `full` the user chose is only warned about. keeper_projection
 * (keep.h), the growth it guards against, is here too.
 */
#ifndef FSS_COLLECTOR_KEEP_GUARD_H
#define FSS_COLLECTOR_KEEP_GUARD_H

#include <stdint.h>

#include "collector/keep_state.h"

/* keep_guard_account - the trace got size bytes more: counted, and under
 * `full` the disk looked at when guard_every more have gone since the last
 * look. */
void keep_guard_account(keeper_t *k, uint16_t size);

#endif
