/*
 * export_synth_trace.c - a synthetic fsdp_ref-like trace with CUPTI-like GPU
 * intervals (tests/unit/analysis_synth.c: NCCL kernels tied to their calls
 * by seq and delivered milliseconds later, compute kernels, a CUPTI clock
 * anchor), for the export tests: the kernels' device intervals, and
 * grouped calls that share one kernel.
 *
 *   export_synth_trace PATH [grouped]
 */
#include "tests/unit/analysis_synth.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct synth_config c = {
	    .ranks = 2,
	    .layers = 3,
	    .wrap = "block",
	    .reshard = 1,
	    .prefetch = 1,
	    .steps = 6,
	    .nvtx_steps = 1,
	    .nvtx_compute = 1,
	    .op_ranges = 1,
	    .cupti = 1,
	    .ns_per_element = 2.0,
	    .latency_ns = 20000,
	    .bytes_per_ns = 10.0,
	};
	struct synth_truth truth;

	if (argc < 2) {
		fprintf(stderr, "usage: export_synth_trace PATH [grouped]\n");
		return 2;
	}
	c.grouped = argc > 2 && strcmp(argv[2], "grouped") == 0;
	if (synth_write(argv[1], &c, &truth)) {
		fprintf(stderr, "export_synth_trace: %s: cannot write\n", argv[1]);
		return 1;
	}
	return 0;
}
