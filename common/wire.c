/*
 * wire.c - socket addresses and connections.
 */
#include "common/wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static int parse_unix(const char *path, struct wire_address *out)
{
	struct sockaddr_un *sun = (struct sockaddr_un *)&out->addr;
	size_t len = strlen(path);

	if (len == 0)
		return -EINVAL;
	if (len >= sizeof(sun->sun_path))
		return -ENAMETOOLONG;
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, path, len);
	if (path[0] == '@') {
		/* Abstract namespace: a leading NUL, length counts exactly. */
		sun->sun_path[0] = '\0';
		out->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	} else {
		out->len = (socklen_t)sizeof(*sun);
	}
	out->family = AF_UNIX;
	return 0;
}

static int parse_tcp(const char *hostport, struct wire_address *out)
{
	char host[64];
	const char *colon;
	char *end;
	long port;
	size_t hlen;

	if (hostport[0] == '[') {
		const char *close = strchr(hostport, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		hlen = (size_t)(close - hostport - 1);
		if (hlen >= sizeof(host))
			return -EINVAL;
		memcpy(host, hostport + 1, hlen);
		colon = close + 1;
	} else {
		colon = strrchr(hostport, ':');
		if (!colon)
			return -EINVAL;
		hlen = (size_t)(colon - hostport);
		if (hlen >= sizeof(host))
			return -EINVAL;
		memcpy(host, hostport, hlen);
	}
	host[hlen] = '\0';
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || port < 1 || port > 65535)
		return -EINVAL;
	if (strcmp(host, "localhost") == 0)
		strcpy(host, "127.0.0.1");
	struct sockaddr_in *sin = (struct sockaddr_in *)&out->addr;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->addr;

	if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		out->len = sizeof(*sin);
		out->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		out->len = sizeof(*sin6);
		out->family = AF_INET6;
		return 0;
	}
	return -EINVAL; /* names are not resolved: a guest makes no DNS calls */
}

int wire_address_parse(const char *text, struct wire_address *out)
{
	memset(out, 0, sizeof(*out));
	if (!text || strlen(text) >= sizeof(out->text))
		return -EINVAL;
	snprintf(out->text, sizeof(out->text), "%s", text);
	if (strncmp(text, "unix:", 5) == 0)
		return parse_unix(text + 5, out);
	if (strncmp(text, "tcp:", 4) == 0) {
		char hostport[sizeof(out->text)];
		const char *key = strstr(text, ",key=");

		snprintf(hostport, sizeof(hostport), "%s", text + 4);
		if (key) {
			hostport[key - (text + 4)] = '\0';
			if (key[5] != '/' || strlen(key + 5) >= sizeof(out->key_path))
				return -EINVAL;
			snprintf(out->key_path, sizeof(out->key_path), "%s", key + 5);
		}
		return parse_tcp(hostport, out);
	}
	if (text[0] == '/')
		return parse_unix(text, out);
	return -EINVAL;
}

int wire_listen(const struct wire_address *addr, int *fd)
{
	const struct sockaddr_un *sun = (const struct sockaddr_un *)&addr->addr;
	int s, one = 1;

	*fd = -1;
	s = socket(addr->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (addr->family == AF_UNIX && sun->sun_path[0]) {
		struct stat st;

		/* Replace a stale socket left by a collector that died, never a
		 * regular file that happens to have the name. */
		if (lstat(sun->sun_path, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(sun->sun_path);
	} else if (addr->family != AF_UNIX) {
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	}
	if (bind(s, (const struct sockaddr *)&addr->addr, addr->len) < 0 || listen(s, SOMAXCONN) < 0) {
		int err = -errno;

		close(s);
		return err;
	}
	*fd = s;
	return 0;
}

/*
 * A unix connect is not asynchronous: on a non-blocking socket a listener
 * whose backlog is full gives EAGAIN and leaves the socket unconnected
 * (though writable to poll). A blocking connect waits for room in the
 * backlog, and SO_SNDTIMEO bounds that wait.
 */
static int connect_unix(const struct wire_address *addr, int timeout_ms, int *fd)
{
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	struct timeval none = {0, 0};
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), err;

	if (s < 0)
		return -errno;
	if (timeout_ms <= 0)
		tv.tv_usec = 1000; /* SO_SNDTIMEO 0 would wait for ever */
	if (setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		goto fail;
	while (connect(s, (const struct sockaddr *)&addr->addr, addr->len) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EINPROGRESS)
			errno = ETIMEDOUT;
		goto fail;
	}
	if (setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none)) < 0)
		goto fail;
	*fd = s;
	return 0;
fail:
	err = -errno;
	close(s);
	return err;
}

int wire_connect(const struct wire_address *addr, int timeout_ms, int *fd)
{
	int s, flags, err = 0;

	*fd = -1;
	if (addr->family == AF_UNIX)
		return connect_unix(addr, timeout_ms, fd);
	s = socket(addr->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (const struct sockaddr *)&addr->addr, addr->len) < 0) {
		if (errno != EINPROGRESS && errno != EAGAIN) {
			err = -errno;
			goto fail;
		}
		struct pollfd pfd = {.fd = s, .events = POLLOUT};
		int n;
		socklen_t len = sizeof(err);

		do
			n = poll(&pfd, 1, timeout_ms);
		while (n < 0 && errno == EINTR);
		if (n == 0) {
			err = -ETIMEDOUT;
			goto fail;
		}
		if (n < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
			err = -errno;
			goto fail;
		}
		if (err) {
			err = -err;
			goto fail;
		}
	}
	flags = fcntl(s, F_GETFL);
	if (flags < 0 || fcntl(s, F_SETFL, flags & ~O_NONBLOCK) < 0) {
		err = -errno;
		goto fail;
	}
	*fd = s;
	return 0;
fail:
	close(s);
	return err;
}

/* ---- connection keys ---------------------------------------------------------- */

static const char hex_digits[] = "0123456789abcdef";

int wire_key_create(const char *path, unsigned char key[WIRE_KEY_BYTES])
{
	char text[2 * WIRE_KEY_BYTES + 1];
	size_t got = 0;
	int fd, err = 0;

	while (got < WIRE_KEY_BYTES) {
		ssize_t r = getrandom(key + got, WIRE_KEY_BYTES - got, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)r;
	}
	for (size_t i = 0; i < WIRE_KEY_BYTES; i++) {
		text[2 * i] = hex_digits[key[i] >> 4];
		text[2 * i + 1] = hex_digits[key[i] & 15];
	}
	text[2 * WIRE_KEY_BYTES] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0600) < 0 || write(fd, text, sizeof(text)) != (ssize_t)sizeof(text))
		err = errno ? -errno : -EIO;
	if (close(fd) < 0 && !err)
		err = -errno;
	if (err)
		unlink(path);
	return err;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int wire_key_load(const char *path, unsigned char key[WIRE_KEY_BYTES])
{
	char text[2 * WIRE_KEY_BYTES + 2];
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return errno == ELOOP ? -EPERM : -errno;
	if (fstat(fd, &st) < 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(fd);
		return -EPERM;
	}
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n < 2 * WIRE_KEY_BYTES)
		return -EINVAL;
	for (size_t i = 0; i < WIRE_KEY_BYTES; i++) {
		int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		key[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

void wire_key_hello(const unsigned char key[WIRE_KEY_BYTES], unsigned char out[WIRE_KEY_HELLO_BYTES])
{
	memcpy(out, WIRE_KEY_MAGIC, 8);
	memcpy(out + 8, key, WIRE_KEY_BYTES);
}

int wire_key_check(const unsigned char key[WIRE_KEY_BYTES], const unsigned char got[WIRE_KEY_HELLO_BYTES])
{
	unsigned char want[WIRE_KEY_HELLO_BYTES];
	unsigned diff = 0;

	wire_key_hello(key, want);
	for (size_t i = 0; i < WIRE_KEY_HELLO_BYTES; i++)
		diff |= (unsigned)(want[i] ^ got[i]);
	return diff == 0;
}
