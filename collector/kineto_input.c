/*
 * kineto_input.c - PyTorch profiler traces as a session's input
 * (kineto_input.h): the files read and checked to be one job, then their
 * sources' records merged by host time into the session.
 */
#include "collector/kineto_input.h"

#include "collector/session_internal.h"
#include "collector/trace_jobs.h"
#include "common/error.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct kineto_input {
	struct kineto_input_file *files;
	kineto_map_t **maps;
	size_t n;
	int partial;		      /* some file was read only in part */
	struct trace_read_info rinfo; /* the files' reads as a trace read says it (dump, one file) */
};

const char *kineto_read_status_words(enum kineto_read_status status)
{
	switch (status) {
	case KINETO_READ_OK:
		return "read whole";
	case KINETO_READ_TRUNCATED:
		return "the file ends inside the document";
	case KINETO_READ_BAD_GZIP:
		return "the gzip stream is damaged";
	case KINETO_READ_BAD_JSON:
		return "not JSON";
	case KINETO_READ_NOT_TRACE:
		return "JSON, but not a Chrome trace (no traceEvents array)";
	default:
		return "the file could not be read";
	}
}

/* ---- what the files are ---- */

enum file_kind { KIND_OTHER = 0, KIND_FSS, KIND_KINETO, KIND_UNREADABLE };

static int file_kind(const char *path)
{
	char magic[8];
	struct stat st;
	ssize_t got;
	int fd;

	/* a pipe can be read once: it is left to the trace reader (a profiler
	 * trace is read from a file) */
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return KIND_OTHER;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return KIND_UNREADABLE;
	got = read(fd, magic, sizeof(magic));
	close(fd);
	if (got == (ssize_t)sizeof(magic) && memcmp(magic, FSS_FILE_MAGIC, sizeof(magic)) == 0)
		return KIND_FSS;
	return kineto_sniff(path) == 1 ? KIND_KINETO : KIND_OTHER;
}

int kineto_input_sniff(const char *path)
{
	return file_kind(path) == KIND_KINETO;
}

int kineto_input_classify(const char *const *paths, size_t n, char *err, size_t errlen)
{
	const char *fss = NULL, *kineto = NULL, *other = NULL;

	for (size_t i = 0; i < n; i++) {
		int k = file_kind(paths[i]);

		if (k == KIND_FSS && !fss)
			fss = paths[i];
		else if (k == KIND_KINETO && !kineto)
			kineto = paths[i];
		else if (k == KIND_OTHER && !other)
			other = paths[i];
	}
	if (!kineto)
		return KINETO_INPUT_NONE;
	if (fss) {
		snprintf(err, errlen,
			 "the list mixes fsdpscope traces (%s) and PyTorch profiler traces (%s): give one kind", fss,
			 kineto);
		return FSS_E_USAGE;
	}
	if (other) {
		snprintf(err, errlen,
			 "%s: neither an fsdpscope trace nor a PyTorch profiler trace (Chrome-trace JSON, or gzip of "
			 "one), read with the PyTorch profiler traces (%s)",
			 other, kineto);
		return FSS_E_USAGE;
	}
	return KINETO_INPUT_ALL;
}

/* ---- one job ---- */

/* A file's CLOCK_REALTIME span: its first record's time and its last's
 * (the records are walked once, then handed out again from the first). */
static void file_span(kineto_map_t *m, int64_t *first, int64_t *last)
{
	const struct fss_record_head *rec;
	int64_t at = kineto_map_peek_realtime(m);

	*first = *last = 0;
	if (at == INT64_MAX)
		return;
	*first = *last = at;
	while (kineto_map_next(m, &rec) == 1)
		if ((at = kineto_map_peek_realtime(m)) != INT64_MAX)
			*last = at;
	kineto_map_rewind(m);
}

/* Whether the files are one job: of one distributedInfo world, no rank
 * twice, at one time (trace_jobs.h: a profiler trace shows no
 * communicator id, its world decides); err names the files that are not. */
static int one_job(const struct kineto_input *in, char *err, size_t errlen)
{
	struct trace_jobs_file *files;
	struct trace_jobs_rank *ranks;
	int rc;

	if (in->n < 2)
		return 0;
	for (size_t i = 0; i < in->n; i++) {
		const struct kineto_map_info *a = in->files[i].info;

		if (!a->have_distributed || a->world_size <= 0 || a->rank < 0) {
			snprintf(err, errlen,
				 "%s: no distributedInfo (rank, world_size): it cannot be told to be of one job with "
				 "the other files; read it alone",
				 in->files[i].path);
			return FSS_E_USAGE;
		}
		for (size_t j = 0; j < i; j++) {
			const struct kineto_map_info *b = in->files[j].info;

			if (a->world_size != b->world_size) {
				snprintf(err, errlen,
					 "%s and %s are not of one job: their worlds disagree (world_size %d and %d)",
					 in->files[j].path, in->files[i].path, b->world_size, a->world_size);
				return FSS_E_USAGE;
			}
		}
	}
	files = calloc(in->n, sizeof(*files));
	ranks = calloc(in->n, sizeof(*ranks));
	if (!files || !ranks) {
		free(files);
		free(ranks);
		return -ENOMEM;
	}
	for (size_t i = 0; i < in->n; i++) {
		const struct kineto_map_info *a = in->files[i].info;

		ranks[i] = (struct trace_jobs_rank){.size = a->world_size, .rank = a->rank};
		files[i] = (struct trace_jobs_file){.path = in->files[i].path, .ranks = &ranks[i], .nranks = 1};
		file_span(in->maps[i], &files[i].first_ns, &files[i].last_ns);
	}
	rc = trace_jobs_check(files, in->n, err, errlen);
	free(files);
	free(ranks);
	return rc;
}

/* ---- the input ---- */

static void input_free(void *impl)
{
	struct kineto_input *in = impl;

	if (!in)
		return;
	for (size_t i = 0; i < in->n; i++)
		kineto_map_free(in->maps[i]);
	free(in->maps);
	free(in->files);
	free(in);
}

/* A synthetic file header: what the files' records are, as a trace file's header says it. */
static void input_header(const struct kineto_input *in, struct fss_file_header *h)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, FSS_FILE_MAGIC, sizeof(h->magic));
	h->byte_order = FSS_BYTE_ORDER_MARK;
	h->version_major = FSS_FORMAT_MAJOR;
	h->version_minor = FSS_FORMAT_MINOR;
	h->header_size = sizeof(*h);
	h->features = FSS_FEATURE_NCCL | FSS_FEATURE_CUPTI | FSS_FEATURE_NVTX;
	(void)in;
}

typedef int (*take_fn)(fss_session_t *s, const struct fss_record_head *rec);

/* Every file's records, merged by their realtime, to take(). */
static int input_feed(struct kineto_input *in, fss_session_t *s,
		      int (*header)(fss_session_t *, const struct fss_file_header *), take_fn take)
{
	struct fss_file_header h;
	int rc;

	input_header(in, &h);
	in->rinfo.records = 0;
	if ((rc = header(s, &h)))
		return rc;
	for (;;) {
		size_t best = SIZE_MAX;
		int64_t at = INT64_MAX;
		const struct fss_record_head *rec;

		for (size_t i = 0; i < in->n; i++) {
			int64_t t = kineto_map_peek_realtime(in->maps[i]);

			if (t < at) {
				at = t;
				best = i;
			}
		}
		if (best == SIZE_MAX)
			break;
		/* a file's records of one time go out together */
		while (kineto_map_peek_realtime(in->maps[best]) == at && kineto_map_next(in->maps[best], &rec) == 1) {
			in->rinfo.records++;
			if ((rc = take(s, rec)))
				return rc;
		}
	}
	return in->partial ? FSS_E_TRUNCATED : 0;
}

static int input_pump(void *impl, fss_session_t *s, int timeout_ms)
{
	(void)timeout_ms;
	return input_feed(impl, s, fss_session_take_header, fss_session_take);
}

static const struct fss_session_input kineto_ops = {
    .kind = "kineto",
    .pump = input_pump,
    .free = input_free,
};

/* Read file i of in; err names it when it cannot be read. */
static int input_read_one(struct kineto_input *in, size_t i, char *err, size_t errlen)
{
	struct kineto_input_file *file = &in->files[i];
	kineto_file_t *f = NULL;
	int rc = kineto_file_read(file->path, &f, &file->read);

	if (rc) {
		if (rc != -ENOMEM)
			snprintf(err, errlen, "%s: %s", file->path, fss_strerror(rc));
		return rc;
	}
	if (file->read.status == KINETO_READ_NOT_TRACE || file->read.status == KINETO_READ_IO ||
	    (file->read.status != KINETO_READ_OK && !kineto_file_nevents(f))) {
		snprintf(err, errlen, "%s: %s%s%s", file->path, kineto_read_status_words(file->read.status),
			 file->read.message[0] ? ": " : "", file->read.message);
		kineto_file_free(f);
		return file->read.status == KINETO_READ_IO && file->read.error ? -file->read.error : FSS_E_NOT_TRACE;
	}
	in->partial |= file->read.status != KINETO_READ_OK;
	file->skipped = kineto_file_counts(f)->skipped;
	file->source = (uint32_t)i;
	rc = kineto_map_new(f, file->path, file->source, &in->maps[i]);
	if (rc)
		return rc;
	file->info = kineto_map_info(in->maps[i]);
	file->figures = kineto_map_figures(in->maps[i]);
	return 0;
}

int kineto_input_open(fss_session_t *s, const char *const *paths, size_t n, char *err, size_t errlen)
{
	struct kineto_input *in;
	int rc = 0;

	if (!n)
		return -EINVAL;
	if (s->input_ops)
		return -EBUSY;
	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	in->files = calloc(n, sizeof(*in->files));
	in->maps = calloc(n, sizeof(*in->maps));
	if (!in->files || !in->maps)
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < n; i++) {
		in->files[i].path = paths[i];
		rc = input_read_one(in, i, err, errlen);
		in->n = in->maps[i] ? i + 1 : i;
	}
	if (!rc)
		rc = one_job(in, err, errlen);
	in->rinfo.input = TRACE_INPUT_TRACE;
	in->rinfo.end = in->partial ? TRACE_END_CUT : TRACE_END_CLEAN;
	for (size_t i = 0; !rc && i < in->n; i++)
		if (in->files[i].read.status != KINETO_READ_OK && !in->rinfo.message[0])
			snprintf(in->rinfo.message, sizeof(in->rinfo.message),
				 "%s: a partial reading: %s at byte %llu%s%s", in->files[i].path,
				 kineto_read_status_words(in->files[i].read.status),
				 (unsigned long long)in->files[i].read.offset, in->files[i].read.message[0] ? ": " : "",
				 in->files[i].read.message);
	if (rc) {
		if (rc == -ENOMEM && errlen)
			snprintf(err, errlen, "out of memory");
		input_free(in);
		return rc;
	}
	return fss_session_set_input(s, &kineto_ops, in);
}

const struct kineto_input_file *kineto_input_files(const fss_session_t *s, size_t *n)
{
	const struct kineto_input *in = s->input_ops == &kineto_ops ? s->input : NULL;

	*n = in ? in->n : 0;
	return in ? in->files : NULL;
}

const struct trace_read_info *kineto_input_read_info(const fss_session_t *s)
{
	const struct kineto_input *in = s->input_ops == &kineto_ops ? s->input : NULL;

	return in ? &in->rinfo : NULL;
}

int kineto_input_reread(fss_session_t *s)
{
	struct kineto_input *in = s->input_ops == &kineto_ops ? s->input : NULL;

	if (!in)
		return -EINVAL;
	for (size_t i = 0; i < in->n; i++)
		kineto_map_rewind(in->maps[i]);
	return input_feed(in, s, fss_session_tool_header, fss_session_tool_take);
}
