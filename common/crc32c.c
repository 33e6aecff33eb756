/* crc32c: CRC-32C, table-driven (slicing-by-8) and SSE4.2, chosen at run time.
 *
 * Slicing-by-8 (Intel, Kounavis & Berry 2005): table[0] is the classic
 * byte-at-a-time table; table[k][b] is the CRC of byte b followed by k zero
 * bytes, so eight table look-ups advance the CRC by eight bytes at once.
 *
 * The hardware path uses the crc32 instruction (8 bytes per instruction) in a
 * function compiled with a target attribute, so the file builds for any
 * x86-64 and the instruction only runs when __builtin_cpu_supports says so. */
#include "common/crc32c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define CRC32C_POLY 0x82F63B78u /* 0x1EDC6F41 bit-reversed */

static uint32_t crc32c_table[8][256];
static pthread_once_t crc32c_table_once = PTHREAD_ONCE_INIT;

static void crc32c_table_init(void)
{
	for (uint32_t b = 0; b < 256; b++) {
		uint32_t c = b;
		for (int bit = 0; bit < 8; bit++)
			c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1)));
		crc32c_table[0][b] = c;
	}
	for (uint32_t b = 0; b < 256; b++) {
		uint32_t c = crc32c_table[0][b];
		for (int k = 1; k < 8; k++) {
			c = (c >> 8) ^ crc32c_table[0][c & 0xff]; /* one more zero byte */
			crc32c_table[k][b] = c;
		}
	}
}

/* Little-endian 32-bit load from any alignment (memcpy: no misaligned access
 * for UBSan to report; compilers turn it into one load). */
static inline uint32_t crc32c_load_le32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap32(v);
#endif
	return v;
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc32c_table_once, crc32c_table_init);
	const uint32_t(*t)[256] = (const uint32_t(*)[256])crc32c_table;
	const unsigned char *p = buf;
	uint32_t c = ~crc;
	while (len >= 8) {
		uint32_t lo = c ^ crc32c_load_le32(p);
		uint32_t hi = crc32c_load_le32(p + 4);
		c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
		    t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
	return ~c;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

/* 0: not asked yet, 1: SSE4.2 present, -1: absent. Every thread computes the
 * same answer, so a relaxed store that races with another is harmless. */
static _Atomic int crc32c_hw_state;

bool crc32c_hw_available(void)
{
	int state = atomic_load_explicit(&crc32c_hw_state, memory_order_relaxed);
	if (state == 0) {
		/* __builtin_cpu_init: the CPU model may not be filled in yet if we are
		 * called from another library's constructor. */
		__builtin_cpu_init();
		state = __builtin_cpu_supports("sse4.2") ? 1 : -1;
		atomic_store_explicit(&crc32c_hw_state, state, memory_order_relaxed);
	}
	return state > 0;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t c = ~crc;
	/* Bytes up to an 8-byte boundary, so the main loop's loads stay within
	 * one cache line each. */
	while (len && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, sizeof(w));
		c = _mm_crc32_u64(c, w);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return ~(uint32_t)c;
}
#else
bool crc32c_hw_available(void)
{
	return false;
}

uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	return crc32c_sw(crc, buf, len);
}
#endif

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	/* One relaxed load once the CPU has been asked: cheap next to any buffer. */
	if (crc32c_hw_available())
		return crc32c_hw(crc, buf, len);
	return crc32c_sw(crc, buf, len);
}
