/*
 * agent_core_trace.c - trace summaries and a stand-in collector socket for
 * the agent tests (see agent_core_trace.h).
 */
#include "tests/unit/agent_core_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/wire.h"

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 64;
	void *p = realloc(*arr, ncap * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

static int on_header(void *ctx, const struct fss_file_header *h)
{
	struct trace_summary *s = ctx;

	s->header_seen = 1;
	s->header_flags = h->flags;
	return 0;
}

static int on_record(void *ctx, const struct fss_record_head *rec)
{
	struct trace_summary *s = ctx;

	if (rec->source == FSS_SOURCE_NONE)
		return 0; /* the trace writer's trace_end: the file's, not the agent's */
	if (s->records == 0)
		s->first_is_hello = rec->type == FSS_REC_PROCESS_HELLO;
	s->records++;
	if ((int)rec->source + 1 > s->max_sources)
		s->max_sources = (int)rec->source + 1;
	if (rec->type < FSS_REC_TYPE_MAX)
		s->by_type[rec->type]++;
	s->last_type = rec->type;
	s->end_is_last = rec->type == FSS_REC_PROCESS_END;
	switch (rec->type) {
	case FSS_REC_PROCESS_HELLO:
		if (s->by_type[FSS_REC_PROCESS_HELLO] == 1)
			memcpy(&s->hello, rec, sizeof(s->hello));
		break;
	case FSS_REC_STRING:
		return strtab_add_part(s->strings, (const struct fss_rec_string *)rec) ? -1 : 0;
	case FSS_REC_COLLECTIVE:
		if (grow((void **)&s->colls, &s->colls_cap, s->ncolls, sizeof(*s->colls)))
			return -1;
		memcpy(&s->colls[s->ncolls++], rec, sizeof(*s->colls));
		break;
	case FSS_REC_COMM:
		if (grow((void **)&s->comms, &s->comms_cap, s->ncomms, sizeof(*s->comms)))
			return -1;
		memcpy(&s->comms[s->ncomms++], rec, sizeof(*s->comms));
		break;
	case FSS_REC_GROUP:
		if (grow((void **)&s->groups, &s->groups_cap, s->ngroups, sizeof(*s->groups)))
			return -1;
		memcpy(&s->groups[s->ngroups++], rec, sizeof(*s->groups));
		break;
	case FSS_REC_DROPS:
		s->have_drops = 1;
		memcpy(&s->drops, rec, sizeof(s->drops));
		break;
	case FSS_REC_PROCESS_END:
		s->have_end = 1;
		memcpy(&s->end, rec, sizeof(s->end));
		break;
	default:
		break;
	}
	return 0;
}

static const struct trace_parser_ops summary_ops = {
    .on_header = on_header,
    .on_record = on_record,
};

int summary_init(struct trace_summary *s)
{
	memset(s, 0, sizeof(*s));
	s->strings = strtab_new();
	s->parser = trace_parser_new(&summary_ops, s);
	if (!s->strings || !s->parser) {
		summary_free(s);
		return -ENOMEM;
	}
	return 0;
}

void summary_free(struct trace_summary *s)
{
	trace_parser_free(s->parser);
	strtab_free(s->strings);
	free(s->colls);
	free(s->comms);
	free(s->groups);
	memset(s, 0, sizeof(*s));
}

int summary_feed(struct trace_summary *s, const void *data, size_t len)
{
	return trace_parser_feed(s->parser, data, len);
}

int summary_finish(struct trace_summary *s)
{
	return trace_parser_finish(s->parser);
}

int summary_read_file(struct trace_summary *s, const char *path)
{
	char buf[65536];
	int fd, err;

	err = summary_init(s);
	if (err)
		return err;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0) {
			err = summary_finish(s);
			break;
		}
		err = summary_feed(s, buf, (size_t)n);
		if (err)
			break;
	}
	close(fd);
	return err;
}

const char *summary_string(const struct trace_summary *s, uint32_t id)
{
	return strtab_get(s->strings, 0, id);
}

size_t summary_count_op(const struct trace_summary *s, uint8_t op)
{
	size_t n = 0;

	for (size_t i = 0; i < s->ncolls; i++)
		n += s->colls[i].op == op;
	return n;
}

int listener_open(const char *dir, const char *name, char *addr, size_t addrlen, int *fd)
{
	struct wire_address a;
	int err;

	if ((size_t)snprintf(addr, addrlen, "unix:%s/%s", dir, name) >= addrlen)
		return -ENAMETOOLONG;
	err = wire_address_parse(addr, &a);
	if (err)
		return err;
	return wire_listen(&a, fd);
}

int listener_accept(int lfd, int timeout_ms)
{
	struct pollfd p = {.fd = lfd, .events = POLLIN};
	int n;

	do
		n = poll(&p, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return -ETIMEDOUT;
	if (n < 0)
		return -errno;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

long listener_read_available(int fd, struct trace_summary *s)
{
	char buf[65536];
	long total = 0;

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return total;
		if (n < 0)
			return -errno;
		if (n == 0)
			return total ? total : -1;
		if (summary_feed(s, buf, (size_t)n))
			return -EPROTO;
		total += n;
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int listener_read_to_eof(int fd, struct trace_summary *s, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	char buf[65536];

	for (;;) {
		uint64_t now = now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int n = poll(&p, 1, (int)(deadline - now));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
		ssize_t got = recv(fd, buf, sizeof(buf), 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return errno == ECONNRESET ? 0 : -errno;
		if (got == 0)
			return 0;
		if (summary_feed(s, buf, (size_t)got))
			return -EPROTO;
	}
}
