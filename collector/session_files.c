/*
 * session_files.c - a session's input of trace files read from disk: one
 * through the parser (trace_read, its info kept for what the file was),
 * several as one job through the merge (merge_read: clocks aligned; the
 * merge keeps each trace's read), every record handed to the session's
 * pipeline as lint reads it, or to the tool alone on a second read.
 */
#include "collector/session_internal.h"

#include "collector/kineto_input.h"
#include "collector/merge.h"
#include "common/trace_parser.h"

#include <errno.h>
#include <stdlib.h>

struct files_input {
	const char *const *paths; /* borrowed */
	size_t npaths;
	merge_t *merge;		     /* several traces */
	struct trace_read_info info; /* one trace: its latest read */
	int read;		     /* a read has filled info */
};

static int files_on_header(void *ctx, const struct fss_file_header *h)
{
	return fss_session_take_header(ctx, h);
}

static int files_on_record(void *ctx, const struct fss_record_head *rec)
{
	return fss_session_take(ctx, rec);
}

static int files_tool_header(void *ctx, const struct fss_file_header *h)
{
	return fss_session_tool_header(ctx, h);
}

static int files_tool_record(void *ctx, const struct fss_record_head *rec)
{
	return fss_session_tool_take(ctx, rec);
}

/* Read the files once through ops. */
static int files_read(struct files_input *in, fss_session_t *s, const struct trace_parser_ops *ops)
{
	if (in->merge)
		return merge_read(in->merge, ops, s);
	if (in->npaths > 1)
		return -EINVAL; /* the merge was handed to the caller */
	in->read = 1;
	return trace_read_flags(in->paths[0], s->read_flags, ops, s, &in->info);
}

static int files_pump(void *impl, fss_session_t *s, int timeout_ms)
{
	static const struct trace_parser_ops ops = {.on_header = files_on_header, .on_record = files_on_record};

	(void)timeout_ms;
	return files_read(impl, s, &ops);
}

static void files_free(void *impl)
{
	struct files_input *in = impl;

	if (!in)
		return;
	merge_free(in->merge);
	free(in);
}

static const struct fss_session_input files_ops = {
    .kind = "files",
    .pump = files_pump,
    .free = files_free,
};

int fss_session_open_files(fss_session_t *s, const char *const *paths, size_t n, char *err, size_t errlen)
{
	struct files_input *in;
	int rc;

	if (!n)
		return -EINVAL;
	if (s->input_ops)
		return -EBUSY;
	/* the format is told by the content: PyTorch profiler traces have their own input */
	rc = kineto_input_classify(paths, n, err, errlen);
	if (rc < 0)
		return rc;
	if (rc == KINETO_INPUT_ALL)
		return kineto_input_open(s, paths, n, err, errlen);
	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	in->paths = paths;
	in->npaths = n;
	if (n > 1) {
		rc = merge_open_flags(&in->merge, paths, n, s->read_flags, err, errlen);
		if (rc) {
			free(in);
			return rc;
		}
	}
	return fss_session_set_input(s, &files_ops, in);
}

/* The session's file input, NULL for another. */
static struct files_input *files_of(const fss_session_t *s)
{
	return s->input_ops == &files_ops ? s->input : NULL;
}

int fss_session_reread(fss_session_t *s)
{
	static const struct trace_parser_ops ops = {.on_header = files_tool_header, .on_record = files_tool_record};
	struct files_input *in = files_of(s);

	if (!in)
		return kineto_input_reread(s);
	return files_read(in, s, &ops);
}

const struct trace_read_info *fss_session_read_info(const fss_session_t *s)
{
	const struct files_input *in = files_of(s);

	if (!in)
		return kineto_input_read_info(s);
	return in->read ? &in->info : NULL;
}

merge_t *fss_session_merge(fss_session_t *s)
{
	struct files_input *in = files_of(s);

	return in ? in->merge : NULL;
}

merge_t *fss_session_release_merge(fss_session_t *s)
{
	struct files_input *in = files_of(s);
	merge_t *m = in ? in->merge : NULL;

	if (in)
		in->merge = NULL;
	return m;
}
