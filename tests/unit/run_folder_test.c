/*
 * run_folder_test.c - what `fsdpscope run` relies on, below the e2e level:
 * ingest_note_exit (each exit after the records of the latest source of its
 * pid, an unknown pid counted and not written), the ingest's peer check
 * (a connection from user nobody refused and named: root only, skipped
 * otherwise), and cli/run_folder.c (a 0700 folder whatever the umask, a
 * trace never replaced, a live run's folder never taken for a leftover, a
 * dead one's found with what it holds).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cli/run_folder.h"
#include "collector/ingest.h"
#include "common/record.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "tests/support/sample_records.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534

static char tmpdir[64];

static int setup_dir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/fss_run_folder_test.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static int teardown_dir(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* A trace file of one source: hello with `pid`, then `n` collectives. */
static void write_process_file(const char *path, uint32_t pid, int n)
{
	trace_writer_t *w;
	_Alignas(8) unsigned char buf[FSS_RECORD_MAX_BYTES];
	struct fss_rec_process_hello *h = (void *)buf;

	assert_int_equal(trace_writer_open(&w, path, NULL), 0);
	assert_true(sample_record(FSS_REC_PROCESS_HELLO, 0, 1, buf) > 0);
	h->pid = pid;
	assert_int_equal(trace_writer_append(w, buf), 0);
	for (int i = 0; i < n; i++) {
		assert_true(sample_record(FSS_REC_COLLECTIVE, 0, (uint32_t)i + 2, buf) > 0);
		assert_int_equal(trace_writer_append(w, buf), 0);
	}
	assert_int_equal(trace_writer_close(w), 0);
}

struct seen {
	uint16_t type[256];
	uint32_t source[256];
	uint32_t exit_pid[256];
	int32_t exit_status[256];
	size_t n;
};

static int on_record(void *ctx, const struct fss_record_head *rec)
{
	struct seen *s = ctx;

	if (s->n < 256) {
		s->type[s->n] = rec->type;
		s->source[s->n] = rec->source;
		if (rec->type == FSS_REC_PROCESS_EXIT) {
			const struct fss_rec_process_exit *e = (const void *)rec;

			s->exit_pid[s->n] = e->pid;
			s->exit_status[s->n] = e->wait_status;
		}
		s->n++;
	}
	return 0;
}

static void read_trace(const char *path, struct seen *s)
{
	static const struct trace_parser_ops ops = {.on_record = on_record};
	char err[256];

	memset(s, 0, sizeof(*s));
	assert_int_equal(trace_read_file(path, &ops, s, err, sizeof(err)), 0);
}

/* Exits go after the records of the latest source of their pid. */
static void test_note_exit(void **state)
{
	char a[128], b[128], c[128], out[128];
	const struct ingest_stats *st;
	ingest_t *ing;
	struct seen s;
	int exits = 0;

	(void)state;
	snprintf(a, sizeof(a), "%s/a.fss", tmpdir);
	snprintf(b, sizeof(b), "%s/b.fss", tmpdir);
	snprintf(c, sizeof(c), "%s/c.fss", tmpdir);
	snprintf(out, sizeof(out), "%s/exits.fss", tmpdir);
	write_process_file(a, 100, 3); /* source 0 */
	write_process_file(b, 200, 2); /* source 1 */
	write_process_file(c, 100, 1); /* source 2: pid 100 again (it reconnected) */
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	assert_int_equal(ingest_add_file(ing, a), 0);
	/* Noted before its source arrived (a file merged later): still
	 * written, after that source's records. */
	assert_int_equal(ingest_note_exit(ing, 200, 3 << 8), 0);
	assert_int_equal(ingest_add_file(ing, b), 0);
	assert_int_equal(ingest_add_file(ing, c), 0);
	assert_int_equal(ingest_note_exit(ing, 100, 9), 0);
	assert_int_equal(ingest_note_exit(ing, 300, 0), 0); /* no source: not written */
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->exits_written, 2);
	assert_int_equal(st->exits_unmatched, 1);
	assert_int_equal(st->by_type[FSS_REC_PROCESS_EXIT], 2);
	ingest_free(ing);

	read_trace(out, &s);
	for (size_t i = 0; i < s.n; i++) {
		if (s.type[i] != FSS_REC_PROCESS_EXIT)
			continue;
		exits++;
		if (s.exit_pid[i] == 100) {
			assert_int_equal(s.source[i], 2);
			assert_int_equal(s.exit_status[i], 9);
		} else {
			assert_int_equal(s.exit_pid[i], 200);
			assert_int_equal(s.source[i], 1);
			assert_int_equal(s.exit_status[i], 3 << 8);
		}
		/* Nothing of its source after it. */
		for (size_t j = i + 1; j < s.n; j++)
			assert_int_not_equal(s.source[j], s.source[i]);
	}
	assert_int_equal(exits, 2);
}

/* A connection from another user is refused, counted and named. */
static void test_peer_refused(void **state)
{
	char out[128], sample[128], address[64];
	const struct ingest_stats *st;
	ingest_t *ing;
	int pipefd[2], status;
	pid_t child;

	(void)state;
	if (geteuid() != 0) {
		print_message("skipped: connecting as user nobody needs root\n");
		skip();
	}
	snprintf(out, sizeof(out), "%s/refused.fss", tmpdir);
	snprintf(sample, sizeof(sample), "%s/sample.fss", tmpdir);
	snprintf(address, sizeof(address), "unix:@fss-run-session-test.%d", (int)getpid());
	write_process_file(sample, 4242, 50);
	assert_int_equal(ingest_new(&ing, out, NULL), 0);
	assert_int_equal(ingest_listen(ing, address), 0);
	assert_int_equal(pipe(pipefd), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};
		socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(address + 6));
		char buf[4096];
		int fd, in;
		ssize_t n;

		memcpy(sun.sun_path + 1, address + 6, strlen(address + 6));
		in = open(sample, O_RDONLY); /* before giving up root: the folder is root's */
		if (setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
			_exit(2);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sun, len) < 0)
			_exit(3);
		while (in >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
			if (write(fd, buf, (size_t)n) < 0)
				break;
		/* Connected and sent: the parent may look now. */
		if (write(pipefd[1], "x", 1) != 1)
			_exit(4);
		_exit(0);
	}
	close(pipefd[1]);
	{
		char c;

		assert_int_equal(read(pipefd[0], &c, 1), 1);
	}
	close(pipefd[0]);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The connection is in the backlog: ingest_finish accepts it too. */
	assert_true(ingest_poll(ing, 0) >= 0);
	assert_int_equal(ingest_finish(ing, &st), 0);
	assert_int_equal(st->refused, 1);
	assert_int_equal(st->nrefused_named, 1);
	assert_int_equal(st->refused_peers[0].uid, NOBODY);
	assert_int_equal(st->refused_peers[0].pid, child);
	assert_int_equal(st->sources, 0);
	assert_int_equal(st->records, 0);
	ingest_free(ing);
}

static int count_run_folders(const char *dir)
{
	char cmd[256];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | grep -c '^%s' || true", dir, RUN_FOLDER_PREFIX);
	p = popen(cmd, "r");
	if (p && fscanf(p, "%d", &n) != 1)
		n = -1;
	if (p)
		pclose(p);
	return n;
}

static void test_session(void **state)
{
	char *const argv[] = {"job", "--flag", NULL};
	char dir[128], what[256], file[512];
	run_folder_t *s, *t;
	struct run_leftover *l;
	struct stat st;
	char *path;
	size_t n;
	int taken;
	mode_t old;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/out", tmpdir);
	/* umask 000: the folder is still 0700. */
	old = umask(0);
	assert_int_equal(run_folder_new(&s, dir, argv, what, sizeof(what)), 0);
	umask(old);
	assert_int_equal(stat(run_folder_path(s), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_non_null(strstr(run_folder_socket(s), run_folder_path(s)));

	/* A live run is not a leftover, to another session either. */
	assert_int_equal(run_leftovers_find(dir, &l, &n), 0);
	assert_int_equal(n, 0);
	run_leftovers_free(l, n);

	/* A look-alike folder open to others is never taken for a leftover. */
	snprintf(file, sizeof(file), "%s/" RUN_FOLDER_PREFIX "planted", dir);
	assert_int_equal(mkdir(file, 0755), 0);
	assert_int_equal(chmod(file, 0755), 0);
	strncat(file, "/run.info", sizeof(file) - strlen(file) - 1);
	{
		FILE *f = fopen(file, "w");

		assert_non_null(f);
		fputs("fsdpscope-run 1\npid=1\n", f);
		fclose(f);
	}
	assert_int_equal(run_leftovers_find(dir, &l, &n), 0);
	assert_int_equal(n, 0);
	run_leftovers_free(l, n);
	assert_int_equal(unlink(file), 0);
	*strrchr(file, '/') = '\0';
	assert_int_equal(rmdir(file), 0);

	/* Publishing never replaces: trace.fss, then trace-2.fss. */
	write_process_file(run_folder_output(s), 1, 1);
	assert_int_equal(run_folder_publish(s, "trace", &path, &taken), 0);
	assert_false(taken);
	assert_non_null(strstr(path, "/trace.fss"));
	free(path);
	assert_int_equal(run_folder_new(&t, dir, argv, what, sizeof(what)), 0);
	write_process_file(run_folder_output(t), 2, 1);
	assert_int_equal(run_folder_publish(t, "trace.fss", &path, &taken), 0);
	assert_true(taken);
	assert_non_null(strstr(path, "/trace-2.fss"));
	free(path);
	run_folder_close(t, 1);
	run_folder_close(s, 1);
	assert_int_equal(count_run_folders(dir), 0);

	/* A run that ended with a per-process file still there: found, with
	 * its file and its command line, and merged into recovered-ID.fss. */
	assert_int_equal(run_folder_new(&s, dir, argv, what, sizeof(what)), 0);
	snprintf(file, sizeof(file), "%s/fsdpscope-host-77.fss", run_folder_path(s));
	write_process_file(file, 77, 4);
	run_folder_close(s, 1); /* the file is still to merge: the folder stays */
	assert_int_equal(count_run_folders(dir), 1);
	assert_int_equal(run_leftovers_find(dir, &l, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(l[0].nfiles, 1);
	assert_string_equal(l[0].cmd, "job --flag");
	assert_int_equal(l[0].pid, getpid());
	assert_false(l[0].job_running);
	{
		struct ingest_stats rs;

		assert_int_equal(run_leftover_recover(&l[0], dir, &path, &rs), 0);
		assert_int_equal(rs.sources, 1);
		assert_int_equal(rs.by_type[FSS_REC_COLLECTIVE], 4);
		assert_non_null(strstr(path, "/recovered-"));
		assert_int_equal(stat(path, &st), 0);
		free(path);
	}
	run_leftovers_free(l, n);
	assert_int_equal(count_run_folders(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_note_exit),
	    cmocka_unit_test(test_peer_refused),
	    cmocka_unit_test(test_session),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
