/*
 * step_summaries.c - the --keep policy as a reader of its trace sees it
 * (step_summaries.h).
 */
#include "collector/step_summaries.h"

#include <stdio.h>

#include "common/trace_format.h"

void step_summaries_add(struct step_summaries *s, const struct fss_rec_step_summary *r)
{
	s->steps++;
	s->overflowed += (r->flags & FSS_STEP_SUMMARY_OVERFLOW) != 0;
	s->collectives += r->collectives;
	if (r->rank >= 0) {
		if (!s->has_rank) {
			s->has_rank = 1;
			s->rank_lo = s->rank_hi = r->rank;
		}
		if (r->rank < s->rank_lo)
			s->rank_lo = r->rank;
		if (r->rank > s->rank_hi)
			s->rank_hi = r->rank;
	}
	if (r->step_ns)
		median_add(&s->step_ns, r->step_ns);
}

int step_summaries_note(const struct step_summaries *s, char *buf, size_t len)
{
	if (s->steps) {
		char ranks[48] = "";
		if (s->has_rank && s->rank_lo == s->rank_hi)
			snprintf(ranks, sizeof ranks, " of rank %d", s->rank_lo);
		else if (s->has_rank)
			snprintf(ranks, sizeof ranks, " of ranks %d-%d", s->rank_lo, s->rank_hi);
		snprintf(buf, len,
			 "--keep summary: %llu steps%s summarised (median %.1f ms, %llu collectives left out): "
			 "figures from the steps kept in full",
			 (unsigned long long)s->steps, ranks, (double)median_get(&s->step_ns) / 1e6,
			 (unsigned long long)s->collectives);
		return 1;
	}
	if (s->keep_flags & FSS_FILE_KEEP_LAST) {
		snprintf(buf, len,
			 "--keep last:%u: the trace holds the last steps of the run, not its start; calls not matched "
			 "across ranks (no rank skew)",
			 s->keep_steps);
		return 1;
	}
	if (s->keep_flags & FSS_FILE_KEEP_SUMMARY) {
		snprintf(buf, len,
			 "--keep summary: no step was summarised (the run was not longer than its first %u steps)",
			 s->keep_steps);
		return 1;
	}
	return 0;
}
