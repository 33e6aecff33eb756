/* fsdp_ref/nccl_cpu/segment.h: the shared-memory segment of a communicator.
 *
 * One POSIX shared-memory object per communicator, named after its unique
 * id, mapped by every rank. An all-zero segment is a valid initial state,
 * so there is no creator: every rank opens it with O_CREAT, grows it to the
 * size its layout needs and joins. The name is unlinked as soon as all
 * ranks have mapped it, so a crash later leaves nothing in /dev/shm.
 *
 * Layout (offsets from segment_layout_compute, n = nranks, C = chunk):
 *   header                   barrier state, join counter, abort flag
 *   ranks[n]                 per-rank pid, doorbell, operation descriptors
 *   sets[2] of:              staging, double-buffered (see coll.c)
 *     slots[n][C]            rank r writes slot r, everyone reads
 *     out[C]                 reduced chunk (AllReduce, Reduce)
 *   rings[n][n]              Send/Recv byte rings, src-major, R = C/8 bytes
 * All of it is bounded by 2 (n + 1) C + n^2 (R + 128) + 8 KiB + 64 n
 * bytes, and tmpfs only backs the pages that are touched. */
#ifndef FSS_NCCL_CPU_SEGMENT_H
#define FSS_NCCL_CPU_SEGMENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SEGMENT_MAX_RANKS 64

/* What a rank is about to do, published before the first barrier of each
 * collective so that all ranks can check they agree. */
struct coll_desc {
	int32_t kind;	/* enum op_kind */
	int32_t dtype;	/* ncclDataType_t */
	int32_t redop;	/* ncclRedOp_t, 0 when the operation does not reduce */
	int32_t root;	/* root rank, 0 when the operation has none */
	uint64_t count; /* the count argument as passed */
};

struct segment_header {
	_Atomic uint32_t nranks;  /* 0 until the first rank joins, then fixed */
	_Atomic uint32_t joined;  /* ranks joined so far; futex word during init */
	_Atomic uint32_t aborted; /* nonzero once a rank gave up on the communicator */
	uint32_t reserved;
	_Alignas(64) _Atomic uint32_t barrier_count; /* ranks arrived at the open barrier */
	_Alignas(64) _Atomic uint32_t barrier_gen;   /* futex word: +1 per completed barrier */
	_Atomic uint64_t barrier_time_ns;	     /* CLOCK_REALTIME when the last rank arrived */
};

struct segment_rank {
	_Atomic uint32_t present;  /* 1 once this rank joined */
	_Atomic int32_t pid;	   /* its process, for liveness checks */
	_Atomic uint32_t doorbell; /* futex word: +1 whenever a peer moved a ring it waits on */
	uint32_t reserved;
	/* Descriptors of the collective whose first barrier has this parity:
	 * double-buffered so that a fast rank's next descriptor never
	 * overwrites one a slow rank is still reading. */
	struct coll_desc desc[2];
} __attribute__((aligned(64)));

/* A single-producer single-consumer byte ring; data follows the struct. */
struct segment_ring {
	_Atomic uint64_t head; /* bytes ever written (producer only) */
	char pad0[56];
	_Atomic uint64_t tail; /* bytes ever consumed (consumer only) */
	char pad1[56];
};

struct segment_layout {
	size_t ranks_off;   /* struct segment_rank[n] */
	size_t sets_off;    /* two staging sets: n slots of chunk bytes, then out */
	size_t set_stride;  /* (n + 1) * chunk */
	size_t rings_off;   /* n * n rings */
	size_t ring_stride; /* sizeof(struct segment_ring) + ring_bytes */
	size_t ring_bytes;  /* payload capacity of one ring */
	size_t chunk;	    /* staging slot bytes */
	size_t total;	    /* segment size */
};

/* Compute the layout for nranks (1..SEGMENT_MAX_RANKS) and a chunk size. */
void segment_layout_compute(int nranks, size_t chunk, struct segment_layout *out);

/* Open (creating if needed) and map the segment called name, at least size
 * bytes. Returns 0 and the mapping in *base, or a negative errno. */
int segment_attach(const char *name, size_t size, void **base);

/* Unmap a mapping from segment_attach. */
void segment_detach(void *base, size_t size);

/* Remove the name; fine to call when it is already gone. */
void segment_unlink(const char *name);

#endif
