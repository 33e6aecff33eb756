/*
 * main.c - the fsdpscope executable: a table of subcommands.
 */
#include "cli/commands.h"
#include "cli/output.h"

#include <stdio.h>
#include <string.h>

static const struct command commands[] = {
    {"attach", "diagnose a running job started without fsdpscope (eBPF uprobes)", &cmd_attach_help, cmd_attach},
    {"collect", "a collector for ranks a launcher starts itself (torchrun, srun, mpirun)", &cmd_collect_help,
     cmd_collect},
    {"dump", "print every record of a trace as JSON lines", &cmd_dump_help, cmd_dump},
    {"export", "write a trace as a Perfetto timeline or as PyTorch profiler (Kineto) files", &cmd_export_help,
     cmd_export},
    {"help", "show help for fsdpscope or one command", &cmd_help_help, cmd_help},
    {"ledger", "plan FSDP memory and wire bytes: persistent, transient, peak, headroom", &cmd_ledger_help, cmd_ledger},
    {"lint", "check a trace against the wrap, overlap and memory rules (CI gate)", &cmd_lint_help, cmd_lint},
    {"report", "the whole diagnosis of a trace, as text or JSON", &cmd_report_help, cmd_report},
    {"run", "run a job with the agent and record one trace", &cmd_run_help, cmd_run},
    {"top", "the dashboard: watch a job, a running session or a recorded trace", &cmd_top_help, cmd_top},
    {"version", "print the version and the trace format version", &cmd_version_help, cmd_version},
};

const struct command *command_find(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

void command_print_list(FILE *f)
{
	fprintf(f, "Commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

/*
 * finish - standard output checked once for every command (cli/output.h):
 * rc when all that was written reached it, else EXIT_USAGE, said on stderr,
 * so that a full disk is never output cut short behind a success.
 */
static int finish(int rc)
{
	int err = output_close();

	if (!err)
		return rc;
	fprintf(stderr, "fsdpscope: writing standard output: %s\n", strerror(err));
	return EXIT_USAGE;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: fsdpscope COMMAND [ARGS...]\n\n"
		   "fsdpscope profiles sharded (FSDP / ZeRO-3) training jobs: it counts and times\n"
		   "every NCCL collective and tells when the wrap policy or the overlap is wrong.\n\n");
	command_print_list(f);
	fprintf(f, "\nRun 'fsdpscope help COMMAND' (or 'fsdpscope COMMAND --help') for details.\n");
}

int main(int argc, char **argv)
{
	const struct command *cmd;

	(void)output_open(); /* without it, only a write failure's reason may be lost */
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return finish(EXIT_OK);
	}
	if (strcmp(argv[1], "--version") == 0)
		return finish(cmd_version(1, &argv[1]));
	cmd = command_find(argv[1]);
	if (!cmd) {
		fprintf(stderr, "fsdpscope: '%s' is not a command.\n\n", argv[1]);
		command_print_list(stderr);
		return EXIT_USAGE;
	}
	/* -h and --help are each command's options (cli/options.h), so that
	 * run's stop at CMD: from there on every word is the job's. */
	return finish(cmd->run(argc - 1, argv + 1));
}
