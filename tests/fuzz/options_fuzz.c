/*
 * options_fuzz.c - libFuzzer target for the option parsers: fsdpscope's
 * table-driven one (cli/options.c) with every command's own table, the
 * thresholds' NAME=VALUE syntax (rules/thresholds.c), and fsdp_ref's
 * (fsdp_ref/options.c).
 *
 * The first byte picks the parser (and the command); the rest is argv, its
 * words split at NUL bytes (at most 32). The commands' states start zeroed
 * (as a command's own initialisation would leave most of them); what a
 * parser accepts must then read back: an index within argc. A
 * contradiction traps. Help text and error messages go to stdout and
 * stderr (run with -close_fd_mask=3).
 *
 * Seeds (tests/fuzz/corpus_update.sh): the EXAMPLES lines of the commands'
 * help and fsdp_ref's, split into words.
 */
#include "cli/commands.h"
#include "cli/options.h"
#include "rules/rules.h"

/* fsdp_ref/options.h's types, its parser renamed (options_fuzz_fsdp_ref.c) */
#define options_parse options_parse_fsdp
#define options_usage options_usage_fsdp
#include "fsdp_ref/options.h"
#undef options_parse
#undef options_usage

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARGS_MAX 32

static const struct {
	const char *name;
	const struct options_help *help;
	enum options_order order;
} tables[] = {
    {"attach", &cmd_attach_help, OPTIONS_ANYWHERE}, {"collect", &cmd_collect_help, OPTIONS_ANYWHERE},
    {"dump", &cmd_dump_help, OPTIONS_ANYWHERE},	    {"export", &cmd_export_help, OPTIONS_ANYWHERE},
    {"ledger", &cmd_ledger_help, OPTIONS_ANYWHERE}, {"lint", &cmd_lint_help, OPTIONS_ANYWHERE},
    {"report", &cmd_report_help, OPTIONS_ANYWHERE}, {"run", &cmd_run_help, OPTIONS_UNTIL_OPERAND},
    {"top", &cmd_top_help, OPTIONS_UNTIL_OPERAND},   {"version", &cmd_version_help, OPTIONS_ANYWHERE},
};

/* cli/main.c's table is the executable's; cmd_help asks for it by name. */
const struct command *command_find(const char *name)
{
	(void)name;
	return NULL;
}

void command_print_list(FILE *f)
{
	(void)f;
}

/* A command's state: larger than any command's options struct. */
static _Alignas(64) unsigned char state[1 << 16];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy, *argv[ARGS_MAX + 2];
	int argc = 1, mode, rc;

	if (size < 1)
		return 0;
	mode = data[0];
	copy = malloc(size);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size - 1);
	copy[size - 1] = '\0';
	argv[0] = "fuzz";
	for (size_t at = 0; at < size - 1 && argc <= ARGS_MAX;) {
		argv[argc++] = copy + at;
		at += strlen(copy + at) + 1;
	}
	argv[argc] = NULL;
	if (mode < 0xf0) {
		size_t t = (size_t)mode % (sizeof tables / sizeof tables[0]);
		memset(state, 0, sizeof state);
		rc = options_parse(tables[t].help, tables[t].name, argc, argv, tables[t].order, state);
		if (rc > argc || (rc < 0 && rc != -1 && rc != OPTIONS_HELP_SHOWN))
			__builtin_trap();
	} else if (mode < 0xf8) {
		struct rule_config c;
		double v;

		rule_config_init(&c);
		for (int i = 1; i < argc; i++) {
			if (rule_config_set(&c, argv[i]) == 0)
				for (size_t k = 0; k < RULE_THRESHOLD_COUNT; k++)
					if (!(c.threshold[k] >= 0))
						__builtin_trap(); /* a value taken is in range: never negative or NaN */
			if (rule_parse_number(argv[i], &v) == 0 && !(v >= 0))
				__builtin_trap();
		}
	} else {
		struct fsdp_options o;
		char err[512];

		memset(&o, 0, sizeof o);
		(void)options_parse_fsdp(argc, argv, &o, err, sizeof err);
	}
	free(copy);
	return 0;
}
