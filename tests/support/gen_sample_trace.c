/*
 * gen_sample_trace.c - write a sample trace with every record type.
 *
 * usage: fss_gen_sample_trace OUT [SOURCES [ROUNDS [CHUNK_BYTES]]]
 * Prints the number of records written. Used by the dump test and to seed
 * the fuzzer's corpus.
 */
#include "common/error.h"
#include "common/trace_writer.h"
#include "tests/support/sample_records.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	struct trace_writer_options opts = {0};
	uint32_t sources = 2, rounds = 3;
	trace_writer_t *w;
	uint64_t n = 0;
	int err;

	if (argc < 2) {
		fprintf(stderr, "usage: %s OUT [SOURCES [ROUNDS [CHUNK_BYTES]]]\n", argv[0]);
		return 2;
	}
	if (argc > 2)
		sources = (uint32_t)strtoul(argv[2], NULL, 10);
	if (argc > 3)
		rounds = (uint32_t)strtoul(argv[3], NULL, 10);
	if (argc > 4)
		opts.chunk_payload = (uint32_t)strtoul(argv[4], NULL, 10);
	err = trace_writer_open(&w, argv[1], &opts);
	if (!err)
		err = sample_trace_write(w, sources, rounds, &n);
	if (!err)
		err = trace_writer_close(w);
	if (err) {
		fprintf(stderr, "%s: %s: %s\n", argv[0], argv[1], fss_strerror(err));
		return 1;
	}
	printf("%" PRIu64 "\n", n);
	return 0;
}
