/*
 * attach_infer.h - deciding the identity, rank and nranks of communicators
 * made before the attach, and of split children (attach_infer.c).
 */
#ifndef FSS_AGENT_BPF_ATTACH_INFER_H
#define FSS_AGENT_BPF_ATTACH_INFER_H

#include "agent/bpf/attach_records_state.h"

/* attach_infer_all_ready - every undecided communicator of every process
 * has calls enough to decide (and there is one). */
int attach_infer_all_ready(const attach_records_t *a);

/*
 * attach_infer_pass - one decision over every process: the OBSERVED
 * communicators into classes, then the split children (force: even those
 * whose parent's processes have not all made the split), then what was
 * held for them sent. 0, -ENOMEM or fn's error.
 */
int attach_infer_pass(attach_records_t *a, int force);

/* attach_infer_splits - decide the split children whose parents are
 * decided and complete, and send what was held for them. 0 or an error. */
int attach_infer_splits(attach_records_t *a);

#endif
