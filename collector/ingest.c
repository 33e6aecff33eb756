/*
 * ingest.c - accept agent streams and trace files, merge them into one trace.
 *
 * One epoll loop on the caller's thread (ingest_net.c). Each input
 * (connection or file, ingest_inputs.c) has its own trace_parser; the
 * parser hands over the records of a chunk only after the chunk's CRC
 * checked out, and ingest_take_record() (ingest_sinks.c) decides for each
 * one which output source it belongs to and whether the output holds it
 * already, then ingest_emit() (ingest_output.c) copies it into the output
 * writer with its new source number; the agents are acked for what is on
 * disk (ingest_ack.c) and a rotation starts a file that stands alone
 * (ingest_rotate.c). This file: the ingest made, finished and freed. Nothing is buffered per input beyond the parser's
 * one chunk and a hello per input source waiting for its next record, so a slow or hostile input costs at most one
 * chunk of memory and never holds up the others.
 *
 * Sinks (docs/format.md, "Sinks and resumption"): every record of a process
 * with sink records is named by (sink serial, index in that sink). An input
 * source follows its sink at level 0; a record in a sink's repeat region is
 * also a record of the sink it repeats (level 1), and so on down: the chain
 * is computed from the sinks' layouts, which the process keeps (struct
 * process). A record is held when the output has processed the record of
 * that name at any level (index < held of that sink); held records are
 * skipped, every other is written.
 */
#include "collector/ingest.h"

#include "collector/ingest_inputs.h"
#include "collector/ingest_internal.h"
#include "collector/ingest_net.h"
#include "collector/ingest_output.h"
#include "collector/ingest_rotate.h"
#include "collector/ingest_sinks.h"

#include "collector/source.h"
#include "common/clock.h"
#include "common/trace_format.h"
#include "common/trace_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

__attribute__((format(printf, 2, 3))) char *ingest_text_new(char **dst, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	*dst = s;
	return s;
}

static int add_damage(ingest_t *ing, char *message, unsigned char unclosed)
{
	char **d;
	unsigned char *u;

	if (!message)
		return -ENOMEM;
	d = realloc(ing->damage, (ing->stats.ndamaged + 1) * sizeof(*d));
	if (d)
		ing->damage = d;
	u = d ? realloc(ing->damage_unclosed, ing->stats.ndamaged + 1) : NULL;
	if (!u) {
		free(message);
		return -ENOMEM;
	}
	ing->damage_unclosed = u;
	u[ing->stats.ndamaged] = unclosed;
	d[ing->stats.ndamaged++] = message;
	return 0;
}

int ingest_add_damage(ingest_t *ing, char *message)
{
	return add_damage(ing, message, 0);
}

int ingest_add_unclosed(ingest_t *ing, char *message)
{
	return add_damage(ing, message, 1);
}

int ingest_keyless(ingest_t *ing, char *message)
{
	if (ing->keyless_named < INGEST_REFUSED_NAMED) {
		ing->keyless_named++;
		return ingest_add_damage(ing, message);
	}
	free(message);
	ing->stats.keyless_unnamed++;
	return 0;
}

int ingest_grow(void **v, size_t *cap, size_t need, size_t size, size_t first)
{
	size_t n = *cap ? *cap : first;
	void *nv;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	nv = realloc(*v, n * size);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = n;
	return 0;
}

/* The ingest's own per-source view goes with it; a borrowed one stays. */
static void layer_free(ingest_t *ing)
{
	if (ing->owns_layer)
		sources_free(ing->layer);
}

int ingest_new(ingest_t **out, const char *output_path, const struct ingest_options *opts)
{
	ingest_t *ing;
	int err;

	*out = NULL;
	ing = calloc(1, sizeof(*ing));
	if (!ing)
		return -ENOMEM;
	ing->owns_layer = !(opts && opts->view);
	ing->layer = ing->owns_layer ? sources_new(NULL, NULL) : opts->view;
	if (!ing->layer) {
		free(ing);
		return -ENOMEM;
	}
	ing->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ing->epfd < 0) {
		err = -errno;
		layer_free(ing);
		free(ing);
		return err;
	}
	ing->wopts.features =
	    opts && opts->features ? opts->features : (FSS_FEATURE_NCCL | FSS_FEATURE_CUPTI | FSS_FEATURE_NVTX);
	ing->wopts.chunk_payload = opts ? opts->chunk_payload : 0;
	ing->wopts.sync_on_close = opts ? opts->sync_on_close : 0;
	ing->wopts.keep_flags = opts ? opts->keep_flags : 0;
	ing->wopts.keep_steps = opts ? opts->keep_steps : 0;
	ing->flush_ns = (uint64_t)(opts && opts->flush_ms ? opts->flush_ms : INGEST_FLUSH_MS_DEFAULT) * 1000000u;
	ing->key_timeout_ns =
	    (uint64_t)(opts && opts->key_timeout_ms ? opts->key_timeout_ms : INGEST_KEY_TIMEOUT_MS_DEFAULT) * 1000000u;
	/* as trace_writer clamps it */
	ing->chunk_cap = ing->wopts.chunk_payload ? ing->wopts.chunk_payload : FSS_CHUNK_DEFAULT_PAYLOAD;
	if (ing->chunk_cap > FSS_CHUNK_MAX_PAYLOAD)
		ing->chunk_cap = FSS_CHUNK_MAX_PAYLOAD;
	if (ing->chunk_cap < FSS_RECORD_MAX_BYTES)
		ing->chunk_cap = FSS_RECORD_MAX_BYTES;
	if (opts && opts->key) {
		memcpy(ing->key, opts->key, WIRE_KEY_BYTES);
		ing->has_key = 1;
	}
	err = trace_writer_open(&ing->out, output_path, &ing->wopts);
	if (err) {
		close(ing->epfd);
		layer_free(ing);
		free(ing);
		return err;
	}
	ing->writer_bytes = trace_writer_bytes(ing->out);
	ing->last_flush_ns = clock_mono_ns();
	ing->path = strdup(output_path);
	if (!ing->path) {
		trace_writer_close(ing->out);
		close(ing->epfd);
		layer_free(ing);
		free(ing);
		return -ENOMEM;
	}
	*out = ing;
	return 0;
}

void ingest_on_record(ingest_t *ing, ingest_record_fn fn, void *ctx)
{
	ing->on_record = fn;
	ing->on_record_ctx = ctx;
}

int ingest_finish(ingest_t *ing, const struct ingest_stats **stats)
{
	int err = 0, flush_err, close_err;

	if (ing->finished)
		return -EALREADY;
	/* Connections still in the backlog have sent data too: take them in. */
	for (size_t i = 0; i < ing->nlisteners && !ing->write_error; i++)
		if (ing->listeners[i].fd >= 0)
			ingest_accept_all(ing, &ing->listeners[i]);
	/* Take what the open connections have already sent, then end them. */
	for (size_t i = 0; i < ing->ninputs && !ing->write_error; i++) {
		struct input *in = ing->inputs[i];

		if (in->fd < 0)
			continue;
		while (in->fd >= 0 && ingest_connection_read(ing, in) > 0)
			;
		if (in->fd >= 0) {
			err = ingest_connection_end(ing, in, 1);
			if (!err && ing->write_error)
				err = ing->write_error;
			if (err)
				break;
		}
	}
	ingest_listeners_close(ing);
	if (ing->write_error && !err)
		err = ing->write_error;
	if (!err)
		err = ingest_write_exits(ing);
	if (!err)
		err = ingest_markers_due(ing);
	/* Flush first, so that the byte count includes the last chunk. */
	flush_err = trace_writer_flush(ing->out);
	ing->stats.records = ing->file_records_before + trace_writer_records(ing->out);
	ing->stats.bytes = ing->file_bytes_before + trace_writer_bytes(ing->out);
	close_err = trace_writer_close(ing->out);
	ing->out = NULL;
	ing->stats.files_written++;
	if (!err)
		err = flush_err ? flush_err : close_err;
	ing->finished = 1;
	/* NVTX ranges still waiting for their names will not get them */
	sources_finish(ing->layer);
	for (uint32_t i = 0; i < ing->stats.sources; i++) {
		ingest_stats_sync(ing, &ing->sources[i]);
		if (ing->sources[i].view)
			ing->stats.collectives_missing += source_collectives_missing(ing->sources[i].view);
	}
	ing->stats.per_source = ing->sources;
	ing->stats.damage = (const char *const *)ing->damage;
	ing->stats.damage_unclosed = ing->damage_unclosed;
	ing->stats.refused_peers = ing->refused;
	ing->stats.nrefused_named =
	    ing->stats.refused < INGEST_REFUSED_NAMED ? ing->stats.refused : INGEST_REFUSED_NAMED;
	if (stats)
		*stats = &ing->stats;
	return err;
}

void ingest_free(ingest_t *ing)
{
	if (!ing)
		return;
	if (!ing->finished)
		ingest_finish(ing, NULL);
	for (size_t i = 0; i < ing->ninputs; i++) {
		struct input *in = ing->inputs[i];

		if (in->fd >= 0)
			close(in->fd);
		ingest_input_release_parser(in);
		free(in->origin);
		free(in->peer);
		free(in);
	}
	free(ing->inputs);
	ingest_listeners_close(ing);
	free(ing->listeners);
	for (size_t i = 0; i < ing->stats.ndamaged; i++)
		free(ing->damage[i]);
	free(ing->damage);
	free(ing->damage_unclosed);
	free(ing->exits);
	for (uint32_t i = 0; i < ing->stats.sources; i++)
		ingest_restate_free(&ing->outs[i].restate);
	free(ing->outs);
	for (size_t i = 0; i < ing->nprocs; i++)
		free(ing->procs[i]);
	free(ing->procs);
	free(ing->dirty);
	free(ing->sources);
	layer_free(ing);
	if (ing->epfd >= 0)
		close(ing->epfd);
	free(ing->path);
	free(ing);
}
