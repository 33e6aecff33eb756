/*
 * tui_term_test.c - top_run_screen on a real pseudo-terminal (forkpty):
 * the child draws a hand-made view with ncurses, the parent reads the
 * screen's bytes, types keys and sends signals, and checks the terminal's
 * modes (ICANON, ECHO) are back as they were on every way out:
 *
 *   - q (replay mode: no question), ^C (the same as q);
 *   - a resize (SIGWINCH) redraws at the new size;
 *   - SIGTERM: top_run_screen returns -EINTR;
 *   - a crash (FSDPSCOPE_TOP_CRASH_KEY=1, key C): the child dies of SIGABRT
 *     with the terminal restored by the crash handler.
 *
 * The parent waits for what it reads (the header's text), never for a
 * time; the timeouts are generous limits only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "tests/unit/tui_views.h"
#include "tui/top.h"

#define WAIT_MS 20000

/* Exit codes of the child: what top_run_screen returned. */
#define CHILD_OK 0
#define CHILD_EINTR 4
#define CHILD_OTHER 9

static void child(int crash_key)
{
	struct tv_feed f;
	struct top_options o = {.delay_ms = 100, .color = 1, .first_rank = -1};
	char err[256];
	int rc;

	if (crash_key)
		setenv("FSDPSCOPE_TOP_CRASH_KEY", "1", 1);
	setenv("TERM", "xterm", 1);
	tv_feed_init(&f, TOP_MODE_REPLAY);
	tv_feed_put(&f, tv_view(4));
	rc = top_run_screen(&f.feed, &o, err, sizeof err);
	_exit(rc == 0 ? CHILD_OK : rc == -EINTR ? CHILD_EINTR : CHILD_OTHER);
}

/* Read the child's output until it holds needle, the child closes its
 * side, or WAIT_MS. 1 seen. */
static int read_until(int fd, const char *needle)
{
	static char buf[1 << 16];
	size_t len = 0;

	for (int waited = 0; waited < WAIT_MS;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 100) == 0) {
			waited += 100;
			continue;
		}
		n = read(fd, buf + len, sizeof buf - 1 - len);
		if (n <= 0)
			return 0;
		len += (size_t)n;
		buf[len] = '\0';
		if (memmem(buf, len, needle, strlen(needle)))
			return 1;
		if (len > sizeof buf / 2) {
			memmove(buf, buf + len - 256, 256);
			len = 256;
		}
	}
	return 0;
}

/* Drain the master until the child has exited; its wait status. */
static int reap(pid_t pid, int fd)
{
	int status;

	while (waitpid(pid, &status, WNOHANG) == 0) {
		char b[4096];
		struct pollfd p = {.fd = fd, .events = POLLIN};

		if (poll(&p, 1, 100) > 0 && read(fd, b, sizeof b) <= 0) {
			assert_int_equal(waitpid(pid, &status, 0), pid);
			return status;
		}
	}
	return status;
}

/* Start the screen on a pty; the terminal's modes before it starts in *before. */
static pid_t start(int *fd, struct termios *before, int crash_key)
{
	struct winsize ws = {.ws_row = 24, .ws_col = 80};
	struct termios t;
	pid_t pid;
	int sync[2];
	char b;

	assert_int_equal(pipe(sync), 0);
	pid = forkpty(fd, NULL, NULL, &ws);
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sync[1]);
		/* wait until the parent has read the modes */
		if (read(sync[0], &b, 1) != 1)
			_exit(CHILD_OTHER);
		child(crash_key);
	}
	close(sync[0]);
	assert_int_equal(tcgetattr(*fd, &t), 0);
	*before = t;
	assert_true(t.c_lflag & ICANON);
	assert_int_equal(write(sync[1], "g", 1), 1);
	close(sync[1]);
	/* The screen is up: its header is drawn and the modes are the screen's. */
	assert_true(read_until(*fd, "RANK"));
	assert_int_equal(tcgetattr(*fd, &t), 0);
	assert_false(t.c_lflag & ICANON);
	assert_false(t.c_lflag & ECHO);
	return pid;
}

static void assert_restored(int fd, const struct termios *before)
{
	struct termios t;

	assert_int_equal(tcgetattr(fd, &t), 0);
	assert_int_equal(t.c_lflag & (ICANON | ECHO | ISIG), before->c_lflag & (ICANON | ECHO | ISIG));
	assert_int_equal(t.c_iflag & ICRNL, before->c_iflag & ICRNL);
}

static void test_quit_key(void **state)
{
	struct termios before;
	int fd, status;
	pid_t pid;

	(void)state;
	pid = start(&fd, &before, 0);
	assert_int_equal(write(fd, "q", 1), 1);
	status = reap(pid, fd);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), CHILD_OK);
	assert_restored(fd, &before);
	close(fd);
}

static void test_interrupt_is_quit(void **state)
{
	struct termios before;
	int fd, status;
	pid_t pid;

	(void)state;
	pid = start(&fd, &before, 0);
	assert_int_equal(write(fd, "\x03", 1), 1); /* ^C: SIGINT to the screen */
	status = reap(pid, fd);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), CHILD_OK);
	assert_restored(fd, &before);
	close(fd);
}

static void test_resize(void **state)
{
	struct winsize ws = {.ws_row = 15, .ws_col = 60};
	struct termios before;
	int fd, status;
	pid_t pid;

	(void)state;
	pid = start(&fd, &before, 0);
	/* a smaller window: the kernel sends SIGWINCH, the screen redraws at 60x15
	 * and says what it hides */
	assert_int_equal(ioctl(fd, TIOCSWINSZ, &ws), 0);
	assert_true(read_until(fd, "terminal 60x15"));
	assert_int_equal(write(fd, "q", 1), 1);
	status = reap(pid, fd);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), CHILD_OK);
	assert_restored(fd, &before);
	close(fd);
}

static void test_sigterm(void **state)
{
	struct termios before;
	int fd, status;
	pid_t pid;

	(void)state;
	pid = start(&fd, &before, 0);
	assert_int_equal(kill(pid, SIGTERM), 0);
	status = reap(pid, fd);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), CHILD_EINTR);
	assert_restored(fd, &before);
	close(fd);
}

static void test_crash(void **state)
{
	struct termios before;
	int fd, status;
	pid_t pid;

	(void)state;
	pid = start(&fd, &before, 1);
	assert_int_equal(write(fd, "C", 1), 1);
	status = reap(pid, fd);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
	assert_restored(fd, &before);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quit_key),
	    cmocka_unit_test(test_interrupt_is_quit),
	    cmocka_unit_test(test_resize),
	    cmocka_unit_test(test_sigterm),
	    cmocka_unit_test(test_crash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
