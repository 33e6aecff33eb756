/*
 * term.h - the terminal (term.c, the only file that calls ncurses): open
 * and close it, put a canvas on it, read keys, and the signals the screen
 * answers (^C, SIGTERM / SIGHUP, SIGWINCH) through a descriptor it polls.
 * The terminal is restored on every way out, a crash of the dashboard
 * included (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL: endwin, then the
 * signal again with its default action).
 */
#ifndef FSS_TUI_TERM_H
#define FSS_TUI_TERM_H

#include <stddef.h>

#include "tui/canvas.h"

/* Signals seen since the last term_signals call. */
#define TERM_SIG_INTERRUPT 0x1 /* SIGINT: ^C */
#define TERM_SIG_TERMINATE 0x2 /* SIGTERM or SIGHUP */
#define TERM_SIG_RESIZE 0x4    /* SIGWINCH */

/* term_open - take the terminal (stdin / stdout): ncursesw, keys without
 * echo or line buffering, no cursor, colour pairs when want_color and the
 * terminal has colours; the signal handlers above. 0, or -ENOTTY (no
 * terminal) / -EIO (ncurses could not start) with a message in err. */
int term_open(int want_color, char *err, size_t errlen);

/* term_close - give the terminal back as it was and the signals' previous
 * handlers. Safe to call twice. */
void term_close(void);

/* term_size - the terminal's size now. */
void term_size(int *cols, int *rows);
/* term_resize - follow the terminal's new size (after TERM_SIG_RESIZE). */
void term_resize(void);
/* term_utf8 - the locale is UTF-8 (block glyphs may be drawn). */
int term_utf8(void);
/* term_color - colour pairs are on. */
int term_color(void);

/* term_present - the canvas on the terminal (only what changed is sent). */
void term_present(const struct top_canvas *c);

/* term_key - the next key (keys.h codes), -1 when none is waiting. */
int term_key(void);

/* term_signal_fd - readable when a signal above came; term_signals drains
 * it and returns the TERM_SIG_* bits seen. */
int term_signal_fd(void);
int term_signals(void);

#endif
