/*
 * step_summaries.h - what a trace written under --keep says of the steps it
 * does not hold in full (docs/keep.md): the step_summary records (15) of
 * `--keep summary`, and the header of `--keep last:N`. The analysis counts
 * them and says so in its notes; its figures come from the steps in full.
 */
#ifndef FSS_COLLECTOR_STEP_SUMMARIES_H
#define FSS_COLLECTOR_STEP_SUMMARIES_H

#include <stddef.h>
#include <stdint.h>

#include "collector/median.h"
#include "common/record.h"

/* All zero: nothing read yet. */
struct step_summaries {
	uint64_t steps;		  /* step_summary records read */
	uint64_t overflowed;	  /* of which summarised unseen (FSS_STEP_SUMMARY_OVERFLOW) */
	uint64_t collectives;	  /* collective records they stand for */
	int has_rank;		  /* rank_lo, rank_hi are set */
	int32_t rank_lo, rank_hi; /* the ranks they came from */
	struct median step_ns;	  /* their step times */
	uint32_t keep_flags;	  /* the header's FSS_FILE_KEEP_* */
	uint32_t keep_steps;	  /* the header's keep_steps */
};

/* step_summaries_add - one step_summary record. */
void step_summaries_add(struct step_summaries *s, const struct fss_rec_step_summary *r);

/*
 * step_summaries_note - the line the report shows for what the trace left
 * out: "120 steps summarised ..." or "the trace holds the last N steps ...",
 * into buf. Returns 1 with a line, 0 when the trace holds every step.
 */
int step_summaries_note(const struct step_summaries *s, char *buf, size_t len);

#endif
