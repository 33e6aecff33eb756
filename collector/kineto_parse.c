/*
 * kineto_parse.c - a Kineto trace's JSON read into a kineto_file
 * (kineto_file.h), one event object at a time over the tokenizer of
 * kineto_scan.c.
 *
 * The top-level object: traceEvents, distributedInfo (rank, world_size,
 * backend, nccl_version, pg_config), baseTimeNanoseconds,
 * deviceProperties[0] (name, numSms, totalGlobalMem), schemaVersion and
 * traceName, in any order; every other key's value is skipped (checked,
 * not built).
 *
 * Each element of traceEvents is read once into a struct event_state:
 * ph, cat, name, pid, tid, ts, dur and, in args, only these keys:
 *   from Kineto's output_json.cpp (GPU activities): "stream", "correlation",
 *     "External id";
 *   from PyTorch's torch/csrc/profiler/util.h (saveNcclMeta, the
 *     record_param_comms op and, in PyTorch 2.x, the NCCL kernels):
 *     "Collective name", "In msg nelems", "Out msg nelems", "dtype",
 *     "Group size", "Process Group Name", "Process Group Description",
 *     "Process Group Ranks" (a string "[0, 1]" there; an array of integers
 *     is accepted and kept as the same text), "Seq" (kSeqNum), "Rank".
 * Other args ("grid", "Input Dims", ...) are skipped. Kineto's "device"
 * arg is not read: a GPU event's pid is its device already.
 *
 * Strictness: duplicate keys in the objects read here (the top level, an
 * event, its args, distributedInfo and its pg_config entries,
 * deviceProperties[0]) are an error at the key's offset; inside skipped
 * values only the JSON grammar is checked. A value of the wrong type in an
 * event (ts a string, stream an object) leaves that event out, counted in
 * counts.skipped with the first offset and reason in the read info. pid
 * and tid may be strings (Kineto writes "Spans"): they are then
 * KINETO_NONE.
 */
#include "collector/kineto_scan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The string fields of an event's NCCL arguments, in struct comm_text. */
enum { TEXT_COLLECTIVE, TEXT_DTYPE, TEXT_PG_NAME, TEXT_PG_DESC, TEXT_PG_RANKS, TEXT_COUNT };

/* A cat the reader tells apart (enum kineto_cat, plus these two). */
#define CAT_NONE 0
#define CAT_UNKNOWN 100

struct text_ref {
	size_t off, len;
	int have;
};

/* The keys of one object so far, copied, for duplicates: a table of
 * slots that a new object empties by moving to the next generation. */
struct keyset {
	uint32_t *slot_gen, *slot_entry; /* the slot's generation, its entry */
	size_t mask;			 /* slots - 1 */
	uint32_t gen;
	uint64_t *hash;			 /* per entry */
	size_t *off;			 /* per entry, and one past the last */
	size_t n, cap;
	char *text;
	size_t tlen, tcap;
};

struct event_state {
	int ph;			/* the ph character, '?' for a longer ph, 0 none */
	int cat;		/* enum kineto_cat, CAT_NONE, CAT_UNKNOWN */
	int have_ts, have_dur, fractional;
	int64_t ts, dur;
	int32_t pid, tid;
	int64_t stream, correlation, external_id;
	int have_stream, have_correlation, have_external_id;
	struct text_ref name;
	struct text_ref text[TEXT_COUNT];
	struct kineto_comm_args comm; /* numbers only; the strings in text[] */
	int have_comm;
	const char *bad;	/* the first value of the wrong type */
	uint64_t bad_at;
};

struct kparse {
	struct kscan s;
	kineto_file_t *f;
	struct kineto_read_info *info;
	int nomem;
	int saw_events;
	int not_trace;
	char not_trace_why[96];
	char *scratch;		/* the current event's strings */
	size_t slen, scap;
	struct keyset keys[5];	/* one per level of objects read: top, event or info, args or entry */
};

#define KEY_IS(k, lit) ((k).len == sizeof(lit) - 1 && memcmp((k).text, lit, sizeof(lit) - 1) == 0)

static int nomem(struct kparse *p)
{
	p->nomem = 1;
	return kscan_fail(&p->s, KINETO_READ_IO, kscan_offset(&p->s), "out of memory");
}

static int scratch_add(struct kparse *p, const char *text, size_t len, struct text_ref *ref)
{
	if (p->slen + len > p->scap) {
		size_t cap = p->scap ? p->scap : 1024;
		while (cap < p->slen + len)
			cap *= 2;
		char *q = realloc(p->scratch, cap);
		if (!q)
			return nomem(p);
		p->scratch = q;
		p->scap = cap;
	}
	memcpy(p->scratch + p->slen, text, len);
	ref->off = p->slen;
	ref->len = len;
	ref->have = 1;
	p->slen += len;
	return 0;
}

static void keyset_free(struct keyset *k)
{
	free(k->slot_gen);
	free(k->slot_entry);
	free(k->hash);
	free(k->off);
	free(k->text);
}

static int keyset_slots(struct keyset *k, size_t slots)
{
	uint32_t *gen = calloc(slots, sizeof(*gen)), *entry = malloc(slots * sizeof(*entry));
	if (!gen || !entry) {
		free(gen);
		free(entry);
		return -1;
	}
	free(k->slot_gen);
	free(k->slot_entry);
	k->slot_gen = gen;
	k->slot_entry = entry;
	k->mask = slots - 1;
	k->gen = 1;
	for (size_t e = 0; e < k->n; e++) {
		size_t i = k->hash[e] & k->mask;
		while (gen[i] == k->gen)
			i = (i + 1) & k->mask;
		gen[i] = k->gen;
		entry[i] = (uint32_t)e;
	}
	return 0;
}

static void keyset_reset(struct keyset *k)
{
	k->n = 0;
	k->tlen = 0;
	if (++k->gen == 0) { /* the generations wrapped: empty every slot */
		if (k->slot_gen)
			memset(k->slot_gen, 0, (k->mask + 1) * sizeof(*k->slot_gen));
		k->gen = 1;
	}
}

/* Add a key; 1 when the object had it already, 0, -1 out of memory. *copy: the kept text. */
static int keyset_add(struct keyset *k, const struct kscan_slice *key, struct kscan_slice *copy)
{
	if (!k->slot_gen || (k->n + 1) * 2 > k->mask + 1) {
		if (keyset_slots(k, k->slot_gen ? (k->mask + 1) * 2 : 64) < 0)
			return -1;
	}
	uint64_t h = kscan_hash(key->text, key->len);
	size_t i = h & k->mask;
	while (k->slot_gen[i] == k->gen) {
		size_t e = k->slot_entry[i];
		size_t len = k->off[e + 1] - k->off[e];
		if (k->hash[e] == h && len == key->len && memcmp(k->text + k->off[e], key->text, len) == 0)
			return 1;
		i = (i + 1) & k->mask;
	}
	if (k->n + 2 > k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 32;
		uint64_t *hash = realloc(k->hash, cap * sizeof(*hash));
		if (!hash)
			return -1;
		k->hash = hash;
		size_t *off = realloc(k->off, cap * sizeof(*off));
		if (!off)
			return -1;
		k->off = off;
		k->cap = cap;
	}
	if (k->tlen + key->len > k->tcap) {
		size_t cap = k->tcap ? k->tcap : 512;
		while (cap < k->tlen + key->len)
			cap *= 2;
		char *t = realloc(k->text, cap);
		if (!t)
			return -1;
		k->text = t;
		k->tcap = cap;
	}
	if (k->n == 0)
		k->off[0] = 0;
	memcpy(k->text + k->tlen, key->text, key->len);
	k->slot_gen[i] = k->gen;
	k->slot_entry[i] = (uint32_t)k->n;
	k->hash[k->n] = h;
	k->tlen += key->len;
	k->off[++k->n] = k->tlen;
	copy->text = k->text + k->off[k->n - 1];
	copy->len = key->len;
	return 0;
}

/* Enter an object or array at its opening byte (peeked). 0 or -1. */
static int enter(struct kparse *p)
{
	if (p->s.depth >= KSCAN_MAX_DEPTH)
		return kscan_fail(&p->s, KINETO_READ_BAD_JSON, kscan_offset(&p->s), "nested deeper than %d", KSCAN_MAX_DEPTH);
	p->s.depth++;
	p->s.pos++;
	return 0;
}

/*
 * The next key of an object entered with enter(): 1 with the key in *key
 * (valid until the next key of the same keyset) and the value's first byte
 * peeked; 0 at its end ('}' taken); -1.
 */
static int object_next(struct kparse *p, struct keyset *ks, struct kscan_slice *key)
{
	struct kscan *s = &p->s;
	int c = kscan_ws(s);
	if (c == '}') {
		s->pos++;
		s->depth--;
		return 0;
	}
	if (ks->n > 0) {
		if (c != ',')
			return c < 0 ? kscan_expect_end(s, "an object")
				     : kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected ',' or '}' in an object");
		s->pos++;
		c = kscan_ws(s);
	}
	if (c != '"')
		return c < 0 ? kscan_expect_end(s, "an object")
			     : kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected a key (a string) in an object");
	uint64_t at = kscan_offset(s);
	struct kscan_slice raw;
	if (kscan_string(s, &raw, 1) < 0)
		return -1;
	int dup = keyset_add(ks, &raw, key);
	if (dup < 0)
		return nomem(p);
	if (dup)
		return kscan_fail(s, KINETO_READ_BAD_JSON, at, "a duplicate key \"%.*s\" in an object",
				  (int)(raw.len > 48 ? 48 : raw.len), raw.text);
	c = kscan_ws(s);
	if (c != ':')
		return c < 0 ? kscan_expect_end(s, "an object")
			     : kscan_fail(s, KINETO_READ_BAD_JSON, at, "expected ':' after an object key");
	s->pos++;
	if (kscan_ws(s) < 0)
		return kscan_expect_end(s, "an object");
	return 1;
}

static int object_begin(struct kparse *p, struct keyset *ks)
{
	keyset_reset(ks);
	return enter(p);
}

/* The next element of an array entered with enter(): 1 (its first byte peeked), 0 at ']', -1. */
static int array_next(struct kparse *p, int *count)
{
	struct kscan *s = &p->s;
	int c = kscan_ws(s);
	if (c == ']') {
		s->pos++;
		s->depth--;
		return 0;
	}
	if (*count > 0) {
		if (c != ',')
			return c < 0 ? kscan_expect_end(s, "an array")
				     : kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "expected ',' or ']' in an array");
		s->pos++;
		c = kscan_ws(s);
	}
	if (c < 0)
		return kscan_expect_end(s, "an array");
	(*count)++;
	return 1;
}

/* ---- values of the fields read ---- */

static int peek(struct kparse *p) { return kscan_peek(&p->s); }

static int is_number_start(int c) { return c == '-' || (c >= '0' && c <= '9'); }

static int mark_bad(struct kparse *p, struct event_state *ev, uint64_t at, const char *why)
{
	if (!ev->bad) {
		ev->bad = why;
		ev->bad_at = at;
	}
	return 0;
}

/* An integer field of an event: the value, or the event marked bad. */
static int event_int(struct kparse *p, struct event_state *ev, const char *field, int64_t *out, int *have)
{
	uint64_t at = kscan_offset(&p->s);
	if (!is_number_start(peek(p))) {
		mark_bad(p, ev, at, field);
		return kscan_skip(&p->s);
	}
	struct kscan_number n;
	if (kscan_number(&p->s, &n) < 0)
		return -1;
	const char *why;
	if (kscan_number_int(&n, out, &why) < 0)
		return mark_bad(p, ev, at, why);
	*have = 1;
	return 0;
}

static int event_time(struct kparse *p, struct event_state *ev, const char *field, int64_t *out, int *have)
{
	uint64_t at = kscan_offset(&p->s);
	if (!is_number_start(peek(p))) {
		mark_bad(p, ev, at, field);
		return kscan_skip(&p->s);
	}
	struct kscan_number n;
	if (kscan_number(&p->s, &n) < 0)
		return -1;
	const char *why;
	if (kscan_number_us_to_ns(&n, out, &why) < 0)
		return mark_bad(p, ev, at, why);
	if (n.fraction)
		ev->fractional = 1;
	*have = 1;
	return 0;
}

/* pid or tid: an int32, or a string (KINETO_NONE). */
static int event_id32(struct kparse *p, struct event_state *ev, const char *field, int32_t *out)
{
	if (peek(p) == '"')
		return kscan_string(&p->s, NULL, 0);
	int64_t v;
	int have = 0;
	uint64_t at = kscan_offset(&p->s);
	if (event_int(p, ev, field, &v, &have) < 0)
		return -1;
	if (have && (v < INT32_MIN || v > INT32_MAX))
		return mark_bad(p, ev, at, "a pid or tid out of 32-bit range");
	if (have)
		*out = (int32_t)v;
	return 0;
}

static int event_text(struct kparse *p, struct event_state *ev, const char *field, struct text_ref *ref)
{
	uint64_t at = kscan_offset(&p->s);
	if (peek(p) != '"') {
		mark_bad(p, ev, at, field);
		return kscan_skip(&p->s);
	}
	struct kscan_slice v;
	if (kscan_string(&p->s, &v, 1) < 0)
		return -1;
	return scratch_add(p, v.text, v.len, ref);
}

/* Ranks as an array of integers, written into the scratch as "[0, 1]": 0, 1 not all integers, -1. */
static int ranks_array(struct kparse *p, struct text_ref *ref)
{
	int count = 0, r, bad = 0;
	size_t start = p->slen;
	struct text_ref piece;
	if (enter(p) < 0 || scratch_add(p, "[", 1, &piece) < 0)
		return -1;
	while ((r = array_next(p, &count)) > 0) {
		struct kscan_number n;
		int64_t v;
		const char *why;
		if (!is_number_start(peek(p))) {
			bad = 1;
			if (kscan_skip(&p->s) < 0)
				return -1;
			continue;
		}
		if (kscan_number(&p->s, &n) < 0)
			return -1;
		if (kscan_number_int(&n, &v, &why) < 0) {
			bad = 1;
			continue;
		}
		char digits[32];
		int len = snprintf(digits, sizeof(digits), "%s%lld", count > 1 ? ", " : "", (long long)v);
		if (scratch_add(p, digits, (size_t)len, &piece) < 0)
			return -1;
	}
	if (r < 0 || scratch_add(p, "]", 1, &piece) < 0)
		return -1;
	ref->off = start;
	ref->len = p->slen - start;
	ref->have = !bad;
	return bad;
}

/* "Process Group Ranks" or pg_config's ranks: a string, or an array of integers. */
static int ranks_value(struct kparse *p, struct event_state *ev, struct text_ref *ref)
{
	uint64_t at = kscan_offset(&p->s);
	if (peek(p) == '[') {
		int r = ranks_array(p, ref);
		if (r > 0 && ev)
			mark_bad(p, ev, at, "Process Group Ranks holds a value that is not an integer");
		return r < 0 ? -1 : 0;
	}
	if (peek(p) != '"') {
		if (ev)
			mark_bad(p, ev, at, "Process Group Ranks is neither a string nor an array");
		return kscan_skip(&p->s);
	}
	struct kscan_slice v;
	if (kscan_string(&p->s, &v, 1) < 0)
		return -1;
	return scratch_add(p, v.text, v.len, ref);
}

static int args_value(struct kparse *p, struct event_state *ev, struct kscan_slice key)
{
	int have = 0;
	int64_t v;
	if (KEY_IS(key, "stream"))
		return event_int(p, ev, "stream is not an integer", &ev->stream, &ev->have_stream);
	if (KEY_IS(key, "correlation"))
		return event_int(p, ev, "correlation is not an integer", &ev->correlation, &ev->have_correlation);
	if (KEY_IS(key, "External id"))
		return event_int(p, ev, "External id is not an integer", &ev->external_id, &ev->have_external_id);
	if (KEY_IS(key, "Collective name"))
		return ev->have_comm = 1, event_text(p, ev, "Collective name is not a string", &ev->text[TEXT_COLLECTIVE]);
	if (KEY_IS(key, "dtype"))
		return ev->have_comm = 1, event_text(p, ev, "dtype is not a string", &ev->text[TEXT_DTYPE]);
	if (KEY_IS(key, "Process Group Name"))
		return ev->have_comm = 1, event_text(p, ev, "Process Group Name is not a string", &ev->text[TEXT_PG_NAME]);
	if (KEY_IS(key, "Process Group Description"))
		return ev->have_comm = 1,
		       event_text(p, ev, "Process Group Description is not a string", &ev->text[TEXT_PG_DESC]);
	if (KEY_IS(key, "Process Group Ranks"))
		return ev->have_comm = 1, ranks_value(p, ev, &ev->text[TEXT_PG_RANKS]);
	int64_t *field = NULL;
	const char *why = NULL;
	if (KEY_IS(key, "In msg nelems"))
		field = &ev->comm.in_nelems, why = "In msg nelems is not an integer";
	else if (KEY_IS(key, "Out msg nelems"))
		field = &ev->comm.out_nelems, why = "Out msg nelems is not an integer";
	else if (KEY_IS(key, "Seq"))
		field = &ev->comm.seq, why = "Seq is not an integer";
	else if (KEY_IS(key, "Rank"))
		field = &ev->comm.rank, why = "Rank is not an integer";
	if (field) {
		ev->have_comm = 1;
		return event_int(p, ev, why, field, &have);
	}
	if (KEY_IS(key, "Group size")) {
		uint64_t at = kscan_offset(&p->s);
		ev->have_comm = 1;
		if (event_int(p, ev, "Group size is not an integer", &v, &have) < 0)
			return -1;
		if (have && (v < 0 || v > INT32_MAX))
			return mark_bad(p, ev, at, "Group size out of range");
		if (have)
			ev->comm.group_size = (int32_t)v;
		return 0;
	}
	return kscan_skip(&p->s);
}

static int event_args(struct kparse *p, struct event_state *ev)
{
	if (peek(p) != '{') {
		mark_bad(p, ev, kscan_offset(&p->s), "args is not an object");
		return kscan_skip(&p->s);
	}
	struct keyset *ks = &p->keys[2];
	struct kscan_slice key;
	int r;
	if (object_begin(p, ks) < 0)
		return -1;
	while ((r = object_next(p, ks, &key)) > 0)
		if (args_value(p, ev, key) < 0)
			return -1;
	return r;
}

static int cat_of(const struct kscan_slice *v)
{
	switch (v->len) {
	case 6:
		return KEY_IS(*v, "kernel") ? KINETO_CAT_KERNEL : KEY_IS(*v, "cpu_op") ? KINETO_CAT_CPU_OP : CAT_UNKNOWN;
	case 10:
		return KEY_IS(*v, "gpu_memcpy") ? KINETO_CAT_GPU_MEMCPY : KEY_IS(*v, "gpu_memset") ? KINETO_CAT_GPU_MEMSET : CAT_UNKNOWN;
	case 11:
		return KEY_IS(*v, "cuda_driver") ? KINETO_CAT_CUDA_DRIVER : CAT_UNKNOWN;
	case 12:
		return KEY_IS(*v, "cuda_runtime") ? KINETO_CAT_CUDA_RUNTIME : CAT_UNKNOWN;
	case 15:
		return KEY_IS(*v, "user_annotation") ? KINETO_CAT_USER_ANNOTATION : CAT_UNKNOWN;
	case 19:
		return KEY_IS(*v, "gpu_user_annotation") ? KINETO_CAT_GPU_USER_ANNOTATION : CAT_UNKNOWN;
	default:
		return CAT_UNKNOWN;
	}
}

static int event_value(struct kparse *p, struct event_state *ev, struct kscan_slice key)
{
	struct kscan_slice v;
	uint64_t at = kscan_offset(&p->s);
	switch (key.len) {
	case 2:
		if (KEY_IS(key, "ph")) {
			if (peek(p) != '"') {
				mark_bad(p, ev, at, "ph is not a string");
				return kscan_skip(&p->s);
			}
			if (kscan_string(&p->s, &v, 1) < 0)
				return -1;
			ev->ph = v.len == 1 ? (unsigned char)v.text[0] : '?';
			return 0;
		}
		if (KEY_IS(key, "ts"))
			return event_time(p, ev, "ts is not a number", &ev->ts, &ev->have_ts);
		break;
	case 3:
		if (KEY_IS(key, "cat")) {
			if (peek(p) != '"') {
				mark_bad(p, ev, at, "cat is not a string");
				return kscan_skip(&p->s);
			}
			if (kscan_string(&p->s, &v, 1) < 0)
				return -1;
			ev->cat = cat_of(&v);
			return 0;
		}
		if (KEY_IS(key, "pid"))
			return event_id32(p, ev, "pid is neither a number nor a string", &ev->pid);
		if (KEY_IS(key, "tid"))
			return event_id32(p, ev, "tid is neither a number nor a string", &ev->tid);
		if (KEY_IS(key, "dur"))
			return event_time(p, ev, "dur is not a number", &ev->dur, &ev->have_dur);
		break;
	case 4:
		if (KEY_IS(key, "name"))
			return event_text(p, ev, "name is not a string", &ev->name);
		if (KEY_IS(key, "args"))
			return event_args(p, ev);
		break;
	}
	return kscan_skip(&p->s);
}

static void event_reset(struct kparse *p, struct event_state *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->pid = ev->tid = KINETO_NONE;
	ev->stream = ev->correlation = ev->external_id = KINETO_NONE;
	ev->comm.group_size = KINETO_NONE;
	ev->comm.in_nelems = ev->comm.out_nelems = ev->comm.seq = ev->comm.rank = KINETO_NONE;
	p->slen = 0;
}

static void skip_note(struct kparse *p, uint64_t at, const char *why)
{
	struct kineto_counts *c = kineto_file_counts_mut(p->f);
	if (c->skipped++ == 0) {
		p->info->skip_offset = at;
		snprintf(p->info->skip_message, sizeof(p->info->skip_message), "%s", why);
	}
}

static int text_starts(struct kparse *p, const struct text_ref *t, const char *prefix, size_t n)
{
	return t->have && t->len >= n && memcmp(p->scratch + t->off, prefix, n) == 0;
}

/* The kept category of a complete event, 0 when it is only counted. */
static int kept_cat(struct kparse *p, const struct event_state *ev)
{
	switch (ev->cat) {
	case KINETO_CAT_KERNEL:
	case KINETO_CAT_GPU_MEMCPY:
	case KINETO_CAT_GPU_MEMSET:
	case KINETO_CAT_USER_ANNOTATION:
	case KINETO_CAT_GPU_USER_ANNOTATION:
		return ev->cat;
	case KINETO_CAT_CUDA_RUNTIME:
	case KINETO_CAT_CUDA_DRIVER:
		if (ev->have_correlation)
			return ev->cat;
		break;
	case KINETO_CAT_CPU_OP:
		if (ev->text[TEXT_COLLECTIVE].have || text_starts(p, &ev->name, "c10d::", 6) ||
		    text_starts(p, &ev->name, "nccl:", 5) ||
		    (ev->name.len == 18 && text_starts(p, &ev->name, "record_param_comms", 18)))
			return ev->cat;
		break;
	}
	if (ev->have_stream && ev->stream >= 0 && ev->have_dur)
		return KINETO_CAT_GPU_OTHER;
	return 0;
}

static int intern_ref(struct kparse *p, const struct text_ref *t, uint32_t *id)
{
	*id = 0;
	if (!t->have)
		return 0;
	if (kineto_file_intern(p->f, p->scratch + t->off, t->len, id) < 0)
		return nomem(p);
	return 0;
}

static int event_keep(struct kparse *p, struct event_state *ev, int cat)
{
	struct kineto_event out = {
		.ts_ns = ev->ts,
		.dur_ns = ev->dur,
		.correlation = ev->correlation,
		.external_id = ev->external_id,
		.tid = ev->tid,
		.stream = ev->have_stream && ev->stream >= INT32_MIN && ev->stream <= INT32_MAX ? (int32_t)ev->stream : KINETO_NONE,
		.cat = (uint16_t)cat,
		.pid = ev->pid,
	};
	out.flags = (uint16_t)((ev->fractional ? KINETO_EV_FRACTIONAL : 0) | (ev->have_stream ? KINETO_EV_HAS_STREAM : 0) |
			       (ev->have_correlation ? KINETO_EV_HAS_CORRELATION : 0) |
			       (ev->have_external_id ? KINETO_EV_HAS_EXTERNAL_ID : 0));
	if (intern_ref(p, &ev->name, &out.name) < 0)
		return -1;
	if (ev->have_comm) {
		struct kineto_comm_args a = ev->comm;
		if (intern_ref(p, &ev->text[TEXT_COLLECTIVE], &a.collective_name) < 0 ||
		    intern_ref(p, &ev->text[TEXT_DTYPE], &a.dtype) < 0 || intern_ref(p, &ev->text[TEXT_PG_NAME], &a.pg_name) < 0 ||
		    intern_ref(p, &ev->text[TEXT_PG_DESC], &a.pg_desc) < 0 ||
		    intern_ref(p, &ev->text[TEXT_PG_RANKS], &a.pg_ranks) < 0)
			return -1;
		if (kineto_file_add_comm_args(p->f, &a, &out.comm_args) < 0)
			return nomem(p);
	}
	if (kineto_file_add(p->f, &out) < 0)
		return nomem(p);
	kineto_file_counts_mut(p->f)->kept++;
	return 0;
}

/* Count an event read whole, and keep it when it is one of the kept kinds. */
static int event_finish(struct kparse *p, struct event_state *ev, uint64_t at)
{
	struct kineto_counts *c = kineto_file_counts_mut(p->f);
	if (ev->bad) {
		skip_note(p, ev->bad_at, ev->bad);
		return 0;
	}
	if (!ev->ph) {
		skip_note(p, at, "an event without ph");
		return 0;
	}
	int cat = ev->ph == 'X' ? kept_cat(p, ev) : 0;
	if (cat && (!ev->have_ts || !ev->have_dur)) {
		skip_note(p, at, ev->have_ts ? "a complete event without dur" : "a complete event without ts");
		return 0;
	}
	if (ev->have_dur && ev->dur < 0 && cat) {
		skip_note(p, at, "a complete event with a negative dur");
		return 0;
	}
	switch (ev->ph) {
	case 'X':
		c->complete++;
		if (ev->cat == KINETO_CAT_CPU_OP)
			c->cpu_ops++;
		break;
	case 's':
	case 'f':
	case 't':
		c->flows++;
		break;
	case 'i':
	case 'I':
		c->instants++;
		break;
	case 'M':
		c->metadata++;
		break;
	default:
		c->other++;
	}
	return cat ? event_keep(p, ev, cat) : 0;
}

static int trace_events(struct kparse *p)
{
	struct event_state ev;
	int count = 0, r;
	p->saw_events = 1;
	if (enter(p) < 0)
		return -1;
	while ((r = array_next(p, &count)) > 0) {
		struct kineto_counts *c = kineto_file_counts_mut(p->f);
		uint64_t at = kscan_offset(&p->s);
		c->events++;
		if (peek(p) != '{') {
			if (kscan_skip(&p->s) < 0)
				return -1;
			skip_note(p, at, "an element of traceEvents that is not an object");
			continue;
		}
		event_reset(p, &ev);
		struct keyset *ks = &p->keys[1];
		struct kscan_slice key;
		if (object_begin(p, ks) < 0)
			return -1;
		while ((r = object_next(p, ks, &key)) > 0)
			if (event_value(p, &ev, key) < 0)
				return -1;
		if (r < 0)
			return -1;
		if (event_finish(p, &ev, at) < 0)
			return -1;
	}
	return r;
}

/* ---- the job's metadata ---- */

/* An integer where one is expected, else the value skipped: 1 read, 0 not, -1. */
static int meta_int(struct kparse *p, int64_t *out)
{
	if (!is_number_start(peek(p)))
		return kscan_skip(&p->s);
	struct kscan_number n;
	const char *why;
	if (kscan_number(&p->s, &n) < 0)
		return -1;
	return kscan_number_int(&n, out, &why) == 0;
}

static int meta_string(struct kparse *p, uint32_t *id)
{
	if (peek(p) != '"')
		return kscan_skip(&p->s);
	struct kscan_slice v;
	if (kscan_string(&p->s, &v, 1) < 0)
		return -1;
	if (kineto_file_intern(p->f, v.text, v.len, id) < 0)
		return nomem(p);
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
	if (peek(p) != '{')
		return kscan_skip(&p->s);
	if (object_begin(p, ks) < 0)
		return -1;
	while ((r = object_next(p, ks, &key)) > 0) {
		if (KEY_IS(key, "pg_name"))
			r = meta_string(p, &pg.name);
		else if (KEY_IS(key, "pg_desc"))
			r = meta_string(p, &pg.desc);
		else if (KEY_IS(key, "pg_size"))
			r = meta_int32(p, &pg.size);
		else if (KEY_IS(key, "ranks")) {
			struct text_ref t = {0};
			p->slen = 0;
			r = ranks_value(p, NULL, &t);
			if (r == 0 && intern_ref(p, &t, &pg.ranks) < 0)
				return -1;
		} else
			r = kscan_skip(&p->s);
		if (r < 0)
			return -1;
	}
	if (r < 0)
		return -1;
	if (kineto_file_add_pg(p->f, &pg) < 0)
		return nomem(p);
	return 0;
}

static int distributed_info(struct kparse *p)
{
	struct kineto_meta *m = kineto_file_meta_mut(p->f);
	struct keyset *ks = &p->keys[1];
	struct kscan_slice key;
	int r, count = 0;
	if (peek(p) != '{')
		return kscan_skip(&p->s);
	m->have_distributed = 1;
	if (object_begin(p, ks) < 0)
		return -1;
	while ((r = object_next(p, ks, &key)) > 0) {
		if (KEY_IS(key, "rank"))
			r = meta_int32(p, &m->rank);
		else if (KEY_IS(key, "world_size"))
			r = meta_int32(p, &m->world_size);
		else if (KEY_IS(key, "backend"))
			r = meta_string(p, &m->backend);
		else if (KEY_IS(key, "nccl_version"))
			r = meta_string(p, &m->nccl_version);
		else if (KEY_IS(key, "pg_config") && peek(p) == '[') {
			if (enter(p) < 0)
				return -1;
			count = 0;
			while ((r = array_next(p, &count)) > 0)
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
	if (peek(p) != '[')
		return kscan_skip(&p->s);
	if (enter(p) < 0)
		return -1;
	while ((r = array_next(p, &count)) > 0) {
		if (count > 1 || peek(p) != '{') {
			if (kscan_skip(&p->s) < 0)
				return -1;
			continue;
		}
		struct keyset *ks = &p->keys[1];
		struct kscan_slice key;
		if (object_begin(p, ks) < 0)
			return -1;
		while ((r = object_next(p, ks, &key)) > 0) {
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
		if (peek(p) == '[')
			return trace_events(p);
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
		if (c == '[' || c == '"' || is_number_start(c)) {
			p->not_trace = 1;
			snprintf(p->not_trace_why, sizeof(p->not_trace_why), "JSON, but not an object with traceEvents");
			return 0;
		}
		return kscan_fail(s, KINETO_READ_BAD_JSON, kscan_offset(s), "not JSON: expected '{', found byte 0x%02x", c);
	}
	struct keyset *ks = &p->keys[0];
	struct kscan_slice key;
	int r;
	if (object_begin(p, ks) < 0)
		return -1;
	while ((r = object_next(p, ks, &key)) > 0)
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
		keyset_free(&p.keys[i]);
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
		for (const char *bom = "\xef\xbb\xbf"; *bom && c >= 0; bom++) {
			c = kscan_peek(&s) == (unsigned char)*bom ? *bom : -1;
			s.pos++;
		}
		c = c < 0 ? -1 : kscan_ws(&s);
	}
	int rc = s.failed && s.status == KINETO_READ_IO ? -s.error : c == '{';
	kscan_close(&s);
	close(fd);
	return rc;
}
