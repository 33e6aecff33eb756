/* crc32c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum
 * of every trace-file chunk. The same CRC as iSCSI, ext4 and SSE4.2's crc32
 * instruction, so other tools can check our files.
 *
 * crc32c() picks the SSE4.2 instruction at run time when the CPU has it and
 * a table-driven (slicing-by-8) loop otherwise; both give identical results.
 * The file builds without -msse4.2. */
#ifndef FSS_COMMON_CRC32C_H
#define FSS_COMMON_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Returns the CRC-32C of buf[0..len) continued from crc, with the standard
 * initial and final inversion applied inside: start with crc = 0, and feed the
 * result back to continue, since crc32c(crc32c(0, a, n), b, m) equals the
 * CRC of a followed by b. crc32c(0, "123456789", 9) == 0xE3069283.
 * buf may have any alignment; buf may be NULL when len is 0. Thread-safe;
 * not async-signal-safe (the first call builds the lookup table). */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/* The portable table-driven implementation, always available. Same contract
 * as crc32c. Exported for tests and benchmarks. */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* True when this CPU can run crc32c_hw (x86-64 with SSE4.2). */
bool crc32c_hw_available(void);

/* The SSE4.2 implementation. Same contract as crc32c; call it only when
 * crc32c_hw_available() is true (elsewhere it would fault on an illegal
 * instruction; on non-x86 builds it falls back to crc32c_sw). Exported for
 * tests and benchmarks. */
uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t len);

#endif /* FSS_COMMON_CRC32C_H */
