/*
 * analyze_structure.h - the result's structure from the headline rank's
 * steady-state step: its counts, units, reshard policy, the gathers table,
 * the ledger and the sizes of its traffic; what bucketed fetching shows.
 */
#ifndef FSS_COLLECTOR_ANALYZE_STRUCTURE_H
#define FSS_COLLECTOR_ANALYZE_STRUCTURE_H

#include <stddef.h>

#include "collector/analysis.h"
#include "collector/analyze_steady.h"
#include "collector/analyze_summary.h"
#include "collector/ranks.h"
#include "collector/timeline.h"

/*
 * analyze_structure_counts - a step's counts of ev[0..n) (what info says of
 * each): gathers and reduce-scatters of the FSDP group, all-reduces of the
 * data-parallel side (HSDP, loss, norm); the rest (tensor-parallel,
 * pipeline, other communicators) is in `other` and in the per-communicator
 * table.
 */
void analyze_structure_counts(const struct tl_event *ev, const struct ev_info *info, size_t n,
			      struct analysis_step_counts *c);

/*
 * analyze_structure_buckets - what a bucketed job's step ev[0..n) shows (verdict
 * ANALYSIS_BUCKETED): its fetches and reduce buckets, and how many reduce
 * buckets have a gather of their size. Returns 0 or -ENOMEM.
 */
int analyze_structure_buckets(const struct tl_event *ev, const struct ev_info *ti, size_t n,
			      struct analysis_buckets *b);

/*
 * analyze_structure_fill - r's units, reshard, gathers table, ledger and
 * sizes from the steady state h of the headline rank of src, with the
 * options o and the cross-rank skew of each gather from ranks. Reads the
 * verdict, micro-batches, buckets and tp_degree already in r; adds the
 * notes these sections make. Returns 0 or -ENOMEM.
 */
int analyze_structure_fill(const struct analysis_options *o, const ranks_t *ranks, const struct tl_source *src,
			   const struct rank_steady *h, struct analysis_result *r);

#endif
