/*
 * flight_gpu.h - what CUPTI tells the calls in flight: an NCCL kernel tied
 * to its call (by seq, or through a correlation record) completed it and
 * every call before it on its communicator; one not tied yet keeps the calls
 * launched before it from being taken as stuck.
 */
#ifndef FSS_COLLECTOR_FLIGHT_GPU_H
#define FSS_COLLECTOR_FLIGHT_GPU_H

#include "collector/flight_state.h"
#include "common/record.h"

/* flight_gpu_interval - a GPU interval record of source fs (its clock and
 * CUPTI anchor are fs->src's). */
void flight_gpu_interval(struct fl_source *fs, const struct fss_rec_gpu_interval *g);

/* flight_gpu_correlation - a correlation record of source fs: a kernel's
 * CUPTI correlation id -> the collective it ran. */
void flight_gpu_correlation(struct fl_source *fs, const struct fss_rec_correlation *c);

#endif
