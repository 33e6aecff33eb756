/* fsdp_ref/nccl_cpu/sync.h: waiting on peers through shared memory.
 *
 * Waits spin for a few microseconds, then sleep on a process-shared futex
 * in slices of at most 100 ms; between slices they check the communicator's
 * abort flag, the timeout (FSDP_REF_NCCL_TIMEOUT_S) and whether the peers
 * they wait for are still alive. Nothing busy-spins for long: the trainer's
 * compute thread shares the cores. */
#ifndef FSS_NCCL_CPU_SYNC_H
#define FSS_NCCL_CPU_SYNC_H

#include <stdatomic.h>
#include <stdint.h>

struct ncclComm;

/* CLOCK_MONOTONIC in ns: for this process's own waits and timeouts. Its
 * value differs between time namespaces (unshare --time), so it never goes
 * into shared memory. */
uint64_t sync_now_ns(void);

/* CLOCK_REALTIME in ns: the clock of every stamp that crosses processes
 * (arrival times in the segment, the Send header's stamp) and of the link
 * model's deadlines computed from them. It is the one clock that processes
 * in different time namespaces share (docs/nccl_cpu.md, "Clocks"). */
uint64_t sync_shared_now_ns(void);

/* Wake every waiter on a futex word in shared memory. */
void sync_wake_all(_Atomic uint32_t *word);

/* Wait until *word != old. since_ns is when the wait (or the last progress)
 * began; the timeout counts from there. peers/npeers name the ranks whose
 * death would make the wait hopeless (npeers < 0: every other rank).
 * Returns 0 once the word changed; -ETIMEDOUT; -ECONNABORTED when another
 * rank flagged the communicator; -EPIPE when a peer died (its rank is left
 * in comm->dead_rank). */
int sync_wait(struct ncclComm *comm, _Atomic uint32_t *word, uint32_t old, uint64_t since_ns, const int *peers,
	      int npeers);

/* Barrier over all ranks of comm. On success *t_last_ns (if not NULL) is
 * the time the last rank arrived (sync_shared_now_ns), and comm->barriers
 * is incremented.
 * Errors as sync_wait. */
int sync_barrier(struct ncclComm *comm, uint64_t *t_last_ns);

#endif
