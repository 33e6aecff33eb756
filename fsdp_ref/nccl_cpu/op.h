/* fsdp_ref/nccl_cpu/op.h: one communication call, as queued by a group. */
#ifndef FSS_NCCL_CPU_OP_H
#define FSS_NCCL_CPU_OP_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

enum op_kind {
	OP_ALLGATHER = 1,
	OP_REDUCE_SCATTER,
	OP_ALLREDUCE,
	OP_BROADCAST,
	OP_REDUCE,
	OP_SEND,
	OP_RECV,
};

/* Bytes of the Send/Recv message header: payload length, sender's start. */
#define OP_P2P_HEADER 16

struct op {
	enum op_kind kind;
	struct ncclComm *comm;
	const void *send; /* sendbuff (Send: the payload) */
	void *recv;	  /* recvbuff (Recv: the destination) */
	size_t count;	  /* the count argument as passed */
	ncclDataType_t dtype;
	ncclRedOp_t redop; /* reductions only */
	int root;	   /* Broadcast/Reduce: root; Send/Recv: peer */
	/* Send/Recv progress while the group runs. */
	size_t done; /* bytes of header + payload moved so far */
	int finished;
	unsigned char header[OP_P2P_HEADER];
};

/* The API name of a kind, for messages ("ncclAllGather"). */
const char *op_name(enum op_kind kind);

/* Bytes this rank puts on the wire for a collective in the ring model:
 * AllGather and ReduceScatter (n-1)/n of the total, AllReduce 2(n-1)/n,
 * Broadcast and Reduce the whole buffer; 0 when n == 1. */
uint64_t op_wire_bytes(const struct op *op, int nranks);

#endif
