/*
 * ingest.c - accept agent streams and trace files, merge them into one trace.
 *
 * One epoll loop on the caller's thread. Each input (connection or file)
 * has its own trace_parser; the parser hands over the records of a chunk
 * only after the chunk's CRC checked out, and take_record() decides for
 * each one which output source it belongs to and whether the output holds
 * it already, then emit() copies it into the output writer with its new
 * source number. Nothing is buffered per input beyond the parser's one
 * chunk and a hello per input source waiting for its next record, so a slow
 * or hostile input costs at most one chunk of memory and never holds up the
 * others.
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

#include "collector/source.h"

#include "common/arith.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "common/wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
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
/* Sources one input may carry: a file (a merged trace, its ranks), and a
 * connection (an agent has one), which must stay cheap whatever it sends. */
#define INGEST_MAX_SOURCES_PER_INPUT 65536u
#define INGEST_MAX_SOURCES_PER_CONNECTION 1024u
/* The largest hello kept waiting for its source's next record; a larger
 * one (no writer makes one) starts a source of its own at once. */
#define INGEST_HELLO_WAIT_MAX 512u
/* A positive error a callback returns to stop a parser for a reason of the
 * ingest's own (the parser passes callback values through unchanged). */
#define INGEST_STOP_TOO_MANY_SOURCES 1
/* The default flush interval (ingest_options.flush_ms). */
#define INGEST_FLUSH_MS_DEFAULT 100u
/* Unacknowledged bytes of one connection that make the ingest write now. */
#define INGEST_UNACKED_MAX (1u << 20)
/* Chunk ends of a connection waiting for the output to reach the disk; when
 * more arrive the newest is overwritten (a later ack covers it). */
#define INGEST_ACK_POINTS 8
/* Sinks a process keeps (the oldest serials give way) and the deepest chain
 * of repeats followed. */
#define PROCESS_SINKS_MAX 32
#define SINK_CHAIN_MAX 16
/* A resume marker's repeat_first for "the records that follow are the
 * session's own (ingest_write_record), outside every sink's numbering". */
#define RESUME_NONE UINT64_MAX

enum input_kind {
	INPUT_CONNECTION,
	INPUT_FILE,
};

/* One sink of a process, as far as the output knows it. */
struct sink_info {
	uint32_t serial;
	uint16_t kind;        /* enum fss_sink_kind, 0 unknown */
	uint16_t preamble;
	int layout_known;     /* its sink record was seen: preamble and repeats below hold */
	uint32_t prev_serial;
	uint64_t repeat_first, repeat_count;
	uint64_t held;        /* its records [0, held) are in the output or stood for by earlier ones */
};

/* A process (a process_id of sink records) and its output source. */
struct process {
	uint64_t id;
	uint32_t out;         /* its output source */
	uint32_t founding;    /* serial of the sink that started the output source: its hello,
	                         sink record and preamble are the ones written */
	struct sink_info sinks[PROCESS_SINKS_MAX];
	size_t nsinks;
	/* Where the output's own record of the source stands: the next record
	 * written is read by a later reader as sink out_serial's record
	 * out_next; a record of another name is preceded by a resume marker.
	 * Records the record callback leaves out (a keep policy, many of them)
	 * only make the reader's count fall behind (drifting): one marker at
	 * the end of the output chunk, with real_next, puts it right again. */
	uint32_t out_serial;
	uint64_t out_next;
	uint64_t real_next;   /* the index in out_serial after the last record taken */
	int drifting;         /* on the ingest's dirty list */
};

/* What the output keeps of a source to re-state it in a new file. */
struct restate {
	_Alignas(8) unsigned char hello[sizeof(struct fss_rec_process_hello)];
	int has_hello;
	unsigned char *strings;       /* every string part, as written; a part with the id and offset of
	                                 one held replaces it */
	size_t nstrings, capstrings;
	uint32_t *string_slots;       /* open addressing over (id, offset): index + 1, 0 empty */
	size_t nslots;                /* a power of two, at least twice nstrings */
	struct fss_rec_comm *comms;   /* live communicators */
	size_t ncomms, capcomms;
	struct fss_rec_clock_anchor anchors[2]; /* the latest per domain (realtime, cupti) */
	int has_anchor[2];
	struct fss_rec_drops drops;   /* the latest */
	int has_drops;
};

/* The ingest's private part of an output source. */
struct out_source {
	struct process *proc; /* NULL: no sink record */
	struct restate restate;
};

enum map_state {
	MAP_FRESH,     /* no record yet */
	MAP_HELLO,     /* its hello waits for the next record */
	MAP_PLAIN,     /* no sink record: copied as it comes */
	MAP_SINK,      /* follows a sink of a process */
};

struct source_map {
	uint32_t in;  /* source number inside the input */
	uint32_t out; /* source number in the output (UINT32_MAX while MAP_HELLO) */
	enum map_state state;
	unsigned char *hello;  /* MAP_HELLO: the record, as received */
	struct process *proc;  /* MAP_SINK */
	uint32_t serial;       /* MAP_SINK: the sink the next record belongs to ... */
	uint64_t index;        /* ... and its index there */
	uint64_t jump_at;      /* a resume marker: index jump_at becomes jump_to (0: none) */
	uint64_t jump_to;
};

/* A chunk end of a connection's stream: acked once the output's record
 * out_mark is on disk. */
struct ack_point {
	uint64_t chunks;   /* chunks of the stream up to it */
	uint64_t records;  /* records of the stream up to it */
	uint64_t out_mark; /* output records (ing->appended) that must be on disk */
	uint64_t offset;   /* stream bytes up to it */
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
	size_t hellos_waiting;   /* map entries in MAP_HELLO */
	uint64_t bytes_in;       /* bytes received or read */
	int failed;              /* the parser stopped: the rest is discarded */
	int fail_rc;
	/* tcp: the key hello still expected first */
	int key_wanted;
	size_t key_have;
	unsigned char key_got[WIRE_KEY_HELLO_BYTES];
	char *peer;              /* tcp peer address, for messages */
	/* the return channel */
	int acks_off;            /* no more acks: a gap in the stream, or the peer is gone */
	struct ack_point points[INGEST_ACK_POINTS];
	size_t npoints;
	struct ack_point acked;  /* the last ack queued */
	unsigned char ackbuf[sizeof(struct wire_ack)];
	size_t ack_left;         /* bytes of ackbuf still to send (a short send) */
	int ack_blocked;         /* an ack is owed and the socket was full */
};

struct listener {
	int fd;
	char *unlink_path; /* unix socket file to remove at the end, or NULL */
	int check_peer;    /* a unix socket: refuse peers of another user */
	int check_key;     /* tcp: the connection's first bytes must be the key */
};

/* An exit noted by ingest_note_exit, written at ingest_finish. */
struct pending_exit {
	uint64_t at_ns;
	pid_t pid;
	int wait_status;
};

struct ingest {
	trace_writer_t *out;
	char *path;                  /* the output file being written (its final name) */
	struct trace_writer_options wopts;
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
	struct out_source *outs;     /* [stats.sources], beside sources */
	size_t capsources;
	struct process **procs;      /* every process, in arrival order */
	size_t nprocs, capprocs;
	char **damage;
	struct pending_exit *exits;
	size_t nexits, capexits;
	struct ingest_refused_peer refused[INGEST_REFUSED_NAMED];
	struct ingest_stats stats;
	ingest_record_fn on_record;
	void *on_record_ctx;
	unsigned char key[WIRE_KEY_BYTES];
	int has_key;
	/* writing as it goes */
	uint64_t flush_ns;           /* flush interval */
	uint64_t last_flush_ns;      /* when the output last reached the disk */
	int arrived;                 /* records arrived since then */
	uint64_t appended;           /* records appended to the output, over every file */
	uint64_t on_disk;            /* of those, written out (write(2) returned) */
	uint64_t writer_bytes;       /* trace_writer_bytes() at the last look: a change is a write */
	uint64_t file_records_before; /* records and bytes of the files closed by ingest_rotate */
	uint64_t file_bytes_before;
	size_t acks_blocked;         /* connections with ack_blocked set */
	int taking;                  /* inside take_record (the record callback may run) */
	trace_writer_t *next_out;    /* a rotation asked for meanwhile: its file, opened */
	char *next_path;
	struct process **dirty;      /* processes drifting: a marker is due before the chunk is written */
	size_t ndirty, capdirty;
	uint32_t chunk_cap;          /* the output's chunk payload (as the writer clamps it) */
	uint32_t chunk_used;         /* bytes in the writer's pending chunk */
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

static int grow(void **v, size_t *cap, size_t need, size_t size, size_t first)
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

/* ---- the return channel ------------------------------------------------ */

static void ack_blocked_set(ingest_t *ing, struct input *in, int blocked)
{
	if (in->ack_blocked == blocked)
		return;
	in->ack_blocked = blocked;
	if (blocked)
		ing->acks_blocked++;
	else
		ing->acks_blocked--;
}

/* Send what is owed to one connection, without blocking: the rest of a
 * short send, then an ack up to in->acked. A full socket leaves it for a
 * later round; a peer that is gone ends the acks, never the ingest. */
static void ack_send(ingest_t *ing, struct input *in)
{
	for (;;) {
		if (in->fd < 0 || in->acks_off) {
			ack_blocked_set(ing, in, 0);
			return;
		}
		if (!in->ack_left) {
			struct wire_ack ack = {.magic = WIRE_ACK_MAGIC,
					       .chunks = in->acked.chunks,
					       .records = in->acked.records};
			struct wire_ack *last = (struct wire_ack *)in->ackbuf;

			if (last->magic == WIRE_ACK_MAGIC && last->chunks == ack.chunks) {
				ack_blocked_set(ing, in, 0);
				return; /* sent already */
			}
			memcpy(in->ackbuf, &ack, sizeof(ack));
			in->ack_left = sizeof(ack);
		}
		ssize_t n = send(in->fd, in->ackbuf + sizeof(in->ackbuf) - in->ack_left, in->ack_left,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			ack_blocked_set(ing, in, 1);
			return;
		}
		if (n <= 0) {
			in->acks_off = 1; /* EPIPE, ECONNRESET: the reading side will see the end */
			ack_blocked_set(ing, in, 0);
			return;
		}
		in->ack_left -= (size_t)n;
		if (!in->ack_left)
			ing->stats.acks_sent++;
	}
}

/* The output's records up to ing->on_disk are in the file: ack every
 * connection's chunks that are wholly there. */
static void acks_after_write(ingest_t *ing)
{
	ing->last_flush_ns = clock_mono_ns();
	ing->arrived = 0;
	for (size_t i = 0; i < ing->ninputs; i++) {
		struct input *in = ing->inputs[i];
		size_t k = 0;

		if (in->kind != INPUT_CONNECTION || in->fd < 0 || in->acks_off)
			continue;
		while (k < in->npoints && in->points[k].out_mark <= ing->on_disk)
			k++;
		if (k) {
			in->acked = in->points[k - 1];
			memmove(in->points, in->points + k, (in->npoints - k) * sizeof(in->points[0]));
			in->npoints -= k;
		}
		if (k || in->ack_blocked)
			ack_send(ing, in);
	}
}

/* After an append: did the writer write a full chunk out? Then every
 * record before this one is on disk. */
static void note_append(ingest_t *ing, uint16_t size)
{
	uint64_t bytes = trace_writer_bytes(ing->out);

	ing->appended++;
	ing->chunk_used += size;
	if (bytes != ing->writer_bytes) {
		ing->chunk_used = size; /* the record opened the next chunk */
		ing->writer_bytes = bytes;
		ing->on_disk = ing->appended - 1;
		acks_after_write(ing);
		ing->arrived = 1; /* this record waits in the next chunk: the timer writes it */
	}
}

static int markers_due(ingest_t *ing);

/* Write the pending chunk, then ack. */
static int flush_and_ack(ingest_t *ing)
{
	int err = markers_due(ing);

	if (!err)
		err = trace_writer_flush(ing->out);

	if (err) {
		if (!ing->write_error)
			ing->write_error = err;
		return err;
	}
	ing->writer_bytes = trace_writer_bytes(ing->out);
	ing->chunk_used = 0;
	ing->on_disk = ing->appended;
	acks_after_write(ing);
	return 0;
}

static int append_raw(ingest_t *ing, const void *rec)
{
	int err;

	if (ing->write_error)
		return ing->write_error;
	err = trace_writer_append(ing->out, rec);
	if (err == -EINVAL)
		return err; /* a record too large for the output's chunks: refused, the output goes on */
	if (err) {
		ing->write_error = err;
		return err;
	}
	note_append(ing, ((const struct fss_record_head *)rec)->size);
	return 0;
}

/* Append a record; first, when it would close the pending chunk, the
 * markers due, so that every chunk on disk ends with the sources' counts
 * right. */
static int append_out(ingest_t *ing, const void *rec)
{
	uint16_t size = ((const struct fss_record_head *)rec)->size;

	if (ing->ndirty && (uint64_t)ing->chunk_used + size + ing->ndirty * sizeof(struct fss_rec_sink) > ing->chunk_cap) {
		int err = markers_due(ing);

		if (err)
			return err;
	}
	return append_raw(ing, rec);
}

/* ---- sources ------------------------------------------------------------ */

/* A new output source for input `in`. */
static int source_new(ingest_t *ing, struct input *in, uint32_t *out)
{
	struct ingest_source_stats *s;

	if (ing->stats.sources == UINT32_MAX - 1)
		return INGEST_STOP_TOO_MANY_SOURCES;
	if (ing->stats.sources == ing->capsources) {
		size_t cap = ing->capsources ? ing->capsources * 2 : 16;
		struct ingest_source_stats *ns = realloc(ing->sources, cap * sizeof(*ns));
		struct out_source *no;

		if (!ns)
			return -ENOMEM;
		ing->sources = ns;
		no = realloc(ing->outs, cap * sizeof(*no));
		if (!no)
			return -ENOMEM;
		ing->outs = no;
		ing->capsources = cap;
	}
	s = &ing->sources[ing->stats.sources];
	memset(s, 0, sizeof(*s));
	memset(&ing->outs[ing->stats.sources], 0, sizeof(ing->outs[0]));
	s->source = ing->stats.sources++;
	s->rank = FSS_RANK_UNKNOWN;
	s->origin = in->origin;
	*out = s->source;
	return 0;
}

/* The map entry of input source `in_source`, added on first sight. */
static int map_get(struct input *in, uint32_t in_source, struct source_map **out)
{
	struct source_map *m;

	if (in->nmap && in->map[in->last_map].in == in_source) {
		*out = &in->map[in->last_map];
		return 0;
	}
	for (size_t i = 0; i < in->nmap; i++) {
		if (in->map[i].in == in_source) {
			in->last_map = i;
			*out = &in->map[i];
			return 0;
		}
	}
	if (in->nmap >= (in->kind == INPUT_CONNECTION ? INGEST_MAX_SOURCES_PER_CONNECTION
						      : INGEST_MAX_SOURCES_PER_INPUT))
		return INGEST_STOP_TOO_MANY_SOURCES;
	if (grow((void **)&in->map, &in->capmap, in->nmap + 1, sizeof(*in->map), 4))
		return -ENOMEM;
	m = &in->map[in->nmap];
	memset(m, 0, sizeof(*m));
	m->in = in_source;
	m->out = UINT32_MAX;
	in->last_map = in->nmap++;
	*out = m;
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
	if (s->dropped != v->dropped) {
		s->dropped = v->dropped;
		ing->stats.dropped = 0;
		for (uint32_t i = 0; i < ing->stats.sources; i++)
			ing->stats.dropped = u64_add_sat(ing->stats.dropped, ing->sources[i].dropped);
	}
}

/* ---- what a new file re-states ---------------------------------------- */

static size_t rec_keep_size(const struct fss_record_head *rec, size_t known)
{
	return rec->size < known ? rec->size : known;
}

static size_t string_slot_of(const struct restate *r, uint32_t id, uint16_t offset)
{
	uint64_t h = ((uint64_t)id << 16 | offset) * 0x9e3779b97f4a7c15ull;
	size_t i = (size_t)(h >> 20) & (r->nslots - 1);

	for (;; i = (i + 1) & (r->nslots - 1)) {
		const struct fss_rec_string *p;

		if (!r->string_slots[i])
			return i;
		p = (const void *)(r->strings + (r->string_slots[i] - 1) * sizeof(struct fss_rec_string));
		if (p->id == id && p->offset == offset)
			return i;
	}
}

static int strings_rehash(struct restate *r)
{
	size_t n = r->nslots ? r->nslots * 2 : 64;
	uint32_t *v = calloc(n, sizeof(*v));

	if (!v)
		return -ENOMEM;
	free(r->string_slots);
	r->string_slots = v;
	r->nslots = n;
	for (size_t j = 0; j < r->nstrings; j++) {
		const struct fss_rec_string *p = (const void *)(r->strings + j * sizeof(struct fss_rec_string));

		r->string_slots[string_slot_of(r, p->id, p->offset)] = (uint32_t)j + 1;
	}
	return 0;
}

static int restate_string(struct restate *r, const struct fss_rec_string *part)
{
	size_t slot;
	unsigned char *at;

	if ((r->nstrings + 1) * 2 > r->nslots && strings_rehash(r))
		return -ENOMEM;
	if (r->nstrings >= UINT32_MAX - 1)
		return 0;
	slot = string_slot_of(r, part->id, part->offset);
	if (r->string_slots[slot]) {
		at = r->strings + (r->string_slots[slot] - 1) * sizeof(struct fss_rec_string);
	} else {
		if (grow((void **)&r->strings, &r->capstrings, r->nstrings + 1, sizeof(struct fss_rec_string), 16))
			return -ENOMEM;
		at = r->strings + r->nstrings * sizeof(struct fss_rec_string);
		r->string_slots[slot] = (uint32_t)++r->nstrings;
	}
	memcpy(at, part, sizeof(*part));
	((struct fss_record_head *)at)->size = sizeof(*part);
	return 0;
}

static int restate_note(struct restate *r, const struct fss_record_head *rec)
{
	switch (rec->type) {
	case FSS_REC_PROCESS_HELLO:
		memset(r->hello, 0, sizeof(r->hello));
		memcpy(r->hello, rec, rec_keep_size(rec, sizeof(r->hello)));
		((struct fss_record_head *)r->hello)->size = sizeof(r->hello);
		r->has_hello = 1;
		break;
	case FSS_REC_STRING:
		return restate_string(r, (const void *)rec);
	case FSS_REC_COMM: {
		const struct fss_rec_comm *c = (const void *)rec;
		size_t i;

		for (i = 0; i < r->ncomms && r->comms[i].comm != c->comm; i++)
			;
		if (c->event == FSS_COMM_DESTROY || c->event == FSS_COMM_ABORT) {
			if (i < r->ncomms)
				r->comms[i] = r->comms[--r->ncomms];
			break;
		}
		/* an observed communicator (attach saw it first in use) is as live
		 * as one seen made: restated with what was inferred of it */
		if (c->result != 0 ||
		    (c->event != FSS_COMM_INIT && c->event != FSS_COMM_SPLIT && c->event != FSS_COMM_OBSERVED))
			break;
		if (i == r->ncomms) {
			if (grow((void **)&r->comms, &r->capcomms, r->ncomms + 1, sizeof(*r->comms), 4))
				return -ENOMEM;
			r->ncomms++;
		}
		r->comms[i] = *c;
		r->comms[i].head.size = sizeof(*c);
		break;
	}
	case FSS_REC_CLOCK_ANCHOR: {
		const struct fss_rec_clock_anchor *a = (const void *)rec;
		int d = a->domain == FSS_CLOCK_CUPTI;

		r->anchors[d] = *a;
		r->anchors[d].head.size = sizeof(*a);
		r->has_anchor[d] = 1;
		break;
	}
	case FSS_REC_DROPS:
		r->drops = *(const struct fss_rec_drops *)rec;
		r->drops.head.size = sizeof(r->drops);
		r->has_drops = 1;
		break;
	default:
		break;
	}
	return 0;
}

static void restate_free(struct restate *r)
{
	free(r->strings);
	free(r->string_slots);
	free(r->comms);
}

/* Records re-stated after the hello (and marker). */
static size_t restate_count(const struct restate *r)
{
	return r->nstrings + r->ncomms + (size_t)r->has_anchor[0] + (size_t)r->has_anchor[1] + (size_t)r->has_drops;
}

/* The i-th of those. */
static const void *restate_at(const struct restate *r, size_t i)
{
	if (i < r->nstrings)
		return r->strings + i * sizeof(struct fss_rec_string);
	i -= r->nstrings;
	if (i < r->ncomms)
		return &r->comms[i];
	i -= r->ncomms;
	for (int d = 0; d < 2; d++) {
		if (!r->has_anchor[d])
			continue;
		if (i == 0)
			return &r->anchors[d];
		i--;
	}
	return &r->drops;
}

/* ---- emitting ----------------------------------------------------------- */

/*
 * One record for output source `out`: renumbered, kept for re-statement,
 * taken in by the layer, shown to the record callback, then written unless
 * the callback leaves it out (and it is not `must_write`). Returns 0 when
 * written, 1 when left out, or a negative errno.
 */
static int emit_record(ingest_t *ing, uint32_t out, const struct fss_record_head *rec, int must_write)
{
	struct fss_record_head *copy = (struct fss_record_head *)ing->record;
	struct ingest_source_stats *s = &ing->sources[out];
	int err, rc = 0;

	if (ing->write_error)
		return ing->write_error;
	if (copy != rec)
		memcpy(copy, rec, rec->size);
	copy->source = out;
	err = restate_note(&ing->outs[out].restate, copy);
	if (!err)
		err = sources_feed(ing->layer, copy);
	if (err)
		return err;
	if (copy->type < FSS_REC_TYPE_MAX)
		ing->stats.by_type[copy->type]++;
	s->records++;
	stats_sync(ing, s);
	if (ing->on_record)
		rc = ing->on_record(ing->on_record_ctx, copy, s->view);
	if (rc < 0) {
		ing->write_error = rc;
		return rc;
	}
	if (rc == 1 && !must_write) {
		ing->stats.records_left_out++;
		return 1;
	}
	err = append_out(ing, copy);
	if (err == -EINVAL) {
		ing->stats.records_left_out++; /* too large for the output's chunks */
		return 1;
	}
	return err;
}

/* emit_record for callers that need not know whether it was left out. */
static int emit(ingest_t *ing, uint32_t out, const struct fss_record_head *rec)
{
	int rc = emit_record(ing, out, rec, 0);

	return rc > 0 ? 0 : rc;
}

/* ---- processes and sinks ------------------------------------------------ */

static struct process *process_find(const ingest_t *ing, uint64_t id)
{
	for (size_t i = ing->nprocs; i-- > 0;)
		if (ing->procs[i]->id == id)
			return ing->procs[i];
	return NULL;
}

static struct sink_info *sink_find(struct process *p, uint32_t serial)
{
	for (size_t i = 0; i < p->nsinks; i++)
		if (p->sinks[i].serial == serial)
			return &p->sinks[i];
	return NULL;
}

/* The sink `serial` of p, added when new: when the table is full, the
 * oldest serial other than the founding one gives way. */
static struct sink_info *sink_get(ingest_t *ing, struct process *p, uint32_t serial)
{
	struct sink_info *si = sink_find(p, serial);
	size_t victim = 0;

	if (si)
		return si;
	if (p->nsinks < PROCESS_SINKS_MAX) {
		si = &p->sinks[p->nsinks++];
	} else {
		for (size_t i = 1; i < p->nsinks; i++)
			if ((p->sinks[i].serial < p->sinks[victim].serial && p->sinks[i].serial != p->founding) ||
			    p->sinks[victim].serial == p->founding)
				victim = i;
		si = &p->sinks[victim];
	}
	memset(si, 0, sizeof(*si));
	si->serial = serial;
	ing->sources[p->out].sinks++;
	if (serial != p->founding)
		ing->stats.sinks_merged++;
	return si;
}

static int process_new(ingest_t *ing, uint64_t id, uint32_t out, uint32_t founding, struct process **pp)
{
	struct process *p;

	if (grow((void **)&ing->procs, &ing->capprocs, ing->nprocs + 1, sizeof(*ing->procs), 8))
		return -ENOMEM;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->id = id;
	p->out = out;
	p->founding = founding;
	p->out_serial = founding;
	ing->procs[ing->nprocs++] = p;
	ing->outs[out].proc = p;
	*pp = p;
	return 0;
}

static int is_sink_record(const struct fss_record_head *rec)
{
	return rec->type == FSS_REC_SINK;
}

/* A resume marker (see ingest.h): a sink record continuing itself. */
static int is_marker(const struct fss_rec_sink *k)
{
	return k->serial == k->prev_serial;
}

enum sink_part {
	PART_HELLO,
	PART_SINK,
	PART_PREAMBLE,
	PART_REPEAT,
	PART_OWN,
};

static enum sink_part sink_part_of(const struct sink_info *si, uint64_t index)
{
	if (index == 0)
		return PART_HELLO;
	if (index == 1)
		return PART_SINK;
	if (!si || !si->layout_known)
		return PART_OWN;
	if (index < 2 + (uint64_t)si->preamble)
		return PART_PREAMBLE;
	if (si->prev_serial && index - 2 - si->preamble < si->repeat_count)
		return PART_REPEAT;
	return PART_OWN;
}

/* A resume marker in the output: the next record of p is read by a later
 * reader as sink `serial`'s record `index`, and the records before it are
 * held. Written to the file only (it says nothing to an analysis). */
static int write_marker(ingest_t *ing, struct process *p, uint32_t serial, uint64_t index)
{
	const struct sink_info *si = sink_find(p, serial);
	struct fss_rec_sink k;
	int err;

	record_init(&k, FSS_REC_SINK, sizeof(k), p->out);
	k.process_id = p->id;
	k.serial = serial;
	k.kind = si ? si->kind : 0;
	k.prev_serial = serial;
	k.prev_kind = k.kind;
	k.repeat_first = index;
	err = append_raw(ing, &k);
	if (err == 0) {
		p->out_serial = serial;
		p->out_next = index;
		p->drifting = 0;
	}
	return err;
}

/* Where a marker for p's current sink resumes: past every record of it
 * the output has taken (written, left out, or held). */
static uint64_t resume_index(struct process *p)
{
	const struct sink_info *si = sink_find(p, p->out_serial);
	uint64_t next = p->real_next;

	if (p->out_next != RESUME_NONE && p->out_next > next)
		next = p->out_next;
	return si && si->held > next ? si->held : next;
}

/* The markers of the drifting processes, before a chunk is written. */
static int markers_due(ingest_t *ing)
{
	int err = 0;

	for (size_t i = 0; i < ing->ndirty && !err; i++) {
		struct process *p = ing->dirty[i];

		if (p->drifting)
			err = write_marker(ing, p, p->out_serial, resume_index(p));
	}
	if (!err)
		ing->ndirty = 0;
	return err;
}

static int drifting_add(ingest_t *ing, struct process *p)
{
	if (p->drifting)
		return 0;
	if (grow((void **)&ing->dirty, &ing->capdirty, ing->ndirty + 1, sizeof(*ing->dirty), 8))
		return -ENOMEM;
	ing->dirty[ing->ndirty++] = p;
	p->drifting = 1;
	return 0;
}

/*
 * A record of an input source that follows a sink: its chain of names
 * (sink, index) from level 0 down through the repeat regions, held or not,
 * then written if the output lacks it. A hello, sink record or preamble is
 * written only for the sink that founded the output source.
 */
static int take_sink_record(ingest_t *ing, struct source_map *m, const struct fss_record_head *rec)
{
	struct process *p = m->proc;
	uint32_t serial[SINK_CHAIN_MAX];
	uint64_t index[SINK_CHAIN_MAX];
	enum sink_part part;
	size_t depth = 0, k;
	uint64_t held_from = 0;
	int held = 0, err;

	if (rec->type == FSS_REC_STEP_SUMMARY)
		return emit(ing, p->out, rec); /* a collector's own record: in no sink's numbering */
	if (m->index == RESUME_NONE) {
		/* a session's own record (a resume marker said so): outside the
		 * numbering, written as it is */
		if (p->out_serial != m->serial || p->out_next != RESUME_NONE) {
			err = write_marker(ing, p, m->serial, RESUME_NONE);
			if (err)
				return err;
		}
		err = emit_record(ing, p->out, rec, 0);
		return err < 0 ? err : 0;
	}
	serial[0] = m->serial;
	index[0] = m->index;
	if (m->jump_at && m->index + 1 == m->jump_at) {
		/* the last of a resume marker's preamble: after it, the records
		 * are from its index on, and what comes before that is held */
		m->index = m->jump_to;
		m->jump_at = 0; /* once: the index may land below the jump again */
		if (m->jump_to != RESUME_NONE)
			held_from = m->jump_to;
	} else {
		m->index++;
	}
	for (;;) {
		struct sink_info *si = sink_find(p, serial[depth]);

		part = sink_part_of(si, index[depth]);
		if (part != PART_REPEAT || depth + 1 == SINK_CHAIN_MAX || si->prev_serial == serial[depth])
			break;
		serial[depth + 1] = si->prev_serial;
		index[depth + 1] = si->repeat_first + (index[depth] - 2 - si->preamble);
		depth++;
	}
	if (part == PART_REPEAT)
		part = PART_OWN; /* deeper than followed: taken as its own */
	for (k = 0; k <= depth; k++) {
		struct sink_info *si = sink_find(p, serial[k]);

		if (si && index[k] < si->held)
			held = 1;
	}
	for (k = 0; k <= depth; k++) {
		struct sink_info *si = sink_get(ing, p, serial[k]);

		if (index[k] + 1 > si->held)
			si->held = index[k] + 1;
		if (k == 0 && held_from > si->held)
			si->held = held_from;
	}
	if (part == PART_SINK && is_sink_record(rec)) {
		const struct fss_rec_sink *ks = (const void *)rec;
		struct sink_info *si = sink_find(p, serial[depth]);

		if (ks->process_id == p->id && ks->serial == serial[depth] && !is_marker(ks) && !si->layout_known) {
			si->layout_known = 1;
			si->kind = ks->kind;
			si->preamble = ks->preamble;
			si->prev_serial = ks->prev_serial;
			si->repeat_first = ks->repeat_first;
			si->repeat_count = ks->repeat_count;
		}
	}
	if (held) {
		ing->sources[p->out].repeats_skipped++;
		ing->stats.repeats_skipped++;
		return 0;
	}
	if (part != PART_OWN && serial[depth] != p->founding)
		return 0; /* a later sink's re-statement of the process: the source has it */
	if (p->out_serial != serial[0] || p->out_next == RESUME_NONE || (p->out_next != index[0] && !p->drifting)) {
		err = write_marker(ing, p, serial[0], index[0]);
		if (err)
			return err;
	}
	err = emit_record(ing, p->out, rec, 0);
	if (err < 0)
		return err;
	p->real_next = index[0] + 1;
	if (err == 0)
		p->out_next++; /* as the reader counts it */
	else if (drifting_add(ing, p))
		return -ENOMEM; /* left out: the reader's count falls behind until the next marker */
	return 0;
}

/* Level 0 of map entry m follows sink record k from here (k is its record
 * at index 1; a marker makes the records after its preamble those from
 * repeat_first). */
static void map_follow(struct source_map *m, const struct fss_rec_sink *k)
{
	m->serial = k->serial;
	m->index = 1;
	m->jump_at = 0;
	if (is_marker(k)) {
		m->jump_at = 2 + (uint64_t)k->preamble;
		m->jump_to = k->repeat_first;
	}
}

/* An input source's hello and then its sink record: which process, which
 * output source. */
static int take_first_sink(ingest_t *ing, struct input *in, struct source_map *m, const struct fss_rec_sink *k)
{
	_Alignas(8) unsigned char hello[UINT16_MAX + 1];
	struct process *p = process_find(ing, k->process_id);
	size_t hello_size = ((const struct fss_record_head *)m->hello)->size;
	int err;

	memcpy(hello, m->hello, hello_size);
	free(m->hello);
	m->hello = NULL;
	in->hellos_waiting--;
	if (!p) {
		uint32_t out;

		err = source_new(ing, in, &out);
		if (!err)
			err = process_new(ing, k->process_id, out, k->serial, &p);
		if (err)
			return err;
	}
	m->out = p->out;
	m->proc = p;
	m->state = MAP_SINK;
	map_follow(m, k);
	m->index = 0;
	err = take_sink_record(ing, m, (const void *)hello);
	if (!err)
		err = take_sink_record(ing, m, &k->head);
	return err;
}

/* The hello of m waited in vain (its source has no sink record): it starts
 * a source of its own. */
static int hello_release(ingest_t *ing, struct input *in, struct source_map *m)
{
	int err = source_new(ing, in, &m->out);

	m->state = MAP_PLAIN;
	if (!err)
		err = emit(ing, m->out, (const void *)m->hello);
	free(m->hello);
	m->hello = NULL;
	in->hellos_waiting--;
	return err;
}

static int take_record(ingest_t *ing, struct input *in, const struct fss_record_head *rec)
{
	struct source_map *m;
	int err = map_get(in, rec->source, &m);

	if (err)
		return err;
	switch (m->state) {
	case MAP_FRESH:
		if (rec->type == FSS_REC_PROCESS_HELLO && rec->size <= INGEST_HELLO_WAIT_MAX) {
			m->hello = malloc(rec->size);
			if (!m->hello)
				return -ENOMEM;
			memcpy(m->hello, rec, rec->size);
			m->state = MAP_HELLO;
			in->hellos_waiting++;
			return 0;
		}
		err = source_new(ing, in, &m->out);
		m->state = MAP_PLAIN;
		return err ? err : emit(ing, m->out, rec);
	case MAP_HELLO:
		if (is_sink_record(rec))
			return take_first_sink(ing, in, m, (const void *)rec);
		err = hello_release(ing, in, m);
		return err ? err : emit(ing, m->out, rec);
	case MAP_PLAIN:
		return emit(ing, m->out, rec);
	case MAP_SINK:
		/* A resume marker of a merged trace restarts the numbering; any
		 * other sink record here is a repeated one, read through the
		 * layouts like the rest of the repeats. */
		if (is_sink_record(rec) && ((const struct fss_rec_sink *)rec)->process_id == m->proc->id &&
		    is_marker((const void *)rec))
			map_follow(m, (const void *)rec);
		return take_sink_record(ing, m, rec);
	}
	return 0;
}

static int rotate_pending(ingest_t *ing);

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
	rc = take_record(ing, in, rec);
	ing->taking = 0;
	err = rotate_pending(ing);
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

static int input_new(ingest_t *ing, enum input_kind kind, int fd, struct input **out)
{
	struct input *in;

	if (grow((void **)&ing->inputs, &ing->capinputs, ing->ninputs + 1, sizeof(*ing->inputs), 16))
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
			err = hello_release(ing, in, &in->map[i]);
	return err;
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
	int rc, err;

	if (in->kind == INPUT_CONNECTION && in->bytes_in == 0 && !cut)
		return 0; /* connected and left without a byte: nothing lost */
	if (in->key_wanted) {
		/* ended before its key was complete: refused, not damaged */
		ing->stats.refused_keys++;
		return add_damage(ing, text_new(&msg, "%s (tcp peer %s): refused: ended after %zu of the %d bytes of "
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
		text_new(&msg, "%s (%s): more than %u sources in one %s; kept %" PRIu64 " records, dropped the rest",
			 in->origin, who,
			 in->kind == INPUT_CONNECTION ? INGEST_MAX_SOURCES_PER_CONNECTION : INGEST_MAX_SOURCES_PER_INPUT,
			 in->kind == INPUT_CONNECTION ? "connection" : "file", records);
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
	ack_blocked_set(ing, in, 0);
	epoll_ctl(ing->epfd, EPOLL_CTL_DEL, in->fd, NULL);
	close(in->fd);
	in->fd = -1;
	ing->open_connections--;
}

/* Parsing done for good: free the chunk buffer and the map now, keep the
 * numbers. */
static void input_release_parser(struct input *in)
{
	/* The parser's message and counters are read by input_end(), which has
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

/* The key hello of a tcp connection, as its first bytes arrive; returns the
 * bytes it took, or -1 when the connection is to be cut. */
static ssize_t input_key(ingest_t *ing, struct input *in, const unsigned char *data, size_t len)
{
	size_t take = WIRE_KEY_HELLO_BYTES - in->key_have;
	char *msg;

	if (take > len)
		take = len;
	memcpy(in->key_got + in->key_have, data, take);
	in->key_have += take;
	if (in->key_have < WIRE_KEY_HELLO_BYTES)
		return (ssize_t)take;
	in->key_wanted = 0;
	if (wire_key_check(ing->key, in->key_got)) {
		ack_send(ing, in); /* the ack of nothing, as connection_add sends a unix peer */
		return (ssize_t)take;
	}
	ing->stats.refused_keys++;
	add_damage(ing, text_new(&msg, "%s (tcp peer %s): refused: its first bytes are not the connection key",
				 in->origin, in->peer ? in->peer : "unknown"));
	return -1;
}

static void input_feed(ingest_t *ing, struct input *in, const void *data, size_t len)
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

/* The connection has ended: say how, free what it held. */
static int connection_end(ingest_t *ing, struct input *in, int cut)
{
	int err;

	input_close_fd(ing, in);
	err = input_end(ing, in, cut);
	input_release_parser(in);
	return err;
}

/* Read what a connection has; returns 1 if it made progress, 0 if not, or
 * the output's write error. */
static int connection_read(ingest_t *ing, struct input *in)
{
	int progress = 0;

	for (int round = 0; round < INGEST_READS_PER_ROUND && in->fd >= 0; round++) {
		ssize_t n = read(in->fd, ing->readbuf, sizeof(ing->readbuf));
		const unsigned char *data = ing->readbuf;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			/* EOF, or a reset by a peer that died: either way the
			 * stream has ended; the parser says whether cleanly. */
			int err = connection_end(ing, in, 0);

			if (err)
				return err;
			return 1;
		}
		progress = 1;
		if (in->key_wanted) {
			ssize_t took = input_key(ing, in, data, (size_t)n);

			if (took < 0) {
				input_close_fd(ing, in);
				input_release_parser(in);
				return 1;
			}
			data += took;
			n -= took;
			if (!n)
				continue;
		}
		input_feed(ing, in, data, (size_t)n);
		if (ing->write_error)
			return ing->write_error;
		if (in->failed) {
			/* Not a trace (or past what one connection may cost): cut it.
			 * An agent then fails over to its file and repeats there what
			 * was not acknowledged; anything else just goes away. */
			int err = connection_end(ing, in, 0);

			return err ? err : 1;
		}
		if (in->npoints && in->bytes_in - in->acked.offset > INGEST_UNACKED_MAX) {
			int err = flush_and_ack(ing);

			if (err)
				return err;
		}
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


/* A connection taken in: registered with epoll and counted. On failure the
 * fd is closed and the input (if made) left without a parser. */
static int connection_add(ingest_t *ing, int fd, const char *origin_fmt_peer, int key_wanted, char *peer)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct input *in = NULL;
	int err = input_new(ing, INPUT_CONNECTION, fd, &in);

	if (!err) {
		ing->stats.connections++;
		in->key_wanted = key_wanted;
		in->peer = peer;
		peer = NULL;
		if (origin_fmt_peer)
			in->origin = strdup(origin_fmt_peer);
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
		if (in) {
			in->fd = -1;
			input_release_parser(in);
		}
		free(peer);
		close(fd);
		return err;
	}
	ing->open_connections++;
	/* The ack of nothing: tells the agent at once that this is a collector
	 * that acks (it then repeats what a failure leaves unacked, and sends a
	 * failover file without waiting). A tcp peer gets it once its key checks out. */
	if (!key_wanted)
		ack_send(ing, in);
	return 0;
}

/* "127.0.0.1:40312" of a tcp peer, or NULL. */
static char *peer_text(const struct sockaddr_storage *ss)
{
	char host[INET6_ADDRSTRLEN];
	char *s = NULL;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;

		if (inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host)))
			text_new(&s, "%s:%u", host, (unsigned)ntohs(a->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;

		if (inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host)))
			text_new(&s, "[%s]:%u", host, (unsigned)ntohs(a->sin6_port));
	}
	return s;
}

static int accept_all(ingest_t *ing, struct listener *l)
{
	int accepted = 0;

	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sslen = sizeof(ss);
		struct ucred cred;
		socklen_t clen = sizeof(cred);
		char *origin = NULL, *peer = NULL;
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &sslen, SOCK_NONBLOCK | SOCK_CLOEXEC);

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
		memset(&cred, 0, sizeof(cred));
		if (l->check_key) {
			peer = peer_text(&ss);
			text_new(&origin, "connection %" PRIu32 " (tcp %s)", ing->stats.connections + 1,
				 peer ? peer : "peer");
		} else if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 && cred.pid > 0) {
			text_new(&origin, "connection %" PRIu32 " (peer pid %d)", ing->stats.connections + 1,
				 (int)cred.pid);
		}
		if (connection_add(ing, fd, origin, l->check_key, peer) == 0)
			accepted++;
		free(origin);
	}
	return accepted;
}

int ingest_new(ingest_t **out, const char *output_path, const struct ingest_options *opts)
{
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
	ing->wopts.features = opts && opts->features ? opts->features
						      : (FSS_FEATURE_NCCL | FSS_FEATURE_CUPTI | FSS_FEATURE_NVTX);
	ing->wopts.chunk_payload = opts ? opts->chunk_payload : 0;
	ing->wopts.sync_on_close = opts ? opts->sync_on_close : 0;
	ing->wopts.keep_flags = opts ? opts->keep_flags : 0;
	ing->wopts.keep_steps = opts ? opts->keep_steps : 0;
	ing->flush_ns = (uint64_t)(opts && opts->flush_ms ? opts->flush_ms : INGEST_FLUSH_MS_DEFAULT) * 1000000u;
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
		sources_free(ing->layer);
		free(ing);
		return err;
	}
	ing->writer_bytes = trace_writer_bytes(ing->out);
	ing->last_flush_ns = clock_mono_ns();
	ing->path = strdup(output_path);
	if (!ing->path) {
		trace_writer_close(ing->out);
		close(ing->epfd);
		sources_free(ing->layer);
		free(ing);
		return -ENOMEM;
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
	if (addr.family != AF_UNIX && !ing->has_key)
		return -EACCES; /* TCP has no peer identity: only a key stands for one */
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
	l->check_key = addr.family != AF_UNIX;
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

/* The flush interval has passed since records arrived: write and ack. */
static int flush_if_due(ingest_t *ing)
{
	if (!ing->arrived || clock_mono_ns() - ing->last_flush_ns < ing->flush_ns)
		return 0;
	return flush_and_ack(ing);
}

int ingest_poll(ingest_t *ing, int timeout_ms)
{
	struct epoll_event events[64];
	int n, progress = 0, err;

	if (ing->finished)
		return -EALREADY;
	if (ing->write_error)
		return ing->write_error;
	if (ing->arrived) {
		/* wake up for the flush that is due */
		uint64_t now = clock_mono_ns(), due = ing->last_flush_ns + ing->flush_ns;
		int until = now >= due ? 0 : (int)((due - now + 999999u) / 1000000u);

		if (timeout_ms < 0 || until < timeout_ms)
			timeout_ms = until;
	}
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
	err = flush_if_due(ing);
	if (err)
		return err;
	if (ing->acks_blocked)
		for (size_t i = 0; i < ing->ninputs && ing->acks_blocked; i++)
			if (ing->inputs[i]->ack_blocked)
				ack_send(ing, ing->inputs[i]);
	return progress;
}

int ingest_flush(ingest_t *ing)
{
	if (ing->finished)
		return -EALREADY;
	if (ing->write_error)
		return ing->write_error;
	return flush_and_ack(ing);
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
	if (!err)
		err = flush_if_due(ing);
	return err;
}

int ingest_add_fd(ingest_t *ing, int fd, const char *origin)
{
	int flags;

	if (fd < 0)
		return -EBADF;
	if (ing->finished) {
		close(fd);
		return -EALREADY;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return connection_add(ing, fd, origin, 0, NULL);
}

void ingest_on_record(ingest_t *ing, ingest_record_fn fn, void *ctx)
{
	ing->on_record = fn;
	ing->on_record_ctx = ctx;
}

int ingest_write_record(ingest_t *ing, const struct fss_record_head *rec)
{
	struct process *p;
	int err;

	if (ing->finished)
		return -EALREADY;
	if (rec->size < sizeof(*rec) || rec->size % 8)
		return -EINVAL;
	p = rec->source < ing->stats.sources ? ing->outs[rec->source].proc : NULL;
	if (p && p->out_next != RESUME_NONE && rec->type != FSS_REC_STEP_SUMMARY) {
		/* a reader must not count it as the sink's next record: a marker
		 * says so, another after it resumes the numbering (at the latest
		 * when the chunk is written) */
		err = write_marker(ing, p, p->out_serial, RESUME_NONE);
		if (!err)
			err = drifting_add(ing, p);
		if (err)
			return err;
	}
	return append_out(ing, rec);
}

/* Re-state output source `i` at the start of a new file: hello, a resume
 * marker (sources of a process), then its strings, live communicators,
 * latest clock anchors and drops. A marker's preamble holds at most
 * UINT16_MAX records: more come after further markers. */
static int restate_source(ingest_t *ing, uint32_t i)
{
	const struct out_source *o = &ing->outs[i];
	const struct restate *r = &o->restate;
	size_t n = restate_count(r), done = 0;
	int err = 0;

	if (r->has_hello)
		err = append_out(ing, r->hello);
	do {
		size_t part = n - done > UINT16_MAX ? UINT16_MAX : n - done;

		if (!err && o->proc && r->has_hello) {
			const struct sink_info *si = sink_find(o->proc, o->proc->out_serial);
			struct fss_rec_sink k;

			record_init(&k, FSS_REC_SINK, sizeof(k), i);
			k.process_id = o->proc->id;
			k.serial = o->proc->out_serial;
			k.kind = si ? si->kind : 0;
			k.preamble = (uint16_t)part;
			k.prev_serial = k.serial;
			k.prev_kind = k.kind;
			k.repeat_first = resume_index(o->proc);
			o->proc->out_next = k.repeat_first;
			err = append_out(ing, &k);
		}
		for (size_t j = 0; j < part && !err; j++)
			err = append_out(ing, restate_at(r, done + j));
		done += part;
	} while (!err && done < n);
	return err;
}

/* Switch to the new file w at path: the current one ends with its markers
 * and is closed, the new one re-states every source. */
static int rotate_now(ingest_t *ing, trace_writer_t *w, char *path)
{
	int err = markers_due(ing);

	if (err) {
		trace_writer_close(w);
		unlink(path);
		free(path);
		return err;
	}
	ing->file_records_before += trace_writer_records(ing->out);
	err = trace_writer_close(ing->out);
	if (!err) {
		struct stat st;

		if (stat(ing->path, &st) == 0)
			ing->file_bytes_before += (uint64_t)st.st_size;
	}
	ing->out = w;
	ing->stats.files_written++;
	free(ing->path);
	ing->path = path;
	if (err) {
		ing->write_error = err;
		return err;
	}
	/* the closed file holds everything appended: ack it */
	ing->on_disk = ing->appended;
	acks_after_write(ing);
	ing->writer_bytes = trace_writer_bytes(w);
	ing->chunk_used = 0;
	for (uint32_t i = 0; i < ing->stats.sources && !err; i++)
		err = restate_source(ing, i);
	return err;
}

/* A rotation asked for inside the record callback happens once the input
 * record being handed over is taken whole (a hello and its sink record stay
 * in one file). */
static int rotate_pending(ingest_t *ing)
{
	trace_writer_t *w = ing->next_out;

	if (!w)
		return 0;
	ing->next_out = NULL;
	return rotate_now(ing, w, ing->next_path);
}

int ingest_rotate(ingest_t *ing, const char *path)
{
	trace_writer_t *w;
	char *copy;
	int err;

	if (ing->finished)
		return -EALREADY;
	if (ing->write_error)
		return ing->write_error;
	if (ing->next_out)
		return -EBUSY; /* one rotation per record */
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	/* open the next file first: a failure leaves the current one going */
	err = trace_writer_open(&w, path, &ing->wopts);
	if (err) {
		free(copy);
		return err;
	}
	if (ing->taking) {
		ing->next_out = w;
		ing->next_path = copy;
		return 0;
	}
	return rotate_now(ing, w, copy);
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
		err = emit(ing, s->source, &rec.head);
		if (err)
			return err;
		ing->stats.exits_written++;
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
			err = connection_end(ing, in, 1);
			if (!err && ing->write_error)
				err = ing->write_error;
			if (err)
				break;
		}
	}
	listeners_close(ing);
	if (ing->write_error && !err)
		err = ing->write_error;
	if (!err)
		err = write_exits(ing);
	if (!err)
		err = markers_due(ing);
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
		input_release_parser(in);
		free(in->origin);
		free(in->peer);
		free(in);
	}
	free(ing->inputs);
	listeners_close(ing);
	free(ing->listeners);
	for (size_t i = 0; i < ing->stats.ndamaged; i++)
		free(ing->damage[i]);
	free(ing->damage);
	free(ing->exits);
	for (uint32_t i = 0; i < ing->stats.sources; i++)
		restate_free(&ing->outs[i].restate);
	free(ing->outs);
	for (size_t i = 0; i < ing->nprocs; i++)
		free(ing->procs[i]);
	free(ing->procs);
	free(ing->dirty);
	free(ing->sources);
	sources_free(ing->layer);
	if (ing->epfd >= 0)
		close(ing->epfd);
	free(ing->path);
	free(ing);
}
