/* fsdp_ref/nccl_cpu/group.h: ncclGroupStart / ncclGroupEnd.
 *
 * As in NCCL the group state is per thread. Between the outermost
 * GroupStart and its GroupEnd, calls are checked and queued; GroupEnd runs
 * them: first every collective in call order, then every Send/Recv
 * (progressing together), then it sleeps until the group's link-model
 * deadline: one latency per communicator and group, plus the sum of the
 * group's wire bytes over the bandwidth. A call outside any group is a
 * group of one. */
#ifndef FSS_NCCL_CPU_GROUP_H
#define FSS_NCCL_CPU_GROUP_H

#include <nccl.h>

struct op;

/* Open a (possibly nested) group on this thread. */
ncclResult_t group_start(void);

/* Close one level; the outermost runs the queue. Returns the first error
 * of a queued call's argument check (the group is then dropped, like
 * NCCL), the first execution error, ncclInvalidUsage without a matching
 * group_start, or ncclSuccess. */
ncclResult_t group_end(void);

/* Queue *op (copied) when a group is open, else run it now. */
ncclResult_t group_submit(const struct op *op);

/* Remember a failed argument check of a call made inside a group so that
 * group_end reports it. res is returned. */
ncclResult_t group_note_error(ncclResult_t res);

#endif
