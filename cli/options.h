/*
 * options.h - a command's options declared once, in tables: each option's
 * long name, short letter, argument, help line and what applies it. The
 * tables drive the parsing (getopt_long underneath) and print the OPTIONS
 * section of the command's help, as perf's parse-options does, so that an
 * option cannot be parsed without being documented or documented without
 * being parsed.
 *
 * A command's options are a list of sets: its own, and shared ones (the
 * session's, cli/session_options.h; the analysis', cli/diagnosis.h). Each
 * set applies its options to its own part of the command's state: a
 * struct at `offset` in the struct the command hands options_parse.
 */
#ifndef FSS_CLI_OPTIONS_H
#define FSS_CLI_OPTIONS_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#include "cli/diagnosis.h"

/* One option; a table of them ends with an entry with neither name nor help. */
struct options_entry {
	const char *name; /* the long name without "--"; NULL: help is a block of help text printed as it is */
	int letter;	  /* the short letter, 0: none */
	const char *arg;  /* the argument's name in the help ("DIR"), NULL: the option takes none */
	const char *help; /* its help, lines split by '\n' (a leading '\n': the help starts below the
			     name); NULL: not in the help (said elsewhere in it) */
	int id;		  /* what apply is given for it */
};

/*
 * What applies one option: ctx is the set's part of the command's state,
 * id the entry's, arg its argument (NULL when it takes none), prog the
 * prefix of what is said ("fsdpscope run"). Returns 0, or -1 for a bad
 * value (said on stderr, prefixed with prog).
 */
typedef int (*options_apply_fn)(void *ctx, int id, const char *arg, const char *prog);

struct options_set {
	const struct options_entry *entries; /* or NULL, with getopt and help */
	const struct option *getopt;	     /* a getopt_long table ({NULL} ended) whose val is the id: for sets
						declared as one (DIAGNOSIS_LONG_OPTIONS) */
	const char *help;		     /* the set's help, printed as it is in place of its entries' (NULL:
						theirs; a getopt table has no other) */
	options_apply_fn apply;
	size_t offset; /* where the set's part is in the command's state */
};

/* What a command's help is made of: OPTIONS comes from its sets. */
struct options_help {
	const char *head; /* NAME, SYNOPSIS, DESCRIPTION, and the "OPTIONS" line */
	const struct options_set *sets;
	size_t nsets;
	int column;	  /* where the options' help begins */
	const char *tail; /* what follows the options (FILES, EXIT STATUS, OVERHEAD, EXAMPLES) */
};

/* An options_help of head, the sets of array sets, column and tail. */
#define OPTIONS_HELP(head_, sets_, column_, tail_)                                                                     \
	{                                                                                                              \
		.head = (head_), .sets = (sets_), .nsets = sizeof(sets_) / sizeof((sets_)[0]), .column = (column_),    \
		.tail = (tail_)                                                                                        \
	}

/* options_parse's answer to -h and --help (below every index of argv). */
#define OPTIONS_HELP_SHOWN (-2)

/* How operands and options mix. */
enum options_order {
	OPTIONS_ANYWHERE,      /* options before and after the operands; "--" ends them */
	OPTIONS_UNTIL_OPERAND, /* the first operand (or "--") ends the options: the rest is CMD's */
};

/*
 * options_parse - parse argv[1..argc) (argv[0]: the command's name) with
 * the sets of h, applying each option to state + its set's offset. -h and
 * --help print h's help on standard output and stop: OPTIONS_HELP_SHOWN
 * (the command then exits 0). With OPTIONS_ANYWHERE the operands are moved
 * after the options, in their order. Returns the index of the first
 * operand (argc when there is none), or -1 when an option is unknown,
 * lacks its value or has a bad one (said on stderr as "fsdpscope CMD:
 * ...", an unknown one always as "unknown option 'WORD' (see 'fsdpscope
 * help CMD')"; -ENOMEM is said so too).
 */
int options_parse(const struct options_help *h, const char *cmd, int argc, char **argv, enum options_order order,
		  void *state);

/* options_print_help - the whole help: head, the options of every set, tail. */
void options_print_help(FILE *f, const struct options_help *h);

/* The analysis options (cli/diagnosis.h: DIAGNOSIS_LONG_OPTIONS) as a set,
 * applied to a struct diagnosis_flags at offset off of the command's state. */
#define OPTIONS_DIAGNOSIS_SET(off)                                                                                     \
	{                                                                                                              \
		.getopt = options_diagnosis_getopt, .help = DIAGNOSIS_OPTIONS_HELP, .apply = options_diagnosis_apply,  \
		.offset = (off)                                                                                        \
	}
extern const struct option options_diagnosis_getopt[];

/* options_diagnosis_apply - an options_apply_fn: diagnosis_option on the
 * struct diagnosis_flags ctx. */
int options_diagnosis_apply(void *ctx, int id, const char *arg, const char *prog);

#endif
