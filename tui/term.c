/*
 * term.c - the terminal, with ncursesw (term.h). The only file that calls
 * ncurses.
 *
 * Signals: ^C, SIGTERM, SIGHUP and SIGWINCH only set a bit and write a
 * byte to a pipe the screen polls (a feed's threads may take the signal,
 * so the pipe, not EINTR, wakes the screen). A crash (SIGSEGV, SIGBUS,
 * SIGFPE, SIGILL, SIGABRT) restores the terminal from the handler, on an
 * alternate stack so a stack overflow is caught too, then takes the
 * default action: endwin is not async-signal-safe, but the process is
 * dying and a terminal left in raw mode is worse (htop does the same).
 */
#include "tui/term.h"

#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "tui/keys.h"

static SCREEN *screen;
static FILE *term_out, *term_in; /* ncurses' own streams on descriptors 1 and 0 */
static volatile sig_atomic_t term_is_open;
static volatile int pending; /* TERM_SIG_* bits, set by handlers, taken atomically */
static int sig_pipe[2] = {-1, -1};
static int color_on, utf8_on;
static char alt_stack[64 * 1024];

static const int soft_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static struct sigaction old_soft[4], old_crash[5];
static stack_t old_stack;

static void close_streams(void)
{
	if (term_out)
		fclose(term_out);
	if (term_in)
		fclose(term_in);
	term_out = term_in = NULL;
}

static void on_soft(int sig)
{
	int saved = errno;
	char b = 1;

	__atomic_fetch_or(&pending,
			  sig == SIGINT	    ? TERM_SIG_INTERRUPT
			  : sig == SIGWINCH ? TERM_SIG_RESIZE
					    : TERM_SIG_TERMINATE,
			  __ATOMIC_SEQ_CST);
	if (sig_pipe[1] >= 0 && write(sig_pipe[1], &b, 1) < 0) {
		/* full: a wake-up is already waiting */
	}
	errno = saved;
}

static void on_crash(int sig)
{
	if (term_is_open) {
		term_is_open = 0;
		endwin();
	}
	/* SA_RESETHAND put the default action back: raise it again (for a fault,
	 * returning re-runs the faulting instruction, which raises it too). */
	signal(sig, SIG_DFL);
	raise(sig);
}

static void at_exit_restore(void)
{
	if (term_is_open) {
		term_is_open = 0;
		endwin();
	}
}

int term_utf8(void)
{
	return utf8_on;
}

int term_color(void)
{
	return color_on;
}

int term_open(int want_color, char *err, size_t errlen)
{
	static int registered;
	struct sigaction sa;
	stack_t ss;
	const char *term = getenv("TERM");

	if (term_is_open)
		return 0;
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		snprintf(err, errlen, "the dashboard needs a terminal (stdin and stdout); use --once for a snapshot");
		return -ENOTTY;
	}
	setlocale(LC_ALL, "");
	setlocale(LC_NUMERIC, "C"); /* figures keep their decimal point */
	utf8_on = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
	/* Streams of our own on the terminal's descriptors: the program's stdout
	 * may be a stream without a descriptor (cli/output.c puts a checked one in
	 * its place), and ncurses needs one. */
	term_out = fdopen(fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3), "w");
	term_in = fdopen(fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3), "r");
	if (!term_out || !term_in) {
		snprintf(err, errlen, "could not open the terminal: %s", strerror(errno));
		close_streams();
		return -EIO;
	}
	screen = newterm(term && term[0] ? term : NULL, term_out, term_in);
	if (!screen) {
		close_streams();
		snprintf(err, errlen, "could not start the terminal (TERM=%s): set TERM, or use --once",
			 term ? term : "");
		return -EIO;
	}
	set_term(screen);
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		endwin();
		delscreen(screen);
		screen = NULL;
		close_streams();
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -errno;
	}
	term_is_open = 1;
	pending = 0;
	if (!registered) {
		atexit(at_exit_restore);
		registered = 1;
	}
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	set_escdelay(25);
	curs_set(0);
	color_on = 0;
	if (want_color && !getenv("NO_COLOR") && has_colors() && start_color() == OK) {
		static const short fg[CANVAS_COLOR_MAX] = {
		    [CANVAS_COLOR_RED] = COLOR_RED,	    [CANVAS_COLOR_GREEN] = COLOR_GREEN,
		    [CANVAS_COLOR_YELLOW] = COLOR_YELLOW,   [CANVAS_COLOR_BLUE] = COLOR_BLUE,
		    [CANVAS_COLOR_MAGENTA] = COLOR_MAGENTA, [CANVAS_COLOR_CYAN] = COLOR_CYAN,
		};

		use_default_colors();
		for (short i = 1; i < CANVAS_COLOR_MAX; i++)
			init_pair(i, fg[i], -1);
		color_on = 1;
	}

	memset(&ss, 0, sizeof ss);
	ss.ss_sp = alt_stack;
	ss.ss_size = sizeof alt_stack;
	sigaltstack(&ss, &old_stack);
	memset(&sa, 0, sizeof sa);
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_soft;
	sa.sa_flags = SA_RESTART;
	for (size_t i = 0; i < sizeof soft_signals / sizeof soft_signals[0]; i++)
		sigaction(soft_signals[i], &sa, &old_soft[i]);
	sa.sa_handler = on_crash;
	sa.sa_flags = SA_RESETHAND | SA_ONSTACK;
	for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
		sigaction(crash_signals[i], &sa, &old_crash[i]);
	return 0;
}

void term_close(void)
{
	if (!screen)
		return;
	for (size_t i = 0; i < sizeof soft_signals / sizeof soft_signals[0]; i++)
		sigaction(soft_signals[i], &old_soft[i], NULL);
	for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
		sigaction(crash_signals[i], &old_crash[i], NULL);
	sigaltstack(&old_stack, NULL);
	if (term_is_open) {
		term_is_open = 0;
		endwin();
	}
	delscreen(screen);
	screen = NULL;
	close_streams();
	close(sig_pipe[0]);
	close(sig_pipe[1]);
	sig_pipe[0] = sig_pipe[1] = -1;
}

void term_size(int *cols, int *rows)
{
	*cols = COLS;
	*rows = LINES;
}

void term_resize(void)
{
	struct winsize ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
		resizeterm(ws.ws_row, ws.ws_col);
	clearok(curscr, TRUE);
}

void term_present(const struct top_canvas *c)
{
	for (int row = 0; row < c->rows && row < LINES; row++) {
		for (int col = 0; col < c->cols && col < COLS; col++) {
			const struct top_cell *cell = canvas_cell(c, row, col);
			attr_t a = A_NORMAL;

			if (cell->attr & CANVAS_BOLD)
				a |= A_BOLD;
			if (cell->attr & CANVAS_REVERSE)
				a |= A_REVERSE;
			if (cell->attr & CANVAS_DIM)
				a |= A_DIM;
			if (color_on && cell->color)
				a |= COLOR_PAIR(cell->color);
			attrset(a);
			/* The last cell of the screen: addstr returns ERR (the cursor cannot
			 * move on), the character is there. */
			mvaddstr(row, col, cell->ch);
		}
	}
	attrset(A_NORMAL);
	wnoutrefresh(stdscr);
	doupdate();
}

int term_key(void)
{
	int ch = getch();

	switch (ch) {
	case ERR:
		return -1;
	case KEY_UP:
		return TOP_KEY_UP;
	case KEY_DOWN:
		return TOP_KEY_DOWN;
	case KEY_LEFT:
		return TOP_KEY_LEFT;
	case KEY_RIGHT:
		return TOP_KEY_RIGHT;
	case KEY_PPAGE:
		return TOP_KEY_PGUP;
	case KEY_NPAGE:
		return TOP_KEY_PGDN;
	case KEY_HOME:
		return TOP_KEY_HOME;
	case KEY_END:
		return TOP_KEY_END;
	case KEY_F(10):
		return TOP_KEY_F10;
	case KEY_ENTER:
	case '\n':
	case '\r':
		return TOP_KEY_ENTER;
	case 27:
		return TOP_KEY_ESC;
	case '\t':
		return TOP_KEY_TAB;
	case KEY_RESIZE:
		return TOP_KEY_RESIZE;
	case 3:
		return TOP_KEY_INTERRUPT;
	default:
		return ch >= 0 && ch < 256 ? ch : 0;
	}
}

int term_signal_fd(void)
{
	return sig_pipe[0];
}

int term_signals(void)
{
	char buf[64];
	int seen;

	while (sig_pipe[0] >= 0 && read(sig_pipe[0], buf, sizeof buf) > 0)
		;
	seen = __atomic_exchange_n(&pending, 0, __ATOMIC_SEQ_CST);
	return seen;
}
