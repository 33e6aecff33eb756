/*
 * output.c - standard output, checked (see output.h).
 */
#include "cli/output.h"

#include <errno.h>
#include <stdio.h>

/* Why a write to standard output failed, from the first failed flush: a
 * buffered write that fails sets the stream's error flag, but its errno is
 * long overwritten by the time the command returns. 0: none seen. */
static int stdout_errno;

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
