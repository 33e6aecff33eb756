/*
 * sender_file.c - the file sink (sender_file.h): <dir>/fsdpscope-<host>-<pid>.fss,
 * dir being FSDPSCOPE_OUT, else a private per-user directory
 * ($XDG_RUNTIME_DIR/fsdpscope or $TMPDIR/fsdpscope-<uid>), never the job's
 * current one; created as ".partial" (O_EXCL | O_NOFOLLOW, mode 0600) and
 * renamed at exit.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/sender_file.h"
#include "agent/sender_state.h"
#include "common/trace_writer.h"

#define SENDER_NAME_TRIES 16 /* fsdpscope-<host>-<pid>.fss, then -1 ... -15 when a name is taken */

/*
 * A directory only this user can write into: made 0700 when missing (with
 * create), not a symlink, owned by the effective user, nothing granted to
 * group or others. 0, or -ENOTDIR / -EPERM (someone else's, or too open),
 * or the error of mkdir / lstat.
 */
static int sender_private_dir(const char *path, int create)
{
	struct stat st;

	if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (st.st_uid != geteuid() || (st.st_mode & 077))
		return -EPERM;
	return 0;
}

/* The default directory when FSDPSCOPE_OUT is not set (docs/agent.md):
 * $XDG_RUNTIME_DIR/fsdpscope when that runtime directory is the user's
 * own, else $TMPDIR/fsdpscope-<uid> (/tmp without TMPDIR), each checked by
 * sender_private_dir. Never the job's current directory. */
static int sender_default_dir(char *out, size_t cap)
{
	const char *runtime = agent_config.runtime_dir;
	const char *tmp = agent_config.tmp_dir[0] ? agent_config.tmp_dir : "/tmp";
	int n;

	if (runtime[0] && sender_private_dir(runtime, 0) == 0) {
		n = snprintf(out, cap, "%s/fsdpscope", runtime);
		if (n > 0 && (size_t)n < cap && sender_private_dir(out, 1) == 0)
			return 0;
	}
	n = snprintf(out, cap, "%s/fsdpscope-%u", tmp, (unsigned)geteuid());
	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	return sender_private_dir(out, 1);
}

/* FSDPSCOPE_OUT: the user's choice, so it may be shared (a group
 * directory): made 0700 when missing; it must be a writable directory. */
static int sender_out_dir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (stat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (access(dir, W_OK | X_OK) < 0)
		return -errno;
	return 0;
}

/* Create this process's file in dir. Never opens an existing name: the
 * writer creates "<name>.partial" with O_EXCL | O_NOFOLLOW, and a name
 * whose final file exists (a finished trace of an earlier process with the
 * same pid) is passed over for the next suffix. */
static int sender_create_in(const char *dir, const char *host, const struct trace_writer_options *opts)
{
	struct stat st;
	int err = -EEXIST;

	for (int attempt = 0; attempt < SENDER_NAME_TRIES; attempt++) {
		int n = attempt == 0 ? snprintf(sender.path, sizeof(sender.path), "%s/fsdpscope-%s-%d.fss", dir, host,
						(int)getpid())
				     : snprintf(sender.path, sizeof(sender.path), "%s/fsdpscope-%s-%d-%d.fss", dir,
						host, (int)getpid(), attempt);
		if (n < 0 || (size_t)n >= sizeof(sender.path))
			return -ENAMETOOLONG;
		if (lstat(sender.path, &st) == 0)
			continue;
		err = trace_writer_open(&sender.w, sender.path, opts);
		if (err != -EEXIST)
			return err;
	}
	return err;
}

/* The file sink: in FSDPSCOPE_OUT when set and usable, else in the default
 * directory. When no file can be made the caller goes on without a sink:
 * every record is counted in sink_dropped, and one line on stderr says so. */
int sender_open_file(struct fss_rec_process_hello *hello)
{
	const char *out = agent_config.out_dir;
	char host[256], dir[PATH_MAX];
	struct trace_writer_options opts = {0};
	int out_err = 0, err;

	if (gethostname(host, sizeof(host)) != 0)
		strcpy(host, "host");
	host[sizeof(host) - 1] = '\0';
	for (char *p = host; *p; p++)
		if (*p == '/')
			*p = '_';
	agent_hello_build(hello);
	opts.features = hello->features;
	opts.exclusive = 1;
	if (out[0]) {
		out_err = sender_out_dir(out);
		if (!out_err)
			out_err = sender_create_in(out, host, &opts);
		if (!out_err)
			goto opened;
	}
	err = sender_default_dir(dir, sizeof(dir));
	if (!err)
		err = sender_create_in(dir, host, &opts);
	if (err) {
		if (out[0])
			agent_warn(
			    "no trace file: FSDPSCOPE_OUT=%s: %s; %s: %s; the records of this process are dropped", out,
			    strerror(-out_err), dir, strerror(-err));
		else
			agent_warn("no trace file: %s: %s; the records of this process are dropped (set FSDPSCOPE_OUT "
				   "to a writable directory)",
				   dir, strerror(-err));
		return err;
	}
	if (out[0])
		agent_warn("cannot write into FSDPSCOPE_OUT=%s (%s): writing %s instead", out, strerror(-out_err),
			   sender.path);
opened:
	sender.kind = SINK_FILE;
	agent_debug("writing %s", sender.path);
	return 0;
}
