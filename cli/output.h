/*
 * output.h - standard output, checked: every command's output goes through
 * stdio's buffer, so a write that fails (a full disk, /dev/full, a reader
 * gone with SIGPIPE ignored) is seen only as the stream's error flag. The
 * hub (cli/main.c) checks it once when the command returns, as perf's
 * run_builtin does; commands that flush early use output_flush so that the
 * reason is not lost.
 */
#ifndef FSS_CLI_OUTPUT_H
#define FSS_CLI_OUTPUT_H

/*
 * output_open - route stdout through a stream that keeps the errno of the
 * first failed write (stdio loses it when a write fails inside a printf),
 * buffered as stdout is (line-buffered on a terminal). Called once by the
 * hub before any output; the descriptor is the same, so a job that
 * inherits it writes where it always did. Returns 0 or a negative errno
 * (stdout is then left as it was).
 */
int output_open(void);

/*
 * output_flush - flush standard output now (a command does before it
 * writes to stderr, so that the two stay in order), keeping the errno of
 * the first failure for output_close. Returns 0 or a negative errno; a
 * command need not act on it: the hub reports it.
 */
int output_flush(void);

/*
 * output_close - flush and close standard output. Returns 0 when all that
 * was written reached it, else the (positive) errno of the first failure
 * (EIO when stdio kept no reason). Standard output must not be used after.
 */
int output_close(void);

#endif
