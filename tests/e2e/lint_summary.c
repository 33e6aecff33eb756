/*
 * lint_summary.c - calls lint_print_summary() (cli/lint.h), the hook
 * `fsdpscope run` prints its lint summary through, on one trace:
 *
 *   lint_summary TRACE
 *
 * prints the summary on stdout and then "summary: N" with its return value,
 * for tests/e2e/lint_test.sh.
 */
#include "cli/lint.h"

#include <stdio.h>

int main(int argc, char **argv)
{
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: lint_summary TRACE\n");
		return 2;
	}
	rc = lint_print_summary(argv[1], stdout);
	printf("summary: %d\n", rc);
	return 0;
}
