/*
 * ingest.c - accept agent streams and trace files, merge them into one trace.
 *
 * One epoll loop on the caller's thread. Each input (connection or file)
 * has its own trace_parser; the parser hands over the records of a chunk
 * only after the chunk's CRC checked out, and on_record() copies each one
 * straight into the output writer with its new source number. Nothing is
 * buffered per input beyond the parser's one chunk, so a slow or hostile
 * input costs at most one chunk of memory and never holds up the others.
 */
#include "collector/ingest.h"

#include "collector/source.h"

#include "common/arith.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "common/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Bytes read from one connection per ingest_poll round before the next
 * input gets its turn, so one busy agent cannot starve the others. */
#define INGEST_READS_PER_ROUND 4
/* Sources one input may carry (an agent has one; a merged file, its ranks). */
#define INGEST_MAX_SOURCES_PER_INPUT 65536u
/* A positive error a callback returns to stop a parser for a reason of the
 * ingest's own (the parser passes callback values through unchanged). */
#define INGEST_STOP_TOO_MANY_SOURCES 1

enum input_kind {
	INPUT_CONNECTION,
	INPUT_FILE,
};

struct source_map {
	uint32_t in;  /* source number inside the input */
	uint32_t out; /* source number in the output */
};

struct input {
	enum input_kind kind;
	ingest_t *ing;           /* for the parser callbacks */
	int fd;                  /* connection fd; -1 once closed (files: not kept) */
	char *origin;            /* "connection 3 (pid 1234)" or the file path */
	trace_parser_t *parser;
	struct source_map *map;  /* input source -> output source */
	size_t nmap, capmap;
	size_t last_map;         /* index of the last hit: agents have one source */
	uint64_t bytes_in;       /* bytes received or read */
	int failed;              /* the parser stopped: the rest is discarded */
	int fail_rc;
};

struct listener {
	int fd;
	char *unlink_path; /* unix socket file to remove at the end, or NULL */
	int check_peer;    /* a unix socket: refuse peers of another user */
};

/* An exit noted by ingest_note_exit, written at ingest_finish. */
struct pending_exit {
	uint64_t at_ns;
	pid_t pid;
	int wait_status;
};

struct ingest {
	trace_writer_t *out;
	int epfd;
	int finished;
	int write_error;         /* first error writing the output: sticky */
	struct listener *listeners;
	size_t nlisteners;
	struct input **inputs;   /* every input ever seen, in arrival order */
	size_t ninputs, capinputs;
	size_t open_connections;
	sources_t *layer;            /* the output's sources, as every reader sees them */
	struct ingest_source_stats *sources;
	size_t capsources;
	char **damage;
	struct pending_exit *exits;
	size_t nexits, capexits;
	struct ingest_refused_peer refused[INGEST_REFUSED_NAMED];
	struct ingest_stats stats;
	_Alignas(8) unsigned char record[UINT16_MAX + 1]; /* one record being copied */
	unsigned char readbuf[64 << 10];
};

/* epoll tags: index << 1, low bit set for listeners. */
static uint64_t tag_listener(size_t i)
{
	return ((uint64_t)i << 1) | 1u;
}

static uint64_t tag_input(size_t i)
{
	return (uint64_t)i << 1;
}

__attribute__((format(printf, 2, 3))) static char *text_new(char **dst, const char *fmt, ...)
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

static int add_damage(ingest_t *ing, char *message)
{
	char **d;

	if (!message)
		return -ENOMEM;
	d = realloc(ing->damage, (ing->stats.ndamaged + 1) * sizeof(*d));
	if (!d) {
		free(message);
		return -ENOMEM;
	}
	d[ing->stats.ndamaged++] = message;
	ing->damage = d;
	return 0;
}

/* The output source for input source `in_source`, allocated on first sight. */
static int map_source(ingest_t *ing, struct input *in, uint32_t in_source, uint32_t *out_source)
{
	struct ingest_source_stats *s;

	if (in->nmap && in->map[in->last_map].in == in_source) {
		*out_source = in->map[in->last_map].out;
		return 0;
	}
	for (size_t i = 0; i < in->nmap; i++) {
		if (in->map[i].in == in_source) {
			in->last_map = i;
			*out_source = in->map[i].out;
			return 0;
		}
	}
	if (in->nmap >= INGEST_MAX_SOURCES_PER_INPUT || ing->stats.sources == UINT32_MAX)
		return INGEST_STOP_TOO_MANY_SOURCES;
	if (in->nmap == in->capmap) {
		size_t cap = in->capmap ? in->capmap * 2 : 4;
		struct source_map *m = realloc(in->map, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		in->map = m;
		in->capmap = cap;
	}
	if (ing->stats.sources == ing->capsources) {
		size_t cap = ing->capsources ? ing->capsources * 2 : 16;
		struct ingest_source_stats *ns = realloc(ing->sources, cap * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		ing->sources = ns;
		ing->capsources = cap;
	}
	s = &ing->sources[ing->stats.sources];
	memset(s, 0, sizeof(*s));
	s->source = ing->stats.sources++;
	s->rank = FSS_RANK_UNKNOWN;
	s->origin = in->origin;
	in->map[in->nmap].in = in_source;
	in->map[in->nmap].out = s->source;
	in->last_map = in->nmap++;
	*out_source = s->source;
	return 0;
}

/* The stats' copy of what the layer knows about a source. */
static void stats_sync(ingest_t *ing, struct ingest_source_stats *s)
{
	const struct source *v = sources_find(ing->layer, s->source);

	if (!v)
		return;
	s->view = v;
	s->has_hello = v->has_hello;
	s->pid = v->pid;
	s->rank = v->rank;
	s->ended = v->has_process_end;
	s->dropped = v->dropped;
	ing->stats.dropped = 0;
	for (uint32_t i = 0; i < ing->stats.sources; i++)
		ing->stats.dropped = u64_add_sat(ing->stats.dropped, ing->sources[i].dropped);
}

/* A record written to the output (`rec` as written, renumbered): the
 * layer takes it in, the stats follow. */
static int note_record(ingest_t *ing, struct ingest_source_stats *s, const struct fss_record_head *rec)
{
	int err = sources_feed(ing->layer, rec);

	if (rec->type < FSS_REC_TYPE_MAX)
		ing->stats.by_type[rec->type]++;
	s->records++;
	stats_sync(ing, s);
	return err;
}

/* Parser callback: copy one verified record to the output, renumbered. The
 * parser gives at least head.size bytes as the writer wrote them (zero-
 * extended beyond that for an older writer): exactly those are copied. */
static int on_record(void *ctx, const struct fss_record_head *rec)
{
	struct input *in = ctx;
	ingest_t *ing = in->ing;
	struct fss_record_head *copy = (struct fss_record_head *)ing->record;
	uint32_t source;
	int err;

	if (rec->source == FSS_SOURCE_NONE)
		return 0; /* an input's trace_end: the output's writer ends it with its own */
	err = map_source(ing, in, rec->source, &source);
	if (err)
		return err;
	memcpy(copy, rec, rec->size);
	copy->source = source;
	err = trace_writer_append(ing->out, copy);
	if (err) {
		if (!ing->write_error)
			ing->write_error = err;
		return err;
	}
	return note_record(ing, &ing->sources[source], copy);
}

static const struct trace_parser_ops ingest_parser_ops = {
	.on_record = on_record,
};

static int input_new(ingest_t *ing, enum input_kind kind, int fd, struct input **out)
{
	struct input *in;

	if (ing->ninputs == ing->capinputs) {
		size_t cap = ing->capinputs ? ing->capinputs * 2 : 16;
		struct input **ni = realloc(ing->inputs, cap * sizeof(*ni));

		if (!ni)
			return -ENOMEM;
		ing->inputs = ni;
		ing->capinputs = cap;
	}
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
	const struct ingest_source_stats *s = in->nmap ? &ing->sources[in->map[0].out] : NULL;

	if (!s || !s->has_hello)
		snprintf(buf, len, "no process_hello received");
	else if (s->rank >= 0)
		snprintf(buf, len, "pid %" PRIu32 ", rank %" PRId32 ", source %" PRIu32, s->pid, s->rank, s->source);
	else
		snprintf(buf, len, "pid %" PRIu32 ", source %" PRIu32, s->pid, s->source);
}

/*
 * The input has ended (EOF, a file read to its end, or cut by
 * ingest_finish when `cut`): say what was lost, if anything.
 */
static int input_end(ingest_t *ing, struct input *in, int cut)
{
	uint64_t good, records;
	char who[96];
	char *msg;
	int rc;

	if (in->kind == INPUT_CONNECTION && in->bytes_in == 0 && !cut)
		return 0; /* connected and left without a byte: nothing lost */
	rc = in->failed ? in->fail_rc : trace_parser_finish(in->parser);
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
		text_new(&msg, "%s (%s): more than %u sources in one input; kept %" PRIu64 " records, dropped the rest",
			 in->origin, who, INGEST_MAX_SOURCES_PER_INPUT, records);
	else if (rc == -ENOMEM)
		text_new(&msg, "%s (%s): out of memory; kept %" PRIu64 " records, dropped the rest", in->origin, who,
			 records);
	else if (rc == FSS_E_CORRUPT && trace_parser_input(in->parser) == TRACE_INPUT_TRACE)
		text_new(&msg, "%s (%s): %s; kept all the other chunks: %" PRIu64 " records in %" PRIu64 " chunks",
			 in->origin, who, trace_parser_error(in->parser), records, trace_parser_chunks(in->parser));
	else if (rc)
		text_new(&msg, "%s (%s): %s; kept %" PRIu64 " records in %" PRIu64 " complete chunks, dropped %" PRIu64
			 " bytes from offset %" PRIu64,
			 in->origin, who, trace_parser_error(in->parser), records, trace_parser_chunks(in->parser),
			 in->bytes_in - good, good);
	else
		text_new(&msg, "%s (%s): still connected when the trace was closed (the process may still run); kept %" PRIu64
			 " records, anything it sends later is lost",
			 in->origin, who, records);
	return add_damage(ing, msg);
}

static void input_close_fd(ingest_t *ing, struct input *in)
{
	if (in->fd < 0)
		return;
	epoll_ctl(ing->epfd, EPOLL_CTL_DEL, in->fd, NULL);
	close(in->fd);
	in->fd = -1;
	ing->open_connections--;
}

/* Parsing done for good: free the chunk buffer now, keep the numbers. */
static void input_release_parser(struct input *in)
{
	/* The parser's message and counters are read by input_end(), which has
	 * run by now; nothing reads them later. */
	trace_parser_free(in->parser);
	in->parser = NULL;
}

static void input_feed(ingest_t *ing, struct input *in, const void *data, size_t len)
{
	int rc;

	in->bytes_in += len;
	if (in->failed)
		return; /* after damage: drain and discard, so the sender never blocks on us */
	rc = trace_parser_feed(in->parser, data, len);
	if (rc) {
		in->failed = 1;
		in->fail_rc = rc;
	}
}

/* Read what a connection has; returns 1 if it made progress, 0 if not, or
 * the output's write error. */
static int connection_read(ingest_t *ing, struct input *in)
{
	int progress = 0;

	for (int round = 0; round < INGEST_READS_PER_ROUND && in->fd >= 0; round++) {
		ssize_t n = read(in->fd, ing->readbuf, sizeof(ing->readbuf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			/* EOF, or a reset by a peer that died: either way the
			 * stream has ended; the parser says whether cleanly. */
			input_close_fd(ing, in);
			int err = input_end(ing, in, 0);

			input_release_parser(in);
			if (err)
				return err;
			return 1;
		}
		progress = 1;
		input_feed(ing, in, ing->readbuf, (size_t)n);
		if (ing->write_error)
			return ing->write_error;
	}
	return progress;
}

/*
 * Whether a unix peer may send: only the collector's own user. A peer whose
 * credentials cannot be read is refused too. Refusals are counted and the
 * first ones named, for the caller to report.
 */
static int peer_allowed(ingest_t *ing, int fd)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	int ok;

	memset(&cred, 0, sizeof(cred));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
		cred.uid = (uid_t)-1;
		cred.pid = 0;
		ok = 0;
	} else {
		ok = cred.uid == geteuid();
	}
	if (ok)
		return 1;
	if (ing->stats.refused < INGEST_REFUSED_NAMED) {
		ing->refused[ing->stats.refused].uid = (uint32_t)cred.uid;
		ing->refused[ing->stats.refused].pid = (int32_t)cred.pid;
	}
	ing->stats.refused++;
	return 0;
}

static int accept_all(ingest_t *ing, struct listener *l)
{
	int accepted = 0;

	for (;;) {
		struct epoll_event ev = {.events = EPOLLIN};
		struct input *in = NULL;
		struct ucred cred;
		socklen_t clen = sizeof(cred);
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int err;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
				continue;
			/* EAGAIN: none left. EMFILE and friends: leave the rest in
			 * the backlog for a later round. */
			break;
		}
		if (l->check_peer && !peer_allowed(ing, fd)) {
			close(fd);
			continue;
		}
		err = input_new(ing, INPUT_CONNECTION, fd, &in);
		if (!err) {
			ing->stats.connections++;
			memset(&cred, 0, sizeof(cred));
			if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 && cred.pid > 0)
				text_new(&in->origin, "connection %" PRIu32 " (peer pid %d)", ing->stats.connections,
					 (int)cred.pid);
			else
				text_new(&in->origin, "connection %" PRIu32, ing->stats.connections);
			if (!in->origin)
				err = -ENOMEM;
		}
		if (!err) {
			ev.data.u64 = tag_input(ing->ninputs - 1);
			if (epoll_ctl(ing->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
				err = -errno;
		}
		if (err) {
			/* Refuse this one connection; the agent falls back to a file. */
			if (in && ing->ninputs && ing->inputs[ing->ninputs - 1] == in && in->fd == fd) {
				in->fd = -1;
				input_release_parser(in);
			}
			close(fd);
			continue;
		}
		ing->open_connections++;
		accepted++;
	}
	return accepted;
}

int ingest_new(ingest_t **out, const char *output_path, const struct ingest_options *opts)
{
	struct trace_writer_options wopts = {0};
	ingest_t *ing;
	int err;

	*out = NULL;
	ing = calloc(1, sizeof(*ing));
	if (!ing)
		return -ENOMEM;
	ing->layer = sources_new(NULL, NULL);
	if (!ing->layer) {
		free(ing);
		return -ENOMEM;
	}
	ing->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ing->epfd < 0) {
		err = -errno;
		sources_free(ing->layer);
		free(ing);
		return err;
	}
	wopts.features = opts && opts->features ? opts->features
						 : (FSS_FEATURE_NCCL | FSS_FEATURE_CUPTI | FSS_FEATURE_NVTX);
	wopts.chunk_payload = opts ? opts->chunk_payload : 0;
	wopts.sync_on_close = opts ? opts->sync_on_close : 0;
	err = trace_writer_open(&ing->out, output_path, &wopts);
	if (err) {
		close(ing->epfd);
		sources_free(ing->layer);
		free(ing);
		return err;
	}
	*out = ing;
	return 0;
}

int ingest_listen(ingest_t *ing, const char *address)
{
	struct wire_address addr;
	struct epoll_event ev = {.events = EPOLLIN};
	struct listener *nl, *l;
	int fd, err, flags;

	if (ing->finished)
		return -EALREADY;
	err = wire_address_parse(address, &addr);
	if (err)
		return err;
	nl = realloc(ing->listeners, (ing->nlisteners + 1) * sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	ing->listeners = nl;
	err = wire_listen(&addr, &fd);
	if (err)
		return err;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	l = &ing->listeners[ing->nlisteners];
	l->fd = fd;
	l->unlink_path = NULL;
	l->check_peer = addr.family == AF_UNIX;
	if (addr.family == AF_UNIX) {
		const struct sockaddr_un *sun = (const struct sockaddr_un *)&addr.addr;

		if (sun->sun_path[0] && !(l->unlink_path = strdup(sun->sun_path))) {
			close(fd);
			unlink(sun->sun_path);
			return -ENOMEM;
		}
	}
	ev.data.u64 = tag_listener(ing->nlisteners);
	if (epoll_ctl(ing->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		err = -errno;
		close(fd);
		if (l->unlink_path)
			unlink(l->unlink_path);
		free(l->unlink_path);
		return err;
	}
	ing->nlisteners++;
	return 0;
}

int ingest_poll(ingest_t *ing, int timeout_ms)
{
	struct epoll_event events[64];
	int n, progress = 0;

	if (ing->finished)
		return -EALREADY;
	if (ing->write_error)
		return ing->write_error;
	n = epoll_wait(ing->epfd, events, (int)(sizeof(events) / sizeof(events[0])), timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		uint64_t tag = events[i].data.u64;
		size_t index = (size_t)(tag >> 1);
		int rc;

		if (tag & 1u) {
			rc = accept_all(ing, &ing->listeners[index]);
		} else {
			struct input *in = ing->inputs[index];

			if (in->fd < 0)
				continue; /* closed earlier in this round */
			rc = connection_read(ing, in);
		}
		if (rc < 0)
			return rc;
		progress += rc > 0;
	}
	return progress;
}

int ingest_flush(ingest_t *ing)
{
	int err;

	if (ing->finished)
		return -EALREADY;
	if (ing->write_error)
		return ing->write_error;
	err = trace_writer_flush(ing->out);
	if (err)
		ing->write_error = err;
	return err;
}

size_t ingest_open_connections(const ingest_t *ing)
{
	return ing->open_connections;
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
	err = input_new(ing, INPUT_FILE, -1, &in);
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
		input_feed(ing, in, ing->readbuf, (size_t)n);
		if (ing->write_error || in->failed)
			break; /* the rest of a damaged file is not read */
	}
	close(fd);
	if (ing->write_error)
		err = ing->write_error;
	if (!err)
		err = input_end(ing, in, 0);
	input_release_parser(in);
	return err;
}

static void listeners_close(ingest_t *ing)
{
	for (size_t i = 0; i < ing->nlisteners; i++) {
		struct listener *l = &ing->listeners[i];
		struct stat st;

		if (l->fd >= 0) {
			epoll_ctl(ing->epfd, EPOLL_CTL_DEL, l->fd, NULL);
			close(l->fd);
			l->fd = -1;
		}
		/* Remove our socket file, never something that replaced it. */
		if (l->unlink_path && lstat(l->unlink_path, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(l->unlink_path);
		free(l->unlink_path);
		l->unlink_path = NULL;
	}
}

int ingest_note_exit(ingest_t *ing, pid_t pid, int wait_status)
{
	if (ing->finished)
		return -EALREADY;
	if (ing->nexits == ing->capexits) {
		size_t cap = ing->capexits ? ing->capexits * 2 : 16;
		struct pending_exit *e = realloc(ing->exits, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		ing->exits = e;
		ing->capexits = cap;
	}
	ing->exits[ing->nexits].at_ns = clock_mono_ns();
	ing->exits[ing->nexits].pid = pid;
	ing->exits[ing->nexits].wait_status = wait_status;
	ing->nexits++;
	return 0;
}

/* Every input has ended: each noted exit goes after its source's records. */
static int write_exits(ingest_t *ing)
{
	for (size_t i = 0; i < ing->nexits; i++) {
		const struct pending_exit *e = &ing->exits[i];
		struct fss_rec_process_exit rec;
		struct ingest_source_stats *s = NULL;
		int err;

		/* The latest source of that pid: a process that reconnected. */
		for (size_t j = ing->stats.sources; j-- > 0;) {
			if (ing->sources[j].has_hello && ing->sources[j].pid == (uint32_t)e->pid) {
				s = &ing->sources[j];
				break;
			}
		}
		if (!s) {
			ing->stats.exits_unmatched++;
			continue;
		}
		memset(&rec, 0, sizeof(rec));
		rec.head.type = FSS_REC_PROCESS_EXIT;
		rec.head.size = sizeof(rec);
		rec.head.source = s->source;
		rec.at_ns = e->at_ns;
		rec.pid = (uint32_t)e->pid;
		rec.wait_status = e->wait_status;
		err = trace_writer_append(ing->out, &rec);
		if (err)
			return err;
		ing->stats.exits_written++;
		err = note_record(ing, s, &rec.head);
		if (err)
			return err;
	}
	return 0;
}

int ingest_finish(ingest_t *ing, const struct ingest_stats **stats)
{
	int err = 0, flush_err, close_err;

	if (ing->finished)
		return -EALREADY;
	/* Connections still in the backlog have sent data too: take them in. */
	for (size_t i = 0; i < ing->nlisteners && !ing->write_error; i++)
		if (ing->listeners[i].fd >= 0)
			accept_all(ing, &ing->listeners[i]);
	/* Take what the open connections have already sent, then end them. */
	for (size_t i = 0; i < ing->ninputs && !ing->write_error; i++) {
		struct input *in = ing->inputs[i];

		if (in->fd < 0)
			continue;
		while (in->fd >= 0 && connection_read(ing, in) > 0)
			;
		if (in->fd >= 0) {
			input_close_fd(ing, in);
			if (!ing->write_error)
				err = input_end(ing, in, 1);
			input_release_parser(in);
			if (err)
				break;
		}
	}
	listeners_close(ing);
	if (ing->write_error && !err)
		err = ing->write_error;
	if (!err)
		err = write_exits(ing);
	/* Flush first, so that the byte count includes the last chunk. */
	flush_err = trace_writer_flush(ing->out);
	ing->stats.records = trace_writer_records(ing->out);
	ing->stats.bytes = trace_writer_bytes(ing->out);
	close_err = trace_writer_close(ing->out);
	ing->out = NULL;
	if (!err)
		err = flush_err ? flush_err : close_err;
	ing->finished = 1;
	/* NVTX ranges still waiting for their names will not get them */
	sources_finish(ing->layer);
	for (uint32_t i = 0; i < ing->stats.sources; i++) {
		stats_sync(ing, &ing->sources[i]);
		if (ing->sources[i].view)
			ing->stats.collectives_missing += source_collectives_missing(ing->sources[i].view);
	}
	ing->stats.per_source = ing->sources;
	ing->stats.damage = (const char *const *)ing->damage;
	ing->stats.refused_peers = ing->refused;
	ing->stats.nrefused_named = ing->stats.refused < INGEST_REFUSED_NAMED ? ing->stats.refused
									 : INGEST_REFUSED_NAMED;
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
		trace_parser_free(in->parser);
		free(in->map);
		free(in->origin);
		free(in);
	}
	free(ing->inputs);
	listeners_close(ing);
	free(ing->listeners);
	for (size_t i = 0; i < ing->stats.ndamaged; i++)
		free(ing->damage[i]);
	free(ing->damage);
	free(ing->exits);
	free(ing->sources);
	sources_free(ing->layer);
	if (ing->epfd >= 0)
		close(ing->epfd);
	free(ing);
}
