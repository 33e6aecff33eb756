/*
 * trace_writer.c - chunked trace writer.
 */
#include "common/trace_writer.h"

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/record.h"
#include "common/trace_format.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

struct trace_writer {
	int fd;
	int owns_fd;          /* file writer: close and rename at the end */
	int sync_on_close;
	int error;            /* first error met; sticky */
	char *path;           /* final name (file writer only) */
	char *partial_path;   /* name while writing */
	uint64_t chunk_seq;
	uint64_t records;
	uint64_t bytes;
	uint32_t chunk_records;
	uint32_t chunk_used;
	uint32_t chunk_capacity;
	unsigned char *buf;   /* the chunk header's room, then the payload */
	unsigned char *chunk; /* payload being filled: buf + the chunk header */
	void (*on_chunk)(void *ctx, uint64_t seq, uint32_t records, const void *bytes, size_t len);
	void *on_chunk_ctx;
};

/* Write all of iov, retrying on EINTR and short writes. */
static int write_all(int fd, struct iovec *iov, int iovcnt)
{
	while (iovcnt > 0) {
		ssize_t n = writev(fd, iov, iovcnt);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int write_header(trace_writer_t *w, const struct trace_writer_options *opts, uint32_t flags)
{
	struct fss_file_header h;
	struct iovec iov;
	int err;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, FSS_FILE_MAGIC, sizeof(h.magic));
	h.byte_order = FSS_BYTE_ORDER_MARK;
	h.version_major = FSS_FORMAT_MAJOR;
	h.version_minor = FSS_FORMAT_MINOR;
	h.header_size = sizeof(h);
	h.flags = flags | (opts ? opts->keep_flags & (FSS_FILE_KEEP_LAST | FSS_FILE_KEEP_SUMMARY) : 0);
	h.keep_steps = opts ? opts->keep_steps : 0;
	h.features = opts ? opts->features : 0;
	clock_anchor(&h.created_mono_ns, &h.created_realtime_ns);
	h.chunk_payload_max = w->chunk_capacity;
	h.writer_pid = (uint32_t)getpid();
	h.crc = crc32c(0, &h, offsetof(struct fss_file_header, crc));
	iov.iov_base = &h;
	iov.iov_len = sizeof(h);
	err = write_all(w->fd, &iov, 1);
	if (!err)
		w->bytes += sizeof(h);
	return err;
}

static trace_writer_t *writer_alloc(const struct trace_writer_options *opts)
{
	trace_writer_t *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->fd = -1;
	w->chunk_capacity = opts && opts->chunk_payload ? opts->chunk_payload : FSS_CHUNK_DEFAULT_PAYLOAD;
	if (w->chunk_capacity > FSS_CHUNK_MAX_PAYLOAD)
		w->chunk_capacity = FSS_CHUNK_MAX_PAYLOAD;
	if (w->chunk_capacity < FSS_RECORD_MAX_BYTES)
		w->chunk_capacity = FSS_RECORD_MAX_BYTES;
	/* Header and payload in one buffer: one contiguous chunk for on_chunk. */
	w->buf = malloc(sizeof(struct fss_chunk_header) + w->chunk_capacity);
	if (!w->buf) {
		free(w);
		return NULL;
	}
	w->chunk = w->buf + sizeof(struct fss_chunk_header);
	w->sync_on_close = opts ? opts->sync_on_close : 0;
	w->on_chunk = opts ? opts->on_chunk : NULL;
	w->on_chunk_ctx = opts ? opts->on_chunk_ctx : NULL;
	return w;
}

static void writer_release(trace_writer_t *w)
{
	free(w->buf);
	free(w->path);
	free(w->partial_path);
	free(w);
}

int trace_writer_open(trace_writer_t **out, const char *path, const struct trace_writer_options *opts)
{
	trace_writer_t *w;
	int err;

	*out = NULL;
	w = writer_alloc(opts);
	if (!w)
		return -ENOMEM;
	w->path = strdup(path);
	if (!w->path || asprintf(&w->partial_path, "%s.partial", path) < 0) {
		w->partial_path = NULL;
		err = -ENOMEM;
		goto fail;
	}
	if (opts && opts->exclusive)
		w->fd = open(w->partial_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	else
		w->fd = open(w->partial_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		err = -errno;
		goto fail;
	}
	w->owns_fd = 1;
	err = write_header(w, opts, 0);
	if (err) {
		close(w->fd);
		unlink(w->partial_path);
		goto fail;
	}
	*out = w;
	return 0;
fail:
	writer_release(w);
	return err;
}

int trace_writer_open_fd(trace_writer_t **out, int fd, const struct trace_writer_options *opts)
{
	trace_writer_t *w;
	int err;

	*out = NULL;
	if (fd < 0)
		return -EBADF;
	w = writer_alloc(opts);
	if (!w)
		return -ENOMEM;
	w->fd = fd;
	err = write_header(w, opts, FSS_FILE_STREAM);
	if (err) {
		writer_release(w);
		return err;
	}
	*out = w;
	return 0;
}

int trace_writer_flush(trace_writer_t *w)
{
	struct fss_chunk_header ch;
	struct iovec iov;
	size_t len;
	int err;

	if (w->error)
		return w->error;
	if (w->chunk_records == 0)
		return 0;
	memset(&ch, 0, sizeof(ch));
	ch.magic = FSS_CHUNK_MAGIC;
	ch.payload_bytes = w->chunk_used;
	ch.records = w->chunk_records;
	ch.seq = w->chunk_seq;
	ch.crc = crc32c(crc32c(0, &ch, sizeof(ch)), w->chunk, w->chunk_used);
	/* One write per chunk: a reader never sees a chunk's header without
	 * its payload unless the writer died inside this call. */
	memcpy(w->buf, &ch, sizeof(ch));
	len = sizeof(ch) + w->chunk_used;
	iov.iov_base = w->buf;
	iov.iov_len = len;
	err = write_all(w->fd, &iov, 1);
	if (err) {
		w->error = err;
		return err;
	}
	w->bytes += len;
	if (w->on_chunk)
		w->on_chunk(w->on_chunk_ctx, ch.seq, ch.records, w->buf, len);
	w->chunk_seq++;
	w->chunk_used = 0;
	w->chunk_records = 0;
	return 0;
}

int trace_writer_append(trace_writer_t *w, const void *record)
{
	const struct fss_record_head *head = record;
	int err;

	if (w->error)
		return w->error;
	if (head->size < sizeof(*head) || head->size % 8 || head->size > w->chunk_capacity)
		return -EINVAL;
	if (w->chunk_used + head->size > w->chunk_capacity) {
		err = trace_writer_flush(w);
		if (err)
			return err;
	}
	memcpy(w->chunk + w->chunk_used, record, head->size);
	w->chunk_used += head->size;
	w->chunk_records++;
	w->records++;
	return 0;
}

int trace_writer_string(trace_writer_t *w, uint32_t source, uint32_t id, const char *s, size_t len)
{
	struct fss_rec_string rec;
	size_t offset = 0;
	int err;

	if (id == FSS_STRING_NONE)
		return -EINVAL;
	if (len > FSS_STRING_MAX_BYTES)
		len = FSS_STRING_MAX_BYTES;
	do {
		size_t part = len - offset < FSS_STRING_PART_BYTES ? len - offset : FSS_STRING_PART_BYTES;

		record_init(&rec, FSS_REC_STRING, sizeof(rec), source);
		rec.id = id;
		rec.total_len = (uint16_t)len;
		rec.offset = (uint16_t)offset;
		memcpy(rec.text, s + offset, part);
		err = trace_writer_append(w, &rec);
		if (err)
			return err;
		offset += part;
	} while (offset < len);
	return 0;
}

/* The trace_end record, last in the last chunk: the one sign a reader has
 * that the writer got to close the trace. */
static int append_trace_end(trace_writer_t *w)
{
	struct fss_rec_trace_end end;
	int err;

	if (w->chunk_used + sizeof(end) > w->chunk_capacity) {
		err = trace_writer_flush(w);
		if (err)
			return err;
	}
	record_init(&end, FSS_REC_TRACE_END, sizeof(end), FSS_SOURCE_NONE);
	end.chunks = w->chunk_seq;
	end.records = w->records;
	return trace_writer_append(w, &end);
}

/* fsync the folder holding path, so that a rename into it survives a crash. */
static int sync_folder(const char *path)
{
	char *copy = strdup(path);
	int fd, err = 0;

	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		err = -errno;
	else if (fsync(fd) < 0)
		err = -errno;
	if (fd >= 0)
		close(fd);
	free(copy);
	return err;
}

int trace_writer_close(trace_writer_t *w)
{
	int err;

	if (!w)
		return 0;
	err = w->error ? w->error : append_trace_end(w);
	if (!err)
		err = trace_writer_flush(w);
	if (w->owns_fd) {
		/* The file's bytes reach the disk before its name does, and the
		 * name before close returns: after a crash the trace is either
		 * there whole or still .partial. */
		if (!err && w->sync_on_close && fsync(w->fd) < 0)
			err = -errno;
		if (close(w->fd) < 0 && !err)
			err = -errno;
		if (!err && rename(w->partial_path, w->path) < 0)
			err = -errno;
		if (!err && w->sync_on_close)
			err = sync_folder(w->path);
	}
	writer_release(w);
	return err;
}

uint32_t trace_writer_unsent(const trace_writer_t *w, const void **payload, size_t *len, uint32_t *records)
{
	*payload = w->chunk;
	*len = w->chunk_used;
	*records = w->chunk_records;
	return w->chunk_records;
}

uint64_t trace_writer_records(const trace_writer_t *w)
{
	return w->records;
}

uint64_t trace_writer_bytes(const trace_writer_t *w)
{
	return w->bytes;
}
