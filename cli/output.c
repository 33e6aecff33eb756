/*
 * output.c - standard output, checked (see output.h).
 */
#include "cli/output.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

/* Why a write to standard output failed, from the first failed flush: a
 * buffered write that fails sets the stream's error flag, but its errno is
 * long overwritten by the time the command returns. 0: none seen. */
static int stdout_errno;

/* The write side of the stream output_open puts in place of stdout: the
 * same bytes to the same descriptor, and the errno of the first failure
 * kept, which stdio's own stream forgets when the failing write happens
 * inside a printf whose buffer filled. */
static ssize_t output_write(void *cookie, const char *buf, size_t len)
{
	size_t done = 0;

	(void)cookie;
	while (done < len) {
		ssize_t n = write(STDOUT_FILENO, buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (!stdout_errno)
				stdout_errno = n < 0 ? errno : EIO;
			return done ? (ssize_t)done : -1;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int output_close_fd(void *cookie)
{
	(void)cookie;
	return close(STDOUT_FILENO);
}

int output_open(void)
{
	cookie_io_functions_t io = {.write = output_write, .close = output_close_fd};
	FILE *f = fopencookie(NULL, "w", io);

	if (!f)
		return -errno; /* stdio's stdout stays: only the reason of a failure may be lost */
	if (setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ) != 0) {
		fclose(f);
		return -ENOMEM;
	}
	stdout = f;
	return 0;
}

int output_flush(void)
{
	errno = 0;
	if (fflush(stdout) == 0)
		return 0;
	if (!stdout_errno)
		stdout_errno = errno ? errno : EIO;
	return -stdout_errno;
}

int output_close(void)
{
	int err = 0;

	if (output_flush())
		err = stdout_errno;
	else if (ferror(stdout))
		err = stdout_errno ? stdout_errno : EIO;
	/* A standard output closed before the program started (`>&-`) that
	 * nothing was written to loses nothing: EBADF from its close is no
	 * error then. */
	errno = 0;
	if (fclose(stdout) && !err && errno != EBADF)
		err = errno ? errno : EIO;
	return err;
}
