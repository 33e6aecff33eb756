/*
 * viewer_server.c - the viewer endpoint: the live view as a stream of JSON
 * snapshots (docs/live.md, docs/live-schema.json), viewer_server_*.
 *
 * The server is one thread around one epoll set: the listening socket, an
 * eventfd that stop() writes, and the viewers. The session never talks to
 * it: it puts views on the board, and the thread learns of them from the
 * board (live_board_wait). A thread cannot wait on a condition variable
 * and on an epoll set at once, so it waits on whichever matters:
 *
 *   - no viewer: on the epoll set alone (a connection or stop wakes it);
 *   - every viewer up to date: on the board, VIEWER_TICK_MS at most, then
 *     a look at the epoll set without waiting;
 *   - a viewer with a snapshot half written: on the epoll set (its socket
 *     taking more wakes it), VIEWER_TICK_MS at most, then a look at the
 *     board without waiting.
 *
 * A rendered snapshot is shared by every viewer it goes to and rendered
 * only when a viewer is free to take it, so a viewer that does not read
 * costs one snapshot of memory and no rendering: it holds the one it is
 * being written, and the newest generation is noted as its pending one.
 */
#include "collector/viewer.h"

#include "common/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* The longest the server thread waits on the board or on its sockets
 * before looking at the other: bounds how late a new viewer gets its first
 * snapshot while every other viewer is up to date, and how late stop() is
 * noticed then. */
#define VIEWER_TICK_MS 50
/* Viewers open at once; the next is closed as it comes, unread, and
 * counted. The descriptors are the session's, which its agents' connections
 * need too: a client that opens viewers in a loop must not take them all. */
#define VIEWER_CONNECTIONS_MAX 64

/* One rendered generation, shared by the viewers it is being written to. */
struct snap {
	uint64_t generation;
	char *json;
	size_t len;
	unsigned refs; /* the server's latest, and each viewer writing it (the server thread only) */
};

struct viewer {
	int fd;
	struct snap *cur; /* being written, NULL when the viewer is up to date */
	size_t off;	  /* bytes of cur written */
	uint64_t last;	  /* generation of the latest snapshot started, 0 before the first */
	uint64_t pending; /* a newer generation to send once cur is whole, 0 none */
	int polling_out;  /* EPOLLOUT is in its epoll interest */
	struct viewer *next;
};

struct viewer_server {
	live_board_t *board;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int listen_fd, wake_fd, epoll_fd;
	int listen_paused; /* out of file descriptors: the listener is out of the epoll set */
	pthread_t thread;
	int thread_started;
	struct viewer *viewers;
	size_t nviewers;     /* on the list (the server thread's own count) */
	struct snap *latest; /* the newest rendered generation, NULL before the first */
	uint64_t seen;	     /* the board's generation as the thread last read it */
	int board_closed;
	int stopping;
	pthread_mutex_t mu; /* guards stats, read by viewer_server_stats on any thread */
	struct viewer_stats stats;
};

static void snap_unref(struct snap *s)
{
	if (s && --s->refs == 0) {
		free(s->json);
		free(s);
	}
}

static void stats_add(viewer_server_t *s, uint64_t *field, uint64_t n)
{
	pthread_mutex_lock(&s->mu);
	*field += n;
	pthread_mutex_unlock(&s->mu);
}

/* Take connections again after running out of descriptors (server_accept). */
static void server_resume_listen(viewer_server_t *s)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->listen_fd};

	if (s->listen_paused && epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &ev) == 0)
		s->listen_paused = 0;
}

static void viewer_close(viewer_server_t *s, struct viewer *v)
{
	struct viewer **pp = &s->viewers;

	while (*pp && *pp != v)
		pp = &(*pp)->next;
	if (*pp)
		*pp = v->next;
	s->nviewers--;
	epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, v->fd, NULL);
	close(v->fd);
	snap_unref(v->cur);
	free(v);
	pthread_mutex_lock(&s->mu);
	s->stats.open--;
	pthread_mutex_unlock(&s->mu);
	server_resume_listen(s);
}

static void viewer_poll_out(viewer_server_t *s, struct viewer *v, int on)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0), .data.ptr = v};

	if (v->polling_out == on)
		return;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, v->fd, &ev) == 0)
		v->polling_out = on;
}

/*
 * Generation g is the newest the viewer could have: it becomes its pending
 * one. Counted as skipped: the pending one it replaces, and every
 * generation between the viewer's latest and g that it never had, so that
 * per viewer sent + skipped covers every generation from its first on.
 */
static void viewer_notice(viewer_server_t *s, struct viewer *v, uint64_t g)
{
	uint64_t base = v->pending ? v->pending : v->last;

	if (g <= base)
		return;
	if (base)
		stats_add(s, &s->stats.skipped, g - base - (v->pending ? 0 : 1));
	v->pending = g;
}

/* The latest view on the board rendered as s->latest. 0, or -ENOMEM with
 * the older rendering kept. */
static int server_render_latest(viewer_server_t *s)
{
	const struct live_view *view;
	struct snap *n;
	int err;

	if (s->latest && s->latest->generation >= s->seen)
		return 0;
	view = live_board_acquire(s->board);
	if (!view)
		return 0;
	n = calloc(1, sizeof(*n));
	if (!n) {
		live_board_release(s->board, view);
		return -ENOMEM;
	}
	n->generation = view->generation;
	err = viewer_render(view, &n->json, &n->len);
	live_board_release(s->board, view);
	if (err) {
		free(n);
		return err;
	}
	n->refs = 1;
	snap_unref(s->latest);
	s->latest = n;
	if (n->generation > s->seen)
		s->seen = n->generation;
	return 0;
}

/* Write what the viewer's socket takes. 0, or -1 when the viewer was closed. */
static int viewer_flush(viewer_server_t *s, struct viewer *v)
{
	for (;;) {
		if (!v->cur) {
			if (!v->pending)
				break;
			if (server_render_latest(s) < 0 || !s->latest)
				break; /* tried again on the next round */
			viewer_notice(s, v, s->latest->generation);
			v->cur = s->latest;
			v->cur->refs++;
			v->off = 0;
			v->last = v->cur->generation;
			v->pending = 0;
		}
		while (v->off < v->cur->len) {
			ssize_t n =
			    send(v->fd, v->cur->json + v->off, v->cur->len - v->off, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (n > 0) {
				v->off += (size_t)n;
			} else if (n < 0 && errno == EINTR) {
				continue;
			} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				viewer_poll_out(s, v, 1);
				return 0;
			} else {
				viewer_close(s, v);
				return -1;
			}
		}
		snap_unref(v->cur);
		v->cur = NULL;
		stats_add(s, &s->stats.sent, 1);
	}
	viewer_poll_out(s, v, 0);
	return 0;
}

/* The peer runs as this process's effective user (SO_PEERCRED). */
static int peer_is_user(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred))
		return 0;
	return cred.uid == geteuid();
}

static void server_accept(viewer_server_t *s)
{
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
		struct viewer *v;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* The pending connection stays in the backlog and the
				 * listener would wake the loop at once, again and again:
				 * leave it out until a viewer goes. */
				if (epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, s->listen_fd, NULL) == 0)
					s->listen_paused = 1;
			}
			return;
		}
		if (!peer_is_user(fd)) {
			close(fd);
			stats_add(s, &s->stats.refused, 1);
			continue;
		}
		if (s->nviewers >= VIEWER_CONNECTIONS_MAX) {
			close(fd);
			stats_add(s, &s->stats.over_cap, 1);
			continue;
		}
		v = calloc(1, sizeof(*v));
		ev.data.ptr = v;
		if (!v || epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			free(v);
			close(fd);
			continue;
		}
		v->fd = fd;
		v->next = s->viewers;
		s->viewers = v;
		s->nviewers++;
		pthread_mutex_lock(&s->mu);
		s->stats.accepted++;
		s->stats.open++;
		pthread_mutex_unlock(&s->mu);
		/* No pending generation yet: the loop's next look at the board
		 * gives it the latest as its first, with nothing counted skipped. */
	}
}

/* A viewer writes nothing: bytes from it, or its end, close it. */
static void viewer_readable(viewer_server_t *s, struct viewer *v)
{
	char byte;
	ssize_t n = recv(v->fd, &byte, 1, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	viewer_close(s, v);
}

static int server_any_behind(const viewer_server_t *s)
{
	for (const struct viewer *v = s->viewers; v; v = v->next)
		if (v->cur)
			return 1;
	return 0;
}

static void *server_main(void *arg)
{
	viewer_server_t *s = arg;
	struct epoll_event ev[32];

	while (!s->stopping) {
		int timeout, n;

		if (!s->board_closed && live_board_closed(s->board))
			s->board_closed = 1; /* no generation comes any more */
		server_resume_listen(s);
		if (s->listen_paused) {
			timeout = VIEWER_TICK_MS; /* to try the listener again */
		} else if (!s->viewers || s->board_closed) {
			timeout = -1;
		} else if (server_any_behind(s)) {
			timeout = VIEWER_TICK_MS;
		} else {
			s->seen = live_board_wait(s->board, s->seen, VIEWER_TICK_MS);
			timeout = 0;
		}
		n = epoll_wait(s->epoll_fd, ev, (int)(sizeof(ev) / sizeof(ev[0])), timeout);
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;

			if (p == &s->wake_fd) {
				s->stopping = 1;
			} else if (p == &s->listen_fd) {
				server_accept(s);
			} else if (ev[i].events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP | EPOLLIN)) {
				viewer_readable(s, p);
			} else if (ev[i].events & EPOLLOUT) {
				viewer_flush(s, p);
			}
		}
		if (s->stopping)
			break;
		/* A look at the board without waiting (it may have moved while the
		 * thread waited on its sockets), then every viewer gets its due. */
		s->seen = live_board_wait(s->board, s->seen, 0);
		for (struct viewer *v = s->viewers, *next; v; v = next) {
			next = v->next;
			viewer_notice(s, v, s->seen);
			viewer_flush(s, v);
		}
	}
	return NULL;
}

static int folder_check(const char *path, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!slash) {
		snprintf(dir, sizeof(dir), ".");
	} else if (slash == path) {
		snprintf(dir, sizeof(dir), "/");
	} else {
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
	}
	if (stat(dir, &st) < 0) {
		int e = errno;

		snprintf(err, errlen, "viewer socket folder %s: %s", dir, strerror(e));
		return -e;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "viewer socket folder %s is not a folder", dir);
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid()) {
		snprintf(
		    err, errlen,
		    "viewer socket folder %s belongs to user %u, not to you (%u): use a folder of your own, mode 0700",
		    dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (st.st_mode & 0077) {
		snprintf(err, errlen,
			 "viewer socket folder %s has mode %04o: other users could reach the socket; make it 0700 "
			 "(chmod 700 %s)",
			 dir, (unsigned)(st.st_mode & 07777), dir);
		return -EPERM;
	}
	return 0;
}

/* -EADDRINUSE when a live server answers at addr (wire_listen would take
 * the path from it: it replaces a socket file, stale or not). */
static int socket_in_use(const struct wire_address *addr)
{
	const struct sockaddr_un *sun = (const struct sockaddr_un *)&addr->addr;
	struct stat st;
	int fd;

	if (lstat(sun->sun_path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return 0;
	if (wire_connect(addr, 1000, &fd) < 0)
		return 0;
	close(fd);
	return -EADDRINUSE;
}

int viewer_server_start(viewer_server_t **out, const char *path, live_board_t *board, char *err, size_t errlen)
{
	struct wire_address addr;
	viewer_server_t *s;
	struct epoll_event ev = {.events = EPOLLIN};
	int rc;

	*out = NULL;
	if (errlen)
		err[0] = '\0';
	if (strncmp(path, "unix:", 5) == 0)
		path += 5;
	if (path[0] == '@' || strncmp(path, "tcp:", 4) == 0) {
		snprintf(err, errlen, "viewer socket %s: only a unix socket in a folder of your own (a path) is served",
			 path);
		return -EINVAL;
	}
	rc = wire_address_parse(path, &addr);
	if (rc < 0) {
		snprintf(err, errlen, "viewer socket %s: %s", path,
			 rc == -ENAMETOOLONG ? "the path is too long for a unix socket" : "not a socket path");
		return rc;
	}
	rc = folder_check(path, err, errlen);
	if (rc < 0)
		return rc;
	rc = socket_in_use(&addr);
	if (rc < 0) {
		snprintf(err, errlen, "viewer socket %s is served by another session: give another path", path);
		return rc;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "viewer socket %s: out of memory", path);
		return -ENOMEM;
	}
	s->board = board;
	s->listen_fd = s->wake_fd = s->epoll_fd = -1;
	pthread_mutex_init(&s->mu, NULL);
	snprintf(s->path, sizeof(s->path), "%s", path);
	rc = wire_listen(&addr, &s->listen_fd);
	if (rc < 0) {
		snprintf(err, errlen, "viewer socket %s: %s", path, strerror(-rc));
		goto fail;
	}
	/* bind() made the file through the umask; the folder keeps others out
	 * meanwhile, and from here on the socket is the user's alone. */
	if (chmod(s->path, 0600) < 0 || fcntl(s->listen_fd, F_SETFL, O_NONBLOCK) < 0) {
		rc = -errno;
		snprintf(err, errlen, "viewer socket %s: %s", path, strerror(-rc));
		goto fail;
	}
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (s->wake_fd < 0 || s->epoll_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "viewer socket %s: %s", path, strerror(-rc));
		goto fail;
	}
	ev.data.ptr = &s->listen_fd;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &ev) < 0)
		goto fail_errno;
	ev.data.ptr = &s->wake_fd;
	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->wake_fd, &ev) < 0)
		goto fail_errno;
	rc = -pthread_create(&s->thread, NULL, server_main, s);
	if (rc < 0) {
		snprintf(err, errlen, "viewer socket %s: no thread: %s", path, strerror(-rc));
		goto fail;
	}
	s->thread_started = 1;
	*out = s;
	return 0;
fail_errno:
	rc = -errno;
	snprintf(err, errlen, "viewer socket %s: %s", path, strerror(-rc));
fail:
	viewer_server_stop(s);
	return rc;
}

void viewer_server_stats(viewer_server_t *s, struct viewer_stats *out)
{
	pthread_mutex_lock(&s->mu);
	*out = s->stats;
	pthread_mutex_unlock(&s->mu);
}

void viewer_server_stop(viewer_server_t *s)
{
	if (!s)
		return;
	if (s->thread_started) {
		uint64_t one = 1;

		ssize_t n;

		/* The thread notices within VIEWER_TICK_MS when it waits on the
		 * board, at once when it waits on its sockets. Adding 1 to an
		 * eventfd fails only at a counter of 2^64 - 2: never here. */
		n = write(s->wake_fd, &one, sizeof(one));
		(void)n;
		pthread_join(s->thread, NULL);
	}
	while (s->viewers)
		viewer_close(s, s->viewers);
	snap_unref(s->latest);
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		unlink(s->path);
	}
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	if (s->epoll_fd >= 0)
		close(s->epoll_fd);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
