/*
 * hang_lines.c - the stderr lines of calls in flight (hang_lines.h).
 */
#include "cli/hang_lines.h"

#include "common/record.h"
#include "rules/flight_text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

/* A collective named on stderr. */
struct said {
	uint64_t comm_id, comm_seq;
	int32_t nranks;
	uint32_t nmissing; /* hangs: ranks missing when said */
	uint8_t op;
	uint8_t ended; /* hangs: enum analysis_wait_end said (its end is said once) */
};

struct hang_lines {
	struct said hangs[HANG_LINES_HANGS_MAX]; /* said, not cleared */
	size_t nhangs;
	struct said mismatches[HANG_LINES_MISMATCHES_MAX];
	size_t nmismatches;
	int mismatches_full; /* the line that further ones go unsaid was written */
};

int hang_lines_new(hang_lines_t **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void hang_lines_free(hang_lines_t *h)
{
	free(h);
}

/* The entry of (comm_id, comm_seq) in list[0..n), NULL when not said. */
static struct said *said(struct said *list, size_t n, uint64_t comm_id, uint64_t comm_seq)
{
	for (size_t i = 0; i < n; i++)
		if (list[i].comm_id == comm_id && list[i].comm_seq == comm_seq)
			return &list[i];
	return NULL;
}

/* Hang k of r is one the rule reports: a wait past the timeout. */
static int reported(const struct analysis_flight *f, uint32_t k)
{
	return f->hangs[k].waited_ns > f->timeout_ns;
}

unsigned hang_lines_update(hang_lines_t *h, const struct analysis_result *r, const findings_t *list, FILE *out)
{
	const struct analysis_flight *f = &r->flight;
	uint32_t nh = f->nhangs < ANALYSIS_HANGS_MAX ? f->nhangs : ANALYSIS_HANGS_MAX;
	uint32_t nm = f->nmismatches < ANALYSIS_MISMATCHES_MAX ? f->nmismatches : ANALYSIS_MISMATCHES_MAX;
	int hang_rule = findings_find(list, "collective-hang") != NULL;
	char line[1024], comm[160];
	unsigned lines = 0;

	for (uint32_t i = 0; hang_rule && i < nh; i++) {
		const struct analysis_hang *g = &f->hangs[i];
		struct said *was = said(h->hangs, h->nhangs, g->comm_id, g->comm_seq);

		if (!reported(f, i))
			continue;
		if (was && g->ended && !was->ended) {
			/* the job's timeout or death ended the waits: the end of the
			 * hang, not its clearing; the verdict keeps it */
			was->ended = g->ended;
			fprintf(out,
				"fsdpscope: collective-hang ended: collective #%" PRIu64
				" (%s) of communicator %s: %s; "
				"the hang stays in the verdict\n",
				g->comm_seq, record_op_name(g->op),
				flight_comm_text(r, g->comm_id, g->nranks, comm, sizeof(comm)),
				flight_hang_end_text(g, line, sizeof(line)));
			lines++;
		}
		if (was || h->nhangs == HANG_LINES_HANGS_MAX)
			continue;
		h->hangs[h->nhangs++] = (struct said){g->comm_id, g->comm_seq, g->nranks, g->nmissing, g->op, g->ended};
		fprintf(out, "fsdpscope: collective-hang: %s\n", flight_hang_line(r, g, line, sizeof(line)));
		lines++;
	}
	for (size_t i = 0; f->hangs_total <= nh && i < h->nhangs;) {
		const struct said *g = &h->hangs[i];
		int held = 0;

		for (uint32_t k = 0; hang_rule && k < nh; k++)
			held |=
			    f->hangs[k].comm_id == g->comm_id && f->hangs[k].comm_seq == g->comm_seq && reported(f, k);
		if (held) {
			i++;
			continue;
		}
		/* a wait that ended past the timeout stays a hang: one that goes
		 * is one the missing ranks joined */
		fprintf(out,
			"fsdpscope: collective-hang cleared: collective #%" PRIu64 " (%s) of communicator %s: %s, no "
			"rank waits in it past --hang-timeout any more\n",
			g->comm_seq, record_op_name(g->op),
			flight_comm_text(r, g->comm_id, g->nranks, comm, sizeof(comm)),
			g->nmissing > 1	   ? "the missing ranks arrived"
			: g->nmissing == 1 ? "the missing rank arrived"
					   : "the ranks came out of it");
		lines++;
		h->hangs[i] = h->hangs[--h->nhangs];
	}
	if (!findings_find(list, "collective-mismatch"))
		return lines;
	for (uint32_t i = 0; i < nm; i++) {
		const struct analysis_mismatch *m = &f->mismatches[i];

		if (said(h->mismatches, h->nmismatches, m->comm_id, m->comm_seq))
			continue;
		if (h->nmismatches == HANG_LINES_MISMATCHES_MAX) {
			if (!h->mismatches_full) {
				fprintf(out,
					"fsdpscope: collective-mismatch: %d mismatches said; further ones are in the "
					"report at the end\n",
					HANG_LINES_MISMATCHES_MAX);
				lines++;
			}
			h->mismatches_full = 1;
			break;
		}
		h->mismatches[h->nmismatches++] = (struct said){m->comm_id, m->comm_seq, m->nranks, 0, m->a.op, 0};
		fprintf(out, "fsdpscope: collective-mismatch: %s\n", flight_mismatch_line(r, m, line, sizeof(line)));
		lines++;
	}
	return lines;
}
