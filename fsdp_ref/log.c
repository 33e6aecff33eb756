/* fsdp_ref/log.c: the per-step JSON lines log (see log.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsdp_ref/log.h"

struct run_log {
	int fd;
};

struct run_log *log_open(const char *path, int truncate)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
	if (fd < 0)
		return NULL;
	struct run_log *log = malloc(sizeof *log);
	if (!log) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	log->fd = fd;
	return log;
}

void log_close(struct run_log *log)
{
	if (!log)
		return;
	close(log->fd);
	free(log);
}

struct line {
	char buf[2048];
	size_t len;
	int overflow;
};

__attribute__((format(printf, 2, 3))) static void put(struct line *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(l->buf + l->len, sizeof l->buf - l->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof l->buf - l->len)
		l->overflow = 1;
	else
		l->len += (size_t)n;
}

/* A JSON string value; the values here are flag words and wrap specs, but
 * quote and backslash are escaped anyway and control characters dropped. */
static void put_str(struct line *l, const char *key, const char *s)
{
	put(l, ",\"%s\":\"", key);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			put(l, "\\%c", *s);
		else if ((unsigned char)*s >= 0x20)
			put(l, "%c", *s);
	}
	put(l, "\"");
}

int log_write(struct run_log *log, const struct log_record *r)
{
	struct line l = {.len = 0};
	put(&l, "{\"step\":%d,\"rank\":%d,\"world_size\":%d,\"loss\":%.17g", r->step, r->rank, r->world_size, r->loss);
	put(&l, ",\"allgathers\":%d,\"forward_allgathers\":%d,\"backward_allgathers\":%d", r->allgathers,
	    r->forward_allgathers, r->backward_allgathers);
	put(&l, ",\"reduce_scatters\":%d,\"allreduces\":%d", r->reduce_scatters, r->allreduces);
	put(&l, ",\"gathered_bytes\":%" PRIu64 ",\"reduce_scattered_bytes\":%" PRIu64, r->gathered_bytes,
	    r->reduce_scattered_bytes);
	put(&l,
	    ",\"compute_ns\":%" PRId64 ",\"gather_wait_ns\":%" PRId64 ",\"reduce_wait_ns\":%" PRId64
	    ",\"loss_wait_ns\":%" PRId64 ",\"step_ns\":%" PRId64,
	    r->compute_ns, r->gather_wait_ns, r->reduce_wait_ns, r->loss_wait_ns, r->step_ns);
	put(&l,
	    ",\"peak_persistent_bytes\":%" PRIu64 ",\"peak_transient_bytes\":%" PRIu64
	    ",\"peak_gradient_bytes\":%" PRIu64 ",\"peak_activation_bytes\":%" PRIu64 ",\"peak_total_bytes\":%" PRIu64,
	    r->peak_persistent_bytes, r->peak_transient_bytes, r->peak_gradient_bytes, r->peak_activation_bytes,
	    r->peak_total_bytes);
	put(&l, ",\"units\":%d,\"layers\":%d,\"params\":%" PRIu64 ",\"largest_unit_params\":%" PRIu64, r->units,
	    r->layers, r->params, r->largest_unit_params);
	put_str(&l, "wrap", r->wrap);
	put_str(&l, "reshard_after_forward", r->reshard);
	put(&l, ",\"reshard_size\":%d,\"prefetch\":%d,\"shard_group\":%d", r->reshard_size, r->prefetch,
	    r->shard_group);
	put_str(&l, "param_dtype", r->param_dtype);
	put_str(&l, "reduce_dtype", r->reduce_dtype);
	put_str(&l, "backend", r->backend);
	put(&l, "}\n");
	if (l.overflow)
		return -EOVERFLOW;
	ssize_t n = write(log->fd, l.buf, l.len);
	if (n < 0)
		return -errno;
	return (size_t)n == l.len ? 0 : -EIO;
}
