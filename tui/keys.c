/*
 * keys.c - the one key table (keys.h). Keys of one action sit together;
 * the first of them carries the help line.
 */
#include "tui/keys.h"

#include <stdio.h>
#include <string.h>

static const struct top_key table[] = {
    {'q', "q", TOP_ACT_QUIT, "quit (run mode: stop the job, or leave it running and recorded)", 0},
    {TOP_KEY_F10, "F10", TOP_ACT_QUIT, "", 0},
    {TOP_KEY_INTERRUPT, "^C", TOP_ACT_QUIT, "", 0},
    {'p', "p", TOP_ACT_PAUSE, "pause: freeze the view (data keeps coming); again: the newest view", 0},
    {' ', "space", TOP_ACT_PAUSE, "", 0},
    {'s', "s", TOP_ACT_SORT_NEXT, "sort the rank table by the next column", 0},
    {'<', "<", TOP_ACT_SORT_LEFT, "sort by the column to the left", 0},
    {'>', ">", TOP_ACT_SORT_RIGHT, "sort by the column to the right", 0},
    {'R', "R", TOP_ACT_SORT_REVERSE, "reverse the sort order", 0},
    {'r', "r", TOP_ACT_RANK, "time strip of the next rank (ranks pane: of the selected row)", 0},
    {'f', "f", TOP_ACT_FINDINGS, "findings pane; again (or Enter): the selected finding's fix", 0},
    {'u', "u", TOP_ACT_UNITS, "units view: forward gathers by repeating unit, communicator roles", 0},
    {'?', "?", TOP_ACT_HELP, "this help", 0},
    {'h', "h", TOP_ACT_HELP, "", 0},
    {TOP_KEY_TAB, "Tab", TOP_ACT_NEXT_PANE, "next pane (ranks, findings, strip)", 0},
    {TOP_KEY_UP, "Up", TOP_ACT_UP, "scroll up / select the previous row", 0},
    {'k', "k", TOP_ACT_UP, "", 0},
    {TOP_KEY_DOWN, "Down", TOP_ACT_DOWN, "scroll down / select the next row", 0},
    {'j', "j", TOP_ACT_DOWN, "", 0},
    {TOP_KEY_PGUP, "PgUp", TOP_ACT_PAGE_UP, "a page up", 0},
    {TOP_KEY_PGDN, "PgDn", TOP_ACT_PAGE_DOWN, "a page down", 0},
    {TOP_KEY_HOME, "Home", TOP_ACT_HOME, "to the first row", 0},
    {TOP_KEY_END, "End", TOP_ACT_END, "to the last row", 0},
    {TOP_KEY_ENTER, "Enter", TOP_ACT_OPEN, "open: the selected finding's fix; the selected rank's strip", 0},
    {TOP_KEY_ESC, "Esc", TOP_ACT_CLOSE, "close the fix, the help or the units view", 0},
    {'n', "n", TOP_ACT_STEP, "replay: the next step", 0},
    /* Test hook (FSDPSCOPE_TOP_CRASH_KEY=1): abort() inside the dashboard, so
     * the tests see the terminal restored after a crash. */
    {'C', "C", TOP_ACT_CRASH, "crash on purpose (test hook)", 1},
};

const struct top_key *keys_table(size_t *n)
{
	*n = sizeof table / sizeof table[0];
	return table;
}

int keys_action(int code)
{
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
		if (table[i].code == code)
			return table[i].action;
	return TOP_ACT_NONE;
}

char *keys_help_line(size_t i, char *buf, size_t len)
{
	size_t n = sizeof table / sizeof table[0], line = 0;

	for (size_t k = 0; k < n; k++) {
		char names[64] = "";

		if (table[k].hidden || table[k].help[0] == '\0')
			continue;
		if (line++ != i)
			continue;
		for (size_t o = k; o < n; o++) {
			if (table[o].action != table[k].action || table[o].hidden)
				continue;
			if (names[0])
				strncat(names, " ", sizeof names - strlen(names) - 1);
			strncat(names, table[o].name, sizeof names - strlen(names) - 1);
		}
		snprintf(buf, len, "%-16s %s", names, table[k].help);
		return buf;
	}
	return NULL;
}
