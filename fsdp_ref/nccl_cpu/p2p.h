/* fsdp_ref/nccl_cpu/p2p.h: ncclSend / ncclRecv.
 *
 * Each ordered pair of ranks (src, dst) owns a single-producer
 * single-consumer byte ring in the segment. A Send writes a 16-byte header
 * (payload bytes, sender's start time) and the payload into ring
 * (me, peer); the matching Recv reads it back and checks the length. Sends
 * and receives between one pair match in call order, as in NCCL. */
#ifndef FSS_NCCL_CPU_P2P_H
#define FSS_NCCL_CPU_P2P_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

struct op;

/* Complete every Send/Recv in ops[0..nops) (other kinds are skipped).
 * The operations of one communicator progress together, so paired
 * exchanges larger than a ring cannot deadlock; communicators are
 * completed one after another, in the order they first appear. start_ns is
 * this rank's arrival at the group (sync_shared_now_ns, stamped into sent
 * headers). Adds the
 * payload bytes and the senders' stamps to each communicator's group
 * accounting. Returns ncclSuccess or the first failure. */
ncclResult_t p2p_run(struct op *ops, size_t nops, uint64_t start_ns);

#endif
