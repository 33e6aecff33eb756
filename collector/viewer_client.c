/*
 * viewer_client.c - the client side of the viewer protocol (viewer.h):
 * snapshot lines read from a session's viewer socket, for `top --connect`
 * and the tests.
 */
#include "collector/viewer.h"

#include "common/clock.h"
#include "common/wire.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The longest snapshot line a client takes: a rank with a full strip,
 * window and communicators renders to about 94 kB, so this is some 2,800
 * such ranks (docs/live.md, "Size"). */
#define VIEWER_LINE_MAX (256u << 20)

struct viewer_client {
	int fd;
	char *buf;
	size_t len, cap;
	size_t consumed; /* bytes of buf handed out by the previous next() */
	int eof;
};

int viewer_client_connect(viewer_client_t **out, const char *address)
{
	struct wire_address addr;
	viewer_client_t *c;
	int rc, fd;

	*out = NULL;
	rc = wire_address_parse(address, &addr);
	if (rc < 0)
		return rc;
	if (addr.family != AF_UNIX)
		return -EINVAL;
	rc = wire_connect(&addr, 10000, &fd);
	if (rc < 0)
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->fd = fd;
	*out = c;
	return 0;
}

/* The line at buf[0..n) is a snapshot of this protocol: it starts with the
 * schema field, as the server writes it. */
static int client_line_ok(const char *line, size_t n)
{
	static const char prefix[] = "{\"schema\":\"" VIEWER_PROTOCOL "\"";
	size_t p = sizeof(prefix) - 1;

	return n > p && memcmp(line, prefix, p) == 0 && (line[p] == ',' || line[p] == '}') && line[n - 1] == '}';
}

int viewer_client_next(viewer_client_t *c, const char **json, size_t *len, int timeout_ms)
{
	int64_t deadline = timeout_ms >= 0 ? clock_mono_ms() + timeout_ms : 0;

	if (c->consumed) {
		memmove(c->buf, c->buf + c->consumed, c->len - c->consumed);
		c->len -= c->consumed;
		c->consumed = 0;
	}
	for (size_t scanned = 0;;) {
		char *nl = c->len > scanned ? memchr(c->buf + scanned, '\n', c->len - scanned) : NULL;
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		ssize_t n;
		int wait, r;

		if (nl) {
			size_t n_line = (size_t)(nl - c->buf);

			c->consumed = n_line + 1;
			if (!client_line_ok(c->buf, n_line))
				return -EPROTO;
			*nl = '\0';
			*json = c->buf;
			*len = n_line;
			return 1;
		}
		scanned = c->len;
		if (c->eof)
			return -EPIPE; /* a half line at the end is no snapshot */
		if (c->len >= VIEWER_LINE_MAX)
			return -EPROTO;
		if (c->cap - c->len < 65536) {
			size_t cap = c->cap ? c->cap * 2 : 1u << 20;
			char *b = realloc(c->buf, cap);

			if (!b)
				return -ENOMEM;
			c->buf = b;
			c->cap = cap;
		}
		wait = -1;
		if (timeout_ms >= 0) {
			int64_t left = deadline - clock_mono_ms();

			wait = left > 0 ? (int)left : 0;
		}
		r = poll(&pfd, 1, wait);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return 0;
		n = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
		if (n > 0)
			c->len += (size_t)n;
		else if (n == 0 || (errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK))
			c->eof = 1;
	}
}

void viewer_client_close(viewer_client_t *c)
{
	if (!c)
		return;
	close(c->fd);
	free(c->buf);
	free(c);
}
