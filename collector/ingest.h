/*
 * ingest.h - merge agent connections and per-rank trace files into one trace.
 *
 * The collector's front door, used by `fsdpscope run` (embedded) and by the
 * collector daemon. Agents connect to a listening socket and send a trace
 * stream (the bytes of a trace file, common/trace_format.h); agents that
 * found no collector wrote per-rank trace files instead. The ingest reads
 * every input with its own trace_parser and copies the records of each
 * verified chunk into ONE output trace:
 *
 *   - every source of every input gets a source number in the output (an
 *     agent's records all carry source 0; the ingest numbers sources in the
 *     order their first record arrives);
 *   - one source per process: an input source whose second record is a
 *     sink record (format 1.2, docs/format.md "Sinks and resumption") joins
 *     the output source of its process_id when the output has one; of its
 *     hello, sink record, preamble and repeats, only what the output does
 *     not hold yet is written. Where the records of a source stop following
 *     the sink numbering a reader would infer, the output says so with a
 *     resume marker (a sink record whose prev_serial is its own serial:
 *     "the records after my preamble are sink `serial`'s from index
 *     repeat_first"), so that a later collector reading this trace as a
 *     file continues its sources exactly. Inputs without sink records:
 *     every source is a source of its own (a process that reconnects
 *     becomes a new source);
 *   - records are copied byte for byte; only head.source changes. Strings
 *     are per source, so they travel with their source like any record;
 *   - records of one input keep their order; records of different inputs
 *     interleave at chunk granularity (a hello waits for its source's next
 *     record, which says whether it starts a sink).
 *
 * The output is written as it goes: its pending chunk at most flush_ms after
 * records arrived, and at once when a connection has more than 1 MiB not
 * acknowledged; after each write every connection is sent a wire_ack for
 * the whole chunks of its stream now in the file (or left out by the record
 * callback, or already held).
 *
 * An input that sends garbage or ends inside a chunk keeps every complete
 * chunk it sent; the rest is dropped and reported (which process, at what
 * offset, why). A damaged chunk is skipped; a connection whose bytes are
 * not a trace at all (or that costs more than one connection may) is cut. No input can stop another: the ingest never aborts on bad
 * input. Memory per connection is bounded by one chunk (the parser's buffer)
 * and a few fixed-size states: at most 1024 sources a connection, each with
 * at most one waiting hello (files: 65536 sources).
 *
 * Threading: an ingest_t is used by one thread at a time (the caller's
 * loop); it starts no threads of its own.
 */
#ifndef FSS_COLLECTOR_INGEST_H
#define FSS_COLLECTOR_INGEST_H

#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>

#include "collector/source.h"
#include "common/record.h"

typedef struct ingest ingest_t;

struct ingest_options {
	uint64_t features;       /* FSS_FEATURE_* for the output header; 0: NCCL | CUPTI | NVTX */
	uint32_t chunk_payload;  /* output chunk payload bytes, 0: the writer's default */
	int sync_on_close;       /* fsync the output before renaming it into place */
	uint32_t flush_ms;       /* write the pending chunk at most this long after records arrived (and ack
	                            it), 0: 100 */
	uint32_t keep_flags;     /* FSS_FILE_KEEP_* for the output header (trace_writer_options) */
	uint32_t keep_steps;     /* the header's keep_steps */
	const unsigned char *key; /* WIRE_KEY_BYTES: the key TCP connections must send first; NULL: none,
	                             and ingest_listen refuses tcp addresses */
	sources_t *view;          /* the per-source view the output's records are fed to, borrowed (a
	                             session's, collector/session.h: one decode for every reader of the
	                             session); NULL: the ingest's own */
	uint32_t key_timeout_ms;  /* a tcp connection without its whole key hello this long after it was
	                             accepted is cut (key_timeouts); 0: INGEST_KEY_TIMEOUT_MS_DEFAULT */
};

/* The default of ingest_options.key_timeout_ms: an agent sends its key
 * hello as soon as it has connected, so anything slower is not an agent. */
#define INGEST_KEY_TIMEOUT_MS_DEFAULT 5000u
/* TCP connections still waiting for their key hello, at most per peer host
 * and in all: a connection over either is closed as it is accepted, unread,
 * and counted (pending_over_cap). With the key timeout this bounds what
 * peers without the key can hold: 64 descriptors, each for the timeout. */
#define INGEST_PENDING_PER_HOST 8
#define INGEST_PENDING_MAX 64

/*
 * Called for every record the output gets, in output order, after its
 * source number was rewritten (head.source is the output's) and the
 * per-source view took it in, with the view's source (NULL for a record of no source):
 * the session feeds its live analysis from here, so what it analyses is
 * exactly what the trace holds. Records the output already held do not
 * come through here, nor the resume markers the ingest writes (the file
 * only). The callback may call ingest_write_record. Return 0 to write the record
 * to the trace file, 1 to leave it out of the file (a --keep policy: it is
 * still counted in the stats as received, and acked), or a negative errno
 * to fail the ingest.
 */
typedef int (*ingest_record_fn)(void *ctx, const struct fss_record_head *rec, const struct source *src);

/* One source of the output trace. */
struct ingest_source_stats {
	uint32_t source;     /* its number in the output trace */
	uint32_t pid;        /* from its process_hello, 0 before one arrived */
	int32_t rank;        /* the per-source layer's rank (collector/source.h), else -1 */
	int has_hello;       /* a process_hello arrived */
	int ended;           /* a process_end arrived (the process exited cleanly) */
	const char *origin;  /* "connection 3 (pid 1234)" or the file's path */
	uint64_t records;    /* records copied to the output */
	uint64_t dropped;    /* what the source lost: ring + sink + CUPTI + NVTX (collector/source.h) */
	const struct source *view; /* everything the layer knows of it (its end, drops, missing collectives) */
	uint32_t sinks;      /* sinks of its process merged into it (its first one included), 0 without sink records */
	uint64_t repeats_skipped; /* records left out because the output already held them (repeats) */
};

/* A connection refused because its peer runs as another user. */
struct ingest_refused_peer {
	uint32_t uid; /* the peer's user id (SO_PEERCRED), UINT32_MAX when it could not be read */
	int32_t pid;  /* the peer's process id, 0 when unknown */
};

/* Refused peers the stats name; more are only counted. */
#define INGEST_REFUSED_NAMED 16

/* What the ingest did, valid until ingest_free(). */
struct ingest_stats {
	uint32_t sources;       /* sources in the output */
	uint32_t connections;   /* connections accepted (empty ones included) */
	uint32_t files;         /* files merged */
	uint64_t records;       /* records written to the output */
	uint64_t bytes;         /* bytes of the output trace */
	uint64_t by_type[FSS_REC_TYPE_MAX]; /* records written, per known type */
	uint64_t dropped;       /* sum of the sources' dropped counts */
	const struct ingest_source_stats *per_source; /* [sources], by output source number */
	size_t ndamaged;        /* inputs that were cut short or damaged */
	const char *const *damage; /* [ndamaged] one message each: who, where, why, what was kept */
	const unsigned char *damage_unclosed; /* [ndamaged] 1: only the writer's close is missing (killed
						 at a chunk boundary): every record it sent is kept */
	uint32_t refused;       /* unix connections refused: the peer was not the collector's user */
	size_t nrefused_named;  /* refused_peers[] entries: the first INGEST_REFUSED_NAMED refused */
	const struct ingest_refused_peer *refused_peers;
	uint32_t exits_written; /* process_exit records written (ingest_note_exit) */
	uint32_t exits_unmatched; /* exits noted for a pid no source's hello had: not written */
	uint64_t collectives_missing; /* sum of the sources' collectives missing from their sequence
	                                 numbers (source_collectives_missing): calls made, not recorded */
	uint64_t records_left_out; /* records the record callback left out of the file (counted as received) */
	uint32_t sinks_merged;     /* sinks that continued a source the output held (not a source of their own) */
	uint64_t repeats_skipped;  /* sum of the sources' repeats_skipped */
	uint32_t refused_keys;     /* tcp connections cut: their first bytes were not the key */
	uint32_t key_timeouts;     /* tcp connections cut: no whole key hello within the key timeout */
	uint32_t keyless_unnamed;  /* of refused_keys and key_timeouts, those past the first
	                              INGEST_REFUSED_NAMED: counted, without a damage message each */
	uint32_t pending_over_cap; /* tcp connections closed unread: too many from their host, or in all,
	                              were waiting for their key (INGEST_PENDING_PER_HOST, _MAX) */
	uint32_t agents;           /* connections known to be agents: a unix peer of this user, a tcp
	                              peer whose key checked out (ingest_add_fd's too) */
	uint64_t acks_sent;        /* wire_ack messages sent back on connections */
	uint32_t files_written;    /* output files closed: 1 + the rotations */
};

/*
 * ingest_new - an ingest writing the merged trace to `output_path` (as
 * "<output_path>.partial" until ingest_finish() renames it into place).
 * opts may be NULL. Returns 0 with *out owned by the caller (ingest_free),
 * or a negative errno (the output could not be created).
 */
int ingest_new(ingest_t **out, const char *output_path, const struct ingest_options *opts);

/*
 * ingest_free - free the ingest, first finishing it (as ingest_finish) if
 * that was not done, so the output is always a closed trace. NULL is
 * allowed.
 */
void ingest_free(ingest_t *ing);

/*
 * ingest_listen - accept agent connections on `address` (common/wire.h
 * syntax: unix:/path, unix:@name, tcp:127.0.0.1:port). May be called more
 * than once. A unix socket file created here is removed by ingest_finish()
 * and ingest_free(). On a unix socket every peer's user id is checked
 * (SO_PEERCRED): a peer that is not the collector's effective user is
 * refused (closed unread) and counted in the stats. TCP carries no peer
 * identity: a tcp listener needs the options' key, and a connection whose
 * first WIRE_KEY_HELLO_BYTES are not wire_key_hello(key) is cut and counted
 * (refused_keys, with its peer's address in the damage messages of the first
 * INGEST_REFUSED_NAMED such peers, keyless_unnamed counts the rest); so is one
 * that has not sent all of them within the options' key timeout
 * (key_timeouts), and one accepted while INGEST_PENDING_PER_HOST connections
 * of its host, or INGEST_PENDING_MAX in all, wait for their key is closed
 * at once (pending_over_cap, no message each). Returns 0,
 * -EINVAL for a bad address, -EACCES for a tcp address without a key, or the
 * negative errno of socket / bind / listen.
 */
int ingest_listen(ingest_t *ing, const char *address);

/*
 * ingest_poll - wait up to timeout_ms (0: do not wait, -1: forever) for
 * activity, then accept pending connections and read what the open ones
 * have sent, feeding the output. A signal interrupting the wait returns 0
 * early, so a caller can look at its own state. Returns the number of
 * inputs that made progress (>= 0), or a negative errno when the ingest
 * itself failed (writing the output, epoll); bad input is never an error.
 */
int ingest_poll(ingest_t *ing, int timeout_ms);

/*
 * ingest_flush - write the output's pending chunk now, so that what was
 * received is on disk should the caller die. Returns 0 or the write error.
 */
int ingest_flush(ingest_t *ing);

/* ingest_open_connections - connections accepted and not yet closed. */
size_t ingest_open_connections(const ingest_t *ing);

/*
 * ingest_open_agents - of those, the ones known to be agents (a unix peer
 * of this user, a tcp peer whose key checked out): what a caller waiting
 * for a job to leave counts, so that a peer without the key (a port
 * scanner, a health probe) neither holds it nor starts its countdown.
 */
size_t ingest_open_agents(const ingest_t *ing);

/* ingest_agents_seen - agent connections so far, closed ones included (the stats' agents). */
uint32_t ingest_agents_seen(const ingest_t *ing);

/*
 * ingest_add_file - merge the trace file at `path` (a per-rank fallback
 * file, a ".partial" of a process that died, or another merged trace: each
 * of its sources gets a new number). A damaged or truncated file
 * contributes its complete chunks and is reported in the stats. Returns 0,
 * a negative errno when the file cannot be opened or read, or the output's
 * write error.
 */
int ingest_add_file(ingest_t *ing, const char *path);

/*
 * ingest_note_exit - how process `pid` ended (its waitpid() status, seen by
 * the caller that reaped it): a process_exit record for the output source
 * whose process_hello has that pid (the latest such source), written after
 * every record of that source, at ingest_finish(), when all inputs have
 * ended. An exit whose pid no source has by then is counted
 * (exits_unmatched) and not written. Returns 0 or -ENOMEM.
 */
int ingest_note_exit(ingest_t *ing, pid_t pid, int wait_status);

/* ingest_on_record - set (fn NULL: clear) the record callback. */
void ingest_on_record(ingest_t *ing, ingest_record_fn fn, void *ctx);

/*
 * ingest_write_record - a record of the session's own (a per-step summary)
 * into the output as it is (head.source names an output source or
 * FSS_SOURCE_NONE). Not passed to the record callback; may be called from
 * it (the session's record then goes before the one handed over). 0, -EINVAL for a
 * record whose size is not a multiple of 8 or does not fit the output's
 * chunks (nothing written; the ingest goes on), or the write error.
 */
int ingest_write_record(ingest_t *ing, const struct fss_record_head *rec);

/*
 * ingest_rotate - close the output file now (a closed trace at the path it
 * was to have) and continue in a new file at `path`, which re-states every
 * source first (hello, a resume marker for a source of a process, strings,
 * live communicators, latest clock anchors and drops) so that it stands
 * alone; sources keep their numbers. Connections are acked for everything
 * the closed file holds. The re-stated records are not passed to the record
 * callback (the session has them). ingest_add_file of the files in order
 * gives back one source per process (sources with sink records; others are
 * re-stated as sources of their own). Called from the record callback, the
 * new file is made at once and the switch happens when the input record
 * being handed over is taken whole (it, and a hello's sink record with it,
 * end the closing file); a second call before then is -EBUSY. 0 or -errno
 * (the new file could not be made: the current one goes on).
 */
int ingest_rotate(ingest_t *ing, const char *path);

/*
 * ingest_add_fd - take `fd`, a connected stream socket (a socketpair in a
 * test or a fuzzer), as a connection named `origin` (NULL: "connection N"):
 * the ingest owns fd from here (closes it, on failure too), makes it
 * non-blocking, and acks on it like on any connection; no peer check, no
 * key. 0 or -errno.
 */
int ingest_add_fd(ingest_t *ing, int fd, const char *origin);

/*
 * ingest_finish - end the ingest: stop listening, end every open connection
 * (what it had not completed is reported as cut), flush and close the
 * output, renaming it into place. *stats (may be NULL) points into the
 * ingest and stays valid until ingest_free(). Returns 0, or the first
 * error met writing the output. Call once; later calls return -EALREADY.
 */
int ingest_finish(ingest_t *ing, const struct ingest_stats **stats);

#endif
