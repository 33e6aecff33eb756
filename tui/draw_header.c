/*
 * draw_header.c - the header: mode and command, where the job is, the
 * job's figures with a sparkline of the last steps, and the hang banner.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/record.h"
#include "tui/draw.h"

static const char *mode_name(int mode)
{
	switch (mode) {
	case TOP_MODE_RUN:
		return "run";
	case TOP_MODE_CONNECT:
		return "connect";
	case TOP_MODE_REPLAY:
		return "replay";
	case TOP_MODE_ATTACH:
		return "attach";
	default:
		return "top";
	}
}

/* The job's state in words, and the colour that says it. */
static const char *job_words(const struct top_info *in, char *buf, size_t len, uint8_t *color)
{
	*color = CANVAS_COLOR_GREEN;
	switch (in->job_state) {
	case TOP_JOB_RUNNING:
		/* a replay reads a trace: its job is not running now */
		snprintf(buf, len, in->mode == TOP_MODE_REPLAY ? "replaying" : "running");
		break;
	case TOP_JOB_ENDED:
		*color = CANVAS_COLOR_YELLOW;
		if (in->how[0])
			snprintf(buf, len, "job ended: %s", in->how);
		else if (in->exit_status >= 0)
			snprintf(buf, len, "job ended: status %d", in->exit_status);
		else
			snprintf(buf, len, "job ended");
		break;
	case TOP_JOB_DETACHED:
		*color = CANVAS_COLOR_YELLOW;
		snprintf(buf, len, "detached%s%s", in->how[0] ? ": " : "", in->how);
		break;
	default:
		*color = CANVAS_COLOR_YELLOW;
		snprintf(buf, len, in->mode == TOP_MODE_CONNECT ? "session gone" : "state unknown");
		break;
	}
	return buf;
}

int hang_banner(const struct live_view *v, char *buf, size_t len)
{
	const struct analysis_hang *h;
	char who[160] = "", waiters[160] = "", comm[96];
	size_t at = 0;

	buf[0] = '\0';
	if (!v || v->job.flight.nhangs == 0)
		return 0;
	h = &v->job.flight.hangs[0];
	snprintf(comm, sizeof comm, "collective #%" PRIu64 " (%s) of communicator %016" PRIx64, h->comm_seq,
		 op_long(h->op), h->comm_id);
	if (h->nmissing > 0) {
		const struct analysis_flight_rank *m = &h->missing[0];
		const char *host = "";

		for (size_t i = 0; i < v->nranks; i++)
			if (v->ranks[i].source == m->source)
				host = v->ranks[i].host;
		snprintf(who, sizeof who, "rank %d (%s%spid %u)%s", m->global_rank >= 0 ? m->global_rank : m->rank,
			 host, host[0] ? ", " : "", m->pid, h->nmissing > 1 ? " and others" : "");
		if (h->nmissing > 1)
			snprintf(who + strlen(who), sizeof who - strlen(who), " (%u ranks)", h->nmissing);
	}
	for (uint32_t i = 0; i < h->nwaiting && i < ANALYSIS_FLIGHT_RANKS_MAX && at + 16 < sizeof waiters; i++) {
		const struct analysis_flight_rank *w = &h->waiting[i];

		if (i == 6) {
			at += (size_t)snprintf(waiters + at, sizeof waiters - at, " and %u more", h->nwaiting - 6);
			break;
		}
		at += (size_t)snprintf(waiters + at, sizeof waiters - at, "%s%d", i ? ", " : "",
				       w->global_rank >= 0 ? w->global_rank : w->rank);
	}
	if (h->nmissing > 0 && h->ended)
		/* the job's own timeout (or its death) ended the waits: a hang still, in the past */
		snprintf(buf, len, "HANG: %s never entered %s; rank%s %s waited %.0f s, then %s", who, comm,
			 h->nwaiting == 1 ? "" : "s", waiters, (double)h->waited_ns / 1e9,
			 h->ended == ANALYSIS_WAIT_GAVE_UP ? "gave up (NCCL error)" : "died");
	else if (h->nmissing > 0)
		snprintf(buf, len, "HANG: %s has not entered %s; rank%s %s wait%s %.0f s", who, comm,
			 h->nwaiting == 1 ? "" : "s", waiters, h->nwaiting == 1 ? "s" : "", (double)h->waited_ns / 1e9);
	else
		snprintf(buf, len, "HANG: every rank is inside %s and none came out for %.0f s%s", comm,
			 (double)h->waited_ns / 1e9,
			 h->ended == ANALYSIS_WAIT_GAVE_UP ? ", then they gave up (NCCL error)"
			 : h->ended			   ? ", then they died"
							   : "");
	if (v->job.flight.hangs_total > 1)
		snprintf(buf + strlen(buf), len - strlen(buf), " (+%u more hangs)", v->job.flight.hangs_total - 1);
	return 1;
}

/* The cells of the first row of text for a row of `cols` cells: cut at
 * the last blank that fits (or at cols when there is none). */
static int fit_cut(const char *text, int cols, size_t *bytes)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t at = 0, blank = 0;
	int cells = 0, blank_cells = 0;

	while (s[at] && cells < cols) {
		if (s[at] == ' ') {
			blank = at;
			blank_cells = cells;
		}
		at++;
		while ((s[at] & 0xc0) == 0x80)
			at++;
		cells++;
	}
	if (s[at] && blank > 0) {
		*bytes = blank + 1;
		return blank_cells;
	}
	*bytes = at;
	return cells;
}

/* Rows of the hang banner at this width: 1, or 2 when it is longer. */
static int banner_rows(const struct live_view *v, int cols)
{
	char line[1024];

	if (!hang_banner(v, line, sizeof line))
		return 0;
	return utf8_cells(line) > cols ? 2 : 1;
}

int header_rows(const struct top_state *st, int cols)
{
	return 3 + banner_rows(st->view, cols);
}

/* The last steps of rank r as a sparkline of at most n cells into buf. */
static void sparkline(const struct live_rank *r, int n, int utf8, char *buf, size_t len)
{
	static const char *blocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
	static const char ascii[] = "_.-~=+*#";
	size_t first = r->nwindow > (size_t)n ? r->nwindow - (size_t)n : 0, at = 0;
	uint64_t lo = UINT64_MAX, hi = 0;

	buf[0] = '\0';
	for (size_t i = first; i < r->nwindow; i++) {
		if (r->window[i].step_ns < lo)
			lo = r->window[i].step_ns;
		if (r->window[i].step_ns > hi)
			hi = r->window[i].step_ns;
	}
	for (size_t i = first; i < r->nwindow && at + 4 < len; i++) {
		int level = hi > lo ? (int)((double)(r->window[i].step_ns - lo) * 7.0 / (double)(hi - lo) + 0.5) : 3;

		if (utf8) {
			memcpy(buf + at, blocks[level], 3);
			at += 3;
		} else {
			buf[at++] = ascii[level];
		}
		buf[at] = '\0';
	}
}

int draw_header(struct top_canvas *c, const struct top_state *st, int row)
{
	const struct top_info *in = &st->info;
	const struct live_view *v = st->view;
	char line[1024], words[256], a[32];
	uint8_t color;
	int col, head = v ? ranks_headline(v) : -1;
	const char *command = in->command;

	/* Mode line: mode, command, job state; PAUSED and replay position on the
	 * right, kept when the command must be cut. */
	if (!command[0] && v && v->nranks > 0)
		command = v->ranks[0].command;
	job_words(in, words, sizeof words, &color);
	{
		char right[512], pos[64] = "";
		int at, wr;

		if (in->mode == TOP_MODE_REPLAY && in->replay_steps)
			snprintf(pos, sizeof pos, "step %" PRIu64 "/%" PRIu64 "  ", in->replay_step, in->replay_steps);
		else if (in->mode == TOP_MODE_REPLAY)
			snprintf(pos, sizeof pos, "step %" PRIu64 "  ", in->replay_step);
		if (snprintf(right, sizeof right, " %s%s%s ",
			     !st->paused  ? ""
			     : st->missed ? "PAUSED (newer views)  "
					  : "PAUSED  ",
			     pos, words) < 0)
			right[0] = '\0';
		wr = utf8_cells(right);
		canvas_fill(c, row, 0, -1, CANVAS_REVERSE, CANVAS_COLOR_NONE, " ");
		col = canvas_printf(c, row, 0, c->cols - wr, CANVAS_REVERSE | CANVAS_BOLD, CANVAS_COLOR_NONE,
				    " fsdpscope top  %s ", mode_name(in->mode));
		canvas_printf(c, row, col, c->cols - wr - col - 1, CANVAS_REVERSE, CANVAS_COLOR_NONE, " %s ",
			      command[0] ? command : "-");
		at = c->cols - wr < 0 ? 0 : c->cols - wr;
		canvas_put(c, row, at, -1, CANVAS_REVERSE | CANVAS_BOLD, c->color ? color : CANVAS_COLOR_NONE, right);
		if (st->paused)
			canvas_attr(c, row, at + 1, 6, CANVAS_BOLD, c->color ? CANVAS_COLOR_YELLOW : CANVAS_COLOR_NONE);
	}

	/* Figures line. */
	{
		size_t at = 0;
		uint64_t steps = UINT64_MAX, step_ns = 0;
		char spark[3 * 24 + 1] = "";

		/* the steps every rank has completed: the job's step, the one a
		 * replay's position counts (a rank ahead is not the job) */
		for (size_t i = 0; v && i < v->nranks; i++)
			if (v->ranks[i].last.step_ns && v->ranks[i].last.ordinal + 1u < steps)
				steps = v->ranks[i].last.ordinal + 1u;
		if (steps == UINT64_MAX)
			steps = 0;
		if (head >= 0) {
			step_ns = v->ranks[head].last.step_ns;
			sparkline(&v->ranks[head], c->cols >= 100 ? 24 : 12, c->utf8, spark, sizeof spark);
		}
		at += (size_t)snprintf(line + at, sizeof line - at, " ranks %zu", v ? v->nranks : (size_t)0);
		if (in->nodes)
			at += (size_t)snprintf(line + at, sizeof line - at, "  nodes %u", in->nodes);
		at += (size_t)snprintf(line + at, sizeof line - at, "  steps %" PRIu64, steps);
		if (step_ns)
			at += (size_t)snprintf(line + at, sizeof line - at, "  step %s %s",
					       fmt_ns(a, sizeof a, step_ns), spark);
		else
			at += (size_t)snprintf(line + at, sizeof line - at, "  step -");
		if (step_ns && in->tokens_per_step > 0) {
			at += (size_t)snprintf(line + at, sizeof line - at, "  tok/s %s",
					       fmt_count(a, sizeof a, in->tokens_per_step * 1e9 / (double)step_ns));
		}
		if (step_ns && in->peak_flops > 0 && in->flops_per_step > 0)
			at += (size_t)snprintf(line + at, sizeof line - at, "  MFU %.0f%%",
					       100.0 * in->flops_per_step * 1e9 / (double)step_ns / in->peak_flops);
		if (v) {
			size_t drops_at = at + 2;

			at += (size_t)snprintf(line + at, sizeof line - at, "  dropped %" PRIu64,
					       v->job.records_dropped_total);
			canvas_put(c, row + 1, 0, -1, 0, CANVAS_COLOR_NONE, line);
			/* drops stand out: they make every other figure a lower bound */
			if (v->job.records_dropped_total > 0 && drops_at < sizeof line)
				canvas_attr(c, row + 1, utf8_cells(line) - utf8_cells(line + drops_at), -1, CANVAS_BOLD,
					    c->color ? CANVAS_COLOR_YELLOW : CANVAS_COLOR_NONE);
		} else {
			canvas_put(c, row + 1, 0, -1, 0, CANVAS_COLOR_NONE, line);
		}
	}

	/* Where things are: the log (run), the address (connect), the trace (replay). */
	{
		const char *what = in->mode == TOP_MODE_RUN	  ? "log"
				   : in->mode == TOP_MODE_CONNECT ? "session"
				   : in->mode == TOP_MODE_REPLAY  ? "trace"
								  : "source";
		int x = canvas_printf(c, row + 2, 0, -1, CANVAS_DIM, CANVAS_COLOR_NONE, " %s %s", what,
				      in->source[0] ? in->source : "-");

		if (in->trace[0] && in->mode != TOP_MODE_REPLAY)
			canvas_printf(c, row + 2, x, -1, CANVAS_DIM, CANVAS_COLOR_NONE, "  trace %s", in->trace);
	}

	if (hang_banner(v, line, sizeof line)) {
		/* reverse video (red where colour is allowed), over two rows when long */
		uint8_t attr = CANVAS_REVERSE | CANVAS_BOLD, hang_color = c->color ? CANVAS_COLOR_RED : 0;
		int rows = banner_rows(v, c->cols);
		const char *rest = line;

		for (int r = 0; r < rows; r++) {
			size_t bytes;
			int cells = fit_cut(rest, c->cols, &bytes);

			canvas_fill(c, row + 3 + r, 0, -1, attr, hang_color, " ");
			canvas_put(c, row + 3 + r, r ? 2 : 0, r ? -1 : cells, attr, hang_color, rest);
			rest += r ? strlen(rest) : bytes;
		}
		return 3 + rows;
	}
	return 3;
}
