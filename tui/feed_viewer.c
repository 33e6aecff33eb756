/*
 * feed_viewer.c - `fsdpscope top --connect ADDR`: the views of a running
 * session, read from its viewer socket (collector/viewer.h, protocol
 * fsdpscope.live/2) and decoded back into struct live_view (tui/feeds.h).
 *
 * A thread of the feed reads the snapshot lines and puts each decoded view
 * on a board of its own, so the dashboard reads a connected session the way
 * it reads a session of its own process. The session never waits for us:
 * it skips snapshots a slow reader cannot take (the viewer endpoint's
 * rule), and so do we, by taking only the latest from the board.
 *
 * The decoding is strict: jansson with JSON_REJECT_DUPLICATES, every field
 * the schema requires present with its type; a line that fails is an
 * error the screen shows, never a view half filled. Which fields there are,
 * where each goes and what a null stands for is the live field table's
 * (collector/live_fields.h), the one the session's renderer writes from.
 */
#include "tui/feed_thread.h"
#include "common/text_buffer.h"
#include "tui/feeds.h"

#include "collector/live_fields.h"
#include "collector/viewer.h"
#include "common/error.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* How long a viewer socket has to send its first snapshot (it sends one at once). */
#define VIEWER_FIRST_MS 5000
/* One read's wait: how soon the thread sees the feed stopping. */
#define VIEWER_READ_MS 200

/* ---- decoding -------------------------------------------------------------- */

struct dec {
	char *err;
	size_t errlen;
	int failed;
	char path[160]; /* where in the snapshot: "ranks[2].last_step" */
};

static int fail(struct dec *d, const char *key, const char *why)
{
	if (!d->failed)
		snprintf(d->err, d->errlen, "%s%s%s: %s", d->path, d->path[0] && key ? "." : "", key ? key : "", why);
	d->failed = 1;
	return -EPROTO;
}

/* Enter member `key` (or element i when key is NULL) of the path; returns the old length. */
static size_t push(struct dec *d, const char *key, size_t i)
{
	size_t n = strlen(d->path);

	if (key)
		snprintf(d->path + n, sizeof(d->path) - n, "%s%s", n ? "." : "", key);
	else
		snprintf(d->path + n, sizeof(d->path) - n, "[%zu]", i);
	return n;
}

static void pop(struct dec *d, size_t n)
{
	d->path[n] = '\0';
}

static json_t *member(struct dec *d, json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		fail(d, key, "missing");
	return v;
}

/* Member `key` when it is there and not null; *is_null tells a null, which
 * fails unless allowed ("null where a <what> is required"). */
static json_t *member_value(struct dec *d, json_t *o, const char *key, int nullable, const char *what, int *is_null)
{
	json_t *v = member(d, o, key);

	*is_null = v && json_is_null(v);
	if (!*is_null)
		return v;
	if (!nullable) {
		char why[64];

		snprintf(why, sizeof(why), "null where a %s is required", what);
		fail(d, key, why);
	}
	return NULL;
}

/* An unsigned integer; null gives `null_value` when allowed. */
static uint64_t get_u64n(struct dec *d, json_t *o, const char *key, int nullable, uint64_t null_value)
{
	int is_null;
	json_t *v = member_value(d, o, key, nullable, "number", &is_null);

	if (!v)
		return is_null ? null_value : 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		/* jansson keeps integers as long long: beyond that they come as reals */
		if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) < 18446744073709551616.0)
			return (uint64_t)json_real_value(v);
		fail(d, key, "expected an integer of 0 or more");
		return 0;
	}
	return (uint64_t)json_integer_value(v);
}

static int64_t get_i64n(struct dec *d, json_t *o, const char *key, int nullable, int64_t null_value)
{
	int is_null;
	json_t *v = member_value(d, o, key, nullable, "number", &is_null);

	if (!v)
		return is_null ? null_value : 0;
	if (!json_is_integer(v)) {
		fail(d, key, "expected an integer");
		return 0;
	}
	return (int64_t)json_integer_value(v);
}

static int get_bool(struct dec *d, json_t *o, const char *key)
{
	json_t *v = member(d, o, key);

	if (v && !json_is_boolean(v))
		fail(d, key, "expected true or false");
	return v && json_is_true(v);
}

/* A string into dst (cut to fit, the cut marked); null gives "" when allowed. Returns the string, or NULL. */
static const char *get_text(struct dec *d, json_t *o, const char *key, char *dst, size_t len, int nullable)
{
	int is_null;
	json_t *v = member_value(d, o, key, nullable, "string", &is_null);

	if (dst && len)
		dst[0] = '\0';
	if (!v)
		return NULL;
	if (!json_is_string(v)) {
		fail(d, key, "expected a string");
		return NULL;
	}
	if (dst && len)
		text_fit(dst, len, json_string_value(v)); /* a longer text than this build keeps: marked */
	return json_string_value(v);
}

static json_t *get_array(struct dec *d, json_t *o, const char *key)
{
	json_t *v = member(d, o, key);

	if (v && !json_is_array(v)) {
		fail(d, key, "expected an array");
		return NULL;
	}
	return v;
}

static json_t *get_object(struct dec *d, json_t *o, const char *key, int nullable)
{
	json_t *v = member(d, o, key);

	if (!v || (nullable && json_is_null(v)))
		return NULL;
	if (!json_is_object(v)) {
		fail(d, key, "expected an object");
		return NULL;
	}
	return v;
}

/* The number whose name(i) is `s`, for i in [0, max); -1 if none. */
static int name_to_int(const char *s, const char *(*name)(int), int max)
{
	for (int i = 0; s && i < max; i++)
		if (name(i) && !strcmp(name(i), s))
			return i;
	return -1;
}

/* A name of the schema's enumeration back into its number; `null_value` for null. */
static int get_enum(struct dec *d, json_t *o, const char *key, const char *(*name)(int), int max, int nullable,
		    int null_value)
{
	const char *s = get_text(d, o, key, NULL, 0, nullable);
	int v;

	if (!s)
		return null_value;
	v = name_to_int(s, name, max);
	if (v < 0) {
		char why[96];

		snprintf(why, sizeof(why), "unknown name \"%.40s\"", s);
		fail(d, key, why);
		return null_value;
	}
	return v;
}

static uint64_t get_hex(struct dec *d, json_t *o, const char *key)
{
	const char *s = get_text(d, o, key, NULL, 0, 0);
	char *end;
	uint64_t v;

	if (!s)
		return 0;
	errno = 0;
	v = strtoull(s, &end, 16);
	if (!*s || *end || errno)
		fail(d, key, "expected 16 hex digits");
	return v;
}

/* ---- the view's objects, by their tables (collector/live_fields.h) ------------ */

static void dec_fields(struct dec *d, json_t *o, const struct live_table *t, void *object, int parent_known);

/* An object of table t at `object`, started as the table says. */
static void dec_object(struct dec *d, json_t *o, const struct live_table *t, void *object)
{
	if (t->init)
		t->init(object);
	else
		memset(object, 0, t->size);
	dec_fields(d, o, t, object, 0);
}

/* The array's count is a field of its own (waiting_total): the snapshot's
 * figure, not the length of the list, which it may exceed. */
static int count_written(const struct live_table *t, const struct live_field *a)
{
	for (size_t i = 0; i < t->nfields; i++)
		if (t->fields[i].kind == LIVE_FIELD_UINT && t->fields[i].offset == a->count)
			return 1;
	return 0;
}

/* The elements of array field f of `object`: as many as there is room for
 * (a pointer: as many as the caller allocated, the list's length). */
static void dec_array(struct dec *d, json_t *o, const struct live_table *t, const struct live_field *f, void *object)
{
	json_t *a = get_array(d, o, f->name), *e;
	size_t i, n = 0, at, max, size = f->object ? f->object->size : f->size;
	char *base = (char *)object + f->offset;
	struct live_field count = {.kind = LIVE_FIELD_UINT, .offset = f->count, .size = f->count_size};
	struct live_field number = {.kind = LIVE_FIELD_INT, .size = f->size};

	if (!a)
		return;
	max = f->max ? f->max : json_array_size(a);
	if (!f->max)
		base = *(char **)base;
	at = push(d, f->name, 0);
	json_array_foreach(a, i, e)
	{
		size_t at2;

		if (n == max)
			break;
		at2 = push(d, NULL, i);
		if (f->object && !json_is_object(e)) {
			fail(d, NULL, "expected an object");
			pop(d, at2);
			break;
		}
		if (f->object) {
			dec_object(d, e, f->object, base + n * size);
		} else {
			if (!json_is_integer(e))
				fail(d, NULL, "expected an integer");
			live_field_set(base + n * size, &number, (int64_t)json_integer_value(e));
		}
		n++;
		pop(d, at2);
	}
	pop(d, at);
	if (!count_written(t, f))
		live_field_set_uint(object, &count, n);
}

static void dec_nested(struct dec *d, json_t *o, const struct live_field *f, void *object, int nullable)
{
	json_t *v = get_object(d, o, f->name, nullable);
	size_t at;

	if (!v)
		return;
	at = push(d, f->name, 0);
	if (f->kind == LIVE_FIELD_COMPOSED) {
		struct live_signature composed; /* the one composed object there is */

		dec_object(d, v, f->object, &composed);
		f->store(object, &composed);
	} else {
		dec_object(d, v, f->object, (char *)object + f->offset);
	}
	pop(d, at);
}

static void dec_field(struct dec *d, json_t *o, const struct live_table *t, const struct live_field *f, void *object,
		      int known)
{
	int nullable = live_field_nullable(f, known);

	/* added within fsdpscope.live/2: absent from a session of an older build */
	if (f->optional && !json_object_get(o, f->name))
		return;
	switch (f->kind) {
	case LIVE_FIELD_UINT:
		live_field_set_uint(object, f, get_u64n(d, o, f->name, nullable, (uint64_t)f->null_value));
		break;
	case LIVE_FIELD_INT:
		live_field_set(object, f, get_i64n(d, o, f->name, nullable, f->null_value));
		break;
	case LIVE_FIELD_BOOL:
		live_field_set(object, f, get_bool(d, o, f->name));
		break;
	case LIVE_FIELD_TEXT:
		get_text(d, o, f->name, (char *)object + f->offset, f->size, nullable);
		break;
	case LIVE_FIELD_ENUM:
		live_field_set(object, f,
			       get_enum(d, o, f->name, f->enum_name, f->enum_count, nullable, (int)f->null_value));
		break;
	case LIVE_FIELD_HEX:
		live_field_set_uint(object, f, get_hex(d, o, f->name));
		break;
	case LIVE_FIELD_DERIVED:
		(void)get_bool(d, o, f->name);
		break;
	case LIVE_FIELD_OBJECT:
	case LIVE_FIELD_COMPOSED:
		dec_nested(d, o, f, object, nullable);
		break;
	case LIVE_FIELD_ARRAY:
		dec_array(d, o, t, f, object);
		break;
	case LIVE_FIELD_CONST:
		break; /* the schema: checked first, by the caller */
	}
}

static void dec_fields(struct dec *d, json_t *o, const struct live_table *t, void *object, int parent_known)
{
	/* known again before each field: the job's "diagnosed" comes before the figures it governs */
	for (size_t i = 0; i < t->nfields; i++)
		dec_field(d, o, t, &t->fields[i], object, live_table_known(t, object, parent_known));
}

int top_viewer_decode(const char *json, size_t len, struct live_view **out, char *err, size_t errlen)
{
	struct dec d = {.err = err, .errlen = errlen};
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je), *ranks;
	struct live_view *v = NULL;
	const char *schema;
	size_t n;

	*out = NULL;
	if (errlen)
		err[0] = '\0';
	if (!root) {
		snprintf(err, errlen, "not JSON: %s (column %d)", je.text, je.column);
		return -EPROTO;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		snprintf(err, errlen, "not a snapshot: not a JSON object");
		return -EPROTO;
	}
	schema = get_text(&d, root, "schema", NULL, 0, 0);
	if (!schema || strcmp(schema, VIEWER_PROTOCOL)) {
		if (!d.failed)
			snprintf(err, errlen, "schema \"%.60s\", expected \"%s\"", schema, VIEWER_PROTOCOL);
		json_decref(root);
		return -EPROTO;
	}
	ranks = get_array(&d, root, "ranks");
	n = ranks ? json_array_size(ranks) : 0;
	v = calloc(1, sizeof(*v));
	if (v)
		v->ranks = calloc(n ? n : 1, sizeof(*v->ranks));
	if (!v || !v->ranks) {
		live_view_free(v);
		json_decref(root);
		return -ENOMEM;
	}
	/* ranks[] has room for the list: the table's decoder fills it */
	dec_fields(&d, root, &live_table_snapshot, v, 0);
	json_decref(root);
	if (d.failed) {
		live_view_free(v);
		return -EPROTO;
	}
	*out = v;
	return 0;
}

/* ---- the feed ---------------------------------------------------------------- */

struct top_viewer_feed {
	struct top_feed inner; /* bf's callbacks, first: top_feed_forward delegates to them */
	viewer_client_t *client;
	live_board_t *board;
	top_board_feed_t *bf;
	struct top_info info;
	struct live_view *first; /* decoded at connect, put on the board by the thread */
	pthread_t thread;
	int thread_started;
	pthread_mutex_t mu;
	int stopping;
};
static_assert(offsetof(struct top_viewer_feed, inner) == 0, "top_feed_forward needs the inner feed first");

static int stopping(top_viewer_feed_t *f)
{
	int s;

	pthread_mutex_lock(&f->mu);
	s = f->stopping;
	pthread_mutex_unlock(&f->mu);
	return s;
}

static void *viewer_thread(void *arg)
{
	top_viewer_feed_t *f = arg;

	live_board_put(f->board, f->first);
	f->first = NULL;
	while (!stopping(f)) {
		const char *line;
		size_t len;
		char why[200], how[160];
		struct live_view *v;
		int rc = viewer_client_next(f->client, &line, &len, VIEWER_READ_MS);

		if (rc == 0)
			continue;
		if (rc == -EPIPE) {
			/* The session has gone: its last view stays on the screen. */
			f->info.job_state = TOP_JOB_UNKNOWN;
			snprintf(f->info.how, sizeof(f->info.how), "the session ended (its viewer socket closed)");
			top_board_feed_set_info(f->bf, &f->info);
			break;
		}
		if (rc < 0) {
			snprintf(how, sizeof(how), "the session sent a line that is not a snapshot: %s",
				 fss_strerror(rc));
			top_board_feed_fail(f->bf, rc, how);
			break;
		}
		rc = top_viewer_decode(line, len, &v, why, sizeof(why));
		if (rc) {
			snprintf(how, sizeof(how), "a snapshot does not decode: %.120s", why);
			top_board_feed_fail(f->bf, rc, how);
			break;
		}
		live_board_put(f->board, v);
	}
	return NULL;
}

/* What to do about a viewer address that does not answer as one. */
static int connect_error(const char *address, int rc, char *err, size_t errlen)
{
	const char *path = strncmp(address, "unix:", 5) ? address : address + 5;
	struct stat st;

	if (stat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
		snprintf(err, errlen, "%s: not a viewer socket (not a socket at all)", path);
	else if (rc == -ENOENT)
		snprintf(
		    err, errlen,
		    "%s: no session there (no such socket): start one with 'fsdpscope collect' or 'fsdpscope run', "
		    "or give the viewer socket it printed",
		    path);
	else if (rc == -ECONNREFUSED)
		snprintf(err, errlen,
			 "%s: no session there (nothing listens on the socket: the session that made it has ended)",
			 path);
	else if (rc == -EACCES || rc == -EPERM)
		snprintf(
		    err, errlen,
		    "%s: permission denied: a session's viewer socket is its user's alone; run top as the user who "
		    "runs the session",
		    path);
	else if (rc == -ENOTSOCK)
		snprintf(err, errlen, "%s: not a viewer socket (not a socket at all)", path);
	else
		snprintf(err, errlen, "%s: %s", path, fss_strerror(rc));
	return rc;
}

int top_viewer_feed_new(top_viewer_feed_t **out, const char *address, char *err, size_t errlen)
{
	top_viewer_feed_t *f;
	const char *line;
	size_t len;
	char why[200];
	int rc;

	*out = NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->mu, NULL);
	rc = viewer_client_connect(&f->client, address);
	if (rc) {
		connect_error(address, rc, err, errlen);
		goto fail;
	}
	rc = viewer_client_next(f->client, &line, &len, VIEWER_FIRST_MS);
	if (rc == 0 || rc == -EPROTO) {
		snprintf(
		    err, errlen, "%s: not a viewer socket (%s): give the session's viewer socket (DIR/.../viewer.sock)",
		    address, rc ? "what it sent is not a " VIEWER_PROTOCOL " snapshot" : "no snapshot came in 5 s");
		rc = -EPROTO;
		goto fail;
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s: the session closed the connection before its first snapshot (%s)", address,
			 fss_strerror(rc));
		goto fail;
	}
	rc = top_viewer_decode(line, len, &f->first, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "%s: its first snapshot does not decode: %s", address, why);
		goto fail;
	}
	f->info.mode = TOP_MODE_CONNECT;
	f->info.job_state = TOP_JOB_RUNNING;
	f->info.exit_status = -1;
	snprintf(f->info.source, sizeof(f->info.source), "%s", address);
	rc = live_board_new(&f->board);
	if (rc)
		goto fail;
	rc = top_feed_start(&f->bf, f->board, &f->info, &f->inner, &f->thread, viewer_thread, f);
	if (rc)
		goto fail;
	f->thread_started = 1;
	*out = f;
	return 0;
fail:
	if (errlen && !err[0])
		snprintf(err, errlen, "%s: %s", address, fss_strerror(rc));
	top_viewer_feed_free(f);
	return rc;
}

void top_viewer_feed_bind(top_viewer_feed_t *f, struct top_feed *feed)
{
	top_feed_forward(feed, f);
}

void top_viewer_feed_free(top_viewer_feed_t *f)
{
	if (!f)
		return;
	if (f->thread_started)
		top_feed_stop_thread(f->thread, &f->mu, NULL, &f->stopping);
	top_feed_close_board(f->bf, f->board);
	live_view_free(f->first);
	viewer_client_close(f->client);
	pthread_mutex_destroy(&f->mu);
	free(f);
}
