/*
 * collect_stream.h - one simulated rank's record stream, as the agent would
 * send it, for the collector's load and memory benchmarks.
 *
 * A stream is what an agent in an FSDP job sends on its connection: its
 * process_hello, a sink record (the first socket sink of the process) and
 * the preamble (strings, the world communicator's init, a clock anchor),
 * then per training step the collectives of an FSDP schedule over `layers`
 * units and one NVTX step range:
 *
 *   forward   AllGather of unit 0 .. L-1
 *   backward  for unit L-1 .. 0: AllGather, then its ReduceScatter
 *   then      one AllReduce (the loss)
 *
 * that is 3 L + 1 collectives and one "step N" range per step, the range
 * emitted after the step's last collective (an NVTX range is recorded when
 * it closes). Step range names come from a fixed pool of interned strings,
 * so the stream's strings do not grow with its length. A stream can drop
 * collectives the way the agent does when its ring is full (the call
 * numbers advance, nothing is written, the drop is counted in the drops
 * records), and it ends with a drops record and process_end.
 *
 * The caller owns the trace writer (a socket from trace_writer_open_fd or a
 * file); these functions only append to it.
 */
#ifndef FSS_BENCH_COLLECT_STREAM_H
#define FSS_BENCH_COLLECT_STREAM_H

#include <stdint.h>

#include "common/trace_writer.h"

/* Step range names interned per stream ("step 0" .. "step 63", reused). */
#define COLLECT_STREAM_STEP_NAMES 64

struct collect_stream_config {
	int ranks;	    /* world size: the communicator's nranks */
	int layers;	    /* FSDP units per step (>= 1) */
	uint64_t period_ns; /* time between two collectives' starts in the records' clock */
	uint32_t pid_base;  /* hello.pid = pid_base + rank */
};

struct collect_stream {
	struct collect_stream_config c;
	int rank;
	uint32_t pos;  /* position of the next collective in its step, 0 .. 3 L */
	uint64_t step; /* steps begun */
	uint64_t step_start_ns;
	uint64_t issued;  /* collectives issued (call numbers used), dropped ones included */
	uint64_t written; /* collective records appended */
	uint64_t dropped; /* collectives dropped (collect_stream_drop) */
	uint64_t records; /* records appended, all types */
	uint64_t nvtx;	  /* step ranges appended */
};

/* collect_stream_per_step - collectives per step: 3 layers + 1. */
uint32_t collect_stream_per_step(const struct collect_stream_config *c);

/*
 * collect_stream_begin - set s up for `rank` and append the stream's start
 * (hello, sink, strings, the communicator's init, a clock anchor) with host
 * time now_ns. Returns 0 or the writer's negative errno.
 */
int collect_stream_begin(struct collect_stream *s, trace_writer_t *w, const struct collect_stream_config *c, int rank,
			 uint64_t now_ns);

/*
 * collect_stream_next - append the next collective, entered at t_ns (times
 * must not go backwards), and the step's NVTX range when it completes a
 * step. Returns 0 or the writer's negative errno.
 */
int collect_stream_next(struct collect_stream *s, trace_writer_t *w, uint64_t t_ns);

/*
 * collect_stream_drop - the next n collectives are lost as in a full agent
 * ring: their call numbers are used, nothing is appended (the range of a
 * step whose last collective is dropped is dropped with it).
 * Counted in s->dropped and in the next drops record.
 */
void collect_stream_drop(struct collect_stream *s, uint64_t n);

/* collect_stream_drops - append a drops record (cumulative) at now_ns. 0 or -errno. */
int collect_stream_drops(struct collect_stream *s, trace_writer_t *w, uint64_t now_ns);

/*
 * collect_stream_end - append the last drops record and process_end (its
 * `collectives` = s->issued). The caller then closes the writer. 0 or -errno.
 */
int collect_stream_end(struct collect_stream *s, trace_writer_t *w, uint64_t now_ns);

#endif
