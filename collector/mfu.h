/*
 * mfu.h - model FLOPs utilisation with its inputs named.
 *
 * MFU = (model FLOPs of a step / step time) / (peak FLOP/s of one GPU x the
 * GPUs that share the step). The FLOPs come from --model-flops (alias
 * --flops-per-step), else 6 P T with --tokens-per-step and the ledger's
 * P; the peak from --peak-flops, else the device table on the name of the
 * GPU the trace holds (device record, format 1.5; or a PyTorch profiler
 * trace's deviceProperties). Without either, MFU is unknown and the
 * result says which input is missing: never invented.
 */
#ifndef FSS_COLLECTOR_MFU_H
#define FSS_COLLECTOR_MFU_H

#include "collector/analysis.h"

/*
 * mfu_fill - fill r->mfu from the options, r->breakdown (step time, FLOPs),
 * r->ledger.params, r->world_size / r->ranks and r->sources (the device),
 * and set r->breakdown.mfu to the same figure. Needs the breakdown filled.
 */
void mfu_fill(const struct analysis_options *opt, struct analysis_result *r);

#endif
