/*
 * analyze_exposure.h - the result's exposure section: the figures of the
 * headline rank's representative step.
 */
#ifndef FSS_COLLECTOR_ANALYZE_EXPOSURE_H
#define FSS_COLLECTOR_ANALYZE_EXPOSURE_H

#include "collector/analysis.h"
#include "collector/analyze_steady.h"

/*
 * analyze_exposure_fill - r's exposure section from the steady state h of
 * the headline rank: every figure of its representative step, so that they
 * add up (the gathers table is the same step's). Without a sampled step
 * only the source is set, the fraction unknown.
 */
void analyze_exposure_fill(const struct rank_steady *h, struct analysis_result *r);

#endif
