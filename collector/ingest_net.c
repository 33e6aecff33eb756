/*
 * ingest_net.c - the epoll loop: listeners, connections accepted and read, peer checks.
 *
 * One epoll set on the caller's thread; a unix peer must be the collector's
 * user, a tcp peer must send the key first.
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

static void input_close_fd(ingest_t *ing, struct input *in)
{
	if (in->fd < 0)
		return;
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
	in->key_wanted = 0;
	if (wire_key_check(ing->key, in->key_got)) {
		ingest_ack_send(ing, in); /* the ack of nothing, as connection_add sends a unix peer */
		return (ssize_t)take;
	}
	ing->stats.refused_keys++;
	ingest_add_damage(ing,
			  ingest_text_new(&msg, "%s (tcp peer %s): refused: its first bytes are not the connection key",
					  in->origin, in->peer ? in->peer : "unknown"));
	return -1;
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

/* A connection taken in: registered with epoll and counted. On failure the
 * fd is closed and the input (if made) left without a parser. */
static int connection_add(ingest_t *ing, int fd, const char *origin_fmt_peer, int key_wanted, char *peer)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct input *in = NULL;
	int err = ingest_input_new(ing, INPUT_CONNECTION, fd, &in);

	if (!err) {
		ing->stats.connections++;
		in->key_wanted = key_wanted;
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
	/* The ack of nothing: tells the agent at once that this is a collector
	 * that acks (it then repeats what a failure leaves unacked, and sends a
	 * failover file without waiting). A tcp peer gets it once its key checks out. */
	if (!key_wanted)
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
			ingest_text_new(&origin, "connection %" PRIu32 " (tcp %s)", ing->stats.connections + 1,
					peer ? peer : "peer");
		} else if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 && cred.pid > 0) {
			ingest_text_new(&origin, "connection %" PRIu32 " (peer pid %d)", ing->stats.connections + 1,
					(int)cred.pid);
		}
		if (connection_add(ing, fd, origin, l->check_key, peer) == 0)
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
