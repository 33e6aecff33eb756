/*
 * error.h - error values shared by the layers.
 *
 * Functions return 0 on success and a negative value on failure: a negative
 * errno for system errors, or one of the FSS_E_* codes below for problems
 * with data. Messages for users are worded once, at the CLI, from these
 * values plus the detail a module keeps (e.g. trace_parser_error()).
 */
#ifndef FSS_COMMON_ERROR_H
#define FSS_COMMON_ERROR_H

enum fss_error {
	FSS_E_NOT_TRACE = -10001, /* no fsdpscope magic at the start */
	FSS_E_VERSION = -10002,   /* a major version this reader does not know */
	FSS_E_TRUNCATED = -10003, /* input ended inside a header or chunk */
	FSS_E_CORRUPT = -10004,   /* checksum or structure does not hold */
	FSS_E_ENDIAN = -10005,    /* written on a host of the other byte order */
	FSS_E_USAGE = -10006,     /* bad arguments or flags */
};

/* fss_strerror - a short text for an FSS_E_* or negative errno value. */
const char *fss_strerror(int err);

#endif
