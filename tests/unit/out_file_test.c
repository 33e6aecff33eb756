/*
 * out_file_test.c - common/out_file: what fsdpscope writes, and where it
 * refuses to.
 *
 *   - a regular file is replaced whole, by rename: a reader that opened
 *     the old file still reads the old bytes, and a file dropped before
 *     its commit leaves the old one as it was and no temporary name;
 *   - a link at the name in a folder only we can write is followed; in a
 *     folder others can write it is refused, its target untouched;
 *   - a FIFO is written in place and stays a FIFO; a write error (ENOSPC
 *     from a full device) is the commit's, not EIO;
 *   - out_dir_check refuses a folder writable by others without the
 *     sticky bit and one owned by another user (as root: chown), takes a
 *     sticky one and our own; out_dir_make makes the parents.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/out_file.h"
#include "tests/support/scratch_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static char dir[] = "/tmp/fss-out-file-XXXXXX";

static int setup(void **state)
{
	(void)state;
	return scratch_dir_make(dir);
}

static int teardown(void **state)
{
	(void)state;
	return scratch_dir_remove(dir);
}

static void path_in(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void expect_text(const char *path, const char *want)
{
	char buf[256] = "";
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	assert_string_equal(buf, want);
}

/* Names in dir that start with prefix. */
static int count_prefixed(const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

static void test_regular_replaced_whole(void **state)
{
	char path[PATH_MAX], why[512], old[16] = "";
	out_file_t *f;

	(void)state;
	path_in(path, sizeof path, "report.html");
	put(path, "old");
	int reader = open(path, O_RDONLY);
	assert_true(reader >= 0);
	assert_int_equal(out_file_open(path, 0644, &f, why, sizeof why), 0);
	fputs("new", out_file_stream(f));
	expect_text(path, "old"); /* nothing at the name until the commit */
	assert_int_equal(out_file_commit(f, why, sizeof why), 0);
	expect_text(path, "new");
	assert_int_equal(read(reader, old, sizeof old - 1), 3);
	assert_string_equal(old, "old"); /* replaced, not rewritten */
	close(reader);
	assert_int_equal(count_prefixed("report.html.tmp-"), 0);

	assert_int_equal(out_file_open(path, 0644, &f, why, sizeof why), 0);
	fputs("dropped", out_file_stream(f));
	out_file_free(f);
	expect_text(path, "new");
	assert_int_equal(count_prefixed("report.html.tmp-"), 0);
}

static void test_link_in_own_folder_followed(void **state)
{
	char target[PATH_MAX], link[PATH_MAX], why[512];
	struct stat st;

	(void)state;
	assert_int_equal(chmod(dir, 0700), 0);
	path_in(target, sizeof target, "target.json");
	path_in(link, sizeof link, "link.json");
	put(target, "old");
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(out_file_write_all(link, 0644, "new", 3, why, sizeof why), 0);
	expect_text(target, "new");
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode)); /* the user's link stays a link */
}

static void test_link_in_open_folder_refused(void **state)
{
	char sub[PATH_MAX], victim[PATH_MAX], link[PATH_MAX + 32], why[512];

	(void)state;
	path_in(sub, sizeof sub, "shared");
	path_in(victim, sizeof victim, "victim");
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(chmod(sub, 0777), 0);
	put(victim, "keep");
	snprintf(link, sizeof link, "%s/collect.addr", sub);
	assert_int_equal(symlink(victim, link), 0);
	assert_int_equal(out_file_write_all(link, 0644, "planted", 7, why, sizeof why), -ELOOP);
	assert_non_null(strstr(why, "symbolic link"));
	assert_non_null(strstr(why, "other users can write"));
	expect_text(victim, "keep");
}

static void test_fifo_in_place(void **state)
{
	char fifo[PATH_MAX], why[512], buf[16] = "";
	struct stat st;
	out_file_t *f;

	(void)state;
	path_in(fifo, sizeof fifo, "pipe");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	int rd = open(fifo, O_RDONLY | O_NONBLOCK); /* a reader, so the writer's open does not block */
	assert_true(rd >= 0);
	assert_int_equal(out_file_open(fifo, 0644, &f, why, sizeof why), 0);
	fputs("through", out_file_stream(f));
	assert_int_equal(out_file_commit(f, why, sizeof why), 0);
	assert_int_equal(read(rd, buf, sizeof buf - 1), 7);
	assert_string_equal(buf, "through");
	close(rd);
	assert_int_equal(lstat(fifo, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	assert_int_equal(count_prefixed("pipe.tmp-"), 0);
}

/* A full device of our own (the same device number as /dev/full): its
 * write error is the commit's, as ENOSPC, and it stays a device. */
static void test_full_device(void **state)
{
	char full[PATH_MAX], why[512], big[8192];
	struct stat st;

	(void)state;
	path_in(full, sizeof full, "full");
	if (mknod(full, S_IFCHR | 0666, makedev(1, 7)) < 0)
		skip(); /* not root, or a folder mounted nodev */
	memset(big, 'x', sizeof big);
	assert_int_equal(out_file_write_all(full, 0644, big, sizeof big, why, sizeof why), -ENOSPC);
	assert_non_null(strstr(why, "No space left on device"));
	assert_int_equal(lstat(full, &st), 0);
	assert_true(S_ISCHR(st.st_mode));
}

static void test_dir_check(void **state)
{
	char open_dir[PATH_MAX], sticky[PATH_MAX], foreign[PATH_MAX], deep[PATH_MAX], why[512];

	(void)state;
	assert_int_equal(chmod(dir, 0700), 0);
	path_in(open_dir, sizeof open_dir, "open");
	path_in(sticky, sizeof sticky, "sticky");
	path_in(foreign, sizeof foreign, "foreign");
	assert_int_equal(mkdir(open_dir, 0700), 0);
	assert_int_equal(chmod(open_dir, 0777), 0);
	assert_int_equal(out_dir_check(open_dir, why, sizeof why), -EPERM);
	assert_non_null(strstr(why, "no sticky bit"));
	assert_int_equal(mkdir(sticky, 0700), 0);
	assert_int_equal(chmod(sticky, 01777), 0);
	assert_int_equal(out_dir_check(sticky, why, sizeof why), 0);
	assert_int_equal(out_dir_check(dir, why, sizeof why), 0);
	snprintf(deep, sizeof deep, "%s/runs/exp1", dir);
	assert_int_equal(out_dir_make(deep, why, sizeof why), 0);
	assert_int_equal(out_dir_check(deep, why, sizeof why), 0);
	assert_int_equal(out_dir_check("/dev/null", why, sizeof why), -ENOTDIR);
	if (geteuid() != 0)
		return;
	assert_int_equal(mkdir(foreign, 0755), 0);
	assert_int_equal(chown(foreign, 65534, 65534), 0);
	assert_int_equal(out_dir_check(foreign, why, sizeof why), -EPERM);
	assert_non_null(strstr(why, "uid 65534"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_regular_replaced_whole),
	    cmocka_unit_test(test_link_in_own_folder_followed),
	    cmocka_unit_test(test_link_in_open_folder_refused),
	    cmocka_unit_test(test_fifo_in_place),
	    cmocka_unit_test(test_full_device),
	    cmocka_unit_test(test_dir_check),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
