/*
 * draw_findings.c - the findings pane (a summary line, then one line a
 * finding: its heading, as lint heads it) and the box with the selected
 * finding whole, its fix included, in the layout lint prints it in
 * (rules/finding_text.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/finding_text.h"
#include "common/text_buffer.h"
#include "tui/draw.h"

static uint8_t severity_color(int severity)
{
	return severity >= 2 ? CANVAS_COLOR_RED : severity == 1 ? CANVAS_COLOR_YELLOW : CANVAS_COLOR_CYAN;
}

/* draw_heading - finding f's heading on row r from its second cell, the
 * severity in its color and the rule id in bold. */
static void draw_heading(struct top_canvas *c, int r, uint8_t attr, const struct live_finding *f)
{
	struct finding_text_parts p;
	char head[512];
	int severity, id, x;

	finding_text_parts_of_live(f, &p, NULL, 0);
	finding_text_heading(&p, head, sizeof head);
	/* the heading is "SEVERITY ID: ...": its first word, then its second */
	severity = (int)strcspn(head, " ");
	id = head[severity] ? (int)strcspn(head + severity + 1, " ") + 1 : 0;
	x = 1 + canvas_printf(c, r, 1, -1, attr | CANVAS_BOLD, c->color ? severity_color(f->severity) : 0, "%.*s",
			      severity, head);
	x += canvas_printf(c, r, x, -1, attr | CANVAS_BOLD, CANVAS_COLOR_NONE, "%.*s", id, head + severity);
	canvas_put(c, r, x, -1, attr, CANVAS_COLOR_NONE, head + severity + id);
}

char *findings_summary(const struct live_view *v, char *buf, size_t len)
{
	static const char *words[] = {"info", "warning", "error"};
	size_t at = 0, count[3] = {0, 0, 0};
	int parts = 0;

	if (!v || !v->job.diagnosed) {
		snprintf(buf, len, "findings: no diagnosis yet");
		return buf;
	}
	if (v->job.nfindings == 0) {
		snprintf(buf, len, "no findings");
		return buf;
	}
	for (size_t i = 0; i < v->job.nfindings; i++) {
		int s = v->job.findings[i].severity;

		count[s < 0 ? 0 : s > 2 ? 2 : s]++;
	}
	at += (size_t)snprintf(buf + at, len > at ? len - at : 0, "%zu finding%s:", v->job.nfindings,
			       v->job.nfindings == 1 ? "" : "s");
	for (int s = 2; s >= 0; s--) {
		if (!count[s])
			continue;
		at += (size_t)snprintf(buf + at, len > at ? len - at : 0, "%s %zu %s%s", parts++ ? "," : "", count[s],
				       words[s], count[s] == 1 ? "" : "s");
		if (s == 2) {
			/* the errors by name: what to fix first */
			int n = 0;

			for (size_t i = 0; i < v->job.nfindings; i++) {
				if (v->job.findings[i].severity < 2)
					continue;
				at += (size_t)snprintf(buf + at, len > at ? len - at : 0, "%s%s", n++ ? ", " : " (",
						       v->job.findings[i].rule);
			}
			at += (size_t)snprintf(buf + at, len > at ? len - at : 0, ")");
		}
	}
	return buf;
}

void draw_findings(struct top_canvas *c, struct top_state *st, int row, int nrows)
{
	const struct live_view *v = st->view;
	int focused = st->pane == TOP_PANE_FINDINGS, lines = nrows - 1;
	char text[1024];
	size_t n = v ? v->job.nfindings : 0;

	if (nrows <= 0)
		return;
	findings_summary(v, text, sizeof text);
	canvas_put(c, row, 0, -1, CANVAS_BOLD, CANVAS_COLOR_NONE, text);
	{
		/* what the keys do here, where it fits beside the summary */
		const char *hint = focused && lines > 0 ? "  Enter / f: fix" : "  f: findings";
		int w = utf8_cells(hint);

		if (n > 0 && utf8_cells(text) + w <= c->cols)
			canvas_put(c, row, c->cols - w, w, CANVAS_DIM, CANVAS_COLOR_NONE, hint);
	}
	st->page[TOP_PANE_FINDINGS] = lines > 0 ? lines : 1;
	if (n == 0) {
		st->finding_sel = 0;
		return;
	}
	if (st->finding_sel >= (int)n)
		st->finding_sel = (int)n - 1;
	if (lines <= 0)
		return;
	if (st->finding_sel < st->finding_scroll)
		st->finding_scroll = st->finding_sel;
	if (st->finding_sel >= st->finding_scroll + lines)
		st->finding_scroll = st->finding_sel - lines + 1;
	for (int i = 0; i < lines && st->finding_scroll + i < (int)n; i++) {
		int idx = st->finding_scroll + i, r = row + 1 + i;
		uint8_t attr = focused && idx == st->finding_sel ? CANVAS_REVERSE : 0;

		if (attr)
			canvas_fill(c, r, 0, -1, attr, CANVAS_COLOR_NONE, " ");
		draw_heading(c, r, attr, &v->job.findings[idx]);
	}
}

/* The blanks that open the line of `text` holding byte at: a piece of it
 * wrapped onto a row of its own keeps them, if the row has room. */
static size_t wrap_indent(const char *text, size_t at, int width)
{
	size_t start = at, blanks = 0;

	while (start > 0 && text[start - 1] != '\n')
		start--;
	while (text[start + blanks] == ' ')
		blanks++;
	return at > start + blanks && (int)blanks * 2 < width ? blanks : 0;
}

/* The next row of `text` that fits in width cells, from *at: cut at a
 * blank after the line's first word when one is there (not inside its
 * indent), at a newline always, a line's rest under its indent. Returns
 * the bytes of the row into out (NUL-terminated), advancing *at past it;
 * -1 at the text's end. */
static int wrap_line(const char *text, size_t *at, int width, char *out, size_t len)
{
	const char *s = text + *at;
	size_t indent, end = 0, cut = 0, cells = 0;
	int word = 0;

	if (!*s)
		return -1;
	if (width < 1)
		width = 1;
	indent = wrap_indent(text, *at, width);
	width -= (int)indent;
	while (s[end] && s[end] != '\n' && cells < (size_t)width) {
		if (s[end] != ' ')
			word = 1;
		else if (word)
			cut = end;
		end++;
		while ((s[end] & 0xc0) == 0x80)
			end++;
		cells++;
	}
	if (s[end] && s[end] != '\n' && cut > 0)
		end = cut;
	if (indent + end >= len)
		end = len - 1 - indent;
	memset(out, ' ', indent);
	memcpy(out + indent, s, end);
	out[indent + end] = '\0';
	*at += end;
	if (text[*at] == '\n' || text[*at] == ' ')
		(*at)++;
	return (int)(indent + end);
}

/* A finding's lines, each ended by a newline, however many the box's
 * width folds them into. */
static void fix_text_line(void *ctx, const char *indent, const char *text, size_t len)
{
	text_buffer_printf(ctx, "%s%.*s\n", indent, (int)len, text);
}

void draw_fix(struct top_canvas *c, struct top_state *st, int row, int nrows)
{
	const struct live_view *v = st->view;
	const struct live_finding *f;
	int inner = c->cols - 4, lines = nrows - 2, total = 0;
	struct finding_text_parts parts;
	struct text_buffer lines_of = {0};
	char fixes[LIVE_FIX_BYTES], line[LIVE_FIX_BYTES], *text;
	size_t at = 0, len;

	if (nrows < 3 || !v || v->job.nfindings == 0) {
		st->fix_open = 0;
		return;
	}
	if (st->finding_sel >= (int)v->job.nfindings)
		st->finding_sel = (int)v->job.nfindings - 1;
	f = &v->job.findings[st->finding_sel];
	for (int r = row; r < row + nrows; r++)
		canvas_fill(c, r, 0, -1, 0, CANVAS_COLOR_NONE, " ");
	canvas_fill(c, row, 0, -1, CANVAS_REVERSE, CANVAS_COLOR_NONE, " ");
	canvas_printf(c, row, 0, -1, CANVAS_REVERSE | CANVAS_BOLD, CANVAS_COLOR_NONE,
		      " fix: %s (%s)   Esc / f closes, arrows scroll", f->rule, severity_name(f->severity));
	finding_text_parts_of_live(f, &parts, fixes, sizeof fixes);
	finding_text_parts_lines(&parts, 0, inner, fix_text_line, &lines_of);
	if (text_buffer_take(&lines_of, &text, &len) < 0) {
		canvas_put(c, row + 1, 2, inner, 0, CANVAS_COLOR_NONE, "(out of memory: fsdpscope lint shows the fix)");
		return;
	}
	while (wrap_line(text, &at, inner, line, sizeof line) >= 0)
		total++;
	if (st->fix_scroll > total - lines)
		st->fix_scroll = total - lines;
	if (st->fix_scroll < 0)
		st->fix_scroll = 0;
	at = 0;
	for (int i = 0, shown = 0; shown < lines && wrap_line(text, &at, inner, line, sizeof line) >= 0; i++) {
		if (i < st->fix_scroll)
			continue;
		canvas_put(c, row + 1 + shown, 2, inner, 0, CANVAS_COLOR_NONE, line);
		shown++;
	}
	free(text);
	canvas_fill(c, row + nrows - 1, 0, -1, CANVAS_DIM, CANVAS_COLOR_NONE, c->utf8 ? "─" : "-");
	if (total > lines)
		canvas_printf(c, row + nrows - 1, 2, -1, CANVAS_DIM, CANVAS_COLOR_NONE, " lines %d-%d of %d ",
			      st->fix_scroll + 1, st->fix_scroll + lines < total ? st->fix_scroll + lines : total,
			      total);
	st->page[TOP_PANE_STRIP] = lines;
}
