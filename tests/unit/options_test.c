/*
 * options_test.c - cli/options.c: options before and after the operands,
 * "--" and the first operand ending them where a command takes CMD, the
 * one wording of an unknown option and of a missing value, -h / --help,
 * and the OPTIONS section printed from the table (column, continuation
 * lines, a name too long for the column, text blocks, hidden entries).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cli/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct state {
	int flag;
	const char *value;
	int napplied;
};

enum { ID_FLAG = 1, ID_VALUE, ID_BAD };

static int apply(void *ctx, int id, const char *arg, const char *prog)
{
	struct state *s = ctx;

	s->napplied++;
	if (id == ID_FLAG)
		s->flag = 1;
	else if (id == ID_VALUE)
		s->value = arg;
	else {
		fprintf(stderr, "%s: --bad %s: never right\n", prog, arg);
		return -1;
	}
	return 0;
}

static const struct options_entry entries[] = {
    {"flag", 'f', NULL, "a flag", ID_FLAG},
    {"value", 0, "V", "a value, on two\nlines", ID_VALUE},
    {NULL, 0, NULL, "  Group\n", 0},
    {"a-rather-long-name", 0, "WITH-ARG", "too long for the column", ID_VALUE},
    {"below", 0, "X", "\nbelow its name", ID_VALUE},
    {"bad", 0, "B", NULL, ID_BAD},
    {NULL, 0, NULL, NULL, 0},
};

static const struct options_set sets[] = {{.entries = entries, .apply = apply}};
static const struct options_help help = OPTIONS_HELP("HEAD\n", sets, 20, "TAIL\n");

/* Run options_parse on the words (argv[0] included), stderr into err. */
static int parse(char **argv, enum options_order order, struct state *s, char *err, size_t errlen)
{
	int argc = 0, rc, saved = dup(STDERR_FILENO);
	FILE *f = tmpfile();
	size_t n;

	while (argv[argc])
		argc++;
	memset(s, 0, sizeof(*s));
	fflush(stderr);
	dup2(fileno(f), STDERR_FILENO);
	rc = options_parse(&help, "test", argc, argv, order, s);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(f);
	n = fread(err, 1, errlen - 1, f);
	err[n] = '\0';
	fclose(f);
	return rc;
}

static void anywhere(void **unused)
{
	char *argv[] = {"test", "op1", "--value", "v", "op2", "-f", NULL};
	char err[256];
	struct state s;

	(void)unused;
	assert_int_equal(parse(argv, OPTIONS_ANYWHERE, &s, err, sizeof(err)), 4);
	assert_int_equal(s.flag, 1);
	assert_string_equal(s.value, "v");
	/* the operands after the options, in their order */
	assert_string_equal(argv[4], "op1");
	assert_string_equal(argv[5], "op2");
}

static void dashdash_ends_options(void **unused)
{
	char *argv[] = {"test", "-f", "--", "--value", NULL};
	char err[256];
	struct state s;

	(void)unused;
	assert_int_equal(parse(argv, OPTIONS_ANYWHERE, &s, err, sizeof(err)), 3);
	assert_int_equal(s.flag, 1);
	assert_null(s.value);
	assert_string_equal(argv[3], "--value");
}

static void until_operand(void **unused)
{
	char *argv[] = {"test", "-f", "cmd", "--value", "x", "--help", NULL};
	char err[256];
	struct state s;

	(void)unused;
	/* CMD's --help is CMD's: 2, not OPTIONS_HELP_SHOWN */
	assert_int_equal(parse(argv, OPTIONS_UNTIL_OPERAND, &s, err, sizeof(err)), 2);
	assert_null(s.value);
	assert_string_equal(argv[2], "cmd");
}

static void errors_worded_once(void **unused)
{
	char *unknown[] = {"test", "x", "--bogus", NULL};
	char *missing[] = {"test", "--value", NULL};
	char *bad[] = {"test", "--bad", "b", NULL};
	char err[256];
	struct state s;

	(void)unused;
	assert_int_equal(parse(unknown, OPTIONS_ANYWHERE, &s, err, sizeof(err)), -1);
	assert_string_equal(err, "fsdpscope test: unknown option '--bogus' (see 'fsdpscope help test')\n");
	assert_int_equal(parse(missing, OPTIONS_ANYWHERE, &s, err, sizeof(err)), -1);
	assert_string_equal(err, "fsdpscope test: option '--value' needs a value (see 'fsdpscope help test')\n");
	assert_int_equal(parse(bad, OPTIONS_ANYWHERE, &s, err, sizeof(err)), -1);
	assert_string_equal(err, "fsdpscope test: --bad b: never right\n");
}

static const char expected_help[] = "HEAD\n"
				    "    -f, --flag      a flag\n"
				    "    --value V       a value, on two\n"
				    "                    lines\n"
				    "  Group\n"
				    "    --a-rather-long-name WITH-ARG  too long for the column\n"
				    "    --below X\n"
				    "                    below its name\n"
				    "TAIL\n";

static void help_printed(void **unused)
{
	char *argv[] = {"test", "op", "-h", NULL};
	char buf[1024], err[256];
	FILE *f = tmpfile();
	struct state s;
	size_t n;
	int rc, saved = dup(STDOUT_FILENO);

	(void)unused;
	options_print_help(f, &help);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	assert_string_equal(buf, expected_help);
	/* -h: the same text on standard output, and the command is told to exit */
	rewind(f);
	assert_int_equal(ftruncate(fileno(f), 0), 0);
	fflush(stdout);
	dup2(fileno(f), STDOUT_FILENO);
	rc = parse(argv, OPTIONS_ANYWHERE, &s, err, sizeof(err));
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	assert_int_equal(rc, OPTIONS_HELP_SHOWN);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	assert_string_equal(buf, expected_help);
	fclose(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(anywhere),	     cmocka_unit_test(dashdash_ends_options),
	    cmocka_unit_test(until_operand), cmocka_unit_test(errors_worded_once),
	    cmocka_unit_test(help_printed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
