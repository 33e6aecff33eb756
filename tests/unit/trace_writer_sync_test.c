/*
 * trace_writer_sync_test.c - a syncing writer makes its trace durable in
 * the right order: the file's bytes before its new name, the name (the
 * folder) after the rename; a writer not asked to sync calls fsync never.
 *
 * This program defines fsync() itself, so the writer's calls land here
 * (the executable's symbol comes before libc's): each call is recorded with
 * what the descriptor is and which names exist at that moment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/trace_writer.h"
#include "tests/support/sample_records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct sync_call {
	int is_dir;
	int final_exists;   /* the trace's own name, at the time of the call */
	int partial_exists; /* its .partial name */
};

static struct sync_call calls[8];
static size_t ncalls;
static char final_path[128], partial_path[160];

int fsync(int fd)
{
	struct stat st;

	if (ncalls < sizeof(calls) / sizeof(calls[0]) && fstat(fd, &st) == 0) {
		calls[ncalls].is_dir = S_ISDIR(st.st_mode);
		calls[ncalls].final_exists = access(final_path, F_OK) == 0;
		calls[ncalls].partial_exists = access(partial_path, F_OK) == 0;
		ncalls++;
	}
	return (int)syscall(SYS_fsync, fd);
}

static void write_trace(int sync_on_close)
{
	char dir[] = "/tmp/fss_sync_test_XXXXXX";
	struct trace_writer_options opts = {.chunk_payload = 256, .sync_on_close = sync_on_close};
	trace_writer_t *w;

	assert_non_null(mkdtemp(dir));
	snprintf(final_path, sizeof(final_path), "%s/t.fss", dir);
	snprintf(partial_path, sizeof(partial_path), "%s.partial", final_path);
	ncalls = 0;
	assert_int_equal(trace_writer_open(&w, final_path, &opts), 0);
	assert_int_equal(sample_trace_write(w, 1, 1, NULL), 0);
	assert_int_equal(ncalls, 0); /* nothing is synced while writing */
	assert_int_equal(trace_writer_close(w), 0);
	assert_int_equal(access(final_path, F_OK), 0);
	unlink(final_path);
	rmdir(dir);
}

static void test_sync_file_then_folder(void **state)
{
	(void)state;
	write_trace(1);
	assert_int_equal(ncalls, 2);
	/* The file, still under its .partial name. */
	assert_false(calls[0].is_dir);
	assert_true(calls[0].partial_exists);
	assert_false(calls[0].final_exists);
	/* Then the folder, once the rename has given it its name. */
	assert_true(calls[1].is_dir);
	assert_true(calls[1].final_exists);
	assert_false(calls[1].partial_exists);
}

static void test_no_sync_unless_asked(void **state)
{
	(void)state;
	write_trace(0);
	assert_int_equal(ncalls, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sync_file_then_folder),
		cmocka_unit_test(test_no_sync_unless_asked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
