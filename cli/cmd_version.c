/*
 * cmd_version.c - fsdpscope version.
 */
#include "cli/commands.h"
#include "cli/options.h"

#include "common/trace_format.h"

#include <stdio.h>

#ifndef FSS_VERSION
#define FSS_VERSION "unknown"
#endif

static const char version_help_text[] =
    "NAME\n"
    "    fsdpscope version - print the version of fsdpscope and of its trace format\n\n"
    "SYNOPSIS\n"
    "    fsdpscope version\n\n"
    "DESCRIPTION\n"
    "    Prints the program version and the trace format version it writes; it\n"
    "    reads traces of the same major format version.\n\n"
    "EXAMPLES\n"
    "    fsdpscope version\n";

/* No option of its own: the table only gives it -h, --help and the one unknown-option wording. */
const struct options_help cmd_version_help = {.head = version_help_text, .tail = ""};

int cmd_version(int argc, char **argv)
{
	int first;

	first = options_parse(&cmd_version_help, "version", argc, argv, OPTIONS_ANYWHERE, NULL);
	if (first < 0) /* or the help, which options_parse printed */
		return first == OPTIONS_HELP_SHOWN ? EXIT_OK : EXIT_USAGE;
	if (first < argc) {
		fprintf(stderr, "fsdpscope version: takes no arguments\n");
		return EXIT_USAGE;
	}
	printf("fsdpscope %s (trace format %d.%d)\n", FSS_VERSION, FSS_FORMAT_MAJOR, FSS_FORMAT_MINOR);
	return EXIT_OK;
}
