/*
 * run_folder.c - a run's private folder, its lock, its socket's place,
 * the trace's final name, and the leftovers of runs that died.
 *
 * Why a private folder: the job's agents write their per-process files
 * into it, so a run merges exactly what its own agents wrote (two runs
 * sharing DIR never see each other's files), and its mode (0700) keeps
 * other users away from the socket. Why flock: the kernel drops the lock
 * when the run dies, however it dies (SIGKILL, OOM), so the next run can
 * tell a live run's folder from a dead one's without trusting a pid.
 */
#include "cli/run_folder.h"

#include "common/error.h"
#include "common/out_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define RUN_INFO "run.info"
#define RUN_SOCKET "sock"
/* The session's own traces start so; the agents' files never do. */
#define RUN_OUTPUT_PREFIX "run-output"
#define RUN_OUTPUT RUN_OUTPUT_PREFIX ".fss"
#define RUN_RECOVERED RUN_OUTPUT_PREFIX "-recovered.fss"
#define RUN_SOCKET_FOLDER_PREFIX "fsdpscope-"
/* NAME-2.fss ... NAME-<this>.fss before giving up on a free name. */
#define RUN_PUBLISH_TRIES 10000

struct run_folder {
	char *dir;	  /* absolute DIR */
	char *folder;	  /* DIR/.fsdpscope-run.<id> */
	char *socket;	  /* the socket's path */
	char *socket_dir; /* its own folder when not in `folder`, else NULL */
	char *output;	  /* folder/run-output.fss */
	char *cmd;	  /* the job's command line, for run.info */
	long long started;
	pid_t job_pgid;
	int info_fd; /* run.info, flock()ed while the session lives */
};

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* mkdtemp, then 0700 explicitly: mkdtemp's mode goes through the umask,
 * which could take the owner's own bits away. */
static int private_mkdtemp(char *template)
{
	if (!mkdtemp(template))
		return -errno;
	if (chmod(template, 0700) < 0) {
		int err = -errno;

		rmdir(template);
		return err;
	}
	return 0;
}

static char *join(const char *a, const char *b)
{
	char *s;

	if (asprintf(&s, "%s/%s", a, b) < 0)
		return NULL;
	return s;
}

static char *command_line(char *const *argv)
{
	size_t len = 1;
	char *s, *p;

	for (size_t i = 0; argv[i]; i++)
		len += strlen(argv[i]) + 1;
	s = malloc(len);
	if (!s)
		return NULL;
	p = s;
	for (size_t i = 0; argv[i]; i++) {
		size_t n = strlen(argv[i]);

		if (i)
			*p++ = ' ';
		memcpy(p, argv[i], n);
		p += n;
	}
	*p = '\0';
	/* One line in run.info. */
	for (p = s; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return s;
}

/* run.info's whole text, rewritten in place (the lock is on this fd). */
static int write_info(run_folder_t *s)
{
	char *text;
	int n, err = 0;

	n = asprintf(&text, "fsdpscope-run 1\npid=%ld\nstarted=%lld\njob=%ld\nsocket=%s\ncmd=%s\n", (long)getpid(),
		     s->started, (long)s->job_pgid, s->socket, s->cmd);
	if (n < 0)
		return -ENOMEM;
	if (ftruncate(s->info_fd, 0) < 0 || pwrite(s->info_fd, text, (size_t)n, 0) != n)
		err = errno ? -errno : -EIO;
	free(text);
	return err;
}

/*
 * The socket: in the folder when the path fits a sockaddr_un; else in a
 * short 0700 folder of the user's own (an abstract name would be open to
 * every user of the network namespace).
 */
static int choose_socket(run_folder_t *s)
{
	struct sockaddr_un sun;
	const char *base = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	char *template;
	int err;

	s->socket = join(s->folder, RUN_SOCKET);
	if (!s->socket)
		return -ENOMEM;
	if (strlen(s->socket) < sizeof(sun.sun_path))
		return 0;
	free(s->socket);
	s->socket = NULL;
	/* $XDG_RUNTIME_DIR only when it is the user's own and private. */
	if (!base || base[0] != '/' || stat(base, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077))
		base = "/tmp";
	if (asprintf(&template, "%s/" RUN_SOCKET_FOLDER_PREFIX "XXXXXX", base) < 0)
		return -ENOMEM;
	err = private_mkdtemp(template);
	if (err) {
		free(template);
		return err;
	}
	s->socket_dir = template;
	s->socket = join(template, RUN_SOCKET);
	if (!s->socket)
		return -ENOMEM;
	if (strlen(s->socket) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	return 0;
}

/* run.info is created under another name and renamed once locked, so that
 * no one ever sees it unlocked while its run lives. */
static int create_info(run_folder_t *s)
{
	char *tmp = join(s->folder, RUN_INFO ".new");
	char *path = join(s->folder, RUN_INFO);
	int err = 0;

	if (!tmp || !path) {
		err = -ENOMEM;
		goto out;
	}
	s->info_fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (s->info_fd < 0) {
		err = -errno;
		goto out;
	}
	if (flock(s->info_fd, LOCK_EX | LOCK_NB) < 0) {
		err = -errno;
		goto out;
	}
	err = write_info(s);
	if (!err && rename(tmp, path) < 0)
		err = -errno;
out:
	if (err && tmp)
		unlink(tmp);
	free(tmp);
	free(path);
	return err;
}

int run_folder_new(run_folder_t **out, const char *dir, char *const *argv, char *what, size_t whatlen)
{
	run_folder_t *s;
	char *template = NULL;
	size_t n;
	int err;

	*out = NULL;
	snprintf(what, whatlen, "cannot create %s", dir);
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(what, whatlen, "out of memory");
		return -ENOMEM;
	}
	s->info_fd = -1;
	s->started = (long long)time(NULL);
	/* DIR's names are the tool's: a folder others could plant links in is refused. */
	err = out_dir_make(dir, what, whatlen);
	if (err) {
		run_folder_close(s, 1);
		return err;
	}
	snprintf(what, whatlen, "cannot create %s", dir);
	s->dir = realpath(dir, NULL);
	if (!s->dir) {
		err = -errno;
		goto fail;
	}
	if (asprintf(&template, "%s/" RUN_FOLDER_PREFIX "%ld-XXXXXX", s->dir, (long)getpid()) < 0) {
		err = -ENOMEM;
		goto fail;
	}
	snprintf(what, whatlen, "cannot create %s", template);
	err = private_mkdtemp(template);
	if (err) {
		free(template);
		goto fail;
	}
	s->folder = template;
	s->output = join(s->folder, RUN_OUTPUT);
	s->cmd = command_line(argv);
	if (!s->output || !s->cmd) {
		err = -ENOMEM;
		goto fail;
	}
	err = choose_socket(s);
	if (err) {
		snprintf(what, whatlen, "cannot create a private folder for the socket (%s)",
			 s->socket_dir ? s->socket_dir : "/tmp");
		goto fail;
	}
	snprintf(what, whatlen, "cannot create %s/" RUN_INFO, s->folder);
	err = create_info(s);
	if (err)
		goto fail;
	*out = s;
	return 0;
fail:
	n = strlen(what);
	snprintf(what + n, whatlen - n, ": %s", strerror(-err));
	run_folder_close(s, 1);
	return err;
}

const char *run_folder_dir(const run_folder_t *s)
{
	return s->dir;
}

const char *run_folder_path(const run_folder_t *s)
{
	return s->folder;
}

const char *run_folder_socket(const run_folder_t *s)
{
	return s->socket;
}

const char *run_folder_output(const run_folder_t *s)
{
	return s->output;
}

int run_folder_listen(run_folder_t *s, ingest_t *ing)
{
	char *address;
	mode_t old;
	int err;

	if (asprintf(&address, "unix:%s", s->socket) < 0)
		return -ENOMEM;
	/* bind() creates the file through the umask: make it 0600 from the
	 * start, and again explicitly in case the umask took owner bits. */
	old = umask(0177);
	err = ingest_listen(ing, address);
	umask(old);
	free(address);
	if (!err && chmod(s->socket, 0600) < 0)
		err = -errno;
	return err;
}

int run_folder_set_job(run_folder_t *s, pid_t pgid)
{
	s->job_pgid = pgid;
	return write_info(s);
}

/* A per-process file of the job's agents (or anything the job left that
 * reads as a trace), not the session's own files. */
static int is_process_file(const char *name)
{
	if (name[0] == '.' || strncmp(name, RUN_OUTPUT_PREFIX, strlen(RUN_OUTPUT_PREFIX)) == 0)
		return 0;
	return ends_with(name, ".fss") || ends_with(name, ".partial");
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_process_files(const char *folder, char ***paths, size_t *n)
{
	DIR *d = opendir(folder);
	struct dirent *e;
	char **names = NULL;
	size_t count = 0;
	int err = 0;

	*paths = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		struct stat sb;
		char **nn;

		if (!is_process_file(e->d_name) || fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(sb.st_mode))
			continue;
		nn = realloc(names, (count + 1) * sizeof(*nn));
		if (!nn) {
			err = -ENOMEM;
			break;
		}
		names = nn;
		names[count] = join(folder, e->d_name);
		if (!names[count]) {
			err = -ENOMEM;
			break;
		}
		count++;
	}
	closedir(d);
	if (err) {
		for (size_t i = 0; i < count; i++)
			free(names[i]);
		free(names);
		return err;
	}
	/* Sorted, so the sources of a run number the same way every time. */
	if (count)
		qsort(names, count, sizeof(*names), cmp_names);
	*paths = names;
	*n = count;
	return 0;
}

int run_folder_files(const run_folder_t *s, char ***paths, size_t *n)
{
	return list_process_files(s->folder, paths, n);
}

int run_folder_list(const char *folder, char ***paths, size_t *n)
{
	return list_process_files(folder, paths, n);
}

/* rename(2) that fails with EEXIST instead of replacing. */
static int rename_noreplace(const char *from, const char *to)
{
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	/* A file system without RENAME_NOREPLACE: link() never replaces. */
	if (link(from, to) < 0)
		return -errno;
	unlink(from);
	return 0;
}

static int publish(const char *from, const char *dir, const char *name, char **path, int *taken)
{
	size_t len = strlen(name);
	int base = (int)(ends_with(name, ".fss") ? len - 4 : len);

	*path = NULL;
	*taken = 0;
	for (int i = 1; i <= RUN_PUBLISH_TRIES; i++) {
		char *p;
		int n, err;

		if (i == 1)
			n = asprintf(&p, "%s/%.*s.fss", dir, base, name);
		else
			n = asprintf(&p, "%s/%.*s-%d.fss", dir, base, name, i);
		if (n < 0)
			return -ENOMEM;
		err = rename_noreplace(from, p);
		if (err == 0) {
			*path = p;
			*taken = i > 1;
			return 0;
		}
		free(p);
		if (err != -EEXIST)
			return err;
	}
	return -EEXIST;
}

int run_folder_publish(run_folder_t *s, const char *name, char **path, int *taken)
{
	return publish(s->output, s->dir, name, path, taken);
}

/* Remove the socket's own folder (the ingest removed the socket). */
static void remove_socket_dir(const char *socket_dir, const char *socket)
{
	struct stat st;

	if (socket && lstat(socket, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(socket);
	if (socket_dir)
		rmdir(socket_dir);
}

void run_folder_close(run_folder_t *s, int remove)
{
	if (!s)
		return;
	remove_socket_dir(s->socket_dir, s->socket);
	if (remove && s->folder) {
		char *info = join(s->folder, RUN_INFO);
		char *partial;
		char **files;
		size_t n;
		struct stat st;

		/* Only an otherwise empty folder goes: files still there are a
		 * later run's leftovers to merge. */
		if (asprintf(&partial, "%s.partial", s->output ? s->output : "") < 0)
			partial = NULL;
		if (info && partial && list_process_files(s->folder, &files, &n) == 0) {
			for (size_t i = 0; i < n; i++)
				free(files[i]);
			free(files);
			if (n == 0 && (!s->output || stat(s->output, &st) < 0) && stat(partial, &st) < 0) {
				unlink(info);
				rmdir(s->folder);
			}
		}
		free(partial);
		free(info);
	}
	if (s->info_fd >= 0)
		close(s->info_fd);
	free(s->dir);
	free(s->folder);
	free(s->socket);
	free(s->socket_dir);
	free(s->output);
	free(s->cmd);
	free(s);
}

/* ---------------------------------------------------------------- leftovers */

static void read_info(struct run_leftover *l, int fd)
{
	char buf[8192];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	char *line, *save = NULL;

	if (n <= 0)
		return;
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "pid=", 4) == 0)
			l->pid = strtol(line + 4, NULL, 10);
		else if (strncmp(line, "job=", 4) == 0)
			l->job_pgid = strtol(line + 4, NULL, 10);
		else if (strncmp(line, "started=", 8) == 0)
			l->started = strtoll(line + 8, NULL, 10);
		else if (strncmp(line, "socket=", 7) == 0 && !l->stale_socket)
			l->stale_socket = strdup(line + 7);
		else if (strncmp(line, "cmd=", 4) == 0 && !l->cmd)
			l->cmd = strdup(line + 4);
	}
}

static void leftover_clear(struct run_leftover *l)
{
	if (l->lock_fd >= 0)
		close(l->lock_fd);
	free(l->folder);
	free(l->id);
	free(l->cmd);
	free(l->stale_socket);
	free(l->partial);
	memset(l, 0, sizeof(*l));
	l->lock_fd = -1;
}

/*
 * Look at one private folder: 1 with *l filled (and locked) when its run
 * is dead, 0 when it is alive, not ours or not a run folder, -errno.
 */
static int leftover_open(const char *folder, struct run_leftover *l)
{
	char *info = join(folder, RUN_INFO);
	struct stat st;
	char **files;
	size_t n;
	int fd;

	memset(l, 0, sizeof(*l));
	l->lock_fd = -1;
	if (!info)
		return -ENOMEM;
	/* Only a private folder of the user's own: DIR may be open to others,
	 * who could plant a look-alike for the next run to merge. */
	if (lstat(folder, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		free(info);
		return 0;
	}
	fd = open(info, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(info);
	if (fd < 0)
		return 0; /* being set up, or not a run folder */
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return 0; /* another user's, or its run is alive */
	}
	l->lock_fd = fd;
	l->folder = strdup(folder);
	l->id = strdup(strrchr(folder, '/') + 1 + strlen(RUN_FOLDER_PREFIX));
	read_info(l, fd);
	if (!l->cmd)
		l->cmd = strdup("");
	if (!l->folder || !l->id || !l->cmd) {
		leftover_clear(l);
		return -ENOMEM;
	}
	if (l->stale_socket && (lstat(l->stale_socket, &st) < 0 || !S_ISSOCK(st.st_mode))) {
		free(l->stale_socket);
		l->stale_socket = NULL;
	}
	/* The unfinished trace, or a finished one its run did not publish. */
	for (int i = 0; i < 2 && !l->partial; i++) {
		char *p = join(folder, i == 0 ? RUN_OUTPUT ".partial" : RUN_OUTPUT);

		if (p && stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
			l->partial = p;
			l->partial_bytes = (uint64_t)st.st_size;
		} else {
			free(p);
		}
	}
	if (list_process_files(folder, &files, &n) == 0) {
		l->nfiles = n;
		for (size_t i = 0; i < n; i++)
			free(files[i]);
		free(files);
	}
	/* The job outlives a killed run (docs/run.md): its group may still
	 * be at work, writing into the folder. EPERM: it exists. */
	l->job_running = l->job_pgid > 0 && (kill(-(pid_t)l->job_pgid, 0) == 0 || errno == EPERM);
	return 1;
}

int run_leftovers_find(const char *dir, struct run_leftover **out, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct run_leftover *list = NULL;
	size_t count = 0;
	int err = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		struct run_leftover l, *nl;
		char *folder;
		int rc;

		if (strncmp(e->d_name, RUN_FOLDER_PREFIX, strlen(RUN_FOLDER_PREFIX)) != 0 ||
		    e->d_name[strlen(RUN_FOLDER_PREFIX)] == '\0')
			continue;
		folder = join(dir, e->d_name);
		if (!folder) {
			err = -ENOMEM;
			break;
		}
		rc = leftover_open(folder, &l);
		free(folder);
		if (rc < 0) {
			err = rc;
			break;
		}
		if (rc == 0)
			continue;
		nl = realloc(list, (count + 1) * sizeof(*nl));
		if (!nl) {
			leftover_clear(&l);
			err = -ENOMEM;
			break;
		}
		list = nl;
		list[count++] = l;
	}
	closedir(d);
	if (err) {
		run_leftovers_free(list, count);
		return err;
	}
	*out = list;
	*n = count;
	return 0;
}

void run_leftovers_free(struct run_leftover *l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		leftover_clear(&l[i]);
	free(l);
}

void run_leftover_describe(const struct run_leftover *l, FILE *out)
{
	char when[32] = "an unknown time";
	time_t t = (time_t)l->started;
	struct tm tm;
	int parts = 0;

	if (l->started && gmtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
	fprintf(out, "%s: left by run %s (fsdpscope pid %ld, started %s, job '%s'), which did not finish:", l->folder,
		l->id, l->pid, when, l->cmd);
	if (l->stale_socket) {
		fprintf(out, " a stale socket (%s)", l->stale_socket);
		parts++;
	}
	if (l->partial) {
		fprintf(out, "%s its unfinished trace (%s, %llu bytes)", parts ? "," : "", strrchr(l->partial, '/') + 1,
			(unsigned long long)l->partial_bytes);
		parts++;
	}
	fprintf(out, "%s %zu unmerged per-process file%s", parts ? "," : "", l->nfiles, l->nfiles == 1 ? "" : "s");
	if (l->job_running)
		fprintf(out, "; its job (process group %ld) is still running", l->job_pgid);
}

/* A dead session's viewer socket in `folder`, if it is there. */
static void unlink_viewer_socket(const char *folder)
{
	char *viewer = join(folder, RUN_VIEWER_SOCKET);
	struct stat st;

	if (viewer && lstat(viewer, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(viewer);
	free(viewer);
}

void run_leftover_remove(struct run_leftover *l)
{
	if (l->partial)
		unlink(l->partial);
	unlink_viewer_socket(l->folder);
	if (l->stale_socket) {
		char *slash = strrchr(l->stale_socket, '/');

		unlink(l->stale_socket);
		/* Its own socket folder, when it had one outside the run folder. */
		if (slash && slash != l->stale_socket) {
			const char *base;

			*slash = '\0';
			base = strrchr(l->stale_socket, '/');
			if (base && strcmp(l->stale_socket, l->folder) != 0 &&
			    strncmp(base + 1, RUN_SOCKET_FOLDER_PREFIX, strlen(RUN_SOCKET_FOLDER_PREFIX)) == 0) {
				unlink_viewer_socket(l->stale_socket);
				rmdir(l->stale_socket);
			}
			*slash = '/';
		}
	}
	{
		char *info = join(l->folder, RUN_INFO);

		if (info)
			unlink(info);
		free(info);
		rmdir(l->folder);
	}
}

int run_leftover_recover(struct run_leftover *l, const char *dir, char **path, struct ingest_stats *stats)
{
	char *output = NULL, *name = NULL;
	char **files = NULL;
	size_t n = 0;
	ingest_t *ing = NULL;
	const struct ingest_stats *st = NULL;
	int err, taken;

	*path = NULL;
	memset(stats, 0, sizeof(*stats));
	err = list_process_files(l->folder, &files, &n);
	if (err)
		return err;
	output = join(l->folder, RUN_RECOVERED);
	if (asprintf(&name, "recovered-%s", l->id) < 0)
		name = NULL;
	if (!output || !name) {
		err = -ENOMEM;
		goto out;
	}
	err = ingest_new(&ing, output, NULL);
	if (err)
		goto out;
	if (l->partial) {
		err = ingest_add_file(ing, l->partial);
		if (err == -ENOENT)
			err = 0;
	}
	for (size_t i = 0; !err && i < n; i++)
		err = ingest_add_file(ing, files[i]);
	if (!err)
		err = ingest_finish(ing, &st);
	if (!err) {
		*stats = *st;
		/* The messages point into the ingest: not kept past it. */
		stats->damage = NULL;
		stats->per_source = NULL;
		stats->refused_peers = NULL;
		err = publish(output, dir, name, path, &taken);
	}
	if (err) {
		unlink(output);
		goto out;
	}
	/* Their records are in the recovered trace now. */
	for (size_t i = 0; i < n; i++)
		unlink(files[i]);
	run_leftover_remove(l);
out:
	ingest_free(ing);
	for (size_t i = 0; i < n; i++)
		free(files[i]);
	free(files);
	free(output);
	free(name);
	return err;
}

/* The run folder `folder` (a path ending in .fsdpscope-run.<id>): say
 * whether its run is alive or what it left. */
static int note_folder(const char *folder, const char *what, const char *prog, FILE *out)
{
	struct run_leftover l;
	int rc = leftover_open(folder, &l);

	if (rc < 0)
		return 0;
	if (rc == 0) {
		fprintf(out,
			"%s: %s is from a run still in progress (or another user's): what it holds is not complete\n",
			prog, what);
		return 1;
	}
	fprintf(out, "%s: %s is from an unfinished run: ", prog, what);
	run_leftover_describe(&l, out);
	fprintf(out,
		"\n%s: records after its last complete chunk are lost; 'fsdpscope run --out %.*s' merges what "
		"it left into a trace of its own\n",
		prog, (int)(strrchr(l.folder, '/') - l.folder), l.folder);
	leftover_clear(&l);
	return 1;
}

int run_unfinished_note(const char *path, const char *prog, FILE *out)
{
	struct stat st;
	char *abs = realpath(path, NULL);
	char *slash;
	int said = 0;

	if (!abs)
		return 0;
	if (stat(abs, &st) == 0 && S_ISDIR(st.st_mode)) {
		const char *base = strrchr(abs, '/') + 1;

		if (strncmp(base, RUN_FOLDER_PREFIX, strlen(RUN_FOLDER_PREFIX)) == 0) {
			said = note_folder(abs, path, prog, out);
		} else {
			struct run_leftover *l;
			size_t n;

			if (run_leftovers_find(abs, &l, &n) == 0) {
				for (size_t i = 0; i < n; i++) {
					fprintf(out, "%s: ", prog);
					run_leftover_describe(&l[i], out);
					fputc('\n', out);
				}
				if (n)
					fprintf(out,
						"%s: 'fsdpscope run --out %s' merges what %s left into a trace of its "
						"own\n",
						prog, path, n == 1 ? "that run" : "those runs");
				said = n > 0;
				run_leftovers_free(l, n);
			}
		}
		free(abs);
		return said;
	}
	slash = strrchr(abs, '/');
	if (slash && slash != abs) {
		*slash = '\0';
		if (strncmp(strrchr(abs, '/') + 1, RUN_FOLDER_PREFIX, strlen(RUN_FOLDER_PREFIX)) == 0)
			said = note_folder(abs, path, prog, out);
	}
	free(abs);
	return said;
}
