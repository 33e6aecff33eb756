/*
 * draw_strip.c - the time strip: a chosen rank's last step laid along the
 * screen, one cell a time slice, each cell what most of its slice was:
 * exposed communication (a collective with no compute under it), hidden
 * communication (a collective under compute), or compute. Above it the
 * gathers' forward unit numbers, as `report` numbers them.
 *
 * The live view keeps each event's exposed time, not where in the event it
 * fell; the strip puts it at the event's start, where a gather that was
 * not prefetched waits.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/record.h"
#include "tui/draw.h"

enum slice { SLICE_COMPUTE, SLICE_HIDDEN, SLICE_EXPOSED };

static uint64_t overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1)
{
	uint64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;

	return hi > lo ? hi - lo : 0;
}

static enum slice classify(const struct live_rank *r, uint64_t t0, uint64_t t1)
{
	uint64_t comm = 0, exposed = 0, slice = t1 - t0;

	for (size_t i = 0; i < r->nstrip; i++) {
		const struct live_event *e = &r->strip[i];
		uint64_t ex_end =
		    e->start_ns + (e->exposed_ns < e->end_ns - e->start_ns ? e->exposed_ns : e->end_ns - e->start_ns);

		if (e->end_ns <= e->start_ns)
			continue;
		comm += overlap(e->start_ns, e->end_ns, t0, t1);
		exposed += overlap(e->start_ns, ex_end, t0, t1);
	}
	if (comm > slice)
		comm = slice; /* events of several streams overlap */
	if (exposed > comm)
		exposed = comm;
	if (exposed > 0 && exposed >= comm - exposed && exposed >= slice - comm)
		return SLICE_EXPOSED;
	if (comm > 0 && comm - exposed >= slice - comm)
		return SLICE_HIDDEN;
	return SLICE_COMPUTE;
}

void draw_strip(struct top_canvas *c, struct top_state *st, int row, int nrows)
{
	const struct live_view *v = st->view;
	int idx = ranks_strip_index(st, v), width = c->cols, focused = st->pane == TOP_PANE_STRIP;
	static const char *glyph_utf8[] = {"░", "▒", "█"}, *glyph_ascii[] = {".", "=", "#"};
	static const uint8_t colors[] = {CANVAS_COLOR_GREEN, CANVAS_COLOR_BLUE, CANVAS_COLOR_RED};
	const char **glyph = c->utf8 ? glyph_utf8 : glyph_ascii;
	const struct live_rank *r;
	char a[32], b[32];
	uint64_t start, step;
	int last_label = -1;

	if (nrows <= 0)
		return;
	st->page[TOP_PANE_STRIP] = 1;
	if (idx < 0) {
		canvas_put(c, row, 0, -1, CANVAS_BOLD, CANVAS_COLOR_NONE, "time strip: no rank yet");
		return;
	}
	r = &v->ranks[idx];
	start = r->last.start_ns;
	step = r->last.step_ns;
	if (step == 0 || r->nstrip == 0) {
		canvas_printf(c, row, 0, -1, CANVAS_BOLD, CANVAS_COLOR_NONE,
			      "time strip of rank %d: no analysed step yet   (r: next rank)", r->rank);
		return;
	}
	canvas_printf(c, row, 0, -1, CANVAS_BOLD | (focused ? CANVAS_REVERSE : 0), CANVAS_COLOR_NONE,
		      "time strip of rank %d, step %" PRIu32 " (%s, %zu collective%s)", r->rank, r->last.ordinal,
		      fmt_ns(a, sizeof a, step), r->nstrip, r->nstrip == 1 ? "" : "s");
	canvas_put(c, row, c->cols - 14, 14, CANVAS_DIM, CANVAS_COLOR_NONE, "  r: next rank");
	if (nrows < 3)
		return;

	/* Gather numbers above the strip: the forward unit of each AllGather. */
	for (size_t i = 0; i < r->nstrip; i++) {
		const struct live_event *e = &r->strip[i];
		char num[16];
		int x, n;

		if (e->op != FSS_OP_ALLGATHER || e->unit == UINT32_MAX || e->start_ns < start)
			continue;
		x = (int)((double)(e->start_ns - start) * width / (double)step);
		n = snprintf(num, sizeof num, "%u", e->unit);
		if (x <= last_label || x + n > width)
			continue;
		canvas_put(c, row + 1, x, n, CANVAS_DIM, CANVAS_COLOR_NONE, num);
		last_label = x + n;
	}
	for (int x = 0; x < width; x++) {
		uint64_t t0 = start + (uint64_t)((double)step * x / width);
		uint64_t t1 = start + (uint64_t)((double)step * (x + 1) / width);
		enum slice s = t1 > t0 ? classify(r, t0, t1) : SLICE_COMPUTE;

		canvas_put(c, row + 2, x, 1, s == SLICE_EXPOSED ? CANVAS_BOLD : 0, c->color ? colors[s] : 0, glyph[s]);
	}
	if (nrows < 4)
		return;
	canvas_printf(c, row + 3, 0, -1, CANVAS_DIM, CANVAS_COLOR_NONE,
		      "%s exposed comm  %s hidden comm  %s compute  cell %s  numbers: forward unit",
		      glyph[SLICE_EXPOSED], glyph[SLICE_HIDDEN], glyph[SLICE_COMPUTE],
		      fmt_ns(b, sizeof b, step / (uint64_t)width));
}
