/*
 * canvas.c - the grid of cells every view draws into (canvas.h).
 */
#include "tui/canvas.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void cell_blank(struct top_cell *cell)
{
	memset(cell, 0, sizeof *cell);
	cell->ch[0] = ' ';
}

int canvas_new(struct top_canvas **out, int cols, int rows, int utf8)
{
	struct top_canvas *c = calloc(1, sizeof *c);

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->utf8 = utf8;
	if (canvas_resize(c, cols, rows) < 0) {
		free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

void canvas_free(struct top_canvas *c)
{
	if (!c)
		return;
	free(c->cells);
	free(c);
}

int canvas_resize(struct top_canvas *c, int cols, int rows)
{
	struct top_cell *cells;

	if (cols < 1)
		cols = 1;
	if (rows < 1)
		rows = 1;
	cells = calloc((size_t)cols * (size_t)rows, sizeof *cells);
	if (!cells)
		return -ENOMEM;
	free(c->cells);
	c->cells = cells;
	c->cols = cols;
	c->rows = rows;
	canvas_clear(c);
	return 0;
}

void canvas_clear(struct top_canvas *c)
{
	for (size_t i = 0; i < (size_t)c->cols * (size_t)c->rows; i++)
		cell_blank(&c->cells[i]);
}

static struct top_cell *cell_at(const struct top_canvas *c, int row, int col)
{
	if (row < 0 || col < 0 || row >= c->rows || col >= c->cols)
		return NULL;
	return &c->cells[(size_t)row * (size_t)c->cols + (size_t)col];
}

const struct top_cell *canvas_cell(const struct top_canvas *c, int row, int col)
{
	return cell_at(c, row, col);
}

/* The length of the UTF-8 character at s (1..4), 0 when it is not one. */
static int utf8_len(const unsigned char *s)
{
	int n;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0 && s[0] >= 0xc2)
		n = 2;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3;
	else if ((s[0] & 0xf8) == 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	for (int i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

int utf8_cells(const char *text)
{
	const unsigned char *s = (const unsigned char *)text;
	int n = 0;

	while (*s) {
		int l = utf8_len(s);

		s += l ? l : 1;
		n++;
	}
	return n;
}

int canvas_put(struct top_canvas *c, int row, int col, int width, uint8_t attr, uint8_t color, const char *text)
{
	const unsigned char *s = (const unsigned char *)text;
	int written = 0;

	if (row < 0 || row >= c->rows)
		return 0;
	while (*s && (width < 0 || written < width)) {
		int l = utf8_len(s);
		struct top_cell *cell = cell_at(c, row, col);

		if (col >= c->cols)
			break;
		if (cell) {
			memset(cell->ch, 0, sizeof cell->ch);
			if (l == 0 || (l == 1 && (s[0] < 0x20 || s[0] == 0x7f)))
				cell->ch[0] = '?';
			else
				memcpy(cell->ch, s, (size_t)l);
			cell->attr = attr;
			cell->color = color;
			written++;
		}
		s += l ? l : 1;
		col++;
	}
	return written;
}

int canvas_printf(struct top_canvas *c, int row, int col, int width, uint8_t attr, uint8_t color, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return canvas_put(c, row, col, width, attr, color, buf);
}

/* The cells [col, col + n) of row (n < 0: to the row's end) that lie on the
 * canvas, side by side from the one returned; *count gets their number (0:
 * none, and NULL is returned). */
static struct top_cell *row_span(const struct top_canvas *c, int row, int col, int n, int *count)
{
	long long from = col < 0 ? 0 : col, to = n < 0 ? c->cols : (long long)col + n;
	struct top_cell *first;

	if (to > c->cols)
		to = c->cols;
	first = to > from ? cell_at(c, row, (int)from) : NULL;
	*count = first ? (int)(to - from) : 0;
	return first;
}

void canvas_fill(struct top_canvas *c, int row, int col, int n, uint8_t attr, uint8_t color, const char *text)
{
	const unsigned char *s = (const unsigned char *)text;
	int l = utf8_len(s), count;
	struct top_cell *cell = row_span(c, row, col, n, &count);

	for (int i = 0; i < count; i++, cell++) {
		memset(cell->ch, 0, sizeof cell->ch);
		if (l == 0 || s[0] < 0x20)
			cell->ch[0] = ' ';
		else
			memcpy(cell->ch, s, (size_t)l);
		cell->attr = attr;
		cell->color = color;
	}
}

void canvas_attr(struct top_canvas *c, int row, int col, int n, uint8_t attr, uint8_t color)
{
	int count;
	struct top_cell *cell = row_span(c, row, col, n, &count);

	for (int i = 0; i < count; i++, cell++) {
		cell->attr |= attr;
		if (color != CANVAS_COLOR_NONE)
			cell->color = color;
	}
}

char *canvas_row_text(const struct top_canvas *c, int row, char *buf, size_t len)
{
	size_t at = 0, keep = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	for (int col = 0; col < c->cols; col++) {
		const struct top_cell *cell = cell_at(c, row, col);
		size_t l;

		if (!cell)
			break;
		l = strlen(cell->ch);
		if (at + l + 1 > len)
			break;
		memcpy(buf + at, cell->ch, l);
		at += l;
		if (strcmp(cell->ch, " ") != 0)
			keep = at;
	}
	buf[keep] = '\0';
	return buf;
}

int canvas_find(const struct top_canvas *c, int from, const char *needle)
{
	size_t len = (size_t)c->cols * 4 + 1;
	char *buf = malloc(len);
	int found = -1;

	if (!buf)
		return -1;
	for (int row = from < 0 ? 0 : from; row < c->rows; row++) {
		if (strstr(canvas_row_text(c, row, buf, len), needle)) {
			found = row;
			break;
		}
	}
	free(buf);
	return found;
}

int canvas_write_text(const struct top_canvas *c, FILE *f)
{
	size_t len = (size_t)c->cols * 4 + 1;
	char *buf = malloc(len);
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	/* The first failure's errno is the reason (ENOSPC from a full disk),
	 * not a generic EIO. */
	errno = 0;
	for (int row = 0; row < c->rows && !rc; row++)
		if (fprintf(f, "%s\n", canvas_row_text(c, row, buf, len)) < 0)
			rc = errno ? -errno : -EIO;
	free(buf);
	if (!rc && fflush(f) != 0)
		rc = errno ? -errno : -EIO;
	return rc;
}
