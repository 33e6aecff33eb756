/*
 * fuzz_checksums.h - make a fuzzer's input pass the trace format's CRCs.
 *
 * Mutations almost never keep a CRC32C right: the fuzz targets recompute
 * the checksums of the header and of every chunk whose size fits on part
 * of their inputs, so that the fuzzer reaches record validation and the
 * consumers, and leave them alone on the rest, which exercises the checks.
 */
#ifndef FSS_TESTS_FUZZ_CHECKSUMS_H
#define FSS_TESTS_FUZZ_CHECKSUMS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/trace_format.h"

static inline void fix_checksums(uint8_t *d, size_t size)
{
	struct fss_file_header h;
	size_t off;

	if (size < sizeof(h))
		return;
	memcpy(&h, d, sizeof(h));
	h.crc = crc32c(0, &h, offsetof(struct fss_file_header, crc));
	memcpy(d, &h, sizeof(h));
	off = h.header_size >= sizeof(h) && h.header_size <= 4096 ? h.header_size : sizeof(h);
	while (off + sizeof(struct fss_chunk_header) <= size) {
		struct fss_chunk_header ch;

		memcpy(&ch, d + off, sizeof(ch));
		if (ch.payload_bytes > size - off - sizeof(ch))
			break;
		ch.crc = 0;
		ch.crc = crc32c(crc32c(0, &ch, sizeof(ch)), d + off + sizeof(ch), ch.payload_bytes);
		memcpy(d + off, &ch, sizeof(ch));
		off += sizeof(ch) + ch.payload_bytes;
	}
}

#endif
