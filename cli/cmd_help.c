/*
 * cmd_help.c - fsdpscope help [COMMAND].
 */
#include "cli/commands.h"
#include "cli/options.h"

#include <stdio.h>

static const char help_help_text[] =
    "NAME\n"
    "    fsdpscope help - show help for fsdpscope or one of its commands\n\n"
    "SYNOPSIS\n"
    "    fsdpscope help [COMMAND]\n\n"
    "DESCRIPTION\n"
    "    Without COMMAND, lists the commands. With COMMAND, prints its manual: the\n"
    "    same text as 'fsdpscope COMMAND --help'.\n\n"
    "EXAMPLES\n"
    "    fsdpscope help\n"
    "    fsdpscope help dump\n"
    "    fsdpscope collect --help              # the same text as fsdpscope help collect\n";

/* No option of its own: the table only gives it -h, --help and the one unknown-option wording. */
const struct options_help cmd_help_help = {.head = help_help_text, .tail = ""};

int cmd_help(int argc, char **argv)
{
	const struct command *cmd;
	int first;

	first = options_parse(&cmd_help_help, "help", argc, argv, OPTIONS_ANYWHERE, NULL);
	if (first < 0) /* or the help, which options_parse printed */
		return first == OPTIONS_HELP_SHOWN ? EXIT_OK : EXIT_USAGE;
	argc -= first - 1; /* the command name, then the operands */
	argv += first - 1;
	if (argc < 2) {
		printf("usage: fsdpscope COMMAND [ARGS...]\n\n");
		command_print_list(stdout);
		printf("\nRun 'fsdpscope help COMMAND' for details.\n");
		return EXIT_OK;
	}
	if (argc > 2) {
		fprintf(stderr, "fsdpscope help: give one command name, not %d\n", argc - 1);
		return EXIT_USAGE;
	}
	cmd = command_find(argv[1]);
	if (!cmd) {
		fprintf(stderr, "fsdpscope help: '%s' is not a command.\n\n", argv[1]);
		command_print_list(stderr);
		return EXIT_USAGE;
	}
	options_print_help(stdout, cmd->help);
	return EXIT_OK;
}
