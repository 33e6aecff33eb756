/*
 * trace_fuzz.c - libFuzzer target for the trace decoder.
 *
 * The input is fed to a trace parser in pieces whose sizes come from the
 * input's first byte (bit 0: fix the checksums first; bit 1: a salvaging
 * parser, `--salvage`; bits 2-7: the piece size), and every record
 * delivered goes through what `dump` does with it (field table walk, string
 * assembly), so the fuzzer reaches the header checks, the salvage read past
 * a header that does not hold, chunk assembly, the scan past damage, record
 * validation and the string table. What the parser says about the input at
 * the end is checked against itself (gaps within the input, counts that add
 * up): a contradiction traps.
 */
#include "common/crc32c.h"
#include "tests/fuzz/fuzz_checksums.h"
#include "common/error.h"
#include "common/record.h"
#include "common/record_fields.h"
#include "common/strtab.h"
#include "common/trace_parser.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int on_record(void *ctx, const struct fss_record_head *rec)
{
	strtab_t *strings = ctx;
	const struct record_field *f;
	size_t n;
	uint64_t sink = 0;

	if (rec->type == FSS_REC_STRING)
		strtab_add_part(strings, (const void *)rec);
	f = record_fields(rec->type, &n);
	for (size_t i = 0; f && i < n; i++) {
		uint64_t v = record_field_uint(rec, &f[i]);

		if (f[i].kind == FIELD_STRING_ID) {
			const char *s = strtab_get(strings, rec->source, (uint32_t)v);

			sink += s ? strlen(s) : 0;
		} else if (f[i].enum_name) {
			sink += strlen(f[i].enum_name((unsigned)v));
		}
		sink += v;
	}
	return sink == 0x123456789abcdefull; /* never, but keeps the reads */
}

struct fuzz_ctx {
	strtab_t *strings;
	size_t input_len;
	uint64_t gaps;
	uint64_t gap_bytes;
};

static int on_gap(void *ctx, const struct trace_gap *gap)
{
	struct fuzz_ctx *c = ctx;

	if (gap->why[0] == '\0' || gap->offset + gap->bytes > c->input_len)
		__builtin_trap();
	c->gaps++;
	c->gap_bytes += gap->bytes;
	return 0;
}

static int on_record_ctx(void *ctx, const struct fss_record_head *rec)
{
	return on_record(((struct fuzz_ctx *)ctx)->strings, rec);
}

/* After finish: the parser's account of the input agrees with itself. */
static void check_outcome(const trace_parser_t *p, const struct fuzz_ctx *c, int rc)
{
	const struct trace_gap *gaps;
	struct trace_damage damage;
	size_t kept = trace_parser_gaps(p, &gaps);
	int damaged = trace_parser_damage(p, &damage);

	if (damage.gaps != c->gaps || damage.bytes != c->gap_bytes || kept > damage.gaps ||
	    kept > TRACE_PARSER_GAPS_KEPT || damaged != (damage.gaps != 0))
		__builtin_trap();
	if (trace_parser_good_offset(p) > c->input_len || damage.bytes > c->input_len)
		__builtin_trap();
	if (rc == 0 && (damaged || trace_parser_end(p) == TRACE_END_CUT || trace_parser_end(p) == TRACE_END_MISSING))
		__builtin_trap();
	/* a salvaged read is damaged by its header alone, and always a trace */
	if (rc == FSS_E_CORRUPT && trace_parser_input(p) == TRACE_INPUT_TRACE && !damaged &&
	    !trace_parser_salvaged(p, NULL))
		__builtin_trap();
	if (trace_parser_salvaged(p, NULL) &&
	    (rc == 0 || trace_parser_input(p) == TRACE_INPUT_NOT_TRACE || !trace_parser_header(p)))
		__builtin_trap();
	if (trace_parser_input(p) != TRACE_INPUT_TRACE && trace_parser_input(p) != TRACE_INPUT_NO_RECORDS &&
	    trace_parser_records(p) != 0)
		__builtin_trap();
}


int LLVMFuzzerTestOneInput(const uint8_t *input, size_t size)
{
	uint8_t *data = malloc(size ? size : 1);
	struct trace_parser_ops ops = {.on_record = on_record_ctx, .on_gap = on_gap};
	strtab_t *strings = strtab_new();
	struct fuzz_ctx ctx = {.strings = strings, .input_len = size ? size - 1 : 0};
	trace_parser_t *p = trace_parser_new(&ops, &ctx);
	size_t piece, off = 1;
	int err = 0;

	if (!p || !strings || !data || size == 0)
		goto out;
	memcpy(data, input, size);
	if (data[0] & 1)
		fix_checksums(data + 1, size - 1);
	if (data[0] & 2)
		trace_parser_salvage(p);
	piece = (size_t)(data[0] >> 2) * 13 + 1;
	while (off < size && !err) {
		size_t n = size - off < piece ? size - off : piece;

		err = trace_parser_feed(p, data + off, n);
		off += n;
	}
	if (!err) {
		err = trace_parser_finish(p);
		check_outcome(p, &ctx, err);
	}
	(void)trace_parser_error(p);
out:
	free(data);
	trace_parser_free(p);
	strtab_free(strings);
	return 0;
}
