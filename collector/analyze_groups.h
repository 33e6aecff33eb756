/*
 * analyze_groups.h - the result's FSDP groups (analysis_fsdp_group): each
 * group's counts, units, reshard policy and exposure from the headline
 * rank's steady step, and its share of the ledger, which becomes the job's.
 */
#ifndef FSS_COLLECTOR_ANALYZE_GROUPS_H
#define FSS_COLLECTOR_ANALYZE_GROUPS_H

#include "collector/analysis.h"
#include "collector/analyze_comms.h"
#include "collector/analyze_steady.h"
#include "collector/timeline.h"

/*
 * analyze_groups_fill - r->fsdp_groups from the FSDP groups comms decided
 * for the headline rank src, with that rank's steady state h. Reads the
 * communicators table, units, reshard and ledger already in r (the
 * primary's); with several groups adds the others' shares to r->ledger and
 * leaves the notes they need. Call before the exposure section is filled
 * (the breakdown reads the ledger's P). Returns 0 or -ENOMEM.
 */
int analyze_groups_fill(const struct analysis_options *o, const struct tl_source *src, const struct rank_comms *comms,
			const struct rank_steady *h, struct analysis_result *r);

#endif
