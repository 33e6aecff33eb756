/* fsdp_ref/nccl_cpu/p2p.c: Send/Recv over per-pair byte rings. */
#include "fsdp_ref/nccl_cpu/p2p.h"

#include <errno.h>
#include <string.h>

#include "fsdp_ref/nccl_cpu/comm.h"
#include "fsdp_ref/nccl_cpu/op.h"
#include "fsdp_ref/nccl_cpu/reduce.h"
#include "fsdp_ref/nccl_cpu/sync.h"

static int op_is_p2p(const struct op *op)
{
	return op->kind == OP_SEND || op->kind == OP_RECV;
}

static size_t payload_bytes(const struct op *op)
{
	return op->count * reduce_dtype_size(op->dtype);
}

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* Read len bytes at offset off of a Send's stream (header, then payload). */
static void stream_read(const struct op *op, size_t off, unsigned char *dst, size_t len)
{
	while (len) {
		size_t n;
		if (off < OP_P2P_HEADER) {
			n = min_size(OP_P2P_HEADER - off, len);
			memcpy(dst, op->header + off, n);
		} else {
			n = len;
			memcpy(dst, (const unsigned char *)op->send + (off - OP_P2P_HEADER), n);
		}
		dst += n;
		off += n;
		len -= n;
	}
}

/* Write len bytes at offset off of a Recv's stream. */
static void stream_write(struct op *op, size_t off, const unsigned char *src, size_t len)
{
	while (len) {
		size_t n;
		if (off < OP_P2P_HEADER) {
			n = min_size(OP_P2P_HEADER - off, len);
			memcpy(op->header + off, src, n);
		} else {
			n = len;
			memcpy((unsigned char *)op->recv + (off - OP_P2P_HEADER), src, n);
		}
		src += n;
		off += n;
		len -= n;
	}
}

static void ring_doorbell(struct ncclComm *c, int rank)
{
	atomic_fetch_add(&c->ranks[rank].doorbell, 1);
	sync_wake_all(&c->ranks[rank].doorbell);
}

/* Move what fits; returns the bytes moved. */
static size_t p2p_send_step(struct op *op)
{
	struct ncclComm *c = op->comm;
	struct segment_ring *ring = comm_ring(c, c->rank, op->root);
	unsigned char *data = (unsigned char *)(ring + 1);
	size_t cap = c->layout.ring_bytes;
	uint64_t head = atomic_load_explicit(&ring->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
	size_t want = OP_P2P_HEADER + payload_bytes(op) - op->done;
	size_t moved = min_size(cap - (size_t)(head - tail), want), left = moved;
	while (left) {
		size_t pos = (size_t)(head % cap);
		size_t n = min_size(cap - pos, left);
		stream_read(op, op->done, data + pos, n);
		head += n;
		op->done += n;
		left -= n;
	}
	if (moved) {
		atomic_store_explicit(&ring->head, head, memory_order_release);
		ring_doorbell(c, op->root);
	}
	return moved;
}

/* Move what has arrived, stopping after the header to check it first;
 * returns the bytes moved, or (size_t)-1 after failing the communicator. */
static size_t p2p_recv_step(struct op *op)
{
	struct ncclComm *c = op->comm;
	struct segment_ring *ring = comm_ring(c, op->root, c->rank);
	const unsigned char *data = (const unsigned char *)(ring + 1);
	size_t cap = c->layout.ring_bytes;
	uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
	size_t end = op->done < OP_P2P_HEADER ? OP_P2P_HEADER : OP_P2P_HEADER + payload_bytes(op);
	size_t moved = min_size((size_t)(head - tail), end - op->done), left = moved;
	while (left) {
		size_t pos = (size_t)(tail % cap);
		size_t n = min_size(cap - pos, left);
		stream_write(op, op->done, data + pos, n);
		tail += n;
		op->done += n;
		left -= n;
	}
	if (moved) {
		atomic_store_explicit(&ring->tail, tail, memory_order_release);
		ring_doorbell(c, op->root);
	}
	if (moved && op->done == OP_P2P_HEADER) {
		uint64_t len, stamp;
		memcpy(&len, op->header, 8);
		memcpy(&stamp, op->header + 8, 8);
		if (len != payload_bytes(op)) {
			comm_fail(c, ncclInvalidUsage,
				  "ncclRecv: expected %zu bytes from rank %d, which sent %llu (count and "
				  "datatype of ncclSend and ncclRecv must match)",
				  payload_bytes(op), op->root, (unsigned long long)len);
			return (size_t)-1;
		}
		if (stamp > c->group_t0_ns)
			c->group_t0_ns = stamp;
	}
	return moved;
}

/* Whether an earlier unfinished Send/Recv to the same peer in the same
 * direction must complete first (messages between a pair match in order). */
static int p2p_blocked(const struct op *ops, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (ops[j].comm == ops[i].comm && ops[j].kind == ops[i].kind && ops[j].root == ops[i].root &&
		    !ops[j].finished)
			return 1;
	return 0;
}

static ncclResult_t p2p_run_comm(struct op *ops, size_t nops, struct ncclComm *c)
{
	_Atomic uint32_t *doorbell = &c->ranks[c->rank].doorbell;
	uint64_t since = sync_now_ns();
	if (atomic_load(&c->header->aborted))
		return comm_fail_wait(c, -ECONNABORTED, "ncclSend/ncclRecv");
	for (;;) {
		/* Read before the pass: a peer moving a ring after we looked at it
		 * bumps the doorbell, and the wait below returns at once. */
		uint32_t bell = atomic_load(doorbell);
		int progress = 0, npeers = 0;
		int peers[SEGMENT_MAX_RANKS];
		uint64_t peer_mask = 0;
		for (size_t i = 0; i < nops; i++) {
			struct op *op = &ops[i];
			if (op->comm != c || !op_is_p2p(op) || op->finished)
				continue;
			if (!p2p_blocked(ops, i)) {
				size_t moved = op->kind == OP_SEND ? p2p_send_step(op) : p2p_recv_step(op);
				if (moved == (size_t)-1)
					return c->async_error;
				progress |= moved > 0;
				if (op->done == OP_P2P_HEADER + payload_bytes(op)) {
					op->finished = 1;
					if (op->kind == OP_SEND)
						c->group_sent_bytes += payload_bytes(op);
					else
						c->group_recv_bytes += payload_bytes(op);
					continue;
				}
			}
			if (!(peer_mask & (1ull << op->root))) {
				peer_mask |= 1ull << op->root;
				peers[npeers++] = op->root;
			}
		}
		if (npeers == 0)
			return ncclSuccess;
		if (progress) {
			since = sync_now_ns();
			continue;
		}
		int rc = sync_wait(c, doorbell, bell, since, peers, npeers);
		if (rc)
			return comm_fail_wait(c, rc, "ncclSend/ncclRecv");
	}
}

ncclResult_t p2p_run(struct op *ops, size_t nops, uint64_t start_ns)
{
	for (size_t i = 0; i < nops; i++) {
		if (!op_is_p2p(&ops[i]))
			continue;
		uint64_t len = payload_bytes(&ops[i]);
		ops[i].done = 0;
		ops[i].finished = 0;
		if (ops[i].kind == OP_SEND) {
			memcpy(ops[i].header, &len, 8);
			memcpy(ops[i].header + 8, &start_ns, 8);
		}
	}
	for (size_t i = 0; i < nops; i++) {
		if (!op_is_p2p(&ops[i]))
			continue;
		int seen = 0; /* run each communicator once, at its first op */
		for (size_t j = 0; j < i && !seen; j++)
			seen = op_is_p2p(&ops[j]) && ops[j].comm == ops[i].comm;
		if (seen)
			continue;
		ncclResult_t res = p2p_run_comm(ops, nops, ops[i].comm);
		if (res != ncclSuccess)
			return res;
	}
	return ncclSuccess;
}
