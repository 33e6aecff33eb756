/* crc32c_test: CRC-32C (common/crc32c.h) against published vectors, the
 * incremental property, and the table and SSE4.2 paths against each other. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/crc32c.h"

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

struct impl {
	const char *name;
	crc_fn fn;
};

/* The implementations this CPU can run: always the table and the dispatcher,
 * the instruction when present (said once, so a skip is never silent). */
static size_t impls(struct impl out[3])
{
	size_t n = 0;
	out[n++] = (struct impl){"table", crc32c_sw};
	out[n++] = (struct impl){"dispatch", crc32c};
	if (crc32c_hw_available())
		out[n++] = (struct impl){"sse4.2", crc32c_hw};
	return n;
}

static void test_known_vectors(void **state)
{
	(void)state;
	unsigned char zeros[32], ones[32], ascending[32], descending[32];
	memset(zeros, 0, sizeof(zeros));
	memset(ones, 0xFF, sizeof(ones));
	for (int i = 0; i < 32; i++) {
		ascending[i] = (unsigned char)i;
		descending[i] = (unsigned char)(31 - i);
	}
	struct impl im[3];
	size_t n = impls(im);
	for (size_t i = 0; i < n; i++) {
		print_message("  %s\n", im[i].name);
		assert_int_equal(im[i].fn(0, "123456789", 9), 0xE3069283u);
		/* RFC 3720, appendix B.4 */
		assert_int_equal(im[i].fn(0, zeros, 32), 0x8A9136AAu);
		assert_int_equal(im[i].fn(0, ones, 32), 0x62A8AB43u);
		assert_int_equal(im[i].fn(0, ascending, 32), 0x46DD794Eu);
		assert_int_equal(im[i].fn(0, descending, 32), 0x113FDB5Cu);
		assert_int_equal(im[i].fn(0, NULL, 0), 0);
		assert_int_equal(im[i].fn(0x12345678u, NULL, 0), 0x12345678u);
		assert_int_equal(im[i].fn(0, "a", 1), 0xC1D04330u);
	}
	if (!crc32c_hw_available())
		print_message("  (no SSE4.2 on this CPU: the instruction path is not tested)\n");
}

/* A small deterministic generator, so a failure reproduces. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void test_incremental(void **state)
{
	(void)state;
	unsigned char buf[1000];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)rng_next();
	struct impl im[3];
	size_t n = impls(im);
	for (size_t i = 0; i < n; i++) {
		uint32_t whole = im[i].fn(0, buf, sizeof(buf));
		for (size_t cut = 0; cut <= sizeof(buf); cut += 7) {
			uint32_t part = im[i].fn(0, buf, cut);
			assert_int_equal(im[i].fn(part, buf + cut, sizeof(buf) - cut), whole);
		}
		/* "123456789" in three pieces */
		uint32_t c = im[i].fn(0, "1234", 4);
		c = im[i].fn(c, "5", 1);
		assert_int_equal(im[i].fn(c, "6789", 4), 0xE3069283u);
	}
}

/* Table and instruction agree on random buffers of random lengths at every
 * alignment, including the head/tail byte loops of both. */
static void test_paths_agree_random(void **state)
{
	(void)state;
	if (!crc32c_hw_available()) {
		skip(); /* reported as skipped by cmocka, not passed */
	}
	enum { MAX = 4096 + 64 };
	unsigned char *buf = malloc(MAX + 16);
	assert_non_null(buf);
	for (int iter = 0; iter < 3000; iter++) {
		size_t align = rng_next() % 16;
		size_t len = (iter < 200) ? (size_t)iter : (size_t)(rng_next() % MAX);
		unsigned char *p = buf + align;
		for (size_t i = 0; i < len; i++)
			p[i] = (unsigned char)rng_next();
		uint32_t seed = (iter % 3 == 0) ? 0 : (uint32_t)rng_next();
		uint32_t sw = crc32c_sw(seed, p, len);
		uint32_t hw = crc32c_hw(seed, p, len);
		if (sw != hw)
			fail_msg("len %zu align %zu seed %08x: table %08x, sse4.2 %08x", len, align, seed, sw, hw);
		assert_int_equal(crc32c(seed, p, len), sw);
	}
	free(buf);
}

/* Any single flipped bit changes the CRC (a CRC detects all 1-bit errors). */
static void test_detects_bit_flips(void **state)
{
	(void)state;
	unsigned char buf[256];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)rng_next();
	uint32_t good = crc32c(0, buf, sizeof(buf));
	for (size_t bit = 0; bit < sizeof(buf) * 8; bit++) {
		buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		assert_int_not_equal(crc32c(0, buf, sizeof(buf)), good);
		buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
	assert_int_equal(crc32c(0, buf, sizeof(buf)), good);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_known_vectors),
	    cmocka_unit_test(test_incremental),
	    cmocka_unit_test(test_paths_agree_random),
	    cmocka_unit_test(test_detects_bit_flips),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
