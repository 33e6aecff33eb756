/*
 * format.c - figures in a few cells, for table cells and header fields.
 */
#include <inttypes.h>
#include <stdio.h>

#include "common/record.h"
#include "tui/draw.h"

char *fmt_ns(char *buf, size_t len, uint64_t ns)
{
	double us = (double)ns / 1e3, ms = (double)ns / 1e6, s = (double)ns / 1e9;

	if (ns < 1000)
		snprintf(buf, len, "%" PRIu64 "ns", ns);
	else if (us < 999.5)
		snprintf(buf, len, "%.0fus", us);
	else if (ms < 99.95)
		snprintf(buf, len, "%.1fms", ms);
	else if (ms < 999.5)
		snprintf(buf, len, "%.0fms", ms);
	else if (s < 9.995)
		snprintf(buf, len, "%.2fs", s);
	else if (s < 99999.5)
		snprintf(buf, len, "%.0fs", s);
	else
		snprintf(buf, len, "%.0fh", s / 3600.0);
	return buf;
}

char *fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *unit[] = {"B", "KB", "MB", "GB", "TB", "PB"};
	double v = (double)bytes;
	int u = 0;

	while (v >= 999.5 && u < 5) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 "B", bytes);
	else
		snprintf(buf, len, v < 9.95 ? "%.1f%s" : "%.0f%s", v, unit[u]);
	return buf;
}

char *fmt_count(char *buf, size_t len, double n)
{
	if (n < 999.5)
		snprintf(buf, len, "%.0f", n);
	else if (n < 999.5e3)
		snprintf(buf, len, n < 9.995e3 ? "%.2fk" : "%.1fk", n / 1e3);
	else if (n < 999.5e6)
		snprintf(buf, len, "%.1fM", n / 1e6);
	else
		snprintf(buf, len, "%.1fG", n / 1e9);
	return buf;
}

const char *op_short(int op)
{
	switch (op) {
	case FSS_OP_ALLGATHER:
		return "AG";
	case FSS_OP_REDUCESCATTER:
		return "RS";
	case FSS_OP_ALLREDUCE:
		return "AR";
	case FSS_OP_BROADCAST:
		return "BC";
	case FSS_OP_REDUCE:
		return "RD";
	case FSS_OP_SEND:
		return "SD";
	case FSS_OP_RECV:
		return "RV";
	case FSS_OP_ALLTOALL:
		return "AA";
	case FSS_OP_GATHER:
		return "GA";
	case FSS_OP_SCATTER:
		return "SC";
	default:
		return "??";
	}
}

const char *op_long(int op)
{
	return record_op_name((uint8_t)op);
}

/* The values of enum rule_severity (rules/findings.h): the screen draws the
 * live view's numbers and needs no rules. */
const char *severity_name(int severity)
{
	switch (severity) {
	case 0:
		return "info";
	case 1:
		return "warning";
	case 2:
		return "error";
	default:
		return "unknown";
	}
}
