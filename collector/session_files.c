/*
 * session_files.c - a session's input of trace files read from disk: one
 * through the parser (trace_read), several as one job through the merge
 * (merge_read: clocks aligned), every record handed to the session's
 * pipeline as lint reads it.
 */
#include "collector/session_internal.h"

#include "collector/merge.h"
#include "common/trace_parser.h"

#include <errno.h>
#include <stdlib.h>

struct files_input {
	const char *const *paths; /* borrowed */
	size_t npaths;
	merge_t *merge; /* several traces */
};

static int files_on_header(void *ctx, const struct fss_file_header *h)
{
	return fss_session_take_header(ctx, h);
}

static int files_on_record(void *ctx, const struct fss_record_head *rec)
{
	return fss_session_take(ctx, rec);
}

static int files_pump(void *impl, fss_session_t *s, int timeout_ms)
{
	struct files_input *in = impl;
	struct trace_parser_ops ops = {.on_header = files_on_header, .on_record = files_on_record};

	(void)timeout_ms;
	if (in->merge)
		return merge_read(in->merge, &ops, s);
	return trace_read(in->paths[0], &ops, s, NULL);
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
	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	in->paths = paths;
	in->npaths = n;
	if (n > 1) {
		rc = merge_open(&in->merge, paths, n, err, errlen);
		if (rc) {
			free(in);
			return rc;
		}
	}
	return fss_session_set_input(s, &files_ops, in);
}
