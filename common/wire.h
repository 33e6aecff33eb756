/*
 * wire.h - socket addresses and connections between agents and collectors.
 *
 * What travels on a connection is a trace: the same file header and chunks
 * as a trace file (trace_format.h), written with trace_writer_open_fd() and
 * read with a trace_parser. This module only names and opens the sockets.
 *
 * Address syntax (FSDPSCOPE_SINK and --listen take these):
 *   unix:/path/to/socket     a unix stream socket in the file system
 *   unix:@name               a unix socket in the abstract namespace
 *   tcp:127.0.0.1:7070       a TCP address (IPv4 literal or [::1]:port)
 *   /path/to/socket          short for unix:/path/to/socket
 *   tcp:127.0.0.1:7070,key=/path/to/key
 *                            a TCP address and the file holding its key
 *
 * TCP carries no peer identity (unix sockets have SO_PEERCRED), so a
 * collector's TCP listener requires a key: 32 random bytes in a file only
 * its user can read (mode 0600, hex). A connecting agent sends
 * WIRE_KEY_MAGIC and the key before its stream, as soon as it has
 * connected; the collector cuts a connection whose first 40 bytes are not
 * exactly those, or that has not sent them within its key timeout.
 */
#ifndef FSS_COMMON_WIRE_H
#define FSS_COMMON_WIRE_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

struct wire_address {
	struct sockaddr_storage addr;
	socklen_t len;
	int family;     /* AF_UNIX, AF_INET or AF_INET6 */
	char text[256]; /* the address as given, for messages */
	char key_path[256]; /* tcp only: the file holding the connection key (",key=PATH"), "" for none */
};

/*
 * wire_address_parse - parse `text` into *out. Returns 0, or -EINVAL for
 * text that is none of the forms above, -ENAMETOOLONG for a unix path that
 * does not fit sockaddr_un.
 */
int wire_address_parse(const char *text, struct wire_address *out);

/*
 * wire_listen - a listening, close-on-exec stream socket bound to addr; a
 * stale unix socket file at the path is replaced. *fd owns it. Returns 0 or
 * a negative errno.
 */
int wire_listen(const struct wire_address *addr, int *fd);

/*
 * wire_connect - connect a close-on-exec stream socket to addr, waiting at
 * most timeout_ms. Returns 0 with *fd connected (blocking mode), or a
 * negative errno (-ECONNREFUSED, -ENOENT, -ETIMEDOUT, ...).
 */
int wire_connect(const struct wire_address *addr, int timeout_ms, int *fd);

#define WIRE_KEY_BYTES 32
#define WIRE_KEY_MAGIC "FSSKEY01" /* 8 bytes, no NUL */
#define WIRE_KEY_HELLO_BYTES (8 + WIRE_KEY_BYTES)

/*
 * wire_key_create - draw a new key and write it to `path` as 64 hex digits
 * and a newline: a new file (O_EXCL, O_NOFOLLOW), mode 0600. 0 or -errno.
 */
int wire_key_create(const char *path, unsigned char key[WIRE_KEY_BYTES]);

/*
 * wire_key_load - read the key at `path`. Refused (-EPERM) unless it is a
 * regular file (not a link) owned by the effective user with no group or
 * other permission; -EINVAL when it holds no key. 0 or -errno.
 */
int wire_key_load(const char *path, unsigned char key[WIRE_KEY_BYTES]);

/* wire_key_hello - the WIRE_KEY_HELLO_BYTES an agent sends first. */
void wire_key_hello(const unsigned char key[WIRE_KEY_BYTES], unsigned char out[WIRE_KEY_HELLO_BYTES]);

/* wire_key_check - 1 when `got` (WIRE_KEY_HELLO_BYTES) is the hello of
 * `key`, else 0; compares in constant time. */
int wire_key_check(const unsigned char key[WIRE_KEY_BYTES], const unsigned char got[WIRE_KEY_HELLO_BYTES]);

/*
 * The return channel. On a socket the collector writes back, now and then,
 * how much of the agent's stream is safe in its trace: an agent keeps a
 * copy of every chunk it sent until an ack covers it, and repeats the rest
 * in its next sink (fss_rec_sink) when the connection fails. An ack is
 * sent only after the records are in the collector's trace file (written,
 * not only buffered), so a collector killed at any instant has every
 * acknowledged record on disk.
 */
#define WIRE_ACK_MAGIC 0x4b434153u /* "SACK" as little-endian bytes */

struct wire_ack {
	uint32_t magic;  /* WIRE_ACK_MAGIC */
	uint32_t reserved; /* 0 */
	uint64_t chunks; /* chunks of the stream (seq 0 .. chunks-1) that are in the trace */
	uint64_t records; /* records of the stream (hello is record 0) in the trace: the same point */
};

#endif
