/*
 * options.c - options declared in tables, parsed and documented from them
 * (cli/options.h).
 */
#include "cli/options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* getopt_long values of long options: above every letter. */
#define OPTIONS_LONG_BASE 0x10000
#define OPTIONS_HELP_VAL (OPTIONS_LONG_BASE - 1)

/* An entry ends its table when it has no name, no letter and no help. */
static int entry_is_end(const struct options_entry *e)
{
	return !e->name && !e->letter && !e->help;
}

/* A block of help text, not an option. */
static int entry_is_text(const struct options_entry *e)
{
	return !e->name && !e->letter;
}

/* One option of the flattened list: where it came from. */
struct flat {
	const struct options_set *set;
	int id;
	int letter;
	int has_arg;
};

static size_t count_options(const struct options_help *h)
{
	size_t n = 0;

	for (size_t i = 0; i < h->nsets; i++) {
		const struct options_set *s = &h->sets[i];

		if (s->entries) {
			for (const struct options_entry *e = s->entries; !entry_is_end(e); e++)
				n += !entry_is_text(e);
		} else {
			for (const struct option *o = s->getopt; o && o->name; o++)
				n++;
		}
	}
	return n;
}

/* The getopt_long tables of h's sets: lo (long options), shorts, and what each value is. */
static int build(const struct options_help *h, enum options_order order, struct option **lo, char **shorts,
		 struct flat **flat, size_t *nflat)
{
	size_t n = count_options(h), k = 0, nl = 0, ns = 0;

	*lo = calloc(n + 2, sizeof(**lo));
	*shorts = calloc(2 * n + 8, 1);
	*flat = calloc(n + 1, sizeof(**flat));
	if (!*lo || !*shorts || !*flat)
		return -ENOMEM;
	if (order == OPTIONS_UNTIL_OPERAND)
		(*shorts)[ns++] = '+';
	(*shorts)[ns++] = ':'; /* a missing value is told from an unknown option */
	(*shorts)[ns++] = 'h';
	(*lo)[nl++] = (struct option){"help", no_argument, NULL, OPTIONS_HELP_VAL};
	for (size_t i = 0; i < h->nsets; i++) {
		const struct options_set *s = &h->sets[i];

		for (const struct options_entry *e = s->entries; e && !entry_is_end(e); e++) {
			if (entry_is_text(e))
				continue;
			(*flat)[k] = (struct flat){s, e->id, e->letter, e->arg != NULL};
			if (e->name)
				(*lo)[nl++] = (struct option){e->name, e->arg ? required_argument : no_argument, NULL,
							      OPTIONS_LONG_BASE + (int)k};
			if (e->letter) {
				(*shorts)[ns++] = (char)e->letter;
				if (e->arg)
					(*shorts)[ns++] = ':';
			}
			k++;
		}
		for (const struct option *o = s->entries ? NULL : s->getopt; o && o->name; o++) {
			(*flat)[k] = (struct flat){s, o->val, 0, o->has_arg != no_argument};
			(*lo)[nl++] = (struct option){o->name, o->has_arg, NULL, OPTIONS_LONG_BASE + (int)k};
			k++;
		}
	}
	*nflat = k;
	return 0;
}

static void options_unknown(const char *cmd, const char *word)
{
	fprintf(stderr, "fsdpscope %s: unknown option '%s' (see 'fsdpscope help %s')\n", cmd, word, cmd);
}

/* The option getopt_long returned as opt: its entry in flat, NULL when none. */
static const struct flat *find(const struct flat *flat, size_t n, int opt)
{
	if (opt >= OPTIONS_LONG_BASE && (size_t)(opt - OPTIONS_LONG_BASE) < n)
		return &flat[opt - OPTIONS_LONG_BASE];
	for (size_t i = 0; i < n; i++)
		if (flat[i].letter && flat[i].letter == opt)
			return &flat[i];
	return NULL;
}

int options_parse(const struct options_help *h, const char *cmd, int argc, char **argv, enum options_order order,
		  void *state)
{
	struct option *lo = NULL;
	struct flat *flat = NULL;
	char *shorts = NULL, prog[64];
	size_t nflat = 0;
	int opt, rc = -1;

	snprintf(prog, sizeof(prog), "fsdpscope %s", cmd);
	if (build(h, order, &lo, &shorts, &flat, &nflat)) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto out;
	}
	optind = 0; /* GNU getopt: start afresh (its permutation state too) */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		const struct flat *f = find(flat, nflat, opt);

		if (opt == 'h' || opt == OPTIONS_HELP_VAL) {
			options_print_help(stdout, h);
			rc = OPTIONS_HELP_SHOWN;
			goto out;
		}
		if (opt == ':') {
			fprintf(stderr, "%s: option '%s' needs a value (see 'fsdpscope help %s')\n", prog,
				argv[optind - 1], cmd);
			goto out;
		}
		if (!f) {
			options_unknown(cmd, argv[optind - 1]);
			goto out;
		}
		if (f->set->apply((char *)state + f->set->offset, f->id, f->has_arg ? optarg : NULL, prog))
			goto out;
	}
	rc = optind;
out:
	free(lo);
	free(shorts);
	free(flat);
	return rc;
}

/* One option's help: its names at 4, its help at column (below them when they reach it). */
static void print_entry(FILE *f, const struct options_entry *e, int column)
{
	const char *line = e->help, *nl;
	int n = fprintf(f, "    ");

	if (e->letter)
		n += fprintf(f, "-%c%s", e->letter, e->name ? ", " : "");
	if (e->name)
		n += fprintf(f, "--%s", e->name);
	if (e->arg)
		n += fprintf(f, " %s", e->arg);
	if (*line == '\n') {
		fputc('\n', f);
		line++;
	} else {
		fprintf(f, "%*s", n + 2 > column ? 2 : column - n, "");
		nl = strchr(line, '\n');
		fprintf(f, "%.*s\n", nl ? (int)(nl - line) : (int)strlen(line), line);
		line = nl ? nl + 1 : line + strlen(line);
	}
	while (*line) {
		nl = strchr(line, '\n');
		fprintf(f, "%*s%.*s\n", column, "", nl ? (int)(nl - line) : (int)strlen(line), line);
		line = nl ? nl + 1 : line + strlen(line);
	}
}

void options_print_help(FILE *f, const struct options_help *h)
{
	fputs(h->head, f);
	for (size_t i = 0; i < h->nsets; i++) {
		const struct options_set *s = &h->sets[i];

		if (s->help || !s->entries) {
			if (s->help)
				fputs(s->help, f);
			continue;
		}
		for (const struct options_entry *e = s->entries; !entry_is_end(e); e++) {
			if (entry_is_text(e))
				fputs(e->help, f);
			else if (e->help)
				print_entry(f, e, h->column);
		}
	}
	fputs(h->tail, f);
}

const struct option options_diagnosis_getopt[] = {
    DIAGNOSIS_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

int options_diagnosis_apply(void *ctx, int id, const char *arg, const char *prog)
{
	const char *cmd = strrchr(prog, ' ');

	return diagnosis_option(ctx, id, arg, cmd ? cmd + 1 : prog) ? -1 : 0;
}
