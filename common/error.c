/*
 * error.c - text for the error values of error.h.
 */
#include "common/error.h"

#include <string.h>

const char *fss_strerror(int err)
{
	switch (err) {
	case 0: return "success";
	case FSS_E_NOT_TRACE: return "not an fsdpscope trace";
	case FSS_E_VERSION: return "unsupported trace format version";
	case FSS_E_TRUNCATED: return "trace was not closed by its writer (it ends inside a chunk, or without its trace_end record)";
	case FSS_E_CORRUPT: return "trace is damaged (checksum or structure mismatch)";
	case FSS_E_ENDIAN: return "trace was written on a host of the other byte order";
	case FSS_E_USAGE: return "bad usage";
	default: return err < 0 ? strerror(-err) : "unknown error";
	}
}
