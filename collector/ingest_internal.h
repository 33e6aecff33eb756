/*
 * ingest_internal.h - the state the ingest's files share (collector/ingest.h
 * is the API): the output, its sources and processes, the inputs.
 */
#ifndef FSS_COLLECTOR_INGEST_INTERNAL_H
#define FSS_COLLECTOR_INGEST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "collector/ingest.h"
#include "collector/source.h"
#include "common/record.h"
#include "common/trace_parser.h"
#include "common/trace_writer.h"
#include "common/wire.h"

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
	uint16_t kind; /* enum fss_sink_kind, 0 unknown */
	uint16_t preamble;
	int layout_known; /* its sink record was seen: preamble and repeats below hold */
	uint32_t prev_serial;
	uint64_t repeat_first, repeat_count;
	uint64_t held; /* its records [0, held) are in the output or stood for by earlier ones */
};

/* A process (a process_id of sink records) and its output source. */
struct process {
	uint64_t id;
	uint32_t out;	   /* its output source */
	uint32_t founding; /* serial of the sink that started the output source: its hello,
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
	uint64_t real_next; /* the index in out_serial after the last record taken */
	int drifting;	    /* on the ingest's dirty list */
};

/* What the output keeps of a source to re-state it in a new file. */
struct restate {
	_Alignas(8) unsigned char hello[sizeof(struct fss_rec_process_hello)];
	int has_hello;
	unsigned char *strings; /* every string part, as written; a part with the id and offset of
				   one held replaces it */
	size_t nstrings, capstrings;
	uint32_t *string_slots;	    /* open addressing over (id, offset): index + 1, 0 empty */
	size_t nslots;		    /* a power of two, at least twice nstrings */
	struct fss_rec_comm *comms; /* live communicators */
	size_t ncomms, capcomms;
	struct fss_rec_clock_anchor anchors[2]; /* the latest per domain (realtime, cupti) */
	int has_anchor[2];
	struct fss_rec_drops drops; /* the latest */
	int has_drops;
};

/* The ingest's private part of an output source. */
struct out_source {
	struct process *proc; /* NULL: no sink record */
	struct restate restate;
};

enum map_state {
	MAP_FRESH, /* no record yet */
	MAP_HELLO, /* its hello waits for the next record */
	MAP_PLAIN, /* no sink record: copied as it comes */
	MAP_SINK,  /* follows a sink of a process */
};

struct source_map {
	uint32_t in;  /* source number inside the input */
	uint32_t out; /* source number in the output (UINT32_MAX while MAP_HELLO) */
	enum map_state state;
	unsigned char *hello; /* MAP_HELLO: the record, as received */
	struct process *proc; /* MAP_SINK */
	uint32_t serial;      /* MAP_SINK: the sink the next record belongs to ... */
	uint64_t index;	      /* ... and its index there */
	uint64_t jump_at;     /* a resume marker: index jump_at becomes jump_to (0: none) */
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

/* A tcp peer's host address, as compared for INGEST_PENDING_PER_HOST (an
 * IPv4-mapped IPv6 address is its IPv4 one). */
struct peer_host {
	int family; /* AF_INET, AF_INET6, 0 unknown */
	unsigned char addr[16];
};

struct input {
	enum input_kind kind;
	ingest_t *ing; /* for the parser callbacks */
	int fd;	       /* connection fd; -1 once closed (files: not kept) */
	char *origin;  /* "connection 3 (pid 1234)" or the file path */
	trace_parser_t *parser;
	struct source_map *map; /* input source -> output source */
	size_t nmap, capmap;
	size_t last_map;       /* index of the last hit: agents have one source */
	size_t hellos_waiting; /* map entries in MAP_HELLO */
	uint64_t bytes_in;     /* bytes received or read */
	int failed;	       /* the parser stopped: the rest is discarded */
	int fail_rc;
	/* tcp: the key hello still expected first (the input is on the ingest's pending list) */
	int key_wanted;
	size_t key_have;
	unsigned char key_got[WIRE_KEY_HELLO_BYTES];
	uint64_t key_deadline_ns; /* clock_mono_ns() by which the key hello must be whole */
	struct peer_host host;	  /* the tcp peer's host, for the per-host cap */
	char *peer;		  /* tcp peer address, for messages */
	/* the return channel */
	int acks_off; /* no more acks: a gap in the stream, or the peer is gone */
	struct ack_point points[INGEST_ACK_POINTS];
	size_t npoints;
	struct ack_point acked; /* the last ack queued */
	unsigned char ackbuf[sizeof(struct wire_ack)];
	size_t ack_left; /* bytes of ackbuf still to send (a short send) */
	int ack_blocked; /* an ack is owed and the socket was full */
};

struct listener {
	int fd;
	char *unlink_path; /* unix socket file to remove at the end, or NULL */
	int check_peer;	   /* a unix socket: refuse peers of another user */
	int check_key;	   /* tcp: the connection's first bytes must be the key */
};

/* An exit noted by ingest_note_exit, written at ingest_finish. */
struct pending_exit {
	uint64_t at_ns;
	pid_t pid;
	int wait_status;
};

struct ingest {
	trace_writer_t *out;
	char *path; /* the output file being written (its final name) */
	struct trace_writer_options wopts;
	int epfd;
	int finished;
	int write_error; /* first error writing the output: sticky */
	struct listener *listeners;
	size_t nlisteners;
	struct input **inputs; /* every input ever seen, in arrival order */
	size_t ninputs, capinputs;
	size_t open_connections;
	struct input *pending[INGEST_PENDING_MAX]; /* open tcp connections still waiting for their key,
						      in arrival order */
	size_t npending;
	uint64_t key_timeout_ns;
	uint32_t keyless_named; /* tcp peers refused without the key that have a damage message */
	sources_t *layer; /* the output's sources, as every reader sees them */
	int owns_layer;	  /* made by ingest_new; else ingest_options.view, borrowed */
	struct ingest_source_stats *sources;
	struct out_source *outs; /* [stats.sources], beside sources */
	size_t capsources;
	struct process **procs; /* every process, in arrival order */
	size_t nprocs, capprocs;
	char **damage;
	unsigned char *damage_unclosed; /* [ndamaged], see ingest_stats */
	struct pending_exit *exits;
	size_t nexits, capexits;
	struct ingest_refused_peer refused[INGEST_REFUSED_NAMED];
	struct ingest_stats stats;
	ingest_record_fn on_record;
	void *on_record_ctx;
	unsigned char key[WIRE_KEY_BYTES];
	int has_key;
	/* writing as it goes */
	uint64_t flush_ns;	      /* flush interval */
	uint64_t last_flush_ns;	      /* when the output last reached the disk */
	int arrived;		      /* records arrived since then */
	uint64_t appended;	      /* records appended to the output, over every file */
	uint64_t on_disk;	      /* of those, written out (write(2) returned) */
	uint64_t writer_bytes;	      /* trace_writer_bytes() at the last look: a change is a write */
	uint64_t file_records_before; /* records and bytes of the files closed by ingest_rotate */
	uint64_t file_bytes_before;
	size_t acks_blocked;	  /* connections with ack_blocked set */
	int taking;		  /* inside ingest_take_record (the record callback may run) */
	trace_writer_t *next_out; /* a rotation asked for meanwhile: its file, opened */
	char *next_path;
	struct process **dirty; /* processes drifting: a marker is due before the chunk is written */
	size_t ndirty, capdirty;
	uint32_t chunk_cap;				  /* the output's chunk payload (as the writer clamps it) */
	uint32_t chunk_used;				  /* bytes in the writer's pending chunk */
	_Alignas(8) unsigned char record[UINT16_MAX + 1]; /* one record being copied */
	unsigned char readbuf[64 << 10];
};

/* ingest_text_new - *dst = a malloc'd printf text (NULL on ENOMEM), returned too. */
__attribute__((format(printf, 2, 3))) char *ingest_text_new(char **dst, const char *fmt, ...);

/*
 * ingest_add_damage - keep `message` (taken; NULL: out of memory) among the
 * stats' damage messages. 0 or -ENOMEM.
 */
int ingest_add_damage(ingest_t *ing, char *message);

/* ingest_add_unclosed - as ingest_add_damage, for an input whose writer
 * only did not close it: every complete chunk kept, nothing dropped. */
int ingest_add_unclosed(ingest_t *ing, char *message);

/*
 * ingest_keyless - a tcp peer refused without the key, said by `message`
 * (taken; NULL: out of memory): a damage message for the first
 * INGEST_REFUSED_NAMED, only counted after that, so that a port scanner
 * costs no memory per connection in messages. 0 or -ENOMEM.
 */
int ingest_keyless(ingest_t *ing, char *message);

/*
 * ingest_grow - make room in *v (*cap items of `size` bytes, first `first`)
 * for `need` items, doubling. 0 or -ENOMEM (*v unchanged).
 */
int ingest_grow(void **v, size_t *cap, size_t need, size_t size, size_t first);

#endif
