/*
 * ingest_net.c - the epoll loop: listeners, connections accepted and read, peer checks.
 *
 * One epoll set on the caller's thread; a unix peer must be the collector's
 * user, a tcp peer must send the key first, and soon (the key timeout);
 * the tcp peers still waiting for theirs are capped per host and in all.
 */
#include "collector/ingest_net.h"

#include "collector/ingest_ack.h"
#include "collector/ingest_inputs.h"
#include "collector/ingest_internal.h"
#include "collector/ingest_output.h"

#include "common/clock.h"
#include "common/wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* epoll tags: index << 1, low bit set for listeners. */
static uint64_t tag_listener(size_t i)
{
	return ((uint64_t)i << 1) | 1u;
}

static uint64_t tag_input(size_t i)
{
	return (uint64_t)i << 1;
}

/* ---- connections waiting for their key ------------------------------------ */

/* The host of a tcp peer; an IPv4-mapped IPv6 address is its IPv4 one, so
 * that a dual-stack listener counts a host once. */
static struct peer_host peer_host_of(const struct sockaddr_storage *ss)
{
	struct peer_host h;

	memset(&h, 0, sizeof(h));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;

		h.family = AF_INET;
		memcpy(h.addr, &a->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;

		if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
			h.family = AF_INET;
			memcpy(h.addr, a->sin6_addr.s6_addr + 12, 4);
		} else {
			h.family = AF_INET6;
			memcpy(h.addr, &a->sin6_addr, 16);
		}
	}
	return h;
}

/* Whether one more connection of `host` may wait for its key. */
static int pending_room(const ingest_t *ing, const struct peer_host *host)
{
	size_t same = 0;

	if (ing->npending >= INGEST_PENDING_MAX)
		return 0;
	for (size_t i = 0; i < ing->npending; i++) {
		const struct peer_host *h = &ing->pending[i]->host;

		same += h->family == host->family && !memcmp(h->addr, host->addr, sizeof(h->addr));
	}
	return same < INGEST_PENDING_PER_HOST;
}

static void pending_remove(ingest_t *ing, const struct input *in)
{
	for (size_t i = 0; i < ing->npending; i++) {
		if (ing->pending[i] != in)
			continue;
		memmove(&ing->pending[i], &ing->pending[i + 1], (ing->npending - i - 1) * sizeof(ing->pending[0]));
		ing->npending--;
		return;
	}
}

static void input_close_fd(ingest_t *ing, struct input *in)
{
	if (in->fd < 0)
		return;
	if (in->key_wanted)
		pending_remove(ing, in);
	ingest_ack_blocked_set(ing, in, 0);
	epoll_ctl(ing->epfd, EPOLL_CTL_DEL, in->fd, NULL);
	close(in->fd);
	in->fd = -1;
	ing->open_connections--;
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
	pending_remove(ing, in);
	in->key_wanted = 0;
	if (wire_key_check(ing->key, in->key_got)) {
		ing->stats.agents++;
		ingest_ack_send(ing, in); /* the ack of nothing, as connection_add sends a unix peer */
		return (ssize_t)take;
	}
	ing->stats.refused_keys++;
	ingest_keyless(ing,
		       ingest_text_new(&msg, "%s (tcp peer %s): refused: its first bytes are not the connection key",
				       in->origin, in->peer ? in->peer : "unknown"));
	return -1;
}

/* "5 s", or "1500 ms" when not whole seconds. */
static void duration_text(uint64_t ns, char *buf, size_t len)
{
	uint64_t ms = ns / 1000000u;

	if (ms % 1000u)
		snprintf(buf, len, "%" PRIu64 " ms", ms);
	else
		snprintf(buf, len, "%" PRIu64 " s", ms / 1000u);
}

/*
 * Cut the connections whose key hello is overdue at `now`, each read once
 * first: what counts is whether the peer has sent its key, not whether this
 * loop got round to reading it. Every one waits the same time from its
 * accept, so the list's arrival order is also the order of the deadlines.
 * 0, or the output's write error (a read took records).
 */
static int keys_overdue(ingest_t *ing, uint64_t now)
{
	char allowed[32];
	char *msg;

	while (ing->npending && ing->pending[0]->key_deadline_ns <= now) {
		struct input *in = ing->pending[0];
		int rc = ingest_connection_read(ing, in);

		if (rc < 0)
			return rc;
		if (!ing->npending || ing->pending[0] != in)
			continue; /* its key came whole, or it ended */
		ing->stats.key_timeouts++;
		duration_text(ing->key_timeout_ns, allowed, sizeof(allowed));
		ingest_keyless(ing, ingest_text_new(&msg,
						    "%s (tcp peer %s): cut: it sent %zu of the %d bytes of the "
						    "connection key in the %s allowed (the key timeout)",
						    in->origin, in->peer ? in->peer : "unknown", in->key_have,
						    WIRE_KEY_HELLO_BYTES, allowed));
		input_close_fd(ing, in);
		ingest_input_release_parser(in);
	}
	return 0;
}

int ingest_connection_end(ingest_t *ing, struct input *in, int cut)
{
	int err;

	input_close_fd(ing, in);
	err = ingest_input_end(ing, in, cut);
	ingest_input_release_parser(in);
	return err;
}

int ingest_connection_read(ingest_t *ing, struct input *in)
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
			int err = ingest_connection_end(ing, in, 0);

			if (err)
				return err;
			return 1;
		}
		progress = 1;
		if (in->key_wanted) {
			ssize_t took = input_key(ing, in, data, (size_t)n);

			if (took < 0) {
				input_close_fd(ing, in);
				ingest_input_release_parser(in);
				return 1;
			}
			data += took;
			n -= took;
			if (!n)
				continue;
		}
		ingest_input_feed(ing, in, data, (size_t)n);
		if (ing->write_error)
			return ing->write_error;
		if (in->failed) {
			/* Not a trace (or past what one connection may cost): cut it.
			 * An agent then fails over to its file and repeats there what
			 * was not acknowledged; anything else just goes away. */
			int err = ingest_connection_end(ing, in, 0);

			return err ? err : 1;
		}
		if (in->npoints && in->bytes_in - in->acked.offset > INGEST_UNACKED_MAX) {
			int err = ingest_flush_and_ack(ing);

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

/* A connection taken in: registered with epoll and counted; a tcp one
 * (host not NULL, room checked by the caller) waits for its key on the
 * pending list. On failure the fd is closed and the input (if made) left
 * without a parser. */
static int connection_add(ingest_t *ing, int fd, const char *origin_fmt_peer, const struct peer_host *host, char *peer)
{
	int key_wanted = host != NULL;
	struct epoll_event ev = {.events = EPOLLIN};
	struct input *in = NULL;
	int err = ingest_input_new(ing, INPUT_CONNECTION, fd, &in);

	if (!err) {
		ing->stats.connections++;
		in->key_wanted = key_wanted;
		if (host)
			in->host = *host;
		in->peer = peer;
		peer = NULL;
		if (origin_fmt_peer)
			in->origin = strdup(origin_fmt_peer);
		else
			ingest_text_new(&in->origin, "connection %" PRIu32, ing->stats.connections);
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
			ingest_input_release_parser(in);
		}
		free(peer);
		close(fd);
		return err;
	}
	ing->open_connections++;
	if (key_wanted) {
		in->key_deadline_ns = clock_mono_ns() + ing->key_timeout_ns;
		ing->pending[ing->npending++] = in;
		return 0;
	}
	ing->stats.agents++;
	/* The ack of nothing: tells the agent at once that this is a collector
	 * that acks (it then repeats what a failure leaves unacked, and sends a
	 * failover file without waiting). A tcp peer gets it once its key checks out. */
	ingest_ack_send(ing, in);
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
			ingest_text_new(&s, "%s:%u", host, (unsigned)ntohs(a->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;

		if (inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host)))
			ingest_text_new(&s, "[%s]:%u", host, (unsigned)ntohs(a->sin6_port));
	}
	return s;
}

int ingest_accept_all(ingest_t *ing, struct listener *l)
{
	int accepted = 0;

	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sslen = sizeof(ss);
		struct ucred cred;
		socklen_t clen = sizeof(cred);
		char *origin = NULL, *peer = NULL;
		struct peer_host host;
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
			host = peer_host_of(&ss);
			if (!pending_room(ing, &host)) {
				/* Unread, before it costs an input: peers without
				 * the key cannot pile up connections. */
				close(fd);
				ing->stats.pending_over_cap++;
				continue;
			}
			peer = peer_text(&ss);
			ingest_text_new(&origin, "connection %" PRIu32 " (tcp %s)", ing->stats.connections + 1,
					peer ? peer : "peer");
		} else if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 && cred.pid > 0) {
			ingest_text_new(&origin, "connection %" PRIu32 " (peer pid %d)", ing->stats.connections + 1,
					(int)cred.pid);
		}
		if (connection_add(ing, fd, origin, l->check_key ? &host : NULL, peer) == 0)
			accepted++;
		free(origin);
	}
	return accepted;
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

/* timeout_ms shortened to wake up at `due` (clock_mono_ns). */
static int wake_by(int timeout_ms, uint64_t now, uint64_t due)
{
	int until = now >= due ? 0 : (int)((due - now + 999999u) / 1000000u);

	return timeout_ms < 0 || until < timeout_ms ? until : timeout_ms;
}

int ingest_poll(ingest_t *ing, int timeout_ms)
{
	struct epoll_event events[64];
	uint64_t now = clock_mono_ns();
	int n, progress = 0, err;

	if (ing->finished)
		return -EALREADY;
	if (ing->write_error)
		return ing->write_error;
	if (ing->arrived) /* the flush that is due */
		timeout_ms = wake_by(timeout_ms, now, ing->last_flush_ns + ing->flush_ns);
	if (ing->npending) /* the first key due */
		timeout_ms = wake_by(timeout_ms, now, ing->pending[0]->key_deadline_ns);
	n = epoll_wait(ing->epfd, events, (int)(sizeof(events) / sizeof(events[0])), timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		uint64_t tag = events[i].data.u64;
		size_t index = (size_t)(tag >> 1);
		int rc;

		if (tag & 1u) {
			rc = ingest_accept_all(ing, &ing->listeners[index]);
		} else {
			struct input *in = ing->inputs[index];

			if (in->fd < 0)
				continue; /* closed earlier in this round */
			rc = ingest_connection_read(ing, in);
		}
		if (rc < 0)
			return rc;
		progress += rc > 0;
	}
	err = keys_overdue(ing, clock_mono_ns());
	if (err)
		return err;
	err = ingest_flush_if_due(ing);
	if (err)
		return err;
	if (ing->acks_blocked)
		for (size_t i = 0; i < ing->ninputs && ing->acks_blocked; i++)
			if (ing->inputs[i]->ack_blocked)
				ingest_ack_send(ing, ing->inputs[i]);
	return progress;
}

size_t ingest_open_connections(const ingest_t *ing)
{
	return ing->open_connections;
}

size_t ingest_open_agents(const ingest_t *ing)
{
	return ing->open_connections - ing->npending;
}

uint32_t ingest_agents_seen(const ingest_t *ing)
{
	return ing->stats.agents;
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
	return connection_add(ing, fd, origin, NULL, NULL);
}

void ingest_listeners_close(ingest_t *ing)
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
