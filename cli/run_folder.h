/*
 * run_folder.h - the folder side of `fsdpscope run` (docs/run.md): the
 * run's private folder in DIR, the lock that says the run is alive, where
 * the socket lives, the trace's final name, and what runs that died left.
 *
 * A run owns DIR/.fsdpscope-run.<id>/ (mode 0700 whatever the umask): its
 * job's per-process files (FSDPSCOPE_OUT), its unfinished trace, its
 * socket when the path fits a sockaddr_un (else a 0700 folder of its own
 * under $XDG_RUNTIME_DIR or /tmp), and run.info, which names the run and
 * stays flock()ed while the run lives. A folder whose run.info nobody
 * locks is a leftover: a run that was killed.
 */
#ifndef FSS_CLI_RUN_FOLDER_H
#define FSS_CLI_RUN_FOLDER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "collector/ingest.h"

typedef struct run_folder run_folder_t;

/* Prefix of a run's private folder in DIR. */
#define RUN_FOLDER_PREFIX ".fsdpscope-run."
/* The session's viewer socket (cli/session.h), beside the agents' socket. */
#define RUN_VIEWER_SOCKET "viewer.sock"

/*
 * run_folder_new - create DIR (mkdir -p; refused when another user owns
 * it or others may write it without the sticky bit, common/out_file.h)
 * and the run's private folder in it, write and lock its run.info (argv:
 * the job's command line, for the record), and choose the socket path.
 * Returns 0 with *out owned by the caller (run_folder_close), or a
 * negative errno; then `what` is the whole reason, the path named.
 */
int run_folder_new(run_folder_t **out, const char *dir, char *const *argv, char *what, size_t whatlen);

/* The absolute DIR; the private folder (FSDPSCOPE_OUT for the job); the
 * socket's path; the path to hand ingest_new (inside the folder). Valid
 * until close. */
const char *run_folder_dir(const run_folder_t *s);
const char *run_folder_path(const run_folder_t *s);
const char *run_folder_socket(const run_folder_t *s);
const char *run_folder_output(const run_folder_t *s);

/*
 * run_folder_listen - listen on the run's socket with `ing`, the socket
 * file mode 0600 whatever the umask. Returns 0 or a negative errno.
 */
int run_folder_listen(run_folder_t *s, ingest_t *ing);

/* run_folder_set_job - note the job's process group in run.info, so that a
 * later run can tell whether the job outlived this one. 0 or -errno. */
int run_folder_set_job(run_folder_t *s, pid_t pgid);

/*
 * run_folder_files - the per-process trace files in the private folder
 * (the job's agents wrote them: nothing else writes there), sorted, as
 * malloc'd paths in a malloc'd array (caller frees both). 0 or -errno.
 */
int run_folder_files(const run_folder_t *s, char ***paths, size_t *n);

/*
 * run_folder_list - as run_folder_files, for any folder agents write
 * per-process files into (a dead session's folder, collect's spool).
 */
int run_folder_list(const char *folder, char ***paths, size_t *n);

/*
 * run_folder_publish - move the finished trace (run_folder_output) to
 * DIR/NAME(.fss), never replacing a file that is there: when the name is
 * taken, NAME-2.fss, NAME-3.fss, ... *path is the name used (malloc'd,
 * caller frees); *taken is set when it is not the one asked for. Returns 0
 * or a negative errno.
 */
int run_folder_publish(run_folder_t *s, const char *name, char **path, int *taken);

/*
 * run_folder_close - end the session. With `remove`, the private folder
 * goes (run.info, the socket's own folder), unless files are still in it,
 * which a later run then finds as leftovers. The lock is released either
 * way. NULL is allowed.
 */
void run_folder_close(run_folder_t *s, int remove);

/* What a run that died left in DIR. */
struct run_leftover {
	char *folder;	    /* DIR/.fsdpscope-run.<id> */
	char *id;	    /* <id> */
	long pid;	    /* that run's fsdpscope, 0 when unknown */
	long job_pgid;	    /* its job's process group, 0 when unknown */
	long long started;  /* when it started (Unix time), 0 when unknown */
	char *cmd;	    /* its job's command line, "" when unknown */
	char *stale_socket; /* its socket file, still there, or NULL */
	char *partial;	    /* its unfinished trace, or NULL */
	uint64_t partial_bytes;
	size_t nfiles;	 /* per-process files its agents wrote */
	int job_running; /* its job's process group still has processes */
	int lock_fd;	 /* run.info, locked by us while we look at it */
};

/*
 * run_leftovers_find - the private folders in DIR whose run is dead
 * (run.info not locked), each now locked by the caller until
 * run_leftovers_free. Folders of runs still alive, or of other users, are
 * passed over. Returns 0 with *out (may be NULL when *n is 0) or -errno.
 */
int run_leftovers_find(const char *dir, struct run_leftover **out, size_t *n);

/*
 * run_leftover_recover - merge what leftover `l` holds (its unfinished
 * trace, then its per-process files) into DIR/recovered-<id>.fss (a new
 * name, never replacing), then remove the folder and its stale socket.
 * *path (malloc'd) and *stats (valid until the next call) say what came
 * of it. Call only when !l->job_running. Returns 0 or a negative errno
 * (nothing removed then).
 */
int run_leftover_recover(struct run_leftover *l, const char *dir, char **path, struct ingest_stats *stats);

/*
 * run_leftover_remove - remove leftover `l`: its unfinished trace, its
 * stale sockets, the agents' and the viewer's (and their own folder),
 * run.info and the folder,
 * which must hold nothing else by then (the caller merged and removed its
 * per-process files). For a caller that merged what l held into a trace
 * of its own that is safely on disk.
 */
void run_leftover_remove(struct run_leftover *l);

/* run_leftovers_free - unlock and free what run_leftovers_find returned. */
void run_leftovers_free(struct run_leftover *l, size_t n);

/* run_leftover_describe - one line for l (no newline): which run, when,
 * what it left. */
void run_leftover_describe(const struct run_leftover *l, FILE *out);

/*
 * run_unfinished_note - for a path given to a reader (lint): when it is a
 * folder holding leftovers of dead runs, or a file inside a run's private
 * folder, print to `out` what run it comes from and whether that run died
 * (lines start with `prog`). Returns 1 when something was said, 0 if not.
 */
int run_unfinished_note(const char *path, const char *prog, FILE *out);

#endif
