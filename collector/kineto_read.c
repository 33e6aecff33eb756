/*
 * kineto_read.c - the top level of a Kineto trace (kineto_file.h): the
 * document's object, the job's metadata (distributedInfo with its
 * pg_config, deviceProperties[0], baseTimeNanoseconds, schemaVersion,
 * traceName), the entry points and the sniffer. traceEvents is
 * kineto_parse.c's.
 *
 * A metadata value of the wrong type (a rank that is a string, a
 * pg_config that is an object) is skipped and left absent (KINETO_NONE,
 * string id 0): the events can still be read, and the caller says what is
 * missing. Only the JSON grammar makes such a file unreadable.
 */
#include "collector/kineto_parse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the job's metadata ---- */

/* An integer where one is expected, else the value skipped: 1 read, 0 not, -1. */
static int meta_int(struct kparse *p, int64_t *out)
{
	if (!kparse_number_start(kparse_peek(p)))
		return kscan_skip(&p->s);
	struct kscan_number n;
	const char *why;
	if (kscan_number(&p->s, &n) < 0)
		return -1;
	return kscan_number_int(&n, out, &why) == 0;
}

static int meta_string(struct kparse *p, uint32_t *id)
{
	if (kparse_peek(p) != '"')
		return kscan_skip(&p->s);
	struct kscan_slice v;
	if (kscan_string(&p->s, &v, 1) < 0)
		return -1;
	if (kineto_file_intern(p->f, v.text, v.len, id) < 0)
		return kparse_nomem(p);
	return 0;
}

static int meta_int32(struct kparse *p, int32_t *out)
{
	int64_t v;
	int r = meta_int(p, &v);
	if (r > 0 && v >= INT32_MIN && v <= INT32_MAX)
		*out = (int32_t)v;
	return r < 0 ? -1 : 0;
}

static int pg_entry(struct kparse *p)
{
	struct kineto_pg pg = {.size = KINETO_NONE};
	struct keyset *ks = &p->keys[3];
	struct kscan_slice key;
	int r;
	if (kparse_peek(p) != '{')
		return kscan_skip(&p->s);
	if (kparse_object_begin(p, ks) < 0)
		return -1;
	while ((r = kparse_object_next(p, ks, &key)) > 0) {
		if (KEY_IS(key, "pg_name"))
			r = meta_string(p, &pg.name);
		else if (KEY_IS(key, "pg_desc"))
			r = meta_string(p, &pg.desc);
		else if (KEY_IS(key, "pg_size"))
			r = meta_int32(p, &pg.size);
		else if (KEY_IS(key, "ranks")) {
			struct text_ref t = {0};
			p->slen = 0;
			const char *bad;
			r = kparse_ranks(p, &t, &bad);
			if (r == 0 && kparse_intern(p, &t, &pg.ranks) < 0)
				return -1;
		} else
			r = kscan_skip(&p->s);
		if (r < 0)
			return -1;
	}
	if (r < 0)
		return -1;
	if (kineto_file_add_pg(p->f, &pg) < 0)
		return kparse_nomem(p);
	return 0;
}

static int distributed_info(struct kparse *p)
{
	struct kineto_meta *m = kineto_file_meta_mut(p->f);
	struct keyset *ks = &p->keys[1];
	struct kscan_slice key;
	int r, count = 0;
	if (kparse_peek(p) != '{')
		return kscan_skip(&p->s);
	m->have_distributed = 1;
	if (kparse_object_begin(p, ks) < 0)
		return -1;
	while ((r = kparse_object_next(p, ks, &key)) > 0) {
		if (KEY_IS(key, "rank"))
			r = meta_int32(p, &m->rank);
		else if (KEY_IS(key, "world_size"))
			r = meta_int32(p, &m->world_size);
		else if (KEY_IS(key, "backend"))
			r = meta_string(p, &m->backend);
		else if (KEY_IS(key, "nccl_version"))
			r = meta_string(p, &m->nccl_version);
		else if (KEY_IS(key, "pg_config") && kparse_peek(p) == '[') {
			if (kparse_enter(p) < 0)
				return -1;
			count = 0;
			while ((r = kparse_array_next(p, &count)) > 0)
				if (pg_entry(p) < 0)
					return -1;
		} else
			r = kscan_skip(&p->s);
		if (r < 0)
			return -1;
	}
	return r;
}

static int device_properties(struct kparse *p)
{
	struct kineto_meta *m = kineto_file_meta_mut(p->f);
	int count = 0, r;
	if (kparse_peek(p) != '[')
		return kscan_skip(&p->s);
	if (kparse_enter(p) < 0)
		return -1;
	while ((r = kparse_array_next(p, &count)) > 0) {
		if (count > 1 || kparse_peek(p) != '{') {
			if (kscan_skip(&p->s) < 0)
				return -1;
			continue;
		}
		struct keyset *ks = &p->keys[1];
		struct kscan_slice key;
		if (kparse_object_begin(p, ks) < 0)
			return -1;
		while ((r = kparse_object_next(p, ks, &key)) > 0) {
			if (KEY_IS(key, "name"))
				r = meta_string(p, &m->device_name);
			else if (KEY_IS(key, "numSms"))
				r = meta_int32(p, &m->device_sms);
			else if (KEY_IS(key, "totalGlobalMem")) {
				int64_t v;
				r = meta_int(p, &v);
				if (r > 0)
					m->device_memory = v;
			} else
				r = kscan_skip(&p->s);
			if (r < 0)
				return -1;
		}
		if (r < 0)
			return -1;
	}
	return r;
}

static int top_value(struct kparse *p, struct kscan_slice key)
{
	struct kineto_meta *m = kineto_file_meta_mut(p->f);
	int64_t v;
	int r;
	if (KEY_IS(key, "traceEvents")) {
		if (kparse_peek(p) == '[')
			return kparse_trace_events(p);
		p->not_trace = 1;
		snprintf(p->not_trace_why, sizeof(p->not_trace_why), "traceEvents is not an array");
		return kscan_skip(&p->s);
	}
	if (KEY_IS(key, "distributedInfo"))
		return distributed_info(p);
	if (KEY_IS(key, "deviceProperties"))
		return device_properties(p);
	if (KEY_IS(key, "traceName"))
		return meta_string(p, &m->trace_name);
	if (KEY_IS(key, "baseTimeNanoseconds")) {
		if ((r = meta_int(p, &v)) > 0)
			m->have_base_time = 1, m->base_time_ns = v;
		return r < 0 ? -1 : 0;
	}
	if (KEY_IS(key, "schemaVersion")) {
		if ((r = meta_int(p, &v)) > 0)
			m->schema_version = v;
		return r < 0 ? -1 : 0;
	}
	return kscan_skip(&p->s);
}

static int document(struct kparse *p)
{
	struct kscan *s = &p->s;
	int c = kscan_ws(s);
	if (c == 0xef) { /* a UTF-8 byte order mark */
		for (const char *bom = "\xef\xbb\xbf"; *bom; bom++) {
			if (kscan_peek(s) != (unsigned char)*bom)
				return kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "not JSON: a bad byte order mark");
			s->pos++;
		}
		c = kscan_ws(s);
	}
	if (c < 0) {
		if (s->failed)
			return -1;
		p->not_trace = 1;
		snprintf(p->not_trace_why, sizeof(p->not_trace_why), "the file is empty");
		return 0;
	}
	if (c != '{') {
		if (c == '[' || c == '"' || kparse_number_start(c)) {
			p->not_trace = 1;
			snprintf(p->not_trace_why, sizeof(p->not_trace_why), "JSON, but not an object with traceEvents");
			return 0;
		}
		return kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "not JSON: expected '{', found byte 0x%02x", c);
	}
	struct keyset *ks = &p->keys[0];
	struct kscan_slice key;
	int r;
	if (kparse_object_begin(p, ks) < 0)
		return -1;
	while ((r = kparse_object_next(p, ks, &key)) > 0)
		if (top_value(p, key) < 0)
			return -1;
	if (r < 0)
		return -1;
	c = kscan_ws(s);
	if (c >= 0)
		return kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "bytes after the end of the trace's object");
	if (s->failed)
		return -1;
	if (!p->saw_events && !p->not_trace) {
		p->not_trace = 1;
		snprintf(p->not_trace_why, sizeof(p->not_trace_why), "no traceEvents array");
	}
	if (s->gzip_cut)
		return kscan_fail(s, KINETO_READ_TRUNCATED, kscan_offset(s), "the gzip stream is cut after the trace's end");
	return 0;
}

int kineto_file_read_fd_chunk(int fd, size_t chunk, kineto_file_t **out, struct kineto_read_info *info)
{
	struct kparse p = {0};
	*out = NULL;
	memset(info, 0, sizeof(*info));
	p.info = info;
	p.f = kineto_file_new();
	if (!p.f)
		return -ENOMEM;
	if (kscan_open(&p.s, fd, chunk) < 0) {
		kineto_file_free(p.f);
		return -ENOMEM;
	}
	document(&p);
	int rc = 0;
	if (p.nomem) {
		rc = -ENOMEM;
	} else if (p.s.failed) {
		info->status = p.s.status;
		info->error = p.s.error;
		info->offset = p.s.error_offset;
		snprintf(info->message, sizeof(info->message), "%s", p.s.message);
	} else {
		info->offset = kscan_offset(&p.s);
		if (p.not_trace) {
			info->status = KINETO_READ_NOT_TRACE;
			snprintf(info->message, sizeof(info->message), "not a Chrome trace: %s", p.not_trace_why);
		}
	}
	info->compressed = p.s.compressed;
	info->gzip = p.s.gz != NULL;
	kscan_close(&p.s);
	for (size_t i = 0; i < sizeof(p.keys) / sizeof(p.keys[0]); i++)
		kparse_keyset_free(&p.keys[i]);
	free(p.scratch);
	if (rc < 0) {
		kineto_file_free(p.f);
		return rc;
	}
	*out = p.f;
	return 0;
}

int kineto_file_read_fd(int fd, const char *name, kineto_file_t **out, struct kineto_read_info *info)
{
	(void)name;
	return kineto_file_read_fd_chunk(fd, 0, out, info);
}

int kineto_file_read(const char *path, kineto_file_t **out, struct kineto_read_info *info)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = kineto_file_read_fd_chunk(fd, 0, out, info);
	close(fd);
	return rc;
}

int kineto_sniff(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct kscan s;
	/* a small read: the first bytes of the text are enough */
	if (kscan_open(&s, fd, 4096) < 0) {
		close(fd);
		return -ENOMEM;
	}
	int c = kscan_ws(&s);
	if (c == 0xef) {
		int bom_ok = 1;
		for (const unsigned char *bom = (const unsigned char *)"\xef\xbb\xbf"; *bom && bom_ok; bom++) {
			bom_ok = kscan_peek(&s) == *bom;
			s.pos++;
		}
		c = bom_ok ? kscan_ws(&s) : -1;
	}
	int rc = s.failed && s.status == KINETO_READ_IO ? -s.error : c == '{';
	kscan_close(&s);
	close(fd);
	return rc;
}
