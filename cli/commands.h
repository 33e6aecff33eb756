/*
 * commands.h - the subcommands of the fsdpscope executable.
 *
 * Each lives in its own cli/cmd_<name>.c and exports one entry point and
 * its help, whose OPTIONS come from the command's option tables
 * (cli/options.h); cli/main.c dispatches from its table. `fsdpscope help
 * CMD` and `fsdpscope CMD --help` print the same text: the second is the
 * command's own -h / --help option, which options_parse answers.
 */
#ifndef FSS_CLI_COMMANDS_H
#define FSS_CLI_COMMANDS_H

struct options_help; /* cli/options.h */

struct command {
	const char *name;
	const char *summary;		   /* one line for the command list */
	const struct options_help *help;   /* the man-page-like text, EXAMPLES included */
	int (*run)(int argc, char **argv); /* argv[0] is the command name */
};

/* Exit codes shared by all commands. */
enum {
	EXIT_OK = 0,
	EXIT_FINDING = 1,     /* lint: a finding reached --fail-on */
	EXIT_USAGE = 2,	      /* bad flags or input: not a trace, unreadable, an option that cannot apply;
				 or standard output could not be written (cli/main.c checks it once) */
	EXIT_UNDIAGNOSED = 3, /* lint: no verdict reached (no step, no FSDP group, an unknown pattern) */
	EXIT_INCOMPLETE = 4,  /* lint: diagnosed from a trace that is damaged or cut short, or lost
				 records: no finding reached --fail-on in what was read */
};

int cmd_attach(int argc, char **argv);
extern const struct options_help cmd_attach_help;

int cmd_collect(int argc, char **argv);
extern const struct options_help cmd_collect_help;

int cmd_dump(int argc, char **argv);
extern const struct options_help cmd_dump_help;

int cmd_version(int argc, char **argv);
extern const struct options_help cmd_version_help;

int cmd_export(int argc, char **argv);
extern const struct options_help cmd_export_help;

int cmd_help(int argc, char **argv);
extern const struct options_help cmd_help_help;

int cmd_ledger(int argc, char **argv);
extern const struct options_help cmd_ledger_help;

int cmd_lint(int argc, char **argv);
extern const struct options_help cmd_lint_help;

int cmd_report(int argc, char **argv);
extern const struct options_help cmd_report_help;

int cmd_run(int argc, char **argv);
extern const struct options_help cmd_run_help;

int cmd_top(int argc, char **argv);
extern const struct options_help cmd_top_help;

/* command_find - the table entry for name, NULL if there is none. */
const struct command *command_find(const char *name);

/* command_print_list - "Commands:" and one line per command, to stream f. */
#include <stdio.h>
void command_print_list(FILE *f);

#endif
