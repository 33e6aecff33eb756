/*
 * draw_help.c - the help view: the key table (keys.c), one line an action.
 */
#include <stdio.h>

#include "tui/draw.h"
#include "tui/keys.h"

void draw_help(struct top_canvas *c, struct top_state *st, int row, int nrows)
{
	char line[256];
	int total = 0;

	if (nrows <= 0)
		return;
	while (keys_help_line((size_t)total, line, sizeof line))
		total++;
	canvas_put(c, row, 0, -1, CANVAS_BOLD | CANVAS_REVERSE, CANVAS_COLOR_NONE,
		   " keys                                     (? h or Esc: back)");
	canvas_attr(c, row, 0, -1, CANVAS_REVERSE, CANVAS_COLOR_NONE);
	st->page[TOP_PANE_STRIP] = nrows - 1 > 0 ? nrows - 1 : 1;
	if (st->help_scroll > total - (nrows - 1))
		st->help_scroll = total - (nrows - 1);
	if (st->help_scroll < 0)
		st->help_scroll = 0;
	for (int i = 0; i < nrows - 1 && keys_help_line((size_t)(st->help_scroll + i), line, sizeof line); i++)
		canvas_printf(c, row + 1 + i, 0, -1, 0, CANVAS_COLOR_NONE, " %s", line);
}
