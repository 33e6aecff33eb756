/*
 * out_file.h - the files and folders fsdpscope writes, safe against another
 * local user's links.
 *
 * A file is written as what it is:
 *   - a device or a pipe (/dev/full, /dev/stdout, a FIFO) is opened and
 *     written in place; its write errors are the command's;
 *   - a regular file, or a name not there yet, is written to a temporary
 *     file beside it (exclusive create, never through a link) and renamed
 *     over the name once it is whole: a reader never sees half of it, and a
 *     link planted at the name is replaced, not written through.
 * A name that is a symbolic link in a folder other users can write is
 * refused: it may be theirs, pointing at a file of ours.
 *
 * A folder for the tool's own names (--out) is made with its parents, then
 * refused when another user owns it (root excepted) or others may write it
 * without the sticky bit: anyone could have planted links in it.
 */
#ifndef FSS_COMMON_OUT_FILE_H
#define FSS_COMMON_OUT_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct out_file out_file_t;

/* Opens path for writing (mode: that of a file created, e.g. 0644). On
 * failure returns -errno with the reason, naming path, in why. */
int out_file_open(const char *path, unsigned mode, out_file_t **out, char *why, size_t whylen);

FILE *out_file_stream(out_file_t *f);

/* Flushes (and for a regular file syncs and renames into place). Returns 0
 * or -errno with the reason in why; the file is freed either way. */
int out_file_commit(out_file_t *f, char *why, size_t whylen);

/* Drops an uncommitted file: its temporary name is removed, and a file
 * that was there stays as it was. NULL is fine. */
void out_file_free(out_file_t *f);

/* Writes len bytes to path as one out_file. */
int out_file_write_all(const char *path, unsigned mode, const void *data, size_t len, char *why, size_t whylen);

/* mkdir -p path (new folders 0775 less the umask: never writable by
 * others), then out_dir_check. */
int out_dir_make(const char *path, char *why, size_t whylen);

/* Refuses (-EPERM, the owner named in why) a folder that another user owns
 * (root's is trusted) or that others may write without the sticky bit;
 * -ENOTDIR for what is not a folder. */
int out_dir_check(const char *path, char *why, size_t whylen);

#endif
