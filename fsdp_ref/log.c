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

/* A line being built; it grows as needed (the gather waits make it long). */
struct line {
	char *buf;
	size_t len, cap;
	int failed;
};

__attribute__((format(printf, 2, 3))) static void put(struct line *l, const char *fmt, ...)
{
	for (;;) {
		if (l->failed)
			return;
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(l->buf ? l->buf + l->len : NULL, l->buf ? l->cap - l->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			l->failed = 1;
			return;
		}
		if (l->buf && (size_t)n < l->cap - l->len) {
			l->len += (size_t)n;
			return;
		}
		size_t cap = l->cap ? 2 * l->cap : 4096;
		while (cap < l->len + (size_t)n + 1)
			cap *= 2;
		char *b = realloc(l->buf, cap);
		if (!b) {
			l->failed = 1;
			return;
		}
		l->buf = b;
		l->cap = cap;
	}
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

/* Write the line and free it. */
static int line_flush(struct run_log *log, struct line *l)
{
	int rc = 0;
	if (l->failed) {
		rc = -ENOMEM;
	} else {
		ssize_t n = write(log->fd, l->buf, l->len);
		rc = n < 0 ? -errno : (size_t)n == l->len ? 0 : -EIO;
	}
	free(l->buf);
	return rc;
}

int log_write_fault(struct run_log *log, const struct log_fault *f)
{
	struct line l = {0};
	put(&l, "{\"fault\":\"%s\",\"step\":%d,\"rank\":%d,\"world_size\":%d", f->fault, f->step, f->rank,
	    f->world_size);
	put_str(&l, "comm", f->comm);
	put(&l, ",\"comm_handle\":\"0x%" PRIx64 "\",\"comm_rank\":%d,\"comm_nranks\":%d,\"comm_seq\":%" PRIu64,
	    f->comm_handle, f->comm_rank, f->comm_nranks, f->comm_seq);
	put_str(&l, "op", f->op);
	put(&l, ",\"count\":%" PRIu64 ",\"issued_count\":%" PRIu64 ",\"realtime_ns\":%" PRId64 "}\n", f->count,
	    f->issued_count, f->realtime_ns);
	return line_flush(log, &l);
}

int log_write(struct run_log *log, const struct log_record *r)
{
	struct line l = {0};
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
	put(&l,
	    ",\"microbatches\":%d,\"sync_microbatches\":%d,\"forward_allgathers_per_microbatch\":%d"
	    ",\"backward_allgathers_per_microbatch\":%d,\"recompute_allgathers\":%d,\"prefetched_allgathers\":%d"
	    ",\"clip_allreduces\":%d",
	    r->microbatches, r->sync_microbatches, r->forward_allgathers_per_microbatch,
	    r->backward_allgathers_per_microbatch, r->recompute_allgathers, r->prefetched_allgathers,
	    r->clip_allreduces);
	put(&l, ",\"gather_waits_ns\":[");
	for (int i = 0; i < r->gather_waits; i++)
		put(&l, "%s%" PRId64, i ? "," : "", r->gather_wait_each[i]);
	put(&l, "]");
	put(&l,
	    ",\"eval_allgathers\":%d,\"eval_allreduces\":%d,\"checkpoint_allgathers\":%d"
	    ",\"checkpoint_broadcasts\":%d,\"checkpoint_allreduces\":%d,\"init_broadcasts\":%d",
	    r->eval_allgathers, r->eval_allreduces, r->checkpoint_allgathers, r->checkpoint_broadcasts,
	    r->checkpoint_allreduces, r->init_broadcasts);
	put_str(&l, "style", r->style);
	put_str(&l, "grad_sync", r->grad_sync);
	put(&l,
	    ",\"grad_accum\":%d,\"clip_grad\":%.17g,\"eval_every\":%d,\"checkpoint_every\":%d"
	    ",\"forward_prefetch\":%d,\"activation_checkpoint\":%s,\"nvtx\":%s",
	    r->grad_accum, r->clip_grad, r->eval_every, r->checkpoint_every, r->forward_prefetch,
	    r->activation_checkpoint ? "true" : "false", r->nvtx ? "true" : "false");
	put(&l,
	    ",\"tp\":%d,\"dp\":%d,\"tp_allgathers\":%d,\"tp_reduce_scatters\":%d,\"tp_allreduces\":%d"
	    ",\"tp_wait_ns\":%" PRId64 ",\"eval_tp_allgathers\":%d,\"eval_tp_reduce_scatters\":%d",
	    r->tp, r->dp, r->tp_allgathers, r->tp_reduce_scatters, r->tp_allreduces, r->tp_wait_ns,
	    r->eval_tp_allgathers, r->eval_tp_reduce_scatters);
	if (r->zero3_gather) {
		put_str(&l, "zero3_gather", r->zero3_gather);
		put(&l,
		    ",\"allgather_calls\":%d,\"optimizer_allgathers\":%d,\"gathered_elements\":%" PRIu64
		    ",\"forward_gathered_elements\":%" PRIu64 ",\"backward_gathered_elements\":%" PRIu64,
		    r->allgather_calls, r->optimizer_allgathers, r->gathered_elements, r->forward_gathered_elements,
		    r->backward_gathered_elements);
		put(&l,
		    ",\"bucket\":%" PRIu64 ",\"persistence_threshold\":%" PRIu64 ",\"max_reuse_distance\":%" PRIu64
		    ",\"max_live\":%" PRIu64 ",\"reduce_bucket\":%" PRIu64 ",\"persistent_params\":%d"
		    ",\"persistent_elements\":%" PRIu64,
		    r->bucket, r->persistence_threshold, r->max_reuse_distance, r->max_live, r->reduce_bucket,
		    r->persistent_params, r->persistent_elements);
		put(&l, ",\"fetch_elements\":[");
		for (int i = 0; i < r->fetches; i++)
			put(&l, "%s%" PRIu64, i ? "," : "", r->fetch_elements[i]);
		put(&l, "]");
	}
	put(&l, "}\n");
	return line_flush(log, &l);
}
