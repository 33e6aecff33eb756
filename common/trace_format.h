/*
 * trace_format.h - the container around records: file header and chunks.
 *
 * A trace (a file, or the byte stream an agent sends over a socket: the wire
 * framing is the same bytes) is one file header followed by chunks:
 *
 *   fss_file_header | chunk header | records... | chunk header | records... | ...
 *
 * Each chunk carries a CRC32C over its header (less the crc field) and its
 * payload. A writer emits a chunk with one write(), so a writer killed at any
 * instant leaves a file whose complete chunks all read back; from format 1.1
 * a writer that closes its trace ends it with a trace_end record, so a reader
 * tells a finished trace from one cut on a chunk boundary. A reader skips a
 * damaged stretch to the next valid chunk and says where and why.
 *
 * Described for users in docs/format.md.
 */
#ifndef FSS_COMMON_TRACE_FORMAT_H
#define FSS_COMMON_TRACE_FORMAT_H

#include <assert.h>
#include <stdint.h>

#define FSS_FILE_MAGIC "FSSTRACE"     /* 8 bytes, no NUL */
#define FSS_BYTE_ORDER_MARK 0x01020304u /* reads 0x04030201 on the other byte order */
#define FSS_FORMAT_MAJOR 1           /* readers refuse other majors */
#define FSS_FORMAT_MINOR 5           /* readers accept any minor of their major; 1: trace_end ends a closed file;
                                        2: sinks (record 14), the return channel, the keep policy in the header;
                                        3: calls in flight (records 16 enter, 17 sync_exit);
                                        4: observed communicators (comm event 5, comm.inferred);
                                        5: the device record (19) */
#define FSS_CHUNK_MAGIC 0x4b4e4843u  /* "CHNK" */
#define FSS_CHUNK_MAX_PAYLOAD (16u << 20) /* larger chunk: damaged */
#define FSS_CHUNK_DEFAULT_PAYLOAD (64u << 10)

/* File flags. */
#define FSS_FILE_STREAM (1u << 0) /* written to a socket, not a file */
#define FSS_FILE_KEEP_LAST (1u << 1)    /* --keep last:N: only the last keep_steps steps are in full */
#define FSS_FILE_KEEP_SUMMARY (1u << 2) /* --keep summary: steps summarised (record 15), few in full */

#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"

struct fss_file_header {
	char magic[8];            /* "FSSTRACE" */
	uint32_t byte_order;      /* FSS_BYTE_ORDER_MARK as the writer's host stores it */
	uint16_t version_major;   /* FSS_FORMAT_MAJOR */
	uint16_t version_minor;   /* FSS_FORMAT_MINOR */
	uint32_t header_size;     /* sizeof(struct fss_file_header): later versions may grow it */
	uint32_t flags;           /* FSS_FILE_* */
	uint64_t features;        /* FSS_FEATURE_* bits (record.h) the writer may emit */
	uint64_t created_mono_ns; /* CLOCK_MONOTONIC when the writer opened */
	uint64_t created_realtime_ns; /* CLOCK_REALTIME at the same moment */
	uint32_t chunk_payload_max; /* largest chunk payload the writer emits */
	uint32_t writer_pid;      /* process that wrote the file */
	uint32_t keep_steps;      /* N of FSS_FILE_KEEP_LAST / the steps kept in full with KEEP_SUMMARY; 0 otherwise
	                             (1.0 and 1.1: reserved, 0) */
	uint32_t crc;             /* CRC32C of all bytes of the header before this field */
};

struct fss_chunk_header {
	uint32_t magic;         /* FSS_CHUNK_MAGIC */
	uint32_t payload_bytes; /* bytes of records after this header */
	uint32_t records;       /* number of records in the payload */
	uint32_t crc;           /* CRC32C over this header with crc = 0, then the payload */
	uint64_t seq;           /* chunk number in the file, from 0 */
};

#pragma GCC diagnostic pop

static_assert(sizeof(struct fss_file_header) == 64, "file header is 64 bytes");
static_assert(sizeof(struct fss_chunk_header) == 24, "chunk header is 24 bytes");

#endif
