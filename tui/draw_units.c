/*
 * draw_units.c - the units view: the forward gather sequence of the
 * headline rank grouped by repeating unit, one row a unit copy with a mark
 * per gather (a per-Linear wrap shows 8 marks a row where a per-block one
 * shows 1), or why there are no units; and the communicator roles.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "collector/analysis.h"
#include "rules/rules.h"
#include "tui/draw.h"

/* A run of consecutive gathers of one unit copy (or of the root). */
struct group {
	uint32_t unit;
	uint32_t first, count;
	uint64_t bytes; /* gathered (output, all ranks), as lint counts them */
};

/* A gather's output bytes: per rank x its communicator's ranks (a session
 * of an older build sends no nranks: per rank then, as it was). */
static uint64_t gathered(const struct live_gather *g)
{
	return g->bytes * (g->nranks ? g->nranks : 1);
}

static size_t groups_of(const struct live_job *j, struct group *g, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < j->ngathers && i < LIVE_GATHERS_MAX; i++) {
		if (n > 0 && g[n - 1].unit == j->gathers[i].unit) {
			g[n - 1].count++;
			g[n - 1].bytes += gathered(&j->gathers[i]);
			continue;
		}
		if (n == max)
			break;
		g[n].unit = j->gathers[i].unit;
		g[n].first = (uint32_t)i;
		g[n].count = 1;
		g[n].bytes = gathered(&j->gathers[i]);
		n++;
	}
	return n;
}

static const char *undecided_words(int reason)
{
	switch (reason) {
	case ANALYSIS_UNDECIDED_NO_COLLECTIVES:
		return "no collective seen yet";
	case ANALYSIS_UNDECIDED_NO_FSDP:
		return "no communicator carries both AllGathers and ReduceScatters";
	case ANALYSIS_UNDECIDED_NO_STEP:
		return "no repeating training step yet";
	case ANALYSIS_UNDECIDED_NO_REDUCTION:
		return "steps without ReduceScatters: forward and backward cannot be told";
	case ANALYSIS_UNDECIDED_PATTERN:
		return "gathers and reduce-scatters that match no known pattern";
	case ANALYSIS_UNDECIDED_INCOMPLETE:
		return "every step lost collectives or was cut off";
	default:
		return "not known";
	}
}


/* The units' title line; 1 when there are units to list. */
static int units_title(const struct live_view *v, char *buf, size_t len)
{
	const struct live_job *j = &v->job;

	if (!j->diagnosed) {
		snprintf(buf, len, "units: no diagnosis yet");
		return 0;
	}
	if (j->verdict == ANALYSIS_BUCKETED) {
		snprintf(buf, len,
			 "no units: verdict %s: gathers follow fetch buckets (DeepSpeed ZeRO-3), not modules; %u "
			 "AllGathers per step",
			 analysis_verdict_name(j->verdict), j->allgathers_per_step);
		return 0;
	}
	if (j->verdict != ANALYSIS_DIAGNOSED) {
		snprintf(buf, len, "no units: verdict %s (%s): %s", analysis_verdict_name(j->verdict),
			 analysis_undecided_name(j->undecided_reason), undecided_words(j->undecided_reason));
		return 0;
	}
	if (j->repeating_units == 0) {
		snprintf(buf, len, "no units: no repeating unit in the forward gathers (%zu gathers)", j->ngathers);
		return 0;
	}
	snprintf(buf, len, "%u gather%s per repeating unit, %u units; %u AllGathers a step; reshard %s",
		 j->gathers_per_unit, j->gathers_per_unit == 1 ? "" : "s", j->repeating_units, j->allgathers_per_step,
		 analysis_reshard_name(j->reshard));
	return 1;
}

static void draw_comms(struct top_canvas *c, const struct live_view *v, int row, int col, int nrows)
{
	int head = ranks_headline(v);
	const struct live_rank *r;

	if (nrows <= 0)
		return;
	if (head < 0 && v->nranks > 0)
		head = 0;
	canvas_put(c, row, col, -1, CANVAS_BOLD | CANVAS_REVERSE, CANVAS_COLOR_NONE,
		   " communicators   role            ranks  rank  entered/left ");
	if (head < 0) {
		canvas_put(c, row + 1, col, -1, 0, CANVAS_COLOR_NONE, " no rank yet");
		return;
	}
	r = &v->ranks[head];
	for (size_t i = 0; i < r->ncomms && (int)i < nrows - 1; i++) {
		const struct live_comm *m = &r->comms[i];

		canvas_printf(c, row + 1 + (int)i, col, -1, m->entered > m->left ? CANVAS_BOLD : 0, CANVAS_COLOR_NONE,
			      " %016" PRIx64 " %-15s %5u %5d  %" PRIu64 "/%" PRIu64 "%s", m->id_hash,
			      analysis_comm_role_name(m->role), m->nranks, m->rank, m->entered, m->left,
			      m->entered > m->left ? " inside" : "");
	}
	if (r->ncomms == 0)
		canvas_put(c, row + 1, col, -1, 0, CANVAS_COLOR_NONE, " none yet");
}

void draw_units(struct top_canvas *c, struct top_state *st, int row, int nrows)
{
	const struct live_view *v = st->view;
	static struct group groups[LIVE_GATHERS_MAX];
	char title[512], a[32];
	size_t ngroups;
	int comm_rows, list_rows, side = c->cols >= 130, list_w = side ? c->cols - 66 : c->cols;

	if (nrows <= 0)
		return;
	if (!v) {
		canvas_put(c, row, 0, -1, 0, CANVAS_COLOR_NONE, "units: no view yet");
		return;
	}
	comm_rows = 0;
	if (!side) {
		int head = ranks_headline(v);
		size_t ncomms = head >= 0 ? v->ranks[head].ncomms : 0;

		comm_rows = (int)ncomms + 1 < nrows / 3 ? (int)ncomms + 1 : nrows / 3;
		if (comm_rows < 2 && nrows >= 6)
			comm_rows = 2;
	}
	list_rows = nrows - comm_rows - 1 - (comm_rows > 0);
	ngroups = units_title(v, title, sizeof title) ? groups_of(&v->job, groups, LIVE_GATHERS_MAX) : 0;
	canvas_put(c, row, 0, list_w, CANVAS_BOLD, CANVAS_COLOR_NONE, title);
	st->page[TOP_PANE_STRIP] = list_rows > 0 ? list_rows : 1;
	if (st->units_scroll > (int)ngroups - list_rows)
		st->units_scroll = (int)ngroups - list_rows;
	if (st->units_scroll < 0)
		st->units_scroll = 0;
	for (int i = 0; i < list_rows && st->units_scroll + i < (int)ngroups; i++) {
		const struct group *g = &groups[st->units_scroll + i];
		const char *name = v->job.gathers[g->first].name;
		char label[24], marks[3 * 17 + 1] = "";
		size_t at = 0;
		int x;

		if (g->unit == UINT32_MAX)
			snprintf(label, sizeof label, "root");
		else
			snprintf(label, sizeof label, "unit %u", g->unit);
		for (uint32_t k = 0; k < g->count && k < 16; k++) {
			const char *m = c->utf8 ? "▮" : "#";

			memcpy(marks + at, m, strlen(m) + 1);
			at += strlen(m);
		}
		if (g->count > 16)
			memcpy(marks + at, "+", 2);
		x = canvas_printf(c, row + 1 + i, 0, list_w, 0, CANVAS_COLOR_NONE, " %-9s ", label);
		canvas_put(c, row + 1 + i, x, list_w - x, 0, c->color ? CANVAS_COLOR_CYAN : 0, marks);
		x += 17; /* the marks' column: 16 gathers and a "+" */
		canvas_printf(c, row + 1 + i, x, list_w - x, 0, CANVAS_COLOR_NONE, " %3u gather%s %7s gathered  %s",
			      g->count, g->count == 1 ? " " : "s", rule_format_bytes((double)g->bytes, a, sizeof a),
			      name[0] ? name : ""); /* lint's figure, in lint's words */
	}
	if ((int)ngroups > list_rows && list_rows > 0)
		canvas_printf(c, row + list_rows, list_w - 22, 22, CANVAS_DIM, CANVAS_COLOR_NONE, " rows %d-%d of %zu ",
			      st->units_scroll + 1, st->units_scroll + list_rows, ngroups);
	if (side)
		draw_comms(c, v, row, c->cols - 64, nrows);
	else
		draw_comms(c, v, row + nrows - comm_rows, 0, comm_rows);
}
