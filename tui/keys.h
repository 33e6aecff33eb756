/*
 * keys.h - every key of the dashboard in one table (keys.c): its code, the
 * name the help view shows, its help line and the action it stands for.
 * tui/term.c turns the terminal's keys into these codes; nothing else
 * decides what a key does.
 */
#ifndef FSS_TUI_KEYS_H
#define FSS_TUI_KEYS_H

#include <stddef.h>

/* Key codes: a byte for plain keys, these above 0xff for the others. */
#define TOP_KEY_UP 0x101
#define TOP_KEY_DOWN 0x102
#define TOP_KEY_LEFT 0x103
#define TOP_KEY_RIGHT 0x104
#define TOP_KEY_PGUP 0x105
#define TOP_KEY_PGDN 0x106
#define TOP_KEY_HOME 0x107
#define TOP_KEY_END 0x108
#define TOP_KEY_F10 0x109
#define TOP_KEY_ENTER 0x10a
#define TOP_KEY_ESC 0x10b
#define TOP_KEY_TAB 0x10c
#define TOP_KEY_RESIZE 0x10d	/* the terminal changed size (not in the table: term.c's) */
#define TOP_KEY_INTERRUPT 0x10e /* ^C (SIGINT while the screen runs) */

enum top_action {
	TOP_ACT_NONE = 0,
	TOP_ACT_QUIT,
	TOP_ACT_PAUSE,
	TOP_ACT_SORT_NEXT,
	TOP_ACT_SORT_LEFT,
	TOP_ACT_SORT_RIGHT,
	TOP_ACT_SORT_REVERSE,
	TOP_ACT_RANK,
	TOP_ACT_FINDINGS,
	TOP_ACT_UNITS,
	TOP_ACT_HELP,
	TOP_ACT_NEXT_PANE,
	TOP_ACT_UP,
	TOP_ACT_DOWN,
	TOP_ACT_PAGE_UP,
	TOP_ACT_PAGE_DOWN,
	TOP_ACT_HOME,
	TOP_ACT_END,
	TOP_ACT_OPEN,
	TOP_ACT_CLOSE,
	TOP_ACT_STEP,
	TOP_ACT_CRASH, /* test hook: only with FSDPSCOPE_TOP_CRASH_KEY=1 */
	TOP_ACT_MAX
};

struct top_key {
	int code;	  /* a byte or TOP_KEY_* */
	const char *name; /* as the help view shows it: "q", "F10", "PgUp" */
	int action;	  /* enum top_action */
	const char *help; /* one line; the first key of an action carries it, the others "" */
	int hidden;	  /* 1: not listed (the crash hook) */
};

/* keys_table - the table, n entries in *n. */
const struct top_key *keys_table(size_t *n);

/* keys_action - the action of a key code, TOP_ACT_NONE for a key not in the table. */
int keys_action(int code);

/* keys_help_line - the i-th line of the help view into buf ("q F10 ^C  quit
 * ..."): one line an action, keys of the same action together. Returns
 * buf, or NULL past the last line. */
char *keys_help_line(size_t i, char *buf, size_t len);

#endif
