/*
 * out_file.c - the files and folders fsdpscope writes (see out_file.h).
 */
#include "common/out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct out_file {
	FILE *stream;
	char *path; /* the name the file ends at */
	char *tmp;  /* its temporary name; NULL for a device or a pipe */
};

static int fail(int err, char *why, size_t whylen, const char *path, const char *what)
{
	if (what)
		snprintf(why, whylen, "%s: %s", path, what);
	else
		snprintf(why, whylen, "%s: %s", path, strerror(-err));
	return err;
}

/* The folder holding path ("." for a bare name). */
static char *folder_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

/* Whether users other than this one (and root) can write in st's folder. */
static int others_may_write(const struct stat *st)
{
	return (st->st_uid != geteuid() && st->st_uid != 0) || (st->st_mode & S_IWOTH);
}

static void owner_name(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char scratch[1024];

	if (getpwuid_r(uid, &pw, scratch, sizeof scratch, &res) == 0 && res)
		snprintf(buf, len, "%s (uid %u)", res->pw_name, (unsigned)uid);
	else
		snprintf(buf, len, "uid %u", (unsigned)uid);
}

int out_dir_check(const char *path, char *why, size_t whylen)
{
	struct stat st;
	char owner[300];

	if (stat(path, &st) < 0)
		return fail(-errno, why, whylen, path, NULL);
	if (!S_ISDIR(st.st_mode))
		return fail(-ENOTDIR, why, whylen, path, "it is not a folder");
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		owner_name(st.st_uid, owner, sizeof owner);
		snprintf(why, whylen,
			 "%s belongs to %s: another user's folder may hold links they planted at the names written "
			 "there; use a folder of your own",
			 path, owner);
		return -EPERM;
	}
	if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
		owner_name(st.st_uid, owner, sizeof owner);
		snprintf(why, whylen,
			 "%s (owned by %s, mode %04o) may be written by any user and has no sticky bit: anyone "
			 "could plant links at the names written there; use a folder of your own, or chmod o-w it",
			 path, owner, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

int out_dir_make(const char *path, char *why, size_t whylen)
{
	char *copy = strdup(path);
	int err = 0;

	if (!copy)
		return fail(-ENOMEM, why, whylen, path, NULL);
	for (char *p = copy + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		/* Never writable by others, whatever the umask: the check below
		 * would refuse the folder just made. */
		if (mkdir(copy, 0775) < 0 && errno != EEXIST) {
			err = fail(-errno, why, whylen, copy, NULL);
			break;
		}
		*p = c;
		if (!c)
			break;
	}
	free(copy);
	return err ? err : out_dir_check(path, why, whylen);
}

/* A device or a pipe at path, opened as it is; NULL stream (and 0) when
 * path is a regular file after all. */
static int open_in_place(out_file_t *f, const char *path, int nofollow, char *why, size_t whylen)
{
	struct stat st;
	int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));

	if (fd < 0)
		return fail(-errno, why, whylen, path, NULL);
	if (fstat(fd, &st) < 0) {
		int err = -errno;
		close(fd);
		return fail(err, why, whylen, path, NULL);
	}
	if (S_ISREG(st.st_mode)) { /* became a regular file since the stat: written beside it */
		close(fd);
		return 0;
	}
	f->stream = fdopen(fd, "w");
	if (!f->stream) {
		int err = -errno;
		close(fd);
		return fail(err, why, whylen, path, NULL);
	}
	return 0;
}

static int open_beside(out_file_t *f, unsigned mode, char *why, size_t whylen)
{
	size_t n = strlen(f->path) + sizeof(".tmp-XXXXXX");
	int fd;

	f->tmp = malloc(n);
	if (!f->tmp)
		return fail(-ENOMEM, why, whylen, f->path, NULL);
	snprintf(f->tmp, n, "%s.tmp-XXXXXX", f->path);
	fd = mkostemp(f->tmp, O_CLOEXEC); /* O_EXCL: never a link's target */
	if (fd < 0) {
		int err = -errno;
		free(f->tmp);
		f->tmp = NULL;
		snprintf(why, whylen, "%s: cannot create a temporary file beside it: %s", f->path, strerror(-err));
		return err;
	}
	if (fchmod(fd, mode) < 0 || !(f->stream = fdopen(fd, "w"))) {
		int err = -errno;
		close(fd);
		unlink(f->tmp);
		free(f->tmp);
		f->tmp = NULL;
		return fail(err, why, whylen, f->path, NULL);
	}
	return 0;
}

/* A link at path: refused in a folder others can write, else its target. */
static int follow_link(const char *path, char **target, char *why, size_t whylen)
{
	char *folder = folder_of(path);
	struct stat st;
	int err = 0;

	*target = NULL;
	if (!folder)
		return fail(-ENOMEM, why, whylen, path, NULL);
	if (stat(folder, &st) < 0) {
		err = fail(-errno, why, whylen, folder, NULL);
	} else if (others_may_write(&st)) {
		snprintf(why, whylen,
			 "%s is a symbolic link in %s, which other users can write: not written through it (it may "
			 "be theirs); name the file itself, or one in a folder of your own",
			 path, folder);
		err = -ELOOP;
	} else {
		*target = realpath(path, NULL); /* NULL: a dangling link, replaced */
	}
	free(folder);
	return err;
}

int out_file_open(const char *path, unsigned mode, out_file_t **out, char *why, size_t whylen)
{
	out_file_t *f = calloc(1, sizeof *f);
	struct stat st;
	char *target = NULL;
	int err = 0, is_link = 0;

	*out = NULL;
	if (!f)
		return fail(-ENOMEM, why, whylen, path, NULL);
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		is_link = 1;
		err = follow_link(path, &target, why, whylen);
	}
	f->path = strdup(target ? target : path);
	free(target);
	if (!err && !f->path)
		err = fail(-ENOMEM, why, whylen, path, NULL);
	if (!err && stat(f->path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		err = open_in_place(f, f->path, !is_link, why, whylen);
	if (!err && !f->stream)
		err = open_beside(f, mode, why, whylen);
	if (err) {
		out_file_free(f);
		return err;
	}
	*out = f;
	return 0;
}

FILE *out_file_stream(out_file_t *f)
{
	return f->stream;
}

int out_file_commit(out_file_t *f, char *why, size_t whylen)
{
	int err = 0;

	errno = 0;
	if (fflush(f->stream) != 0 || ferror(f->stream))
		err = errno ? -errno : -EIO;
	else if (f->tmp && fsync(fileno(f->stream)) < 0)
		err = -errno;
	errno = 0;
	if (fclose(f->stream) != 0 && !err)
		err = errno ? -errno : -EIO;
	f->stream = NULL;
	if (!err && f->tmp) {
		if (rename(f->tmp, f->path) < 0) { /* replaces a link at path, never writes through it */
			err = -errno;
			snprintf(why, whylen, "%s: cannot rename %s into place: %s", f->path, f->tmp, strerror(-err));
		} else {
			free(f->tmp);
			f->tmp = NULL;
		}
	} else if (err) {
		fail(err, why, whylen, f->path, NULL);
	}
	out_file_free(f);
	return err;
}

void out_file_free(out_file_t *f)
{
	if (!f)
		return;
	if (f->stream)
		fclose(f->stream);
	if (f->tmp)
		unlink(f->tmp);
	free(f->tmp);
	free(f->path);
	free(f);
}

int out_file_write_all(const char *path, unsigned mode, const void *data, size_t len, char *why, size_t whylen)
{
	out_file_t *f;
	int err = out_file_open(path, mode, &f, why, whylen);

	if (err)
		return err;
	errno = 0;
	if (len && fwrite(data, 1, len, f->stream) != len) {
		err = errno ? -errno : -EIO;
		out_file_free(f);
		return fail(err, why, whylen, path, NULL);
	}
	return out_file_commit(f, why, whylen);
}
