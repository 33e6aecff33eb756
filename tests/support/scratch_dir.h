/*
 * scratch_dir.h - a test's own folder: made by its group setup (mkdtemp on
 * a "/tmp/...-XXXXXX" template it owns) and removed with what it holds by
 * its teardown.
 */
#ifndef FSS_TESTS_SCRATCH_DIR_H
#define FSS_TESTS_SCRATCH_DIR_H

#include <stdio.h>
#include <stdlib.h>

/* scratch_dir_make - mkdtemp(tmpl). 0, or -1 (cmocka's setup failure). */
static inline int scratch_dir_make(char *tmpl)
{
	return mkdtemp(tmpl) ? 0 : -1;
}

/* scratch_dir_remove - rm -rf dir. 0, or -1. */
static inline int scratch_dir_remove(const char *dir)
{
	char cmd[4200];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

#endif
