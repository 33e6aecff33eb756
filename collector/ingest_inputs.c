/*
 * ingest_inputs.c - an input (connection or file): its parser, its end, a file merged.
 *
 * Each input has its own trace_parser; its verified records go to
 * ingest_take_record, and its end is reported (what was kept, what was
 * lost).
 */
#include "collector/ingest_inputs.h"

#include "collector/ingest_internal.h"
#include "collector/ingest_output.h"
#include "collector/ingest_rotate.h"
#include "collector/ingest_sinks.h"

#include "common/error.h"
#include "common/trace_parser.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Parser callback: one verified record of an input. The parser gives at
 * least head.size bytes as the writer wrote them (zero-extended beyond that
 * for an older writer): exactly those are copied. */
static int on_record(void *ctx, const struct fss_record_head *rec)
{
	struct input *in = ctx;
	ingest_t *ing = in->ing;

	int rc, err;

	ing->arrived = 1;
	if (rec->source == FSS_SOURCE_NONE)
		return 0; /* an input's trace_end: the output's writer ends it with its own */
	ing->taking = 1;
	rc = ingest_take_record(ing, in, rec);
	ing->taking = 0;
	err = ingest_rotate_pending(ing);
	return rc ? rc : err;
}

/* Parser callback: a chunk of a connection's stream is wholly taken: it may
 * be acked once the output's records so far are on disk. */
static int on_chunk(void *ctx, uint64_t seq, uint32_t records, uint64_t offset)
{
	struct input *in = ctx;
	ingest_t *ing = in->ing;
	struct ack_point pt;

	(void)records;
	if (in->kind != INPUT_CONNECTION || in->acks_off)
		return 0;
	if (trace_parser_chunks(in->parser) != seq + 1) {
		in->acks_off = 1; /* chunks were lost: what the agent counts is not what we hold */
		return 0;
	}
	if (in->hellos_waiting)
		return 0; /* a hello of it is not written yet: a later chunk's ack covers it */
	pt.chunks = seq + 1;
	pt.records = trace_parser_records(in->parser);
	pt.out_mark = ing->appended;
	pt.offset = offset;
	if (in->npoints == INGEST_ACK_POINTS)
		in->npoints--;
	in->points[in->npoints++] = pt;
	return 0;
}

static const struct trace_parser_ops ingest_parser_ops = {
    .on_record = on_record,
    .on_chunk = on_chunk,
};

int ingest_input_new(ingest_t *ing, enum input_kind kind, int fd, struct input **out)
{
	struct input *in;

	if (ingest_grow((void **)&ing->inputs, &ing->capinputs, ing->ninputs + 1, sizeof(*ing->inputs), 16))
		return -ENOMEM;
	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	in->kind = kind;
	in->ing = ing;
	in->fd = fd;
	in->parser = trace_parser_new(&ingest_parser_ops, in);
	if (!in->parser) {
		free(in);
		return -ENOMEM;
	}
	ing->inputs[ing->ninputs++] = in;
	*out = in;
	return 0;
}

/* "pid 1234, rank 1" of the input's first source, for messages. */
static void input_who(const ingest_t *ing, const struct input *in, char *buf, size_t len)
{
	const struct ingest_source_stats *s =
	    in->nmap && in->map[0].out != UINT32_MAX ? &ing->sources[in->map[0].out] : NULL;

	if (!s || !s->has_hello)
		snprintf(buf, len, "no process_hello received");
	else if (s->rank >= 0)
		snprintf(buf, len, "pid %" PRIu32 ", rank %" PRId32 ", source %" PRIu32, s->pid, s->rank, s->source);
	else
		snprintf(buf, len, "pid %" PRIu32 ", source %" PRIu32, s->pid, s->source);
}

/* Hellos still waiting when the input ends start sources of their own. */
static int input_release_hellos(ingest_t *ing, struct input *in)
{
	int err = 0;

	for (size_t i = 0; i < in->nmap && in->hellos_waiting && !err; i++)
		if (in->map[i].state == MAP_HELLO)
			err = ingest_hello_release(ing, in, &in->map[i]);
	return err;
}

int ingest_input_end(ingest_t *ing, struct input *in, int cut)
{
	uint64_t good, records;
	char who[96];
	char *msg;
	int rc, err;

	if (in->kind == INPUT_CONNECTION && in->bytes_in == 0 && !(in->key_wanted && in->key_have) && !cut)
		return 0; /* connected and left without a byte of its stream (a port probe too): nothing lost */
	if (in->key_wanted) {
		/* ended before its key was complete (the key's bytes are not in
		 * bytes_in): refused, not damaged */
		ing->stats.refused_keys++;
		return ingest_keyless(ing,
				      ingest_text_new(&msg,
						      "%s (tcp peer %s): refused: ended after %zu of the %d bytes of "
						      "the connection key",
						      in->origin, in->peer ? in->peer : "unknown", in->key_have,
						      WIRE_KEY_HELLO_BYTES));
	}
	rc = in->failed ? in->fail_rc : trace_parser_finish(in->parser);
	err = input_release_hellos(ing, in);
	if (err)
		return err;
	if (cut && rc == FSS_E_TRUNCATED && trace_parser_end(in->parser) == TRACE_END_MISSING)
		rc = 0; /* no trace_end yet because the sender is still there: said so below */
	if (rc == 0 && !cut)
		return 0;
	if (rc && rc == ing->write_error)
		return 0; /* the output failed, not this input: said once by the caller */
	good = trace_parser_good_offset(in->parser);
	records = trace_parser_records(in->parser);
	input_who(ing, in, who, sizeof(who));
	if (rc == INGEST_STOP_TOO_MANY_SOURCES)
		ingest_text_new(
		    &msg, "%s (%s): more than %u sources in one %s; kept %" PRIu64 " records, dropped the rest",
		    in->origin, who,
		    in->kind == INPUT_CONNECTION ? INGEST_MAX_SOURCES_PER_CONNECTION : INGEST_MAX_SOURCES_PER_INPUT,
		    in->kind == INPUT_CONNECTION ? "connection" : "file", records);
	else if (rc == -ENOMEM)
		ingest_text_new(&msg, "%s (%s): out of memory; kept %" PRIu64 " records, dropped the rest", in->origin,
				who, records);
	else if (rc == FSS_E_CORRUPT && trace_parser_input(in->parser) == TRACE_INPUT_TRACE)
		ingest_text_new(
		    &msg, "%s (%s): %s; kept all the other chunks: %" PRIu64 " records in %" PRIu64 " chunks",
		    in->origin, who, trace_parser_error(in->parser), records, trace_parser_chunks(in->parser));
	else if (rc)
		ingest_text_new(&msg,
				"%s (%s): %s; kept %" PRIu64 " records in %" PRIu64 " complete chunks, dropped %" PRIu64
				" bytes from offset %" PRIu64,
				in->origin, who, trace_parser_error(in->parser), records,
				trace_parser_chunks(in->parser), in->bytes_in - good, good);
	else
		ingest_text_new(
		    &msg,
		    "%s (%s): still connected when the trace was closed (the process may still run); kept %" PRIu64
		    " records, anything it sends later is lost",
		    in->origin, who, records);
	/* a writer killed between chunks lost nothing it sent: only its close */
	if (rc == FSS_E_TRUNCATED && in->bytes_in == good && trace_parser_end(in->parser) == TRACE_END_MISSING)
		return ingest_add_unclosed(ing, msg);
	return ingest_add_damage(ing, msg);
}

void ingest_input_release_parser(struct input *in)
{
	/* The parser's message and counters are read by ingest_input_end(), which has
	 * run by now; nothing reads them later. */
	trace_parser_free(in->parser);
	in->parser = NULL;
	for (size_t i = 0; i < in->nmap; i++)
		free(in->map[i].hello);
	free(in->map);
	in->map = NULL;
	in->nmap = in->capmap = 0;
	in->hellos_waiting = 0;
}

void ingest_input_feed(ingest_t *ing, struct input *in, const void *data, size_t len)
{
	int rc;

	in->bytes_in += len;
	if (in->failed)
		return; /* after damage (a file: the rest is not read; a connection is cut) */
	rc = trace_parser_feed(in->parser, data, len);
	if (rc) {
		in->failed = 1;
		in->fail_rc = rc;
	}
}

int ingest_add_file(ingest_t *ing, const char *path)
{
	struct input *in;
	int fd, err;

	if (ing->finished)
		return -EALREADY;
	if (ing->write_error)
		return ing->write_error;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = ingest_input_new(ing, INPUT_FILE, -1, &in);
	if (!err && !(in->origin = strdup(path)))
		err = -ENOMEM;
	if (err) {
		close(fd);
		return err;
	}
	ing->stats.files++;
	for (;;) {
		ssize_t n = read(fd, ing->readbuf, sizeof(ing->readbuf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		ingest_input_feed(ing, in, ing->readbuf, (size_t)n);
		if (ing->write_error || in->failed)
			break; /* the rest of a damaged file is not read */
	}
	close(fd);
	if (ing->write_error)
		err = ing->write_error;
	if (!err)
		err = ingest_input_end(ing, in, 0);
	ingest_input_release_parser(in);
	if (!err)
		err = ingest_flush_if_due(ing);
	return err;
}
