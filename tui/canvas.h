/*
 * canvas.h - what the dashboard shows, as a grid of cells (tui/top.h,
 * "Layers"): each cell one character (UTF-8, one column wide) and its
 * attributes. Every view draws into a canvas; tui/term.c puts it on the
 * terminal and `--once` prints it as plain text, so everything the screen
 * shows can be read back by a test without a terminal.
 *
 * Drawing is clipped: text past the right edge or a row outside the grid
 * is dropped, never wrapped.
 */
#ifndef FSS_TUI_CANVAS_H
#define FSS_TUI_CANVAS_H

#include <stdint.h>
#include <stdio.h>

/* Attributes, or-ed. Colour is separate (a pair number). */
#define CANVAS_BOLD 0x01
#define CANVAS_REVERSE 0x02
#define CANVAS_DIM 0x04

/* Colour pairs tui/term.c defines (foreground on the default background). */
enum canvas_color {
	CANVAS_COLOR_NONE = 0,
	CANVAS_COLOR_RED = 1,
	CANVAS_COLOR_GREEN = 2,
	CANVAS_COLOR_YELLOW = 3,
	CANVAS_COLOR_BLUE = 4,
	CANVAS_COLOR_MAGENTA = 5,
	CANVAS_COLOR_CYAN = 6,
	CANVAS_COLOR_MAX
};

struct top_cell {
	char ch[5];    /* one UTF-8 character, NUL-terminated; " " when blank */
	uint8_t attr;  /* CANVAS_* */
	uint8_t color; /* enum canvas_color */
};

struct top_canvas {
	int cols, rows;
	int utf8;		/* 1: block and line glyphs may be used; 0: ASCII only */
	int color;		/* 1: colour pairs are shown (the terminal puts them on screen) */
	struct top_cell *cells; /* rows x cols, row major */
};

/* canvas_new - a blank canvas of cols x rows (each at least 1). 0 or -ENOMEM;
 * free with canvas_free. */
int canvas_new(struct top_canvas **out, int cols, int rows, int utf8);
void canvas_free(struct top_canvas *c);

/* canvas_resize - blank it at a new size. 0 or -ENOMEM (the old grid stays). */
int canvas_resize(struct top_canvas *c, int cols, int rows);

/* canvas_clear - every cell blank, no attributes. */
void canvas_clear(struct top_canvas *c);

/*
 * canvas_put - UTF-8 text at (row, col), one cell per character, with attr
 * and color; control characters and invalid bytes show as '?'. Clipped to
 * the grid and to at most `width` cells (width < 0: to the right edge).
 * Returns the cells written.
 */
int canvas_put(struct top_canvas *c, int row, int col, int width, uint8_t attr, uint8_t color, const char *text);

/* canvas_printf - canvas_put of a formatted text (cut at 1 KiB). */
int canvas_printf(struct top_canvas *c, int row, int col, int width, uint8_t attr, uint8_t color, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* canvas_fill - n cells from (row, col) set to `text`'s first character
 * with attr and color (n < 0: to the right edge). */
void canvas_fill(struct top_canvas *c, int row, int col, int n, uint8_t attr, uint8_t color, const char *text);

/* canvas_attr - or attr into n cells from (row, col) and set their colour
 * when color is not CANVAS_COLOR_NONE (n < 0: to the right edge). */
void canvas_attr(struct top_canvas *c, int row, int col, int n, uint8_t attr, uint8_t color);

/* canvas_cell - the cell at (row, col), NULL outside the grid. */
const struct top_cell *canvas_cell(const struct top_canvas *c, int row, int col);

/* canvas_row_text - row's characters as UTF-8 into buf (len bytes, NUL
 * included), trailing blanks cut. Returns buf. */
char *canvas_row_text(const struct top_canvas *c, int row, char *buf, size_t len);

/* canvas_find - the first row at or after `from` whose text contains
 * needle, -1 none. */
int canvas_find(const struct top_canvas *c, int from, const char *needle);

/* canvas_write_text - the canvas as plain text: one line a row, trailing
 * blanks cut, no escape sequences. 0 or -EIO. */
int canvas_write_text(const struct top_canvas *c, FILE *f);

/* utf8_cells - characters (cells) of a UTF-8 text as canvas_put counts them. */
int utf8_cells(const char *text);

#endif
