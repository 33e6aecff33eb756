/* fsdp_ref/nccl_cpu/unique_id.h: what the 128-byte ncclUniqueId holds.
 *
 * The id names a rendezvous in POSIX shared memory: ranks that were handed
 * the same id (through fork, a file, a socket...) open the same segment.
 * Layout of ncclUniqueId.internal (little-endian host order):
 *   [0, 8)    magic "fssnccl1" (catches ids not made by this library)
 *   [8, 24)   token: 16 random bytes from getrandom(), unique per call
 *   [24, 28)  staging chunk bytes, uint32 (FSDP_REF_NCCL_CHUNK_BYTES at
 *             ncclGetUniqueId time), so that every rank sizes the segment
 *             the same way
 *   [28, 128) zero
 * The segment name is "/fss-nccl-" followed by the token in lowercase hex. */
#ifndef FSS_NCCL_CPU_UNIQUE_ID_H
#define FSS_NCCL_CPU_UNIQUE_ID_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#define UNIQUE_ID_TOKEN_BYTES 16
/* "/fss-nccl-" + 32 hex digits + NUL */
#define UNIQUE_ID_NAME_MAX 48

/* Default and limits of the staging chunk (bytes per rank slot). */
#define UNIQUE_ID_CHUNK_DEFAULT (256u * 1024u)
#define UNIQUE_ID_CHUNK_MIN 1024u
#define UNIQUE_ID_CHUNK_MAX (64u * 1024u * 1024u)

struct unique_id {
	uint8_t token[UNIQUE_ID_TOKEN_BYTES];
	uint32_t chunk_bytes;
};

/* Fill *out with a fresh random token and the chunk size from the
 * environment. Returns 0, -EINVAL when FSDP_REF_NCCL_CHUNK_BYTES is set but
 * not a number in [UNIQUE_ID_CHUNK_MIN, UNIQUE_ID_CHUNK_MAX], or a negative
 * errno from getrandom. */
int unique_id_generate(struct unique_id *out);

/* Decode an ncclUniqueId. Returns 0 or -EINVAL when it was not made by
 * unique_id_encode (wrong magic, chunk out of range). */
int unique_id_decode(const ncclUniqueId *in, struct unique_id *out);

/* Encode *id into the opaque 128 bytes. */
void unique_id_encode(const struct unique_id *id, ncclUniqueId *out);

/* The id of the communicator a split creates: a deterministic function of
 * the parent's id, the parent's split counter and the color, so that every
 * rank of one color derives the same id without talking. */
void unique_id_derive(const struct unique_id *parent, uint64_t split_index, int color, struct unique_id *out);

/* The shared-memory segment name for id (see the layout above). */
void unique_id_name(const struct unique_id *id, char name[UNIQUE_ID_NAME_MAX]);

#endif
