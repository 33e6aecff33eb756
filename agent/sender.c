/*
 * sender.c - the agent's one thread: drains the ring into the sink.
 *
 * Sinks (docs/agent.md):
 *   socket  FSDPSCOPE_SINK (common/wire.h address). The stream is a trace
 *           (trace_writer_open_fd). Writes time out after
 *           FSDPSCOPE_SINK_TIMEOUT_MS (SO_SNDTIMEO): a collector that stops
 *           reading costs the job nothing but the records that pile up in the
 *           ring meanwhile (dropped and counted there).
 *   file    <dir>/fsdpscope-<host>-<pid>.fss, dir being FSDPSCOPE_OUT, else
 *           a private per-user directory ($XDG_RUNTIME_DIR/fsdpscope or
 *           $TMPDIR/fsdpscope-<uid>), never the job's current one; created
 *           as ".partial" (O_EXCL | O_NOFOLLOW, mode 0600) and renamed at
 *           exit. Used when FSDPSCOPE_SINK is unset, when no collector
 *           answers at start, and after the collector went away mid-run;
 *           with FSDPSCOPE_SINK set the collector is tried again every
 *           FSDPSCOPE_RETRY_MS, and the file, sent whole to it, removed. No
 *           file at all: the ring is still drained, every record counted in
 *           sink_dropped.
 *   dormant FSDPSCOPE_DORMANT=1: no file; try the socket every 500 ms; on
 *           connect the state goes ON, when the collector goes away back to
 *           DORMANT.
 * Every new sink starts with the process hello, a sink record, the
 * definitions of all strings and all live communicators (so it stands
 * alone), then what it repeats of the sink before (docs/format.md, "Sinks
 * and resumption"), then the ring. A socket sink keeps each chunk it sent
 * until the collector's ack covers it (bounded: FSDPSCOPE_RETAIN_BYTES), so
 * that a file after a failure repeats what the collector did not confirm.
 * Records that could not be written nor repeated are counted in
 * agent_counters.sink_dropped; drops records go out every second and at the
 * end, then process_end.
 *
 * Producers never wake this thread (that would be a syscall on their hot
 * path): it polls the ring, sleeping 1 to 8 ms while the ring is empty. A
 * stop or flush request (exit, _exit) does wake it, and it wakes the
 * requester when it is done: the exit paths wait for the work, not for a
 * sleep to end (futexes: nothing a fork can leave locked). All
 * signals are blocked here, so a SIGPIPE from a vanished collector (a
 * thread-directed signal) stays with this thread instead of killing the job,
 * and the job's signal handlers never run on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/comms.h"
#include "agent/emit.h"
#include "agent/sender.h"
#include "agent/strings.h"
#include "common/clock.h"
#include "common/ring.h"
#include "common/trace_format.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "common/wire.h"

#define SENDER_STACK_BYTES (256u << 10)
#define SENDER_CONNECT_TIMEOUT_MS 1000
#define SENDER_RETRY_CONNECT_TIMEOUT_MS 100 /* short: the ring fills while the sender waits */
#define SENDER_STALL_RETRY_FACTOR 30	    /* a collector that stalled is retried 30 times less often */
#define SENDER_PROBE_NS 1000000000ull /* a retried connection with no ack is used after 1 s (or FSDPSCOPE_RETRY_MS) */
#define SENDER_BACKOFF_MAX 64	      /* a collector that keeps hanging up is tried at most 64 times less often */
#define SENDER_COPY_MAX_BYTES (256ull << 20) /* a larger file is left for the collector to merge */
#define SENDER_DORMANT_RETRY_NS 500000000ull
#define SENDER_DORMANT_CONNECT_TIMEOUT_MS 250
#define SENDER_FLUSH_EVERY_NS 100000000ull /* a busy ring still goes out 10 times a second */
#define SENDER_DROPS_EVERY_NS 1000000000ull
#define SENDER_BATCH 4096
#define SENDER_IDLE_MAX_MS 8
#define SENDER_ACK_READ 4096
#define SENDER_ACK_EVERY_NS 10000000ull /* look for acks at most every 10 ms: a recv each time */
#define SENDER_ACK_READS 16		/* recv calls per look at most: a flood cannot hold the thread */

enum sender_sink { SINK_NONE = 0, SINK_SOCKET, SINK_FILE };

/* One chunk of the socket sink as it went out (header and payload), kept
 * until an ack covers it. */
struct retained {
	struct retained *next;
	uint64_t seq;	  /* its chunk seq in the stream */
	uint64_t first;	  /* index in the sink of its first record (the hello is 0) */
	uint32_t records; /* records in it */
	uint32_t len;	  /* bytes */
	unsigned char bytes[];
};

struct sender {
	/* Shared with other threads. */
	pthread_t thread;
	_Atomic int running;  /* started, not joined */
	_Atomic int finished; /* the thread is done (or about to return) */
	_Atomic int stop_req;
	_Atomic uint64_t flush_req;
	_Atomic uint64_t flush_done;
	_Atomic uint32_t wake;		 /* futex: bumped by a stop or flush request, cuts the thread's sleep short */
	_Atomic uint32_t progress;	 /* futex: bumped by the thread when it answered a request or finished */
	_Atomic uint64_t retained_bytes; /* sender_retained_bytes() */
	_Atomic uint64_t bad_acks;	 /* sender_bad_acks() */

	/* The sender thread's own. */
	int kind;	   /* enum sender_sink */
	int fd;		   /* the socket, -1 otherwise */
	trace_writer_t *w; /* the sink's writer, NULL when there is none */
	uint64_t pending;  /* records appended since the last chunk went out */
	uint64_t last_flush_ns;
	uint64_t last_drops_ns;
	uint64_t last_connect_ns;
	uint64_t last_ack_read_ns;
	uint64_t retry_wait_ns; /* until the next socket attempt from a file sink */
	unsigned retry_backoff; /* doubles each time a connection ends before its first ack */
	/* A connection made by a retry, not used yet: the file sink goes on
	 * until the collector acks it (or keeps it open SENDER_PROBE_NS), so
	 * that one that refuses the agent at once costs the file nothing. */
	int probe_fd;
	uint64_t probe_since_ns;
	size_t probe_have;
	unsigned char probe_buf[sizeof(struct wire_ack)];
	int socket_disabled; /* the key cannot be loaded: no socket for this process */
	char path[PATH_MAX]; /* the file sink's final name */

	/* Sinks of this process (docs/format.md, "Sinks and resumption"). */
	uint64_t process_id; /* drawn once per process, 0 until then */
	uint32_t serial;     /* of the current sink, or of the last one; 0 before the first */
	int serial_kind;     /* enum fss_sink_kind of sink `serial` */

	/* The socket sink's return channel and retention. */
	struct retained *ret_head, *ret_tail; /* oldest first; contiguous up to records_chunked */
	uint64_t ret_bytes;
	uint64_t chunks_sent, records_chunked; /* chunks written whole, and the records in them */
	uint64_t acked_chunks, acked_records;
	int acks_seen; /* a valid ack came: the collector speaks the return channel */
	int ack_eof;   /* nothing more to read from the collector */
	size_t ack_have;
	unsigned char ack_buf[SENDER_ACK_READ];

	/* A file sent whole to the collector and not yet removed: it goes at the
	 * first ack (the collector speaks the return channel, so a failure
	 * repeats the copy from the retention) if the retention still holds all
	 * of it, else once an ack covers it. */
	char copied_path[PATH_MAX];
	uint64_t copied_until;	     /* socket record index just past the copy */
	uint64_t copied_unconfirmed; /* agent_counters.unconfirmed when the copy began */
};

static struct sender snd = {.fd = -1, .probe_fd = -1};

/* A fork child's copies of its parents' writers: never used again, kept
 * reachable so that a leak checker in the child does not report them. */
static trace_writer_t *sender_parents_writers[8] __attribute__((used));
static unsigned sender_nparents;

/* ---- writing ---------------------------------------------------------------- */

static void sender_sink_failed(int err, const void *record);

/* Append one record to the sink; on a write error the sink is given up
 * (and replaced, see sender_sink_failed). */
static int sender_append(const void *record)
{
	uint64_t before;
	int err;

	if (!snd.w)
		return -EPIPE;
	before = trace_writer_bytes(snd.w);
	err = trace_writer_append(snd.w, record);
	if (err) {
		sender_sink_failed(err, record);
		return err;
	}
	/* A full chunk went out before this record: only it is pending now. */
	snd.pending = trace_writer_bytes(snd.w) != before ? 1 : snd.pending + 1;
	return 0;
}

static void sender_flush_writer(void)
{
	int err;

	snd.last_flush_ns = clock_mono_ns();
	if (!snd.w || snd.pending == 0)
		return;
	err = trace_writer_flush(snd.w);
	if (err)
		sender_sink_failed(err, NULL);
	else
		snd.pending = 0;
}

static void sender_write_anchor(void)
{
	struct fss_rec_clock_anchor a;

	memset(&a, 0, sizeof(a));
	a.head.type = FSS_REC_CLOCK_ANCHOR;
	a.head.size = sizeof(a);
	a.domain = FSS_CLOCK_REALTIME;
	clock_anchor(&a.mono_ns, &a.other_ns);
	(void)sender_append(&a);
}

/* ring_dropped_extra: records still in the ring that will never be written
 * (the final drops record). */
static void sender_write_drops(ring_t *ring, uint64_t ring_dropped_extra)
{
	struct fss_rec_drops d;

	memset(&d, 0, sizeof(d));
	d.head.type = FSS_REC_DROPS;
	d.head.size = sizeof(d);
	d.at_ns = clock_mono_ns();
	d.ring_dropped = ring_drops(ring) + ring_dropped_extra;
	d.sink_dropped = atomic_load(&agent_counters.sink_dropped);
	d.cupti_dropped = atomic_load(&agent_counters.cupti_dropped);
	d.records_written = ring_pushed(ring);
	d.nvtx_dropped = atomic_load(&agent_counters.nvtx_dropped);
	snd.last_drops_ns = d.at_ns;
	(void)sender_append(&d);
}

/* ---- retention and acks --------------------------------------------------------- */

static void sender_retained_free_all(void)
{
	struct retained *r = snd.ret_head;

	while (r) {
		struct retained *next = r->next;
		free(r);
		r = next;
	}
	snd.ret_head = snd.ret_tail = NULL;
	snd.ret_bytes = 0;
	atomic_store(&snd.retained_bytes, 0);
}

static void sender_retained_pop(void)
{
	struct retained *r = snd.ret_head;

	snd.ret_head = r->next;
	if (!snd.ret_head)
		snd.ret_tail = NULL;
	snd.ret_bytes -= r->len;
	free(r);
}

/* Forget the return channel's state: a new connection (or none). */
static void sender_acks_reset(void)
{
	sender_retained_free_all();
	snd.chunks_sent = snd.records_chunked = 0;
	snd.acked_chunks = snd.acked_records = 0;
	snd.acks_seen = 0;
	snd.ack_eof = 0;
	snd.ack_have = 0;
}

/* trace_writer's on_chunk for the socket sink: keep a copy of the chunk.
 * A full retention lets the oldest chunks go unconfirmed (counted); one that
 * cannot keep this chunk lets every older one go too, so that what it holds
 * always runs without a hole up to the last chunk sent. */
static void sender_on_chunk(void *ctx, uint64_t seq, uint32_t records, const void *bytes, size_t len)
{
	uint64_t cap = agent_config.retain_bytes;
	struct retained *r = NULL;

	(void)ctx;
	if (agent_config.dormant)
		goto count; /* a dormant agent repeats nothing: only the count, for the acks */
	if (len <= cap)
		r = malloc(sizeof(*r) + len);
	if (!r) {
		for (struct retained *o = snd.ret_head; o; o = o->next)
			atomic_fetch_add(&agent_counters.unconfirmed, o->records);
		atomic_fetch_add(&agent_counters.unconfirmed, records);
		sender_retained_free_all();
	} else {
		while (snd.ret_head && snd.ret_bytes + len > cap) {
			atomic_fetch_add(&agent_counters.unconfirmed, snd.ret_head->records);
			sender_retained_pop();
		}
		r->next = NULL;
		r->seq = seq;
		r->first = snd.records_chunked;
		r->records = records;
		r->len = (uint32_t)len;
		memcpy(r->bytes, bytes, len);
		if (snd.ret_tail)
			snd.ret_tail->next = r;
		else
			snd.ret_head = r;
		snd.ret_tail = r;
		snd.ret_bytes += len;
	}
count:
	snd.chunks_sent = seq + 1;
	snd.records_chunked += records;
	atomic_store(&snd.retained_bytes, snd.ret_bytes);
}

/* One ack: the first a->chunks chunks (a->records records) are in the
 * collector's trace. One that claims more than was sent, goes backwards or
 * does not meet a chunk boundary is ignored and counted. */
static void sender_take_ack(const struct wire_ack *a)
{
	uint64_t boundary = UINT64_MAX; /* records before chunk a->chunks, when known */

	if (a->reserved != 0 || a->chunks > snd.chunks_sent || a->records > snd.records_chunked ||
	    a->chunks < snd.acked_chunks || a->records < snd.acked_records)
		goto bad;
	if (a->chunks == snd.chunks_sent)
		boundary = snd.records_chunked;
	for (struct retained *r = snd.ret_head; r && boundary == UINT64_MAX; r = r->next)
		if (r->seq == a->chunks)
			boundary = r->first;
	if (boundary != UINT64_MAX && boundary != a->records)
		goto bad;
	snd.acks_seen = 1;
	snd.retry_backoff = 1;
	snd.acked_chunks = a->chunks;
	snd.acked_records = a->records;
	while (snd.ret_head && snd.ret_head->seq < a->chunks)
		sender_retained_pop();
	atomic_store(&snd.retained_bytes, snd.ret_bytes);
	if (snd.copied_path[0] && (snd.acked_records >= snd.copied_until ||
				   atomic_load(&agent_counters.unconfirmed) == snd.copied_unconfirmed)) {
		if (unlink(snd.copied_path) == 0)
			agent_debug("removed %s: the collector has it, or its copy is retained", snd.copied_path);
		snd.copied_path[0] = '\0';
	}
	return;
bad:
	atomic_fetch_add(&snd.bad_acks, 1);
	agent_debug("ignored an ack for %llu chunks / %llu records (sent %llu / %llu, acked %llu / %llu)",
		    (unsigned long long)a->chunks, (unsigned long long)a->records, (unsigned long long)snd.chunks_sent,
		    (unsigned long long)snd.records_chunked, (unsigned long long)snd.acked_chunks,
		    (unsigned long long)snd.acked_records);
}

/* Read whatever acks the collector sent, never waiting. Bytes that are not
 * an ack are skipped up to the next ack magic and counted as one bad ack. */
static void sender_read_acks(void)
{
	static const uint32_t magic = WIRE_ACK_MAGIC;

	if (snd.kind != SINK_SOCKET || snd.fd < 0 || snd.ack_eof)
		return;
	for (int reads = 0; reads < SENDER_ACK_READS; reads++) {
		ssize_t n = recv(snd.fd, snd.ack_buf + snd.ack_have, sizeof(snd.ack_buf) - snd.ack_have, MSG_DONTWAIT);
		size_t at = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			snd.ack_eof = 1; /* the writes will tell whether the collector is gone */
			return;
		}
		if (n < 0)
			return;
		snd.ack_have += (size_t)n;
		while (snd.ack_have - at >= sizeof(struct wire_ack)) {
			struct wire_ack a;

			memcpy(&a, snd.ack_buf + at, sizeof(a));
			if (a.magic == WIRE_ACK_MAGIC) {
				sender_take_ack(&a);
				at += sizeof(a);
				continue;
			}
			atomic_fetch_add(&snd.bad_acks, 1);
			agent_debug("%zu bytes on the return channel that are not an ack: skipped", snd.ack_have - at);
			void *next = memmem(snd.ack_buf + at + 1, snd.ack_have - at - 1, &magic, sizeof(magic));
			at = next ? (size_t)((unsigned char *)next - snd.ack_buf)
				  : snd.ack_have - (sizeof(magic) - 1); /* a magic may start in the last bytes */
		}
		memmove(snd.ack_buf, snd.ack_buf + at, snd.ack_have - at);
		snd.ack_have -= at;
	}
}

/* ---- opening sinks ------------------------------------------------------------ */

/* What a new sink repeats of the one before (docs/format.md): records
 * first .. first + count - 1 of sink prev_serial, taken from the retained
 * chunks and the dead writer's unsent chunk and record (socket -> file), or
 * from a closed file read back (file -> socket). */
struct sender_repeat {
	uint32_t prev_serial;
	uint16_t prev_kind;
	uint64_t first, count;
	struct retained *chunks; /* records of index < first in them are skipped */
	const void *unsent;	 /* the dead writer's unsent records */
	size_t unsent_len;
	const void *record; /* the record whose append failed, or NULL */
	const char *path;   /* the file to send */
	uint64_t written;   /* records repeated so far */
};

static void sender_close(void)
{
	if (snd.w) {
		int err = trace_writer_close(snd.w); /* a file: flushed and renamed */
		if (err)
			agent_debug("closing the sink: %s", strerror(-err));
	}
	if (snd.kind == SINK_SOCKET)
		agent_debug("socket sink %u closed: %llu chunks sent, %llu acked, %llu bad acks, %llu records "
			    "let go unconfirmed",
			    snd.serial, (unsigned long long)snd.chunks_sent, (unsigned long long)snd.acked_chunks,
			    (unsigned long long)atomic_load(&snd.bad_acks),
			    (unsigned long long)atomic_load(&agent_counters.unconfirmed));
	snd.w = NULL;
	if (snd.fd >= 0)
		close(snd.fd);
	snd.fd = -1;
	snd.kind = SINK_NONE;
	snd.pending = 0;
	sender_acks_reset();
}

/* The replay a new sink starts with, gathered first so that the sink record
 * can say how many records it is. */
struct sender_preamble {
	unsigned char *buf;
	size_t len, cap;
	uint32_t records;
	int failed;
};

static void sender_preamble_add(void *ctx, const void *record)
{
	struct sender_preamble *p = ctx;
	const struct fss_record_head *head = record;

	if (p->failed)
		return;
	if (p->len + head->size > p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16384;
		unsigned char *b = realloc(p->buf, cap);
		if (!b) {
			p->failed = 1;
			return;
		}
		p->buf = b;
		p->cap = cap;
	}
	memcpy(p->buf + p->len, record, head->size);
	p->len += head->size;
	p->records++;
}

/* Append the records of a chunk payload, those of index >= from only
 * (index counted from first). Stops when the sink is replaced. */
static void sender_append_payload(const unsigned char *p, size_t len, uint64_t index, uint64_t from,
				  struct sender_repeat *rep, uint32_t serial)
{
	size_t at = 0;

	while (at + sizeof(struct fss_record_head) <= len && snd.serial == serial) {
		const struct fss_record_head *head = (const void *)(p + at);
		if (head->size < sizeof(*head) || at + head->size > len)
			break;
		if (index >= from && sender_append(head) == 0)
			rep->written++;
		index++;
		at += head->size;
	}
}

static int sender_copy_record(void *ctx, const struct fss_record_head *rec)
{
	struct sender_repeat *rep = ctx;
	uint32_t serial = snd.serial;

	if (rec->type == FSS_REC_TRACE_END)
		return 0; /* the file's own end marker, not one of its records */
	if (rep->written == rep->count)
		return 1;
	if (sender_append(rec) != 0 || snd.serial != serial)
		return 1; /* the socket failed meanwhile: the file stays */
	rep->written++;
	return 0;
}

static void sender_write_repeat(struct sender_repeat *rep)
{
	uint32_t serial = snd.serial;

	if (rep->path) {
		struct trace_parser_ops ops = {.on_record = sender_copy_record};
		(void)trace_read(rep->path, &ops, rep, NULL);
		return;
	}
	for (struct retained *r = rep->chunks; r && snd.serial == serial; r = r->next)
		sender_append_payload(r->bytes + sizeof(struct fss_chunk_header),
				      r->len - sizeof(struct fss_chunk_header), r->first, rep->first, rep, serial);
	if (rep->unsent && snd.serial == serial)
		sender_append_payload(rep->unsent, rep->unsent_len, 0, 0, rep, serial);
	if (rep->record && snd.serial == serial && sender_append(rep->record) == 0)
		rep->written++;
}

/* A new sink: hello, the sink record, then every string and live
 * communicator and a clock anchor (so it stands alone whatever came
 * before), then what it repeats of the sink before. */
static void sender_begin(const struct fss_rec_process_hello *hello, struct sender_repeat *rep)
{
	struct sender_preamble pre = {0};
	struct fss_rec_sink sink;
	struct fss_rec_clock_anchor a;

	snd.pending = 0;
	snd.last_flush_ns = snd.last_drops_ns = clock_mono_ns();
	agent_strings_replay(sender_preamble_add, &pre);
	agent_comms_replay(sender_preamble_add, &pre);
	memset(&a, 0, sizeof(a));
	a.head.type = FSS_REC_CLOCK_ANCHOR;
	a.head.size = sizeof(a);
	a.domain = FSS_CLOCK_REALTIME;
	clock_anchor(&a.mono_ns, &a.other_ns);
	sender_preamble_add(&pre, &a);
	if (pre.failed || pre.records > UINT16_MAX) {
		agent_debug("no memory for the replay of %u records: this sink starts without it", pre.records);
		pre.len = 0;
		pre.records = 0;
	}
	memset(&sink, 0, sizeof(sink));
	sink.head.type = FSS_REC_SINK;
	sink.head.size = sizeof(sink);
	sink.process_id = snd.process_id;
	sink.serial = ++snd.serial;
	sink.kind = snd.kind == SINK_SOCKET ? FSS_SINK_SOCKET : FSS_SINK_FILE;
	sink.preamble = (uint16_t)pre.records;
	if (rep) {
		sink.prev_serial = rep->prev_serial;
		sink.prev_kind = rep->prev_kind;
		sink.repeat_first = rep->first;
		sink.repeat_count = rep->count;
	}
	snd.serial_kind = sink.kind;
	uint32_t serial = snd.serial;
	if (sender_append(hello) == 0 && sender_append(&sink) == 0) {
		for (size_t at = 0; at < pre.len && snd.serial == serial;) {
			const struct fss_record_head *head = (const void *)(pre.buf + at);
			(void)sender_append(head);
			at += head->size;
		}
		if (rep && rep->count && snd.serial == serial)
			sender_write_repeat(rep);
		if (snd.serial == serial)
			sender_flush_writer();
	}
	free(pre.buf);
}

/*
 * Connect a socket to FSDPSCOPE_SINK: bounded writes, the key hello first
 * on a tcp address with a key. 0 with *fd, or -errno; a key that cannot be
 * loaded turns the socket sink off for the process.
 */
static int sender_connect_fd(int timeout_ms, int *out)
{
	struct wire_address addr;
	struct timeval tv = {.tv_sec = agent_config.sink_timeout_ms / 1000,
			     .tv_usec = (agent_config.sink_timeout_ms % 1000) * 1000};
	unsigned char key[WIRE_KEY_BYTES], hello[WIRE_KEY_HELLO_BYTES];
	int fd, err, keyed = 0;

	*out = -1;
	if (snd.socket_disabled)
		return -EPERM;
	err = wire_address_parse(agent_config.sink, &addr);
	if (err)
		return err;
	if (addr.key_path[0]) {
		err = wire_key_load(addr.key_path, key);
		if (err) {
			snd.socket_disabled = 1;
			agent_debug("the key %s of %s cannot be used (%s): no socket sink for this process",
				    addr.key_path, agent_config.sink, strerror(-err));
			return err;
		}
		keyed = 1;
	}
	err = wire_connect(&addr, timeout_ms, &fd);
	if (err)
		return err;
	/* Bounded writes: a stalled collector fails the write, never the job. */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		err = -errno;
		goto fail;
	}
	if (keyed) {
		size_t at = 0;

		wire_key_hello(key, hello);
		while (at < sizeof(hello)) {
			ssize_t n = send(fd, hello + at, sizeof(hello) - at, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				err = n < 0 ? -errno : -EPIPE;
				goto fail;
			}
			at += (size_t)n;
		}
	}
	*out = fd;
	return 0;
fail:
	close(fd);
	return err;
}

/* The socket sink's writer on a connected fd (owned from here on). */
static int sender_open_socket(int fd, struct fss_rec_process_hello *hello)
{
	struct trace_writer_options opts = {0};
	int err;

	agent_hello_build(hello);
	opts.features = hello->features;
	opts.on_chunk = sender_on_chunk;
	sender_acks_reset();
	err = trace_writer_open_fd(&snd.w, fd, &opts);
	if (err) {
		close(fd);
		return err;
	}
	snd.fd = fd;
	snd.kind = SINK_SOCKET;
	return 0;
}

static int sender_connect(int timeout_ms, struct fss_rec_process_hello *hello)
{
	int fd, err = sender_connect_fd(timeout_ms, &fd);

	return err ? err : sender_open_socket(fd, hello);
}

/* ---- where per-process files go --------------------------------------------------- */

#define SENDER_NAME_TRIES 16 /* fsdpscope-<host>-<pid>.fss, then -1 ... -15 when a name is taken */

/*
 * A directory only this user can write into: made 0700 when missing (with
 * create), not a symlink, owned by the effective user, nothing granted to
 * group or others. 0, or -ENOTDIR / -EPERM (someone else's, or too open),
 * or the error of mkdir / lstat.
 */
static int sender_private_dir(const char *path, int create)
{
	struct stat st;

	if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (st.st_uid != geteuid() || (st.st_mode & 077))
		return -EPERM;
	return 0;
}

/* The default directory when FSDPSCOPE_OUT is not set (docs/agent.md):
 * $XDG_RUNTIME_DIR/fsdpscope when that runtime directory is the user's
 * own, else $TMPDIR/fsdpscope-<uid> (/tmp without TMPDIR), each checked by
 * sender_private_dir. Never the job's current directory. */
static int sender_default_dir(char *out, size_t cap)
{
	const char *runtime = agent_config.runtime_dir;
	const char *tmp = agent_config.tmp_dir[0] ? agent_config.tmp_dir : "/tmp";
	int n;

	if (runtime[0] && sender_private_dir(runtime, 0) == 0) {
		n = snprintf(out, cap, "%s/fsdpscope", runtime);
		if (n > 0 && (size_t)n < cap && sender_private_dir(out, 1) == 0)
			return 0;
	}
	n = snprintf(out, cap, "%s/fsdpscope-%u", tmp, (unsigned)geteuid());
	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	return sender_private_dir(out, 1);
}

/* FSDPSCOPE_OUT: the user's choice, so it may be shared (a group
 * directory): made 0700 when missing; it must be a writable directory. */
static int sender_out_dir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (stat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (access(dir, W_OK | X_OK) < 0)
		return -errno;
	return 0;
}

/* Create this process's file in dir. Never opens an existing name: the
 * writer creates "<name>.partial" with O_EXCL | O_NOFOLLOW, and a name
 * whose final file exists (a finished trace of an earlier process with the
 * same pid) is passed over for the next suffix. */
static int sender_create_in(const char *dir, const char *host, const struct trace_writer_options *opts)
{
	struct stat st;
	int err = -EEXIST;

	for (int attempt = 0; attempt < SENDER_NAME_TRIES; attempt++) {
		int n = attempt == 0
			    ? snprintf(snd.path, sizeof(snd.path), "%s/fsdpscope-%s-%d.fss", dir, host, (int)getpid())
			    : snprintf(snd.path, sizeof(snd.path), "%s/fsdpscope-%s-%d-%d.fss", dir, host,
				       (int)getpid(), attempt);
		if (n < 0 || (size_t)n >= sizeof(snd.path))
			return -ENAMETOOLONG;
		if (lstat(snd.path, &st) == 0)
			continue;
		err = trace_writer_open(&snd.w, snd.path, opts);
		if (err != -EEXIST)
			return err;
	}
	return err;
}

/* The file sink: in FSDPSCOPE_OUT when set and usable, else in the default
 * directory. When no file can be made the caller goes on without a sink:
 * every record is counted in sink_dropped, and one line on stderr says so. */
static int sender_open_file(struct fss_rec_process_hello *hello)
{
	const char *out = agent_config.out_dir;
	char host[256], dir[PATH_MAX];
	struct trace_writer_options opts = {0};
	int out_err = 0, err;

	if (gethostname(host, sizeof(host)) != 0)
		strcpy(host, "host");
	host[sizeof(host) - 1] = '\0';
	for (char *p = host; *p; p++)
		if (*p == '/')
			*p = '_';
	agent_hello_build(hello);
	opts.features = hello->features;
	opts.exclusive = 1;
	if (out[0]) {
		out_err = sender_out_dir(out);
		if (!out_err)
			out_err = sender_create_in(out, host, &opts);
		if (!out_err)
			goto opened;
	}
	err = sender_default_dir(dir, sizeof(dir));
	if (!err)
		err = sender_create_in(dir, host, &opts);
	if (err) {
		if (out[0])
			agent_warn(
			    "no trace file: FSDPSCOPE_OUT=%s: %s; %s: %s; the records of this process are dropped", out,
			    strerror(-out_err), dir, strerror(-err));
		else
			agent_warn("no trace file: %s: %s; the records of this process are dropped (set FSDPSCOPE_OUT "
				   "to a writable directory)",
				   dir, strerror(-err));
		return err;
	}
	if (out[0])
		agent_warn("cannot write into FSDPSCOPE_OUT=%s (%s): writing %s instead", out, strerror(-out_err),
			   snd.path);
opened:
	snd.kind = SINK_FILE;
	agent_debug("writing %s", snd.path);
	return 0;
}

/* Non-dormant start: the collector if it answers, else a file. */
static void sender_open_first(void)
{
	struct fss_rec_process_hello hello;
	int err;

	if (agent_config.sink[0]) {
		err = sender_connect(SENDER_CONNECT_TIMEOUT_MS, &hello);
		if (err == 0) {
			agent_debug("connected to %s", agent_config.sink);
			sender_begin(&hello, NULL);
			return;
		}
		agent_debug("no collector at %s (%s): writing a file instead", agent_config.sink, strerror(-err));
	}
	if (sender_open_file(&hello) == 0)
		sender_begin(&hello, NULL);
	/* else no sink: the loop drains the ring and counts every record lost */
}

/* Dormant: one connection attempt; on success the agent starts recording. */
static void sender_try_dormant(void)
{
	struct fss_rec_process_hello hello;
	struct sender_repeat rep = {.prev_serial = snd.serial, .prev_kind = (uint16_t)snd.serial_kind};
	int expected = AGENT_DORMANT;

	snd.last_connect_ns = clock_mono_ns();
	if (!agent_config.sink[0])
		return;
	if (sender_connect(SENDER_DORMANT_CONNECT_TIMEOUT_MS, &hello) != 0)
		return;
	/* ON before the replay: a string or communicator defined from here on
	 * goes into the ring, one defined before is in the replay. */
	if (!atomic_compare_exchange_strong(&agent_state_now, &expected, AGENT_ON)) {
		sender_close();
		return;
	}
	agent_debug("collector at %s: recording", agent_config.sink);
	agent_cupti_maybe_start();
	agent_hello_build(&hello); /* after ON: host and command strings are emitted */
	sender_begin(&hello, &rep);
}

static void sender_retained_free(struct retained *r)
{
	while (r) {
		struct retained *next = r->next;
		free(r);
		r = next;
	}
}

static uint64_t sender_retry_ns(void)
{
	return (uint64_t)agent_config.retry_ms * 1000000ull;
}

/*
 * The sink failed. A socket (not dormant) is replaced by a file that
 * repeats what the collector may not have: the retained chunks after the
 * last ack, the chunk whose write failed and the record that could not be
 * appended. A collector that never acknowledged anything on this
 * connection is taken for one without a return channel (format 1.1):
 * nothing is repeated, and the failed chunk is lost, as before acks. What
 * cannot be repeated is counted in sink_dropped.
 */
static void sender_sink_failed(int err, const void *record)
{
	struct fss_rec_process_hello hello;
	struct sender_repeat rep = {0};
	trace_writer_t *w = snd.w;
	struct retained *chunks;
	int kind = snd.kind;
	uint32_t unsent_records = 0;
	uint64_t lost = 0;

	if (w)
		(void)trace_writer_unsent(w, &rep.unsent, &rep.unsent_len, &unsent_records);
	uint64_t failed = unsent_records + (record ? 1u : 0u);
	snd.w = NULL; /* no recursion into a dead writer */
	if (snd.fd >= 0)
		close(snd.fd);
	snd.fd = -1;
	snd.kind = SINK_NONE;
	snd.pending = 0;
	if (kind != SINK_SOCKET || agent_config.dormant) {
		atomic_fetch_add(&agent_counters.sink_dropped, failed);
		agent_debug("%s sink failed: %s (%llu records lost)", kind == SINK_SOCKET ? "socket" : "file",
			    strerror(-err), (unsigned long long)failed);
		if (w)
			(void)trace_writer_close(w);
		sender_acks_reset();
		if (kind != SINK_SOCKET) {
			agent_disable("the trace file failed");
			return;
		}
		int expected = AGENT_ON;
		atomic_compare_exchange_strong(&agent_state_now, &expected, AGENT_DORMANT);
		return;
	}
	rep.prev_serial = snd.serial;
	rep.prev_kind = FSS_SINK_SOCKET;
	/* A connection that began by sending a file still wholly retained
	 * repeats it even before any ack: the file it came from then goes, and
	 * a collector that keeps hanging up leaves one file, not one per try. */
	int copy_retained = snd.copied_path[0] && atomic_load(&agent_counters.unconfirmed) == snd.copied_unconfirmed;
	char copied[PATH_MAX];
	memcpy(copied, snd.copied_path, sizeof(copied));
	if (snd.acks_seen || copy_retained) {
		rep.first = snd.ret_head ? snd.ret_head->first : snd.records_chunked;
		lost = rep.first - snd.acked_records; /* let go from a full retention: gone now */
		rep.chunks = snd.ret_head;
		rep.record = record;
		rep.count = snd.records_chunked - rep.first + failed;
	} else {
		/* As before the return channel: the failed chunk is lost, counted. */
		rep.unsent = NULL;
		lost = failed;
	}
	chunks = snd.ret_head; /* the new sink must not touch them while they are repeated */
	snd.ret_head = snd.ret_tail = NULL;
	snd.ret_bytes = 0;
	atomic_store(&snd.retained_bytes, 0);
	snd.copied_path[0] = '\0';
	snd.last_connect_ns = clock_mono_ns();
	/* A collector that stalled is alive but stuck: retrying it every second
	 * would cost the send timeout each time. One that hangs up before it
	 * acknowledges anything (it refuses us, or dies at once) is tried less
	 * and less often. */
	if (!snd.acks_seen)
		snd.retry_backoff =
		    snd.retry_backoff * 2 > SENDER_BACKOFF_MAX ? SENDER_BACKOFF_MAX : snd.retry_backoff * 2;
	unsigned factor = snd.retry_backoff;
	if ((err == -EAGAIN || err == -EWOULDBLOCK || err == -ETIMEDOUT) && factor < SENDER_STALL_RETRY_FACTOR)
		factor = SENDER_STALL_RETRY_FACTOR;
	snd.retry_wait_ns = sender_retry_ns() * factor;
	agent_debug("socket sink %u failed: %s (acked %llu records; repeating %llu from %llu)", snd.serial,
		    strerror(-err), (unsigned long long)snd.acked_records, (unsigned long long)rep.count,
		    (unsigned long long)rep.first);
	if (sender_open_file(&hello) == 0) {
		uint32_t serial = snd.serial + 1;
		sender_begin(&hello, &rep);
		lost += rep.count - rep.written;
		if (copied[0] && copy_retained && rep.written == rep.count && snd.serial == serial &&
		    unlink(copied) == 0)
			agent_debug("removed %s: its records are repeated in %s", copied, snd.path);
	} else {
		lost += rep.count;
	}
	if (copied[0] && access(copied, F_OK) == 0)
		agent_debug("%s stays for the collector to merge", copied);
	sender_retained_free(chunks);
	(void)trace_writer_close(w); /* frees the dead writer and the unsent bytes */
	snd.chunks_sent = snd.records_chunked = snd.acked_chunks = snd.acked_records = 0;
	snd.acks_seen = 0;
	if (lost) {
		atomic_fetch_add(&agent_counters.sink_dropped, lost);
		agent_debug("%llu records of socket sink %u lost", (unsigned long long)lost, rep.prev_serial);
	}
}

/*
 * The probed connection becomes the sink: the file is closed, sent whole
 * as the new socket sink's repeat (read back through the trace reader),
 * and removed once the collector acknowledged anything (at once when
 * `acked`, else at its first ack, sender_take_ack); a file
 * over SENDER_COPY_MAX_BYTES, or one that cannot be closed cleanly, stays
 * where it is for the collector to merge, and the socket starts afresh.
 */
static void sender_switch_to_socket(int fd, int acked)
{
	struct fss_rec_process_hello hello;
	struct sender_repeat rep = {0};
	char path[PATH_MAX];
	int err, copy = 0;
	uint64_t unconfirmed;

	snd.retry_wait_ns = sender_retry_ns();
	agent_debug("collector at %s again%s", agent_config.sink, acked ? " (it acknowledges)" : "");
	if (snd.kind == SINK_FILE) {
		const void *unsent;
		size_t unsent_len;
		uint32_t unsent_records;
		trace_writer_t *w = snd.w;

		(void)trace_writer_unsent(w, &unsent, &unsent_len, &unsent_records);
		uint64_t bytes = trace_writer_bytes(w) + unsent_len;
		rep.prev_serial = snd.serial;
		rep.prev_kind = FSS_SINK_FILE;
		rep.count = trace_writer_records(w);
		memcpy(path, snd.path, sizeof(path));
		snd.w = NULL;
		snd.kind = SINK_NONE;
		snd.pending = 0;
		err = trace_writer_close(w);
		copy = !err && bytes <= SENDER_COPY_MAX_BYTES;
		if (!copy)
			agent_debug("%s stays for the collector to merge (%s)", path,
				    err ? strerror(-err) : "too large to send");
		else
			rep.path = path;
	}
	if (sender_open_socket(fd, &hello) != 0) {
		/* No writer for the socket (no memory): a new file continues the
		 * old one, which stays. */
		rep.path = NULL;
		rep.count = 0;
		if (sender_open_file(&hello) == 0)
			sender_begin(&hello, &rep);
		return;
	}
	snd.acks_seen = acked; /* its ack of nothing, read while probing */
	if (!copy) {
		sender_begin(&hello, NULL);
		return;
	}
	unconfirmed = atomic_load(&agent_counters.unconfirmed);
	uint32_t serial = snd.serial + 1;
	sender_begin(&hello, &rep);
	if (snd.kind != SINK_SOCKET || snd.serial != serial || rep.written != rep.count) {
		agent_debug("%s stays: sent %llu of its %llu records", path, (unsigned long long)rep.written,
			    (unsigned long long)rep.count);
		return;
	}
	if (snd.acks_seen && atomic_load(&agent_counters.unconfirmed) == unconfirmed) {
		/* All of it retained, and a failure repeats it. */
		if (unlink(path) == 0)
			agent_debug("sent and removed %s (%llu records)", path, (unsigned long long)rep.count);
		return;
	}
	/* Removed at the first ack (sender_take_ack), or once an ack covers
	 * it when the retention could not hold it all. */
	agent_debug("sent %s (%llu records): removed once the collector acknowledges", path,
		    (unsigned long long)rep.count);
	memcpy(snd.copied_path, path, sizeof(snd.copied_path));
	snd.copied_until = trace_writer_records(snd.w);
	snd.copied_unconfirmed = unconfirmed;
}

static void sender_probe_close(void)
{
	if (snd.probe_fd >= 0)
		close(snd.probe_fd);
	snd.probe_fd = -1;
	snd.probe_have = 0;
}

/* One short connection attempt; a connection made is probed first. */
static void sender_try_reconnect(void)
{
	int fd;

	snd.last_connect_ns = clock_mono_ns();
	if (sender_connect_fd(SENDER_RETRY_CONNECT_TIMEOUT_MS, &fd) != 0)
		return;
	snd.probe_fd = fd;
	snd.probe_since_ns = snd.last_connect_ns;
	snd.probe_have = 0;
}

/*
 * A retried connection before it is used: an ack of nothing (a collector
 * that acknowledges sends one when it accepts) makes it the sink at once;
 * a connection still open and silent after SENDER_PROBE_NS (or
 * FSDPSCOPE_RETRY_MS, if shorter) is used too (a collector without a
 * return channel); one that the collector closes (it refused the agent) is
 * dropped, the file goes on, and the next try waits twice as long.
 */
static void sender_probe(void)
{
	uint64_t wait = sender_retry_ns() < SENDER_PROBE_NS ? sender_retry_ns() : SENDER_PROBE_NS;

	for (;;) {
		ssize_t n = recv(snd.probe_fd, snd.probe_buf + snd.probe_have, sizeof(snd.probe_buf) - snd.probe_have,
				 MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			agent_debug("the collector at %s hung up before acknowledging: the file goes on",
				    agent_config.sink);
			sender_probe_close();
			snd.last_connect_ns = clock_mono_ns();
			snd.retry_backoff =
			    snd.retry_backoff * 2 > SENDER_BACKOFF_MAX ? SENDER_BACKOFF_MAX : snd.retry_backoff * 2;
			snd.retry_wait_ns = sender_retry_ns() * snd.retry_backoff;
			return;
		}
		if (n < 0)
			break;
		snd.probe_have += (size_t)n;
		if (snd.probe_have < sizeof(snd.probe_buf))
			continue;
		struct wire_ack a;
		memcpy(&a, snd.probe_buf, sizeof(a));
		snd.probe_have = 0;
		if (a.magic == WIRE_ACK_MAGIC && a.reserved == 0 && a.chunks == 0 && a.records == 0) {
			int fd = snd.probe_fd;
			snd.probe_fd = -1;
			snd.retry_backoff = 1;
			sender_switch_to_socket(fd, 1);
			return;
		}
		atomic_fetch_add(&snd.bad_acks, 1);
		agent_debug("ignored %zu bytes from the collector before its stream began", sizeof(a));
	}
	if (clock_mono_ns() - snd.probe_since_ns >= wait) {
		int fd = snd.probe_fd;
		snd.probe_fd = -1;
		snd.probe_have = 0;
		sender_switch_to_socket(fd, 0);
	}
}

/* ---- the thread ------------------------------------------------------------------ */

/* Pop up to max records into the sink (or count them lost when there is
 * none). Returns how many were popped. */
static size_t sender_drain(ring_t *ring, size_t max)
{
	_Alignas(8) unsigned char buf[FSS_RECORD_MAX_BYTES];
	const struct fss_record_head *head = (const void *)buf;
	size_t n = 0, len;

	while (n < max) {
		int r = ring_pop(ring, buf, sizeof(buf), &len);
		if (r <= 0)
			break;
		n++;
		if (!snd.w || len < sizeof(*head) || head->size != len || len % 8) {
			atomic_fetch_add_explicit(&agent_counters.sink_dropped, 1, memory_order_relaxed);
			continue;
		}
		(void)sender_append(buf);
	}
	return n;
}

/* Sleep up to ms while *word still holds seen; a futex wake (or a change
 * made before the call) ends it early. */
static void sender_futex_wait(_Atomic uint32_t *word, uint32_t seen, unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

static void sender_futex_bump(_Atomic uint32_t *word)
{
	atomic_fetch_add(word, 1);
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static void sender_finish(ring_t *ring)
{
	struct fss_rec_process_end end;

	sender_probe_close();
	if (!snd.w) {
		sender_drain(ring, ring_capacity(ring)); /* counted lost */
		sender_close();
		return;
	}
	sender_drain(ring, ring_capacity(ring));
	/* Whatever a producer still pushes now will not be written. */
	uint64_t stuck = ring_pushed(ring) - ring_popped(ring);
	sender_write_anchor();
	sender_write_drops(ring, stuck);
	memset(&end, 0, sizeof(end));
	end.head.type = FSS_REC_PROCESS_END;
	end.head.size = sizeof(end);
	end.at_ns = clock_mono_ns();
	end.collectives = atomic_load(&agent_counters.collectives);
	end.exit_code = atomic_load(&agent_exit_status); /* -1 when not left through exit() */
	(void)sender_append(&end);
	sender_flush_writer();
	if (snd.kind == SINK_FILE)
		agent_debug("wrote %s", snd.path);
	sender_close();
}

/* The process's id for its sinks: random, so that a collector can tell
 * two processes apart whatever their pids and hosts. */
static void sender_draw_process_id(void)
{
	uint64_t id = 0;

	while (snd.process_id == 0) {
		if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id)) {
			/* No entropy yet (early boot): clock and pid, mixed. */
			id = clock_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&id;
			id *= 0x9e3779b97f4a7c15ull;
		}
		snd.process_id = id;
	}
}

static void sender_loop(void)
{
	ring_t *ring = agent_ring();
	unsigned idle_ms = 1;

	if (!ring)
		return;
	sender_draw_process_id();
	snd.retry_backoff = 1;
	snd.retry_wait_ns = sender_retry_ns();
	if (agent_config.dormant)
		sender_try_dormant();
	else
		sender_open_first();
	for (;;) {
		uint32_t wake_seen = atomic_load(&snd.wake); /* before the requests: a later one ends the sleep */
		int stop = atomic_load(&snd.stop_req);
		uint64_t flush_req = atomic_load(&snd.flush_req);
		uint64_t now;
		size_t n;

		if (atomic_load(&agent_state_now) == AGENT_OFF && !snd.w)
			break; /* turned off: nothing to write to any more */
		if (agent_config.dormant && !snd.w && !stop &&
		    clock_mono_ns() - snd.last_connect_ns >= SENDER_DORMANT_RETRY_NS)
			sender_try_dormant();
		if (!agent_config.dormant && snd.kind != SINK_SOCKET && agent_config.sink[0] &&
		    agent_config.retry_ms > 0 && !snd.socket_disabled && snd.probe_fd < 0 && !stop &&
		    atomic_load(&agent_state_now) == AGENT_ON &&
		    clock_mono_ns() - snd.last_connect_ns >= snd.retry_wait_ns)
			sender_try_reconnect();
		if (snd.probe_fd >= 0 && !stop)
			sender_probe();
		if (snd.kind == SINK_SOCKET && clock_mono_ns() - snd.last_ack_read_ns >= SENDER_ACK_EVERY_NS) {
			snd.last_ack_read_ns = clock_mono_ns();
			sender_read_acks();
		}
		n = sender_drain(ring, SENDER_BATCH);
		now = clock_mono_ns();
		if (snd.w && (n == 0 || now - snd.last_flush_ns >= SENDER_FLUSH_EVERY_NS))
			sender_flush_writer();
		if (snd.w && now - snd.last_drops_ns >= SENDER_DROPS_EVERY_NS)
			sender_write_drops(ring, 0);
		if (flush_req != atomic_load(&snd.flush_done)) {
			sender_drain(ring, ring_capacity(ring));
			sender_flush_writer();
			atomic_store(&snd.flush_done, flush_req);
			sender_futex_bump(&snd.progress);
		}
		if (stop)
			break;
		if (n == 0) {
			sender_futex_wait(&snd.wake, wake_seen, idle_ms);
			idle_ms = idle_ms * 2 > SENDER_IDLE_MAX_MS ? SENDER_IDLE_MAX_MS : idle_ms * 2;
		} else {
			idle_ms = 1;
		}
	}
	sender_finish(ring);
}

static void *sender_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "fsdpscope-send");
	sender_loop();
	atomic_store_explicit(&snd.finished, 1, memory_order_release);
	sender_futex_bump(&snd.progress);
	return NULL;
}

int sender_start(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int err;

	if (atomic_exchange(&snd.running, 1))
		return 0;
	atomic_store(&snd.finished, 0);
	atomic_store(&snd.stop_req, 0);
	if (pthread_attr_init(&attr) != 0) {
		atomic_store(&snd.running, 0);
		return -ENOMEM;
	}
	(void)pthread_attr_setstacksize(&attr, SENDER_STACK_BYTES);
	/* The thread inherits this mask: all signals blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&snd.thread, &attr, sender_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (err) {
		atomic_store(&snd.running, 0);
		return -err;
	}
	return 0;
}

int sender_running(void)
{
	return atomic_load(&snd.running) && !atomic_load(&snd.finished);
}

/* Wait until done(arg) holds, for at most timeout_ms: woken by the
 * thread's progress, and looking again every 10 ms whatever happens. */
static int sender_wait(int (*done)(uint64_t arg), uint64_t arg, int timeout_ms)
{
	uint64_t deadline = clock_mono_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;

	for (;;) {
		uint32_t seen = atomic_load(&snd.progress);
		uint64_t now;

		if (done(arg))
			return 0;
		now = clock_mono_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		uint64_t left_ms = (deadline - now + 999999) / 1000000;
		sender_futex_wait(&snd.progress, seen, left_ms < 10 ? (unsigned)left_ms : 10);
	}
}

static int sender_flushed(uint64_t want)
{
	return atomic_load(&snd.flush_done) >= want || atomic_load(&snd.finished);
}

static int sender_done(uint64_t unused)
{
	(void)unused;
	return atomic_load_explicit(&snd.finished, memory_order_acquire);
}

void sender_flush(int timeout_ms)
{
	if (!sender_running() || pthread_equal(pthread_self(), snd.thread))
		return;
	uint64_t want = atomic_fetch_add(&snd.flush_req, 1) + 1;
	sender_futex_bump(&snd.wake);
	if (sender_wait(sender_flushed, want, timeout_ms))
		agent_debug("flush: the sender did not answer within %d ms", timeout_ms);
}

void sender_stop(int timeout_ms)
{
	if (!atomic_load(&snd.running) || pthread_equal(pthread_self(), snd.thread))
		return;
	atomic_store(&snd.stop_req, 1);
	sender_futex_bump(&snd.wake);
	if (sender_wait(sender_done, 0, timeout_ms)) {
		/* Leave it: the process exits around it. */
		agent_debug("the sender did not finish within %d ms: exiting without it", timeout_ms);
		return;
	}
	pthread_join(snd.thread, NULL);
	atomic_store(&snd.running, 0);
}

void sender_after_fork_child(void)
{
	/* The child has no sender thread. The socket is the parent's
	 * connection: our copy is closed so that the collector sees the
	 * parent's end-of-stream when the parent is done, whatever the child
	 * does. The writer is left alone (never flushed: its bytes belong to
	 * the parent's stream); its memory is a copy-on-write page or two. */
	if (snd.fd >= 0)
		close(snd.fd);
	snd.fd = -1;
	sender_probe_close();
	if (snd.w)
		sender_parents_writers[sender_nparents++ % 8] = snd.w;
	snd.w = NULL;
	snd.kind = SINK_NONE;
	snd.pending = 0;
	/* A new process: its own id and sinks; the parent's retained chunks
	 * are the parent's to repeat. */
	sender_acks_reset();
	snd.process_id = 0;
	snd.serial = 0;
	snd.serial_kind = 0;
	snd.socket_disabled = 0;
	snd.last_connect_ns = 0;
	snd.copied_path[0] = '\0';
	atomic_store(&snd.bad_acks, 0);
	atomic_store(&snd.running, 0);
	atomic_store(&snd.finished, 0);
	atomic_store(&snd.stop_req, 0);
	atomic_store(&snd.flush_req, 0);
	atomic_store(&snd.flush_done, 0);
	atomic_store(&snd.wake, 0);
	atomic_store(&snd.progress, 0);
}

uint64_t sender_retained_bytes(void)
{
	return atomic_load(&snd.retained_bytes);
}

uint64_t sender_bad_acks(void)
{
	return atomic_load(&snd.bad_acks);
}
