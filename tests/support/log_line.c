/*
 * log_line.c - one numeric field of a log line (log_line.h).
 */
#include "tests/support/log_line.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int log_line_number(const char *line, const char *key, double *out)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *p = strstr(line, pat);
	if (!p)
		return -1;
	char *end;
	*out = strtod(p + strlen(pat), &end);
	return end == p + strlen(pat) ? -1 : 0;
}
